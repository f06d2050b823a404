/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http and https in the one registry of URL schemes (core/corScheme.c):
 * the HTTP floor registers them itself, as modules/cor registers cor, so
 * that the core names no protocol. Their fetch is the HTTP/1 exchange
 * (corHttpClient.c); their notifications go as exchanges, and so may
 * those of any scheme that fetches (corHttpClientNotify). corClientFetch
 * (core/corClientCall.c), the one client entry, hands a URL to its
 * scheme.
 *
 * Registered when the binary starts, by the binary's main
 * (corHttpMain.c) with an explicit call, not a constructor (STYLE.md: no
 * constructors): the floor is linked into the binary and has no init of
 * its own, and the core may not call up into it. The registry is empty
 * then, so the two cannot be refused, and a generation (a fork) inherits
 * them, first, before its modules' schemes.
 */
#include "corHttpClientInt.h"
#include "corHttp2ClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* An exchange read as it comes, over HTTP/1.1 or HTTP/2 alike
 * (corHttpClient.c): what corClientOpen reads http and https with. */
static const CorClientOps streamOps = {
    .size = sizeof(CorHttpClientExchange),
    .open = corHttpClientOpen,
    .read = corHttpClientBodyRead,
    .done = corHttpClientBodyDone,
    .upgraded = corHttpClientUpgraded,
    .close = corHttpClientClose,
};

void
corHttpSchemesAdd(void)
{
    static const char* const names[] = { "http", "https" };

    for (unsigned i = 0; i < 2; i++) {
        corSchemeAdd(NULL, &(CorScheme){ .scheme = names[i],
                                         .fetch = corHttpClientExchange,
                                         .send = corHttpClientNotify,
                                         .loopExit = corHttp2ClientLoopExit,
                                         .stream = &streamOps });
    }
}

int
corHttpClientNotify(CorModule* m, const CorNotification* n, char* why,
                    size_t whyLen)
{
    CorHeader headers[COR_NOTIFY_HEADERS_MAX + 1];
    unsigned count = n->headerCount;
    CorClientResponse res;
    int rc;

    (void)m;
    if (count > 0) {
        memcpy(headers, n->headers, count * sizeof(*headers));
    }
    if (n->contentType != NULL) {
        headers[count++] = (CorHeader){ "Content-Type", 12, n->contentType,
                                        strlen(n->contentType) };
    }
    rc = corClientFetch(&(CorClientRequest){
        .method = n->method, .url = n->url, .headers = headers,
        .headerCount = count, .body = n->body, .bodyLen = n->bodyLen,
        .totalTimeoutMs = n->timeoutMs }, &res);
    if (rc < 0) {
        snprintf(why, whyLen, "%s", res.error);
    } else if (res.status < 200 || res.status > 299) {
        snprintf(why, whyLen, "answered %d", res.status);
        rc = -EPROTO;
    }
    corClientResponseFree(&res);
    return rc;
}
