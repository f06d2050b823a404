/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk store's writes: a stored answer made a file of its own
 * (corCacheDiskFile.h's layout) off the loops, by the store's writer
 * threads, under a name of its own and renamed into place when whole and
 * its length and CRC are said in its header, then put in the index
 * (corCacheDisk.c, corCacheIndex.c). A fetch's answer is written as it comes (a
 * CacheDiskStream over its growing body), so that an answer of any size
 * up to the store's part for a shard is stored while memory holds what
 * the file lacks yet. Apart from the index, which is kept and searched
 * under the shards' locks, because the two change for different
 * reasons: how a file is written, and how the files are found.
 */
#include "corCacheInt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The bytes queued to a store's writers, not yet in a file (each answer's
 * own, or its growing body's): past it an answer is kept in memory only
 * (a whole one) or not stored (one being streamed). */
#define WRITES_PENDING_MOST ((uint64_t)128 << 20)
/* A streamed answer past what memory keeps whole holds at most this much
 * that its file lacks: a writer that far behind (a slow disk) drops it. */
#define STREAM_AHEAD_MOST ((size_t)32 << 20)
/* A writer writes a streamed answer this much at a time. */
#define STREAM_PIECE ((size_t)256 << 10)

typedef struct {
    CorEvTask task;
    CacheStore* s;
    CacheEntry* e;
    uint64_t removals; /* its shard's when it was asked for */
} DiskWrite;

struct CacheDiskStream {
    CorEvTask task;
    CacheStore* s;
    CacheGrowing* g; /* referenced; its lock guards posted and ended */
    CacheFlight* flight;
    uint64_t hash;
    uint64_t removals; /* its shard's when it was asked for */
    uint64_t id;
    int fd;        /* the temporary file (g's once open), or -1 */
    size_t at;     /* where the body starts in it */
    size_t queued; /* bytes appended to g for it (the loop's) */
    size_t written;
    uint32_t crc;
    bool failed;   /* the disk full, the folder gone: nothing stored */
    bool posted;   /* its task is queued or running */
    bool ended;    /* g ended, and the fill let go of it */
    bool onlyCopy; /* memory keeps none of it */
    char* piece;
    char tmp[PATH_MAX];
};

/* The header and head of the file of e's answer, whose body is bodyLen
 * bytes of CRC bodyCrc, in one allocation; NULL when out of memory or its
 * head is past what a reader takes. */
static char*
headMake(const CacheEntry* e, uint64_t bodyLen, uint32_t bodyCrc, size_t* lenP)
{
    size_t typeLen = e->type != NULL ? strlen(e->type) : 0;
    size_t headLen = e->keyLen + 1 + e->varyLen
                     + (e->type != NULL ? typeLen + 1 : 0);
    CacheDiskHeader h;
    char* buf;
    char* at;

    for (unsigned i = 0; i < e->headerCount; i++) {
        headLen += e->headers[i].nameLen + e->headers[i].valueLen + 2;
    }
    if (headLen > CACHE_DISK_HEAD_MOST
        || e->headerCount > CACHE_DISK_FIELDS_MOST
        || (buf = malloc(sizeof(h) + headLen)) == NULL) {
        return NULL;
    }
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, CACHE_DISK_MAGIC, sizeof(h.magic));
    h.version = CACHE_DISK_VERSION;
    h.headLen = (uint32_t)headLen;
    h.keyHash = e->hash;
    h.bodyLen = bodyLen;
    h.bodyCrc = bodyCrc;
    h.responseTime = e->responseTime;
    h.initialAge = e->initialAge;
    h.lifetime = e->lifetime;
    h.staleWhileRevalidate = e->staleWhileRevalidate;
    h.staleIfError = e->staleIfError;
    h.status = e->status;
    h.flags = e->flags;
    h.varyCount = e->varyCount;
    h.keyLen = e->keyLen;
    h.varyLen = e->varyLen;
    h.fieldCount = e->headerCount;
    h.typeLen = e->type != NULL ? (uint32_t)typeLen : CACHE_DISK_NO_TYPE;
    /* The key and the Vary block are one run in the entry, as in the
     * file. */
    at = buf + sizeof(h);
    memcpy(at, cacheEntryKey(e), e->keyLen + 1 + e->varyLen);
    at += e->keyLen + 1 + e->varyLen;
    for (unsigned i = 0; i < e->headerCount; i++) {
        memcpy(at, e->headers[i].name, e->headers[i].nameLen + 1);
        at += e->headers[i].nameLen + 1;
        memcpy(at, e->headers[i].value, e->headers[i].valueLen + 1);
        at += e->headers[i].valueLen + 1;
    }
    if (e->type != NULL) {
        memcpy(at, e->type, typeLen + 1);
    }
    h.headCrc = cacheCrc(cacheCrc(0, &h, sizeof(h)), buf + sizeof(h), headLen);
    memcpy(buf, &h, sizeof(h));
    *lenP = sizeof(h) + headLen;
    return buf;
}

static bool
pwriteAll(int fd, const char* data, size_t len, off_t at)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, data, len, at);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        data += n;
        len -= (size_t)n;
        at += n;
    }
    return true;
}

/* A file of its own to write id's answer in, named into tmp (its
 * process's id in the name: the scan of another generation leaves a
 * living writer's files be); -1 when the disk or the folder takes none.
 * The folder removed under the server is said once, and not made again:
 * it may be a mount taken away on purpose, with the disk under it not
 * the store's; its files are written again once it is back. */
static int
tmpOpen(CacheStore* s, uint64_t id, char* tmp, size_t cap)
{
    int fd;

    snprintf(tmp, cap, "%s/.tmp-%d-%016llx", s->path, (int)getpid(),
             (unsigned long long)id);
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && !atomic_exchange(&s->folderGone, true)) {
        corLog(COR_LOG_WARN,
               "cache %s: its folder %s is gone: answers are served, not "
               "stored, until it comes back",
               s->name, s->path);
    } else if (fd >= 0 && atomic_exchange(&s->folderGone, false)) {
        corLog(COR_LOG_INFO, "cache %s: its folder %s is back", s->name,
               s->path);
    }
    return fd;
}

/* The file tmp, written whole, in its place as (hash, id): a reader
 * never sees half of one. */
static bool
place(CacheStore* s, const char* tmp, uint64_t hash, uint64_t id)
{
    char name[PATH_MAX];

    cacheDiskFileName(s, hash, id, name, sizeof(name));
    return rename(tmp, name) == 0;
}

/* ---- A whole answer ------------------------------------------------------ */

/* e's file: 0 with its size, or -1 (the disk full, the folder gone). */
static int
fileWrite(CacheStore* s, const CacheEntry* e, uint64_t id, uint64_t* sizeP)
{
    char tmp[PATH_MAX];
    size_t headLen = 0;
    char* head = headMake(e, e->bodyLen, cacheCrc(0, e->body, e->bodyLen),
                          &headLen);
    bool ok;
    int fd;

    if (head == NULL || headLen + e->bodyLen > s->diskShardMost) {
        free(head);
        return -1;
    }
    fd = tmpOpen(s, id, tmp, sizeof(tmp));
    ok = fd >= 0 && pwriteAll(fd, head, headLen, 0)
         && pwriteAll(fd, e->body, e->bodyLen, (off_t)headLen);
    if (fd >= 0 && close(fd) != 0) {
        ok = false;
    }
    ok = ok && place(s, tmp, e->hash, id);
    if (!ok && fd >= 0) {
        unlink(tmp);
    }
    free(head);
    *sizeP = headLen + e->bodyLen;
    return ok ? 0 : -1;
}

static void
writeRun(CorEvTask* task)
{
    DiskWrite* w = corContainerOf(task, DiskWrite, task);
    CacheStore* s = w->s;
    CacheEntry* e = w->e;
    uint64_t id = atomic_fetch_add(&s->nextId, 1);
    uint64_t size = 0;

    if (fileWrite(s, e, id, &size) == 0) {
        cacheDiskIndexPut(s, e->hash, cacheHash(cacheEntryVary(e), e->varyLen),
                          id, size, true, w->removals);
    } else {
        atomic_fetch_add(&s->counters.diskErrors, 1);
    }
    atomic_fetch_sub(&s->writesPending, e->bodyLen);
    cacheEntryRelease(e);
    free(w);
}

void
cacheDiskWrite(CacheStore* s, CacheEntry* e)
{
    /* Started by the first loop's loopInit: a loop that serves before it
     * keeps its answers in memory only. */
    CorEvPool* writers = atomic_load(&s->writers);
    DiskWrite* w = NULL;

    if (writers != NULL) {
        if (atomic_fetch_add(&s->writesPending, e->bodyLen) + e->bodyLen
            <= WRITES_PENDING_MOST) {
            w = malloc(sizeof(*w));
        }
        if (w == NULL) {
            atomic_fetch_sub(&s->writesPending, e->bodyLen);
            atomic_fetch_add(&s->counters.diskErrors, 1);
        }
    }
    if (w != NULL) {
        *w = (DiskWrite){ .s = s,
                          .e = e,
                          .removals = cacheIndexRemovals(s, e->hash) };
        if (corEvPoolPost(writers, &w->task, writeRun) == 0) {
            return;
        }
        free(w);
        atomic_fetch_sub(&s->writesPending, e->bodyLen);
    }
    cacheEntryRelease(e);
}

/* ---- An answer as it comes ----------------------------------------------- */

/* ds's file opened, off the loop, its head's room left before the body
 * (written last, when the body's length and CRC are known). */
static void
streamOpen(CacheDiskStream* ds)
{
    size_t headLen = 0;
    char* head = headMake(ds->g->head, 0, 0, &headLen);

    free(head);
    ds->piece = malloc(STREAM_PIECE);
    ds->fd = head != NULL && ds->piece != NULL
                 ? tmpOpen(ds->s, ds->id, ds->tmp, sizeof(ds->tmp))
                 : -1;
    if (ds->fd < 0) {
        ds->failed = true;
        return;
    }
    ds->at = headLen;
    pthread_mutex_lock(&ds->g->lock);
    ds->g->fd = ds->fd; /* its readers read what memory let go of here */
    ds->g->fileAt = headLen;
    pthread_mutex_unlock(&ds->g->lock);
}

/* The body whole in the file: its header said, the file in its place
 * and in the index; false when it is not (the disk full, too big). */
static bool
streamPlace(CacheDiskStream* ds)
{
    CacheStore* s = ds->s;
    const CacheEntry* head = ds->g->head;
    size_t headLen = 0;
    char* bytes = headMake(head, ds->written, ds->crc, &headLen);
    bool ok = bytes != NULL && headLen == ds->at
              && headLen + ds->written <= s->diskShardMost
              && pwriteAll(ds->fd, bytes, headLen, 0)
              && place(s, ds->tmp, ds->hash, ds->id);

    free(bytes);
    if (ok) {
        cacheDiskIndexPut(s, ds->hash,
                          cacheHash(cacheEntryVary(head), head->varyLen),
                          ds->id, headLen + ds->written, true, ds->removals);
    }
    return ok;
}

/* The end of ds, its answer whole or cut: in its place, or no file. */
static void
streamFinish(CacheDiskStream* ds, bool whole)
{
    CacheStore* s = ds->s;
    bool stored = whole && !ds->failed && streamPlace(ds);

    if (!stored && ds->fd >= 0) {
        unlink(ds->tmp); /* g closes its fd: its readers may read it */
    }
    if (whole && !stored) {
        atomic_fetch_add(&s->counters.diskErrors, 1);
    }
    if (stored && ds->onlyCopy) {
        atomic_fetch_add(&s->counters.stored, 1);
    }
    atomic_fetch_sub(&s->writesPending, ds->queued - ds->written);
    cacheFlightFinish(s, ds->flight, stored ? FLIGHT_STORED : FLIGHT_PASS);
    cacheGrowingRelease(ds->g);
    free(ds->piece);
    free(ds);
}

/* A writer's turn: what came of the body since, into the file, until
 * there is no more for now (the next append posts it again) or the
 * answer ended. */
static void
streamRun(CorEvTask* task)
{
    CacheDiskStream* ds = corContainerOf(task, CacheDiskStream, task);
    CacheGrowing* g = ds->g;

    if (ds->piece == NULL && !ds->failed) {
        streamOpen(ds);
    }
    for (;;) {
        bool fromFile;
        bool cut;
        size_t n = 0;

        pthread_mutex_lock(&g->lock);
        cut = g->ended && !g->whole;
        if (!cut && ds->piece != NULL) {
            n = cacheGrowingCopyLocked(g, ds->written, ds->piece, STREAM_PIECE,
                                       &fromFile);
        }
        if ((n == 0 || cut) && !ds->ended) {
            ds->posted = false; /* the next append or the end posts it */
            pthread_mutex_unlock(&g->lock);
            return;
        }
        pthread_mutex_unlock(&g->lock);
        if (n == 0 || cut) {
            streamFinish(ds, !cut);
            return;
        }
        if (!ds->failed
            && !pwriteAll(ds->fd, ds->piece, n,
                          (off_t)(ds->at + ds->written))) {
            ds->failed = true; /* the rest is counted, not written */
        }
        ds->crc = cacheCrc(ds->crc, ds->piece, n);
        pthread_mutex_lock(&g->lock);
        ds->written += n;
        if (!ds->failed) {
            cacheGrowingWrittenLocked(g, ds->written);
        }
        pthread_mutex_unlock(&g->lock);
        atomic_fetch_sub(&ds->s->writesPending, n);
    }
}

/* ds's task queued, unless it is already (g's lock held): whether it
 * is (once the lock is let go, the task may have run and ended). */
static bool
streamPostLocked(CacheDiskStream* ds)
{
    CorEvPool* writers = atomic_load(&ds->s->writers);

    if (!ds->posted) {
        ds->posted = writers != NULL
                     && corEvPoolPost(writers, &ds->task, streamRun) == 0;
    }
    return ds->posted;
}

CacheDiskStream*
cacheDiskStreamOpen(CacheStore* s, CacheGrowing* g, uint64_t hash)
{
    CacheDiskStream* ds;
    bool posted;

    if (atomic_load(&s->writers) == NULL
        || (ds = calloc(1, sizeof(*ds))) == NULL) {
        return NULL;
    }
    ds->s = s;
    ds->g = g;
    ds->hash = hash;
    ds->fd = -1;
    ds->removals = cacheIndexRemovals(s, hash);
    ds->id = atomic_fetch_add(&s->nextId, 1);
    cacheGrowingRef(g);
    pthread_mutex_lock(&g->lock);
    /* Kept whole while memory would keep it (the next hits cost no
     * read); past it, only what the file lacks yet. */
    g->keepMost = s->shardMost;
    g->heldMost = s->shardMost + STREAM_AHEAD_MOST;
    posted = streamPostLocked(ds); /* the file is opened off the loop too */
    pthread_mutex_unlock(&g->lock);
    if (!posted) {
        cacheGrowingRelease(g);
        free(ds);
        return NULL;
    }
    return ds;
}

int
cacheDiskStreamMore(CacheDiskStream* ds, size_t len)
{
    CacheGrowing* g = ds->g;

    ds->queued += len;
    if (atomic_fetch_add(&ds->s->writesPending, len) + len
        > WRITES_PENDING_MOST) {
        return -1;
    }
    pthread_mutex_lock(&g->lock);
    streamPostLocked(ds);
    pthread_mutex_unlock(&g->lock);
    return 0;
}

void
cacheDiskStreamEnd(CacheDiskStream* ds, CacheFlight* flight, bool onlyCopy)
{
    CacheGrowing* g = ds->g;
    bool posted;

    ds->flight = flight;
    ds->onlyCopy = onlyCopy;
    pthread_mutex_lock(&g->lock);
    ds->ended = true;
    posted = streamPostLocked(ds);
    pthread_mutex_unlock(&g->lock);
    if (!posted) {
        streamFinish(ds, false); /* no writer takes it: the generation ends */
    }
}
