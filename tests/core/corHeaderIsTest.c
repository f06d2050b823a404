/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corHeaderIs / corHeaderIsLen (corModule.h), the one compare of header
 * names without case: it must say what strncasecmp in the C locale says
 * (ASCII's letters folded, every other byte itself, bytes past 0x7F
 * among them), at every length around its words, for the near misses
 * ('^' and '~', '@' and '`', '[' and '{' differ by the case bit and are
 * not letters) and for random names.
 */
#include "corTest.h"

#include "corModule.h"

#include <stdlib.h>
#include <strings.h>

/* strncasecmp's verdict in the C locale, byte by byte: it would stop at
 * a NUL, which a name read off the wire may hold. */
static bool
reference(const char* a, size_t aLen, const char* b, size_t bLen)
{
    if (aLen != bLen) {
        return false;
    }
    for (size_t i = 0; i < aLen; i++) {
        char x[2] = { a[i], '\0' };
        char y[2] = { b[i], '\0' };

        if ((x[0] == '\0') != (y[0] == '\0')
            || (x[0] != '\0' && strcasecmp(x, y) != 0)) {
            return false;
        }
    }
    return true;
}

START_TEST(test_names_compare_as_strncasecmp)
{
    static const char* const names[] = {
        "Host",
        "host",
        "HOST",
        "te",
        "TE",
        "t",
        "a^",
        "a~",
        "A@",
        "a`",
        "[",
        "{",
        "\xc1",
        "\xe1",
        "Z",
        "z",
        "x-forwarded-for",
        "X-Forwarded-For",
        "X-Forwarded-Fox",
        "Content-Length",
        "content_length",
        "abcdefgh",
        "ABCDEFGH",
        "abcdefgi",
        "ABCDEFGHI",
        "abcdefghi",
        "abcdefghj",
        "",
    };
    const size_t n = sizeof(names) / sizeof(names[0]);

    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            CorHeader h = { names[i], strlen(names[i]), NULL, 0 };

            ck_assert_msg(corHeaderIsLen(&h, names[j], strlen(names[j]))
                              == reference(names[i], strlen(names[i]), names[j],
                                           strlen(names[j])),
                          "\"%s\" / \"%s\"", names[i], names[j]);
        }
    }
    CorHeader host = { "HoSt", 4, NULL, 0 };

    ck_assert(corHeaderIs(&host, "host"));
    ck_assert(!corHeaderIs(&host, "hosts"));
}
END_TEST

START_TEST(test_random_names_compare_as_strncasecmp)
{
    unsigned wrong = 0;

    srandom(7);
    for (unsigned k = 0; k < 200000; k++) {
        char a[24];
        char b[24];
        size_t len = (size_t)random() % 23;

        for (size_t i = 0; i < len; i++) {
            a[i] = (char)(random() % 256);
            b[i] = random() % 3 != 0 ? (char)(a[i] ^ (random() % 2 ? 0x20 : 0))
                                     : (char)(random() % 256);
        }
        CorHeader h = { a, len, NULL, 0 };

        wrong += corHeaderIsLen(&h, b, len) != reference(a, len, b, len);
    }
    ck_assert_uint_eq(wrong, 0);
}
END_TEST

COR_TEST_SUITE(corHeaderIs)
{
    tcase_add_test(tc, test_names_compare_as_strncasecmp);
    tcase_add_test(tc, test_random_names_compare_as_strncasecmp);
}
