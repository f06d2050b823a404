/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The seed's third test: a handler that waits on a condition variable, a
 * wait the loop knows nothing of, so it must run on a worker. Its hook
 * says so; a request that asks for the mistake (?mistake=1) is let run as
 * a coroutine instead, where the wait holds the whole loop and the stall
 * detector must name it.
 *
 *   /condwait?ms=N[&mistake=1]  waits on the condition until /condsignal
 *                               or N ms (default 500): "signalled" or
 *                               "timed out"
 *   /condsignal                 wakes every waiter: "woke"
 */
#include "cor.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void corTestkitCondWaitAdd(CorModule* m, int* rc);

static pthread_mutex_t condLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t condWake;
static pthread_once_t condOnce = PTHREAD_ONCE_INIT;
static unsigned long condSignals;

/* The waits measure CLOCK_MONOTONIC: a clock step must not end them. */
static void
condInit(void)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&condWake, &attr);
    pthread_condattr_destroy(&attr);
}

static bool
condWaitAsCoroutine(const CorRequest* r)
{
    return corRequestQuery((CorRequest*)r, "mistake") != NULL;
}

static void
condWaitServe(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");
    long waitMs = ms != NULL ? atol(ms) : 500;
    struct timespec until;
    unsigned long seen;
    int rc = 0;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += waitMs / 1000;
    until.tv_nsec += (waitMs % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&condLock);
    seen = condSignals;
    while (condSignals == seen && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&condWake, &condLock, &until);
    }
    pthread_mutex_unlock(&condLock);
    if (rc == ETIMEDOUT) {
        corRespond(r, 200, "text/plain", "timed out\n", 10);
    } else {
        corRespond(r, 200, "text/plain", "signalled\n", 10);
    }
}

static void
condSignalServe(CorRequest* r)
{
    pthread_mutex_lock(&condLock);
    condSignals++;
    pthread_cond_broadcast(&condWake);
    pthread_mutex_unlock(&condLock);
    corRespond(r, 200, "text/plain", "woke\n", 5);
}

void
corTestkitCondWaitAdd(CorModule* m, int* rc)
{
    pthread_once(&condOnce, condInit);
    if (*rc != 0
        || corHandlerAdd(m,
                         &(CorHandler){ .name = "condwait",
                                        .serve = condWaitServe,
                                        .run = COR_RUN_COROUTINE,
                                        .coroutineHook = condWaitAsCoroutine })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "condsignal",
                                           .serve = condSignalServe,
                                           .run = COR_RUN_INLINE })
               != 0) {
        *rc = -1;
    }
}
