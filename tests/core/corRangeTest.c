/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Range parser (core/corRange.c, included): the forms RFC 9110 14.1.2
 * gives, and hostile values (huge numbers, floods of ranges and commas,
 * overlaps, garbage, values cut short, every byte value), none of which may
 * read past its length or give a range outside the file.
 */
#include "corTest.h"

#include "corRange.c"

#include <stdio.h>
#include <string.h>

static CorRange ranges[COR_RANGES_MAX];
static unsigned count;

static CorRangeResult
parse(const char* value, uint64_t size)
{
    return corRangeParse(value, strlen(value), size, ranges, &count);
}

/* Every range given lies inside a file of size bytes, and is not empty. */
static void
rangesInside(uint64_t size)
{
    ck_assert_uint_le(count, COR_RANGES_MAX);
    for (unsigned i = 0; i < count; i++) {
        ck_assert_uint_gt(ranges[i].len, 0);
        ck_assert_uint_lt(ranges[i].start, size);
        ck_assert_uint_le(ranges[i].len, size - ranges[i].start);
    }
}

START_TEST(test_the_rfc_forms)
{
    ck_assert_int_eq(parse("bytes=0-499", 10000), COR_RANGE_PARTIAL);
    ck_assert(count == 1 && ranges[0].start == 0 && ranges[0].len == 500);
    ck_assert_int_eq(parse("bytes=500-999", 10000), COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == 500 && ranges[0].len == 500);
    ck_assert_int_eq(parse("bytes=-500", 10000), COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == 9500 && ranges[0].len == 500);
    ck_assert_int_eq(parse("bytes=9500-", 10000), COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == 9500 && ranges[0].len == 500);
    ck_assert_int_eq(parse("bytes=0-0,-1", 10000), COR_RANGE_PARTIAL);
    ck_assert(count == 2 && ranges[1].start == 9999 && ranges[1].len == 1);
    /* The unit without case, blanks around the commas, empty elements. */
    ck_assert_int_eq(parse(" BYTES=1-2 , ,\t3-4,", 10), COR_RANGE_PARTIAL);
    ck_assert(count == 2 && ranges[1].start == 3 && ranges[1].len == 2);
}
END_TEST

START_TEST(test_ends_are_cut_and_outside_ranges_left_out)
{
    /* A last past the end is the end; a suffix longer than the file is
     * the whole file. */
    ck_assert_int_eq(parse("bytes=5-100", 10), COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == 5 && ranges[0].len == 5);
    ck_assert_int_eq(parse("bytes=-100", 10), COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == 0 && ranges[0].len == 10);
    /* A range starting past the end is left out; none left: 416. */
    ck_assert_int_eq(parse("bytes=10-20,2-3", 10), COR_RANGE_PARTIAL);
    ck_assert(count == 1 && ranges[0].start == 2);
    ck_assert_int_eq(parse("bytes=10-", 10), COR_RANGE_UNSATISFIABLE);
    ck_assert_int_eq(parse("bytes=-0", 10), COR_RANGE_UNSATISFIABLE);
    ck_assert_int_eq(parse("bytes=0-", 0), COR_RANGE_UNSATISFIABLE);
    ck_assert_int_eq(parse("bytes=-5", 0), COR_RANGE_UNSATISFIABLE);
}
END_TEST

START_TEST(test_what_is_not_understood_is_ignored)
{
    static const char* const bad[] = {
        "",
        "bytes",
        "bytes=",
        "bytes= , ,",
        "items=0-1",
        "bytes 0-1",
        "bytes=5-2",
        "bytes=a-b",
        "bytes=1-2-3",
        "bytes=--1",
        "bytes=-",
        "bytes=1",
        "bytes=0-1;2-3",
        "bytes=0x10-20",
        "bytes=+1-2",
        "bytes=1 2-3",
        "bytes=0-1,junk",
        "bytes=-1-2",
        "bytes==0-1",
        "bytes=\xff-\xfe",
        "bytes=0-1\r\nX: y",
    };

    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(parse(bad[i], 100) == COR_RANGE_WHOLE, "'%s'", bad[i]);
    }
}
END_TEST

START_TEST(test_huge_numbers_saturate)
{
    char value[512];

    ck_assert_int_eq(parse("bytes=0-99999999999999999999999999999999", 10),
                     COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == 0 && ranges[0].len == 10);
    ck_assert_int_eq(parse("bytes=99999999999999999999999999999999-", 10),
                     COR_RANGE_UNSATISFIABLE);
    ck_assert_int_eq(parse("bytes=-99999999999999999999999999999999", 10),
                     COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == 0 && ranges[0].len == 10);
    ck_assert_int_eq(parse("bytes=18446744073709551615-18446744073709551615",
                           UINT64_MAX),
                     COR_RANGE_UNSATISFIABLE);
    ck_assert_int_eq(parse("bytes=18446744073709551614-", UINT64_MAX),
                     COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == UINT64_MAX - 1 && ranges[0].len == 1);
    /* 500 digits. */
    memcpy(value, "bytes=1-", 8);
    memset(value + 8, '9', 500);
    value[508] = '\0';
    ck_assert_int_eq(parse(value, 1000), COR_RANGE_PARTIAL);
    ck_assert(ranges[0].start == 1 && ranges[0].len == 999);
}
END_TEST

START_TEST(test_floods_and_overlaps_get_the_whole_file)
{
    static char value[64 * 1024];
    size_t n = 6;

    /* More ranges than allowed. */
    memcpy(value, "bytes=", 6);
    for (unsigned i = 0; i <= COR_RANGES_MAX; i++) {
        n += (size_t)sprintf(value + n, "%u-%u,", i * 10, i * 10 + 1);
    }
    ck_assert_int_eq(parse(value, 100000), COR_RANGE_WHOLE);
    /* Exactly the most allowed. */
    n = 6;
    for (unsigned i = 0; i < COR_RANGES_MAX; i++) {
        n += (size_t)sprintf(value + n, "%u-%u,", i * 10, i * 10 + 1);
    }
    value[n] = '\0';
    ck_assert_int_eq(parse(value, 100000), COR_RANGE_PARTIAL);
    ck_assert_uint_eq(count, COR_RANGES_MAX);
    /* Overlaps that ask for more bytes than the file holds. */
    ck_assert_int_eq(parse("bytes=0-,0-", 100), COR_RANGE_WHOLE);
    ck_assert_int_eq(parse("bytes=0-60,40-99", 100), COR_RANGE_WHOLE);
    /* Commas by the thousand, and ranges outside by the thousand: only
     * time, linear, and no range. */
    memcpy(value, "bytes=", 6);
    memset(value + 6, ',', sizeof(value) - 7);
    value[sizeof(value) - 1] = '\0';
    ck_assert_int_eq(parse(value, 100), COR_RANGE_WHOLE);
    n = 6;
    while (n + 16 < sizeof(value)) {
        n += (size_t)sprintf(value + n, "500-600,");
    }
    value[n] = '\0';
    ck_assert_int_eq(parse(value, 100), COR_RANGE_UNSATISFIABLE);
}
END_TEST

/* Every value cut at every length, and every byte in every place of a
 * good one: never a read past the length (ASan's build says so), never
 * a range outside the file. */
START_TEST(test_every_cut_and_every_byte)
{
    static const char good[] = "bytes=0-9, 20-29 ,-5,40-";
    char copy[sizeof(good)];
    CorRangeResult res;

    for (size_t len = 0; len < sizeof(good); len++) {
        char* cut = malloc(len > 0 ? len : 1);

        memcpy(cut, good, len);
        res = corRangeParse(cut, len, 100, ranges, &count);
        ck_assert(res == COR_RANGE_WHOLE || res == COR_RANGE_PARTIAL
                  || res == COR_RANGE_UNSATISFIABLE);
        rangesInside(100);
        free(cut);
    }
    for (size_t at = 0; at < sizeof(good) - 1; at++) {
        for (unsigned b = 0; b < 256; b++) {
            memcpy(copy, good, sizeof(good));
            copy[at] = (char)b;
            corRangeParse(copy, sizeof(good) - 1, 50, ranges, &count);
            rangesInside(50);
        }
    }
}
END_TEST

COR_TEST_SUITE(corRange)
{
    tcase_add_test(tc, test_the_rfc_forms);
    tcase_add_test(tc, test_ends_are_cut_and_outside_ranges_left_out);
    tcase_add_test(tc, test_what_is_not_understood_is_ignored);
    tcase_add_test(tc, test_huge_numbers_saturate);
    tcase_add_test(tc, test_floods_and_overlaps_get_the_whole_file);
    tcase_add_test(tc, test_every_cut_and_every_byte);
}
