/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streamed responses: a body written in pieces, from any thread, after
 * the handler may have returned. Pieces are copied into a queue under the
 * stream's lock; one task at a time is posted to the request's loop, which
 * hands the queue to the protocol (a chunk each, for HTTP/1.1). Nothing
 * goes out before the protocol has sent the head (served), and the end is
 * delivered once, after the last piece; the request is over after it.
 *
 * What a stream holds is bounded (COR_STREAM_QUEUE_MAX), or a client that
 * does not read would let a producer fill memory: the loop hands pieces
 * over only while the protocol holds less than the bound unsent, looking
 * again on a short timer while it holds more; and a writer finding the
 * queue full waits for room, or, on the loop's own thread (where waiting
 * would stop the flush it waits for), is told -EAGAIN.
 *
 * The stream is built on the request's public API; the request calls in
 * here at two points only (the head is out, the request ends).
 */
#include "corCoreInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* How often the loop looks again at a protocol that holds too much. */
#define STREAM_RETRY_MS 10

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
    bool headSent;
    bool ended;
    bool flushPosted;           /* a flush task or the retry timer is due */
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
    flushOnLoop(&corContainerOf(timer, CorStream, retry)->flush);
}

static void
flushOnLoop(CorEvTask* task)
{
    CorStream* s = corContainerOf(task, CorStream, flush);
    CorRequest* r = s->r;
    StreamPiece* pieces;
    bool ended;
    bool more;

    pthread_mutex_lock(&s->lock);
    if (!r->ops->streamAlive(r)) {
        s->gone = true;
    }
    pieces = takeLocked(s, s->gone ? 0 : backlog(r));
    more = s->head != NULL;
    ended = s->ended && !more;
    s->flushPosted = more;
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
        corEvTimerStart(r->loop, &s->retry, STREAM_RETRY_MS, retryOnLoop);
    } else if (ended) {
        r->ops->streamEnd(r);   /* r may be gone after this */
    }
}

/* Post the flush unless one is on its way; the lock is held. */
static void
flushPostLocked(CorStream* s)
{
    if (s->headSent && !s->flushPosted && (s->head != NULL || s->ended)) {
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
    return 0;
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
     * bound goes alone). Before the head is out nothing drains the queue
     * (the head waits for the handler to return), so nobody waits then. */
    while (s->headSent && !s->gone && !s->ended && s->queued > 0
           && s->queued + len > COR_STREAM_QUEUE_MAX) {
        if (corEvLoopCurrent() == r->loop) {
            pthread_mutex_unlock(&s->lock);
            free(piece);
            return -EAGAIN;
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

void
corResponseStreamEnd(CorRequest* r)
{
    CorStream* s = r->stream;

    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->ended = true;
    flushPostLocked(s);
    pthread_mutex_unlock(&s->lock);
}

void
corStreamHeadSent(CorRequest* r)
{
    CorStream* s = r->stream;

    pthread_mutex_lock(&s->lock);
    s->headSent = true;
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
