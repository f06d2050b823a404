/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streamed responses: a body written in pieces, from any thread, after
 * the handler may have returned. Pieces are copied into a queue under the
 * stream's lock; one task at a time is posted to the request's loop, which
 * hands the queue to the protocol (a chunk each, for HTTP/1.1). Nothing
 * goes out before the protocol has sent the head (served), and the end is
 * delivered once, after the last piece; the request is over after it.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct StreamPiece {
    struct StreamPiece* next;
    size_t len;
    char data[];
} StreamPiece;

struct CorStream {
    pthread_mutex_t lock;
    StreamPiece* head;
    StreamPiece** tail;
    CorEvTask flush;
    CorRequest* r;
    bool headSent;
    bool ended;
    bool flushPosted;
    bool gone;                  /* the client left: writes fail */
};

static void
flushOnLoop(CorEvTask* task)
{
    CorStream* s = corContainerOf(task, CorStream, flush);
    CorRequest* r = s->r;
    StreamPiece* pieces;
    bool ended;

    pthread_mutex_lock(&s->lock);
    pieces = s->head;
    s->head = NULL;
    s->tail = &s->head;
    ended = s->ended;
    s->flushPosted = false;
    if (!r->ops->streamAlive(r)) {
        s->gone = true;
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
    if (ended) {
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
    CorStream* s = calloc(1, sizeof(*s));

    if (s == NULL || !corRequestAnswerClaim(r)) {
        free(s);
        return -1;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->tail = &s->head;
    s->r = r;
    r->stream = s;
    r->status = status;
    r->contentType = contentType;
    r->responded = true;
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
    if (s->gone || s->ended) {
        pthread_mutex_unlock(&s->lock);
        free(piece);
        return -EPIPE;
    }
    *s->tail = piece;
    s->tail = &piece->next;
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
    while (s->head != NULL) {
        StreamPiece* next = s->head->next;

        free(s->head);
        s->head = next;
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
    r->stream = NULL;
}
