/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/forward against the real binary in both modes: cor forwards to
 * two scripted upstreams (tests/integration/corHttpUpstream.c, whose /echo
 * sends back the head it got and the length and checksum of the body), a
 * port where nothing listens, and a cor https upstream with the test CA;
 * curl is the client. Checked: the headers each way (hop-by-hop gone,
 * X-Forwarded-*, Via, each Host mode), every framing of an answer, a
 * 50 MiB answer streamed with the generation's memory flat, a chunked
 * upload, bodies passed on as they come with request_buffering: off (from
 * HTTP/2 and HTTP/1.1 clients: paused, 5 MB, past body_bytes, cut by the
 * client, a request pipelined behind one), 502 and 504 (each logged with
 * the server's address), round robin
 * with a dead server skipped, an answer cut mid-body cut for the client
 * too, an upstream's early refusal of a 20 MB upload passed on (buffered
 * or not), four 50 MB buffered uploads spooled in flat memory, and `cor -t` on
 * bad YAML (the balance keys' too; the balancing itself is
 * corForwardBalanceTest's).
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static CorServer tlsUpstream;
static CorServer big; /* a test's own, for large uploads */
static pid_t upstreamPid[2];
static int upstreamPort[2];
static int deadPort;
static char certs[64];
static char out[1 << 16];

static const char* configFormat =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES}, per_loop: 2 }\n"
    "  stop_timeout: 5s\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT2}, http2: on }\n"
    "limits: { body_bytes: 8MiB }\n"
    "client: { ca_file: %s/ca.pem }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - load: forward\n"
    "    upstreams:\n"
    "      - { name: backend, servers: [ \"http://127.0.0.1:%d\" ],\n"
    "          connect_timeout: 1s }\n"
    "      - { name: hurried, servers: [ \"http://127.0.0.1:%d\" ],\n"
    "          read_timeout: 700ms }\n"
    "      - { name: keephost, servers: [ \"http://127.0.0.1:%d/\" ],\n"
    "          host: keep }\n"
    "      - { name: named, servers: [ \"http://127.0.0.1:%d\" ],\n"
    "          host: up.example }\n"
    "      - name: pair\n"
    "        servers: [ \"http://127.0.0.1:%d\", \"http://127.0.0.1:%d\",\n"
    "                   \"http://127.0.0.1:%d\" ]\n"
    "        fail_timeout: 30s\n"
    "      - { name: dead, servers: [ \"http://127.0.0.1:%d\" ] }\n"
    "      - { name: streamed, servers: [ \"http://127.0.0.1:%d\" ],\n"
    "          request_buffering: off, read_timeout: 5s }\n"
    "      - { name: buffered, servers: [ \"http://127.0.0.1:%d\" ] }\n"
    "      - { name: secure, servers: [ \"https://localhost:%d\" ] }\n"
    "routes:\n"
    "  - { match: \"/echo-keep*\", handler: keephost }\n"
    "  - { match: \"/echo-named*\", handler: named }\n"
    "  - { match: \"/echo-pair*\", handler: pair }\n"
    "  - { match: \"/echo-dead*\", handler: dead }\n"
    "  - { match: \"/echo-streamed*\", handler: streamed }\n"
    "  - { match: \"/echo-buffered*\", handler: buffered }\n"
    "  - { match: \"/hello\", handler: secure }\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "  - { match: \"/hurried/*\", handler: hurried, strip_prefix: /hurried }\n"
    "  - { match: \"/*\", handler: backend }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
setUp(void)
{
    char yaml[4096];

    corTestCertsMake(certs, sizeof(certs));
    for (int i = 0; i < 2; i++) {
        upstreamPid[i] = corUpstreamStart(&upstreamPort[i]);
        ck_assert_int_gt(upstreamPid[i], 0);
    }
    deadPort = corFreePort(); /* bound and closed: nothing listens */
    ck_assert_int_eq(corServerStartHttpsHello(&tlsUpstream, certs), 0);
    snprintf(yaml, sizeof(yaml), configFormat, certs, upstreamPort[0],
             upstreamPort[0], upstreamPort[0], upstreamPort[0], upstreamPort[0],
             upstreamPort[1], deadPort, deadPort, upstreamPort[0],
             upstreamPort[1], tlsUpstream.port);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
    corServerStop(&big);
    corServerStop(&tlsUpstream);
    for (int i = 0; i < 2; i++) {
        corUpstreamStop(&upstreamPid[i]);
    }
    corTestCertsRemove(certs);
}

/* curl with args on path of the server; its output (head and body with
 * -i) in out, its exit status returned. */
static int
curl(const char* args, const char* path)
{
    return corCurl(server.port, args, path, out, sizeof(out));
}

static bool
has(const char* text)
{
    return strcasestr(out, text) != NULL;
}

#define CHECK_HAS(text) ck_assert_msg(has(text), "no '%s' in: %s", text, out)
#define CHECK_HAS_NOT(text) ck_assert_msg(!has(text), "'%s' in: %s", text, out)

/* ---- Headers ------------------------------------------------------------- */

START_TEST(test_headers_each_way)
{
    char host[64];

    ck_assert_int_eq(curl("-i -H 'Connection: X-Mine' -H 'X-Mine: 1' "
                          "-H 'TE: trailers' -H 'Keep-Alive: 5' "
                          "-H 'Proxy-Authorization: x' -H 'Upgrade: h2c' "
                          "-H 'X-Forwarded-For: 192.0.2.1' "
                          "-H 'X-Kept: yes'",
                          "/echo"),
                     0);
    CHECK_HAS("HTTP/1.1 200");
    /* Upstream-bound: end-to-end kept, hop-by-hop gone, this hop said. */
    CHECK_HAS("\nX-Kept: yes");
    CHECK_HAS_NOT("X-Mine");
    CHECK_HAS_NOT("\nTE:");
    CHECK_HAS_NOT("Proxy-Authorization");
    CHECK_HAS_NOT("Upgrade:");
    CHECK_HAS("\nX-Forwarded-For: 192.0.2.1, 127.0.0.1");
    CHECK_HAS("\nX-Forwarded-Proto: http");
    CHECK_HAS("\nVia: 1.1 cor");
    snprintf(host, sizeof(host), "\nHost: 127.0.0.1:%d", upstreamPort[0]);
    CHECK_HAS(host);
    /* Client-bound: the upstream's Connection, what it lists, and its
     * Keep-Alive are gone; its end-to-end fields came through. */
    CHECK_HAS("\nX-Test: echo");
    CHECK_HAS("\nContent-Type: text/plain");
    CHECK_HAS_NOT("X-Hop");
    CHECK_HAS_NOT("timeout=5");
}
END_TEST

START_TEST(test_host_kept_or_named)
{
    ck_assert_int_eq(curl("-H 'Host: client.test'", "/echo-keep"), 0);
    CHECK_HAS("\nHost: client.test");
    ck_assert_int_eq(curl("-H 'Host: client.test'", "/echo-named"), 0);
    CHECK_HAS("\nHost: up.example");
    CHECK_HAS_NOT("client.test");
}
END_TEST

/* ---- Answers ------------------------------------------------------------- */

START_TEST(test_each_framing_passed_on)
{
    ck_assert_int_eq(curl("", "/cl"), 0);
    ck_assert_str_eq(out, "hello");
    ck_assert_int_eq(curl("", "/chunked"), 0);
    ck_assert_str_eq(out, "hello world");
    ck_assert_int_eq(curl("", "/eof"), 0);
    ck_assert_str_eq(out, "to the end");
    ck_assert_int_eq(curl("", "/1xx"), 0);
    ck_assert_str_eq(out, "after 1xx");
    ck_assert_int_eq(curl("-o /dev/null -w '%{http_code}'", "/204"), 0);
    ck_assert_str_eq(out, "204");
    ck_assert_int_eq(curl("-I", "/cl"), 0);
    CHECK_HAS("HTTP/1.1 200");
    CHECK_HAS("X-Test: cl");
    CHECK_HAS("\nContent-Length: 5\r"); /* what a GET would get */
    /* Over TLS, verified with the test CA (client.ca_file). */
    ck_assert_int_eq(curl("", "/hello"), 0);
    CHECK_HAS("hello");
}
END_TEST

/* The generation's peak memory grew by less than kb from before to after
 * (VmHWM, kB). A sanitizer's quarantine keeps what was freed: its memory
 * says nothing of the server's, and is not judged. */
static void
memoryGrewLess(long before, long after, long kb)
{
    const char* sanitized = getenv("COR_TEST_SANITIZED");

    if (sanitized == NULL || strcmp(sanitized, "1") != 0) {
        ck_assert_msg(after - before < kb, "VmHWM %ld kB, then %ld kB", before,
                      after);
    }
}

/* 50 MiB pass through, to a fast client and to a slow one: the
 * generation's peak memory grows by far less than the body. */
START_TEST(test_large_answer_streamed_in_flat_memory)
{
    pid_t gen = corServerGeneration(&server);
    long before;
    long after;

    ck_assert_int_gt(gen, 0);
    ck_assert_int_eq(curl("-o /dev/null -w '%{size_download}'", "/big?n=1000"),
                     0);
    before = corProcStatusKb(gen, "VmHWM");
    ck_assert_int_gt(before, 0);
    ck_assert_int_eq(curl("-o /dev/null -w '%{size_download}'",
                          "/big?n=52428800"),
                     0);
    ck_assert_str_eq(out, "52428800");
    ck_assert_int_eq(curl("--limit-rate 40M -o /dev/null "
                          "-w '%{size_download}'",
                          "/big?n=52428800"),
                     0);
    ck_assert_str_eq(out, "52428800");
    after = corProcStatusKb(gen, "VmHWM");
    memoryGrewLess(before, after, 8 * 1024);
}
END_TEST

/* The head goes out as soon as the upstream's came, while the body
 * still trickles in (a byte each 100 ms for 1.5 s). */
START_TEST(test_head_passed_on_at_once)
{
    double first = 0;
    double total = 0;

    ck_assert_int_eq(curl("-o /dev/null -w '%{time_starttransfer} "
                          "%{time_total}'",
                          "/trickle?ms=1500"),
                     0);
    ck_assert_int_eq(sscanf(out, "%lf %lf", &first, &total), 2);
    /* The upstream's 1.5 s of trickle after its head (a loaded machine
     * stretches it, never shortens it) came mostly after the first byte:
     * an answer held until it was whole would have had none of it. Half
     * of it leaves a loaded machine 0.75 s to pass the head on. */
    ck_assert_msg(total - first >= 0.75, "first byte %.3f s, all %.3f s", first,
                  total);
}
END_TEST

/* A client that leaves mid-answer cancels the handler, and with it the
 * upstream exchange: counted as cancelled, not logged as a failure. */
START_TEST(test_client_leaving_cancels_the_exchange)
{
    long before = corMetric(server.port, "cor_requests_cancelled_total");

    ck_assert_int_ge(before, 0);
    ck_assert_int_eq(curl("--max-time 0.5", "/trickle?ms=3000"), 28);
    for (long deadline = corNowMs() + 20000; corNowMs() < deadline;) {
        if (corMetric(server.port, "cor_requests_cancelled_total") > before) {
            break;
        }
        usleep(20000);
    }
    ck_assert_int_eq(corMetric(server.port, "cor_requests_cancelled_total"),
                     before + 1);
    ck_assert_int_eq(corServerLogCount(&server, "forward backend"), 0);
}
END_TEST

/* An answer the upstream cuts mid-body is cut for the client too (no
 * last chunk): curl says the transfer was partial. */
START_TEST(test_answer_cut_mid_body)
{
    ck_assert_int_eq(curl("", "/die"), 18);
    ck_assert_int_eq(corServerLogCount(&server, "closed the connection in "
                                                "the middle"),
                     1);
}
END_TEST

/* ---- Requests ------------------------------------------------------------ */

/* size random bytes in the server's folder (up.bin), and the line of
 * the upstream's echo that says their sum, into expect. */
static void
uploadMake(size_t size, char* expect, size_t cap)
{
    char command[256];

    char piece[65536];
    uint32_t sum = 0;
    size_t n;
    FILE* f;

    snprintf(command, sizeof(command),
             "head -c %zu /dev/urandom > "
             "%s/up.bin",
             size, server.dir);
    ck_assert_int_eq(corShell(command, NULL, 0), 0);
    snprintf(command, sizeof(command), "%s/up.bin", server.dir);
    f = fopen(command, "rb");
    ck_assert_ptr_nonnull(f);
    while ((n = fread(piece, 1, sizeof(piece), f)) > 0) {
        for (size_t i = 0; i < n; i++) {
            sum = sum * 31 + (unsigned char)piece[i];
        }
    }
    fclose(f);
    snprintf(expect, cap, "body-sum: %u", (unsigned)sum);
}

/* A chunked upload reaches the upstream whole, with a Content-Length. */
START_TEST(test_chunked_upload)
{
    char command[256];
    char expect[64];

    uploadMake(300000, expect, sizeof(expect));
    snprintf(command, sizeof(command),
             "-H 'Transfer-Encoding: chunked' "
             "--data-binary @%s/up.bin",
             server.dir);
    ck_assert_int_eq(curl(command, "/echo"), 0);
    CHECK_HAS("\nContent-Length: 300000");
    CHECK_HAS_NOT("Transfer-Encoding");
    CHECK_HAS("body-length: 300000");
    CHECK_HAS(expect);
}
END_TEST

/* The request heads upstream i read so far (this look's included). */
static long
upstreamHeads(int i)
{
    char heads[64];

    ck_assert_int_eq(corCurl(upstreamPort[i], "", "/heads", heads,
                             sizeof(heads)),
                     0);
    return atol(heads);
}

/* Whether upstream i has had a head past after by deadline (corNowMs):
 * each /heads look is one too, so past after and the looks so far. */
static bool
headsPast(int i, long after, long deadline)
{
    for (long looks = 1;; looks++) {
        if (upstreamHeads(i) > after + looks) {
            return true;
        }
        if (corNowMs() >= deadline) {
            return false;
        }
        usleep(20 * 1000);
    }
}

/* An upload of "part1", then "part2" once the test has looked, to path,
 * from an HTTP/2 client (h2c) or an HTTP/1.1 one (chunked): whether
 * upstream i had its head before "part2" left (the body passed on as it
 * came), with what it echoed in out. The look waits for the head up to
 * 20 s where early says it should come (a loaded machine is slow to start
 * curl), and 1 s where it should not. */
static bool
uploadConnectsEarly(const char* path, int i, bool http2, bool early)
{
    char command[768];
    char gate[160];
    long before = upstreamHeads(i);
    bool during;
    FILE* go;
    FILE* p;
    size_t n;

    snprintf(gate, sizeof(gate), "%s/part2.go", server.dir);
    unlink(gate);
    snprintf(command, sizeof(command),
             "(printf part1; while [ ! -e %s ]; "
             "do sleep 0.05; done; printf part2) | curl -s --max-time 60 %s "
             "-X POST -T - 'http://127.0.0.1:%d%s' 2>&1",
             gate, http2 ? "--http2-prior-knowledge" : "",
             http2 ? server.port2 : server.port, path);
    p = popen(command, "r");
    ck_assert_ptr_nonnull(p);
    during = headsPast(i, before, corNowMs() + (early ? 20000 : 1000));
    go = fopen(gate, "w");
    ck_assert_ptr_nonnull(go);
    fclose(go);
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    return during;
}

START_TEST(test_request_buffering_off_streams_the_body)
{
    uint32_t sum = 0;
    char expect[64];

    for (const char* c = "part1part2"; *c != '\0'; c++) {
        sum = sum * 31 + (unsigned char)*c;
    }
    snprintf(expect, sizeof(expect), "body-sum: %u", (unsigned)sum);
    for (int http2 = 0; http2 < 2; http2++) {
        /* Buffered (the default): the upstream hears of it once it is
         * whole, with its length. */
        ck_assert(!uploadConnectsEarly("/echo-buffered", 1, http2, false));
        CHECK_HAS("\nContent-Length: 10");
        CHECK_HAS("body-length: 10");
        CHECK_HAS(expect);
        /* Off: on its way while the client still sends, chunked. */
        ck_assert(uploadConnectsEarly("/echo-streamed", 0, http2, true));
        CHECK_HAS("Transfer-Encoding: chunked");
        CHECK_HAS_NOT("Content-Length: 10");
        CHECK_HAS("body-length: 10");
        CHECK_HAS(expect);
    }
}
END_TEST

/* An HTTP/1.1 body of known length, paused midway, goes up while it
 * comes; a request pipelined right behind it is answered next, on the
 * same connection, never taken for body. */
START_TEST(test_request_buffering_off_length_body_then_pipelined)
{
    static char body[10000];
    static const char next[] = "GET /echo-streamed?next HTTP/1.1\r\n"
                               "Host: t\r\n\r\n";
    char head[128];
    char expect[64];
    uint32_t sum = 0;
    long before = upstreamHeads(0);
    int fd = corConnect(server.port);

    ck_assert_int_ge(fd, 0);
    for (size_t i = 0; i < sizeof(body); i++) {
        body[i] = (char)('a' + i % 26);
        sum = sum * 31 + (unsigned char)body[i];
    }
    snprintf(expect, sizeof(expect), "body-sum: %u", (unsigned)sum);
    snprintf(head, sizeof(head),
             "POST /echo-streamed HTTP/1.1\r\nHost: t"
             "\r\nContent-Length: %zu\r\n\r\n",
             sizeof(body));
    ck_assert_int_eq(corSendAll(fd, head, strlen(head)), 0);
    ck_assert_int_eq(corSendAll(fd, body, 4000), 0);
    /* The forward's head, then this look's: waited for, not assumed
     * after 500 ms. */
    ck_assert(headsPast(0, before, corNowMs() + 20000));
    ck_assert_int_eq(corSendAll(fd, body + 4000, sizeof(body) - 4000), 0);
    ck_assert_int_eq(corSendAll(fd, next, strlen(next)), 0);
    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 5000), 0);
    /* With the length its client said, as nginx passes it: not
     * re-chunked. */
    CHECK_HAS("\nContent-Length: 10000\r");
    CHECK_HAS_NOT("Transfer-Encoding");
    CHECK_HAS("body-length: 10000");
    CHECK_HAS(expect);
    CHECK_HAS_NOT("Connection: close");
    ck_assert_int_gt(corReadResponse(fd, out, sizeof(out), 5000), 0);
    CHECK_HAS("GET /echo-streamed?next HTTP/1.1");
    CHECK_HAS("body-length: 0");
    close(fd);
}
END_TEST

/* 5 MB from an HTTP/1.1 client, by length and chunked, arrive intact,
 * passed on as they come: the generation's memory does not hold them. */
START_TEST(test_request_buffering_off_large_body_intact)
{
    pid_t gen = corServerGeneration(&server);
    const char* framing[] = { "", "-H 'Transfer-Encoding: chunked' " };
    /* Each goes up framed as it came. */
    const char* upstreamSaw[] = { "\nContent-Length: 5000000\r",
                                  "Transfer-Encoding: chunked" };
    char command[256];
    char expect[64];
    long before;
    long after;

    uploadMake(5000000, expect, sizeof(expect));
    ck_assert_int_eq(curl("-d warm", "/echo-streamed"), 0);
    before = corProcStatusKb(gen, "VmHWM");
    for (int i = 0; i < 2; i++) {
        snprintf(command, sizeof(command), "%s--data-binary @%s/up.bin",
                 framing[i], server.dir);
        ck_assert_int_eq(curl(command, "/echo-streamed"), 0);
        CHECK_HAS(upstreamSaw[i]);
        CHECK_HAS("body-length: 5000000");
        CHECK_HAS(expect);
    }
    after = corProcStatusKb(gen, "VmHWM");
    memoryGrewLess(before, after, 2 * 1024);
}
END_TEST

/* A chunked body that goes past limits.body_bytes while it is passed on
 * is refused 413 (nothing was answered yet), and the server goes on. */
START_TEST(test_request_buffering_off_past_body_bytes)
{
    char command[256];
    char expect[64];

    uploadMake(9 * 1024 * 1024, expect, sizeof(expect));
    snprintf(command, sizeof(command),
             "-o /dev/null -w '%%{http_code}' "
             "-H 'Transfer-Encoding: chunked' --data-binary @%s/up.bin",
             server.dir);
    ck_assert_int_eq(curl(command, "/echo-streamed"), 0);
    ck_assert_str_eq(out, "413");
    ck_assert_int_eq(corServerLogCount(&server,
                                       "POST /echo-streamed is past "
                                       "the limits (limits.body_bytes"),
                     1);
    ck_assert_int_eq(curl("-d again", "/echo-streamed"), 0);
    CHECK_HAS("body-length: 5");
}
END_TEST

/* An HTTP/1.1 client that leaves midway through a body being passed on:
 * the upstream sees the body cut (its connection's end), the exchange is
 * cancelled, and the server serves the next request. */
START_TEST(test_request_buffering_off_client_leaves_midway)
{
    static char part[30000];
    static const char head[] = "POST /echo-streamed HTTP/1.1\r\nHost: t\r\n"
                               "Content-Length: 100000\r\n\r\n";
    long cancelled = corMetric(server.port, "cor_requests_cancelled_total");
    long before = upstreamHeads(0);
    int fd = corConnect(server.port);
    long cuts = 0;

    ck_assert_int_ge(fd, 0);
    memset(part, 'p', sizeof(part));
    ck_assert_int_eq(corSendAll(fd, head, strlen(head)), 0);
    ck_assert_int_eq(corSendAll(fd, part, sizeof(part)), 0);
    for (int i = 0; i < 100 && upstreamHeads(0) < before + 2; i++) {
        usleep(20 * 1000);
    }
    close(fd);
    for (int i = 0; i < 100 && cuts == 0; i++) {
        usleep(20 * 1000);
        ck_assert_int_eq(corCurl(upstreamPort[0], "", "/cuts", out,
                                 sizeof(out)),
                         0);
        cuts = atol(out);
    }
    ck_assert_int_eq(cuts, 1);
    for (int i = 0;
         i < 100
         && corMetric(server.port, "cor_requests_cancelled_total") == cancelled;
         i++) {
        usleep(20 * 1000);
    }
    ck_assert_int_eq(corMetric(server.port, "cor_requests_cancelled_total"),
                     cancelled + 1);
    ck_assert_int_eq(curl("-d after", "/echo-streamed"), 0);
    CHECK_HAS("body-length: 5");
}
END_TEST

/* ---- Large uploads --------------------------------------------------------
 */

/* A server for uploads past this one's body_bytes (64 MiB), forwarding
 * to upstream 0: /early-streamed... with request_buffering off, every
 * other path with it on (the default). */
static void
bigStart(void)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 1\n"
             "  workers: 2\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
             "limits: { body_bytes: 64MiB }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: forward\n"
             "    upstreams:\n"
             "      - { name: buffered, servers: [ \"http://127.0.0.1:%d\" ] "
             "}\n"
             "      - { name: streamed, servers: [ \"http://127.0.0.1:%d\" ],\n"
             "          request_buffering: off }\n"
             "routes:\n"
             "  - { match: \"/early-streamed*\", handler: streamed }\n"
             "  - { match: \"/*\", handler: buffered }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             upstreamPort[0], upstreamPort[0]);
    ck_assert_int_eq(corServerStart(&big, yaml), 0);
}

/*
 * An upstream that refuses a 20 MB upload before reading it (413, 401,
 * 403) and closes: its answer reaches the client, with request_buffering
 * on (the body spooled, then sent) and off (passed on as it comes), as
 * nginx passes it (502 before).
 */
START_TEST(test_early_answer_passed_on)
{
    static const char* const paths[] = { "/early", "/early-streamed" };
    static const char* const statuses[] = { "413", "401", "403" };
    char args[256];
    char path[64];
    char expect[64];

    bigStart();
    uploadMake(20 * 1000 * 1000, expect, sizeof(expect));
    snprintf(args, sizeof(args),
             "-o /dev/null -w '%%{http_code}' "
             "--data-binary @%s/up.bin",
             server.dir);
    for (size_t p = 0; p < 2; p++) {
        for (size_t i = 0; i < 3; i++) {
            snprintf(path, sizeof(path), "%s?status=%s", paths[p], statuses[i]);
            ck_assert_int_eq(corCurl(big.port, args, path, out, sizeof(out)),
                             0);
            ck_assert_msg(strcmp(out, statuses[i]) == 0, "%s: %s", path, out);
        }
    }
    snprintf(args, sizeof(args), "-i --data-binary @%s/up.bin", server.dir);
    ck_assert_int_eq(corCurl(big.port, args, "/early-streamed", out,
                             sizeof(out)),
                     0);
    CHECK_HAS("HTTP/1.1 413 ");
    CHECK_HAS("\r\n\r\nearly\n");
}
END_TEST

/*
 * Four 50 MB uploads at once through a forward with request_buffering on:
 * each body is spooled past limits.body_memory and sent upstream from its
 * file, whole (its length and sum), with the generation's peak memory
 * grown by less than 16 MB (205 MB before), and no file left after.
 */
START_TEST(test_buffered_uploads_spooled_in_flat_memory)
{
    char command[1024];
    char expect[64];
    pid_t gen;
    long before;
    long after;
    int whole = 0;

    /* A sanitizer's build is not judged on memory (memoryGrewLess):
     * smaller bodies take the same ways in the time its run has. */
    const char* sanitized = getenv("COR_TEST_SANITIZED");
    size_t size = sanitized != NULL && strcmp(sanitized, "1") == 0
                      ? 5 * 1000 * 1000
                      : 50 * 1000 * 1000;
    char length[48];

    bigStart();
    gen = corServerGeneration(&big);
    ck_assert_int_gt(gen, 0);
    uploadMake(size, expect, sizeof(expect));
    snprintf(length, sizeof(length), "\nContent-Length: %zu\r", size);
    ck_assert_int_eq(corCurl(big.port, "-d warm", "/echo", out, sizeof(out)),
                     0);
    before = corProcStatusKb(gen, "VmHWM");
    snprintf(command, sizeof(command),
             "for i in 1 2 3 4; do curl -s "
             "--max-time 60 --data-binary @%s/up.bin "
             "http://127.0.0.1:%d/echo > %s/out$i & done; wait; "
             "cat %s/out1 %s/out2 %s/out3 %s/out4",
             server.dir, big.port, server.dir, server.dir, server.dir,
             server.dir, server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    after = corProcStatusKb(gen, "VmHWM");
    for (const char* at = strstr(out, expect); at != NULL;
         at = strstr(at + 1, expect)) {
        whole++;
    }
    ck_assert_msg(whole == 4, "%s", out);
    CHECK_HAS(length);
    memoryGrewLess(before, after, 16 * 1024);
    /* The last release may follow its answer by a moment. */
    snprintf(command, sizeof(command),
             "for i in $(seq 100); do "
             "ls -l /proc/%d/fd | grep -e '/#[0-9]* (deleted)' -e cor-body- > "
             "%s/left || break; "
             "sleep 0.02; done; cat %s/left",
             (int)gen, server.dir, server.dir);
    corShell(command, out, sizeof(out));
    ck_assert_msg(out[0] == '\0', "still open: %s", out);
}
END_TEST

/* ---- Failures ------------------------------------------------------------ */

START_TEST(test_502_when_nothing_answers)
{
    char logged[96];

    ck_assert_int_eq(curl("-o /dev/null -w '%{http_code}'", "/echo-dead"), 0);
    ck_assert_str_eq(out, "502");
    snprintf(logged, sizeof(logged), "upstream http://127.0.0.1:%d:", deadPort);
    ck_assert_int_ge(corServerLogCount(&server, logged), 1);
}
END_TEST

/* A 101 the request did not ask for (no Connection: upgrade) is a
 * malformed answer, never a switch. */
START_TEST(test_101_not_asked_for_is_502)
{
    ck_assert_int_eq(curl("-o /dev/null -w '%{http_code}'", "/101"), 0);
    ck_assert_str_eq(out, "502");
    ck_assert_int_eq(corServerLogCount(&server, "101 Switching Protocols, "
                                                "which was not asked for"),
                     1);
}
END_TEST

/* curl on path, the answer's status and curl's time for it (what a
 * loaded machine adds to it, never less than what cor waited). */
static int
statusTimed(const char* path, double* seconds)
{
    int status = -1;

    ck_assert_int_eq(curl("-o /dev/null -w '%{http_code} %{time_total}'", path),
                     0);
    ck_assert_int_eq(sscanf(out, "%d %lf", &status, seconds), 2);
    return status;
}

/* The upstream would answer at 10 s: a 504 at all says cor did not wait
 * for it, which its time confirms (well before the answer, never before
 * the 700 ms of the group's read_timeout). */
START_TEST(test_504_past_the_read_timeout)
{
    char logged[96];
    double took;

    ck_assert_int_eq(statusTimed("/hurried/sleep?ms=10000", &took), 504);
    ck_assert_msg(took >= 0.7 && took < 5, "504 after %.3f s", took);
    snprintf(logged, sizeof(logged), "127.0.0.1:%d: no answer within",
             upstreamPort[0]);
    ck_assert_int_eq(corServerLogCount(&server, logged), 1);
}
END_TEST

/* The head's first bytes, or a 100 Continue, then nothing until 10 s
 * later: read_timeout bounds every wait between bytes of the head too
 * (504, logged); in the body, the answer is cut (curl: 18). */
START_TEST(test_504_when_the_head_stalls)
{
    static const char* paths[] = { "/hurried/stall?ms=10000",
                                   "/hurried/stall1xx?ms=10000" };
    double took;
    long start;

    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(statusTimed(paths[i], &took), 504);
        ck_assert_msg(took >= 0.7 && took < 5, "504 after %.3f s", took);
    }
    ck_assert_int_eq(corServerLogCount(&server, "head within the read "
                                                "timeout (700 ms)"),
                     2);
    start = corNowMs();
    ck_assert_int_eq(curl("-o /dev/null", "/hurried/stallbody?ms=10000"), 18);
    ck_assert_int_lt(corNowMs() - start, 10000);
    ck_assert_int_eq(corServerLogCount(&server, "body within the read "
                                                "timeout (700 ms)"),
                     1);
}
END_TEST

/* A POST on a pooled connection that the upstream read whole and closed
 * without a byte of answer is not sent again: 502, and the upstream saw
 * it once (nginx and HAProxy do the same). */
START_TEST(test_post_lost_on_a_pooled_connection_is_502)
{
    ck_assert_int_eq(curl("", "/drop"), 0);
    ck_assert_str_eq(out, "drop");
    ck_assert_int_eq(curl("-o /dev/null -w '%{http_code}' -d once", "/echo"),
                     0);
    ck_assert_str_eq(out, "502");
    ck_assert_int_eq(curl("", "/posts"), 0);
    ck_assert_str_eq(out, "1");
}
END_TEST

/* An upstream that sends more than its answer, 20 ms later (a HEAD
 * answered with a body, a body past its Content-Length): the connection
 * is closed, and the next client's request gets its own answer, never
 * those bytes. Raw requests: a new client comes well within 100 ms. */
START_TEST(test_surplus_never_reaches_another_client)
{
    for (int round = 0; round < 6; round++) {
        if (round % 2 == 0) {
            ck_assert_int_eq(corRequest(server.port,
                                        "GET /surplus HTTP/1.1"
                                        "\r\nHost: t\r\n\r\n",
                                        out, sizeof(out)),
                             200);
        } else {
            ck_assert_int_eq(curl("-I", "/surplus"), 0);
        }
        CHECK_HAS("X-Test: surplus");
        usleep(60 * 1000);
        ck_assert_int_eq(corRequest(server.port,
                                    "GET /cl HTTP/1.1\r\n"
                                    "Host: t\r\n\r\n",
                                    out, sizeof(out)),
                         200);
        CHECK_HAS("X-Test: cl");
        ck_assert_str_eq(corBody(out), "hello");
    }
}
END_TEST

/* Round robin over two live servers and a dead one: every request is
 * answered, by both live ones, and the dead one is tried once, then
 * skipped for fail_timeout. */
START_TEST(test_round_robin_skips_a_dead_server)
{
    int seen[2] = { 0, 0 };
    char logged[96];
    char port[32];

    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(curl("", "/echo-pair"), 0);
        CHECK_HAS("body-length: 0");
        for (int u = 0; u < 2; u++) {
            snprintf(port, sizeof(port), "port: %d", upstreamPort[u]);
            seen[u] += has(port);
        }
    }
    ck_assert_int_eq(seen[0] + seen[1], 8);
    ck_assert_int_ge(seen[0], 3);
    ck_assert_int_ge(seen[1], 3);
    snprintf(logged, sizeof(logged), "upstream http://127.0.0.1:%d:", deadPort);
    ck_assert_int_eq(corServerLogCount(&server, logged), 1);
}
END_TEST

/* More forwards at once than the loop's coroutines (runtime.coroutines.
 * per_loop: 2): those past the cap run on workers, and all are answered. */
START_TEST(test_past_the_coroutine_cap)
{
    char command[512];
    long before = corMetric(server.port, "cor_coroutine_fallbacks_total");

    snprintf(command, sizeof(command),
             "for i in 1 2 3 4; do curl -s "
             "--max-time 10 'http://127.0.0.1:%d/sleep?ms=300' & done; wait",
             server.port);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "sleptsleptsleptslept");
    if (corTestCoroutines()) {
        ck_assert_int_ge(corMetric(server.port,
                                   "cor_coroutine_fallbacks_total"),
                         before + 2);
    }
}
END_TEST

/* ---- Configuration ------------------------------------------------------- */

/* cor -t names the file and line of each mistake. */
START_TEST(test_bad_yaml_refused_at_its_line)
{
    static const char* bad[][2] = {
        { "servers: [ \"ftp://a:1\" ]", "servers[0]: expected" },
        { "servers: [ \"http://a:99999\" ]", "servers[0]: expected" },
        { "servers: [ \"http://a:1/path\" ]", "servers[0]: expected" },
        { "servers: [ \"http://a:1\" ], retries: 3", "unknown key 'retries'" },
        { "servers: [ ]", "at least one" },
        { "servers: [ \"http://a:1\" ], host: \"a b\"", "host: expected" },
        { "servers: [ \"http://a:1\" ], balance: random",
          "balance: expected round_robin, least_conn" },
        { "servers: [ \"http://a:1\" ], balance: hash, hash: cookie",
          "hash: expected ip, path" },
        { "servers: [ \"http://a:1\" ], balance: hash, hash: \"header:\"",
          "hash: expected ip, path" },
        { "servers: [ \"http://a:1\" ], hash: path",
          "hash: only with balance: hash" },
        { "servers: [ \"http://a:1\" ], health: { path: health }",
          "health: path: expected a path" },
        { "servers: [ \"http://a:1\" ], health: { path: /h, status: 2xy }",
          "health: status: expected" },
        { "servers: [ \"http://a:1\" ], health: { path: /h, fails: 0 }",
          "fails: 0 is out of range" },
        { "servers: [ \"http://a:1\" ], health: { path: /h, intervl: 1s }",
          "unknown key 'intervl' in health" },
        { "servers: [ \"http://a:1\" ], request_buffering: maybe",
          "request_buffering: expected on, off, true, false, yes or no" },
    };
    char command[1024];
    char yaml[512];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(yaml, sizeof(yaml),
                 "listen: [ { protocol: http, address: "
                 "\"127.0.0.1:1\" } ]\nmodules:\n  - { load: http }\n"
                 "  - load: forward\n    upstreams:\n      - { name: a, %s "
                 "}\n",
                 bad[i][0]);
        ck_assert_int_ne(corConfigCheck(&server, "bad.yaml", yaml, out,
                                        sizeof(out)),
                         0);
        CHECK_HAS("bad.yaml:6:");
        CHECK_HAS(bad[i][1]);
    }
    snprintf(command, sizeof(command),
             "printf 'listen: [ { protocol: "
             "http, address: \"127.0.0.1:1\" } ]\\nmodules:\\n  - load: "
             "forward\\n    upstreams:\\n      - { name: a, servers: [ "
             "\"http://a:1\" ] }\\n      - { name: a, servers: [ "
             "\"http://b:1\" ] }\\n' > %s/dup.yaml && %s -t -c %s/dup.yaml "
             "2>&1",
             server.dir, getenv("COR_BIN"), server.dir);
    ck_assert_int_ne(corShell(command, out, sizeof(out)), 0);
    CHECK_HAS("dup.yaml:6:");
    CHECK_HAS("'a' is taken");
    /* Every mistake of every group in one run, not the first alone. */
    snprintf(command, sizeof(command),
             "printf 'listen: [ { protocol: "
             "http, address: \"127.0.0.1:1\" } ]\\nmodules:\\n  - { load: "
             "http }\\n  - load: forward\\n    upstreams:\\n      - { name: "
             "a, servers: [ \"ftp://a\", \"http://b/p\" ], hots: c }\\n"
             "      - { servers: [ ] }\\n' > %s/many.yaml && %s -t -c "
             "%s/many.yaml 2>&1",
             server.dir, getenv("COR_BIN"), server.dir);
    ck_assert_int_ne(corShell(command, out, sizeof(out)), 0);
    CHECK_HAS("many.yaml:6:31: module forward: servers[0]: expected");
    CHECK_HAS("many.yaml:6:42: module forward: servers[1]: expected");
    CHECK_HAS("many.yaml:6:58: unknown key 'hots' in upstreams[0]");
    CHECK_HAS("many.yaml:7:9: module forward: upstreams[1]: a name is "
              "needed");
    CHECK_HAS("many.yaml:7:20: module forward: servers: at least one");
    CHECK_HAS("(5 errors)");
}
END_TEST

COR_TEST_SUITE(corForward)
{
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_headers_each_way);
    tcase_add_test(tc, test_host_kept_or_named);
    tcase_add_test(tc, test_each_framing_passed_on);
    tcase_add_test(tc, test_large_answer_streamed_in_flat_memory);
    tcase_add_test(tc, test_answer_cut_mid_body);
    tcase_add_test(tc, test_head_passed_on_at_once);
    tcase_add_test(tc, test_client_leaving_cancels_the_exchange);
    tcase_add_test(tc, test_chunked_upload);
    tcase_add_test(tc, test_request_buffering_off_streams_the_body);
    tcase_add_test(tc, test_request_buffering_off_length_body_then_pipelined);
    tcase_add_test(tc, test_request_buffering_off_large_body_intact);
    tcase_add_test(tc, test_request_buffering_off_past_body_bytes);
    tcase_add_test(tc, test_request_buffering_off_client_leaves_midway);
    tcase_add_test(tc, test_early_answer_passed_on);
    tcase_add_test(tc, test_buffered_uploads_spooled_in_flat_memory);
    tcase_add_test(tc, test_502_when_nothing_answers);
    tcase_add_test(tc, test_101_not_asked_for_is_502);
    tcase_add_test(tc, test_504_past_the_read_timeout);
    tcase_add_test(tc, test_504_when_the_head_stalls);
    tcase_add_test(tc, test_post_lost_on_a_pooled_connection_is_502);
    tcase_add_test(tc, test_surplus_never_reaches_another_client);
    tcase_add_test(tc, test_round_robin_skips_a_dead_server);
    tcase_add_test(tc, test_past_the_coroutine_cap);
    tcase_add_test(tc, test_bad_yaml_refused_at_its_line);
}
