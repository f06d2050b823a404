/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cor:// tree codec: every type round-trips (strings split and not,
 * ints at every varint boundary, floats in 4 and 8 bytes, booleans, null,
 * nested and empty containers) with the exact bytes the spec gives; the
 * tables fill up (1024 namespaces, 8192 names) with encoder and decoder in
 * step over many frames, and a failure on either side puts them back;
 * malformed trees are each refused with a reason and without a crash.
 */
#include "corTest.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corCorCodec.h"

/* A tree from bytes written in a string literal. */
#define BYTES(lit) (const uint8_t*)(lit), sizeof(lit) - 1

/* Encode tree with the sender's tables s, decode it with the receiver's
 * r: the same tree, the tables in step. Returns the bytes it took. */
static size_t
roundTrip(CorCorTables* s, CorCorTables* r, json_t* tree)
{
    CorBuf b = { 0 };
    char why[COR_COR_WHY_MAX] = "";
    json_t* back = NULL;
    int n = corCorTreeEncode(s, tree, &b, why, sizeof(why));

    ck_assert_msg(n > 0, "encode: %s", why);
    ck_assert_uint_eq((size_t)n, b.len);
    ck_assert_msg(corCorTreeDecode(r, b.data, b.len, &back, why, sizeof(why))
                      == 0,
                  "decode: %s", why);
    ck_assert_msg(json_equal(tree, back), "not the same tree");
    if (s != NULL) {
        ck_assert_uint_eq(corCorTablesNames(s), corCorTablesNames(r));
        ck_assert_uint_eq(corCorTablesNamespaces(s), corCorTablesNamespaces(r));
    }
    json_decref(back);
    corBufFree(&b);
    return (size_t)n;
}

/* The bytes tree encodes to with the tables t, checked against want. */
static void
encodesTo(CorCorTables* t, json_t* tree, const uint8_t* want, size_t len)
{
    CorBuf b = { 0 };
    char why[COR_COR_WHY_MAX] = "";
    int n = corCorTreeEncode(t, tree, &b, why, sizeof(why));

    ck_assert_msg(n >= 0, "%s", why);
    ck_assert_uint_eq(b.len, len);
    ck_assert_mem_eq(b.data, want, len);
    corBufFree(&b);
    json_decref(tree);
}

/* Decoding is refused with -EPROTO, a reason that holds expect, no tree,
 * and the tables r as they were. */
static void
refused(CorCorTables* r, const uint8_t* buf, size_t len, const char* expect)
{
    char why[COR_COR_WHY_MAX] = "";
    json_t* tree = json_null();
    unsigned names = r != NULL ? corCorTablesNames(r) : 0;
    unsigned namespaces = r != NULL ? corCorTablesNamespaces(r) : 0;
    int rc = corCorTreeDecode(r, buf, len, &tree, why, sizeof(why));

    ck_assert_msg(rc == -EPROTO, "rc %d for \"%s\"", rc, expect);
    ck_assert_ptr_null(tree);
    ck_assert_msg(strstr(why, expect) != NULL, "\"%s\" is not \"%s\"", why,
                  expect);
    if (r != NULL) {
        ck_assert_uint_eq(corCorTablesNames(r), names);
        ck_assert_uint_eq(corCorTablesNamespaces(r), namespaces);
    }
}

START_TEST(test_scalars_round_trip_in_their_bytes)
{
    encodesTo(NULL, json_null(), BYTES("\x05"));
    encodesTo(NULL, json_true(), BYTES("\x24"));
    encodesTo(NULL, json_false(), BYTES("\x04"));
    encodesTo(NULL, json_integer(0), BYTES("\x02"));
    encodesTo(NULL, json_integer(6), BYTES("\xc2"));
    encodesTo(NULL, json_integer(7), BYTES("\xe2\x0e"));
    encodesTo(NULL, json_integer(-1), BYTES("\xe2\x01"));
    encodesTo(NULL, json_integer(228), BYTES("\xe2\xc8\x03"));
    encodesTo(NULL, json_real(1.5), BYTES("\x23\x00\x00\xc0\x3f"));
    encodesTo(NULL, json_real(0.1),
              BYTES("\x03\x9a\x99\x99\x99\x99\x99\xb9\x3f"));
    encodesTo(NULL, json_string("ab"),
              BYTES("\x01\x00\x02"
                    "ab\x00"));
    encodesTo(NULL, json_string(""), BYTES("\x01\x00\x00\x00"));
    encodesTo(NULL, json_array(), BYTES("\x07\x00"));
    encodesTo(NULL, json_object(), BYTES("\x06\x00"));
    encodesTo(NULL, json_pack("[i,n]", 1, NULL), BYTES("\x07\x02\x22\x05"));
}
END_TEST

START_TEST(test_ints_round_trip_at_every_boundary)
{
    size_t len;

    /* Each length of zigzag varint, on both sides of its edge. */
    for (int k = 1; k <= 9; k++) {
        int64_t edge = (int64_t)1 << (7 * k - 1);
        int64_t values[] = { edge - 1, edge, -edge, -edge - 1 };

        for (int i = 0; i < 4; i++) {
            json_t* v = json_integer(values[i]);
            /* Zigzag makes edge - 1 and -edge the last of k bytes. */
            size_t want = i == 0 || i == 2 ? 1 + (size_t)k : 2 + (size_t)k;

            len = roundTrip(NULL, NULL, v);
            ck_assert_msg(len == want, "%lld: %zu bytes, not %zu",
                          (long long)values[i], len, want);
            json_decref(v);
        }
    }
    for (int64_t i = -200; i <= 200; i++) {
        json_t* v = json_integer(i);

        roundTrip(NULL, NULL, v);
        json_decref(v);
    }
    encodesTo(NULL, json_integer(INT64_MAX),
              BYTES("\xe2\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"));
    encodesTo(NULL, json_integer(INT64_MIN),
              BYTES("\xe2\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"));
    for (int i = 0; i < 2; i++) {
        json_t* v = json_integer(i == 0 ? INT64_MIN : INT64_MAX);

        ck_assert_uint_eq(roundTrip(NULL, NULL, v), 11);
        json_decref(v);
    }
}
END_TEST

START_TEST(test_floats_take_4_bytes_when_exact)
{
    const double four[] = { 0.0,        -0.0,     1.5,     -2.25,
                            FLT_MAX,    -FLT_MAX, FLT_MIN, FLT_TRUE_MIN,
                            16777216.0, 0.375 };
    const double eight[] = { 0.1,        1e300,
                             -1e-300,    DBL_MAX,
                             DBL_MIN,    DBL_TRUE_MIN,
                             16777217.0, (double)FLT_MAX * 2,
                             M_PI };

    for (size_t i = 0; i < sizeof(four) / sizeof(four[0]); i++) {
        json_t* v = json_real(four[i]);

        ck_assert_msg(roundTrip(NULL, NULL, v) == 5, "%g", four[i]);
        json_decref(v);
    }
    for (size_t i = 0; i < sizeof(eight) / sizeof(eight[0]); i++) {
        json_t* v = json_real(eight[i]);

        ck_assert_msg(roundTrip(NULL, NULL, v) == 9, "%g", eight[i]);
        json_decref(v);
    }
    /* -0.0 keeps its sign, which json_equal does not look at. */
    {
        CorBuf b = { 0 };
        json_t* v = json_real(-0.0);
        json_t* back;

        corCorTreeEncode(NULL, v, &b, NULL, 0);
        ck_assert_int_eq(corCorTreeDecode(NULL, b.data, b.len, &back, NULL, 0),
                         0);
        ck_assert(signbit(json_real_value(back)));
        json_decref(v);
        json_decref(back);
        corBufFree(&b);
    }
    /* NaN and the infinities: JSON has none, jansson makes none, and the
     * decoder refuses them. */
    ck_assert_ptr_null(json_real(NAN));
    ck_assert_ptr_null(json_real(INFINITY));
    refused(NULL, BYTES("\x23\x00\x00\xc0\x7f"), "not finite");
    refused(NULL, BYTES("\x23\x00\x00\x80\xff"), "not finite");
    refused(NULL, BYTES("\x03\x00\x00\x00\x00\x00\x00\xf0\x7f"), "not finite");
}
END_TEST

START_TEST(test_strings_round_trip)
{
    CorCorTables* s = corCorTablesNew();
    CorCorTables* r = corCorTablesNew();
    const char* strings[] = { "",
                              "a",
                              "hello, world",
                              "\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e",
                              "http://example.com/a/b",
                              "urn:isbn:0451450523",
                              "http://x/",
                              "a://b#c:d",
                              "://",
                              "urn:",
                              "no split: here",
                              "URN:x",
                              "https://example.com/ns#name",
                              "mailto:a@b" };
    char big[100000];

    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
            json_t* v = json_string(strings[i]);

            roundTrip(NULL, NULL, v);
            roundTrip(s, r, v);
            json_decref(v);
        }
    }
    /* Local parts of 127 and 128 bytes: one and two bytes of length. */
    memset(big, 'x', sizeof(big));
    for (size_t n = 126; n <= 129; n++) {
        json_t* v = json_stringn(big, n);

        ck_assert_uint_eq(roundTrip(NULL, NULL, v), 4 + (n > 127) + n);
        json_decref(v);
    }
    big[sizeof(big) - 1] = '\0';
    json_t* v = json_string(big);
    roundTrip(s, r, v);
    json_decref(v);
    corCorTablesFree(s);
    corCorTablesFree(r);
}
END_TEST

START_TEST(test_strings_split_by_the_tables)
{
    CorCorTables* t = corCorTablesNew();

    /* A new namespace inline, then by index (2 is the first). */
    encodesTo(t, json_string("http://a/b"),
              BYTES("\x01\x01\x09http://a/\x00\x01"
                    "b\x00"));
    encodesTo(t, json_string("http://a/c"),
              BYTES("\x01\x02\x01"
                    "c\x00"));
    encodesTo(t, json_string("urn:x:y"),
              BYTES("\x01\x01\x06urn:x:\x00\x01y\x00"));
    encodesTo(t, json_string("urn:x:"), BYTES("\x01\x03\x00\x00"));
    ck_assert_uint_eq(corCorTablesNamespaces(t), 2);
    /* A name: inline, then by index; its namespace is shared. */
    encodesTo(t, json_pack("{s:n}", "http://a/n"),
              BYTES("\x06\x05\x15\x02\x01"
                    "n\x00"));
    encodesTo(t, json_pack("{s:n}", "http://a/n"), BYTES("\x06\x02\x1d\x00"));
    ck_assert_uint_eq(corCorTablesNames(t), 1);
    corCorTablesFree(t);
}
END_TEST

START_TEST(test_containers_nest_and_empty_ones_round_trip)
{
    CorCorTables* s = corCorTablesNew();
    CorCorTables* r = corCorTablesNew();
    json_t* deep =
        json_loads("{\"list\": [{\"empty\": {}, \"none\": []}, [], [[]],"
                   " {\"a\": {\"b\": {\"c\": [1, 2.5, \"x\", true]}}}],"
                   " \"obj\": {}, \"arr\": [null, false, -7, \"http://h/p\"]}",
                   0, NULL);
    json_t* wide = json_array();
    json_t* big = json_object();

    roundTrip(NULL, NULL, deep);
    roundTrip(s, r, deep);
    roundTrip(s, r, deep);
    /* Lengths past one byte, at several levels, move children up. */
    for (int i = 0; i < 300; i++) {
        char key[16];

        snprintf(key, sizeof(key), "k%d", i);
        json_array_append_new(wide, json_pack("[s, i, {s:i}]", key, i * 1000,
                                              key, i));
        json_object_set_new(big, key, json_pack("[O]", wide));
    }
    roundTrip(NULL, NULL, wide);
    roundTrip(s, r, big);
    roundTrip(s, r, big);
    json_decref(deep);
    json_decref(wide);
    json_decref(big);
    corCorTablesFree(s);
    corCorTablesFree(r);
}
END_TEST

/* Arrays nested n deep, the innermost empty. */
static json_t*
nested(int n)
{
    json_t* v = json_array();

    while (--n > 0) {
        json_t* outer = json_array();

        json_array_append_new(outer, v);
        v = outer;
    }
    return v;
}

/* The same as bytes, built by hand for the decoder. */
static size_t
nestedBytes(uint8_t* out, int n)
{
    size_t len = 2;

    memcpy(out, "\x07\x00", 2);
    while (--n > 0) {
        uint8_t head[3] = { 0x07, (uint8_t)(len | 0x80), (uint8_t)(len >> 7) };
        size_t h = len < 128 ? 2 : 3;

        head[1] = len < 128 ? (uint8_t)len : head[1];
        memmove(out + h, out, len);
        memcpy(out, head, h);
        len += h;
    }
    return len;
}

START_TEST(test_depth_is_bounded_at_256)
{
    CorBuf b = { 0 };
    uint8_t bytes[1024];
    json_t* v = nested(COR_COR_DEPTH_MAX);
    json_t* back;
    size_t len;

    roundTrip(NULL, NULL, v);
    json_decref(v);
    v = nested(COR_COR_DEPTH_MAX + 1);
    ck_assert_int_eq(corCorTreeEncode(NULL, v, &b, NULL, 0), -E2BIG);
    ck_assert_uint_eq(b.len, 0);
    json_decref(v);
    len = nestedBytes(bytes, COR_COR_DEPTH_MAX);
    ck_assert_int_eq(corCorTreeDecode(NULL, bytes, len, &back, NULL, 0), 0);
    json_decref(back);
    len = nestedBytes(bytes, COR_COR_DEPTH_MAX + 1);
    refused(NULL, bytes, len, "deeper than 256");
    corBufFree(&b);
}
END_TEST

START_TEST(test_nodes_are_bounded)
{
    size_t n = COR_COR_NODES_MAX;
    json_t* v = json_array();
    CorBuf b = { 0 };
    char why[COR_COR_WHY_MAX] = "";
    json_t* back;

    /* The root and n - 1 elements: the most a tree may have. */
    for (size_t i = 0; i + 1 < n; i++) {
        json_array_append_new(v, json_null());
    }
    ck_assert_int_gt(corCorTreeEncode(NULL, v, &b, why, sizeof(why)), 0);
    ck_assert_int_eq(corCorTreeDecode(NULL, b.data, b.len, &back, why,
                                      sizeof(why)),
                     0);
    ck_assert_uint_eq(json_array_size(back), n - 1);
    json_decref(back);
    /* One more node, each way. */
    json_array_append_new(v, json_null());
    b.len = 0;
    ck_assert_int_eq(corCorTreeEncode(NULL, v, &b, why, sizeof(why)), -E2BIG);
    ck_assert_uint_eq(b.len, 0);
    {
        /* 07, a 3-byte length, then n nulls. */
        uint8_t* bytes = malloc(4 + n);

        bytes[0] = 0x07;
        bytes[1] = (uint8_t)(n | 0x80);
        bytes[2] = (uint8_t)(n >> 7 | 0x80);
        bytes[3] = (uint8_t)(n >> 14);
        memset(bytes + 4, 0x05, n);
        refused(NULL, bytes, 4 + n, "nodes");
        free(bytes);
    }
    json_decref(v);
    corBufFree(&b);
}
END_TEST

/* One frame of names and namespaces, all new unless seen before. */
static json_t*
frameOf(int frame, int names)
{
    json_t* o = json_object();

    for (int i = 0; i < names; i++) {
        char name[48];
        char value[48];

        snprintf(name, sizeof(name), "n%d.%d", frame, i);
        snprintf(value, sizeof(value), "http://host%d.%d/", frame, i % 7);
        json_object_set_new(o, name, json_string(value));
    }
    return o;
}

START_TEST(test_tables_fill_up_and_stay_in_step)
{
    CorCorTables* s = corCorTablesNew();
    CorCorTables* r = corCorTablesNew();
    int frame;

    /* 100 names and 7 namespaces a frame: full after 82 and 147 frames;
     * then new ones go inline, old ones by index, for 20 frames more. */
    for (frame = 0; frame < 170; frame++) {
        json_t* o = frameOf(frame, 100);

        roundTrip(s, r, o);
        json_decref(o);
    }
    ck_assert_uint_eq(corCorTablesNames(r), COR_COR_NAMES_MAX);
    ck_assert_uint_eq(corCorTablesNamespaces(r), COR_COR_NAMESPACES_MAX);
    /* A frame seen while the tables filled goes by index: shorter. */
    {
        json_t* old = frameOf(3, 100);
        json_t* late = frameOf(169, 100);
        size_t oldLen = roundTrip(s, r, old);
        size_t lateLen = roundTrip(s, r, late);

        ck_assert_uint_lt(oldLen * 3, lateLen);
        /* Again: the tables are full, nothing is appended. */
        ck_assert_uint_eq(roundTrip(s, r, late), lateLen);
        json_decref(old);
        json_decref(late);
    }
    corCorTablesFree(s);
    corCorTablesFree(r);
}
END_TEST

START_TEST(test_long_entries_are_never_appended)
{
    CorCorTables* s = corCorTablesNew();
    CorCorTables* r = corCorTablesNew();
    char name[COR_COR_ENTRY_MAX + 2];
    json_t* o;

    memset(name, 'n', sizeof(name));
    name[COR_COR_ENTRY_MAX] = '\0';
    o = json_pack("{s:i}", name, 1);
    roundTrip(s, r, o);
    ck_assert_uint_eq(corCorTablesNames(r), 1);
    json_decref(o);
    name[COR_COR_ENTRY_MAX] = 'n';
    name[COR_COR_ENTRY_MAX + 1] = '\0';
    o = json_pack("{s:i}", name, 1);
    roundTrip(s, r, o);
    roundTrip(s, r, o);
    ck_assert_uint_eq(corCorTablesNames(r), 1);
    json_decref(o);
    corCorTablesFree(s);
    corCorTablesFree(r);
}
END_TEST

START_TEST(test_a_failed_encode_leaves_the_tables)
{
    CorCorTables* s = corCorTablesNew();
    CorCorTables* r = corCorTablesNew();
    CorBuf b = { 0 };
    char why[COR_COR_WHY_MAX] = "";
    json_t* bad = json_pack("{s:s, s:s#}", "http://x/new", "urn:a:b", "v",
                            "a\0b", (size_t)3);
    json_t* good = json_pack("{s:s, s:i}", "http://x/new", "urn:a:b", "v", 1);

    json_t* first = json_pack("{s:i}", "first", 1);

    roundTrip(s, r, first);
    json_decref(first);
    b.data = malloc(4);
    memcpy(b.data, "keep", 4);
    b.len = b.cap = 4;
    ck_assert_int_eq(corCorTreeEncode(s, bad, &b, why, sizeof(why)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "NUL"));
    {
        json_t* latin1 = json_stringn_nocheck("caf\xe9", 4);

        ck_assert_int_eq(corCorTreeEncode(s, latin1, &b, why, sizeof(why)),
                         -EINVAL);
        json_decref(latin1);
    }
    ck_assert_uint_eq(b.len, 4);
    ck_assert_mem_eq(b.data, "keep", 4);
    ck_assert_uint_eq(corCorTablesNames(s), 1);
    ck_assert_uint_eq(corCorTablesNamespaces(s), 0);
    /* The peer never saw it: the next frame decodes. */
    roundTrip(s, r, good);
    roundTrip(s, r, good);
    json_decref(bad);
    json_decref(good);
    corBufFree(&b);
    corCorTablesFree(s);
    corCorTablesFree(r);
}
END_TEST

START_TEST(test_every_truncation_is_refused)
{
    CorCorTables* s = corCorTablesNew();
    CorBuf b = { 0 };
    json_t* tree = json_pack("{s:[i, f, f, b, n, s, s], s:{s:s}, s:I}", "list",
                             7, 1.5, 0.1, 1, "http://example.com/x", "plain",
                             "urn:a:b", "k", "v", "big", (json_int_t)INT64_MIN);

    ck_assert_int_gt(corCorTreeEncode(s, tree, &b, NULL, 0), 0);
    for (size_t k = 0; k < b.len; k++) {
        CorCorTables* r = corCorTablesNew();
        json_t* out = json_null();

        ck_assert_int_eq(corCorTreeDecode(r, b.data, k, &out, NULL, 0),
                         -EPROTO);
        ck_assert_ptr_null(out);
        ck_assert_uint_eq(corCorTablesNames(r), 0);
        ck_assert_uint_eq(corCorTablesNamespaces(r), 0);
        corCorTablesFree(r);
    }
    /* And one byte more is a byte after the tree. */
    {
        CorCorTables* r = corCorTablesNew();
        uint8_t* more = malloc(b.len + 1);

        memcpy(more, b.data, b.len);
        more[b.len] = 0x05;
        refused(r, more, b.len + 1, "1 bytes after the tree");
        free(more);
        corCorTablesFree(r);
    }
    json_decref(tree);
    corBufFree(&b);
    corCorTablesFree(s);
}
END_TEST

START_TEST(test_malformed_trees_are_refused)
{
    CorCorTables* r = corCorTablesNew();

    refused(NULL, BYTES(""), "cut short");
    refused(NULL, BYTES("\x00"), "type 0");
    refused(NULL, BYTES("\x21\x00\x00\x00"), "flags");     /* term id */
    refused(NULL, BYTES("\x44"), "flags");                 /* bool 2 */
    refused(NULL, BYTES("\x25"), "flags");                 /* null */
    refused(NULL, BYTES("\x26\x00"), "flags");             /* kind 1 */
    refused(NULL, BYTES("\x43\x00\x00\x00\x00"), "flags"); /* float */
    refused(NULL, BYTES("\x06\x02\x0a\x00"), "term id");   /* mode 1 */
    refused(NULL,
            BYTES("\x16\x00\x01"
                  "a\x00"),
            "outside an object");
    refused(NULL,
            BYTES("\x07\x05\x12\x00\x01"
                  "a\x00"),
            "outside an object"); /* in array */
    refused(NULL, BYTES("\x06\x01\x05"), "without a name");
    refused(NULL, BYTES("\x06\x05\x07\x00"), "past their container");
    refused(NULL, BYTES("\x07\x01\x07\x00"), "cut short");
    refused(NULL,
            BYTES("\x07\x04\x01\x00\x02"
                  "ab\x00"),
            "past its");
    refused(NULL, BYTES("\x07\x03\x03\x00\x00"), "cut short"); /* float */
    refused(NULL,
            BYTES("\x01\x00\x05"
                  "ab\x00"),
            "past its container");
    refused(NULL,
            BYTES("\x01\x00\x02"
                  "abc"),
            "not ended by a NUL");
    refused(NULL,
            BYTES("\x01\x00\x02"
                  "a\x00\x00"),
            "holds a NUL");
    refused(NULL, BYTES("\x01\x00\x02\xc0\x80\x00"), "not UTF-8");
    refused(NULL, BYTES("\x01\x00\x03\xed\xa0\x80\x00"), "not UTF-8");
    refused(NULL, BYTES("\x01\x00\x01\xf5\x00"), "not UTF-8");
    refused(NULL, BYTES("\x01\x00\x01\xc3\x00"), "not UTF-8");
    /* Varints: cut short, past 64 bits, not shortest; an int in a varint
     * that fits the tag; a double that fits a float. */
    refused(NULL, BYTES("\xe2\x80"), "varint cut short");
    refused(NULL, BYTES("\xe2\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"),
            "past 64 bits");
    refused(NULL, BYTES("\xe2\xff\xff\xff\xff\xff\xff\xff\xff\xff\x81\x00"),
            "past 64 bits");
    refused(NULL, BYTES("\xe2\x81\x00"), "shortest");
    refused(NULL, BYTES("\x07\x80\x00"), "shortest");
    refused(NULL, BYTES("\xe2\x06"), "not in the tag");
    refused(NULL, BYTES("\x03\x00\x00\x00\x00\x00\x00\xf8\x3f"),
            "fits in 4 bytes");
    refused(NULL, BYTES("\x05\x05"), "after the tree");
    refused(NULL,
            BYTES("\x06\x0a\x14\x00\x01"
                  "a\x00\x14\x00\x01"
                  "a\x00"),
            "a second \"a\"");
    corCorTablesFree(r);
}
END_TEST

START_TEST(test_table_misuse_is_refused)
{
    CorCorTables* r = corCorTablesNew();
    json_t* tree;

    refused(NULL,
            BYTES("\x01\x01\x02"
                  "a:\x00\x00\x00"),
            "without tables");
    refused(NULL, BYTES("\x06\x02\x1d\x00"), "name 0 of a table of 0");
    refused(r, BYTES("\x01\x02\x00\x00"), "namespace 0 of a table of 0");
    refused(r,
            BYTES("\x01\x00\x0a"
                  "http://a/b\x00"),
            "splits sent whole");
    refused(r,
            BYTES("\x01\x01\x07"
                  "http://\x00\x03"
                  "a/b\x00"),
            "split elsewhere");
    refused(r,
            BYTES("\x01\x01\x00\x00\x01"
                  "a\x00"),
            "split elsewhere");
    /* Now "http://a/" is namespace 0 and "n" name 0. */
    ck_assert_int_eq(corCorTreeDecode(r,
                                      BYTES("\x06\x10\x15\x01\x09"
                                            "http://a/\x00\x01"
                                            "n\x00"),
                                      &tree, NULL, 0),
                     0);
    json_decref(tree);
    refused(r,
            BYTES("\x01\x01\x09"
                  "http://a/\x00\x01"
                  "b\x00"),
            "number 0 of the table");
    refused(r,
            BYTES("\x06\x05\x15\x02\x01"
                  "n\x00"),
            "name sent inline that is number 0");
    refused(r, BYTES("\x06\x02\x1d\x01"), "name 1 of a table of 1");
    refused(r, BYTES("\x01\x03\x00\x00"), "namespace 1 of a table of 1");
    ck_assert_int_eq(corCorTreeDecode(r, BYTES("\x06\x02\x1d\x00"), &tree, NULL,
                                      0),
                     0);
    ck_assert_ptr_nonnull(json_object_get(tree, "http://a/n"));
    json_decref(tree);
    corCorTablesFree(r);
}
END_TEST

COR_TEST_SUITE(corCorCodec)
{
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_scalars_round_trip_in_their_bytes);
    tcase_add_test(tc, test_ints_round_trip_at_every_boundary);
    tcase_add_test(tc, test_floats_take_4_bytes_when_exact);
    tcase_add_test(tc, test_strings_round_trip);
    tcase_add_test(tc, test_strings_split_by_the_tables);
    tcase_add_test(tc, test_containers_nest_and_empty_ones_round_trip);
    tcase_add_test(tc, test_depth_is_bounded_at_256);
    tcase_add_test(tc, test_nodes_are_bounded);
    tcase_add_test(tc, test_tables_fill_up_and_stay_in_step);
    tcase_add_test(tc, test_long_entries_are_never_appended);
    tcase_add_test(tc, test_a_failed_encode_leaves_the_tables);
    tcase_add_test(tc, test_every_truncation_is_refused);
    tcase_add_test(tc, test_malformed_trees_are_refused);
    tcase_add_test(tc, test_table_misuse_is_refused);
}
