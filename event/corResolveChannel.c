/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resolver's channels: the configuration every channel is made from,
 * and the c-ares channel of each loop, and of each thread off the loops (a
 * worker, the main thread), made at its first lookup.
 *
 * A channel's sockets live in an epoll set of its own, kept by c-ares'
 * socket-state callback. On a loop that set is one CorEvIo of the loop,
 * and c-ares' next timeout one CorEvTimer, so the loop reads the answers
 * while it serves everything else; off the loops a lookup waits on the
 * same set with corRestWaitFd (corResolve.c).
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define SERVERS_MAX 8
#define TIMEOUT_DEFAULT_MS 2000

/* The configuration every channel is made from; a channel made under an
 * older generation is replaced at its next lookup with nothing in flight. */
typedef struct {
    char* servers; /* NULL: the system's */
    int timeoutMs;
    unsigned minTtlS;
    unsigned maxTtlS;
    unsigned negativeTtlS;
} Config;

static pthread_mutex_t configLock = PTHREAD_MUTEX_INITIALIZER;
static Config config = { NULL, TIMEOUT_DEFAULT_MS, 0, 3600, 5 };
static atomic_uint configGeneration;

/* Threads off the loops keep their resolver here; the key frees it when
 * the thread exits. */
static __thread CorResolver* threadResolver;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t threadKey;
static int libraryStatus;

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

static void
channelTimeout(CorEvTimer* timer)
{
    corResolverProcess(corContainerOf(timer, CorResolver, timer));
}

void
corResolverTimerArm(CorResolver* r)
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

void
corResolverProcess(CorResolver* r)
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
    corResolverTimerArm(r);
}

static void
channelReady(CorEvIo* io, unsigned events)
{
    (void)events;
    corResolverProcess(corContainerOf(io, CorResolver, io));
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
 * which it was. The price, as in nginx: such an answer is final, the
 * next server is asked only when one does not answer. */
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
    return status == ARES_SUCCESS ? 0 : status == ARES_ENOMEM ? -ENOMEM : -EIO;
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

CorResolver*
corResolverGet(void)
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
