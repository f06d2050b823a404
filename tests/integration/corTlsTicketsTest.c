/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.tickets against the real binary, a real redis-server (started and
 * stopped by PID on a free port) and openssl s_client: two instances
 * with the same tickets URL resume each other's sessions (TLSv1.3 and
 * TLSv1.2); a rotation (session_lifetime / 2) leaves a session made
 * before it resumable; with Redis down at start each instance serves its
 * own keys, says so once, counts it in /metrics, and shares the keys once
 * Redis answers; cor -t refuses what cannot work.
 */
#include "corTest.h"
#include "corServer.h"
#include "corTestRedis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer one;
static CorServer two;
static char certs[64];
static char out[1 << 16];
static CorTestRedis redisServer;

static void
setUp(void)
{
    corTestCertsMake(certs, sizeof(certs));
    corTestRedisStart(&redisServer, NULL, NULL);
}

static void
tearDown(void)
{
    corServerStop(&two);
    corServerStop(&one);
    corTestRedisStop(&redisServer);
    corTestCertsRemove(certs);
}

/* An https instance whose tickets are the test's Redis; lifetime is its
 * session_lifetime. Its /metrics on the plain port2. */
static void
start(CorServer* s, const char* lifetime)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 2\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:{PORT}\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key, "
             "tickets: \"redis://127.0.0.1:%d\", session_lifetime: %s }\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT2} }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: redis }\n"
             "  - { load: hello }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             certs, certs, redisServer.port, lifetime);
    ck_assert_int_eq(corServerStart(s, yaml), 0);
}

/* A request over TLS 1.<version> to s: the session kept in $C/session
 * (TLS 1.3 sends its ticket after the handshake: the request waits for
 * it), or offered from there with resume. Returns whether it resumed. */
static bool
exchange(const CorServer* s, int version, bool resume)
{
    char command[1024];

    snprintf(command, sizeof(command),
             "printf 'GET /hello HTTP/1.1\\r\\nHost: x\\r\\nConnection: "
             "close\\r\\n\\r\\n' | openssl s_client -connect 127.0.0.1:%d "
             "-ign_eof -tls1_%d %s %s/session 2>&1",
             s->port, version, resume ? "-sess_in" : "-sess_out", certs);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "hello, world") != NULL, "%s", out);
    return strstr(out, "Reused, TLSv1.") != NULL;
}

/* A session made on from resumes on to, tried until the instances share
 * keys (each reads them every quarter of a rotation, and a session made
 * with keys of its own never resumes elsewhere): the time it took, or -1
 * when they did not within 15 s. */
static long
sharedWithin(const CorServer* from, const CorServer* to, int version)
{
    long startMs = corNowMs();

    for (;;) {
        exchange(from, version, false);
        if (exchange(to, version, true)) {
            return corNowMs() - startMs;
        }
        if (corNowMs() - startMs > 15000) {
            return -1;
        }
        usleep(100 * 1000);
    }
}

static long
rotations(void)
{
    return corMetric(one.port2, "cor_tls_ticket_rotations_total")
           + corMetric(two.port2, "cor_tls_ticket_rotations_total");
}

START_TEST(test_a_session_made_on_one_resumes_on_the_other)
{
    start(&one, "300s");
    start(&two, "300s");
    for (int version = 3; version >= 2; version--) {
        ck_assert_msg(sharedWithin(&one, &two, version) >= 0,
                      "TLSv1.%d: a session of one never resumed on two: %s",
                      version, out);
        ck_assert_msg(sharedWithin(&two, &one, version) >= 0,
                      "TLSv1.%d: a session of two never resumed on one: %s",
                      version, out);
    }
}
END_TEST

/* session_lifetime 6s: a rotation every 3 s by whichever instance holds
 * the lease; a session made before one resumes after it, on the other. */
START_TEST(test_a_rotation_keeps_an_older_session_resumable)
{
    long startMs;
    long startRotations;
    long before;
    long madeMs;

    start(&one, "6s");
    start(&two, "6s");
    startMs = corNowMs();
    startRotations = rotations();
    for (int version = 3; version >= 2; version--) {
        ck_assert_int_ge(sharedWithin(&one, &two, version), 0);
        exchange(&one, version, false);
        madeMs = corNowMs();
        before = rotations();
        while (rotations() == before) {
            ck_assert_msg(corNowMs() - madeMs < 10000, "no rotation in 10 s");
            usleep(100 * 1000);
        }
        ck_assert_msg(exchange(&two, version, true),
                      "TLSv1.%d: made %ld ms before, then a rotation: %s",
                      version, corNowMs() - madeMs, out);
    }
    /* One instance at a time rotates: once a period, not once each. */
    ck_assert_int_le(rotations() - startRotations,
                     (corNowMs() - startMs) / 3000 + 1);
}
END_TEST

START_TEST(test_redis_down_at_start_serves_own_keys_then_shares)
{
    corTestRedisStop(&redisServer);
    start(&one, "4s");
    start(&two, "4s");
    /* Each instance's own keys: its own sessions resume. */
    exchange(&one, 3, false);
    ck_assert(exchange(&one, 3, true));
    usleep(1500 * 1000);
    ck_assert_int_gt(corMetric(one.port2, "cor_tls_ticket_redis_errors_total"),
                     1);
    ck_assert_int_eq(corServerLogCount(&one, "the last keys serve"), 1);
    ck_assert_int_eq(corServerLogCount(&two, "the last keys serve"), 1);
    corTestRedisStart(&redisServer, NULL, NULL);
    ck_assert_msg(sharedWithin(&one, &two, 3) >= 0,
                  "Redis back, the keys were not shared: %s", out);
    ck_assert_int_eq(corServerLogCount(&one, "answers again"), 1);
}
END_TEST

/* Redis restarted empty: the lease's next holder writes the keys it
 * serves back with the new one, so the sessions made before resume. */
START_TEST(test_redis_restarted_empty_keeps_the_sessions)
{
    long madeMs;
    long before;

    start(&one, "10s");
    start(&two, "10s");
    ck_assert_int_ge(sharedWithin(&one, &two, 3), 0);
    exchange(&one, 3, false);
    madeMs = corNowMs();
    corTestRedisStop(&redisServer);
    before = rotations();
    corTestRedisStart(&redisServer, NULL, NULL);
    while (rotations() == before) {
        ck_assert_msg(corNowMs() - madeMs < 8000, "no rotation in 8 s");
        usleep(100 * 1000);
    }
    ck_assert_msg(exchange(&two, 3, true),
                  "made %ld ms before, Redis restarted empty: %s",
                  corNowMs() - madeMs, out);
    ck_assert(exchange(&one, 3, true));
}
END_TEST

/* cor -t on a tickets configuration whose redis module line is redis
 * and whose tls tail is tail: exits 1 saying want. */
static void
refuses(const char* redis, const char* tail, const char* want)
{
    CorServer check = { 0 };
    char yaml[1024];

    snprintf(check.dir, sizeof(check.dir), "%s", certs);
    snprintf(yaml, sizeof(yaml),
             "listen:\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:1\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key, "
             "%s }\n"
             "modules:\n"
             "  - { load: http }\n"
             "%s",
             certs, certs, tail, redis);
    ck_assert_int_eq(corConfigCheck(&check, "check.yaml", yaml, out,
                                    sizeof(out)),
                     1);
    ck_assert_msg(strstr(out, "check.yaml:4:") != NULL
                      && strstr(out, want) != NULL,
                  "want '%s', got %s", want, out);
}

START_TEST(test_cor_t_refuses_what_cannot_work)
{
    const char* redis = "  - { load: redis }\n";

    refuses("", "tickets: \"redis://127.0.0.1:6379\"",
            "tickets: Redis 'redis://127.0.0.1:6379': no Redis client");
    refuses(redis, "tickets: \"http://127.0.0.1:6379\"",
            "tickets: expected redis:// or rediss://");
    refuses(redis, "tickets: nosuch",
            "tickets: no Redis server named 'nosuch'");
    refuses(redis, "tickets: \"\"",
            "tickets: expected a Redis URL or server name");
    refuses(redis,
            "tickets: \"redis://127.0.0.1:6379\", session_tickets: false",
            "session_tickets is false");
}
END_TEST

COR_TEST_SUITE(corTlsTickets)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_a_session_made_on_one_resumes_on_the_other);
    tcase_add_test(tc, test_a_rotation_keeps_an_older_session_resumable);
    tcase_add_test(tc, test_redis_down_at_start_serves_own_keys_then_shares);
    tcase_add_test(tc, test_redis_restarted_empty_keeps_the_sessions);
    tcase_add_test(tc, test_cor_t_refuses_what_cannot_work);
}
