/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker pool: threads for work that blocks. Each worker has its own
 * queue, so posting threads rarely meet on one lock; a worker whose queue
 * is empty steals from the others before it sleeps, so one slow task does
 * not hold up the tasks queued behind it.
 *
 * Sleeping is the only thing the pool-wide lock guards (with the delayed
 * tasks and the shutdown flag). A post counts the task in `queued` before
 * it checks for sleepers, and a worker counts itself in `idle` before it
 * checks `queued`, both sequentially consistent: whichever comes second
 * sees the other, so a wake-up is never lost.
 */
#include "corEvInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    pthread_mutex_t lock;
    CorEvTask* head;
    CorEvTask* tail;
    pthread_t thread;
    CorEvPool* pool;
    bool started;
} Worker;

struct CorEvPool {
    Worker* workers;
    unsigned count;
    pthread_mutex_t lock; /* sleeping, the delayed heap, shutdown */
    pthread_cond_t cond;
    CorEvHeap delayed;
    uint64_t delayedSeq;
    atomic_uint idle;
    atomic_ulong queued; /* posted and not yet taken by a worker */
    atomic_uint nextQueue;
    atomic_bool shuttingDown;
    /* The earliest delayed deadline (UINT64_MAX: none), read without the
     * lock by every worker between tasks, so that delayed work is not
     * starved by a pool that is never idle. */
    _Atomic uint64_t nextDue;
};

static __thread Worker* currentWorker;

static bool
delayedLess(const CorEvHeapNode* a, const CorEvHeapNode* b)
{
    const CorEvTask* ta = corContainerOf(a, CorEvTask, node);
    const CorEvTask* tb = corContainerOf(b, CorEvTask, node);

    return corEvDueBefore(ta->deadline, ta->seq, tb->deadline, tb->seq);
}

static void
queuePush(Worker* w, CorEvTask* task)
{
    task->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->tail != NULL) {
        w->tail->next = task;
    } else {
        w->head = task;
    }
    w->tail = task;
    pthread_mutex_unlock(&w->lock);
}

static CorEvTask*
queuePop(Worker* w)
{
    CorEvTask* task;

    pthread_mutex_lock(&w->lock);
    task = w->head;
    if (task != NULL) {
        w->head = task->next;
        if (w->head == NULL) {
            w->tail = NULL;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return task;
}

/* The own queue first, then the others', starting next door. */
static CorEvTask*
takeTask(CorEvPool* pool, Worker* self)
{
    unsigned index = (unsigned)(self - pool->workers);
    CorEvTask* task = queuePop(self);

    for (unsigned i = 1; task == NULL && i < pool->count; i++) {
        task = queuePop(&pool->workers[(index + i) % pool->count]);
    }
    if (task != NULL) {
        atomic_fetch_sub(&pool->queued, 1);
    }
    return task;
}

static void
wakeOne(CorEvPool* pool)
{
    if (atomic_load(&pool->idle) > 0) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_signal(&pool->cond);
        pthread_mutex_unlock(&pool->lock);
    }
}

static void
nextDueUpdate(CorEvPool* pool)
{
    atomic_store(&pool->nextDue,
                 pool->delayed.min != NULL
                     ? corContainerOf(pool->delayed.min, CorEvTask, node)
                           ->deadline
                     : UINT64_MAX);
}

/* Queue the delayed tasks that are due (all of them at shutdown). Called
 * with the pool lock held. */
static void
releaseDelayed(CorEvPool* pool, Worker* w, bool all)
{
    uint64_t now = corEvClockMs();

    while (pool->delayed.min != NULL) {
        CorEvTask* task = corContainerOf(pool->delayed.min, CorEvTask, node);

        if (!all && task->deadline > now) {
            break;
        }
        corEvHeapRemove(&pool->delayed, &task->node, delayedLess);
        atomic_fetch_add(&pool->queued, 1);
        queuePush(w, task);
    }
    nextDueUpdate(pool);
}

static void
sleepUntilWork(CorEvPool* pool)
{
    struct timespec until;

    atomic_fetch_add(&pool->idle, 1);
    if (atomic_load(&pool->queued) == 0) {
        if (pool->delayed.min == NULL) {
            pthread_cond_wait(&pool->cond, &pool->lock);
        } else {
            uint64_t deadline =
                corContainerOf(pool->delayed.min, CorEvTask, node)->deadline;

            until.tv_sec = (time_t)(deadline / 1000);
            until.tv_nsec = (long)(deadline % 1000) * 1000000;
            pthread_cond_timedwait(&pool->cond, &pool->lock, &until);
        }
    }
    atomic_fetch_sub(&pool->idle, 1);
}

static void*
workerMain(void* arg)
{
    Worker* self = arg;
    CorEvPool* pool = self->pool;

    currentWorker = self;
    /* A handler that crashes here says so, on a stack of its own; without
     * one (no memory for it) the report runs on this stack. */
    corCoCrashArm();
    for (;;) {
        CorEvTask* task;

        if (atomic_load(&pool->nextDue) <= corEvClockMs()) {
            pthread_mutex_lock(&pool->lock);
            releaseDelayed(pool, self, false);
            pthread_mutex_unlock(&pool->lock);
        }
        task = takeTask(pool, self);

        if (task != NULL) {
            task->fn(task);
            continue;
        }
        pthread_mutex_lock(&pool->lock);
        releaseDelayed(pool, self, atomic_load(&pool->shuttingDown));
        if (atomic_load(&pool->queued) == 0) {
            if (atomic_load(&pool->shuttingDown)) {
                pthread_mutex_unlock(&pool->lock);
                break;
            }
            sleepUntilWork(pool);
        }
        pthread_mutex_unlock(&pool->lock);
    }
    currentWorker = NULL;
    corCoThreadExit();
    return NULL;
}

CorEvPool*
corEvPoolCreate(unsigned threads)
{
    CorEvPool* pool = calloc(1, sizeof(*pool));
    pthread_condattr_t attr;

    if (pool == NULL || threads == 0) {
        free(pool);
        errno = EINVAL;
        return NULL;
    }
    pool->workers = calloc(threads, sizeof(*pool->workers));
    if (pool->workers == NULL) {
        free(pool);
        return NULL;
    }
    pool->count = threads;
    atomic_store(&pool->nextDue, UINT64_MAX);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&pool->cond, &attr);
    pthread_condattr_destroy(&attr);
    for (unsigned i = 0; i < threads; i++) {
        Worker* w = &pool->workers[i];

        pthread_mutex_init(&w->lock, NULL);
        w->pool = pool;
        int err = pthread_create(&w->thread, NULL, workerMain, w);

        if (err != 0) {
            corEvPoolShutdown(pool);
            corEvPoolDestroy(pool);
            errno = err;
            return NULL;
        }
        w->started = true;
    }
    return pool;
}

int
corEvPoolPost(CorEvPool* pool, CorEvTask* task, CorEvTaskFn fn)
{
    Worker* w = currentWorker;

    /* Counted before the shutdown check: a worker never exits while a
     * post that passed the check is still on its way to a queue. */
    atomic_fetch_add(&pool->queued, 1);
    if (atomic_load(&pool->shuttingDown)) {
        atomic_fetch_sub(&pool->queued, 1);
        return -ESHUTDOWN;
    }
    if (w == NULL || w->pool != pool) {
        w = &pool->workers[atomic_fetch_add(&pool->nextQueue, 1) % pool->count];
    }
    task->fn = fn;
    queuePush(w, task);
    wakeOne(pool);
    return 0;
}

int
corEvPoolPostAfter(CorEvPool* pool, CorEvTask* task, CorEvTaskFn fn,
                   unsigned delayMs)
{
    int rc = 0;

    task->fn = fn;
    task->deadline = corEvClockMs() + delayMs;
    pthread_mutex_lock(&pool->lock);
    if (atomic_load(&pool->shuttingDown)) {
        rc = -ESHUTDOWN;
    } else {
        task->seq = ++pool->delayedSeq;
        corEvHeapInsert(&pool->delayed, &task->node, delayedLess);
        nextDueUpdate(pool);
        /* A sleeper may be waiting for a later deadline than this one. */
        pthread_cond_signal(&pool->cond);
    }
    pthread_mutex_unlock(&pool->lock);
    return rc;
}

int
corEvPoolWorkerIndex(const CorEvPool* pool)
{
    Worker* w = currentWorker;

    if (w == NULL || w->pool != pool) {
        return -1;
    }
    return (int)(w - pool->workers);
}

void
corEvPoolShutdown(CorEvPool* pool)
{
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->shuttingDown, true);
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->lock);
    for (unsigned i = 0; i < pool->count; i++) {
        Worker* w = &pool->workers[i];

        if (w->started) {
            pthread_join(w->thread, NULL);
            w->started = false;
        }
    }
}

void
corEvPoolDestroy(CorEvPool* pool)
{
    if (pool == NULL) {
        return;
    }
    for (unsigned i = 0; i < pool->count; i++) {
        pthread_mutex_destroy(&pool->workers[i].lock);
    }
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}
