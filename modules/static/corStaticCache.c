/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The open-file cache: the files served lately, kept open with what fstat
 * said and their validators, so that a hit costs an fstat and a dup
 * rather than a walk of the path (an open per segment, a check per
 * symlink) and the formatting of the ETag and the date. Bounded: past
 * open_file_cache entries the least recently used one is closed.
 *
 * Fresh: each hit compares fstat with what it said at the open (a file
 * written in place is seen at once), and an entry opened by its path more
 * than open_file_cache_valid ago is opened again (a file replaced by a
 * rename, or removed, is seen then). The caller gets a dup of the fd:
 * the core closes the one it is given, and an eviction closes only the
 * cache's. One table for every loop and worker, under a lock that no
 * open, and no wait, is ever made under.
 */
#include "corStaticInt.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One file (or directory) of one root; the cache's. */
typedef struct CacheEntry {
    CorList lru;             /* the most recently used first */
    struct CacheEntry* next; /* in its bucket */
    uint64_t hash;
    unsigned root;
    char* rel;
    int fd;
    struct stat st; /* at the open */
    uint64_t openedMs;
    StaticFile file; /* what a hit copies (its fd is -1) */
} CacheEntry;

StaticSettings corStaticSettings = { .cacheEntries = 1000,
                                     .cacheValidMs = 1000 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CacheEntry** buckets;
static size_t bucketMask;
static CorList lru;
static unsigned count;

/* FNV-1a over the root and the path. */
static uint64_t
keyHash(unsigned root, const char* rel)
{
    uint64_t h = 14695981039346656037ULL ^ root;

    for (const unsigned char* p = (const unsigned char*)rel; *p; p++) {
        h = (h ^ *p) * 1099511628211ULL;
    }
    return h;
}

/* The validators and the type of a file fstat described. */
static void
fileFill(StaticFile* f, const struct stat* st, const char* rel)
{
    struct tm tm;

    f->dir = S_ISDIR(st->st_mode);
    f->size = (uint64_t)st->st_size;
    f->mtime = st->st_mtim.tv_sec;
    f->type = corStaticMimeOf(rel);
    /* The nanoseconds too: two writes within a second that keep the size
     * get two tags. */
    snprintf(f->etag, sizeof(f->etag), "\"%llx-%llx\"",
             (unsigned long long)st->st_size,
             (unsigned long long)st->st_mtim.tv_sec * 1000000000ULL
                 + (unsigned long long)st->st_mtim.tv_nsec);
    gmtime_r(&f->mtime, &tm);
    strftime(f->lastModified, sizeof(f->lastModified),
             "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static bool
statSame(const struct stat* a, const struct stat* b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev
           && a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec
           && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec
           && a->st_ctim.tv_sec == b->st_ctim.tv_sec
           && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Open rel and describe it: fd (kept for a directory too, for its
 * fstat) and st. Returns 0 or -errno. */
static int
fileOpen(const StaticRoot* root, const char* rel, int* fdP, struct stat* st)
{
    int fd = corStaticOpen(root, rel);

    if (fd < 0) {
        return fd;
    }
    if (fstat(fd, st) != 0 || !(S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))) {
        close(fd);
        return -EACCES; /* a FIFO, a device, a socket */
    }
    *fdP = fd;
    return 0;
}

/* The caller's copy: its own fd, none for a directory. */
static int
fileGive(const StaticFile* cached, int fd, StaticFile* f)
{
    *f = *cached;
    f->fd = -1;
    if (!cached->dir) {
        f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (f->fd < 0) {
            return -errno;
        }
    }
    return 0;
}

/* ---- The table (under the lock) ----------------------------------------- */

static CacheEntry**
slotFind(unsigned root, const char* rel, uint64_t hash)
{
    CacheEntry** at = &buckets[hash & bucketMask];

    while (*at != NULL
           && ((*at)->hash != hash || (*at)->root != root
               || strcmp((*at)->rel, rel) != 0)) {
        at = &(*at)->next;
    }
    return at;
}

static void
entryDrop(CacheEntry** at)
{
    CacheEntry* e = *at;

    *at = e->next;
    corListRemove(&e->lru);
    close(e->fd);
    free(e->rel);
    free(e);
    count--;
}

static void
oldestDrop(void)
{
    CacheEntry* e = corContainerOf(lru.prev, CacheEntry, lru);

    entryDrop(slotFind(e->root, e->rel, e->hash));
}

/* Whether e may serve now; one that may not is dropped. */
static bool
entryFresh(CacheEntry** at, uint64_t now)
{
    CacheEntry* e = *at;
    struct stat st;

    if (now - e->openedMs < corStaticSettings.cacheValidMs
        && fstat(e->fd, &st) == 0 && statSame(&st, &e->st)) {
        return true;
    }
    entryDrop(at);
    return false;
}

/* Keep a new entry for rel (replacing one that a racing miss put in);
 * takes fd. */
static void
entryKeep(const StaticRoot* root, const char* rel, uint64_t hash, int fd,
          const struct stat* st, const StaticFile* f, uint64_t now)
{
    CacheEntry* e = calloc(1, sizeof(*e));
    CacheEntry** at;

    if (e == NULL || (e->rel = strdup(rel)) == NULL) {
        free(e);
        close(fd);
        return; /* served uncached */
    }
    e->hash = hash;
    e->root = root->id;
    e->fd = fd;
    e->st = *st;
    e->openedMs = now;
    e->file = *f;
    at = slotFind(root->id, rel, hash);
    if (*at != NULL) {
        entryDrop(at);
        at = slotFind(root->id, rel, hash);
    }
    *at = e;
    corListInsert(&lru, &e->lru);
    count++;
    if (count > corStaticSettings.cacheEntries) {
        oldestDrop();
    }
}

/* ---- Public -------------------------------------------------------------- */

int
corStaticCacheInit(void)
{
    size_t n = 16;

    corListInit(&lru);
    count = 0;
    if (corStaticSettings.cacheEntries == 0) {
        return 0;
    }
    while (n < 2 * (size_t)corStaticSettings.cacheEntries) {
        n *= 2;
    }
    buckets = calloc(n, sizeof(*buckets));
    bucketMask = n - 1;
    return buckets != NULL ? 0 : -ENOMEM;
}

void
corStaticCacheFree(void)
{
    while (buckets != NULL && !corListEmpty(&lru)) {
        oldestDrop();
    }
    free(buckets);
    buckets = NULL;
}

int
corStaticCacheOpen(const StaticRoot* root, const char* rel, StaticFile* f)
{
    uint64_t hash = keyHash(root->id, rel);
    uint64_t now = corEvClockMs();
    StaticFile opened;
    struct stat st;
    CacheEntry** at;
    int fd;
    int rc;

    if (buckets != NULL) {
        pthread_mutex_lock(&lock);
        at = slotFind(root->id, rel, hash);
        if (*at != NULL && entryFresh(at, now)) {
            corListRemove(&(*at)->lru);
            corListInsert(&lru, &(*at)->lru);
            rc = fileGive(&(*at)->file, (*at)->fd, f);
            pthread_mutex_unlock(&lock);
            return rc;
        }
        pthread_mutex_unlock(&lock);
    }
    rc = fileOpen(root, rel, &fd, &st);
    if (rc < 0) {
        return rc;
    }
    fileFill(&opened, &st, rel);
    rc = fileGive(&opened, fd, f);
    if (buckets == NULL || rc < 0) {
        close(fd);
        return rc;
    }
    pthread_mutex_lock(&lock);
    entryKeep(root, rel, hash, fd, &st, &opened, now);
    pthread_mutex_unlock(&lock);
    return 0;
}
