/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor-request against the real server: one request printed as curl -i
 * prints it, several at once on one connection, bodies, HEAD, a chunked
 * answer, a closed and an open loop load, a load on connections the
 * server closes, https:// and cors:// with their certificates checked,
 * and its failures.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CorServer server;
static char out[1 << 16];

static void
setUp(void)
{
    ck_assert_int_eq(corServerStartWith(&server, NULL), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
}

static int
run(const char* args)
{
    return corRequestTool(&server, args, out, sizeof(out));
}

static long
summaryCount(const char* label)
{
    return corSummaryCount(out, label);
}

START_TEST(test_one_request_is_printed_as_curl_i_prints_it)
{
    ck_assert_int_eq(run("http://127.0.0.1:{PORT}/hello"), 0);
    ck_assert_msg(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "Content-Length: 13\r\n"));
    ck_assert_ptr_nonnull(strstr(out, "\r\n\r\nhello, world\n"));
}
END_TEST

START_TEST(test_several_paths_go_at_once_and_come_back_in_order)
{
    const char* slow;
    const char* fast;
    long t = corNowMs();

    ck_assert_int_eq(run("http://127.0.0.1:{PORT}/sleep?ms=400 /hello "
                         "/sleep?ms=400 /nowhere"),
                     0);
    /* Pipelined on one connection: together, not one after the other. */
    ck_assert_int_lt(corNowMs() - t, 2000);
    slow = strstr(out, "# GET /sleep?ms=400\nHTTP/1.1 200");
    fast = strstr(out, "# GET /hello\nHTTP/1.1 200");
    ck_assert_msg(slow != NULL && fast != NULL && slow < fast, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "# GET /nowhere\nHTTP/1.1 404"));
}
END_TEST

START_TEST(test_a_json_body_is_posted)
{
    ck_assert_int_eq(run("--json '{\"a\": [1, 2]}' "
                         "http://127.0.0.1:{PORT}/echo"),
                     0);
    ck_assert_msg(strstr(out, "\r\n\r\n{\"a\": [1, 2]}") != NULL, "%s", out);
}
END_TEST

START_TEST(test_head_and_chunked_answers_are_framed)
{
    ck_assert_int_eq(run("-X HEAD http://127.0.0.1:{PORT}/hello /hello"), 0);
    ck_assert_ptr_nonnull(strstr(out, "# HEAD /hello\nHTTP/1.1 200"));
    /* The second answer follows the first head at once: no body read for
     * HEAD, or it would have taken the second answer's bytes. */
    ck_assert_int_eq(run("http://127.0.0.1:{PORT}/stream?n=3"), 0);
    ck_assert_ptr_nonnull(strstr(out, "Transfer-Encoding: chunked"));
    ck_assert_msg(strstr(out, "\r\n\r\npiece 0\npiece 1\npiece 2\n") != NULL,
                  "%s", out);
}
END_TEST

START_TEST(test_a_closed_loop_load_counts_answers_and_percentiles)
{
    ck_assert_int_eq(run("-c 2 --duration 1s "
                         "http://127.0.0.1:{PORT}/hello"),
                     0);
    ck_assert_int_gt(summaryCount("requests "), 100);
    ck_assert_int_eq(summaryCount("failed "), 0);
    ck_assert_int_eq(summaryCount("non-2xx "), 0);
    ck_assert_ptr_nonnull(strstr(out, "p99.9 "));
    ck_assert_int_eq(run("-c 2 --depth 4 --duration 1s "
                         "http://127.0.0.1:{PORT}/nowhere"),
                     0);
    ck_assert_int_eq(summaryCount("non-2xx "), summaryCount("requests "));
    ck_assert_int_eq(run("--duration 300ms http://127.0.0.1:{PORT}/hello"), 0);
    ck_assert_msg(strstr(out, ": 1 connection x 1 deep,") != NULL, "%s", out);
}
END_TEST

/* An answer with "Connection: close" retires its connection: the next
 * request goes on a new one. It used to go on the closing one and fail
 * (the server reset or closed it), which is how a reload's drain, which
 * answers each connection's next request with a close, looked lossy in
 * the soak test. */
START_TEST(test_a_load_leaves_a_connection_the_server_closes)
{
    ck_assert_int_eq(run("-c 2 --duration 1s -H 'Connection: close' "
                         "http://127.0.0.1:{PORT}/hello"),
                     0);
    ck_assert_msg(summaryCount("requests ") > 100, "%s", out);
    ck_assert_msg(summaryCount("failed ") == 0, "%s", out);
}
END_TEST

START_TEST(test_an_open_loop_load_keeps_its_rate_and_charges_a_stall)
{
    long requests;

    ck_assert_int_eq(run("-c 4 --rate 200 --duration 2s "
                         "http://127.0.0.1:{PORT}/hello"),
                     0);
    requests = summaryCount("requests ");
    ck_assert_msg(requests >= 380 && requests <= 420, "%s", out);
    /* One connection, a server that takes 50 ms, 30 due a second: they
     * queue, and their latency runs from when each was due. */
    ck_assert_int_eq(run("-c 1 --rate 30 --duration 1s "
                         "http://127.0.0.1:{PORT}/sleep?ms=50"),
                     0);
    ck_assert_msg(strtod(strstr(out, "max ") + 4, NULL) > 100.0, "%s", out);
}
END_TEST

/* Host is the URL's host and, off the scheme's default port, its port
 * (RFC 9110, 7.2), as curl sends it; a Host given with -H replaces it. */
START_TEST(test_host_says_the_port)
{
    char want[64];

    ck_assert_int_eq(run("http://127.0.0.1:{PORT}/waitecho?ms=0"), 0);
    snprintf(want, sizeof(want), "\nhost: 127.0.0.1:%d\n", server.port);
    ck_assert_msg(strcasestr(out, want) != NULL, "%s", out);
    ck_assert_int_eq(run("-H 'Host: b.example' "
                         "http://127.0.0.1:{PORT}/waitecho?ms=0"),
                     0);
    ck_assert_msg(strcasestr(out, "\nhost: b.example\n") != NULL
                      && strcasestr(out, "\nhost: 127.0.0.1") == NULL,
                  "%s", out);
}
END_TEST

START_TEST(test_failures_are_reported)
{
    ck_assert_int_eq(run("http://127.0.0.1:1/"), 1);
    ck_assert_ptr_nonnull(strstr(out, "Connection refused"));
    ck_assert_int_eq(
        run("--timeout 200ms http://127.0.0.1:{PORT}/sleep?ms=3000"), 1);
    ck_assert_ptr_nonnull(strstr(out, "no answer within the timeout"));
    ck_assert_int_eq(run("ftp://127.0.0.1/"), 2);
    ck_assert_ptr_nonnull(strstr(out, "unknown scheme 'ftp' (expected http, "
                                      "https, cor or cors)"));
    ck_assert_int_eq(run("-c 0 http://127.0.0.1:{PORT}/"), 2);
    ck_assert_int_eq(run("cor://127.0.0.1:{PORT}/hello"), 1);
    ck_assert_ptr_nonnull(strstr(out, "the peer speaks HTTP, not cor://"));
    ck_assert_int_eq(run("-k https://127.0.0.1:{PORT}/hello"), 1);
    ck_assert_ptr_nonnull(strstr(out, "the server does not speak TLS"));
}
END_TEST

/* https:// and cors://, verified against a CA file or the system's store
 * (which does not know the test CA), or not at all with -k. */
START_TEST(test_tls_urls_are_verified)
{
    char certs[64];
    char yaml[1024];
    char args[256];

    corServerStop(&server);
    corTestCertsMake(certs, sizeof(certs));
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 1 }\n"
             "listen:\n"
             "  - { protocol: https, address: 127.0.0.1:{PORT}, tls: "
             "{ certificate: %s/server.pem, key: %s/server.key } }\n"
             "  - { protocol: cors, address: 127.0.0.1:{PORT2}, tls: "
             "{ certificate: %s/server.pem, key: %s/server.key } }\n"
             "modules: [ { load: http }, { load: cor }, { load: hello } ]\n"
             "routes: [ { match: \"GET /hello\", handler: hello } ]\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             certs, certs, certs, certs);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
    snprintf(args, sizeof(args),
             "--cacert %s/ca.pem "
             "https://127.0.0.1:{PORT}/hello",
             certs);
    ck_assert_msg(run(args) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 200 OK"));
    snprintf(args, sizeof(args),
             "--cacert %s/ca.pem "
             "cors://127.0.0.1:{PORT2}/hello /hello",
             certs);
    ck_assert_msg(run(args) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "COR/1 200"));
    snprintf(args, sizeof(args),
             "--cacert %s/ca.pem -c 2 --duration 300ms "
             "https://127.0.0.1:{PORT}/hello",
             certs);
    ck_assert_msg(run(args) == 0, "%s", out);
    ck_assert_int_eq(summaryCount("failed "), 0);
    ck_assert_int_eq(run("https://127.0.0.1:{PORT}/hello"), 1);
    ck_assert_ptr_nonnull(strstr(out, "the server's certificate: unable to "
                                      "get local issuer certificate"));
    ck_assert_msg(run("-k https://127.0.0.1:{PORT}/hello") == 0, "%s", out);
    corTestCertsRemove(certs);
}
END_TEST

COR_TEST_SUITE(corRequestTool)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_one_request_is_printed_as_curl_i_prints_it);
    tcase_add_test(tc, test_several_paths_go_at_once_and_come_back_in_order);
    tcase_add_test(tc, test_a_json_body_is_posted);
    tcase_add_test(tc, test_head_and_chunked_answers_are_framed);
    tcase_add_test(tc, test_a_closed_loop_load_counts_answers_and_percentiles);
    tcase_add_test(tc,
                   test_an_open_loop_load_keeps_its_rate_and_charges_a_stall);
    tcase_add_test(tc, test_host_says_the_port);
    tcase_add_test(tc, test_failures_are_reported);
    tcase_add_test(tc, test_tls_urls_are_verified);
    tcase_add_test(tc, test_a_load_leaves_a_connection_the_server_closes);
}
