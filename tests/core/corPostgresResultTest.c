/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core's side of the PostgreSQL client (core/corPostgres.c,
 * included): a result read by row and column, NULL told apart, reads past
 * the last row or column answered as NULL and not read out of bounds, a
 * result that cannot hold what is set refusing it, errors as results, and
 * the provider that corPgDatabase and corPgQuery reach (none: a clear
 * error, never a crash).
 */
#include "corTest.h"

#include "../../core/corPostgres.c"

START_TEST(test_rows_columns_names_and_null)
{
    CorPgResult* res = corPgResultNew(2, 2, 64);

    ck_assert_ptr_nonnull(res);
    ck_assert_int_eq(corPgResultSetName(res, 0, "id"), 0);
    ck_assert_int_eq(corPgResultSetName(res, 1, "name"), 0);
    ck_assert_int_eq(corPgResultSetValue(res, 0, 0, "1", 1), 0);
    ck_assert_int_eq(corPgResultSetValue(res, 0, 1, "ann", 3), 0);
    ck_assert_int_eq(corPgResultSetValue(res, 1, 0, "2", 1), 0);
    ck_assert_int_eq(corPgResultSetValue(res, 1, 1, NULL, 0), 0);
    corPgResultSetAffected(res, 2);

    ck_assert_int_eq(corPgStatus(res), COR_PG_OK);
    ck_assert_ptr_null(corPgError(res));
    ck_assert_str_eq(corPgSqlState(res), "");
    ck_assert_uint_eq(corPgRows(res), 2);
    ck_assert_uint_eq(corPgColumns(res), 2);
    ck_assert_str_eq(corPgColumnName(res, 1), "name");
    ck_assert_int_eq(corPgColumn(res, "name"), 1);
    ck_assert_int_eq(corPgColumn(res, "nope"), -1);
    ck_assert_str_eq(corPgValue(res, 0, 1), "ann");
    ck_assert_uint_eq(corPgLength(res, 0, 1), 3);
    ck_assert(!corPgIsNull(res, 0, 1));
    ck_assert(corPgIsNull(res, 1, 1));
    ck_assert_uint_eq(corPgLength(res, 1, 1), 0);
    ck_assert_uint_eq(corPgAffected(res), 2);
    corPgResultFree(res);
}
END_TEST

START_TEST(test_reads_and_writes_past_the_edges)
{
    CorPgResult* res = corPgResultNew(1, 1, 4);

    ck_assert_ptr_nonnull(res);
    ck_assert_ptr_null(corPgValue(res, 1, 0));
    ck_assert_ptr_null(corPgValue(res, 0, 1));
    ck_assert_ptr_null(corPgColumnName(res, 1));
    ck_assert_uint_eq(corPgLength(res, 5, 5), 0);
    ck_assert(corPgIsNull(res, 5, 5));
    ck_assert_int_eq(corPgResultSetValue(res, 1, 0, "x", 1), -EINVAL);
    ck_assert_int_eq(corPgResultSetName(res, 1, "x"), -EINVAL);
    /* 4 bytes of text: "abc" and its NUL fit, nothing after. */
    ck_assert_int_eq(corPgResultSetValue(res, 0, 0, "abc", 3), 0);
    ck_assert_int_eq(corPgResultSetName(res, 0, "x"), -ENOSPC);
    ck_assert_str_eq(corPgValue(res, 0, 0), "abc");
    corPgResultFree(res);
}
END_TEST

START_TEST(test_an_error_is_a_result)
{
    char longWhy[2000];
    CorPgResult* res = corPgResultFail(COR_PG_QUERY, "22012",
                                       "database %s: ERROR %s: %s", "main",
                                       "22012", "division by zero");

    ck_assert_int_eq(corPgStatus(res), COR_PG_QUERY);
    ck_assert_str_eq(corPgSqlState(res), "22012");
    ck_assert_str_eq(corPgError(res),
                     "database main: ERROR 22012: division by zero");
    ck_assert_uint_eq(corPgRows(res), 0);
    ck_assert_ptr_null(corPgValue(res, 0, 0));
    corPgResultFree(res);

    memset(longWhy, 'x', sizeof(longWhy) - 1);
    longWhy[sizeof(longWhy) - 1] = '\0';
    res = corPgResultFail(COR_PG_CONNECTION, "08006", "%s", longWhy);
    ck_assert_uint_eq(strlen(corPgError(res)), 511);
    corPgResultFree(res);
}
END_TEST

static CorPgDatabase* const fakeDb = (CorPgDatabase*)&fakeDb;
static const char* askedSql;

static CorPgDatabase*
fakeFind(const char* name)
{
    return strcmp(name, "main") == 0 ? fakeDb : NULL;
}

static CorPgResult*
fakeQuery(CorPgDatabase* db, const char* sql, unsigned nParams,
          const char* const* params)
{
    ck_assert_ptr_eq(db, fakeDb);
    ck_assert_uint_eq(nParams, 1);
    askedSql = sql;
    return corPgResultFail(COR_PG_QUERY, "", "%s", params[0]);
}

START_TEST(test_the_provider_and_its_absence)
{
    static const CorPgProvider fake = { .find = fakeFind, .query = fakeQuery };
    const char* params[] = { "p1" };
    CorPgResult* res;

    ck_assert_ptr_null(corPgDatabase("main"));
    res = corPgQuery(NULL, "SELECT 1", 0, NULL);
    ck_assert_int_eq(corPgStatus(res), COR_PG_CONNECTION);
    ck_assert_str_eq(corPgError(res),
                     "database: none configured (load: postgres)");
    corPgResultFree(res);

    corPgProvide(&fake);
    ck_assert_ptr_eq(corPgDatabase("main"), fakeDb);
    ck_assert_ptr_null(corPgDatabase("other"));
    ck_assert_ptr_null(corPgDatabase(NULL));
    res = corPgQuery(corPgDatabase("main"), "SELECT $1", 1, params);
    ck_assert_str_eq(askedSql, "SELECT $1");
    ck_assert_str_eq(corPgError(res), "p1");
    corPgResultFree(res);
    corPgProvide(NULL);
    ck_assert_ptr_null(corPgDatabase("main"));
}
END_TEST

COR_TEST_SUITE(corPostgresResult)
{
    tcase_add_test(tc, test_rows_columns_names_and_null);
    tcase_add_test(tc, test_reads_and_writes_past_the_edges);
    tcase_add_test(tc, test_an_error_is_a_result);
    tcase_add_test(tc, test_the_provider_and_its_absence);
}
