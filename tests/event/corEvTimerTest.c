/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Timers and the heap under them: order under random inserts and removals,
 * firing on time, re-arming from a callback.
 */
#include "corTest.h"
#include "corEvInt.h"

#include <stdlib.h>

typedef struct {
    CorEvTimer timer;
    int index;
} NumberedTimer;

static int fired[20000];
static int firedCount;

static void
noteFired(CorEvTimer* timer)
{
    fired[firedCount++] = corContainerOf(timer, NumberedTimer, timer)->index;
}

/* Pop everything through the loop's expiry and check deadline order, with
 * first-armed-first-fired among equal deadlines. */
START_TEST(test_heap_keeps_order_under_inserts_and_removals)
{
    enum { COUNT = 20000 };
    static NumberedTimer timers[COUNT];
    CorEvLoop* loop = corTestLoopCreate();
    int armed = 0;

    srand(7);
    firedCount = 0;
    for (int i = 0; i < COUNT; i++) {
        timers[i].index = i;
        corEvTimerStart(loop, &timers[i].timer, (uint64_t)(rand() % 500),
                        noteFired);
    }
    /* Take out every third, re-arm every fifth somewhere else. */
    for (int i = 0; i < COUNT; i += 3) {
        corEvTimerStop(loop, &timers[i].timer);
    }
    for (int i = 0; i < COUNT; i += 5) {
        corEvTimerStart(loop, &timers[i].timer, (uint64_t)(rand() % 500),
                        noteFired);
    }
    for (int i = 0; i < COUNT; i++) {
        armed += timers[i].timer.active;
    }
    loop->now += 1000;
    corEvTimersExpire(loop);
    ck_assert_int_eq(firedCount, armed);
    ck_assert_ptr_null(loop->timers.min);
    ck_assert_uint_eq(loop->timers.count, 0);
    for (int i = 1; i < firedCount; i++) {
        const CorEvTimer* prev = &timers[fired[i - 1]].timer;
        const CorEvTimer* next = &timers[fired[i]].timer;

        ck_assert(
            prev->deadline < next->deadline
            || (prev->deadline == next->deadline && prev->seq < next->seq));
    }
    corEvLoopDestroy(loop);
}
END_TEST

static uint64_t firedAt;

static void
noteTime(CorEvTimer* timer)
{
    (void)timer;
    firedAt = corEvClockMs();
    corEvLoopStop(corEvLoopCurrent());
}

/* Pushing an armed timer later leaves its place in the heap and fires it
 * when due, not at the earlier deadline; pulling it earlier moves it. */
START_TEST(test_push_back_fires_when_due_and_pull_in_moves)
{
    CorEvLoop* loop = corTestLoopCreate();
    NumberedTimer pushed = { .index = 1 };
    NumberedTimer pulled = { .index = 2 };
    uint64_t first;
    uint64_t second;

    firedCount = 0;
    corEvTimerStart(loop, &pushed.timer, 10, noteFired);
    first = loop->now; /* what the arming read */
    corEvTimerStart(loop, &pulled.timer, 100, noteFired);
    corEvTimerStart(loop, &pushed.timer, 200, noteFired);
    second = loop->now;
    ck_assert_uint_eq(pushed.timer.deadline, first + 10); /* not moved */
    ck_assert_uint_eq(pushed.timer.due, second + 200);
    corEvTimerStart(loop, &pulled.timer, 20, noteFired);
    ck_assert_uint_eq(pulled.timer.deadline, loop->now + 20);

    loop->now = pulled.timer.deadline + 25;
    corEvTimersExpire(loop);
    ck_assert_int_eq(firedCount, 1);
    ck_assert_int_eq(fired[0], 2);
    ck_assert(pushed.timer.active);
    ck_assert_int_eq(corEvTimersNextMs(loop), (int)(second + 200 - loop->now));

    loop->now = second + 200;
    corEvTimersExpire(loop);
    ck_assert_int_eq(firedCount, 2);
    ck_assert_int_eq(fired[1], 1);
    ck_assert(!pushed.timer.active);
    ck_assert_ptr_null(loop->timers.min);
    corEvLoopDestroy(loop);
}
END_TEST

START_TEST(test_timer_fires_on_time)
{
    CorEvLoop* loop = corTestLoopCreate();
    CorEvTimer timer = { 0 };
    uint64_t start;

    corEvLoopBind(loop);
    start = corEvClockMs();
    loop->now = start;
    corEvTimerStart(loop, &timer, 50, noteTime);
    ck_assert_int_eq(corEvLoopRun(loop), 0);
    /* Never early; late only by the scheduler's slack. */
    ck_assert_uint_ge(firedAt - start, 50);
    ck_assert_uint_lt(firedAt - start, 50 + 200);
    corEvLoopDestroy(loop);
}
END_TEST

static int rearms;

static void
rearmNow(CorEvTimer* timer)
{
    CorEvLoop* loop = corEvLoopCurrent();

    if (++rearms < 100) {
        corEvTimerStart(loop, timer, 0, rearmNow);
    } else {
        corEvLoopStop(loop);
    }
}

START_TEST(test_timer_rearmed_for_0_ms_does_not_hold_the_loop)
{
    CorEvLoop* loop = corTestLoopCreate();
    CorEvTimer timer = { 0 };
    uint64_t passes = 0;

    corEvLoopBind(loop);
    rearms = 0;
    corEvTimerStart(loop, &timer, 0, rearmNow);
    /* One expiry pass fires it once: the re-armed timer waits a pass. */
    corEvTimersExpire(loop);
    ck_assert_int_eq(rearms, 1);
    while (rearms < 100 && passes++ < 1000) {
        corEvTimersExpire(loop);
    }
    ck_assert_int_eq(rearms, 100);
    corEvLoopDestroy(loop);
}
END_TEST

START_TEST(test_stop_is_idempotent_and_rearm_moves)
{
    CorEvLoop* loop = corTestLoopCreate();
    NumberedTimer a = { .index = 1 };
    NumberedTimer b = { .index = 2 };

    firedCount = 0;
    corEvTimerStop(loop, &a.timer); /* never armed: nothing */
    corEvTimerStart(loop, &a.timer, 10, noteFired);
    corEvTimerStart(loop, &b.timer, 20, noteFired);
    corEvTimerStart(loop, &a.timer, 30, noteFired); /* moved behind b */
    corEvTimerStop(loop, &b.timer);
    corEvTimerStop(loop, &b.timer);
    ck_assert_uint_eq(loop->timers.count, 1);
    loop->now += 25;
    corEvTimersExpire(loop);
    ck_assert_int_eq(firedCount, 0);
    loop->now += 5;
    corEvTimersExpire(loop);
    ck_assert_int_eq(firedCount, 1);
    ck_assert_int_eq(fired[0], 1);
    corEvLoopDestroy(loop);
}
END_TEST

COR_TEST_SUITE(corEvTimer)
{
    tcase_add_test(tc, test_heap_keeps_order_under_inserts_and_removals);
    tcase_add_test(tc, test_push_back_fires_when_due_and_pull_in_moves);
    tcase_add_test(tc, test_timer_fires_on_time);
    tcase_add_test(tc, test_timer_rearmed_for_0_ms_does_not_hold_the_loop);
    tcase_add_test(tc, test_stop_is_idempotent_and_rearm_moves);
}
