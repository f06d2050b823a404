/* SPDX-License-Identifier: Apache-2.0 */
/*
 * real_ip: behind a proxy or a load balancer the connection's address is
 * the proxy's. A peer in real_ip.from is trusted to say who its client
 * is in real_ip.header; the address it gives becomes r->remote, once, in
 * the core, before limits, routes, guards and handlers see the request,
 * whatever protocol read it. As nginx's real_ip_recursive on: the header
 * is read from its right end (what the nearest hop appended) leftwards,
 * past the addresses that are trusted too, to the first that is not; an
 * entry that is no address ends the walk with the last address read
 * (a client may write anything at the left end, not at the right), and
 * a chain of trusted ones only gives its leftmost. Several fields of the
 * header read as one list, the last field's end first.
 *
 * Each entry may carry a port ("192.0.2.7:4711", "[2001:db8::7]:4711",
 * as RFC 7239 writes them and some proxies write X-Forwarded-For); in
 * Forwarded, an element's for= is taken, quoted or not. "unknown" and
 * RFC 7239's obfuscated names are no address.
 */
#include "corCoreInt.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

/* The longest entry read: an IPv6 address in brackets, a port, quotes. */
#define ENTRY_MAX 64

static bool
trusted(const CorConfigRealIp* ri, const CorNetAddr* addr)
{
    for (unsigned i = 0; i < ri->fromCount; i++) {
        if (corNetHas(&ri->from[i], addr)) {
            return true;
        }
    }
    return false;
}

static void
trim(const char** s, size_t* len)
{
    while (*len > 0 && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t')) {
        (*len)--;
    }
}

/* A Forwarded element's for= value (its quotes off); false without one. */
static bool
forwardedFor(const char** s, size_t* len)
{
    const char* p = *s;
    const char* end = *s + *len;

    while (p < end) {
        const char* semi = memchr(p, ';', (size_t)(end - p));
        const char* pairEnd = semi != NULL ? semi : end;
        const char* pair = p;
        size_t pairLen = (size_t)(pairEnd - p);

        trim(&pair, &pairLen);
        if (pairLen > 4 && strncasecmp(pair, "for=", 4) == 0) {
            *s = pair + 4;
            *len = pairLen - 4;
            if (*len >= 2 && (*s)[0] == '"' && (*s)[*len - 1] == '"') {
                (*s)++;
                *len -= 2;
            }
            return true;
        }
        p = pairEnd + 1;
    }
    return false;
}

/* An address with or without its port: "[v6]", "[v6]:port", "v4",
 * "v4:port", or a bare v6. Into addr; false when it is none. */
static bool
entryAddress(const char* s, size_t len, CorNetAddr* addr)
{
    char text[ENTRY_MAX];
    const char* colon;

    if (len == 0 || len >= sizeof(text)) {
        return false;
    }
    if (s[0] == '[') {
        const char* close = memchr(s, ']', len);

        if (close == NULL || (close + 1 != s + len && close[1] != ':')) {
            return false;
        }
        s++;
        len = (size_t)(close - s);
    } else if ((colon = memchr(s, ':', len)) != NULL
               && memchr(colon + 1, ':', len - (size_t)(colon + 1 - s))
                      == NULL) {
        len = (size_t)(colon - s); /* one colon: v4:port */
    }
    memcpy(text, s, len);
    text[len] = '\0';
    return corNetAddrParse(text, addr);
}

/* What an entry of the header is. */
typedef enum {
    ENTRY_EMPTY, /* "a, , b": a list's, not a lie */
    ENTRY_ADDRESS,
    ENTRY_NONE /* anything else */
} Entry;

/* The next entry leftwards of value[0..*end), into addr; *end moves to
 * the comma before it. */
static Entry
entryBefore(const CorConfigRealIp* ri, const char* value, size_t* end,
            CorNetAddr* addr)
{
    size_t start = *end;
    const char* s;
    size_t len;

    while (start > 0 && value[start - 1] != ',') {
        start--;
    }
    s = value + start;
    len = *end - start;
    *end = start > 0 ? start - 1 : 0;
    trim(&s, &len);
    if (len == 0) {
        return ENTRY_EMPTY;
    }
    if (ri->header == COR_REAL_IP_FORWARDED && !forwardedFor(&s, &len)) {
        return ENTRY_NONE;
    }
    return entryAddress(s, len, addr) ? ENTRY_ADDRESS : ENTRY_NONE;
}

/* The client's address by ri's header, the walk above; false when the
 * header gives none. */
static bool
clientOf(const CorConfigRealIp* ri, const CorRequest* r, CorNetAddr* client)
{
    bool found = false;
    size_t nameLen = strlen(ri->headerName);

    for (unsigned i = r->headerCount; i-- > 0;) {
        const CorHeader* h = &r->headers[i];
        size_t end = h->valueLen;

        if (!corHeaderIsLen(h, ri->headerName, nameLen)) {
            continue;
        }
        while (end > 0) {
            CorNetAddr addr;

            switch (entryBefore(ri, h->value, &end, &addr)) {
            case ENTRY_EMPTY:
                continue;
            case ENTRY_NONE:
                return found;
            case ENTRY_ADDRESS:
                break;
            }
            *client = addr;
            found = true;
            if (!trusted(ri, &addr)) {
                return true;
            }
        }
    }
    return found;
}

void
corRealIpApply(CorRequest* r)
{
    const CorConfigRealIp* ri = corRuntime.config != NULL
                                    ? corRuntime.config->realIp
                                    : NULL;
    CorNetAddr peer;
    CorNetAddr client;
    char text[INET6_ADDRSTRLEN];
    char* copy;

    r->peer = r->remote;
    if (ri == NULL || !corNetAddrParse(r->remote, &peer) || !trusted(ri, &peer)
        || !clientOf(ri, r, &client)
        || inet_ntop(client.len == 4 ? AF_INET : AF_INET6, client.bytes, text,
                     sizeof(text))
               == NULL) {
        return;
    }
    copy = corRequestAlloc(r, strlen(text) + 1);
    if (copy != NULL) {
        memcpy(copy, text, strlen(text) + 1);
        r->remote = copy;
    }
}
