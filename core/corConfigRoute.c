/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a route says beyond its handler's name, read from its entry: the
 * match (a path, a prefix, "=PATH" exact, "~REGEX"), the hosts it takes,
 * a redirect or a rewrite in place of a handler, the request headers it
 * sets and removes, its error pages; and the top level's error pages.
 * Only the shape is checked here: the regexes compile, the handler and
 * the error pages' files are found when the routes are built
 * (corRoute.c), with the modules loaded.
 */
#include "corConfigRead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
outOfMemory(CorConfErrors* e)
{
    corConfErrorf(e, NULL, "out of memory reading the configuration");
}

/* "~REGEX" or "~*REGEX" (without case) into r: the text after it is the
 * pattern, spaces and all. */
static bool
regexMatch(CorConfigRoute* r, const char* text, CorConfErrors* e)
{
    r->regexCaseless = text[1] == '*';
    r->regex = strdup(text + 1 + r->regexCaseless);
    if (r->regex == NULL) {
        outOfMemory(e);
        return false;
    }
    return true;
}

bool
corConfigMatchRead(CorConfigRoute* r, const CorConf* node, CorConfErrors* e)
{
    const char* text = corConfText(node);
    const char* path = text;
    const char* star;
    size_t methodLen = 0;
    bool exact;

    if (text[0] != '/' && text[0] != '=' && text[0] != '~') {
        methodLen = strcspn(text, " \t");
        path = text + methodLen + strspn(text + methodLen, " \t");
        if (strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != methodLen) {
            corConfErrorf(e, node,
                          "match: expected 'METHOD /path' or "
                          "'/path' with the method in capitals (such as "
                          "GET), got '%s'",
                          text);
            return false;
        }
    }
    r->method = methodLen ? strndup(text, methodLen) : NULL;
    if (methodLen && r->method == NULL) {
        outOfMemory(e);
        return false;
    }
    if (path[0] == '~' && path[1] != '\0') {
        return regexMatch(r, path, e);
    }
    exact = path[0] == '=';
    path += exact;
    if (*path != '/') {
        corConfErrorf(e, node,
                      "match: the path must start with '/' (or be "
                      "'=/exact' or '~regex'), got '%s'",
                      text);
        return false;
    }
    if (path[strcspn(path, " \t")] != '\0') {
        corConfErrorf(e, node,
                      "match: expected 'METHOD /path' or '/path' "
                      "with no space in the path, got '%s'",
                      text);
        return false;
    }
    star = strchr(path, '*');
    if (star != NULL && (star[1] != '\0' || exact)) {
        corConfErrorf(e, node,
                      "match: '*' may only end a path (a prefix "
                      "match, never an exact one), got '%s'",
                      text);
        return false;
    }
    r->prefix = star != NULL;
    r->path = strndup(path, strlen(path) - r->prefix);
    if (r->path == NULL) {
        outOfMemory(e);
        return false;
    }
    return true;
}

bool
corConfigSameRoute(const CorConfigRoute* a, const CorConfigRoute* b)
{
    bool samePath = a->path != NULL && b->path != NULL && a->prefix == b->prefix
                    && strcmp(a->path, b->path) == 0;
    bool sameRegex = a->regex != NULL && b->regex != NULL
                     && a->regexCaseless == b->regexCaseless
                     && strcmp(a->regex, b->regex) == 0;

    if (!(samePath || sameRegex) || a->hostCount != b->hostCount) {
        return false;
    }
    for (unsigned i = 0; i < a->hostCount; i++) {
        if (strcmp(a->hosts[i], b->hosts[i]) != 0) {
            return false;
        }
    }
    if (a->method == NULL || b->method == NULL) {
        return a->method == b->method;
    }
    return strcmp(a->method, b->method) == 0;
}

/* ---- host ---------------------------------------------------------------- */

/* A host name or "*.suffix": letters, digits, '-' and '.', lowercased
 * into a copy; NULL (an error at node) when it is anything else. */
static char*
hostPattern(const CorConf* node, CorConfErrors* e)
{
    const char* text = corConfText(node);
    const char* name = strncmp(text, "*.", 2) == 0 ? text + 2 : text;
    size_t n = strlen(name);
    char* copy;

    if (n == 0
        || strspn(name, "abcdefghijklmnopqrstuvwxyz"
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.")
               != n
        || name[0] == '.' || name[n - 1] == '.' || strstr(name, "..")) {
        corConfErrorf(e, node,
                      "host: expected a name (example.com) or "
                      "'*.suffix' (*.example.com), got '%s'",
                      text);
        return NULL;
    }
    copy = strdup(text);
    if (copy == NULL) {
        outOfMemory(e);
        return NULL;
    }
    for (char* p = copy; *p != '\0'; p++) {
        *p = *p >= 'A' && *p <= 'Z' ? (char)(*p + 'a' - 'A') : *p;
    }
    return copy;
}

static void
hostsRead(CorConfigRoute* r, const CorConf* entry, CorConfErrors* e)
{
    const CorConf* node = corConfGet(entry, "host");
    bool list = node != NULL && corConfKind(node) == COR_CONF_SEQ;
    unsigned count = list ? (unsigned)corConfCount(node) : node != NULL;

    if (node == NULL) {
        return;
    }
    if (count == 0 || (!list && corConfKind(node) != COR_CONF_SCALAR)) {
        corConfErrorf(e, node,
                      "host: expected a name, '*.suffix' or a list "
                      "of them");
        return;
    }
    r->hosts = calloc(count, sizeof(*r->hosts));
    if (r->hosts == NULL) {
        outOfMemory(e);
        return;
    }
    for (unsigned i = 0; i < count; i++) {
        const CorConf* one = list ? corConfAt(node, i) : node;
        char* pattern = corConfKind(one) == COR_CONF_SCALAR
                            ? hostPattern(one, e)
                            : NULL;

        if (pattern != NULL) {
            r->hosts[r->hostCount++] = pattern;
        } else if (corConfKind(one) != COR_CONF_SCALAR) {
            corConfErrorf(e, one, "host: expected a name or '*.suffix'");
        }
    }
}

/* ---- redirect, rewrite --------------------------------------------------- */

/* The template at key of map, url-escaped when it builds one; NULL when
 * absent or wrong (an error at its value). */
static CorTemplate*
templateRead(const CorConf* map, const char* key, bool url, CorConfErrors* e)
{
    const char* text = corConfigNonEmpty(map, key, NULL, "a template", e);
    CorTemplate* t;
    char why[256];

    if (text == NULL) {
        return NULL;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        outOfMemory(e);
        return NULL;
    }
    if (corTemplateParse(text, url, t, why, sizeof(why)) != 0) {
        corConfErrorf(e, corConfGet(map, key), "%s: %s", key, why);
        corTemplateFree(t);
        free(t);
        return NULL;
    }
    return t;
}

static void
templateDrop(CorTemplate* t)
{
    if (t != NULL) {
        corTemplateFree(t);
        free(t);
    }
}

/* redirect: { to: TEMPLATE, status: 301 } or redirect: TEMPLATE. */
static void
redirectRead(CorConfigRoute* r, const CorConf* entry, CorConfErrors* e)
{
    static const char* const keys[] = { "to", "status", NULL };
    const CorConf* node = corConfGet(entry, "redirect");
    int64_t status;

    if (node == NULL) {
        return;
    }
    if (corConfKind(node) == COR_CONF_SCALAR) {
        r->redirect = templateRead(entry, "redirect", true, e);
        r->redirectStatus = 301;
        return;
    }
    if (corConfKind(node) != COR_CONF_MAP) {
        corConfErrorf(e, node,
                      "redirect: expected { to: URL, status: 301 } "
                      "or a URL");
        return;
    }
    if (corConfigRequired(node, "to", "redirect",
                          "such as "
                          "\"https://{host}{uri}\"",
                          e)
        != NULL) {
        r->redirect = templateRead(node, "to", true, e);
    }
    status = corConfInt(node, "status", 301, 300, 399, e);
    if (status != 301 && status != 302 && status != 303 && status != 307
        && status != 308) {
        corConfErrorf(e, corConfGet(node, "status"),
                      "status: expected 301, "
                      "302, 303, 307 or 308, got %lld",
                      (long long)status);
    }
    r->redirectStatus = (unsigned)status;
    corConfUnknownKeys(node, "redirect", keys, e);
}

static bool
isHex(char ch)
{
    return (ch >= '0' && ch <= '9')
           || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
}

/* Whether s[0] may stand in a target (n bytes from it): no space, control,
 * '#' or byte past ASCII, and a '%' starts an escape (never %00). */
static bool
targetByte(const char* s, size_t n)
{
    unsigned char ch = (unsigned char)s[0];

    if (ch == '%') {
        return n >= 3 && isHex(s[1]) && isHex(s[2])
               && !(s[1] == '0' && s[2] == '0');
    }
    return ch > ' ' && ch < 0x7f && ch != '#';
}

/* A rewrite's text must read as a target once filled in: a path and an
 * optional query, with only well-formed escapes of its own. */
static void
rewriteCheck(const CorConf* entry, const CorTemplate* t, CorConfErrors* e)
{
    const CorTemplatePart* first = t->count > 0 ? &t->parts[0] : NULL;

    if (first == NULL
        || !(first->kind == COR_TPL_PATH || first->kind == COR_TPL_URI
             || (first->kind == COR_TPL_TEXT && first->text[0] == '/'))) {
        corConfErrorf(e, corConfGet(entry, "rewrite"),
                      "rewrite: expected "
                      "a target starting with '/' (or {path}, {uri}), such "
                      "as \"/user?id={1}\"");
        return;
    }
    for (unsigned i = 0; i < t->count; i++) {
        const CorTemplatePart* p = &t->parts[i];

        for (size_t k = 0; p->kind == COR_TPL_TEXT && k < p->len; k++) {
            if (!targetByte(p->text + k, p->len - k)) {
                corConfErrorf(e, corConfGet(entry, "rewrite"),
                              "rewrite: "
                              "'%.*s' holds a byte a target may not (a "
                              "space, a control, '#', or a '%%' that is no "
                              "escape)",
                              (int)p->len, p->text);
                return;
            }
        }
    }
}

/* ---- request_headers ----------------------------------------------------- */

static bool
tokenName(const char* name)
{
    size_t n = strlen(name);

    return n > 0
           && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
                           "OPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~")
                  == n;
}

static void
headerSetRead(CorConfigRoute* r, const CorConf* map, CorConfErrors* e)
{
    size_t n = corConfCount(map);

    r->requestSet = n > 0 ? calloc(n, sizeof(*r->requestSet)) : NULL;
    if (n > 0 && r->requestSet == NULL) {
        outOfMemory(e);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char* name = corConfKeyAt(map, i);
        CorConfigHeaderSet* h = &r->requestSet[r->requestSetCount];
        char why[256];

        if (!tokenName(name)
            || corConfKind(corConfAt(map, i)) != COR_CONF_SCALAR) {
            corConfErrorf(e, corConfAt(map, i),
                          "request_headers.set: '%s': "
                          "expected a header name (a token) and a string",
                          name);
            continue;
        }
        if (corTemplateParse(corConfText(corConfAt(map, i)), false, &h->value,
                             why, sizeof(why))
            != 0) {
            corConfErrorf(e, corConfAt(map, i),
                          "request_headers.set: %s: "
                          "%s",
                          name, why);
            corTemplateFree(&h->value);
            continue;
        }
        corConfigSetString(&h->name, name, e);
        r->requestSetCount++;
    }
}

static void
headerRemoveRead(CorConfigRoute* r, const CorConf* list, CorConfErrors* e)
{
    size_t n = corConfCount(list);

    r->requestRemove = n > 0 ? calloc(n, sizeof(*r->requestRemove)) : NULL;
    if (n > 0 && r->requestRemove == NULL) {
        outOfMemory(e);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const CorConf* name = corConfAt(list, i);

        if (corConfKind(name) != COR_CONF_SCALAR
            || !tokenName(corConfText(name))) {
            corConfErrorf(e, name,
                          "request_headers.remove: expected header "
                          "names");
            continue;
        }
        corConfigSetString(&r->requestRemove[r->requestRemoveCount++],
                           corConfText(name), e);
    }
}

/* request_headers: { set: { Name: TEMPLATE }, remove: [ Name ] }. */
static void
requestHeadersRead(CorConfigRoute* r, const CorConf* entry, CorConfErrors* e)
{
    static const char* const keys[] = { "set", "remove", NULL };
    const CorConf* node = corConfMap(entry, "request_headers", e);

    if (node == NULL) {
        return;
    }
    headerSetRead(r, corConfMap(node, "set", e), e);
    headerRemoveRead(r, corConfSeq(node, "remove", e), e);
    corConfUnknownKeys(node, "request_headers", keys, e);
}

/* ---- error_pages --------------------------------------------------------- */

/* "404" or "4xx" into [from, to]; false when it is neither. */
static bool
statusRange(const char* key, unsigned* from, unsigned* to)
{
    if (strlen(key) != 3 || key[0] < '3' || key[0] > '5') {
        return false;
    }
    if (strcmp(key + 1, "xx") == 0) {
        *from = (unsigned)(key[0] - '0') * 100;
        *to = *from + 99;
        return true;
    }
    if (strspn(key, "0123456789") != 3) {
        return false;
    }
    *from = *to = (unsigned)atoi(key);
    return *from >= 300;
}

void
corConfigErrorPagesRead(CorConfigErrorPage** pagesP, unsigned* countP,
                        const CorConf* map, const char* where, CorConfErrors* e)
{
    size_t n = corConfCount(map);
    CorConfigErrorPage* pages = n > 0 ? calloc(n, sizeof(*pages)) : NULL;
    unsigned count = 0;

    if (n > 0 && pages == NULL) {
        outOfMemory(e);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char* key = corConfKeyAt(map, i);
        CorConfigErrorPage* p = &pages[count];

        if (!statusRange(key, &p->from, &p->to)) {
            corConfErrorf(e, corConfAt(map, i),
                          "%s: '%s': expected a "
                          "status (404) or a class (5xx) from 300 to 599",
                          where, key);
            continue;
        }
        corConfigSetPath(&p->file, map, key, e);
        p->node = corConfAt(map, i);
        count += p->file != NULL;
    }
    *pagesP = pages;
    *countP = count;
}

void
corConfigErrorPagesFree(CorConfigErrorPage* pages, unsigned count)
{
    for (unsigned i = 0; i < count; i++) {
        free(pages[i].file);
    }
    free(pages);
}

/* ---- limits -------------------------------------------------------------- */

/*
 * limits: { body_bytes: 1GiB, body_timeout: 5m }: the top level's keys
 * that a request's route can still decide, since its body comes after
 * its head (and Expect: 100-continue waits for the route). The others
 * are decided before there is a route to ask, and are refused here with
 * why: the head's limits bound the bytes the route is chosen from, and a
 * connection's are shared by every request on it.
 */
static void
limitsRead(CorConfigRoute* r, const CorConf* entry, CorConfErrors* e)
{
    static const char* const keys[] = { "body_bytes", "body_timeout", NULL };
    static const struct {
        const char* key;
        const char* why;
    } early[] = {
        { "header_bytes", "the head is read, within it, before a route "
                          "can be chosen from it" },
        { "header_count", "the head is read, within it, before a route "
                          "can be chosen from it" },
        { "request_timeout", "it times the head, read before a route can "
                             "be chosen from it" },
        { "connections", "it counts connections, not requests" },
        { "keepalive_timeout", "it times a connection between requests" },
        { "send_timeout", "it times the connection's writes, which every "
                          "request on it (HTTP/2) shares" },
        { "body_memory", "where a body is held is the server's choice, "
                         "made once for every route" },
        { "body_spool_dir", "where a body is held is the server's choice, "
                            "made once for every route" },
    };
    const CorConf* map = corConfMap(entry, "limits", e);
    const uint64_t gib = 1024ull * 1024 * 1024;
    const uint64_t hour = 60ull * 60 * 1000;

    if (map == NULL) {
        return;
    }
    for (size_t i = 0; i < sizeof(early) / sizeof(early[0]); i++) {
        const CorConf* node = corConfGet(map, early[i].key);

        if (node != NULL) {
            corConfErrorf(e, node,
                          "limits: %s is the top level's only (%s); "
                          "a route may set body_bytes and body_timeout",
                          early[i].key, early[i].why);
        }
    }
    r->limits.hasBodyBytes = corConfGet(map, "body_bytes") != NULL;
    r->limits.bodyBytes = (size_t)corConfSize(map, "body_bytes", 0, 0,
                                              1024 * gib, e);
    r->limits.hasBodyTimeout = corConfGet(map, "body_timeout") != NULL;
    r->limits.bodyTimeoutMs = corConfDurationMs(map, "body_timeout", 0, 1, hour,
                                                e);
    /* The keys above were looked at: only a typo is unknown. */
    corConfUnknownKeys(map, "limits", keys, e);
}

/* ---- The route's entry --------------------------------------------------- */

void
corConfigRouteRead(CorConfigRoute* r, const CorConf* entry, const char* where,
                   CorConfErrors* e)
{
    unsigned actions;

    hostsRead(r, entry, e);
    redirectRead(r, entry, e);
    r->rewrite = corConfGet(entry, "rewrite") != NULL
                     ? templateRead(entry, "rewrite", true, e)
                     : NULL;
    if (r->rewrite != NULL) {
        rewriteCheck(entry, r->rewrite, e);
    }
    requestHeadersRead(r, entry, e);
    limitsRead(r, entry, e);
    corConfigErrorPagesRead(&r->errorPages, &r->errorPageCount,
                            corConfMap(entry, "error_pages", e), "error_pages",
                            e);
    actions = (corConfGet(entry, "handler") != NULL)
              + (corConfGet(entry, "redirect") != NULL)
              + (corConfGet(entry, "rewrite") != NULL);
    if (actions == 0) {
        corConfErrorf(e, entry,
                      "%s: missing 'handler' (the name of a "
                      "handler; or redirect: or rewrite: in its place)",
                      where);
    } else if (actions > 1) {
        corConfErrorf(e, entry,
                      "%s: expected one of handler, redirect and "
                      "rewrite, got several",
                      where);
    }
}

void
corConfigRouteFree(CorConfigRoute* r)
{
    free(r->method);
    free(r->path);
    free(r->regex);
    for (unsigned k = 0; k < r->hostCount; k++) {
        free(r->hosts[k]);
    }
    free(r->hosts);
    free(r->handler);
    templateDrop(r->redirect);
    templateDrop(r->rewrite);
    for (unsigned k = 0; k < r->requestSetCount; k++) {
        free(r->requestSet[k].name);
        corTemplateFree(&r->requestSet[k].value);
    }
    free(r->requestSet);
    for (unsigned k = 0; k < r->requestRemoveCount; k++) {
        free(r->requestRemove[k]);
    }
    free(r->requestRemove);
    corConfigErrorPagesFree(r->errorPages, r->errorPageCount);
    free(r->stripPrefix);
    for (unsigned k = 0; k < r->filtersOffCount; k++) {
        free(r->filtersOff[k]);
    }
    free(r->filtersOff);
    corConfigNotifyFree(r->notify);
    free(r->cache);
}
