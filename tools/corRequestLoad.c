/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine of cor-request: connections on one epoll, each with up to
 * depth requests in flight (pipelined for HTTP, multiplexed for cor://).
 *
 * Closed loop (no rate): each connection sends its next request as an
 * answer comes, and a latency runs from the send. Open loop (--rate R):
 * request k is due at start + k/R whatever the answers do; it goes out on
 * a connection with room, or waits for one, and its latency runs from
 * when it was due, so a server that stalls is charged for the requests
 * that queued behind the stall (coordinated omission, as wrk2 corrects
 * it). A timerfd wakes the loop at the next due time.
 *
 * One request mode (seconds 0): every message once, all at once on one
 * connection, each answer printed as it comes.
 */
#include "corRequest.h"

#include <errno.h>
#include <netdb.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define EVENTS_MAX 256
/* How long the answers of a finished load may still come. */
#define DRAIN_NS 2000000000ull

/* A request in flight: oldest first. */
typedef struct {
    uint32_t id;
    unsigned message;
    uint64_t dueNs;
    uint64_t sentNs;
} Pending;

typedef struct {
    int fd;
    bool connected;
    SSL* ssl;           /* https, cors */
    bool secured;       /* the TLS handshake is done */
    bool tlsWantsWrite; /* TLS waits for room to write */
    bool writeArmed;
    bool retiring; /* the server said CLOSE: no new ones */
    void* state;
    CorBuf out;
    CorBuf in;
    Pending* pending;
    unsigned count;
} Conn;

typedef struct {
    const CorReqPlan* plan;
    struct sockaddr_storage addr;
    socklen_t addrLen;
    Conn* conns;
    unsigned depth;
    int ep;
    int timerFd;
    uint64_t startNs;
    uint64_t endNs;
    bool issuing;
    uint64_t issued;   /* open loop: requests due so far */
    uint64_t* backlog; /* open loop: due times with no room */
    size_t backlogHead;
    size_t backlogLen;
    size_t backlogCap;
    uint32_t nextId;
    unsigned nextMessage;
    unsigned nextConn;
    uint64_t answered;
    uint64_t failed;
    uint64_t statuses[6]; /* 1xx..5xx, and other */
    CorReqHist hist;
} Load;

static uint64_t
nowNs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- Buffers ------------------------------------------------------------- */

/* Drop the first n bytes of b, what is left moved to its start: a
 * connection's buffers keep what is pending at data[0]. */
static void
bufTake(CorBuf* b, size_t n)
{
    corBufConsume(b, n);
    corBufCompact(b);
}

/* ---- Connections --------------------------------------------------------- */

/* Whether requests may be written: connected, and secured under TLS. */
static bool
connReady(const Conn* c)
{
    return c->connected && (c->ssl == NULL || c->secured);
}

/* Whether the connection waits for room to write: to connect, for TLS,
 * or with requests queued (never while a handshake waits to read: the
 * socket is writable all along, and the loop would spin). */
static bool
connWantsWrite(const Conn* c)
{
    return !c->connected || c->tlsWantsWrite
           || (connReady(c) && c->out.len > 0);
}

static int
armConn(Load* l, Conn* c, int op)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };

    if (connWantsWrite(c)) {
        ev.events |= EPOLLOUT;
    }
    c->writeArmed = (ev.events & EPOLLOUT) != 0;
    return epoll_ctl(l->ep, op, c->fd, &ev) == 0 ? 0 : -errno;
}

static int
connOpen(Load* l, Conn* c)
{
    const CorReqProtocol* p = l->plan->protocol;
    int one = 1;

    c->fd = socket(l->addr.ss_family,
                   SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        return -errno;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr*)&l->addr, l->addrLen) != 0
        && errno != EINPROGRESS) {
        int rc = -errno;

        close(c->fd);
        c->fd = -1;
        return rc;
    }
    c->connected = false;
    c->secured = false;
    c->tlsWantsWrite = false;
    if (l->plan->tls != NULL) {
        c->ssl = corReqTlsNew(l->plan->tls, c->fd, l->plan->host);
        if (c->ssl == NULL) {
            return -ENOMEM;
        }
    }
    c->state = p->stateNew != NULL ? p->stateNew() : NULL;
    if (p->greet != NULL && p->greet(c->state, &c->out) != 0) {
        return -ENOMEM;
    }
    return armConn(l, c, EPOLL_CTL_ADD);
}

static void
connClose(Conn* c)
{
    SSL_free(c->ssl);
    c->ssl = NULL;
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

/* The connection failed: what it had in flight failed with it. */
static void
connFail(Load* l, Conn* c, const char* why)
{
    if (l->plan->seconds <= 0 || l->failed == 0) {
        fprintf(stderr, "cor-request: %s:%u: %s\n", l->plan->host,
                l->plan->port, why);
    }
    l->failed += c->count;
    c->count = 0;
    c->retiring = false;
    connClose(c);
    if (c->state != NULL) {
        l->plan->protocol->stateFree(c->state);
        c->state = NULL;
    }
    c->out.len = 0;
    c->in.len = 0;
}

/* Write what is queued; arm EPOLLOUT for the rest. */
static void
connFlush(Load* l, Conn* c)
{
    char why[512] = "";

    while (connReady(c) && c->out.len > 0) {
        ssize_t n = c->ssl != NULL
                        ? corReqTlsWrite(c->ssl, c->out.data, c->out.len,
                                         &c->tlsWantsWrite, why, sizeof(why))
                        : send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);

        if (n < 0 && c->ssl == NULL) {
            n = -errno;
            snprintf(why, sizeof(why), "%s", strerror(errno));
        }
        if (n < 0) {
            if (n != -EAGAIN) {
                connFail(l, c, why);
                return;
            }
            break;
        }
        bufTake(&c->out, (size_t)n);
    }
    if (c->fd >= 0 && c->writeArmed != connWantsWrite(c)) {
        armConn(l, c, EPOLL_CTL_MOD);
    }
}

/* ---- Requests ------------------------------------------------------------ */

static bool
issue(Load* l, Conn* c, uint64_t dueNs)
{
    const CorReqPlan* plan = l->plan;
    unsigned message = l->nextMessage;
    Pending* p;

    if (c->fd < 0 && connOpen(l, c) != 0) {
        connFail(l, c, "cannot connect");
        return false;
    }
    if (plan->protocol->encode(c->state, &plan->messages[message], ++l->nextId,
                               &c->out)
        != 0) {
        connFail(l, c, "no memory");
        return false;
    }
    l->nextMessage = (message + 1) % plan->messageCount;
    p = &c->pending[c->count++];
    *p = (Pending){
        .id = l->nextId, .message = message, .dueNs = dueNs, .sentNs = nowNs()
    };
    return true;
}

/* A connection with room, round robin, or NULL. */
static Conn*
roomyConn(Load* l)
{
    for (unsigned i = 0; i < l->plan->connections; i++) {
        Conn* c = &l->conns[(l->nextConn + i) % l->plan->connections];

        if (c->count < l->depth && !c->retiring) {
            l->nextConn = (unsigned)(c - l->conns + 1) % l->plan->connections;
            return c;
        }
    }
    return NULL;
}

static int
backlogPush(Load* l, uint64_t dueNs)
{
    if (l->backlogLen == l->backlogCap) {
        size_t cap = l->backlogCap ? l->backlogCap * 2 : 1024;
        uint64_t* grown = malloc(cap * sizeof(*grown));

        if (grown == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < l->backlogLen; i++) {
            grown[i] = l->backlog[(l->backlogHead + i) % l->backlogCap];
        }
        free(l->backlog);
        l->backlog = grown;
        l->backlogHead = 0;
        l->backlogCap = cap;
    }
    l->backlog[(l->backlogHead + l->backlogLen++) % l->backlogCap] = dueNs;
    return 0;
}

/* Send what is due and has room; set the timer for the next due one. */
static void
schedule(Load* l, uint64_t now)
{
    const CorReqPlan* plan = l->plan;
    Conn* c;

    if (plan->rate <= 0) {
        for (unsigned i = 0; l->issuing && i < plan->connections; i++) {
            while (l->conns[i].count < l->depth && !l->conns[i].retiring
                   && issue(l, &l->conns[i], now)) {
            }
        }
        return;
    }
    for (;;) {
        uint64_t due = l->startNs
                       + (uint64_t)((double)l->issued * 1e9 / plan->rate);

        if (!l->issuing || due > now) {
            struct itimerspec at = {
                .it_value = { .tv_sec = (time_t)(due / 1000000000ull),
                              .tv_nsec = (long)(due % 1000000000ull) }
            };

            timerfd_settime(l->timerFd, TFD_TIMER_ABSTIME, &at, NULL);
            break;
        }
        l->issued++;
        if (backlogPush(l, due) != 0) {
            l->failed++;
        }
    }
    while (l->backlogLen > 0 && (c = roomyConn(l)) != NULL) {
        uint64_t due = l->backlog[l->backlogHead];

        l->backlogHead = (l->backlogHead + 1) % l->backlogCap;
        l->backlogLen--;
        issue(l, c, due);
    }
}

/* ---- Answers ------------------------------------------------------------- */

static void
printAnswer(const Load* l, const Pending* p, const CorReqAnswer* a)
{
    const CorReqMessage* m = &l->plan->messages[p->message];

    if (l->plan->messageCount > 1) {
        printf("# %s %s\n", m->method, m->target);
    }
    fwrite(a->head, 1, a->headLen, stdout);
    fwrite(a->body, 1, a->bodyLen, stdout);
    if (l->plan->messageCount > 1 && a->bodyLen > 0
        && a->body[a->bodyLen - 1] != '\n') {
        putchar('\n');
    }
    fflush(stdout);
}

static void
answered(Load* l, Conn* c, const CorReqAnswer* a)
{
    unsigned i = 0;
    uint64_t now = nowNs();

    if (l->plan->protocol->multiplexed) {
        while (i < c->count && c->pending[i].id != a->id) {
            i++;
        }
        if (i == c->count) {
            return; /* not ours any more: dropped */
        }
    }
    if (l->plan->seconds <= 0) {
        printAnswer(l, &c->pending[i], a);
    }
    corReqHistAdd(&l->hist, now - c->pending[i].dueNs);
    l->answered++;
    l->statuses[a->status >= 100 && a->status < 600 ? a->status / 100 - 1
                                                    : 5]++;
    memmove(&c->pending[i], &c->pending[i + 1],
            (c->count - i - 1) * sizeof(Pending));
    c->count--;
}

/* Cut every whole answer out of what came. */
static int
decodeAll(Load* l, Conn* c)
{
    const CorReqProtocol* p = l->plan->protocol;
    size_t off = 0;
    char why[256] = "";

    for (;;) {
        CorReqAnswer a = { 0 };
        const CorReqMessage* oldest =
            c->count > 0 ? &l->plan->messages[c->pending[0].message] : NULL;
        ssize_t took;

        if (off == c->in.len || (oldest == NULL && !p->multiplexed)) {
            break;
        }
        took = p->decode(c->state, (char*)c->in.data + off, c->in.len - off,
                         oldest, &a, why, sizeof(why));
        if (took < 0) {
            connFail(l, c, why);
            return -1;
        }
        if (took == 0) {
            break;
        }
        if (a.status != 0) {
            answered(l, c, &a);
        }
        c->retiring |= a.goAway;
        off += (size_t)took;
    }
    bufTake(&c->in, off);
    return 0;
}

/* A connection the server asked to leave, done with: closed, so that the
 * next request opens a new one. */
static void
connRetire(Load* l, Conn* c)
{
    if (c->retiring && c->count == 0 && c->out.len == 0) {
        c->retiring = false;
        connClose(c);
        l->plan->protocol->stateFree(c->state);
        c->state = NULL;
        c->in.len = 0;
    }
}

static void
connReadable(Load* l, Conn* c)
{
    char why[512] = "the server closed the connection";

    for (;;) {
        ssize_t n;

        if (corBufReserve(&c->in, READ_CHUNK) != 0) {
            connFail(l, c, "no memory");
            return;
        }
        n = c->ssl != NULL
                ? corReqTlsRead(c->ssl, c->in.data + c->in.len,
                                c->in.cap - c->in.len, &c->tlsWantsWrite, why,
                                sizeof(why))
                : recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
        if (n < 0 && c->ssl == NULL) {
            n = -errno;
            snprintf(why, sizeof(why), "%s", strerror(errno));
        }
        if (n == 0 || (n < 0 && n != -EAGAIN)) {
            connFail(l, c, why);
            return;
        }
        if (n < 0) {
            break;
        }
        c->in.len += (size_t)n;
        if (decodeAll(l, c) != 0) {
            return;
        }
        /* The server leaves this connection after its last answer: it is
         * retired (connRetire), not read to its end, whose close is no
         * failure to report. */
        if (c->retiring && c->count == 0) {
            break;
        }
    }
}

static void
connEvent(Load* l, Conn* c, uint32_t events)
{
    if (!c->connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int err = 0;
        socklen_t len = sizeof(err);

        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            connFail(l, c, strerror(err));
            return;
        }
        c->connected = true;
    }
    if (c->ssl != NULL && !c->secured && c->connected) {
        char why[512];
        int rc = corReqTlsHandshake(c->ssl, &c->tlsWantsWrite, why,
                                    sizeof(why));

        if (rc < 0 && rc != -EAGAIN) {
            connFail(l, c, why);
            return;
        }
        c->secured = rc == 1;
        if (!c->secured) {
            armConn(l, c, EPOLL_CTL_MOD);
            return;
        }
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        connReadable(l, c);
    }
    if (c->fd >= 0) {
        connFlush(l, c);
    }
    if (c->fd >= 0) {
        connRetire(l, c);
    }
}

/* Fail what waited past the timeout. */
static void
expire(Load* l, uint64_t now)
{
    uint64_t limit = (uint64_t)l->plan->timeoutMs * 1000000ull;

    for (unsigned i = 0; i < l->plan->connections; i++) {
        Conn* c = &l->conns[i];

        if (c->count > 0 && now - c->pending[0].sentNs > limit) {
            connFail(l, c, "no answer within the timeout");
        }
    }
}

/* ---- The run ------------------------------------------------------------- */

static int
resolve(Load* l)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
    struct addrinfo* res;
    char port[16];
    int rc;

    snprintf(port, sizeof(port), "%u", l->plan->port);
    rc = getaddrinfo(l->plan->host, port, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "cor-request: %s: %s\n", l->plan->host,
                gai_strerror(rc));
        return -1;
    }
    memcpy(&l->addr, res->ai_addr, res->ai_addrlen);
    l->addrLen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static unsigned
inFlight(const Load* l)
{
    unsigned n = 0;

    for (unsigned i = 0; i < l->plan->connections; i++) {
        n += l->conns[i].count;
    }
    return n;
}

/* Whether to go on: issuing, or answers still due (a finished load's only
 * for DRAIN_NS). */
static bool
running(const Load* l)
{
    if (l->issuing) {
        return true;
    }
    if (inFlight(l) == 0 && l->backlogLen == 0) {
        return false;
    }
    return l->plan->seconds <= 0 || nowNs() < l->endNs + DRAIN_NS;
}

static void
loopOnce(Load* l)
{
    struct epoll_event events[EVENTS_MAX];
    uint64_t now = nowNs();
    int n;

    if (l->issuing && l->plan->seconds > 0 && now >= l->endNs) {
        l->issuing = false;
    }
    schedule(l, now);
    for (unsigned i = 0; i < l->plan->connections; i++) {
        if (l->conns[i].fd >= 0) {
            connFlush(l, &l->conns[i]);
        }
    }
    n = epoll_wait(l->ep, events, EVENTS_MAX, 100);
    for (int i = 0; i < n; i++) {
        if (events[i].data.ptr == NULL) {
            uint64_t ticks;

            if (read(l->timerFd, &ticks, sizeof(ticks)) < 0) {
                /* Nothing to read: a spurious wake, harmless. */
            }
            continue;
        }
        connEvent(l, events[i].data.ptr, events[i].events);
    }
    expire(l, nowNs());
}

static void
summary(const Load* l)
{
    double seconds = (double)(nowNs() - l->startNs) / 1e9;
    static const double percents[] = { 50, 90, 99, 99.9 };

    printf("%s://%s:%u%s: %u connection%s x %u deep, %.1f s%s\n",
           l->plan->scheme, l->plan->host, l->plan->port,
           l->plan->messages[0].target, l->plan->connections,
           l->plan->connections == 1 ? "" : "s", l->depth, seconds,
           l->plan->rate > 0 ? ", open loop" : "");
    printf("  requests %llu  failed %llu  2xx %llu  non-2xx %llu  "
           "%.0f req/s\n",
           (unsigned long long)l->answered, (unsigned long long)l->failed,
           (unsigned long long)l->statuses[1],
           (unsigned long long)(l->answered - l->statuses[1]),
           (double)l->answered / seconds);
    printf("  latency");
    for (size_t i = 0; i < sizeof(percents) / sizeof(percents[0]); i++) {
        printf("  p%g %.3f ms", percents[i],
               (double)corReqHistPercentile(&l->hist, percents[i]) / 1e6);
    }
    printf("  max %.3f ms\n", (double)l->hist.max / 1e6);
}

static int
loadInit(Load* l, const CorReqPlan* plan)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

    l->plan = plan;
    l->depth = plan->seconds > 0 ? plan->depth : plan->messageCount;
    l->conns = calloc(plan->connections, sizeof(Conn));
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->timerFd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (l->conns == NULL || l->ep < 0 || l->timerFd < 0
        || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->timerFd, &ev) != 0
        || resolve(l) != 0) {
        return -1;
    }
    for (unsigned i = 0; i < plan->connections; i++) {
        l->conns[i].fd = -1;
        l->conns[i].pending = calloc(l->depth, sizeof(Pending));
        if (l->conns[i].pending == NULL) {
            return -1;
        }
    }
    return 0;
}

int
corReqRun(const CorReqPlan* plan)
{
    static Load load;
    Load* l = &load;

    if (loadInit(l, plan) != 0) {
        return 1;
    }
    l->startNs = nowNs();
    l->endNs = l->startNs + (uint64_t)(plan->seconds * 1e9);
    l->issuing = true;
    if (plan->seconds <= 0) {
        /* Every message once, at once, on the first connection. */
        for (unsigned i = 0; i < plan->messageCount; i++) {
            issue(l, &l->conns[0], l->startNs);
        }
        l->issuing = false;
    }
    while (running(l)) {
        loopOnce(l);
    }
    l->failed += inFlight(l) + l->backlogLen;
    if (plan->seconds > 0) {
        summary(l);
    }
    return l->failed == 0 && l->answered > 0 ? 0 : 1;
}
