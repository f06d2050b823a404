/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/1.x connection's life on the kit (corKit.h), apart from the
 * requests it serves (corHttpServe.c) and reads (corHttpRequest.c): its
 * one deadline and what arms it, its output's flush, its end (a lingering
 * close after a refusal), its hand-over to another protocol, a stop and a
 * drain.
 *
 * One deadline per connection, re-armed as the state changes: the head and
 * the body together must come within limits.request_timeout of the first
 * byte (slowloris, slow bodies), each piece of a body within
 * limits.body_timeout (a body handed to its handler as it comes: only
 * that, and only while the handler is not holding the reading back), the
 * next request within limits.keepalive_timeout,
 * and pending output must make progress within limits.send_timeout (a
 * client that does not read). An answer that refuses a request closes the
 * way nginx's lingering close does: the write side is shut, and what the
 * client still sends is read and dropped for a bounded time, so that a
 * client in the middle of an upload reads the answer instead of a reset.
 */
#include "corHttpInt.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>

#define STOP_FLUSH_MS 100
/* A lingering close lasts while the client sends at least every
 * LINGER_IDLE_MS, at most LINGER_MS and LINGER_BYTES in all (nginx's
 * lingering_timeout and lingering_time). */
#define LINGER_IDLE_MS 5000
#define LINGER_MS 30000
#define LINGER_BYTES (64 * 1024 * 1024)
/* While a generation drains, a keep-alive connection idle between requests
 * closes after this long: a busy client's next request comes sooner (and
 * is answered, with a close), an idle client's does not hold the drain. */
#define DRAIN_IDLE_MS 500

/* ---- The deadline -------------------------------------------------------- */

void
corHttpConnExpired(CorKitConn* k)
{
    HttpConn* c = corContainerOf(k, HttpConn, k);
    bool pending = corKitConnOutPending(k) > 0;

    if (c->state == HTTP_SERVING && !pending && !corHttpBodyWaits(c)) {
        return;     /* a request with its handler has no deadline here */
    }
    if (!pending && (c->state == HTTP_HEAD || c->state == HTTP_BODY
                     || corHttpBodyWaits(c))) {
        /* Too slow a head or body: say so, then close at once. No
         * lingering here: the client earned its cut, and a slow one that
         * still sends may get a reset instead of the 408. A body its
         * handler takes as it comes fails; once its answer's head went,
         * the close alone says it. */
        bool answered = c->req != NULL && c->req->answered;

        corHttpBodyFail(c, -ETIMEDOUT);
        k->out.len = k->out.off = 0;
        corHttpLimitsSay(c, 408);
        if (!answered && corHttpErrorAppend(c, 408) == 0
            && c->t.ops->send(&c->t, corBufHead(&k->out),
                              corBufPending(&k->out)) < 0) {
            /* It is being closed for not sending; a lost 408 is fine. */
        }
        corHttpConnClose(c);
        return;
    }
    if (pending) {
        /* A client that stopped reading: reset, so that the kernel drops
         * what it still buffers for it instead of holding it. */
        struct linger reset = { .l_onoff = 1, .l_linger = 0 };

        setsockopt(c->t.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    }
    corHttpConnClose(c);
}

/* What is left of limits.request_timeout for the request being read: its
 * head and body together, from its first byte. */
static uint64_t
readLeftMs(const HttpConn* c)
{
    uint64_t limit = corLimits()->requestTimeoutMs;
    uint64_t spent = corEvNow(c->hl->loop) - c->readStartMs;

    return spent < limit ? limit - spent : 1;
}

/* How long c may stay idle: keep-alive, or less once its generation
 * drains (a connection still to bring its first request is not cut).
 * keepalive_timeout 0 turns keep-alive off (nginx's meaning): a new
 * connection then has the request timeout to bring its first byte. */
static uint64_t
idleMs(const HttpConn* c)
{
    uint64_t ms = corLimits()->keepaliveTimeoutMs;

    if (ms == 0) {
        return corLimits()->requestTimeoutMs;
    }

    return c->hl->draining && c->served && ms > DRAIN_IDLE_MS
           ? DRAIN_IDLE_MS : ms;
}

/*
 * A new state gets a fresh deadline; progress (a read of body, a write)
 * restarts the body and send timers, while the head's and the idle
 * connection's are deadlines.
 */
void
corHttpConnArm(HttpConn* c, bool progress)
{
    CorEvLoop* loop = c->hl->loop;
    HttpState want = corKitConnOutPending(&c->k) > 0 ? HTTP_OUTPUT
                     : corHttpBodyWaits(c) ? HTTP_BODY : c->state;
    uint64_t ms;

    switch (want) {
    case HTTP_OUTPUT:
        ms = corLimits()->sendTimeoutMs;
        break;
    case HTTP_IDLE:
        ms = idleMs(c);
        break;
    case HTTP_HEAD:
        ms = readLeftMs(c);
        progress = false;
        break;
    case HTTP_BODY:
        /* A body its handler takes as it comes (HTTP_SERVING) may last
         * longer than a request: only each piece is timed. */
        ms = corLimitsOf(c->req != NULL ? &c->req->r : NULL)
                 ->bodyTimeoutMs;   /* its route's */
        if (c->state == HTTP_BODY && readLeftMs(c) < ms) {
            ms = readLeftMs(c);
        }
        break;
    case HTTP_LINGER:
        ms = LINGER_IDLE_MS;
        if (c->lingerEndMs < corEvNow(loop) + ms) {
            ms = c->lingerEndMs > corEvNow(loop)
                     ? c->lingerEndMs - corEvNow(loop) : 1;
        }
        break;
    case HTTP_SERVING:
        /* No deadline while the handler has it, but it stays armed
         * (corHttpConnExpired ignores it): re-arming it for the next idle
         * wait is then a push back, which costs nothing (corEvTimer.c). */
        c->timerFor = want;
        return;
    default:
        corKitConnDeadlineStop(&c->k);
        return;
    }
    if (want == HTTP_OUTPUT) {
        /* From when the output stalled (the kit's figure): it must make
         * progress within the limit, however often epoll calls. */
        c->timerFor = want;
        corKitConnDeadline(&c->k, c->k.outStalledMs > 0 ? c->k.outStalledMs
                                                        : corEvNow(loop), ms);
        return;
    }
    if (!c->k.deadline.active || c->timerFor != want || progress) {
        c->timerFor = want;
        corKitConnDeadlineIn(&c->k, ms);
    }
}

/* ---- The output ---------------------------------------------------------- */

int
corHttpConnFlush(HttpConn* c)
{
    if (corKitConnFlush(&c->k) != 0) {
        return -1;
    }
    corHttpConnFlushed(c);
    return 0;
}

void
corHttpConnFlushed(HttpConn* c)
{
    if (corKitConnOutPending(&c->k) > 0) {
        corHttpConnArm(c, false);
    } else if (c->k.out.data != NULL) {
        corHttpBufReturn(c->hl, &c->k.out);
    }
}

/* ---- The end ------------------------------------------------------------- */

/* Read and drop what a client sends after an answer that refused it.
 * Returns 0 to go on lingering, -1 to close (its end, an error, or too
 * much). */
static int
lingerDrain(HttpConn* c)
{
    char sink[4096];

    for (;;) {
        ssize_t n = c->t.ops->recv(&c->t, sink, sizeof(sink));

        if (n > 0) {
            c->lingerBytes += (size_t)n;
            if (c->lingerBytes > LINGER_BYTES) {
                return -1;
            }
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            return n < 0 && errno == EAGAIN ? 0 : -1;
        }
    }
}

int
corHttpConnLinger(HttpConn* c)
{
    if (lingerDrain(c) != 0) {
        corHttpConnClose(c);
        return -1;
    }
    corHttpConnArm(c, true);
    return 0;
}

/*
 * After an answer that refused a request the client may still be sending
 * (an upload refused with 413), and a close with its bytes unread makes
 * the kernel reset the connection, which loses the answer: shut the write
 * side instead, so that the client sees the answer end, and drop what it
 * sends until it closes.
 */
void
corHttpConnEnd(HttpConn* c)
{
    /* Bytes the client sent after this answer (pipelined requests behind
     * a "Connection: close") would make the close a reset too. */
    bool unread = corBufPending(&c->k.in) > 0 || c->readPaused;

    if (!(c->linger || unread) || c->peerClosed
        || corTransportShutWrite(&c->t) != 0) {
        corHttpConnClose(c);
        return;
    }
    c->state = HTTP_LINGER;
    c->lingerEndMs = corEvNow(c->hl->loop) + LINGER_MS;
    c->lingerBytes = 0;
    c->k.in.off = c->k.in.len;  /* what was read goes unread */
    corHttpInputRelease(c);
    corHttpConnLinger(c);
}

/* Take c off its loop: its socket's events, its deadline, the loop's set,
 * the listener's count. */
static void
connUnlink(HttpConn* c)
{
    corKitConnStop(&c->k);
    corAcceptClosed();
}

/* What c holds besides its socket, and c. */
static void
connFree(HttpConn* c)
{
    corEvSoonStop(&c->bodySoon);
    corHttpBufReturn(c->hl, &c->k.in);
    corHttpBufReturn(c->hl, &c->k.out);
    corKitConnFree(&c->k);
    free(c);
}

/*
 * The socket leaves the loop's epoll first (the taker waits on it
 * itself); whatever fn does, a request it may release is not touched
 * after. An upgrade hands over this way (corHttpServe.c), and so can a
 * protocol that takes a connection whole.
 */
void
corHttpConnHandOff(HttpConn* c, HttpHandOffFn fn, void* arg)
{
    CorTransport t = c->t;
    const CorBuf* in = &c->k.in;
    const CorBuf* out = &c->k.out;

    corKitConnStop(&c->k);      /* the accept slot goes with it */
    fn(arg, &t, in->data != NULL ? corBufHead(in) : NULL, corBufPending(in),
       out->data != NULL ? corBufHead(out) : NULL, corBufPending(out));
    connFree(c);
}

void
corHttpConnClose(HttpConn* c)
{
    corHttpBodyFail(c, -ECONNRESET);
    connUnlink(c);
    c->t.ops->close(&c->t);
    if (c->upgrading != NULL) {
        /* Its 101 never went out: the session runs on no connection. */
        HttpRequest* req = c->upgrading;

        c->upgrading = NULL;
        req->conn = NULL;
        corRequestSent(&req->r);
    }
    if (c->req != NULL) {
        if (c->state == HTTP_SERVING) {
            /* Its handler stops waiting and finishes into the void. */
            corRequestCancel(&c->req->r);
            c->req->conn = NULL;
        } else {
            corHttpRequestFree(c->req);
        }
    }
    connFree(c);
}

void
corHttpConnStop(HttpConn* c)
{
    uint64_t deadline = corEvClockMs() + STOP_FLUSH_MS;

    corHttpBodyFail(c, -ECONNRESET);
    if (c->state == HTTP_SERVING && c->req != NULL) {
        /* Still with its handler at a stop: answered as failed, unless a
         * stream's head is out already (then the close says it). */
        bool streaming = c->req->r.stream != NULL;

        c->req->conn = NULL;
        c->req = NULL;
        if (!streaming) {
            corHttpErrorAppend(c, 503);
        }
    }
    while (corKitConnOutPending(&c->k) > 0 && corEvClockMs() < deadline) {
        struct pollfd pfd = { .fd = c->t.fd, .events = POLLOUT };

        if (corHttpConnFlush(c) != 0 || poll(&pfd, 1, STOP_FLUSH_MS) <= 0) {
            break;
        }
    }
    corHttpConnClose(c);
}

/*
 * A drain closes a keep-alive connection idle between requests soon
 * (DRAIN_IDLE_MS), rather than let one idle client hold the old generation
 * for the whole stop_timeout. Not at once, as nginx does: a client between
 * two requests of a run would see its next request meet a closed
 * connection; this way it is answered, with "Connection: close".
 */
void
corHttpConnDrain(HttpConn* c)
{
    /* One still to bring its first request keeps its deadline: over TLS
     * that is the handshake's, shorter than keep-alive. */
    if (c->state == HTTP_IDLE && c->served
        && corKitConnOutPending(&c->k) == 0) {
        c->timerFor = HTTP_IDLE;
        corKitConnDeadlineIn(&c->k, idleMs(c));
    }
}
