/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The integration harness itself: what a test starts (a cor server, an
 * upstream) ends with the test, however the test ends. check runs each
 * test in a forked process and, after a failed assertion, _exits it
 * without the teardown, or kills its process group past its timeout; the
 * servers are in groups of their own, so they used to run on for good
 * (eight were up 35 minutes after a failed run). Here forked processes
 * stand in for check's runner and test: the test starts a server and an
 * upstream, then ends as check ends a failed test, or its runner is
 * killed, and the test and what it started must go.
 */
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the stand-in test started. */
typedef struct {
    pid_t test;
    pid_t master;
    pid_t generation;
    pid_t upstream;
    int port;
} Started;

/* Whether pid still runs (a zombie no longer does: nothing may reap an
 * orphan here). */
static bool
running(pid_t pid)
{
    char path[64];
    char state = 'X';
    FILE* f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1) {
        state = 'X';
    }
    fclose(f);
    return state != 'Z' && state != 'X';
}

/* Whether pid ends by deadline (corNowMs). */
static bool
endsBy(pid_t pid, long deadline)
{
    while (running(pid)) {
        if (corNowMs() >= deadline) {
            return false;
        }
        usleep(20 * 1000);
    }
    return true;
}

/* How the stand-in test ends: as check ends a test after a failed
 * assertion (_exit), past its timeout (SIGKILL to the test's group), or
 * with its runner, killed by tests/run's timeout. */
typedef enum { END_FAILED, END_TIMED_OUT, END_RUNNER_KILLED } End;

/* The stand-in test: a server and an upstream, reported on fd, then its
 * end. */
static void
standInTest(int fd, End end)
{
    CorServer server;
    Started mine = { .test = getpid() };

    setpgid(0, 0); /* as check makes it */
    if (corServerStartWith(&server, NULL) == 0) {
        mine.master = server.pid;
        mine.generation = corServerGeneration(&server);
        mine.port = server.port;
    }
    mine.upstream = corUpstreamStart(&(int){ 0 });
    if (write(fd, &mine, sizeof(mine)) != sizeof(mine) || end == END_FAILED) {
        _exit(1);
    }
    pause();
    _exit(1);
}

/* Stand-ins for check's runner and the test it forks; what the test
 * started into started, and its end brought about. */
static void
standIn(Started* started, End end)
{
    int fds[2];
    pid_t runner;

    ck_assert_int_eq(pipe(fds), 0);
    runner = fork();
    ck_assert_int_ge(runner, 0);
    if (runner == 0) {
        pid_t test = fork();

        close(fds[0]);
        if (test == 0) {
            standInTest(fds[1], end);
        }
        waitpid(test, NULL, 0);
        _exit(0);
    }
    close(fds[1]);
    ck_assert_int_eq(read(fds[0], started, sizeof(*started)), sizeof(*started));
    close(fds[0]);
    ck_assert_int_gt(started->master, 0);
    ck_assert_int_gt(started->generation, 0);
    ck_assert_int_gt(started->upstream, 0);
    if (end == END_TIMED_OUT) {
        kill(-started->test, SIGKILL);
    } else if (end == END_RUNNER_KILLED) {
        kill(runner, SIGKILL);
    }
    waitpid(runner, NULL, 0);
}

/* All that started has ended, and the server's port is closed; what did
 * not end is ended here, for the next test's sake. */
static void
allEnded(const Started* started)
{
    /* A generation whose master went drains first: with nothing in
     * flight, at once; a minute is for a loaded machine. */
    long deadline = corNowMs() + 60000;
    bool test = endsBy(started->test, deadline);
    bool master = endsBy(started->master, deadline);
    bool generation = endsBy(started->generation, deadline);
    bool upstream = endsBy(started->upstream, deadline);
    int fd = corConnect(started->port);

    kill(started->test, SIGKILL);
    kill(-started->master, SIGKILL);
    kill(started->generation, SIGKILL);
    kill(started->upstream, SIGKILL);
    if (fd >= 0) {
        close(fd);
    }
    ck_assert_msg(test, "the test %d runs on", started->test);
    ck_assert_msg(master, "the server's master %d runs on", started->master);
    ck_assert_msg(generation, "the server's generation %d runs on",
                  started->generation);
    ck_assert_msg(upstream, "the upstream %d runs on", started->upstream);
    ck_assert_int_lt(fd, 0);
}

START_TEST(test_a_failed_assertion_stops_what_the_test_started)
{
    Started started;

    standIn(&started, END_FAILED);
    allEnded(&started);
}
END_TEST

START_TEST(test_a_test_killed_past_its_timeout_stops_them_too)
{
    Started started;

    standIn(&started, END_TIMED_OUT);
    allEnded(&started);
}
END_TEST

START_TEST(test_a_test_whose_runner_was_killed_stops_them_too)
{
    Started started;

    standIn(&started, END_RUNNER_KILLED);
    allEnded(&started);
}
END_TEST

COR_TEST_SUITE(corHarness)
{
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_a_failed_assertion_stops_what_the_test_started);
    tcase_add_test(tc, test_a_test_killed_past_its_timeout_stops_them_too);
    tcase_add_test(tc, test_a_test_whose_runner_was_killed_stops_them_too);
}
