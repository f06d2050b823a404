/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/postgres: PostgreSQL databases for the other modules, found by
 * name (corPostgres.h).
 *
 *     modules:
 *       - load: postgres
 *         databases:
 *           - { name: main, url: "postgresql://app@127.0.0.1:5432/app",
 *               pool: 16, connect_timeout: 5s, query_timeout: 30s }
 *       - { load: hello, database: main }
 *
 * The url is libpq's (a postgresql:// URL or key=value words), checked at
 * load. Each loop has a pool of its own of `pool` connections per
 * database, opened as queries need them; a worker thread keeps one. The
 * pools live on their threads: a loop's closes at its loop's exit, a
 * worker's at the module's (every worker has stopped by then).
 */
#include "corPgInt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The databases; the core's (corModuleRecordsRead), from init to exit. */
static CorPgDatabase* databases;
static unsigned databaseCount;

/* A thread's pools, one a database. A worker's are on the list that
 * the module's exit closes. */
typedef struct {
    CorList link; /* workers' */
    CorPgPool pools[];
} PoolSet;

static __thread PoolSet* threadPools;
static CorList workerPools;
static pthread_mutex_t workerPoolsLock = PTHREAD_MUTEX_INITIALIZER;

static PoolSet*
poolSetNew(void)
{
    PoolSet* set = calloc(1,
                          sizeof(PoolSet) + databaseCount * sizeof(CorPgPool));

    if (set == NULL) {
        return NULL;
    }
    corListInit(&set->link);
    for (unsigned i = 0; i < databaseCount; i++) {
        corPgPoolInit(&set->pools[i], &databases[i]);
    }
    return set;
}

static void
poolSetFree(PoolSet* set)
{
    for (unsigned i = 0; i < databaseCount; i++) {
        corPgPoolClose(&set->pools[i]);
    }
    free(set);
}

/* The calling thread's pool of db, made at its first query. */
static CorPgPool*
poolMine(const CorPgDatabase* db)
{
    if (threadPools == NULL) {
        threadPools = poolSetNew();
        if (threadPools == NULL) {
            return NULL;
        }
        if (corEvLoopCurrent() == NULL) {
            pthread_mutex_lock(&workerPoolsLock);
            corListAppend(&workerPools, &threadPools->link);
            pthread_mutex_unlock(&workerPoolsLock);
        }
    }
    return &threadPools->pools[db->index];
}

static CorPgResult*
pgQuery(CorPgDatabase* db, const char* sql, unsigned nParams,
        const char* const* params)
{
    CorPgPool* pool = poolMine(db);
    uint64_t deadlineMs = corEvClockMs() + db->queryTimeoutMs;
    CorPgResult* res = NULL;
    CorPgConn* c;
    bool healthy;

    if (pool == NULL) {
        return corPgResultFail(COR_PG_NOMEM, "", "database %s: out of memory",
                               db->name);
    }
    c = corPgPoolTake(pool, deadlineMs, &res);
    if (c == NULL) {
        return res;
    }
    res = corPgConnQuery(c, sql, nParams, params, deadlineMs, &healthy);
    corPgPoolGive(pool, c, healthy);
    return res;
}

static CorPgDatabase*
pgFind(const char* name)
{
    for (unsigned i = 0; i < databaseCount; i++) {
        if (strcmp(databases[i].name, name) == 0) {
            return &databases[i];
        }
    }
    return NULL;
}

static const CorPgProvider provider = { .find = pgFind, .query = pgQuery };

/* Whether libpq takes url; its reason into m's errors when not. */
static bool
urlValid(CorModule* m, const CorConf* at, const char* where, const char* url)
{
    char* why = NULL;
    PQconninfoOption* opts = PQconninfoParse(url, &why);

    if (opts == NULL) {
        /* libpq's message ends with a newline. */
        corModuleError(m, at, "%s: url: %.*s", where,
                       why != NULL ? (int)strcspn(why, "\n") : 13,
                       why != NULL ? why : "out of memory");
        PQfreemem(why);
        return false;
    }
    PQconninfoFree(opts);
    return true;
}

static int
databaseRead(CorModule* m, const CorConf* entry, void* record, unsigned index)
{
    CorPgDatabase* db = record;
    static const char* const keys[] = { "name",          "url",
                                        "pool",          "connect_timeout",
                                        "query_timeout", NULL };
    CorConfErrors* e = corModuleErrors(m);
    const char* name = corConfString(entry, "name", NULL, e);
    const char* url = corConfString(entry, "url", NULL, e);
    char where[32];
    int rc = 0;

    snprintf(where, sizeof(where), "databases[%u]", index);
    db->index = index;
    pthread_mutex_init(&db->lock, NULL);
    if (name == NULL || name[0] == '\0') {
        corModuleError(m, entry, "%s: a name (what modules name) is needed",
                       where);
        rc = -1;
    } else if ((db->name = strdup(name)) == NULL) {
        rc = -1;
    }
    /* The entries before this one are read (the array is in order). */
    for (unsigned j = 0; db->name != NULL && j < index; j++) {
        const CorPgDatabase* before = db - index + j;

        if (before->name != NULL && strcmp(before->name, db->name) == 0) {
            corModuleError(m, corConfGet(entry, "name"),
                           "%s: '%s' is taken by databases[%u]", where,
                           db->name, j);
            rc = -1;
        }
    }
    if (url == NULL) {
        corModuleError(m, entry, "%s: a url (postgresql://...) is needed",
                       where);
        rc = -1;
    } else if (!urlValid(m, corConfGet(entry, "url"), where, url)
               || (db->url = strdup(url)) == NULL) {
        rc = -1;
    }
    db->pool = (unsigned)corConfInt(entry, "pool", 8, 1, 1000, e);
    db->connectTimeoutMs = corConfDurationMs(entry, "connect_timeout", 5000, 1,
                                             3600000, e);
    db->queryTimeoutMs = corConfDurationMs(entry, "query_timeout", 30000, 1,
                                           3600000, e);
    corConfUnknownKeys(entry, where, keys, e);
    return rc;
}

static void
databaseFree(void* record)
{
    CorPgDatabase* db = record;

    free((char*)db->name);
    free((char*)db->url);
    pthread_mutex_destroy(&db->lock);
}

static int
pgInit(CorModule* m, const CorConf* conf)
{
    databases = corModuleRecordsRead(m, conf, "databases",
                                     "{ name, url, pool }",
                                     sizeof(CorPgDatabase), databaseRead,
                                     databaseFree, &databaseCount);
    if (databases == NULL) {
        return -1;
    }
    corListInit(&workerPools);
    corPgProvide(&provider);
    return 0;
}

/* A loop's pools close on its thread, where their idle watches are. */
static void
pgLoopExit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    (void)loop;
    (void)index;
    if (threadPools != NULL) {
        poolSetFree(threadPools);
        threadPools = NULL;
    }
}

static void
pgExit(CorModule* m)
{
    CorList* first;

    (void)m;
    corPgProvide(NULL);
    pthread_mutex_lock(&workerPoolsLock);
    while ((first = corListFirst(&workerPools)) != NULL) {
        PoolSet* set = corContainerOf(first, PoolSet, link);

        corListRemove(&set->link);
        poolSetFree(set);
    }
    pthread_mutex_unlock(&workerPoolsLock);
}

COR_MODULE(postgres, .init = pgInit, .loopExit = pgLoopExit, .exit = pgExit);
