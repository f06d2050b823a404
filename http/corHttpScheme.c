/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http and https in the one registry of URL schemes (core/corScheme.c):
 * the HTTP floor registers them itself, as modules/cor registers cor, so
 * that the core names no protocol. Their fetch and stream operations are
 * the HTTP/1.1 and HTTP/2 exchange (corHttpClient.c); their
 * notifications go as exchanges (corClientNotify). corClientFetch
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
                                         .send = corClientNotify,
                                         .loopExit = corHttp2ClientLoopExit,
                                         .stream = &streamOps });
    }
}
