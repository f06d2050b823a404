/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The example application module.
 *
 *   hello   never waits: answers the greeting, inline on the loop.
 *   hello_coroutine, hello_worker
 *           the same function registered to run as a coroutine and on a
 *           worker: what each way of running costs (bench/httpBench).
 *   sleep   waits ms (?ms=N) through corRestWaitFd: a coroutine of the loop
 *           where its hook says yes, a worker thread where it says no
 *           (?worker=1) or coroutines are off. Same source both ways.
 *   park    parks until /wake (or ?ms=N passes): corCoLoopPark in a
 *           coroutine, a condition variable on a worker.
 *   wake    wakes every parked request.
 *
 * A wait that a stop cancels takes the failure path: 503, at once.
 */
#include "cor.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char* greeting = "hello, world";
static char greetingLine[256];
static size_t greetingLen;

static void
helloServe(CorRequest* r)
{
    corRespondStatic(r, 200, "text/plain", greetingLine, greetingLen);
}

static int
queryInt(CorRequest* r, const char* key, int def)
{
    const char* value = corRequestQuery(r, key);

    return value != NULL ? atoi(value) : def;
}

/* Coroutines unless the client asks for a worker: the hook is where an
 * application says which requests may wait on the loop. */
static bool
onLoopUnlessAsked(const CorRequest* r)
{
    return r->query == NULL || memmem(r->query, r->queryLen, "worker=1", 8)
                                   == NULL;
}

static void
sleepServe(CorRequest* r)
{
    int ms = queryInt(r, "ms", 100);
    short revents;

    if (corRestWaitFd(-1, 0, ms, &revents) < 0) {
        corRespondf(r, 503, "text/plain", "sleep cancelled: %s\n",
                    strerror(errno));
        return;
    }
    corRespondf(r, 200, "text/plain", "slept %d ms\n", ms);
}

/* ---- Park and wake ------------------------------------------------------- */

/* Parked coroutines, per loop thread; parked workers, process-wide. */
#define PARKED_MAX 4096

static __thread CorCoPark parked[PARKED_MAX];
static __thread unsigned parkedCount;
static pthread_mutex_t workerLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t workerWake = PTHREAD_COND_INITIALIZER;
static unsigned long wakeups;

static int
parkOnLoop(int ms)
{
    unsigned slot = parkedCount;
    int rc;

    if (slot == PARKED_MAX) {
        return -1;
    }
    parkedCount++;
    rc = corCoLoopPark(&parked[slot], ms);
    return rc;
}

static int
parkOnWorker(int ms)
{
    struct timespec until;
    unsigned long seen;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&workerLock);
    seen = wakeups;
    while (wakeups == seen && rc == 0) {
        rc = pthread_cond_timedwait(&workerWake, &workerLock, &until);
    }
    pthread_mutex_unlock(&workerLock);
    return wakeups != seen;
}

static void
parkServe(CorRequest* r)
{
    int ms = queryInt(r, "ms", 60000);
    int woken = corCoCurrent() != NULL ? parkOnLoop(ms) : parkOnWorker(ms);

    corRespondf(r, woken > 0 ? 200 : 504, "text/plain", "%s\n",
                woken > 0 ? "woken" : "nobody woke me");
}

static void
wakeServe(CorRequest* r)
{
    unsigned woken = 0;

    for (unsigned i = 0; i < parkedCount; i++) {
        woken += (unsigned)corCoLoopWake(parked[i]);
    }
    parkedCount = 0;
    pthread_mutex_lock(&workerLock);
    wakeups++;
    pthread_cond_broadcast(&workerWake);
    pthread_mutex_unlock(&workerLock);
    corRespondf(r, 200, "text/plain", "woke %u on this loop\n", woken);
}

static int
helloInit(CorModule* m, const CorConf* conf)
{
    greeting = corConfString(conf, "greeting", greeting, corModuleErrors(m));
    greetingLen = (size_t)snprintf(greetingLine, sizeof(greetingLine), "%s\n",
                                   greeting);
    if (greetingLen >= sizeof(greetingLine)) {
        corModuleError(m, NULL, "greeting: at most %zu bytes",
                       sizeof(greetingLine) - 2);
        return -1;
    }
    if (corHandlerAdd(m, &(CorHandler){ .name = "hello",
                                        .serve = helloServe,
                                        .run = COR_RUN_INLINE }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "hello_coroutine",
                                           .serve = helloServe,
                                           .run = COR_RUN_COROUTINE }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "hello_worker",
                                           .serve = helloServe,
                                           .run = COR_RUN_WORKER }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "sleep",
                                           .serve = sleepServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = onLoopUnlessAsked })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "park",
                                           .serve = parkServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = onLoopUnlessAsked })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "wake",
                                           .serve = wakeServe,
                                           .run = COR_RUN_INLINE }) != 0) {
        return -1;
    }
    return 0;
}

COR_MODULE(hello, .init = helloInit);
