/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/2 client, through the forward module's `http2: on`, against
 * real servers: nghttpd (nghttp2-server) over TLS with ALPN and over h2c,
 * and another cor with an `http2: on` listener. An HTTP/1.1 client's
 * request goes upstream as h2 and the answer comes back as HTTP/1.1: a
 * small one, a body of several MB intact, a POST's body echoed; many
 * requests at once are streams of ONE upstream connection (nghttpd's -v
 * log names each session, the cor upstream counts its HTTP/2
 * connections) where they run on a loop, a connection each where they
 * run on workers; an upstream killed under requests in flight gives 502
 * at once, one that does not answer in time 504.
 */
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG_BYTES 5000000

static CorServer server;   /* the forward */
static CorServer upstream; /* a cor with an http2: on listener */
static char certs[64];
static char out[1 << 16];
static pid_t nghttpdTls;
static pid_t nghttpdPlain;
static int tlsPort;
static int plainPort;

static int shell(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* A shell command with $P (the forward's port) and $D (nghttpd's folder)
 * set; its output in out. */
static int
shell(const char* fmt, ...)
{
    char command[4096];
    char body[3072];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(command, sizeof(command), "P=%d D=%s/h2; %s 2>&1", server.port,
             certs, body);
    return corShell(command, out, sizeof(out));
}

/* nghttpd on port (TLS unless plain), serving $D, echoing uploads, its -v
 * log in $D/name.log; its PID. */
static pid_t
nghttpdStart(int port, bool plain, const char* name)
{
    pid_t pid;

    shell("cd $D && { nghttpd -v -d $D --echo-upload %s %d %s > %s.log "
          "2>&1 & echo $!; }",
          plain ? "--no-tls" : "", port,
          plain ? "" : "../server.key ../server.pem", name);
    pid = atoi(out);
    ck_assert_int_gt(pid, 0);
    for (int i = 0; i < 100; i++) {
        if (shell("curl -sk%s -o /dev/null http%s://127.0.0.1:%d/small",
                  plain ? " --http2-prior-knowledge" : "", plain ? "" : "s",
                  port)
            == 0) {
            return pid;
        }
        usleep(50000);
    }
    ck_abort_msg("nghttpd did not start on %d", port);
    return -1;
}

static void
nghttpdStop(pid_t* pid)
{
    if (*pid > 0) {
        kill(*pid, SIGTERM);
        *pid = 0;
    }
}

/* The sessions nghttpd's -v log names ("[id=N]"): its connections. */
static int
sessions(const char* name)
{
    shell("grep -o '^\\[id=[0-9]*\\]' $D/%s.log | sort -u | wc -l", name);
    return atoi(out);
}

static void
upstreamStart(void)
{
    ck_assert_int_eq(
        corServerStart(
            &upstream,
            "runtime: { loops: 2, workers: 16,"
            " coroutines: { enabled: {COROUTINES} } }\n"
            "listen:\n"
            "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
            "modules:\n"
            "  - { load: http }\n"
            "  - { load: {MODULES}/testkit.so }\n"
            "routes:\n"
            "  - { match: \"GET /sleep\", handler: waitecho }\n"
            "  - { match: \"GET /long/sleep\", handler: waitecho }\n"
            "  - { match: \"GET /bytes\", handler: bytes }\n"
            "  - { match: \"/echo\", handler: echo }\n"
            "  - { match: \"GET /metrics\", handler: metrics }\n"
            "limits: { body_bytes: 4MiB }\n"
            "log: { pid_file: {DIR}/cor.pid }\n"),
        0);
}

static void
setUp(void)
{
    char yaml[4096];

    corTestCertsMake(certs, sizeof(certs));
    snprintf(yaml, sizeof(yaml),
             "mkdir -p %s/h2 && echo small > %s/h2/small"
             " && head -c %d /dev/urandom > %s/h2/big",
             certs, certs, BIG_BYTES, certs);
    ck_assert_int_eq(corShell(yaml, out, sizeof(out)), 0);
    tlsPort = corFreePort();
    plainPort = corFreePort();
    nghttpdTls = nghttpdStart(tlsPort, false, "tls");
    nghttpdPlain = nghttpdStart(plainPort, true, "plain");
    upstreamStart();
    /* One loop: its one connection per upstream is the whole forward's. */
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 16,"
             " coroutines: { enabled: {COROUTINES} } }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
             "client: { ca_file: %s/ca.pem }\n"
             "limits: { body_bytes: 4MiB }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: forward\n"
             "    upstreams:\n"
             "      - { name: tls, servers: [ \"https://localhost:%d\" ],"
             " http2: on }\n"
             "      - { name: plain, servers: [ \"http://127.0.0.1:%d\" ],"
             " http2: on }\n"
             "      - { name: cor, servers: [ \"http://127.0.0.1:%d\" ],"
             " http2: on, read_timeout: 600ms }\n"
             "      - { name: long, servers: [ \"http://127.0.0.1:%d\" ],"
             " http2: on, read_timeout: 20s }\n"
             "routes:\n"
             "  - { match: \"/tls/*\", handler: tls }\n"
             "  - { match: \"/plain/*\", handler: plain }\n"
             "  - { match: \"/long/*\", handler: long }\n"
             "  - { match: \"/*\", handler: cor }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             certs, tlsPort, plainPort, upstream.port, upstream.port);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
    /* nghttpd serves $D/tls/... and $D/plain/... as the forward asks. */
    shell("cd $D && mkdir -p tls plain && cp small big tls/ && "
          "cp small big plain/");
}

static void
tearDown(void)
{
    corServerStop(&server);
    corServerStop(&upstream);
    nghttpdStop(&nghttpdTls);
    nghttpdStop(&nghttpdPlain);
    corTestCertsRemove(certs);
}

/* GET small and big, POST a body, through group (tls or plain). */
static void
nghttpdExchanges(const char* group)
{
    ck_assert_int_eq(shell("curl -sS -w ' %%{http_code} %%{http_version}' "
                           "http://127.0.0.1:$P/%s/small",
                           group),
                     0);
    ck_assert_str_eq(out, "small\n 200 1.1");
    ck_assert_int_eq(shell("curl -sS http://127.0.0.1:$P/%s/big "
                           "| cmp - $D/big && echo same",
                           group),
                     0);
    ck_assert_str_eq(out, "same\n");
    ck_assert_int_eq(shell("head -c 300000 $D/big > $D/post && curl -sS "
                           "--data-binary @$D/post "
                           "http://127.0.0.1:$P/%s/small | cmp - $D/post "
                           "&& echo same",
                           group),
                     0);
    ck_assert_str_eq(out, "same\n");
    /* An h2 client of the forward gets the h2 answer too. */
    ck_assert_int_eq(shell("curl -sS --http2-prior-knowledge -o /dev/null "
                           "-w '%%{http_code} %%{http_version}' "
                           "http://127.0.0.1:$P/%s/small",
                           group),
                     0);
    ck_assert_str_eq(out, "200 2");
}

START_TEST(test_nghttpd_over_tls_with_alpn)
{
    nghttpdExchanges("tls");
}
END_TEST

START_TEST(test_nghttpd_over_h2c)
{
    nghttpdExchanges("plain");
}
END_TEST

/* 400 requests, 40 at a time, from 8 HTTP/1.1 connections: on a loop,
 * streams of one upstream connection; on workers, a connection each. */
START_TEST(test_many_requests_share_one_upstream_connection)
{
    int before = sessions("plain");
    int used;

    ck_assert_int_eq(shell("h2load --h1 -n 400 -c 8 -m 5 "
                           "http://127.0.0.1:$P/plain/small"),
                     0);
    ck_assert_msg(strstr(out, "400 succeeded") != NULL, "%s", out);
    usleep(200000);
    used = sessions("plain") - before;
    if (corTestCoroutines()) {
        ck_assert_int_eq(used, 1);
    } else {
        ck_assert_int_ge(used, 1);
    }
    ck_assert_int_eq(shell("h2load --h1 -n 400 -c 8 -m 5 "
                           "http://127.0.0.1:$P/bytes?n=100"),
                     0);
    ck_assert_msg(strstr(out, "400 succeeded") != NULL, "%s", out);
    if (corTestCoroutines()) {
        ck_assert_int_eq(corMetric(upstream.port,
                                   "cor_http2_connections_total"),
                         1);
    }
}
END_TEST

START_TEST(test_cor_upstream_large_answer_and_post)
{
    ck_assert_int_eq(shell("curl -sS http://127.0.0.1:$P/bytes?n=%d "
                           "| wc -c",
                           BIG_BYTES),
                     0);
    ck_assert_int_eq(atoi(out), BIG_BYTES);
    ck_assert_int_eq(shell("head -c 1000000 $D/big > $D/post && curl -sS "
                           "--data-binary @$D/post http://127.0.0.1:$P/echo "
                           "| cmp - $D/post && echo same"),
                     0);
    ck_assert_str_eq(out, "same\n");
}
END_TEST

START_TEST(test_upstream_killed_in_flight_is_502)
{
    pid_t generation = corServerGeneration(&upstream);
    long start;

    shell("for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%%{http_code}\\n'"
          " \"http://127.0.0.1:$P/long/sleep?ms=15000\" > $D/killed.$i & "
          "done; "
          "echo started");
    usleep(400000);
    start = corNowMs();
    kill(upstream.pid, SIGKILL);
    kill(generation, SIGKILL);
    waitpid(upstream.pid, NULL, 0);
    upstream.pid = 0;
    ck_assert_int_eq(shell("wait; sleep 0.1; for i in 1 2 3 4 5 6; do "
                           "while [ ! -s $D/killed.$i ]; do sleep 0.05; done;"
                           " done; cat $D/killed.*"),
                     0);
    ck_assert_str_eq(out, "502\n502\n502\n502\n502\n502\n");
    ck_assert_int_lt(corNowMs() - start, 2000);
}
END_TEST

START_TEST(test_upstream_too_slow_is_504)
{
    long start = corNowMs();

    ck_assert_int_eq(shell("curl -sS -o /dev/null -w '%%{http_code}' "
                           "\"http://127.0.0.1:$P/sleep?ms=3000\""),
                     0);
    ck_assert_str_eq(out, "504");
    ck_assert_int_lt(corNowMs() - start, 2000);
    /* The forward's own deadline, not an answer of the upstream's. */
    ck_assert_int_ge(corServerLogCount(&server, "read timeout (600 ms)"), 1);
    /* The connection stays for the next request. */
    ck_assert_int_eq(shell("curl -sS -o /dev/null -w '%%{http_code}' "
                           "\"http://127.0.0.1:$P/bytes?n=10\""),
                     0);
    ck_assert_str_eq(out, "200");
}
END_TEST

COR_TEST_SUITE(corHttp2Client)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_nghttpd_over_tls_with_alpn);
    tcase_add_test(tc, test_nghttpd_over_h2c);
    tcase_add_test(tc, test_many_requests_share_one_upstream_connection);
    tcase_add_test(tc, test_cor_upstream_large_answer_and_post);
    tcase_add_test(tc, test_upstream_killed_in_flight_is_502);
    tcase_add_test(tc, test_upstream_too_slow_is_504);
}
