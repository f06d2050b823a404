/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Name resolution with c-ares, on the loop. Numeric addresses and
 * localhost are answered here and never reach a server. A name is asked
 * through a c-ares channel of the calling loop, or of the calling thread
 * off the loops (a worker, the main thread), with a cache beside it
 * (corResolveCache.c).
 *
 * The channel's sockets live in an epoll set of its own, kept by c-ares'
 * socket-state callback. On a loop that set is one CorEvIo of the loop,
 * and c-ares' next timeout one CorEvTimer: a lookup in a coroutine parks,
 * and the query's callback wakes every coroutine parked on that name, so
 * the loop never blocks on DNS and concurrent lookups share one query.
 * Elsewhere the lookup waits on the same epoll set with corRestWaitFd,
 * which polls it; so a stop or the request's cancel ends both kinds of
 * wait at once.
 *
 * One channel per loop or thread, not one shared under a lock: c-ares
 * 1.18's channel is not thread-safe, so a shared one would need its lock
 * held while it is driven, and a loop must never wait for another
 * thread's lookup. The price is one cache per loop and per worker thread:
 * a name is asked once by each that uses it.
 */
#include "corEvInt.h"

#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#define SERVERS_MAX 8
#define TIMEOUT_DEFAULT_MS 2000

/* The configuration every channel is made from; a channel made under an
 * older generation is replaced at its next lookup with nothing in flight. */
typedef struct {
    char* servers;              /* NULL: the system's */
    int timeoutMs;
    unsigned minTtlS;
    unsigned maxTtlS;
    unsigned negativeTtlS;
} Config;

static pthread_mutex_t configLock = PTHREAD_MUTEX_INITIALIZER;
static Config config = { NULL, TIMEOUT_DEFAULT_MS, 0, 3600, 5 };
static atomic_uint configGeneration;

/* One loop's or one thread's channel and cache. */
typedef struct CorResolver {
    ares_channel channel;
    int epfd;                   /* the channel's sockets */
    CorEvLoop* loop;            /* the loop it serves, or NULL */
    CorEvIo io;                 /* epfd, on the loop */
    CorEvTimer timer;           /* c-ares' next timeout, on the loop */
    CorResolveCache* cache;
    unsigned generation;
    unsigned pending;           /* queries in flight */
    int timeoutMs;
    unsigned minTtlS;
    unsigned maxTtlS;
    unsigned negativeTtlS;
} CorResolver;

/* One lookup waiting for its name's query; on the lookup's stack. */
struct CorResolveWaiter {
    CorResolveWaiter* next;
    CorResolveWaiter* prev;
    CorAddrs* out;
    char* why;
    size_t whyLen;
    int rc;
    bool done;
    CorCoPark park;             /* a parked coroutine; 0 when it polls */
};

/* Threads off the loops keep their resolver here; the key frees it when
 * the thread exits. */
static __thread CorResolver* threadResolver;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t threadKey;
static int libraryStatus;

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

/* ---- The configuration -------------------------------------------------- */

static bool
portParse(const char* s, int* port)
{
    char* end;
    long n;

    if (*s < '0' || *s > '9') {
        return false;
    }
    n = strtol(s, &end, 10);
    if (*end != '\0' || n < 1 || n > 65535) {
        return false;
    }
    *port = (int)n;
    return true;
}

/* One server, "IPv4[:port]", "IPv6" or "[IPv6][:port]", into node. */
static bool
serverParse(const char* s, size_t len, struct ares_addr_port_node* node)
{
    char buf[INET6_ADDRSTRLEN + 10];
    char* portText = NULL;
    char* host = buf;
    int port = 53;

    if (len == 0 || len >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (buf[0] == '[') {
        char* end = strchr(buf, ']');

        if (end == NULL || (end[1] != '\0' && end[1] != ':')) {
            return false;
        }
        portText = end[1] == ':' ? end + 2 : NULL;
        *end = '\0';
        host = buf + 1;
    } else if (strchr(buf, ':') == strrchr(buf, ':')
               && strchr(buf, ':') != NULL) {
        portText = strchr(buf, ':');
        *portText++ = '\0';
    }
    if (portText != NULL && !portParse(portText, &port)) {
        return false;
    }
    memset(node, 0, sizeof(*node));
    node->udp_port = port;
    node->tcp_port = port;
    if (inet_pton(AF_INET6, host, &node->addr.addr6) == 1) {
        node->family = AF_INET6;
        return true;
    }
    node->family = AF_INET;
    return buf[0] != '[' && inet_pton(AF_INET, host, &node->addr.addr4) == 1;
}

/* "IP[:port], ..." into nodes, linked in order. Returns how many, or
 * -EINVAL. */
static int
serversParse(const char* s, struct ares_addr_port_node* nodes)
{
    int count = 0;

    for (;;) {
        size_t len;

        s += strspn(s, " \t");
        len = strcspn(s, ",");
        while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) {
            len--;
        }
        if (count == SERVERS_MAX || !serverParse(s, len, &nodes[count])) {
            return -EINVAL;
        }
        if (count > 0) {
            nodes[count - 1].next = &nodes[count];
        }
        count++;
        s += strcspn(s, ",");
        if (*s++ == '\0') {
            return count;
        }
    }
}

static bool
serversSystem(const char* servers)
{
    return servers == NULL || strcmp(servers, "system") == 0;
}

int
corResolverConfigure(const CorResolverConfig* c)
{
    struct ares_addr_port_node nodes[SERVERS_MAX];
    char* servers = NULL;

    if (!serversSystem(c->servers)) {
        if (serversParse(c->servers, nodes) < 0) {
            return -EINVAL;
        }
        servers = strdup(c->servers);
        if (servers == NULL) {
            return -ENOMEM;
        }
    }
    if (c->minTtlS > c->maxTtlS) {
        free(servers);
        return -EINVAL;
    }
    pthread_mutex_lock(&configLock);
    free(config.servers);
    config = (Config){
        .servers = servers,
        .timeoutMs = c->timeoutMs > 0 ? c->timeoutMs : TIMEOUT_DEFAULT_MS,
        .minTtlS = c->minTtlS,
        .maxTtlS = c->maxTtlS,
        .negativeTtlS = c->negativeTtlS,
    };
    atomic_fetch_add(&configGeneration, 1);
    pthread_mutex_unlock(&configLock);
    return 0;
}

/* ---- The channel --------------------------------------------------------- */

/* c-ares opens, watches and closes its sockets: mirror that in epfd. */
static void
sockState(void* data, ares_socket_t fd, int readable, int writable)
{
    CorResolver* r = data;
    struct epoll_event ev = {
        .events = (readable ? EPOLLIN : 0u) | (writable ? EPOLLOUT : 0u),
        .data.fd = fd,
    };

    if (ev.events == 0) {
        epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
        return;
    }
    /* A socket that cannot be added (no memory) is only read when c-ares
     * times its query out: the lookup fails, the loop does not stall. */
    if (epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT) {
        epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
}

static void channelProcess(CorResolver* r);

static void
channelTimeout(CorEvTimer* timer)
{
    channelProcess(corContainerOf(timer, CorResolver, timer));
}

/* Arm the loop's timer for c-ares' next timeout, or disarm it. */
static void
timerArm(CorResolver* r)
{
    struct timeval tv;

    if (r->loop == NULL) {
        return;
    }
    if (r->pending == 0 || ares_timeout(r->channel, NULL, &tv) == NULL) {
        corEvTimerStop(r->loop, &r->timer);
        return;
    }
    corEvTimerStart(r->loop, &r->timer,
                    (uint64_t)tv.tv_sec * 1000
                        + ((uint64_t)tv.tv_usec + 999) / 1000,
                    channelTimeout);
}

/* Read what the sockets have and expire what timed out; the callbacks of
 * the queries that end run from here. */
static void
channelProcess(CorResolver* r)
{
    struct epoll_event evs[16];
    int n;

    do {
        n = epoll_wait(r->epfd, evs, 16, 0);
        for (int i = 0; i < n; i++) {
            ares_socket_t fd = evs[i].data.fd;
            bool in = evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP);
            bool out = evs[i].events & EPOLLOUT;

            ares_process_fd(r->channel, in ? fd : ARES_SOCKET_BAD,
                            out ? fd : ARES_SOCKET_BAD);
        }
    } while (n == 16);
    ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    timerArm(r);
}

static void
channelReady(CorEvIo* io, unsigned events)
{
    (void)events;
    channelProcess(corContainerOf(io, CorResolver, io));
}

static void
resolverFree(CorResolver* r)
{
    if (r == NULL) {
        return;
    }
    if (r->loop != NULL) {
        corEvTimerStop(r->loop, &r->timer);
        corEvIoStop(r->loop, &r->io);
    }
    /* Whatever is still in flight ends here (ARES_EDESTRUCTION), its
     * entries still alive. */
    if (r->channel != NULL) {
        ares_destroy(r->channel);
    }
    corResolveCacheDestroy(r->cache);
    close(r->epfd);
    free(r);
}

static void
threadResolverFree(void* r)
{
    resolverFree(r);
}

static void
onceInit(void)
{
    libraryStatus = ares_library_init(ARES_LIB_INIT_ALL);
    if (libraryStatus == ARES_SUCCESS
        && pthread_key_create(&threadKey, threadResolverFree) != 0) {
        libraryStatus = ARES_ENOMEM;
    }
}

/* The channel's options from the configuration: the system's servers,
 * search list and hosts file, or the given servers alone. Up to two tries
 * of a third of the lookup's timeout each (c-ares doubles the second), so
 * a lost packet is asked again within the lookup's time. A SERVFAIL or
 * REFUSED answer is taken as the answer (NOCHECKRESP): otherwise c-ares
 * reports both as a refused connection, and the error could not say
 * which it was. */
static int
channelInit(CorResolver* r, const char* servers)
{
    struct ares_addr_port_node nodes[SERVERS_MAX];
    struct ares_options opts = {
        .sock_state_cb = sockState,
        .sock_state_cb_data = r,
        .timeout = r->timeoutMs / 3 > 0 ? r->timeoutMs / 3 : 1,
        .tries = 2,
        .flags = ARES_FLAG_NOCHECKRESP,
        .lookups = (char*)"b",
    };
    int mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES
               | ARES_OPT_FLAGS;
    int status;

    if (servers != NULL) {
        mask |= ARES_OPT_LOOKUPS | ARES_OPT_DOMAINS;
    }
    status = ares_init_options(&r->channel, &opts, mask);
    if (status != ARES_SUCCESS) {
        r->channel = NULL;
    }
    if (status == ARES_SUCCESS && servers != NULL) {
        serversParse(servers, nodes);
        status = ares_set_servers_ports(r->channel, nodes);
    }
    return status == ARES_SUCCESS ? 0
           : status == ARES_ENOMEM ? -ENOMEM : -EIO;
}

static CorResolver*
resolverCreate(CorEvLoop* loop)
{
    CorResolver* r = calloc(1, sizeof(*r));
    char* servers = NULL;
    bool system;
    int err = ENOMEM;

    if (r == NULL) {
        return NULL;
    }
    r->loop = loop;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    pthread_mutex_lock(&configLock);
    r->generation = atomic_load(&configGeneration);
    r->timeoutMs = config.timeoutMs;
    r->minTtlS = config.minTtlS;
    r->maxTtlS = config.maxTtlS;
    r->negativeTtlS = config.negativeTtlS;
    system = config.servers == NULL;
    servers = system ? NULL : strdup(config.servers);
    pthread_mutex_unlock(&configLock);
    if (r->epfd < 0) {
        err = errno;
        goto failed;
    }
    if ((!system && servers == NULL)
        || (r->cache = corResolveCacheCreate()) == NULL) {
        goto failed;
    }
    err = -channelInit(r, servers);
    if (err != 0) {
        goto failed;
    }
    if (loop != NULL) {
        err = -corEvIoStart(loop, &r->io, r->epfd, EPOLLIN, channelReady);
        if (err != 0) {
            goto failed;
        }
    }
    free(servers);
    return r;

failed:
    free(servers);
    r->loop = NULL;
    resolverFree(r);
    errno = err;
    return NULL;
}

/* The calling loop's resolver, or the calling thread's; made at the first
 * lookup, and made again when the configuration changed and nothing is in
 * flight. NULL with errno set on failure. */
static CorResolver*
resolverGet(void)
{
    CorEvLoop* loop = corEvLoopCurrent();
    CorResolver** slot = loop != NULL ? &loop->resolver : &threadResolver;
    CorResolver* r = *slot;

    pthread_once(&once, onceInit);
    if (libraryStatus != ARES_SUCCESS) {
        errno = ENOMEM;
        return NULL;
    }
    if (r != NULL && r->generation == atomic_load(&configGeneration)) {
        return r;
    }
    if (r != NULL && r->pending > 0) {
        return r;
    }
    resolverFree(r);
    *slot = r = resolverCreate(loop);
    if (loop != NULL) {
        loop->resolverFree = resolverFree;
    } else {
        pthread_setspecific(threadKey, r);
    }
    return r;
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
              || (c >= '0' && c <= '9') || c == '-' || c == '_'
              || c == '.')) {
            return false;
        }
        name[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    name[len] = '\0';
    return true;
}

/* An entry's answer, for one lookup: addresses into out, or -errno and
 * why. */
static int
answerCopy(const CorResolveEntry* entry, CorAddrs* out, char* why,
           size_t whyLen)
{
    const char* name = entry->name;

    switch (entry->status) {
    case ARES_SUCCESS:
        out->count = entry->count;
        for (unsigned i = 0; i < entry->count; i++) {
            memcpy(&out->addrs[i], &entry->addrs[i], sizeof(entry->addrs[i]));
        }
        return 0;
    case ARES_ENOTFOUND:
        whySet(why, whyLen, "name '%s': NXDOMAIN (no such name)", name);
        return -ENOENT;
    case ARES_ENODATA:
        whySet(why, whyLen, "name '%s': no address (no A or AAAA record)",
               name);
        return -ENOENT;
    case ARES_ETIMEOUT:
        whySet(why, whyLen, "name '%s': timed out (no answer from the DNS "
               "servers)", name);
        return -ETIMEDOUT;
    case ARES_EREFUSED:
        whySet(why, whyLen, "name '%s': REFUSED by the DNS server", name);
        return -ECONNREFUSED;
    case ARES_ECONNREFUSED:
        whySet(why, whyLen, "name '%s': the DNS server refused the "
               "connection", name);
        return -ECONNREFUSED;
    case ARES_ESERVFAIL:
        whySet(why, whyLen, "name '%s': SERVFAIL (the DNS server failed)",
               name);
        return -EIO;
    case ARES_ENOMEM:
        whySet(why, whyLen, "name '%s': out of memory", name);
        return -ENOMEM;
    case ARES_EDESTRUCTION:
    case ARES_ECANCELLED:
        whySet(why, whyLen, "name '%s': cancelled", name);
        return -ECANCELED;
    default:
        whySet(why, whyLen, "name '%s': %s", name,
               ares_strerror(entry->status));
        return -EIO;
    }
}

/* Keep what an answer says: its addresses, in c-ares' order (RFC 6724,
 * as the system orders them), and how long it is good for. */
static unsigned
answerKeep(CorResolveEntry* entry, const struct ares_addrinfo* res)
{
    unsigned ttl = ~0u;

    entry->count = 0;
    for (const struct ares_addrinfo_node* node = res->nodes;
         node != NULL && entry->count < COR_RESOLVE_MAX;
         node = node->ai_next) {
        if ((node->ai_family != AF_INET && node->ai_family != AF_INET6)
            || node->ai_addrlen > sizeof(entry->addrs[0])) {
            continue;
        }
        memcpy(&entry->addrs[entry->count], node->ai_addr, node->ai_addrlen);
        entry->addrs[entry->count].v4.sin_port = 0;
        entry->count++;
        ttl = node->ai_ttl >= 0 && (unsigned)node->ai_ttl < ttl
              ? (unsigned)node->ai_ttl : ttl;
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

    (void)timeouts;
    entry->status = status;
    entry->count = 0;
    if (status == ARES_SUCCESS) {
        ttl = answerKeep(entry, res);
    }
    if (entry->status == ARES_SUCCESS) {
        ttl = ttl < r->minTtlS ? r->minTtlS
              : ttl > r->maxTtlS ? r->maxTtlS : ttl;
    } else if (entry->status == ARES_ENOTFOUND
               || entry->status == ARES_ENODATA) {
        ttl = r->negativeTtlS;
    }
    ares_freeaddrinfo(res);
    entry->expires = nowMs(r) + (uint64_t)ttl * 1000;
    entry->pending = false;
    r->pending--;
    for (CorResolveWaiter* w = entry->waiters; w != NULL; w = w->next) {
        w->rc = answerCopy(entry, w->out, w->why, w->whyLen);
        w->done = true;
        if (w->park != 0) {
            corCoLoopWake(w->park);
        }
    }
    entry->waiters = NULL;
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
    timerArm(r);
}

static void
waiterLink(CorResolveEntry* entry, CorResolveWaiter* w)
{
    w->prev = NULL;
    w->next = entry->waiters;
    if (entry->waiters != NULL) {
        entry->waiters->prev = w;
    }
    entry->waiters = w;
}

static void
waiterUnlink(CorResolveEntry* entry, CorResolveWaiter* w)
{
    if (w->prev != NULL) {
        w->prev->next = w->next;
    } else {
        entry->waiters = w->next;
    }
    if (w->next != NULL) {
        w->next->prev = w->prev;
    }
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
        channelProcess(r);
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
        whySet(why, whyLen, "name '%s': not a valid host name", host);
        return -ENOENT;
    }
    r = resolverGet();
    if (r == NULL) {
        rc = -errno;
        whySet(why, whyLen, "name '%s': the resolver cannot start: %s", name,
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
            whySet(why, whyLen, "name '%s': out of memory", name);
            return -ENOMEM;
        }
    }
    waiterLink(entry, &w);
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
    waiterUnlink(entry, &w);
    if (rc == -ETIMEDOUT) {
        whySet(why, whyLen, "name '%s': timed out after %d ms", name,
               timeoutMs);
    } else {
        whySet(why, whyLen, "name '%s': %s", name,
               rc == -ECANCELED ? "cancelled" : strerror(-rc));
    }
    return rc;
}
