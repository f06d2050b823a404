/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP client's exchange: opened (the URL and request checked, then
 * over HTTP/2, or on an HTTP/1.1 connection with its retry:
 * corHttpClientConn.c), its body read as it comes (corHttpClientAnswer.c,
 * corHttpClientOver2.c) and closed, its connection given back to the
 * pool when the answer was read to its end; and the fetch, which reads
 * the body whole. What goes out is corHttpClientSend.c's.
 *
 * The client never sees a socket or OpenSSL: every wait is a read or a
 * write of the CorConn, hence a corRestWaitFd: the same code yields in a
 * coroutine and polls on a worker, and a cancel ends it.
 */
#include "corHttpClientInt.h"
#include "corHttp2ClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CorHttpClientExchange Exchange;

/* A body read whole starts with this much room. */
#define BODY_READ_MIN 16384

/* Whether q asks to switch protocols: a Connection field that lists
 * upgrade (RFC 9110 section 7.8). */
static bool
upgradeAsked(const CorClientRequest* q)
{
    for (unsigned i = 0; i < q->headerCount; i++) {
        const CorHeader* h = &q->headers[i];

        if (corHttpClientNameIs(h->name, h->nameLen, "connection")
            && corHeaderListHas(h, "upgrade", 7)) {
            return true;
        }
    }
    return false;
}

/* exchangeOpen, of a request whose body is in memory (or comes as it is
 * read over HTTP/2). */
static int
exchangeOpenAs(Exchange* ex, const CorClientRequest* req,
               CorClientResponse* res)
{
    char* request = NULL;
    size_t requestLen = 0;
    size_t requestSize = 0;
    CorUrl url;
    int rc;

    *ex = (Exchange){ .req = req,
                      .res = res,
                      .c = NULL,
                      .firstByteTimeoutMs = req->firstByteTimeoutMs,
                      .totalTimeoutMs = req->totalTimeoutMs,
                      .betweenMs = req->readTimeoutMs > 0
                                       ? req->readTimeoutMs
                                       : req->firstByteTimeoutMs,
                      .upgrade = !req->http2 && upgradeAsked(req) };
    rc = corHttpClientUrlCheck(req, &url, res->error, sizeof(res->error));
    if (rc == 0) {
        rc = corHttpClientRequestCheck(req, res->error, sizeof(res->error));
    }
    if (rc < 0) {
        goto failed;
    }
    ex->totalDeadline = corHttpClientDeadline(req->totalTimeoutMs,
                                              corEvClockMs());
    if (req->http2) {
        rc = corHttpClientH2Open(ex, &url);
        if (rc < 0) {
            goto failed;
        }
        ex->req = NULL;
        return 0;
    }
    request = corHttpClientRequestHead(req, &url, &requestLen, &requestSize,
                                       &ex->wantClose);
    if (request == NULL) {
        rc = -ENOMEM;
        goto failed;
    }
    rc = corHttpClientAttemptTwice(ex, &url, request, requestLen);
    if (rc < 0) {
        goto failed;
    }
    corChunkGive(request, requestSize);
    ex->req = NULL;
    res->head = ex->buf; /* the headers point into it */
    return 0;

failed:
    corChunkGive(request, requestSize);
    ex->req = NULL;
    free(ex->buf);
    ex->buf = NULL;
    corHttpClientResponseReset(res);
    if (res->error[0] == '\0') {
        snprintf(res->error, sizeof(res->error), "%s", strerror(-rc));
    }
    return rc;
}

/* Open ex (on the caller's memory): send and read the head, with the one
 * retry. Returns 0 or -errno, res->error said. */
static int
exchangeOpen(Exchange* ex, const CorClientRequest* req, CorClientResponse* res)
{
    memset(res, 0, sizeof(*res));
    return exchangeOpenAs(ex, req, res);
}

/* Done with an opened ex: its connection back to the pool when the
 * answer was read to its end and nothing forbids reuse, else closed. */
static void
exchangeClose(Exchange* ex)
{
    corHttp2StreamClose(ex->h2);
    ex->h2 = NULL;
    if (ex->c == NULL) {
        return;
    }
    if (ex->done && ex->failed == 0 && ex->keepAlive && !ex->extra
        && !ex->wantClose) {
        corConnRelease(ex->c);
    } else {
        corConnClose(ex->c);
    }
    ex->c = NULL;
}

int
corHttpClientOpen(void* stream, const CorClientRequest* req,
                  CorClientResponse* res)
{
    return exchangeOpenAs(stream, req, res);
}

ssize_t
corHttpClientBodyRead(void* stream, void* buf, size_t len, int timeoutMs)
{
    Exchange* x = stream;
    ssize_t n;

    if (x->failed < 0) {
        return x->failed;
    }
    if (x->done) {
        return 0;
    }
    if (len == 0) {
        return -EINVAL;
    }
    x->readTimeoutMs = timeoutMs;
    x->readDeadline = corHttpClientDeadline(timeoutMs, corEvClockMs());
    n = x->h2 != NULL ? corHttpClientH2Read(x, buf, len)
                      : corHttpClientBodyNext(x, buf, len);
    x->readDeadline = 0;
    if (n < 0) {
        x->failed = (int)n;
    }
    return n;
}

bool
corHttpClientBodyDone(const void* stream)
{
    return ((const Exchange*)stream)->done;
}

CorConn*
corHttpClientUpgraded(void* stream, const void** restP, size_t* restLenP)
{
    Exchange* x = stream;
    CorConn* c = x->c;

    if (c == NULL || x->res->status != 101) {
        return NULL;
    }
    x->c = NULL;
    *restP = x->rest;
    *restLenP = x->restLen;
    x->restLen = 0;
    return c;
}

void
corHttpClientClose(void* stream)
{
    exchangeClose(stream);
}

/* Fetch: the whole body into one buffer (malloc) within limit. */
static int
bodyCollect(Exchange* ex, size_t limit)
{
    CorClientResponse* res = ex->res;
    size_t cap = BODY_READ_MIN;

    if (ex->framing == FRAME_LENGTH) {
        if (ex->left > limit) {
            goto tooLarge;
        }
        cap = (size_t)ex->left + 1;
    }
    res->body = malloc(cap);
    while (res->body != NULL && !ex->done) {
        ssize_t n;

        if (cap - res->bodyLen < 2) {
            char* body = realloc(res->body, cap * 2);

            if (body == NULL) {
                break;
            }
            res->body = body;
            cap *= 2;
        }
        n = corHttpClientBodyRead(ex, res->body + res->bodyLen,
                                  cap - res->bodyLen - 1,
                                  ex->betweenMs > 0 ? ex->betweenMs : -1);
        if (n < 0) {
            return (int)n;
        }
        res->bodyLen += (size_t)n;
        if (res->bodyLen > limit) {
            goto tooLarge;
        }
    }
    if (res->body == NULL || !ex->done) {
        corHttpClientFail(ex, "no memory for an answer's body");
        return -ENOMEM;
    }
    res->body[res->bodyLen] = '\0';
    return 0;

tooLarge:
    corHttpClientFail(ex,
                      "%s: the answer's body is over the limit of %zu "
                      "bytes",
                      corHttpClientPeer(ex), limit);
    return -EFBIG;
}

int
corHttpClientExchange(const CorClientRequest* req, CorClientResponse* res)
{
    size_t limit = req->maxBodyBytes > 0 ? req->maxBodyBytes
                                         : COR_CLIENT_BODY_MAX;
    Exchange ex;
    int rc;

    rc = exchangeOpen(&ex, req, res);
    if (rc < 0) {
        return rc;
    }
    rc = bodyCollect(&ex, limit);
    if (rc < 0) {
        ex.failed = rc;
    }
    exchangeClose(&ex);
    if (rc < 0) {
        corClientResponseFree(res);
        res->status = 0;
        return rc;
    }
    res->error[0] = '\0';
    return 0;
}
