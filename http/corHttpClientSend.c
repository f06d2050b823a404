/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP client's request going out: its head (built by
 * corHttpClientWire.c), then a large body from the caller's memory, or a
 * body passed on as it comes (bodyFrom: the handler's own request's),
 * unframed within the length its client said or as chunks. Every write is
 * a corConnWriteAll within the exchange's deadlines: the same code yields
 * in a coroutine and polls on a worker.
 */
#include "corHttpClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CorHttpClientExchange Exchange;

/* A piece of a body passed on as it comes, at most. */
#define BODY_CHUNK_BYTES 16384

/* A body passed on as it comes (bodyFrom), as chunks: each piece the
 * handler's request gets goes at once, within the request's read timeout
 * between pieces; the last chunk at its end. Returns 0 or -errno (said
 * when the body failed; a send's failure is the caller's to say). */
static int
bodyChunksSend(Exchange* ex)
{
    const CorClientRequest* q = ex->req;
    int between = q->readTimeoutMs > 0        ? q->readTimeoutMs
                  : q->firstByteTimeoutMs > 0 ? q->firstByteTimeoutMs
                                              : -1;
    /* Room for the size line before, and the CRLF after. */
    char* piece = malloc(16 + BODY_CHUNK_BYTES + 2);
    ssize_t n;
    int rc = 0;

    if (piece == NULL) {
        corHttpClientFail(ex, "no memory for the request's body");
        return -ENOMEM;
    }
    do {
        /* The chunk's size line goes before the piece, in one write. */
        n = corRequestBodyRead(q->bodyFrom, piece + 16, BODY_CHUNK_BYTES,
                               between);
        if (n < 0) {
            corHttpClientFail(ex, "the request's body: %s", strerror((int)-n));
            rc = (int)n;
        } else {
            int head = snprintf(piece, 16, "%zx\r\n", (size_t)n);
            int ms = corHttpClientWaitMs(ex);

            /* "5\r\npart1\r\n", and at the end "0\r\n\r\n". */
            memmove(piece + 16 - head, piece, (size_t)head);
            memcpy(piece + 16 + n, "\r\n", 2);
            rc = ms == -ETIMEDOUT
                     ? -ETIMEDOUT
                     : corConnWriteAll(ex->c, piece + 16 - head,
                                       (size_t)head + (size_t)n + 2, ms);
        }
    } while (rc == 0 && n > 0);
    free(piece);
    return rc;
}

/* A body passed on as it comes whose length its client said: sent as it
 * comes, unframed, within the head's Content-Length (as nginx passes an
 * upload on with request buffering off); a body that ends short of it
 * fails the exchange, whose connection then closes. Returns as
 * bodyChunksSend. */
static int
bodyLengthSend(Exchange* ex, uint64_t length)
{
    const CorClientRequest* q = ex->req;
    int between = q->readTimeoutMs > 0        ? q->readTimeoutMs
                  : q->firstByteTimeoutMs > 0 ? q->firstByteTimeoutMs
                                              : -1;
    char* piece = malloc(BODY_CHUNK_BYTES);
    uint64_t sent = 0;
    int rc = 0;

    if (piece == NULL) {
        corHttpClientFail(ex, "no memory for the request's body");
        return -ENOMEM;
    }
    while (rc == 0 && sent < length) {
        ssize_t n = corRequestBodyRead(q->bodyFrom, piece, BODY_CHUNK_BYTES,
                                       between);
        int ms = corHttpClientWaitMs(ex);

        if (n <= 0) {
            rc = n < 0 ? (int)n : -ECONNRESET;
            corHttpClientFail(ex, "the request's body: %s",
                              n < 0 ? strerror((int)-n) : "ended short");
            break;
        }
        sent += (uint64_t)n;
        rc = ms == -ETIMEDOUT ? -ETIMEDOUT
                              : corConnWriteAll(ex->c, piece, (size_t)n, ms);
    }
    free(piece);
    return rc;
}

/* Send the request: its head, then a large body from where it is, or the
 * body as it comes. */
int
corHttpClientRequestSend(Exchange* ex, const char* request, size_t requestLen)
{
    const CorClientRequest* q = ex->req;
    int ms = corHttpClientWaitMs(ex);
    int rc;

    rc = ms == -ETIMEDOUT ? -ETIMEDOUT
                          : corConnWriteAll(ex->c, request, requestLen, ms);
    if (rc == 0 && q->bodyFrom != NULL) {
        int64_t length = corHttpClientBodyFromLength(q);

        rc = length >= 0 ? bodyLengthSend(ex, (uint64_t)length)
                         : bodyChunksSend(ex);
        if (rc < 0 && ex->res->error[0] != '\0') {
            return rc; /* the body's failure, said */
        }
    } else if (rc == 0 && !corHttpClientBodyInline(q)) {
        ms = corHttpClientWaitMs(ex);
        rc = ms == -ETIMEDOUT ? -ETIMEDOUT
                              : corConnWriteAll(ex->c, q->body, q->bodyLen, ms);
    }
    ex->sendFailed = rc < 0 && rc != -ETIMEDOUT;
    if (rc == -ETIMEDOUT) {
        corHttpClientTimeoutSay(ex);
    } else if (rc < 0) {
        corHttpClientFail(ex, "%s: send: %s", corConnPeer(ex->c),
                          strerror(-rc));
    }
    return rc;
}
