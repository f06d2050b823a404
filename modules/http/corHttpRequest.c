/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a request on an HTTP/1.x connection: the bytes into the
 * connection's input (k.in, from a loop's buffer, grown within what a
 * request may be), its head found and parsed, its record made, its body
 * (by length or chunked) gathered and handed over (or, for a handler that
 * takes it as it comes, handed on: corHttpBodyStream.c). Each step says what
 * came (corHttpRequestStep); the connection (corHttpServe.c) arms the
 * deadline that follows and serves what is whole, so that reading knows
 * nothing of timers or the core's ops.
 *
 * A request owns what it reads: its head is copied into its own record
 * once parsed, and its body is handed over whole, so whatever closes the
 * connection (a reset, a timeout, a stop) frees nothing a request in
 * flight still reads, on any thread.
 */
#include "corHttpInt.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The room a read asks for. */
#define READ_ROOM 1024

static inline char*
inputAt(const HttpConn* c, size_t at)
{
    return (char*)c->k.in.data + at;
}

static bool
reading(const HttpConn* c)
{
    return c->state == HTTP_IDLE || c->state == HTTP_HEAD
           || c->state == HTTP_BODY;
}

/* ---- The input ----------------------------------------------------------- */

/*
 * The most input a connection holds: what a head may be while one is
 * read (a body behind it waits in the socket until the head says where
 * it goes), what a request may be while its body is read whole, one
 * loop's buffer while a body is handed to its handler as it comes. Out
 * of line: asked only when the buffer must grow.
 */
static __attribute__((noinline)) size_t
inputMost(const HttpConn* c)
{
    /* A body is read for its route, within the route's limits. */
    const CorLimits* limits = corLimitsOf(c->req != NULL ? &c->req->r : NULL);

    switch (c->state) {
    case HTTP_IDLE:
    case HTTP_HEAD:
        return limits->headerBytes + 4096;
    case HTTP_SERVING:
        return HTTP_BUF_BYTES;
    default:
        return limits->headerBytes + limits->bodyBytes + 4096;
    }
}

/* Make room for need more bytes of input, within inputMost. The buffer
 * comes from the loop when the connection has none. */
static bool
inputReserve(HttpConn* c, size_t need)
{
    CorBuf* in = &c->k.in;
    size_t most;
    size_t cap;

    if (in->data == NULL) {
        if (corHttpBufLend(c->hl, in) != 0) {
            return false;
        }
        c->bodyRaw = 0;
    }
    /* Slide the request being read to the front, so that one that came
     * behind earlier pipelined ones has the whole budget. Nothing points
     * into the buffer: a parsed head was copied out. */
    if (in->off > 0 && reading(c)) {
        if (c->state == HTTP_BODY) {
            c->bodyRaw -= in->off;
        }
        corBufCompact(in);
    }
    if (in->cap - in->len >= need) {
        return true;
    }
    most = inputMost(c);
    cap = in->cap;
    while (cap - in->len < need && cap < most) {
        cap *= 2;
    }
    if (cap > most) {
        cap = most;
    }
    if (cap <= in->cap) {
        return in->cap > in->len;
    }
    return corBufGrowTo(in, cap) == 0;
}

void
corHttpInputRelease(HttpConn* c)
{
    CorBuf* in = &c->k.in;

    if (in->data == NULL || in->off != in->len || c->state == HTTP_HEAD
        || c->state == HTTP_BODY) {
        return;
    }
    corHttpBufReturn(c->hl, in);
    c->bodyRaw = 0;
}

/*
 * A client sent plain HTTP to a TLS listener: answered 400 in plain text,
 * as nginx does, then closed lingering, so that it reads the answer rather
 * than a reset. Its request is never served: the connection only closes.
 */
static void
plainRefuse(HttpConn* c)
{
    corHttpErrorAppendWhy(c, 400,
                          "The plain HTTP request was sent to HTTPS "
                          "port");
    corHttpConnStateSet(c, HTTP_CLOSING);
    c->linger = true;
}

int
corHttpRead(HttpConn* c)
{
    CorBuf* in = &c->k.in;

    c->readPaused = false;
    for (;;) {
        ssize_t n;
        size_t room;

        if (!inputReserve(c, READ_ROOM)) {
            c->readPaused = true; /* full: read when it empties */
            return 0;
        }
        room = in->cap - in->len;
        n = c->t.ops->recv(&c->t, in->data + in->len, room);
        if (n > 0) {
            in->len += (size_t)n;
            /* A short read drained it, unless the peer shut its side:
             * then its end is still to read, and no edge announces it. */
            if ((size_t)n < room && !c->k.peerShut) {
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

/* ---- Refusals ------------------------------------------------------------ */

void
corHttpLimitsSay(const HttpConn* c, int status)
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
                 (int)(req->r.pathLen < 64 ? req->r.pathLen : 64), req->r.path);
    } else {
        snprintf(what, sizeof(what), "a request's head");
    }
    corLimitsRefusedFor(req != NULL ? &req->r : NULL, "http", who, what,
                        status);
}

/* Refuse the request being read with status, as a step of reading. */
static HttpStep
refuse(HttpConn* c, int status)
{
    corHttpLimitsSay(c, status);
    corHttpErrorAppend(c, status);
    corHttpConnStateSet(c, HTTP_CLOSING);
    c->linger = true;
    return HTTP_STEP_REFUSED;
}

/* This way round (not refuse calling this) the reading steps inline
 * refuse as before, and GCC still inlines a whole request's step into
 * headStep: the other way cost a hello 8 instructions more. */
void
corHttpRefuse(HttpConn* c, int status)
{
    refuse(c, status);
}

/* ---- The record ---------------------------------------------------------- */

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
 * The record of a request whose head h was just parsed at the input's
 * offset: the head's bytes are copied behind it, and everything it says
 * points into that copy, exactly as long as the head is (its fields, not
 * the configured maximum); then the raw path, when decoding left it in
 * the loop's room rather than in the head.
 */
static HttpRequest*
requestCreate(HttpConn* c, const CorHttpRequestHead* h)
{
    const char* base = inputAt(c, c->k.in.off);
    size_t fields = h->headerCount * sizeof(CorHeader);
    size_t raw = h->rawPath == h->rawBuf ? h->rawPathLen : 0;
    size_t size = sizeof(HttpRequest) + fields + h->headLen + raw;
    /* One a request, taken and given back by the dozen: the thread's. */
    HttpRequest* req = corChunkTake(&size);
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
    memcpy(req->remote, c->remote, sizeof(req->remote));
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
    req->answered = false;
    req->shutBefore = false;
    req->versionMinor = h->versionMinor;
    req->body = NULL;
    req->bodyCap = 0;
    req->size = size;
    return req;
}

void
corHttpRequestFree(HttpRequest* req)
{
    corHttpBufGive(req->hl, req->body, req->bodyCap);
    corChunkGive(req, req->size);
}

/* ---- The body ------------------------------------------------------------ */

/*
 * The body is whole: the request takes it. When nothing follows it in the
 * input (no pipelined request behind), the request takes the buffer
 * itself, and the connection takes a fresh one when bytes come; else the
 * body is copied out. Returns 0 or -1 (no memory).
 */
static int
bodyTake(HttpConn* c, HttpRequest* req)
{
    CorBuf* in = &c->k.in;
    char* body = inputAt(c, in->off);

    if (c->bodyRaw == in->len) {
        req->body = (char*)in->data;
        req->bodyCap = in->cap;
        *in = (CorBuf){ 0 };
        c->bodyRaw = 0;
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

/* The request is whole: it leaves the input, and is to be served. */
static HttpStep
requestWhole(HttpConn* c)
{
    HttpRequest* req = c->req;

    if (c->bodyLen > 0 && bodyTake(c, req) != 0) {
        c->req = NULL;
        corHttpRequestFree(req);
        return refuse(c, 503);
    }
    c->k.in.off = c->bodyRaw;
    req->shutBefore = c->k.peerShut;
    corHttpConnStateSet(c, HTTP_SERVING);
    corHttpInputRelease(c);
    return HTTP_STEP_REQUEST;
}

/* The head is in: the body comes, or the request is whole. */
static HttpStep
headDone(HttpConn* c)
{
    HttpRequest* req = c->req;

    c->bodyLen = 0;
    c->bodyRaw = c->k.in.off;
    if (!req->chunked && req->contentLength <= 0) {
        return requestWhole(c);
    }
    /* The body is judged by its route's limits, known now, before any
     * of it is taken (or a 100 Continue sent for it). */
    corRequestLimits(&req->r);
    /* A length said past the limit is refused before any body byte. */
    if (!req->chunked
        && corLimitsBody(&req->r, (uint64_t)req->contentLength) != 0) {
        return refuse(c, 413);
    }
    if (req->chunked) {
        /* What its chunks say they bring is judged as they say it
         * (bodyProgress): the decoder itself is unbounded. */
        corHttpChunkedInit(&c->chunked, UINT64_MAX);
    }
    corHttpConnStateSet(c, HTTP_BODY);
    return HTTP_STEP_BODY;
}

/* Take what body bytes have come: the request once the body is whole. */
static HttpStep
bodyProgress(HttpConn* c)
{
    const HttpRequest* req = c->req;
    CorBuf* in = &c->k.in;
    size_t bodyStart = in->off;
    size_t consumed = 0;
    size_t produced = 0;
    int rc;

    if (!req->chunked) {
        size_t want = (size_t)req->contentLength;
        size_t have = in->len - bodyStart;

        if (have >= want) {
            c->bodyLen = want;
            c->bodyRaw = bodyStart + want;
            return requestWhole(c);
        }
        inputReserve(c, want - have);
        return HTTP_STEP_WAIT;
    }
    rc = corHttpChunkedDecode(&c->chunked, inputAt(c, c->bodyRaw),
                              in->len - c->bodyRaw, &consumed, &produced);
    memmove(inputAt(c, bodyStart + c->bodyLen), inputAt(c, c->bodyRaw),
            produced);
    c->bodyLen += produced;
    c->bodyRaw += consumed;
    if (corLimitsBody(&req->r, c->chunked.total) != 0) {
        return refuse(c, 413); /* a chunk said it brings too much */
    }
    if (rc == 0) {
        /* Every byte was taken: the framing goes, so that it counts
         * against neither the buffer nor the body's limit. */
        in->len = bodyStart + c->bodyLen;
        c->bodyRaw = in->len;
    } else if (rc < 0) {
        return refuse(c, -rc);
    }
    return rc == 1 ? requestWhole(c) : HTTP_STEP_WAIT;
}

/* ---- The head ------------------------------------------------------------ */

/*
 * Whether the head being read may be complete, so worth parsing: its end
 * came, or it reached the limit, or it doubled since the last parse (which
 * refuses a bad one early). The parser keeps no state, so a client that
 * sends a byte at a time costs linear time, not a parse per byte.
 */
static bool
headReady(HttpConn* c)
{
    const char* head = inputAt(c, c->k.in.off);
    size_t len = corBufPending(&c->k.in);
    size_t from = c->headScanned > 3 ? c->headScanned - 3 : 0;

    c->headScanned = len;
    /* A head most often ends where the read did: a look at its last four
     * bytes spares the search (a twelfth of a hello's instructions). */
    if ((len - from >= 4 && memcmp(head + len - 4, "\r\n\r\n", 4) == 0)
        || memmem(head + from, len - from, "\r\n\r\n", 4) != NULL) {
        return true;
    }
    return len >= corLimits()->headerBytes || len >= 2 * c->headParsed;
}

/* Part of a head has come: its deadline runs from its first byte. */
static HttpStep
headWait(HttpConn* c)
{
    if (c->state == HTTP_IDLE) {
        corHttpConnStateSet(c, HTTP_HEAD);
        return HTTP_STEP_HEAD;
    }
    return HTTP_STEP_WAIT;
}

/* A head has bytes in the input: parse it once it may be whole, and make
 * its record. Out of line, so that the step that finds the input empty
 * (after every request served at once) saves none of its registers. */
static __attribute__((noinline)) HttpStep
headStep(HttpConn* c)
{
    const CorLimits* limits = corLimits();
    HttpLoop* hl = c->hl;
    CorBuf* in = &c->k.in;
    int rc;

    if (c->state == HTTP_IDLE) {
        c->readStartMs = corEvNow(hl->loop);
        c->headParsed = c->headScanned = 0;
    }
    if (!headReady(c)) {
        return headWait(c);
    }
    /* The parser reads no further than the head's limits; the body's
     * is the core's verdict, asked once the head is in (headDone). */
    rc = corHttpParseHead(inputAt(c, in->off), in->len - in->off,
                          &(CorHttpLimits){ limits->headerBytes,
                                            limits->headerCount, UINT64_MAX },
                          &hl->head);
    if (rc == 0) {
        c->headParsed = in->len - in->off;
        return headWait(c);
    }
    if (rc < 0) {
        return refuse(c, -rc);
    }
    c->req = requestCreate(c, &hl->head);
    if (c->req == NULL) {
        return refuse(c, 503);
    }
    in->off += (size_t)rc;
    return headDone(c);
}

HttpStep
corHttpRequestStep(HttpConn* c)
{
    if (c->state == HTTP_BODY) {
        return bodyProgress(c);
    }
    /* Asked again after each request served at once. */
    if (corBufPending(&c->k.in) == 0) {
        return HTTP_STEP_WAIT;
    }
    return headStep(c);
}
