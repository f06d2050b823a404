/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A route's notify key: a URL, a list of them, or
 * { urls: [...], methods: [POST, PUT], statuses: [201, 2xx] }. Here the
 * shape, the methods' spelling and the statuses' range; whether a URL's
 * scheme is registered and takes it is known once the modules are loaded
 * (corRouteNotify.c, which `cor -t` runs too).
 */
#include "corConfigRead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The methods whose answer says something was written. */
static const char* const writes[] = { "POST", "PUT", "PATCH", "DELETE" };

static void
statusSet(CorConfigNotify* n, unsigned status)
{
    n->statuses[status / 64] |= 1ULL << (status % 64);
}

/* urls: a string or a list of strings, at least one. */
static bool
readUrls(CorConfigNotify* n, const CorConf* urls, CorConfErrors* e)
{
    bool list = corConfKind(urls) == COR_CONF_SEQ;
    size_t count = list ? corConfCount(urls) : 1;

    if (count == 0 || (!list && corConfKind(urls) != COR_CONF_SCALAR)) {
        corConfErrorf(e, urls,
                      "notify: expected a URL or a list of them, "
                      "such as [ \"http://audit/in\", \"mqtt://broker/t\" ]");
        return false;
    }
    n->urls = calloc(count, sizeof(*n->urls));
    if (n->urls == NULL) {
        corConfErrorf(e, urls, "out of memory reading the configuration");
        return false;
    }
    for (size_t i = 0; i < count; i++) {
        const CorConf* url = list ? corConfAt(urls, i) : urls;

        if (corConfKind(url) != COR_CONF_SCALAR
            || corConfText(url)[0] == '\0') {
            corConfErrorf(e, url, "notify: expected a URL (scheme://...)");
            return false;
        }
        n->urls[n->urlCount++] = url;
    }
    return true;
}

/* methods: [POST, PUT]: tokens in capitals, as a route's match spells
 * them. */
static bool
readMethods(CorConfigNotify* n, const CorConf* methods, CorConfErrors* e)
{
    size_t count = corConfCount(methods);

    if (corConfKind(methods) != COR_CONF_SEQ || count == 0) {
        corConfErrorf(e, methods,
                      "notify.methods: expected a list of "
                      "methods, such as [ POST, PUT ]");
        return false;
    }
    n->methods = calloc(count, sizeof(*n->methods));
    if (n->methods == NULL) {
        corConfErrorf(e, methods, "out of memory reading the configuration");
        return false;
    }
    for (size_t i = 0; i < count; i++) {
        const char* m = corConfText(corConfAt(methods, i));

        if (m == NULL || m[0] == '\0'
            || strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(m)) {
            corConfErrorf(e, corConfAt(methods, i),
                          "notify.methods: "
                          "expected a method in capitals (such as POST)");
            return false;
        }
        n->methods[n->methodCount++] = m;
    }
    return true;
}

/* One entry of statuses: a status (100..599) or a class ("2xx"). */
static bool
readStatus(CorConfigNotify* n, const CorConf* node, CorConfErrors* e)
{
    const char* text = corConfText(node);
    char* end = NULL;
    long status = text != NULL ? strtol(text, &end, 10) : 0;

    if (text != NULL && strlen(text) == 3 && text[0] >= '1' && text[0] <= '5'
        && strcmp(text + 1, "xx") == 0) {
        for (unsigned s = 0; s < 100; s++) {
            statusSet(n, (unsigned)(text[0] - '0') * 100 + s);
        }
        return true;
    }
    if (end == NULL || end == text || *end != '\0' || status < 100
        || status > 599) {
        corConfErrorf(e, node,
                      "notify.statuses: expected a status "
                      "(100..599) or a class such as 2xx, got '%s'",
                      text != NULL ? text : "a collection");
        return false;
    }
    statusSet(n, (unsigned)status);
    return true;
}

static bool
readStatuses(CorConfigNotify* n, const CorConf* statuses, CorConfErrors* e)
{
    if (corConfKind(statuses) != COR_CONF_SEQ || corConfCount(statuses) == 0) {
        corConfErrorf(e, statuses,
                      "notify.statuses: expected a list, such "
                      "as [ 201, 204 ] or [ 2xx ]");
        return false;
    }
    for (size_t i = 0; i < corConfCount(statuses); i++) {
        if (!readStatus(n, corConfAt(statuses, i), e)) {
            return false;
        }
    }
    return true;
}

/* The mapping's keys, or the defaults where it leaves them out. */
static bool
readNotify(CorConfigNotify* n, const CorConf* node, const char* where,
           CorConfErrors* e)
{
    static const char* const keys[] = { "urls", "methods", "statuses", NULL };
    const CorConf* map = corConfKind(node) == COR_CONF_MAP ? node : NULL;
    const CorConf* urls = map != NULL ? corConfGet(map, "urls") : node;
    const CorConf* methods = corConfGet(map, "methods");
    const CorConf* statuses = corConfGet(map, "statuses");
    char what[96];

    snprintf(what, sizeof(what), "%s.notify", where);
    if (map != NULL
        && (corConfUnknownKeys(map, what, keys, e) > 0
            || corConfigRequired(map, "urls", what,
                                 "the URLs "
                                 "to notify, such as [ "
                                 "\"http://audit/in\" ]",
                                 e)
                   == NULL)) {
        return false;
    }
    if (!readUrls(n, urls, e)
        || (methods != NULL && !readMethods(n, methods, e))
        || (statuses != NULL && !readStatuses(n, statuses, e))) {
        return false;
    }
    if (methods == NULL) {
        n->methods = calloc(4, sizeof(*n->methods));
        if (n->methods == NULL) {
            corConfErrorf(e, node, "out of memory reading the configuration");
            return false;
        }
        memcpy(n->methods, writes, sizeof(writes));
        n->methodCount = 4;
    }
    for (unsigned s = 200; statuses == NULL && s < 300; s++) {
        statusSet(n, s);
    }
    return true;
}

void
corConfigNotifyRead(CorConfigRoute* r, const CorConf* entry, const char* where,
                    CorConfErrors* e)
{
    const CorConf* node = corConfGet(entry, "notify");
    CorConfigNotify* n;

    if (node == NULL) {
        return;
    }
    n = calloc(1, sizeof(*n));
    if (n == NULL) {
        corConfErrorf(e, node, "out of memory reading the configuration");
        return;
    }
    if (!readNotify(n, node, where, e)) {
        corConfigNotifyFree(n);
        return;
    }
    r->notify = n;
}

void
corConfigNotifyFree(CorConfigNotify* n)
{
    if (n != NULL) {
        free(n->urls);
        free(n->methods);
        free(n);
    }
}
