/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/1.x connection's life on the kit (corKit.h), apart from the
 * requests it serves (corHttpServe.c) and reads (corHttpRequest.c): its
 * one deadline and what arms it, its output's flush, its end (a lingering
 * close after a refusal), its hand-over to another protocol, a stop and a
 * drain.
 *
 * One deadline per connection, armed by the state it enters
 * (corHttpConnStateSet, HttpState in corHttpInt.h) and nowhere else: the
 * head and the body together must come within limits.request_timeout of
 * the first byte (slowloris, slow bodies), each piece of a body within
 * limits.body_timeout (a body handed to its handler as it comes: only
 * that, and only while the handler is not holding the reading back), the
 * next request within limits.keepalive_timeout, and pending output must
 * make progress within limits.send_timeout (a client that does not
 * read). Progress moves no timer: the deadline asks again when it comes.
 * Rejected: re-arming at each piece of a body (a clock read and a heap
 * push each), and a timer per wait (a connection would carry several). An
 * answer that refuses a request closes the way nginx's lingering close does:
 * the write side is shut, and what the client still sends is read and dropped
 * for a bounded time, so that a client in the middle of an upload reads the
 * answer instead of a reset.
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

/* How long c may stay idle: keep-alive, or less once its generation
 * drains (a connection still to bring its first request is not cut);
 * over TLS, the handshake and the first request's first byte must come
 * within the listener's handshake timeout instead. keepalive_timeout 0
 * turns keep-alive off (nginx's meaning): a new connection then has the
 * request timeout to bring its first byte. */
static uint64_t
idleMs(const HttpConn* c)
{
    uint64_t ms = corLimits()->keepaliveTimeoutMs;

    if (!c->served && c->handshakeMs > 0) {
        return c->handshakeMs;
    }
    if (ms == 0) {
        return corLimits()->requestTimeoutMs;
    }
    return c->hl->draining && c->served && ms > DRAIN_IDLE_MS ? DRAIN_IDLE_MS
                                                              : ms;
}

/* Between two pieces of a body: its route's limit (a route's limits may
 * say body_timeout). */
static uint64_t
bodyTimeoutMs(const HttpConn* c)
{
    return corLimitsOf(c->req != NULL ? &c->req->r : NULL)->bodyTimeoutMs;
}

static inline uint64_t
earlier(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/*
 * When c's wait in its state ends (on the loop's clock), or 0 when the
 * state waits on nobody: the state's deadline, from when its wait began
 * or the client last made progress, unless output waits on a client that
 * does not read (send_timeout from when it stalled, the kit's figure).
 * now: the loop's clock.
 */
static uint64_t
deadlineDue(const HttpConn* c, uint64_t now)
{
    const CorLimits* limits = corLimits();

    if (c->k.outStalledMs != 0) {
        return c->k.outStalledMs + limits->sendTimeoutMs;
    }
    switch (c->state) {
    case HTTP_IDLE:
        /* From the last byte of the answer before, once it went. */
        return (c->k.sentMs > c->waitMs ? c->k.sentMs : c->waitMs) + idleMs(c);
    case HTTP_HEAD:
        return c->readStartMs + limits->requestTimeoutMs;
    case HTTP_BODY:
        return earlier(c->waitMs + bodyTimeoutMs(c),
                       c->readStartMs + limits->requestTimeoutMs);
    case HTTP_SERVING:
        /* A body its handler takes as it comes may last longer than a
         * request: only each piece is timed, and not while the handler
         * holds the reading back (looked at again meanwhile). */
        if (c->bodyStream != HTTP_BODY_STREAMING) {
            return 0;
        }
        return (c->bodyHeld ? now : c->waitMs) + bodyTimeoutMs(c);
    case HTTP_LINGER:
        return earlier(c->waitMs + LINGER_IDLE_MS, c->lingerEndMs);
    case HTTP_CLOSING:
    case HTTP_UPGRADED:
        break;
    }
    return 0;
}

/* Arm the kit's one deadline for c's wait; a state that waits on nobody
 * leaves it as it is (corHttpConnExpired finds nothing due): re-arming it
 * for the next wait is then a push back, which costs nothing
 * (corEvTimer.c). */
static void
deadlineArm(HttpConn* c, uint64_t now)
{
    uint64_t due = deadlineDue(c, now);

    if (due != 0) {
        corKitConnDeadlineIn(&c->k, due > now ? due - now : 0);
    }
}

/*
 * The one place a state's deadline is armed (corHttpConnStateSet), as
 * nginx arms a timer with each handler it swaps in. Progress within a
 * state (corHttpConnProgress) moves no timer: when it fires,
 * corHttpConnExpired asks again and re-arms for what is left.
 */
void
corHttpConnWaitArm(HttpConn* c)
{
    uint64_t now = corEvNow(c->hl->loop);

    c->waitMs = now;
    deadlineArm(c, now);
}

void
corHttpConnExpired(CorKitConn* k)
{
    HttpConn* c = corContainerOf(k, HttpConn, k);
    uint64_t now = corEvNow(c->hl->loop);
    uint64_t due = deadlineDue(c, now);
    bool stalled = k->outStalledMs != 0;

    if (due == 0) {
        return; /* nothing is waited for in this state */
    }
    if (due > now) {
        deadlineArm(c, now); /* progress since it was armed */
        return;
    }
    if (!stalled
        && (c->state == HTTP_HEAD || c->state == HTTP_BODY
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
                              corBufPending(&k->out))
                   < 0) {
            /* It is being closed for not sending; a lost 408 is fine. */
        }
        corHttpConnClose(c);
        return;
    }
    if (stalled) {
        /* A client that stopped reading: reset, so that the kernel drops
         * what it still buffers for it instead of holding it. */
        struct linger reset = { .l_onoff = 1, .l_linger = 0 };

        setsockopt(c->t.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    }
    corHttpConnClose(c);
}

/* ---- The output ---------------------------------------------------------- */

int
corHttpConnFlush(HttpConn* c)
{
    bool stalled = c->k.outStalledMs != 0;

    if (corKitConnFlush(&c->k) != 0) {
        return -1;
    }
    corHttpConnFlushed(c, stalled);
    return 0;
}

void
corHttpConnFlushed(HttpConn* c, bool wasStalled)
{
    if (wasStalled || c->k.outStalledMs != 0) {
        deadlineArm(c, corEvNow(c->hl->loop));
    }
    if (corKitConnOutPending(&c->k) == 0 && c->k.out.data != NULL) {
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
            corHttpConnProgress(c);
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
    c->lingerEndMs = corEvNow(c->hl->loop) + LINGER_MS;
    c->lingerBytes = 0;
    corHttpConnStateSet(c, HTTP_LINGER);
    c->k.in.off = c->k.in.len; /* what was read goes unread */
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

    corKitConnStop(&c->k); /* the accept slot goes with it */
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
    if (c->req != NULL) {
        if (c->state == HTTP_UPGRADED) {
            /* Its 101 never went out: the session runs on no connection. */
            c->req->conn = NULL;
            corRequestSent(&c->req->r);
        } else if (c->state == HTTP_SERVING) {
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
        corHttpConnStateSet(c, HTTP_IDLE); /* its shorter wait, from now */
    }
}
