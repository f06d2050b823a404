/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Routes: `match: "GET /hello"`, a path ending in a star (a prefix),
 * "=/exact" or "~regex", for the hosts of `host:` (any without it), to a
 * handler by name, a `redirect` or a `rewrite`, with an optional
 * deadline (`timeout`), a start of the path the handler does not see
 * (`strip_prefix`), guards run before the handler (`guard`,
 * corGuard.c), headers added to every answer (`headers`), request
 * headers set and removed (`request_headers`), error pages, the
 * response filters that do not see its answers (`filters`), where
 * its writes are sent once answered (`notify`, corRouteNotify.c) and
 * the cache in front of its handler (`cache`, corRouteCache.c).
 * Resolved once per generation, after the modules registered their
 * handlers; a route that names no registered handler, or a regex that
 * does not compile, is a configuration error at the route's line.
 *
 * The first route in file order that takes a request wins, as a reader
 * of the file expects, but no lookup walks them all: an index
 * (corRouteIndex.h) gives the routes of the request's host and of any
 * host, each with its exact paths in a hash, so a lookup looks only at
 * those that may match, and a regex runs only when the path starts with
 * the literal text its pattern starts with.
 */
#include "corCoreInt.h"
#include "corPath.h"
#include "corRouteIndex.h"
#include "corRouteRegex.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char* method; /* NULL: any */
    size_t methodLen;
    const char* path; /* exact or prefix; a regex's literal
                         start */
    size_t pathLen;
    bool prefix;                    /* path is a prefix (a regex's too) */
    CorRouteRegex* regex;           /* NULL: a path route */
    const CorHandlerEntry* handler; /* NULL: a redirect or rewrite */
    uint64_t timeoutMs;             /* 0: the handler's */
    CorRouteRules rules;
    CorLimits limits; /* the top level's, with its own `limits:` */
} Route;

static Route* routes;
static unsigned routeCount;
static CorRouteIndex routeIndex;
static bool routesLimited;

/* How a route is named in messages: its match, as the file writes it. */
static const char*
routeName(const CorConfigRoute* in)
{
    return corConfText(corConfGet(in->node, "match"));
}

/* A route names a handler nobody registered: say which exist, and the
 * nearest, as an unknown key does. */
static void
unknownHandler(const CorConfigRoute* in, CorConfErrors* errors)
{
    const char** names = corHandlerNames();
    char tail[1024];

    corConfErrorf(errors, in->node,
                  "route '%s': no module registered a "
                  "handler named '%s'%s",
                  routeName(in), in->handler,
                  names != NULL ? corConfSuggest(in->handler, names, "handlers",
                                                 tail, sizeof(tail))
                                : "");
    free(names);
}

/* A route names a guard nobody registered: the same, for guards. */
static void
unknownGuard(const CorConfigRoute* in, const CorConf* node,
             CorConfErrors* errors)
{
    const char** names = corGuardNames();
    char tail[1024];

    corConfErrorf(errors, node,
                  "route '%s': no module registered a "
                  "guard named '%s'%s",
                  routeName(in), corConfText(node),
                  names != NULL && names[0] != NULL
                      ? corConfSuggest(corConfText(node), names, "guards", tail,
                                       sizeof(tail))
                      : " (no module registered a guard: load access or "
                        "limit)");
    free(names);
}

/* The cache in front of the route's handler, by name: one registered
 * (load cache), or an error at the key. */
static int
cacheBuild(const CorConfigRoute* in, CorRouteRules* out, CorConfErrors* errors)
{
    const CorConf* node = corConfGet(in->node, "cache");
    const char** names;
    char tail[1024];

    out->cache = corCacheFind(in->cache);
    if (out->cache != NULL) {
        return 0;
    }
    names = corCacheNames();
    corConfErrorf(errors, node,
                  "route '%s': no module registered a cache named '%s'%s",
                  routeName(in), in->cache,
                  names != NULL && names[0] != NULL
                      ? corConfSuggest(in->cache, names, "caches", tail,
                                       sizeof(tail))
                      : " (no module registered a cache: load cache)");
    free(names);
    return -1;
}

/* The route's guards, by name, in the order the file gives them. */
static int
guardsBuild(const CorConfigRoute* in, CorRouteRules* out, CorConfErrors* errors)
{
    bool list = corConfKind(in->guard) == COR_CONF_SEQ;
    unsigned count = list ? (unsigned)corConfCount(in->guard) : 1;
    int rc = 0;

    out->guards = calloc(count, sizeof(*out->guards));
    if (out->guards == NULL) {
        corConfErrorf(errors, in->guard, "out of memory");
        return -1;
    }
    for (unsigned i = 0; i < count; i++) {
        const CorConf* name = list ? corConfAt(in->guard, i) : in->guard;

        out->guards[i] = corGuardFind(corConfText(name));
        if (out->guards[i] == NULL) {
            unknownGuard(in, name, errors);
            rc = -1;
        }
    }
    out->guardCount = count;
    return rc;
}

/* The route's headers, checked as corResponseHeader checks a handler's. */
static int
headersBuild(const CorConfigRoute* in, CorRouteRules* out,
             CorConfErrors* errors)
{
    unsigned count = (unsigned)corConfCount(in->headers);
    int rc = 0;

    out->headers = calloc(count, sizeof(*out->headers));
    if (out->headers == NULL) {
        corConfErrorf(errors, in->headers, "out of memory");
        return -1;
    }
    for (unsigned i = 0; i < count; i++) {
        const char* name = corConfKeyAt(in->headers, i);
        const CorConf* value = corConfAt(in->headers, i);

        if (!corHeaderNameValid(name)
            || !corHeaderValueValid(corConfText(value))) {
            corConfErrorf(errors, value,
                          "headers: '%s': a name must be a "
                          "token (letters, digits, !#$%%&'*+-.^_`|~) and a "
                          "value must hold no CR, LF or other control "
                          "character",
                          name);
            rc = -1;
        }
        out->headers[i] = (CorHeader){ name, strlen(name), corConfText(value),
                                       strlen(corConfText(value)) };
    }
    out->headerCount = count;
    return rc;
}

/* The bits of the filters a route turns off; a name no module added is
 * an error at its key, with the names there are. */
static int
filtersOffResolve(const CorConfigRoute* in, uint32_t* bitsP,
                  CorConfErrors* errors)
{
    const CorConf* map = corConfGet(in->node, "filters");
    int rc = 0;

    *bitsP = 0;
    for (unsigned k = 0; k < in->filtersOffCount; k++) {
        const char* name = in->filtersOff[k];
        int index = corFilterIndex(name);
        const char** names;
        char tail[1024];

        if (index >= 0) {
            *bitsP |= 1u << index;
            continue;
        }
        names = corFilterNames();
        corConfErrorf(errors, corConfGet(map, name),
                      "filters: no module "
                      "added a filter named '%s'%s",
                      name,
                      names != NULL && names[0] != NULL
                          ? corConfSuggest(name, names, "filters", tail,
                                           sizeof(tail))
                          : " (no module loaded adds one)");
        free(names);
        rc = -1;
    }
    return rc;
}

/* ---- Building ------------------------------------------------------------ */

/* The regex of in compiled into out; a pattern PCRE2 refuses is an error
 * at its match, naming the offset it stopped at. */
static int
regexBuild(const CorConfigRoute* in, Route* out, CorConfErrors* errors)
{
    char why[256];
    size_t offset = 0;
    char* prefix;

    out->regex = corRouteRegexCompile(in->regex, in->regexCaseless, &prefix,
                                      why, sizeof(why), &offset);
    if (out->regex == NULL) {
        corConfErrorf(errors, corConfGet(in->node, "match"),
                      "match: the "
                      "regular expression '%s' does not compile: %s (at "
                      "offset %zu)",
                      in->regex, why, offset);
        return -1;
    }
    out->path = prefix;
    out->pathLen = strlen(prefix);
    out->prefix = true;
    return 0;
}

/* The highest {N} a template of in names: it must be one of the groups
 * of its regex ({0} of any), or it would fill in nothing, unseen. */
static int
capturesCheck(const CorConfigRoute* in, const Route* out, CorConfErrors* errors)
{
    unsigned groups = out->regex != NULL ? corRouteRegexGroups(out->regex) : 0;
    unsigned most = 0;

    most = in->redirect != NULL && in->redirect->maxCapture > most
               ? in->redirect->maxCapture
               : most;
    most = in->rewrite != NULL && in->rewrite->maxCapture > most
               ? in->rewrite->maxCapture
               : most;
    for (unsigned i = 0; i < in->requestSetCount; i++) {
        most = in->requestSet[i].value.maxCapture > most
                   ? in->requestSet[i].value.maxCapture
                   : most;
    }
    if (most > groups) {
        corConfErrorf(errors, corConfGet(in->node, "match"),
                      "route '%s': "
                      "a template names {%u}, but %s",
                      routeName(in), most,
                      out->regex == NULL ? "only a regex match (\"~...\") "
                                           "captures"
                                         : "its regex has fewer groups");
        return -1;
    }
    return 0;
}

/* A route in the index: under each of its hosts, or any host's. */
static int
routeIndexAdd(const CorConfigRoute* in, const Route* route, unsigned id)
{
    bool exact = route->regex == NULL && !route->prefix;

    if (in->hostCount == 0) {
        return corRouteTableAdd(corRouteIndexTable(&routeIndex, ""),
                                route->path, exact, id);
    }
    for (unsigned k = 0; k < in->hostCount; k++) {
        CorRouteTable* t = corRouteIndexTable(&routeIndex, in->hosts[k]);

        if (t == NULL || corRouteTableAdd(t, route->path, exact, id) != 0) {
            return -1;
        }
    }
    return 0;
}

/* The limits of in: the top level's, with those it sets (rules.limits
 * points to them only then, so that a request's limits tell whether
 * a route set them). The most any route takes is the top level's most. */
static void
limitsBuild(const CorConfigRoute* in, Route* out)
{
    CorLimits* top = &corRuntime.limits;

    out->limits = *top;
    if (in->limits.hasBodyBytes) {
        out->limits.bodyBytes = in->limits.bodyBytes;
    }
    if (in->limits.hasBodyTimeout) {
        out->limits.bodyTimeoutMs = in->limits.bodyTimeoutMs;
    }
    if (!in->limits.hasBodyBytes && !in->limits.hasBodyTimeout) {
        return;
    }
    out->rules.limits = &out->limits;
    routesLimited = true;
    if (out->limits.bodyBytes > top->bodyBytesMost) {
        top->bodyBytesMost = out->limits.bodyBytes;
    }
}

bool
corRoutesLimited(void)
{
    return routesLimited;
}

/* The rules of in beside its handler; -1 after an error. */
static int
rulesBuild(const CorConfigRoute* in, Route* out, CorConfErrors* errors)
{
    int rc = 0;

    if (filtersOffResolve(in, &out->rules.filtersOff, errors) != 0) {
        return -1;
    }
    out->rules.stripLen = in->stripPrefix ? strlen(in->stripPrefix) : 0;
    out->rules.notify = in->notify;
    out->rules.route = in;
    limitsBuild(in, out);
    if (in->notify != NULL) {
        rc |= corRouteNotifyCheck(in, out->handler, errors);
    }
    if (in->guard != NULL) {
        rc |= guardsBuild(in, &out->rules, errors);
    }
    if (in->cache != NULL) {
        rc |= cacheBuild(in, &out->rules, errors);
    }
    if (in->headers != NULL) {
        rc |= headersBuild(in, &out->rules, errors);
    }
    if (in->errorPageCount > 0) {
        CorErrorPages* pages = malloc(sizeof(*pages));

        if (pages == NULL
            || corErrorPagesBuild(in->errorPages, in->errorPageCount,
                                  corRouteErrorPages(), pages)
                   != 0) {
            corConfErrorf(errors, in->node, "out of memory");
            free(pages);
            return -1;
        }
        out->rules.errorPages = pages;
    } else {
        out->rules.errorPages = corRouteErrorPages();
    }
    return rc;
}

int
corRoutesBuild(const CorConfig* config, CorConfErrors* errors)
{
    int rc = 0;

    routes = calloc(config->routeCount ? config->routeCount : 1,
                    sizeof(*routes));
    if (routes == NULL || corRouteIndexTable(&routeIndex, "") == NULL
        || corErrorPagesTopBuild(config) != 0) {
        return -1;
    }
    corRuntime.limits.bodyBytesMost = corRuntime.limits.bodyBytes;
    for (unsigned i = 0; i < config->routeCount; i++) {
        const CorConfigRoute* in = &config->routes[i];
        Route* out = &routes[routeCount];

        /* The slot of a route that failed before is taken again: what it
         * set (a regex, a handler) must not pass for this one's. */
        memset(out, 0, sizeof(*out));

        if (in->handler != NULL) {
            out->handler = corHandlerFind(in->handler);
            if (out->handler == NULL) {
                unknownHandler(in, errors);
                rc = -1;
                continue;
            }
        }
        out->method = in->method;
        out->methodLen = in->method ? strlen(in->method) : 0;
        out->timeoutMs = in->timeoutMs;
        out->rules.index = i;
        if (in->regex != NULL) {
            if (regexBuild(in, out, errors) != 0) {
                rc = -1;
                continue;
            }
        } else {
            out->path = in->path;
            out->pathLen = strlen(in->path);
            out->prefix = in->prefix;
        }
        if (rulesBuild(in, out, errors) != 0
            || capturesCheck(in, out, errors) != 0) {
            rc = -1;
            continue;
        }
        if (routeIndexAdd(in, out, routeCount) != 0) {
            corConfErrorf(errors, in->node, "out of memory");
            return -1;
        }
        routeCount++;
    }
    return rc;
}

/* ---- Looking up ---------------------------------------------------------- */

static bool
isHeadOfGet(const char* method, size_t methodLen, const Route* route)
{
    return methodLen == 4 && memcmp(method, "HEAD", 4) == 0
           && route->methodLen == 3 && memcmp(route->method, "GET", 3) == 0;
}

/* Add a method to a 405's Allow list, once; a list too long to hold
 * keeps what fits. */
static void
allowAdd(char* allow, const char* method, size_t methodLen)
{
    size_t len = strlen(allow);

    for (const char* p = allow; *p != '\0';) {
        size_t n = strcspn(p, ",");

        if (n == methodLen && memcmp(p, method, n) == 0) {
            return;
        }
        p += n;
        p += *p == ',' ? 2 : 0;
    }
    if (len + methodLen + 3 > COR_ROUTE_ALLOW_MAX) {
        return;
    }
    if (len > 0) {
        memcpy(allow + len, ", ", 2);
        len += 2;
    }
    memcpy(allow + len, method, methodLen);
    allow[len + methodLen] = '\0';
}

/* One lookup: the request's method and path, the best route so far (an
 * id past every route: none), and what a 405 would say: its Allow (in
 * the match), and the headers and the error pages of the first route in
 * the file, of those that took the path but not the method, that has
 * some of its own. */
typedef struct {
    const char* method;
    size_t methodLen;
    const char* path;
    size_t pathLen;
    unsigned best;
    bool pathSeen;        /* some route took the path, not the method */
    bool failed;          /* a regex could not be run */
    unsigned headersFrom; /* the route a 405's headers are from */
    unsigned pagesFrom;   /* and its error pages */
    CorRouteMatch* match;
} Lookup;

static bool
methodTakes(const Route* route, const Lookup* k)
{
    return route->method == NULL
           || (route->methodLen == k->methodLen
               && memcmp(route->method, k->method, k->methodLen) == 0)
           || isHeadOfGet(k->method, k->methodLen, route);
}

/* Route id, whose path (or literal start) the index found the path to
 * have, against the rest: its regex, its method. */
static void
routeTry(Lookup* k, unsigned id)
{
    const Route* route = &routes[id];
    CorRouteMatch* match = k->match;
    size_t ov[2 * COR_ROUTE_CAPTURES];
    int matched = route->regex != NULL
                      ? corRouteRegexMatch(route->regex, k->path, k->pathLen,
                                           ov)
                      : 1;

    if (matched < 0) {
        /* Not "no match": a later route would take what this one may
         * have been written to keep out. */
        k->failed = true;
        k->best = id;
        return;
    }
    if (matched == 0) {
        return;
    }
    if (methodTakes(route, k)) {
        k->best = id;
        match->handler = route->handler;
        match->timeoutMs = route->timeoutMs != 0 || route->handler == NULL
                               ? route->timeoutMs
                               : route->handler->handler.timeoutMs;
        match->rules = route->rules;
        match->captured = route->regex != NULL;
        if (match->captured) {
            memcpy(match->captures, ov, sizeof(ov));
        }
        return;
    }
    /* A 405 is the path's answer: the first of its routes in the file
     * that has headers gives them (the lists are not tried in file
     * order), and only to a 405. */
    if (route->rules.headerCount > 0 && id < k->headersFrom) {
        k->headersFrom = id;
    }
    if (route->rules.errorPages != corRouteErrorPages() && id < k->pagesFrom) {
        k->pagesFrom = id;
    }
    /* Only the method differs: the methods the path has make the 405's
     * Allow (RFC 9110 15.5.6); a GET route allows HEAD too. */
    allowAdd(match->allow, route->method, route->methodLen);
    if (route->methodLen == 3 && memcmp(route->method, "GET", 3) == 0) {
        allowAdd(match->allow, "HEAD", 4);
    }
    k->pathSeen = true;
}

/* The routes of a list that come before the best so far, tried in
 * order. Lists are tried one after another: a later list may hold an
 * earlier route, which then wins instead. */
static void
idsTry(Lookup* k, const CorRouteIds* ids)
{
    for (unsigned i = 0; i < ids->count && ids->ids[i] < k->best; i++) {
        routeTry(k, ids->ids[i]);
    }
}

/* The routes of t that may take the path: its exact path's, then those
 * of each prefix of it the trie holds, from the shortest. */
static void
tableSearch(Lookup* k, const CorRouteTable* t)
{
    long at = corRouteMapGet(&t->exact, k->path, k->pathLen);
    unsigned node = 0;

    if (at >= 0) {
        idsTry(k, &t->lists[at]);
    }
    if (t->nodeCount == 0) {
        return;
    }
    idsTry(k, &t->nodes[0].ids);
    for (size_t i = 0; i < k->pathLen; i++) {
        node = corRouteNodeChild(t, node, (unsigned char)k->path[i]);
        if (node == 0) {
            return;
        }
        idsTry(k, &t->nodes[node].ids);
    }
}

/* The Host r names, less its port, lowercased into buf; its length (0:
 * none, or one too long to be a name). */
static size_t
hostKey(const CorRequest* r, char* buf, size_t cap)
{
    const CorHeader* h = corRequestHeader(r, "Host");
    size_t n = h != NULL ? corHostNameLen(h->value, h->valueLen) : 0;

    if (n >= cap) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = h->value[i];

        buf[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 'a' - 'A') : ch;
    }
    buf[n] = '\0';
    /* "example.com." is example.com (RFC 1034 3.1). */
    return n > 0 && buf[n - 1] == '.' ? n - 1 : n;
}

/* The tables of the request's host: its name's, then each wildcard
 * suffix's ("*.b.example.org", "*.example.org", "*.org"). */
static void
hostSearch(Lookup* k, const CorRequest* r)
{
    char host[256];
    size_t n;
    long at;

    if (routeIndex.tableCount == 1) {
        return;
    }
    n = hostKey(r, host, sizeof(host));
    if (n == 0) {
        return;
    }
    at = corRouteMapGet(&routeIndex.hosts, host, n);
    if (at >= 0) {
        tableSearch(k, &routeIndex.tables[at]);
    }
    for (const char* dot = routeIndex.wildcards.used > 0 ? memchr(host, '.', n)
                                                         : NULL;
         dot != NULL;
         dot = memchr(dot + 1, '.', n - (size_t)(dot + 1 - host))) {
        at = corRouteMapGet(&routeIndex.wildcards, dot + 1,
                            n - (size_t)(dot + 1 - host));
        if (at >= 0) {
            tableSearch(k, &routeIndex.tables[at]);
        }
    }
}

CorRouteResult
corRouteFind(const CorRequest* r, CorRouteMatch* match)
{
    Lookup k = { .method = r->method,
                 .methodLen = r->methodLen,
                 .path = r->path,
                 .pathLen = r->pathLen,
                 .best = routeCount,
                 .headersFrom = routeCount,
                 .pagesFrom = routeCount,
                 .match = match };

    match->allow[0] = '\0';
    match->rules.headerCount = 0;
    match->rules.errorPages = corRouteErrorPages();
    match->rules.limits = NULL;
    match->captured = false;
    hostSearch(&k, r);
    tableSearch(&k, &routeIndex.tables[0]);
    if (k.failed) {
        corLog(COR_LOG_ERROR,
               "route '%s': its regex could not be run on "
               "%.*s (a match or depth limit): 500",
               routeName(routes[k.best].rules.route), (int)k.pathLen, k.path);
        return COR_ROUTE_FAILED;
    }
    if (k.best < routeCount) {
        return COR_ROUTE_FOUND;
    }
    if (k.headersFrom < routeCount) {
        match->rules.headers = routes[k.headersFrom].rules.headers;
        match->rules.headerCount = routes[k.headersFrom].rules.headerCount;
    }
    if (k.pagesFrom < routeCount) {
        match->rules.errorPages = routes[k.pagesFrom].rules.errorPages;
    }
    return k.pathSeen ? COR_ROUTE_NO_METHOD : COR_ROUTE_NO_PATH;
}

/*
 * Cut the route's prefix, n bytes of the normalized path, from both of
 * r's paths. What a proxy passes on is then the rest of the path as the
 * client sent it, normalized as the routes saw it but with its escapes
 * as they came ("%2F" is not '/' to every upstream); unstripped, it is
 * the path as sent, whatever it holds.
 */
void
corRoutePathStrip(CorRequest* r, size_t n)
{
    char* raw = r->rawPath != NULL ? corRequestAlloc(r, r->rawPathLen + 1)
                                   : NULL;
    int rawLen = raw != NULL
                     ? corPathEscapedNormal(r->rawPath, r->rawPathLen, raw)
                     : -1;
    size_t at = 0;

    r->path += n;
    r->pathLen -= n;
    r->rawPath = NULL;
    if (rawLen < 0) {
        return; /* the decoded path says it, escaped again */
    }
    /* The normal forms run side by side: an escape is three raw bytes
     * for one decoded. */
    for (size_t k = 0; k < n && at < (size_t)rawLen; k++) {
        at += raw[at] == '%' ? 3 : 1;
    }
    if (at < (size_t)rawLen && raw[at] == '/') {
        r->rawPath = raw + at;
        r->rawPathLen = (size_t)rawLen - at;
    }
    /* else an escaped '/' starts the rest: the decoded path says it */
}
