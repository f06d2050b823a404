/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A route's own limits (`limits: { body_bytes, body_timeout }`) against
 * the real binary and curl: decided from the head, before any body byte
 * is taken, over HTTP/1.1 (by Content-Length, chunked, with and without
 * Expect: 100-continue), HTTP/2 (with and without content-length) and
 * cor://, for a body read whole and one handed on as it comes; a route
 * may take more than the top level allows and less; a rewrite's target
 * route decides, not the route that rewrote; the keys decided before
 * routing are refused at cor -t; a reload's new limits apply to new
 * requests.
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

/* The top level takes 1 KiB; /upload 1 MiB, /small 10 bytes. */
static const char* configFormat =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
    "  - { protocol: cor, address: 127.0.0.1:{PORT2} }\n"
    "limits: { body_bytes: 1KiB }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: cor }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"POST /upload\", handler: bodysum,\n"
    "      limits: { body_bytes: %s } }\n"
    "  - { match: \"POST /small\", handler: bodysum,\n"
    "      limits: { body_bytes: 10 } }\n"
    "  - { match: \"POST /stream\", handler: bodyread,\n"
    "      limits: { body_bytes: 2KiB } }\n"
    "  - { match: \"POST /slow\", handler: bodysum,\n"
    "      limits: { body_timeout: 1s } }\n"
    "  - { match: \"POST /rw/up\", rewrite: \"/upload\" }\n"
    "  - { match: \"POST /rw/early\", rewrite: \"/stream?early=1\" }\n"
    "  - { match: \"POST /*\", handler: bodysum }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
configWrite(char* yaml, size_t cap, const char* uploadBytes)
{
    snprintf(yaml, cap, configFormat, uploadBytes);
}

static void
setUp(void)
{
    char yaml[4096];

    configWrite(yaml, sizeof(yaml), "1MiB");
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
}

/* The ways a body is sent, as a command of $D/body to http://...$P.
 * Over HTTP/2 nghttp, which shows an answer that came before the upload
 * ended (curl reports the stream's reset after it as its error, and no
 * status). */
static const struct {
    const char* name;
    const char* command;
} ways[] = {
    { "HTTP/1.1 Content-Length", "curl -sv --max-time 30 --http1.1 "
                                 "--data-binary @$D/body" },
    { "HTTP/1.1 chunked", "curl -sv --max-time 30 --http1.1 -H "
                          "'Transfer-Encoding: chunked' --data-binary "
                          "@$D/body" },
    { "HTTP/1.1 Expect", "curl -sv --max-time 30 --http1.1 -H 'Expect: "
                         "100-continue' --data-binary @$D/body" },
    { "HTTP/1.1 chunked Expect", "curl -sv --max-time 30 --http1.1 -H "
                                 "'Transfer-Encoding: chunked' -H 'Expect: "
                                 "100-continue' --data-binary @$D/body" },
    { "HTTP/2 content-length", "nghttp -v -t 30 -d $D/body" },
    { "HTTP/2 no length", "nghttp -v -t 30 --no-content-length -d "
                          "$D/body" },
};

#define WAYS (sizeof(ways) / sizeof(ways[0]))

/* The status of the last answer in out (curl -v's "< HTTP/1.1 200",
 * nghttp -v's ":status: 200"), past a 100; 0 when none came. */
static int
lastStatus(void)
{
    int status = 0;

    for (const char* at = out; (at = strstr(at, "< HTTP/")) != NULL; at++) {
        int said = atoi(at + 2 + strcspn(at + 2, " "));

        status = said != 100 ? said : status;
    }
    for (const char* at = out; (at = strstr(at, ":status: ")) != NULL; at++) {
        int said = atoi(at + 9);

        status = said != 100 ? said : status;
    }
    return status;
}

/* POST bytes zeros to path the way ways[w] sends them: the final status;
 * the whole exchange in out. */
static int
post(size_t w, const char* path, size_t bytes)
{
    corShellAt(server.port, server.dir, out, sizeof(out),
               "head -c %zu /dev/zero > $D/body && %s "
               "http://127.0.0.1:$P%s 2>&1",
               bytes, ways[w].command, path);
    return lastStatus();
}

/* The route takes more than the top level: 100 KiB to /upload, by every
 * way; the same to any other route is refused 413. */
START_TEST(test_a_route_takes_more_than_the_top_level)
{
    for (size_t w = 0; w < WAYS; w++) {
        ck_assert_msg(post(w, "/upload", 100 * 1024) == 200, "%s: %s",
                      ways[w].name, out);
        ck_assert_msg(strstr(out, "length 102400 sum 0") != NULL, "%s: %s",
                      ways[w].name, out);
        ck_assert_msg(post(w, "/other", 100 * 1024) == 413, "%s: %s",
                      ways[w].name, out);
        /* Past the route's own limit too. */
        ck_assert_msg(post(w, "/upload", 2 * 1024 * 1024) == 413, "%s: %s",
                      ways[w].name, out);
    }
}
END_TEST

/* A route takes less than the top level: 20 bytes to /small are refused,
 * 5 pass, while 20 pass anywhere else. */
START_TEST(test_a_route_takes_less_than_the_top_level)
{
    for (size_t w = 0; w < WAYS; w++) {
        ck_assert_msg(post(w, "/small", 20) == 413, "%s: %s", ways[w].name,
                      out);
        ck_assert_msg(post(w, "/small", 5) == 200, "%s: %s", ways[w].name, out);
        ck_assert_msg(post(w, "/other", 20) == 200, "%s: %s", ways[w].name,
                      out);
    }
    /* The log names the limit that refused: the route's ("its route's
     * limits.body_bytes 10"; the helper takes no quote). */
    ck_assert_int_eq(corServerLogCount(&server, "POST /small"), WAYS);
    ck_assert_int_eq(corServerLogCount(&server, "s limits.body_bytes 10): "
                                                "refused 413"),
                     WAYS);
}
END_TEST

/* Expect: 100-continue waits for the route: a body it refuses by its
 * length is answered 413 with no 100 before (nothing of it sent), one it
 * takes is asked for. */
START_TEST(test_expect_waits_for_the_route)
{
    ck_assert_int_eq(post(2, "/other", 100 * 1024), 413);
    ck_assert_msg(strstr(out, "< HTTP/1.1 100") == NULL, "%s", out);
    ck_assert_int_eq(post(2, "/upload", 100 * 1024), 200);
    ck_assert_msg(strstr(out, "< HTTP/1.1 100 Continue") != NULL, "%s", out);
}
END_TEST

/* A body handed to its handler as it comes (bodyread) is bounded by its
 * route's limit: 1.5 KiB passes (past the top level's 1 KiB), 3 KiB is
 * refused (past the route's 2 KiB). */
START_TEST(test_a_streamed_body_has_its_routes_limit)
{
    for (size_t w = 0; w < WAYS; w++) {
        ck_assert_msg(post(w, "/stream", 1536) == 200, "%s: %s", ways[w].name,
                      out);
        ck_assert_msg(strstr(out, "length 1536") != NULL, "%s: %s",
                      ways[w].name, out);
        ck_assert_msg(post(w, "/stream", 3072) == 413, "%s: %s", ways[w].name,
                      out);
    }
}
END_TEST

/* A rewrite has no handler and no limits: the route its target reaches
 * decides, before the body. */
START_TEST(test_the_route_a_rewrite_reaches_decides)
{
    for (size_t w = 0; w < WAYS; w++) {
        ck_assert_msg(post(w, "/rw/up", 100 * 1024) == 200, "%s: %s",
                      ways[w].name, out);
    }
}
END_TEST

/* Send text as it is on a new connection and read one answer, within
 * timeoutMs, into out: its length, 0 when closed first, -1 on timeout. */
static ssize_t
exchange(const char* text, int timeoutMs)
{
    int fd = corConnect(server.port);
    ssize_t n;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, text, strlen(text)), 0);
    n = corReadResponse(fd, out, sizeof(out) - 1, timeoutMs);
    close(fd);
    out[n > 0 ? n : 0] = '\0';
    return n;
}

/*
 * Before: whether a body is handed on as it comes was asked of the route
 * that rewrote (no handler: no), so a body for bodyread behind a rewrite
 * was read whole before it ran, and ?early=1 answered only once the body
 * came (here never: the client waits for the answer; body_timeout, 30 s).
 * Now the route the rewrite reaches streams it: "early" comes at once.
 */
START_TEST(test_a_rewrite_to_a_streaming_handler_streams)
{
    ssize_t n = exchange("POST /rw/early HTTP/1.1\r\nHost: t\r\n"
                         "Content-Length: 1000\r\n\r\n",
                         20000);

    ck_assert_msg(n > 0, "no answer before the body (%zd)", n);
    ck_assert_msg(corStatus(out) == 200 && strstr(out, "early") != NULL, "%s",
                  out);
}
END_TEST

/* body_timeout on a route: a body that stalls there is cut after its 1 s,
 * not the top level's 30 s; judged by the time it took. */
START_TEST(test_a_routes_body_timeout)
{
    long from = corNowMs();
    ssize_t n = exchange("POST /slow HTTP/1.1\r\nHost: t\r\n"
                         "Content-Length: 10\r\n\r\nab",
                         29000);
    long took = corNowMs() - from;

    ck_assert_msg(took < 29000, "waited the top level's: %ld ms", took);
    ck_assert_msg(took >= 900, "cut early: %ld ms", took);
    /* Answered 408, or closed, as the top level's timeout does. */
    ck_assert_msg(n == 0 || corStatus(out) == 408, "%s", out);
}
END_TEST

/* cor:// too: a frame is cut at the most any route takes (1 MiB), then
 * the request is judged by its own route's limits. */
START_TEST(test_cor_requests_have_their_routes_limits)
{
    char command[512];

    snprintf(command, sizeof(command),
             "python3 tests/cor/corRawClient.py "
             "%d 'POST /upload body=100000' 'POST /other body=100000' "
             "'POST /small body=20' 'POST /small body=5' "
             "'POST /upload body=3000000'",
             server.port2);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "1 200\n2 413\n3 413\n4 200\n5 413\n");
}
END_TEST

/* A reload that changes a route's limits applies to the requests after
 * it: /upload takes 10 bytes once the new generation serves. */
START_TEST(test_a_reload_changes_a_routes_limits)
{
    char yaml[4096];
    long until;
    int status = 0;

    ck_assert_int_eq(post(0, "/upload", 100), 200);
    configWrite(yaml, sizeof(yaml), "10");
    ck_assert_int_eq(corServerWriteConfig(&server, yaml), 0);
    kill(server.pid, SIGHUP);
    until = corNowMs() + 60000;
    while (corNowMs() < until && (status = post(0, "/upload", 100)) == 200) {
        usleep(100 * 1000);
    }
    ck_assert_msg(status == 413, "%d: %s", status, out);
}
END_TEST

/* The keys decided before there is a route are refused at cor -t, at
 * their file:line:col, with why; a typo is an unknown key. */
START_TEST(test_keys_a_route_cannot_have)
{
    static const char* const early[] = { "header_bytes: 4KiB",
                                         "request_timeout: 5s",
                                         "keepalive_timeout: 5s",
                                         "connections: 5" };

    for (size_t i = 0; i < sizeof(early) / sizeof(early[0]); i++) {
        char yaml[512];

        snprintf(yaml, sizeof(yaml),
                 "listen: [ { protocol: http, address: "
                 "\"127.0.0.1:8080\" } ]\nroutes:\n  - { match: /x, redirect: "
                 "/y,\n      limits: { %s } }\n",
                 early[i]);
        ck_assert_int_eq(corConfigCheck(&server, "early.yaml", yaml, out,
                                        sizeof(out)),
                         1);
        ck_assert_msg(strstr(out, "early.yaml:4:") != NULL
                          && strstr(out, "is the top level's only") != NULL,
                      "%s", out);
    }
    ck_assert_int_eq(corConfigCheck(&server, "typo.yaml",
                                    "listen: [ { "
                                    "protocol: http, address: \"127.0.0.1:"
                                    "8080\" } ]\nroutes:\n  - { match: /x, "
                                    "redirect: /y,\n      limits: { "
                                    "body_byte: 1 } }\n",
                                    out, sizeof(out)),
                     1);
    ck_assert_msg(strstr(out, "typo.yaml:4:17: unknown key 'body_byte' in "
                              "limits")
                      != NULL,
                  "%s", out);
}
END_TEST

COR_TEST_SUITE(corRouteLimits)
{
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_a_route_takes_more_than_the_top_level);
    tcase_add_test(tc, test_a_route_takes_less_than_the_top_level);
    tcase_add_test(tc, test_expect_waits_for_the_route);
    tcase_add_test(tc, test_a_streamed_body_has_its_routes_limit);
    tcase_add_test(tc, test_the_route_a_rewrite_reaches_decides);
    tcase_add_test(tc, test_a_rewrite_to_a_streaming_handler_streams);
    tcase_add_test(tc, test_a_routes_body_timeout);
    tcase_add_test(tc, test_cor_requests_have_their_routes_limits);
    tcase_add_test(tc, test_a_reload_changes_a_routes_limits);
    tcase_add_test(tc, test_keys_a_route_cannot_have);
}
