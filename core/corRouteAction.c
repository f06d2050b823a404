/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a route does beside, or in place of, a handler (corCoreInt.h):
 * its regex's captures kept for the request, the request headers it sets
 * and removes, a redirect, and a rewrite of the target (routed again by
 * the caller).
 */
#include "corCoreInt.h"
#include "corPath.h"
#include "corRouteRegex.h"

#include <string.h>

struct CorCaptures {
    struct {
        const char* text; /* NULL: the group took no part */
        size_t len;
    } at[COR_ROUTE_CAPTURES];
};

const char*
corRequestCapture(const CorRequest* r, unsigned n, size_t* lenP)
{
    if (r->captures == NULL || n >= COR_ROUTE_CAPTURES
        || r->captures->at[n].text == NULL) {
        return NULL;
    }
    *lenP = r->captures->at[n].len;
    return r->captures->at[n].text;
}

/* A 500 for r when what it needs cannot be had. */
static int
outOfMemory(CorRequest* r)
{
    corRespondSet(r, 500, "text/plain", "out of memory\n", 14);
    return -1;
}

int
corRouteCapturesKeep(CorRequest* r, const CorRouteMatch* match)
{
    struct CorCaptures* c;
    char* text;

    r->captures = NULL;
    if (!match->captured) {
        return 0;
    }
    /* The path may change (a strip, a rewrite): the captures are
     * copies, beside a copy of the path they point into. */
    c = corRequestAlloc(r, sizeof(*c) + r->pathLen);
    if (c == NULL) {
        return outOfMemory(r);
    }
    text = memcpy((char*)(c + 1), r->path, r->pathLen);
    for (unsigned i = 0; i < COR_ROUTE_CAPTURES; i++) {
        size_t from = match->captures[2 * i];
        size_t to = match->captures[2 * i + 1];
        bool set = from != (size_t)-1 && to >= from && to <= r->pathLen;

        c->at[i].text = set ? text + from : NULL;
        c->at[i].len = set ? to - from : 0;
    }
    r->captures = c;
    return 0;
}

/* ---- request_headers ----------------------------------------------------- */

static bool
removed(const CorConfigRoute* route, const CorHeader* h)
{
    for (unsigned i = 0; i < route->requestRemoveCount; i++) {
        if (corHeaderIs(h, route->requestRemove[i])) {
            return true;
        }
    }
    for (unsigned i = 0; i < route->requestSetCount; i++) {
        if (corHeaderIs(h, route->requestSet[i].name)) {
            return true;
        }
    }
    return false;
}

int
corRouteRequestHeaders(CorRequest* r, const CorConfigRoute* route)
{
    unsigned cap = r->headerCount + route->requestSetCount;
    CorHeader* headers;
    unsigned n = 0;

    if (route->requestSetCount == 0 && route->requestRemoveCount == 0) {
        return 0;
    }
    headers = corRequestAlloc(r, (cap > 0 ? cap : 1) * sizeof(*headers));
    if (headers == NULL) {
        return outOfMemory(r);
    }
    for (unsigned i = 0; i < r->headerCount; i++) {
        if (!removed(route, &r->headers[i])) {
            headers[n++] = r->headers[i];
        }
    }
    for (unsigned i = 0; i < route->requestSetCount; i++) {
        const CorConfigHeaderSet* set = &route->requestSet[i];
        size_t len;
        char* value = corTemplateExpand(&set->value, r, &len);

        if (value == NULL) {
            return outOfMemory(r);
        }
        headers[n++] = (CorHeader){ set->name, strlen(set->name), value, len };
    }
    r->headers = headers;
    r->headerCount = n;
    return 0;
}

/* ---- redirect, rewrite --------------------------------------------------- */

void
corRouteRedirect(CorRequest* r, const CorConfigRoute* route)
{
    size_t len;
    char* location = corTemplateExpand(route->redirect, r, &len);

    if (location == NULL || corResponseHeader(r, "Location", location) != 0) {
        outOfMemory(r);
        return;
    }
    corRespondSet(r, (int)route->redirectStatus, "text/plain", "redirected\n",
                  11);
}

/* Whether the path p[0..n) holds an escape of a NUL (a capture's byte,
 * escaped by the template): a C string would end there. */
static bool
escapedNul(const char* p, size_t n)
{
    for (const char* at = p;
         (at = memchr(at, '%', n - (size_t)(at - p))) != NULL; at++) {
        if (n - (size_t)(at - p) >= 3 && at[1] == '0' && at[2] == '0') {
            return true;
        }
    }
    return false;
}

int
corRouteRewrite(CorRequest* r, const CorConfigRoute* route)
{
    size_t len;
    char* target = corTemplateExpand(route->rewrite, r, &len);
    char* query;
    char* path;
    size_t pathLen;

    if (target == NULL) {
        return outOfMemory(r);
    }
    query = memchr(target, '?', len);
    pathLen = query != NULL ? (size_t)(query - target) : len;
    path = corRequestAlloc(r, pathLen + 1);
    if (path == NULL) {
        return outOfMemory(r);
    }
    memcpy(path, target, pathLen);
    if (pathLen == 0 || path[0] != '/' || escapedNul(path, pathLen)
        || corPathNormalize(path, pathLen, &pathLen) != 0) {
        corLog(COR_LOG_WARN,
               "route '%s' rewrote %.*s to '%s', which is "
               "no path: 400",
               corConfText(corConfGet(route->node, "match")), (int)r->pathLen,
               r->path, target);
        corRespondSet(r, 400, "text/plain", "bad rewritten target\n", 21);
        return -1;
    }
    r->path = path;
    r->pathLen = pathLen;
    r->rawPath = target;
    r->rawPathLen = query != NULL ? (size_t)(query - target) : len;
    r->query = query != NULL ? query + 1 : NULL;
    r->queryLen = query != NULL ? len - (size_t)(query + 1 - target) : 0;
    return 0;
}
