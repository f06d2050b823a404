/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Watches on the loop (corCoLoopWatch), as the keep-alive pool uses them
 * for its idle connections: the event calls the owner back, the peer's
 * end too; an unwatched arming becomes the next wait of the coroutine that
 * ended the watch (the same arming: no new one), and an event that came
 * before that wait is not lost; a close ends a watch (on io_uring its poll
 * no longer holds the socket open); a watched fd refuses a wait. Run on
 * epoll, and again on io_uring (corCoWatchTest.uring).
 */
#include "corTest.h"
#include "corEvInt.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

static CorEvLoop* loop;
static int fds[2];
static CorCoWatch watch;
static unsigned fired;
static unsigned firedEvents;

static void
setUp(void)
{
    loop = corTestLoopCreate();
    ck_assert_ptr_nonnull(loop);
    corEvLoopBind(loop);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds),
                     0);
    fired = 0;
    firedEvents = 0;
}

static void
tearDown(void)
{
    close(fds[0]);
    close(fds[1]);
    corEvLoopDestroy(loop);
}

static void
onEvent(CorCoWatch* w, unsigned events)
{
    ck_assert_ptr_eq(w, &watch);
    fired++;
    firedEvents |= events;
}

/* Turn the loop until *flag is set (2 s at most). */
static void
turnUntil(const bool* flag)
{
    for (int i = 0; i < 200 && !*flag; i++) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 10), 0);
    }
    ck_assert(*flag);
}

/* Turn the loop a few times: what was to happen has. */
static void
turnSome(void)
{
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 10), 0);
    }
}

START_TEST(test_watch_calls_back_once_on_data_and_on_the_end)
{
    ck_assert_int_eq(corCoLoopWatch(&watch, fds[0], POLLIN, onEvent), 0);
    turnSome();
    ck_assert_uint_eq(fired, 0);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    turnSome();
    ck_assert_uint_eq(fired, 1); /* one-shot: the watch is over */
    ck_assert(firedEvents & POLLIN);
    ck_assert_int_eq(corCoLoopWatch(&watch, fds[0], POLLIN, onEvent), 0);
    turnSome();
    ck_assert_uint_eq(fired, 2); /* the byte is still there */
    ck_assert_int_eq(corCoLoopWatch(&watch, fds[0], POLLIN, onEvent), 0);
    shutdown(fds[1], SHUT_WR);
    turnSome();
    ck_assert_uint_eq(fired, 3);
}
END_TEST

typedef struct {
    bool early; /* data comes before the wait */
    int rc;
    short revents;
    uint32_t watchGeneration;
    uint32_t waitGeneration;
    bool done;
} Heir;

static void
heirWaits(void* arg)
{
    Heir* h = arg;
    short revents;

    ck_assert_int_eq(corCoLoopWatch(&watch, fds[0], POLLIN, onEvent), 0);
    h->watchGeneration = loop->fds[fds[0]].generation;
    corCoLoopUnwatch(&watch);
    if (h->early) {
        ck_assert_int_eq(write(fds[1], "x", 1), 1);
        ck_assert_int_eq(corCoLoopWait(-1, 0, 50, &revents), 0);
    }
    h->rc = corCoLoopWait(fds[0], POLLIN, 2000, &h->revents);
    h->waitGeneration = loop->fds[fds[0]].generation;
    h->done = true;
}

static void
writeSoon(void* arg)
{
    short revents;

    (void)arg;
    ck_assert_int_eq(corCoLoopWait(-1, 0, 20, &revents), 0);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
}

/* The coroutine that ended the watch waits on the fd: the watch's arming
 * is its wait (the same generation: nothing armed anew), and the watch's
 * owner is not called. */
START_TEST(test_unwatched_arming_becomes_the_wait)
{
    Heir h = { 0 };

    ck_assert_int_eq(corCoLoopSpawn(loop, heirWaits, &h), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, writeSoon, NULL), 0);
    turnUntil(&h.done);
    ck_assert_int_eq(h.rc, 1);
    ck_assert(h.revents & POLLIN);
    ck_assert_uint_eq(h.waitGeneration, h.watchGeneration);
    ck_assert_uint_eq(fired, 0);
}
END_TEST

/* The byte comes between the unwatch and the wait: the wait finds it. */
START_TEST(test_event_before_the_wait_is_not_lost)
{
    Heir h = { .early = true };

    ck_assert_int_eq(corCoLoopSpawn(loop, heirWaits, &h), 0);
    turnUntil(&h.done);
    ck_assert_int_eq(h.rc, 1);
    ck_assert(h.revents & POLLIN);
    ck_assert_uint_eq(fired, 0);
}
END_TEST

/* A watched fd refuses a wait; a closed one calls nobody, and its peer
 * sees the end at once (no poll holds the socket on io_uring). */
static void
waitOnWatched(void* arg)
{
    short revents;

    *(int*)arg = corCoLoopWait(fds[0], POLLIN, 100, &revents) == -1 ? errno : 0;
}

START_TEST(test_watched_fd_refuses_a_wait_and_a_close_ends_the_watch)
{
    int err = 0;
    char byte;

    ck_assert_int_eq(corCoLoopWatch(&watch, fds[0], POLLIN, onEvent), 0);
    ck_assert_int_eq(corCoLoopWatch(&watch, fds[0], POLLIN, onEvent), -EBUSY);
    ck_assert_int_eq(corCoLoopSpawn(loop, waitOnWatched, &err), 0);
    ck_assert_int_eq(err, EBUSY);
    ck_assert_int_eq(corCoLoopClose(fds[0]), 0);
    fds[0] = -1;
    turnSome();
    ck_assert_int_eq(read(fds[1], &byte, 1), 0);
    ck_assert_uint_eq(fired, 0);
}
END_TEST

COR_TEST_SUITE(corCoWatch)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_watch_calls_back_once_on_data_and_on_the_end);
    tcase_add_test(tc, test_unwatched_arming_becomes_the_wait);
    tcase_add_test(tc, test_event_before_the_wait_is_not_lost);
    tcase_add_test(tc,
                   test_watched_fd_refuses_a_wait_and_a_close_ends_the_watch);
}
