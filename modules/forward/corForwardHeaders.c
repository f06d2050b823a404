/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a forward passes on of a message's head, both ways (RFC 9110
 * section 7.6): a proxy drops the hop-by-hop fields, those of the
 * connection it read the message on (Connection, the fields Connection
 * lists, and the fixed set of section 7.6.1 with the Proxy-* family), and
 * says that it passed the message on (Via; and, as nginx users expect,
 * X-Forwarded-For and X-Forwarded-Proto). The body's framing is this
 * hop's: the request goes on with a Content-Length the client writes, the
 * answer with the framing the server writes.
 *
 * A subscription's message (MQTT) is not an HTTP request: its method
 * (MQTT) means nothing to an HTTP application (501), and its fields are
 * what its publisher wrote as user properties, Authorization and
 * X-Forwarded-For as well as anything else. It goes as POST (or its
 * subscription's method:), each user property as MQTT-User-NAME, so that
 * no publisher writes the upstream's Host, credentials, cookies, framing
 * or forwarding fields.
 */
#include "corForwardInt.h"

#include <errno.h>
#include <string.h>

#define VIA_HOP "1.1 cor"

/* Whether h is hop-by-hop in a head of count fields. The names are
 * literals, each compared inline (corHeaderIs): this runs for every field
 * of every request and answer. */
static bool
hopByHop(const CorHeader* h, const CorHeader* all, unsigned count)
{
    const CorHeader prefix = { h->name, h->nameLen < 6 ? 0 : 6, NULL, 0 };

    if (corHeaderIs(h, "connection") || corHeaderIs(h, "keep-alive")
        || corHeaderIs(h, "te") || corHeaderIs(h, "trailer")
        || corHeaderIs(h, "transfer-encoding") || corHeaderIs(h, "upgrade")
        || corHeaderIs(&prefix, "proxy-")) {
        return true;
    }
    for (unsigned i = 0; i < count; i++) {
        if (corHeaderIs(&all[i], "connection")
            && corHeaderListHas(&all[i], h->name, h->nameLen)) {
            return true;
        }
    }
    return false;
}

/* Append s[0..len) to the comma list that starts at out and ends at p;
 * the new end. (No printf: this runs for every request.) */
static char*
listAppend(char* p, const char* out, const char* s, size_t len)
{
    if (p != out) {
        memcpy(p, ", ", 2);
        p += 2;
    }
    memcpy(p, s, len);
    return p + len;
}

/* The values of every field named name joined with ", ", then tail (when
 * not NULL), in r's arena; NULL when there is nothing, or no memory
 * (*failed set). */
static char*
joined(CorRequest* r, const CorHeader* all, unsigned count, const char* name,
       const char* tail, bool* failed)
{
    size_t size = tail != NULL ? strlen(tail) + 1 : 1;
    size_t nameLen = strlen(name);
    char* out;
    char* p;

    for (unsigned i = 0; i < count; i++) {
        size += corHeaderIsLen(&all[i], name, nameLen) ? all[i].valueLen + 2
                                                       : 0;
    }
    if (size == 1) {
        return NULL;
    }
    out = p = corRequestAlloc(r, size);
    if (out == NULL) {
        *failed = true;
        return NULL;
    }
    for (unsigned i = 0; i < count; i++) {
        if (corHeaderIsLen(&all[i], name, nameLen) && all[i].valueLen > 0) {
            p = listAppend(p, out, all[i].value, all[i].valueLen);
        }
    }
    if (tail != NULL) {
        p = listAppend(p, out, tail, strlen(tail));
    }
    *p = '\0';
    return out;
}

static void
add(CorHeader* out, unsigned* n, const char* name, const char* value)
{
    if (value != NULL) {
        out[(*n)++] = (CorHeader){ name, strlen(name), value, strlen(value) };
    }
}

/* Fields this hop writes itself, beside the hop-by-hop ones. */
static bool
requestOwn(const CorHeader* h)
{
    return corHeaderIs(h, "host") || corHeaderIs(h, "content-length")
           || corHeaderIs(h, "expect") || corHeaderIs(h, "x-forwarded-for")
           || corHeaderIs(h, "x-forwarded-proto") || corHeaderIs(h, "via");
}

/* What a message's user properties go upstream as (corMqttSubscribe.c
 * gives a handler one named as a field of the bridge's own so too). */
#define USER_PREFIX "MQTT-User-"
#define USER_PREFIX_LEN 10

static bool
fromMessage(const CorRequest* r)
{
    return r->ops != NULL && r->ops->kind == COR_PROTOCOL_MQTT;
}

/* A message's field h as the upstream gets it, into out[*n]: the
 * bridge's own as it is, a user property as MQTT-User-NAME, unless its
 * name is no token or its value holds a control byte. Returns 0 or
 * -ENOMEM. */
static int
messageField(CorRequest* r, const CorHeader* h, CorHeader* out, unsigned* n)
{
    const CorHeader prefix = {
        h->name, h->nameLen < USER_PREFIX_LEN ? 0 : USER_PREFIX_LEN, NULL, 0
    };
    char* name;

    if (corHeaderIs(h, "mqtt-method")) {
        return 0; /* it is the method */
    }
    if (!corHeaderNameOk(h->name, h->nameLen)
        || !corHeaderValueOk(h->value, h->valueLen)) {
        return 0;
    }
    if (corHeaderIs(h, "mqtt-qos") || corHeaderIs(h, "mqtt-retain")
        || corHeaderIs(h, "content-type")
        || corHeaderIs(&prefix, USER_PREFIX)) {
        out[(*n)++] = *h;
        return 0;
    }
    name = corRequestAlloc(r, USER_PREFIX_LEN + h->nameLen + 1);
    if (name == NULL) {
        return -ENOMEM;
    }
    memcpy(name, USER_PREFIX, USER_PREFIX_LEN);
    memcpy(name + USER_PREFIX_LEN, h->name, h->nameLen);
    name[USER_PREFIX_LEN + h->nameLen] = '\0';
    out[(*n)++] = (CorHeader){ name, USER_PREFIX_LEN + h->nameLen, h->value,
                               h->valueLen };
    return 0;
}

/* A message's fields, Host as g says (never one of its publisher's) and
 * Via. */
static int
messageHeaders(CorRequest* r, const ForwardGroup* g, CorHeader* out,
               unsigned* n)
{
    for (unsigned i = 0; i < r->headerCount; i++) {
        if (messageField(r, &r->headers[i], out, n) != 0) {
            return -ENOMEM;
        }
    }
    if (g->hostMode == FORWARD_HOST_NAME) {
        add(out, n, "Host", g->host);
    }
    add(out, n, "Via", VIA_HOP);
    return 0;
}

const char*
corForwardMethod(CorRequest* r)
{
    const char* from = r->method;
    size_t len = r->methodLen;
    char* method;

    if (fromMessage(r)) {
        const CorHeader* asked = corRequestHeader(r, "mqtt-method");

        from = asked != NULL ? asked->value : "POST";
        len = strlen(from);
    }
    method = corRequestAlloc(r, len + 1);
    if (method != NULL) {
        memcpy(method, from, len);
        method[len] = '\0';
    }
    return method;
}

int
corForwardRequestHeaders(CorRequest* r, const ForwardGroup* g,
                         CorHeader** headersP, unsigned* countP)
{
    const CorHeader* host = corRequestHeader(r, "host");
    bool failed = false;
    const CorHeader* te = corRequestHeader(r, "te");
    const CorHeader* upgrade = corForwardUpgradeAsked(r, g);
    CorHeader* out = corRequestAlloc(r,
                                     (r->headerCount + 7) * sizeof(CorHeader));
    unsigned n = 0;

    if (out == NULL) {
        return -ENOMEM;
    }
    if (fromMessage(r)) {
        *headersP = out;
        *countP = 0;
        return messageHeaders(r, g, out, countP);
    }
    for (unsigned i = 0; i < r->headerCount; i++) {
        const CorHeader* h = &r->headers[i];

        if (!requestOwn(h) && !hopByHop(h, r->headers, r->headerCount)
            && (g->underscores || memchr(h->name, '_', h->nameLen) == NULL)) {
            out[n++] = *h;
        }
    }
    if (g->hostMode == FORWARD_HOST_KEEP && host != NULL) {
        out[n++] = *host;
    } else if (g->hostMode == FORWARD_HOST_NAME) {
        add(out, &n, "Host", g->host);
    }
    /* The hop this request came from, as each proxy appends its own:
     * under real_ip that is the trusted proxy, not the client it named
     * (already in the list), so that the next hop reads the same chain. */
    add(out, &n, "X-Forwarded-For",
        joined(r, r->headers, r->headerCount, "x-forwarded-for", r->peer,
               &failed));
    add(out, &n, "X-Forwarded-Proto", r->secure ? "https" : "http");
    add(out, &n, "Via",
        joined(r, r->headers, r->headerCount, "via", VIA_HOP, &failed));
    /* TE is the hop's, but a client that takes trailers (gRPC's must)
     * gets them through an HTTP/2 upstream: this hop passes them on. */
    if (g->http2 && te != NULL && corHeaderListHas(te, "trailers", 8)) {
        add(out, &n, "TE", "trailers");
    }
    /* Connection and Upgrade are this hop's; an upgrade (WebSocket) is
     * asked of the next hop again, for the same protocols. */
    if (upgrade != NULL) {
        add(out, &n, "Connection", "upgrade");
        out[n++] = *upgrade;
    }
    *headersP = out;
    *countP = n;
    return failed ? -ENOMEM : 0;
}

/* A copy of s[0..len) as a string in r's arena. */
static char*
copyOf(CorRequest* r, const char* s, size_t len)
{
    char* out = corRequestAlloc(r, len + 1);

    if (out != NULL) {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    return out;
}

/* Fields of an answer this hop writes itself. The upstream's
 * Content-Length stays: the HTTP module frames the answer with it (a
 * streamed answer goes out with the length it will have, a HEAD's says
 * what a GET would get) rather than with a length of its own. */
static bool
responseOwn(const CorHeader* h)
{
    return corHeaderIs(h, "content-type") || corHeaderIs(h, "server")
           || corHeaderIs(h, "date");
}

int
corForwardResponseHeaders(CorRequest* r, const CorClientResponse* res,
                          const char** contentTypeP)
{
    const CorHeader* type = corClientHeader(res, "content-type");

    *contentTypeP = NULL;
    if (type != NULL
        && (*contentTypeP = copyOf(r, type->value, type->valueLen)) == NULL) {
        return -ENOMEM;
    }
    for (unsigned i = 0; i < res->headerCount; i++) {
        const CorHeader* h = &res->headers[i];

        if (responseOwn(h) || hopByHop(h, res->headers, res->headerCount)) {
            continue;
        }
        /* A value the server refuses (a control byte) is left out. */
        if (corResponseField(r, h) == -ENOMEM) {
            return -ENOMEM;
        }
    }
    return 0;
}

int
corForwardResponseTrailers(CorRequest* r, const CorClientResponse* res)
{
    for (unsigned i = 0; i < res->trailerCount; i++) {
        const CorHeader* h = &res->trailers[i];

        if (hopByHop(h, res->trailers, res->trailerCount)
            || corHeaderIs(h, "content-length")) {
            continue;
        }
        if (corResponseTrailerField(r, h) == -ENOMEM) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* Whether a byte of a decoded path goes on as it is. */
static bool
pathSafe(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
           || (ch >= '0' && ch <= '9')
           || strchr("-._~!$&'()*+,;=:@/", ch) != NULL;
}

char*
corForwardUrl(CorRequest* r, const ForwardServer* s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t base = strlen(s->url);
    char* out = corRequestAlloc(r, base + 3 * r->pathLen + r->rawPathLen
                                       + 3 * r->queryLen + 3);
    char* p = out;

    if (out == NULL) {
        return NULL;
    }
    memcpy(p, s->url, base);
    p += base;
    if (r->rawPath != NULL) {
        /* As the client sent it (nginx's proxy_pass without a URI):
         * "%2F" is not '/' to every server. */
        memcpy(p, r->rawPath, r->rawPathLen);
        p += r->rawPathLen;
    }
    /* A protocol without a raw path (a subscription's): encode the decoded
     * one again where it must be, '%' too, so that the upstream decodes
     * the same path. */
    for (size_t i = 0; r->rawPath == NULL && i < r->pathLen; i++) {
        unsigned char ch = (unsigned char)r->path[i];

        if (ch != '\0' && pathSafe(ch)) {
            *p++ = (char)ch;
        } else {
            *p++ = '%';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        }
    }
    if (r->query != NULL) {
        *p++ = '?';
        for (size_t i = 0; i < r->queryLen; i++) {
            unsigned char ch = (unsigned char)r->query[i];

            if (ch > 0x20 && ch < 0x7f && ch != '#') {
                *p++ = (char)ch;
            } else {
                *p++ = '%';
                *p++ = hex[ch >> 4];
                *p++ = hex[ch & 15];
            }
        }
    }
    *p = '\0';
    return out;
}
