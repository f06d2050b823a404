/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The example application module.
 *
 *   hello   never waits: answers the greeting, inline on the loop.
 *   hello_coroutine, hello_worker
 *           the same function registered to run as a coroutine and on a
 *           worker: what each way of running costs (bench/httpBench).
 *   sleep   waits ms (?ms=N, 0..60000; more waits 60 s, a negative or
 *           non-numeric N is refused with 400) through corRestWaitFd: a
 *           coroutine of the loop
 *           where its hook says yes, a worker thread where it says no
 *           (?worker=1) or coroutines are off. Same source both ways.
 *   park    parks until /wake (or ?ms=N passes, at most 60 s: 504):
 *           corCoLoopPark in a coroutine, a condition variable on a worker
 *           (which looks for a cancel every 50 ms).
 *   wake    wakes every parked request, on whichever loop it parked.
 *   gather  the seed's distributed operation: a call to every URL of the
 *           module's `gather:` list at once (http://, https://, cor://:
 *           any scheme the client takes), answered when the slowest
 *           answered, with each one's status and time. A coroutine of the
 *           loop where coroutines are on (each call a coroutine of its
 *           own), a worker otherwise (each call a thread of its own): the
 *           calls overlap either way, so it takes the slowest one's time.
 *   dbtime  PostgreSQL's `SELECT now()` on the module's `database:` (one
 *           the postgres module configured); ?sleep_ms=N makes the query
 *           take N ms more (pg_sleep, a parameter): bench/dbBench's load.
 *           A coroutine of the loop, a worker where coroutines are off.
 *
 *   visits  a counter in Redis (corHelloVisits.c).
 *
 * A wait that a stop (or the client leaving) cancels takes the failure
 * path: 503, at once.
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

/* The longest wait a query may ask for. */
#define WAIT_MAX_MS 60000

/* A wait in ms from the query: def when absent, capped at WAIT_MAX_MS;
 * -1 for anything but digits (a negative wait would be no timeout at
 * all, and waits forever). */
static int
queryMs(CorRequest* r, const char* key, int def)
{
    const char* value = corRequestQuery(r, key);
    unsigned long ms;
    char* end;

    if (value == NULL) {
        return def;
    }
    if (*value < '0' || *value > '9') {
        return -1;
    }
    ms = strtoul(value, &end, 10);
    if (*end != '\0') {
        return -1;
    }
    return ms > WAIT_MAX_MS ? WAIT_MAX_MS : (int)ms;
}

static bool
refusedMs(CorRequest* r, int ms)
{
    if (ms >= 0) {
        return false;
    }
    corRespondf(r, 400, "text/plain",
                "ms: expected a whole number of "
                "milliseconds, 0 to %d\n",
                WAIT_MAX_MS);
    return true;
}

/* Coroutines unless the client asks for a worker: the hook is where an
 * application says which requests may wait on the loop. */
static bool
onLoopUnlessAsked(const CorRequest* r)
{
    return r->query == NULL
           || memmem(r->query, r->queryLen, "worker=1", 8) == NULL;
}

static void
sleepServe(CorRequest* r)
{
    int ms = queryMs(r, "ms", 100);
    short revents;

    if (refusedMs(r, ms)) {
        return;
    }
    if (corRestWaitFd(-1, 0, ms, &revents) < 0) {
        corRespondf(r, 503, "text/plain", "sleep cancelled: %s\n",
                    strerror(errno));
        return;
    }
    corRespondf(r, 200, "text/plain", "slept %d ms\n", ms);
}

/* ---- Park and wake ------------------------------------------------------- */

/*
 * Parked coroutines of every loop, in one table: /wake may come in on any
 * loop, and wakes each where it parked (corCoLoopWakeOn). A coroutine
 * writes its own entry's handle as it parks; the waker reads it under the
 * lock with an acquire load, as corCoLoopWakeOn asks. Parked workers wait
 * on a condition variable.
 */
#define PARKED_MAX 4096

typedef struct {
    CorEvLoop* loop; /* NULL: a free entry */
    CorCoPark handle;
} Parked;

static Parked parked[PARKED_MAX];
static pthread_mutex_t parkLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t workerWake = PTHREAD_COND_INITIALIZER;
static unsigned long wakeups;

static int
parkOnLoop(int ms)
{
    Parked* entry = NULL;
    int rc;

    pthread_mutex_lock(&parkLock);
    for (unsigned i = 0; i < PARKED_MAX && entry == NULL; i++) {
        if (parked[i].loop == NULL) {
            entry = &parked[i];
            entry->loop = corEvLoopCurrent();
        }
    }
    pthread_mutex_unlock(&parkLock);
    if (entry == NULL) {
        return -1;
    }
    rc = corCoLoopPark(&entry->handle, ms);
    pthread_mutex_lock(&parkLock);
    entry->loop = NULL;
    pthread_mutex_unlock(&parkLock);
    return rc;
}

/* Whether the calling request's waits were cancelled (a stop, its client
 * gone): a park that a cancel ended returns as a timeout does, and a wait
 * that only looks fails with ECANCELED once a cancel came. */
static bool
waitsCancelled(void)
{
    short revents;

    return corRestWaitFd(-1, 0, 0, &revents) < 0 && errno == ECANCELED;
}

/* A worker's park looks for a cancel this often: a condition variable
 * knows nothing of stops or of a client that left. */
#define PARK_SLICE_MS 50

static void
deadlineAfter(struct timespec* ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

static int
parkOnWorker(int ms)
{
    struct timespec slice;
    unsigned long seen;
    bool cancelled = false;
    int left = ms;

    pthread_mutex_lock(&parkLock);
    seen = wakeups;
    while (wakeups == seen && left > 0 && !cancelled) {
        int step = left < PARK_SLICE_MS ? left : PARK_SLICE_MS;

        deadlineAfter(&slice, step);
        if (pthread_cond_timedwait(&workerWake, &parkLock, &slice)
            == ETIMEDOUT) {
            left -= step;
        }
        pthread_mutex_unlock(&parkLock);
        cancelled = waitsCancelled();
        pthread_mutex_lock(&parkLock);
    }
    pthread_mutex_unlock(&parkLock);
    return wakeups != seen;
}

static void
parkServe(CorRequest* r)
{
    int ms = queryMs(r, "ms", WAIT_MAX_MS);
    int woken;

    if (refusedMs(r, ms)) {
        return;
    }
    woken = corCoCurrent() != NULL ? parkOnLoop(ms) : parkOnWorker(ms);
    if (woken <= 0 && waitsCancelled()) {
        corRespondf(r, 503, "text/plain", "park cancelled: %s\n",
                    strerror(ECANCELED));
        return;
    }
    corRespondf(r, woken > 0 ? 200 : 504, "text/plain", "%s\n",
                woken > 0 ? "woken" : "nobody woke me");
}

static void
wakeServe(CorRequest* r)
{
    unsigned woken = 0;

    pthread_mutex_lock(&parkLock);
    for (unsigned i = 0; i < PARKED_MAX; i++) {
        CorCoPark handle = __atomic_load_n(&parked[i].handle, __ATOMIC_ACQUIRE);

        if (parked[i].loop != NULL && handle != 0
            && corCoLoopWakeOn(parked[i].loop, handle) > 0) {
            woken++;
        }
    }
    wakeups++;
    pthread_cond_broadcast(&workerWake);
    pthread_mutex_unlock(&parkLock);
    corRespondf(r, 200, "text/plain", "woke %u parked coroutines\n", woken);
}

/* ---- Gather ------------------------------------------------------------- */

#define GATHER_MAX 64

static const char* gatherUrls[GATHER_MAX];
static unsigned gatherCount;

/* One line per URL, "STATUS URL" (STATUS 0 and the client's reason for a
 * call that failed), then "took MS ms"; 200 when every call got a 2xx,
 * 502 otherwise. */
static void
gatherServe(CorRequest* r)
{
    CorClientCall* calls[GATHER_MAX];
    int errs[GATHER_MAX];
    char body[GATHER_MAX * 320];
    size_t n = 0;
    bool allGood = gatherCount > 0;
    uint64_t start = corEvClockMs();
    int w;

    for (unsigned i = 0; i < gatherCount; i++) {
        calls[i] = corClientStart(&(CorClientRequest){ .url = gatherUrls[i] },
                                  &errs[i]);
    }
    for (unsigned i = 0; i < gatherCount; i++) {
        CorClientResponse res = { 0 };
        int rc = calls[i] != NULL ? corClientWait(calls[i], &res) : errs[i];

        if (rc < 0 || res.status < 200 || res.status > 299) {
            allGood = false;
        }
        w = rc < 0 ? snprintf(body + n, sizeof(body) - n, "0 %s %s\n",
                              gatherUrls[i],
                              res.error[0] != '\0' ? res.error : strerror(-rc))
                   : snprintf(body + n, sizeof(body) - n, "%d %s\n", res.status,
                              gatherUrls[i]);
        n += w > 0 && (size_t)w < sizeof(body) - n ? (size_t)w : 0;
        corClientResponseFree(&res);
    }
    w = snprintf(body + n, sizeof(body) - n, "took %llu ms\n",
                 (unsigned long long)(corEvClockMs() - start));
    n += w > 0 && (size_t)w < sizeof(body) - n ? (size_t)w : 0;
    corRespond(r, allGood ? 200 : 502, "text/plain", body, n);
}

/* ---- Database ----------------------------------------------------------- */

static CorPgDatabase* database;

/* 200 with the server's clock; 500 for a query the server refused, 503
 * when the database cannot answer (down, restarting, timed out). */
static void
dbtimeServe(CorRequest* r)
{
    int ms = queryMs(r, "sleep_ms", 0);
    char msText[16];
    const char* params[] = { msText };
    CorPgResult* res;

    if (refusedMs(r, ms)) {
        return;
    }
    snprintf(msText, sizeof(msText), "%d", ms);
    res = ms > 0 ? corPgQuery(database,
                              "SELECT now(), pg_sleep($1::float8 / 1000)", 1,
                              params)
                 : corPgQuery(database, "SELECT now()", 0, NULL);
    if (corPgError(res) != NULL) {
        corRespondf(r, corPgStatus(res) == COR_PG_QUERY ? 500 : 503,
                    "text/plain", "%s\n", corPgError(res));
    } else {
        corRespondf(r, 200, "text/plain", "%s\n", corPgValue(res, 0, 0));
    }
    corPgResultFree(res);
}

/* database: a name the postgres module (loaded before) configured. */
static int
databaseConfigure(CorModule* m, const CorConf* conf)
{
    const char* name = corConfString(conf, "database", NULL,
                                     corModuleErrors(m));

    database = name != NULL ? corPgDatabase(name) : NULL;
    if (name != NULL && database == NULL) {
        corModuleError(m, corConfGet(conf, "database"),
                       "database: no database '%s' (load: postgres before "
                       "hello, with { name: %s, url: ... } in its databases)",
                       name, name);
        return -1;
    }
    return 0;
}

/* gather: [ URLs ], each taken apart now so that a typo is a config
 * error at its line rather than a 502 at the first request. */
static int
gatherConfigure(CorModule* m, const CorConf* conf)
{
    const CorConf* list = corConfSeq(conf, "gather", corModuleErrors(m));
    size_t count = corConfCount(list);

    gatherCount = 0;
    if (count > GATHER_MAX) {
        corModuleError(m, list, "gather: at most %d URLs, got %zu", GATHER_MAX,
                       count);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const CorConf* item = corConfAt(list, i);
        const char* url = corConfText(item);
        char why[128];
        CorUrl u;

        if (url == NULL || corUrlParse(url, &u, why, sizeof(why)) != 0) {
            corModuleError(m, item, "gather: %s",
                           url == NULL ? "expected a URL" : why);
            return -1;
        }
        gatherUrls[gatherCount++] = url;
    }
    return 0;
}

/* GET /visits, a counter in Redis: corHelloVisits.c. */
int corHelloVisitsAdd(CorModule* m, const CorConf* conf);

static int
helloInit(CorModule* m, const CorConf* conf)
{
    greeting = corConfString(conf, "greeting", greeting, corModuleErrors(m));
    if (gatherConfigure(m, conf) != 0 || databaseConfigure(m, conf) != 0) {
        return -1;
    }
    greetingLen = (size_t)snprintf(greetingLine, sizeof(greetingLine), "%s\n",
                                   greeting);
    if (greetingLen >= sizeof(greetingLine)) {
        corModuleError(m, NULL, "greeting: at most %zu bytes",
                       sizeof(greetingLine) - 2);
        return -1;
    }
    if (corHandlerAdd(m, &(CorHandler){ .name = "hello",
                                        .serve = helloServe,
                                        .run = COR_RUN_INLINE })
            != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "hello_coroutine",
                                           .serve = helloServe,
                                           .run = COR_RUN_COROUTINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "hello_worker",
                                           .serve = helloServe,
                                           .run = COR_RUN_WORKER })
               != 0
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
                                           .run = COR_RUN_INLINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "gather",
                                           .serve = gatherServe,
                                           .run = COR_RUN_COROUTINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "dbtime",
                                           .serve = dbtimeServe,
                                           .run = COR_RUN_COROUTINE })
               != 0
        || corHelloVisitsAdd(m, conf) != 0) {
        return -1;
    }
    return 0;
}

COR_MODULE(hello, .init = helloInit);
