/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/websocket against a real client (Debian's python3-websockets,
 * tests/websocket/wsClient.py), over http and https: echo of text and
 * binary messages (100 KB ones, fragmented ones), ping/pong, the close
 * handshake, an unmasked frame closed with 1002, a message past
 * max_message closed with 1009; handshakes refused (426, 400); and a stop
 * with sessions open is prompt, each told 1001.
 */
#include "corTest.h"
#include "corServer.h"

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
    char tlsLine[256] = "";
    char yaml[2048];

    if (tls) {
        snprintf(tlsLine, sizeof(tlsLine), "    tls: { certificate: "
                 "%s/server.pem, key: %s/server.key }\n", certs, certs);
    }
    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 4\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "  stop_timeout: 5s\n"
             "listen:\n"
             "  - protocol: %s\n"
             "    address: 127.0.0.1:{PORT}\n"
             "%s"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: {MODULES}/websocket.so, max_message: 256KiB }\n"
             "routes:\n"
             "  - { match: \"GET /ws\", handler: websocket }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             tls ? "https" : "http", tlsLine);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
clientRuns(const char* scheme, bool tls)
{
    char command[512];
    int rc;

    snprintf(command, sizeof(command), "timeout 60 " CLIENT
             " %s://127.0.0.1:%d/ws %s%s 2>&1", scheme, server.port,
             tls ? certs : "", tls ? "/ca.pem" : "");
    rc = corShell(command, out, sizeof(out));
    ck_assert_msg(rc == 0 && strstr(out, "ALL OK") != NULL, "rc %d:\n%s",
                  rc, out);
}

START_TEST(test_the_real_client_over_http)
{
    startServer(false);
    clientRuns("ws", false);
}
END_TEST

START_TEST(test_the_real_client_over_https)
{
    startServer(true);
    clientRuns("wss", true);
}
END_TEST

#define HANDSHAKE(key, version)                                           \
    "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: "    \
    "Upgrade\r\nSec-WebSocket-Key: " key "\r\nSec-WebSocket-Version: "     \
    version "\r\n\r\n"

START_TEST(test_bad_handshakes_are_refused)
{
    char buf[4096];

    startServer(false);
    ck_assert_int_eq(corRequest(server.port,
                                HANDSHAKE("dGhlIHNhbXBsZSBub25jZQ==", "8"),
                                buf, sizeof(buf)), 426);
    ck_assert_ptr_nonnull(strstr(buf, "Sec-WebSocket-Version: 13"));
    ck_assert_int_eq(corRequest(server.port, HANDSHAKE("short", "13"), buf,
                                sizeof(buf)), 400);
    /* The RFC's example key gets the RFC's answer. */
    ck_assert_int_eq(corRequest(server.port,
                                HANDSHAKE("dGhlIHNhbXBsZSBub25jZQ==", "13"),
                                buf, sizeof(buf)), 101);
    ck_assert_ptr_nonnull(strstr(buf, "Sec-WebSocket-Accept: "
                                      "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
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
                                    HANDSHAKE("dGhlIHNhbXBsZSBub25jZQ==",
                                              "13"),
                                    strlen(HANDSHAKE("dGhlIHNhbXBsZSBub25jZ"
                                                     "Q==", "13"))), 0);
        ck_assert_int_gt(corReadResponse(fds[i], buf, sizeof(buf), 3000),
                         0);
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
    tcase_add_test(tc, test_bad_handshakes_are_refused);
    tcase_add_test(tc, test_a_stop_with_sessions_open_is_prompt);
}
