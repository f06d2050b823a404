/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One path for routes, guards and files (issue 32, item 1): a guard on
 * the /private/ prefix (a static root) and on /api/ (an upstream) is met
 * by every spelling of those paths a client may send ("//", "///", "/./",
 * "/.//", "//" inside, an escaped letter, "/a/../"), over HTTP/1.1 and
 * HTTP/2 (curl --path-as-is), while a catch-all route to the same root and
 * upstream stands behind them. What goes upstream is the target as the
 * client sent it (nginx's proxy_pass without a URI), unless strip_prefix
 * cut it: then the rest of its normal form, escapes as sent.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CorServer server;
static pid_t upstreamPid;
static int upstreamPort;
static char dir[64];
static char out[1 << 16];

static const char* configFormat =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: static, roots: [ { name: site, root: %s/www } ] }\n"
    "  - { load: access, guards: [ { name: nobody, deny: [ all ] } ] }\n"
    "  - load: forward\n"
    "    upstreams:\n"
    "      - { name: backend, servers: [ \"http://127.0.0.1:%d\" ] }\n"
    "routes:\n"
    "  - { match: \"/private/*\", handler: site, guard: nobody }\n"
    "  - { match: \"/api/*\", handler: backend, guard: nobody }\n"
    "  - { match: \"/s/*\", handler: backend, strip_prefix: /s }\n"
    "  - { match: \"/up/*\", handler: backend }\n"
    "  - { match: \"GET /*\", handler: site }\n"
    "  - { match: \"/*\", handler: backend }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

/* A shell command with $P and $D set; its output in out. */
#define SH(...) corShellAt(server.port, dir, out, sizeof(out), __VA_ARGS__)

/* The status curl (with args: a method, a protocol) got for path, sent
 * as it is written. */
static int
status(const char* args, const char* path)
{
    ck_assert_int_eq(SH("curl -sS --max-time 20 --path-as-is %s -o $D/body "
                        "-w '%%{http_code}' 'http://127.0.0.1:'$P'%s'",
                        args, path),
                     0);
    return atoi(out);
}

static void
setUp(void)
{
    char yaml[2048];

    snprintf(dir, sizeof(dir), "/tmp/cor-paths-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(SH("mkdir -p $D/www/private && echo secret > "
                        "$D/www/private/secret.txt && echo open > "
                        "$D/www/open.txt"),
                     0);
    upstreamPid = corUpstreamStart(&upstreamPort);
    ck_assert_int_gt(upstreamPid, 0);
    snprintf(yaml, sizeof(yaml), configFormat, dir, upstreamPort);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    char command[128];

    corServerStop(&server);
    corUpstreamStop(&upstreamPid);
    snprintf(command, sizeof(command), "rm -rf %s", dir);
    corShell(command, NULL, 0);
}

static const char* const protocols[] = { "--http1.1",
                                         "--http2-prior-knowledge" };

/* Every spelling of /private/secret.txt meets its guard (nginx: 403);
 * the file itself is served under no other name. */
START_TEST(test_a_guarded_folder_under_any_spelling)
{
    static const char* const paths[] = {
        "/private/secret.txt",
        "//private/secret.txt",
        "///private/secret.txt",
        "/./private/secret.txt",
        "/.//private/secret.txt",
        "/private//secret.txt",
        "/%70rivate/secret.txt",
        "/a/../private/secret.txt",
        "/private/./secret.txt",
        "/%2Fprivate/secret.txt",
        "/open.txt/../private//secret.txt",
    };

    for (size_t p = 0; p < 2; p++) {
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
            ck_assert_msg(status(protocols[p], paths[i]) == 403, "%s %s: %s",
                          protocols[p], paths[i], out);
        }
        /* The catch-all still serves what it should, "//" or not. */
        ck_assert_int_eq(status(protocols[p], "//open.txt"), 200);
        ck_assert_int_eq(SH("cat $D/body"), 0);
        ck_assert_str_eq(out, "open\n");
    }
}
END_TEST

/* An upstream that the /api/ prefix denies is not reached through
 * another spelling of the path and the catch-all route to it. */
START_TEST(test_a_guarded_upstream_under_any_spelling)
{
    static const char* const paths[] = {
        "/api/x/echo",  "//api/x/echo",  "/./api/x/echo",
        "/api//x/echo", "/%61pi/x/echo", "/b/../api/x/echo",
    };
    char args[64];

    for (size_t p = 0; p < 2; p++) {
        snprintf(args, sizeof(args), "%s -X POST -d x", protocols[p]);
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
            ck_assert_msg(status(args, paths[i]) == 403, "%s %s: %s",
                          protocols[p], paths[i], out);
        }
        ck_assert_int_eq(status(args, "/apix/echo"), 200);
    }
}
END_TEST

/* Unstripped, the upstream gets the target as sent; stripped, the rest
 * of its normal form with the client's escapes. */
START_TEST(test_the_upstream_gets_the_target_as_sent)
{
    for (size_t p = 0; p < 2; p++) {
        ck_assert_int_eq(status(protocols[p], "/up//echo/./x%2Fy?q=1"), 200);
        ck_assert_int_eq(SH("head -1 $D/body"), 0);
        ck_assert_msg(strstr(out, "GET /up//echo/./x%2Fy?q=1 HTTP/1.1") != NULL,
                      "%s: %s", protocols[p], out);

        ck_assert_int_eq(status(protocols[p], "/s//echo%2Fa/./b/../c?q"), 200);
        ck_assert_int_eq(SH("head -1 $D/body"), 0);
        ck_assert_msg(strstr(out, "GET /echo%2Fa/c?q HTTP/1.1") != NULL,
                      "%s: %s", protocols[p], out);
    }
}
END_TEST

COR_TEST_SUITE(corRoutePath)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_a_guarded_folder_under_any_spelling);
    tcase_add_test(tc, test_a_guarded_upstream_under_any_spelling);
    tcase_add_test(tc, test_the_upstream_gets_the_target_as_sent);
}
