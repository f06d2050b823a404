/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's PostgreSQL handlers (corPostgresTest), on the database
 * the postgres module configured as ?db= (default "main"):
 *
 *   pgecho   ?a=TEXT&n=INT: SELECT $1::text AS a, $2::int + 1 AS n,
 *            NULL::text AS z, i FROM generate_series(1, 3) AS i, each
 *            row a line "a=... n=... z=NULL i=..." after a line "rows R
 *            cols C names a,n,z,i": parameters in, typed access out (a
 *            quote in a parameter stays text).
 *   pgerror  ?kind=zero|table|syntax: a query the server refuses, the
 *            error as the handler reads it (500 or 503, the message, a
 *            line "sqlstate XXXXX").
 *   pgsleep  ?ms=N: SELECT pg_sleep(N / 1000), for a query_timeout.
 */
#include "cor.h"

#include <stdio.h>
#include <string.h>

void corTestkitPgAdd(CorModule* m, int* rc);

static CorPgDatabase*
databaseAsked(CorRequest* r)
{
    const char* name = corRequestQuery(r, "db");

    return corPgDatabase(name != NULL ? name : "main");
}

/* Answer res's error: 500 for a query refused, 503 for the rest. */
static void
errorAnswer(CorRequest* r, const CorPgResult* res)
{
    corRespondf(r, corPgStatus(res) == COR_PG_QUERY ? 500 : 503, "text/plain",
                "%s\nsqlstate %s\n", corPgError(res), corPgSqlState(res));
}

/* A value as the answer writes it: "NULL" for SQL NULL. */
static const char*
text(const CorPgResult* res, unsigned row, unsigned col)
{
    return corPgIsNull(res, row, col) ? "NULL" : corPgValue(res, row, col);
}

static void
echoServe(CorRequest* r)
{
    const char* params[] = { corRequestQuery(r, "a"), corRequestQuery(r, "n") };
    CorPgResult* res =
        corPgQuery(databaseAsked(r),
                   "SELECT $1::text AS a, $2::int + 1 AS n, NULL::text AS z, "
                   "i FROM generate_series(1, 3) AS i",
                   2, params);
    char body[2048];
    size_t n;

    if (corPgError(res) != NULL) {
        errorAnswer(r, res);
        corPgResultFree(res);
        return;
    }
    n = (size_t)snprintf(body, sizeof(body), "rows %u cols %u names",
                         corPgRows(res), corPgColumns(res));
    for (unsigned col = 0; col < corPgColumns(res) && n < sizeof(body); col++) {
        n += (size_t)snprintf(body + n, sizeof(body) - n, "%s%s",
                              col > 0 ? "," : " ", corPgColumnName(res, col));
    }
    for (unsigned row = 0; row < corPgRows(res) && n < sizeof(body); row++) {
        n += (size_t)snprintf(body + n, sizeof(body) - n,
                              "\na=%s n=%s z=%s i=%s",
                              text(res, row, (unsigned)corPgColumn(res, "a")),
                              text(res, row, 1), text(res, row, 2),
                              text(res, row, 3));
    }
    corRespondf(r, 200, "text/plain", "%.*s\n",
                (int)(n < sizeof(body) ? n : sizeof(body) - 1), body);
    corPgResultFree(res);
}

static void
errorServe(CorRequest* r)
{
    const char* kind = corRequestQuery(r, "kind");
    const char* zero[] = { "0" };
    CorPgResult* res;

    if (kind != NULL && strcmp(kind, "table") == 0) {
        res = corPgQuery(databaseAsked(r), "SELECT * FROM no_such_table", 0,
                         NULL);
    } else if (kind != NULL && strcmp(kind, "syntax") == 0) {
        res = corPgQuery(databaseAsked(r), "SELEC 1", 0, NULL);
    } else {
        res = corPgQuery(databaseAsked(r), "SELECT 1 / $1::int", 1, zero);
    }
    if (corPgError(res) != NULL) {
        errorAnswer(r, res);
    } else {
        corRespondf(r, 200, "text/plain", "no error: %s\n",
                    corPgValue(res, 0, 0));
    }
    corPgResultFree(res);
}

static void
sleepServe(CorRequest* r)
{
    const char* params[] = { corRequestQuery(r, "ms") };
    CorPgResult* res = corPgQuery(databaseAsked(r),
                                  "SELECT pg_sleep($1::float8 / 1000)", 1,
                                  params);

    if (corPgError(res) != NULL) {
        errorAnswer(r, res);
    } else {
        corRespondf(r, 200, "text/plain", "slept\n");
    }
    corPgResultFree(res);
}

void
corTestkitPgAdd(CorModule* m, int* rc)
{
    if (corHandlerAdd(m, &(CorHandler){ .name = "pgecho",
                                        .serve = echoServe,
                                        .run = COR_RUN_COROUTINE })
            != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "pgerror",
                                           .serve = errorServe,
                                           .run = COR_RUN_COROUTINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "pgsleep",
                                           .serve = sleepServe,
                                           .run = COR_RUN_COROUTINE })
               != 0) {
        *rc = -1;
    }
}
