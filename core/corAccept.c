/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Accepting, for every protocol module (HTTP, cor://): one acceptor per
 * loop and protocol. By default loop 0 accepts every connection and deals
 * them out to the loops in turn: the kernel's SO_REUSEPORT hash spreads a
 * handful of connections unevenly, dealing spreads them exactly. A
 * connection belongs to the loop it was dealt to for its life; it crosses
 * over once, as a task posted to that loop. With `accept: reuseport` each
 * loop accepts on a socket of its own instead.
 *
 * Past limits.connections (all protocols together) a new connection is
 * closed at once and counted.
 *
 * At the fd limit (EMFILE, ENFILE) the listener is not watched for
 * ACCEPT_PAUSE_MS, as nginx does: accept would fail again at once, and the
 * level-triggered listener would spin a core and flood the log. The
 * clients wait in the backlog meanwhile and are served as fds come free.
 * The other cure, a spare fd closed to accept and close one connection,
 * was rejected: it turns away a client that a moment later could have
 * been served, and with several loops another thread's open() can take
 * the freed fd first. Each failure is counted (/metrics) and reported at
 * most once a second, with how many there were.
 */
#include "cor.h"
#include "corCoreInt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define ACCEPTS_PER_EVENT 64
#define ACCEPT_PAUSE_MS 100
#define FD_LIMIT_REPORT_MS 1000

/* One listener a loop accepts on. */
typedef struct {
    CorEvIo io;
    CorAccept* owner;
    const CorListener* l;
    bool reusePort; /* accept for this loop only */
    bool paused;    /* at the fd limit: io stopped, timer on */
    CorEvTimer resume;
} Listening;

/* A loop's acceptor for one protocol; owned by that loop. */
struct CorAccept {
    CorEvLoop* loop;
    unsigned index;
    CorAcceptFn open;
    unsigned nextLoop; /* where the next shared one is dealt */
    unsigned count;
    Listening listening[];
};

/* A connection on its way to another loop. */
typedef struct {
    CorEvTask task;
    CorAcceptFn open;
    unsigned index;
    const CorListener* l;
    int fd;
    struct sockaddr_storage peer;
} Handoff;

/* Connections of every protocol, against limits.connections. */
static atomic_uint connTotal;
/* Failures at the fd limit since the last report, and when that was. */
static atomic_ulong fdLimitHits;
static _Atomic uint64_t fdLimitReportedMs;

/* A connection on the loop it was dealt to: to its protocol, or first
 * through its PROXY header on a listener that asks for one. */
static void
opened(CorEvLoop* loop, CorAcceptFn open, unsigned index, const CorListener* l,
       int fd, const struct sockaddr_storage* peer)
{
    if (l->proxyProtocol) {
        corProxyAcceptStart(loop, open, index, l, fd, peer);
    } else {
        open(index, l, fd, peer);
    }
}

static void
handoffArrive(CorEvTask* task)
{
    Handoff* h = corContainerOf(task, Handoff, task);

    opened(corLoopAt(h->index), h->open, h->index, h->l, h->fd, &h->peer);
    free(h);
}

/* Deal a connection to the next loop in turn. */
static void
acceptShare(CorAccept* a, const CorListener* l, int fd,
            const struct sockaddr_storage* peer)
{
    unsigned index = a->nextLoop++ % corLoopCount();
    Handoff* h;

    if (index == a->index) {
        opened(a->loop, a->open, index, l, fd, peer);
        return;
    }
    h = malloc(sizeof(*h));
    if (h == NULL) {
        close(fd);
        corAcceptClosed();
        return;
    }
    *h = (Handoff){
        .open = a->open, .index = index, .l = l, .fd = fd, .peer = *peer
    };
    corEvLoopPost(corLoopAt(index), &h->task, handoffArrive);
}

/* Count one failure at the fd limit; report once a second at most, from
 * whichever loop gets there first. */
static void
fdLimitReport(int err)
{
    uint64_t now = corEvClockMs();
    uint64_t last = atomic_load(&fdLimitReportedMs);
    unsigned long hits;

    corMetricsAcceptFdLimit();
    atomic_fetch_add(&fdLimitHits, 1);
    if ((last != 0 && now - last < FD_LIMIT_REPORT_MS)
        || !atomic_compare_exchange_strong(&fdLimitReportedMs, &last, now)) {
        return;
    }
    hits = atomic_exchange(&fdLimitHits, 0);
    corLog(COR_LOG_ERROR,
           "accept: %s: %lu time%s since the last report; "
           "accepting pauses %d ms each time (raise the fd limit, ulimit "
           "-n, or lower limits.connections)",
           strerror(err), hits, hits == 1 ? "" : "s", ACCEPT_PAUSE_MS);
}

static void onAccept(CorEvIo* io, unsigned events);

static void
acceptResume(CorEvTimer* timer)
{
    Listening* ls = corContainerOf(timer, Listening, resume);
    CorAccept* a = ls->owner;

    ls->paused = false;
    if (corEvIoStart(a->loop, &ls->io, ls->io.fd, EPOLLIN, onAccept) != 0) {
        corLog(COR_LOG_ERROR, "accept: cannot watch %s again on loop %u",
               corListenerAddress(ls->l), a->index);
    }
}

static void
acceptPause(Listening* ls, int err)
{
    fdLimitReport(err);
    ls->paused = true;
    corEvIoStop(ls->owner->loop, &ls->io);
    corEvTimerStart(ls->owner->loop, &ls->resume, ACCEPT_PAUSE_MS,
                    acceptResume);
}

static void
onAccept(CorEvIo* io, unsigned events)
{
    Listening* ls = corContainerOf(io, Listening, io);

    (void)events;
    for (int i = 0; i < ACCEPTS_PER_EVENT; i++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        int fd = accept4(io->fd, (struct sockaddr*)&peer, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                acceptPause(ls, errno);
            }
            return; /* EAGAIN: the backlog is empty */
        }
        if (!corAcceptAdmit()) {
            close(fd);
            continue;
        }
        if (ls->reusePort) {
            opened(ls->owner->loop, ls->owner->open, ls->owner->index, ls->l,
                   fd, &peer);
        } else {
            acceptShare(ls->owner, ls->l, fd, &peer);
        }
    }
}

CorAccept*
corAcceptStart(CorEvLoop* loop, unsigned index, CorListener* const* listeners,
               unsigned count, CorAcceptFn open)
{
    CorAccept* a = calloc(1, sizeof(*a) + count * sizeof(Listening));

    if (a == NULL) {
        corLog(COR_LOG_ERROR, "accept: no memory on loop %u", index);
        return NULL;
    }
    *a = (CorAccept){ .loop = loop, .index = index, .open = open };
    for (unsigned i = 0; i < count; i++) {
        Listening* ls = &a->listening[a->count];
        bool reusePort = corListenerReusePort(listeners[i]);

        /* Shared: loop 0 accepts for all. Reuseport: every loop. */
        if (!reusePort && index != 0) {
            continue;
        }
        *ls = (Listening){ .owner = a,
                           .l = listeners[i],
                           .reusePort = reusePort };
        if (corEvIoStart(loop, &ls->io, corListenerFd(listeners[i], index),
                         EPOLLIN, onAccept)
            != 0) {
            corLog(COR_LOG_ERROR, "accept: cannot watch %s on loop %u",
                   corListenerAddress(listeners[i]), index);
            corAcceptStop(a);
            return NULL;
        }
        a->count++;
    }
    return a;
}

void
corAcceptStop(CorAccept* a)
{
    if (a == NULL) {
        return;
    }
    corProxyAcceptStop(a->open);
    for (unsigned i = 0; i < a->count; i++) {
        Listening* ls = &a->listening[i];

        /* A paused one is stopped already, and must not resume. */
        corEvTimerStop(a->loop, &ls->resume);
        if (!ls->paused) {
            corEvIoStop(a->loop, &ls->io);
        }
    }
    free(a);
}

bool
corAcceptAdmit(void)
{
    if (atomic_fetch_add(&connTotal, 1) >= corLimits()->connections) {
        atomic_fetch_sub(&connTotal, 1);
        corMetricsConnectionRefused();
        return false;
    }
    return true;
}

void
corAcceptClosed(void)
{
    atomic_fetch_sub(&connTotal, 1);
}

int
corAcceptTransport(const CorListener* l, CorTransport* t, int fd)
{
    int one = 1;

    if (t == NULL || corListenerTransport(l, t, fd) != 0) {
        close(fd);
        corAcceptClosed();
        return -1;
    }
    /* Answers are written whole: none waits for more to coalesce. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return 0;
}

void
corPeerAddress(const struct sockaddr_storage* peer, char* out, size_t size)
{
    const void* addr =
        peer->ss_family == AF_INET6
            ? (const void*)&((const struct sockaddr_in6*)peer)->sin6_addr
            : (const void*)&((const struct sockaddr_in*)peer)->sin_addr;

    if (inet_ntop(peer->ss_family == AF_INET6 ? AF_INET6 : AF_INET, addr, out,
                  (socklen_t)size)
            == NULL
        && size > 0) {
        out[0] = '\0';
    }
}

void
corPeerName(const struct sockaddr_storage* peer, char* out, size_t size)
{
    char addr[INET6_ADDRSTRLEN];
    in_port_t port =
        peer->ss_family == AF_INET6
            ? ((const struct sockaddr_in6*)(const void*)peer)->sin6_port
            : ((const struct sockaddr_in*)(const void*)peer)->sin_port;

    corPeerAddress(peer, addr, sizeof(addr));
    snprintf(out, size, "%s:%u", addr, (unsigned)ntohs(port));
}
