/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A thread's pool of connections to one database. On a loop, its
 * coroutines share up to `pool` connections: a query takes an idle one,
 * or opens one, or waits in line (parked) for the next given back, which
 * is handed to the first in line rather than left for whoever asks next.
 * Idle, a connection is watched on the loop (corCoLoopWatch, which costs
 * the next wait nothing): a server that restarts or stops says so to its
 * idle connections, which are closed then, rather than found dead by the
 * next query. A worker thread runs one query at a time and keeps one
 * connection, looked at (poll, no wait) before each use.
 *
 * A connect that fails holds the next ones back, 100 ms doubling to 5 s,
 * on every loop (the database's state): meanwhile a query fails at once
 * with the reason, so that a database that is down costs a request
 * nothing but its error, and the first connect after the back-off that
 * succeeds lets every pool connect again.
 */
#include "corPgInt.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000

/* A query in line for a connection: on its coroutine's stack. */
typedef struct {
    CorList link; /* the pool's line */
    CorCoPark handle;
    CorPgConn* given; /* handed over by corPgPoolGive; NULL: try again */
} Waiter;

void
corPgPoolInit(CorPgPool* pool, CorPgDatabase* db)
{
    memset(pool, 0, sizeof(*pool));
    pool->db = db;
    corListInit(&pool->idle);
    corListInit(&pool->waiters);
}

/* Wake the first in line with c (NULL: a place to open one). Returns
 * whether one was in line. */
static bool
lineWakeNext(CorPgPool* pool, CorPgConn* c)
{
    CorList* first = corListFirst(&pool->waiters);
    Waiter* w;

    if (first == NULL) {
        return false;
    }
    w = corContainerOf(first, Waiter, link);
    corListRemove(&w->link);
    w->given = c;
    corCoLoopWake(w->handle);
    return true;
}

static void
connDrop(CorPgPool* pool, CorPgConn* c)
{
    pool->open--;
    corPgConnClose(c);
    lineWakeNext(pool, NULL);
}

/* An idle connection's server spoke: what it says unasked is its end (a
 * shutdown's FATAL 57P01, a terminated backend), or the close itself.
 * The connection is closed on the spot, not read: the error would
 * otherwise be the next query's answer. */
static void
idleHeard(CorCoWatch* watch, unsigned events)
{
    CorPgConn* c = corContainerOf(watch, CorPgConn, watch);

    (void)events;
    c->watched = false;
    corListRemove(&c->link);
    connDrop(c->pool, c);
}

/* Whether an idle connection that nothing watched is still up: its
 * server said nothing since (poll() at once), as idleHeard judges. */
static bool
idleUp(CorPgConn* c)
{
    struct pollfd pfd = { .fd = PQsocket(c->pg), .events = POLLIN };

    return poll(&pfd, 1, 0) == 0;
}

/* Whether connects to db are held back now: the reason into *failP. */
static bool
backingOff(CorPgDatabase* db, CorPgResult** failP)
{
    uint64_t now = corEvClockMs();
    bool held;

    pthread_mutex_lock(&db->lock);
    held = now < db->retryAtMs;
    if (held) {
        *failP = corPgResultFail(COR_PG_CONNECTION, "08001",
                                 "%s (again in %llu ms)", db->lastWhy,
                                 (unsigned long long)(db->retryAtMs - now));
    }
    pthread_mutex_unlock(&db->lock);
    return held;
}

/* A connect failed (why) or succeeded (NULL): the back-off follows. */
static void
connectSeen(CorPgDatabase* db, const char* why)
{
    pthread_mutex_lock(&db->lock);
    if (why == NULL) {
        if (db->backoffMs != 0) {
            corLog(COR_LOG_INFO, "database %s: connected again", db->name);
        }
        db->backoffMs = 0;
        db->retryAtMs = 0;
    } else {
        snprintf(db->lastWhy, sizeof(db->lastWhy), "%s", why);
        if (db->backoffMs == 0) {
            corLog(COR_LOG_WARN,
                   "%s; connecting again in %d ms, then less often", why,
                   BACKOFF_FIRST_MS);
        }
        db->backoffMs = db->backoffMs == 0 ? BACKOFF_FIRST_MS
                        : db->backoffMs * 2 > BACKOFF_MAX_MS
                            ? BACKOFF_MAX_MS
                            : db->backoffMs * 2;
        db->retryAtMs = corEvClockMs() + db->backoffMs;
    }
    pthread_mutex_unlock(&db->lock);
}

static CorPgConn*
poolConnect(CorPgPool* pool, uint64_t deadlineMs, CorPgResult** failP)
{
    CorPgDatabase* db = pool->db;
    uint64_t by = corEvClockMs() + db->connectTimeoutMs;
    CorPgConn* c;

    if (backingOff(db, failP)) {
        return NULL;
    }
    pool->open++;
    c = corPgConnOpen(db, by < deadlineMs ? by : deadlineMs, failP);
    if (c == NULL) {
        pool->open--;
        if (corPgStatus(*failP) == COR_PG_CONNECTION
            || corPgStatus(*failP) == COR_PG_TIMEOUT) {
            connectSeen(db, corPgError(*failP));
        }
        lineWakeNext(pool, NULL);
        return NULL;
    }
    connectSeen(db, NULL);
    c->pool = pool;
    return c;
}

/* Wait in line until deadlineMs. Returns 0 with *cP (NULL: a connection
 * may be opened now), or -errno. May yield. */
static int
lineWait(CorPgPool* pool, uint64_t deadlineMs, CorPgConn** cP)
{
    Waiter w = { .given = NULL };
    int rc;

    *cP = NULL;
    if (!corRestMayPark()) {
        return -EAGAIN; /* a thread that polls would hold the loop */
    }
    corListAppend(&pool->waiters, &w.link);
    rc = corCoLoopParkUntil(&w.handle, deadlineMs);
    corListRemove(&w.link);
    if (w.given != NULL && rc == -ECANCELED) {
        corPgPoolGive(pool, w.given, true);
        w.given = NULL;
    }
    *cP = w.given;
    return w.given != NULL ? 0 : rc;
}

CorPgConn*
corPgPoolTake(CorPgPool* pool, uint64_t deadlineMs, CorPgResult** failP)
{
    const CorPgDatabase* db = pool->db;
    CorList* first;
    CorPgConn* c;
    int rc;

    for (;;) {
        while ((first = corListFirst(&pool->idle)) != NULL) {
            c = corContainerOf(first, CorPgConn, link);
            corListRemove(&c->link);
            if (c->watched) {
                corCoLoopUnwatch(&c->watch);
                c->watched = false;
                return c;
            }
            if (idleUp(c)) {
                return c;
            }
            connDrop(pool, c);
        }
        if (pool->open < db->pool) {
            return poolConnect(pool, deadlineMs, failP);
        }
        rc = lineWait(pool, deadlineMs, &c);
        if (c != NULL) {
            return c;
        }
        if (rc == -ETIMEDOUT || rc == -EAGAIN || rc == -ECANCELED) {
            *failP = corPgResultFail(
                rc == -ECANCELED ? COR_PG_CANCELLED : COR_PG_TIMEOUT, "57014",
                "database %s: all %u connections of this loop are busy%s",
                db->name, db->pool,
                rc == -ETIMEDOUT   ? " (query_timeout passed in line)"
                : rc == -ECANCELED ? " (cancelled in line)"
                                   : "");
            return NULL;
        }
    }
}

void
corPgPoolGive(CorPgPool* pool, CorPgConn* c, bool healthy)
{
    if (!healthy) {
        connDrop(pool, c);
        return;
    }
    if (lineWakeNext(pool, c)) {
        return;
    }
    if (corRestMayPark()
        && corCoLoopWatch(&c->watch, PQsocket(c->pg), POLLIN, idleHeard) == 0) {
        c->watched = true;
    }
    /* The last given back is the next taken: the warmest. */
    corListInsert(&pool->idle, &c->link);
}

void
corPgPoolClose(CorPgPool* pool)
{
    CorList* first;

    while ((first = corListFirst(&pool->idle)) != NULL) {
        CorPgConn* c = corContainerOf(first, CorPgConn, link);

        corListRemove(&c->link);
        if (c->watched) {
            corCoLoopUnwatch(&c->watch);
        }
        pool->open--;
        corPgConnClose(c);
    }
}
