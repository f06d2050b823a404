/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request body that comes while its handler runs (CorHandler.streamBody
 * on a protocol that streams it: HTTP/2, HTTP/1.1): the protocol puts the
 * pieces in as they come, on the request's loop, and the handler takes
 * them out wherever it runs (a coroutine of that loop, a worker). What the
 * handler took is told back to the protocol on the loop
 * (ops->bodyConsumed), which lets the client send as much more: so what
 * waits here is bounded by the protocol's window (HTTP/1.1's: how much it
 * hands on unread before it stops reading), not by the body's size.
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
 *
 * Here the body's container: what the protocol puts in, what the HTTP
 * client watches, and its free at the request's release; what the handler
 * takes out is corRequestBodyTake.c, whose tell back to the protocol
 * holds the request, so that the release (corRequestHold.c) calls down
 * into this file and this file into nothing above it.
 */
#include "corRequestBodyIn.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

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
        fn(in->watchArg); /* set and cleared on this loop only */
    }
}

/* ---- The protocol's side ------------------------------------------------- */

int
corRequestBodyBegin(CorRequest* r)
{
    CorBodyIn* in = calloc(1, sizeof(*in));

    if (in == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_init(&in->lock, NULL);
    in->wakeFd = -1;
    in->spoolFd = -1;
    in->lengthSaid = -1;
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
corRequestBodyLengthSay(CorRequest* r, uint64_t len)
{
    r->bodyIn->lengthSaid = len <= INT64_MAX ? (int64_t)len : -1;
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

void
corRequestBodyWatch(CorRequest* r, CorBodyWatchFn fn, void* arg)
{
    if (r->bodyIn != NULL) {
        r->bodyIn->watch = fn;
        r->bodyIn->watchArg = arg;
    }
}

int64_t
corRequestBodySize(const CorRequest* r)
{
    const CorBodyIn* in = r->bodyIn;

    return in == NULL || in->whole ? (int64_t)r->bodyLen : in->lengthSaid;
}

int
corRequestBodyWakeFd(CorRequest* r)
{
    CorBodyIn* in = r->bodyIn;
    int fd;

    if (in == NULL || in->whole) {
        return -EINVAL;
    }
    pthread_mutex_lock(&in->lock);
    if (in->wakeFd < 0) {
        in->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    }
    fd = in->wakeFd >= 0 ? in->wakeFd : -errno;
    if (fd >= 0 && (corBufPending(&in->buf) > 0 || in->end != 0)) {
        wakeLocked(in); /* news before the watch began */
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
    corRequestBodySpoolFree(in);
    corBufFree(&in->buf);
    pthread_mutex_destroy(&in->lock);
    free(in);
    r->bodyIn = NULL;
}
