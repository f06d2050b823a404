/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Coroutines on the loop: socket and timer waits, park and wake (from
 * another thread too), cancel of each kind of wait and of one coroutine's,
 * deadline order, closed fds, the cap, the stop, and waits where a yield
 * is forbidden.
 */
#include "corTest.h"
#include "corCoLoopInt.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static CorEvLoop* loop;
static int fds[2];

static void
setUp(void)
{
    loop = corTestLoopCreate();
    ck_assert_ptr_nonnull(loop);
    corEvLoopBind(loop);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds),
                     0);
}

/* Nothing may be left waiting when a test is over. */
static void
tearDown(void)
{
    CorCoLoopStats stats;

    corCoLoopStatsGet(loop, &stats);
    ck_assert_uint_eq(stats.live, 0);
    ck_assert(corListEmpty(&loop->co->waits));
    ck_assert_ptr_null(loop->co->readyHead);
    ck_assert_uint_eq(loop->timers.count, 0);
    close(fds[0]);
    close(fds[1]);
    corEvLoopDestroy(loop);
}

/* ---- Socket waits -------------------------------------------------------- */

typedef struct {
    int rc;
    short revents;
    int err;
    uint64_t elapsed;
    char got[8];
} WaitResult;

static void
waitReadable(void* arg)
{
    WaitResult* w = arg;
    uint64_t start = corEvNow(loop);

    w->rc = corCoLoopWait(fds[0], POLLIN, 2000, &w->revents);
    w->err = errno;
    w->elapsed = corEvNow(loop) - start;
    if (w->rc == 1 && (w->revents & POLLIN)) {
        ck_assert_int_eq(read(fds[0], w->got, sizeof(w->got) - 1), 4);
    }
}

static void
writeLater(void* arg)
{
    short revents;

    (void)arg;
    ck_assert_int_eq(corCoLoopWait(-1, 0, 20, &revents), 0);
    ck_assert_int_eq(write(fds[1], "ping", 4), 4);
}

/* Turn the loop until every coroutine finished. It sleeps as long as the
 * loop says (no cap of its own), so a timer the loop forgets hangs the
 * test instead of being rescued by a poll. */
static void
runUntilDone(void)
{
    CorCoLoopStats stats;

    for (;;) {
        corCoLoopStatsGet(loop, &stats);
        if (stats.live == 0) {
            break;
        }
        ck_assert_int_eq(corEvLoopRunOnce(loop, -1), 0);
    }
}

START_TEST(test_socket_wait_wakes_on_data)
{
    WaitResult w = { 0 };

    ck_assert_int_eq(corCoLoopSpawn(loop, waitReadable, &w), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, writeLater, NULL), 0);
    runUntilDone();
    ck_assert_int_eq(w.rc, 1);
    ck_assert(w.revents & POLLIN);
    ck_assert_str_eq(w.got, "ping");
    ck_assert_uint_lt(w.elapsed, 1000);
}
END_TEST

static void
waitTwiceOnOneFd(void* arg)
{
    WaitResult* w = arg;

    /* The first wait armed the fd; the second is a MOD, then data. */
    w->rc = corCoLoopWait(fds[0], POLLIN, 10, &w->revents);
    ck_assert_int_eq(w->rc, 0);
    w->rc = corCoLoopWait(fds[0], POLLIN, 2000, &w->revents);
    if (w->rc == 1) {
        ck_assert_int_eq(read(fds[0], w->got, sizeof(w->got) - 1), 4);
    }
}

START_TEST(test_fd_rearmed_after_a_timeout)
{
    WaitResult w = { 0 };

    ck_assert_int_eq(corCoLoopSpawn(loop, waitTwiceOnOneFd, &w), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, writeLater, NULL), 0);
    runUntilDone();
    ck_assert_int_eq(w.rc, 1);
    ck_assert_str_eq(w.got, "ping");
}
END_TEST

static void
waitBusy(void* arg)
{
    WaitResult* w = arg;

    w->rc = corCoLoopWait(fds[0], POLLIN, 10, &w->revents);
    w->err = errno;
}

START_TEST(test_second_waiter_on_an_fd_is_refused)
{
    WaitResult first = { 0 };
    WaitResult second = { 0 };

    ck_assert_int_eq(corCoLoopSpawn(loop, waitReadable, &first), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, waitBusy, &second), 0);
    ck_assert_int_eq(second.rc, -1);
    ck_assert_int_eq(second.err, EBUSY);
    ck_assert_int_eq(write(fds[1], "ping", 4), 4);
    runUntilDone();
    ck_assert_int_eq(first.rc, 1);
}
END_TEST

/* ---- Timer waits --------------------------------------------------------- */

static void
sleepFor(void* arg)
{
    WaitResult* w = arg;
    uint64_t start = corEvClockMs();

    w->rc = corCoLoopWait(-1, 0, 50, &w->revents);
    w->elapsed = corEvClockMs() - start;
}

START_TEST(test_timer_wait_fires_on_time)
{
    WaitResult w = { 0 };

    ck_assert_int_eq(corCoLoopSpawn(loop, sleepFor, &w), 0);
    runUntilDone();
    ck_assert_int_eq(w.rc, 0);
    ck_assert_uint_ge(w.elapsed, 49); /* the ms clock's rounding */
    ck_assert_uint_lt(w.elapsed, 50 + 200);
}
END_TEST

/* A slice that runs long (a busy handler, a slow machine, qemu) leaves the
 * loop's cached time behind: a wait armed after it still lasts its whole
 * timeout from the moment it was armed. */
static void
sleepAfterALongSlice(void* arg)
{
    WaitResult* w = arg;
    uint64_t start = corEvClockMs();

    while (corEvClockMs() - start < 150) {
    }
    start = corEvClockMs();
    w->rc = corCoLoopWait(-1, 0, 200, &w->revents);
    w->elapsed = corEvClockMs() - start;
}

static void
sleepBriefly(void* arg)
{
    short revents;

    (void)arg;
    ck_assert_int_eq(corCoLoopWait(-1, 0, 10, &revents), 0);
}

START_TEST(test_timer_wait_armed_after_a_long_slice_lasts_its_timeout)
{
    WaitResult w = { 0 };

    /* A turn in the middle reads the clock again: the long wait's deadline
     * must not have been counted from the stale time before it. */
    ck_assert_int_eq(corCoLoopSpawn(loop, sleepBriefly, NULL), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, sleepAfterALongSlice, &w), 0);
    runUntilDone();
    ck_assert_int_eq(w.rc, 0);
    ck_assert_uint_ge(w.elapsed, 200);
}
END_TEST

/* ---- Park and wake ------------------------------------------------------- */

static CorCoPark parked;
static int parkRc;

static void
parkLong(void* arg)
{
    (void)arg;
    parkRc = corCoLoopPark(&parked, 5000);
    ck_assert_uint_eq(parked, 0); /* cleared on resume */
}

static void
wakeTwice(void* arg)
{
    short revents;
    int* wakes = arg;

    corCoLoopWait(-1, 0, 10, &revents);
    ck_assert_uint_ne(parked, 0);
    wakes[0] = corCoLoopWake(parked);
    wakes[1] = corCoLoopWake(parked); /* the same handle again */
}

START_TEST(test_park_woken_by_another_coroutine_once)
{
    int wakes[2] = { -1, -1 };
    CorCoPark handle;

    ck_assert_int_eq(corCoLoopSpawn(loop, parkLong, NULL), 0);
    handle = parked;
    ck_assert_int_eq(corCoLoopSpawn(loop, wakeTwice, wakes), 0);
    runUntilDone();
    ck_assert_int_eq(parkRc, 1);
    ck_assert_int_eq(wakes[0], 1);
    ck_assert_int_eq(wakes[1], 0);
    ck_assert_int_eq(corCoLoopWake(handle), 0); /* long gone */
}
END_TEST

static void
parkBriefly(void* arg)
{
    WaitResult* w = arg;
    CorCoPark handle;
    uint64_t start = corEvClockMs();

    w->rc = corCoLoopPark(&handle, 30);
    w->elapsed = corEvClockMs() - start;
    ck_assert_int_eq(corCoLoopWake(handle), 0);
}

START_TEST(test_park_nobody_wakes_times_out)
{
    WaitResult w = { 0 };

    ck_assert_int_eq(corCoLoopSpawn(loop, parkBriefly, &w), 0);
    runUntilDone();
    ck_assert_int_eq(w.rc, 0);
    ck_assert_uint_ge(w.elapsed, 29);
}
END_TEST

START_TEST(test_park_outside_a_coroutine_fails)
{
    CorCoPark handle = 99;
    short revents;

    ck_assert_int_eq(corCoLoopPark(&handle, 10), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_uint_eq(handle, 0);
    ck_assert_int_eq(corCoLoopWait(fds[0], POLLIN, 10, &revents), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_int_eq(corCoLoopWake(12345), 0);
}
END_TEST

/* ---- Cancel -------------------------------------------------------------- */

typedef struct {
    int socketRc;
    int socketErr;
    int timerRc;
    int timerErr;
    int parkRc;
    int laterRc;
    int laterErr;
    uint64_t laterElapsed;
} CancelResults;

static CancelResults cancelled;

static void
waitSocketLong(void* arg)
{
    short revents;

    (void)arg;
    cancelled.socketRc = corCoLoopWait(fds[0], POLLIN, 60000, &revents);
    cancelled.socketErr = errno;
    /* The failure path waits again: it must fail at once. */
    uint64_t start = corEvClockMs();

    cancelled.laterRc = corCoLoopWait(fds[0], POLLIN, 60000, &revents);
    cancelled.laterErr = errno;
    cancelled.laterElapsed = corEvClockMs() - start;
}

static void
waitTimerLong(void* arg)
{
    short revents;

    (void)arg;
    cancelled.timerRc = corCoLoopWait(-1, 0, 60000, &revents);
    cancelled.timerErr = errno;
}

static void
parkForever(void* arg)
{
    CorCoPark handle;

    (void)arg;
    cancelled.parkRc = corCoLoopPark(&handle, -1);
}

static void
cancelAll(void* arg)
{
    short revents;

    (void)arg;
    corCoLoopWait(-1, 0, 10, &revents);
    corCoLoopCancel();
}

START_TEST(test_cancel_ends_every_kind_of_wait_and_later_ones)
{
    CorCoLoopStats stats;
    uint64_t start = corEvClockMs();

    memset(&cancelled, 0xff, sizeof(cancelled));
    ck_assert_int_eq(corCoLoopSpawn(loop, waitSocketLong, NULL), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, waitTimerLong, NULL), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, parkForever, NULL), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, cancelAll, NULL), 0);
    runUntilDone();
    ck_assert_uint_lt(corEvClockMs() - start, 1000);
    ck_assert_int_eq(cancelled.socketRc, -1);
    ck_assert_int_eq(cancelled.socketErr, ECANCELED);
    ck_assert_int_eq(cancelled.timerRc, -1);
    ck_assert_int_eq(cancelled.timerErr, ECANCELED);
    ck_assert_int_eq(cancelled.parkRc, 0);
    ck_assert_int_eq(cancelled.laterRc, -1);
    ck_assert_int_eq(cancelled.laterErr, ECANCELED);
    ck_assert_uint_lt(cancelled.laterElapsed, 100);
    corCoLoopStatsGet(loop, &stats);
    ck_assert_uint_eq(stats.cancelledWaits, 3);
    ck_assert_int_eq(corCoLoopSpawn(loop, parkForever, NULL), -ECANCELED);
}
END_TEST

static void
stopFromTimer(CorEvTimer* timer)
{
    (void)timer;
    corEvLoopStop(loop);
}

START_TEST(test_stop_cancels_waits_instead_of_waiting_them_out)
{
    CorEvTimer stop = { 0 };
    uint64_t start = corEvClockMs();

    memset(&cancelled, 0xff, sizeof(cancelled));
    ck_assert_int_eq(corCoLoopSpawn(loop, waitSocketLong, NULL), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, parkForever, NULL), 0);
    corEvTimerStart(loop, &stop, 20, stopFromTimer);
    ck_assert_int_eq(corEvLoopRun(loop), 0);
    ck_assert_uint_lt(corEvClockMs() - start, 1000);
    ck_assert_int_eq(cancelled.socketErr, ECANCELED);
    ck_assert_int_eq(cancelled.laterErr, ECANCELED);
    ck_assert_int_eq(cancelled.parkRc, 0);
}
END_TEST

/* ---- Deadline order ------------------------------------------------------ */

enum { SLEEPERS = 10000 };

static int wakeOrder[SLEEPERS];
static int wakeCount;
static int deadlines[SLEEPERS];
/* Each deadline is counted from a clock the arming reads, between armedAt
 * and armedBy: a clock read after it (the next sleeper's, or its wake's).
 * How far apart they are is up to the scheduler (a loaded machine, qemu),
 * so the order is checked within those bounds, not within a millisecond. */
static uint64_t armedAt[SLEEPERS];
static uint64_t armedBy[SLEEPERS];
static int lastArmed;

static void
sleepRandom(void* arg)
{
    int index = (int)(long)arg;
    uint64_t now = corEvClockMs();
    short revents;

    if (lastArmed >= 0) {
        armedBy[lastArmed] = now;
    }
    armedAt[index] = now;
    lastArmed = index;
    ck_assert_int_eq(corCoLoopWait(-1, 0, deadlines[index], &revents), 0);
    if (armedBy[index] == 0) {
        armedBy[index] = corEvClockMs();
    }
    wakeOrder[wakeCount++] = index;
}

START_TEST(test_10000_random_deadlines_wake_in_order)
{
    srand(11);
    wakeCount = 0;
    lastArmed = -1;
    corCoLoopCapSet(loop, SLEEPERS);
    for (long i = 0; i < SLEEPERS; i++) {
        deadlines[i] = rand() % 300;
        ck_assert_int_eq(corCoLoopSpawn(loop, sleepRandom, (void*)i), 0);
    }
    runUntilDone();
    ck_assert_int_eq(wakeCount, SLEEPERS);
    for (int i = 1; i < SLEEPERS; i++) {
        int a = wakeOrder[i - 1];
        int b = wakeOrder[i];

        /* Ties aside, the heap wakes them in deadline order. */
        ck_assert_uint_le(armedAt[a] + (uint64_t)deadlines[a],
                          armedBy[b] + (uint64_t)deadlines[b]);
    }
}
END_TEST

/* ---- Closed fds ---------------------------------------------------------- */

static void
closeTheFd(void* arg)
{
    short revents;

    (void)arg;
    corCoLoopWait(-1, 0, 10, &revents);
    ck_assert_int_eq(corCoLoopClose(fds[0]), 0);
    fds[0] = socket(AF_UNIX, SOCK_STREAM, 0); /* for tearDown */
}

START_TEST(test_wait_on_an_fd_closed_meanwhile)
{
    WaitResult w = { 0 };

    ck_assert_int_eq(corCoLoopSpawn(loop, waitReadable, &w), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, closeTheFd, NULL), 0);
    runUntilDone();
    ck_assert_int_eq(w.rc, 1);
    ck_assert_int_eq(w.revents, POLLNVAL);
    ck_assert_uint_lt(w.elapsed, 1000);
}
END_TEST

/* ---- The cap ------------------------------------------------------------- */

START_TEST(test_spawn_past_the_cap_is_refused)
{
    static WaitResult results[3];
    CorCoLoopStats stats;

    corCoLoopCapSet(loop, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(corCoLoopSpawn(loop, parkBriefly, &results[i]), 0);
    }
    ck_assert_int_eq(corCoLoopSpawn(loop, parkBriefly, NULL), -EAGAIN);
    corCoLoopStatsGet(loop, &stats);
    ck_assert_uint_eq(stats.live, 3);
    ck_assert_uint_eq(stats.peak, 3);
    ck_assert_uint_eq(stats.refused, 1);
    runUntilDone();
}
END_TEST

/* ---- Regressions --------------------------------------------------------- */

static int afterCancelPark;
static int afterCancelErrno;

static void
parkAfterCancel(void* arg)
{
    CorCoPark handle;

    (void)arg;
    corCoLoopCancel();
    afterCancelPark = corCoLoopPark(&handle, 1000);
    afterCancelErrno = errno;
}

/* A park after a cancel fails (-1), so a loop around it cannot spin on 0. */
START_TEST(test_park_after_cancel_fails)
{
    ck_assert_int_eq(corCoLoopSpawn(loop, parkAfterCancel, NULL), 0);
    runUntilDone();
    ck_assert_int_eq(afterCancelPark, -1);
    ck_assert_int_eq(afterCancelErrno, ECANCELED);
}
END_TEST

static void
parkShort(void* arg)
{
    CorCoPark* handle = arg;

    corCoLoopPark(handle, 50);
}

START_TEST(test_another_loops_handle_wakes_nobody)
{
    CorEvLoop* other = corTestLoopCreate();
    CorCoPark mine = 0;
    CorCoPark theirs = 0;

    ck_assert_int_eq(corCoLoopSpawn(loop, parkShort, &mine), 0);
    corEvLoopBind(other);
    ck_assert_int_eq(corCoLoopSpawn(other, parkShort, &theirs), 0);
    /* Same slot, same generation, another loop. */
    ck_assert_int_eq(corCoLoopWake(mine), 0);
    ck_assert_int_eq(corCoLoopWake(theirs), 1);
    while (corEvLoopRunOnce(other, -1) == 0) {
        CorCoLoopStats stats;

        corCoLoopStatsGet(other, &stats);
        if (stats.live == 0) {
            break;
        }
    }
    corEvLoopDestroy(other);
    corEvLoopBind(loop);
    runUntilDone();
}
END_TEST

/* ---- One coroutine's cancel --------------------------------------------- */

typedef struct {
    CorRestCancel cancel;
    WaitResult first;
    WaitResult later;
} BoundCoroutine;

static BoundCoroutine bound[2];
static int shortRc = -2;

static void
sleepShort(void* arg)
{
    short revents;

    (void)arg;
    shortRc = corRestWaitFd(-1, 0, 5, &revents);
}

static void
waitBound(void* arg)
{
    BoundCoroutine* b = arg;

    ck_assert_int_eq(corRestCancelBind(&b->cancel), 0);
    b->first.rc = corRestWaitFd(-1, 0, 300, &b->first.revents);
    b->first.err = errno;
    b->later.rc = corCoLoopWait(-1, 0, 60000, &b->later.revents);
    b->later.err = errno;
}

static void
cancelFirstSoon(void* arg)
{
    short revents;

    (void)arg;
    corCoLoopWait(-1, 0, 10, &revents);
    corRestCancel(&bound[0].cancel);
    corRestCancel(&bound[0].cancel); /* twice is once */
    corRestCancel(&bound[1].cancel); /* after the fact: later waits */
}

/* A cancel ends the wait of the coroutine bound to it, and that one's
 * later waits at once; the loop and its other coroutines go on. */
START_TEST(test_cancel_of_one_coroutine_ends_only_its_waits)
{
    CorCoLoopStats stats;
    uint64_t start = corEvClockMs();

    memset(bound, 0, sizeof(bound));
    ck_assert_int_eq(corCoLoopSpawn(loop, waitBound, &bound[0]), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, cancelFirstSoon, NULL), 0);
    runUntilDone();
    ck_assert_uint_lt(corEvClockMs() - start, 250);
    ck_assert_int_eq(bound[0].first.rc, -1);
    ck_assert_int_eq(bound[0].first.err, ECANCELED);
    ck_assert_int_eq(bound[0].later.rc, -1);
    ck_assert_int_eq(bound[0].later.err, ECANCELED);
    corCoLoopStatsGet(loop, &stats);
    ck_assert_uint_eq(stats.cancelledWaits, 1);
    /* A cancel before the first wait: it fails at once too. */
    ck_assert_int_eq(corCoLoopSpawn(loop, waitBound, &bound[1]), 0);
    runUntilDone();
    ck_assert_int_eq(bound[1].first.rc, -1);
    ck_assert_int_eq(bound[1].first.err, ECANCELED);
    /* Nothing else on the loop was cancelled. */
    ck_assert_int_eq(corCoLoopSpawn(loop, sleepShort, NULL), 0);
    runUntilDone();
    ck_assert_int_eq(shortRc, 0);
}
END_TEST

static int unspawnedBindRc;

static void
bindUnspawned(void* arg)
{
    unspawnedBindRc = corRestCancelBind(arg);
}

/* A coroutine no loop spawned has nowhere to keep a binding that follows
 * it: refused, rather than bound to the thread it happens to run on. */
START_TEST(test_bind_in_a_coroutine_no_loop_spawned_is_refused)
{
    CorRestCancel cancel;
    CorCo* co;

    memset(&cancel, 0, sizeof(cancel));
    co = corCoCreate(bindUnspawned, &cancel);
    ck_assert_ptr_nonnull(co);
    ck_assert(corCoResume(co));
    corCoDestroy(co);
    ck_assert_int_eq(unspawnedBindRc, -EPERM);
}
END_TEST

/* ---- Waking from another thread ------------------------------------------ */

static CorCoPark farHandle;
static int farParkRc;

static void
parkForWake(void* arg)
{
    (void)arg;
    farParkRc = corCoLoopPark(&farHandle, 5000);
}

static void*
wakeFromAThread(void* arg)
{
    CorCoPark handle = __atomic_load_n(&farHandle, __ATOMIC_ACQUIRE);

    *(int*)arg = corCoLoopWakeOn(loop, handle);
    return NULL;
}

START_TEST(test_wake_from_another_thread)
{
    pthread_t thread;
    int posted = -1;
    uint64_t start = corEvClockMs();

    ck_assert_int_eq(corCoLoopSpawn(loop, parkForWake, NULL), 0);
    pthread_create(&thread, NULL, wakeFromAThread, &posted);
    pthread_join(thread, NULL);
    ck_assert_int_eq(posted, 1);
    runUntilDone();
    ck_assert_int_eq(farParkRc, 1);
    ck_assert_uint_lt(corEvClockMs() - start, 2500);
    /* The handle is stale now: a wake posted with it names nobody. */
    ck_assert_int_eq(corCoLoopWakeOn(loop, farHandle), 0);
}
END_TEST

/* ---- Code that must not yield -------------------------------------------- */

static int noYieldRc;
static int noYieldParkErr;

static void
waitWithoutYield(void* arg)
{
    CorCoPark handle;
    short revents;
    bool was;

    (void)arg;
    was = corRestYieldAllow(false);
    noYieldRc = corRestWaitFd(-1, 0, 5, &revents);
    corCoLoopPark(&handle, 5);
    noYieldParkErr = errno;
    corRestYieldAllow(was);
}

/* What runs on a coroutine's stack without being its work waits with
 * poll(): the coroutine never yields, so it ends within the spawn. */
START_TEST(test_wait_where_yield_is_forbidden_polls)
{
    CorCoLoopStats stats;

    ck_assert_int_eq(corCoLoopSpawn(loop, waitWithoutYield, NULL), 0);
    corCoLoopStatsGet(loop, &stats);
    ck_assert_uint_eq(stats.live, 0);
    ck_assert_int_eq(noYieldRc, 0);
    ck_assert_int_eq(noYieldParkErr, EPERM);
}
END_TEST

static int dupFd;
static WaitResult sleeper;

static void
waitOnDupThenClose(void* arg)
{
    short revents;

    (void)arg;
    /* Waits on a dup, then close()s it plainly while armed: the epoll
     * registration outlives the fd. */
    ck_assert_int_eq(corCoLoopWait(dupFd, POLLIN, 20, &revents), 0);
}

static void
sleepAWhile(void* arg)
{
    (void)arg;
    sleeper.rc = corCoLoopWait(-1, 0, 300, &sleeper.revents);
}

START_TEST(test_event_of_a_stale_arming_is_dropped)
{
    dupFd = dup(fds[0]);
    ck_assert_int_eq(corCoLoopSpawn(loop, waitOnDupThenClose, NULL), 0);
    runUntilDone();
    close(dupFd);
    /* A new coroutine waits on a timer; data on the socket must not wake
     * it through the old registration. */
    ck_assert_int_eq(corCoLoopSpawn(loop, sleepAWhile, NULL), 0);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    runUntilDone();
    ck_assert_int_eq(sleeper.rc, 0);
}
END_TEST

static void
waitOnWatched(void* arg)
{
    WaitResult* w = arg;

    w->rc = corCoLoopWait(fds[0], POLLIN, 10, &w->revents);
    w->err = errno;
}

static void
ignoreIo(CorEvIo* io, unsigned events)
{
    (void)io;
    (void)events;
}

START_TEST(test_wait_on_an_fd_a_corevio_watches_is_refused)
{
    CorEvIo io;
    WaitResult w = { 0 };

    ck_assert_int_eq(corEvIoStart(loop, &io, fds[0], EPOLLIN, ignoreIo), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, waitOnWatched, &w), 0);
    runUntilDone();
    ck_assert_int_eq(w.rc, -1);
    ck_assert_int_eq(w.err, EBUSY);
    corEvIoStop(loop, &io);
}
END_TEST

/* A second CorEvIo on a watched fd is refused, and the first keeps it:
 * a coroutine still may not wait on it. */
START_TEST(test_second_corevio_on_an_fd_is_refused_and_the_first_keeps_it)
{
    CorEvIo a;
    CorEvIo b;
    WaitResult w = { 0 };

    ck_assert_int_eq(corEvIoStart(loop, &a, fds[0], EPOLLIN, ignoreIo), 0);
    ck_assert_int_eq(corEvIoStart(loop, &b, fds[0], EPOLLIN, ignoreIo),
                     -EEXIST);
    ck_assert_int_eq(corCoLoopSpawn(loop, waitOnWatched, &w), 0);
    runUntilDone();
    ck_assert_int_eq(w.rc, -1);
    ck_assert_int_eq(w.err, EBUSY);
    corEvIoStop(loop, &a);
}
END_TEST

/* A callback that stops (and frees) another CorEvIo whose event is later
 * in the same batch: that event must not reach it. */
typedef struct {
    CorEvIo io;
    CorEvIo** other;
    int* calls;
} Killer;

static void
killOther(CorEvIo* io, unsigned events)
{
    Killer* k = corContainerOf(io, Killer, io);

    (void)events;
    (*k->calls)++;
    if (*k->other != NULL) {
        corEvIoStop(loop, *k->other);
        free(corContainerOf(*k->other, Killer, io));
        *k->other = NULL;
    }
}

START_TEST(test_io_stopped_within_its_batch_is_not_called)
{
    int pair[2];
    CorEvIo* a = NULL;
    CorEvIo* b = NULL;
    Killer* ka = calloc(1, sizeof(*ka));
    Killer* kb = calloc(1, sizeof(*kb));
    int calls = 0;

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    *ka = (Killer){ .other = &b, .calls = &calls };
    *kb = (Killer){ .other = &a, .calls = &calls };
    a = &ka->io;
    b = &kb->io;
    ck_assert_int_eq(corEvIoStart(loop, a, fds[0], EPOLLIN, killOther), 0);
    ck_assert_int_eq(corEvIoStart(loop, b, pair[0], EPOLLIN, killOther), 0);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    ck_assert_int_eq(write(pair[1], "x", 1), 1);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 1000), 0);
    ck_assert_int_eq(calls, 1); /* the second was struck out */
    if (a != NULL) {
        corEvIoStop(loop, a);
        free(ka);
    }
    if (b != NULL) {
        corEvIoStop(loop, b);
        free(kb);
    }
    close(pair[0]);
    close(pair[1]);
}
END_TEST

COR_TEST_SUITE(corCoLoop)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_socket_wait_wakes_on_data);
    tcase_add_test(tc, test_fd_rearmed_after_a_timeout);
    tcase_add_test(tc, test_second_waiter_on_an_fd_is_refused);
    tcase_add_test(tc, test_timer_wait_fires_on_time);
    tcase_add_test(tc,
                   test_timer_wait_armed_after_a_long_slice_lasts_its_timeout);
    tcase_add_test(tc, test_park_woken_by_another_coroutine_once);
    tcase_add_test(tc, test_park_nobody_wakes_times_out);
    tcase_add_test(tc, test_park_outside_a_coroutine_fails);
    tcase_add_test(tc, test_cancel_ends_every_kind_of_wait_and_later_ones);
    tcase_add_test(tc, test_stop_cancels_waits_instead_of_waiting_them_out);
    tcase_add_test(tc, test_10000_random_deadlines_wake_in_order);
    tcase_add_test(tc, test_wait_on_an_fd_closed_meanwhile);
    tcase_add_test(tc, test_spawn_past_the_cap_is_refused);
    tcase_add_test(tc, test_park_after_cancel_fails);
    tcase_add_test(tc, test_another_loops_handle_wakes_nobody);
    tcase_add_test(tc, test_event_of_a_stale_arming_is_dropped);
    tcase_add_test(tc, test_wait_on_an_fd_a_corevio_watches_is_refused);
    tcase_add_test(
        tc, test_second_corevio_on_an_fd_is_refused_and_the_first_keeps_it);
    tcase_add_test(tc, test_io_stopped_within_its_batch_is_not_called);
    tcase_add_test(tc, test_cancel_of_one_coroutine_ends_only_its_waits);
    tcase_add_test(tc, test_bind_in_a_coroutine_no_loop_spawned_is_refused);
    tcase_add_test(tc, test_wake_from_another_thread);
    tcase_add_test(tc, test_wait_where_yield_is_forbidden_polls);
}
