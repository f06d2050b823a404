/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corCoBlocking: a call that blocks inside a library that knows nothing of
 * the loop (a database client, a condition variable) runs on a thread of
 * the blocking pool while its coroutine waits; the loop serves every other
 * connection meanwhile. The pool thread hands the result back through the
 * loop's eventfd (corEvLoopPost), and the loop resumes the coroutine.
 *
 * The blocking pool is apart from the request worker pool, so a blocking
 * call never queues behind a request that blocks for seconds.
 *
 * Its wait is the one wait corCoLoopCancel leaves alone: the call runs on
 * another thread with arguments on the coroutine's stack, so the coroutine
 * must outlive it. A stop drains the pools first, so it is not waited out
 * for long.
 */
#include "corCoLoopInt.h"

#include <pthread.h>

#define BLOCKING_THREADS_DEFAULT 4

/* Lives on the calling coroutine's stack until the call is back. */
typedef struct {
    CorEvTask work; /* on the blocking pool */
    CorEvTask done; /* back on the loop */
    CorCoFn fn;
    void* arg;
    CorEvLoop* loop;
    CorCoWaiter waiter;
} BlockingCall;

static pthread_mutex_t poolLock = PTHREAD_MUTEX_INITIALIZER;
static CorEvPool* blockingPool;
static unsigned blockingThreads = BLOCKING_THREADS_DEFAULT;

static CorEvPool*
poolGet(void)
{
    CorEvPool* pool;

    pthread_mutex_lock(&poolLock);
    if (blockingPool == NULL) {
        blockingPool = corEvPoolCreate(blockingThreads);
    }
    pool = blockingPool;
    pthread_mutex_unlock(&poolLock);
    return pool;
}

static void
callDone(CorEvTask* task)
{
    BlockingCall* call = corContainerOf(task, BlockingCall, done);

    corCoLoopReady(call->loop, &call->waiter);
}

static void
callRun(CorEvTask* task)
{
    BlockingCall* call = corContainerOf(task, BlockingCall, work);

    call->fn(call->arg);
    corEvLoopPost(call->loop, &call->done, callDone);
}

void
corCoBlocking(CorCoFn fn, void* arg)
{
    BlockingCall call = {
        .fn = fn,
        .arg = arg,
        .loop = corEvLoopCurrent(),
        .waiter = { .fd = -1, .cancellable = false },
    };
    CorEvPool* pool;

    if (call.loop == NULL || corCoCurrent() == NULL
        || (pool = poolGet()) == NULL
        || corEvPoolPost(pool, &call.work, callRun) != 0) {
        fn(arg); /* no coroutine, or no pool to be had: a plain call */
        return;
    }
    corCoLoopSuspend(call.loop, &call.waiter, -1);
}

void
corCoBlockingThreadsSet(unsigned threads)
{
    pthread_mutex_lock(&poolLock);
    blockingThreads = threads > 0 ? threads : 1;
    pthread_mutex_unlock(&poolLock);
}

void
corCoBlockingShutdown(void)
{
    pthread_mutex_lock(&poolLock);
    if (blockingPool != NULL) {
        corEvPoolShutdown(blockingPool);
        corEvPoolDestroy(blockingPool);
        blockingPool = NULL;
    }
    pthread_mutex_unlock(&poolLock);
}
