/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Background tasks against the real binary, in both modes: a task spawned
 * at loop start ticks and is cancelled promptly at a stop and at a reload
 * (the new generation spawns its own), a task spawned from a handler ends
 * with the stop too, a spawn from a module's init is refused, and a long
 * computation that yields does not starve the loop's other requests.
 */
#include "corTest.h"
#include "corServer.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static char buf[1 << 16];

static const char* config =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "  stop_timeout: 5s\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: hello }\n"
    "  - { load: {MODULES}/testkit.so, ticker: true }\n"
    "routes:\n"
    "  - { match: \"GET /hello\", handler: hello }\n"
    "  - { match: \"GET /taskticks\", handler: taskticks }\n"
    "  - { match: \"GET /taskspawn\", handler: taskspawn }\n"
    "  - { match: \"GET /compute\", handler: compute }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

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
ticks(void)
{
    ck_assert_int_eq(get("/taskticks"), 200);
    return strtol(corBody(buf), NULL, 10);
}

/* The ticks once there are at least n, or at a minute: a loaded machine
 * may hold the ticker back, never speed it up. */
static long
ticksReach(long n)
{
    long seen = ticks();

    for (long deadline = corNowMs() + 60000; seen < n && corNowMs() < deadline;
         seen = ticks()) {
        usleep(20 * 1000);
    }
    return seen;
}

/* Whether fd has bytes to read now. */
static bool
readable(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };

    return poll(&pfd, 1, 0) > 0;
}

/* How many times text is in the server's log. */
static int
logCount(const char* text)
{
    char command[512];
    char out[64];

    snprintf(command, sizeof(command), "grep -c -e '%s' %s", text, server.log);
    corShell(command, out, sizeof(out));
    return atoi(out);
}

/* A task spawned in loopInit ticks every 100 ms; a spawn in init is
 * refused with EPERM (-1), not a crash; a stop ends the ticker, the
 * sleepers (one from loopInit, one from a handler) at once: well before
 * stop_timeout (5 s) would have ended them. Judged by the time taken: no
 * more ticks than 100 ms periods since the start. */
START_TEST(test_tasks_tick_and_a_stop_cancels_them_at_once)
{
    long began = corNowMs();
    long seen;
    int status;
    long t;

    ck_assert_int_eq(corServerStart(&server, config), 0);
    seen = ticksReach(3);
    ck_assert_msg(seen >= 3 && seen <= (corNowMs() - began) / 100 + 1,
                  "%ld ticks in %ld ms", seen, corNowMs() - began);
    ck_assert_msg(strstr(corBody(buf), "init spawn -1") != NULL, "%s",
                  corBody(buf));
    ck_assert_int_eq(get("/taskspawn"), 200);
    t = corNowMs();
    kill(server.pid, SIGTERM);
    ck_assert_int_eq(waitpid(server.pid, &status, 0), server.pid);
    server.pid = 0;
    ck_assert_int_lt(corNowMs() - t, 4000);
    ck_assert_int_eq(logCount("task ticker cancelled"), 1);
    ck_assert_int_eq(logCount("task sleeper cancelled (-125)"), 1);
    ck_assert_int_eq(logCount("task spawned cancelled (-125)"), 1);
}
END_TEST

/* A reload: the old generation's tasks are cancelled and it exits fast
 * (its sleeper would hold it an hour otherwise, and stop_timeout end it
 * at 5 s); the new one ticks. */
START_TEST(test_a_reload_ends_the_old_tasks_and_starts_new_ones)
{
    const char* b = getenv("COR_BIN");
    char command[512];
    char out[4096];
    long t;

    ck_assert_int_eq(corServerStart(&server, config), 0);
    ck_assert_int_ge(ticksReach(2), 2);
    snprintf(command, sizeof(command), "%s -s reload -c %s 2>&1",
             b ? b : "build/cor", server.config);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    t = corNowMs();
    while (logCount("generation 1 stopped") == 0 && corNowMs() - t < 30000) {
        usleep(20 * 1000);
    }
    ck_assert_int_eq(logCount("generation 1 stopped"), 1);
    ck_assert_int_lt(corNowMs() - t, 4000);
    ck_assert_int_eq(logCount("task ticker cancelled"), 1);
    ck_assert_int_eq(logCount("task sleeper cancelled"), 1);
    /* The new generation's ticker counts from 0. */
    t = ticks();
    ck_assert_int_ge(ticksReach(t + 2), t + 2);
}
END_TEST

/* A computation of 1.5 s on the only loop that yields between steps: a
 * /hello meanwhile is answered at once (in blocking mode the computation
 * runs on a worker, and the same holds). */
START_TEST(test_a_yielding_computation_does_not_starve_the_loop)
{
    const char* req = "GET /compute?ms=1500 HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd;
    long t;

    ck_assert_int_eq(corServerStart(&server, config), 0);
    fd = corConnect(server.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    usleep(150 * 1000);
    t = corNowMs();
    ck_assert_int_eq(get("/hello"), 200);
    /* Answered while the computation went on: its answer is not there
     * yet (a loop it starved would have answered /hello after it).
     * Judged by that order, which a loaded machine keeps, not by a
     * budget. */
    ck_assert_msg(!readable(fd),
                  "/hello after %ld ms, with the "
                  "computation done",
                  corNowMs() - t);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 10000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert_msg(strstr(corBody(buf), "computed") != NULL, "%s", corBody(buf));
    close(fd);
}
END_TEST

COR_TEST_SUITE(corTask)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_add_test(tc, test_tasks_tick_and_a_stop_cancels_them_at_once);
    tcase_add_test(tc, test_a_reload_ends_the_old_tasks_and_starts_new_ones);
    tcase_add_test(tc, test_a_yielding_computation_does_not_starve_the_loop);
}
