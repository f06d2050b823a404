/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One connection to PostgreSQL: libpq in non-blocking mode, its socket
 * waited on through corRestWaitFd (a coroutine yields to its loop, a
 * worker or the blocking mode polls), so that the same code serves both
 * ways and no thread sleeps inside libpq.
 *
 * A connection stays in pipeline mode: a query's first run on it sends
 * the Parse of its statement (named "corN", kept for the connection's
 * life) together with its Bind and Execute and the Sync, one round trip;
 * later runs send only the Bind, Execute and Sync. The answers are read
 * up to the Sync, so that the connection is ready for the next query
 * whatever became of this one (an error aborts the pipeline up to it).
 */
#include "corPgInt.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Wait for events on pg's socket until deadlineMs. Returns 0 with
 * *reventsP, -ETIMEDOUT or -ECANCELED. May yield. */
static int
socketWait(PGconn* pg, short events, uint64_t deadlineMs, short* reventsP)
{
    uint64_t now = corEvClockMs();
    int ms = deadlineMs > now ? (int)(deadlineMs - now) : 0;
    int rc = corRestWaitFd(PQsocket(pg), events, ms, reventsP);

    if (rc > 0) {
        return 0;
    }
    return rc == 0 ? -ETIMEDOUT : -errno;
}

/* libpq's message on one line, without its newline and tabs. */
static const char*
whyOf(PGconn* pg, char* why, size_t cap)
{
    const char* msg = pg != NULL ? PQerrorMessage(pg) : "out of memory";
    size_t n = 0;

    for (; *msg != '\0' && n + 1 < cap; msg++) {
        if (*msg == '\n' || *msg == '\t') {
            if (n > 0 && why[n - 1] != ' ' && msg[1] != '\0') {
                why[n++] = ' ';
            }
            continue;
        }
        why[n++] = *msg;
    }
    why[n] = '\0';
    return n > 0 ? why : "the connection failed";
}

/* A failure in what (connect, query) as the caller reads it: rc from a
 * wait (-ETIMEDOUT, -ECANCELED) or 0 for libpq's own. */
static CorPgResult*
failure(const CorPgDatabase* db, PGconn* pg, int rc, const char* what)
{
    char why[400];

    if (rc == -ETIMEDOUT) {
        return corPgResultFail(COR_PG_TIMEOUT, "57014",
                               "database %s: %s: no answer within %llu ms",
                               db->name, what,
                               (unsigned long long)(strcmp(what, "connect") == 0
                                                        ? db->connectTimeoutMs
                                                        : db->queryTimeoutMs));
    }
    if (rc == -ECANCELED) {
        return corPgResultFail(COR_PG_CANCELLED, "57014",
                               "database %s: %s cancelled (a stop, or the "
                               "client left)",
                               db->name, what);
    }
    return corPgResultFail(COR_PG_CONNECTION,
                           strcmp(what, "connect") == 0 ? "08001" : "08006",
                           "database %s: %s: %s", db->name, what,
                           whyOf(pg, why, sizeof(why)));
}

CorPgConn*
corPgConnOpen(CorPgDatabase* db, uint64_t deadlineMs, CorPgResult** failP)
{
    CorPgConn* c = calloc(1, sizeof(*c));
    PostgresPollingStatusType poll = PGRES_POLLING_WRITING;
    short revents;
    int rc = 0;

    if (c == NULL || (c->pg = PQconnectStart(db->url)) == NULL) {
        free(c);
        *failP = corPgResultFail(COR_PG_NOMEM, "", "database %s: out of memory",
                                 db->name);
        return NULL;
    }
    if (PQstatus(c->pg) == CONNECTION_BAD || PQsetnonblocking(c->pg, 1) != 0) {
        goto failed;
    }
    /* libpq's loop: as if it had said WRITING, until OK or FAILED; the
     * socket may change between steps (another address, SSL refused). */
    while (poll != PGRES_POLLING_OK) {
        if (poll == PGRES_POLLING_FAILED) {
            goto failed;
        }
        rc = socketWait(c->pg, poll == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                        deadlineMs, &revents);
        if (rc != 0) {
            goto failed;
        }
        poll = PQconnectPoll(c->pg);
    }
    if (PQenterPipelineMode(c->pg) != 1) {
        goto failed;
    }
    return c;

failed:
    *failP = failure(db, c->pg, rc, "connect");
    PQfinish(c->pg);
    free(c);
    return NULL;
}

void
corPgConnClose(CorPgConn* c)
{
    PQfinish(c->pg);
    for (unsigned i = 0; i < c->stmtCount; i++) {
        free(c->stmts[i].sql);
    }
    free(c);
}

/* FNV-1a: the statement cache's key, compared before the text. */
static uint64_t
sqlHash(const char* sql)
{
    uint64_t h = 14695981039346656037ULL;

    for (; *sql != '\0'; sql++) {
        h = (h ^ (uint8_t)*sql) * 1099511628211ULL;
    }
    return h;
}

static int
stmtFind(const CorPgConn* c, const char* sql, uint64_t hash)
{
    for (unsigned i = 0; i < c->stmtCount; i++) {
        if (c->stmts[i].hash == hash && strcmp(c->stmts[i].sql, sql) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* Write what libpq holds, reading meanwhile what comes (the server may
 * answer before it took all). Returns 0 or -errno. May yield. */
static int
outputFlush(PGconn* pg, uint64_t deadlineMs)
{
    short revents;
    int rc;

    while ((rc = PQflush(pg)) == 1) {
        int w = socketWait(pg, POLLIN | POLLOUT, deadlineMs, &revents);

        if (w != 0) {
            return w;
        }
        if ((revents & POLLIN) != 0 && !PQconsumeInput(pg)) {
            return -EIO;
        }
    }
    return rc == 0 ? 0 : -EIO;
}

/* The query's rows, copied out of libpq's result. */
static CorPgResult*
rowsCopy(const CorPgDatabase* db, const PGresult* r)
{
    unsigned rows = (unsigned)PQntuples(r);
    unsigned cols = (unsigned)PQnfields(r);
    size_t bytes = 0;
    CorPgResult* res;

    for (unsigned col = 0; col < cols; col++) {
        bytes += strlen(PQfname(r, (int)col)) + 1;
    }
    for (unsigned row = 0; row < rows; row++) {
        for (unsigned col = 0; col < cols; col++) {
            bytes += (size_t)PQgetlength(r, (int)row, (int)col) + 1;
        }
    }
    res = corPgResultNew(rows, cols, bytes);
    if (res == NULL) {
        return corPgResultFail(COR_PG_NOMEM, "", "database %s: out of memory",
                               db->name);
    }
    for (unsigned col = 0; col < cols; col++) {
        corPgResultSetName(res, col, PQfname(r, (int)col));
    }
    for (unsigned row = 0; row < rows; row++) {
        for (unsigned col = 0; col < cols; col++) {
            if (!PQgetisnull(r, (int)row, (int)col)) {
                corPgResultSetValue(res, row, col,
                                    PQgetvalue(r, (int)row, (int)col),
                                    (size_t)PQgetlength(r, (int)row, (int)col));
            }
        }
    }
    corPgResultSetAffected(res, strtoull(PQcmdTuples((PGresult*)r), NULL, 10));
    return res;
}

/* The server's error, as the handler reads it. */
static CorPgResult*
serverError(const CorPgDatabase* db, const PGresult* r, CorPgStatus status)
{
    const char* severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);

    return corPgResultFail(status, state != NULL ? state : "",
                           "database %s: %s %s: %s", db->name,
                           severity != NULL ? severity : "ERROR",
                           state != NULL ? state : "?",
                           primary != NULL ? primary : PQresultErrorMessage(r));
}

/* What the pipeline answered up to its Sync: the prepare's result (when
 * one went) and the query's. */
typedef struct {
    bool prepareSent;
    bool prepared;    /* the prepare succeeded */
    PGresult* rows;   /* the query's success */
    PGresult* failed; /* the first error the server sent */
} Answers;

/* The next result, waiting for it. Returns 0 with *rP (NULL: the end of
 * one query's results), or -errno. May yield. */
static int
resultNext(PGconn* pg, uint64_t deadlineMs, PGresult** rP)
{
    short revents;

    while (PQisBusy(pg)) {
        int rc = socketWait(pg, POLLIN, deadlineMs, &revents);

        if (rc != 0) {
            return rc;
        }
        if (!PQconsumeInput(pg)) {
            return -EIO;
        }
    }
    *rP = PQgetResult(pg);
    return *rP == NULL && PQstatus(pg) == CONNECTION_BAD ? -EIO : 0;
}

/* Read the answers up to the Sync. Returns 0, or -errno (the connection
 * is lost or waited out). May yield. */
static int
answersRead(PGconn* pg, uint64_t deadlineMs, Answers* a)
{
    bool prepareOwed = a->prepareSent;

    for (;;) {
        PGresult* r;
        ExecStatusType st;
        int rc = resultNext(pg, deadlineMs, &r);

        if (rc != 0) {
            return rc;
        }
        if (r == NULL) {
            continue; /* between one statement's results and the next */
        }
        st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            return 0;
        }
        if (st == PGRES_FATAL_ERROR && a->failed == NULL) {
            a->failed = r;
        } else if (prepareOwed) {
            a->prepared = st == PGRES_COMMAND_OK;
            PQclear(r);
        } else if ((st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
                   && a->rows == NULL) {
            a->rows = r;
        } else {
            PQclear(r); /* aborted by the error before it */
        }
        prepareOwed = false;
    }
}

/* Send the query: the statement's Parse first when it is new here. The
 * statement's index, -1 when it goes unnamed (the cache is full). */
static bool
querySend(CorPgConn* c, const char* sql, unsigned nParams,
          const char* const* params, int stmt, bool prepare)
{
    char name[16];

    if (stmt < 0) {
        return PQsendQueryParams(c->pg, sql, (int)nParams, NULL, params, NULL,
                                 NULL, 0)
               && PQpipelineSync(c->pg);
    }
    snprintf(name, sizeof(name), "cor%d", stmt);
    return (!prepare || PQsendPrepare(c->pg, name, sql, (int)nParams, NULL))
           && PQsendQueryPrepared(c->pg, name, (int)nParams, params, NULL, NULL,
                                  0)
           && PQpipelineSync(c->pg);
}

/* Keep the statement prepared as stmt. False when it cannot be kept: the
 * connection then goes, since the server has it under a name the next
 * query would prepare again. */
static bool
stmtKeep(CorPgConn* c, unsigned stmt, const char* sql, uint64_t hash)
{
    c->stmts[stmt].sql = strdup(sql);
    c->stmts[stmt].hash = hash;
    if (c->stmts[stmt].sql == NULL) {
        return false;
    }
    c->stmtCount++;
    return true;
}

CorPgResult*
corPgConnQuery(CorPgConn* c, const char* sql, unsigned nParams,
               const char* const* params, uint64_t deadlineMs, bool* healthyP)
{
    const CorPgDatabase* db = c->pool->db;
    uint64_t hash = sqlHash(sql);
    int stmt = stmtFind(c, sql, hash);
    Answers a = { .prepareSent = stmt < 0 && c->stmtCount < COR_PG_STMT_MAX };
    CorPgResult* res;
    int rc = 0;

    *healthyP = false;
    if (a.prepareSent) {
        stmt = (int)c->stmtCount;
    }
    if (!querySend(c, sql, nParams, params, stmt, a.prepareSent)) {
        return failure(db, c->pg, 0, "query");
    }
    rc = outputFlush(c->pg, deadlineMs);
    if (rc == 0) {
        rc = answersRead(c->pg, deadlineMs, &a);
    }
    if (rc != 0 || PQstatus(c->pg) == CONNECTION_BAD) {
        /* Lost under the query: the server's last word (an administrator's
         * shutdown) says it better than libpq's. */
        res = a.failed != NULL && rc != -ETIMEDOUT && rc != -ECANCELED
                  ? serverError(db, a.failed, COR_PG_CONNECTION)
                  : failure(db, c->pg, rc == -EIO ? 0 : rc, "query");
    } else if (a.failed != NULL) {
        res = serverError(db, a.failed, COR_PG_QUERY);
    } else if (a.rows != NULL) {
        res = rowsCopy(db, a.rows);
    } else {
        res = corPgResultFail(COR_PG_CONNECTION, "08P01",
                              "database %s: no result came", db->name);
    }
    *healthyP = rc == 0 && PQstatus(c->pg) == CONNECTION_OK
                && PQtransactionStatus(c->pg) == PQTRANS_IDLE
                && (!a.prepared || stmtKeep(c, (unsigned)stmt, sql, hash));
    PQclear(a.rows);
    PQclear(a.failed);
    return res;
}
