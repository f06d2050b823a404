/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Media types by extension: the module's `types:` mapping first, then a
 * built-in table (what nginx's mime.types holds for the web's common
 * files, with their charsets), then the system's /etc/mime.types (Debian's
 * media-types: a thousand more) where it exists. Looked up once per file
 * opened (the cache keeps the answer): the two short tables are walked,
 * the system's is sorted once and searched.
 */
#include "corStaticInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char* ext; /* with its dot */
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

/* /etc/mime.types, sorted by extension (no case, without its dot); the
 * file's text, which they point into, in one block. */
static MimeEntry* systemTypes;
static unsigned systemCount;
static char* systemText;

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

static int
entryCompare(const void* a, const void* b)
{
    return strcasecmp(((const MimeEntry*)a)->ext, ((const MimeEntry*)b)->ext);
}

/* The entries of one line, "type ext ext...", into the table. */
static int
lineAdd(char* line, unsigned* cap)
{
    char* save = NULL;
    char* type = strtok_r(line, " \t", &save);

    for (char* ext = strtok_r(NULL, " \t", &save); type != NULL && ext != NULL;
         ext = strtok_r(NULL, " \t", &save)) {
        if (systemCount == *cap) {
            MimeEntry* grown;

            *cap = *cap ? 2 * *cap : 1024;
            grown = realloc(systemTypes, *cap * sizeof(*grown));
            if (grown == NULL) {
                return -ENOMEM;
            }
            systemTypes = grown;
        }
        systemTypes[systemCount++] = (MimeEntry){ ext, type };
    }
    return 0;
}

int
corStaticMimeSystemLoad(const char* path)
{
    FILE* f = fopen(path, "r");
    long len;
    unsigned cap = 0;
    char* line;
    char* save = NULL;

    if (f == NULL) {
        return 0; /* none there: the built-in table */
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0
        || fseek(f, 0, SEEK_SET) != 0
        || (systemText = malloc((size_t)len + 1)) == NULL
        || fread(systemText, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        return -EIO;
    }
    fclose(f);
    systemText[len] = '\0';
    for (line = strtok_r(systemText, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] != '#' && lineAdd(line, &cap) != 0) {
            return -ENOMEM;
        }
    }
    qsort(systemTypes, systemCount, sizeof(*systemTypes), entryCompare);
    return 0;
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
    if (type == NULL && systemCount > 0) {
        MimeEntry key = { ext + 1, NULL };
        const MimeEntry* found = bsearch(&key, systemTypes, systemCount,
                                         sizeof(*systemTypes), entryCompare);

        type = found != NULL ? found->type : NULL;
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
    free(systemTypes);
    free(systemText);
    systemTypes = NULL;
    systemText = NULL;
    systemCount = 0;
}
