/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handler's side of a streamed request body (corRequestBody.c tells
 * the whole story): whether its handler takes the body as it comes, the
 * takes, a wait for more, and what was taken told back to the protocol on
 * the request's loop (held meanwhile when told from off it).
 */
#include "corRequestBodyIn.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Asked by the protocol before the body comes. */
bool
corRequestBodyStreams(const CorRequest* r)
{
    CorRouteMatch match;

    /* The route a rewrite leads to runs the handler, not the one that
     * rewrote (which has none). */
    return corRouteFindFinal(r, &match) == COR_ROUTE_FOUND
           && match.handler != NULL && match.handler->handler.streamBody
           && match.handler->handler.run != COR_RUN_INLINE;
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

/* A body that came whole: out of r->body, or of its file when it was
 * spooled (a pread touches no page of the mapping, so a large body passes
 * in the caller's buffer). */
static ssize_t
wholeTake(CorRequest* r, void* buf, size_t len)
{
    const CorBodyIn* in = r->bodyIn;
    size_t n = r->bodyLen - r->bodyTaken;

    n = n < len ? n : len;
    if (n == 0) {
        return 0;
    }
    if (in != NULL && in->spoolFd >= 0) {
        ssize_t got = pread(in->spoolFd, buf, n, (off_t)r->bodyTaken);

        if (got <= 0) {
            return got < 0 ? -errno : -EIO;
        }
        n = (size_t)got;
    } else {
        memcpy(buf, r->body + r->bodyTaken, n);
    }
    r->bodyTaken += n;
    return (ssize_t)n;
}

ssize_t
corRequestBodyTake(CorRequest* r, void* buf, size_t len)
{
    CorBodyIn* in = r->bodyIn;
    size_t n;
    bool post;
    int end;

    if (in == NULL || in->whole) {
        return wholeTake(r, buf, len);
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
            corRequestHold(r); /* it must not be released before */
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
