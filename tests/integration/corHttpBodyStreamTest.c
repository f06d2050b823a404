/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/1.1 request body handed to its handler as it comes
 * (modules/http/corHttpBodyStream.c), against the real binary in both
 * modes, with the testkit's "bodyread" (tests/integration/corTestkitBody.c)
 * as the handler and raw sockets and curl as the clients: 5 MB by length
 * and chunked, intact; a handler that does not read holds the client back
 * (the socket is not read past a bound), where a body read whole would be
 * taken in; a body that stalls past limits.body_timeout (408, or a cut
 * answer once its head went); one past limits.body_bytes (413) and one
 * badly framed (400); the client's end midway; an answer streamed back
 * while the body still comes (both ways at once, as gRPC does); an answer
 * before the body came whole (the connection closes after it); and a
 * request pipelined behind a streamed body.
 */
#include "corTest.h"
#include "corServer.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static CorServer server;
static char out[1 << 16];

static const char config[] =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
    "limits: { body_bytes: 64MiB, body_timeout: 1s }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"/body\", handler: bodyread }\n"
    "  - { match: \"/echo\", handler: echo }\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
setUp(void)
{
    ck_assert_int_eq(corServerStart(&server, config), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
}

static bool
has(const char* text)
{
    return strstr(out, text) != NULL;
}

#define CHECK_HAS(text) ck_assert_msg(has(text), "no '%s' in: %s", text, out)
#define CHECK_HAS_NOT(text) ck_assert_msg(!has(text), "'%s' in: %s", text, out)

static void
sendText(int fd, const char* text)
{
    ck_assert_int_eq(corSendAll(fd, text, strlen(text)), 0);
}

/* A connection with head sent, and len bytes of body (a pattern). */
static int
sendStart(const char* head, size_t len)
{
    static char body[65536];
    int fd = corConnect(server.port);

    ck_assert_int_ge(fd, 0);
    memset(body, 'b', sizeof(body));
    sendText(fd, head);
    while (len > 0) {
        size_t n = len < sizeof(body) ? len : sizeof(body);

        ck_assert_int_eq(corSendAll(fd, body, n), 0);
        len -= n;
    }
    return fd;
}

/* Everything fd brings until its end (or timeoutMs), into out. */
static size_t
readToEnd(int fd, int timeoutMs)
{
    struct timeval tv = { timeoutMs / 1000, (timeoutMs % 1000) * 1000 };
    size_t len = 0;
    ssize_t n;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (len + 1 < sizeof(out)
           && (n = recv(fd, out + len, sizeof(out) - 1 - len, 0)) > 0) {
        len += (size_t)n;
    }
    out[len] = '\0';
    return len;
}

/* Whether bodyread logged count failed reads ("bodyread: WHY"), within
 * 2 s. WHY is the body's failure, or the cancel that came with it: which
 * the handler hears first depends on where it runs. */
static bool
readsFailed(int count)
{
    for (int i = 0; i < 100; i++) {
        if (corServerLogCount(&server, "bodyread: ") >= count) {
            return corServerLogCount(&server, "bodyread: ") == count;
        }
        usleep(20 * 1000);
    }
    return false;
}

/* 5 MB by length and chunked reach the handler intact. */
START_TEST(test_large_body_intact)
{
    char command[512];
    char expect[64];

    snprintf(command, sizeof(command),
             "head -c 5000000 /dev/urandom > "
             "%s/up.bin && /usr/bin/python3 -c 'import sys; s=0\n"
             "for b in open(\"%s/up.bin\",\"rb\").read(): "
             "s=(s*31+b)&0xffffffff\nprint(s)'",
             server.dir, server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    snprintf(expect, sizeof(expect), "length 5000000 sum %ld\n", atol(out));
    snprintf(command, sizeof(command), "--data-binary @%s/up.bin", server.dir);
    ck_assert_int_eq(corCurl(server.port, command, "/body", out, sizeof(out)),
                     0);
    ck_assert_str_eq(out, expect);
    snprintf(command, sizeof(command),
             "-H 'Transfer-Encoding: chunked' "
             "--data-binary @%s/up.bin",
             server.dir);
    ck_assert_int_eq(corCurl(server.port, command, "/body", out, sizeof(out)),
                     0);
    ck_assert_str_eq(out, expect);
}
END_TEST

/*
 * While the handler reads nothing (2 s), the client gets no more than the
 * kernel's buffers and the server's bound into the connection: far less
 * than the 60 MiB it has to send, which a body read whole would take in
 * (within body_bytes). Then all of it comes, intact in length.
 */
START_TEST(test_a_handler_that_does_not_read_holds_the_client)
{
    static const char head[] = "POST /body?wait=2000 HTTP/1.1\r\nHost: t\r\n"
                               "Content-Length: 62914560\r\n\r\n";
    static char piece[65536];
    size_t left = 62914560;
    size_t sent = 0;
    long start = corNowMs();
    int fd = sendStart(head, 0);

    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (corNowMs() - start < 1500) {
        ssize_t n = send(fd, piece, sizeof(piece), MSG_NOSIGNAL);

        if (n > 0) {
            sent += (size_t)n;
        } else {
            usleep(10 * 1000);
        }
    }
    ck_assert_msg(sent < 24 * 1024 * 1024, "%zu bytes went in", sent);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    left -= sent;
    while (left > 0) {
        size_t n = left < sizeof(piece) ? left : sizeof(piece);

        ck_assert_int_eq(corSendAll(fd, piece, n), 0);
        left -= n;
    }
    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 20000), 0);
    CHECK_HAS("length 62914560 sum");
    close(fd);
}
END_TEST

/* A body that stalls past body_timeout: 408 and the close while nothing
 * was answered; once a streamed answer's head went, a cut answer (no last
 * chunk) and the close. The handler's read fails either way. */
START_TEST(test_a_stalled_body_times_out)
{
    long start = corNowMs();
    int fd = sendStart("POST /body HTTP/1.1\r\nHost: t\r\n"
                       "Content-Length: 100\r\n\r\n",
                       5);

    readToEnd(fd, 5000);
    close(fd);
    ck_assert_int_lt(corNowMs() - start, 3000);
    CHECK_HAS("HTTP/1.1 408 ");
    ck_assert(readsFailed(1));
    fd = sendStart("POST /body?echo=1 HTTP/1.1\r\nHost: t\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
                   0);
    readToEnd(fd, 5000);
    close(fd);
    CHECK_HAS("HTTP/1.1 200 ");
    CHECK_HAS("5\r\nhello\r\n");
    CHECK_HAS_NOT("0\r\n\r\n");
    ck_assert(readsFailed(2));
    ck_assert_int_eq(corServerLogCount(&server, "refused 408"), 2);
}
END_TEST

/*
 * A body that keeps coming, a piece every 400 ms, outlasts body_timeout
 * (1 s) in all and is read whole, streamed to its handler (chunked) or
 * gathered before it (by length): the timeout is between pieces, each
 * moving the wait on without re-arming the deadline (corHttpConnProgress:
 * the deadline asks again when it comes). On a machine so loaded that a
 * piece went out past 900 ms after the one before, a 408 is the right
 * answer and nothing is judged.
 */
static void
sendSlowly(int fd, const char* piece, bool* late)
{
    long last = corNowMs();

    for (int i = 0; i < 6; i++) {
        usleep(400 * 1000);
        *late |= corNowMs() - last > 900;
        sendText(fd, piece);
        last = corNowMs();
    }
}

START_TEST(test_a_slow_body_that_keeps_coming_is_read_whole)
{
    bool late = false;
    int fd = sendStart("POST /body HTTP/1.1\r\nHost: t\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n",
                       0);

    sendSlowly(fd, "5\r\nhello\r\n", &late);
    sendText(fd, "0\r\n\r\n");
    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 5000), 0);
    close(fd);
    if (!late) {
        CHECK_HAS("HTTP/1.1 200 ");
        CHECK_HAS("length 30 ");
    }
    fd = sendStart("POST /echo HTTP/1.1\r\nHost: t\r\n"
                   "Content-Length: 30\r\n\r\n",
                   0);
    sendSlowly(fd, "hello", &late);
    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 5000), 0);
    close(fd);
    if (!late) {
        CHECK_HAS("HTTP/1.1 200 ");
        CHECK_HAS("hellohellohellohellohellohello");
    }
}
END_TEST

/* A chunk that says it brings more than body_bytes: 413 at once, the
 * handler's read failing; bad framing midway: 400. */
START_TEST(test_past_the_limit_or_badly_framed_refused)
{
    int fd = sendStart("POST /body HTTP/1.1\r\nHost: t\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n"
                       "5\r\nhello\r\n5000000\r\n",
                       0);

    readToEnd(fd, 5000);
    close(fd);
    CHECK_HAS("HTTP/1.1 413 ");
    CHECK_HAS("Connection: close");
    ck_assert(readsFailed(1));
    ck_assert_int_eq(corServerLogCount(&server, "POST /body is past the "
                                                "limits (limits.body_bytes"),
                     1);
    fd = sendStart("POST /body HTTP/1.1\r\nHost: t\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n"
                   "5\r\nhello\r\nzz\r\n",
                   0);
    readToEnd(fd, 5000);
    close(fd);
    CHECK_HAS("HTTP/1.1 400 ");
    ck_assert(readsFailed(2));
}
END_TEST

/* The client's end midway: the handler hears it (it is cancelled, or
 * reads the reset), and the server serves the next one. */
START_TEST(test_the_client_leaving_midway)
{
    long cancelled = corMetric(server.port, "cor_requests_cancelled_total");
    int fd = sendStart("POST /body HTTP/1.1\r\nHost: t\r\n"
                       "Content-Length: 100000\r\n\r\n",
                       30000);

    usleep(200 * 1000);
    close(fd);
    ck_assert(readsFailed(1));
    ck_assert_int_eq(corMetric(server.port, "cor_requests_cancelled_total"),
                     cancelled + 1);
    ck_assert_int_eq(corCurl(server.port, "-d again", "/body", out,
                             sizeof(out)),
                     0);
    ck_assert_str_eq(out, "length 5 sum 92746592\n");
}
END_TEST

/* Both ways at once: each piece comes back before the next is sent; the
 * body's end ends the answer. */
START_TEST(test_an_answer_streamed_while_the_body_comes)
{
    static const char* const pieces[] = { "one", "two", "three" };
    char chunk[32];
    int fd = sendStart("POST /body?echo=1 HTTP/1.1\r\nHost: t\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n",
                       0);
    size_t len = 0;

    for (int i = 0; i < 3; i++) {
        long start = corNowMs();

        snprintf(chunk, sizeof(chunk), "%zx\r\n%s\r\n", strlen(pieces[i]),
                 pieces[i]);
        sendText(fd, chunk);
        while (strstr(out, chunk) == NULL && corNowMs() - start < 2000) {
            ssize_t n = recv(fd, out + len, sizeof(out) - 1 - len,
                             MSG_DONTWAIT);

            len += n > 0 ? (size_t)n : 0;
            out[len] = '\0';
            usleep(n > 0 ? 0 : 5000);
        }
        CHECK_HAS(chunk);
    }
    sendText(fd, "0\r\n\r\n");
    readToEnd(fd, 5000);
    close(fd);
    ck_assert_str_eq(out, "0\r\n\r\n");
}
END_TEST

/* An answer before the body came whole closes the connection after it:
 * what the client still sends is dropped, a request behind it never
 * served. */
START_TEST(test_an_answer_before_the_body_closes_after_it)
{
    int fd = sendStart("POST /body?early=1 HTTP/1.1\r\nHost: t\r\n"
                       "Content-Length: 100000\r\n\r\n",
                       1000);

    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 5000), 0);
    CHECK_HAS("Connection: close");
    CHECK_HAS("early\n");
    sendText(fd, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    readToEnd(fd, 5000);
    close(fd);
    ck_assert_str_eq(out, "");
}
END_TEST

/* A request pipelined behind a streamed body, sent with its last bytes,
 * is answered after it on the same connection. */
START_TEST(test_a_request_pipelined_behind_a_streamed_body)
{
    int fd = sendStart("POST /body?wait=100 HTTP/1.1\r\nHost: t\r\n"
                       "Content-Length: 70000\r\n\r\n",
                       70000);

    sendText(fd, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\n"
                 "next");
    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 5000), 0);
    CHECK_HAS("HTTP/1.1 200 ");
    CHECK_HAS("length 70000 sum");
    CHECK_HAS_NOT("Connection: close");
    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 5000), 0);
    ck_assert_str_eq(corBody(out), "next");
    close(fd);
}
END_TEST

COR_TEST_SUITE(corHttpBodyStream)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_large_body_intact);
    tcase_add_test(tc, test_a_handler_that_does_not_read_holds_the_client);
    tcase_add_test(tc, test_a_stalled_body_times_out);
    tcase_add_test(tc, test_a_slow_body_that_keeps_coming_is_read_whole);
    tcase_add_test(tc, test_past_the_limit_or_badly_framed_refused);
    tcase_add_test(tc, test_the_client_leaving_midway);
    tcase_add_test(tc, test_an_answer_streamed_while_the_body_comes);
    tcase_add_test(tc, test_an_answer_before_the_body_closes_after_it);
    tcase_add_test(tc, test_a_request_pipelined_behind_a_streamed_body);
}
