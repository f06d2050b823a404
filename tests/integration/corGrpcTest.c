/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC through the forward module (issue 21): a grpcio client (Debian's
 * python3-grpcio, tests/integration/grpcPeer.py) -> cor, on an h2c
 * listener (http2: on) and on a TLS one (h2 by ALPN) -> forward with
 * http2: on -> a grpcio server with generic handlers. The four kinds of
 * call: unary, a server stream of 1000 messages (4 MB) arriving whole
 * and in order, a client stream, and a bidirectional one that sends each
 * message only once the echo of the one before came back (a hop that
 * held the request body until its end would never echo: the call would
 * end by its deadline); and a server's NOT_FOUND with its message reaching
 * the client unchanged (a trailers-only answer). An HTTP/1.1 client's
 * call through the HTTP/2 upstream gets a chunked answer whose trailer
 * section says grpc-status; and an HTTP/2 client's POST goes through an
 * HTTP/1.1 upstream group intact (the reverse).
 *
 * A body past limits.body_bytes (issue 32): 413 before the upstream sees
 * anything when its content-length says so; one streamed without a length
 * reaches the upstream once and is refused (never REFUSED_STREAM, which
 * curl and grpcio send again); a gRPC call refused so gets
 * RESOURCE_EXHAUSTED, and one whose answer began is cut (CANCELLED).
 */
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static char certs[64];
static char out[1 << 16];
static pid_t grpcServer;
static pid_t echoServer;
static int grpcPort;
static int echoPort;

static int shell(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* A shell command with $P and $T (cor's plain and TLS ports), $G and $E
 * (the grpcio server's, the HTTP/1.1 echo's), $C (the certificates) and
 * $Y (the helper) set. */
static int
shell(const char* fmt, ...)
{
    char command[4096];
    char body[3072];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(command, sizeof(command),
             "P=%d T=%d G=%d E=%d C=%s "
             "Y='/usr/bin/python3 tests/integration/grpcPeer.py'; %s 2>&1",
             server.port, server.port2, grpcPort, echoPort, certs, body);
    return corShell(command, out, sizeof(out));
}

/* The helper as kind on port, its log in $C/kind.log; its PID once it
 * says it is ready. */
static pid_t
peerStart(const char* kind, int port)
{
    pid_t pid;

    shell("{ $Y %s %d > $C/%s.log 2>&1 & echo $!; }", kind, port, kind);
    pid = atoi(out);
    ck_assert_int_gt(pid, 0);
    for (int i = 0; i < 100; i++) {
        if (shell("grep -q ready $C/%s.log", kind) == 0) {
            return pid;
        }
        usleep(50000);
    }
    ck_abort_msg("the %s peer did not start", kind);
    return -1;
}

static void
peerStop(pid_t* pid)
{
    if (*pid > 0) {
        kill(*pid, SIGTERM);
        *pid = 0;
    }
}

static void
setUp(void)
{
    char yaml[4096];

    corTestCertsMake(certs, sizeof(certs));
    grpcPort = corFreePort();
    echoPort = corFreePort();
    grpcServer = peerStart("server", grpcPort);
    echoServer = peerStart("echo", echoPort);
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 2, workers: 16,"
             " coroutines: { enabled: {COROUTINES} } }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:{PORT2}\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: forward\n"
             "    upstreams:\n"
             "      - { name: grpc, servers: [ \"http://127.0.0.1:%d\" ],"
             " http2: on, read_timeout: 20s }\n"
             "      - { name: h1, servers: [ \"http://127.0.0.1:%d\" ] }\n"
             "      - { name: h1s, servers: [ \"http://127.0.0.1:%d\" ],"
             " request_buffering: off }\n"
             "routes:\n"
             "  - { match: \"/h1/*\", handler: h1 }\n"
             "  - { match: \"/h1s/*\", handler: h1s }\n"
             "  - { match: \"/cor.Test/ClientStream\", handler: grpc,"
             " limits: { body_bytes: 4MiB } }\n"
             "  - { match: \"/cor.Test/Unary\", handler: grpc,"
             " limits: { body_bytes: 100 } }\n"
             "  - { match: \"/cor.Test/*\", handler: grpc }\n"
             "limits: { body_bytes: 1MiB }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             certs, certs, grpcPort, echoPort, echoPort);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
    peerStop(&grpcServer);
    peerStop(&echoServer);
    corTestCertsRemove(certs);
}

/* Every call of the client through target, each "ok". */
static void
callsThrough(const char* target)
{
    static const char* const calls[] = { "unary ok",         "server-stream ok",
                                         "client-stream ok", "bidi ok",
                                         "status ok",        NULL };

    ck_assert_int_eq(shell("timeout 120 $Y client %s", target), 0);
    for (unsigned i = 0; calls[i] != NULL; i++) {
        ck_assert_msg(strstr(out, calls[i]) != NULL, "%s: %s", calls[i], out);
    }
}

START_TEST(test_four_calls_and_a_status_over_h2c)
{
    callsThrough("127.0.0.1:$P");
}
END_TEST

START_TEST(test_four_calls_and_a_status_over_tls)
{
    callsThrough("localhost:$T $C/ca.pem");
}
END_TEST

START_TEST(test_http1_client_gets_chunked_trailers)
{
    ck_assert_int_eq(shell("timeout 30 $Y h1 $P"), 0);
    ck_assert_msg(strncmp(out, "h1 ok", 5) == 0, "%s", out);
}
END_TEST

/* The reverse: an h2 client through an HTTP/1.1 upstream group. */
START_TEST(test_http2_client_through_http1_upstream)
{
    ck_assert_int_eq(shell("head -c 300000 /dev/urandom > $C/post && "
                           "curl -sS --http2-prior-knowledge --data-binary "
                           "@$C/post http://127.0.0.1:$P/h1/echo | cmp - "
                           "$C/post && echo same"),
                     0);
    ck_assert_str_eq(out, "same\n");
}
END_TEST

/* A POST past limits.body_bytes (1 MiB) to an upstream that streams its
 * body (request_buffering: off), counted by the upstream: none at all
 * when its content-length said so, one when it came without (before: 6,
 * curl sending it again at each REFUSED_STREAM). */
START_TEST(test_a_body_past_the_limit_reaches_the_upstream_once)
{
    /* nghttp -d says the length (curl 7.88 calls the reset that follows
     * the 413 an error, and shows no status). */
    ck_assert_int_eq(shell("head -c 5000000 /dev/zero > $C/big && "
                           "nghttp -v -d $C/big http://127.0.0.1:$P/h1s/echo "
                           "| grep -E 'content-length: 5|:status'"),
                     0);
    ck_assert_msg(strstr(out, ":status: 413") != NULL, "%s", out);
    ck_assert_int_eq(shell("curl -sS http://127.0.0.1:$E/count"), 0);
    ck_assert_str_eq(out, "0");
    /* Without a length (-T -): handed on as it comes, refused once past
     * (413 and RST_STREAM(NO_ERROR), as nginx answers). */
    shell("curl -sS --http2-prior-knowledge -o /dev/null -X POST -T - "
          "http://127.0.0.1:$P/h1s/echo < $C/big");
    ck_assert_int_eq(shell("sleep 0.5; curl -sS http://127.0.0.1:$E/count"), 0);
    ck_assert_str_eq(out, "1");
}
END_TEST

START_TEST(test_a_grpc_call_past_the_limit_is_resource_exhausted)
{
    ck_assert_int_eq(shell("timeout 60 $Y limit 127.0.0.1:$P"), 0);
    ck_assert_msg(strstr(out, "limit ok") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "limit-bidi ok") != NULL, "%s", out);
}
END_TEST

/* A route's own limits hold for a gRPC call's streamed body (no length
 * said): a client stream of 2.5 MiB passes on a route that takes 4 MiB,
 * past the top level's 1 MiB; a unary call of 200 bytes is refused on one
 * that takes 100. */
START_TEST(test_a_grpc_route_has_its_own_limits)
{
    ck_assert_int_eq(shell("timeout 60 $Y route-limits 127.0.0.1:$P"), 0);
    ck_assert_msg(strstr(out, "route-more ok") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "route-less ok") != NULL, "%s", out);
}
END_TEST

COR_TEST_SUITE(corGrpc)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_four_calls_and_a_status_over_h2c);
    tcase_add_test(tc, test_four_calls_and_a_status_over_tls);
    tcase_add_test(tc, test_http1_client_gets_chunked_trailers);
    tcase_add_test(tc, test_http2_client_through_http1_upstream);
    tcase_add_test(tc, test_a_body_past_the_limit_reaches_the_upstream_once);
    tcase_add_test(tc, test_a_grpc_call_past_the_limit_is_resource_exhausted);
    tcase_add_test(tc, test_a_grpc_route_has_its_own_limits);
}
