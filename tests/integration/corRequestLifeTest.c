/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request's life against the real binary, in both modes: deadlines that
 * cut a handler short with 504, a client that leaves cancelling its
 * request's wait (through the testkit's line protocol, which calls
 * corRequestCancel), drains that wait for post-response phases,
 * the request an inline handler sees when it runs on a coroutine's stack,
 * the Allow of a 405, response headers that would inject, waits the
 * example refuses, parked coroutines woken from another loop, and what a
 * waiting handler answers when its client left (logged incomplete) or a
 * stop came (503).
 */
#include "corTest.h"
#include "corServer.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static char buf[1 << 16];

static const char* config =
    "runtime:\n"
    "  loops: 2\n"
    "  workers: 4\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "  stop_timeout: 5s\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: hello }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"GET /hello\", handler: hello }\n"
    "  - { match: \"PUT /hello\", handler: echo }\n"
    "  - { match: \"GET /sleep\", handler: sleep }\n"
    "  - { match: \"GET /slow\", handler: sleep, timeout: 300ms }\n"
    "  - { match: \"GET /deadline\", handler: deadline }\n"
    "  - { match: \"GET /park\", handler: park }\n"
    "  - { match: \"GET /wake\", handler: wake }\n"
    "  - { match: \"GET /current\", handler: current }\n"
    "  - { match: \"GET /header\", handler: header }\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "  - { match: \"/notify/*\", handler: notify }\n"
    "log: { pid_file: {DIR}/cor.pid, access: {DIR}/access.log,\n"
    "       access_format: json }\n";

static void
setUp(void)
{
    ck_assert_int_eq(corServerStart(&server, config), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
}

static int
get(const char* target)
{
    char req[512];

    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
    return corRequest(server.port, req, buf, sizeof(buf));
}

/* ---- Deadlines ----------------------------------------------------------- */

/* A route's timeout: the handler's wait is cancelled at 300 ms and the
 * client answered 504, on a coroutine and on a worker alike. */
START_TEST(test_route_timeout_answers_504)
{
    const char* targets[] = { "/slow?ms=10000", "/slow?ms=10000&worker=1" };

    for (int i = 0; i < 2; i++) {
        long t = corNowMs();

        ck_assert_int_eq(get(targets[i]), 504);
        ck_assert_int_ge(corNowMs() - t, 250);
        ck_assert_int_lt(corNowMs() - t, 3000);
    }
    ck_assert_int_eq(get("/slow?ms=10"), 200);
    ck_assert_int_eq(corMetric(server.port, "cor_requests_timed_out_total"), 2);
}
END_TEST

/* A handler's own deadline (CorHandler.timeoutMs). */
START_TEST(test_handler_timeout_answers_504)
{
    long t = corNowMs();

    ck_assert_int_eq(get("/deadline"), 504);
    ck_assert_int_lt(corNowMs() - t, 3000);
    ck_assert_int_eq(get("/deadline?ms=10"), 200);
}
END_TEST

/* ---- A client that leaves ------------------------------------------------ */

static const char* lineConfig =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen:\n"
    "  - { protocol: line, address: 127.0.0.1:{PORT} }\n"
    "modules:\n"
    "  - { load: hello }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: /sleep, handler: sleep }\n"
    "  - { match: /metrics, handler: metrics }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

/* A metric over the line protocol: "/metrics\n", the answer to the end. */
static long
lineMetric(const char* name)
{
    char key[128];
    const char* at;
    size_t len = 0;
    ssize_t n;
    int fd = corConnect(server.port);

    if (fd < 0 || corSendAll(fd, "/metrics\n", 9) != 0) {
        return -1;
    }
    while (len < sizeof(buf) - 1
           && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
        len += (size_t)n;
    }
    buf[len] = '\0';
    close(fd);
    snprintf(key, sizeof(key), "\n%s ", name);
    at = strstr(buf, key);
    return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

/* The client of /sleep?ms=5000 leaves after 100 ms: its request is
 * cancelled, the handler's wait (a coroutine's, or a worker's poll) ends
 * and runs its failure path (503, to nobody) long before the 5 s. */
START_TEST(test_client_leaving_cancels_its_wait)
{
    int fd;
    long t;

    corServerStop(&server);
    ck_assert_int_eq(corServerStart(&server, lineConfig), 0);
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, "/sleep?ms=5000\n", 15), 0);
    usleep(100 * 1000);
    close(fd);
    t = corNowMs();
    while (lineMetric("cor_responses_total{class=\"5xx\"}") != 1
           && corNowMs() - t < 4000) {
        usleep(20 * 1000);
    }
    ck_assert_int_lt(corNowMs() - t, 2000);
    ck_assert_int_eq(lineMetric("cor_requests_cancelled_total"), 1);
    if (corTestCoroutines()) {
        ck_assert_int_eq(lineMetric("cor_waits_cancelled_total"), 1);
    }
}
END_TEST

/* ---- Drains wait for post-response phases -------------------------------- */

static void
readLine(const char* path, char* line, size_t cap)
{
    FILE* f = fopen(path, "r");

    line[0] = '\0';
    if (f != NULL) {
        if (fgets(line, (int)cap, f) == NULL) {
            line[0] = '\0';
        }
        fclose(f);
    }
}

/* The answer is out, the connection closed, the finish phase still waits
 * 300 ms: a graceful stop (sig SIGQUIT) or a reload (SIGHUP, the old
 * generation drains) lets it end its work. */
static void
finishOutlivesDrain(int sig)
{
    char req[1024];
    char log[256];
    char line[256];
    int status;
    long t;

    snprintf(log, sizeof(log), "%s/notify.log", server.dir);
    snprintf(req, sizeof(req),
             "GET /notify/x?ms=300&log=%s HTTP/1.1\r\n"
             "Host: t\r\nConnection: close\r\n\r\n",
             log);
    ck_assert_int_eq(corRequest(server.port, req, buf, sizeof(buf)), 200);
    kill(server.pid, sig);
    t = corNowMs();
    if (sig == SIGQUIT) {
        ck_assert_int_eq(waitpid(server.pid, &status, 0), server.pid);
        server.pid = 0;
    }
    do {
        readLine(log, line, sizeof(line));
        usleep(20 * 1000);
    } while (line[0] == '\0' && corNowMs() - t < 5000);
    ck_assert_str_eq(line, "/notify/x done\n");
}

START_TEST(test_graceful_stop_waits_for_finish_phase)
{
    finishOutlivesDrain(SIGQUIT);
}
END_TEST

START_TEST(test_reload_waits_for_finish_phase)
{
    finishOutlivesDrain(SIGHUP);
}
END_TEST

/* ---- The request an inline handler sees ---------------------------------- */

/* The first request runs as a coroutine (a worker in blocking mode); the
 * second, pipelined behind it, is inline and may run on that coroutine's
 * stack as it ends: it still sees itself as the current request, and its
 * wait polls rather than suspending somebody else's coroutine. */
START_TEST(test_inline_after_coroutine_sees_its_request)
{
    const char* req = "GET /sleep?ms=20 HTTP/1.1\r\nHost: t\r\n\r\n"
                      "GET /current?wait=1 HTTP/1.1\r\nHost: t\r\n\r\n"
                      "GET /current HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd = corConnect(server.port);

    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_str_eq(corBody(buf), "current yes wait 0\n");
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_str_eq(corBody(buf), "current yes wait 0\n");
    close(fd);
}
END_TEST

/* ---- Responses ----------------------------------------------------------- */

START_TEST(test_method_not_allowed_says_allow)
{
    ck_assert_int_eq(corRequest(server.port,
                                "DELETE /hello HTTP/1.1\r\n"
                                "Host: t\r\n\r\n",
                                buf, sizeof(buf)),
                     405);
    ck_assert_msg(strstr(buf, "\r\nAllow: GET, HEAD, PUT\r\n") != NULL, "%s",
                  buf);
}
END_TEST

START_TEST(test_header_injection_refused)
{
    ck_assert_int_eq(get("/header"), 200);
    ck_assert_str_eq(corBody(buf), "0 -22 -22\n");
    ck_assert_ptr_nonnull(strstr(buf, "\r\nX-Ok: fine\r\n"));
    ck_assert_ptr_null(strstr(buf, "Set-Cookie"));
    ck_assert_ptr_null(strstr(buf, "X-Bad"));
}
END_TEST

/* A tab is legal in a header value; the JSON access log writes it as
 * JSON does (\u0009), never as \x09, which no JSON parser reads. */
START_TEST(test_json_access_log_escapes_as_json)
{
    char path[256];
    char line[4096];
    long t = corNowMs();

    ck_assert_int_eq(corRequest(server.port,
                                "GET /hello HTTP/1.1\r\n"
                                "Host: t\r\nUser-Agent: a\tb\"c\r\n\r\n",
                                buf, sizeof(buf)),
                     200);
    snprintf(path, sizeof(path), "%s/access.log", server.dir);
    do {
        usleep(20 * 1000);
        readLine(path, line, sizeof(line));
    } while (line[0] == '\0' && corNowMs() - t < 5000);
    ck_assert_msg(strstr(line, "\"user_agent\":\"a\\u0009b\\\"c\"") != NULL,
                  "%s", line);
    ck_assert_ptr_null(strstr(line, "\\x"));
}
END_TEST

START_TEST(test_sleep_refuses_nonsense)
{
    ck_assert_int_eq(get("/sleep?ms=-1"), 400);
    ck_assert_int_eq(get("/sleep?ms=abc"), 400);
    ck_assert_int_eq(get("/sleep?ms=5x"), 400);
    ck_assert_int_eq(get("/park?ms=-5"), 400);
    ck_assert_int_eq(get("/sleep?ms=0"), 200);
}
END_TEST

/* ---- Park and wake across loops ------------------------------------------ */

typedef struct {
    int fd;
    int status;
} Parked;

static void*
readParked(void* arg)
{
    Parked* p = arg;
    char answer[4096];

    p->status = corReadResponse(p->fd, answer, sizeof(answer), 5000) > 0
                    ? corStatus(answer)
                    : -1;
    return NULL;
}

/* Parks on connections spread over both loops; one /wake, which comes in
 * on one of them, wakes them all. In blocking mode each park holds one of
 * the 4 workers: fewer, so that none is still queued at the wake. */
START_TEST(test_wake_reaches_every_loop)
{
    enum { PARKS_MAX = 8 };
    const char* req = "GET /park?ms=20000 HTTP/1.1\r\nHost: t\r\n\r\n";
    int parks = corTestCoroutines() ? PARKS_MAX : 3;
    Parked parked[PARKS_MAX];
    pthread_t threads[PARKS_MAX];
    long t;

    for (int i = 0; i < parks; i++) {
        parked[i] = (Parked){ corConnect(server.port), 0 };
        ck_assert_int_eq(corSendAll(parked[i].fd, req, strlen(req)), 0);
        pthread_create(&threads[i], NULL, readParked, &parked[i]);
    }
    usleep(300 * 1000);
    /* Connections are dealt out over the loops: both have parked
     * coroutines (the scrape itself counts once on one of them). */
    if (corTestCoroutines()) {
        ck_assert_int_ge(corMetric(server.port,
                                   "cor_loop_requests_total{loop=\"0\"}"),
                         2);
        ck_assert_int_ge(corMetric(server.port,
                                   "cor_loop_requests_total{loop=\"1\"}"),
                         2);
    }
    t = corNowMs();
    ck_assert_int_eq(get("/wake"), 200);
    for (int i = 0; i < parks; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_int_eq(parked[i].status, 200);
        close(parked[i].fd);
    }
    ck_assert_int_lt(corNowMs() - t, 3000);
}
END_TEST

/* ---- A client gone, a stop: what the waiting handler answers ------------ */

/* Sends GET target on a new connection and waits until its handler runs
 * (the requests dispatched to where this mode runs them reach count).
 * Returns the connection. */
static int
waitingRequest(const char* target, long count)
{
    const char* metric = corTestCoroutines()
                             ? "cor_requests_total{ran=\"coroutine\"}"
                             : "cor_requests_total{ran=\"worker\"}";
    char req[256];
    int fd = corConnect(server.port);
    long t = corNowMs();

    ck_assert_int_ge(fd, 0);
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    while (corMetric(server.port, metric) < count) {
        ck_assert_int_lt(corNowMs() - t, 10000);
        usleep(20 * 1000);
    }
    return fd;
}

/* The access log's line for target, waited for (10 s at most). */
static void
accessLine(const char* target, char* line, size_t cap)
{
    char path[256];
    char want[256];
    long t = corNowMs();
    bool found = false;

    snprintf(path, sizeof(path), "%s/access.log", server.dir);
    snprintf(want, sizeof(want), "\"target\":\"%s\"", target);
    while (!found && corNowMs() - t < 10000) {
        FILE* f = fopen(path, "r");

        while (f != NULL && !found && fgets(line, (int)cap, f) != NULL) {
            found = strstr(line, want) != NULL;
        }
        if (f != NULL) {
            fclose(f);
        }
        usleep(found ? 0 : 20 * 1000);
    }
    ck_assert_msg(found, "no access log line for %s", target);
}

/* A client that leaves while its handler waits (a sleep, a park): the
 * handler is cancelled and answers to nobody, and its access-log line
 * says so with "complete": false, not true. */
START_TEST(test_a_client_that_left_is_logged_incomplete)
{
    static const char* const targets[] = { "/sleep?ms=20000",
                                           "/park?ms=20000" };
    char line[4096];

    for (unsigned i = 0; i < 2; i++) {
        close(waitingRequest(targets[i], i + 1));
        accessLine(targets[i], line, sizeof(line));
        ck_assert_msg(strstr(line, "\"status\":503,") != NULL
                          && strstr(line, "\"complete\":false,") != NULL,
                      "%s", line);
    }
}
END_TEST

/* A fast stop ends a parked request's wait, on a coroutine and on a
 * worker alike: it is answered 503 (the server is stopping) at once, as
 * a sleep is, not 504. */
START_TEST(test_a_stop_answers_a_parked_request_503)
{
    int fd = waitingRequest("/park?ms=20000", 1);
    int status;
    ssize_t n;

    kill(server.pid, SIGTERM);
    n = corReadResponse(fd, buf, sizeof(buf), 5000);
    close(fd);
    ck_assert_int_eq(waitpid(server.pid, &status, 0), server.pid);
    server.pid = 0;
    ck_assert_msg(n > 0 && corStatus(buf) == 503, "%zd: %s", n,
                  n > 0 ? buf : "");
}
END_TEST

COR_TEST_SUITE(corRequestLife)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_route_timeout_answers_504);
    tcase_add_test(tc, test_handler_timeout_answers_504);
    tcase_add_test(tc, test_client_leaving_cancels_its_wait);
    tcase_add_test(tc, test_graceful_stop_waits_for_finish_phase);
    tcase_add_test(tc, test_reload_waits_for_finish_phase);
    tcase_add_test(tc, test_inline_after_coroutine_sees_its_request);
    tcase_add_test(tc, test_method_not_allowed_says_allow);
    tcase_add_test(tc, test_header_injection_refused);
    tcase_add_test(tc, test_json_access_log_escapes_as_json);
    tcase_add_test(tc, test_sleep_refuses_nonsense);
    tcase_add_test(tc, test_wake_reaches_every_loop);
    tcase_add_test(tc, test_a_client_that_left_is_logged_incomplete);
    tcase_add_test(tc, test_a_stop_answers_a_parked_request_503);
}
