/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core's side of the PostgreSQL client (corPostgres.h): the provider
 * the postgres module registers, and the results both sides read. The
 * results live here, not in the module, so that a handler reads and
 * frees one with no call into libpq: a result is one block (the header,
 * its names, its cells, then their text), copied once from libpq's.
 *
 * The provider is set at the module's init and cleared at its exit, before
 * any loop runs and after all stopped: no lock.
 */
#include "corPostgres.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char* value; /* NULL: SQL NULL */
    size_t len;
} Cell;

struct CorPgResult {
    CorPgStatus status;
    char sqlState[6];
    unsigned rows;
    unsigned cols;
    uint64_t affected;
    const char* error; /* NULL when the query ran */
    const char** names;
    Cell* cells;
    char* text; /* where the next name or value goes */
    char* textEnd;
};

static const CorPgProvider* provider;

/* What a query returns when not even its error can be allocated. */
static CorPgResult noMemory = {
    .status = COR_PG_NOMEM,
    .error = "database: out of memory",
};

void
corPgProvide(const CorPgProvider* p)
{
    provider = p;
}

CorPgDatabase*
corPgDatabase(const char* name)
{
    return provider != NULL && name != NULL ? provider->find(name) : NULL;
}

CorPgResult*
corPgQuery(CorPgDatabase* db, const char* sql, unsigned nParams,
           const char* const* params)
{
    if (provider == NULL || db == NULL || sql == NULL) {
        return corPgResultFail(COR_PG_CONNECTION, "",
                               "database: none configured (load: postgres)");
    }
    return provider->query(db, sql, nParams, params);
}

CorPgResult*
corPgResultNew(unsigned rows, unsigned cols, size_t textBytes)
{
    size_t cells = (size_t)rows * cols;
    size_t size = sizeof(CorPgResult) + cols * sizeof(char*)
                  + cells * sizeof(Cell) + textBytes;
    CorPgResult* res;

    if (cols != 0 && cells / cols != rows) {
        return NULL;
    }
    res = calloc(1, size);
    if (res == NULL) {
        return NULL;
    }
    res->rows = rows;
    res->cols = cols;
    res->names = (const char**)(res + 1);
    res->cells = (Cell*)(res->names + cols);
    res->text = (char*)(res->cells + cells);
    res->textEnd = res->text + textBytes;
    return res;
}

/* Copy len bytes and a NUL into res's text. */
static const char*
textCopy(CorPgResult* res, const char* s, size_t len)
{
    char* at = res->text;

    if ((size_t)(res->textEnd - at) < len + 1) {
        return NULL;
    }
    memcpy(at, s, len);
    at[len] = '\0';
    res->text = at + len + 1;
    return at;
}

int
corPgResultSetName(CorPgResult* res, unsigned col, const char* name)
{
    if (col >= res->cols) {
        return -EINVAL;
    }
    res->names[col] = textCopy(res, name, strlen(name));
    return res->names[col] != NULL ? 0 : -ENOSPC;
}

int
corPgResultSetValue(CorPgResult* res, unsigned row, unsigned col,
                    const char* value, size_t len)
{
    Cell* cell;

    if (row >= res->rows || col >= res->cols) {
        return -EINVAL;
    }
    cell = &res->cells[(size_t)row * res->cols + col];
    if (value == NULL) {
        return 0;
    }
    cell->value = textCopy(res, value, len);
    cell->len = len;
    return cell->value != NULL ? 0 : -ENOSPC;
}

void
corPgResultSetAffected(CorPgResult* res, uint64_t affected)
{
    res->affected = affected;
}

CorPgResult*
corPgResultFail(CorPgStatus status, const char* sqlState, const char* fmt, ...)
{
    char why[512];
    CorPgResult* res;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    n = n < 0 ? 0 : n >= (int)sizeof(why) ? (int)sizeof(why) - 1 : n;
    res = corPgResultNew(0, 0, (size_t)n + 1);
    if (res == NULL) {
        return &noMemory;
    }
    res->status = status;
    snprintf(res->sqlState, sizeof(res->sqlState), "%s", sqlState);
    res->error = textCopy(res, why, (size_t)n);
    return res;
}

CorPgStatus
corPgStatus(const CorPgResult* res)
{
    return res->status;
}

const char*
corPgError(const CorPgResult* res)
{
    return res->error;
}

const char*
corPgSqlState(const CorPgResult* res)
{
    return res->sqlState;
}

unsigned
corPgRows(const CorPgResult* res)
{
    return res->rows;
}

unsigned
corPgColumns(const CorPgResult* res)
{
    return res->cols;
}

const char*
corPgColumnName(const CorPgResult* res, unsigned col)
{
    return col < res->cols ? res->names[col] : NULL;
}

int
corPgColumn(const CorPgResult* res, const char* name)
{
    for (unsigned col = 0; col < res->cols; col++) {
        if (res->names[col] != NULL && strcmp(res->names[col], name) == 0) {
            return (int)col;
        }
    }
    return -1;
}

static const Cell*
cellAt(const CorPgResult* res, unsigned row, unsigned col)
{
    return row < res->rows && col < res->cols
               ? &res->cells[(size_t)row * res->cols + col]
               : NULL;
}

const char*
corPgValue(const CorPgResult* res, unsigned row, unsigned col)
{
    const Cell* cell = cellAt(res, row, col);

    return cell != NULL ? cell->value : NULL;
}

size_t
corPgLength(const CorPgResult* res, unsigned row, unsigned col)
{
    const Cell* cell = cellAt(res, row, col);

    return cell != NULL ? cell->len : 0;
}

bool
corPgIsNull(const CorPgResult* res, unsigned row, unsigned col)
{
    return corPgValue(res, row, col) == NULL;
}

uint64_t
corPgAffected(const CorPgResult* res)
{
    return res->affected;
}

void
corPgResultFree(CorPgResult* res)
{
    if (res != &noMemory) {
        free(res);
    }
}
