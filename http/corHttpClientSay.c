/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the HTTP client's exchange says when it fails: the sentence in
 * res->error, once, where the failure is decided, naming the peer, and
 * which deadline passed. A file of its own so that every part of the
 * exchange (its connection, request, answer, HTTP/2 stream) says it the
 * same way and none of them calls back into the exchange that calls it.
 */
#include "corHttpClientInt.h"
#include "corHttp2ClientInt.h"

#include <stdarg.h>
#include <stdio.h>

typedef CorHttpClientExchange Exchange;

void
corHttpClientFail(Exchange* ex, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(ex->res->error, sizeof(ex->res->error), fmt, ap);
    va_end(ap);
}

/* "host:port" of the exchange's server, for messages. */
const char*
corHttpClientPeer(const Exchange* ex)
{
    return ex->h2 != NULL ? corHttp2StreamPeer(ex->h2) : corConnPeer(ex->c);
}

/* Say which deadline passed: the nearest one. */
void
corHttpClientTimeoutSay(Exchange* ex)
{
    uint64_t deadline = corHttpClientDeadlineNext(ex);
    const char* peer = corHttpClientPeer(ex);

    if (deadline == ex->totalDeadline) {
        corHttpClientFail(ex,
                          "%s: the exchange exceeded its total "
                          "timeout (%d ms)",
                          peer, ex->totalTimeoutMs);
    } else if (deadline == ex->readDeadline) {
        corHttpClientFail(ex,
                          "%s: no byte of the %s within the read "
                          "timeout (%d ms)",
                          peer, ex->res->status == 0 ? "answer's head" : "body",
                          ex->readTimeoutMs);
    } else {
        corHttpClientFail(ex, "%s: no answer within the read timeout (%d ms)",
                          peer, ex->firstByteTimeoutMs);
    }
}
