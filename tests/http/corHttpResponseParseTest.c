/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 response head parser: valid heads (reason or none, the
 * framings, keep-alive by version and Connection), every head fed a byte
 * at a time, the limits, and a corpus of malformed heads each refused with
 * its reason.
 */
#include "corTest.h"
#include "corHttpParse.h"

#include <stdio.h>
#include <string.h>

static const CorHttpLimits limits = {
    .headerBytes = 4096,
    .maxHeaders = 16,
};

static CorHttpHeader headerArray[64];
static CorHttpResponseHead head = { .headers = headerArray };

static int
parse(const char* text)
{
    return corHttpParseResponseHead(text, strlen(text), &limits, &head);
}

/* Every proper prefix of text waits for more bytes. */
static void
checkPrefixesWait(const char* text)
{
    size_t n = strlen(text);

    for (size_t i = 0; i < n; i++) {
        int rc = corHttpParseResponseHead(text, i, &limits, &head);

        ck_assert_msg(rc == 0, "prefix %zu of \"%s\" gave %d", i, text, rc);
    }
}

START_TEST(test_status_line_and_fields)
{
    const char* text = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                       "X-A:  b c \r\n\r\nhello";

    ck_assert_int_eq(parse(text), (int)(strlen(text) - 5));
    ck_assert_int_eq(head.status, 200);
    ck_assert_int_eq(head.versionMinor, 1);
    ck_assert_int_eq((int)head.reasonLen, 2);
    ck_assert_int_eq(memcmp(head.reason, "OK", 2), 0);
    ck_assert_int_eq((int)head.contentLength, 5);
    ck_assert(!head.chunked);
    ck_assert(head.keepAlive);
    ck_assert_uint_eq(head.headerCount, 2);
    ck_assert_int_eq((int)headerArray[1].valueLen, 3);
    ck_assert_int_eq(memcmp(headerArray[1].value, "b c", 3), 0);
    checkPrefixesWait("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
}
END_TEST

START_TEST(test_reason_may_be_empty)
{
    ck_assert_int_gt(parse("HTTP/1.1 204 \r\n\r\n"), 0);
    ck_assert_int_eq(head.status, 204);
    ck_assert_int_eq((int)head.reasonLen, 0);
    ck_assert_int_gt(parse("HTTP/1.1 404\r\n\r\n"), 0);
    ck_assert_int_eq(head.status, 404);
    ck_assert_int_gt(parse("HTTP/1.1 500 Internal \xe9rror\r\n\r\n"), 0);
}
END_TEST

START_TEST(test_framings)
{
    ck_assert_int_gt(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
                           "\r\n\r\n"),
                     0);
    ck_assert(head.chunked);
    ck_assert_int_eq((int)head.contentLength, -1);
    ck_assert_int_gt(parse("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n"
                           "Content-Length: 7\r\n\r\n"),
                     0);
    ck_assert_int_eq((int)head.contentLength, 7);
    ck_assert_int_gt(parse("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n"),
                     0);
    ck_assert_int_eq((int)head.contentLength, 7);
    ck_assert_int_gt(parse("HTTP/1.0 200 OK\r\n\r\n"), 0);
    ck_assert(!head.chunked);
    ck_assert_int_eq((int)head.contentLength, -1);
}
END_TEST

START_TEST(test_keep_alive)
{
    ck_assert_int_gt(parse("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"), 0);
    ck_assert(!head.keepAlive);
    ck_assert_int_gt(parse("HTTP/1.0 200 OK\r\n\r\n"), 0);
    ck_assert(!head.keepAlive);
    ck_assert_int_gt(parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n"
                           "\r\n"),
                     0);
    ck_assert(head.keepAlive);
}
END_TEST

START_TEST(test_informational)
{
    const char* text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";

    ck_assert_int_eq(parse(text), 25);
    ck_assert_int_eq(head.status, 100);
    ck_assert_int_gt(parse("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n"
                           "\r\n"),
                     0);
    ck_assert_int_eq(head.status, 103);
}
END_TEST

static const struct {
    const char* text;
    int rc;
} malformed[] = {
    { "HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "HTTP/1.1 20 OK\r\n\r\n", COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "HTTP/1.1 2000 OK\r\n\r\n", COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "HTTP/1.1 099 Low\r\n\r\n", COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "HTTP/1.1 600 High\r\n\r\n", COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "HTTP/1.1  200 OK\r\n\r\n", COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "http/1.1 200 OK\r\n\r\n", COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "ICY 200 OK\r\n\r\n", COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "HTTP/1.1 200 O\x01K\r\n\r\n", COR_HTTP_RESPONSE_BAD_STATUS_LINE },
    { "HTTP/2.0 200 OK\r\n\r\n", COR_HTTP_RESPONSE_BAD_VERSION },
    { "HTTP/1.2 200 OK\r\n\r\n", COR_HTTP_RESPONSE_BAD_VERSION },
    { "HTTP/1x1 200 OK\r\n\r\n", COR_HTTP_RESPONSE_BAD_VERSION },
    { "HTTP/1.1 200 OK\r\nA : b\r\n\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\nA: b\r\n\tc\r\n\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\nA b\r\n\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\n: b\r\n\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\nA: b\nC: d\r\n\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\nA: b\rC: d\r\n\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\nA: b\x7f\r\n\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\nA: b\r\n\r\r\n", COR_HTTP_RESPONSE_BAD_FIELD },
    { "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_LENGTH },
    { "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_LENGTH },
    { "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_LENGTH },
    { "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_LENGTH },
    { "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
      COR_HTTP_RESPONSE_BAD_LENGTH },
    { "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_LENGTH },
    { "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
      "Transfer-Encoding: chunked\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_FRAMING },
    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
      "Content-Length: 5\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_FRAMING },
    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_FRAMING },
    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
      "Transfer-Encoding: chunked\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_FRAMING },
    { "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_FRAMING },
    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_CODING },
    { "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
      COR_HTTP_RESPONSE_BAD_CODING },
};

START_TEST(test_malformed_corpus)
{
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        int rc = parse(malformed[i].text);

        ck_assert_msg(rc == malformed[i].rc, "case %zu (%s): %d, want %d", i,
                      malformed[i].text, rc, malformed[i].rc);
        ck_assert_ptr_nonnull(corHttpResponseErrorText(rc));
    }
}
END_TEST

START_TEST(test_limits)
{
    char big[8192];
    int n;

    n = snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nA: %05000d\r\n\r\n", 0);
    ck_assert_int_eq(corHttpParseResponseHead(big, (size_t)n, &limits, &head),
                     COR_HTTP_RESPONSE_TOO_LARGE);
    n = 0;
    n += snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i < 17; i++) {
        n += snprintf(big + n, sizeof(big) - (size_t)n, "H%d: v\r\n", i);
    }
    n += snprintf(big + n, sizeof(big) - (size_t)n, "\r\n");
    ck_assert_int_eq(corHttpParseResponseHead(big, (size_t)n, &limits, &head),
                     COR_HTTP_RESPONSE_TOO_MANY_FIELDS);
}
END_TEST

COR_TEST_SUITE(corHttpResponseParse)
{
    tcase_add_test(tc, test_status_line_and_fields);
    tcase_add_test(tc, test_reason_may_be_empty);
    tcase_add_test(tc, test_framings);
    tcase_add_test(tc, test_keep_alive);
    tcase_add_test(tc, test_informational);
    tcase_add_test(tc, test_malformed_corpus);
    tcase_add_test(tc, test_limits);
}
