/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What only the io_uring loop has to get right (the loop's other tests run
 * on it too, as the *.uring tests): a pending poll holds its file open, so
 * a watch or a wait that ends must give the socket back, a close while a
 * coroutine waits too, and a loop destroyed after its run; the wakeups of
 * a multishot poll come as one callback; the ring is the thread's that
 * runs the loop, not the one that made it; a ring too small for what is
 * armed before the first turn defers, it does not refuse.
 */
#include "corTest.h"
#include "corEvInt.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static CorEvLoop* loop;
static int fds[2];

typedef struct {
    int rc;
    short revents;
} WaitOutcome;

static void
setUp(void)
{
    loop = corEvLoopCreateWith(COR_EV_URING);
    ck_assert_ptr_nonnull(loop);
    ck_assert_int_eq(corEvLoopBackend(loop), COR_EV_URING);
    corEvLoopBind(loop);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds),
                     0);
}

static void
tearDown(void)
{
    close(fds[1]);
    corEvLoopDestroy(loop);
}

/* Whether the peer of fds[1] is gone: read() says end of file. */
static bool
peerClosed(void)
{
    char c;

    return read(fds[1], &c, 1) == 0;
}

/* The same, given up to a second: a ring's exit lets its files go after
 * it returns. */
static bool
peerClosedSoon(void)
{
    struct pollfd pfd = { .fd = fds[1], .events = POLLIN };

    return poll(&pfd, 1, 1000) == 1 && peerClosed();
}

static void
ignoreIo(CorEvIo* io, unsigned events)
{
    (void)io;
    (void)events;
}

START_TEST(test_a_stopped_watch_gives_its_socket_back)
{
    CorEvIo io;

    ck_assert_int_eq(corEvIoStart(loop, &io, fds[0], EPOLLIN | EPOLLET,
                                  ignoreIo),
                     0);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 0), 0); /* armed */
    corEvIoStop(loop, &io);
    close(fds[0]);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 0), 0); /* removed */
    ck_assert(peerClosed());
}
END_TEST

static void
waitThenClose(void* arg)
{
    short revents;

    (void)arg;
    ck_assert_int_eq(corCoLoopWait(fds[0], POLLIN, 10, &revents), 0);
    close(fds[0]); /* plainly: the wait is over */
}

START_TEST(test_a_wait_that_timed_out_gives_its_socket_back)
{
    CorCoLoopStats stats;

    ck_assert_int_eq(corCoLoopSpawn(loop, waitThenClose, NULL), 0);
    do {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 100), 0);
        corCoLoopStatsGet(loop, &stats);
    } while (stats.live > 0);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 0), 0);
    ck_assert(peerClosed());
}
END_TEST

static WaitOutcome closedWait;

static void
waitLong(void* arg)
{
    (void)arg;
    closedWait.rc = corCoLoopWait(fds[0], POLLIN, 10000, &closedWait.revents);
}

static void
closeIt(void* arg)
{
    (void)arg;
    corCoLoopClose(fds[0]); /* what every transport's close does */
}

START_TEST(test_a_close_while_a_coroutine_waits_gives_the_socket_back)
{
    CorCoLoopStats stats;

    ck_assert_int_eq(corCoLoopSpawn(loop, waitLong, NULL), 0);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 0), 0); /* armed */
    ck_assert_int_eq(corCoLoopSpawn(loop, closeIt, NULL), 0);
    do {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 100), 0);
        corCoLoopStatsGet(loop, &stats);
    } while (stats.live > 0);
    ck_assert_int_eq(closedWait.rc, 1);
    ck_assert(closedWait.revents & POLLNVAL);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 0), 0);
    ck_assert(peerClosed());
}
END_TEST

START_TEST(test_a_second_watch_of_one_fd_is_refused)
{
    CorEvIo a;
    CorEvIo b;

    ck_assert_int_eq(corEvIoStart(loop, &a, fds[0], EPOLLIN | EPOLLET,
                                  ignoreIo),
                     0);
    ck_assert_int_eq(corEvIoStart(loop, &b, fds[0], EPOLLIN, ignoreIo),
                     -EEXIST);
    corEvIoStop(loop, &a);
    ck_assert_int_eq(corEvIoSet(loop, &a, EPOLLIN), -ENOENT);
    close(fds[0]);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 0), 0);
    ck_assert(peerClosed());
}
END_TEST

static sem_t ran;
static sem_t release;

static void*
runThenLinger(void* arg)
{
    corEvLoopRun(arg);
    sem_post(&ran);
    sem_wait(&release); /* the thread lives on, as a server's might */
    return NULL;
}

/* Destroyed from another thread than the one that ran it, while that one
 * lives on: the ring goes, and the socket its poll held with it. */
START_TEST(test_a_loop_destroyed_after_its_run_lets_its_sockets_go)
{
    CorEvIo io;
    pthread_t thread;

    sem_init(&ran, 0, 0);
    sem_init(&release, 0, 0);
    ck_assert_int_eq(corEvIoStart(loop, &io, fds[0], EPOLLIN | EPOLLET,
                                  ignoreIo),
                     0);
    ck_assert_int_eq(pthread_create(&thread, NULL, runThenLinger, loop), 0);
    corEvLoopStop(loop);
    sem_wait(&ran);
    corEvLoopDestroy(loop);
    loop = corEvLoopCreateWith(COR_EV_URING); /* for tearDown */
    close(fds[0]);
    ck_assert(peerClosedSoon());
    sem_post(&release);
    pthread_join(thread, NULL);
}
END_TEST

static int calls;
static unsigned seen;

static void
countIo(CorEvIo* io, unsigned events)
{
    char buf[64];

    calls++;
    seen |= events;
    while (read(io->fd, buf, sizeof(buf)) > 0) {
    }
}

START_TEST(test_wakeups_of_one_turn_are_one_callback)
{
    CorEvIo io;

    ck_assert_int_eq(corEvIoStart(loop, &io, fds[0],
                                  EPOLLIN | EPOLLRDHUP | EPOLLET, countIo),
                     0);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 0), 0);
    ck_assert_int_eq(calls, 0);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(write(fds[1], "x", 1), 1);
    }
    ck_assert_int_eq(corEvLoopRunOnce(loop, 1000), 0);
    ck_assert_int_eq(calls, 1);
    ck_assert(seen & EPOLLIN);
    /* Still armed: the next data is the next callback. */
    ck_assert_int_eq(write(fds[1], "y", 1), 1);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 1000), 0);
    ck_assert_int_eq(calls, 2);
    shutdown(fds[1], SHUT_WR);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 1000), 0);
    ck_assert_int_eq(calls, 3);
    ck_assert(seen & EPOLLRDHUP);
    corEvIoStop(loop, &io);
    close(fds[0]);
}
END_TEST

static void
countOnly(CorEvIo* io, unsigned events)
{
    (void)io;
    (void)events;
    calls++;
}

/* Without EPOLLET a watch is level-triggered, as on epoll: data left
 * unread is a callback at every turn. */
START_TEST(test_a_level_watch_is_called_until_drained)
{
    CorEvIo io;

    calls = 0;
    ck_assert_int_eq(corEvIoStart(loop, &io, fds[0], EPOLLIN, countOnly), 0);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    for (int i = 1; i <= 3; i++) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 1000), 0);
        ck_assert_int_eq(calls, i);
    }
    io.fn = countIo; /* drains */
    ck_assert_int_eq(corEvLoopRunOnce(loop, 1000), 0);
    ck_assert_int_eq(corEvLoopRunOnce(loop, 0), 0);
    ck_assert_int_eq(calls, 4);
    corEvIoStop(loop, &io);
    close(fds[0]);
}
END_TEST

static void*
runLoop(void* arg)
{
    return (void*)(intptr_t)corEvLoopRun(arg);
}

static void
stopOnData(CorEvIo* io, unsigned events)
{
    (void)events;
    corEvIoStop(loop, io);
    corEvLoopStop(loop);
}

/* A server makes its loops on one thread and runs each on its own. */
START_TEST(test_a_loop_made_on_one_thread_runs_on_another)
{
    CorEvIo io;
    pthread_t thread;
    void* rc;

    ck_assert_int_eq(corEvIoStart(loop, &io, fds[0], EPOLLIN | EPOLLET,
                                  stopOnData),
                     0);
    ck_assert_int_eq(pthread_create(&thread, NULL, runLoop, loop), 0);
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    ck_assert_int_eq(pthread_join(thread, &rc), 0);
    ck_assert_int_eq((intptr_t)rc, 0);
    close(fds[0]);
}
END_TEST

/* More watches before the first turn than the ring has entries: the rest
 * wait for that turn, none is refused. */
START_TEST(test_more_watches_than_the_ring_holds_before_the_first_turn)
{
    enum { WATCHES = 1500 };
    static CorEvIo io[WATCHES];

    calls = 0;
    for (int i = 0; i < WATCHES; i++) {
        int fd = dup(fds[0]);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(corEvIoStart(loop, &io[i], fd, EPOLLIN | EPOLLET,
                                      countOnly),
                         0);
    }
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    for (int turn = 0; turn < 50 && calls < WATCHES; turn++) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 100), 0);
    }
    ck_assert_int_eq(calls, WATCHES);
    for (int i = 0; i < WATCHES; i++) {
        corEvIoStop(loop, &io[i]);
        close(io[i].fd);
    }
    close(fds[0]);
}
END_TEST

COR_TEST_SUITE(corEvUring)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_a_stopped_watch_gives_its_socket_back);
    tcase_add_test(tc, test_a_wait_that_timed_out_gives_its_socket_back);
    tcase_add_test(tc, test_wakeups_of_one_turn_are_one_callback);
    tcase_add_test(tc, test_a_level_watch_is_called_until_drained);
    tcase_add_test(tc, test_a_loop_made_on_one_thread_runs_on_another);
    tcase_add_test(tc,
                   test_a_close_while_a_coroutine_waits_gives_the_socket_back);
    tcase_add_test(tc, test_a_second_watch_of_one_fd_is_refused);
    tcase_add_test(tc, test_a_loop_destroyed_after_its_run_lets_its_sockets_go);
    tcase_add_test(tc,
                   test_more_watches_than_the_ring_holds_before_the_first_turn);
}
