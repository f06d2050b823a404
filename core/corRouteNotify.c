/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A route's notifications (`notify:`): once a write's answer is out, its
 * body and Content-Type go to each URL of the route through corNotify,
 * with the sender of the URL's scheme, exactly as a handler's finish
 * phase would send them. So a route sends them without a line of C,
 * each is counted as every notification is (cor_notify_*{scheme}), and
 * the request is held until the last of them ended (corNotify holds it):
 * a drain waits for them.
 *
 * The URLs are checked when the routes are built, after the modules
 * registered their schemes: an unknown scheme, one that only fetches, or
 * a URL its scheme refuses is an error at the URL's line, which `cor -t`
 * reports too. A handler that streams its body (streamBody) keeps none
 * to send, so a notify on its route is an error as well.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The schemes that send, comma-separated, into out. */
static const char*
sendingSchemes(char* out, size_t cap)
{
    size_t len = 0;

    out[0] = '\0';
    for (unsigned i = 0; i < corNotifySchemeCount() && len < cap; i++) {
        CorNotifyStats stats;
        const char* name = corNotifySchemeStats(i, &stats);

        if (corSchemeFind(name)->send != NULL) {
            len += (size_t)snprintf(out + len, cap - len, "%s%s",
                                    len > 0 ? ", " : "", name);
        }
    }
    return len > 0 ? out : "none";
}

/* One URL of the route: a scheme that sends, and a URL it takes. */
static int
urlCheck(const CorConf* node, CorConfErrors* errors)
{
    const char* url = corConfText(node);
    const CorScheme* s = corSchemeOf(url);
    char why[256];
    char names[256];
    CorUrl u;

    if (s == NULL || s->send == NULL) {
        corConfErrorf(errors, node,
                      "notify: no module registered a "
                      "notification scheme for '%s' (the schemes that send: "
                      "%s)",
                      url, sendingSchemes(names, sizeof(names)));
        return -1;
    }
    if (corUrlParse(url, &u, why, sizeof(why)) != 0
        || (s->check != NULL && s->check(url, why, sizeof(why)) != 0)) {
        corConfErrorf(errors, node, "notify: '%s': %s", url, why);
        return -1;
    }
    return 0;
}

int
corRouteNotifyCheck(const CorConfigRoute* in, const CorHandlerEntry* handler,
                    CorConfErrors* errors)
{
    const CorConfigNotify* n = in->notify;
    int rc = 0;

    if (handler->handler.streamBody) {
        corConfErrorf(errors, corConfGet(in->node, "notify"),
                      "notify: "
                      "handler '%s' reads its body as it comes (streamBody) "
                      "and keeps none to send",
                      handler->handler.name);
        return -1;
    }
    for (unsigned i = 0; i < n->urlCount; i++) {
        rc |= urlCheck(n->urls[i], errors);
    }
    return rc;
}

static bool
methodListed(const CorConfigNotify* n, const CorRequest* r)
{
    for (unsigned i = 0; i < n->methodCount; i++) {
        if (strlen(n->methods[i]) == r->methodLen
            && memcmp(n->methods[i], r->method, r->methodLen) == 0) {
            return true;
        }
    }
    return false;
}

static bool
statusListed(const CorConfigNotify* n, int status)
{
    return status >= 0 && status < 640
           && (n->statuses[status / 64] >> (status % 64) & 1) != 0;
}

void
corRouteNotifySend(CorRequest* r)
{
    const CorConfigNotify* n = r->notify;
    const char* type;

    if (!methodListed(n, r) || !statusListed(n, r->status)) {
        return;
    }
    /* NULL without one, or without memory: the notification goes
     * untyped. */
    type = corRequestHeaderText(r, "Content-Type");
    for (unsigned i = 0; i < n->urlCount; i++) {
        const char* url = corConfText(n->urls[i]);
        int rc = corNotify(r, &(CorNotification){ .url = url,
                                                  .contentType = type,
                                                  .body = r->body,
                                                  .bodyLen = r->bodyLen });

        /* Due and not sent (a stop, no memory, no thread): a failed
         * notification of its scheme, as one cut short. corNotify logged
         * what it decided; a stop is logged once, by the stop. */
        if (rc < 0) {
            corNotifyFailedCount(url);
        }
        if (rc == -ENOMEM) {
            corLog(COR_LOG_WARN,
                   "notification of %.*s %.*s not sent: out "
                   "of memory",
                   (int)r->methodLen, r->method, (int)r->pathLen, r->path);
        }
    }
}
