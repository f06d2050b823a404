/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/websocket against a real client (Debian's python3-websockets,
 * tests/websocket/wsClient.py), over http and https: echo of text and
 * binary messages (100 KB ones, fragmented ones), ping/pong, the close
 * handshake, an unmasked frame closed with 1002, messages past
 * max_message (to 16 MiB) closed with 1009 that python-websockets and
 * npm's ws (Debian's node-ws) both read; the close exchange ends at once;
 * handshakes refused (426 with its reason, 400); and a stop with sessions
 * open is prompt, each told 1001.
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
static char certs[64];
static char out[1 << 16];

#define CLIENT "/usr/bin/python3 tests/websocket/wsClient.py"
#define NPM_TOO_BIG                                                            \
    "env NODE_PATH=/usr/share/nodejs node tests/websocket/wsTooBig.js"

static void
setUp(void)
{
    corTestCertsMake(certs, sizeof(certs));
}

static void
tearDown(void)
{
    corServerStop(&server);
    corTestCertsRemove(certs);
}

/* The server with the websocket module on a listener of protocol (http or
 * https). */
static void
startServer(bool tls)
{
    ck_assert_int_eq(corServerStartWebsocket(&server, tls, certs), 0);
}

/* Run a client (its command, which ends with its arguments before the
 * URL) against the server: it must say ALL OK. */
static void
runAgainst(const char* client, bool tls, const char* after)
{
    ck_assert_msg(corWebsocketClient(&server, client, tls, certs, after, out,
                                     sizeof(out)),
                  "%s", out);
}

START_TEST(test_the_real_client_over_http)
{
    startServer(false);
    runAgainst(CLIENT, false, "");
}
END_TEST

START_TEST(test_the_real_client_over_https)
{
    startServer(true);
    runAgainst(CLIENT, true, "");
}
END_TEST

/* npm's ws, 3 messages of 16 MiB each, past max_message: each client reads
 * the 1009, since the server drains what it still sends before the close
 * (a close with its bytes unread reset the connection: 1006). */
START_TEST(test_npm_ws_reads_1009_over_http)
{
    startServer(false);
    runAgainst(NPM_TOO_BIG, false, "3 16777216");
}
END_TEST

START_TEST(test_npm_ws_reads_1009_over_https)
{
    startServer(true);
    runAgainst(NPM_TOO_BIG, true, "3 16777216");
}
END_TEST

#define HANDSHAKE(key, version)                                                \
    "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: "        \
    "Upgrade\r\nSec-WebSocket-Key: " key "\r\nSec-WebSocket-Version: " version \
    "\r\n\r\n"

START_TEST(test_bad_handshakes_are_refused)
{
    char buf[4096];

    startServer(false);
    ck_assert_int_eq(corRequest(server.port,
                                HANDSHAKE("dGhlIHNhbXBsZSBub25jZQ==", "8"), buf,
                                sizeof(buf)),
                     426);
    ck_assert_ptr_nonnull(strstr(buf, "Sec-WebSocket-Version: 13"));
    ck_assert_int_eq(corRequest(server.port, HANDSHAKE("short", "13"), buf,
                                sizeof(buf)),
                     400);
    /* The RFC's example key gets the RFC's answer. */
    ck_assert_int_eq(corRequest(server.port,
                                HANDSHAKE("dGhlIHNhbXBsZSBub25jZQ==", "13"),
                                buf, sizeof(buf)),
                     101);
    ck_assert_ptr_nonnull(strstr(buf, "Sec-WebSocket-Accept: "
                                      "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
}
END_TEST

/* Read len bytes within timeoutMs. Returns true when they came. */
static bool
readExactly(int fd, unsigned char* buf, size_t len, int timeoutMs)
{
    long deadline = corNowMs() + timeoutMs;
    size_t got = 0;

    while (got < len && corNowMs() < deadline) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t n;

        if (poll(&p, 1, (int)(deadline - corNowMs())) != 1) {
            return false;
        }
        n = recv(fd, buf + got, len - got, 0);
        if (n <= 0) {
            return false;
        }
        got += (size_t)n;
    }
    return got == len;
}

/* A connection after its 101, or -1. */
static int
sessionOpen(void)
{
    static const char handshake[] = HANDSHAKE("dGhlIHNhbXBsZSBub25jZQ==", "13");
    char buf[4096];
    int fd = corConnect(server.port);

    if (fd < 0 || corSendAll(fd, handshake, sizeof(handshake) - 1) != 0
        || corReadResponse(fd, buf, sizeof(buf), 3000) <= 0
        || corStatus(buf) != 101) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

/*
 * A message past max_message (256 KiB) whose payload starts like a frame
 * head of 2^40 bytes: the server's 1009 comes, the client answers with its
 * close frame, and the server closes at once, cleanly (an end, no reset).
 * It used to read the refused payload as frames, so that it waited for a
 * 2^40-byte frame and closed 2 s after the client's close.
 */
START_TEST(test_the_close_exchange_ends_at_once)
{
    static const unsigned char head[] = { 0x82, 0xFF, 0,    0, 0, 0, 0,
                                          0x04, 0,    0x01, 0, 0, 0, 0 };
    static const unsigned char fakeHead[] = { 0x82, 0xFF, 0, 0, 0x01,
                                              0,    0,    0, 0, 0 };
    static const unsigned char clientClose[] = { 0x88, 0x82, 0,    0,
                                                 0,    0,    0x03, 0xF1 };
    size_t payloadLen = 256 * 1024 + 1;
    unsigned char* payload = calloc(1, payloadLen);
    unsigned char frame[4];
    struct pollfd p;
    long start;
    int fd;

    startServer(false);
    fd = sessionOpen();
    ck_assert_int_ge(fd, 0);
    ck_assert_ptr_nonnull(payload);
    memcpy(payload, fakeHead, sizeof(fakeHead));
    ck_assert_int_eq(corSendAll(fd, head, sizeof(head)), 0);
    ck_assert_int_eq(corSendAll(fd, payload, payloadLen), 0);
    free(payload);
    ck_assert(readExactly(fd, frame, sizeof(frame), 5000));
    ck_assert_uint_eq(frame[0], 0x88);
    ck_assert_uint_eq((unsigned)frame[2] << 8 | frame[3], 1009);
    ck_assert_int_eq(corSendAll(fd, clientClose, sizeof(clientClose)), 0);
    start = corNowMs();
    p = (struct pollfd){ .fd = fd, .events = POLLIN };
    ck_assert_int_eq(poll(&p, 1, 5000), 1);
    ck_assert_int_eq(recv(fd, frame, 1, 0), 0);
    ck_assert_msg(corNowMs() - start < 1000, "the close took %ld ms",
                  corNowMs() - start);
    close(fd);
}
END_TEST

/*
 * A close frame no client may send (a status of 999, or 1005 that only
 * says none was given, or a payload of one byte) is answered with 1002,
 * and the connection closes at once: the client's close frame came, so
 * there is nothing to wait for (python-websockets 10.4: 1002, then the
 * close within 3 ms). It used to wait 2 s for a second close frame.
 */
START_TEST(test_a_bad_close_frame_gets_1002_and_the_end_at_once)
{
    static const struct {
        unsigned char frame[8];
        size_t len;
    } closes[] = {
        { { 0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE7 }, 8 }, /* 999 */
        { { 0x88, 0x82, 0, 0, 0, 0, 0x03, 0xED }, 8 }, /* 1005 */
        { { 0x88, 0x81, 0, 0, 0, 0, 0x03 }, 7 },       /* 1 byte */
    };

    startServer(false);
    for (size_t i = 0; i < sizeof(closes) / sizeof(closes[0]); i++) {
        unsigned char frame[4];
        struct pollfd p;
        long start;
        int fd = sessionOpen();

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(corSendAll(fd, closes[i].frame, closes[i].len), 0);
        start = corNowMs();
        ck_assert(readExactly(fd, frame, sizeof(frame), 5000));
        ck_assert_uint_eq(frame[0], 0x88);
        ck_assert_uint_eq((unsigned)frame[2] << 8 | frame[3], 1002);
        p = (struct pollfd){ .fd = fd, .events = POLLIN };
        ck_assert_int_eq(poll(&p, 1, 5000), 1);
        ck_assert_int_eq(recv(fd, frame, 1, 0), 0);
        ck_assert_msg(corNowMs() - start < 1000, "close %zu took %ld ms", i,
                      corNowMs() - start);
        close(fd);
    }
}
END_TEST

/* Send zeros until the connection fails or most bytes went. Returns the
 * bytes sent, or -1 when it never failed. */
static long
sendUntilCut(int fd, long most)
{
    static const unsigned char zeros[65536];
    long sent = 0;

    while (sent < most) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        ssize_t n;

        if (poll(&p, 1, 10000) != 1) {
            return -1;
        }
        n = send(fd, zeros, sizeof(zeros), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN) {
            return sent;
        }
        sent += n > 0 ? n : 0;
    }
    return -1;
}

/* A client that sends on after the server's close frame and never closes
 * (here a frame of 2^40 bytes) is read for 64 MiB at most, then cut. */
START_TEST(test_the_drain_after_a_close_is_bounded)
{
    static const unsigned char head[] = { 0x82, 0xFF, 0, 0, 0x01, 0, 0,
                                          0,    0,    0, 0, 0,    0, 0 };
    long sent;
    int fd;

    startServer(false);
    fd = sessionOpen();
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, head, sizeof(head)), 0);
    sent = sendUntilCut(fd, 512L << 20);
    ck_assert_msg(sent > 0 && sent < 96L << 20, "sent %ld bytes", sent);
    close(fd);
}
END_TEST

START_TEST(test_a_stop_with_sessions_open_is_prompt)
{
    char buf[4096];
    int fds[3];
    long start;

    startServer(false);
    for (unsigned i = 0; i < 3; i++) {
        fds[i] = corConnect(server.port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(corSendAll(fds[i],
                                    HANDSHAKE("dGhlIHNhbXBsZSBub25jZQ==", "13"),
                                    strlen(HANDSHAKE("dGhlIHNhbXBsZSBub25jZ"
                                                     "Q==",
                                                     "13"))),
                         0);
        ck_assert_int_gt(corReadResponse(fds[i], buf, sizeof(buf), 3000), 0);
        ck_assert_int_eq(corStatus(buf), 101);
    }
    start = corNowMs();
    corServerStop(&server);
    ck_assert_msg(corNowMs() - start < 1500, "the stop took %ld ms",
                  corNowMs() - start);
    for (unsigned i = 0; i < 3; i++) {
        struct pollfd p = { .fd = fds[i], .events = POLLIN };
        unsigned char frame[8];
        ssize_t n;

        ck_assert_int_eq(poll(&p, 1, 1000), 1);
        n = recv(fds[i], frame, sizeof(frame), 0);
        /* A close frame of status 1001, going away. */
        ck_assert_int_ge(n, 4);
        ck_assert_uint_eq(frame[0], 0x88);
        ck_assert_uint_eq((unsigned)frame[2] << 8 | frame[3], 1001);
        close(fds[i]);
    }
}
END_TEST

COR_TEST_SUITE(corWebsocket)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_the_real_client_over_http);
    tcase_add_test(tc, test_the_real_client_over_https);
    tcase_add_test(tc, test_npm_ws_reads_1009_over_http);
    tcase_add_test(tc, test_npm_ws_reads_1009_over_https);
    tcase_add_test(tc, test_the_close_exchange_ends_at_once);
    tcase_add_test(tc, test_a_bad_close_frame_gets_1002_and_the_end_at_once);
    tcase_add_test(tc, test_the_drain_after_a_close_is_bounded);
    tcase_add_test(tc, test_bad_handshakes_are_refused);
    tcase_add_test(tc, test_a_stop_with_sessions_open_is_prompt);
}
