/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared downloads against the real binary, in both modes: the seed's
 * test (2), two coroutines of one loop needing one uncached resource (one
 * fetch, both answered, no cycle error); many requests on two loops and
 * on workers (one fetch); the fetching request asking for its own key (a
 * clear EDEADLK); the cached copy within its TTL and a new fetch after; a
 * failed fetch (everyone gets the error, nothing cached); a waiter cut
 * short by its deadline (the fetch goes on for the others).
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static char buf[1 << 16];

static const char* config =
    "runtime:\n"
    "  loops: %d\n"
    "  workers: 8\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT}, accept: reuseport }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"GET /shared\", handler: shared }\n"
    "  - { match: \"GET /sharedw\", handler: sharedw }\n"
    "  - { match: \"GET /sharedt\", handler: shared, timeout: 150ms }\n"
    "  - { match: \"GET /sharedcount\", handler: sharedcount }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
start(int loops)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml), config, loops);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
}

static int
get(const char* target)
{
    char req[512];

    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
    return corRequest(server.port, req, buf, sizeof(buf));
}

static long
fetches(void)
{
    ck_assert_int_eq(get("/sharedcount"), 200);
    return strtol(corBody(buf), NULL, 10);
}

/* Send each target on a connection of its own, all at once, then read
 * every answer: the bodies go to bodies[i], the status is checked. */
static void
together(const char* const* targets, int n, int status, char bodies[][128])
{
    int fds[16];

    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++) {
        char req[512];

        fds[i] = corConnect(server.port);
        ck_assert_int_ge(fds[i], 0);
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n",
                 targets[i]);
        ck_assert_int_eq(corSendAll(fds[i], req, strlen(req)), 0);
    }
    for (int i = 0; i < n; i++) {
        ck_assert_int_gt(corReadResponse(fds[i], buf, sizeof(buf), 10000), 0);
        ck_assert_int_eq(corStatus(buf), status);
        snprintf(bodies[i], 128, "%s", corBody(buf));
        close(fds[i]);
    }
}

/* The seed's test (2): one loop, two requests (two coroutines in
 * coroutine mode) needing one uncached resource. */
START_TEST(test_two_requests_of_one_loop_share_one_fetch)
{
    const char* targets[] = { "/shared?key=a&ms=400", "/shared?key=a&ms=400" };
    char bodies[2][128];
    long t;

    start(1);
    t = corNowMs();
    together(targets, 2, 200, bodies);
    ck_assert_int_lt(corNowMs() - t, 780);
    ck_assert_str_eq(bodies[0], "a #1 inner 1\n");
    ck_assert_str_eq(bodies[1], "a #1 inner 1\n");
    ck_assert_int_eq(fetches(), 1);
}
END_TEST

/* Eight requests on two loops, half of them on workers (as many workers
 * as requests, so that in blocking mode all of them wait at once): one
 * fetch. */
START_TEST(test_requests_on_loops_and_workers_share_one_fetch)
{
    const char* targets[8];
    char bodies[8][128];

    start(2);
    for (int i = 0; i < 8; i++) {
        targets[i] = i % 2 ? "/sharedw?key=b&ms=500" : "/shared?key=b&ms=500";
    }
    together(targets, 8, 200, bodies);
    for (int i = 0; i < 8; i++) {
        ck_assert_str_eq(bodies[i], "b #1 inner 1\n");
    }
    ck_assert_int_eq(fetches(), 1);
}
END_TEST

/* The request fetching a key asks for it again: EDEADLK (-35) at once,
 * not a wait for itself; its own fetch goes on and answers. */
START_TEST(test_the_fetcher_asking_for_its_own_key_is_a_cycle)
{
    start(1);
    ck_assert_int_eq(get("/shared?key=c&self=1&ms=10"), 200);
    ck_assert_str_eq(corBody(buf), "c #1 inner -35\n");
    ck_assert_int_eq(get("/sharedw?key=c2&self=1&ms=10"), 200);
    ck_assert_str_eq(corBody(buf), "c2 #2 inner -35\n");
}
END_TEST

START_TEST(test_the_cached_copy_lasts_its_ttl)
{
    start(1);
    ck_assert_int_eq(get("/shared?key=d&ttl=500"), 200);
    ck_assert_str_eq(corBody(buf), "d #1 inner 1\n");
    ck_assert_int_eq(get("/sharedw?key=d&ttl=500"), 200);
    ck_assert_str_eq(corBody(buf), "d #1 inner 1\n");
    ck_assert_int_eq(fetches(), 1);
    usleep(650 * 1000);
    ck_assert_int_eq(get("/shared?key=d&ttl=500"), 200);
    ck_assert_str_eq(corBody(buf), "d #2 inner 1\n");
    /* Without a TTL nothing is kept. */
    ck_assert_int_eq(get("/shared?key=e"), 200);
    ck_assert_int_eq(get("/shared?key=e"), 200);
    ck_assert_int_eq(fetches(), 4);
}
END_TEST

/* A fetch that fails: every waiter gets its error (EIO, -5), and the
 * next request fetches again. */
START_TEST(test_a_failed_fetch_answers_everyone_and_is_not_cached)
{
    const char* targets[] = { "/shared?key=f&fail=1&ms=300&ttl=9000",
                              "/sharedw?key=f&fail=1&ms=300&ttl=9000" };
    char bodies[2][128];

    start(1);
    together(targets, 2, 502, bodies);
    ck_assert_str_eq(bodies[0], "error -5\n");
    ck_assert_str_eq(bodies[1], "error -5\n");
    ck_assert_int_eq(fetches(), 1);
    ck_assert_int_eq(get("/shared?key=f&ttl=9000"), 200);
    ck_assert_str_eq(corBody(buf), "f #2 inner 1\n");
}
END_TEST

/* A waiter whose deadline passes is answered 504 and leaves; the fetch
 * goes on and answers its own request. */
START_TEST(test_a_cancelled_waiter_leaves_the_fetch_alone)
{
    const char* req = "GET /shared?key=g&ms=700 HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd = -1;
    long t;

    start(1);
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    usleep(100 * 1000);
    t = corNowMs();
    ck_assert_int_eq(get("/sharedt?key=g"), 504);
    ck_assert_int_lt(corNowMs() - t, 500);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert_str_eq(corBody(buf), "g #1 inner 1\n");
    ck_assert_int_eq(fetches(), 1);
    close(fd);
}
END_TEST

COR_TEST_SUITE(corSharedServe)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_add_test(tc, test_two_requests_of_one_loop_share_one_fetch);
    tcase_add_test(tc, test_requests_on_loops_and_workers_share_one_fetch);
    tcase_add_test(tc, test_the_fetcher_asking_for_its_own_key_is_a_cycle);
    tcase_add_test(tc, test_the_cached_copy_lasts_its_ttl);
    tcase_add_test(tc, test_a_failed_fetch_answers_everyone_and_is_not_cached);
    tcase_add_test(tc, test_a_cancelled_waiter_leaves_the_fetch_alone);
}
