/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cor:// server against the real binary, with cor-request as the
 * client: answers in the order they finish, the same handlers and bodies
 * as over HTTP, many clients at once with requests behind their HELLO,
 * the in-flight limit, garbage that closes only its connection, a reload
 * under load that loses nothing, TLS, and the limits of every request
 * (with tests/cor/corRawClient.py, which sends what cor-request cannot):
 * 413 and 431 on their streams, a body past body_bytes never read whole,
 * a flood of large requests in bounded memory.
 */
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static char out[1 << 16];
static char out2[1 << 16];

/* HTTP on {PORT}, cor:// on {PORT2}; top is more YAML at the top level
 * (limits), extra more for the cor module's mapping. */
static int
startWith(const char* top, const char* extra)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 2, workers: 2,\n"
             "           coroutines: { enabled: {COROUTINES} } }\n"
             "%s"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
             "  - { protocol: cor, address: 127.0.0.1:{PORT2} }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: cor%s }\n"
             "  - { load: hello }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /sleep\", handler: sleep }\n"
             "  - { match: \"/echo\", handler: echo }\n"
             "  - { match: \"GET /stream\", handler: stream }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "log: { pid_file: {DIR}/cor.pid, access: {DIR}/access.log,\n"
             "       access_format: json }\n",
             top, extra);
    return corServerStart(&server, yaml);
}

static int
start(const char* extra)
{
    return startWith("", extra);
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

/* The access log's line holding needle, waited for (a line is written
 * when its answer went out, which may follow the client's read). */
static bool
accessLogHas(const char* needle)
{
    char path[512];
    char line[2048];

    snprintf(path, sizeof(path), "%s/access.log", server.dir);
    for (long t = corNowMs(); corNowMs() - t < 5000; usleep(20 * 1000)) {
        FILE* f = fopen(path, "r");

        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            if (strstr(line, needle) != NULL) {
                fclose(f);
                return true;
            }
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    return false;
}

START_TEST(test_a_request_is_answered)
{
    ck_assert_int_eq(start(""), 0);
    ck_assert_int_eq(run("cor://127.0.0.1:{PORT2}/hello"), 0);
    ck_assert_str_eq(out, "COR/1 200\r\nContent-Type: text/plain\r\n\r\n"
                          "hello, world\n");
}
END_TEST

/* Every protocol's requests are in the access log, the same way: a cor://
 * one with its body bytes, and a stream cut midway (over HTTP here) says
 * it was, with the bytes that went out. */
START_TEST(test_the_access_log_has_every_protocol)
{
    char command[512];

    ck_assert_int_eq(start(""), 0);
    ck_assert_int_eq(run("cor://127.0.0.1:{PORT2}/hello?x=1"), 0);
    ck_assert(accessLogHas("\"method\":\"GET\",\"target\":\"/hello?x=1\","
                           "\"protocol\":\"COR/1\",\"status\":200,"
                           "\"bytes\":13,\"complete\":true"));
    snprintf(command, sizeof(command),
             "curl -s -o /dev/null "
             "'http://127.0.0.1:%d/stream?n=3&cut=1'",
             server.port);
    corShell(command, out, sizeof(out));
    ck_assert(accessLogHas("\"target\":\"/stream?n=3&cut=1\","
                           "\"protocol\":\"HTTP/1.1\",\"status\":200,"
                           "\"bytes\":24,\"complete\":false"));
}
END_TEST

/* The spec's first behaviour: on one connection a slow request, then a
 * fast one: the fast one is answered first. */
START_TEST(test_answers_go_out_in_the_order_they_finish)
{
    const char* slow;
    const char* fast;
    long t = corNowMs();

    ck_assert_int_eq(start(""), 0);
    ck_assert_int_eq(run("cor://127.0.0.1:{PORT2}/sleep?ms=1500 /hello "
                         "/nowhere"),
                     0);
    ck_assert_int_lt(corNowMs() - t, 3000);
    slow = strstr(out, "# GET /sleep?ms=1500\nCOR/1 200");
    fast = strstr(out, "# GET /hello\nCOR/1 200");
    ck_assert_msg(slow != NULL && fast != NULL && fast < slow, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "# GET /nowhere\nCOR/1 404"));
}
END_TEST

/* A body comes back byte for byte as over HTTP, whatever it is. */
static void
sameBody(const char* args)
{
    char cor[512];
    char http[512];
    const char* a;
    const char* b;

    snprintf(cor, sizeof(cor), "%s cor://127.0.0.1:{PORT2}/echo", args);
    snprintf(http, sizeof(http), "%s http://127.0.0.1:{PORT}/echo", args);
    ck_assert_int_eq(run(cor), 0);
    ck_assert_int_eq(corRequestTool(&server, http, out2, sizeof(out2)), 0);
    a = strstr(out, "\r\n\r\n");
    b = strstr(out2, "\r\n\r\n");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(a, b);
}

START_TEST(test_bodies_come_back_as_over_http)
{
    char command[512];

    ck_assert_int_eq(start(""), 0);
    sameBody("--json '{\"a\":[1,2.5,\"x\"],\"b\":null}'");
    sameBody("--json '{ \"spaced\" : true }'");
    sameBody("-d 'plain text, not JSON'");
    snprintf(command, sizeof(command),
             "printf 'bin\\000ary\\377' > "
             "%s/binary",
             server.dir);
    ck_assert_int_eq(corShell(command, NULL, 0), 0);
    sameBody("-d @{DIR}/binary");
    ck_assert_int_eq(run("cor://127.0.0.1:{PORT2}/stream?n=3"), 0);
    ck_assert_ptr_nonnull(strstr(out, "\r\n\r\npiece 0\npiece 1\npiece 2\n"));
}
END_TEST

/* The spec's last behaviour: clients that connect at once, each with its
 * requests right behind its HELLO. */
START_TEST(test_64_clients_at_once_behind_their_hello)
{
    ck_assert_int_eq(start(""), 0);
    ck_assert_int_eq(run("-c 64 --depth 4 --duration 1s "
                         "cor://127.0.0.1:{PORT2}/hello"),
                     0);
    ck_assert_int_gt(corSummaryCount(out, "requests "), 64 * 4);
    ck_assert_int_eq(corSummaryCount(out, "failed "), 0);
    ck_assert_int_eq(corSummaryCount(out, "non-2xx "), 0);
}
END_TEST

START_TEST(test_past_max_in_flight_a_request_gets_503)
{
    ck_assert_int_eq(start(", max_in_flight: 2"), 0);
    ck_assert_int_eq(run("cor://127.0.0.1:{PORT2}/sleep?ms=300 "
                         "/sleep?ms=300 /hello"),
                     0);
    ck_assert_msg(strstr(out, "# GET /hello\nCOR/1 503") != NULL, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "too many requests in flight"));
}
END_TEST

/* The spec's HELLO, then bytes that break a frame: each closes its
 * connection, and only it. */
static const unsigned char hello[] = {
    0xc0, 0x4f, 0x52, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x24, 0x00, 0x00, 0x00, 0x06, 0x22, 0x32, 0x00, 0x07, 'v',
    'e',  'r',  's',  'i',  'o',  'n',  0x00, 0x12, 0x00, 0x05, 't',
    'e',  'r',  'm',  's',  0x00, 0x12, 0x00, 0x0a, 'n',  'a',  'm',
    'e',  's',  'p',  'a',  'c',  'e',  's',  0x00,
};

/* A connection that sent HELLO and then bad: the server closes it. */
static void
refused(const void* bad, size_t len, bool afterHello)
{
    int fd = corConnect(server.port2);

    ck_assert_int_ge(fd, 0);
    if (afterHello) {
        ck_assert_int_eq(corSendAll(fd, hello, sizeof(hello)), 0);
    }
    ck_assert_int_eq(corSendAll(fd, bad, len), 0);
    ck_assert(corPeerClosed(fd, 2000));
    close(fd);
}

START_TEST(test_a_bad_frame_closes_only_its_connection)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    /* Type 42; a length of 2 GiB; a REQUEST whose tree is a bare tag 0. */
    static const unsigned char badType[] = { 0xc0, 0x4f, 0x52, 0x01, 42, 0,
                                             0,    0,    1,    0,    0,  0,
                                             0,    0,    0,    0 };
    static const unsigned char tooLong[] = { 0xc0, 0x4f, 0x52, 0x01, 3, 0,
                                             0,    0,    1,    0,    0, 0,
                                             0,    0,    0,    0x80 };
    static const unsigned char badTree[] = { 0xc0, 0x4f, 0x52, 0x01, 3, 0,
                                             0,    0,    1,    0,    0, 0,
                                             1,    0,    0,    0,    0 };
    FILE* load;
    char command[4096];

    ck_assert_int_eq(start(""), 0);
    /* A load on connections of its own runs across all the refusals. */
    corRequestToolCommand(&server,
                          "-c 2 --duration 2s "
                          "cor://127.0.0.1:{PORT2}/hello",
                          command, sizeof(command));
    load = popen(command, "r");
    ck_assert_ptr_nonnull(load);
    refused(http, sizeof(http) - 1, false);
    refused(badType, sizeof(badType), true);
    refused(tooLong, sizeof(tooLong), true);
    refused(badTree, sizeof(badTree), true);
    out[fread(out, 1, sizeof(out) - 1, load)] = '\0';
    ck_assert_int_eq(pclose(load), 0);
    ck_assert_msg(corSummaryCount(out, "failed ") == 0, "%s", out);
    ck_assert_int_eq(run("cor://127.0.0.1:{PORT}/hello"), 1);
}
END_TEST

/* PING is answered PONG with its id; a connection with nothing due is
 * closed at idle_timeout, and a PING keeps one alive. */
START_TEST(test_ping_and_the_idle_timeout)
{
    static const unsigned char ping[] = { 0xc0, 0x4f, 0x52, 0x01, 8, 0, 0, 0,
                                          7,    0,    0,    0,    0, 0, 0, 0 };
    unsigned char got[sizeof(hello) + sizeof(ping)];
    size_t have = 0;
    int fd;

    ck_assert_int_eq(start(", idle_timeout: 400ms"), 0);
    fd = corConnect(server.port2);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, hello, sizeof(hello)), 0);
    ck_assert_int_eq(corSendAll(fd, ping, sizeof(ping)), 0);
    while (have < sizeof(got)) {
        ssize_t n = read(fd, got + have, sizeof(got) - have);

        ck_assert_int_gt(n, 0);
        have += (size_t)n;
    }
    /* Our HELLO_ACK is the HELLO's tree under type 2; then the PONG. */
    ck_assert_int_eq(got[4], 2);
    ck_assert_int_eq(memcmp(got + 16, hello + 16, sizeof(hello) - 16), 0);
    ck_assert_int_eq(got[sizeof(hello) + 4], 9);
    ck_assert_int_eq(got[sizeof(hello) + 8], 7);
    for (int i = 0; i < 3; i++) {
        usleep(250 * 1000); /* under the idle timeout each time */
        ck_assert_int_eq(corSendAll(fd, ping, sizeof(ping)), 0);
        ck_assert_int_eq(read(fd, got, sizeof(ping)), (ssize_t)sizeof(ping));
    }
    ck_assert(corPeerClosed(fd, 2000));
    close(fd);
}
END_TEST

/* A reload drains with CLOSE: what was on the wire is served, the client
 * moves to a new connection, nothing fails. */
START_TEST(test_a_reload_under_load_loses_nothing)
{
    char command[4096];
    FILE* load;
    size_t n;

    ck_assert_int_eq(start(""), 0);
    corRequestToolCommand(&server,
                          "-c 4 --depth 4 --duration 3s "
                          "cor://127.0.0.1:{PORT2}/sleep?ms=20",
                          command, sizeof(command));
    load = popen(command, "r");
    ck_assert_ptr_nonnull(load);
    usleep(1000 * 1000);
    kill(server.pid, SIGHUP);
    n = fread(out, 1, sizeof(out) - 1, load);
    out[n] = '\0';
    ck_assert_int_eq(pclose(load), 0);
    ck_assert_msg(corSummaryCount(out, "requests ") > 100, "%s", out);
    ck_assert_msg(corSummaryCount(out, "failed ") == 0, "%s", out);
    ck_assert_msg(corSummaryCount(out, "non-2xx ") == 0, "%s", out);
}
END_TEST

/* tests/cor/corRawClient.py on {PORT2} with requests (its arguments,
 * quoted): "ID STATUS" for each answer, into out. */
static int
raw(const char* requests)
{
    char command[512];

    snprintf(command, sizeof(command),
             "/usr/bin/python3 tests/cor/corRawClient.py "
             "%d %s",
             server.port2, requests);
    return corShell(command, out, sizeof(out));
}

/* The limits of every protocol's requests hold over cor:// as over HTTP:
 * a body past body_bytes is 413, too many headers or too many bytes of
 * them 431, each on its own stream, and the connection goes on serving
 * the requests after them. Requests 6 to 8 are longer than any request
 * within the limits, so they are refused before their bodies came, cut
 * short: the names their heads brought (X-H10, X-New) are in the tables
 * all the same, for request 9, which sends X-New by its index. */
START_TEST(test_past_the_limits_refused_on_their_stream)
{
    ck_assert_int_eq(startWith("limits: { body_bytes: 1KiB, header_count: 5,"
                               " header_bytes: 1KiB }\n",
                               ""),
                     0);
    ck_assert_int_eq(raw("'POST /echo body=2048' 'GET /hello headers=10' "
                         "'GET /hello hsize=2000' 'POST /echo body=1000 "
                         "headers=5' 'GET /hello' 'POST /echo body=3000000' "
                         "'POST /echo body=3000000 headers=12' "
                         "'POST /echo body=3000000 hsize=9 hname=X-New' "
                         "'GET /hello headers=3 hsize=9 hname=X-New'"),
                     0);
    ck_assert_str_eq(out, "1 413\n2 431\n3 431\n4 200\n5 200\n6 413\n"
                          "7 431\n8 413\n9 200\n");
    ck_assert_int_eq(corServerLogCount(&server, "past the limits"), 6);
}
END_TEST

/* HTTP's and cor://'s refusals at the limits are the core's: one metric,
 * cor_requests_refused_total, counts both by protocol and status, and
 * each is said in one line of the same form. HTTP: a Content-Length past
 * body_bytes, a chunk that says it brings too much, too many headers;
 * cor://: a body past body_bytes, whole and cut from its head, too many
 * headers. */
START_TEST(test_one_metric_counts_refusals_of_every_protocol)
{
    static const char chunked[] = "POST /echo HTTP/1.1\r\nHost: t\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n800\r\n";
    char req[512] = "GET /hello HTTP/1.1\r\nHost: t\r\n";

    ck_assert_int_eq(startWith("limits: { body_bytes: 1KiB, header_count: 5,"
                               " header_bytes: 1KiB }\n",
                               ""),
                     0);
    ck_assert_int_eq(corRequest(server.port,
                                "POST /echo HTTP/1.1\r\n"
                                "Host: t\r\nContent-Length: 2048\r\n\r\n",
                                out2, sizeof(out2)),
                     413);
    ck_assert_int_eq(corRequest(server.port, chunked, out2, sizeof(out2)), 413);
    for (int i = 0; i < 6; i++) {
        snprintf(req + strlen(req), sizeof(req) - strlen(req), "X-H%d: v\r\n",
                 i);
    }
    strcat(req, "\r\n");
    ck_assert_int_eq(corRequest(server.port, req, out2, sizeof(out2)), 431);
    ck_assert_int_eq(raw("'POST /echo body=2048' 'GET /hello headers=10' "
                         "'POST /echo body=3000000' 'GET /hello'"),
                     0);
    ck_assert_str_eq(out, "1 413\n2 431\n3 413\n4 200\n");
    ck_assert_int_eq(corMetric(server.port,
                               "cor_requests_refused_total{"
                               "protocol=\"http\",status=\"413\"}"),
                     2);
    ck_assert_int_eq(corMetric(server.port,
                               "cor_requests_refused_total{"
                               "protocol=\"http\",status=\"431\"}"),
                     1);
    ck_assert_int_eq(corMetric(server.port, "cor_requests_refused_total{"
                                            "protocol=\"cor\",status=\"413\"}"),
                     2);
    ck_assert_int_eq(corMetric(server.port, "cor_requests_refused_total{"
                                            "protocol=\"cor\",status=\"431\"}"),
                     1);
    ck_assert_int_eq(corServerLogCount(&server,
                                       "http: 127.0.0.1: POST "
                                       "/echo is past the limits "
                                       "(limits.body_bytes 1024): refused "
                                       "413"),
                     2);
    ck_assert_int_eq(corServerLogCount(&server,
                                       "cor: 127.0.0.1: GET /hello"
                                       " (10 headers, 0 body bytes) is past "
                                       "the limits (limits.header_bytes "
                                       "1024, header_count 5): refused 431"),
                     1);
}
END_TEST

/* A request too slow to come is the core's refusal too, HTTP's 408 or a
 * cor:// frame that does not come whole within request_timeout (its
 * connection closed): one metric counts both. */
START_TEST(test_one_metric_counts_slow_requests_of_every_protocol)
{
    static const unsigned char part[] = {
        /* a REQUEST of 50, in part */
        0xc0, 0x4f, 0x52, 0x01, 3, 0, 0, 0, 1, 0, 0, 0, 50, 0, 0, 0, 0x06
    };
    static const char head[] = "GET /hello HTTP/1.1\r\nHost: t\r\n";
    int fd;

    ck_assert_int_eq(startWith("limits: { request_timeout: 300ms }\n", ""), 0);
    fd = corConnect(server.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, head, sizeof(head) - 1), 0);
    ck_assert_int_gt(corReadResponse(fd, out2, sizeof(out2), 10000), 0);
    ck_assert_int_eq(corStatus(out2), 408);
    close(fd);
    fd = corConnect(server.port2);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, hello, sizeof(hello)), 0);
    ck_assert_int_eq(corSendAll(fd, part, sizeof(part)), 0);
    ck_assert(corPeerClosed(fd, 10000));
    close(fd);
    ck_assert_int_eq(corMetric(server.port,
                               "cor_requests_refused_total{"
                               "protocol=\"http\",status=\"408\"}"),
                     1);
    ck_assert_int_eq(corMetric(server.port, "cor_requests_refused_total{"
                                            "protocol=\"cor\",status=\"408\"}"),
                     1);
}
END_TEST

/* Eight copies of request, then last (NULL: none), on one connection
 * (raw); the growth of the generation's VmHWM in kB, printed as what, or
 * 0 under sanitizers, whose memory makes no sense of it. */
static long
floodGrowth(const char* request, const char* last, const char* what)
{
    const char* sanitized = getenv("COR_TEST_SANITIZED");
    char requests[1024] = "";
    pid_t gen = corServerGeneration(&server);
    long before = corProcStatusKb(gen, "VmHWM");
    long after;

    for (int i = 0; i < 8; i++) {
        strcat(requests, request);
        strcat(requests, " ");
    }
    strcat(requests, last != NULL ? last : "");
    ck_assert_int_eq(raw(requests), 0);
    after = corProcStatusKb(gen, "VmHWM");
    fprintf(stderr, "corCorServeTest: %s: VmHWM %ld kB, then %ld kB\n", what,
            before, after);
    return sanitized != NULL && strcmp(sanitized, "1") == 0 ? 0
                                                            : after - before;
}

/* A request past body_bytes (the default 1MiB) is refused as it comes,
 * never read whole: eight of 16 MiB on one connection leave the memory
 * as it was, and the connection answers the next request. */
START_TEST(test_a_body_past_body_bytes_is_never_read_whole)
{
    long grown;

    ck_assert_int_eq(start(""), 0);
    grown = floodGrowth("'POST /echo body=16777216'", "'GET /hello'",
                        "8 requests of 16 MiB past body_bytes");
    ck_assert_str_eq(out, "1 413\n2 413\n3 413\n4 413\n5 413\n6 413\n"
                          "7 413\n8 413\n9 200\n");
    ck_assert_int_lt(grown, 8 * 1024);
}
END_TEST

/*
 * Large requests flooded on one connection, each within body_bytes: past
 * max_in_flight_bytes the server reads no more of the connection until
 * handlers are done, so the memory it holds is bounded (here about three
 * requests: the one served, the next frame read, its decoding) whatever
 * the peer sends; every request is still served. Without the bound all
 * eight would be held at once.
 */
START_TEST(test_a_flood_of_large_requests_holds_bounded_memory)
{
    long grown;

    ck_assert_int_eq(startWith("limits: { body_bytes: 32MiB }\n",
                               ", max_in_flight_bytes: 1MiB"),
                     0);
    grown = floodGrowth("'GET /sleep?ms=200 body=16777216'", NULL,
                        "8 requests of 16 MiB within body_bytes");
    ck_assert_str_eq(out, "1 200\n2 200\n3 200\n4 200\n5 200\n6 200\n"
                          "7 200\n8 200\n");
    ck_assert_int_lt(grown, 80 * 1024);
}
END_TEST

/* cors: the listener's TLS under the same protocol; a HELLO over TLS is
 * answered with a HELLO_ACK (python3's ssl as the client, the test CA). */
START_TEST(test_hello_over_tls)
{
    char certs[128];
    char yaml[2048];
    char command[2048];

    corTestCertsMake(certs, sizeof(certs));
    snprintf(yaml, sizeof(yaml),
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
             "  - protocol: cors\n"
             "    address: 127.0.0.1:{PORT2}\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
             "modules: [ { load: http }, { load: cor } ]\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             certs, certs);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
    snprintf(command, sizeof(command),
             "/usr/bin/python3 -c 'import socket, ssl, sys\n"
             "ctx = ssl.create_default_context(cafile=\"%s/ca.pem\")\n"
             "ctx.set_alpn_protocols([\"cor/1\"])\n"
             "s = ctx.wrap_socket(socket.create_connection("
             "(\"127.0.0.1\", %d)), server_hostname=\"localhost\")\n"
             "s.sendall(bytes.fromhex(\"c04f5201010000000000000024000000"
             "0622320007766572"
             "73696f6e00120005"
             "7465726d73001200"
             "0a6e616d65737061"
             "63657300\"))\n"
             "got = b\"\"\n"
             "while len(got) < 52:\n"
             "    got += s.recv(52 - len(got))\n"
             "print(s.selected_alpn_protocol(), got[:5].hex())'",
             certs, server.port2);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    corTestCertsRemove(certs);
    ck_assert_str_eq(out, "cor/1 c04f520102\n");
}
END_TEST

COR_TEST_SUITE(corCorServe)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_add_test(tc, test_a_request_is_answered);
    tcase_add_test(tc, test_the_access_log_has_every_protocol);
    tcase_add_test(tc, test_answers_go_out_in_the_order_they_finish);
    tcase_add_test(tc, test_bodies_come_back_as_over_http);
    tcase_add_test(tc, test_64_clients_at_once_behind_their_hello);
    tcase_add_test(tc, test_past_max_in_flight_a_request_gets_503);
    tcase_add_test(tc, test_a_bad_frame_closes_only_its_connection);
    tcase_add_test(tc, test_ping_and_the_idle_timeout);
    tcase_add_test(tc, test_a_reload_under_load_loses_nothing);
    tcase_add_test(tc, test_hello_over_tls);
    tcase_add_test(tc, test_past_the_limits_refused_on_their_stream);
    tcase_add_test(tc, test_one_metric_counts_refusals_of_every_protocol);
    tcase_add_test(tc, test_one_metric_counts_slow_requests_of_every_protocol);
    tcase_add_test(tc, test_a_flood_of_large_requests_holds_bounded_memory);
    tcase_add_test(tc, test_a_body_past_body_bytes_is_never_read_whole);
}
