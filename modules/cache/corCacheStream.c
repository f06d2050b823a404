/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collapsed waiters answered as the fetch's body comes, not once it is
 * whole: the fetch keeps its body in a growing buffer (what it stores
 * anyway), and each waiter reads that buffer at its own offset, a piece
 * at a time, into a stream of its own answer. A waiter is a background
 * task of its loop (a coroutine that yields; a thread of its own that
 * blocks, where coroutines are off), so that a slow client waits on its
 * own stream's room and holds neither the fetch's client nor the other
 * waiters: what it holds is its piece and its stream's bound.
 */
#include "corCacheInt.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* A waiter copies this much of the body at a time. */
#define READER_PIECE ((size_t)64 * 1024)
/* A body whose memory holds only what its file lacks yet gives back what
 * it grew to past this. */
#define STREAM_SHRINK ((size_t)1 << 20)

/* One waiter reading the growing body into its answer's stream. */
typedef struct {
    CorList node; /* in its body's readers, while it reads */
    CacheGrowing* g;
    CorRequest* r;
    size_t offset; /* what it wrote to its stream so far */
    int wakeFd;    /* an eventfd: the body grew or ended, or go changed */
    bool asleep;   /* waits on wakeFd (under g's lock) */
    int go;        /* whether its stream started (under g's lock) */
} CacheReader;

enum {
    READER_WAIT, /* its task runs before its stream starts */
    READER_GO,   /* its stream started: the task writes it */
    READER_QUIT  /* it did not: the task ends, r untouched */
};

CacheGrowing*
cacheGrowingNew(CacheEntry* head)
{
    CacheGrowing* g = calloc(1, sizeof(*g));

    if (g == NULL) {
        return NULL;
    }
    pthread_mutex_init(&g->lock, NULL);
    atomic_init(&g->refs, 1);
    corListInit(&g->readers);
    g->head = head;
    g->keepMost = SIZE_MAX;
    g->heldMost = SIZE_MAX;
    g->fd = -1;
    return g;
}

void
cacheGrowingRef(CacheGrowing* g)
{
    atomic_fetch_add(&g->refs, 1);
}

void
cacheGrowingRelease(CacheGrowing* g)
{
    if (g != NULL && atomic_fetch_sub(&g->refs, 1) == 1) {
        pthread_mutex_destroy(&g->lock);
        cacheEntryRelease(g->head);
        free(g->body);
        if (g->fd >= 0) {
            close(g->fd);
        }
        free(g);
    }
}

/* The readers waiting for more are told the body changed (lock held). */
static void
readersWakeLocked(CacheGrowing* g)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &g->readers)
    {
        CacheReader* rd = corContainerOf(node, CacheReader, node);

        if (rd->asleep) {
            rd->asleep = false;
            eventfd_write(rd->wakeFd, 1);
        }
    }
}

int
cacheGrowingAppend(CacheGrowing* g, const void* data, size_t len)
{
    int rc = 0;
    size_t held;

    pthread_mutex_lock(&g->lock);
    held = g->len - g->base;
    if (g->len + len > g->keepMost && held + len > g->heldMost) {
        rc = -ENOBUFS; /* its file's writes are that far behind */
    } else if (held + len > g->cap) {
        size_t cap = g->cap > 0 ? g->cap : 4096;
        char* grown;

        while (cap < held + len) {
            cap *= 2;
        }
        grown = realloc(g->body, cap);
        if (grown == NULL) {
            rc = -ENOMEM;
        } else {
            g->body = grown;
            g->cap = cap;
        }
    }
    if (rc == 0) {
        memcpy(g->body + held, data, len);
        g->len += len;
        readersWakeLocked(g);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

bool
cacheGrowingInMemory(const CacheGrowing* g)
{
    return g->len <= g->keepMost && g->base == 0;
}

size_t
cacheGrowingCopyLocked(CacheGrowing* g, size_t at, char* buf, size_t cap,
                       bool* fromFile)
{
    size_t n;

    *fromFile = false;
    if (g->len <= at) {
        return 0;
    }
    n = g->len - at < cap ? g->len - at : cap;
    if (at < g->base) {
        /* Written, and gone from memory: its file has it, for good. */
        *fromFile = true;
        return g->base - at < n ? g->base - at : n;
    }
    memcpy(buf, g->body + (at - g->base), n);
    return n;
}

void
cacheGrowingWrittenLocked(CacheGrowing* g, size_t upTo)
{
    size_t held = g->len - upTo;

    if (g->len <= g->keepMost || upTo - g->base < held || upTo == g->base) {
        /* Kept whole, to be stored in memory too; or moved once as much
         * was written as is left to move, so that a writer behind moves
         * each byte about once, not once a piece. */
        return;
    }
    memmove(g->body, g->body + (upTo - g->base), held);
    g->base = upTo;
    if (g->cap > STREAM_SHRINK && g->cap / 4 > held) {
        /* What grew while it was kept whole goes back. */
        size_t cap = held * 2 > STREAM_SHRINK ? held * 2 : STREAM_SHRINK;
        char* less = realloc(g->body, cap);

        if (less != NULL) {
            g->body = less;
            g->cap = cap;
        }
    }
}

void
cacheGrowingEnd(CacheGrowing* g, bool whole)
{
    pthread_mutex_lock(&g->lock);
    g->ended = true;
    g->whole = whole;
    if (!whole) {
        /* Nobody reads what was kept of an answer cut or too big. */
        free(g->body);
        g->body = NULL;
        g->base = g->len = g->cap = 0;
    }
    readersWakeLocked(g);
    pthread_mutex_unlock(&g->lock);
}

/* rd leaves its body: it reads no more of it, and is freed. */
static void
readerLeave(CacheReader* rd)
{
    CacheGrowing* g = rd->g;

    pthread_mutex_lock(&g->lock);
    corListRemove(&rd->node);
    pthread_mutex_unlock(&g->lock);
    close(rd->wakeFd);
    cacheGrowingRelease(g);
    free(rd);
}

/* The waiter's task: once its stream started, pieces of the body to it
 * as they come and as its client takes them, then the stream's end (cut
 * when the fetch was, or its wait was cancelled: a stop). */
static void
readerRun(void* arg)
{
    CacheReader* rd = arg;
    CacheGrowing* g = rd->g;
    CorRequest* r = rd->r;
    char* piece = malloc(READER_PIECE);
    bool whole = false;
    bool failed = piece == NULL;
    int go;

    for (;;) {
        size_t n = 0;
        bool ended;
        bool fromFile = false;
        short revents;

        pthread_mutex_lock(&g->lock);
        go = rd->go;
        if (go == READER_GO && !failed) {
            n = cacheGrowingCopyLocked(g, rd->offset, piece, READER_PIECE,
                                       &fromFile);
        }
        ended = g->ended;
        whole = g->whole;
        rd->asleep = go == READER_WAIT || (n == 0 && !ended);
        pthread_mutex_unlock(&g->lock);
        if (go == READER_QUIT || (go == READER_GO && failed)) {
            break;
        }
        if (fromFile
            && pread(g->fd, piece, n, (off_t)(g->fileAt + rd->offset))
                   != (ssize_t)n) {
            failed = true;
        } else if (n > 0) {
            failed = corResponseStreamWrite(r, piece, n) != 0;
            rd->offset += n;
        } else if (go == READER_GO && ended) {
            break;
        } else if (corRestWaitFd(rd->wakeFd, POLLIN, -1, &revents) < 0) {
            failed = true; /* a stop */
        } else {
            eventfd_t count;

            eventfd_read(rd->wakeFd, &count);
        }
    }
    free(piece);
    readerLeave(rd);
    if (go != READER_GO) {
        return; /* its stream never started: r is not its */
    }
    if (whole && !failed) {
        corResponseStreamEnd(r); /* r may be gone after */
    } else {
        corResponseStreamAbort(r);
    }
}

/* rd's task is told whether its stream started (READER_GO) or not. */
static void
readerGo(CacheReader* rd, int go)
{
    pthread_mutex_lock(&rd->g->lock);
    rd->go = go;
    rd->asleep = false;
    eventfd_write(rd->wakeFd, 1);
    pthread_mutex_unlock(&rd->g->lock);
}

int
cacheStreamAnswer(CorRequest* r, CacheRun* run, CacheGrowing* g)
{
    /* Its own memory, not r's: a task told READER_QUIT may look at it
     * after r was answered and let go. */
    CacheReader* rd = calloc(1, sizeof(*rd));

    if (rd == NULL) {
        cacheGrowingRelease(g);
        return -1;
    }
    rd->g = g;
    rd->r = r;
    rd->wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rd->wakeFd < 0) {
        cacheGrowingRelease(g);
        free(rd);
        return -1;
    }
    pthread_mutex_lock(&g->lock);
    corListAppend(&g->readers, &rd->node);
    pthread_mutex_unlock(&g->lock);
    /* The task first (none to be had: r is not answered yet, and runs
     * its own handler), then the stream it writes. */
    if (corTaskSpawn(readerRun, rd, "cache-waiter") != 0) {
        readerLeave(rd);
        return -1;
    }
    cacheEntryRef(g->head);
    run->entry = g->head;
    cacheEntryFieldsSay(r, run, "hit; collapsed");
    if (corResponseStreamStart(r, g->head->status, cacheEntryType(g->head))
        != 0) {
        readerGo(rd, READER_QUIT);
        corRespondStatic(r, 500, "text/plain", "out of memory\n", 14);
        return 0;
    }
    readerGo(rd, READER_GO);
    return 0;
}
