/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The routing layer against the real binary and curl, over HTTP/1.1 and
 * HTTP/2: routes by host (a name, "*.suffix", a list; without case or
 * port), "=/exact" beside a prefix, "~regex" with captures for a handler
 * (the testkit's "seen") and for templates, a redirect, a rewrite routed
 * again (and a loop of them stopped at 500), request headers set and
 * removed on the way to an upstream, and error pages (the top level's,
 * a route's before them, an unreadable one keeping the built-in text).
 * nghttp too, for h2c as another client writes it: the host from
 * :authority, and a redirect's status and Location in HEADERS.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CorServer server;
static pid_t upstreamPid;
static int upstreamPort;
static char out[1 << 16];

static const char* configFormat =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
    "error_pages: { \"404\": {DIR}/404.html, \"5xx\": {DIR}/50x.html }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "  - load: forward\n"
    "    upstreams:\n"
    "      - { name: backend, servers: [ \"http://127.0.0.1:%d\" ] }\n"
    "routes:\n"
    "  - { match: \"/*\", host: plain.test,\n"
    "      redirect: { to: \"https://{host}{uri}\", status: 308 } }\n"
    "  - { host: example.com, match: \"GET /*\", handler: seen,\n"
    "      request_headers: { set: { X-Site: example } } }\n"
    "  - { host: \"*.example.org\", match: \"GET /*\", handler: seen,\n"
    "      request_headers: { set: { X-Site: \"wild {host}\" } } }\n"
    "  - { host: [ a.test, B.Test ], match: \"/*\", handler: seen,\n"
    "      request_headers: { set: { X-Site: list } } }\n"
    "  - { match: \"POST /hdr/*\", handler: seen, headers: { X-A: post } }\n"
    "  - { match: \"GET =/hdr/x\", handler: seen }\n"
    "  - { match: \"GET =/exact\", handler: seen,\n"
    "      request_headers: { set: { X-Site: exact } } }\n"
    "  - { match: \"GET /exact*\", handler: seen,\n"
    "      request_headers: { set: { X-Site: prefix } } }\n"
    "  - { match: \"GET ~^/u/([0-9]+)$\", rewrite: \"/user?id={1}\" }\n"
    "  - { match: \"GET /user\", handler: seen }\n"
    "  - { match: \"GET ~^/c/([a-z]+)/([0-9]+)$\", handler: seen }\n"
    "  - { match: \"~*\\\\.PHP$\", handler: seen,\n"
    "      request_headers: { set: { X-Site: php } } }\n"
    "  - { match: \"/loop\", rewrite: \"/loop\" }\n"
    "  - { match: \"/api/*\", handler: backend,\n"
    "      request_headers: { set: { X-Real-IP: \"{client}\" },\n"
    "                         remove: [ Cookie ] } }\n"
    "  - { match: \"GET /fail\", handler: status,\n"
    "      error_pages: { \"502\": {DIR}/route502.html,\n"
    "                     \"503\": {DIR}/missing.html,\n"
    "                     \"405\": {DIR}/route405.html } }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

/* A shell command with $P and $D set; its output in out. */
#define SH(...)                                                                \
    corShellAt(server.port, server.dir, out, sizeof(out), __VA_ARGS__)

/* curl -si with args on path; the status, the answer in out. */
static int
get(const char* args, const char* path)
{
    return corCurlStatus(server.port, args, path, out, sizeof(out));
}

#define CHECK_HAS(text) COR_CHECK_HAS(out, text)
#define CHECK_HAS_NOT(text) COR_CHECK_HAS_NOT(out, text)

/* In the server's process before its exec: the pages into its scratch
 * folder, where the configuration's {DIR} points. */
static void
pagesWrite(void* arg)
{
    static const char* const pages[][2] = {
        { "404.html", "<p>not here</p>\n" },
        { "50x.html", "<p>down</p>\n" },
        { "route502.html", "<p>route 502</p>\n" },
        { "route405.html", "<p>route 405</p>\n" },
    };
    const CorServer* s = arg;
    char path[256];

    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        FILE* f;

        snprintf(path, sizeof(path), "%s/%s", s->dir, pages[i][0]);
        f = fopen(path, "w");
        if (f != NULL) {
            fputs(pages[i][1], f);
            fclose(f);
        }
    }
}

static void
setUp(void)
{
    char yaml[4096];

    upstreamPid = corUpstreamStart(&upstreamPort);
    ck_assert_int_gt(upstreamPid, 0);
    snprintf(yaml, sizeof(yaml), configFormat, upstreamPort);
    ck_assert_int_eq(corServerStartChild(&server, yaml, pagesWrite, &server),
                     0);
}

static void
tearDown(void)
{
    corServerStop(&server);
    corUpstreamStop(&upstreamPid);
}

static const char* const protocols[] = { "--http1.1",
                                         "--http2-prior-knowledge" };

START_TEST(test_hosts)
{
    char args[128];

    for (size_t p = 0; p < 2; p++) {
        snprintf(args, sizeof(args), "%s -H 'Host: example.com'", protocols[p]);
        ck_assert_int_eq(get(args, "/x"), 200);
        CHECK_HAS("X-Site: example");
        /* Without case, without port. */
        snprintf(args, sizeof(args), "%s -H 'Host: EXAMPLE.com:8080'",
                 protocols[p]);
        ck_assert_int_eq(get(args, "/x"), 200);
        CHECK_HAS("X-Site: example");
        snprintf(args, sizeof(args), "%s -H 'Host: a.b.example.org'",
                 protocols[p]);
        ck_assert_int_eq(get(args, "/x"), 200);
        CHECK_HAS("X-Site: wild a.b.example.org");
        snprintf(args, sizeof(args), "%s -H 'Host: b.test'", protocols[p]);
        ck_assert_int_eq(get(args, "/x"), 200);
        CHECK_HAS("X-Site: list");
        /* "*.example.org" is not example.org itself (as nginx's). */
        snprintf(args, sizeof(args), "%s -H 'Host: example.org'", protocols[p]);
        ck_assert_int_eq(get(args, "/x"), 404);
        CHECK_HAS("<p>not here</p>");
    }
}
END_TEST

START_TEST(test_exact_prefix_and_regex)
{
    for (size_t p = 0; p < 2; p++) {
        ck_assert_int_eq(get(protocols[p], "/exact"), 200);
        CHECK_HAS("X-Site: exact");
        ck_assert_int_eq(get(protocols[p], "/exactly"), 200);
        CHECK_HAS("X-Site: prefix");
        ck_assert_int_eq(get(protocols[p], "//exact"), 200);
        CHECK_HAS("X-Site: exact");
        ck_assert_int_eq(get(protocols[p], "/c/abc/42"), 200);
        CHECK_HAS("capture 0: /c/abc/42\n");
        CHECK_HAS("capture 1: abc\n");
        CHECK_HAS("capture 2: 42\n");
        ck_assert_int_eq(get(protocols[p], "/c/ABC/42"), 404);
        ck_assert_int_eq(get(protocols[p], "/a/Index.php"), 200);
        CHECK_HAS("X-Site: php");
    }
}
END_TEST

/* A route's headers are its own: not those of an earlier route that
 * took the path but not the method (the index tries the exact path's
 * routes before the prefixes'), which a 405 takes. */
START_TEST(test_headers_of_the_route_that_answers)
{
    ck_assert_int_eq(get("", "/hdr/x"), 200);
    CHECK_HAS_NOT("X-A:");
    ck_assert_int_eq(get("-X PUT", "/hdr/x"), 405);
    CHECK_HAS("X-A: post");
    CHECK_HAS("Allow: GET, HEAD, POST");
}
END_TEST

/* A redirect reads no body and asks for none: a chunked one, or one
 * that waits for a 100, gets the redirect at once, and the server goes
 * on. */
START_TEST(test_a_redirect_with_a_body)
{
    ck_assert_int_eq(get("-H 'Host: plain.test' -H 'Transfer-Encoding: "
                         "chunked' --data-binary hello",
                         "/a"),
                     308);
    ck_assert_int_eq(SH("head -c 3000000 /dev/zero > $D/big"), 0);
    ck_assert_int_eq(get("-H 'Host: plain.test' -H 'Expect: "
                         "100-continue' --data-binary @$D/big",
                         "/a"),
                     308);
    CHECK_HAS_NOT("100 Continue");
    ck_assert_int_eq(get("", "/exact"), 200);
}
END_TEST

START_TEST(test_redirect_and_rewrite)
{
    ck_assert_int_eq(get("-H 'Host: plain.test:81'", "/a//b?x=1"), 308);
    CHECK_HAS("Location: https://plain.test/a//b?x=1\r\n");
    for (size_t p = 0; p < 2; p++) {
        ck_assert_int_eq(get(protocols[p], "/u/42?ignored"), 200);
        CHECK_HAS("path: /user\n");
        CHECK_HAS("query: id=42\n");
        CHECK_HAS_NOT("capture");
        ck_assert_int_eq(get(protocols[p], "/u/4x"), 404);
    }
    ck_assert_int_eq(get("", "/loop"), 500);
    ck_assert_int_eq(corServerLogCount(&server, "the rewrites loop"), 1);
}
END_TEST

/* nghttp (prior knowledge h2c, no Host header): routes by :authority,
 * and a redirect's HEADERS. */
START_TEST(test_nghttp_authority_and_redirect)
{
    if (SH("command -v nghttp") != 0) {
        fprintf(stderr, "corRouteTest: no nghttp (nghttp2-client), its "
                        "checks skip\n");
        return;
    }
    ck_assert_int_eq(SH("nghttp -v -H ':authority: EXAMPLE.com:8080' "
                        "http://127.0.0.1:$P/x"),
                     0);
    CHECK_HAS(":status: 200");
    CHECK_HAS("X-Site: example");
    ck_assert_int_eq(SH("nghttp -v -H ':authority: a.b.example.org' "
                        "http://127.0.0.1:$P/x"),
                     0);
    CHECK_HAS("X-Site: wild a.b.example.org");
    ck_assert_int_eq(SH("nghttp -v -H ':authority: example.org' "
                        "http://127.0.0.1:$P/x"),
                     0);
    CHECK_HAS(":status: 404");
    CHECK_HAS("<p>not here</p>");
    ck_assert_int_eq(SH("nghttp -v -H ':authority: plain.test' "
                        "'http://127.0.0.1:'$P'/a//b?x=1'"),
                     0);
    CHECK_HAS(":status: 308");
    CHECK_HAS("location: https://plain.test/a//b?x=1\n");
}
END_TEST

/* What forward sends is what the route made of the request. */
START_TEST(test_request_headers_to_an_upstream)
{
    ck_assert_int_eq(get("-H 'Cookie: secret=1' -H 'X-Real-IP: 6.6.6.6'",
                         "/api/echo"),
                     200);
    CHECK_HAS("X-Real-IP: 127.0.0.1\r\n");
    CHECK_HAS_NOT("6.6.6.6");
    CHECK_HAS_NOT("secret=1");
}
END_TEST

START_TEST(test_error_pages)
{
    for (size_t p = 0; p < 2; p++) {
        ck_assert_int_eq(get(protocols[p], "/nothing"), 404);
        CHECK_HAS("content-type: text/html");
        CHECK_HAS("<p>not here</p>");
        ck_assert_int_eq(get(protocols[p], "/fail?code=502&len=3"), 502);
        CHECK_HAS("<p>route 502</p>");
        ck_assert_int_eq(get(protocols[p], "/fail?code=500&len=3"), 500);
        CHECK_HAS("<p>down</p>");
        /* Its page cannot be read: the handler's own body. */
        ck_assert_int_eq(get(protocols[p], "/fail?code=503&len=3"), 503);
        CHECK_HAS("\r\n\r\nxxx");
        ck_assert_int_eq(get(protocols[p], "/fail?code=201&len=3"), 201);
    }
    ck_assert_int_eq(corServerLogCount(&server, "missing.html"), 1);
}
END_TEST

/* Before: the core's 405 took the top level's error pages, never those
 * of the route that took the path (its own 405 page went unseen). */
START_TEST(test_a_405_takes_its_routes_error_page)
{
    for (size_t p = 0; p < 2; p++) {
        char args[64];

        snprintf(args, sizeof(args), "%s -X PUT", protocols[p]);
        ck_assert_int_eq(get(args, "/fail"), 405);
        CHECK_HAS("<p>route 405</p>");
        CHECK_HAS("Allow: GET, HEAD");
    }
}
END_TEST

/* Before: a route that failed to build left its slot as it was, and the
 * next route took it over: here the regex of the first made the second,
 * a path route, pass for one with a group, and its {1} went unreported. */
START_TEST(test_a_route_after_a_failed_one_is_checked_as_itself)
{
    ck_assert_int_eq(corConfigCheck(&server, "slot.yaml",
                                    "listen: [ { "
                                    "protocol: http, address: \"127.0.0.1:"
                                    "8080\" } ]\nroutes:\n"
                                    "  - { match: \"~^/(a)$\", redirect: "
                                    "\"/x{1}\", guard: nosuch }\n"
                                    "  - { match: /b, redirect: \"/y{1}\" "
                                    "}\n",
                                    out, sizeof(out)),
                     1);
    CHECK_HAS("no module registered a guard named 'nosuch'");
    CHECK_HAS("slot.yaml:4:14: route '/b': a template names {1}, but only a "
              "regex match");
}
END_TEST

COR_TEST_SUITE(corRoute)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_hosts);
    tcase_add_test(tc, test_exact_prefix_and_regex);
    tcase_add_test(tc, test_redirect_and_rewrite);
    tcase_add_test(tc, test_nghttp_authority_and_redirect);
    tcase_add_test(tc, test_headers_of_the_route_that_answers);
    tcase_add_test(tc, test_a_redirect_with_a_body);
    tcase_add_test(tc, test_request_headers_to_an_upstream);
    tcase_add_test(tc, test_error_pages);
    tcase_add_test(tc, test_a_405_takes_its_routes_error_page);
    tcase_add_test(tc, test_a_route_after_a_failed_one_is_checked_as_itself);
}
