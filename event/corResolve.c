/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Name resolution: corResolve. Numeric addresses and localhost are
 * answered here and never reach a server. A name is answered from the
 * cache of the calling loop or thread (corResolveCache.c) while its TTL
 * lasts, else asked through that loop's or thread's c-ares channel
 * (corResolveChannel.c). A lookup in a coroutine parks, and the query's
 * callback wakes every lookup parked on that name, so the loop never
 * blocks on DNS and concurrent lookups share one query. Elsewhere the
 * lookup polls the channel's sockets with corRestWaitFd; so a stop or the
 * request's cancel ends both kinds of wait at once.
 */
#include "corEvInt.h"

#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* One lookup waiting for its name's query; on the lookup's stack. */
struct CorResolveWaiter {
    CorList link; /* in its entry's waiters */
    CorAddrs* out;
    char* why;
    size_t whyLen;
    int rc;
    bool done;
    CorCoPark park; /* a parked coroutine; 0 when it polls */
};

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
    struct sockaddr_in6* sin6 = (struct sockaddr_in6*)&out->addrs[out->count++];

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

/* ---- Looking up ---------------------------------------------------------- */

static uint64_t
nowMs(const CorResolver* r)
{
    return r->loop != NULL ? corEvNow(r->loop) : corEvClockMs();
}

/* The cache's key for host: lower case, without a final dot. False when
 * host cannot be a DNS name. */
static bool
nameKey(const char* host, char* name, size_t cap)
{
    size_t len = strlen(host);

    if (len > 0 && host[len - 1] == '.') {
        len--;
    }
    if (len == 0 || len >= cap || len > 253) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = host[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) {
            return false;
        }
        name[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    name[len] = '\0';
    return true;
}

/* What a failed query means, by c-ares status: the errno a lookup returns
 * and the why after "name 'x': ". A status not here is -EIO with c-ares'
 * own words. */
static const struct {
    int status;
    int rc;
    const char* text;
} failures[] = {
    { ARES_ENOTFOUND, -ENOENT, "NXDOMAIN (no such name)" },
    { ARES_ENODATA, -ENOENT, "no address (no A or AAAA record)" },
    { ARES_ETIMEOUT, -ETIMEDOUT, "timed out (no answer from the DNS servers)" },
    { ARES_EREFUSED, -ECONNREFUSED, "REFUSED by the DNS server" },
    { ARES_ECONNREFUSED, -ECONNREFUSED,
      "the DNS server refused the connection" },
    { ARES_ESERVFAIL, -EIO, "SERVFAIL (the DNS server failed)" },
    { ARES_ENOMEM, -ENOMEM, "out of memory" },
    { ARES_EDESTRUCTION, -ECANCELED, "cancelled" },
    { ARES_ECANCELLED, -ECANCELED, "cancelled" },
};

/* An entry's answer, for one lookup: addresses into out, or -errno and
 * why. */
static int
answerCopy(const CorResolveEntry* entry, CorAddrs* out, char* why,
           size_t whyLen)
{
    if (entry->status == ARES_SUCCESS) {
        out->count = entry->count;
        for (unsigned i = 0; i < entry->count; i++) {
            memset(&out->addrs[i], 0, sizeof(out->addrs[i]));
            memcpy(&out->addrs[i], &entry->addrs[i], sizeof(entry->addrs[i]));
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof(failures) / sizeof(failures[0]); i++) {
        if (failures[i].status == entry->status) {
            corEvWhy(why, whyLen, "name '%s': %s", entry->name,
                     failures[i].text);
            return failures[i].rc;
        }
    }
    corEvWhy(why, whyLen, "name '%s': %s", entry->name,
             ares_strerror(entry->status));
    return -EIO;
}

/* Keep what an answer says: its addresses, in c-ares' order (RFC 6724,
 * as the system orders them), and how long it is good for. */
static unsigned
answerKeep(CorResolveEntry* entry, const struct ares_addrinfo* res)
{
    unsigned ttl = ~0u;

    entry->count = 0;
    for (const struct ares_addrinfo_node* node = res->nodes;
         node != NULL && entry->count < COR_RESOLVE_MAX; node = node->ai_next) {
        if ((node->ai_family != AF_INET && node->ai_family != AF_INET6)
            || node->ai_addrlen > sizeof(entry->addrs[0])) {
            continue;
        }
        memcpy(&entry->addrs[entry->count], node->ai_addr, node->ai_addrlen);
        /* sin_port and sin6_port share their place. */
        entry->addrs[entry->count].v4.sin_port = 0;
        entry->count++;
        ttl = node->ai_ttl >= 0 && (unsigned)node->ai_ttl < ttl
                  ? (unsigned)node->ai_ttl
                  : ttl;
    }
    for (const struct ares_addrinfo_cname* c = res->cnames; c != NULL;
         c = c->next) {
        ttl = c->ttl >= 0 && (unsigned)c->ttl < ttl ? (unsigned)c->ttl : ttl;
    }
    if (entry->count == 0) {
        entry->status = ARES_ENODATA;
    }
    return ttl;
}

/* A query's end: keep the answer (an NXDOMAIN briefly, a failure not at
 * all) and hand it to every lookup that waits for it. */
static void
answered(void* arg, int status, int timeouts, struct ares_addrinfo* res)
{
    CorResolveEntry* entry = arg;
    CorResolver* r = entry->resolver;
    unsigned ttl = 0;
    CorList* node;
    CorList* next;

    (void)timeouts;
    entry->status = status;
    entry->count = 0;
    if (status == ARES_SUCCESS) {
        ttl = answerKeep(entry, res);
    }
    if (entry->status == ARES_SUCCESS) {
        ttl = ttl < r->minTtlS   ? r->minTtlS
              : ttl > r->maxTtlS ? r->maxTtlS
                                 : ttl;
    } else if (entry->status == ARES_ENOTFOUND
               || entry->status == ARES_ENODATA) {
        ttl = r->negativeTtlS;
    }
    ares_freeaddrinfo(res);
    entry->expires = nowMs(r) + (uint64_t)ttl * 1000;
    entry->pending = false;
    r->pending--;
    corListForEach(node, next, &entry->waiters)
    {
        CorResolveWaiter* w = corContainerOf(node, CorResolveWaiter, link);

        w->rc = answerCopy(entry, w->out, w->why, w->whyLen);
        w->done = true;
        if (w->park != 0) {
            corCoLoopWake(w->park);
        }
    }
    corListInit(&entry->waiters);
}

static void
queryStart(CorResolver* r, CorResolveEntry* entry)
{
    struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC,
                                         .ai_socktype = SOCK_STREAM };

    entry->pending = true;
    entry->resolver = r;
    r->pending++;
    /* The callback may run before this returns (a hosts-file answer). */
    ares_getaddrinfo(r->channel, entry->name, NULL, &hints, answered, entry);
    corResolverTimerArm(r);
}

/* In a coroutine: park until the query's callback wakes it. 0, or -errno
 * (the lookup's own timeout, a cancel). May yield. */
static int
waitParked(CorResolver* r, CorResolveWaiter* w, int timeoutMs)
{
    uint64_t deadline = corEvNow(r->loop) + (uint64_t)timeoutMs;

    while (!w->done) {
        uint64_t now = corEvNow(r->loop);
        int rc;

        if (now >= deadline) {
            return -ETIMEDOUT;
        }
        rc = corCoLoopPark(&w->park, (int)(deadline - now));
        if (w->done) {
            break;
        }
        if (rc < 0) {
            return -errno;
        }
        /* A park ends early without a wake only by a cancel. */
        if (rc == 0 && corEvNow(r->loop) < deadline) {
            return -ECANCELED;
        }
    }
    return 0;
}

/* Anywhere else: poll the channel's sockets until the answer comes, so a
 * stop or the request's cancel ends the wait. May yield (a wait that must
 * not suspend its coroutine polls instead). */
static int
waitPolled(CorResolver* r, CorResolveWaiter* w, int timeoutMs)
{
    uint64_t deadline = corEvClockMs() + (uint64_t)timeoutMs;

    while (!w->done) {
        uint64_t now = corEvClockMs();
        struct timeval max;
        struct timeval tv;
        const struct timeval* next;
        short revents;
        uint64_t ms;

        if (now >= deadline) {
            return -ETIMEDOUT;
        }
        ms = deadline - now;
        max = (struct timeval){ .tv_sec = (time_t)(ms / 1000),
                                .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
        next = ares_timeout(r->channel, &max, &tv);
        ms = (uint64_t)next->tv_sec * 1000
             + ((uint64_t)next->tv_usec + 999) / 1000;
        if (corRestWaitFd(r->epfd, POLLIN, (int)ms, &revents) < 0) {
            return -errno;
        }
        corResolverProcess(r);
    }
    return 0;
}

int
corResolve(const char* host, int timeoutMs, CorAddrs* out, char* why,
           size_t whyLen)
{
    CorResolveWaiter w = { .out = out, .why = why, .whyLen = whyLen };
    char name[256];
    CorResolveEntry* entry;
    CorResolver* r;
    int rc;

    if (resolveLocal(host, out)) {
        return 0;
    }
    if (!nameKey(host, name, sizeof(name))) {
        corEvWhy(why, whyLen, "name '%s': not a valid host name", host);
        return -ENOENT;
    }
    r = corResolverGet();
    if (r == NULL) {
        rc = -errno;
        corEvWhy(why, whyLen, "name '%s': the resolver cannot start: %s", name,
                 strerror(-rc));
        return rc;
    }
    entry = corResolveCacheFind(r->cache, name);
    if (entry != NULL && !entry->pending && entry->expires > nowMs(r)) {
        return answerCopy(entry, out, why, whyLen);
    }
    if (entry == NULL) {
        entry = corResolveCacheAdd(r->cache, name, nowMs(r));
        if (entry == NULL) {
            corEvWhy(why, whyLen, "name '%s': out of memory", name);
            return -ENOMEM;
        }
    }
    corListInsert(&entry->waiters, &w.link);
    if (!entry->pending) {
        queryStart(r, entry);
    }
    if (w.done) {
        return w.rc;
    }
    timeoutMs = timeoutMs > 0 ? timeoutMs : r->timeoutMs;
    rc = corRestOnCoroutine() ? waitParked(r, &w, timeoutMs)
                              : waitPolled(r, &w, timeoutMs);
    if (w.done) {
        return w.rc;
    }
    corListRemove(&w.link);
    if (rc == -ETIMEDOUT) {
        corEvWhy(why, whyLen, "name '%s': timed out after %d ms", name,
                 timeoutMs);
    } else {
        corEvWhy(why, whyLen, "name '%s': %s", name,
                 rc == -ECANCELED ? "cancelled" : strerror(-rc));
    }
    return rc;
}
