/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Accepting. By default loop 0 accepts every connection and deals them out
 * to the loops in turn (corHttpAcceptShare): the kernel's SO_REUSEPORT hash
 * spreads a handful of connections unevenly, dealing spreads them exactly.
 * A connection belongs to the loop it was dealt to for its life; it
 * crosses over once, as a task posted to that loop. With `accept:
 * reuseport` each loop accepts on a socket of its own instead.
 *
 * Past limits.connections a new connection is closed at once and counted.
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
#include "corHttpInt.h"

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#define ACCEPTS_PER_EVENT 64
#define ACCEPT_PAUSE_MS 100
#define FD_LIMIT_REPORT_MS 1000

atomic_uint httpConnTotal;

/* A connection on its way to another loop. */
typedef struct {
    CorEvTask task;
    HttpLoop* hl;
    const CorListener* l;
    int fd;
    struct sockaddr_storage peer;
} Handoff;

static unsigned nextLoop;
/* Failures at the fd limit since the last report, and when that was. */
static atomic_ulong fdLimitHits;
static _Atomic uint64_t fdLimitReportedMs;

static void
handoffArrive(CorEvTask* task)
{
    Handoff* h = corContainerOf(task, Handoff, task);

    httpConnOpen(h->hl, h->l, h->fd, &h->peer);
    free(h);
}

/* Deal a connection to the next loop in turn. */
static void
corHttpAcceptShare(HttpLoop* self, const CorListener* l, int fd,
                   const struct sockaddr_storage* peer)
{
    unsigned count = corLoopCount();
    HttpLoop* target = httpLoopAt(nextLoop++ % count);
    Handoff* h;

    if (target == self) {
        httpConnOpen(self, l, fd, peer);
        return;
    }
    h = malloc(sizeof(*h));
    if (h == NULL) {
        close(fd);
        atomic_fetch_sub(&httpConnTotal, 1);
        return;
    }
    h->hl = target;
    h->l = l;
    h->fd = fd;
    h->peer = *peer;
    corEvLoopPost(target->loop, &h->task, handoffArrive);
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
    corLog(COR_LOG_ERROR, "accept: %s: %lu time%s since the last report; "
           "accepting pauses %d ms each time (raise the fd limit, ulimit "
           "-n, or lower limits.connections)", strerror(err), hits,
           hits == 1 ? "" : "s", ACCEPT_PAUSE_MS);
}

static void onAccept(CorEvIo* io, unsigned events);

static void
acceptResume(CorEvTimer* timer)
{
    HttpAccept* a = corContainerOf(timer, HttpAccept, resume);

    a->paused = false;
    if (corEvIoStart(a->hl->loop, &a->io, a->io.fd, EPOLLIN, onAccept)
        != 0) {
        corLog(COR_LOG_ERROR, "http: cannot watch a listener again on loop "
               "%u", a->hl->index);
    }
}

static void
acceptPause(HttpAccept* a, int err)
{
    fdLimitReport(err);
    a->paused = true;
    corEvIoStop(a->hl->loop, &a->io);
    corEvTimerStart(a->hl->loop, &a->resume, ACCEPT_PAUSE_MS, acceptResume);
}

static void
onAccept(CorEvIo* io, unsigned events)
{
    HttpAccept* a = corContainerOf(io, HttpAccept, io);
    unsigned limit = corLimits()->connections;

    (void)events;
    for (int i = 0; i < ACCEPTS_PER_EVENT; i++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        int fd = accept4(io->fd, (struct sockaddr*)&peer, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                acceptPause(a, errno);
            }
            return;     /* EAGAIN: the backlog is empty */
        }
        if (atomic_fetch_add(&httpConnTotal, 1) >= limit) {
            atomic_fetch_sub(&httpConnTotal, 1);
            corMetricsConnectionRefused();
            close(fd);
            continue;
        }
        if (a->reusePort) {
            httpConnOpen(a->hl, a->l, fd, &peer);
        } else {
            corHttpAcceptShare(a->hl, a->l, fd, &peer);
        }
    }
}

int
httpAcceptStart(HttpLoop* hl, CorListener* const* listeners, unsigned count)
{
    unsigned mine = 0;

    hl->accepts = calloc(count, sizeof(*hl->accepts));
    if (hl->accepts == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < count; i++) {
        const CorListener* l = listeners[i];
        bool reusePort = corListenerReusePort(l);

        /* Shared: loop 0 accepts for all. Reuseport: every loop. */
        if (!reusePort && hl->index != 0) {
            continue;
        }
        hl->accepts[mine].hl = hl;
        hl->accepts[mine].l = l;
        hl->accepts[mine].reusePort = reusePort;
        if (corEvIoStart(hl->loop, &hl->accepts[mine].io,
                         corListenerFd(l, hl->index), EPOLLIN, onAccept)
            != 0) {
            corLog(COR_LOG_ERROR, "http: cannot watch %s on loop %u",
                   corListenerAddress(l), hl->index);
            return -1;
        }
        mine++;
    }
    hl->acceptCount = mine;
    return 0;
}

void
httpAcceptStop(HttpLoop* hl)
{
    for (unsigned i = 0; i < hl->acceptCount; i++) {
        HttpAccept* a = &hl->accepts[i];

        /* A paused one is stopped already, and must not resume. */
        corEvTimerStop(hl->loop, &a->resume);
        if (!a->paused) {
            corEvIoStop(hl->loop, &a->io);
        }
    }
    hl->acceptCount = 0;
}
