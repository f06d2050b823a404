/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP Upgrade hand-off, against the real binary: a handler answers
 * 101 and takes the connection (testkit's raw echo session); the bytes
 * that came with the request, pipelined requests included, are the new
 * protocol's; requests that may not be upgraded are refused; a stop with
 * upgraded connections open is prompt; the HTTP server no longer counts
 * them.
 */
#include "corTest.h"
#include "corServer.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static CorServer server;

#define ROUTES                                                                 \
    "routes:\n"                                                                \
    "  - { match: \"/up\", handler: upgrade }\n"                               \
    "  - { match: \"/upinline\", handler: upgradeinline }\n"                   \
    "  - { match: \"GET /hello\", handler: hello }\n"                          \
    "  - { match: \"GET /metrics\", handler: metrics }\n"

static void
startServer(void)
{
    ck_assert_int_eq(
        corServerStartListen(&server, false, NULL,
                             "modules:\n"
                             "  - { load: http }\n"
                             "  - { load: hello }\n"
                             "  - { load: {MODULES}/testkit.so }\n" ROUTES
                             "log: { pid_file: {DIR}/cor.pid }\n"),
        0);
}

static void
tearDown(void)
{
    corServerStop(&server);
}

/* Read until want bytes came (or the peer closed, or 3 s passed). */
static size_t
readExactly(int fd, char* buf, size_t want)
{
    size_t got = 0;

    while (got < want) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t n;

        if (poll(&p, 1, 3000) <= 0) {
            break;
        }
        n = recv(fd, buf + got, want - got, 0);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    return got;
}

/* Read a response head (to its blank line) into buf. */
static size_t
readHead(int fd, char* buf, size_t cap)
{
    size_t got = 0;

    while (got + 1 < cap) {
        if (readExactly(fd, buf + got, 1) != 1) {
            break;
        }
        got++;
        if (got >= 4 && memcmp(buf + got - 4, "\r\n\r\n", 4) == 0) {
            break;
        }
    }
    buf[got] = '\0';
    return got;
}

/* An upgraded connection on fd (its 101 read); the head's text in head. */
static int
upgraded(const char* path, const char* extra, char* head, size_t cap)
{
    char request[512];
    int fd = corConnect(server.port);

    ck_assert_int_ge(fd, 0);
    snprintf(request, sizeof(request),
             "GET %s HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, "
             "Upgrade\r\nUpgrade: echo\r\n\r\n%s",
             path, extra);
    ck_assert_int_eq(corSendAll(fd, request, strlen(request)), 0);
    readHead(fd, head, cap);
    ck_assert_msg(strncmp(head, "HTTP/1.1 101 ", 13) == 0, "%s", head);
    return fd;
}

START_TEST(test_an_upgraded_connection_echoes)
{
    const char* paths[] = { "/up", "/upinline" };
    char head[1024];
    char buf[256];

    startServer();
    for (unsigned i = 0; i < 2; i++) {
        int fd = upgraded(paths[i], "", head, sizeof(head));

        ck_assert_ptr_nonnull(strstr(head, "\r\nUpgrade: echo\r\n"));
        ck_assert_ptr_nonnull(strstr(head, "\r\nConnection: Upgrade\r\n"));
        ck_assert_ptr_null(strstr(head, "Content-Length"));
        ck_assert_int_eq(corSendAll(fd, "ping", 4), 0);
        ck_assert_uint_eq(readExactly(fd, buf, 4), 4);
        ck_assert_str_eq(buf, "ping");
        ck_assert_int_eq(corSendAll(fd, "pong!", 5), 0);
        ck_assert_uint_eq(readExactly(fd, buf, 5), 5);
        ck_assert_str_eq(buf, "pong!");
        /* Its end ends the session, which closes. */
        shutdown(fd, SHUT_WR);
        ck_assert(corPeerClosed(fd, 3000));
        close(fd);
    }
}
END_TEST

START_TEST(test_bytes_past_the_request_belong_to_the_new_protocol)
{
    const char* pipelined = "early bytes|GET /hello HTTP/1.1\r\nHost: x\r\n"
                            "\r\n";
    char head[1024];
    char buf[256];
    int fd;

    startServer();
    fd = upgraded("/up", pipelined, head, sizeof(head));
    /* Echoed as they are: the pipelined request is not served. */
    ck_assert_uint_eq(readExactly(fd, buf, strlen(pipelined)),
                      strlen(pipelined));
    ck_assert_str_eq(buf, pipelined);
    close(fd);
}
END_TEST

START_TEST(test_what_may_not_be_upgraded_is_refused)
{
    const char* refused[] = {
        /* Not a GET. */
        "POST /up HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\n"
        "Upgrade: echo\r\nContent-Length: 0\r\n\r\n",
        /* No Connection: upgrade. */
        "GET /up HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\n\r\n",
        /* Another protocol. */
        "GET /up HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\n"
        "Upgrade: websocket\r\n\r\n",
        /* HTTP/1.0 has no upgrade. */
        "GET /up HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n",
    };
    char buf[4096];

    startServer();
    for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        ck_assert_int_eq(corRequest(server.port, refused[i], buf, sizeof(buf)),
                         400);
    }
    /* A protocol with a version matches, and case does not matter. */
    ck_assert_int_eq(corRequest(server.port,
                                "GET /up HTTP/1.1\r\nHost: x\r\n"
                                "Connection: UPGRADE\r\nUpgrade: h2c, "
                                "Echo/2\r\n\r\n",
                                buf, sizeof(buf)),
                     101);
}
END_TEST

START_TEST(test_a_stop_with_upgraded_connections_is_prompt)
{
    char head[1024];
    int fds[4];
    long start;

    startServer();
    for (unsigned i = 0; i < 4; i++) {
        fds[i] = upgraded(i % 2 ? "/up" : "/upinline", "", head, sizeof(head));
    }
    /* Left the HTTP server: its connection gauge does not hold them. */
    ck_assert_int_eq(corSendAll(fds[0], "x", 1), 0);
    ck_assert_uint_eq(readExactly(fds[0], head, 1), 1);
    start = corNowMs();
    corServerStop(&server);
    ck_assert_msg(corNowMs() - start < 1500, "the stop took %ld ms",
                  corNowMs() - start);
    for (unsigned i = 0; i < 4; i++) {
        ck_assert(corPeerClosed(fds[i], 1000));
        close(fds[i]);
    }
}
END_TEST

START_TEST(test_the_http_server_keeps_serving_beside_them)
{
    char head[1024];
    char buf[4096];
    int fd;

    startServer();
    fd = upgraded("/up", "", head, sizeof(head));
    for (unsigned i = 0; i < 20; i++) {
        ck_assert_int_eq(corRequest(server.port,
                                    "GET /hello HTTP/1.1\r\nHost: x\r\n"
                                    "Connection: close\r\n\r\n",
                                    buf, sizeof(buf)),
                         200);
    }
    ck_assert_int_eq(corSendAll(fd, "still", 5), 0);
    ck_assert_uint_eq(readExactly(fd, buf, 5), 5);
    ck_assert_str_eq(buf, "still");
    close(fd);
}
END_TEST

COR_TEST_SUITE(corUpgrade)
{
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_an_upgraded_connection_echoes);
    tcase_add_test(tc, test_bytes_past_the_request_belong_to_the_new_protocol);
    tcase_add_test(tc, test_what_may_not_be_upgraded_is_refused);
    tcase_add_test(tc, test_a_stop_with_upgraded_connections_is_prompt);
    tcase_add_test(tc, test_the_http_server_keeps_serving_beside_them);
}
