/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Upgrades through modules/forward, in both modes: a real WebSocket
 * client (Debian's python3-websockets, tests/websocket/wsClient.py)
 * talks through cor's forward, on http and on https, to a second cor
 * serving modules/websocket's echo. Checked: text, binary, 100 KB and
 * fragmented echoes, ping/pong, the close handshake, 300 KiB and 16 MiB
 * messages past the upstream's max_message closed with its 1009 (16 MiB
 * through a splice of two 64 KiB buffers: backpressure, the proxy's
 * memory flat), an unmasked frame
 * closed with 1002 by the upstream; an upgrade the upstream does not
 * take answered as it answered (404); the client's half-close passed to
 * the upstream and its end back; a splice with no byte either way closed
 * after the read timeout. Only that last test runs under a short read
 * timeout: the client's 16 MiB message takes it a second of CPU to make
 * on a loaded machine, with no byte through the splice meanwhile.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static CorServer upstream;
static CorServer server;
static char certs[64];
static char out[1 << 16];

#define CLIENT "/usr/bin/python3 tests/websocket/wsClient.py"
/* The idle test's read timeout, and the others': far past any pause of a
 * client or a loaded machine, so that a close before it is no timeout. */
#define IDLE_MS 1000
#define PATIENT_MS 60000

static void
setUp(void)
{
    corTestCertsMake(certs, sizeof(certs));
    ck_assert_int_eq(corServerStartWebsocket(&upstream, false, NULL), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
    corServerStop(&upstream);
    corTestCertsRemove(certs);
}

/* cor forwarding /ws and /nows to the upstream, on http or https, with
 * a read timeout (an idle splice's too) of idleMs. */
static void
startProxy(bool tls, int idleMs)
{
    char rest[1024];

    snprintf(rest, sizeof(rest),
             "modules:\n"
             "  - { load: http }\n"
             "  - load: forward\n"
             "    upstreams:\n"
             "      - { name: ws, servers: [ \"http://127.0.0.1:%d\" ],\n"
             "          read_timeout: %dms }\n"
             "routes:\n"
             "  - { match: \"/*\", handler: ws }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             upstream.port, idleMs);
    ck_assert_int_eq(corServerStartListen(&server, tls, certs, rest), 0);
}

/* wsClient.py through the proxy: it must say ALL OK. */
static void
clientThrough(bool tls)
{
    ck_assert_msg(corWebsocketClient(&server, CLIENT, tls, certs, "", out,
                                     sizeof(out)),
                  "%s", out);
}

START_TEST(test_websocket_through_forward)
{
    const char* sanitized = getenv("COR_TEST_SANITIZED");
    long before;
    long after;
    pid_t gen;

    startProxy(false, PATIENT_MS);
    gen = corServerGeneration(&server);
    before = corProcStatusKb(gen, "VmHWM");
    clientThrough(false);
    after = corProcStatusKb(gen, "VmHWM");
    /* The client sent some 17 MiB through (the 16 MiB message too): the
     * splice held two 64 KiB buffers of it at a time, not the message. */
    printf("the proxy's VmHWM through the client's run: %ld kB, then %ld "
           "kB\n",
           before, after);
    if (sanitized == NULL || strcmp(sanitized, "1") != 0) {
        ck_assert_int_gt(before, 0);
        ck_assert_msg(after - before < 8 * 1024, "VmHWM %ld kB, then %ld kB",
                      before, after);
    }
}
END_TEST

START_TEST(test_websocket_through_forward_over_https)
{
    startProxy(true, PATIENT_MS);
    clientThrough(true);
}
END_TEST

/* The WebSocket handshake on path, by hand; the connection. */
static int
handshake(const char* path)
{
    char request[512];
    int fd = corConnect(server.port);

    ck_assert_int_ge(fd, 0);
    snprintf(request, sizeof(request),
             "GET %s HTTP/1.1\r\nHost: t\r\n"
             "Upgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "Sec-WebSocket-Version: 13\r\n\r\n",
             path);
    ck_assert_int_eq(corSendAll(fd, request, strlen(request)), 0);
    return fd;
}

START_TEST(test_upgrade_not_taken_answered_as_it_came)
{
    int fd;

    startProxy(false, PATIENT_MS);
    fd = handshake("/nows");
    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 5000), 0);
    ck_assert_int_eq(corStatus(out), 404);
    close(fd);
}
END_TEST

/* The handshake through the proxy, answered 101 with the upstream's own
 * accept; the connection. */
static int
upgraded(void)
{
    int fd = handshake("/ws");
    ssize_t n = recv(fd, out, sizeof(out) - 1, 0);

    ck_assert_int_gt(n, 0);
    out[n] = '\0';
    ck_assert_msg(strncmp(out, "HTTP/1.1 101", 12) == 0, "%s", out);
    ck_assert_msg(strstr(out, "Sec-WebSocket-Accept: "
                              "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
                      != NULL,
                  "%s", out);
    return fd;
}

START_TEST(test_half_close_passed_on)
{
    long start;
    int fd;

    startProxy(false, PATIENT_MS);
    fd = upgraded();
    /* The client's end reaches the upstream, which ends too: the proxy
     * passes that end back, well before its idle timeout. */
    start = corNowMs();
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    ck_assert(corPeerClosed(fd, PATIENT_MS / 2));
    printf("the end came back after %ld ms (read_timeout %d ms)\n",
           corNowMs() - start, PATIENT_MS);
    close(fd);
}
END_TEST

START_TEST(test_idle_splice_closed_after_the_read_timeout)
{
    long start;
    long took;
    int fd;

    startProxy(false, IDLE_MS);
    /* From before the handshake: the splice's idle time starts after it,
     * however late a loaded machine lets this test see the 101. */
    start = corNowMs();
    fd = upgraded();
    ck_assert(corPeerClosed(fd, PATIENT_MS));
    took = corNowMs() - start;
    printf("an idle splice closed after %ld ms (read_timeout %d ms)\n", took,
           IDLE_MS);
    ck_assert_int_ge(took, IDLE_MS - 100);
    close(fd);
}
END_TEST

COR_TEST_SUITE(corForwardUpgrade)
{
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_websocket_through_forward);
    tcase_add_test(tc, test_websocket_through_forward_over_https);
    tcase_add_test(tc, test_upgrade_not_taken_answered_as_it_came);
    tcase_add_test(tc, test_half_close_passed_on);
    tcase_add_test(tc, test_idle_splice_closed_after_the_read_timeout);
}
