/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor of a proxy: the least work any proxy does for the forward
 * benchmark on this kernel. Each client is paired with a connection of its
 * own to the upstream, and bytes are copied both ways without a look at
 * them: no parsing, no pool, no timers, no headers added. What it still
 * pays, a read and a write on each side per exchange and the loopback TCP
 * path behind them, every proxy pays. bench/forwardBench runs it beside
 * cor and nginx so that their figures read against what is left to win.
 *
 * Usage: relayPeer PORT UPSTREAM_PORT   (one epoll loop, edge-triggered)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_BYTES 16384

typedef struct Pair Pair;

/* One socket of a pair and the bytes read from it, still to go out on
 * the other. */
typedef struct Side {
    int fd;
    struct Side* peer;
    Pair* pair;
    size_t off;
    size_t len;
    bool drained; /* its last read was short: wait for IN */
    char buf[BUF_BYTES];
} Side;

struct Pair {
    Side client;
    Side upstream;
    bool closed;
    Pair* nextDead;
};

static struct sockaddr_in upstreamAddr;
static Pair* dead; /* closed in this batch, freed after it */

static void
pairClose(Pair* p)
{
    if (p->closed) {
        return;
    }
    p->closed = true;
    close(p->client.fd);
    close(p->upstream.fd);
    p->nextDead = dead;
    dead = p;
}

/* Move what s reads to its peer until one of them would block. */
static void
pump(Side* s)
{
    for (;;) {
        ssize_t n;

        if (s->off < s->len) {
            n = write(s->peer->fd, s->buf + s->off, s->len - s->off);
            if (n < 0 && (errno == EAGAIN || errno == ENOTCONN)) {
                return; /* the peer's OUT edge goes on */
            }
            if (n <= 0) {
                pairClose(s->pair);
                return;
            }
            s->off += (size_t)n;
            continue;
        }
        if (s->drained) {
            return;
        }
        n = read(s->fd, s->buf, sizeof(s->buf));
        if (n < 0 && errno == EAGAIN) {
            s->drained = true;
            return;
        }
        if (n <= 0) {
            pairClose(s->pair);
            return;
        }
        s->off = 0;
        s->len = (size_t)n;
        s->drained = (size_t)n < sizeof(s->buf);
    }
}

static void
sideAdd(int epfd, Side* s, int fd, Side* peer, Pair* p)
{
    int one = 1;

    s->fd = fd;
    s->peer = peer;
    s->pair = p;
    s->drained = true;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    epoll_ctl(epfd, EPOLL_CTL_ADD, fd,
              &(struct epoll_event){ .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP
                                               | EPOLLET,
                                     .data.ptr = s });
}

static void
pairOpen(int epfd, int cfd)
{
    int ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    Pair* p = malloc(sizeof(*p));

    if (p == NULL || ufd < 0
        || (connect(ufd, (struct sockaddr*)&upstreamAddr, sizeof(upstreamAddr))
                != 0
            && errno != EINPROGRESS)) {
        free(p);
        close(cfd);
        if (ufd >= 0) {
            close(ufd);
        }
        return;
    }
    memset(p, 0, sizeof(*p));
    sideAdd(epfd, &p->client, cfd, &p->upstream, p);
    sideAdd(epfd, &p->upstream, ufd, &p->client, p);
}

static int
listenOn(int port)
{
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int one = 1;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr*)&addr, sizeof(addr)) != 0
        || listen(lfd, 4096) != 0) {
        perror("relayPeer: listen");
        exit(1);
    }
    return lfd;
}

int
main(int argc, char** argv)
{
    static Side listener;
    struct epoll_event events[256];
    int port = argc > 2 ? atoi(argv[1]) : 0;
    int upstreamPort = argc > 2 ? atoi(argv[2]) : 0;
    int epfd = epoll_create1(0);

    if (port <= 0 || upstreamPort <= 0) {
        fprintf(stderr, "usage: relayPeer PORT UPSTREAM_PORT\n");
        return 2;
    }
    upstreamAddr = (struct sockaddr_in){
        .sin_family = AF_INET,
        .sin_port = htons((uint16_t)upstreamPort),
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)
    };
    listener.fd = listenOn(port);
    epoll_ctl(epfd, EPOLL_CTL_ADD, listener.fd,
              &(struct epoll_event){ .events = EPOLLIN,
                                     .data.ptr = &listener });
    for (;;) {
        int n = epoll_wait(epfd, events, 256, -1);

        for (int i = 0; i < n; i++) {
            Side* s = events[i].data.ptr;
            int cfd;

            if (s == &listener) {
                while ((cfd = accept4(listener.fd, NULL, NULL, SOCK_NONBLOCK))
                       >= 0) {
                    pairOpen(epfd, cfd);
                }
                continue;
            }
            if (s->pair->closed) {
                continue;
            }
            if (events[i].events & EPOLLOUT) {
                pump(s->peer); /* what waited for room on s */
            }
            if (!s->pair->closed
                && (events[i].events
                    & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
                s->drained = false;
                pump(s);
            }
        }
        while (dead != NULL) {
            Pair* p = dead;

            dead = p->nextDead;
            free(p);
        }
    }
}
