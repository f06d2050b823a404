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
 * A file body that a response filter takes (corStreamFile) is such a
 * stream too, with no writer: the flush reads the file in pieces, as
 * many as the protocol has room for and a budget a turn of the loop
 * allows, so a large file passes in bounded memory and the loop's other
 * connections are served between its pieces.
 *
 * Every piece goes to the protocol through the request's filters, when
 * some took the body: the end is told to them first (COR_FILTER_LAST),
 * and a writer's queue found empty is a flush (what they hold goes out:
 * a stream's client sees what was written).
 *
 * The stream is built on the request's public API; the request calls in
 * here at three points only (the handler returned, a filter took a file,
 * the request ends).
 */
#include "corCoreInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How often the loop looks again at a protocol that holds too much and
 * does not say when it drained. */
#define STREAM_RETRY_MS 10
/* A parked writer looks again this often even unwoken (the client may
 * have left, which no flush tells). */
#define STREAM_PARK_MS 100
/* A file body is read this much at a time, and at most the budget in one
 * turn of the loop. */
#define STREAM_FILE_PIECE ((size_t)64 * 1024)
#define STREAM_FILE_BUDGET ((size_t)256 * 1024)

typedef struct StreamPiece {
    struct StreamPiece* next;
    size_t len;
    char data[];
} StreamPiece;

struct CorStream {
    pthread_mutex_t lock;
    pthread_cond_t room; /* the queue shrank, or the client left */
    StreamPiece* head;
    StreamPiece** tail;
    size_t queued; /* bytes of the pieces in the queue */
    CorEvTask flush;
    CorEvTimer retry; /* on the loop: the protocol held too much */
    CorRequest* r;
    CorCoPark writer; /* a coroutine writer waiting for room */
    bool headSent;
    bool served; /* the handler returned */
    bool ended;
    bool aborted;     /* ended as failed */
    bool flushPosted; /* a flush task or the retry timer is due */
    bool retryArmed;  /* the retry timer is (not the task) */
    bool gone;        /* the client left: writes fail */
    bool failed;      /* a filter or the file failed: cut */
    bool kept;        /* its pieces go on to the filters once the client
                         left (corResponseStreamKeep): nothing fails */
    bool deaf;        /* the client of a kept stream left */
    /* A file body (corStreamFile), the loop's alone; fileFd -1: none. */
    int fileFd;
    int64_t fileOffset;
    uint64_t fileLeft;
    char* fileBuf;
};

static void flushOnLoop(CorEvTask* task);
static void streamDestroy(CorStream* s);

/* What the protocol holds of the stream, unsent. */
static size_t
backlog(const CorRequest* r)
{
    return r->ops->streamBacklog != NULL ? r->ops->streamBacklog(r) : 0;
}

/* Whether the client is still there to send to: a stream whose client
 * left is gone (writers fail), or deaf when kept (its pieces go on to
 * the filters, and nowhere after them). The lock is held. */
static void
clientLookLocked(CorStream* s)
{
    if (!s->r->ops->streamAlive(s->r)) {
        if (s->kept) {
            s->deaf = true;
        } else {
            s->gone = true;
        }
    }
}

/* Whether the protocol has room for more: always once nobody reads. */
static bool
roomFor(const CorStream* s)
{
    return s->deaf || backlog(s->r) < COR_STREAM_QUEUE_MAX;
}

/* Take what the protocol has room for (everything, once the client is
 * gone) off the queue, as a list, and tell waiting writers; the lock is
 * held. */
static StreamPiece*
takeLocked(CorStream* s, size_t held)
{
    StreamPiece* taken = NULL;
    StreamPiece** last = &taken;

    while (s->head != NULL
           && (s->gone || s->deaf || held < COR_STREAM_QUEUE_MAX)) {
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
        if (corFilterCount != 0 && s->r->filterRun == NULL) {
            corFilterHead(s->r);
        }
        s->r->ops->done(s->r);
    }
}

/* A piece to the protocol, through the filters that took the body; one
 * that fails cuts the answer (writers are told -EPIPE). */
static void
pieceOut(CorStream* s, const void* data, size_t len, unsigned flags)
{
    CorRequest* r = s->r;
    int rc;

    if (r->filterRun == NULL) {
        if (len > 0) {
            r->ops->streamData(r, data, len);
        }
        return;
    }
    rc = corFilterData(r, data, len, flags);
    if (rc < 0) {
        corLog(COR_LOG_ERROR,
               "handler %s: a response filter failed (%s): "
               "the answer is cut",
               corRequestHandlerName(r), strerror(-rc));
        pthread_mutex_lock(&s->lock);
        s->failed = true;
        s->gone = true;
        pthread_cond_broadcast(&s->room);
        pthread_mutex_unlock(&s->lock);
    }
}

/* Read the file body on: pieces while the protocol has room and the
 * turn's budget lasts; at its end (or the client's, or a failure) the
 * file is closed and the stream ended. */
static void
fileRead(CorStream* s)
{
    CorRequest* r = s->r;
    size_t budget = STREAM_FILE_BUDGET;

    while (!s->gone && s->fileLeft > 0 && budget > 0 && roomFor(s)) {
        size_t n = s->fileLeft < STREAM_FILE_PIECE ? (size_t)s->fileLeft
                                                   : STREAM_FILE_PIECE;
        ssize_t got = pread(s->fileFd, s->fileBuf, n, s->fileOffset);

        if (got <= 0) {
            corLog(COR_LOG_ERROR, "handler %s: reading the file body: %s",
                   corRequestHandlerName(r),
                   got < 0 ? strerror(errno) : "it got shorter");
            s->failed = true;
            break;
        }
        s->fileOffset += got;
        s->fileLeft -= (uint64_t)got;
        budget -= (size_t)got < budget ? (size_t)got : budget;
        pieceOut(s, s->fileBuf, (size_t)got, 0);
    }
    if (s->fileLeft == 0 || s->gone || s->failed) {
        close(s->fileFd);
        s->fileFd = -1;
        pthread_mutex_lock(&s->lock);
        s->ended = true;
        pthread_mutex_unlock(&s->lock);
    }
}

static void
flushOnLoop(CorEvTask* task)
{
    CorStream* s = corContainerOf(task, CorStream, flush);
    CorRequest* r = s->r;
    StreamPiece* pieces;
    bool delivered;
    bool ended;
    bool more;

    headSend(s);
    pthread_mutex_lock(&s->lock);
    clientLookLocked(s);
    pieces = takeLocked(s, s->gone || s->deaf ? 0 : backlog(r));
    delivered = pieces != NULL;
    more = s->head != NULL;
    ended = s->ended && s->served && !more;
    s->flushPosted = more || s->fileFd >= 0;
    if (s->writer != 0) {
        corCoLoopWake(s->writer); /* room, or the client is gone */
    }
    pthread_mutex_unlock(&s->lock);
    while (pieces != NULL) {
        StreamPiece* next = pieces->next;

        if (!s->gone) {
            pieceOut(s, pieces->data, pieces->len, 0);
        }
        free(pieces);
        pieces = next;
    }
    if (s->fileFd >= 0) {
        /* No writer: the stream's fields are the loop's alone. */
        fileRead(s);
        more = s->fileFd >= 0;
        ended = !more && s->served;
        s->flushPosted = more;
    }
    if (!s->gone && !s->aborted && (ended || (delivered && !more))) {
        pieceOut(s, NULL, 0, ended ? COR_FILTER_LAST : COR_FILTER_FLUSH);
    }
    if (more && s->fileFd >= 0 && !s->gone && roomFor(s)) {
        /* The turn's budget is spent, not the protocol's room: on at the
         * loop's next turn, after its other work. */
        corEvLoopPost(r->loop, &s->flush, flushOnLoop);
    } else if (more) {
        s->retryArmed = true;
        corEvTimerStart(r->loop, &s->retry, STREAM_RETRY_MS, retryOnLoop);
    } else if (ended && (s->aborted || s->failed)
               && r->ops->streamAbort != NULL) {
        corRequestAnswer(r, r->ops->streamAbort); /* r may be gone after */
    } else if (ended) {
        corRequestAnswer(r, r->ops->streamEnd); /* r may be gone after */
    }
}

/* Post the flush unless one is on its way: for the head, pieces, or the
 * end once the handler returned; the lock is held. */
static void
flushPostLocked(CorStream* s)
{
    if (!s->flushPosted
        && (!s->headSent || s->head != NULL || s->fileFd >= 0
            || (s->ended && s->served))) {
        s->flushPosted = true;
        corEvLoopPost(s->r->loop, &s->flush, flushOnLoop);
    }
}

/* A stream for r, answered already; NULL without memory. */
static CorStream*
streamNew(CorRequest* r)
{
    CorStream* s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->room, NULL);
    s->tail = &s->head;
    s->r = r;
    s->fileFd = -1;
    return s;
}

int
corResponseStreamStart(CorRequest* r, int status, const char* contentType)
{
    CorStream* s;

    if (r->responded) {
        return -1;
    }
    s = streamNew(r);
    if (s == NULL) {
        return -1;
    }
    corRespondStatic(r, status, contentType, NULL, 0);
    if (!r->responded) {
        streamDestroy(s); /* its deadline answered first */
        return -1;
    }
    r->stream = s;
    /* The head goes out now, not when the handler returns. */
    pthread_mutex_lock(&s->lock);
    flushPostLocked(s);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int
corStreamFile(CorRequest* r)
{
    CorStream* s = streamNew(r);

    if (s == NULL) {
        return -ENOMEM;
    }
    s->fileBuf = malloc(STREAM_FILE_PIECE);
    if (s->fileBuf == NULL) {
        streamDestroy(s);
        return -ENOMEM;
    }
    if (r->head) {
        /* Nothing of it goes out: ended now, nothing read. */
        if (r->fileFd >= 0) {
            close(r->fileFd);
        }
        s->ended = true;
    } else {
        s->fileFd = r->fileFd;
        s->fileOffset = r->fileOffset;
        s->fileLeft = r->responseLen;
    }
    r->fileFd = -1;
    r->responseLen = 0;
    r->stream = s;
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

    clientLookLocked(s);
    if (s->gone || corRequestCancelled(r)) {
        return -EPIPE;
    }
    if (s->writer != 0) {
        return -EAGAIN; /* another coroutine waits already */
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
corResponseStreamKeep(CorRequest* r, bool keep)
{
    CorStream* s = r->stream;

    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        s->kept = keep;
        if (!keep && s->deaf) {
            s->gone = true; /* nobody wants it any more: writes fail */
            pthread_cond_broadcast(&s->room);
        }
        pthread_mutex_unlock(&s->lock);
    }
}

bool
corStreamKept(const CorRequest* r)
{
    CorStream* s = r->stream;
    bool kept = false;

    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        kept = s->kept;
        pthread_mutex_unlock(&s->lock);
    }
    return kept;
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
    bool now;

    headSend(s);
    pthread_mutex_lock(&s->lock);
    s->served = true;
    /* A file body has no writer to wait for: its first turn of pieces
     * runs now, in the turn that answered, so that a short one goes out
     * with its head in one write; a post to the loop itself would cost a
     * wake (an eventfd write and read) and the head a write of its own. */
    now = s->fileFd >= 0 && !s->flushPosted && corEvLoopCurrent() == r->loop;
    if (now) {
        s->flushPosted = true;
    } else {
        flushPostLocked(s);
    }
    pthread_mutex_unlock(&s->lock);
    if (now) {
        flushOnLoop(&s->flush); /* r may be gone after this */
    }
}

/* A stream's memory and its file; on the loop, its timer stopped. */
static void
streamDestroy(CorStream* s)
{
    if (s->fileFd >= 0) {
        close(s->fileFd);
    }
    free(s->fileBuf);
    while (s->head != NULL) {
        StreamPiece* next = s->head->next;

        free(s->head);
        s->head = next;
    }
    pthread_cond_destroy(&s->room);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void
corStreamFree(CorRequest* r)
{
    CorStream* s = r->stream;

    if (s == NULL) {
        return;
    }
    corEvTimerStop(r->loop, &s->retry);
    streamDestroy(s);
    r->stream = NULL;
}
