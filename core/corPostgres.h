/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corPostgres.h: what a module uses to query a PostgreSQL database that
 * the `postgres` module configured (databases: [ { name, url, pool } ]):
 * the database found by its name, a query with parameters (never SQL
 * built from input), and its result read as text, by row and column.
 *
 * The core holds only this interface and the results; the client itself
 * (libpq in non-blocking mode, the pools, the prepared statements) is the
 * postgres module's, so that a server without a database never loads
 * libpq (docs/postgres.md says why). A query waits as every client of
 * cor does (corRestWaitFd): a coroutine yields to its loop, a worker
 * thread or the blocking mode polls. Same source both ways.
 */
#ifndef COR_POSTGRES_H
#define COR_POSTGRES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A configured database: the postgres module's, from its init to its
 * exit (a generation). */
typedef struct CorPgDatabase CorPgDatabase;
/* One query's outcome, rows or error: the caller's, freed with
 * corPgResultFree. */
typedef struct CorPgResult CorPgResult;

/* What became of a query. */
typedef enum {
    COR_PG_OK,         /* it ran: rows (or none) and a command tag */
    COR_PG_QUERY,      /* the server refused it (syntax, a constraint,
                        * a type, 1/0): corPgSqlState says which; the
                        * connection goes on */
    COR_PG_CONNECTION, /* no connection, or it was lost under the
                        * query (a server restarted or stopped): the
                        * pool connects again at the next query, after
                        * a back-off while connecting fails */
    COR_PG_TIMEOUT,    /* query_timeout passed (no free connection, or
                        * no answer): that connection is closed */
    COR_PG_CANCELLED,  /* the request's waits were cancelled (a stop,
                        * its client gone): that connection is closed */
    COR_PG_NOMEM
} CorPgStatus;

/* The database configured under name, or NULL (no postgres module loaded
 * before the caller, or no such name). Call it from a module's init and
 * keep what it returns for the generation. */
CorPgDatabase* corPgDatabase(const char* name);

/*
 * Run sql, whose $1..$n are params[0..n-1] (text; NULL is SQL NULL), on a
 * connection of db's pool for the calling loop (a worker thread keeps its
 * own), as a statement prepared once per connection. Never NULL: an error
 * is a result too (corPgStatus, corPgError). May yield.
 */
CorPgResult* corPgQuery(CorPgDatabase* db, const char* sql, unsigned nParams,
                        const char* const* params);

CorPgStatus corPgStatus(const CorPgResult* res);
/* "database NAME: why" (a server's error with its SQLSTATE: "ERROR 22012:
 * division by zero"), or NULL when the query ran. Lives as res does. */
const char* corPgError(const CorPgResult* res);
/* The server's SQLSTATE ("22012"), "08006" for a lost connection, or
 * "" for none. */
const char* corPgSqlState(const CorPgResult* res);
unsigned corPgRows(const CorPgResult* res);
unsigned corPgColumns(const CorPgResult* res);
/* Column col's name, or NULL past the last. */
const char* corPgColumnName(const CorPgResult* res, unsigned col);
/* The column called name, or -1. */
int corPgColumn(const CorPgResult* res, const char* name);
/* The value at row, col as text (NUL-terminated), or NULL for SQL NULL
 * and past the last row or column. */
const char* corPgValue(const CorPgResult* res, unsigned row, unsigned col);
/* Its length in bytes (0 for NULL). */
size_t corPgLength(const CorPgResult* res, unsigned row, unsigned col);
bool corPgIsNull(const CorPgResult* res, unsigned row, unsigned col);
/* The rows an INSERT, UPDATE, DELETE (...) touched, or 0. */
uint64_t corPgAffected(const CorPgResult* res);
void corPgResultFree(CorPgResult* res);

/* ---- For the module that provides the databases ----------------------- */

/* A provider's answers to corPgDatabase and corPgQuery. */
typedef struct {
    CorPgDatabase* (*find)(const char* name);
    CorPgResult* (*query)(CorPgDatabase* db, const char* sql, unsigned nParams,
                          const char* const* params);
} CorPgProvider;

/* Provide the databases (at init; a generation is a process of its own),
 * or withdraw them (NULL, at exit). */
void corPgProvide(const CorPgProvider* p);

/* A result of rows x cols whose names and values take textBytes in all
 * (each with its NUL), every value NULL until set; NULL without memory. */
CorPgResult* corPgResultNew(unsigned rows, unsigned cols, size_t textBytes);
/* Copy a column's name, a value (NULL: SQL NULL) into res's text. Returns
 * 0, or -ENOSPC past the textBytes it was made with. */
int corPgResultSetName(CorPgResult* res, unsigned col, const char* name);
int corPgResultSetValue(CorPgResult* res, unsigned row, unsigned col,
                        const char* value, size_t len);
void corPgResultSetAffected(CorPgResult* res, uint64_t affected);
/* A failed query's result: status, SQLSTATE ("" when none) and the
 * message; never NULL (a shared one when memory is short). */
CorPgResult* corPgResultFail(CorPgStatus status, const char* sqlState,
                             const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* COR_POSTGRES_H */
