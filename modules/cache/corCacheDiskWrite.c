/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk store's writes: a stored answer made a file of its own
 * (corCacheDiskFile.h's layout) off the loops, by the store's writer
 * threads, under a name of its own and renamed into place when whole, then
 * put in the index (corCacheDisk.c, corCacheIndex.c). Apart from the
 * index because the two change for different reasons: how a file is
 * written, and how the files are found.
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

/* A writer's queue holds at most this many bytes of answers (each
 * referenced until written): past it an answer is kept in memory only. */
#define WRITES_PENDING_MOST ((uint64_t)128 << 20)

typedef struct {
    CorEvTask task;
    CacheStore* s;
    CacheEntry* e;
    CacheFlight* flight;
    uint64_t removals; /* its shard's when it was asked for */
} DiskWrite;

/* The header and head of e's file, in one allocation; NULL when out of
 * memory or its head is past what a reader takes. */
static char*
headMake(const CacheEntry* e, uint32_t bodyCrc, size_t* lenP)
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
    h.bodyLen = e->bodyLen;
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
writeAll(int fd, const char* data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        data += n;
        len -= (size_t)n;
    }
    return true;
}

/* e's file, written whole under a name of its own and then renamed to
 * its place, so that a reader never sees half of it: 0 with its size,
 * or -1 (the disk full, the folder gone and not to be made again). */
static int
fileWrite(CacheStore* s, const CacheEntry* e, uint64_t id, uint64_t* sizeP)
{
    char tmp[PATH_MAX];
    char name[PATH_MAX];
    size_t headLen = 0;
    char* head = headMake(e, cacheCrc(0, e->body, e->bodyLen), &headLen);
    bool ok;
    int fd;

    if (head == NULL || headLen + e->bodyLen > s->diskShardMost) {
        free(head);
        return -1;
    }
    snprintf(tmp, sizeof(tmp), "%s/.tmp-%016llx", s->path,
             (unsigned long long)id);
    cacheDiskFileName(s, e->hash, id, name, sizeof(name));
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && mkdir(s->path, 0755) == 0) {
        /* The folder was removed under the server: made again. */
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    ok = fd >= 0 && writeAll(fd, head, headLen)
         && writeAll(fd, e->body, e->bodyLen);
    if (fd >= 0 && close(fd) != 0) {
        ok = false;
    }
    ok = ok && rename(tmp, name) == 0;
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
    int outcome = FLIGHT_STORED;

    if (fileWrite(s, e, id, &size) == 0) {
        cacheDiskIndexPut(s, e->hash, cacheHash(cacheEntryVary(e), e->varyLen),
                          id, size, true, w->removals);
    } else {
        atomic_fetch_add(&s->counters.diskErrors, 1);
        outcome = FLIGHT_PASS;
    }
    atomic_fetch_sub(&s->writesPending, e->bodyLen);
    cacheFlightFinish(s, w->flight, outcome);
    cacheEntryRelease(e);
    free(w);
}

void
cacheDiskWrite(CacheStore* s, CacheEntry* e, CacheFlight* flight)
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
                          .flight = flight,
                          .removals = cacheIndexRemovals(s, e->hash) };
        if (corEvPoolPost(writers, &w->task, writeRun) == 0) {
            return;
        }
        free(w);
        atomic_fetch_sub(&s->writesPending, e->bodyLen);
    }
    cacheEntryRelease(e);
    cacheFlightFinish(s, flight, FLIGHT_PASS);
}
