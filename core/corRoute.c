/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Routes: `match: "GET /hello"`, or a path ending in a star (a prefix),
 * to a handler by name, with an optional deadline (`timeout`), a
 * start of the path the handler does not see (`strip_prefix`), guards
 * run before the handler (`guard`, corGuard.c), headers added to every
 * answer (`headers`), the response filters that do not see its
 * answers (`filters`) and where its writes are sent once answered
 * (`notify`, corRouteNotify.c).
 * Resolved once per generation, after the modules registered their
 * handlers; a route that names no registered handler is a configuration
 * error at the route's line. Lookup walks the routes in the order the
 * file gives them: exact paths and prefixes, the first that matches wins,
 * as a reader of the file expects.
 */
#include "corCoreInt.h"
#include "corPath.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char* method;         /* NULL: any */
    size_t methodLen;
    const char* path;
    size_t pathLen;
    bool prefix;
    const CorHandlerEntry* handler;
    uint64_t timeoutMs;         /* 0: the handler's */
    CorRouteRules rules;
} Route;

static Route* routes;
static unsigned routeCount;

/* A route names a handler nobody registered: say which exist, and the
 * nearest, as an unknown key does. */
static void
unknownHandler(const CorConfigRoute* in, CorConfErrors* errors)
{
    const char** names = corHandlerNames();
    char tail[1024];

    corConfErrorf(errors, in->node, "route '%s%s%s': no module registered a "
                  "handler named '%s'%s", in->method ? in->method : "",
                  in->method ? " " : "", in->path, in->handler,
                  names != NULL ? corConfSuggest(in->handler, names,
                                                 "handlers", tail,
                                                 sizeof(tail))
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

    corConfErrorf(errors, node, "route '%s%s%s': no module registered a "
                  "guard named '%s'%s", in->method ? in->method : "",
                  in->method ? " " : "", in->path, corConfText(node),
                  names != NULL && names[0] != NULL
                  ? corConfSuggest(corConfText(node), names, "guards", tail,
                                   sizeof(tail))
                  : " (no module registered a guard: load access or "
                    "limit)");
    free(names);
}

/* The route's guards, by name, in the order the file gives them. */
static int
guardsBuild(const CorConfigRoute* in, CorRouteRules* out,
            CorConfErrors* errors)
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

        if (!corHeaderNameValid(name) || !corHeaderValueValid(
                corConfText(value))) {
            corConfErrorf(errors, value, "headers: '%s': a name must be a "
                          "token (letters, digits, !#$%%&'*+-.^_`|~) and a "
                          "value must hold no CR, LF or other control "
                          "character", name);
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
        corConfErrorf(errors, corConfGet(map, name), "filters: no module "
                      "added a filter named '%s'%s", name,
                      names != NULL && names[0] != NULL
                      ? corConfSuggest(name, names, "filters", tail,
                                       sizeof(tail))
                      : " (no module loaded adds one)");
        free(names);
        rc = -1;
    }
    return rc;
}

int
corRoutesBuild(const CorConfig* config, CorConfErrors* errors)
{
    int rc = 0;

    routes = calloc(config->routeCount ? config->routeCount : 1,
                    sizeof(*routes));
    if (routes == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < config->routeCount; i++) {
        const CorConfigRoute* in = &config->routes[i];
        Route* out = &routes[routeCount];

        out->handler = corHandlerFind(in->handler);
        if (out->handler == NULL) {
            unknownHandler(in, errors);
            rc = -1;
            continue;
        }
        if (filtersOffResolve(in, &out->rules.filtersOff, errors) != 0) {
            rc = -1;
            continue;
        }
        out->method = in->method;
        out->methodLen = in->method ? strlen(in->method) : 0;
        out->path = in->path;
        out->pathLen = strlen(in->path);
        out->prefix = in->prefix;
        out->timeoutMs = in->timeoutMs;
        out->rules.stripLen = in->stripPrefix ? strlen(in->stripPrefix) : 0;
        out->rules.notify = in->notify;
        routeCount++;
        if (in->notify != NULL) {
            rc |= corRouteNotifyCheck(in, out->handler, errors);
        }
        if (in->guard != NULL) {
            rc |= guardsBuild(in, &out->rules, errors);
        }
        if (in->headers != NULL) {
            rc |= headersBuild(in, &out->rules, errors);
        }
    }
    return rc;
}

static bool
pathMatches(const Route* route, const char* path, size_t pathLen)
{
    if (route->prefix) {
        return pathLen >= route->pathLen
               && memcmp(path, route->path, route->pathLen) == 0;
    }
    return pathLen == route->pathLen
           && memcmp(path, route->path, pathLen) == 0;
}

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

CorRouteResult
corRouteFind(const char* method, size_t methodLen, const char* path,
             size_t pathLen, CorRouteMatch* match)
{
    CorRouteResult result = COR_ROUTE_NO_PATH;

    match->allow[0] = '\0';
    match->rules.headerCount = 0;
    for (unsigned i = 0; i < routeCount; i++) {
        const Route* route = &routes[i];

        if (!pathMatches(route, path, pathLen)) {
            continue;
        }
        if (route->method == NULL
            || (route->methodLen == methodLen
                && memcmp(route->method, method, methodLen) == 0)
            || isHeadOfGet(method, methodLen, route)) {
            match->handler = route->handler;
            match->timeoutMs = route->timeoutMs != 0
                               ? route->timeoutMs
                               : route->handler->handler.timeoutMs;
            match->rules = route->rules;
            return COR_ROUTE_FOUND;
        }
        /* A 405 is the path's answer: the first of its routes that has
         * headers gives them. */
        if (match->rules.headerCount == 0) {
            match->rules.headers = route->rules.headers;
            match->rules.headerCount = route->rules.headerCount;
        }
        /* Only the method differs: the methods the path has make the
         * 405's Allow (RFC 9110 15.5.6); a GET route allows HEAD too. */
        allowAdd(match->allow, route->method, route->methodLen);
        if (route->methodLen == 3 && memcmp(route->method, "GET", 3) == 0) {
            allowAdd(match->allow, "HEAD", 4);
        }
        result = COR_ROUTE_NO_METHOD;
    }
    return result;
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
    int rawLen = raw != NULL ? corPathEscapedNormal(r->rawPath,
                                                    r->rawPathLen, raw)
                             : -1;
    size_t at = 0;

    r->path += n;
    r->pathLen -= n;
    r->rawPath = NULL;
    if (rawLen < 0) {
        return;     /* the decoded path says it, escaped again */
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
