/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Name resolution: corResolve turns a host into addresses. Numeric
 * addresses and localhost are answered here and never reach a server.
 */
#include "corEvInt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Say why into why (may be NULL). */
static void
whySet(char* why, size_t whyLen, const char* format, ...)
{
    va_list ap;

    if (why == NULL || whyLen == 0) {
        return;
    }
    va_start(ap, format);
    vsnprintf(why, whyLen, format, ap);
    va_end(ap);
}

static void
addIpv4(CorAddrs* out, const struct in_addr* addr)
{
    struct sockaddr_in* sin = (struct sockaddr_in*)&out->addrs[out->count++];

    memset(sin, 0, sizeof(out->addrs[0]));
    sin->sin_family = AF_INET;
    sin->sin_addr = *addr;
}

static void
addIpv6(CorAddrs* out, const struct in6_addr* addr)
{
    struct sockaddr_in6* sin6 =
        (struct sockaddr_in6*)&out->addrs[out->count++];

    memset(sin6, 0, sizeof(out->addrs[0]));
    sin6->sin6_family = AF_INET6;
    sin6->sin6_addr = *addr;
}

/*
 * A host that needs no server: an IPv4 address, an IPv6 one (bare or in
 * brackets), or localhost, which RFC 6761 keeps off the DNS; its order is
 * the one glibc gives with the stock gai.conf, ::1 first. Returns whether
 * host was one; out is filled when it was.
 */
static bool
resolveLocal(const char* host, CorAddrs* out)
{
    char buf[INET6_ADDRSTRLEN + 2];
    size_t len = strlen(host);
    struct in6_addr a6;
    struct in_addr a4;

    out->count = 0;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        addIpv4(out, &a4);
        return true;
    }
    if (host[0] == '[' && len >= 2 && host[len - 1] == ']'
        && len - 2 < sizeof(buf)) {
        memcpy(buf, host + 1, len - 2);
        buf[len - 2] = '\0';
        host = buf;
    }
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        addIpv6(out, &a6);
        return true;
    }
    if (strcasecmp(host, "localhost") == 0
        || strcasecmp(host, "localhost.") == 0) {
        a4.s_addr = htonl(INADDR_LOOPBACK);
        addIpv6(out, &in6addr_loopback);
        addIpv4(out, &a4);
        return true;
    }
    return false;
}

int
corResolverConfigure(const CorResolverConfig* config)
{
    (void)config;
    return 0;
}

int
corResolve(const char* host, int timeoutMs, CorAddrs* out, char* why,
           size_t whyLen)
{
    (void)timeoutMs;
    if (resolveLocal(host, out)) {
        return 0;
    }
    whySet(why, whyLen, "name '%s': names are not resolved yet", host);
    return -ENOENT;
}
