/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The limits of every protocol's requests, the core's one mechanism
 * (core/corLimits.c): the verdicts on a head and a body at and one past
 * each limit, the one log line and the one counter a refusal gets
 * whichever protocol says it, and the answer the core sets for a request
 * past them. The file is included; the log, the metrics writer and the
 * response are caught here.
 */
#include "corTest.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../../core/corLimits.c"

static CorLimits limits;
static char logged[512];
static int logLines;
static char metrics[4096];

const CorLimits*
corLimits(void)
{
    return &limits;
}

void
corLog(CorLogLevel level, const char* fmt, ...)
{
    va_list ap;

    (void)level;
    va_start(ap, fmt);
    vsnprintf(logged, sizeof(logged), fmt, ap);
    va_end(ap);
    logLines++;
}

void
corMetricsPrintf(CorMetricsOut* out, const char* fmt, ...)
{
    size_t len = strlen(metrics);
    va_list ap;

    (void)out;
    va_start(ap, fmt);
    vsnprintf(metrics + len, sizeof(metrics) - len, fmt, ap);
    va_end(ap);
}

void
corRespondSet(CorRequest* r, int status, const char* contentType,
              const void* body, size_t len)
{
    r->status = status;
    r->contentType = contentType;
    r->responseBody = body;
    r->responseLen = len;
}

static void
setUp(void)
{
    limits = (CorLimits){ .headerBytes = 64,
                          .headerCount = 2,
                          .bodyBytes = 10,
                          .requestTimeoutMs = 30000,
                          .bodyTimeoutMs = 10000 };
    logged[0] = metrics[0] = '\0';
    logLines = 0;
}

static CorRequest
request(const char* path, const CorHeader* headers, unsigned count)
{
    return (CorRequest){ .method = "GET",
                         .methodLen = 3,
                         .path = path,
                         .pathLen = strlen(path),
                         .headers = headers,
                         .headerCount = count,
                         .version = "COR/1",
                         .remote = "192.0.2.7" };
}

/* A path of len bytes in buf. */
static const char*
pathOf(char* buf, size_t len)
{
    memset(buf, 'p', len);
    buf[0] = '/';
    buf[len] = '\0';
    return buf;
}

/* The head as HTTP/1.1 writes it: "GET /p HTTP/1.1\r\n", each field as
 * "Name: value\r\n", the empty line. */
START_TEST(test_head_at_and_past_each_limit)
{
    static const CorHeader two[2] = { { "A", 1, "1", 1 }, { "B", 1, "2", 1 } };
    static const CorHeader three[3] = { { "A", 1, "1", 1 },
                                        { "B", 1, "2", 1 },
                                        { "C", 1, "3", 1 } };
    static const CorHeader wide[1] = { { "Xname", 5, "v", 1 } };
    char path[64];
    CorRequest r;

    r = request("/p", two, 2);
    ck_assert_int_eq(corLimitsHead(&r), 0);
    r = request("/p", three, 3);
    ck_assert_int_eq(corLimitsHead(&r), 431); /* header_count */
    /* 3 + 49 + 12 = 64: the line alone fits, with the empty line not. */
    r = request(pathOf(path, 49), NULL, 0);
    ck_assert_int_eq(corLimitsHead(&r), 431);
    r = request(pathOf(path, 47), NULL, 0);
    ck_assert_int_eq(corLimitsHead(&r), 0); /* 62 + 2 */
    r = request(path, wide, 1);
    ck_assert_int_eq(corLimitsHead(&r), 431); /* header_bytes */
    r = request(pathOf(path, 50), NULL, 0);
    ck_assert_int_eq(corLimitsHead(&r), 414); /* the line alone */
}
END_TEST

START_TEST(test_body_at_and_past_body_bytes)
{
    CorRequest r = request("/p", NULL, 0);

    ck_assert_int_eq(corLimitsBody(NULL, 10), 0);
    ck_assert_int_eq(corLimitsBody(NULL, 11), 413);
    r.bodyLen = 10;
    ck_assert_int_eq(corLimitsRequest(&r), 0);
    r.bodyLen = 11;
    ck_assert_int_eq(corLimitsRequest(&r), 413);
}
END_TEST

/* A request whose route has its own limits is judged by them, the head
 * still by the top level's. */
START_TEST(test_body_by_its_routes_limits)
{
    CorRequest r = request("/p", NULL, 0);
    CorLimits route = *corLimits();

    route.bodyBytes = 100;
    r.limits = &route;
    ck_assert_ptr_eq(corLimitsOf(&r), &route);
    ck_assert_ptr_eq(corLimitsOf(NULL), corLimits());
    ck_assert_int_eq(corLimitsBody(&r, 100), 0);
    ck_assert_int_eq(corLimitsBody(&r, 101), 413);
    r.bodyLen = 50;
    ck_assert_int_eq(corLimitsRequest(&r), 0);
    r.bodyLen = 101;
    ck_assert_int_eq(corLimitsRequest(&r), 413);
    route.bodyBytes = 1;
    r.bodyLen = 5;
    ck_assert_int_eq(corLimitsRequest(&r), 413);
}
END_TEST

/* Every protocol's refusal is one line and one count, by protocol and
 * status; a status that is not a limit's is neither. */
START_TEST(test_a_refusal_is_said_and_counted_once)
{
    corLimitsRefused("mqtt", "broker", "a message of 11 bytes on t", 413);
    ck_assert_int_eq(logLines, 1);
    ck_assert_str_eq(logged, "mqtt: broker: a message of 11 bytes on t is "
                             "past the limits (limits.body_bytes 10): "
                             "refused 413");
    corLimitsRefused("http", NULL, "a request", 408);
    ck_assert_str_eq(logged, "http: -: a request is past the limits "
                             "(limits.request_timeout 30000 ms, "
                             "body_timeout 10000 ms): refused 408");
    corLimitsRefused("http", "192.0.2.7", "a request", 431);
    corLimitsRefused("http", "192.0.2.7", "a request", 500);
    ck_assert_int_eq(logLines, 3);
    corLimitsEmit(NULL);
    ck_assert_ptr_nonnull(strstr(metrics, "# TYPE cor_requests_refused_total "
                                          "counter\n"));
    ck_assert_ptr_nonnull(strstr(metrics, "{protocol=\"mqtt\",status="
                                          "\"413\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(metrics, "{protocol=\"http\",status="
                                          "\"408\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(metrics, "{protocol=\"http\",status="
                                          "\"431\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(metrics, "{protocol=\"http\",status="
                                          "\"413\"} 0\n"));
    ck_assert_str_eq(corLimitsText(413), "413 Content Too Large\n");
    ck_assert_ptr_null(corLimitsText(500));
}
END_TEST

/* What corRequestServe asks before any handler: a request past the
 * limits gets its answer set, named by its protocol (its version). */
START_TEST(test_a_request_past_the_limits_is_answered)
{
    CorRequest r = request("/p", NULL, 0);

    ck_assert_int_eq(corLimitsAnswer(&r, corLimitsRequest(&r)), 0);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(logLines, 0);
    r.bodyLen = 11;
    ck_assert_int_eq(corLimitsAnswer(&r, corLimitsRequest(&r)), 413);
    ck_assert_int_eq(r.status, 413);
    ck_assert_str_eq(r.responseBody, "413 Content Too Large\n");
    ck_assert_str_eq(logged, "cor: 192.0.2.7: GET /p (0 headers, 11 body "
                             "bytes) is past the limits (limits.body_bytes "
                             "10): refused 413");
    r.version = NULL;
    ck_assert_int_eq(corLimitsAnswer(&r, 431), 431);
    ck_assert_ptr_nonnull(strstr(logged, "unknown: "));
}
END_TEST

/* More protocols than it counts apart: the last slot takes the rest. */
START_TEST(test_protocols_past_the_table_are_counted)
{
    char name[16];

    for (int i = 0; i < PROTOCOLS_MAX + 2; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        corLimitsRefused(name, "x", "a request", 413);
    }
    corLimitsEmit(NULL);
    ck_assert_ptr_nonnull(strstr(metrics, "{protocol=\"p7\",status="
                                          "\"413\"} 3\n"));
    ck_assert_ptr_null(strstr(metrics, "\"p8\""));
}
END_TEST

COR_TEST_SUITE(corLimits)
{
    tcase_add_checked_fixture(tc, setUp, NULL);
    tcase_add_test(tc, test_head_at_and_past_each_limit);
    tcase_add_test(tc, test_body_at_and_past_body_bytes);
    tcase_add_test(tc, test_body_by_its_routes_limits);
    tcase_add_test(tc, test_a_refusal_is_said_and_counted_once);
    tcase_add_test(tc, test_a_request_past_the_limits_is_answered);
    tcase_add_test(tc, test_protocols_past_the_table_are_counted);
}
