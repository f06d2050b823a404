/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/forward's balancing against the real binary in both modes: cor
 * (two loops) forwards to three scripted upstreams
 * (tests/integration/corHttpUpstream.c, whose /who answers its port, after
 * a delay /set gives). Checked: round robin spreads evenly; least_conn
 * sends fewer requests to a slow server than its turn; hash on a header
 * keeps a user on one server, spreads the users, moves only a killed
 * server's users (the fraction is measured) and brings them back when it
 * returns; a server whose /health fails is taken out within
 * interval * fails, logged and counted in /metrics, and back after its
 * passes (corForwardTest checks the balance keys' errors with the
 * others).
 */
#include "corTest.h"
#include "corServer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UPSTREAMS 3
#define USERS 300
/* The checked group's health: interval and fails. */
#define HEALTH_INTERVAL_MS 300
#define HEALTH_FAILS 2

static CorServer server;
static pid_t upstreamPid[UPSTREAMS];
static int upstreamPort[UPSTREAMS];
static char out[1 << 16];

static const char* configFormat =
    "runtime:\n"
    "  loops: 2\n"
    "  workers: 4\n"
    "  coroutines: { enabled: {COROUTINES}, per_loop: 64 }\n"
    "  stop_timeout: 5s\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - load: forward\n"
    "    upstreams:\n"
    "      - { name: rr, servers: [ %s ] }\n"
    "      - { name: lc, servers: [ %s ], balance: least_conn }\n"
    "      - { name: hashed, servers: [ %s ], balance: hash,\n"
    "          hash: \"header:X-User\", fail_timeout: 1s }\n"
    "      - { name: bypath, servers: [ %s ], balance: hash, hash: path }\n"
    "      - { name: byip, servers: [ %s ], balance: hash }\n"
    "      - { name: checked, servers: [ %s ],\n"
    "          health: { path: /health, interval: %dms, timeout: 500ms,\n"
    "                    fails: %d, passes: 1 } }\n"
    "routes:\n"
    "  - { match: \"/rr/*\", handler: rr, strip_prefix: /rr }\n"
    "  - { match: \"/lc/*\", handler: lc, strip_prefix: /lc }\n"
    "  - { match: \"/hash/*\", handler: hashed, strip_prefix: /hash }\n"
    "  - { match: \"/bypath/*\", handler: bypath }\n"
    "  - { match: \"/byip/*\", handler: byip, strip_prefix: /byip }\n"
    "  - { match: \"/checked/*\", handler: checked, strip_prefix: /checked }\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
setUp(void)
{
    char servers[256] = "";
    char pair[256];
    char yaml[4096];

    for (int i = 0; i < UPSTREAMS; i++) {
        size_t len = strlen(servers);

        if (i == 2) {
            snprintf(pair, sizeof(pair), "%s", servers);
        }
        upstreamPid[i] = corUpstreamStart(&upstreamPort[i]);
        ck_assert_int_gt(upstreamPid[i], 0);
        snprintf(servers + len, sizeof(servers) - len,
                 "%s\"http://127.0.0.1:"
                 "%d\"",
                 i > 0 ? ", " : "", upstreamPort[i]);
    }
    snprintf(yaml, sizeof(yaml), configFormat, servers, servers, servers,
             servers, servers, pair, HEALTH_INTERVAL_MS, HEALTH_FAILS);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
    for (int i = 0; i < UPSTREAMS; i++) {
        corUpstreamStop(&upstreamPid[i]);
    }
}

/* The index of the upstream that answered path through cor (with an
 * X-User field when user is not NULL), or -1. */
static int
who(const char* path, const char* user)
{
    char request[256];
    char buf[4096];
    const char* body;
    int port;

    snprintf(request, sizeof(request),
             "GET %s HTTP/1.1\r\nHost: t\r\n"
             "%s%s%sConnection: close\r\n\r\n",
             path, user != NULL ? "X-User: " : "", user != NULL ? user : "",
             user != NULL ? "\r\n" : "");
    if (corRequest(server.port, request, buf, sizeof(buf)) != 200) {
        return -1;
    }
    /* /who says "port N"; /echo ends with "port: N". */
    body = corBody(buf);
    if (body != NULL && strstr(body, "\nport: ") != NULL) {
        body = strstr(body, "\nport: ") + 1;
    }
    if (body == NULL || strncmp(body, "port", 4) != 0) {
        return -1;
    }
    port = atoi(body + 4 + strspn(body + 4, ": "));
    for (int i = 0; i < UPSTREAMS; i++) {
        if (upstreamPort[i] == port) {
            return i;
        }
    }
    return -1;
}

/* Set an upstream's /who delay or /health status directly. */
static void
upstreamSet(int i, const char* query)
{
    char path[64];

    snprintf(path, sizeof(path), "/set?%s", query);
    ck_assert_int_eq(corCurl(upstreamPort[i], "", path, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "set");
}

/* ---- Round robin and least_conn ------------------------------------------ */

START_TEST(test_round_robin_spreads_evenly)
{
    int count[UPSTREAMS] = { 0 };

    for (int i = 0; i < 30; i++) {
        int k = who("/rr/who", NULL);

        ck_assert_int_ge(k, 0);
        count[k]++;
    }
    for (int i = 0; i < UPSTREAMS; i++) {
        ck_assert_int_eq(count[i], 10);
    }
}
END_TEST

/* Clients that each send requests one after another, at once. */
typedef struct {
    const char* path;
    int count[UPSTREAMS];
    int failed;
} LoadClient;

#define LOAD_CLIENTS 4
#define LOAD_REQUESTS 15

static void*
loadClient(void* arg)
{
    LoadClient* c = arg;

    for (int i = 0; i < LOAD_REQUESTS; i++) {
        int k = who(c->path, NULL);

        if (k < 0) {
            c->failed++;
        } else {
            c->count[k]++;
        }
    }
    return NULL;
}

/* How many of LOAD_CLIENTS * LOAD_REQUESTS requests to path went to the
 * upstream 0. */
static int
loadOnFirst(const char* path)
{
    LoadClient clients[LOAD_CLIENTS];
    pthread_t threads[LOAD_CLIENTS];
    int first = 0;

    memset(clients, 0, sizeof(clients));
    for (int i = 0; i < LOAD_CLIENTS; i++) {
        clients[i].path = path;
        ck_assert_int_eq(pthread_create(&threads[i], NULL, loadClient,
                                        &clients[i]),
                         0);
    }
    for (int i = 0; i < LOAD_CLIENTS; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_int_eq(clients[i].failed, 0);
        first += clients[i].count[0];
    }
    return first;
}

START_TEST(test_least_conn_gives_a_slow_server_fewer)
{
    int roundRobin;
    int leastConn;

    upstreamSet(0, "delay=150");
    roundRobin = loadOnFirst("/rr/who");
    leastConn = loadOnFirst("/lc/who");
    printf("slow server's share of %d requests: round robin %d, least_conn "
           "%d\n",
           LOAD_CLIENTS * LOAD_REQUESTS, roundRobin, leastConn);
    /* Round robin gives it its turn whatever its speed. */
    ck_assert_int_eq(roundRobin, LOAD_CLIENTS * LOAD_REQUESTS / UPSTREAMS);
    /* least_conn sends there only when it has nothing in flight and
     * leads the ties: well under its third. */
    ck_assert_int_le(leastConn, LOAD_CLIENTS * LOAD_REQUESTS / 6);
}
END_TEST

/* ---- Hash ------------------------------------------------------------------
 */

/* Each user's upstream through the hash group. */
static void
usersMap(int* map)
{
    for (int u = 0; u < USERS; u++) {
        char user[16];

        snprintf(user, sizeof(user), "user%d", u);
        map[u] = who("/hash/who", user);
        ck_assert_int_ge(map[u], 0);
    }
}

START_TEST(test_hash_keeps_a_user_on_one_server)
{
    int count[UPSTREAMS] = { 0 };
    int map[USERS];
    int first = who("/hash/who", "alice");

    ck_assert_int_ge(first, 0);
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(who("/hash/who", "alice"), first);
    }
    usersMap(map);
    for (int u = 0; u < USERS; u++) {
        count[map[u]]++;
    }
    printf("%d users over the servers: %d %d %d\n", USERS, count[0], count[1],
           count[2]);
    /* 160 points a server: each gets its share, give or take. */
    for (int i = 0; i < UPSTREAMS; i++) {
        ck_assert_int_ge(count[i], USERS / 6);
    }
    /* A request without the field goes round robin. */
    memset(count, 0, sizeof(count));
    for (int i = 0; i < 6; i++) {
        count[who("/hash/who", NULL)]++;
    }
    for (int i = 0; i < UPSTREAMS; i++) {
        ck_assert_int_eq(count[i], 2);
    }
}
END_TEST

/* hash: path keeps a path on its server and spreads the paths; hash: ip
 * keeps a client (every request here comes from 127.0.0.1) on one. */
START_TEST(test_hash_by_path_and_by_ip)
{
    int count[UPSTREAMS] = { 0 };
    int first = who("/byip/who", NULL);

    ck_assert_int_ge(first, 0);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(who("/byip/who", NULL), first);
    }
    for (int i = 0; i < 90; i++) {
        char path[48];
        int k;

        snprintf(path, sizeof(path), "/bypath/echo/%d", i);
        k = who(path, NULL);
        ck_assert_int_ge(k, 0);
        ck_assert_int_eq(who(path, NULL), k);
        count[k]++;
    }
    printf("90 paths over the servers: %d %d %d\n", count[0], count[1],
           count[2]);
    for (int i = 0; i < UPSTREAMS; i++) {
        ck_assert_int_ge(count[i], 90 / 6);
    }
}
END_TEST

START_TEST(test_hash_moves_only_a_dead_servers_keys)
{
    int before[USERS];
    int during[USERS];
    int after[USERS];
    int moved = 0;
    int owned = 0;

    usersMap(before);
    corUpstreamStop(&upstreamPid[1]);
    usersMap(during);
    for (int u = 0; u < USERS; u++) {
        if (before[u] == 1) {
            owned++;
            ck_assert_int_ne(during[u], 1);
        } else {
            ck_assert_int_eq(during[u], before[u]);
        }
        moved += during[u] != before[u];
    }
    printf("server 1 killed: %d of %d keys moved (it owned %d)\n", moved, USERS,
           owned);
    ck_assert_int_eq(moved, owned);
    ck_assert_int_gt(moved, 0);
    /* Back on its port: once its fail_timeout passed, its keys return. */
    upstreamPid[1] = corUpstreamStartAt(&upstreamPort[1]);
    ck_assert_int_gt(upstreamPid[1], 0);
    usleep(1100 * 1000);
    usersMap(after);
    for (int u = 0; u < USERS; u++) {
        ck_assert_int_eq(after[u], before[u]);
    }
}
END_TEST

/* ---- Health checks ------------------------------------------------------- */

/* Wait until upstream i's cor_forward_server_up in the checked group is
 * up (0 or 1), within timeoutMs; how long it took, or -1. */
static long
upWait(int i, long up, long timeoutMs)
{
    char name[160];
    long start = corNowMs();

    snprintf(name, sizeof(name),
             "cor_forward_server_up{group=\"checked\","
             "server=\"http://127.0.0.1:%d\"}",
             upstreamPort[i]);
    while (corMetric(server.port, name) != up) {
        if (corNowMs() - start > timeoutMs) {
            return -1;
        }
        usleep(20000);
    }
    return corNowMs() - start;
}

/* How many of n requests to the checked group upstream 0 answered. */
static int
checkedOnFirst(int n)
{
    int first = 0;

    for (int i = 0; i < n; i++) {
        int k = who("/checked/who", NULL);

        ck_assert_int_ge(k, 0);
        first += k == 0;
    }
    return first;
}

START_TEST(test_health_takes_a_failing_server_out_and_back)
{
    /* A check that was under way when the status changed may have passed:
     * one interval more than fails of them, and the scheduling's slack. */
    long bound = HEALTH_INTERVAL_MS * (HEALTH_FAILS + 1) + 400;
    char line[128];
    long took;

    ck_assert_int_ge(upWait(1, 1, 2000), 0);
    ck_assert_int_eq(checkedOnFirst(10), 5);
    upstreamSet(1, "health=503");
    took = upWait(1, 0, 5000);
    printf("a server whose /health answers 503 taken out after %ld ms "
           "(interval %d ms, fails %d)\n",
           took, HEALTH_INTERVAL_MS, HEALTH_FAILS);
    ck_assert_int_ge(took, 0);
    ck_assert_int_le(took, bound);
    snprintf(line, sizeof(line), "server http://127.0.0.1:%d is down",
             upstreamPort[1]);
    ck_assert_int_eq(corServerLogCount(&server, line), 1);
    ck_assert_int_eq(checkedOnFirst(10), 10);
    upstreamSet(1, "health=200");
    took = upWait(1, 1, 5000);
    printf("back after %ld ms (passes 1)\n", took);
    ck_assert_int_ge(took, 0);
    ck_assert_int_le(took, HEALTH_INTERVAL_MS * 2 + 400);
    snprintf(line, sizeof(line), "server http://127.0.0.1:%d is up",
             upstreamPort[1]);
    ck_assert_int_eq(corServerLogCount(&server, line), 1);
    ck_assert_int_eq(checkedOnFirst(10), 5);
    /* Every server down: tried anyway, rather than a sure 502. */
    upstreamSet(0, "health=503");
    upstreamSet(1, "health=503");
    ck_assert_int_ge(upWait(0, 0, 5000), 0);
    ck_assert_int_ge(upWait(1, 0, 5000), 0);
    ck_assert_int_ge(who("/checked/who", NULL), 0);
}
END_TEST

COR_TEST_SUITE(corForwardBalance)
{
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_round_robin_spreads_evenly);
    tcase_add_test(tc, test_least_conn_gives_a_slow_server_fewer);
    tcase_add_test(tc, test_hash_keeps_a_user_on_one_server);
    tcase_add_test(tc, test_hash_by_path_and_by_ip);
    tcase_add_test(tc, test_hash_moves_only_a_dead_servers_keys);
    tcase_add_test(tc, test_health_takes_a_failing_server_out_and_back);
}
