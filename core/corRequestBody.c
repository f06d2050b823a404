/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request body that comes while its handler runs (CorHandler.streamBody
 * on a protocol that streams it: HTTP/2): the protocol puts the pieces in
 * as they come, on the request's loop, and the handler takes them out
 * wherever it runs (a coroutine of that loop, a worker). What the handler
 * took is told back to the protocol on the loop (ops->bodyConsumed), which
 * lets the client send as much more: so what waits here is bounded by the
 * protocol's window, not by the body's size.
 *
 * A reader that finds nothing waits on an eventfd of the body through
 * corRestWaitFd, which yields in a coroutine and polls on a thread, and
 * which the request's cancel ends in both; a put writes the eventfd once
 * a reader ever waited. The eventfd is armed under the lock in the same
 * step that found the body empty, so no put slips between the look and
 * the wait.
 *
 * The HTTP client passes such a body on as it comes (CorClientRequest's
 * bodyFrom): its takes never wait (corRequestBodyTake), and it hears of
 * news either through a function called on the loop after each put
 * (corRequestBodyWatch: a client of the same loop resumes its stream) or
 * through the eventfd (corRequestBodyWakeFd: a client polling on a
 * worker).
 *
 * A body that came whole (every other request) is read out of r->body by
 * the same corRequestBodyRead.
 */
#include "corCoreInt.h"
#include "corKit.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Owned by its request, from corRequestBodyBegin to the request's end. */
struct CorBodyIn {
    pthread_mutex_t lock;
    CorRequest* r;
    CorBuf buf;                 /* what came and was not taken */
    int end;                    /* 0: coming; 1: whole; -errno: failed */
    int wakeFd;                 /* an eventfd once a reader waited, or -1 */
    size_t consumed;            /* taken, not told to the protocol yet */
    bool consumedPosted;        /* the task that tells it is due */
    CorEvTask task;
    CorBodyWatchFn watch;       /* on the loop, after each put */
    void* watchArg;
};

/* Write the eventfd: a reader's poll wakes. The lock is held. */
static void
wakeLocked(CorBodyIn* in)
{
    uint64_t one = 1;

    if (in->wakeFd >= 0 && write(in->wakeFd, &one, sizeof(one)) < 0) {
        /* Saturated: readable anyway. */
    }
}

/* After a put or the end, on the loop: the eventfd and the watcher. */
static void
news(CorBodyIn* in)
{
    CorBodyWatchFn fn = in->watch;

    if (fn != NULL) {
        fn(in->watchArg);       /* set and cleared on this loop only */
    }
}

/* ---- The protocol's side ------------------------------------------------- */

bool
corRequestBodyStreams(const CorRequest* r)
{
    CorRouteMatch match;

    return corRouteFind(r->method, r->methodLen, r->path, r->pathLen,
                        &match) == COR_ROUTE_FOUND
           && match.handler->handler.streamBody
           && match.handler->handler.run != COR_RUN_INLINE;
}

int
corRequestBodyBegin(CorRequest* r)
{
    CorBodyIn* in = calloc(1, sizeof(*in));

    if (in == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_init(&in->lock, NULL);
    in->wakeFd = -1;
    in->r = r;
    r->bodyIn = in;
    r->body = "";
    r->bodyLen = 0;
    return 0;
}

int
corRequestBodyPut(CorRequest* r, const void* data, size_t len)
{
    CorBodyIn* in = r->bodyIn;
    int rc;

    pthread_mutex_lock(&in->lock);
    corBufCompact(&in->buf);
    rc = corBufAppend(&in->buf, data, len);
    r->bodyLen += rc == 0 ? len : 0;
    wakeLocked(in);
    pthread_mutex_unlock(&in->lock);
    news(in);
    return rc == 0 ? 0 : -ENOMEM;
}

void
corRequestBodyEnd(CorRequest* r, int rc)
{
    CorBodyIn* in = r->bodyIn;

    pthread_mutex_lock(&in->lock);
    if (in->end == 0) {
        in->end = rc < 0 ? rc : 1;
    }
    wakeLocked(in);
    pthread_mutex_unlock(&in->lock);
    news(in);
}

/* ---- What was taken, back to the protocol -------------------------------- */

static void
consumedTell(CorRequest* r)
{
    CorBodyIn* in = r->bodyIn;
    size_t n;

    pthread_mutex_lock(&in->lock);
    n = in->consumed;
    in->consumed = 0;
    in->consumedPosted = false;
    pthread_mutex_unlock(&in->lock);
    if (n > 0 && r->ops->bodyConsumed != NULL) {
        r->ops->bodyConsumed(r, n);
    }
}

/* Posted by a reader off the loop, with a hold on the request. */
static void
consumedOnLoop(CorEvTask* task)
{
    CorRequest* r = corContainerOf(task, CorBodyIn, task)->r;

    consumedTell(r);
    corRequestLetGo(r);
}

/* ---- The handler's side -------------------------------------------------- */

ssize_t
corRequestBodyTake(CorRequest* r, void* buf, size_t len)
{
    CorBodyIn* in = r->bodyIn;
    size_t n;
    bool post;
    int end;

    if (in == NULL) {
        n = r->bodyLen - r->bodyTaken;
        n = n < len ? n : len;
        if (n > 0) {
            memcpy(buf, r->body + r->bodyTaken, n);
            r->bodyTaken += n;
        }
        return (ssize_t)n;
    }
    pthread_mutex_lock(&in->lock);
    n = corBufPending(&in->buf);
    n = n < len ? n : len;
    if (n > 0) {
        memcpy(buf, corBufHead(&in->buf), n);
        corBufConsume(&in->buf, n);
    }
    in->consumed += n;
    post = n > 0 && !in->consumedPosted && corEvLoopCurrent() != r->loop;
    in->consumedPosted |= post;
    end = in->end;
    pthread_mutex_unlock(&in->lock);
    if (n > 0) {
        r->bodyTaken += n;
        if (corEvLoopCurrent() == r->loop) {
            consumedTell(r);
        } else if (post) {
            corRequestHold(r);      /* it must not be released before */
            corEvLoopPost(r->loop, &in->task, consumedOnLoop);
        }
        return (ssize_t)n;
    }
    return end == 0 ? -EAGAIN : end == 1 ? 0 : end;
}

/* Nothing to take: the eventfd to wait on, made now if need be, in the
 * step that found nothing (a put after it writes it). Returns the fd, 0
 * when something came meanwhile (take again), or -errno. */
static int
waitArm(CorBodyIn* in)
{
    int rc;

    pthread_mutex_lock(&in->lock);
    if (corBufPending(&in->buf) > 0 || in->end != 0) {
        rc = 0;
    } else {
        if (in->wakeFd < 0) {
            in->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        }
        rc = in->wakeFd >= 0 ? in->wakeFd : -errno;
    }
    pthread_mutex_unlock(&in->lock);
    return rc;
}

ssize_t
corRequestBodyRead(CorRequest* r, void* buf, size_t len, int timeoutMs)
{
    uint64_t deadline = corDeadlineAfter(timeoutMs);
    ssize_t n;

    while ((n = corRequestBodyTake(r, buf, len)) == -EAGAIN) {
        uint64_t wakes;
        int fd;
        int rc;

        if (timeoutMs == 0) {
            return -EAGAIN;
        }
        if (corRequestCancelled(r)) {
            return -ECANCELED;
        }
        fd = waitArm(r->bodyIn);
        if (fd < 0) {
            return fd;
        }
        if (fd == 0) {
            continue;
        }
        rc = corDeadlineWaitFd(fd, POLLIN, deadline);
        if (rc < 0) {
            return rc;
        }
        if (read(fd, &wakes, sizeof(wakes)) < 0) {
            /* Drained by the previous round already. */
        }
    }
    return n;
}

void
corRequestBodyWatch(CorRequest* r, CorBodyWatchFn fn, void* arg)
{
    if (r->bodyIn != NULL) {
        r->bodyIn->watch = fn;
        r->bodyIn->watchArg = arg;
    }
}

int
corRequestBodyWakeFd(CorRequest* r)
{
    CorBodyIn* in = r->bodyIn;
    int fd;

    if (in == NULL) {
        return -EINVAL;
    }
    pthread_mutex_lock(&in->lock);
    if (in->wakeFd < 0) {
        in->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    }
    fd = in->wakeFd >= 0 ? in->wakeFd : -errno;
    if (fd >= 0 && (corBufPending(&in->buf) > 0 || in->end != 0)) {
        wakeLocked(in);         /* news before the watch began */
    }
    pthread_mutex_unlock(&in->lock);
    return fd;
}

void
corRequestBodyFree(CorRequest* r)
{
    CorBodyIn* in = r->bodyIn;

    if (in == NULL) {
        return;
    }
    if (in->wakeFd >= 0) {
        close(in->wakeFd);
    }
    corBufFree(&in->buf);
    pthread_mutex_destroy(&in->lock);
    free(in);
    r->bodyIn = NULL;
}
