/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The chain: A → B → C, each hop the forward module, once over
 * HTTP (/h/...) and once over cor:// (/c/...). curl asks A; what comes
 * back must be the same byte for byte (status, Content-Type, body) for
 * JSON, text and binary bodies, and for the errors: a 404 from C, a 502
 * when B's upstream is gone, a 504 when it is too slow; and the Host each
 * hop sends.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CorServer a;
static CorServer b;
static CorServer c;
static char outHttp[1 << 16];
static char outCor[1 << 16];

/* C: the end of the chain, HTTP on {PORT}, cor:// on {PORT2}. */
static const char cConfig[] =
    "runtime: { loops: 1, coroutines: { enabled: {COROUTINES} } }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "  - { protocol: cor, address: 127.0.0.1:{PORT2} }\n"
    "limits: { body_bytes: 4MiB }\n"
    "modules: [ { load: http }, { load: cor }, { load: hello },\n"
    "           { load: {MODULES}/testkit.so } ]\n"
    "routes:\n"
    "  - { match: \"/h/echo\", handler: echo }\n"
    "  - { match: \"/c/echo\", handler: echo }\n"
    "  - { match: \"GET /h/sleep\", handler: sleep }\n"
    "  - { match: \"GET /c/sleep\", handler: sleep }\n"
    "  - { match: \"GET /h/waitecho\", handler: waitecho }\n"
    "  - { match: \"GET /c/waitecho\", handler: waitecho }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

/* A hop: /h/... forwards over HTTP, /c/... over cor://, to the next server's
 * ports; B, the hop before C, sends /h/dead and /c/dead to a port where
 * nothing listens (A passes them on to B like any other path). */
static int
hopStart(CorServer* s, const CorServer* next, int readTimeoutMs, bool last)
{
    char yaml[4096];
    const char* dead = last ? "  - { match: \"/h/dead\", handler: httpdead }\n"
                              "  - { match: \"/c/dead\", handler: cordead }\n"
                            : "";

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, coroutines: { enabled: {COROUTINES} } }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
             "  - { protocol: cor, address: 127.0.0.1:{PORT2} }\n"
             "limits: { body_bytes: 4MiB }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: cor }\n"
             "  - load: forward\n"
             "    upstreams:\n"
             "      - { name: http, servers: [ \"http://127.0.0.1:%d\" ],\n"
             "          read_timeout: %dms }\n"
             "      - { name: cor, servers: [ \"cor://127.0.0.1:%d\" ],\n"
             "          read_timeout: %dms }\n"
             "      - { name: httpdead, servers: [ \"http://127.0.0.1:1\" ] }\n"
             "      - { name: cordead, servers: [ \"cor://127.0.0.1:1\" ] }\n"
             "routes:\n"
             "%s"
             "  - { match: \"/h/*\", handler: http }\n"
             "  - { match: \"/c/*\", handler: cor }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             next->port, readTimeoutMs, next->port2, readTimeoutMs, dead);
    return corServerStart(s, yaml);
}

static void
setUp(void)
{
    ck_assert_int_eq(corServerStart(&c, cConfig), 0);
    ck_assert_int_eq(hopStart(&b, &c, 500, true), 0);
    ck_assert_int_eq(hopStart(&a, &b, 10000, false), 0);
}

static void
tearDown(void)
{
    corServerStop(&a);
    corServerStop(&b);
    corServerStop(&c);
}

/* curl to A for path under /h and under /c with extra arguments: the
 * bodies go to files, compared byte for byte; the status and the
 * Content-Type must be equal too. */
static void
sameAnswer(const char* path, const char* args, int status)
{
    char command[1024];

    snprintf(command, sizeof(command),
             "curl -s -o %s/h.body -w '%%{http_code}"
             " %%{content_type}' %s 'http://127.0.0.1:%d/h%s'",
             a.dir, args, a.port, path);
    ck_assert_int_eq(corShell(command, outHttp, sizeof(outHttp)), 0);
    snprintf(command, sizeof(command),
             "curl -s -o %s/c.body -w '%%{http_code}"
             " %%{content_type}' %s 'http://127.0.0.1:%d/c%s'",
             a.dir, args, a.port, path);
    ck_assert_int_eq(corShell(command, outCor, sizeof(outCor)), 0);
    ck_assert_msg(strcmp(outHttp, outCor) == 0,
                  "%s: over HTTP %s, over "
                  "cor:// %s",
                  path, outHttp, outCor);
    ck_assert_msg(atoi(outHttp) == status, "%s: %s", path, outHttp);
    snprintf(command, sizeof(command), "cmp %s/h.body %s/c.body", a.dir, a.dir);
    ck_assert_msg(corShell(command, outCor, sizeof(outCor)) == 0, "%s: %s",
                  path, outCor);
}

START_TEST(test_the_chain_answers_the_same_over_cor_and_http)
{
    char command[512];

    sameAnswer("/echo",
               "-H 'Content-Type: application/json' "
               "--data-binary '{\"a\":[1,2.5,\"x\"],\"b\":{\"c\":null}}'",
               200);
    sameAnswer("/echo",
               "-H 'Content-Type: application/json' "
               "--data-binary '{ \"spaced\" : [ 1 ] }'",
               200);
    sameAnswer("/echo",
               "-H 'Content-Type: text/plain' "
               "--data-binary 'plain words, no JSON'",
               200);
    snprintf(command, sizeof(command),
             "head -c 300000 /dev/urandom > "
             "%s/random",
             c.dir);
    ck_assert_int_eq(corShell(command, NULL, 0), 0);
    snprintf(command, sizeof(command),
             "-H 'Content-Type: "
             "application/octet-stream' --data-binary @%s/random",
             c.dir);
    sameAnswer("/echo", command, 200);
    sameAnswer("/nowhere", "", 404);
    sameAnswer("/dead", "", 502);
    sameAnswer("/sleep?ms=1500", "", 504);
}
END_TEST

/* A group's host (upstream by default) holds for cor:// servers as for
 * HTTP ones: C is sent B's server's host:port, which the cor:// hop did
 * not send at all. */
START_TEST(test_the_upstream_host_goes_over_cor_as_over_http)
{
    char want[64];

    ck_assert_int_eq(corCurl(a.port, "", "/h/waitecho?ms=0", outHttp,
                             sizeof(outHttp)),
                     0);
    snprintf(want, sizeof(want), "\nHost: 127.0.0.1:%d\n", c.port);
    ck_assert_msg(strstr(outHttp, want) != NULL, "%s", outHttp);
    ck_assert_int_eq(corCurl(a.port, "", "/c/waitecho?ms=0", outCor,
                             sizeof(outCor)),
                     0);
    snprintf(want, sizeof(want), "\nHost: 127.0.0.1:%d\n", c.port2);
    ck_assert_msg(strstr(outCor, want) != NULL, "%s", outCor);
}
END_TEST

COR_TEST_SUITE(corCorChain)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_the_chain_answers_the_same_over_cor_and_http);
    tcase_add_test(tc, test_the_upstream_host_goes_over_cor_as_over_http);
}
