/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request body handed on as it comes, on an HTTP/1.x connection: to
 * its handler (CorHandler.streamBody: a proxy that passes an upload on
 * while it is sent), or to the core, which gathers it for a handler that
 * takes it whole once the route accepted the request (Expect:
 * 100-continue, a body past limits.body_memory, a chunked one:
 * corRequestBodySpool.c). Such a request is served as soon as its head is
 * in; its
 * body, by length or chunked (the framing decoded, the trailers dropped),
 * goes into the core's container (corRequestBodyPut) as the socket gives
 * it, and corRequestBodyRead takes it out wherever the handler runs.
 *
 * Backpressure: past BODY_HELD_BYTES handed on and not yet taken, the
 * socket is not read (the kernel's window closes on the client), and it is
 * read again once the handler took half of it (ops->bodyConsumed, told on
 * the loop, even from a worker): so a body of any size passes in bounded
 * memory, as HTTP/2's window does for its streams. Nothing past the body
 * is ever handed on: a pipelined request behind it stays in the input,
 * read once the answer is out.
 *
 * The body ends whole (0) or failed: past limits.body_bytes (-EMSGSIZE;
 * a length said past it was refused before any byte), bad framing
 * (-EPROTO), the client's end midway (-ECONNRESET, and its handler is
 * cancelled), or, from the connection, a body_timeout between two reads
 * (-ETIMEDOUT) or its close. A refusal is answered (413, 400) while
 * nothing was answered yet, the handler's answer then going nowhere; once
 * its head went, the connection closes instead. An answer done before the
 * body came whole closes the connection after it, lingering (the rest is
 * read and dropped, never taken for a next request).
 */
#include "corHttpInt.h"

#include <errno.h>

/* Unread bytes past which the socket waits for the handler: HTTP/2's
 * default stream window (65535), rounded. */
#define BODY_HELD_BYTES (64 * 1024)
/* Read again once the handler left no more than this unread: a take of
 * each piece would wake the reading as often. */
#define BODY_RESUME_BYTES (BODY_HELD_BYTES / 2)

/*
 * Whether req is served at its head although its handler takes its body
 * whole (the core gathers it, corRequestBodySpool.c): a client that waits
 * for 100 Continue hears it only once the route and its guards accepted
 * the request; a body longer than limits.body_memory, or of a length not
 * said, goes to a file rather than into the connection's buffer.
 */
static bool
servedAtHead(const HttpRequest* req)
{
    return req->expectContinue || req->chunked
           || (req->contentLength > 0
               && (uint64_t)req->contentLength > corLimits()->bodyMemory);
}

bool
corHttpBodyStreamBegin(HttpConn* c)
{
    HttpRequest* req = c->req;
    CorRequest* r = &req->r;

    if (!(servedAtHead(req) || corRequestBodyStreams(r))
        || corRequestBodyBegin(r) != 0) {
        return false;
    }
    if (!req->chunked) {
        corRequestBodyLengthSay(r, (uint64_t)req->contentLength);
    }
    c->bodyStream = HTTP_BODY_STREAMING;
    c->bodyUnread = 0;
    c->bodyHeld = false;
    corHttpConnStateSet(c, HTTP_SERVING); /* its body's wait begins */
    return true;
}

void
corHttpBodyFail(HttpConn* c, int rc)
{
    if (c->bodyStream == HTTP_BODY_STREAMING) {
        c->bodyStream = HTTP_BODY_CUT;
        corRequestBodyEnd(&c->req->r, rc);
    }
}

void
corHttpBodyDrop(HttpConn* c)
{
    corHttpBodyFail(c, -ECONNRESET);
    c->bodyStream = HTTP_BODY_WHOLE;
    c->bodyHeld = false;
}

bool
corHttpBodyTaken(HttpConn* c, size_t n)
{
    c->bodyUnread -= n;
    if (!c->bodyHeld || c->bodyUnread > BODY_RESUME_BYTES) {
        return false;
    }
    c->bodyHeld = false;
    corHttpConnProgress(c); /* the client's wait begins again */
    return true;
}

/*
 * The body is past a limit or badly framed: it fails, and the request is
 * refused with status when its handler answered nothing yet (the handler
 * is cancelled and its answer goes nowhere, as after a client that left).
 * Returns -1 when the answer's head went already: the close says it.
 */
static int
bodyRefuse(HttpConn* c, int status)
{
    HttpRequest* req = c->req;

    corHttpBodyFail(c, status == 413 ? -EMSGSIZE : -EPROTO);
    if (req->answered) {
        corHttpLimitsSay(c, status);
        return -1;
    }
    corRequestCancel(&req->r);
    corHttpRefuse(c, status);
    req->conn = NULL;
    c->req = NULL;
    c->bodyStream = HTTP_BODY_WHOLE; /* no request's any more */
    return 0;
}

/* The body came to its end: the pieces after it are a next request's. */
static void
bodyWhole(HttpConn* c)
{
    c->bodyStream = HTTP_BODY_WHOLE;
    /* A client that shut its side with the body's last bytes waits for
     * the answer, as one that sent a whole request and its end. */
    c->req->shutBefore = c->k.peerShut;
    corRequestBodyEnd(&c->req->r, 0);
}

/* Hand on what the input holds of the body, up to the mark (the rest
 * waits there). Returns -1 when c must close. */
static int
bodyPass(HttpConn* c)
{
    HttpRequest* req = c->req;
    CorBuf* in = &c->k.in;
    char* at = (char*)corBufHead(in);
    size_t len = corBufPending(in);
    size_t consumed;
    size_t produced;
    int rc;

    if (len > BODY_HELD_BYTES - c->bodyUnread) {
        len = BODY_HELD_BYTES - c->bodyUnread;
    }
    if (req->chunked) {
        /* In place: the body bytes move to the front of what was read. */
        rc = corHttpChunkedDecode(&c->chunked, at, len, &consumed, &produced);
        if (rc >= 0 && corLimitsBody(&req->r, c->chunked.total) != 0) {
            rc = -413; /* a chunk said it brings too much */
        }
    } else {
        uint64_t left = (uint64_t)req->contentLength - c->bodyLen;

        consumed = produced = len < left ? len : (size_t)left;
        rc = produced == left;
    }
    if (rc < 0) {
        return bodyRefuse(c, -rc);
    }
    /* Counted before the put: a handler that takes within it subtracts. */
    c->bodyUnread += produced;
    if (produced > 0 && corRequestBodyPut(&req->r, at, produced) != 0) {
        corHttpBodyFail(c, -ENOMEM);
        return 0;
    }
    corBufConsume(in, consumed);
    c->bodyLen += produced;
    c->bodyHeld = c->bodyUnread >= BODY_HELD_BYTES;
    if (rc == 1) {
        bodyWhole(c);
    }
    return 0;
}

int
corHttpBodyFeed(HttpConn* c)
{
    int came = 0;

    while (c->bodyStream == HTTP_BODY_STREAMING && !c->bodyHeld) {
        if (corBufPending(&c->k.in) > 0) {
            came = 1;
            if (bodyPass(c) != 0) {
                return -1;
            }
        } else if (c->peerClosed) {
            /* Its client left midway: whatever it was to get goes to
             * nobody. */
            corHttpBodyFail(c, -ECONNRESET);
            corRequestCancel(&c->req->r);
        } else if (!c->readPaused) {
            break; /* drained: the next edge brings more */
        } else if (corHttpRead(c) != 0) {
            return -1;
        } else if (c->readPaused && corBufPending(&c->k.in) == 0) {
            /* No input buffer to be had: another read would spin. */
            corHttpBodyFail(c, -ENOMEM);
        }
    }
    if (c->bodyHeld) {
        c->readPaused = true; /* read once the handler took */
    }
    return came;
}
