/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corCoBlocking: the call runs on a pool thread while the loop goes on, a
 * pool of threads and not a thread per call, and a plain call outside a
 * coroutine.
 */
#include "corTest.h"
#include "corEv.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

static CorEvLoop* loop;

static void
runUntilDone(void)
{
    CorCoLoopStats stats;
    uint64_t deadline = corEvClockMs() + 10000;

    (void)deadline;
    do {
        ck_assert_int_eq(corEvLoopRunOnce(loop, -1), 0);
        corCoLoopStatsGet(loop, &stats);
    } while (stats.live > 0);
    ck_assert_uint_eq(stats.live, 0);
}

typedef struct {
    pthread_t thread;
    uint64_t tookMs;
    bool sawTimer; /* the loop's timer fired while it blocked */
} SlowCall;

static void
sleep200ms(void* arg)
{
    SlowCall* call = arg;
    uint64_t start = corEvClockMs();

    call->thread = pthread_self();
    usleep(200 * 1000);
    call->tookMs = corEvClockMs() - start;
}

static atomic_bool timerFired;

/* Blocks until the loop's timer fired (at most 10 s): it can only fire
 * while this blocks if the loop is free meanwhile. Judged by that, not
 * by the timer's lateness, which a loaded machine (load 14) stretched
 * past any bound that still said something. */
static void
blockUntilTheTimer(void* arg)
{
    SlowCall* call = arg;
    uint64_t start = corEvClockMs();

    call->thread = pthread_self();
    while (!atomic_load(&timerFired) && corEvClockMs() - start < 10000) {
        usleep(1000);
    }
    call->sawTimer = atomic_load(&timerFired);
}

static SlowCall slow;
static uint64_t blockingReturnedAt;

static void
callBlocking(void* arg)
{
    (void)arg;
    corCoBlocking(blockUntilTheTimer, &slow);
    blockingReturnedAt = corEvClockMs();
}

static uint64_t timerFiredAt;

static void
timerOf50ms(void* arg)
{
    short revents;

    (void)arg;
    ck_assert_int_eq(corRestWaitFd(-1, 0, 50, &revents), 0);
    timerFiredAt = corEvClockMs();
    atomic_store(&timerFired, true);
}

START_TEST(test_blocking_call_runs_while_a_timer_fires)
{
    uint64_t start = corEvClockMs();

    loop = corTestLoopCreate();
    corEvLoopBind(loop);
    ck_assert_int_eq(corCoLoopSpawn(loop, callBlocking, NULL), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, timerOf50ms, NULL), 0);
    runUntilDone();
    ck_assert(!pthread_equal(slow.thread, pthread_self()));
    ck_assert_msg(slow.sawTimer, "the loop's timer did not fire while the "
                                 "call blocked");
    ck_assert_uint_ge(timerFiredAt - start, 50);
    ck_assert_uint_ge(blockingReturnedAt, timerFiredAt);
    corEvLoopDestroy(loop);
    corCoBlockingShutdown();
}
END_TEST

enum { CALLS = 64, POOL = 4 };

static pthread_t callThreads[CALLS];
static int callsDone;

static void
noteThread(void* arg)
{
    *(pthread_t*)arg = pthread_self();
    usleep(2000);
}

static void
manyCalls(void* arg)
{
    long i = (long)arg;

    corCoBlocking(noteThread, &callThreads[i]);
    callsDone++;
}

START_TEST(test_calls_share_a_pool_not_a_thread_each)
{
    int distinct = 0;

    corCoBlockingThreadsSet(POOL);
    loop = corTestLoopCreate();
    corEvLoopBind(loop);
    for (long i = 0; i < CALLS; i++) {
        ck_assert_int_eq(corCoLoopSpawn(loop, manyCalls, (void*)i), 0);
    }
    runUntilDone();
    ck_assert_int_eq(callsDone, CALLS);
    for (int i = 0; i < CALLS; i++) {
        bool seen = false;

        for (int j = 0; j < i; j++) {
            seen = seen || pthread_equal(callThreads[i], callThreads[j]);
        }
        distinct += !seen;
    }
    ck_assert_int_le(distinct, POOL);
    ck_assert_int_ge(distinct, 2); /* they did run side by side */
    corEvLoopDestroy(loop);
    corCoBlockingShutdown();
}
END_TEST

START_TEST(test_outside_a_coroutine_it_is_a_plain_call)
{
    SlowCall call = { 0 };

    corCoBlocking(sleep200ms, &call);
    ck_assert(pthread_equal(call.thread, pthread_self()));
}
END_TEST

static int afterCancelRc;

static void
blockThenWait(void* arg)
{
    short revents;

    corCoBlocking(sleep200ms, arg);
    /* Cancelled meanwhile: the call was waited out, the next wait fails. */
    afterCancelRc = corRestWaitFd(-1, 0, 5000, &revents);
}

static void
cancelSoon(void* arg)
{
    short revents;

    (void)arg;
    corRestWaitFd(-1, 0, 20, &revents);
    corCoLoopCancel();
}

START_TEST(test_cancel_waits_out_a_blocking_call)
{
    SlowCall call = { 0 };
    uint64_t start = corEvClockMs();

    loop = corTestLoopCreate();
    corEvLoopBind(loop);
    ck_assert_int_eq(corCoLoopSpawn(loop, blockThenWait, &call), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, cancelSoon, NULL), 0);
    runUntilDone();
    ck_assert_uint_ge(call.tookMs, 199);
    ck_assert_int_eq(afterCancelRc, -1);
    ck_assert_uint_lt(corEvClockMs() - start, 2000);
    corEvLoopDestroy(loop);
    corCoBlockingShutdown();
}
END_TEST

static void
quickCall(void* arg)
{
    (void)arg;
}

static uint64_t timeoutAfterBlocking;

/* The coroutine comes back through the ready queue and arms a timer at
 * once: the loop must sleep until that timer, not forever. */
static void
blockThenTimeout(void* arg)
{
    short revents;
    uint64_t start;

    (void)arg;
    corCoBlocking(quickCall, NULL);
    start = corEvClockMs();
    ck_assert_int_eq(corRestWaitFd(-1, 0, 200, &revents), 0);
    timeoutAfterBlocking = corEvClockMs() - start;
}

START_TEST(test_timer_armed_after_a_blocking_call_fires)
{
    loop = corTestLoopCreate();
    corEvLoopBind(loop);
    ck_assert_int_eq(corCoLoopSpawn(loop, blockThenTimeout, NULL), 0);
    runUntilDone();
    ck_assert_uint_ge(timeoutAfterBlocking, 199);
    ck_assert_uint_lt(timeoutAfterBlocking, 1000);
    corEvLoopDestroy(loop);
    corCoBlockingShutdown();
}
END_TEST

COR_TEST_SUITE(corCoBlocking)
{
    tcase_add_test(tc, test_timer_armed_after_a_blocking_call_fires);
    tcase_add_test(tc, test_blocking_call_runs_while_a_timer_fires);
    tcase_add_test(tc, test_calls_share_a_pool_not_a_thread_each);
    tcase_add_test(tc, test_outside_a_coroutine_it_is_a_plain_call);
    tcase_add_test(tc, test_cancel_waits_out_a_blocking_call);
}
