/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Upgrades passed through (WebSocket, or any protocol a client asks for
 * with Connection: upgrade): the request goes to the upstream with its
 * Upgrade field; an answer other than 101 goes back as any answer does;
 * on a 101 the client gets the 101 with the upstream's end-to-end fields
 * (Sec-WebSocket-Accept...), and the two connections are spliced: bytes
 * are copied each way as they come, and nothing of them is read.
 *
 * The splice is the upgraded request's session (corRequestUpgrade): a
 * coroutine of the client's loop, or a worker in blocking mode. It waits
 * on both sockets at once through an epoll set of its own, whose fd is
 * the one it waits on (corRestWaitFd: the coroutine yields to the loop,
 * a worker polls), so the same source runs in both modes and a stop
 * cancels the wait. Each way has one buffer: what was read from one side
 * is written to the other before that side is read again, so a side
 * whose output is full is not read (backpressure; what the proxy holds
 * is two buffers, whatever the traffic). A side's end is passed on as a
 * shutdown of the other's sending side (half-close) once its buffer went;
 * the splice ends when both ways ended, on an error of either side, and
 * after the group's read_timeout with no byte either way (idle).
 */
#include "corForwardInt.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

/* One way's buffer. */
#define SPLICE_BYTES (64 * 1024)

/* One way of a splice. */
typedef struct {
    CorTransport* from;
    CorTransport* to;
    char* buf;  /* SPLICE_BYTES */
    size_t len; /* read from from */
    size_t off; /* of which written to to */
    bool ended; /* from's end was read */
    bool shut;  /* to's sending side shut after it */
} SplicePipe;

/* A splice: the session's, from the 101 to its end. */
typedef struct {
    ForwardGroup* g;
    ForwardServer* s;
    CorConn* up;  /* the upstream's connection */
    char* upRest; /* what came after the upstream's 101 */
    size_t upRestLen;
} Splice;

const CorHeader*
corForwardUpgradeAsked(const CorRequest* r, const ForwardGroup* g)
{
    const CorHeader* connection = corRequestHeader(r, "connection");
    const CorHeader* upgrade = corRequestHeader(r, "upgrade");

    if (g->http2 || upgrade == NULL || connection == NULL || r->methodLen != 3
        || memcmp(r->method, "GET", 3) != 0
        || !corHeaderListHas(connection, "upgrade", 7)
        || corHeaderListHas(upgrade, "h2c", 3)) {
        return NULL;
    }
    return upgrade;
}

/* ---- The splice ---------------------------------------------------------- */

static bool
wouldBlock(int err)
{
    return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

/* Move what p can now: write what it holds, then read again, until a side
 * would block. Sets *movedP when a byte or an end went. Returns 0, or
 * -errno (a side failed). */
static int
pipePump(SplicePipe* p, bool* movedP)
{
    for (;;) {
        ssize_t n;

        if (p->off < p->len) {
            n = p->to->ops->send(p->to, p->buf + p->off, p->len - p->off);
            if (n < 0) {
                return wouldBlock(errno) ? 0 : -errno;
            }
            p->off += (size_t)n;
            *movedP = true;
            continue;
        }
        p->off = p->len = 0;
        if (p->ended) {
            if (!p->shut) {
                p->shut = true;
                return corTransportShutWrite(p->to);
            }
            return 0;
        }
        n = p->from->ops->recv(p->from, p->buf, SPLICE_BYTES);
        if (n < 0) {
            return wouldBlock(errno) ? 0 : -errno;
        }
        p->len = (size_t)n;
        p->ended = n == 0;
        *movedP = true;
    }
}

/* What t's socket is waited for: its way out's room while that holds
 * bytes, its bytes while its way in is empty and not ended. */
static unsigned
eventsOf(const CorTransport* t, const SplicePipe* in, const SplicePipe* out)
{
    unsigned events = 0;

    if (!in->ended && in->off == in->len) {
        events |= EPOLLIN;
        if (corTransportWantsWrite(t)) {
            events |= EPOLLOUT;
        }
    }
    if (out->off < out->len) {
        events |= EPOLLOUT;
    }
    return events;
}

/* Arm fd in ep for events, when they changed (*armed: the last ones). */
static int
arm(int ep, int fd, unsigned events, unsigned* armed)
{
    struct epoll_event ev = { .events = events, .data.fd = fd };

    if (events == *armed) {
        return 0;
    }
    *armed = events;
    return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0 ? 0 : -errno;
}

/* Copy both ways until both ended, a side failed, the idle timeout or a
 * stop. Returns 0 at a clean end, or -errno. May yield. */
static int
spliceRun(Splice* sp, int ep, SplicePipe* pipes)
{
    CorTransport* sides[2] = { pipes[0].from, pipes[1].from };
    unsigned armed[2] = { 0, 0 };
    short revents;

    for (;;) {
        bool moved = false;
        int rc = 0;

        for (int i = 0; i < 2 && rc == 0; i++) {
            rc = pipePump(&pipes[i], &moved);
        }
        if (rc < 0) {
            return rc;
        }
        if (pipes[0].shut && pipes[1].shut) {
            return 0;
        }
        if (moved
            && (corTransportPending(sides[0])
                || corTransportPending(sides[1]))) {
            continue; /* TLS holds bytes the socket will not say */
        }
        for (int i = 0; i < 2 && rc == 0; i++) {
            rc = arm(ep, sides[i]->fd,
                     eventsOf(sides[i], &pipes[i], &pipes[1 - i]), &armed[i]);
        }
        if (rc < 0) {
            return rc;
        }
        rc = corRestWaitFd(ep, POLLIN, sp->g->readTimeoutMs, &revents);
        if (rc == 0) {
            return -ETIMEDOUT;
        }
        if (rc < 0) {
            return -errno;
        }
        if (revents & POLLNVAL) {
            return -EBADF;
        }
    }
}

/* The session of an upgraded request: the splice, then the end of both
 * connections (the client's is closed by the core when this returns). */
static void
spliceSession(CorUpgraded* u, void* arg)
{
    Splice* sp = arg;
    CorTransport* up = corConnTransport(sp->up);
    SplicePipe pipes[2] = { { .to = up }, { .from = up } };
    const void* rest;
    size_t restLen;
    int ep = -1;
    int rc;

    pipes[0].from = pipes[1].to = corUpgradedTransport(u, sp->g->readTimeoutMs,
                                                       &rest, &restLen, &rc);
    /* What came after each head is the other side's first bytes: either
     * (read past the client's request, past the upstream's 101) may be
     * more than a read. */
    pipes[0].buf = malloc(restLen > SPLICE_BYTES ? restLen : SPLICE_BYTES);
    pipes[1].buf = malloc(sp->upRestLen > SPLICE_BYTES ? sp->upRestLen
                                                       : SPLICE_BYTES);
    if (pipes[0].from == NULL || pipes[0].buf == NULL || pipes[1].buf == NULL) {
        rc = pipes[0].from == NULL ? rc : -ENOMEM;
        goto done;
    }
    if (restLen > 0) {
        memcpy(pipes[0].buf, rest, restLen);
    }
    if (sp->upRestLen > 0) {
        memcpy(pipes[1].buf, sp->upRest, sp->upRestLen);
    }
    pipes[0].len = restLen;
    pipes[1].len = sp->upRestLen;
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0
        || epoll_ctl(ep, EPOLL_CTL_ADD, pipes[0].from->fd,
                     &(struct epoll_event){ .data.fd = pipes[0].from->fd })
        || epoll_ctl(ep, EPOLL_CTL_ADD, up->fd,
                     &(struct epoll_event){ .data.fd = up->fd })) {
        rc = -errno;
        goto done;
    }
    rc = spliceRun(sp, ep, pipes);

done:
    if (rc < 0 && rc != -ECANCELED) {
        corLog(COR_LOG_INFO, "forward %s: upgrade to %s ended: %s", sp->g->name,
               sp->s->url, strerror(-rc));
    }
    if (ep >= 0) {
        corCoLoopClose(ep); /* the loop may still poll it (io_uring) */
    }
    free(pipes[0].buf);
    free(pipes[1].buf);
    corConnClose(sp->up);
    corForwardServerDone(sp->s);
    free(sp->upRest);
    free(sp);
}

/* ---- The 101 ---------------------------------------------------------------
 */

/* The first protocol of the upstream's Upgrade, as a string in r's arena
 * (what the 101 to the client says), or NULL. */
static char*
protocolOf(CorRequest* r, const CorClientResponse* res)
{
    const CorHeader* h = corClientHeader(res, "upgrade");
    size_t len = 0;
    char* out;

    if (h == NULL) {
        return NULL;
    }
    while (len < h->valueLen && h->value[len] != ',' && h->value[len] != ' ') {
        len++;
    }
    out = len > 0 ? corRequestAlloc(r, len + 1) : NULL;
    if (out != NULL) {
        memcpy(out, h->value, len);
        out[len] = '\0';
    }
    return out;
}

bool
corForwardUpgradePass(CorRequest* r, ForwardGroup* g, CorClientStream* x,
                      CorClientResponse* res, ForwardServer* s)
{
    char* protocol = protocolOf(r, res);
    Splice* sp = calloc(1, sizeof(*sp));
    const char* type;
    const void* rest = NULL;
    size_t restLen = 0;

    if (sp == NULL || protocol == NULL
        || corForwardResponseHeaders(r, res, &type) < 0) {
        goto failed;
    }
    sp->g = g;
    sp->s = s;
    sp->up = corClientUpgraded(x, &rest, &restLen);
    sp->upRest = restLen > 0 ? malloc(restLen) : NULL;
    if (sp->up == NULL || (restLen > 0 && sp->upRest == NULL)
        || restLen > SPLICE_BYTES) {
        goto failed;
    }
    if (restLen > 0) {
        memcpy(sp->upRest, rest, restLen);
    }
    sp->upRestLen = restLen;
    if (corRequestUpgrade(r, protocol, spliceSession, sp) != 0) {
        goto failed;
    }
    return true;

failed:
    corLog(COR_LOG_ERROR,
           "forward %s: upstream %s switched to '%s', which "
           "cannot be passed on",
           g->name, s->url, protocol != NULL ? protocol : "(no Upgrade)");
    if (sp != NULL) {
        if (sp->up != NULL) {
            corConnClose(sp->up);
        }
        free(sp->upRest);
        free(sp);
    }
    corRespondStatic(r, 502, "text/plain", "no upstream answered\n", 21);
    return false;
}
