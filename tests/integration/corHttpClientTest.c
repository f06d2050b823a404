/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP client (corHttpClient.h), against the real binary in both
 * modes: the testkit's /client, /fanout and /fanleave make exchanges from
 * a handler (a coroutine, or a worker with ?worker=1 and in blocking mode)
 * with upstreams this test starts and stops by PID: the scripted upstream
 * tests/integration/corHttpUpstream.c (each framing, 1xx, HEAD/204/304, a
 * pooled connection lost, a peer dying mid-body, a malformed head, slow
 * answers), a cor https upstream with the test CA, and a listener whose
 * backlog is full (a connect that never completes).
 */
#include "corTest.h"
#include "corServer.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static CorServer server;
static CorServer tlsUpstream;
static pid_t upstreamPid;
static int upstreamPort;
static char buf[1 << 16];
static char certs[256];

static const char* configFormat =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "  stop_timeout: 5s\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "client: { connect_timeout: 2s, keepalive_per_peer: 4, "
    "idle_timeout: 30s, ca_file: %s/ca.pem }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "  - load: forward\n"
    "    upstreams: [ { name: up, servers: [ \"http://127.0.0.1:%d\" ] } ]\n"
    "routes:\n"
    "  - { match: \"GET /client\", handler: client }\n"
    "  - { match: \"GET /cl\", handler: up }\n"
    "  - { match: \"GET /chunked\", handler: up }\n"
    "  - { match: \"GET /eof\", handler: up }\n"
    "  - { match: \"GET /die\", handler: up }\n"
    "  - { match: \"GET /conns\", handler: up }\n"
    "  - { match: \"GET /fanout\", handler: fanout }\n"
    "  - { match: \"GET /fanslow\", handler: fanout, timeout: 300ms }\n"
    "  - { match: \"GET /fanleave\", handler: fanleave }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

/* The scripted upstream, beside this program. */
static void
upstreamStart(void)
{
    upstreamPid = corUpstreamStart(&upstreamPort);
    ck_assert_int_gt(upstreamPort, 0);
}

static void
setUp(void)
{
    char yaml[4096];

    corTestCertsShared(certs, sizeof(certs));
    upstreamStart();
    snprintf(yaml, sizeof(yaml), configFormat, certs, upstreamPort);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
    corServerStop(&tlsUpstream);
    corUpstreamStop(&upstreamPid);
}

/* GET handler?url=http://127.0.0.1:UPSTREAM/path&extra; extra may be "".
 * The path is escaped for the query ('?' '&' '='). Returns the status. */
static int
ask(const char* handler, const char* path, const char* extra)
{
    char escaped[256];
    char req[1024];
    size_t j = 0;

    for (const char* p = path; *p != '\0' && j < sizeof(escaped) - 4; p++) {
        if (*p == '?' || *p == '&' || *p == '=') {
            j += (size_t)snprintf(escaped + j, 4, "%%%02X", *p);
        } else {
            escaped[j++] = *p;
        }
    }
    escaped[j] = '\0';
    snprintf(req, sizeof(req),
             "GET /%s?url=http://127.0.0.1:%d%s%s%s "
             "HTTP/1.1\r\nHost: t\r\n\r\n",
             handler, upstreamPort, escaped, extra[0] ? "&" : "", extra);
    return corRequest(server.port, req, buf, sizeof(buf));
}

static int
client(const char* path, const char* extra)
{
    return ask("client", path, extra);
}

#define CHECK_BODY_HAS(text)                                                   \
    ck_assert_msg(strstr(corBody(buf), (text)) != NULL, "%s: %s", (text),      \
                  corBody(buf))

/* Each extra: the coroutine (or blocking mode's worker), and a worker. */
static const char* modes[] = { "", "worker=1" };

/* ---- Framing ------------------------------------------------------------- */

/* GET path through modules/forward, whose handler reads the answer in
 * pieces (corHttpClientOpen, BodyRead, Close); curl's exit status. */
static int
streamed(const char* path)
{
    char command[256];

    snprintf(command, sizeof(command),
             "curl -s --max-time 10 "
             "'http://127.0.0.1:%d%s' 2>&1",
             server.port, path);
    return corShell(command, buf, sizeof(buf));
}

/* Connections the upstream accepted so far, asked through the proxy. */
static int
upstreamConns(void)
{
    ck_assert_int_eq(streamed("/conns"), 0);
    return atoi(buf);
}

/* Each framing read in pieces; the connection goes back to the pool when
 * its answer was read to the end (no new connection for the next
 * exchanges), and not after an answer that ends with the connection. */
START_TEST(test_streamed_read_each_framing)
{
    int conns = upstreamConns();

    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(streamed("/cl"), 0);
        ck_assert_str_eq(buf, "hello");
        ck_assert_int_eq(streamed("/chunked"), 0);
        ck_assert_str_eq(buf, "hello world");
    }
    ck_assert_int_eq(upstreamConns(), conns);
    ck_assert_int_eq(streamed("/eof"), 0);
    ck_assert_str_eq(buf, "to the end");
    ck_assert_int_eq(upstreamConns(), conns + 1);
}
END_TEST

/* A peer that dies mid-body: the read fails (the proxy's client sees a
 * cut answer, curl's 18) and the error names the peer and the place. */
START_TEST(test_streamed_read_peer_dies_mid_body)
{
    char command[512];
    int conns = upstreamConns();

    ck_assert_int_eq(streamed("/die"), 18);
    snprintf(command, sizeof(command),
             "127.0.0.1:%d: the peer closed the "
             "connection in the middle of the body",
             upstreamPort);
    ck_assert_int_eq(corServerLogCount(&server, command), 1);
    /* The next exchange goes on, on a new connection. */
    ck_assert_int_eq(upstreamConns(), conns + 1);
}
END_TEST

START_TEST(test_body_framings)
{
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(client("/cl", modes[m]), 200);
        CHECK_BODY_HAS("status=200 ");
        CHECK_BODY_HAS("len=5 body=hello x-test=cl");
        ck_assert_int_eq(client("/chunked", modes[m]), 200);
        CHECK_BODY_HAS("len=11 body=hello world x-test=chunked");
        ck_assert_int_eq(client("/eof", modes[m]), 200);
        CHECK_BODY_HAS("len=10 body=to the end x-test=eof");
    }
}
END_TEST

START_TEST(test_informational_answers_skipped)
{
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(client("/1xx", modes[m]), 200);
        CHECK_BODY_HAS("status=200 ");
        CHECK_BODY_HAS("len=9 body=after 1xx x-test=1xx");
        ck_assert_int_eq(client("/1xx", m ? "worker=1&method=POST&body=abc"
                                          : "method=POST&body=abc"),
                         200);
        CHECK_BODY_HAS("body=after 1xx");
    }
}
END_TEST

/* No body is read after them: the connection carries the next exchange. */
START_TEST(test_no_body_for_head_204_304)
{
    ck_assert_int_eq(client("/cl", "method=HEAD"), 200);
    CHECK_BODY_HAS("status=200 reused=0 retried=0 len=0 body= x-test=cl");
    ck_assert_int_eq(client("/204", ""), 200);
    CHECK_BODY_HAS("status=204 reused=1 retried=0 len=0 body= x-test=204");
    ck_assert_int_eq(client("/304", ""), 200);
    CHECK_BODY_HAS("status=304 reused=1 retried=0 len=0 body= x-test=304");
    ck_assert_int_eq(client("/cl", ""), 200);
    CHECK_BODY_HAS("status=200 reused=1 retried=0 len=5 body=hello");
}
END_TEST

START_TEST(test_malformed_answer_refused)
{
    ck_assert_int_eq(client("/bad", ""), 502);
    CHECK_BODY_HAS("rc=-71 ");
    CHECK_BODY_HAS("a malformed answer: an ambiguous framing");
}
END_TEST

/* ---- Connections --------------------------------------------------------- */

/* The upstream closes the pooled connection when the next request comes
 * on it: sent once more, on a new connection, and answered. */
START_TEST(test_pooled_connection_lost_is_retried_once)
{
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(client("/drop", modes[m]), 200);
        CHECK_BODY_HAS("body=drop");
        ck_assert_int_eq(client("/cl", modes[m]), 200);
        CHECK_BODY_HAS("status=200 reused=0 retried=1 len=5 body=hello");
        /* The new connection went to the pool in its turn. */
        ck_assert_int_eq(client("/cl", modes[m]), 200);
        CHECK_BODY_HAS("reused=1 retried=0");
    }
}
END_TEST

/* A query with no path (RFC 3986 6.2.3) is read by the one URL parser of
 * every client as the HTTP client always read it: the request asks for
 * "/?..." (the upstream echoes its head). */
START_TEST(test_a_query_without_a_path_asks_for_the_root)
{
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(client("?q=1/echo", modes[m]), 200);
        CHECK_BODY_HAS("body=GET /?q=1/echo HTTP/1.1");
    }
}
END_TEST

/* The same loss under a POST that was written whole: the upstream may
 * have acted on it, so it is not sent again (502, -ECONNRESET), and the
 * upstream read it once. */
START_TEST(test_written_post_is_not_sent_again)
{
    for (int m = 0; m < 2; m++) {
        char extra[64];

        ck_assert_int_eq(client("/drop", modes[m]), 200);
        snprintf(extra, sizeof(extra), "method=POST&body=once%s%s",
                 m ? "&" : "", modes[m]);
        ck_assert_int_eq(client("/echo", extra), 502);
        CHECK_BODY_HAS("rc=-104 ");
        ck_assert_int_eq(client("/posts", modes[m]), 200);
        ck_assert_msg(strstr(corBody(buf), m == 0 ? "body=1 " : "body=2 ")
                          != NULL,
                      "%s", corBody(buf));
    }
}
END_TEST

/* An upstream sends a second answer nobody asked for, 20 ms after the
 * first (a HEAD answered with a body, a body longer than its length):
 * the connection never carries it to the next exchange, which gets its
 * own answer. The pool of a loop closes it when the bytes come, the
 * shared one sees them when it is taken. */
START_TEST(test_surplus_never_reaches_the_next_exchange)
{
    for (int m = 0; m < 2; m++) {
        for (int round = 0; round < 4; round++) {
            char extra[64];

            snprintf(extra, sizeof(extra), "%s%s",
                     round % 2 ? "method=HEAD" : "",
                     round % 2 && m ? "&worker=1" : modes[m]);
            ck_assert_int_eq(client("/surplus", extra), 200);
            CHECK_BODY_HAS("x-test=surplus");
            usleep(60 * 1000);
            ck_assert_int_eq(client("/cl", modes[m]), 200);
            CHECK_BODY_HAS("body=hello x-test=cl");
        }
    }
}
END_TEST

/* A peer that dies mid-body: a clean error, never retried, and the next
 * exchange is fine. */
START_TEST(test_peer_dies_mid_body)
{
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(client("/die", modes[m]), 502);
        CHECK_BODY_HAS("rc=-104 ");
        CHECK_BODY_HAS("the peer closed the connection in the middle of "
                       "the body");
        ck_assert_int_eq(client("/cl", modes[m]), 200);
        CHECK_BODY_HAS("retried=0 len=5 body=hello");
    }
}
END_TEST

START_TEST(test_size_limit)
{
    ck_assert_int_eq(client("/big?n=100000", "max=1000"), 502);
    CHECK_BODY_HAS("rc=-27 ");
    CHECK_BODY_HAS("over the limit of 1000 bytes");
    ck_assert_int_eq(client("/big?n=1000", "max=1000"), 200);
    CHECK_BODY_HAS("len=1000 ");
    /* Within the default limit (8 MiB). */
    ck_assert_int_eq(client("/big?n=3000000", "worker=1"), 200);
    CHECK_BODY_HAS("len=3000000 ");
}
END_TEST

/* ---- Deadlines ----------------------------------------------------------- */

START_TEST(test_first_byte_deadline)
{
    for (int m = 0; m < 2; m++) {
        char extra[64];
        long start = corNowMs();

        snprintf(extra, sizeof(extra), "first_ms=300%s%s", m ? "&" : "",
                 modes[m]);
        ck_assert_int_eq(client("/sleep?ms=1500", extra), 504);
        CHECK_BODY_HAS("no answer within the read timeout (300 ms)");
        ck_assert_int_lt(corNowMs() - start, 1200);
    }
}
END_TEST

/* The answer's first bytes come, then nothing: halfway through the
 * status line, after a 100 Continue, or halfway through the body. The
 * read timeout (by default the first byte's) bounds every wait between
 * bytes, head and body. */
START_TEST(test_stall_after_a_byte_is_bounded)
{
    static const char* const cases[][3] = {
        { "/stall?ms=4000", "first_ms=300", "answer's head" },
        { "/stall1xx?ms=4000", "first_ms=300", "answer's head" },
        { "/stall1xx?ms=4000", "first_ms=9000&read_ms=300", "answer's head" },
        { "/stallbody?ms=4000", "first_ms=300", "body" },
        { "/stallbody?ms=4000", "read_ms=300", "body" },
    };

    for (int m = 0; m < 2; m++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            char extra[96];
            char said[96];
            long start = corNowMs();

            snprintf(extra, sizeof(extra), "%s%s%s", cases[i][1], m ? "&" : "",
                     modes[m]);
            ck_assert_int_eq(client(cases[i][0], extra), 504);
            snprintf(said, sizeof(said),
                     "no byte of the %s within the "
                     "read timeout (300 ms)",
                     cases[i][2]);
            CHECK_BODY_HAS(said);
            ck_assert_int_lt(corNowMs() - start, 3000);
        }
    }
}
END_TEST

/* The first byte comes at once, the rest trickles past the total. */
START_TEST(test_total_deadline)
{
    for (int m = 0; m < 2; m++) {
        char extra[64];
        long start = corNowMs();

        snprintf(extra, sizeof(extra), "total_ms=400&first_ms=300%s%s",
                 m ? "&" : "", modes[m]);
        ck_assert_int_eq(client("/trickle?ms=2000", extra), 504);
        CHECK_BODY_HAS("exceeded its total timeout (400 ms)");
        ck_assert_int_lt(corNowMs() - start, 1500);
    }
}
END_TEST

/* A listener whose accept queue is full: the connect never completes. */
START_TEST(test_connect_deadline)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char req[512];
    long start;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr*)&addr, sizeof(addr)), 0);
    ck_assert_int_eq(listen(fd, 0), 0);
    getsockname(fd, (struct sockaddr*)&addr, &len);
    ck_assert_int_eq(connect(filler, (struct sockaddr*)&addr, sizeof(addr)), 0);
    for (int m = 0; m < 2; m++) {
        snprintf(req, sizeof(req),
                 "GET /client?url=http://127.0.0.1:%d/"
                 "&connect_ms=300%s%s HTTP/1.1\r\nHost: t\r\n\r\n",
                 ntohs(addr.sin_port), m ? "&" : "", modes[m]);
        start = corNowMs();
        ck_assert_int_eq(corRequest(server.port, req, buf, sizeof(buf)), 504);
        CHECK_BODY_HAS("rc=-110 ");
        ck_assert_int_lt(corNowMs() - start, 1500);
    }
    close(filler);
    close(fd);
}
END_TEST

/* ---- TLS ----------------------------------------------------------------- */

START_TEST(test_https_with_the_test_ca)
{
    char req[512];

    ck_assert_int_eq(corServerStartHttpsHello(&tlsUpstream, certs), 0);
    for (int m = 0; m < 2; m++) {
        snprintf(req, sizeof(req),
                 "GET /client?url=https://localhost:%d/"
                 "hello%s%s HTTP/1.1\r\nHost: t\r\n\r\n",
                 tlsUpstream.port, m ? "&" : "", modes[m]);
        ck_assert_int_eq(corRequest(server.port, req, buf, sizeof(buf)), 200);
        CHECK_BODY_HAS("status=200 ");
        CHECK_BODY_HAS("body=hello, world");
    }
    /* The certificate names 127.0.0.1 too. */
    snprintf(req, sizeof(req),
             "GET /client?url=https://127.0.0.1:%d/hello "
             "HTTP/1.1\r\nHost: t\r\n\r\n",
             tlsUpstream.port);
    ck_assert_int_eq(corRequest(server.port, req, buf, sizeof(buf)), 200);
    CHECK_BODY_HAS("body=hello, world");
}
END_TEST

/* ---- Start now, collect later -------------------------------------------- */

/* Four upstream calls of 1 s each answer in about 1 s, from a coroutine
 * (its exchanges are coroutines of the loop) and from a worker (they run
 * on the client's threads). */
START_TEST(test_fanout_takes_the_slowest_not_the_sum)
{
    for (int m = 0; m < 2; m++) {
        long start = corNowMs();
        long took;

        ck_assert_int_eq(ask("fanout", "/sleep?ms=1000",
                             m ? "n=4&worker=1" : "n=4"),
                         200);
        took = corNowMs() - start;
        CHECK_BODY_HAS("n=4 started=4 ok=4 ");
        CHECK_BODY_HAS("statuses=200,200,200,200 ");
        ck_assert_msg(took >= 950 && took < 1800, "4 x 1 s took %ld ms", took);
    }
}
END_TEST

/* The connections from cor to the upstream that are established. */
static int
upstreamConnections(void)
{
    char command[256];
    char out[64];

    snprintf(command, sizeof(command),
             "ss -Htn state established "
             "'( dport = :%d )' | wc -l",
             upstreamPort);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    return atoi(out);
}

static void
checkConnectionsGone(void)
{
    long start = corNowMs();

    while (upstreamConnections() > 0 && corNowMs() - start < 1000) {
        usleep(20000);
    }
    ck_assert_int_eq(upstreamConnections(), 0);
}

/* A handler that returns without collecting: its request's end cancels
 * what it started (their connections close at once, not after 3 s). */
START_TEST(test_uncollected_exchanges_cancelled_at_the_end)
{
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(ask("fanleave", "/sleep?ms=3000",
                             m ? "n=3&worker=1" : "n=3"),
                         200);
        CHECK_BODY_HAS("started=3");
        checkConnectionsGone();
    }
}
END_TEST

/* A request past its deadline (300 ms) cancels the exchanges it waits
 * for: answered 504 at once, their connections closed. */
START_TEST(test_deadline_cancels_started_exchanges)
{
    for (int m = 0; m < 2; m++) {
        char req[512];
        long start = corNowMs();

        snprintf(req, sizeof(req),
                 "GET /fanslow?n=3&url=http://127.0.0.1:"
                 "%d/sleep%%3Fms%%3D3000%s%s HTTP/1.1\r\nHost: t\r\n\r\n",
                 upstreamPort, m ? "&" : "", modes[m]);
        ck_assert_int_eq(corRequest(server.port, req, buf, sizeof(buf)), 504);
        ck_assert_int_lt(corNowMs() - start, 1500);
        checkConnectionsGone();
    }
}
END_TEST

COR_TEST_SUITE(corHttpClient)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_body_framings);
    tcase_add_test(tc, test_a_query_without_a_path_asks_for_the_root);
    tcase_add_test(tc, test_streamed_read_each_framing);
    tcase_add_test(tc, test_streamed_read_peer_dies_mid_body);
    tcase_add_test(tc, test_informational_answers_skipped);
    tcase_add_test(tc, test_no_body_for_head_204_304);
    tcase_add_test(tc, test_malformed_answer_refused);
    tcase_add_test(tc, test_pooled_connection_lost_is_retried_once);
    tcase_add_test(tc, test_written_post_is_not_sent_again);
    tcase_add_test(tc, test_surplus_never_reaches_the_next_exchange);
    tcase_add_test(tc, test_peer_dies_mid_body);
    tcase_add_test(tc, test_stall_after_a_byte_is_bounded);
    tcase_add_test(tc, test_size_limit);
    tcase_add_test(tc, test_first_byte_deadline);
    tcase_add_test(tc, test_total_deadline);
    tcase_add_test(tc, test_connect_deadline);
    tcase_add_test(tc, test_https_with_the_test_ca);
    tcase_add_test(tc, test_fanout_takes_the_slowest_not_the_sum);
    tcase_add_test(tc, test_uncollected_exchanges_cancelled_at_the_end);
    tcase_add_test(tc, test_deadline_cancels_started_exchanges);
}
