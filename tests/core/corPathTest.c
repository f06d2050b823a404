/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corPathEscapedNormal (core/corPath.c): the encoded path's normal form,
 * which a strip_prefix cuts beside the decoded one. It must agree with
 * the parsers' normal form segment for segment: decoding it gives
 * exactly the path corHttpTargetDecode gives, for the paths a client
 * may aim at a guard ("//", "/./", "/../", "%2F", "%2e") and for random
 * ones, and both refuse the same paths above the root.
 */
#include "corTest.h"

#include "corHttpParse.h"
#include "corPath.h"

#include <stdlib.h>
#include <string.h>

START_TEST(test_escapes_kept_segments_normal)
{
    static const struct {
        const char* path;
        const char* normal;
    } cases[] = {
        { "/a/b", "/a/b" },
        { "/a/./b/../c", "/a/c" },
        { "/api/group%2Fproject", "/api/group%2Fproject" },
        { "/a%2Fb/../c", "/a/c" },
        { "/a/%2e%2E/b%20c", "/b%20c" },
        { "/a/..%2Fb%2f", "/b%2f" },
        { "/a%2F.", "/a/" },
        { "/x/%2e/y%3F", "/x/y%3F" },
        { "/a/b%2F..%2F..%2Fc", "/c" },
        { "/%41%2e%2e/b", "/%41%2e%2e/b" },
        { "//p/x", "/p/x" },
        { "///p//x%2F%2Fy", "/p/x%2Fy" },
        { "/%2F/p", "/p" },
        { "/%2Fp", "/p" },
        { "/p//", "/p/" },
        { "/.//p", "/p" },
        { "/a//..", "/" },
    };
    char out[64];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = corPathEscapedNormal(cases[i].path, strlen(cases[i].path), out);

        ck_assert_msg(n >= 0, "%s", cases[i].path);
        ck_assert_msg((size_t)n == strlen(cases[i].normal)
                          && memcmp(out, cases[i].normal, (size_t)n) == 0,
                      "%s: %.*s", cases[i].path, n, out);
    }
    ck_assert_int_lt(corPathEscapedNormal("/a/../..", 8, out), 0);
    ck_assert_int_lt(corPathEscapedNormal("//%2e%2E", 8, out), 0);
}
END_TEST

/* Random paths of the pieces that change a normal form: both forms
 * refuse the same ones, and decode to the same path otherwise. */
START_TEST(test_random_paths_agree_with_the_parser)
{
    static const char* pieces[] = { "/",   "/",   ".", "..",  "%2F", "%2f",
                                    "%2e", "%2E", "a", "%41", "%25" };
    unsigned wrong = 0;

    srandom(11);
    for (unsigned k = 0; k < 200000; k++) {
        char path[128] = "/";
        char normal[128];
        CorHttpTarget want;
        CorHttpTarget got;
        unsigned count = (unsigned)random() % 12;
        int n;
        int rc;

        for (unsigned i = 0; i < count; i++) {
            strcat(path, pieces[random() % 11]);
        }
        n = corPathEscapedNormal(path, strlen(path), normal);
        /* The parser decodes in place: path is the last thing read. */
        rc = corHttpTargetDecode(path, strlen(path), &want);
        if ((n < 0) != (rc != 0)) {
            wrong++;
        } else if (n >= 0) {
            normal[n] = '\0';
            wrong += corHttpTargetDecode(normal, (size_t)n, &got) != 0
                     || got.pathLen != want.pathLen
                     || memcmp(got.path, want.path, got.pathLen) != 0;
        }
    }
    ck_assert_uint_eq(wrong, 0);
}
END_TEST

COR_TEST_SUITE(corPath)
{
    tcase_add_test(tc, test_escapes_kept_segments_normal);
    tcase_add_test(tc, test_random_paths_agree_with_the_parser);
}
