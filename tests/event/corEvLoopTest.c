/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loop: file events with partial reads and EAGAIN, tasks posted from
 * other threads, and a stop from another thread.
 */
#include "corTest.h"
#include "corEv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- File events --------------------------------------------------------- */

typedef struct {
    CorEvIo io;
    size_t received;
    size_t expected;
    int eagains;
} Reader;

static void
readSome(CorEvIo* io, unsigned events)
{
    Reader* r = corContainerOf(io, Reader, io);
    char buf[1000];
    ssize_t n;

    ck_assert(events & EPOLLIN);
    /* Edge-triggered: read until EAGAIN, in small bites. */
    while ((n = read(io->fd, buf, sizeof(buf))) > 0) {
        r->received += (size_t)n;
    }
    ck_assert(n < 0 && errno == EAGAIN);
    r->eagains++;
    if (r->received == r->expected) {
        corEvLoopStop(corEvLoopCurrent());
    }
}

typedef struct {
    int fd;
    size_t bytes;
} Writer;

static void*
writeSlowly(void* arg)
{
    Writer* w = arg;
    char chunk[4096] = { 0 };

    for (size_t sent = 0; sent < w->bytes; sent += sizeof(chunk)) {
        ck_assert_int_eq(write(w->fd, chunk, sizeof(chunk)), sizeof(chunk));
        if (sent % (64 * 1024) == 0) {
            usleep(1000);
        }
    }
    return NULL;
}

START_TEST(test_edge_triggered_reads_until_eagain)
{
    CorEvLoop* loop = corTestLoopCreate();
    Reader r = { .expected = 1024 * 1024 };
    Writer w = { .bytes = 1024 * 1024 };
    pthread_t writer;
    int fds[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds),
                     0);
    fcntl(fds[1], F_SETFL, 0); /* the writer blocks */
    ck_assert_int_eq(corEvIoStart(loop, &r.io, fds[0], EPOLLIN | EPOLLET,
                                  readSome),
                     0);
    ck_assert_int_eq(corEvIoSet(loop, &r.io, EPOLLIN | EPOLLET), 0);
    w.fd = fds[1];
    pthread_create(&writer, NULL, writeSlowly, &w);
    ck_assert_int_eq(corEvLoopRun(loop), 0);
    pthread_join(writer, NULL);
    ck_assert_uint_eq(r.received, r.expected);
    ck_assert_int_gt(r.eagains, 1);
    corEvIoStop(loop, &r.io);
    close(fds[0]);
    close(fds[1]);
    corEvLoopDestroy(loop);
}
END_TEST

/* ---- Posts from other threads -------------------------------------------- */

enum { POSTERS = 4, POSTS_EACH = 20000 };

typedef struct {
    CorEvTask task;
    int poster;
    int seq;
} Post;

static Post posts[POSTERS][POSTS_EACH];
static int lastSeq[POSTERS];
static int postsRun;
static bool outOfOrder;
static CorEvLoop* postLoop;

static void
runPost(CorEvTask* task)
{
    Post* p = corContainerOf(task, Post, task);

    ck_assert(corEvLoopCurrent() == postLoop);
    if (p->seq != lastSeq[p->poster] + 1) {
        outOfOrder = true;
    }
    lastSeq[p->poster] = p->seq;
    if (++postsRun == POSTERS * POSTS_EACH) {
        corEvLoopStop(postLoop);
    }
}

static void*
postMany(void* arg)
{
    int poster = (int)(long)arg;

    for (int i = 0; i < POSTS_EACH; i++) {
        Post* p = &posts[poster][i];

        p->poster = poster;
        p->seq = i + 1;
        corEvLoopPost(postLoop, &p->task, runPost);
    }
    return NULL;
}

START_TEST(test_posts_from_many_threads_run_once_in_order)
{
    pthread_t threads[POSTERS];

    postLoop = corTestLoopCreate();
    for (long i = 0; i < POSTERS; i++) {
        pthread_create(&threads[i], NULL, postMany, (void*)i);
    }
    ck_assert_int_eq(corEvLoopRun(postLoop), 0);
    for (int i = 0; i < POSTERS; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_int_eq(lastSeq[i], POSTS_EACH);
    }
    ck_assert_int_eq(postsRun, POSTERS * POSTS_EACH);
    ck_assert(!outOfOrder);
    corEvLoopDestroy(postLoop);
}
END_TEST

/* ---- Stop ---------------------------------------------------------------- */

static void*
stopSoon(void* arg)
{
    usleep(20 * 1000);
    corEvLoopStop(arg);
    return NULL;
}

START_TEST(test_stop_from_another_thread_wakes_an_idle_loop)
{
    CorEvLoop* loop = corTestLoopCreate();
    pthread_t stopper;

    pthread_create(&stopper, NULL, stopSoon, loop);
    /* Nothing armed: without the wake it would sleep forever. */
    ck_assert_int_eq(corEvLoopRun(loop), 0);
    pthread_join(stopper, NULL);
    corEvLoopDestroy(loop);
}
END_TEST

COR_TEST_SUITE(corEvLoop)
{
    tcase_add_test(tc, test_edge_triggered_reads_until_eagain);
    tcase_add_test(tc, test_posts_from_many_threads_run_once_in_order);
    tcase_add_test(tc, test_stop_from_another_thread_wakes_an_idle_loop);
}
