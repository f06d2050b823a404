/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker pool: many posting threads, stealing from a busy worker's
 * queue, delayed tasks, and a shutdown that drains and refuses.
 */
#include "corTest.h"
#include "corEv.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- Contention ---------------------------------------------------------- */

enum { POSTERS = 8, EACH = 25000, WORKERS = 4 };

typedef struct {
    CorEvTask task;
    atomic_int runs;
} Counted;

static Counted* tasks;
static atomic_long ran;
static CorEvPool* pool;

static void
countRun(CorEvTask* task)
{
    atomic_fetch_add(&corContainerOf(task, Counted, task)->runs, 1);
    atomic_fetch_add(&ran, 1);
}

static void*
postEach(void* arg)
{
    long poster = (long)arg;

    for (long i = 0; i < EACH; i++) {
        ck_assert_int_eq(corEvPoolPost(pool, &tasks[poster * EACH + i].task,
                                       countRun),
                         0);
    }
    return NULL;
}

START_TEST(test_many_posting_threads_each_task_runs_once)
{
    pthread_t posters[POSTERS];

    tasks = calloc(POSTERS * EACH, sizeof(*tasks));
    pool = corEvPoolCreate(WORKERS);
    ck_assert_ptr_nonnull(pool);
    for (long i = 0; i < POSTERS; i++) {
        pthread_create(&posters[i], NULL, postEach, (void*)i);
    }
    for (int i = 0; i < POSTERS; i++) {
        pthread_join(posters[i], NULL);
    }
    corEvPoolShutdown(pool); /* drains what is queued */
    ck_assert_int_eq(atomic_load(&ran), POSTERS * EACH);
    for (int i = 0; i < POSTERS * EACH; i++) {
        ck_assert_int_eq(atomic_load(&tasks[i].runs), 1);
    }
    corEvPoolDestroy(pool);
    free(tasks);
}
END_TEST

/* ---- Stealing ------------------------------------------------------------ */

enum { QUEUED_BEHIND = 16 };

static sem_t queuedDone;
static sem_t blockerDone;
static CorEvTask behind[QUEUED_BEHIND];
static CorEvTask blocker;
static atomic_int stolenBy[WORKERS];

static void
runBehind(CorEvTask* task)
{
    (void)task;
    atomic_fetch_add(&stolenBy[corEvPoolWorkerIndex(pool)], 1);
    sem_post(&queuedDone);
}

/* Queues work on its own worker's queue, then blocks until it is done:
 * without stealing, nobody else would ever run it. */
static void
blockOwnQueue(CorEvTask* task)
{
    int self = corEvPoolWorkerIndex(pool);

    (void)task;
    for (int i = 0; i < QUEUED_BEHIND; i++) {
        ck_assert_int_eq(corEvPoolPost(pool, &behind[i], runBehind), 0);
    }
    for (int i = 0; i < QUEUED_BEHIND; i++) {
        sem_wait(&queuedDone);
    }
    ck_assert_int_eq(atomic_load(&stolenBy[self]), 0);
    sem_post(&blockerDone);
}

START_TEST(test_idle_workers_steal_from_a_busy_one)
{
    sem_init(&queuedDone, 0, 0);
    sem_init(&blockerDone, 0, 0);
    pool = corEvPoolCreate(WORKERS);
    ck_assert_int_eq(corEvPoolPost(pool, &blocker, blockOwnQueue), 0);
    sem_wait(&blockerDone); /* a shutdown now would refuse its posts */
    corEvPoolShutdown(pool);
    corEvPoolDestroy(pool);
    sem_destroy(&queuedDone);
    sem_destroy(&blockerDone);
}
END_TEST

/* ---- Delays and shutdown ------------------------------------------------- */

typedef struct {
    CorEvTask task;
    uint64_t postedAt;
    uint64_t ranAt;
    int order;
} Delayed;

static atomic_int delayedOrder;

static void
noteDelayed(CorEvTask* task)
{
    Delayed* d = corContainerOf(task, Delayed, task);

    d->ranAt = corEvClockMs();
    d->order = atomic_fetch_add(&delayedOrder, 1);
}

START_TEST(test_post_after_a_delay_runs_no_earlier)
{
    Delayed late = { 0 };
    Delayed early = { 0 };

    pool = corEvPoolCreate(2);
    late.postedAt = early.postedAt = corEvClockMs();
    ck_assert_int_eq(corEvPoolPostAfter(pool, &late.task, noteDelayed, 80), 0);
    ck_assert_int_eq(corEvPoolPostAfter(pool, &early.task, noteDelayed, 30), 0);
    usleep(200 * 1000);
    ck_assert_uint_ge(early.ranAt - early.postedAt, 30);
    ck_assert_uint_ge(late.ranAt - late.postedAt, 80);
    ck_assert_int_eq(early.order, 0);
    ck_assert_int_eq(late.order, 1);
    corEvPoolShutdown(pool);
    corEvPoolDestroy(pool);
}
END_TEST

START_TEST(test_shutdown_runs_delayed_work_and_refuses_new)
{
    Delayed later = { 0 };
    CorEvTask refused;

    pool = corEvPoolCreate(2);
    ck_assert_int_eq(corEvPoolPostAfter(pool, &later.task, noteDelayed, 60000),
                     0);
    corEvPoolShutdown(pool);
    ck_assert_uint_ne(later.ranAt, 0); /* ran, not dropped */
    ck_assert_int_eq(corEvPoolPost(pool, &refused, noteDelayed), -ESHUTDOWN);
    ck_assert_int_eq(corEvPoolPostAfter(pool, &refused, noteDelayed, 1),
                     -ESHUTDOWN);
    corEvPoolDestroy(pool);
}
END_TEST

COR_TEST_SUITE(corEvPool)
{
    tcase_add_test(tc, test_many_posting_threads_each_task_runs_once);
    tcase_add_test(tc, test_idle_workers_steal_from_a_busy_one);
    tcase_add_test(tc, test_post_after_a_delay_runs_no_earlier);
    tcase_add_test(tc, test_shutdown_runs_delayed_work_and_refuses_new);
}
