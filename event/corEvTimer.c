/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Timers: absolute deadlines in the loop's millisecond clock, kept in an
 * intrusive min-heap. Arming, disarming and firing each cost O(log n);
 * nothing ever scans all timers, and nothing allocates.
 *
 * Arming reads the clock afresh (and moves the loop's cached time up to
 * it): the cached time is that of the turn's start, and a long slice
 * before the arming (a busy handler, a coroutine back from a blocking
 * call, a slow machine) would count the timeout from a moment already
 * past, so the wait would end early. A wait never ends before its timeout;
 * a vDSO clock read (about 30 ns here) per arming is its price.
 *
 * Pushing an armed timer later costs nothing: it keeps its place in the
 * heap under the earlier deadline and only notes when it is really due;
 * when the earlier deadline comes, it moves to the later one instead of
 * firing. An idle-connection timer restarted by every request therefore
 * touches the heap once per timeout, not once per request (nginx defers
 * small pushes for the same reason).
 */
#include "corEvInt.h"

#include <limits.h>
#include <time.h>

static bool
timerLess(const CorEvHeapNode* a, const CorEvHeapNode* b)
{
    const CorEvTimer* ta = corContainerOf(a, CorEvTimer, node);
    const CorEvTimer* tb = corContainerOf(b, CorEvTimer, node);

    return corEvDueBefore(ta->deadline, ta->seq, tb->deadline, tb->seq);
}

/* Each clock reads the time itself: the millisecond one runs for every
 * loop's turn, where a call more and a wider division showed. */
uint64_t
corEvClockMs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
corEvClockNs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
corEvTimerStart(CorEvLoop* loop, CorEvTimer* timer, uint64_t timeoutMs,
                CorEvTimerFn fn)
{
    uint64_t due;

    loop->now = corEvClockMs();
    due = loop->now + timeoutMs;
    timer->fn = fn;
    if (timer->active && due >= timer->deadline) {
        timer->due = due; /* moved there when deadline comes */
        return;
    }
    if (timer->active) {
        corEvHeapRemove(&loop->timers, &timer->node, timerLess);
    }
    timer->deadline = due;
    timer->due = due;
    timer->seq = ++loop->timerSeq;
    timer->active = true;
    corEvHeapInsert(&loop->timers, &timer->node, timerLess);
}

void
corEvTimerStop(CorEvLoop* loop, CorEvTimer* timer)
{
    if (timer->active) {
        corEvHeapRemove(&loop->timers, &timer->node, timerLess);
        timer->active = false;
    }
}

/* How long epoll may sleep before the earliest deadline; -1: forever. */
int
corEvTimersNextMs(const CorEvLoop* loop)
{
    const CorEvTimer* first;

    if (loop->timers.min == NULL) {
        return -1;
    }
    first = corContainerOf(loop->timers.min, CorEvTimer, node);
    if (first->deadline <= loop->now) {
        return 0;
    }
    if (first->deadline - loop->now > INT_MAX) {
        return INT_MAX;
    }
    return (int)(first->deadline - loop->now);
}

/*
 * Fire what is due. The heap is re-read after each callback, since a
 * callback may arm or disarm any timer (its own included); a timer armed
 * during this pass waits for the next one, so a callback that re-arms
 * itself for 0 ms cannot hold the loop. (A push back is not an arming: an
 * active timer pushed to a time already past fires in this pass, once.)
 */
void
corEvTimersExpire(CorEvLoop* loop)
{
    uint64_t armedBefore = loop->timerSeq;

    while (loop->timers.min != NULL) {
        CorEvTimer* timer = corContainerOf(loop->timers.min, CorEvTimer, node);

        if (timer->deadline > loop->now || timer->seq > armedBefore) {
            return;
        }
        corEvHeapRemove(&loop->timers, &timer->node, timerLess);
        if (timer->due != timer->deadline) {
            /* Pushed back since it was seated: take the place it is due
             * at, so that overdue timers still fire in the order due. */
            timer->deadline = timer->due;
            corEvHeapInsert(&loop->timers, &timer->node, timerLess);
            continue;
        }
        timer->active = false;
        timer->fn(timer);
    }
}
