/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 client's connection for an exchange: one of the pool's or
 * a new one (corConnOpen, within the exchange's deadlines), the request
 * sent and the answer's head read on it, and the one retry.
 *
 * The retry rule: a connection from the pool may have been closed by the
 * peer as our request crossed its keep-alive timeout. When such a
 * connection fails before any byte of the answer came, the request is
 * sent once more on a new connection if the peer cannot have acted on it
 * (no byte of it was written), or if acting twice is acting once (an
 * idempotent method, RFC 9110 section 9.2.2, which RFC 9112 section 9.3.1
 * lets a client retry). A POST that was written
 * fails instead: the peer may have read it whole before it closed, and
 * only the caller knows whether a second one is harmless (nginx and
 * HAProxy answer 502 there too). Never after a byte of the answer came,
 * never on a new connection, never twice.
 */
#include "corHttpClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CorHttpClientExchange Exchange;

/* A connection for the exchange: pooled or new, within the deadlines.
 * Returns 0 (ex->c set) or -errno (res->error said). */
static int
connOpen(Exchange* ex, const CorUrl* url)
{
    const CorClientRequest* q = ex->req;
    CorConnTarget target = {
        .host = url->host,
        .port = url->port,
        .tls = strcmp(url->scheme, "https") == 0,
        .connectTimeoutMs = q->connectTimeoutMs,
        .tlsClient = q->tlsClient,
        .fresh = ex->res->retried,
    };
    int ms;
    int rc;

    ms = corHttpClientWaitMs(ex);
    if (ms == -ETIMEDOUT) {
        corHttpClientFail(ex,
                          "%s:%u: the exchange exceeded its total "
                          "timeout (%d ms)",
                          url->host, url->port, q->totalTimeoutMs);
        return -ETIMEDOUT;
    }
    if (ms > 0
        && (target.connectTimeoutMs == 0 || target.connectTimeoutMs > ms)) {
        target.connectTimeoutMs = ms;
    }
    ex->c = corConnOpen(&target, &rc, ex->res->error, sizeof(ex->res->error));
    return ex->c != NULL ? 0 : rc;
}

/*
 * The peer stopped reading the request and closed the connection: it may
 * have answered first, as a server that refuses a body does before
 * reading it (413, 401, 403), and that answer is the exchange's, passed
 * on as nginx passes it (a reset leaves what came before it readable).
 * The connection is not used again. Returns 0 with the answer's head
 * read, or rc, said as before, when no whole answer came.
 */
static int
earlyAnswer(Exchange* ex, int rc)
{
    char error[sizeof(ex->res->error)];

    memcpy(error, ex->res->error, sizeof(error));
    if (corHttpClientAnswerOpen(ex) == 0) {
        ex->keepAlive = false;
        ex->res->error[0] = '\0';
        return 0;
    }
    memcpy(ex->res->error, error, sizeof(error));
    return rc;
}

/* Whether a failed attempt goes again on a new connection: a pooled one
 * lost before any byte of the answer, with the request not written at
 * all, or idempotent, and no piece of a body passed on as it comes taken
 * (it cannot be read twice). */
static bool
resendable(const Exchange* ex, int rc)
{
    return !ex->gotByte && ex->res->reused
           && (rc == -ECONNRESET || rc == -EPIPE)
           && (corConnWritten(ex->c) == 0
               || corClientIdempotent(ex->req->method))
           && (ex->req->bodyFrom == NULL || ex->req->bodyFrom->bodyTaken == 0);
}

/* Send the request and read the answer's head on a connection. Returns 0
 * (ex->c open), 1 when a pooled connection failed before the answer's
 * first byte (send again on a new one), or -errno (ex->c closed). */
static int
attempt(Exchange* ex, const CorUrl* url, const char* request, size_t requestLen)
{
    int rc = connOpen(ex, url);

    if (rc < 0) {
        return rc;
    }
    ex->res->reused = corConnReused(ex->c);
    ex->res->sent = true;
    ex->gotByte = false;
    ex->len = 0;
    rc = corHttpClientRequestSend(ex, request, requestLen);
    ex->firstByteDeadline = corHttpClientDeadline(ex->firstByteTimeoutMs,
                                                  corEvClockMs());
    if (rc == 0) {
        rc = corHttpClientAnswerWait(ex);
        if (rc == 0) {
            rc = corHttpClientAnswerOpen(ex);
        }
    } else if (ex->sendFailed && (rc == -EPIPE || rc == -ECONNRESET)) {
        rc = earlyAnswer(ex, rc);
    }
    if (rc < 0) {
        bool again = resendable(ex, rc);

        corConnClose(ex->c);
        ex->c = NULL;
        return again ? 1 : rc;
    }
    return 0;
}

/* An attempt, and the one retry when the peer closed the pooled
 * connection under the request. Returns 0 or -errno. */
int
corHttpClientAttemptTwice(Exchange* ex, const CorUrl* url, const char* request,
                          size_t requestLen)
{
    int rc = attempt(ex, url, request, requestLen);

    if (rc == 1) {
        ex->res->retried = true;
        corHttpClientResponseReset(ex->res);
        ex->res->error[0] = '\0';
        rc = attempt(ex, url, request, requestLen);
        if (rc == 1) {
            rc = -ECONNRESET; /* a new connection is never "pooled" */
        }
    }
    return rc;
}
