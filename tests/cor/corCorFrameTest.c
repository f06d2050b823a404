/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor:// frames: the HELLO of the spec's test vector byte for byte, the
 * seed's HELLO (terms 228) and other versions refused, headers checked
 * (magic, type, flags, reserved, length), frames whole or refused, and
 * the handshake frames kept out of the tables.
 */
#include "corTest.h"

#include <errno.h>
#include <string.h>

#include "corCorCodec.h"

#define BYTES(lit) (const uint8_t*)(lit), sizeof(lit) - 1

/* The spec's test vector: our HELLO, header and tree, 52 bytes. */
static const uint8_t hello[] = { 0xc0, 0x4f, 0x52, 0x01, 0x01, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00,
                                 0x06, 0x22, 0x32, 0x00, 0x07, 0x76, 0x65, 0x72,
                                 0x73, 0x69, 0x6f, 0x6e, 0x00, 0x12, 0x00, 0x05,
                                 0x74, 0x65, 0x72, 0x6d, 0x73, 0x00, 0x12, 0x00,
                                 0x0a, 0x6e, 0x61, 0x6d, 0x65, 0x73, 0x70, 0x61,
                                 0x63, 0x65, 0x73, 0x00 };

/* The seed's HELLO tree: terms 228, namespaces 3. */
#define SEED_HELLO                                                             \
    "\x06\x24\x32\x00\x07version\x00\xf2\x00\x05terms\x00\xc8\x03"             \
    "\x72\x00\x0anamespaces\x00"

START_TEST(test_hello_is_the_test_vector)
{
    CorCorTables* t = corCorTablesNew();
    CorBuf b = { 0 };
    json_t* tree = corCorHelloTree(false);
    char why[COR_COR_WHY_MAX] = "";
    CorCorHead h;
    json_t* back;

    /* Tables given or not, a HELLO is encoded without. */
    for (int i = 0; i < 2; i++) {
        b.len = 0;
        ck_assert_int_eq(corCorFrameEncode(i ? t : NULL, COR_COR_HELLO, 0, tree,
                                           &b, why, sizeof(why)),
                         52);
        ck_assert_uint_eq(b.len, sizeof(hello));
        ck_assert_mem_eq(b.data, hello, sizeof(hello));
    }
    ck_assert_uint_eq(corCorTablesNames(t), 0);
    ck_assert_int_eq(corCorFrameDecode(t, hello, sizeof(hello),
                                       COR_COR_FRAME_MAX, &h, &back, why,
                                       sizeof(why)),
                     0);
    ck_assert_int_eq(h.type, COR_COR_HELLO);
    ck_assert_uint_eq(h.id, 0);
    ck_assert_uint_eq(h.length, 36);
    ck_assert(json_equal(back, tree));
    ck_assert_int_eq(corCorHelloCheck(back, why, sizeof(why)), 0);
    ck_assert_uint_eq(corCorTablesNames(t), 0);
    /* HELLO_ACK: the same tree, type 2. */
    b.len = 0;
    corCorFrameEncode(t, COR_COR_HELLO_ACK, 0, tree, &b, NULL, 0);
    ck_assert_uint_eq(b.data[4], 2);
    ck_assert_mem_eq(b.data + 5, hello + 5, sizeof(hello) - 5);
    json_decref(back);
    json_decref(tree);
    corBufFree(&b);
    corCorTablesFree(t);
}
END_TEST

START_TEST(test_other_hellos_are_refused)
{
    char why[COR_COR_WHY_MAX] = "";
    json_t* tree;
    json_t* other;

    ck_assert_int_eq(corCorTreeDecode(NULL, BYTES(SEED_HELLO), &tree, why,
                                      sizeof(why)),
                     0);
    ck_assert_int_eq(json_integer_value(json_object_get(tree, "terms")), 228);
    ck_assert_int_eq(corCorHelloCheck(tree, why, sizeof(why)), -EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "228 terms"));
    json_decref(tree);
    other = json_pack("{s:i, s:i, s:i}", "version", 2, "terms", 0, "namespaces",
                      0);
    ck_assert_int_eq(corCorHelloCheck(other, why, sizeof(why)), -EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "version 2"));
    json_decref(other);
    other = json_pack("{s:i, s:i, s:i}", "version", 1, "terms", 0, "namespaces",
                      3);
    ck_assert_int_eq(corCorHelloCheck(other, why, sizeof(why)), -EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "3 fixed namespaces"));
    json_decref(other);
    other = json_pack("{s:i, s:i}", "version", 1, "terms", 0);
    ck_assert_int_eq(corCorHelloCheck(other, why, sizeof(why)), -EPROTO);
    json_decref(other);
    other = json_pack("{s:s, s:i}", "version", "1", "terms", 0);
    ck_assert_int_eq(corCorHelloCheck(other, why, sizeof(why)), -EPROTO);
    json_decref(other);
    other = json_pack("[i]", 1);
    ck_assert_int_eq(corCorHelloCheck(other, why, sizeof(why)), -EPROTO);
    json_decref(other);
}
END_TEST

/* A header with one byte changed is refused with rc and why. */
static void
headRefused(size_t at, uint8_t byte, int rc, const char* expect)
{
    uint8_t head[COR_COR_HEAD_LEN];
    char why[COR_COR_WHY_MAX] = "";
    CorCorHead h;

    memcpy(head, hello, sizeof(head));
    head[at] = byte;
    ck_assert_int_eq(corCorHeadRead(head, sizeof(head), COR_COR_FRAME_MAX, &h,
                                    why, sizeof(why)),
                     rc);
    ck_assert_msg(strstr(why, expect) != NULL, "%s", why);
}

START_TEST(test_bad_headers_are_refused)
{
    char why[COR_COR_WHY_MAX] = "";
    CorCorHead h;

    headRefused(0, 0x47, -EPROTO, "magic 47 4f 52 01");
    headRefused(3, 0x02, -EPROTO, "magic");
    headRefused(4, 0, -EPROTO, "unknown type 0");
    headRefused(4, 11, -EPROTO, "unknown type 11");
    headRefused(5, 1, -EPROTO, "frame byte 5");
    headRefused(5, 2, -EPROTO, "frame byte 5");
    headRefused(6, 1, -EPROTO, "frame byte 6");
    headRefused(7, 0x80, -EPROTO, "frame byte 7");
    headRefused(15, 0x04, -EMSGSIZE, "over the limit");
    headRefused(15, 0xff, -EMSGSIZE, "over the limit");
    for (size_t k = 0; k < COR_COR_HEAD_LEN; k++) {
        ck_assert_int_eq(corCorHeadRead(hello, k, COR_COR_FRAME_MAX, &h, why,
                                        sizeof(why)),
                         -EAGAIN);
    }
    /* A lower limit of the caller's. */
    ck_assert_int_eq(corCorHeadRead(hello, sizeof(hello), 35, &h, why,
                                    sizeof(why)),
                     -EMSGSIZE);
    ck_assert_int_eq(corCorHeadRead(hello, sizeof(hello), 36, &h, why,
                                    sizeof(why)),
                     COR_COR_HEAD_LEN);
    /* Every type from 1 to 10 reads. */
    for (int type = COR_COR_HELLO; type <= COR_COR_DATA; type++) {
        uint8_t head[COR_COR_HEAD_LEN];

        corCorHeadWrite(head, (CorCorType)type, 0xa1b2c3d4u, 7);
        ck_assert_mem_eq(head + 8, "\xd4\xc3\xb2\xa1\x07\x00\x00\x00", 8);
        ck_assert_int_eq(corCorHeadRead(head, sizeof(head), 7, &h, why,
                                        sizeof(why)),
                         COR_COR_HEAD_LEN);
        ck_assert_int_eq(h.type, type);
        ck_assert_uint_eq(h.id, 0xa1b2c3d4u);
    }
}
END_TEST

/* Streams: flags only where a stream puts them (MORE on a RESPONSE;
 * MORE or CUT, not both, on DATA), DATA's bytes as they are, and the
 * HELLO's offer, which a peer of before ignores. */
START_TEST(test_streamed_frames)
{
    static const struct {
        CorCorType type;
        uint8_t flags;
        bool taken;
    } cases[] = {
        { COR_COR_RESPONSE, COR_COR_FLAG_MORE, true },
        { COR_COR_RESPONSE, COR_COR_FLAG_CUT, false },
        { COR_COR_REQUEST, COR_COR_FLAG_MORE, false },
        { COR_COR_HELLO, COR_COR_FLAG_MORE, false },
        { COR_COR_DATA, 0, true },
        { COR_COR_DATA, COR_COR_FLAG_MORE, true },
        { COR_COR_DATA, COR_COR_FLAG_CUT, true },
        { COR_COR_DATA, COR_COR_FLAG_MORE | COR_COR_FLAG_CUT, false },
        { COR_COR_DATA, 1, false },
    };
    char why[COR_COR_WHY_MAX] = "";
    CorBuf b = { 0 };
    CorCorHead h;
    json_t* tree = NULL;
    json_t* offer = corCorHelloTree(true);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t head[COR_COR_HEAD_LEN];

        corCorHeadWrite(head, cases[i].type, 5, 0);
        corCorHeadFlagsSet(head, cases[i].flags);
        ck_assert_int_eq(corCorHeadRead(head, sizeof(head), 64, &h, why,
                                        sizeof(why)),
                         cases[i].taken ? COR_COR_HEAD_LEN : -EPROTO);
        ck_assert(!cases[i].taken || h.flags == cases[i].flags);
    }
    ck_assert_int_eq(corCorDataEncode(&b, 7, COR_COR_FLAG_MORE, "\0\xff", 2),
                     COR_COR_HEAD_LEN + 2);
    ck_assert_int_eq(corCorFrameDecode(NULL, b.data, b.len, 64, &h, &tree, why,
                                       sizeof(why)),
                     0);
    ck_assert_ptr_null(tree);
    ck_assert_int_eq(h.type, COR_COR_DATA);
    ck_assert_uint_eq(h.id, 7);
    ck_assert_uint_eq(h.length, 2);
    /* docs/cor-protocol.md's test vector. */
    ck_assert_mem_eq(b.data,
                     "\xc0\x4f\x52\x01\x0a\x02\x00\x00\x07\x00\x00\x00"
                     "\x02\x00\x00\x00\x00\xff",
                     18);
    corBufFree(&b);
    /* The offer: a fourth member, which corCorHelloCheck passes by. */
    ck_assert_int_eq(corCorHelloCheck(offer, why, sizeof(why)), 0);
    ck_assert(corCorHelloStream(offer));
    json_decref(offer);
    offer = corCorHelloTree(false);
    ck_assert(!corCorHelloStream(offer));
    json_decref(offer);
}
END_TEST

START_TEST(test_frames_are_whole_or_refused)
{
    CorCorTables* s = corCorTablesNew();
    CorCorTables* r = corCorTablesNew();
    CorBuf b = { 0 };
    json_t* tree = json_pack("{s:s, s:s, s:{s:s}}", "verb", "GET", "path", "/a",
                             "headers", "Accept", "*/*");
    char why[COR_COR_WHY_MAX] = "";
    CorCorHead h;
    json_t* back = NULL;
    int n = corCorFrameEncode(s, COR_COR_REQUEST, 77, tree, &b, why,
                              sizeof(why));

    ck_assert_int_gt(n, COR_COR_HEAD_LEN);
    /* Cut anywhere, or one byte long: refused, the tables untouched. */
    for (size_t k = 0; k <= (size_t)n + 1; k++) {
        if (k == (size_t)n) {
            continue;
        }
        b.len = k;
        if (k == (size_t)n + 1) {
            ck_assert_int_eq(corCorFrameEncode(NULL, COR_COR_PING, 0, NULL, &b,
                                               NULL, 0),
                             16);
        }
        ck_assert_int_eq(corCorFrameDecode(r, b.data, k, COR_COR_FRAME_MAX, &h,
                                           &back, why, sizeof(why)),
                         -EPROTO);
        ck_assert_ptr_null(back);
        ck_assert_uint_eq(corCorTablesNames(r), 0);
    }
    b.len = (size_t)n;
    ck_assert_int_eq(corCorFrameDecode(r, b.data, b.len, COR_COR_FRAME_MAX, &h,
                                       &back, why, sizeof(why)),
                     0);
    ck_assert_int_eq(h.type, COR_COR_REQUEST);
    ck_assert_uint_eq(h.id, 77);
    ck_assert(json_equal(tree, back));
    ck_assert_uint_eq(corCorTablesNames(r), 4);
    json_decref(back);
    /* Over the receiver's limit: refused before the tree is read. */
    ck_assert_int_eq(corCorFrameDecode(r, b.data, b.len, 8, &h, &back, why,
                                       sizeof(why)),
                     -EMSGSIZE);
    ck_assert_ptr_null(back);
    json_decref(tree);
    corBufFree(&b);
    corCorTablesFree(s);
    corCorTablesFree(r);
}
END_TEST

START_TEST(test_frames_without_a_tree)
{
    CorBuf b = { 0 };
    CorCorHead h;
    json_t* back = json_null();

    ck_assert_int_eq(corCorFrameEncode(NULL, COR_COR_PONG, 9, NULL, &b, NULL,
                                       0),
                     16);
    ck_assert_mem_eq(b.data,
                     "\xc0\x4f\x52\x01\x09\x00\x00\x00"
                     "\x09\x00\x00\x00\x00\x00\x00\x00",
                     16);
    ck_assert_int_eq(corCorFrameDecode(NULL, b.data, b.len, COR_COR_FRAME_MAX,
                                       &h, &back, NULL, 0),
                     0);
    ck_assert_int_eq(h.type, COR_COR_PONG);
    ck_assert_ptr_null(back);
    corBufFree(&b);
}
END_TEST

START_TEST(test_a_bad_tree_in_a_frame_says_where)
{
    uint8_t frame[COR_COR_HEAD_LEN + 3];
    char why[COR_COR_WHY_MAX] = "";
    CorCorHead h;
    json_t* back;

    corCorHeadWrite(frame, COR_COR_RESPONSE, 1, 3);
    memcpy(frame + COR_COR_HEAD_LEN, "\x07\x01\x00", 3);
    ck_assert_int_eq(corCorFrameDecode(NULL, frame, sizeof(frame),
                                       COR_COR_FRAME_MAX, &h, &back, why,
                                       sizeof(why)),
                     -EPROTO);
    ck_assert_str_eq(why, "tree byte 2: tag 0x00: type 0");
}
END_TEST

COR_TEST_SUITE(corCorFrame)
{
    tcase_add_test(tc, test_hello_is_the_test_vector);
    tcase_add_test(tc, test_other_hellos_are_refused);
    tcase_add_test(tc, test_bad_headers_are_refused);
    tcase_add_test(tc, test_streamed_frames);
    tcase_add_test(tc, test_frames_are_whole_or_refused);
    tcase_add_test(tc, test_frames_without_a_tree);
    tcase_add_test(tc, test_a_bad_tree_in_a_frame_says_where);
}
