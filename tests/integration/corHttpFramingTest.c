/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the HTTP writer and the forward proxy send, against the real
 * binary in both modes: no body where the status forbids one, whoever
 * produced it (a handler, a stream, a cor:// upstream answering 204 with a
 * body shaped as a second response, which must not become the answer of
 * the client's next pipelined request); no status but a final one (and
 * 101 only for an upgrade); the upstream's length kept, never invented,
 * so that an HTTP/1.0 client sees a cut answer as cut; and what reaches
 * the upstream: the target as the client sent it ("%2F", "/./" and
 * "/../" stay, as nginx's proxy_pass without a URI sends them), and no
 * header name with an underscore unless the group allows them. Clients: raw
 * sockets and curl; upstreams: the scripted one
 * (tests/integration/corHttpUpstream.c) and a second cor over cor://.
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
static CorServer corUpstream;
static pid_t upstreamPid;
static int upstreamPort;
static char out[1 << 16];

/* The cor:// upstream: /cor/chain/... on to the HTTP upstream, every other
 * path to the testkit's "status". */
static const char upstreamFormat[] =
    "runtime: { loops: 1, coroutines: { enabled: {COROUTINES} } }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "  - { protocol: cor, address: 127.0.0.1:{PORT2} }\n"
    "modules: [ { load: http }, { load: cor },\n"
    "           { load: {MODULES}/testkit.so },\n"
    "           { load: forward, upstreams: [ { name: backend,\n"
    "             servers: [ \"http://127.0.0.1:%d\" ] } ] } ]\n"
    "routes: [ { match: \"/cor/chain/*\", handler: backend },\n"
    "          { match: \"/*\", handler: status } ]\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static const char configFormat[] =
    "runtime:\n"
    "  loops: 1\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: cor }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "  - load: forward\n"
    "    upstreams:\n"
    "      - { name: backend, servers: [ \"http://127.0.0.1:%d\" ] }\n"
    "      - { name: loose, servers: [ \"http://127.0.0.1:%d\" ],\n"
    "          underscores_in_headers: true }\n"
    "      - { name: corup, servers: [ \"cor://127.0.0.1:%d\" ] }\n"
    "routes:\n"
    "  - { match: \"/status\", handler: status }\n"
    "  - { match: \"/cor/*\", handler: corup }\n"
    "  - { match: \"/loose/*\", handler: loose }\n"
    "  - { match: \"/*\", handler: backend }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
setUp(void)
{
    char yaml[4096];

    upstreamPid = corUpstreamStart(&upstreamPort);
    ck_assert_int_gt(upstreamPid, 0);
    snprintf(yaml, sizeof(yaml), upstreamFormat, upstreamPort);
    ck_assert_int_eq(corServerStart(&corUpstream, yaml), 0);
    snprintf(yaml, sizeof(yaml), configFormat, upstreamPort, upstreamPort,
             corUpstream.port2);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
    corServerStop(&corUpstream);
    corUpstreamStop(&upstreamPid);
}

/* curl with args on path of the server; its output in out, its exit
 * status returned. */
static int
curl(const char* args, const char* path)
{
    return corCurl(server.port, args, path, out, sizeof(out));
}

static int
count(const char* text)
{
    int n = 0;

    for (const char* p = out; (p = strstr(p, text)) != NULL; p++) {
        n++;
    }
    return n;
}

#define CHECK_HAS(text)                                                        \
    ck_assert_msg(strstr(out, text) != NULL, "no '%s' in: %s", text, out)
#define CHECK_HAS_NOT(text)                                                    \
    ck_assert_msg(strstr(out, text) == NULL, "'%s' in: %s", text, out)

/* Send request, then a second one that closes, on one connection, and
 * read what comes to the close into out. */
static void
pipelined(const char* method, const char* path)
{
    char requests[1024];
    long deadline = corNowMs() + 20000;
    size_t len = 0;
    int fd = corConnect(server.port);

    ck_assert_int_ge(fd, 0);
    snprintf(requests, sizeof(requests),
             "%s %s HTTP/1.1\r\nHost: t\r\n\r\n"
             "GET /status?code=200&len=2 HTTP/1.1\r\nHost: t\r\n"
             "Connection: close\r\n\r\n",
             method, path);
    ck_assert_int_eq(corSendAll(fd, requests, strlen(requests)), 0);
    while (len + 1 < sizeof(out) && corNowMs() < deadline) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t n;

        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        n = recv(fd, out + len, sizeof(out) - 1 - len, 0);
        if (n <= 0) {
            break;
        }
        len += (size_t)n;
    }
    out[len] = '\0';
    close(fd);
}

/* The first answer is status with nothing after its head, and the
 * second is the real one: two answers, no cookie. */
static void
checkTwoAnswers(const char* status)
{
    const char* second = strstr(out, "\r\n\r\nHTTP/1.1 200 OK\r\n");

    ck_assert_msg(strncmp(out, status, strlen(status)) == 0, "%s", out);
    ck_assert_msg(count("HTTP/1.1 ") == 2, "%s", out);
    CHECK_HAS_NOT("attacker");
    ck_assert_msg(second != NULL, "%s", out);
    ck_assert_msg(strcmp(out + strlen(out) - 6, "\r\n\r\nxx") == 0, "%s", out);
}

/* ---- Bodies a status forbids --------------------------------------------- */

/* A handler that answers 204 or 304 with a body shaped as a second
 * response, whole or streamed: the writer sends the head alone, and the
 * client's next request gets its own answer. */
START_TEST(test_handler_body_never_follows_204_304)
{
    pipelined("GET", "/status?code=204&split=1");
    checkTwoAnswers("HTTP/1.1 204 No Content\r\n");
    CHECK_HAS_NOT("Content-Length: 6");
    pipelined("GET", "/status?code=304&split=1");
    checkTwoAnswers("HTTP/1.1 304 Not Modified\r\n");
    pipelined("GET", "/status?code=204&split=1&stream=1");
    checkTwoAnswers("HTTP/1.1 204 No Content\r\n");
    CHECK_HAS_NOT("Transfer-Encoding");
    pipelined("HEAD", "/status?code=200&split=1&stream=1");
    checkTwoAnswers("HTTP/1.1 200 OK\r\n");
    pipelined("HEAD", "/status?code=200&split=1");
    checkTwoAnswers("HTTP/1.1 200 OK\r\n");
}
END_TEST

/* A 1xx is no final answer, and 101 only the upgrade's: a handler that
 * gives one gets a 500 out, logged. */
START_TEST(test_no_interim_status_as_an_answer)
{
    pipelined("GET", "/status?code=101&len=4");
    ck_assert_msg(strncmp(out, "HTTP/1.1 500 ", 13) == 0, "%s", out);
    CHECK_HAS_NOT("101");
    pipelined("GET", "/status?code=103&len=4&stream=1");
    ck_assert_msg(strncmp(out, "HTTP/1.1 500 ", 13) == 0, "%s", out);
    ck_assert_int_eq(count("HTTP/1.1 "), 2);
    ck_assert_int_ge(corServerLogCount(&server, "status 101 is not a final "
                                                "answer"),
                     1);
}
END_TEST

/* A cor:// upstream answering 204 with a body shaped as a second
 * response: the forward passes the 204 on alone, and the next pipelined
 * request reads its own answer, not the upstream's cookie. A 101 it
 * cannot send at all (its server answers 500 for it). */
START_TEST(test_cor_upstream_204_cannot_split)
{
    pipelined("GET", "/cor/x?code=204&split=1");
    checkTwoAnswers("HTTP/1.1 204 No Content\r\n");
    pipelined("GET", "/cor/x?code=204&len=5000");
    checkTwoAnswers("HTTP/1.1 204 No Content\r\n");
    ck_assert_int_eq(curl("-o /dev/null -w '%{http_code}'", "/cor/x?code=101"),
                     0);
    ck_assert_str_eq(out, "500");
}
END_TEST

/* ---- Lengths ------------------------------------------------------------- */

/* An upstream's length is kept past 2 KiB (the answer is streamed, not
 * chunked), so an HTTP/1.0 client sees a cut answer as cut; and an answer
 * that comes whole over cor:// says its length too. */
START_TEST(test_upstream_length_kept)
{
    ck_assert_int_eq(curl("-D - -o /dev/null", "/big?n=100000"), 0);
    CHECK_HAS("Content-Length: 100000\r\n");
    CHECK_HAS_NOT("Transfer-Encoding");
    /* 3000 of 5000 bytes, then the close. */
    ck_assert_int_eq(curl("--http1.0 -o /dev/null", "/cut"), 18);
    ck_assert_int_eq(curl("-o /dev/null", "/cut"), 18);
    ck_assert_int_eq(curl("-D - -o /dev/null", "/cor/x?code=200&len=5000"), 0);
    CHECK_HAS("Content-Length: 5000\r\n");
}
END_TEST

/* A HEAD says the upstream's length, or none: never a made-up 0. */
START_TEST(test_head_length_never_invented)
{
    ck_assert_int_eq(curl("-I", "/chunked"), 0);
    CHECK_HAS("HTTP/1.1 200");
    CHECK_HAS("X-Test: chunked");
    CHECK_HAS_NOT("Content-Length");
    ck_assert_int_eq(curl("-I", "/cl"), 0);
    CHECK_HAS("Content-Length: 5\r\n");
    ck_assert_int_eq(curl("-I", "/big?n=100000"), 0);
    CHECK_HAS("Content-Length: 100000\r\n");
}
END_TEST

/* A handler's Content-Length is the length of its stream, held to it
 * (more is dropped and the connection closed; less is cut, never
 * padded), and never a second length beside the body's. */
START_TEST(test_handler_length_held)
{
    ck_assert_int_eq(curl("-i", "/status?code=200&stream=1&len=20&cl=10"), 0);
    CHECK_HAS("Content-Length: 10\r\n");
    ck_assert_str_eq(strstr(out, "\r\n\r\n") + 4, "xxxxxxxxxx");
    ck_assert_int_eq(curl("-o /dev/null", "/status?code=200&stream=1&len=20"
                                          "&cl=30"),
                     18);
    ck_assert_int_eq(curl("-i", "/status?code=200&len=3&cl=50"), 0);
    ck_assert_int_eq(count("Content-Length"), 1);
    CHECK_HAS("Content-Length: 3\r\n");
}
END_TEST

/* ---- What reaches the upstream ------------------------------------------- */

/* The target as the client sent it: the routes saw its normal form, the
 * upstream decides what its own is (corRoutePathTest has the guards). */
START_TEST(test_path_reaches_upstream_as_encoded)
{
    ck_assert_int_eq(curl("--path-as-is", "/echo/group%2Fproject/./a/../b"
                                          "%20c?q=%2F"),
                     0);
    CHECK_HAS("GET /echo/group%2Fproject/./a/../b%20c?q=%2F HTTP/1.1\r\n");
    ck_assert_int_eq(curl("--path-as-is", "/x%2Fy/../%2e%2e//echo%2fz"), 0);
    CHECK_HAS("GET /x%2Fy/../%2e%2e//echo%2fz HTTP/1.1\r\n");
    /* Through a cor:// hop too: its server keeps the path as it came. */
    ck_assert_int_eq(curl("--path-as-is", "/cor/chain/./echo/a%2Fb"), 0);
    CHECK_HAS("GET /cor/chain/./echo/a%2Fb HTTP/1.1\r\n");
}
END_TEST

/* Header names with an underscore are dropped (Transfer_Encoding would
 * be Transfer-Encoding to many servers), unless the group allows them. */
START_TEST(test_underscore_headers_dropped)
{
    ck_assert_int_eq(curl("-H 'Transfer_Encoding: chunked' "
                          "-H 'Content_Length: 9' -H 'X-Kept: 1'",
                          "/echo"),
                     0);
    CHECK_HAS("X-Kept: 1");
    CHECK_HAS_NOT("Transfer_Encoding");
    CHECK_HAS_NOT("Content_Length");
    ck_assert_int_eq(curl("-H 'X_Name: 1'", "/loose/echo"), 0);
    CHECK_HAS("X_Name: 1");
}
END_TEST

COR_TEST_SUITE(corHttpFraming)
{
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_handler_body_never_follows_204_304);
    tcase_add_test(tc, test_no_interim_status_as_an_answer);
    tcase_add_test(tc, test_cor_upstream_204_cannot_split);
    tcase_add_test(tc, test_upstream_length_kept);
    tcase_add_test(tc, test_head_length_never_invented);
    tcase_add_test(tc, test_handler_length_held);
    tcase_add_test(tc, test_path_reaches_upstream_as_encoded);
    tcase_add_test(tc, test_underscore_headers_dropped);
}
