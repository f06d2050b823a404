/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streamed responses: a body written in pieces, from any thread, while
 * the handler runs and after it returned. Pieces are copied into a queue
 * under the stream's lock; one task at a time is posted to the request's
 * loop, which hands the queue to the protocol (a chunk each, for
 * HTTP/1.1). The first such task sends the head (ops->done), so a handler
 * that passes on a large body (a proxy) has its head out at once and its
 * pieces flowing while it still produces them. The end is delivered once,
 * after the last piece and once the handler has returned (the request is
 * over after the end, and a running handler still uses it).
 *
 * What a stream holds is bounded (COR_STREAM_QUEUE_MAX), or a client that
 * does not read would let a producer fill memory: the loop hands pieces
 * over only while the protocol holds less than the bound unsent, looking
 * again when the protocol says it drained (corResponseStreamDrained), or
 * on a short timer for a protocol that does not say; and a writer finding
 * the queue full waits for room: a thread on its condition variable, a
 * coroutine of the request's loop parked until the flush makes room (it
 * cannot block the loop that makes it). Only code on the loop's own stack
 * (an inline handler) cannot wait, and is told -EAGAIN.
 *
 * The stream is built on the request's public API; the request calls in
 * here at two points only (the handler returned, the request ends).
 */
#include "corCoreInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* How often the loop looks again at a protocol that holds too much and
 * does not say when it drained. */
#define STREAM_RETRY_MS 10
/* A parked writer looks again this often even unwoken (the client may
 * have left, which no flush tells). */
#define STREAM_PARK_MS 100

typedef struct StreamPiece {
    struct StreamPiece* next;
    size_t len;
    char data[];
} StreamPiece;

struct CorStream {
    pthread_mutex_t lock;
    pthread_cond_t room;        /* the queue shrank, or the client left */
    StreamPiece* head;
    StreamPiece** tail;
    size_t queued;              /* bytes of the pieces in the queue */
    CorEvTask flush;
    CorEvTimer retry;           /* on the loop: the protocol held too much */
    CorRequest* r;
    CorCoPark writer;           /* a coroutine writer waiting for room */
    bool headSent;
    bool served;                /* the handler returned */
    bool ended;
    bool aborted;               /* ended as failed */
    bool flushPosted;           /* a flush task or the retry timer is due */
    bool retryArmed;            /* the retry timer is (not the task) */
    bool gone;                  /* the client left: writes fail */
};

static void flushOnLoop(CorEvTask* task);

/* What the protocol holds of the stream, unsent. */
static size_t
backlog(const CorRequest* r)
{
    return r->ops->streamBacklog != NULL ? r->ops->streamBacklog(r) : 0;
}

/* Take what the protocol has room for (everything, once the client is
 * gone) off the queue, as a list, and tell waiting writers; the lock is
 * held. */
static StreamPiece*
takeLocked(CorStream* s, size_t held)
{
    StreamPiece* taken = NULL;
    StreamPiece** last = &taken;

    while (s->head != NULL && (s->gone || held < COR_STREAM_QUEUE_MAX)) {
        StreamPiece* piece = s->head;

        s->head = piece->next;
        s->queued -= piece->len;
        held += piece->len;
        piece->next = NULL;
        *last = piece;
        last = &piece->next;
    }
    if (s->head == NULL) {
        s->tail = &s->head;
    }
    pthread_cond_broadcast(&s->room);
    return taken;
}

static void
retryOnLoop(CorEvTimer* timer)
{
    CorStream* s = corContainerOf(timer, CorStream, retry);

    s->retryArmed = false;
    flushOnLoop(&s->flush);
}

/* Send the head, the first time only. */
static void
headSend(CorStream* s)
{
    bool send;

    pthread_mutex_lock(&s->lock);
    send = !s->headSent;
    s->headSent = true;
    pthread_mutex_unlock(&s->lock);
    if (send) {
        s->r->ops->done(s->r);
    }
}

static void
flushOnLoop(CorEvTask* task)
{
    CorStream* s = corContainerOf(task, CorStream, flush);
    CorRequest* r = s->r;
    StreamPiece* pieces;
    bool ended;
    bool more;

    headSend(s);
    pthread_mutex_lock(&s->lock);
    if (!r->ops->streamAlive(r)) {
        s->gone = true;
    }
    pieces = takeLocked(s, s->gone ? 0 : backlog(r));
    more = s->head != NULL;
    ended = s->ended && s->served && !more;
    s->flushPosted = more;
    if (s->writer != 0) {
        corCoLoopWake(s->writer);   /* room, or the client is gone */
    }
    pthread_mutex_unlock(&s->lock);
    while (pieces != NULL) {
        StreamPiece* next = pieces->next;

        if (!s->gone) {
            r->ops->streamData(r, pieces->data, pieces->len);
        }
        free(pieces);
        pieces = next;
    }
    if (more) {
        s->retryArmed = true;
        corEvTimerStart(r->loop, &s->retry, STREAM_RETRY_MS, retryOnLoop);
    } else if (ended && s->aborted && r->ops->streamAbort != NULL) {
        r->ops->streamAbort(r); /* r may be gone after this */
    } else if (ended) {
        r->ops->streamEnd(r);   /* r may be gone after this */
    }
}

/* Post the flush unless one is on its way: for the head, pieces, or the
 * end once the handler returned; the lock is held. */
static void
flushPostLocked(CorStream* s)
{
    if (!s->flushPosted && (!s->headSent || s->head != NULL
                            || (s->ended && s->served))) {
        s->flushPosted = true;
        corEvLoopPost(s->r->loop, &s->flush, flushOnLoop);
    }
}

int
corResponseStreamStart(CorRequest* r, int status, const char* contentType)
{
    CorStream* s;

    if (r->responded) {
        return -1;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -1;
    }
    corRespondStatic(r, status, contentType, NULL, 0);
    if (!r->responded) {
        free(s);                /* its deadline answered first */
        return -1;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->room, NULL);
    s->tail = &s->head;
    s->r = r;
    r->stream = s;
    /* The head goes out now, not when the handler returns. */
    pthread_mutex_lock(&s->lock);
    flushPostLocked(s);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/*
 * On the request's loop, with the queue full: wait for room as a parked
 * coroutine (the lock is held, and released across the park). Returns 0
 * to look again, -EPIPE when the client left or the handler was
 * cancelled, -EAGAIN where no coroutine can wait (the loop's own stack).
 */
static int
roomWaitOnLoop(CorStream* s)
{
    CorRequest* r = s->r;
    int rc;

    if (!r->ops->streamAlive(r)) {
        s->gone = true;
    }
    if (s->gone || corRequestCancelled(r)) {
        return -EPIPE;
    }
    if (s->writer != 0) {
        return -EAGAIN;         /* another coroutine waits already */
    }
    pthread_mutex_unlock(&s->lock);
    rc = corCoLoopPark(&s->writer, STREAM_PARK_MS);
    if (rc < 0) {
        rc = errno == ECANCELED ? -EPIPE : -EAGAIN;
    }
    pthread_mutex_lock(&s->lock);
    return rc < 0 ? rc : 0;
}

int
corResponseStreamWrite(CorRequest* r, const void* data, size_t len)
{
    CorStream* s = r->stream;
    StreamPiece* piece;

    if (s == NULL) {
        return -EINVAL;
    }
    if (len == 0) {
        return 0;
    }
    piece = malloc(sizeof(*piece) + len);
    if (piece == NULL) {
        return -ENOMEM;
    }
    piece->next = NULL;
    piece->len = len;
    memcpy(piece->data, data, len);
    pthread_mutex_lock(&s->lock);
    /* Room for the piece, or an empty queue (a piece larger than the
     * bound goes alone). The flush that sends the head drains the queue
     * too, so a writer may wait from the start. */
    while (!s->gone && !s->ended && s->queued > 0
           && s->queued + len > COR_STREAM_QUEUE_MAX) {
        if (corEvLoopCurrent() == r->loop) {
            int rc = roomWaitOnLoop(s);

            if (rc < 0) {
                pthread_mutex_unlock(&s->lock);
                free(piece);
                return rc;
            }
            continue;
        }
        pthread_cond_wait(&s->room, &s->lock);
    }
    if (s->gone || s->ended) {
        pthread_mutex_unlock(&s->lock);
        free(piece);
        return -EPIPE;
    }
    *s->tail = piece;
    s->tail = &piece->next;
    s->queued += len;
    flushPostLocked(s);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void
streamEnd(CorRequest* r, bool aborted)
{
    CorStream* s = r->stream;

    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->aborted = !s->ended && aborted;
    s->ended = true;
    flushPostLocked(s);
    pthread_mutex_unlock(&s->lock);
}

void
corResponseStreamEnd(CorRequest* r)
{
    streamEnd(r, false);
}

void
corResponseStreamAbort(CorRequest* r)
{
    streamEnd(r, true);
}

void
corResponseStreamDrained(CorRequest* r)
{
    CorStream* s = r->stream;

    /* Only a flush that waits on its timer is brought forward; a task on
     * its way will look anyway. On the loop: the timer is the loop's. */
    if (s != NULL && s->retryArmed) {
        s->retryArmed = false;
        corEvTimerStop(r->loop, &s->retry);
        corEvLoopPost(r->loop, &s->flush, flushOnLoop);
    }
}

void
corStreamServed(CorRequest* r)
{
    CorStream* s = r->stream;

    headSend(s);
    pthread_mutex_lock(&s->lock);
    s->served = true;
    flushPostLocked(s);
    pthread_mutex_unlock(&s->lock);
}

void
corStreamFree(CorRequest* r)
{
    CorStream* s = r->stream;

    if (s == NULL) {
        return;
    }
    corEvTimerStop(r->loop, &s->retry);
    while (s->head != NULL) {
        StreamPiece* next = s->head->next;

        free(s->head);
        s->head = next;
    }
    pthread_cond_destroy(&s->room);
    pthread_mutex_destroy(&s->lock);
    free(s);
    r->stream = NULL;
}
