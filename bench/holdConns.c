/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client of bench/memBench: opens COUNT connections to 127.0.0.1:PORT,
 * sends one `GET PATH` on each and then holds them all open, so that the
 * server's resident memory can be read with COUNT connections in a known
 * state. With `answer`, it reads each answer (a 200 with a Content-Length)
 * before opening the next connection: the connections are then idle
 * keep-alive connections. With `wait`, it reads nothing: each connection
 * has its request in flight.
 *
 * Once every connection is open and its request written (and, with
 * `answer`, answered), it prints "held COUNT" and waits for a signal. The
 * sockets linger with a zero timeout, so that the exit resets them and
 * leaves no TIME_WAIT behind to exhaust the ports of the next round.
 *
 * Usage: holdConns PORT COUNT PATH answer|wait
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room for one answer's head and its small body. */
enum { ANSWER_MAX = 4096 };

static void
raiseFileLimit(long count)
{
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0
        && (rlim_t)count + 16 > limit.rlim_cur) {
        fprintf(stderr,
                "holdConns: %ld connections need more than the %lu "
                "open files this process may have\n",
                count, (unsigned long)limit.rlim_cur);
        exit(1);
    }
}

static int
connectTo(int port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET,
                              .sin_port = htons((unsigned short)port) };
    struct linger reset = { .l_onoff = 1, .l_linger = 0 };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0) {
        perror("holdConns: socket");
        exit(1);
    }
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    if (connect(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0) {
        perror("holdConns: connect");
        exit(1);
    }
    return fd;
}

static void
writeAll(int fd, const char* data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            perror("holdConns: write");
            exit(1);
        }
        data += n;
        len -= (size_t)n;
    }
}

/* Whether buf holds a whole answer: a head and Content-Length bytes. */
static bool
answerComplete(const char* buf, size_t len)
{
    const char* end = strstr(buf, "\r\n\r\n");
    const char* field;
    long body = 0;

    if (end == NULL) {
        return false;
    }
    field = strcasestr(buf, "\r\nContent-Length:");
    if (field != NULL && field < end) {
        body = atol(field + 17);
    }
    return (size_t)(end + 4 - buf) + (size_t)body <= len;
}

static void
readAnswer(int fd, long index)
{
    char buf[ANSWER_MAX + 1];
    size_t len = 0;

    while (len < ANSWER_MAX) {
        ssize_t n = read(fd, buf + len, ANSWER_MAX - len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            fprintf(stderr,
                    "holdConns: connection %ld: %s before the "
                    "answer ended\n",
                    index, n == 0 ? "closed" : strerror(errno));
            exit(1);
        }
        len += (size_t)n;
        buf[len] = '\0';
        if (answerComplete(buf, len)) {
            break;
        }
    }
    if (strncmp(buf, "HTTP/1.1 200 ", 13) != 0) {
        fprintf(stderr, "holdConns: connection %ld: answered %.40s\n", index,
                buf);
        exit(1);
    }
}

int
main(int argc, char** argv)
{
    char request[512];
    int requestLen;
    long count;
    int port;
    bool answer;

    if (argc != 5
        || (strcmp(argv[4], "answer") != 0 && strcmp(argv[4], "wait") != 0)) {
        fprintf(stderr, "usage: holdConns PORT COUNT PATH answer|wait\n");
        return 2;
    }
    port = atoi(argv[1]);
    count = atol(argv[2]);
    answer = strcmp(argv[4], "answer") == 0;
    requestLen = snprintf(request, sizeof(request),
                          "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                          argv[3]);
    if (requestLen <= 0 || (size_t)requestLen >= sizeof(request)) {
        fprintf(stderr, "holdConns: path too long\n");
        return 2;
    }
    raiseFileLimit(count);
    for (long i = 0; i < count; i++) {
        int fd = connectTo(port);

        writeAll(fd, request, (size_t)requestLen);
        if (answer) {
            readAnswer(fd, i);
        }
    }
    printf("held %ld\n", count);
    fflush(stdout);
    for (;;) {
        pause();
    }
}
