/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor: the least work an HTTP/1.1 server can do for the hello
 * benchmark on this kernel. It parses nothing, keeps no timers and sends
 * a canned answer for each blank line it sees; what it still pays, one
 * read and one write per request and the loopback TCP path behind them,
 * every server pays. bench/httpBench runs it beside cor and nginx so that
 * their figures read against what the kernel leaves to win.
 *
 * Usage: floorPeer PORT [THREADS]   (one epoll loop and SO_REUSEPORT
 * socket per thread, as cor's `accept: reuseport`)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* cor's answer, byte for byte in length. */
static const char answer[] =
    "HTTP/1.1 200 OK\r\nServer: cor\r\n"
    "Date: Sun, 29 Nov 2026 20:00:00 GMT\r\n"
    "Content-Length: 13\r\nContent-Type: text/plain\r\n\r\nhello, world\n";
#define ANSWER_LEN (sizeof(answer) - 1)
#define MAX_BATCH 64

static char answers[ANSWER_LEN * MAX_BATCH];
static int port;

/* Per connection: how much of "\r\n\r\n" the last read ended in. */
static unsigned char matched[65536];

static unsigned
countHeadEnds(int fd, const char* p, size_t n)
{
    static const char end[] = "\r\n\r\n";
    unsigned heads = 0;
    unsigned m = matched[fd];

    for (size_t i = 0; i < n; i++) {
        m = p[i] == end[m] ? m + 1 : (p[i] == '\r' ? 1 : 0);
        if (m == 4) {
            heads++;
            m = 0;
        }
    }
    matched[fd] = (unsigned char)m;
    return heads;
}

static void
sendAll(int fd, size_t len)
{
    size_t sent = 0;

    while (sent < len) {
        ssize_t n = write(fd, answers + sent % ANSWER_LEN, len - sent);

        if (n > 0) {
            sent += (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };

            poll(&pfd, 1, -1); /* a floor, not a server: just wait */
        } else {
            return;
        }
    }
}

static void
serve(int fd)
{
    char buf[16384];

    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        unsigned heads;

        if (n <= 0) {
            if (n == 0 || errno != EAGAIN) {
                close(fd);
            }
            return;
        }
        heads = countHeadEnds(fd, buf, (size_t)n);
        while (heads > 0) {
            unsigned batch = heads < MAX_BATCH ? heads : MAX_BATCH;

            sendAll(fd, batch * ANSWER_LEN);
            heads -= batch;
        }
        if ((size_t)n < sizeof(buf)) {
            return;
        }
    }
}

static void*
loop(void* arg)
{
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct epoll_event events[256];
    int one = 1;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int epfd = epoll_create1(0);

    (void)arg;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr*)&addr, sizeof(addr)) != 0
        || listen(lfd, 4096) != 0) {
        perror("floorPeer: listen");
        exit(1);
    }
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd,
              &(struct epoll_event){ .events = EPOLLIN, .data.fd = lfd });
    for (;;) {
        int n = epoll_wait(epfd, events, 256, -1);

        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            int cfd;

            if (fd != lfd) {
                serve(fd);
                continue;
            }
            while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                if (cfd >= (int)sizeof(matched)) {
                    close(cfd);
                    continue;
                }
                matched[cfd] = 0;
                setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                epoll_ctl(epfd, EPOLL_CTL_ADD, cfd,
                          &(struct epoll_event){ .events = EPOLLIN | EPOLLET,
                                                 .data.fd = cfd });
            }
        }
    }
    return NULL;
}

int
main(int argc, char** argv)
{
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    pthread_t tid;

    if (argc < 2 || (port = atoi(argv[1])) <= 0 || threads < 1) {
        fprintf(stderr, "usage: floorPeer PORT [THREADS]\n");
        return 2;
    }
    for (size_t i = 0; i < MAX_BATCH; i++) {
        memcpy(answers + i * ANSWER_LEN, answer, ANSWER_LEN);
    }
    for (int i = 1; i < threads; i++) {
        pthread_create(&tid, NULL, loop, NULL);
    }
    loop(NULL);
}
