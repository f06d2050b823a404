/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Serving requests on an HTTP/1.x connection, one after the other: what
 * the kit's events drive (input to read, output gone), the cycle of
 * reading a request (corHttpRequest.c), handing it to the core and
 * writing its answer (corHttpResponse.c), and the ops through which the
 * core hands back an answer, a stream's pieces, or an upgrade.
 *
 * The socket is armed once by the kit, edge-triggered for input and
 * output, and never re-armed: a connection costs no epoll_ctl after its
 * first. Bytes move through the connection's transport, which its
 * listener picks (plain or TLS). Requests are served one at a time and
 * answered in order; while one is with its handler, nothing more is read
 * or parsed (but the body of a handler that takes it as it comes,
 * corHttpBodyStream.c), so a pipelined request never overtakes the one
 * before it.
 * Inline answers of a pipelined batch are gathered in the output buffer
 * and written with one write().
 */
#include "corHttpInt.h"
#include "corHttp2Int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Past this much unsent output (or while a file goes), no further
 * pipelined request is served until the client reads: the kit's mark. */
#define OUT_HIGH_WATER (1024 * 1024)

static void requestDone(CorRequest* r);
static void requestRelease(CorRequest* r);
static void streamData(CorRequest* r, const void* data, size_t len);
static void streamEnd(CorRequest* r);
static void streamAbort(CorRequest* r);
static bool streamAlive(const CorRequest* r);
static size_t streamBacklog(const CorRequest* r);
static bool upgradable(const CorRequest* r);
static void bodyConsumed(CorRequest* r, size_t n);
static void bodyWanted(CorRequest* r);
static void upgradeHandOff(HttpConn* c);

static const CorProtocolOps httpOps = {
    .done = requestDone,
    .release = requestRelease,
    .streamData = streamData,
    .streamEnd = streamEnd,
    .streamAlive = streamAlive,
    .streamBacklog = streamBacklog,
    .streamAbort = streamAbort,
    .upgradable = upgradable,
    .bodyConsumed = bodyConsumed,
    .bodyWanted = bodyWanted,
    .kind = COR_PROTOCOL_HTTP1,
};

/* ---- The request cycle --------------------------------------------------- */

static bool
reading(const HttpConn* c)
{
    return c->state == HTTP_IDLE || c->state == HTTP_HEAD
           || c->state == HTTP_BODY;
}

/* c->req to its handler. */
static void
requestServe(HttpConn* c)
{
    /* The record is the protocol's data: it lives until its release,
     * where the connection may not. */
    corRequestServe(&c->req->r, &httpOps, c->req);
}

/* One step of the input, and the deadline or the serving it leads to:
 * returns false when it must wait (for bytes, the handler, or the client
 * to read). */
static bool
serveStep(HttpConn* c)
{
    switch (corHttpRequestStep(c)) {
    case HTTP_STEP_HEAD:
        return false;
    case HTTP_STEP_BODY:
        if (corHttpBodyStreamBegin(c)) {
            /* Its body is fed as it comes; a 100 Continue goes once the
             * route accepted it (bodyWanted). */
            requestServe(c);
            return true;
        }
        if (c->req->expectContinue && corBufPending(&c->k.in) == 0) {
            corHttpContinueAppend(c); /* no memory to serve it early */
        }
        return true;
    case HTTP_STEP_REQUEST:
        requestServe(c);
        return true;
    case HTTP_STEP_WAIT:
    case HTTP_STEP_REFUSED:
        break;
    }
    return false;
}

/*
 * Parse and serve what the input holds. A read that stopped at a full
 * buffer left bytes in the socket that no further edge announces: once a
 * step made room (a chunked body's framing went), read on. Returns -1 on
 * a read error (close).
 */
static int
serveInput(HttpConn* c)
{
    for (;;) {
        size_t before;

        while (reading(c) && !corKitConnOutFull(&c->k) && serveStep(c)) {
        }
        if (!c->readPaused || !reading(c) || corKitConnOutFull(&c->k)) {
            return 0;
        }
        /* Unconsumed bytes, which the read's slide to the front of the
         * buffer leaves as they are. */
        before = corBufPending(&c->k.in);
        if (corHttpRead(c) != 0) {
            return -1;
        }
        if (corBufPending(&c->k.in) == before) {
            return 0; /* still full */
        }
    }
}

/* One round of serving under the kit's guard (corKitConnServe): the
 * input, and a body its handler takes as it comes. Returns 1 when held
 * back by output past the mark, 0, or -1 after closing c. */
static int
serveRound(CorKitConn* k)
{
    HttpConn* c = corContainerOf(k, HttpConn, k);
    int rc = serveInput(c);

    if (rc == 0 && c->bodyStream == HTTP_BODY_STREAMING) {
        rc = corHttpBodyFeed(c); /* a body its handler takes */
        if (rc > 0) {
            corHttpConnProgress(c); /* body came: its wait restarts */
        }
    }
    if (rc < 0) {
        corHttpConnClose(c);
        return -1;
    }
    return reading(c) && corKitConnOutFull(k);
}

/* Serve what came and write the answers, until it waits; then what the
 * state calls for: the hand-over, the end, or the next deadline. An
 * inline answer inside the kit's serve only queues, and that serve goes
 * on by itself. */
static void
serve(HttpConn* c)
{
    bool stalled = c->k.outStalledMs != 0;

    if (corKitConnInside(&c->k)) {
        return;
    }
    if (corKitConnServe(&c->k, serveRound) != 0) {
        return;
    }
    if (c->state == HTTP_UPGRADED) {
        upgradeHandOff(c); /* answered 101 inside the serve */
        return;
    }
    if (c->state == HTTP_CLOSING && corKitConnOutPending(&c->k) == 0) {
        corHttpConnEnd(c);
        return;
    }
    if (c->peerClosed && c->state != HTTP_SERVING
        && corKitConnOutPending(&c->k) == 0) {
        corHttpConnClose(c);
        return;
    }
    corHttpConnFlushed(c, stalled);
    corHttpInputRelease(c);
}

/* What a finished answer leaves: the next request, or the close. */
static void
answered(HttpConn* c, CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    bool dropped = c->bodyStream != HTTP_BODY_WHOLE;

    if (dropped) {
        /* Its body was not read to its end: the rest is dropped as it
         * comes, not taken for a next request. */
        corHttpBodyDrop(c);
        c->keepAlive = false;
        c->linger = true;
    }
    c->served = true;
    corHttpConnStateSet(c, c->keepAlive ? HTTP_IDLE : HTTP_CLOSING);
    /* The next request gets a record of its own: this one stays the
     * core's until its post-response phase is over, which may outlast the
     * connection; then it is released into the void. The core lets it go
     * after the call that answered it, not inside corRequestSent. */
    c->req = NULL;
    corRequestSent(r);
    req->conn = NULL;
    if (corKitConnInside(&c->k)) {
        return; /* serve goes on by itself */
    }
    /* Bytes that came while the handler had the request raised their edge
     * then (ready paused the read), and a peer that shut its side leaves
     * an end to read that no further edge announces; otherwise nothing can
     * have come, and a read would only say EAGAIN. A body dropped is not
     * read into the buffer: the lingering close drains it through its
     * sink, in bounded memory. */
    if (!dropped && (c->readPaused || c->k.peerShut)) {
        if (corHttpRead(c) != 0) {
            corHttpConnClose(c);
            return;
        }
    }
    serve(c);
}

/* ---- Upgrades ------------------------------------------------------------ */

static void
upgradeTake(void* arg, const CorTransport* t, const void* in, size_t inLen,
            const void* out, size_t outLen)
{
    HttpRequest* req = arg;

    corAcceptClosed(); /* the core counts its sessions apart */
    /* The session may run to its end in there, and the request be
     * released: req is not touched after. */
    corRequestUpgraded(&req->r, t, in, inLen, out, outLen);
}

/*
 * Hand the connection of an upgraded request over to the core: its
 * transport, the bytes read past the request and the output not yet
 * written (the 101, unless it went out already).
 */
static void
upgradeHandOff(HttpConn* c)
{
    HttpRequest* req = c->req;

    if (corKitConnOutPending(&c->k) > 0 && corHttpConnFlush(c) != 0) {
        corHttpConnClose(c); /* the session finds no connection */
        return;
    }
    c->req = NULL;
    req->conn = NULL;
    corHttpConnHandOff(c, upgradeTake, req);
}

/*
 * The handler took the connection (corRequestUpgrade): the 101 goes in
 * the output, and the connection leaves the server, at once or, inside
 * serve (an inline handler), when that is done with it. Nothing more is
 * read or parsed here: what follows the request is the new protocol's.
 */
static void
upgradeAnswered(HttpConn* c, HttpRequest* req)
{
    /* What follows the request is the new protocol's only once the body
     * before it was read. */
    if (c->bodyStream != HTTP_BODY_WHOLE
        || corHttpResponseAppend(c, req, true) != 0) {
        c->keepAlive = false;
        answered(c, &req->r); /* the session finds no connection */
        return;
    }
    corHttpConnStateSet(c, HTTP_UPGRADED); /* c->req takes it */
    serve(c);                              /* hands it over, now or after the
                                            * serve under way */
}

static bool
upgradable(const CorRequest* r)
{
    return corContainerOf(r, HttpRequest, r)->versionMinor >= 1;
}

/* ---- The core's ops: answers --------------------------------------------- */

/* A stream's output is written at once only past this many bytes; less
 * waits for the end of the loop's turn (corKitConnFlushSoon), so that the
 * head, the pieces one turn makes and the last chunk go in one write: a
 * compressed file's answer made in one turn was three writes (head,
 * body, end), each a loopback send that costs more than its bytes. */
#define STREAM_WRITE_BYTES ((size_t)64 * 1024)

/* Write a stream's output now when there is much of it, else before the
 * loop sleeps. Returns -1 on a write error (close). */
static int
streamFlush(HttpConn* c)
{
    if (corKitConnOutPending(&c->k) < STREAM_WRITE_BYTES) {
        corKitConnFlushSoon(&c->k);
        return 0;
    }
    return corHttpConnFlush(c);
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
    req->answered = true;
    if (r->upgrade != NULL && r->status == 101) {
        upgradeAnswered(c, req);
        return;
    }
    /* An HTTP/1.0 stream ends with the close; so does an answer that
     * comes while its body still does (the rest is not read). */
    c->keepAlive = req->keepAlive && !c->hl->draining
                   && corLimits()->keepaliveTimeoutMs > 0
                   && !(r->stream != NULL && req->versionMinor == 0)
                   && c->bodyStream == HTTP_BODY_WHOLE;
    if (corHttpResponseAppend(c, req, c->keepAlive) != 0) {
        c->keepAlive = false;
    }
    /* A stream's body is counted as its pieces go (corHttpChunkAppend). */
    r->bodySent = r->stream != NULL || req->framing != HTTP_FRAME_LENGTH ? 0
                  : r->fileFd >= 0 ? req->bodyLeft
                                   : r->responseLen;
    if (r->stream != NULL) {
        /* The head goes in this turn, with the pieces the turn makes
         * (inside the kit's serve, that serve's flush sends it); the
         * pieces and the end come as written. */
        if (!corKitConnInside(&c->k) && streamFlush(c) != 0) {
            corHttpConnClose(c);
        }
        return;
    }
    if (r->fileFd >= 0) {
        /* The kit owns the file now; a HEAD sends none of it. */
        corKitConnSendFile(&c->k, r->fileFd, (off_t)r->fileOffset,
                           (size_t)req->bodyLeft);
        r->fileFd = -1;
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
    if (corHttpChunkAppend(c, req, data, len) != 0 || streamFlush(c) != 0) {
        corHttpConnClose(c);
    }
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
        r->cut = true; /* short of its length, or no memory */
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

    return c != NULL ? corBufPending(&c->k.out) : 0;
}

/* Read on once the handler took what was held, outside of whatever
 * called bodyConsumed (the handler's own take, on this loop). */
static void
bodyResume(CorEvSoon* soon)
{
    HttpConn* c = corContainerOf(soon, HttpConn, bodySoon);

    if (c->state == HTTP_SERVING && c->bodyStream == HTTP_BODY_STREAMING) {
        c->readPaused = true; /* what waits in the socket */
        serve(c);
    }
}

static void
bodyConsumed(CorRequest* r, size_t n)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    HttpConn* c = req->conn;

    if (c != NULL && c->req == req && corHttpBodyTaken(c, n)) {
        corEvSoonStart(c->hl->loop, &c->bodySoon, bodyResume);
    }
}

/* The route accepted r while its body is still to come: a client that
 * waits for leave to send it gets it now, unless it did not wait. Out of
 * serve (a late guard), the flush is serve's, soon, as after a take. */
static void
bodyWanted(CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    HttpConn* c = req->conn;

    if (c == NULL || c->req != req || !req->expectContinue || c->bodyLen > 0
        || corBufPending(&c->k.in) > 0) {
        return;
    }
    corHttpContinueAppend(c);
    corEvSoonStart(c->hl->loop, &c->bodySoon, bodyResume);
}

static void
requestRelease(CorRequest* r)
{
    HttpRequest* req = corContainerOf(r, HttpRequest, r);
    HttpConn* c = req->conn;

    if (c != NULL && c->req == req) {
        c->req = NULL;
    }
    corHttpRequestFree(req);
}

/* ---- HTTP/2 -------------------------------------------------------------- */

typedef struct {
    HttpLoop* hl;
    const struct sockaddr_storage* peer;
    bool tls;
    const char* altSvc;
} Http2Open;

static void
http2Take(void* arg, const CorTransport* t, const void* in, size_t inLen,
          const void* out, size_t outLen)
{
    Http2Open* o = arg;

    (void)out;
    (void)outLen; /* nothing was answered yet */
    corHttp2ConnOpen(o->hl, t, o->peer, o->tls, o->altSvc,
                     inLen > 0 ? in : NULL, inLen);
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
    const CorBuf* in = &c->k.in;
    size_t n = in->data != NULL ? corBufPending(in) : 0;
    const char* alpn;
    bool h2;
    struct sockaddr_storage peer;
    Http2Open open = { c->hl, &peer, c->tls, c->altSvc };

    /* Asked at every read: a connection past its first request is done
     * with here before anything else. */
    if (c->served || c->state != HTTP_IDLE) {
        return false;
    }
    alpn = c->tls ? corTransportTlsAlpn(&c->t) : NULL;
    h2 = alpn != NULL && strcmp(alpn, "h2") == 0;
    if (!h2
        && (!c->h2c || n == 0
            || memcmp(corBufHead(in), preface,
                      n < sizeof(preface) - 1 ? n : sizeof(preface) - 1)
                   != 0)) {
        return false;
    }
    if (!h2 && n < sizeof(preface) - 1) {
        return true;
    }
    peer = c->peer; /* the hand-over frees c */
    corHttpConnHandOff(c, http2Take, &open);
    return true;
}

/* ---- The kit's events ---------------------------------------------------- */

/* What a request in flight learns of its client from the socket's
 * events. */
typedef enum {
    CLIENT_HERE,
    CLIENT_SHUT, /* it closed its side while it waited */
    CLIENT_RESET /* it reset, or both sides are closed */
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
clientState(const HttpConn* c)
{
    unsigned events = c->k.events;
    char byte;

    if (events & (EPOLLERR | EPOLLHUP)) {
        return CLIENT_RESET;
    }
    if ((events & EPOLLRDHUP) && !c->req->shutBefore
        && corBufPending(&c->k.in) == 0
        && recv(c->t.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
        return CLIENT_SHUT;
    }
    return CLIENT_HERE;
}

/* The socket has news while a body comes to its handler: read it, unless
 * the handler has enough unread (then once it took some). Only a reset
 * is judged here: the client's end midway shows as a read's. */
static void
bodyReady(HttpConn* c)
{
    if (c->k.events & (EPOLLERR | EPOLLHUP)) {
        corHttpConnClose(c);
        return;
    }
    c->readPaused = true;
    if (!c->bodyHeld) {
        serve(c);
    }
}

/* Output went on its own (EPOLLOUT). Returns -1 when c ended. */
static int
outputWent(HttpConn* c)
{
    if (c->state == HTTP_CLOSING && corKitConnOutPending(&c->k) == 0) {
        corHttpConnEnd(c);
        return -1;
    }
    if (c->state == HTTP_SERVING && c->req != NULL
        && c->req->r.stream != NULL) {
        corResponseStreamDrained(&c->req->r);
    }
    return 0;
}

/* The kit flushed on EPOLLOUT, and nothing was to read. */
static void
wrote(CorKitConn* k)
{
    HttpConn* c = corContainerOf(k, HttpConn, k);

    corHttpConnFlushed(c, true);
    if (outputWent(c) != 0 || c->state == HTTP_LINGER) {
        return;
    }
    if (corKitConnOutPending(k) == 0 && c->state != HTTP_SERVING) {
        serve(c); /* output drained below the high water */
    }
}

/* The socket has input, its end or an error (and perhaps room). */
static void
ready(CorKitConn* k)
{
    HttpConn* c = corContainerOf(k, HttpConn, k);

    if ((k->events & EPOLLOUT) && corKitConnOutPending(k) > 0) {
        if (corHttpConnFlush(c) != 0) {
            corHttpConnClose(c);
            return;
        }
        if (outputWent(c) != 0) {
            return;
        }
    }
    if (c->state == HTTP_LINGER) {
        corHttpConnLinger(c);
        return;
    }
    if (c->state == HTTP_SERVING && c->bodyStream == HTTP_BODY_STREAMING) {
        bodyReady(c);
        return;
    }
    if (c->state == HTTP_SERVING) {
        switch (clientState(c)) {
        case CLIENT_RESET:
            corHttpConnClose(c); /* which cancels the request's waits */
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
        c->readPaused = true; /* read once the handler is done */
        return;
    }
    if (corHttpRead(c) != 0) {
        corHttpConnClose(c);
        return;
    }
    if (http2HandOff(c)) {
        return;
    }
    if (c->state == HTTP_BODY) {
        corHttpConnProgress(c); /* body came: its wait restarts */
    }
    serve(c);
}

static void
failed(CorKitConn* k, int rc, const char* why)
{
    (void)rc;
    (void)why;
    corHttpConnClose(corContainerOf(k, HttpConn, k));
}

/* HTTP reads through its own budget (corHttpRead), never the kit's
 * corKitConnRead: no take, end, reserve or readMay. */
static const CorKitOps kitOps = {
    .ready = ready,
    .fail = failed,
    .wrote = wrote,
    .expired = corHttpConnExpired,
};

void
corHttpServeOpen(HttpLoop* hl, const CorListener* l, int fd,
                 const struct sockaddr_storage* peer)
{
    HttpConn* c = calloc(1, sizeof(*c));
    uint64_t handshakeMs = corListenerHandshakeTimeoutMs(l);

    if (corAcceptTransport(l, c != NULL ? &c->t : NULL, fd) != 0) {
        free(c);
        return;
    }
    corKitConnInit(&c->k, hl->loop, &kitOps);
    c->k.highWater = OUT_HIGH_WATER;
    c->hl = hl;
    c->peer = *peer;
    corPeerAddress(peer, c->remote, sizeof(c->remote));
    c->tls = handshakeMs > 0; /* a plain listener has no handshake */
    c->handshakeMs = (uint32_t)handshakeMs;
    c->h2c = !c->tls && corListenerHttp2(l);
    c->altSvc = corHttp3AltSvc(hl, l);
    if (corKitConnStart(&c->k, &c->t, &hl->conns) != 0) {
        corHttpConnClose(c);
        return;
    }
    /* The first request gets the head's deadline from its first byte; a
     * connection that sends nothing at all is an idle one (over TLS, for
     * the handshake's time). */
    corHttpConnStateSet(c, HTTP_IDLE);
}
