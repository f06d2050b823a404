/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A route template filled in for a request (corTemplate.h): two passes
 * over its parts, the length then the bytes, into the request's arena.
 */
#include "corCoreInt.h"
#include "corTemplate.h"

#include <string.h>

/* Whether a byte of a value goes into a URL as it is: RFC 3986's pchar
 * and '/', but '%' (a capture's '%' is a byte, not an escape), and '&',
 * '=' and '+', which would split or change a query's parameters. */
static bool
urlSafe(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
           || (ch >= '0' && ch <= '9')
           || (ch != '\0' && strchr("-._~!$'()*,;:@/", ch) != NULL);
}

/* Where one piece of a filled-in template goes: counted, then written;
 * and what it is filled from. */
typedef struct {
    char* out; /* NULL: only count */
    size_t len;
    CorRequest* r;
    const char* host; /* the Host, lowercased, without port */
    size_t hostLen;
} Sink;

static void
put(Sink* k, const char* s, size_t n)
{
    if (k->out != NULL) {
        memcpy(k->out + k->len, s, n);
    }
    k->len += n;
}

/* A value from the request: escaped for a URL, or without control bytes
 * for a header (a value with a CR would split the head). */
static void
putValue(Sink* k, const char* s, size_t n, bool url)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (url ? urlSafe(ch) : (ch >= 0x20 && ch != 0x7f)) {
            put(k, s + i, 1);
        } else if (url) {
            char e[3] = { '%', hex[ch >> 4], hex[ch & 15] };

            put(k, e, 3);
        }
    }
}

/* The Host the request named, less its port, lowercased into the arena
 * (the parsers let through only a host's bytes: a name, or an address
 * in brackets); "" when it named none. -1 when out of memory. */
static int
hostOf(Sink* k)
{
    const CorHeader* h = corRequestHeader(k->r, "Host");
    size_t n = h != NULL ? corHostNameLen(h->value, h->valueLen) : 0;
    char* host = n > 0 ? corRequestAlloc(k->r, n) : NULL;

    if (n > 0 && host == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = h->value[i];

        host[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 'a' - 'A') : ch;
    }
    k->host = n > 0 ? host : "";
    k->hostLen = n;
    return 0;
}

static void
partPut(Sink* k, const CorTemplatePart* p, bool url)
{
    CorRequest* r = k->r;
    const char* s;
    size_t n;

    switch (p->kind) {
    case COR_TPL_TEXT:
        put(k, p->text, p->len);
        return;
    case COR_TPL_SCHEME:
        put(k, r->secure ? "https" : "http", r->secure ? 5 : 4);
        return;
    case COR_TPL_HOST:
        put(k, k->host, k->hostLen);
        return;
    case COR_TPL_PATH:
        putValue(k, r->path, r->pathLen, url);
        return;
    case COR_TPL_QUERY:
        if (r->query != NULL) {
            put(k, "?", 1);
            put(k, r->query, r->queryLen);
        }
        return;
    case COR_TPL_URI:
        if (r->rawPath != NULL) {
            put(k, r->rawPath, r->rawPathLen);
        } else {
            putValue(k, r->path, r->pathLen, true);
        }
        partPut(k, &(CorTemplatePart){ .kind = COR_TPL_QUERY }, url);
        return;
    case COR_TPL_CLIENT:
        s = r->remote != NULL ? r->remote : "";
        putValue(k, s, strlen(s), url);
        return;
    case COR_TPL_CAPTURE:
        s = corRequestCapture(r, p->capture, &n);
        if (s != NULL) {
            putValue(k, s, n, url);
        }
        return;
    }
}

char*
corTemplateExpand(const CorTemplate* t, CorRequest* r, size_t* lenP)
{
    Sink k = { .r = r, .host = "" };

    for (unsigned i = 0; i < t->count; i++) {
        if (t->parts[i].kind == COR_TPL_HOST && hostOf(&k) != 0) {
            return NULL;
        }
    }
    for (unsigned i = 0; i < t->count; i++) {
        partPut(&k, &t->parts[i], t->url);
    }
    k.out = corRequestAlloc(r, k.len + 1);
    if (k.out == NULL) {
        return NULL;
    }
    k.len = 0;
    for (unsigned i = 0; i < t->count; i++) {
        partPut(&k, &t->parts[i], t->url);
    }
    k.out[k.len] = '\0';
    *lenP = k.len;
    return k.out;
}
