/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guards and route headers against the real binary and real curl: an
 * address list that denies 127.0.0.1 and allows ::1 (both families, on
 * listeners of each; cor's [::] listeners are IPV6_V6ONLY, so a v4-mapped
 * client is corAccessNetTest's),
 * Basic authentication against an htpasswd file of bcrypt (htpasswd -B)
 * and SHA-512 crypt (openssl passwd -6) hashes, guards in order (lan
 * then staff), a rate limit (10/s burst 20, asked until it refuses: the
 * 20 of the burst pass and what the time they took brought, then 429 with
 * Retry-After; keys by header apart; counted in /metrics), a route's
 * headers on a 200, on a handler's 404 and on the core's 405 and 401,
 * and cor -t's errors (an unknown guard named, an htpasswd file that
 * cannot be read).
 */
#include "corTest.h"
#include "corServer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static char dir[64];
static char out[1 << 16];

/* A shell command, printf-style, with $P (the port, on 127.0.0.1 and
 * ::1) and $D (the scratch folder) set; its output in out. */
static int
sh(const char* fmt, ...)
{
    char command[4096];
    char body[3072];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(command, sizeof(command), "P=%d D=%s; %s 2>&1", server.port,
             dir, body);
    return corShell(command, out, sizeof(out));
}

/* curl's status for url with args, the head in $D/head. */
static int
status(const char* args, const char* url)
{
    ck_assert_int_eq(sh("curl -sS --max-time 20 %s -D $D/head -o /dev/null "
                        "-w '%%{http_code}' \"%s\"", args, url), 0);
    return atoi(out);
}

/* A field of the last head, or "" when absent. */
static const char*
field(const char* name)
{
    static char value[512];

    sh("grep -i '^%s:' $D/head | head -1 | cut -d' ' -f2- | tr -d '\\r\\n'",
       name);
    size_t n = strnlen(out, sizeof(value) - 1);

    memcpy(value, out, n);
    value[n] = '\0';
    return value;
}

static void
setUp(void)
{
    snprintf(dir, sizeof(dir), "/tmp/cor-guard-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* alice by bcrypt, bob by SHA-512 crypt. */
    ck_assert_int_eq(sh("htpasswd -cbB -C 6 $D/htpasswd alice 'wonder land' "
                        "2>/dev/null && printf 'bob:%%s\\n' \"$(openssl passwd -6 "
                        "hunter2)\" >> $D/htpasswd && mkdir $D/www && echo "
                        "hi > $D/www/a.txt"), 0);
}

static void
tearDown(void)
{
    char command[128];

    corServerStop(&server);
    snprintf(command, sizeof(command), "rm -rf %s", dir);
    corShell(command, NULL, 0);
}

static void
start(void)
{
    char yaml[4096];

    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 4\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
             "  - { protocol: http, address: \"[::1]:{PORT}\" }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "  - { load: static, roots: [ { name: site, root: %s/www } ] }\n"
             "  - load: access\n"
             "    guards:\n"
             "      - { name: lan, allow: [ \"::1\", 10.0.0.0/8 ], deny: "
             "[ 127.0.0.1 ] }\n"
             "      - { name: v4, allow: [ 127.0.0.0/8 ], deny: [ all ] }\n"
             "      - { name: staff, basic_auth: { realm: staff, users: "
             "%s/htpasswd } }\n"
             "  - load: limit\n"
             "    guards:\n"
             "      - { name: perip, rate: 10/s, burst: 20, key: ip }\n"
             "      - { name: perkey, rate: 1/m, burst: 2, key: "
             "\"header:X-Key\" }\n"
             "routes:\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "  - { match: \"GET /lan\", handler: hello, guard: lan }\n"
             "  - { match: \"GET /v4\", handler: hello, guard: v4 }\n"
             "  - { match: \"GET /staff\", handler: hello, guard: staff, "
             "headers: { X-Area: staff } }\n"
             "  - { match: \"GET /admin\", handler: hello, guard: [ lan, "
             "staff ] }\n"
             "  - { match: \"GET /burst\", handler: hello, guard: perip }\n"
             "  - { match: \"GET /key\", handler: hello, guard: [ perkey ] }\n"
             "  - { match: \"GET /x\", handler: hello, headers: { "
             "Strict-Transport-Security: \"max-age=31536000\", X-Two: "
             "\"2\" } }\n"
             "  - { match: \"GET /s/*\", handler: site, strip_prefix: /s, "
             "headers: { X-Site: \"yes\" } }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             dir, dir);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

#define V4(path) "http://127.0.0.1:$P" path
#define V6(path) "http://[::1]:$P" path

START_TEST(test_addresses_of_both_families)
{
    start();
    ck_assert_int_eq(status("", V4("/lan")), 403);
    ck_assert_int_eq(status("", V6("/lan")), 200);
    ck_assert_int_eq(status("", V4("/v4")), 200);
    ck_assert_int_eq(status("", V6("/v4")), 403);       /* deny all */
}
END_TEST

START_TEST(test_basic_auth_both_hashes)
{
    start();
    ck_assert_int_eq(status("", V4("/staff")), 401);
    ck_assert_str_eq(field("WWW-Authenticate"), "Basic realm=\"staff\"");
    ck_assert_str_eq(field("X-Area"), "staff");     /* on the refusal too */
    ck_assert_int_eq(status("-u 'alice:wonder land'", V4("/staff")), 200);
    ck_assert_int_eq(status("-u 'alice:wonder lan'", V4("/staff")), 401);
    ck_assert_str_eq(field("WWW-Authenticate"), "Basic realm=\"staff\"");
    ck_assert_int_eq(status("-u bob:hunter2", V4("/staff")), 200);
    ck_assert_int_eq(status("-u bob:hunter3", V4("/staff")), 401);
    ck_assert_int_eq(status("-u bob:", V4("/staff")), 401);
    ck_assert_int_eq(status("-u carol:hunter2", V4("/staff")), 401);
    ck_assert_int_eq(status("-u alice:hunter2", V4("/staff")), 401);
    ck_assert_int_eq(status("-H 'Authorization: Basic !!!!'", V4("/staff")),
                     401);
    ck_assert_int_eq(status("-H 'Authorization: Bearer x'", V4("/staff")),
                     401);
    /* Remembered: the same pair again, many times, still right. */
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(status("-u 'alice:wonder land'", V4("/staff")), 200);
    }
    ck_assert_int_eq(status("-u 'alice:wonder lanD'", V4("/staff")), 401);
}
END_TEST

/* lan first: from 127.0.0.1 a right password is still 403; from ::1 a
 * wrong one is 401, a right one 200. */
START_TEST(test_guards_run_in_order)
{
    start();
    ck_assert_int_eq(status("-u bob:hunter2", V4("/admin")), 403);
    ck_assert_str_eq(field("WWW-Authenticate"), "");
    ck_assert_int_eq(status("", V6("/admin")), 401);
    ck_assert_int_eq(status("-u bob:nope", V6("/admin")), 401);
    ck_assert_int_eq(status("-u bob:hunter2", V6("/admin")), 200);
}
END_TEST

/* One request after another on one connection until one is refused: the
 * burst's 20 pass, and a token more for each 100 ms the requests took
 * (10/s). Judged by the time they took, which a loaded machine stretches,
 * not by a budget. */
START_TEST(test_a_burst_is_limited)
{
    static const char request[] = "GET /burst HTTP/1.1\r\nHost: t\r\n\r\n";
    static char answer[4096];
    int passed = 0;
    long began;
    long took;
    int fd;

    start();
    fd = corConnect(server.port);
    ck_assert_int_ge(fd, 0);
    began = corNowMs();
    for (;;) {
        ck_assert_int_eq(corSendAll(fd, request, sizeof(request) - 1), 0);
        ck_assert_int_gt(corReadResponse(fd, answer, sizeof(answer), 20000),
                         0);
        if (corStatus(answer) != 200 || passed == 1000) {
            break;
        }
        passed++;
    }
    took = corNowMs() - began;
    close(fd);
    printf("the burst: %d passed in %ld ms, then %d\n", passed, took,
           corStatus(answer));
    ck_assert_msg(corStatus(answer) == 429, "%s", answer);
    ck_assert_msg(passed >= 20 && passed <= 20 + took / 100 + 1,
                  "%d passed in %ld ms", passed, took);
    ck_assert_msg(strcasestr(answer, "\r\nRetry-After: 1\r\n") != NULL,
                  "%s", answer);
    /* Another address has a bucket of its own. */
    ck_assert_int_eq(status("", V6("/burst")), 200);
    ck_assert_int_ge(corMetric(server.port, "cor_limit_requests_total{"
                               "guard=\"perip\",result=\"limited\"}"), 1);
    ck_assert_int_ge(corMetric(server.port, "cor_limit_keys{guard=\"perip\""
                               "}"), 2);
}
END_TEST

START_TEST(test_keys_by_header_apart)
{
    start();
    ck_assert_int_eq(status("-H 'X-Key: a'", V4("/key")), 200);
    ck_assert_int_eq(status("-H 'X-Key: a'", V4("/key")), 200);
    ck_assert_int_eq(status("-H 'X-Key: a'", V4("/key")), 429);
    /* 1/m: a minute for the next token, less what has passed. */
    ck_assert_int_ge(atoi(field("Retry-After")), 55);
    ck_assert_int_le(atoi(field("Retry-After")), 60);
    ck_assert_int_eq(status("-H 'X-Key: b'", V4("/key")), 200);
    ck_assert_int_eq(status("-H 'X-Key: b'", V4("/key")), 200);
    ck_assert_int_eq(status("-H 'X-Key: b'", V4("/key")), 429);
    /* No key, not counted (nginx's empty key). */
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(status("", V4("/key")), 200);
    }
}
END_TEST

START_TEST(test_route_headers_on_every_answer)
{
    start();
    ck_assert_int_eq(status("", V4("/x")), 200);
    ck_assert_str_eq(field("Strict-Transport-Security"), "max-age=31536000");
    ck_assert_str_eq(field("X-Two"), "2");
    ck_assert_int_eq(status("-X POST", V4("/x")), 405);     /* the core's */
    ck_assert_str_eq(field("Strict-Transport-Security"), "max-age=31536000");
    ck_assert_str_eq(field("Allow"), "GET, HEAD");
    ck_assert_int_eq(status("", V4("/s/a.txt")), 200);
    ck_assert_str_eq(field("X-Site"), "yes");
    ck_assert_int_eq(status("", V4("/s/none.txt")), 404);   /* a handler's */
    ck_assert_str_eq(field("X-Site"), "yes");
    ck_assert_int_eq(status("", V4("/nowhere")), 404);      /* no route */
    ck_assert_str_eq(field("Strict-Transport-Security"), "");
}
END_TEST

START_TEST(test_cor_t_errors)
{
    const char* bin = getenv("COR_BIN") ? getenv("COR_BIN") : "build/cor";

    ck_assert_int_eq(sh("printf '%%s\\n' 'listen:' '  - { protocol: http, "
                        "address: 127.0.0.1:1 }' 'modules:' '  - { load: "
                        "http }' '  - { load: hello }' '  - { load: access, "
                        "guards: [ { name: lan, allow: [ 10.0.0.0/8 ] } ] }' "
                        "'routes:' '  - { match: /a, handler: hello, guard: "
                        "[ lan, lann, nobody ] }' > $D/bad.yaml && %s -t -c "
                        "$D/bad.yaml", bin), 1);
    ck_assert_msg(strstr(out, "bad.yaml:8:") != NULL
                  && strstr(out, "guard named 'lann'") != NULL
                  && strstr(out, "'nobody'") != NULL
                  && strstr(out, "lan") != NULL, "%s", out);
    ck_assert_int_eq(sh("printf '%%s\\n' 'listen:' '  - { protocol: http, "
                        "address: 127.0.0.1:1 }' 'modules:' '  - { load: "
                        "http }' '  - { load: access, guards: [ { name: s, "
                        "basic_auth: { users: %s/missing } }, { name: n, "
                        "allow: [ 10.0.0.1/8 ] } ] }' > $D/bad2.yaml && %s -t "
                        "-c $D/bad2.yaml", dir, bin), 1);
    ck_assert_msg(strstr(out, "bad2.yaml:5:") != NULL
                  && strstr(out, "missing") != NULL
                  && strstr(out, "10.0.0.1/8") != NULL, "%s", out);
}
END_TEST

COR_TEST_SUITE(corGuard)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_addresses_of_both_families);
    tcase_add_test(tc, test_basic_auth_both_hashes);
    tcase_add_test(tc, test_guards_run_in_order);
    tcase_add_test(tc, test_a_burst_is_limited);
    tcase_add_test(tc, test_keys_by_header_apart);
    tcase_add_test(tc, test_route_headers_on_every_answer);
    tcase_add_test(tc, test_cor_t_errors);
}
