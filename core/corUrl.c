/* SPDX-License-Identifier: Apache-2.0 */
/*
 * URLs of the clients: scheme://[user[:password]@]host[:port][/path][?query]
 * taken apart once, the same way for every scheme (http, https, cor, cors,
 * mqtt, mqtts), so that no client has a parser of its own (the HTTP
 * client had one, which read "http://a?x" where this refused it: RFC 3986
 * 6.2.3 reads it as "http://a/?x", so both do now). Strict: what a client
 * would send as it is must not carry a space, a control byte or a byte
 * past ASCII; a host is a name, an IPv4 address or [an IPv6 one].
 */
#include "cor.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A byte of a host name or address (RFC 3986 reg-name, unescaped, and the
 * ':' of an IPv6 address between brackets). */
static bool
hostByte(char ch, bool bracketed)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
           || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_'
           || (bracketed && ch == ':');
}

static int
urlBad(const char* s, const char* what, char* why, size_t whyLen)
{
    snprintf(why, whyLen, "URL %.80s: %s", s != NULL ? s : "(none)", what);
    return -EINVAL;
}

/* The scheme, lowercased, up to "://". Returns the rest, or NULL. */
static const char*
schemeTake(const char* s, CorUrl* u)
{
    size_t n = 0;

    while (s[n] != '\0' && s[n] != ':' && n + 1 < sizeof(u->scheme)) {
        char ch = s[n];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
              || (n > 0
                  && ((ch >= '0' && ch <= '9') || ch == '+' || ch == '-'
                      || ch == '.')))) {
            return NULL;
        }
        u->scheme[n] = (char)(ch | 0x20);
        n++;
    }
    u->scheme[n] = '\0';
    return n > 0 && strncmp(s + n, "://", 3) == 0 ? s + n + 3 : NULL;
}

/* user[:password]@, when there is one before end. Returns where the host
 * starts. */
static const char*
userTake(const char* p, const char* end, CorUrl* u)
{
    const char* at = memchr(p, '@', (size_t)(end - p));
    const char* colon;

    if (at == NULL) {
        return p;
    }
    colon = memchr(p, ':', (size_t)(at - p));
    u->user = p;
    u->userLen = (size_t)((colon != NULL ? colon : at) - p);
    if (colon != NULL) {
        u->password = colon + 1;
        u->passwordLen = (size_t)(at - colon - 1);
    }
    return at + 1;
}

/* host[:port] from p to end. Returns 0 or -1. */
static int
hostTake(const char* p, const char* end, CorUrl* u)
{
    const char* host = p;
    const char* hostEnd;
    bool bracketed = *p == '[';

    if (bracketed) {
        host = p + 1;
        hostEnd = memchr(host, ']', (size_t)(end - host));
        if (hostEnd == NULL) {
            return -1;
        }
        p = hostEnd + 1;
    } else {
        while (p < end && *p != ':') {
            p++;
        }
        hostEnd = p;
    }
    if (hostEnd == host || (size_t)(hostEnd - host) >= sizeof(u->host)) {
        return -1;
    }
    for (const char* h = host; h < hostEnd; h++) {
        if (!hostByte(*h, bracketed)) {
            return -1;
        }
    }
    memcpy(u->host, host, (size_t)(hostEnd - host));
    u->host[hostEnd - host] = '\0';
    if (p < end) {
        unsigned port = 0;

        /* Digits to end, by hand: strtoul was a fifth of the parse, and a
         * notification parses its URL twice (check, send). */
        if (*p != ':' || p + 1 == end) {
            return -1;
        }
        for (const char* d = p + 1; d < end; d++) {
            if (*d < '0' || *d > '9' || port > 65535) {
                return -1;
            }
            port = port * 10 + (unsigned)(*d - '0');
        }
        if (port == 0 || port > 65535) {
            return -1;
        }
        u->port = port;
    }
    return 0;
}

int
corUrlParse(const char* s, CorUrl* u, char* why, size_t whyLen)
{
    const char* p;
    const char* end;

    memset(u, 0, sizeof(*u));
    if (s == NULL || (p = schemeTake(s, u)) == NULL) {
        return urlBad(s, "not scheme://host", why, whyLen);
    }
    end = p + strcspn(p, "/?#");
    p = userTake(p, end, u);
    u->authority = p;
    u->authorityLen = (size_t)(end - p);
    if (hostTake(p, end, u) != 0) {
        return urlBad(s, "a bad host or port", why, whyLen);
    }
    return corUrlTargetParse(s, end, u, why, whyLen);
}

int
corUrlTargetParse(const char* s, const char* end, CorUrl* u, char* why,
                  size_t whyLen)
{
    /* An empty path is "/"; before a query it stays empty ("?x"). */
    u->target = *end == '#' || *end == '\0' ? "/" : end;
    u->targetLen = *end == '#' || *end == '\0' ? 1 : strcspn(end, "#");
    for (size_t i = 0; i < u->targetLen; i++) {
        unsigned char ch = (unsigned char)u->target[i];

        if (ch <= 0x20 || ch >= 0x7f) {
            return urlBad(s,
                          "a space, a control or a non-ASCII byte in its "
                          "path or query",
                          why, whyLen);
        }
    }
    return 0;
}

int
corClientTargetUrl(const CorClientRequest* q, CorUrl* u, char* why,
                   size_t whyLen)
{
    const CorClientTarget* t = q->target;

    if (t == NULL || strncmp(q->url, t->text, t->len) != 0
        || strchr("/?#", q->url[t->len]) == NULL) {
        return corUrlParse(q->url, u, why, whyLen);
    }
    *u = t->url;
    return corUrlTargetParse(q->url, q->url + t->len, u, why, whyLen);
}
