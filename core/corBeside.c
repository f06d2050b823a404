/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Work run beside the code that started it: a client call started now
 * and collected later (core/corClientCall.c), a notification sent while
 * its request goes on (corNotify.c). Both are straight-line code that
 * waits through corRestWaitFd, so they run the same as a coroutine of a
 * loop and on a thread; this file decides which, and keeps the threads.
 *
 * Where it runs. Started in a coroutine of a loop, it is a coroutine of
 * that loop, at once (corCoLoopSpawn): it costs a stack from the loop's
 * cache and its waits are the loop's. Started on a loop's own stack (an
 * inline handler) by work that nobody waits for (COR_BESIDE_LOOP_NEXT), it
 * is a coroutine of that loop from the loop's next iteration: not at
 * once, since the inline caller's thread must not yield and its request
 * is the thread's (corTask.c starts its coroutines so too). Anywhere else
 * (a worker thread, blocking mode, a loop past its coroutine cap) it is a
 * thread of the line below, whose waits poll() through the same code.
 * Rejected: the worker pool (work queued behind the very worker that
 * waits for it deadlocks a pool of one), and a thread per piece of work
 * (a thread that waited under a cancel keeps an eventfd for good,
 * corRestWait.c, so threads are kept and reused instead).
 *
 * Each piece has a CorRestCancel of its own, to which its waits are bound
 * wherever it runs: corBesideCancel ends them. A stop ends them all
 * anyway: the loops cancel their coroutines' waits, corRestCancelAll the
 * threads' polls.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <pthread.h>

#define LINE_THREAD_STACK ((size_t)256 * 1024)
/* The most threads that run work off the loops; more waits in line. */
#define LINE_THREADS_MAX 256

/* The threads of work off the loops. Their number is the most pieces
 * that ran off the loops at once. */
static pthread_mutex_t lineLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lineCond = PTHREAD_COND_INITIALIZER;
static CorBeside* lineHead;
static CorBeside* lineTail;
static unsigned lineLength;
static unsigned threadCount;
static unsigned threadsIdle;

/* The work, wherever it runs: b may be gone once done was called. */
static void
besideRun(CorBeside* b)
{
    CorBesideFn done = b->done;

    corRestCancelBind(&b->cancel);
    b->run(b);
    corRestCancelBind(NULL);
    done(b);
}

static void
besideCoMain(void* arg)
{
    besideRun(arg);
}

static void*
lineThread(void* arg)
{
    (void)arg;
    pthread_mutex_lock(&lineLock);
    for (;;) {
        CorBeside* b;

        while (lineHead == NULL) {
            threadsIdle++;
            pthread_cond_wait(&lineCond, &lineLock);
            threadsIdle--;
        }
        b = lineHead;
        lineHead = b->queued;
        if (lineHead == NULL) {
            lineTail = NULL;
        }
        lineLength--;
        pthread_mutex_unlock(&lineLock);
        besideRun(b);
        pthread_mutex_lock(&lineLock);
    }
    return NULL;
}

/* Queue b for the threads, starting one when none is free. */
static int
lineQueue(CorBeside* b)
{
    pthread_attr_t attr;
    pthread_t thread;
    int rc = 0;

    pthread_mutex_lock(&lineLock);
    if (lineLength + 1 > threadsIdle && threadCount < LINE_THREADS_MAX) {
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, LINE_THREAD_STACK);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&thread, &attr, lineThread, NULL);
        pthread_attr_destroy(&attr);
        if (rc == 0) {
            threadCount++;
        } else if (threadCount > 0) {
            rc = 0; /* the threads there take it in turn */
        }
    }
    if (rc == 0) {
        b->queued = NULL;
        if (lineTail != NULL) {
            lineTail->queued = b;
        } else {
            lineHead = b;
        }
        lineTail = b;
        lineLength++;
        pthread_cond_signal(&lineCond);
    }
    pthread_mutex_unlock(&lineLock);
    return -rc;
}

/*
 * A deferred start, on the loop's own stack. Refused a coroutine past the
 * cap or with no stack, it goes to the line. With the loop stopping, or
 * no thread either, it still runs, once, here, under a cancel already
 * cancelled: every wait fails at once, and done is called as promised,
 * on this loop (before it ends, for work that the loop must see end).
 */
static void
besideLoopStart(CorEvTask* task)
{
    CorBeside* b = corContainerOf(task, CorBeside, start);
    int rc = corCoLoopSpawn(corEvLoopCurrent(), besideCoMain, b);

    if (rc == 0 || (rc != -ECANCELED && lineQueue(b) == 0)) {
        return;
    }
    corRestCancel(&b->cancel);
    besideRun(b);
}

int
corBesideStart(CorBeside* b, CorBesideFn run, CorBesideFn done, unsigned flags)
{
    CorEvLoop* loop = corEvLoopCurrent();

    b->run = run;
    b->done = done;
    if (corRestMayPark()) {
        if (corCoLoopSpawn(loop, besideCoMain, b) == 0) {
            return 0;
        }
    } else if ((flags & COR_BESIDE_LOOP_NEXT) && loop != NULL
               && corRuntime.coroutines && !atomic_load(&corRuntime.stopping)) {
        corEvLoopPost(loop, &b->start, besideLoopStart);
        return 0;
    }
    return lineQueue(b);
}

void
corBesideCancel(CorBeside* b)
{
    corRestCancel(&b->cancel);
}
