/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres module's inside: a configured database, a connection
 * (libpq's, non-blocking, in pipeline mode, with the statements it
 * prepared) and a pool of them per thread (a loop's coroutines share
 * theirs; a worker thread keeps its own).
 */
#ifndef COR_PG_INT_H
#define COR_PG_INT_H

#include "cor.h"
#include "corPostgres.h"

#include <libpq-fe.h>
#include <pthread.h>

/* The statements a connection prepares and keeps; past them a query is
 * sent unnamed (parsed each time), so that SQL built per request cannot
 * grow a connection without bound. */
#define COR_PG_STMT_MAX 64

/* One entry of databases: the module's, from init to exit. */
struct CorPgDatabase {
    const char* name; /* the configuration tree's */
    const char* url;
    unsigned pool;  /* connections per loop */
    unsigned index; /* in the module's list: a thread's pools' */
    uint64_t connectTimeoutMs;
    uint64_t queryTimeoutMs;
    /* Whether the server is reachable is the database's, not a loop's:
     * a connect that fails holds every loop's next ones back, one that
     * succeeds lets them all try again (corPgPool.c). */
    pthread_mutex_t lock;
    unsigned backoffMs;
    uint64_t retryAtMs; /* no connect before then */
    char lastWhy[256];  /* the last connect's failure */
};

typedef struct CorPgPool CorPgPool;

/* A statement the connection prepared, named "corN" for its index. */
typedef struct {
    char* sql;
    uint64_t hash;
} CorPgStmt;

/* One connection: its pool's (on its idle list between queries), used by
 * one query at a time, on its pool's thread only. */
typedef struct {
    CorList link; /* the pool's idle connections */
    CorPgPool* pool;
    PGconn* pg;
    CorCoWatch watch; /* idle on a loop: the server's close */
    bool watched;
    unsigned stmtCount;
    CorPgStmt stmts[COR_PG_STMT_MAX];
} CorPgConn;

/*
 * A thread's connections to one database: at most db->pool open (on a
 * worker, one query at a time, so one). A query that finds none idle and
 * none more to open waits in line (a coroutine parks). The thread's.
 */
struct CorPgPool {
    CorPgDatabase* db;
    CorList idle;
    CorList waiters;
    unsigned open; /* connected or connecting */
};

/* ---- corPgConn.c ---- */

/* Connect to db within deadlineMs (corEvClockMs time): a connection in
 * pipeline mode, or NULL with *failP (a result to hand the caller).
 * May yield. */
CorPgConn* corPgConnOpen(CorPgDatabase* db, uint64_t deadlineMs,
                         CorPgResult** failP);
/* Run a query on c before deadlineMs. *healthyP says whether c may serve
 * the next one (false: lost, timed out, cancelled, left in a
 * transaction). May yield. */
CorPgResult* corPgConnQuery(CorPgConn* c, const char* sql, unsigned nParams,
                            const char* const* params, uint64_t deadlineMs,
                            bool* healthyP);
/* Close c and free it (its watch already ended). */
void corPgConnClose(CorPgConn* c);

/* ---- corPgPool.c ---- */

void corPgPoolInit(CorPgPool* pool, CorPgDatabase* db);
/* A connection of pool for one query, by deadlineMs; or NULL with *failP.
 * May yield. */
CorPgConn* corPgPoolTake(CorPgPool* pool, uint64_t deadlineMs,
                         CorPgResult** failP);
/* Give c back after its query: to the next in line, to the idle list,
 * or closed when it is not healthy. */
void corPgPoolGive(CorPgPool* pool, CorPgConn* c, bool healthy);
/* Close every idle connection (none is in use: the thread is done). */
void corPgPoolClose(CorPgPool* pool);

#endif /* COR_PG_INT_H */
