/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The keep-alive pool of connections out. Each loop has one of its own,
 * touched only by its thread, so it takes no lock; the workers and every
 * other thread share one under a mutex, which is held only to move a
 * connection in or out and never across a wait. A connection goes back
 * to the pool of the thread that opened it: a loop's connection is waited
 * on through that loop, and a worker's is handed from worker to worker
 * under the lock.
 *
 * A connection in a pool carries nothing: whatever it has to read when it
 * is taken (the peer's end, an answer nobody asked for, the rest of a
 * body longer than its length, a TLS alert) would be read as the next
 * exchange's, by another client. So a put refuses one with bytes already
 * decoded (TLS), and an idle connection is watched: a loop's by its loop
 * (corCoLoopWatch, as nginx's upstream keepalive does), which closes it at
 * the first event, so that a take needs no look and no system call (the
 * watch's arming becomes the wait for the answer: a request costs the
 * calls it did before); the shared pool's with a non-blocking peek at
 * every take. The caller puts a connection back only at a message's end
 * (the HTTP client: the answer read whole, nothing past it).
 *
 * Idle connections are listed twice: per peer (newest last: the next one
 * handed out is the one most recently known to work) and per pool by age
 * (oldest first: what the idle timeout closes, in order). A loop's pool
 * closes what outlived client.idle_timeout from a timer of its loop; the
 * shared pool from a task on the worker pool, and on every take and put.
 *
 * Peers are few (the upstreams a configuration names), so a peer is
 * found by a walk of a short list; a peer with no idle connection left is
 * freed.
 *
 * The pool is under the code that opens connections (corConn.c), which
 * takes from it and puts back: so the settings every connection out is
 * made and kept by (client.*, set by corConnSetup) are kept here, and a
 * connection's end (corConnFree), which the pool comes to for the idle
 * ones it closes and the opener for the others, is here too.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

typedef struct CorConnPeer {
    struct CorConnPeer* next;
    CorList idle; /* CorConn.peerLink, by age: the newest
                     (last) is taken first */
    unsigned count;
    char key[];
} CorConnPeer;

struct CorConnPool {
    CorConnPeer* peers;
    CorList idle;        /* CorConn.ageLink: every idle one, by age */
    CorEvLoop* loop;     /* NULL: the shared pool */
    CorEvTimer sweep;    /* the loop's: the next idle timeout */
    CorEvTask sweepTask; /* the shared pool's, on the workers */
    bool sweepPosted;
};

/* The defaults, for a program that sets up none (corConnSetup(NULL)). */
static const CorConnSettings settingsDefault = {
    .connectTimeoutMs = 5000,
    .keepalivePerPeer = COR_CONN_KEEPALIVE_AUTO,
    .idleTimeoutMs = 60000,
    .keepFdMax = 1024 * 3 / 4,
};
static CorConnSettings settings = settingsDefault;
static __thread CorConnPool* loopPool;
static __thread bool loopPoolClosed;
static CorConnPool sharedPool;
static pthread_mutex_t sharedLock = PTHREAD_MUTEX_INITIALIZER;

/* ---- Settings and a connection's end ------------------------------------- */

void
corConnSettingsSet(const CorConnSettings* s)
{
    struct rlimit files;

    settings = s != NULL ? *s : settingsDefault;
    settings.keepFdMax = settingsDefault.keepFdMax;
    /* Read here, after the master raised the soft limit to the hard one. */
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
        && files.rlim_cur < INT_MAX) {
        settings.keepFdMax = (int)(files.rlim_cur / 4 * 3);
    }
}

const CorConnSettings*
corConnSettings(void)
{
    return &settings;
}

void
corConnFree(CorConn* c)
{
    if (c->transport.ops != NULL) {
        c->transport.ops->close(&c->transport);
    }
    free(c);
}

/* ---- Lists --------------------------------------------------------------- */

static CorConnPeer*
peerFind(CorConnPool* pool, const char* key, bool create)
{
    CorConnPeer* peer;
    size_t len;

    for (peer = pool->peers; peer != NULL; peer = peer->next) {
        if (strcmp(peer->key, key) == 0) {
            return peer;
        }
    }
    if (!create) {
        return NULL;
    }
    len = strlen(key) + 1;
    peer = calloc(1, sizeof(*peer) + len);
    if (peer != NULL) {
        memcpy(peer->key, key, len);
        peer->next = pool->peers;
        pool->peers = peer;
    }
    return peer;
}

static void
peerFree(CorConnPool* pool, CorConnPeer* peer)
{
    CorConnPeer** at = &pool->peers;

    while (*at != peer) {
        at = &(*at)->next;
    }
    *at = peer->next;
    free(peer);
}

/* Take c out of both lists; its peer goes when it held only c. */
static void
idleUnlink(CorConnPool* pool, CorConn* c)
{
    CorConnPeer* peer = c->idlePeer;

    corListRemove(&c->peerLink);
    corListRemove(&c->ageLink);
    c->idlePeer = NULL;
    if (--peer->count == 0) {
        peerFree(pool, peer);
    }
}

static void
idleLink(CorConnPool* pool, CorConnPeer* peer, CorConn* c)
{
    c->idlePeer = peer;
    corListAppend(&peer->idle, &c->peerLink);
    peer->count++;
    corListAppend(&pool->idle, &c->ageLink);
}

/* The pool's oldest idle connection, or NULL. */
static CorConn*
idleOldest(const CorConnPool* pool)
{
    CorList* node = corListFirst(&pool->idle);

    return node != NULL ? corContainerOf(node, CorConn, ageLink) : NULL;
}

/* Unlink c into dead (through peerLink: the newest first), for the caller
 * to close outside the lock. */
static void
deadAdd(CorConnPool* pool, CorConn* c, CorList* dead)
{
    idleUnlink(pool, c);
    corListInsert(dead, &c->peerLink);
}

/* Unlink what outlived the idle timeout into dead. */
static void
expiredTake(CorConnPool* pool, uint64_t now, CorList* dead)
{
    uint64_t idleMs = corConnSettings()->idleTimeoutMs;
    CorConn* c;

    while ((c = idleOldest(pool)) != NULL && c->idleSince + idleMs <= now) {
        deadAdd(pool, c, dead);
    }
}

static void
deadFree(CorList* dead)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, dead)
    {
        corConnFree(corContainerOf(node, CorConn, peerLink));
    }
}

/*
 * Whether a connection idle in the shared pool is still fit: nothing to
 * read, no end, no error. A peer that closed it (its keep-alive timeout)
 * left an end to read; stray bytes (an answer nobody asked for, a TLS
 * alert) make it unfit as surely.
 */
static bool
idleAlive(CorConn* c)
{
    char byte;
    ssize_t n;

    n = recv(c->transport.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* ---- Sweeping ------------------------------------------------------------ */

static void loopSweep(CorEvTimer* timer);

/* Arm the loop's timer for the oldest idle connection's timeout. */
static void
loopSweepArm(CorConnPool* pool)
{
    CorConn* oldest = idleOldest(pool);
    uint64_t idleMs = corConnSettings()->idleTimeoutMs;
    uint64_t now = corEvClockMs();
    uint64_t due;

    if (oldest == NULL) {
        corEvTimerStop(pool->loop, &pool->sweep);
        return;
    }
    due = oldest->idleSince + idleMs;
    corEvTimerStart(pool->loop, &pool->sweep, due > now ? due - now + 1 : 1,
                    loopSweep);
}

static void
loopSweep(CorEvTimer* timer)
{
    CorConnPool* pool = corContainerOf(timer, CorConnPool, sweep);
    CorList dead = { 0 };

    expiredTake(pool, corEvClockMs(), &dead);
    deadFree(&dead);
    loopSweepArm(pool);
}

static void sharedSweep(CorEvTask* task);

/* Under the lock: a sweep of the shared pool when its oldest connection
 * times out, on a worker; none without a worker pool (a program of its
 * own), where takes and puts sweep. */
static void
sharedSweepPost(void)
{
    CorConn* oldest = idleOldest(&sharedPool);
    uint64_t idleMs = corConnSettings()->idleTimeoutMs;
    uint64_t now = corEvClockMs();
    uint64_t due;

    if (sharedPool.sweepPosted || oldest == NULL
        || corRuntime.workers == NULL) {
        return;
    }
    due = oldest->idleSince + idleMs;
    if (corEvPoolPostAfter(corRuntime.workers, &sharedPool.sweepTask,
                           sharedSweep,
                           due > now ? (unsigned)(due - now + 1) : 1)
        == 0) {
        sharedPool.sweepPosted = true;
    }
}

static void
sharedSweep(CorEvTask* task)
{
    CorList dead = { 0 };

    (void)task;
    pthread_mutex_lock(&sharedLock);
    sharedPool.sweepPosted = false;
    expiredTake(&sharedPool, corEvClockMs(), &dead);
    sharedSweepPost();
    pthread_mutex_unlock(&sharedLock);
    deadFree(&dead);
}

/* ---- The pool ------------------------------------------------------------ */

CorConnPool*
corConnPoolCurrent(void)
{
    CorEvLoop* loop = corEvLoopCurrent();

    if (loop == NULL) {
        return &sharedPool;
    }
    if (loopPool == NULL && !loopPoolClosed) {
        loopPool = calloc(1, sizeof(*loopPool));
        if (loopPool != NULL) {
            loopPool->loop = loop;
        }
    }
    return loopPool;
}

/* The newest idle connection of key in the shared pool that is still
 * alive; the dead ones met on the way are unlinked into dead. */
static CorConn*
takeAlive(CorConnPool* pool, const char* key, CorList* dead)
{
    CorConnPeer* peer = peerFind(pool, key, false);

    while (peer != NULL) {
        CorConn* c = corContainerOf(peer->idle.prev, CorConn, peerLink);
        bool last = peer->count == 1;

        idleUnlink(pool, c);
        if (idleAlive(c)) {
            return c;
        }
        corMetricsClient(COR_CLIENT_STALE);
        corListInsert(dead, &c->peerLink);
        if (last) {
            break;
        }
    }
    return NULL;
}

/* The newest idle connection of key in a loop's pool: its watch would
 * have closed it if it had anything to read. No system call: the watch's
 * arming is left to the wait for the answer. */
static CorConn*
takeWatched(CorConnPool* pool, const char* key)
{
    CorConnPeer* peer = peerFind(pool, key, false);
    CorConn* c;

    if (peer == NULL) {
        return NULL;
    }
    c = corContainerOf(peer->idle.prev, CorConn, peerLink);
    idleUnlink(pool, c);
    corCoLoopUnwatch(&c->watch);
    return c;
}

CorConn*
corConnPoolTake(CorConnPool* pool, const char* key)
{
    uint64_t now = corEvClockMs();
    CorList dead = { 0 };
    CorConn* c;

    if (pool->loop != NULL) {
        expiredTake(pool, now, &dead);
        deadFree(&dead);
        return takeWatched(pool, key);
    }
    pthread_mutex_lock(&sharedLock);
    expiredTake(pool, now, &dead);
    c = takeAlive(pool, key, &dead);
    pthread_mutex_unlock(&sharedLock);
    deadFree(&dead);
    return c;
}

/* A loop's idle connection had something to read (the peer's end, bytes
 * nobody asked for): closed at once, on its loop. */
static void
idleEvent(CorCoWatch* watch, unsigned events)
{
    CorConn* c = corContainerOf(watch, CorConn, watch);

    (void)events;
    idleUnlink(c->pool, c);
    corMetricsClient(COR_CLIENT_STALE);
    corConnFree(c);
}

/* Put c in, newest; past keepalive_per_peer the peer's oldest go (into
 * dead), together with what outlived the idle timeout. auto: every one
 * up to its bound, none on an fd past the settings' keepFdMax. */
static bool
put(CorConnPool* pool, CorConn* c, CorList* dead)
{
    const CorConnSettings* set = corConnSettings();
    unsigned max = set->keepalivePerPeer;
    CorConnPeer* peer;

    if (max == COR_CONN_KEEPALIVE_AUTO) {
        if (c->transport.fd >= set->keepFdMax) {
            return false;
        }
        max = COR_CONN_KEEPALIVE_AUTO_MAX;
    }
    peer = peerFind(pool, c->key, true);
    if (peer == NULL) {
        return false;
    }
    if (pool->loop != NULL
        && corCoLoopWatch(&c->watch, c->transport.fd, POLLIN, idleEvent) < 0) {
        if (peer->count == 0) {
            peerFree(pool, peer);
        }
        return false;
    }
    c->idleSince = corEvClockMs();
    idleLink(pool, peer, c);
    /* count > max >= 1: the peer keeps c, so it is never freed here. */
    while (peer->count > max) {
        deadAdd(pool, corContainerOf(peer->idle.next, CorConn, peerLink), dead);
    }
    expiredTake(pool, c->idleSince, dead);
    return true;
}

bool
corConnPoolPut(CorConn* c)
{
    CorConnPool* pool = c->pool;
    CorList dead = { 0 };
    bool kept;

    /* Bytes a TLS transport decoded past the answer: not at a message's
     * end. */
    if (corConnSettings()->keepalivePerPeer == 0
        || corTransportPending(&c->transport)) {
        return false;
    }
    if (pool->loop != NULL) {
        kept = put(pool, c, &dead);
        if (!pool->sweep.active) {
            loopSweepArm(pool);
        }
    } else {
        pthread_mutex_lock(&sharedLock);
        kept = put(pool, c, &dead);
        sharedSweepPost();
        pthread_mutex_unlock(&sharedLock);
    }
    deadFree(&dead);
    return kept;
}

/* Unlink every idle connection into dead. */
static void
allTake(CorConnPool* pool, CorList* dead)
{
    CorConn* c;

    while ((c = idleOldest(pool)) != NULL) {
        deadAdd(pool, c, dead);
    }
}

void
corConnPoolLoopExit(void)
{
    CorConnPool* pool = loopPool;
    CorList dead = { 0 };

    loopPoolClosed = true;
    loopPool = NULL;
    if (pool == NULL) {
        return;
    }
    corEvTimerStop(pool->loop, &pool->sweep);
    allTake(pool, &dead);
    deadFree(&dead);
    free(pool);
}

void
corConnPoolShutdown(void)
{
    CorList dead = { 0 };

    pthread_mutex_lock(&sharedLock);
    allTake(&sharedPool, &dead);
    pthread_mutex_unlock(&sharedLock);
    deadFree(&dead);
}
