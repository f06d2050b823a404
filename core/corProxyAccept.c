/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A listener with `proxy_protocol: on` hears a PROXY header (v1 or v2)
 * first on each connection, before TLS and before the protocol's first
 * byte. It is read here, in the core, on the loop the connection was
 * dealt to, before the protocol's open is called: so every protocol (HTTP,
 * HTTP/2, cor://) gets the header's source as the connection's peer and
 * none of them knows of it, and a TLS listener's handshake starts on the
 * bytes after it.
 *
 * Not one byte past the header is read: what follows belongs to the
 * protocol (a ClientHello, a request) and the protocol reads it from the
 * socket. Up to COR_PROXY_MIN bytes are read blind, since no header is
 * shorter; then v2's length says how much more, and v1's line is peeked
 * (MSG_PEEK) for its end and read up to it. Every byte peeked is the
 * header's or stays in the socket, so a level-triggered watch never wakes
 * for bytes already seen.
 *
 * A connection that sends no valid header within limits.request_timeout,
 * sends anything else first (its first byte tells), or closes, is closed
 * and counted (cor_proxy_protocol_refused_total), as nginx and HAProxy
 * refuse such a connection. One still waiting when its loop's acceptor
 * stops (a drain, a stop) is closed then: it holds no request yet.
 */
#include "corCoreInt.h"
#include "corProxyHeader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* A connection whose header is on its way; owned by its loop. */
typedef struct {
    CorEvIo io;
    CorEvTimer timer;
    CorList link; /* in its loop's waiting */
    CorEvLoop* loop;
    CorAcceptFn open;
    unsigned index;
    const CorListener* l;
    int fd;
    struct sockaddr_storage peer;
    size_t got;                     /* bytes of the header read */
    long total;                     /* v2's whole length; 0 until known */
    uint8_t buf[COR_PROXY_V2_KEEP]; /* what is kept of them */
} ProxyWait;

typedef enum {
    STEP_WAIT,
    STEP_DONE,
    STEP_INVALID, /* no header, or a malformed one */
    STEP_CLOSED   /* the peer's end, or an error */
} Step;

/* The connections of this thread's loop whose header has not come. */
static __thread CorList waiting;

static void
waitEnd(ProxyWait* w)
{
    corEvIoStop(w->loop, &w->io);
    corEvTimerStop(w->loop, &w->timer);
    corListRemove(&w->link);
}

static void
refuse(ProxyWait* w, CorProxyRefusal why)
{
    waitEnd(w);
    corMetricsProxyRefused(why);
    close(w->fd);
    corAcceptClosed();
    free(w);
}

/* recv into what is kept, or a scrap past it (a v2 header's long TLVs).
 * Returns what came, 0 at the peer's end, -1 with errno. */
static ssize_t
take(ProxyWait* w, size_t want, int flags)
{
    uint8_t scrap[512];
    uint8_t* to = w->got < sizeof(w->buf) ? w->buf + w->got : scrap;
    size_t room = w->got < sizeof(w->buf) ? sizeof(w->buf) - w->got
                                          : sizeof(scrap);
    ssize_t n;

    do {
        n = recv(w->fd, to, want < room ? want : room, flags);
    } while (n < 0 && errno == EINTR);
    return n;
}

/* v1: peek for the line's end, read up to it. */
static ssize_t
takeLine(ProxyWait* w)
{
    ssize_t n = take(w, COR_PROXY_V1_MAX - w->got, MSG_PEEK);
    uint8_t* lf;

    if (n <= 0) {
        return n;
    }
    lf = memchr(w->buf + w->got, '\n', (size_t)n);
    return take(w,
                lf != NULL ? (size_t)(lf - (w->buf + w->got)) + 1 : (size_t)n,
                0);
}

/* Read what may be read of the header. */
static Step
readStep(ProxyWait* w)
{
    for (;;) {
        ssize_t n;

        if (w->got < COR_PROXY_MIN) {
            n = take(w, COR_PROXY_MIN - w->got, 0);
        } else if (corProxyIsV1(w->buf)) {
            n = takeLine(w);
        } else if (w->got < COR_PROXY_V2_FIXED) {
            n = take(w, COR_PROXY_V2_FIXED - w->got, 0);
        } else {
            n = take(w, (size_t)(w->total - (long)w->got), 0);
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return STEP_WAIT;
        }
        if (n <= 0) {
            return STEP_CLOSED;
        }
        w->got += (size_t)n;
        if (!corProxyPrefix(w->buf, w->got)) {
            return STEP_INVALID;
        }
        if (corProxyIsV1(w->buf) && w->got >= COR_PROXY_MIN) {
            /* The shortest line ends at the blind read's last byte. */
            if (memchr(w->buf, '\n', w->got) != NULL) {
                return STEP_DONE;
            }
            if (w->got >= COR_PROXY_V1_MAX) {
                return STEP_INVALID;
            }
            continue;
        }
        if (w->got == COR_PROXY_V2_FIXED && w->total == 0) {
            w->total = corProxyV2Length(w->buf);
            if (w->total < 0) {
                return STEP_INVALID;
            }
        }
        if (w->total > 0 && (long)w->got == w->total) {
            return STEP_DONE;
        }
    }
}

/* The header whole: its source, or the connection's own, to the
 * protocol. */
static void
headerDone(ProxyWait* w)
{
    struct sockaddr_storage src;
    size_t kept = w->got < sizeof(w->buf) ? w->got : sizeof(w->buf);
    int rc = corProxyIsV1(w->buf) ? corProxyV1Parse(w->buf, kept, &src)
                                  : corProxyV2Parse(w->buf, kept, &src);

    if (rc != 0) {
        refuse(w, COR_PROXY_INVALID);
        return;
    }
    waitEnd(w);
    w->open(w->index, w->l, w->fd,
            src.ss_family != AF_UNSPEC ? &src : &w->peer);
    free(w);
}

static void
step(ProxyWait* w)
{
    switch (readStep(w)) {
    case STEP_WAIT:
        break;
    case STEP_DONE:
        headerDone(w);
        break;
    case STEP_INVALID:
        refuse(w, COR_PROXY_INVALID);
        break;
    case STEP_CLOSED:
        refuse(w, COR_PROXY_CLOSED);
        break;
    }
}

static void
onReadable(CorEvIo* io, unsigned events)
{
    (void)events;
    step(corContainerOf(io, ProxyWait, io));
}

static void
onExpired(CorEvTimer* timer)
{
    refuse(corContainerOf(timer, ProxyWait, timer), COR_PROXY_TIMEOUT);
}

void
corProxyAcceptStart(CorEvLoop* loop, CorAcceptFn open, unsigned index,
                    const CorListener* l, int fd,
                    const struct sockaddr_storage* peer)
{
    ProxyWait* w = calloc(1, sizeof(*w));

    if (w == NULL) {
        close(fd);
        corAcceptClosed();
        return;
    }
    *w = (ProxyWait){ .loop = loop,
                      .open = open,
                      .index = index,
                      .l = l,
                      .fd = fd,
                      .peer = *peer };
    if (corEvIoStart(loop, &w->io, fd, EPOLLIN, onReadable) != 0) {
        close(fd);
        corAcceptClosed();
        free(w);
        return;
    }
    corListAppend(&waiting, &w->link);
    corEvTimerStart(loop, &w->timer, corLimits()->requestTimeoutMs, onExpired);
    /* The header often comes with the connection: read it now. */
    step(w);
}

void
corProxyAcceptStop(CorAcceptFn open)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &waiting)
    {
        ProxyWait* w = corContainerOf(node, ProxyWait, link);

        if (w->open == open) {
            refuse(w, COR_PROXY_CLOSED);
        }
    }
}
