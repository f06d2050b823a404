/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gzip of a body known whole (modules/compress/corCompressWhole.c,
 * included): a body in memory, deflated where it is, and a file's body in
 * pieces, kept until its end, both come out as one gzip member that zlib
 * reads back to the same bytes; a flush before the end passes nothing,
 * and a body longer than it said still comes out whole.
 */
#include "corTest.h"

#include "corCompressWhole.c"

#include <zlib.h>

/* The filter chain's next step, here: what was passed on, kept. */
struct CorFilterOut {
    unsigned char bytes[1 << 18];
    size_t len;
    unsigned pieces;
};

int
corFilterPass(CorFilterOut* out, const void* data, size_t len)
{
    ck_assert_uint_le(out->len + len, sizeof(out->bytes));
    memcpy(out->bytes + out->len, data, len);
    out->len += len;
    out->pieces++;
    return 0;
}

static CorFilterOut out;
static unsigned char page[100000];

static void
setUp(void)
{
    memset(&out, 0, sizeof(out));
    for (size_t i = 0; i < sizeof(page); i++) {
        page[i] =
            (unsigned char)("the quick brown fox jumps over the dog. "[i % 40]
                            + (i % 997 == 0));
    }
}

static CompressEncoder
encoder(size_t said)
{
    return (CompressEncoder){ .encoding = COR_CODING_GZIP,
                              .wholeMode = true,
                              .level = 6,
                              .wholeCap = said };
}

/* What was passed on is one gzip member of len bytes of page. */
static void
gunzipsTo(size_t len)
{
    static unsigned char back[sizeof(page) * 2];
    z_stream z = { 0 };

    ck_assert_int_eq(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = out.bytes;
    z.avail_in = (uInt)out.len;
    z.next_out = back;
    z.avail_out = sizeof(back);
    ck_assert_int_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
    ck_assert_uint_eq(z.avail_in, 0);
    ck_assert_uint_eq(z.total_out, len);
    ck_assert_mem_eq(back, page, len);
    inflateEnd(&z);
}

START_TEST(test_a_body_in_memory)
{
    CompressEncoder e = encoder(sizeof(page));

    ck_assert_int_eq(corCompressWholeEncode(&e, page, sizeof(page),
                                            COR_FILTER_LAST, &out),
                     0);
    ck_assert_ptr_null(e.whole); /* not copied */
    ck_assert_uint_eq(out.pieces, 1);
    ck_assert_uint_lt(out.len, sizeof(page) / 10);
    gunzipsTo(sizeof(page));
}
END_TEST

START_TEST(test_a_file_in_pieces_with_a_flush)
{
    CompressEncoder e = encoder(sizeof(page));
    size_t piece = 64 * 1024;

    ck_assert_int_eq(corCompressWholeEncode(&e, page, piece, 0, &out), 0);
    ck_assert_int_eq(corCompressWholeEncode(&e, NULL, 0, COR_FILTER_FLUSH,
                                            &out),
                     0);
    ck_assert_uint_eq(out.pieces, 0);
    ck_assert_int_eq(corCompressWholeEncode(&e, page + piece,
                                            sizeof(page) - piece, 0, &out),
                     0);
    ck_assert_int_eq(corCompressWholeEncode(&e, NULL, 0, COR_FILTER_LAST, &out),
                     0);
    ck_assert_uint_eq(out.pieces, 1);
    gunzipsTo(sizeof(page));
    free(e.whole);
}
END_TEST

START_TEST(test_longer_than_it_said)
{
    CompressEncoder e = encoder(1000);

    ck_assert_int_eq(corCompressWholeEncode(&e, page, 600, 0, &out), 0);
    ck_assert_int_eq(corCompressWholeEncode(&e, page + 600, 40000, 0, &out), 0);
    ck_assert_int_eq(corCompressWholeEncode(&e, page + 40600, 400,
                                            COR_FILTER_LAST, &out),
                     0);
    gunzipsTo(41000);
    free(e.whole);
}
END_TEST

COR_TEST_SUITE(corCompressWhole)
{
    tcase_add_checked_fixture(tc, setUp, NULL);
    tcase_add_test(tc, test_a_body_in_memory);
    tcase_add_test(tc, test_a_file_in_pieces_with_a_flush);
    tcase_add_test(tc, test_longer_than_it_said);
}
