/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Media types by extension: a built-in table (what nginx's mime.types
 * holds for the web's common files), extended or overridden by the
 * module's `types:` mapping. Looked up once per file opened (the cache
 * keeps the answer), so a walk over a few dozen entries is enough.
 */
#include "corStaticInt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char* ext;            /* with its dot */
    const char* type;
} MimeEntry;

static const MimeEntry builtin[] = {
    { ".html", "text/html; charset=utf-8" },
    { ".htm", "text/html; charset=utf-8" },
    { ".css", "text/css; charset=utf-8" },
    { ".js", "text/javascript; charset=utf-8" },
    { ".mjs", "text/javascript; charset=utf-8" },
    { ".json", "application/json" },
    { ".map", "application/json" },
    { ".txt", "text/plain; charset=utf-8" },
    { ".md", "text/markdown; charset=utf-8" },
    { ".csv", "text/csv; charset=utf-8" },
    { ".xml", "application/xml" },
    { ".svg", "image/svg+xml" },
    { ".png", "image/png" },
    { ".jpg", "image/jpeg" },
    { ".jpeg", "image/jpeg" },
    { ".gif", "image/gif" },
    { ".webp", "image/webp" },
    { ".avif", "image/avif" },
    { ".ico", "image/x-icon" },
    { ".woff", "font/woff" },
    { ".woff2", "font/woff2" },
    { ".ttf", "font/ttf" },
    { ".otf", "font/otf" },
    { ".wasm", "application/wasm" },
    { ".pdf", "application/pdf" },
    { ".zip", "application/zip" },
    { ".gz", "application/gzip" },
    { ".tar", "application/x-tar" },
    { ".mp3", "audio/mpeg" },
    { ".ogg", "audio/ogg" },
    { ".wav", "audio/wav" },
    { ".mp4", "video/mp4" },
    { ".webm", "video/webm" },
};

/* The YAML's, looked at first; the module's for the generation. */
static MimeEntry* added;
static unsigned addedCount;

int
corStaticMimeAdd(const char* ext, const char* type)
{
    MimeEntry* grown;

    for (unsigned i = 0; i < addedCount; i++) {
        if (strcasecmp(added[i].ext, ext) == 0) {
            char* copy = strdup(type);

            if (copy == NULL) {
                return -ENOMEM;
            }
            free((char*)added[i].type);
            added[i].type = copy;
            return 0;
        }
    }
    grown = realloc(added, (addedCount + 1) * sizeof(*added));
    if (grown == NULL) {
        return -ENOMEM;
    }
    added = grown;
    added[addedCount].ext = strdup(ext);
    added[addedCount].type = strdup(type);
    if (added[addedCount].ext == NULL || added[addedCount].type == NULL) {
        free((char*)added[addedCount].ext);
        free((char*)added[addedCount].type);
        return -ENOMEM;
    }
    addedCount++;
    return 0;
}

static const char*
tableFind(const MimeEntry* table, unsigned count, const char* ext)
{
    for (unsigned i = 0; i < count; i++) {
        if (strcasecmp(table[i].ext, ext) == 0) {
            return table[i].type;
        }
    }
    return NULL;
}

const char*
corStaticMimeOf(const char* name)
{
    const char* slash = strrchr(name, '/');
    const char* ext = strrchr(slash != NULL ? slash : name, '.');
    const char* type;

    if (ext == NULL) {
        return "application/octet-stream";
    }
    type = tableFind(added, addedCount, ext);
    if (type == NULL) {
        type = tableFind(builtin, sizeof(builtin) / sizeof(builtin[0]), ext);
    }
    return type != NULL ? type : "application/octet-stream";
}

void
corStaticMimeFree(void)
{
    for (unsigned i = 0; i < addedCount; i++) {
        free((char*)added[i].ext);
        free((char*)added[i].type);
    }
    free(added);
    added = NULL;
    addedCount = 0;
}
