/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk index's least recently used order across a restart. A
 * reload keeps the whole index (corCacheIndex.c, in a zone); a restart
 * starts a fresh one, which the scan of the folder fills in the order
 * readdir gives, not the order of use, so the first evictions after it
 * would take files at random. At the stop the serving generation writes
 * the order to a sidecar in the folder (PATH/.lru: a header, then each
 * file's hash and id, oldest first); after the next start's scan (which
 * still checks every file) the order is laid over the scan's and the
 * sidecar removed. A file's mtime would not do: it is its write, not
 * its last use. A stop that does not come (a crash, SIGKILL) leaves no
 * sidecar: the folder's order, as before.
 */
#include "corCacheInt.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ORDER_MAGIC "CORLRU1\n"

typedef struct {
    char magic[8];
    uint64_t count;
} OrderHeader;

/* The sidecar's name, or the one it is written under first (tmp). */
static void
orderPath(const CacheStore* s, bool tmp, char* out, size_t cap)
{
    snprintf(out, cap, "%s/.lru%s", s->path, tmp ? ".tmp" : "");
}

void
cacheOrderSave(CacheStore* s)
{
    char path[PATH_MAX];
    char tmp[PATH_MAX];
    OrderHeader h = { .magic = ORDER_MAGIC };
    bool ok = true;
    FILE* f;

    orderPath(s, false, path, sizeof(path));
    if (access(path, F_OK) == 0) {
        return; /* the last stop's, which no scan took up yet */
    }
    orderPath(s, true, tmp, sizeof(tmp));
    f = fopen(tmp, "we");
    if (f == NULL) {
        return;
    }
    ok = fwrite(&h, sizeof(h), 1, f) == 1;
    for (unsigned i = 0; ok && i < CACHE_SHARDS; i++) {
        CacheFileId* files;
        size_t n = cacheIndexFiles(s, i, &files);

        /* Newest first in the index, oldest first in the file. */
        for (size_t k = n; ok && k > 0; k--) {
            ok = fwrite(&files[k - 1], sizeof(files[k - 1]), 1, f) == 1;
        }
        h.count += n;
        free(files);
    }
    ok = ok && fseek(f, 0, SEEK_SET) == 0 && fwrite(&h, sizeof(h), 1, f) == 1;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
    }
}

size_t
cacheOrderLoad(CacheStore* s)
{
    char path[PATH_MAX];
    OrderHeader h;
    CacheFileId file;
    size_t n = 0;
    FILE* f;

    orderPath(s, false, path, sizeof(path));
    f = fopen(path, "re");
    if (f == NULL) {
        return 0;
    }
    if (fread(&h, sizeof(h), 1, f) == 1
        && memcmp(h.magic, ORDER_MAGIC, sizeof(h.magic)) == 0) {
        for (uint64_t i = 0;
             i < h.count && fread(&file, sizeof(file), 1, f) == 1; i++) {
            n += cacheIndexUse(s, &file);
        }
    }
    fclose(f);
    unlink(path);
    return n;
}
