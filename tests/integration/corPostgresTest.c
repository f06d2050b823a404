/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres module and its client (corPostgres.h) against the real
 * binary and a real PostgreSQL (corPgServer.c), in both modes: hello's
 * /dbtime, parameters in and typed values out, the server's errors as a
 * handler reads them, a pool under concurrent requests, and a server
 * restarted under load (the requests of the gap fail with a clear 503,
 * then succeed again without a reload), a query past its timeout, and a
 * restart while idle that no request sees.
 */
#include "corTest.h"
#include "corPgServer.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static CorTestPg pg;
static char buf[1 << 16];

/* After corServerStartListen's two loops and four workers, pools of 4:
 * at most 8 connections either way. */
static const char* configFormat =
    "modules:\n"
    "  - { load: http }\n"
    "  - load: postgres\n"
    "    databases:\n"
    "      - { name: main, url: \"postgresql://cor@127.0.0.1:%d/postgres\",\n"
    "          pool: 4, query_timeout: 20s }\n"
    "      - { name: short, url: \"postgresql://cor@127.0.0.1:%d/postgres\",\n"
    "          pool: 1, query_timeout: 500ms }\n"
    "  - { load: hello, database: main }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"GET /dbtime\", handler: dbtime }\n"
    "  - { match: \"GET /pgecho\", handler: pgecho }\n"
    "  - { match: \"GET /pgerror\", handler: pgerror }\n"
    "  - { match: \"GET /pgsleep\", handler: pgsleep }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
clusterMake(void)
{
    corTestPgMake(&pg);
    corTestPgStop(&pg, SIGINT);
}

static void
clusterRemove(void)
{
    corTestPgRemove(&pg);
}

static void
setUp(void)
{
    char config[2048];

    corTestPgStart(&pg);
    snprintf(config, sizeof(config), configFormat, pg.port, pg.port);
    ck_assert_int_eq(corServerStartListen(&server, false, NULL, config), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
    corTestPgStop(&pg, SIGINT);
}

static int
get(const char* target)
{
    char req[1024];

    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
    return corRequest(server.port, req, buf, sizeof(buf));
}

/* A cor-request load in the background, args as corRequestTool's. */
static FILE*
loadStart(const char* args)
{
    char command[4096];
    FILE* load;

    corRequestToolCommand(&server, args, command, sizeof(command));
    load = popen(command, "r");
    ck_assert_ptr_nonnull(load);
    return load;
}

/* Its report, once it ended, into out; whether it exited 0. */
static bool
loadEnd(FILE* load, char* out, size_t cap)
{
    out[fread(out, 1, cap - 1, load)] = '\0';
    return pclose(load) == 0;
}

/* The client sessions the server has now, psql's own not counted. */
static long
backends(const char* where)
{
    char sql[512];
    char out[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
             "'client backend' AND pid <> pg_backend_pid()%s",
             where);
    ck_assert_msg(corTestPgSql(&pg, sql, out, sizeof(out)) == 0, "%s", out);
    return strtol(out, NULL, 10);
}

/* /dbtime answers the server's clock, a query with a parameter takes as
 * long as it asks; a database name no postgres module configured, a url
 * libpq refuses (its message on one line) and a name given twice are
 * configuration errors at their lines. */
START_TEST(test_dbtime_and_the_configuration_errors)
{
    long t;
    int rc;

    ck_assert_int_eq(get("/dbtime"), 200);
    ck_assert_msg(strncmp(corBody(buf), "20", 2) == 0
                      && strstr(corBody(buf), ":") != NULL,
                  "%s", corBody(buf));
    t = corNowMs();
    ck_assert_int_eq(get("/dbtime?sleep_ms=300"), 200);
    ck_assert_int_ge(corNowMs() - t, 300);
    ck_assert_int_eq(get("/dbtime?sleep_ms=x"), 400);

    rc = corConfigCheck(&server, "nodb.yaml",
                        "listen: [ { protocol: http, address: "
                        "127.0.0.1:1 } ]\n"
                        "modules:\n"
                        "  - { load: http }\n"
                        "  - { load: hello, database: nope }\n",
                        buf, sizeof(buf));
    ck_assert_int_ne(rc, 0);
    COR_CHECK_HAS(buf, "no database 'nope' (load: postgres before hello");
    rc = corConfigCheck(&server, "badurl.yaml",
                        "listen: [ { protocol: http, address: "
                        "127.0.0.1:1 } ]\n"
                        "modules:\n"
                        "  - { load: http }\n"
                        "  - load: postgres\n"
                        "    databases: [ { name: m, url: \"postgresql://"
                        "h/d?nosuchoption=1\" } ]\n",
                        buf, sizeof(buf));
    ck_assert_int_ne(rc, 0);
    COR_CHECK_HAS(buf, "databases[0]: url: invalid URI query parameter: "
                       "\"nosuchoption\"\n");
    rc = corConfigCheck(&server, "twice.yaml",
                        "listen: [ { protocol: http, address: "
                        "127.0.0.1:1 } ]\n"
                        "modules:\n"
                        "  - { load: http }\n"
                        "  - load: postgres\n"
                        "    databases: [ { name: a, url: \"postgresql://h/d\" "
                        "},\n"
                        "                 { name: a, url: \"postgresql://h/d\" "
                        "} ]\n",
                        buf, sizeof(buf));
    ck_assert_int_ne(rc, 0);
    COR_CHECK_HAS(buf, "twice.yaml:6:26: module postgres: databases[1]: 'a' "
                       "is taken by databases[0]");
}
END_TEST

/* Parameters go as values, never as SQL: a quote and a semicolon come
 * back as the text they were; an integer parameter the server cannot
 * read is its error. The result by row and column, by name, and NULL. */
START_TEST(test_parameters_rows_columns_and_null)
{
    ck_assert_int_eq(get("/pgecho?a=it%27s%3B%20DROP%20TABLE%20x&n=41"), 200);
    COR_CHECK_HAS(corBody(buf), "rows 3 cols 4 names a,n,z,i\n");
    COR_CHECK_HAS(corBody(buf), "a=it's; DROP TABLE x n=42 z=NULL i=1\n");
    COR_CHECK_HAS(corBody(buf), "a=it's; DROP TABLE x n=42 z=NULL i=3\n");
    ck_assert_int_eq(get("/pgecho?a=&n=abc"), 500);
    COR_CHECK_HAS(corBody(buf), "database main: ERROR 22P02: invalid input "
                                "syntax for type integer");
    /* A parameter left out is SQL NULL: NULL + 1 is NULL. */
    ck_assert_int_eq(get("/pgecho?a=b"), 200);
    COR_CHECK_HAS(corBody(buf), "a=b n=NULL z=NULL i=2\n");
}
END_TEST

/* The server's refusals reach the handler with their SQLSTATE and
 * message; the connection that ran them goes on serving (no new
 * session for each error). */
START_TEST(test_query_errors_are_clear_and_the_pool_goes_on)
{
    long before;

    ck_assert_int_eq(get("/dbtime"), 200);
    ck_assert_int_eq(get("/pgerror?kind=zero"), 500);
    COR_CHECK_HAS(corBody(buf), "database main: ERROR 22012: division by zero");
    COR_CHECK_HAS(corBody(buf), "sqlstate 22012");
    ck_assert_int_eq(get("/pgerror?kind=table"), 500);
    COR_CHECK_HAS(corBody(buf), "ERROR 42P01: relation \"no_such_table\" does "
                                "not exist");
    ck_assert_int_eq(get("/pgerror?kind=syntax"), 500);
    COR_CHECK_HAS(corBody(buf), "ERROR 42601: syntax error");
    before = backends("");
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(get(i % 2 == 0 ? "/pgerror?kind=zero" : "/dbtime"),
                         i % 2 == 0 ? 500 : 200);
    }
    ck_assert_int_le(backends(""), before + 2);
}
END_TEST

/* 64 requests at once, each a 50 ms query: the loops' pools (2 x 4) or
 * the workers (4, one connection each) run several queries at once and
 * never open more than they may; every request is answered. */
START_TEST(test_a_pool_under_concurrent_requests)
{
    char out[8192];
    long most = 0;
    FILE* load = loadStart("-c 64 --duration 3s "
                           "http://127.0.0.1:{PORT}/dbtime?sleep_ms=50");

    /* Ten samples at least, and on until two queries ran at once (10 s
     * at most): ten from a fixed 0.5 s on saw none under the ASan server
     * at load 10, the load's requests not yet at the database. */
    for (long deadline = corNowMs() + 10000, n = 0;
         (n < 10 || most < 2) && corNowMs() < deadline; n++) {
        long busy = backends(" AND state = 'active'");

        most = busy > most ? busy : most;
        ck_assert_int_le(backends(""), 8);
        usleep(100 * 1000);
    }
    ck_assert(loadEnd(load, out, sizeof(out)));
    ck_assert_msg(corSummaryCount(out, "failed ") == 0
                      && corSummaryCount(out, "non-2xx ") == 0
                      && corSummaryCount(out, "2xx ") > 64,
                  "%s", out);
    ck_assert_msg(most >= 2, "at most %ld queries ran at once", most);
    ck_assert_int_le(backends(""), 8);
}
END_TEST

/*
 * PostgreSQL stopped (a fast shutdown, which ends every session) and
 * started again under a load: the requests of the gap fail at once with
 * a 503 that says why, none hangs or loses its connection, and once the
 * server is back the pools connect again (after their back-off, at most
 * 5 s) and every request succeeds, with no reload.
 */
START_TEST(test_a_server_restarted_under_load)
{
    char out[8192];
    long deadline;
    FILE* load = loadStart("-c 16 --duration 6s "
                           "http://127.0.0.1:{PORT}/dbtime?sleep_ms=5");
    int status = 0;

    usleep(1500 * 1000);
    corTestPgStop(&pg, SIGINT);
    ck_assert_int_eq(get("/dbtime"), 503);
    COR_CHECK_HAS(corBody(buf), "database main: ");
    usleep(1000 * 1000);
    corTestPgStart(&pg);
    ck_assert_int_eq(!loadEnd(load, out, sizeof(out)),
                     corSummaryCount(out, "failed ") != 0);
    ck_assert_msg(corSummaryCount(out, "2xx ") > 0
                      && corSummaryCount(out, "non-2xx ") > 0,
                  "%s", out);
    for (deadline = corNowMs() + 15000; corNowMs() < deadline;) {
        status = get("/dbtime");
        if (status == 200) {
            break;
        }
        usleep(100 * 1000);
    }
    ck_assert_msg(status == 200, "%d %s", status, corBody(buf));
    for (int i = 0; i < 16; i++) {
        status = get("/dbtime?sleep_ms=1");
        ck_assert_msg(status == 200, "%d %s", status, corBody(buf));
    }
    ck_assert_int_ge(corServerLogCount(&server,
                                       "database main: connected again"),
                     1);
}
END_TEST

/* A restart while the pools are idle costs no request: the server's end
 * of each idle session is seen (a watch on the loop, a look before a
 * worker's next query) and the connection closed, so the next requests
 * connect anew rather than finding a dead connection. */
START_TEST(test_a_restart_while_idle_costs_no_request)
{
    int status;

    for (int i = 0; i < 16; i++) {
        ck_assert_int_eq(get("/dbtime"), 200);
    }
    ck_assert_int_ge(backends(""), 2);
    corTestPgStop(&pg, SIGINT);
    corTestPgStart(&pg);
    for (int i = 0; i < 16; i++) {
        status = get("/dbtime");
        ck_assert_msg(status == 200, "request %d: %d %s", i, status,
                      corBody(buf));
    }
}
END_TEST

/* A stop does not wait for a query in flight: its wait is cancelled, on
 * the loop or on a worker, its request answered 503 (or its connection
 * closed) and the server gone well before the query would have ended. */
START_TEST(test_a_stop_cancels_a_query_in_flight)
{
    static const char req[] =
        "GET /pgsleep?ms=15000 HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd = corConnect(server.port);
    ssize_t n;
    long t;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, req, sizeof(req) - 1), 0);
    while (backends(" AND state = 'active'") < 1) {
        usleep(50 * 1000);
    }
    t = corNowMs();
    corServerStop(&server);
    ck_assert_int_lt(corNowMs() - t, 5000);
    n = corReadResponse(fd, buf, sizeof(buf), 2000);
    ck_assert_msg(n == 0 || corStatus(buf) == 503, "%zd %s", n, buf);
    close(fd);
}
END_TEST

/* A query past query_timeout (500 ms on the database "short", pool 1)
 * answers 503 at its deadline, not when the server is done; its
 * connection, in doubt, is closed, and the next query opens another. */
START_TEST(test_a_query_past_its_timeout)
{
    long t = corNowMs();

    ck_assert_int_eq(get("/pgsleep?db=short&ms=5000"), 503);
    COR_CHECK_HAS(corBody(buf), "database short: query: no answer within "
                                "500 ms");
    ck_assert_int_lt(corNowMs() - t, 4000);
    ck_assert_int_eq(get("/pgsleep?db=short&ms=1"), 200);
    ck_assert_int_eq(get("/pgsleep?db=short&ms=1"), 200);
}
END_TEST

COR_TEST_SUITE(corPostgres)
{
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, clusterMake, clusterRemove);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_dbtime_and_the_configuration_errors);
    tcase_add_test(tc, test_parameters_rows_columns_and_null);
    tcase_add_test(tc, test_query_errors_are_clear_and_the_pool_goes_on);
    tcase_add_test(tc, test_a_pool_under_concurrent_requests);
    tcase_add_test(tc, test_a_server_restarted_under_load);
    tcase_add_test(tc, test_a_query_past_its_timeout);
    tcase_add_test(tc, test_a_restart_while_idle_costs_no_request);
    tcase_add_test(tc, test_a_stop_cancels_a_query_in_flight);
}
