/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/1.x connection on its loop: read, parse, hand the request to the
 * core, write the answer, and again (keep-alive, pipelining).
 *
 * Bytes move through the connection's transport, which its listener
 * picks (plain or TLS), never through the socket directly.
 *
 * The socket is armed once, edge-triggered for input and output, and never
 * re-armed: a connection costs no epoll_ctl after its first. Requests are
 * served one at a time and answered in order; while one is with its
 * handler, nothing more is read or parsed, so a pipelined request never
 * overtakes the one before it. Inline answers of a pipelined batch are
 * gathered in the output buffer and written with one write().
 *
 * Memory: a connection holds an input or output buffer only while bytes
 * wait in it (corHttpBuf.c). A request owns what it reads: its head is
 * copied into its own record once parsed, and its body is handed over
 * whole, so whatever closes the connection (a reset, a timeout, a stop)
 * frees nothing a request in flight still reads, on any thread.
 *
 * One timer per connection, re-armed as the state changes: the head and
 * the body together must come within limits.request_timeout of the first
 * byte (slowloris, slow bodies), each piece of a body within
 * limits.body_timeout, the next request within limits.keepalive_timeout,
 * and pending output must make progress within limits.send_timeout (a
 * client that does not read). An answer that refuses a request closes the
 * way nginx's lingering close does: the write side is shut, and what the
 * client still sends is read and dropped for a bounded time, so that a
 * client in the middle of an upload reads the answer instead of a reset.
 */
#include "corHttpInt.h"
#include "corHttp2Int.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* The room a read asks for. */
#define READ_ROOM 1024
/* Past this much unsent output, no further pipelined request is served
 * until the client reads. */
#define OUT_HIGH_WATER (1024 * 1024)
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

static void requestDone(CorRequest* r);
static void requestRelease(CorRequest* r);
static void streamData(CorRequest* r, const void* data, size_t len);
static void streamEnd(CorRequest* r);
static void streamAbort(CorRequest* r);
static bool streamAlive(const CorRequest* r);
static size_t streamBacklog(const CorRequest* r);
static bool upgradable(const CorRequest* r);
static void httpProcess(HttpConn* c);
static void upgradeHandOff(HttpConn* c);
static bool http2HandOff(HttpConn* c);

static const CorProtocolOps httpOps = {
    .done = requestDone,
    .release = requestRelease,
    .streamData = streamData,
    .streamEnd = streamEnd,
    .streamAlive = streamAlive,
    .streamBacklog = streamBacklog,
    .streamAbort = streamAbort,
    .upgradable = upgradable,
};

/* ---- Timers -------------------------------------------------------------- */

static bool
outputPending(const HttpConn* c)
{
    return c->outSent < c->outLen || c->fileLeft > 0;
}

static void
fileDone(HttpConn* c)
{
    if (c->fileFd >= 0) {
        close(c->fileFd);
        c->fileFd = -1;
    }
    c->fileLeft = 0;
}

/* A refusal at a limit (413, 414, 431, 408) is the core's: said and
 * counted as every protocol's. Another status is HTTP's own. */
static void
limitsSay(const HttpConn* c, int status)
{
    const HttpRequest* req = c->req;
    char who[48];
    char what[96];

    if (corLimitsText(status) == NULL) {
        return;
    }
    corPeerAddress(&c->peer, who, sizeof(who));
    if (req != NULL) {
        snprintf(what, sizeof(what), "%.*s %.*s",
                 (int)(req->r.methodLen < 16 ? req->r.methodLen : 16),
                 req->r.method,
                 (int)(req->r.pathLen < 64 ? req->r.pathLen : 64),
                 req->r.path);
    } else {
        snprintf(what, sizeof(what), "a request's head");
    }
    corLimitsRefused("http", who, what, status);
}

static void
onTimer(CorEvTimer* timer)
{
    HttpConn* c = corContainerOf(timer, HttpConn, timer);

    if (c->state == HTTP_SERVING && !outputPending(c)) {
        return;     /* a request with its handler has no deadline here */
    }
    if (!outputPending(c) && (c->state == HTTP_HEAD
                              || c->state == HTTP_BODY)) {
        /* Too slow a head or body: say so, then close at once. No
         * lingering here: the client earned its cut, and a slow one that
         * still sends may get a reset instead of the 408. */
        c->outLen = c->outSent = 0;
        limitsSay(c, 408);
        if (corHttpErrorAppend(c, 408) == 0
            && c->t.ops->send(&c->t, c->out, c->outLen) < 0) {
            /* It is being closed for not sending; a lost 408 is fine. */
        }
        corHttpConnClose(c);
        return;
    }
    if (outputPending(c)) {
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
 * Arm the timer the state (or pending output) calls for. A new state gets
 * a fresh timer; progress (a read of body, a write) restarts the body and
 * send timers, while the head's and the idle connection's are deadlines.
 */
static void
timerUpdate(HttpConn* c, bool progress)
{
    const CorLimits* limits = corLimits();
    HttpState want = outputPending(c) ? HTTP_OUTPUT : c->state;
    uint64_t ms;

    switch (want) {
    case HTTP_OUTPUT:
        ms = limits->sendTimeoutMs;
        break;
    case HTTP_IDLE:
        ms = idleMs(c);
        break;
    case HTTP_HEAD:
        ms = readLeftMs(c);
        progress = false;
        break;
    case HTTP_BODY:
        ms = limits->bodyTimeoutMs;
        if (readLeftMs(c) < ms) {
            ms = readLeftMs(c);
        }
        break;
    case HTTP_LINGER:
        ms = LINGER_IDLE_MS;
        if (c->lingerEndMs < corEvNow(c->hl->loop) + ms) {
            ms = c->lingerEndMs > corEvNow(c->hl->loop)
                     ? c->lingerEndMs - corEvNow(c->hl->loop) : 1;
        }
        break;
    case HTTP_SERVING:
        /* No deadline while the handler has it, but the timer stays armed
         * (onTimer ignores it): re-arming it for the next idle wait is
         * then a push back, which costs nothing (corEvTimer.c). */
        c->timerFor = want;
        return;
    default:
        corEvTimerStop(c->hl->loop, &c->timer);
        return;
    }
    if (!c->timer.active || c->timerFor != want || progress) {
        c->timerFor = want;
        corEvTimerStart(c->hl->loop, &c->timer, ms, onTimer);
    }
}

/* ---- Buffers ------------------------------------------------------------- */

/* Make room for need more bytes of input, within what a request may be.
 * The buffer comes from the loop when the connection has none. */
static bool
inputReserve(HttpConn* c, size_t need)
{
    const CorLimits* limits = corLimits();
    size_t most = limits->headerBytes + limits->bodyBytes + 4096;
    size_t cap;
    char* grown;

    if (c->in == NULL) {
        c->in = corHttpBufTake(c->hl);
        if (c->in == NULL) {
            return false;
        }
        c->inCap = HTTP_BUF_BYTES;
        c->inStart = c->inLen = c->bodyRaw = 0;
    }
    /* Slide the request being read to the front, so that one that came
     * behind earlier pipelined ones has the whole budget. Nothing points
     * into the buffer: a parsed head was copied out. */
    if (c->inStart > 0 && (c->state == HTTP_IDLE || c->state == HTTP_HEAD
                           || c->state == HTTP_BODY)) {
        size_t shift = c->inStart;

        memmove(c->in, c->in + shift, c->inLen - shift);
        if (c->state == HTTP_BODY) {
            c->bodyRaw -= shift;
        }
        c->inLen -= shift;
        c->inStart = 0;
    }
    if (c->inCap - c->inLen >= need) {
        return true;
    }
    cap = c->inCap;
    while (cap - c->inLen < need && cap < most) {
        cap *= 2;
    }
    if (cap > most) {
        cap = most;
    }
    if (cap <= c->inCap) {
        return c->inCap > c->inLen;
    }
    grown = realloc(c->in, cap);
    if (grown == NULL) {
        return false;
    }
    c->in = grown;
    c->inCap = cap;
    return true;
}

/* Every byte read was consumed and no request is being read: the buffer
 * goes back to the loop (an idle connection holds none). */
static void
inputRelease(HttpConn* c)
{
    if (c->in == NULL || c->inStart != c->inLen || c->state == HTTP_HEAD
        || c->state == HTTP_BODY) {
        return;
    }
    corHttpBufGive(c->hl, c->in, c->inCap);
    c->in = NULL;
    c->inCap = c->inLen = c->inStart = c->bodyRaw = 0;
}

static void
outputRelease(HttpConn* c)
{
    corHttpBufGive(c->hl, c->out, c->outCap);
    c->out = NULL;
    c->outCap = c->outLen = c->outSent = 0;
}

/* ---- Reading and writing ------------------------------------------------- */

/*
 * A client sent plain HTTP to a TLS listener: answered 400 in plain text,
 * as nginx does, then closed lingering, so that it reads the answer rather
 * than a reset. Its request is never served: the connection only closes.
 */
static void
plainRefuse(HttpConn* c)
{
    corHttpErrorAppendWhy(c, 400, "The plain HTTP request was sent to HTTPS "
                          "port");
    c->state = HTTP_CLOSING;
    c->linger = true;
}

/* Read what the socket has. Returns -1 on an error (close). */
static int
httpRead(HttpConn* c)
{
    c->readPaused = false;
    for (;;) {
        ssize_t n;
        size_t room;

        if (!inputReserve(c, READ_ROOM)) {
            c->readPaused = true;       /* full: read when it empties */
            return 0;
        }
        room = c->inCap - c->inLen;
        n = c->t.ops->recv(&c->t, c->in + c->inLen, room);
        if (n > 0) {
            c->inLen += (size_t)n;
            /* A short read drained it, unless the peer shut its side:
             * then its end is still to read, and no edge announces it. */
            if ((size_t)n < room && !c->peerShut) {
                return 0;
            }
        } else if (n == 0) {
            c->peerClosed = true;
            return 0;
        } else if (errno == EAGAIN) {
            return 0;
        } else if (errno == EPROTO && corTransportTlsPlainPeer(&c->t)) {
            plainRefuse(c);
            return 0;
        } else if (errno != EINTR) {
            return -1;
        }
    }
}

/* Write the pending output. Returns -1 on an error (close). */
static int
httpFlush(HttpConn* c)
{
    bool wrote = false;

    while (outputPending(c)) {
        ssize_t n;

        if (c->outSent == c->outLen) {
            /* The head is out: the file follows, kernel to kernel. */
            n = c->t.ops->sendFile(&c->t, c->fileFd, &c->fileOffset,
                                   c->fileLeft);
            if (n > 0) {
                c->fileLeft -= (size_t)n;
                wrote = true;
                if (c->fileLeft == 0) {
                    fileDone(c);
                }
                continue;
            }
            if (n == 0) {
                return -1;      /* the file is shorter than it said */
            }
        } else {
            n = c->t.ops->send(&c->t, c->out + c->outSent,
                               c->outLen - c->outSent);
        }

        if (n > 0) {
            c->outSent += (size_t)n;
            wrote = true;
        } else if (n < 0 && errno == EAGAIN) {
            /* Only progress restarts the send timer: a client that reads
             * nothing is cut at send_timeout, however often epoll calls. */
            timerUpdate(c, wrote);
            return 0;
        } else if (n < 0 && errno != EINTR) {
            return -1;
        }
    }
    outputRelease(c);
    return 0;
}

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

/*
 * The last answer is out: close. After an answer that refused a request
 * the client may still be sending (an upload refused with 413), and a
 * close with its bytes unread makes the kernel reset the connection, which
 * loses the answer: shut the write side instead, so that the client sees
 * the answer end, and drop what it sends until it closes.
 */
static void
connEnd(HttpConn* c)
{
    uint64_t now = corEvNow(c->hl->loop);
    /* Bytes the client sent after this answer (pipelined requests behind
     * a "Connection: close") would make the close a reset too. */
    bool unread = c->inLen > c->inStart || c->readPaused;

    if (!(c->linger || unread) || c->peerClosed
        || corTransportShutWrite(&c->t) != 0) {
        corHttpConnClose(c);
        return;
    }
    c->state = HTTP_LINGER;
    c->lingerEndMs = now + LINGER_MS;
    c->lingerBytes = 0;
    c->inStart = c->inLen;      /* what was read goes unread */
    inputRelease(c);
    timerUpdate(c, true);
    if (lingerDrain(c) != 0) {
        corHttpConnClose(c);
    }
}

/* Refuse the request being read with status; the connection ends once the
 * answer is out, lingering. */
static void
refuse(HttpConn* c, int status)
{
    limitsSay(c, status);
    corHttpErrorAppend(c, status);
    c->state = HTTP_CLOSING;
    c->linger = true;
}

/* What a finished answer leaves: the next request, or the close. */
static void
answered(HttpConn* c, CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);

    c->state = c->keepAlive ? HTTP_IDLE : HTTP_CLOSING;
    c->served = true;
    /* The next request gets a record of its own: this one stays the
     * core's until its post-response phase is over, which may outlast the
     * connection; then it is released into the void. */
    c->req = NULL;
    c->releasing = req;
    corRequestSent(r);
    if (c->releasing == req) {
        req->conn = NULL;
    }
    c->releasing = NULL;
    if (c->processing) {
        return;                     /* httpProcess goes on by itself */
    }
    /* Bytes that came while the handler had the request raised their edge
     * then (onIo paused the read), and a peer that shut its side leaves an
     * end to read that no further edge announces; otherwise nothing can
     * have come, and a read would only say EAGAIN. */
    if (c->readPaused || c->peerShut) {
        if (httpRead(c) != 0) {
            corHttpConnClose(c);
            return;
        }
    }
    httpProcess(c);
}

/* ---- Requests ------------------------------------------------------------ */

/* Where p, inside the len bytes at base, is in their copy; p as it is when
 * it points elsewhere (a constant "/", NULL). */
static const char*
movedInto(const char* p, const char* base, size_t len, char* copy)
{
    uintptr_t at = (uintptr_t)p;

    if (at < (uintptr_t)base || at >= (uintptr_t)base + len) {
        return p;
    }
    return copy + (at - (uintptr_t)base);
}

/*
 * The record of a request whose head h was just parsed at the connection's
 * inStart: the head's bytes are copied behind it, and everything it says
 * points into that copy, exactly as long as the head is (its fields, not
 * the configured maximum); then the raw path, when decoding left it in
 * the loop's room rather than in the head.
 */
static HttpRequest*
requestCreate(HttpConn* c, const CorHttpRequestHead* h)
{
    const char* base = c->in + c->inStart;
    size_t fields = h->headerCount * sizeof(CorHeader);
    size_t raw = h->rawPath == h->rawBuf ? h->rawPathLen : 0;
    HttpRequest* req = malloc(sizeof(*req) + fields + h->headLen + raw);
    CorRequest* r;
    char* copy;

    if (req == NULL) {
        return NULL;
    }
    copy = (char*)req->headers + fields;
    memcpy(copy, base, h->headLen);
    memcpy(copy + h->headLen, h->rawBuf, raw);
#define MOVED(p) movedInto((p), base, h->headLen, copy)
    for (unsigned i = 0; i < h->headerCount; i++) {
        req->headers[i] = (CorHeader){ MOVED(h->headers[i].name),
                                       h->headers[i].nameLen,
                                       MOVED(h->headers[i].value),
                                       h->headers[i].valueLen };
    }
    r = &req->r;
    memset(r, 0, sizeof(*r));
    r->method = MOVED(h->method);
    r->methodLen = h->methodLen;
    r->path = MOVED(h->path);
    r->pathLen = h->pathLen;
    r->query = MOVED(h->query);
    r->queryLen = h->queryLen;
    r->rawPath = raw > 0 ? copy + h->headLen : MOVED(h->rawPath);
    r->rawPathLen = h->rawPathLen;
    r->headers = req->headers;
    r->headerCount = h->headerCount;
    r->body = "";
    r->head = h->head;
    corPeerAddress(&c->peer, req->remote, sizeof(req->remote));
    r->remote = req->remote;
    r->secure = c->tls;
    r->target = MOVED(h->target);
#undef MOVED
    r->targetLen = h->targetLen;
    r->version = h->versionMinor == 0 ? "HTTP/1.0" : "HTTP/1.1";
    req->conn = c;
    req->hl = c->hl;
    req->contentLength = h->contentLength;
    req->chunked = h->chunked;
    req->keepAlive = h->keepAlive;
    req->expectContinue = h->expectContinue;
    req->versionMinor = h->versionMinor;
    req->body = NULL;
    req->bodyCap = 0;
    return req;
}

static void
requestFree(HttpRequest* req)
{
    corHttpBufGive(req->hl, req->body, req->bodyCap);
    free(req);
}

/*
 * The body is whole: the request takes it. When nothing follows it in the
 * input (no pipelined request behind), the request takes the buffer
 * itself, and the connection takes a fresh one when bytes come; else the
 * body is copied out. Returns 0 or -1 (no memory).
 */
static int
bodyTake(HttpConn* c, HttpRequest* req)
{
    char* body = c->in + c->inStart;

    if (c->bodyRaw == c->inLen) {
        req->body = c->in;
        req->bodyCap = c->inCap;
        c->in = NULL;
        c->inCap = c->inLen = c->inStart = c->bodyRaw = 0;
    } else {
        req->body = malloc(c->bodyLen);
        if (req->body == NULL) {
            return -1;
        }
        memcpy(req->body, body, c->bodyLen);
        req->bodyCap = c->bodyLen;
        body = req->body;
    }
    req->r.body = body;
    req->r.bodyLen = c->bodyLen;
    return 0;
}

static void
startRequest(HttpConn* c)
{
    HttpRequest* req = c->req;

    if (c->bodyLen > 0 && bodyTake(c, req) != 0) {
        c->req = NULL;
        requestFree(req);
        refuse(c, 503);
        return;
    }
    c->inStart = c->bodyRaw;
    req->shutBefore = c->peerShut;
    c->state = HTTP_SERVING;
    inputRelease(c);
    timerUpdate(c, true);
    /* The record is the protocol's data: it lives until its release,
     * where the connection may not. */
    corRequestServe(&req->r, &httpOps, req);
}

/* The head is in: start the body, or the request. */
static void
headDone(HttpConn* c)
{
    const HttpRequest* req = c->req;

    c->bodyLen = 0;
    c->bodyRaw = c->inStart;
    if (!req->chunked && req->contentLength <= 0) {
        startRequest(c);
        return;
    }
    /* A length said past the limit is refused before any body byte. */
    if (!req->chunked && corLimitsBody((uint64_t)req->contentLength) != 0) {
        refuse(c, 413);
        return;
    }
    if (req->chunked) {
        /* What its chunks say they bring is judged as they say it
         * (bodyProgress): the decoder itself is unbounded. */
        corHttpChunkedInit(&c->chunked, UINT64_MAX);
    }
    c->state = HTTP_BODY;
    if (req->expectContinue && c->inLen == c->inStart) {
        corHttpContinueAppend(c);
    }
    timerUpdate(c, true);
}

/* Take what body bytes have come. Returns true when the body is whole. */
static bool
bodyProgress(HttpConn* c)
{
    const HttpRequest* req = c->req;
    size_t bodyStart = c->inStart;
    size_t consumed = 0;
    size_t produced = 0;
    int rc;

    if (!req->chunked) {
        size_t want = (size_t)req->contentLength;
        size_t have = c->inLen - bodyStart;

        if (have >= want) {
            c->bodyLen = want;
            c->bodyRaw = bodyStart + want;
            return true;
        }
        inputReserve(c, want - have);
        return false;
    }
    rc = corHttpChunkedDecode(&c->chunked, c->in + c->bodyRaw,
                              c->inLen - c->bodyRaw, &consumed, &produced);
    memmove(c->in + bodyStart + c->bodyLen, c->in + c->bodyRaw, produced);
    c->bodyLen += produced;
    c->bodyRaw += consumed;
    if (corLimitsBody(c->chunked.total) != 0) {
        refuse(c, 413);         /* a chunk said it brings too much */
        return false;
    }
    if (rc == 0) {
        /* Every byte was taken: the framing goes, so that it counts
         * against neither the buffer nor the body's limit. */
        c->inLen = bodyStart + c->bodyLen;
        c->bodyRaw = c->inLen;
    } else if (rc < 0) {
        refuse(c, -rc);
    }
    return rc == 1;
}

/*
 * Whether the head being read may be complete, so worth parsing: its end
 * came, or it reached the limit, or it doubled since the last parse (which
 * refuses a bad one early). The parser keeps no state, so a client that
 * sends a byte at a time costs linear time, not a parse per byte.
 */
static bool
headReady(HttpConn* c)
{
    const char* head = c->in + c->inStart;
    size_t len = c->inLen - c->inStart;
    size_t from = c->headScanned > 3 ? c->headScanned - 3 : 0;

    c->headScanned = len;
    if (memmem(head + from, len - from, "\r\n\r\n", 4) != NULL) {
        return true;
    }
    return len >= corLimits()->headerBytes || len >= 2 * c->headParsed;
}

/* Part of a head has come: its deadline runs. */
static void
headWait(HttpConn* c)
{
    if (c->state == HTTP_IDLE) {
        c->state = HTTP_HEAD;
        timerUpdate(c, true);
    }
}

/* One step of the input: returns false when it must wait (for bytes, the
 * handler, or the client to read). */
static bool
processStep(HttpConn* c)
{
    const CorLimits* limits = corLimits();
    HttpLoop* hl = c->hl;
    int rc;

    if (c->state == HTTP_BODY) {
        if (bodyProgress(c)) {
            startRequest(c);
            return true;
        }
        return false;
    }
    if (c->inLen == c->inStart) {
        return false;
    }
    if (c->state == HTTP_IDLE) {
        c->readStartMs = corEvNow(hl->loop);
        c->headParsed = c->headScanned = 0;
    }
    if (!headReady(c)) {
        headWait(c);
        return false;
    }
    /* The parser reads no further than the head's limits; the body's
     * is the core's verdict, asked once the head is in (headDone). */
    rc = corHttpParseHead(c->in + c->inStart, c->inLen - c->inStart,
                          &(CorHttpLimits){ limits->headerBytes,
                                            limits->headerCount,
                                            UINT64_MAX },
                          &hl->head);
    if (rc == 0) {
        c->headParsed = c->inLen - c->inStart;
        headWait(c);
        return false;
    }
    if (rc < 0) {
        refuse(c, -rc);
        return false;
    }
    c->req = requestCreate(c, &hl->head);
    if (c->req == NULL) {
        refuse(c, 503);
        return false;
    }
    c->inStart += (size_t)rc;
    headDone(c);
    return true;
}

/* Whether requests may be read and served now, as far as output goes: a
 * file being sent, or too much unsent output, holds the next one back. */
static bool
outputAllowsMore(const HttpConn* c)
{
    return c->fileFd < 0 && c->outLen - c->outSent < OUT_HIGH_WATER;
}

static bool
reading(const HttpConn* c)
{
    return c->state == HTTP_IDLE || c->state == HTTP_HEAD
           || c->state == HTTP_BODY;
}

/*
 * Parse and serve what the input holds. A read that stopped at a full
 * buffer left bytes in the socket that no further edge announces: once a
 * step made room (a chunked body's framing went), read on. Returns -1 on
 * a read error (close).
 */
static int
processInput(HttpConn* c)
{
    for (;;) {
        size_t before;

        while (reading(c) && outputAllowsMore(c) && processStep(c)) {
        }
        if (!c->readPaused || !reading(c) || !outputAllowsMore(c)) {
            return 0;
        }
        /* Unconsumed bytes, which the read's slide to the front of the
         * buffer leaves as they are. */
        before = c->inLen - c->inStart;
        if (httpRead(c) != 0) {
            return -1;
        }
        if (c->inLen - c->inStart == before) {
            return 0;           /* still full */
        }
    }
}

static void
httpProcess(HttpConn* c)
{
    bool heldBack;

    if (c->processing) {
        return;         /* an inline answer inside the loop below */
    }
    c->processing = true;
    do {
        if (processInput(c) != 0) {
            c->processing = false;
            corHttpConnClose(c);
            return;
        }
        heldBack = reading(c) && !outputAllowsMore(c);
        if (httpFlush(c) != 0) {
            c->processing = false;
            corHttpConnClose(c);
            return;
        }
        /* Held back by output that has all gone out now: go on. */
    } while (heldBack && !outputPending(c));
    c->processing = false;
    if (c->state == HTTP_UPGRADED) {
        upgradeHandOff(c);          /* answered 101 inside the loop above */
        return;
    }
    if (c->state == HTTP_CLOSING && !outputPending(c)) {
        connEnd(c);
        return;
    }
    if (c->peerClosed && c->state != HTTP_SERVING && !outputPending(c)) {
        corHttpConnClose(c);
        return;
    }
    inputRelease(c);
    timerUpdate(c, false);
}

/*
 * The handler took the connection (corRequestUpgrade): the 101 goes in
 * the output, and the connection leaves the server, at once or, inside
 * httpProcess (an inline handler), when that is done with it. Nothing
 * more is read or parsed here: what follows the request is the new
 * protocol's.
 */
static void
upgradeAnswered(HttpConn* c, HttpRequest* req)
{
    if (corHttpResponseAppend(c, req, true) != 0) {
        c->keepAlive = false;
        answered(c, &req->r);       /* the session finds no connection */
        return;
    }
    c->state = HTTP_UPGRADED;
    c->req = NULL;
    c->upgrading = req;
    if (!c->processing) {
        upgradeHandOff(c);
    }
}

/* The handler is done: answer, then go on with the next request. */
static void
requestDone(CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    HttpConn* c = req->conn;

    if (c == NULL) {
        /* The client left meanwhile. A stream ends through its own end
         * (which finds no connection), since its writer may go on. */
        if (r->stream == NULL) {
            r->cut = true;
            corRequestSent(r);
        }
        return;
    }
    if (r->upgrade != NULL && r->status == 101) {
        upgradeAnswered(c, req);
        return;
    }
    /* An HTTP/1.0 stream ends with the close. */
    c->keepAlive = req->keepAlive && !c->hl->draining
                   && corLimits()->keepaliveTimeoutMs > 0
                   && !(r->stream != NULL && req->versionMinor == 0);
    if (corHttpResponseAppend(c, req, c->keepAlive) != 0) {
        c->keepAlive = false;
    }
    /* A stream's body is counted as its pieces go (corHttpChunkAppend). */
    r->bodySent = r->stream != NULL || req->framing != HTTP_FRAME_LENGTH ? 0
                  : r->fileFd >= 0 ? req->bodyLeft : r->responseLen;
    if (r->stream != NULL) {
        /* The head goes now; the pieces and the end come as written. */
        if (!c->processing && httpFlush(c) != 0) {
            corHttpConnClose(c);
        }
        return;
    }
    if (r->fileFd >= 0) {
        /* The connection owns the file now; a HEAD sends none of it. */
        c->fileFd = r->fileFd;
        c->fileOffset = (off_t)r->fileOffset;
        c->fileLeft = (size_t)req->bodyLeft;
        r->fileFd = -1;
        if (c->fileLeft == 0) {
            fileDone(c);
        }
    }
    answered(c, r);
}

static void
streamData(CorRequest* r, const void* data, size_t len)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    HttpConn* c = req->conn;

    if (c == NULL) {
        return;
    }
    if (corHttpChunkAppend(c, req, data, len) != 0 || httpFlush(c) != 0) {
        corHttpConnClose(c);
        return;
    }
    timerUpdate(c, false);
}

static void
streamEnd(CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    HttpConn* c = req->conn;

    if (c == NULL) {
        r->cut = true;
        corRequestSent(r);
        return;
    }
    if (corHttpChunkEnd(c, req) != 0) {
        c->keepAlive = false;
        r->cut = true;              /* short of its length, or no memory */
    }
    answered(c, r);
}

/* The body is cut: no last chunk, and the close tells the client. */
static void
streamAbort(CorRequest* r)
{
    HttpConn* c = corContainerOf(r, HttpRequest, r)->conn;

    r->cut = true;
    if (c == NULL) {
        corRequestSent(r);
        return;
    }
    c->keepAlive = false;
    answered(c, r);
}

static bool
streamAlive(const CorRequest* r)
{
    return corContainerOf(r, HttpRequest, r)->conn != NULL;
}

static size_t
streamBacklog(const CorRequest* r)
{
    const HttpConn* c = corContainerOf(r, HttpRequest, r)->conn;

    return c != NULL ? c->outLen - c->outSent : 0;
}

static void
requestRelease(CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    HttpConn* c = req->conn;

    if (c != NULL && c->req == req) {
        c->req = NULL;
    }
    if (c != NULL && c->releasing == req) {
        c->releasing = NULL;        /* released while being answered */
    }
    requestFree(req);
}

/* ---- The connection ------------------------------------------------------ */

/* What a request in flight learns of its client from the socket's
 * events. */
typedef enum {
    CLIENT_HERE,
    CLIENT_SHUT,                /* it closed its side while it waited */
    CLIENT_RESET                /* it reset, or both sides are closed */
} ClientState;

/*
 * Whether the client of a request in flight has gone. A reset: at once. A
 * close of its side with nothing left to read, after the request came:
 * the client left (as nginx decides; a forward it asked for would be
 * wasted work), though it may only have half-closed, which a server cannot
 * tell from leaving. A client that sent its requests and its end together
 * (pipelined, then shut) waits for the answers: its end came before the
 * request started. The socket is peeked, not read.
 */
static ClientState
clientState(const HttpConn* c, unsigned events)
{
    char byte;

    if (events & (EPOLLERR | EPOLLHUP)) {
        return CLIENT_RESET;
    }
    if ((events & EPOLLRDHUP) && !c->req->shutBefore
        && c->inLen == c->inStart
        && recv(c->t.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
        return CLIENT_SHUT;
    }
    return CLIENT_HERE;
}

static void
onIo(CorEvIo* io, unsigned events)
{
    HttpConn* c = corContainerOf(io, HttpConn, io);

    /* A TLS handshake that met a full socket while reading waits for room,
     * not for input: its OUT edge is the input edge it missed. */
    if ((events & EPOLLOUT) && corTransportWantsWrite(&c->t)) {
        events |= EPOLLIN;
    }
    if ((events & EPOLLOUT) && outputPending(c)) {
        if (httpFlush(c) != 0) {
            corHttpConnClose(c);
            return;
        }
        if (c->state == HTTP_CLOSING && !outputPending(c)) {
            connEnd(c);
            return;
        }
        timerUpdate(c, false);      /* the send timer is done with */
        if (c->state == HTTP_SERVING && c->req != NULL
            && c->req->r.stream != NULL) {
            corResponseStreamDrained(&c->req->r);
        }
    }
    if (c->state == HTTP_LINGER) {
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
            if (lingerDrain(c) != 0) {
                corHttpConnClose(c);
                return;
            }
            timerUpdate(c, true);
        }
        return;
    }
    if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        if (!outputPending(c) && c->state != HTTP_SERVING) {
            httpProcess(c);         /* output drained below the high water */
        }
        return;
    }
    if (events & (EPOLLRDHUP | EPOLLHUP)) {
        c->peerShut = true;
    }
    if (c->state == HTTP_SERVING) {
        switch (clientState(c, events)) {
        case CLIENT_RESET:
            corHttpConnClose(c);       /* which cancels the request's waits */
            return;
        case CLIENT_SHUT:
            /* Its handler stops waiting; the answers before it still go
             * out, then the end is read and the connection closes. */
            corRequestCancel(&c->req->r);
            break;
        case CLIENT_HERE:
            break;
        }
    }
    if (c->state == HTTP_SERVING || c->state == HTTP_CLOSING) {
        c->readPaused = true;       /* read once the handler is done */
        return;
    }
    if (httpRead(c) != 0) {
        corHttpConnClose(c);
        return;
    }
    if (http2HandOff(c)) {
        return;
    }
    if (c->state == HTTP_BODY) {
        timerUpdate(c, true);       /* body progress restarts its timer */
    }
    httpProcess(c);
}

void
corHttpConnOpen(unsigned loopIndex, const CorListener* l, int fd,
                const struct sockaddr_storage* peer)
{
    HttpLoop* hl = corHttpLoopAt(loopIndex);
    HttpConn* c = calloc(1, sizeof(*c));
    uint64_t handshakeMs = corListenerHandshakeTimeoutMs(l);
    int one = 1;

    if (c == NULL || corListenerTransport(l, &c->t, fd) != 0) {
        free(c);
        close(fd);
        corAcceptClosed();
        return;
    }
    c->fileFd = -1;
    c->hl = hl;
    c->peer = *peer;
    c->tls = handshakeMs > 0;   /* a plain listener has no handshake */
    c->h2c = !c->tls && corListenerHttp2(l);
    c->state = HTTP_IDLE;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    corListInsert(&hl->conns, &c->link);
    atomic_fetch_add(&hl->connCount, 1);
    if (corEvIoStart(hl->loop, &c->io, fd,
                     EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, onIo) != 0) {
        corHttpConnClose(c);
        return;
    }
    /* The first request gets the head's deadline from its first byte; a
     * connection that sends nothing at all is an idle one. Over TLS, the
     * handshake and that first byte must come within the listener's
     * handshake timeout instead (the idle timer, armed shorter). */
    timerUpdate(c, true);
    if (handshakeMs > 0) {
        corEvTimerStart(hl->loop, &c->timer, handshakeMs, onTimer);
    }
}

/* Take c off its loop: its socket's events, its timer, the loop's list
 * and the counts. */
static void
connUnlink(HttpConn* c)
{
    HttpLoop* hl = c->hl;

    corEvIoStop(hl->loop, &c->io);
    corEvTimerStop(hl->loop, &c->timer);
    corListRemove(&c->link);
    atomic_fetch_sub(&hl->connCount, 1);
    corAcceptClosed();
}

/* What c holds besides its socket, and c. */
static void
connFree(HttpConn* c)
{
    fileDone(c);
    corHttpBufGive(c->hl, c->in, c->inCap);
    corHttpBufGive(c->hl, c->out, c->outCap);
    free(c);
}

/*
 * Hand the connection of an upgraded request over to the core: its
 * transport, the bytes read past the request and the output not yet
 * written (the 101, unless it went out already), all copied there. The
 * socket leaves the loop's epoll first: the session waits on it itself.
 */
static void
upgradeHandOff(HttpConn* c)
{
    HttpRequest* req = c->upgrading;
    CorTransport t = c->t;

    if (!c->processing && outputPending(c) && httpFlush(c) != 0) {
        corHttpConnClose(c);           /* the session finds no connection */
        return;
    }
    connUnlink(c);
    c->upgrading = NULL;
    req->conn = NULL;
    /* The session may run to its end in there, and the request be
     * released: req is not touched after. */
    corRequestUpgraded(&req->r, &t,
                       c->in != NULL ? c->in + c->inStart : NULL,
                       c->in != NULL ? c->inLen - c->inStart : 0,
                       c->out != NULL ? c->out + c->outSent : NULL,
                       c->out != NULL ? c->outLen - c->outSent : 0);
    connFree(c);
}

/*
 * Whether c speaks HTTP/2 (ALPN chose h2; or, on a plain listener with
 * http2: on, its first bytes are the client preface): then it is handed
 * to corHttp2Conn.c with its transport and what it read, and is gone
 * from here. True as well while the bytes so far begin the preface (the
 * rest is awaited, never parsed as HTTP/1).
 */
static bool
http2HandOff(HttpConn* c)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t n = c->inLen - c->inStart;
    const char* alpn = c->tls ? corTransportTlsAlpn(&c->t) : NULL;
    bool h2 = alpn != NULL && strcmp(alpn, "h2") == 0;

    if (c->served || c->state != HTTP_IDLE) {
        return false;
    }
    if (!h2 && (!c->h2c || n == 0
                || memcmp(c->in + c->inStart, preface,
                          n < sizeof(preface) - 1 ? n : sizeof(preface) - 1)
                   != 0)) {
        return false;
    }
    if (!h2 && n < sizeof(preface) - 1) {
        return true;
    }
    corEvIoStop(c->hl->loop, &c->io);
    corEvTimerStop(c->hl->loop, &c->timer);
    corListRemove(&c->link);
    atomic_fetch_sub(&c->hl->connCount, 1);
    corHttp2ConnOpen(c->hl, &c->t, &c->peer, c->tls,
                     n > 0 ? c->in + c->inStart : NULL, n);
    connFree(c);
    return true;
}

static bool
upgradable(const CorRequest* r)
{
    return corContainerOf(r, HttpRequest, r)->versionMinor >= 1;
}

void
corHttpConnClose(HttpConn* c)
{
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
            requestFree(c->req);
        }
    }
    connFree(c);
}

void
corHttpConnStop(HttpConn* c)
{
    uint64_t deadline = corEvClockMs() + STOP_FLUSH_MS;

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
    while (outputPending(c) && corEvClockMs() < deadline) {
        struct pollfd pfd = { .fd = c->t.fd, .events = POLLOUT };

        if (httpFlush(c) != 0 || poll(&pfd, 1, STOP_FLUSH_MS) <= 0) {
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
    /* One still to bring its first request keeps its timer: over TLS that
     * is the handshake's, shorter than keep-alive. */
    if (c->state == HTTP_IDLE && c->served && !outputPending(c)) {
        c->timerFor = HTTP_IDLE;
        corEvTimerStart(c->hl->loop, &c->timer, idleMs(c), onTimer);
    }
}
