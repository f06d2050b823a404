/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP client's exchange over HTTP/2: a stream of the one connection
 * its loop keeps to the peer (corHttp2ClientConn.c), opened and waited on
 * within the exchange's deadlines, with the one retry of a stream the
 * server refused unprocessed; its body read as the stream's DATA comes.
 */
#include "corHttpClientInt.h"
#include "corHttp2ClientInt.h"

#include <errno.h>
#include <stdio.h>

typedef CorHttpClientExchange Exchange;

/* Wait for news of the stream within the deadlines that apply. Returns 0
 * or -errno (said). May yield. */
static int
h2Wait(Exchange* ex)
{
    int rc = corHttpClientWaitMs(ex) == -ETIMEDOUT
                 ? -ETIMEDOUT
                 : corHttp2StreamWait(ex->h2, corHttpClientDeadlineNext(ex));

    if (rc == -ETIMEDOUT) {
        corHttpClientTimeoutSay(ex);
    } else if (rc == -ECANCELED) {
        corHttpClientFail(ex, "%s: cancelled", corHttpClientPeer(ex));
    }
    return rc;
}

/* The next body bytes of the stream; 0 at its end (its trailers in res). */
ssize_t
corHttpClientH2Read(Exchange* ex, char* buf, size_t len)
{
    ssize_t n;

    while ((n = corHttp2StreamRead(ex->h2, buf, len, ex->res)) == -EAGAIN) {
        int rc = h2Wait(ex);

        if (rc < 0) {
            return rc;
        }
    }
    ex->done = corHttp2StreamDone(ex->h2);
    return n;
}

/* One attempt over HTTP/2: the stream submitted, its head waited for.
 * Returns 0 (ex->h2 open, res's head set), 1 when the server refused the
 * stream unprocessed (a GOAWAY's or its own REFUSED_STREAM: send again on
 * a new connection), or -errno (said; ex->h2 closed). May yield. */
static int
h2Attempt(Exchange* ex, const CorUrl* url)
{
    int ms = corHttpClientWaitMs(ex);
    int rc;

    if (ms == -ETIMEDOUT) {
        corHttpClientFail(ex,
                          "%s:%u: the exchange exceeded its total "
                          "timeout (%d ms)",
                          url->host, url->port, ex->totalTimeoutMs);
        return -ETIMEDOUT;
    }
    rc = corHttp2StreamOpen(ex->req, url, ex->req->connectTimeoutMs,
                            ex->res->retried, &ex->h2, &ex->res->reused,
                            ex->res->error, sizeof(ex->res->error));
    if (rc < 0) {
        return rc;
    }
    ex->res->sent = true;
    ex->firstByteDeadline = corHttpClientDeadline(ex->firstByteTimeoutMs,
                                                  corEvClockMs());
    while ((rc = corHttp2StreamHead(ex->h2, ex->res)) == 0) {
        rc = h2Wait(ex);
        if (rc < 0) {
            break;
        }
    }
    if (rc < 0) {
        /* A body passed on as it comes cannot go twice once a byte of
         * it was taken. */
        bool again = ex->h2->refused
                     && (ex->req->bodyFrom == NULL
                         || ex->req->bodyFrom->bodyTaken == 0);

        corHttp2StreamClose(ex->h2);
        ex->h2 = NULL;
        return again ? 1 : rc;
    }
    ex->gotByte = true;
    ex->keepAlive = true;
    ex->done = corHttp2StreamDone(ex->h2);
    return 0;
}

/* The attempt, and the one retry of a refused stream. */
int
corHttpClientH2Open(Exchange* ex, const CorUrl* url)
{
    int rc = h2Attempt(ex, url);

    if (rc == 1) {
        ex->res->retried = true;
        corHttpClientResponseReset(ex->res);
        ex->res->error[0] = '\0';
        rc = h2Attempt(ex, url);
        if (rc == 1) {
            rc = -ECONNRESET;
        }
    }
    return rc;
}
