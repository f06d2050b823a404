/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Redis for modules against the real binary and a real redis-server,
 * started by PID on a free loopback port and stopped by it: the client
 * as a module sees it (the testkit's POST /redis: typed replies, errors
 * as replies, binary-safe arguments, a pipeline), its pipelining (the
 * loop's requests share one connection and its writes), a server that
 * stops answering (CLIENT PAUSE: 503 within the client's timeout, then
 * answered again), hello's GET /visits, redis-server killed under load
 * (503 at once, and 200 again once it is back), two instances that share
 * one rate-limit budget through the store, and on_store_error both ways
 * (said once in the log, counted in /metrics). Both modes
 * (COR_TEST_COROUTINES): a coroutine's commands and a worker's.
 */
#include "corTest.h"
#include "corServer.h"
#include "corTestRedis.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The client's timeout in these tests. */
#define TIMEOUT_MS 300

static CorServer server;
/* A guard's name of 600 letters, for long_keys. */
static char longName[601];
static CorServer second;
static CorTestRedis redis;
static char out[1 << 16];

static void
setUp(void)
{
    memset(longName, 'g', sizeof(longName) - 1);
    corTestRedisStart(&redis, NULL, NULL);
}

static void
tearDown(void)
{
    corServerStop(&second);
    corServerStop(&server);
    corTestRedisStop(&redis);
}

/* cor with the redis module's server "cache" (the test's redis, timeout
 * TIMEOUT_MS), hello's /visits, the testkit's /redis, and limit guards
 * on store (a redis:// URL) over /a (on_store_error: allow) and /d
 * (deny), 1/m burst 5 by address. */
static void
startTop(CorServer* s, const char* top, const char* cache, const char* store)
{
    char yaml[6144];

    snprintf(yaml, sizeof(yaml),
             "%s"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: redis\n"
             "    servers: [ { name: cache, url: \"%s\", "
             "timeout: %dms } ]\n"
             "  - { load: hello, redis: cache }\n"
             "  - { load: testkit }\n"
             "  - load: limit\n"
             "    guards:\n"
             "      - { name: allowg, rate: 1/m, burst: 5, key: ip, store: "
             "\"%s\" }\n"
             "      - { name: denyg, rate: 1/m, burst: 5, key: ip, store: "
             "\"%s\", on_store_error: deny }\n"
             "      - { name: %s, rate: 1/m, burst: 1, key: \"header:X-Key\", "
             "store: \"%s\" }\n"
             "routes:\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "  - { match: \"GET /visits\", handler: visits }\n"
             "  - { match: \"POST /redis\", handler: redis }\n"
             "  - { match: \"GET /a\", handler: hello, guard: allowg }\n"
             "  - { match: \"GET /d\", handler: hello, guard: denyg }\n"
             "  - { match: \"GET /k\", handler: hello, guard: %s }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             top, cache, TIMEOUT_MS, store, store, longName, store, longName);
    ck_assert_int_eq(corServerStartListen(s, false, NULL, yaml), 0);
}

static void
startAt(CorServer* s, const char* cache, const char* store)
{
    startTop(s, "", cache, store);
}

static void
start(CorServer* s, const char* store)
{
    char cache[64];

    snprintf(cache, sizeof(cache), "redis://127.0.0.1:%d", redis.port);
    startAt(s, cache, store);
}

static void
startWithStore(void)
{
    char store[64];

    snprintf(store, sizeof(store), "redis://127.0.0.1:%d", redis.port);
    start(&server, store);
}

/* POST /redis with body (printf's escapes: \n between arguments, a line
 * "--" between commands); the answer's body in out, its status
 * returned. */
static int
redisCall(const char* body)
{
    char args[1024];

    snprintf(args, sizeof(args),
             "-X POST --data-binary \"$(printf '%s')\" -w '\\n%%{http_code}'",
             body);
    ck_assert_int_eq(corCurl(server.port, args, "/redis", out, sizeof(out)), 0);
    char* last = strrchr(out, '\n');

    ck_assert_ptr_nonnull(last);
    *last = '\0';
    return atoi(last + 1);
}

START_TEST(test_typed_replies)
{
    startWithStore();
    ck_assert_int_eq(redisCall("SET\\nk\\nhello"), 200);
    ck_assert_str_eq(out, "status OK\n");
    ck_assert_int_eq(redisCall("GET\\nk"), 200);
    ck_assert_str_eq(out, "string 5 hello\n");
    ck_assert_int_eq(redisCall("GET\\nnone"), 200);
    ck_assert_str_eq(out, "nil\n");
    ck_assert_int_eq(redisCall("INCR\\nn"), 200);
    ck_assert_str_eq(out, "integer 1\n");
    ck_assert_int_eq(redisCall("RPUSH\\nl\\na\\nbc"), 200);
    ck_assert_int_eq(redisCall("LRANGE\\nl\\n0\\n-1"), 200);
    ck_assert_str_eq(out, "array 2\n  string 1 a\n  string 2 bc\n");
    ck_assert_int_eq(redisCall("LRANGE\\nnone\\n0\\n-1"), 200);
    ck_assert_str_eq(out, "array 0\n");
    /* An argument is one argument, spaces and quotes and all: never a
     * format string. */
    ck_assert_int_eq(redisCall("SET\\nsp\\na b %%s \"c\""), 200);
    ck_assert_int_eq(redisCall("GET\\nsp"), 200);
    ck_assert_str_eq(out, "string 10 a b %s \"c\"\n");
}
END_TEST

/* An error reply is an answer (200 here), not a failure of the client. */
START_TEST(test_errors_are_replies)
{
    startWithStore();
    ck_assert_int_eq(redisCall("SET\\nk\\nword"), 200);
    ck_assert_int_eq(redisCall("INCR\\nk"), 200);
    ck_assert_str_eq(out, "error ERR value is not an integer or out of "
                          "range\n");
    ck_assert_int_eq(redisCall("NOSUCHCOMMAND\\nx"), 200);
    COR_CHECK_HAS(out, "error ERR unknown command");
    /* The connection goes on after an error. */
    ck_assert_int_eq(redisCall("GET\\nk"), 200);
    ck_assert_str_eq(out, "string 4 word\n");
}
END_TEST

/* One caller's commands in one pipeline, answered in order. */
START_TEST(test_a_pipeline)
{
    startWithStore();
    ck_assert_int_eq(redisCall("SET\\np\\n1\\n--\\nINCR\\np\\n--\\nINCRBY\\np"
                               "\\n40\\n--\\nGET\\np\\n--\\nPING"),
                     200);
    ck_assert_str_eq(out, "status OK\ninteger 2\ninteger 42\nstring 2 42\n"
                          "status PONG\n");
}
END_TEST

/* The URL's password and database: AUTH and SELECT on each connection;
 * a wrong password fails every command with why. */
START_TEST(test_auth_and_select)
{
    char url[128];

    corTestRedisStop(&redis);
    corTestRedisStart(&redis, "s3cr@t", NULL);
    snprintf(url, sizeof(url), "redis://:s3cr%%40t@127.0.0.1:%d/5", redis.port);
    startAt(&server, url, url);
    ck_assert_int_eq(redisCall("SET\\nk\\nin5"), 200);
    ck_assert_str_eq(out, "status OK\n");
    ck_assert_int_eq(corShellAt(redis.port, "/tmp", out, sizeof(out),
                                "redis-cli -p $P -a 's3cr@t' --no-auth-warning "
                                "-n 5 GET k"),
                     0);
    ck_assert_str_eq(out, "in5\n");
    corServerStop(&server);
    snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d/5", redis.port);
    startAt(&server, url, url);
    ck_assert_int_eq(redisCall("GET\\nk"), 503);
    COR_CHECK_HAS(out, "failed 13");
    COR_CHECK_HAS(out, "AUTH or SELECT refused");
}
END_TEST

/* rediss://: TLS through the core's TLS client, the server verified
 * with client.ca_file's CA; a server it does not trust fails every
 * command with why. */
START_TEST(test_rediss)
{
    char certs[64];
    char top[160];
    char url[96];

    corTestRedisStop(&redis);
    corTestCertsMake(certs, sizeof(certs));
    corTestRedisStart(&redis, NULL, certs);
    snprintf(top, sizeof(top), "client: { ca_file: %s/ca.pem }\n", certs);
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", redis.port);
    startTop(&server, top, url, url);
    ck_assert_int_eq(redisCall("SET\\nk\\nover tls"), 200);
    ck_assert_int_eq(redisCall("GET\\nk"), 200);
    ck_assert_str_eq(out, "string 8 over tls\n");
    ck_assert_int_eq(corCurl(server.port, "", "/visits", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "1\n");
    corServerStop(&server);
    startTop(&server, "", url, url); /* the system's CAs: not the test's */
    ck_assert_int_eq(redisCall("GET\\nk"), 503);
    COR_CHECK_HAS(out, "certificate");
    corTestCertsRemove(certs);
}
END_TEST

/* A guard's name and a key past any buffer's size: a key of 1000 bytes
 * is one bucket, kept in Redis under its SHA-1 (a name of 600 once
 * overran a 512-byte buffer: the server died at the first request). */
START_TEST(test_long_keys)
{
    char args[1100];

    startWithStore();
    snprintf(args, sizeof(args), "-H 'X-Key: %01000d'", 7);
    ck_assert_int_eq(corCurlStatus(server.port, args, "/k", out, sizeof(out)),
                     200);
    ck_assert_int_eq(corCurlStatus(server.port, args, "/k", out, sizeof(out)),
                     429);
    args[20] = '8'; /* another key */
    ck_assert_int_eq(corCurlStatus(server.port, args, "/k", out, sizeof(out)),
                     200);
    ck_assert_int_eq(corShellAt(redis.port, "/tmp", out, sizeof(out),
                                "redis-cli -p $P --scan --pattern "
                                "'cor:limit:ggg*' | awk '{ print length($0) "
                                "}' | sort -u"),
                     0);
    /* cor:limit: (10), the name (600), ':', '#' and 40 hex digits. */
    ck_assert_str_eq(out, "652\n");
}
END_TEST

/* cor -t: a module that names Redis before the redis module is loaded,
 * an unknown server, a bad URL, a bad on_store_error: each at its line. */
START_TEST(test_cor_t_errors)
{
    startWithStore(); /* for its folder */
    ck_assert_int_eq(
        corConfigCheck(&server, "early.yaml",
                       "listen: [ { protocol: http, address: "
                       "127.0.0.1:1 } ]\n"
                       "modules:\n"
                       "  - { load: hello, redis: cache }\n"
                       "  - load: redis\n"
                       "    servers: [ { name: cache, url: \"redis://h\" } ]\n",
                       out, sizeof(out)),
        1);
    COR_CHECK_HAS(out, "early.yaml:3:");
    COR_CHECK_HAS(out, "load the redis module before the modules that use it");
    ck_assert_int_eq(
        corConfigCheck(
            &server, "bad.yaml",
            "listen: [ { protocol: http, address: 127.0.0.1:1 } ]\n"
            "modules:\n"
            "  - load: redis\n"
            "    servers: [ { name: cache, url: \"redis://h/x\" } ]\n"
            "  - { load: hello, redis: other }\n"
            "  - { load: limit, guards: [ { name: g, rate: 1/s, "
            "store: \"http://h\", on_store_error: maybe } ] }\n",
            out, sizeof(out)),
        1);
    COR_CHECK_HAS(out, "expected /DB");
    COR_CHECK_HAS(out, "no Redis server named 'other'");
    COR_CHECK_HAS(out, "expected redis:// or rediss://, got http://");
    COR_CHECK_HAS(out, "on_store_error: expected allow or deny, got 'maybe'");
}
END_TEST

/* GET /visits counts, and 64 at once share each loop's one connection:
 * their INCRs go out in fewer writes than there are commands. On the
 * workers each thread has a connection of its own, one write a call. */
START_TEST(test_visits_pipelined)
{
    long commands;
    long writes;
    long connects;

    startWithStore();
    ck_assert_int_eq(corCurl(server.port, "", "/visits", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "1\n");
    ck_assert_int_eq(corShellAt(server.port, "/tmp", out, sizeof(out),
                                "h2load --h1 -n 2000 -c 64 "
                                "http://127.0.0.1:$P/visits"),
                     0);
    COR_CHECK_HAS(out, "status codes: 2000 2xx");
    ck_assert_int_eq(corCurl(server.port, "", "/visits", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "2002\n");
    commands = corMetric(server.port, "cor_redis_commands_total{server="
                                      "\"cache\",result=\"answered\"}");
    writes = corMetric(server.port, "cor_redis_writes_total{server="
                                    "\"cache\"}");
    connects = corMetric(server.port, "cor_redis_connects_total{server="
                                      "\"cache\"}");
    ck_assert_int_eq(commands, 2002);
    if (corTestCoroutines()) {
        ck_assert_msg(writes < commands * 3 / 4, "%ld writes for %ld commands",
                      writes, commands);
        ck_assert_msg(connects <= 2, "%ld connections (2 loops)", connects);
    } else {
        ck_assert_int_eq(writes, commands);
        ck_assert_msg(connects <= 4, "%ld connections (4 workers)", connects);
    }
}
END_TEST

/* A server that stops answering (CLIENT PAUSE) fails what waits on it
 * within the client's timeout: 503, not a hang; answered again after. */
START_TEST(test_timeout)
{
    long began;
    long took;
    int status;

    startWithStore();
    ck_assert_int_eq(redisCall("SET\\nk\\nv"), 200);
    ck_assert_int_eq(corShellAt(redis.port, "/tmp", out, sizeof(out),
                                "redis-cli -p $P CLIENT PAUSE 2000 ALL"),
                     0);
    began = corNowMs();
    status = redisCall("GET\\nk");
    took = corNowMs() - began;
    ck_assert_msg(status == 503, "%d: %s", status, out);
    COR_CHECK_HAS(out, "failed 110");
    ck_assert_msg(took >= TIMEOUT_MS - 50 && took < 1900,
                  "answered in %ld ms (timeout %d ms)", took, TIMEOUT_MS);
    usleep((useconds_t)(2100 - took) * 1000);
    ck_assert_int_eq(redisCall("GET\\nk"), 200);
    ck_assert_str_eq(out, "string 1 v\n");
}
END_TEST

/* The slowest of n requests for path (ms, as curl timed them: not the
 * time to start it), each a 503. */
static long
slowest503(const char* path, int n)
{
    long slowest = 0;

    for (int i = 0; i < n; i++) {
        long took;

        ck_assert_int_eq(corShellAt(server.port, "/tmp", out, sizeof(out),
                                    "curl -s --max-time 20 -o /dev/null -w "
                                    "'%%{http_code} %%{time_total}' "
                                    "http://127.0.0.1:$P%s",
                                    path),
                         0);
        ck_assert_msg(strncmp(out, "503 ", 4) == 0, "%s: %s", path, out);
        took = (long)(atof(out + 4) * 1000);
        slowest = took > slowest ? took : slowest;
    }
    return slowest;
}

/* redis-server killed under load: requests fail fast (503, well within
 * the timeout: the connection's end fails them, then the back-off), and
 * the client connects again once it is back. */
START_TEST(test_killed_under_load_then_back)
{
    char command[512];
    FILE* load;
    long slowest;
    long deadline;
    int status = 0;

    startWithStore();
    snprintf(command, sizeof(command),
             "h2load --h1 -c 16 -D 3 http://127.0.0.1:%d/visits 2>&1",
             server.port);
    load = popen(command, "r");
    ck_assert_ptr_nonnull(load);
    usleep(1000 * 1000);
    corTestRedisStop(&redis);
    slowest = slowest503("/visits", 10);
    ck_assert_msg(slowest < TIMEOUT_MS, "a 503 took %ld ms", slowest);
    ck_assert_int_eq((int)fread(out, 1, sizeof(out) - 1, load) > 0, 1);
    ck_assert_int_eq(pclose(load), 0);
    COR_CHECK_HAS(out, "0 timeout");
    corTestRedisStart(&redis, NULL, NULL);
    deadline = corNowMs() + 8000; /* the back-off is 5 s at most */
    while (corNowMs() < deadline && status != 200) {
        status = corCurlStatus(server.port, "", "/visits", out, sizeof(out));
        usleep(100 * 1000);
    }
    ck_assert_msg(status == 200, "%d: %s", status, out);
    COR_CHECK_HAS(out, "\r\n\r\n1\n"); /* a new server, counting anew */
}
END_TEST

/* Two instances, one store: the budget of 5 is shared, whichever
 * instance a request reaches. */
START_TEST(test_two_instances_share_one_budget)
{
    char store[64];
    int passed = 0;
    int limited = 0;

    snprintf(store, sizeof(store), "redis://127.0.0.1:%d", redis.port);
    start(&server, store);
    start(&second, store);
    for (int i = 0; i < 10; i++) {
        int status = corCurlStatus(i % 2 == 0 ? server.port : second.port, "",
                                   "/a", out, sizeof(out));

        passed += status == 200;
        limited += status == 429;
        if (status == 429) {
            COR_CHECK_HAS(out, "Retry-After: ");
        }
    }
    ck_assert_int_eq(passed, 5);
    ck_assert_int_eq(limited, 5);
    ck_assert_int_eq(corMetric(server.port, "cor_limit_requests_total{guard="
                                            "\"allowg\",result=\"passed\"}")
                         + corMetric(second.port,
                                     "cor_limit_requests_total{guard="
                                     "\"allowg\",result=\"passed\"}"),
                     5);
}
END_TEST

/* The store down: allow lets requests through, deny refuses them (503),
 * each guard says so once in the log and counts each; once the store is
 * back it says that too, and the budget applies again. */
START_TEST(test_on_store_error_both_ways)
{
    char store[64];
    int downPort = corFreePort();

    snprintf(store, sizeof(store), "redis://127.0.0.1:%d", downPort);
    start(&server, store);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(corCurlStatus(server.port, "", "/a", out, sizeof(out)),
                         200);
        ck_assert_int_eq(corCurlStatus(server.port, "", "/d", out, sizeof(out)),
                         503);
    }
    ck_assert_int_eq(corMetric(server.port, "cor_limit_store_errors_total{"
                                            "guard=\"allowg\"}"),
                     6);
    ck_assert_int_eq(corMetric(server.port, "cor_limit_store_errors_total{"
                                            "guard=\"denyg\"}"),
                     6);
    ck_assert_int_eq(corServerLogCount(&server, "guard allowg: its store "
                                                "failed"),
                     1);
    ck_assert_int_eq(corServerLogCount(&server, "guard denyg: its store "
                                                "failed"),
                     1);
    corTestRedisStop(&redis);
    redis.port = downPort;
    corTestRedisStart(&redis, NULL, NULL);
    long deadline = corNowMs() + 8000;
    int status = 0;

    while (corNowMs() < deadline && status != 200) {
        status = corCurlStatus(server.port, "", "/d", out, sizeof(out));
        usleep(100 * 1000);
    }
    ck_assert_msg(status == 200, "%d: %s", status, out);
    ck_assert_int_eq(corServerLogCount(&server, "guard denyg: its store "
                                                "answers again"),
                     1);
}
END_TEST

COR_TEST_SUITE(corRedis)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_typed_replies);
    tcase_add_test(tc, test_errors_are_replies);
    tcase_add_test(tc, test_a_pipeline);
    tcase_add_test(tc, test_auth_and_select);
    tcase_add_test(tc, test_rediss);
    tcase_add_test(tc, test_cor_t_errors);
    tcase_add_test(tc, test_long_keys);
    tcase_add_test(tc, test_visits_pipelined);
    tcase_add_test(tc, test_timeout);
    tcase_add_test(tc, test_killed_under_load_then_back);
    tcase_add_test(tc, test_two_instances_share_one_budget);
    tcase_add_test(tc, test_on_store_error_both_ways);
}
