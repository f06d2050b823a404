/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/3's flood defences and the rest of what a handler sees over h3,
 * through a client of the tests' own that misbehaves on purpose
 * (corHttp3Client, beside this program): streams reset as soon as they
 * open (rapid reset), frames that make no progress (empty DATA, reserved
 * frame types, PRIORITY_UPDATE), reserved unidirectional streams; and,
 * well-behaved, a handler's trailers, an extended CONNECT refused as RFC
 * 9220 says, and a streamed body past its route's body_bytes answered
 * 413. One server (one loop, where the flood and the client beside it
 * meet) serves every check.
 */
#include "corTest.h"
#include "corServer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static char certs[64];
static char out[1 << 16];
static char client[512];
static bool started;

static void
serverStart(void)
{
    char yaml[4096];
    ssize_t n;

    if (started) {
        return;
    }
    n = readlink("/proc/self/exe", client, sizeof(client) - 32);
    ck_assert_int_gt(n, 0);
    client[n] = '\0';
    strcpy(strrchr(client, '/'), "/corHttp3Client");
    corTestCertsMake(certs, sizeof(certs));
    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 1\n"
             "  workers: 2\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:{PORT}\n"
             "    http3: on\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /bytes\", handler: bytes }\n"
             "  - { match: \"GET /stream\", handler: stream }\n"
             "  - { match: \"POST /bodyread\", handler: bodyread }\n"
             "  - { match: \"POST /small\", handler: bodyread,\n"
             "      limits: { body_bytes: 1KiB } }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "log: { pid_file: {DIR}/cor.pid, access: {DIR}/access.log }\n",
             certs, certs);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
    started = true;
}

static void
serverStop(void)
{
    if (started) {
        corServerStop(&server);
        corTestCertsRemove(certs);
    }
}

/* corHttp3Client with args on path; its output in out, its exit status. */
static int
h3(const char* args, const char* path)
{
    char command[2048];

    snprintf(command, sizeof(command),
             "timeout 30 %s %s 127.0.0.1 %d '%s' 2>&1", client, args,
             server.port, path);
    return corShell(command, out, sizeof(out));
}

/* cor_http3_abuse_total{kind} of /metrics (over HTTP/1.1), or -1. */
static long
abuses(const char* kind)
{
    char command[256];
    char key[64];
    char page[1 << 15];
    const char* at;

    snprintf(command, sizeof(command), "curl -sk https://127.0.0.1:%d/metrics",
             server.port);
    snprintf(key, sizeof(key), "cor_http3_abuse_total{kind=\"%s\"} ", kind);
    if (corShell(command, page, sizeof(page)) != 0
        || (at = strstr(page, key)) == NULL) {
        return -1;
    }
    return atol(at + strlen(key));
}

/* A flood of kind on path: the server ends it with H3_EXCESSIVE_LOAD,
 * says so in its log and counts it under label. */
static void
floodCut(const char* kind, const char* path, const char* label,
         const char* said)
{
    long before = abuses(label);
    int saidBefore = corServerLogCount(&server, said);
    char args[128];
    long start = corNowMs();

    snprintf(args, sizeof(args), "--flood=%s --count=20000", kind);
    ck_assert_int_eq(h3(args, path), 0);
    fprintf(stderr, "corHttp3FloodTest: %s: %s", kind, out);
    COR_CHECK_HAS(out, "peer closed: app 0x107");
    ck_assert_int_lt(corNowMs() - start, 10000);
    ck_assert_int_eq(abuses(label), before + 1);
    ck_assert_int_eq(corServerLogCount(&server, said), saidBefore + 1);
}

/* Streams opened and reset at once, each a request the server began
 * (CVE-2023-44487's way): cut past http2.rapid_reset_limit (200 a
 * second), while a client beside it, on the same loop, gets its
 * streamed answer whole; and a new one is served after. Before, 20 000
 * went through in 0.7 s and the connection stayed. */
START_TEST(test_a_rapid_reset_flood_is_cut_and_a_client_beside_is_served)
{
    char command[2048];
    char beside[4096];
    FILE* good;
    size_t n;

    snprintf(command, sizeof(command),
             "timeout 30 %s 127.0.0.1 %d '/stream?n=40' 2>&1", client,
             server.port);
    good = popen(command, "r");
    ck_assert_ptr_nonnull(good);
    floodCut("reset", "/stream?n=100", "rapid_reset", "rapid reset");
    n = fread(beside, 1, sizeof(beside) - 1, good);
    beside[n] = '\0';
    ck_assert_int_eq(pclose(good), 0);
    COR_CHECK_HAS(beside, "piece 39\nend fin");
    ck_assert_int_eq(h3("", "/hello"), 0);
    COR_CHECK_HAS(out, "hello, world\nend fin");
}
END_TEST

/* Empty DATA frames on a request whose handler waits for its body:
 * cut past http2.idle_frame_limit (1000 a second). Before, all went. */
START_TEST(test_an_empty_data_flood_is_cut)
{
    floodCut("empty-data", "/bodyread", "no_progress",
             "frames that make no progress");
}
END_TEST

/* Frames of a reserved type (nghttp3 skips them without a word): the
 * same budget. */
START_TEST(test_reserved_frame_types_are_cut)
{
    floodCut("unknown", "/bodyread", "no_progress",
             "frames that make no progress");
}
END_TEST

/* One PRIORITY_UPDATE, its element ID at the end of one STREAM frame and
 * its priority in the next: nghttp3 0.8 aborts on it (an assertion), and
 * the generation with it; now the element ID is held back until the rest
 * comes, and the client is served. */
START_TEST(test_a_priority_update_split_after_its_element_id_kills_nothing)
{
    pid_t gen = corServerGeneration(&server);

    ck_assert_int_eq(h3("--flood=priority --count=1", "/hello"), 0);
    COR_CHECK_HAS(out, "peer kept the connection");
    ck_assert_int_eq(corServerLogCount(&server, "crash"), 0);
    ck_assert_int_eq(corServerGeneration(&server), gen);
    ck_assert_int_eq(h3("", "/hello"), 0);
    COR_CHECK_HAS(out, "hello, world\nend fin");
}
END_TEST

/* PRIORITY_UPDATE frames on the control stream: the same budget. Before,
 * the generation died of the first frame split after its element ID
 * (above). */
START_TEST(test_a_priority_update_flood_is_cut)
{
    pid_t gen = corServerGeneration(&server);

    floodCut("priority", "/hello", "no_progress",
             "frames that make no progress");
    ck_assert_int_eq(corServerGeneration(&server), gen);
}
END_TEST

/* Unidirectional streams of a reserved type: a client may open three of
 * its own (control and QPACK's two) and the server never allows more, so
 * the one this client spent on its control stream leaves two. */
START_TEST(test_reserved_unidirectional_streams_stay_bounded)
{
    ck_assert_int_eq(h3("--flood=uni --count=100", "/hello"), 0);
    COR_CHECK_HAS(out, "flood uni: sent 2 ");
    ck_assert_int_eq(h3("", "/hello"), 0);
    COR_CHECK_HAS(out, "end fin");
}
END_TEST

/* A handler's trailers reach an h3 client, after the body. */
START_TEST(test_trailers_reach_an_h3_client)
{
    ck_assert_int_eq(h3("", "/bytes?n=5&trailer=yes"), 0);
    COR_CHECK_HAS(out, "h :status: 200\n");
    COR_CHECK_HAS(out, "xxxxxt x-trailer: yes\nend fin\n");
}
END_TEST

/* An extended CONNECT (RFC 9220, :protocol) to a server that did not
 * offer SETTINGS_ENABLE_CONNECT_PROTOCOL (0x8) is malformed (RFC 8441
 * 3, RFC 9114 4.1.2): the stream is reset H3_MESSAGE_ERROR (0x10e). */
START_TEST(test_an_extended_connect_is_refused_as_rfc_9220_says)
{
    ck_assert_int_eq(h3("--protocol=websocket", "/hello"), 1);
    COR_CHECK_HAS(out, "end reset 0x10e\n");
    COR_CHECK_HAS(out, "settings 0x");
    ck_assert_ptr_null(strstr(out, " 0x8 "));
    ck_assert_ptr_null(strstr(out, " 0x8\n"));
}
END_TEST

/* 64 KiB to a handler that streams its body, on a route of body_bytes
 * 1KiB, no content-length: refused 413 in the handler's stead (its
 * answer had not begun), as over HTTP/2; before, the handler's own
 * answer to its failed read (500) went. */
START_TEST(test_a_streamed_body_past_its_route_limit_is_answered_413)
{
    char command[512];

    snprintf(command, sizeof(command), "head -c 65536 /dev/zero > %s/big",
             server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    snprintf(command, sizeof(command), "-m POST -d %s/big", server.dir);
    ck_assert_int_eq(h3(command, "/small"), 0);
    COR_CHECK_HAS(out, "h :status: 413\n");
    COR_CHECK_HAS(out, "413 Content Too Large\nend fin\n");
    ck_assert_int_ge(corServerLogCount(&server, "POST /small"), 1);
}
END_TEST

COR_TEST_SUITE(corHttp3Flood)
{
    tcase_add_unchecked_fixture(tc, serverStart, serverStop);
    tcase_set_timeout(tc, 60);
    tcase_add_test(
        tc, test_a_rapid_reset_flood_is_cut_and_a_client_beside_is_served);
    tcase_add_test(tc, test_an_empty_data_flood_is_cut);
    tcase_add_test(tc, test_reserved_frame_types_are_cut);
    tcase_add_test(
        tc, test_a_priority_update_split_after_its_element_id_kills_nothing);
    tcase_add_test(tc, test_a_priority_update_flood_is_cut);
    tcase_add_test(tc, test_reserved_unidirectional_streams_stay_bounded);
    tcase_add_test(tc, test_trailers_reach_an_h3_client);
    tcase_add_test(tc, test_an_extended_connect_is_refused_as_rfc_9220_says);
    tcase_add_test(tc,
                   test_a_streamed_body_past_its_route_limit_is_answered_413);
}
