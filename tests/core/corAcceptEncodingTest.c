/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corAcceptEncodingWeights and corAcceptEncodingFirst (core/
 * corAcceptEncoding.c): the weight each coding gets from a header, in
 * thousandths, by its name, by "*", or none; what a q that is no qvalue
 * does; and the first of a server's order that a header accepts. The
 * fuzzer (fuzz/corAcceptEncodingFuzz.c) checks properties; these are the
 * values.
 */
#include "corTest.h"

#include "corAcceptEncoding.h"

#include <stdio.h>
#include <string.h>

/* The weights of value as "zstd br gzip". */
static const char*
weightsOf(const char* value)
{
    static char text[64];
    unsigned w[COR_CODINGS];

    corAcceptEncodingWeights(value, value != NULL ? strlen(value) : 0, w);
    snprintf(text, sizeof(text), "%u %u %u", w[COR_CODING_ZSTD],
             w[COR_CODING_BR], w[COR_CODING_GZIP]);
    return text;
}

START_TEST(test_weights)
{
    ck_assert_str_eq(weightsOf(NULL), "0 0 0");
    ck_assert_str_eq(weightsOf(""), "0 0 0");
    ck_assert_str_eq(weightsOf("identity"), "0 0 0");
    ck_assert_str_eq(weightsOf("gzip, deflate, br"), "0 1000 1000");
    ck_assert_str_eq(weightsOf("gzip;q=0.5, br;q=1.000, zstd;q=0.25"),
                     "250 1000 500");
    ck_assert_str_eq(weightsOf("GZIP ; Q=0.8 , ZSTD"), "1000 0 800");
    ck_assert_str_eq(weightsOf("x-gzip;q=0.3"), "0 0 300");
    ck_assert_str_eq(weightsOf("*;q=0.2, br;q=0"), "200 0 200");
    ck_assert_str_eq(weightsOf("*"), "1000 1000 1000");
    ck_assert_str_eq(weightsOf("*;q=0"), "0 0 0");
    /* 0 refuses in every spelling; past three digits only "not zero"
     * counts; what is no qvalue does not refuse. */
    ck_assert_str_eq(weightsOf("gzip;q=0.000, br;q=0., zstd;q=0"), "0 0 0");
    ck_assert_str_eq(weightsOf("gzip;q=0.0001"), "0 0 1");
    ck_assert_str_eq(weightsOf("gzip;q=abc, br;q=2, zstd;q=0.5x"),
                     "1000 1000 1000");
    /* Another parameter before q; the last mention of a coding wins. */
    ck_assert_str_eq(weightsOf("gzip;level=1;q=0.1, gzip;q=0.7"), "0 0 700");
}
END_TEST

START_TEST(test_first_in_the_servers_order)
{
    static const CorCoding order[] = { COR_CODING_ZSTD, COR_CODING_BR,
                                       COR_CODING_GZIP };
    const char* v = "gzip;q=1, br;q=0.1";

    ck_assert_int_eq(corAcceptEncodingFirst(v, strlen(v), order, 3),
                     COR_CODING_BR);
    v = "zstd;q=0, br;q=0, *";
    ck_assert_int_eq(corAcceptEncodingFirst(v, strlen(v), order, 3),
                     COR_CODING_GZIP);
    ck_assert_int_eq(corAcceptEncodingFirst(v, strlen(v), order, 2), -1);
    ck_assert_int_eq(corAcceptEncodingFirst(NULL, 0, order, 3), -1);
    ck_assert_str_eq(corCodingNames[COR_CODING_BR], "br");
}
END_TEST

COR_TEST_SUITE(corAcceptEncoding)
{
    tcase_add_test(tc, test_weights);
    tcase_add_test(tc, test_first_in_the_servers_order);
}
