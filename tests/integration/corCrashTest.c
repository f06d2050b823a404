/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A module that crashes: the generation's last words name the thread
 * (loop N or worker N), the handler, its module and the request line it
 * served, whatever killed it (a fault, an abort, a stack overflow) and
 * wherever the handler ran; /metrics counts the crashes; and a reload
 * whose generations keep crashing is taken back, the master saying why.
 */
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static char buf[1 << 16];

static void
tearDown(void)
{
    corServerStop(&server);
}

/* A wait for what (begun at since) that ran past 15 s fails the test,
 * with the server's log beside it: what the master did meanwhile is the
 * only account of why. */
static void
waitGoesOn(long since, const char* what)
{
    if (corNowMs() - since >= 15000) {
        corServerLogPrint(&server);
        ck_abort_msg("%s never came (15 s)", what);
    }
}

/* Wait (up to 15 s, a replacement takes a second) until path answers
 * status: a generation serves again. */
static void
servedAgain(const char* path, int status)
{
    char request[256];
    char what[256];
    long t = corNowMs();

    snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n",
             path);
    snprintf(what, sizeof(what), "%s answering %d", path, status);
    while (corRequest(server.port, request, buf, sizeof(buf)) != status) {
        waitGoesOn(t, what);
        usleep(50 * 1000);
    }
}

/* Wait (up to 15 s) until a line of the log holds text. */
static void
logSays(const char* text)
{
    long t = corNowMs();

    while (corServerLogCount(&server, text) < 1) {
        waitGoesOn(t, text);
        usleep(50 * 1000);
    }
}

/* Send a request that kills the generation (no answer comes), then wait
 * until the next one is ready: its loops serve a moment before it says so
 * to the master, but /health answers 200 only once it has (503 before),
 * so the next crash is one of a serving generation, not of a start. */
static void
crashWith(const char* target)
{
    char request[1024];

    snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n",
             target);
    ck_assert_int_eq(corRequest(server.port, request, buf, sizeof(buf)), -1);
    servedAgain("/health", 200);
}

static int
logMatches(const char* regex)
{
    return corServerLogMatches(&server, regex);
}

static void
reportSays(const char* regex)
{
    ck_assert_msg(logMatches(regex) == 1,
                  "no line (or several) matches "
                  "'%s' in the log",
                  regex);
}

/*
 * Start the server on yaml. A sanitizer's own handlers would report the
 * faults these tests make as its errors (which fail any test), and answer
 * them with an exit status: in a sanitized build they are left to cor.
 */
static void
sanitizerHandlersOff(void* arg)
{
    const char* before = getenv("ASAN_OPTIONS");
    char options[512];

    (void)arg;
    snprintf(options, sizeof(options),
             "%s%shandle_segv=0:handle_sigbus=0:"
             "handle_sigfpe=0:handle_sigill=0",
             before ? before : "", before ? ":" : "");
    setenv("ASAN_OPTIONS", options, 1);
}

static void
start(const char* yaml)
{
    ck_assert_int_eq(corServerStartChild(&server, yaml, sanitizerHandlersOff,
                                         NULL),
                     0);
}

static const char crashRoutes[] =
    "runtime: { loops: 2, workers: 4, coroutines: { enabled: {COROUTINES} "
    "} }\n"
    "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"GET /crash\", handler: crash }\n"
    "  - { match: \"GET /crash/*\", handler: crash }\n"
    "  - { match: \"GET /crashworker\", handler: crashworker }\n"
    "  - { match: \"GET /crashwait\", handler: crashwait }\n"
    "  - { match: \"GET /deep\", handler: deep }\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "  - { match: \"GET /health\", handler: health }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

/* Before: the log said only "generation 1 (pid N) died (signal 11)". */
START_TEST(test_the_report_names_the_loop_handler_module_and_request)
{
    const char* ran = corTestCoroutines() ? "loop" : "worker";
    char regex[512];

    start(crashRoutes);
    crashWith("/crash?how=segv");
    reportSays("\\[error\\] [0-9]+: crash: signal 11 \\(SIGSEGV\\) on loop "
               "[01], in handler crash of module testkit, serving \"GET "
               "/crash\\?how=segv HTTP/1\\.1\"$");
    crashWith("/crashworker?how=fpe");
    reportSays("crash: signal 8 \\(SIGFPE\\) on worker [0-3], in handler "
               "crashworker of module testkit, serving \"GET "
               "/crashworker\\?how=fpe HTTP/1\\.1\"$");
    /* A coroutine that waited once: its request is its own, not the
     * thread's. */
    crashWith("/crashwait?how=abort");
    snprintf(regex, sizeof(regex),
             "crash: signal 6 \\(SIGABRT\\) on %s "
             "[0-9], in handler crashwait of module testkit, serving \"GET "
             "/crashwait\\?how=abort HTTP/1\\.1\"$",
             ran);
    reportSays(regex);
    crashWith("/crash?how=bus");
    reportSays("crash: signal 7 \\(SIGBUS\\) on loop [01], in handler crash "
               "of module testkit");
    ck_assert_int_eq(corMetric(server.port, "cor_generation_crashes_total"), 4);
    ck_assert_int_eq(logMatches("died \\(signal (11|8|6|7)\\): starting "
                                "another"),
                     4);
}
END_TEST

/* An overflow says both: what the thread served, and the coroutine whose
 * stack it ran out of (a worker's own stack, without coroutines). */
START_TEST(test_a_stack_overflow_names_the_handler_and_the_coroutine)
{
    start(crashRoutes);
    crashWith("/deep");
    if (corTestCoroutines()) {
        reportSays("crash: signal 11 \\(SIGSEGV\\) on loop [01], in handler "
                   "deep of module testkit, serving \"GET /deep HTTP/1\\.1\"; "
                   "coroutine [0-9]+ overflowed its [0-9]+-byte stack");
    } else {
        reportSays("crash: signal 11 \\(SIGSEGV\\) on worker [0-3], in "
                   "handler deep of module testkit, serving \"GET /deep "
                   "HTTP/1\\.1\"$");
    }
    ck_assert_int_eq(corMetric(server.port, "cor_generation_crashes_total"), 1);
}
END_TEST

/* The request line is the client's: bounded, and what is not printable
 * cannot break the log's line. */
START_TEST(test_the_request_line_is_bounded)
{
    char target[1024];
    char regex[512];
    size_t n;

    start(crashRoutes);
    n = (size_t)snprintf(target, sizeof(target), "/crash/");
    memset(target + n, 'x', 600);
    target[n + 600] = '\0';
    crashWith(target);
    /* 200 bytes of the target, then "...". */
    snprintf(regex, sizeof(regex),
             "serving \"GET /crash/x{193}\\.\\.\\. "
             "HTTP/1\\.1\"$");
    reportSays(regex);
}
END_TEST

/* ---- Rollback ------------------------------------------------------------ */

/* A configuration that serves route (echo) and crashes on GET /crash. */
static const char*
routeConfig(const char* route)
{
    static char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 2, workers: 2, coroutines: { enabled: "
             "{COROUTINES} } }\n"
             "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
             "modules:\n  - { load: http }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n  - { match: \"GET %s\", handler: echo }\n"
             "  - { match: \"GET /crash\", handler: crash }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "  - { match: \"GET /health\", handler: health }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             route);
    return yaml;
}

/*
 * Before: the master replaced each generation of the new configuration
 * for ever, every crash taking the requests in flight with it. Now the
 * third crash within a minute of the reload brings back the configuration
 * before it (its route /old, not the new one's /new), and the log says
 * why.
 */
START_TEST(test_a_reload_that_keeps_crashing_is_rolled_back)
{
    start(routeConfig("/old"));
    ck_assert_int_eq(corServerWriteConfig(&server, routeConfig("/new")), 0);
    kill(server.pid, SIGHUP);
    /* /new answers as soon as the new generation's loops serve: before
     * it tells the master it is ready, and while the old one still
     * accepts. A crash then is not one of a serving generation of the new
     * configuration: the new one's fails the reload itself (the old one
     * stays, /new answers 404), the old one's is no reason to roll back
     * (only two crashes count, and /old never comes back). The crashes
     * start once the reload is done and the old generation stopped. */
    servedAgain("/new", 200);
    logSays("reload done: generation");
    logSays("generation 1 stopped");

    crashWith("/crash");
    crashWith("/crash");
    /* Two crashes: still the new configuration. */
    ck_assert_int_eq(corRequest(server.port,
                                "GET /new HTTP/1.1\r\nHost: t"
                                "\r\n\r\n",
                                buf, sizeof(buf)),
                     200);
    ck_assert_int_eq(corServerLogCount(&server, "rolling back"), 0);
    crashWith("/crash");
    /* The generation rolled back to answers /health once it has given
     * its word, a moment before the master reads it and says so. */
    servedAgain("/old", 200);
    logSays("rollback done");
    ck_assert_int_eq(corRequest(server.port,
                                "GET /new HTTP/1.1\r\nHost: t"
                                "\r\n\r\n",
                                buf, sizeof(buf)),
                     404);
    ck_assert_int_eq(logMatches("died \\(signal 6\\): rolling back$"), 1);
    ck_assert_int_eq(logMatches("rolling back to the configuration before "
                                "the last reload: the configuration the "
                                "reload [0-9]+ ms ago started lost 3 "
                                "generations \\(died or could not start\\) "
                                "within 60 s of that reload; .*cor\\.yaml "
                                "still holds the new one$"),
                     1);
    ck_assert_int_eq(corServerLogCount(&server, "rollback done: generation"),
                     1);
    ck_assert_int_eq(corMetric(server.port, "cor_reload_rollbacks_total"), 1);
    ck_assert_int_eq(corMetric(server.port, "cor_generation_crashes_total"), 3);
    /* The old configuration has nothing to go back to: a crash now is
     * replaced, as before any reload. */
    crashWith("/crash");
    servedAgain("/old", 200);
    ck_assert_int_eq(corServerLogCount(&server, "rolling back"), 2);
}
END_TEST

COR_TEST_SUITE(corCrash)
{
    tcase_set_timeout(tc, 90);
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_add_test(tc,
                   test_the_report_names_the_loop_handler_module_and_request);
    tcase_add_test(tc,
                   test_a_stack_overflow_names_the_handler_and_the_coroutine);
    tcase_add_test(tc, test_the_request_line_is_bounded);
    tcase_add_test(tc, test_a_reload_that_keeps_crashing_is_rolled_back);
}
