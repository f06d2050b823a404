/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/1.x connection on its loop: read, parse, hand the request to the
 * core, write the answer, and again (keep-alive, pipelining).
 *
 * Bytes move through the connection's transport (plain here; TLS slots in
 * there), never through the socket directly.
 *
 * The socket is armed once, edge-triggered for input and output, and never
 * re-armed: a connection costs no epoll_ctl after its first. Requests are
 * served one at a time and answered in order; while one is with its
 * handler, nothing more is read or parsed, so a pipelined request never
 * overtakes the one before it. Inline answers of a pipelined batch are
 * gathered in the output buffer and written with one write().
 *
 * One timer per connection, re-armed as the state changes: the whole head
 * must come within limits.request_timeout (slowloris), each piece of a
 * body within limits.body_timeout, the next request within
 * limits.keepalive_timeout, and pending output must make progress within
 * limits.send_timeout (a client that does not read).
 */
#include "corHttpInt.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define IN_INITIAL 4096
/* Past this much unsent output, no further pipelined request is served
 * until the client reads. */
#define OUT_HIGH_WATER (1024 * 1024)
#define STOP_FLUSH_MS 100

static void requestDone(CorRequest* r);
static void requestRelease(CorRequest* r);
static void streamData(CorRequest* r, const void* data, size_t len);
static void streamEnd(CorRequest* r);
static bool streamAlive(const CorRequest* r);
static void httpProcess(HttpConn* c);

static const CorProtocolOps httpOps = {
    .done = requestDone,
    .release = requestRelease,
    .streamData = streamData,
    .streamEnd = streamEnd,
    .streamAlive = streamAlive,
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

static void
onTimer(CorEvTimer* timer)
{
    HttpConn* c = corContainerOf(timer, HttpConn, timer);

    if (c->state == HTTP_SERVING && !outputPending(c)) {
        return;     /* a request with its handler has no deadline here */
    }
    if (!outputPending(c) && (c->state == HTTP_HEAD
                              || c->state == HTTP_BODY)) {
        /* Too slow a head or body: say so, then close. */
        c->outLen = c->outSent = 0;
        httpErrorAppend(c, 408);
        c->state = HTTP_CLOSING;
        if (c->t.ops->send(&c->t, c->out, c->outLen) < 0) {
            /* It is being closed for not sending; a lost 408 is fine. */
        }
    } else if (outputPending(c)) {
        /* A client that stopped reading: reset, so that the kernel drops
         * what it still buffers for it instead of holding it. */
        struct linger reset = { .l_onoff = 1, .l_linger = 0 };

        setsockopt(c->t.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    }
    httpConnClose(c);
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
        ms = limits->keepaliveTimeoutMs;
        break;
    case HTTP_HEAD:
        ms = limits->requestTimeoutMs;
        progress = false;
        break;
    case HTTP_BODY:
        ms = limits->bodyTimeoutMs;
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

/* ---- Reading and writing ------------------------------------------------- */

/* A parsed head points into the input buffer: move its pointers with it. */
static void
headRebase(CorHttpRequestHead* h, const char* oldBase, size_t oldLen,
           char* newBase)
{
#define REBASE(p)                                                         \
    do {                                                                  \
        if ((p) != NULL && (p) >= oldBase && (p) < oldBase + oldLen) {    \
            (p) = newBase + ((p) - oldBase);                              \
        }                                                                 \
    } while (0)
    REBASE(h->method);
    REBASE(h->target);
    REBASE(h->path);
    REBASE(h->query);
    REBASE(h->host);
    for (unsigned i = 0; i < h->headerCount; i++) {
        REBASE(h->headers[i].name);
        REBASE(h->headers[i].value);
    }
#undef REBASE
}

/* Make room for need more bytes of input, within what a request may be. */
static bool
inputReserve(HttpConn* c, size_t need)
{
    const CorLimits* limits = corLimits();
    size_t most = limits->headerBytes + limits->bodyBytes + 4096;
    size_t cap;
    char* grown;

    /* Slide the request being read to the front, so that one that came
     * behind earlier pipelined ones has the whole budget. Before its head
     * is parsed nothing points into the buffer; after, its head's
     * pointers move with it. */
    if (c->inStart > 0 && (c->state == HTTP_IDLE || c->state == HTTP_HEAD
                           || c->state == HTTP_BODY)) {
        size_t shift = c->inStart;

        memmove(c->in, c->in + shift, c->inLen - shift);
        if (c->state == HTTP_BODY) {
            headRebase(&c->req->head, c->in + shift, c->inLen - shift,
                       c->in);
            c->bodyRaw -= shift;
        }
        c->inLen -= shift;
        c->inStart = 0;
    }
    if (c->inCap - c->inLen >= need) {
        return true;
    }
    cap = c->inCap ? c->inCap : IN_INITIAL;
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
    if (c->state == HTTP_BODY && grown != c->in) {
        headRebase(&c->req->head, c->in, c->inLen, grown);
    }
    c->in = grown;
    c->inCap = cap;
    return true;
}

/* Read what the socket has. Returns -1 on an error (close). */
static int
httpRead(HttpConn* c)
{
    c->readPaused = false;
    for (;;) {
        ssize_t n;
        size_t room;

        if (!inputReserve(c, 1024)) {
            c->readPaused = true;       /* full: read when it empties */
            return 0;
        }
        room = c->inCap - c->inLen;
        n = c->t.ops->recv(&c->t, c->in + c->inLen, room);
        if (n > 0) {
            c->inLen += (size_t)n;
            if ((size_t)n < room) {
                return 0;               /* a short read drained it */
            }
        } else if (n == 0) {
            c->peerClosed = true;
            return 0;
        } else if (errno == EAGAIN) {
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
    c->outLen = c->outSent = 0;
    return 0;
}

/* What a finished answer leaves: the next request, or the close. Its
 * record is done with the connection's buffers once this is called. */
static void
answered(HttpConn* c, CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);

    c->inStart = c->bodyRaw;
    c->state = c->keepAlive ? HTTP_IDLE : HTTP_CLOSING;
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
            httpConnClose(c);
            return;
        }
    }
    httpProcess(c);
}

/* ---- Requests ------------------------------------------------------------ */

/*
 * A request record for the connection: its spare one when it has it (a
 * keep-alive connection reuses one record for all its requests), else a
 * new one. Only the core's part is cleared; the parser fills the head.
 */
static HttpRequest*
requestNew(HttpConn* c)
{
    HttpRequest* req = c->spare;

    if (req != NULL) {
        c->spare = NULL;
    } else {
        req = malloc(sizeof(*req));
        if (req == NULL) {
            return NULL;
        }
    }
    memset(&req->r, 0, sizeof(req->r));
    req->conn = c;
    return req;
}

static void
startRequest(HttpConn* c, size_t bodyStart)
{
    HttpRequest* req = c->req;
    const CorHttpRequestHead* h = &req->head;
    CorRequest* r = &req->r;

    for (unsigned i = 0; i < h->headerCount; i++) {
        req->headers[i] = (CorHeader){ h->headers[i].name,
                                       h->headers[i].nameLen,
                                       h->headers[i].value,
                                       h->headers[i].valueLen };
    }
    r->method = h->method;
    r->methodLen = h->methodLen;
    r->path = h->path;
    r->pathLen = h->pathLen;
    r->query = h->query;
    r->queryLen = h->queryLen;
    r->headers = req->headers;
    r->headerCount = h->headerCount;
    r->body = c->in + bodyStart;
    r->bodyLen = c->bodyLen;
    r->head = h->head;
    c->state = HTTP_SERVING;
    timerUpdate(c, true);
    corRequestServe(r, &httpOps, c);
}

/* The head is in: start the body, or the request. */
static void
headDone(HttpConn* c, size_t headLen)
{
    const CorHttpRequestHead* h = &c->req->head;
    size_t bodyStart = c->inStart + headLen;

    c->bodyLen = 0;
    c->bodyRaw = bodyStart;
    if (!h->chunked && h->contentLength <= 0) {
        startRequest(c, bodyStart);
        return;
    }
    if (h->chunked) {
        corHttpChunkedInit(&c->chunked, corLimits()->bodyBytes);
    }
    c->state = HTTP_BODY;
    if (h->expectContinue && c->inLen == bodyStart) {
        httpContinueAppend(c);
    }
    timerUpdate(c, true);
}

/* Take what body bytes have come. Returns true when the body is whole. */
static bool
bodyProgress(HttpConn* c)
{
    HttpRequest* req = c->req;
    size_t bodyStart = c->inStart + req->head.headLen;
    size_t consumed = 0;
    size_t produced = 0;
    int rc;

    if (!req->head.chunked) {
        size_t want = (size_t)req->head.contentLength;

        if (c->inLen - bodyStart >= want) {
            c->bodyLen = want;
            c->bodyRaw = bodyStart + want;
            return true;
        }
        inputReserve(c, bodyStart + want - c->inLen);
        return false;
    }
    rc = corHttpChunkedDecode(&c->chunked, c->in + c->bodyRaw,
                              c->inLen - c->bodyRaw, &consumed, &produced);
    memmove(c->in + bodyStart + c->bodyLen, c->in + c->bodyRaw, produced);
    c->bodyLen += produced;
    c->bodyRaw += consumed;
    if (rc < 0) {
        httpErrorAppend(c, -rc);
        c->state = HTTP_CLOSING;
    }
    return rc == 1;
}

/* One step of the input: returns false when it must wait (for bytes, the
 * handler, or the client to read). */
static bool
processStep(HttpConn* c)
{
    int rc;

    if (c->state == HTTP_BODY) {
        if (bodyProgress(c)) {
            startRequest(c, c->inStart + c->req->head.headLen);
            return true;
        }
        return false;
    }
    if (c->inLen == c->inStart) {
        return false;
    }
    if (c->req == NULL) {
        c->req = requestNew(c);
        if (c->req == NULL) {
            httpErrorAppend(c, 503);
            c->state = HTTP_CLOSING;
            return false;
        }
    }
    rc = corHttpParseHead(c->in + c->inStart, c->inLen - c->inStart,
                          &(CorHttpLimits){ corLimits()->headerBytes,
                                            corLimits()->headerCount,
                                            corLimits()->bodyBytes },
                          &c->req->head);
    if (rc == 0) {
        if (c->state == HTTP_IDLE) {
            c->state = HTTP_HEAD;
            timerUpdate(c, true);
        }
        return false;
    }
    if (rc < 0) {
        httpErrorAppend(c, -rc);
        c->state = HTTP_CLOSING;
        return false;
    }
    headDone(c, (size_t)rc);
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

static void
httpProcess(HttpConn* c)
{
    bool heldBack;

    if (c->processing) {
        return;         /* an inline answer inside the loop below */
    }
    c->processing = true;
    do {
        while (reading(c) && outputAllowsMore(c) && processStep(c)) {
        }
        heldBack = reading(c) && !outputAllowsMore(c);
        if (httpFlush(c) != 0) {
            c->processing = false;
            httpConnClose(c);
            return;
        }
        /* Held back by output that has all gone out now: go on. */
    } while (heldBack && !outputPending(c));
    c->processing = false;
    if (c->state == HTTP_CLOSING && !outputPending(c)) {
        httpConnClose(c);
        return;
    }
    if (c->peerClosed && c->state != HTTP_SERVING && !outputPending(c)) {
        httpConnClose(c);
        return;
    }
    timerUpdate(c, false);
}

/* The handler is done: answer, then go on with the next request. */
static void
requestDone(CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    HttpConn* c = req->conn;
    size_t before;

    if (c == NULL) {
        /* The client left meanwhile. A stream ends through its own end
         * (which finds no connection), since its writer may go on. */
        if (r->stream == NULL) {
            corRequestSent(r);
        }
        return;
    }
    /* An HTTP/1.0 stream ends with the close. */
    c->keepAlive = req->head.keepAlive && !c->hl->draining
                   && !(r->stream != NULL && req->head.versionMinor == 0);
    before = c->outLen;
    if (httpResponseAppend(c, req, c->keepAlive) != 0) {
        c->keepAlive = false;
    }
    if (corAccessLogEnabled()) {
        httpAccessLog(c, req, c->outLen - before
                              + (r->fileFd >= 0 ? r->responseLen : 0));
    }
    if (r->stream != NULL) {
        /* The head goes now; the pieces and the end come as written. */
        if (!c->processing && httpFlush(c) != 0) {
            httpConnClose(c);
        }
        return;
    }
    if (r->fileFd >= 0) {
        /* The connection owns the file now; a HEAD sends none of it. */
        c->fileFd = r->fileFd;
        c->fileOffset = (off_t)r->fileOffset;
        c->fileLeft = r->head ? 0 : r->responseLen;
        r->fileFd = -1;
        if (c->fileLeft == 0) {
            fileDone(c);
        }
    }
    /* Copied out: the request is done with the connection's buffers. */
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
    if (httpChunkAppend(c, req, data, len) != 0 || httpFlush(c) != 0) {
        httpConnClose(c);
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
        corRequestSent(r);
        return;
    }
    if (httpChunkEnd(c, req) != 0) {
        c->keepAlive = false;
    }
    answered(c, r);
}

static bool
streamAlive(const CorRequest* r)
{
    return corContainerOf(r, HttpRequest, r)->conn != NULL;
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
    if (c != NULL && c->spare == NULL) {
        c->spare = req;
    } else {
        free(req);
    }
}

/* ---- The connection ------------------------------------------------------ */

static void
onIo(CorEvIo* io, unsigned events)
{
    HttpConn* c = corContainerOf(io, HttpConn, io);

    if ((events & EPOLLOUT) && outputPending(c)) {
        if (httpFlush(c) != 0) {
            httpConnClose(c);
            return;
        }
        if (c->state == HTTP_CLOSING && !outputPending(c)) {
            httpConnClose(c);
            return;
        }
        timerUpdate(c, false);      /* the send timer is done with */
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
    if (c->state == HTTP_SERVING || c->state == HTTP_CLOSING) {
        c->readPaused = true;       /* read once the handler is done */
        return;
    }
    if (httpRead(c) != 0) {
        httpConnClose(c);
        return;
    }
    if (c->state == HTTP_BODY) {
        timerUpdate(c, true);       /* body progress restarts its timer */
    }
    httpProcess(c);
}

void
httpConnOpen(HttpLoop* hl, int fd, const struct sockaddr_storage* peer)
{
    HttpConn* c = calloc(1, sizeof(*c));
    int one = 1;

    if (c == NULL) {
        close(fd);
        atomic_fetch_sub(&httpConnTotal, 1);
        return;
    }
    corTransportPlain(&c->t, fd);
    c->fileFd = -1;
    c->hl = hl;
    c->peer = *peer;
    c->state = HTTP_IDLE;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->next = hl->conns;
    if (hl->conns != NULL) {
        hl->conns->prev = c;
    }
    hl->conns = c;
    atomic_fetch_add(&hl->connCount, 1);
    if (corEvIoStart(hl->loop, &c->io, fd,
                     EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, onIo) != 0) {
        httpConnClose(c);
        return;
    }
    /* The first request gets the head's deadline from its first byte; a
     * connection that sends nothing at all is an idle one. */
    timerUpdate(c, true);
}

void
httpConnClose(HttpConn* c)
{
    HttpLoop* hl = c->hl;

    corEvIoStop(hl->loop, &c->io);
    corEvTimerStop(hl->loop, &c->timer);
    c->t.ops->close(&c->t);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        hl->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    if (c->req != NULL) {
        if (c->state == HTTP_SERVING) {
            c->req->conn = NULL;    /* its handler finishes into the void */
        } else {
            free(c->req);
        }
    }
    atomic_fetch_sub(&hl->connCount, 1);
    atomic_fetch_sub(&httpConnTotal, 1);
    fileDone(c);
    free(c->spare);
    free(c->in);
    free(c->out);
    free(c);
}

void
httpConnStop(HttpConn* c)
{
    uint64_t deadline = corEvClockMs() + STOP_FLUSH_MS;

    if (c->state == HTTP_SERVING && c->req != NULL) {
        /* Still with its handler at a stop: answered as failed, unless a
         * stream's head is out already (then the close says it). */
        bool streaming = c->req->r.stream != NULL;

        c->req->conn = NULL;
        c->req = NULL;
        if (!streaming) {
            httpErrorAppend(c, 503);
        }
    }
    while (outputPending(c) && corEvClockMs() < deadline) {
        struct pollfd pfd = { .fd = c->t.fd, .events = POLLOUT };

        if (httpFlush(c) != 0 || poll(&pfd, 1, STOP_FLUSH_MS) <= 0) {
            break;
        }
    }
    httpConnClose(c);
}
