/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP server's reason phrases (modules/http/corHttpResponse.c,
 * included for its statics): every status of IANA's registry has its own,
 * a status outside it says "Unknown", and an error answer's status line
 * and body carry the phrase (426 was "Unknown").
 */
#include "corTest.h"
#include "../../modules/http/corHttpResponse.c"

#include <stdio.h>
#include <string.h>

/* What the writer logs when a handler's status is no final one: the
 * status line, not the log, is this test's. */
void
corLog(CorLogLevel level, const char* fmt, ...)
{
    (void)level;
    (void)fmt;
}

const char*
corRequestHandlerName(const CorRequest* r)
{
    (void)r;
    return "test";
}

/* IANA's HTTP Status Code Registry, as RFC 9110 section 18.3 and the
 * later RFCs leave it. */
static const int registered[] = {
    100, 101, 102, 103, 200, 201, 202, 203, 204, 205, 206, 207, 208,
    226, 300, 301, 302, 303, 304, 305, 306, 307, 308, 400, 401, 402,
    403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415,
    416, 417, 418, 421, 422, 423, 424, 425, 426, 428, 429, 431, 451,
    500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
};

START_TEST(test_every_registered_status_has_its_phrase)
{
    for (size_t i = 0; i < sizeof(registered) / sizeof(registered[0]); i++) {
        ck_assert_msg(strcmp(corHttpStatusText(registered[i]), "Unknown") != 0,
                      "%d has no reason phrase", registered[i]);
    }
    ck_assert_str_eq(corHttpStatusText(426), "Upgrade Required");
    ck_assert_str_eq(corHttpStatusText(421), "Misdirected Request");
    ck_assert_str_eq(corHttpStatusText(422), "Unprocessable Content");
    ck_assert_str_eq(corHttpStatusText(451), "Unavailable For Legal Reasons");
    ck_assert_str_eq(corHttpStatusText(511), "Network Authentication Required");
}
END_TEST

START_TEST(test_an_unregistered_status_is_unknown)
{
    static const int others[] = { -1,  0,   99,  104, 209, 299, 309, 419,
                                  427, 430, 432, 450, 509, 512, 599, 1000 };

    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        ck_assert_str_eq(corHttpStatusText(others[i]), "Unknown");
    }
}
END_TEST

START_TEST(test_an_error_answer_carries_the_phrase)
{
    HttpLoop hl = { .dateSecond = 0 };
    HttpConn c = { .hl = &hl };
    char* text;

    ck_assert_int_eq(corHttpErrorAppend(&c, 426), 0);
    text = strndup((char*)c.k.out.data, c.k.out.len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strncmp(text, "HTTP/1.1 426 Upgrade Required\r\n", 31) == 0,
                  "%s", text);
    ck_assert_msg(strstr(text, "\r\n\r\n426 Upgrade Required\n") != NULL, "%s",
                  text);
    free(text);
    free(c.k.out.data);
}
END_TEST

COR_TEST_SUITE(corHttpStatus)
{
    tcase_add_test(tc, test_every_registered_status_has_its_phrase);
    tcase_add_test(tc, test_an_unregistered_status_is_unknown);
    tcase_add_test(tc, test_an_error_answer_carries_the_phrase);
}
