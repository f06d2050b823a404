/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk half of a store (`path:`, `size:`): every stored answer is
 * also written to a file of its own under path (corCacheDiskFile.h), off
 * the loops by the store's writer threads, and the index
 * (corCacheIndex.c, in a zone that outlives a generation) keeps, per
 * shard, which file holds which key's variant, how big, in least
 * recently used order: within `size`, the oldest files unlinked. A lookup that
 * misses the memory store opens the key's files on the loop (static's open of a
 * file, from the page cache as a rule), checks each one's header and head, and
 * answers from the one its Vary values select: a small body read and kept in
 * memory again (its CRC checked), a large one sent with sendfile. At start a
 * writer scans the folder (every file read and checked whole) and
 * builds the index while the loops already serve: what it has not
 * reached yet is a miss; after a reload the index is the last
 * generation's, and there is no scan. docs/cache.md says why each is
 * so.
 */
#include "corCacheInt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WRITERS 2
#define HEAD_READ_FIRST 4096
#define SCAN_CHUNK (64 * 1024)
/* The files of one key's hash a lookup looks at (its variants). */
#define CANDIDATES_MOST 8

void
cacheDiskFileName(const CacheStore* s, uint64_t hash, uint64_t id, char* out,
                  size_t cap)
{
    snprintf(out, cap, "%s/%016llx-%016llx", s->path, (unsigned long long)hash,
             (unsigned long long)id);
}

/* ---- The index (corCacheIndex.c, in a zone) ------------------------------ */

/* Unlink the files the index let go: outside its lock. */
static void
goneUnlink(CacheStore* s, CacheGone* gone)
{
    char name[PATH_MAX];

    for (size_t i = 0; i < gone->count; i++) {
        cacheDiskFileName(s, gone->files[i].hash, gone->files[i].id, name,
                          sizeof(name));
        unlink(name);
    }
    free(gone->files);
    *gone = (CacheGone){ 0 };
}

void
cacheDiskTouchLocked(CacheShard* shard, const CacheEntry* e)
{
    if (shard->disk.zone != NULL) {
        cacheIndexTouch(shard, e->hash,
                        cacheHash(cacheEntryVary(e), e->varyLen));
    }
}

void
cacheDiskIndexPut(CacheStore* s, uint64_t hash, uint64_t variant, uint64_t id,
                  uint64_t size, bool replace, uint64_t removals)
{
    CacheFileId f = { .hash = hash, .id = id };
    CacheGone gone = { 0 };

    if (cacheIndexPut(s, &f, variant, size, replace, removals, &gone)
        == INDEX_OLDER) {
        cacheGoneAdd(&gone, hash, id);
    }
    goneUnlink(s, &gone);
}

/* Take the file (hash, id) out of the index and unlink it: it is gone,
 * cut or corrupt (counted an error), or purged. */
static void
forget(CacheStore* s, uint64_t hash, uint64_t id, bool error)
{
    char name[PATH_MAX];

    cacheIndexForget(s, &(CacheFileId){ .hash = hash, .id = id }, error);
    cacheDiskFileName(s, hash, id, name, sizeof(name));
    unlink(name);
    if (error) {
        atomic_fetch_add(&s->counters.diskErrors, 1);
    }
}

/* ---- Reading a file ------------------------------------------------------ */

/* The header and head of the entry file fd into *d (which points into
 * what it returns, the caller's to free), its size checked against its
 * lengths; NULL when it is no whole entry. */
static char*
headLoad(int fd, CacheDiskHead* d)
{
    size_t cap = HEAD_READ_FIRST;
    char* buf = malloc(cap);
    ssize_t got = buf != NULL ? pread(fd, buf, cap, 0) : -1;
    long need = got >= 0 ? cacheDiskHeadParse(buf, (size_t)got, d) : -1;
    struct stat st;

    if (need > 0 && (size_t)got == cap) {
        char* grown = realloc(buf, (size_t)need);

        if (grown != NULL) {
            buf = grown;
            got = pread(fd, buf, (size_t)need, 0);
            need = got == need ? cacheDiskHeadParse(buf, (size_t)got, d) : -1;
        }
    }
    if (need != 0 || fstat(fd, &st) != 0
        || (uint64_t)st.st_size != sizeof(d->h) + d->h.headLen + d->h.bodyLen) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Whether the body of fd's entry d is the bytes its CRC says. */
static bool
bodyChecks(int fd, const CacheDiskHead* d)
{
    char* chunk = malloc(SCAN_CHUNK);
    uint64_t at = sizeof(d->h) + d->h.headLen;
    uint64_t left = d->h.bodyLen;
    uint32_t crc = 0;

    while (chunk != NULL && left > 0) {
        size_t n = left < SCAN_CHUNK ? (size_t)left : SCAN_CHUNK;

        if (pread(fd, chunk, n, (off_t)at) != (ssize_t)n) {
            break;
        }
        crc = cacheCrc(crc, chunk, n);
        at += n;
        left -= n;
    }
    free(chunk);
    return left == 0 && crc == d->h.bodyCrc;
}

/* The entry of file (hash, id) when it is key's: 1 with *eP (its body
 * in the file) and *crcP; 0 when it is another key's (same hash); -1
 * when it is gone, cut or corrupt. */
static int
fileOpen(CacheStore* s, uint64_t hash, uint64_t id, const char* key,
         size_t keyLen, CacheEntry** eP, uint32_t* crcP)
{
    char name[PATH_MAX];
    CacheDiskHead d;
    char* head;
    int fd;

    cacheDiskFileName(s, hash, id, name, sizeof(name));
    fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    head = headLoad(fd, &d);
    if (head == NULL || d.h.keyHash != hash) {
        free(head);
        close(fd);
        return -1;
    }
    if (d.h.keyLen != keyLen || memcmp(d.key, key, keyLen) != 0) {
        free(head);
        close(fd);
        return 0;
    }
    *crcP = d.h.bodyCrc;
    *eP = cacheEntryFromDisk(&d, fd);
    free(head);
    return *eP != NULL ? 1 : 0;
}

/* A disk hit small enough to be kept in memory again: its body read and
 * checked; NULL when it does not check out. */
static CacheEntry*
promote(CacheStore* s, CacheEntry* e, uint32_t crc)
{
    CacheEntry* m = cacheEntryInMemory(e);

    if (m == NULL || cacheCrc(0, cacheEntryBody(m), m->bodyLen) != crc) {
        cacheEntryRelease(m);
        return NULL;
    }
    cacheEntryRef(m); /* the store's, beside the caller's */
    cacheStoreInsert(s, m);
    return m;
}

CacheEntry*
cacheDiskFind(CacheStore* s, uint64_t hash, const char* key, size_t keyLen,
              const CorRequest* r)
{
    uint64_t ids[CANDIDATES_MOST];
    unsigned n = 0;
    CacheEntry* best = NULL;
    uint64_t bestId = 0;
    uint32_t bestCrc = 0;
    CacheEntry* m;

    if (s->path == NULL) {
        return NULL;
    }
    n = cacheIndexFind(s, hash, ids, CANDIDATES_MOST);
    for (unsigned i = 0; i < n; i++) {
        CacheEntry* e = NULL;
        uint32_t crc = 0;
        int rc = fileOpen(s, hash, ids[i], key, keyLen, &e, &crc);

        if (rc < 0) {
            forget(s, hash, ids[i], true);
        } else if (rc > 0 && cacheEntryVaryMatch(e, r)
                   && (best == NULL || e->responseTime > best->responseTime)) {
            cacheEntryRelease(best);
            best = e;
            bestId = ids[i];
            bestCrc = crc;
        } else {
            cacheEntryRelease(e);
        }
    }
    if (best == NULL || best->bodyLen > CACHE_DISK_PROMOTE_MOST) {
        return best;
    }
    m = promote(s, best, bestCrc);
    cacheEntryRelease(best);
    if (m == NULL) {
        forget(s, hash, bestId, true);
    }
    return m;
}

/* ---- Removing ------------------------------------------------------------ */

unsigned
cacheDiskRemove(CacheStore* s, uint64_t hash)
{
    CacheGone gone = { 0 };
    unsigned n;

    if (s->path == NULL) {
        return 0;
    }
    n = cacheIndexRemove(s, hash, &gone);
    goneUnlink(s, &gone);
    return n;
}

/* Whether file (hash, id)'s key starts with prefix. */
static bool
keyStarts(CacheStore* s, uint64_t hash, uint64_t id, const char* prefix,
          size_t len)
{
    char name[PATH_MAX];
    CacheDiskHead d;
    char* head;
    bool starts;
    int fd;

    cacheDiskFileName(s, hash, id, name, sizeof(name));
    fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    head = headLoad(fd, &d);
    close(fd);
    starts = head != NULL && d.h.keyLen >= len
             && memcmp(d.key, prefix, len) == 0;
    free(head);
    return starts;
}

unsigned
cacheDiskRemovePrefix(CacheStore* s, const char* prefix, size_t len)
{
    unsigned n = 0;

    for (unsigned i = 0; s->path != NULL && i < CACHE_SHARDS; i++) {
        CacheFileId* files;
        size_t count = cacheIndexFiles(s, i, &files);

        /* Each file's head is read outside the index's lock. */
        for (size_t f = 0; f < count; f++) {
            if (keyStarts(s, files[f].hash, files[f].id, prefix, len)) {
                forget(s, files[f].hash, files[f].id, false);
                n++;
            }
        }
        free(files);
    }
    return n;
}

/* ---- The scan at start, and the store's life ----------------------------- */

/* One file the scan found: in the index when it is a whole entry whose
 * body checks out, else unlinked. */
static void
scanOne(CacheStore* s, const char* name, uint64_t hash, uint64_t id)
{
    char path[PATH_MAX];
    CacheDiskHead d;
    char* head;
    int fd;

    snprintf(path, sizeof(path), "%s/%s", s->path, name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    head = headLoad(fd, &d);
    if (head != NULL && d.h.keyHash == hash && bodyChecks(fd, &d)) {
        cacheDiskIndexPut(s, hash, cacheHash(d.vary, d.h.varyLen), id,
                          sizeof(d.h) + d.h.headLen + d.h.bodyLen, false,
                          CACHE_DISK_REMOVALS_ANY);
    } else {
        unlink(path);
        atomic_fetch_add(&s->counters.diskErrors, 1);
    }
    free(head);
    close(fd);
}

/* Whether the temporary file name (".tmp-PID-ID") is being written by
 * a living process: this generation's, or the one before it, which
 * serves beside it during a reload. */
static bool
tmpWriting(const char* name)
{
    int pid = 0;
    int end = 0;

    return sscanf(name, ".tmp-%d-%n", &pid, &end) == 1 && end > 0 && pid > 0
           && kill(pid, 0) == 0;
}

static void
scanRun(CorEvTask* task)
{
    CacheStore* s = corContainerOf(task, CacheStore, scan);
    DIR* dir = opendir(s->path);
    struct dirent* ent;

    while (dir != NULL && !atomic_load(&s->stopping)
           && (ent = readdir(dir)) != NULL) {
        unsigned long long hash;
        unsigned long long id;
        int end = 0;

        if (strncmp(ent->d_name, ".tmp-", 5) == 0 && !tmpWriting(ent->d_name)) {
            /* Half a write: its writer stopped before the rename. */
            char path[PATH_MAX];

            snprintf(path, sizeof(path), "%s/%s", s->path, ent->d_name);
            unlink(path);
        } else if (sscanf(ent->d_name, "%16llx-%16llx%n", &hash, &id, &end) == 2
                   && end == 33 && ent->d_name[end] == '\0') {
            scanOne(s, ent->d_name, hash, id);
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    if (dir != NULL && !atomic_load(&s->stopping)) {
        size_t ordered = cacheOrderLoad(s);

        if (ordered > 0) {
            corLog(COR_LOG_INFO,
                   "cache %s: the least recently used order of %zu files "
                   "as the last stop left it",
                   s->name, ordered);
        }
        cacheIndexWholeSet(s);
    }
    atomic_store(&s->scanned, true);
}

int
cacheDiskOpen(CacheStore* s, const char* path, uint64_t size)
{
    uint64_t seed;
    struct stat st;

    s->path = strdup(path);
    s->size = size;
    s->diskShardMost = size / CACHE_SHARDS;
    if (s->path == NULL) {
        return -1;
    }
    if (cacheIndexOpen(s, &s->indexKept) != 0) {
        return -1;
    }
    /* Ids start at random: two generations write into one folder side
     * by side during a reload. */
    if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) {
        seed = (uint64_t)time(NULL) << 32 ^ (uint64_t)getpid();
    }
    atomic_init(&s->nextId, seed);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        return -1;
    }
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int
cacheDiskStart(CacheStore* s)
{
    CorEvPool* writers;

    if (s->path == NULL || atomic_load(&s->writers) != NULL) {
        return 0;
    }
    writers = corEvPoolCreate(WRITERS);
    if (writers == NULL) {
        return -1;
    }
    atomic_store(&s->writers, writers);
    if (s->indexKept && cacheIndexWhole(s)) {
        /* A reload, or a generation that died: the index is the last
         * generation's, as it left it (a scan it cut short is done
         * again: its files go in once). */
        corLog(COR_LOG_INFO,
               "cache %s: the disk index kept from the last generation "
               "(%lld files): no scan",
               s->name, (long long)atomic_load(&s->counters.diskEntries));
        atomic_store(&s->scanned, true);
        return 0;
    }
    corLog(COR_LOG_INFO, "cache %s: %s: scanning %s", s->name,
           s->indexKept ? "the last generation's scan was cut short"
                        : "a new disk index",
           s->path);
    return corEvPoolPost(writers, &s->scan, scanRun);
}

void
cacheDiskClose(CacheStore* s)
{
    CorEvPool* writers = atomic_exchange(&s->writers, NULL);

    atomic_store(&s->stopping, true);
    if (writers != NULL) {
        corEvPoolShutdown(writers); /* the writes queued are done */
        corEvPoolDestroy(writers);
    }
    if (writers != NULL && cacheIndexWhole(s) && !corGenerationReplaced()) {
        /* The instance stops (a generation that served, not cor -t's
         * nor one a reload replaced): the order for the next start. */
        cacheOrderSave(s);
    }
    cacheIndexClose(s);
    free(s->path);
    s->path = NULL;
}
