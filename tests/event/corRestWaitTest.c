/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corRestWaitFd: poll() off the loop (EINTR retried against the deadline),
 * the loop's wait in a coroutine. The poll half also runs in the build
 * without coroutines.
 */
#include "corTest.h"
#include "corEv.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

START_TEST(test_poll_sees_a_readable_fd)
{
    int fds[2];
    short revents = 0;

    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    ck_assert_int_eq(corRestWaitFd(fds[0], POLLIN, 1000, &revents), 1);
    ck_assert(revents & POLLIN);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(test_poll_times_out)
{
    int fds[2];
    short revents = 77;
    uint64_t start = corEvClockMs();

    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(corRestWaitFd(fds[0], POLLIN, 30, &revents), 0);
    ck_assert_int_eq(revents, 0);
    ck_assert_uint_ge(corEvClockMs() - start, 29);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

static void
onAlarm(int sig)
{
    (void)sig;
}

START_TEST(test_poll_retries_eintr_against_the_deadline)
{
    struct sigaction sa;
    struct itimerval every10ms = { { 0, 10000 }, { 0, 10000 } };
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    int fds[2];
    short revents;
    uint64_t start;
    int rc;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = onAlarm; /* no SA_RESTART: poll sees EINTR */
    sigaction(SIGALRM, &sa, NULL);
    ck_assert_int_eq(pipe(fds), 0);
    setitimer(ITIMER_REAL, &every10ms, NULL);
    start = corEvClockMs();
    rc = corRestWaitFd(fds[0], POLLIN, 100, &revents);
    setitimer(ITIMER_REAL, &off, NULL);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_ge(corEvClockMs() - start, 99);
    ck_assert_uint_lt(corEvClockMs() - start, 1000);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(test_no_fd_is_a_sleep)
{
    short revents;
    uint64_t start = corEvClockMs();

    ck_assert_int_eq(corRestWaitFd(-1, 0, 20, &revents), 0);
    ck_assert_uint_ge(corEvClockMs() - start, 19);
}
END_TEST

static void*
waitLongOnAThread(void* arg)
{
    short revents;
    int* result = arg;

    result[0] = corRestWaitFd(-1, 0, 60000, &revents);
    result[1] = errno;
    return NULL;
}

START_TEST(test_cancel_all_ends_a_poll_of_another_thread)
{
    int result[2] = { 0, 0 };
    pthread_t thread;
    uint64_t start = corEvClockMs();
    short revents;

    pthread_create(&thread, NULL, waitLongOnAThread, result);
    usleep(20 * 1000);
    corRestCancelAll();
    pthread_join(thread, NULL);
    ck_assert_int_eq(result[0], -1);
    ck_assert_int_eq(result[1], ECANCELED);
    ck_assert_uint_lt(corEvClockMs() - start, 1000);
    /* And every later wait fails at once. */
    ck_assert_int_eq(corRestWaitFd(-1, 0, 60000, &revents), -1);
    ck_assert_int_eq(errno, ECANCELED);
}
END_TEST

typedef struct {
    CorRestCancel cancel;
    int rc;
    int err;
} BoundWait;

static void*
waitLongBound(void* arg)
{
    BoundWait* w = arg;
    short revents;

    corRestCancelBind(&w->cancel);
    w->rc = corRestWaitFd(-1, 0, 60000, &revents);
    w->err = errno;
    corRestCancelBind(NULL);
    return NULL;
}

/* One piece of work's cancel ends its thread's poll(), from another
 * thread, and nothing else: the process's other waits go on. */
START_TEST(test_cancel_ends_the_poll_it_is_bound_to)
{
    BoundWait w = { .rc = 0 };
    pthread_t thread;
    uint64_t start = corEvClockMs();
    short revents;

    pthread_create(&thread, NULL, waitLongBound, &w);
    usleep(20 * 1000);
    corRestCancel(&w.cancel);
    pthread_join(thread, NULL);
    ck_assert_int_eq(w.rc, -1);
    ck_assert_int_eq(w.err, ECANCELED);
    ck_assert_uint_lt(corEvClockMs() - start, 1000);
    ck_assert_int_eq(corRestWaitFd(-1, 0, 1, &revents), 0);
}
END_TEST

/* A cancel that reaches a thread after its work moved on (the eventfd
 * written, the flag another work's) leaves the next work's wait alone. */
START_TEST(test_stale_wake_does_not_end_the_next_wait)
{
    CorRestCancel first;
    CorRestCancel second;
    short revents;

    memset(&first, 0, sizeof(first));
    memset(&second, 0, sizeof(second));
    ck_assert_int_eq(corRestCancelBind(&first), 0);
    corRestCancel(&first); /* the thread's eventfd is written */
    ck_assert_int_eq(corRestWaitFd(-1, 0, 1000, &revents), -1);
    ck_assert_int_eq(errno, ECANCELED);
    ck_assert_int_eq(corRestCancelBind(&second), 0);
    ck_assert_int_eq(corRestWaitFd(-1, 0, 30, &revents), 0);
    ck_assert_int_eq(corRestCancelBind(NULL), 0);
    ck_assert(!corRestCancelled(&second));
}
END_TEST

#if COR_HAVE_COROUTINES
static int pipeFds[2];
static int waiterRc;
static bool otherRan;

static void
waitOnLoop(void* arg)
{
    short revents;

    (void)arg;
    waiterRc = corRestWaitFd(pipeFds[0], POLLIN, 1000, &revents);
    /* Had this been poll(), the other coroutine could not have run. */
    ck_assert(otherRan);
}

static void
otherCoroutine(void* arg)
{
    (void)arg;
    otherRan = true;
    ck_assert_int_eq(write(pipeFds[1], "x", 1), 1);
}

START_TEST(test_in_a_coroutine_it_waits_on_the_loop)
{
    CorEvLoop* loop = corTestLoopCreate();
    CorCoLoopStats stats;

    ck_assert_int_eq(pipe(pipeFds), 0);
    corEvLoopBind(loop);
    ck_assert_int_eq(corCoLoopSpawn(loop, waitOnLoop, NULL), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, otherCoroutine, NULL), 0);
    do {
        corEvLoopRunOnce(loop, 100);
        corCoLoopStatsGet(loop, &stats);
    } while (stats.live > 0);
    ck_assert_int_eq(waiterRc, 1);
    corEvLoopDestroy(loop);
}
END_TEST
#endif

#if !COR_HAVE_COROUTINES
/* Blocking mode: a spawn tells the caller to run the request elsewhere. */
START_TEST(test_spawn_without_coroutines_is_refused_cleanly)
{
    CorEvLoop* loop = corTestLoopCreate();

    corEvLoopBind(loop);
    ck_assert_int_eq(corCoLoopSpawn(loop, NULL, NULL), -ENOTSUP);
    ck_assert_ptr_null(corCoCreate(NULL, NULL));
    corEvLoopDestroy(loop);
}
END_TEST
#endif

COR_TEST_SUITE(corRestWait)
{
    tcase_add_test(tc, test_poll_sees_a_readable_fd);
    tcase_add_test(tc, test_poll_times_out);
    tcase_add_test(tc, test_poll_retries_eintr_against_the_deadline);
    tcase_add_test(tc, test_no_fd_is_a_sleep);
    tcase_add_test(tc, test_cancel_ends_the_poll_it_is_bound_to);
    tcase_add_test(tc, test_stale_wake_does_not_end_the_next_wait);
    tcase_add_test(tc, test_cancel_all_ends_a_poll_of_another_thread);
#if COR_HAVE_COROUTINES
    tcase_add_test(tc, test_in_a_coroutine_it_waits_on_the_loop);
#else
    tcase_add_test(tc, test_spawn_without_coroutines_is_refused_cleanly);
#endif
}
