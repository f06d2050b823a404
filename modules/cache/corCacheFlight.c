/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collapsed forwarding: the misses of one key while its first is being
 * fetched wait for that one instead of running the handler each. A
 * waiter holds no thread and no coroutine: the core keeps its request
 * between the lookup and corCacheResume (as a late guard's), and the end
 * of the fetch posts each waiter's wake to its own loop, where it looks
 * again: a hit now, or (the answer could not be stored) its own handler
 * run. The fetches in flight are kept in their key's shard, under its
 * lock.
 */
#include "corCacheInt.h"

#include <stdlib.h>
#include <string.h>

struct CacheFlight {
    CacheFlight* next; /* of its shard */
    uint64_t hash;
    size_t keyLen;
    CorList waiters;       /* CacheRun.waiting */
    CacheGrowing* growing; /* its body as it comes, once its head did */
    char key[];
};

/* The waiter's wake, on its request's loop: its lookup runs again with
 * what the fetch ended as. */
static void
waiterWake(CorEvTask* task)
{
    CacheRun* run = corContainerOf(task, CacheRun, task);

    if (run->outcome != FLIGHT_HEAD) {
        corEvTimerStop(run->r->loop, &run->patience);
    }
    corCacheResume(run->wait, cacheLookupAgain(run));
}

/* The waiter waited its store's lock_timeout: it leaves the fetch and runs
 * its own handler, unstored (a fetch that hangs holds nobody else longer,
 * as nginx's proxy_cache_lock_timeout). On its loop; a wake already
 * posted to it (the fetch ended first) comes instead. */
static void
waiterGivesUp(CorEvTimer* timer)
{
    CacheRun* run = corContainerOf(timer, CacheRun, patience);
    CacheShard* shard = cacheShardOf(run->store, run->hash);
    bool waiting;

    pthread_mutex_lock(&shard->lock);
    waiting = corListLinked(&run->waiting);
    corListRemove(&run->waiting);
    pthread_mutex_unlock(&shard->lock);
    if (waiting) {
        run->outcome = FLIGHT_PASS;
        corCacheResume(run->wait, cacheLookupAgain(run));
    }
}

/* The fetch of run's key in its shard (locked), or NULL. */
static CacheFlight*
flightFind(const CacheShard* shard, const CacheRun* run)
{
    CacheFlight* f;

    for (f = shard->flights; f != NULL; f = f->next) {
        if (f->hash == run->hash && f->keyLen == run->keyLen
            && memcmp(f->key, run->key, run->keyLen) == 0) {
            break;
        }
    }
    return f;
}

bool
cacheFlightBusy(const CacheRun* run)
{
    CacheShard* shard = cacheShardOf(run->store, run->hash);
    bool busy;

    pthread_mutex_lock(&shard->lock);
    busy = flightFind(shard, run) != NULL;
    pthread_mutex_unlock(&shard->lock);
    return busy;
}

int
cacheFlightJoin(CorRequest* r, CacheRun* run, CacheGrowing** growingP)
{
    CacheShard* shard = cacheShardOf(run->store, run->hash);
    bool again = run->kind == RUN_WAIT; /* woken by the head, joins again */
    CacheFlight* f;

    pthread_mutex_lock(&shard->lock);
    f = flightFind(shard, run);
    if (f != NULL && f->growing != NULL
        && cacheStreamable(run, f->growing->head)) {
        cacheGrowingRef(f->growing);
        *growingP = f->growing;
        pthread_mutex_unlock(&shard->lock);
        corEvTimerStop(r->loop, &run->patience);
        if (!again) {
            atomic_fetch_add(&run->store->counters.collapsed, 1);
        }
        return JOIN_STREAM;
    }
    if (f != NULL) {
        run->kind = RUN_WAIT;
        run->r = r;
        corListAppend(&f->waiters, &run->waiting);
        pthread_mutex_unlock(&shard->lock);
        if (!again) {
            corEvTimerStart(r->loop, &run->patience, run->store->lockTimeoutMs,
                            waiterGivesUp);
            atomic_fetch_add(&run->store->counters.collapsed, 1);
        }
        return JOIN_WAIT;
    }
    f = malloc(sizeof(*f) + run->keyLen);
    if (f != NULL) {
        f->hash = run->hash;
        f->keyLen = run->keyLen;
        f->growing = NULL;
        memcpy(f->key, run->key, run->keyLen);
        corListInit(&f->waiters);
        f->next = shard->flights;
        shard->flights = f;
    }
    /* Without memory for one, it fetches alone: nobody waits for it. */
    run->flight = f;
    pthread_mutex_unlock(&shard->lock);
    return JOIN_LEAD;
}

/* Each waiter of list is woken on its loop with outcome. */
static void
waitersWake(CorList* list, int outcome)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, list)
    {
        CacheRun* waiter = corContainerOf(node, CacheRun, waiting);

        corListRemove(node);
        waiter->outcome = outcome;
        corEvLoopPost(waiter->r->loop, &waiter->task, waiterWake);
    }
}

void
cacheFlightStream(CacheRun* run, CacheGrowing* g)
{
    CacheFlight* f = run->flight;
    CacheShard* shard;
    CorList waiters;

    if (f == NULL) {
        return;
    }
    shard = cacheShardOf(run->store, f->hash);
    corListInit(&waiters);
    cacheGrowingRef(g);
    pthread_mutex_lock(&shard->lock);
    f->growing = g;
    corListMove(&waiters, &f->waiters);
    pthread_mutex_unlock(&shard->lock);
    waitersWake(&waiters, FLIGHT_HEAD);
}

CacheFlight*
cacheFlightTake(CacheRun* run)
{
    CacheFlight* f = run->flight;

    run->flight = NULL;
    return f;
}

void
cacheFlightEnd(CacheRun* run, int outcome)
{
    cacheFlightFinish(run->store, cacheFlightTake(run), outcome);
}

void
cacheFlightFinish(CacheStore* s, CacheFlight* f, int outcome)
{
    CacheShard* shard;
    CacheFlight** at;
    CorList waiters;

    if (f == NULL) {
        return;
    }
    shard = cacheShardOf(s, f->hash);
    corListInit(&waiters);
    pthread_mutex_lock(&shard->lock);
    for (at = &shard->flights; *at != f; at = &(*at)->next) {
    }
    *at = f->next;
    corListMove(&waiters, &f->waiters);
    pthread_mutex_unlock(&shard->lock);
    cacheGrowingRelease(f->growing);
    free(f);
    waitersWake(&waiters, outcome);
}
