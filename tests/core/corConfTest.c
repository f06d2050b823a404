/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration tree: loading (marks, key order, what YAML features are
 * refused and how), every typed getter and unit, range messages, unknown
 * keys and the error list itself.
 */
#include "corTest.h"
#include "corConf.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static CorConf*
load(const char* text, CorConfErrors* e)
{
    return corConfLoadString("t.yaml", text, strlen(text), e);
}

/* Load text, which must fail, and check that the errors are exactly want. */
static void
checkRefused(const char* text, const char* want)
{
    CorConfErrors e = { 0 };
    CorConf* root = load(text, &e);

    ck_assert_ptr_null(root);
    ck_assert_ptr_nonnull(e.text);
    ck_assert_str_eq(e.text, want);
    corConfErrorsFree(&e);
}

/* Run one getter on "k: VALUE" and return the error text ("" for none). */
typedef enum { GET_INT, GET_SIZE, GET_DURATION, GET_BOOL } Getter;

static char lastError[512];

static uint64_t
get(Getter g, const char* value, uint64_t min, uint64_t max)
{
    CorConfErrors e = { 0 };
    char text[256];
    CorConf* root;
    uint64_t v = 0;

    snprintf(text, sizeof(text), "k: %s\n", value);
    root = load(text, &e);
    ck_assert_msg(root != NULL, "%s", e.text);
    switch (g) {
    case GET_INT:
        v = (uint64_t)corConfInt(root, "k", -7, (int64_t)min, (int64_t)max, &e);
        break;
    case GET_SIZE:
        v = corConfSize(root, "k", 7, min, max, &e);
        break;
    case GET_DURATION:
        v = corConfDurationMs(root, "k", 7, min, max, &e);
        break;
    case GET_BOOL:
        v = corConfBool(root, "k", false, &e);
        break;
    }
    snprintf(lastError, sizeof(lastError), "%s", e.text ? e.text : "");
    corConfFree(root);
    corConfErrorsFree(&e);
    return v;
}

START_TEST(test_load_keeps_marks_and_order)
{
    const char* text = "# a comment\n"
                       "zeta: 1\n"
                       "alpha:\n"
                       "  - one\n"
                       "  - { k: \"v w\" }\n"
                       "mid: 'quoted'\n";
    CorConfErrors e = { 0 };
    CorConf* root = load(text, &e);
    const CorConf* alpha;
    const CorConf* item;

    ck_assert_ptr_nonnull(root);
    ck_assert_uint_eq(e.count, 0);
    ck_assert_int_eq(corConfKind(root), COR_CONF_MAP);
    ck_assert_uint_eq(corConfCount(root), 3);
    ck_assert_str_eq(corConfKeyAt(root, 0), "zeta");
    ck_assert_str_eq(corConfKeyAt(root, 1), "alpha");
    ck_assert_str_eq(corConfKeyAt(root, 2), "mid");
    ck_assert_ptr_null(corConfKeyAt(root, 3));
    ck_assert_str_eq(corConfFile(root), "t.yaml");
    ck_assert_uint_eq(corConfLine(root), 2);
    ck_assert_uint_eq(corConfColumn(root), 1);

    alpha = corConfGet(root, "alpha");
    ck_assert_int_eq(corConfKind(alpha), COR_CONF_SEQ);
    ck_assert_uint_eq(corConfLine(alpha), 4);
    ck_assert_uint_eq(corConfColumn(alpha), 3);
    ck_assert_uint_eq(corConfCount(alpha), 2);
    ck_assert_ptr_null(corConfText(alpha));
    ck_assert_ptr_null(corConfKeyAt(alpha, 0));
    item = corConfAt(alpha, 0);
    ck_assert_str_eq(corConfText(item), "one");
    ck_assert_uint_eq(corConfCount(item), 0);
    ck_assert_ptr_null(corConfAt(item, 0));
    item = corConfAt(alpha, 1);
    ck_assert_int_eq(corConfKind(item), COR_CONF_MAP);
    ck_assert_uint_eq(corConfLine(item), 5);
    ck_assert_uint_eq(corConfColumn(item), 5);
    ck_assert_str_eq(corConfString(item, "k", NULL, &e), "v w");
    ck_assert_uint_eq(corConfColumn(corConfGet(item, "k")), 10);
    ck_assert_ptr_null(corConfAt(alpha, 2));
    ck_assert_str_eq(corConfString(root, "mid", NULL, &e), "quoted");
    ck_assert_uint_eq(corConfColumn(corConfGet(root, "mid")), 6);
    ck_assert_uint_eq(e.count, 0);
    corConfFree(root);
}
END_TEST

START_TEST(test_get_handles_absent_and_non_maps)
{
    CorConfErrors e = { 0 };
    CorConf* root = load("list: [1, 2]\n", &e);

    ck_assert_ptr_null(corConfGet(NULL, "x"));
    ck_assert_ptr_null(corConfGet(root, "x"));
    ck_assert_ptr_null(corConfGet(corConfGet(root, "list"), "x"));
    ck_assert_uint_eq(corConfCount(NULL), 0);
    ck_assert_ptr_null(corConfAt(NULL, 0));
    ck_assert_ptr_null(corConfKeyAt(NULL, 0));
    ck_assert_ptr_null(corConfText(NULL));
    /* A NULL map reads as an empty one: every getter gives its default. */
    ck_assert_str_eq(corConfString(NULL, "x", "d", &e), "d");
    ck_assert_int_eq(corConfInt(NULL, "x", 5, 0, 10, &e), 5);
    ck_assert_uint_eq(corConfSize(NULL, "x", 6, 0, 10, &e), 6);
    ck_assert_uint_eq(corConfDurationMs(NULL, "x", 8, 0, 10, &e), 8);
    ck_assert(corConfBool(NULL, "x", true, &e));
    ck_assert_ptr_null(corConfMap(NULL, "x", &e));
    ck_assert_uint_eq(e.count, 0);
    corConfFree(root);
}
END_TEST

START_TEST(test_load_file)
{
    char path[] = "/tmp/corConfTestXXXXXX";
    int fd = mkstemp(path);
    const char* text = "a:\n  b: 3\n";
    CorConfErrors e = { 0 };
    CorConf* root;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    root = corConfLoadFile(path, &e);
    unlink(path);
    ck_assert_ptr_nonnull(root);
    ck_assert_str_eq(corConfFile(corConfGet(root, "a")), path);
    ck_assert_int_eq(corConfInt(corConfGet(root, "a"), "b", 0, 0, 9, &e), 3);
    corConfFree(root);

    root = corConfLoadFile("/nonexistent/cor.yaml", &e);
    ck_assert_ptr_null(root);
    ck_assert_str_eq(e.text, "/nonexistent/cor.yaml: cannot open: No such "
                             "file or directory\n");
    corConfErrorsFree(&e);

    root = corConfLoadFile("/", &e);
    ck_assert_ptr_null(root);
    ck_assert_str_eq(e.text, "/: cannot read: Is a directory\n");
    corConfErrorsFree(&e);
}
END_TEST

START_TEST(test_duplicate_keys_refused)
{
    checkRefused("a: 1\nb: 2\na: 3\n",
                 "t.yaml:3:1: duplicate key 'a' (first at 1:1)\n");
    checkRefused("x:\n  y: 1\n  y: 2\nx: 3\n",
                 "t.yaml:3:3: duplicate key 'y' (first at 2:3)\n"
                 "t.yaml:4:1: duplicate key 'x' (first at 1:1)\n");
    checkRefused("{a: 1, a: 2}", "t.yaml:1:8: duplicate key 'a' (first at "
                                 "1:2)\n");
    /* The same key in two different mappings is fine. */
    {
        CorConfErrors e = { 0 };
        CorConf* root = load("- {a: 1}\n- {a: 2}\n", &e);

        ck_assert_ptr_nonnull(root);
        corConfFree(root);
    }
}
END_TEST

START_TEST(test_anchors_aliases_tags_documents_refused)
{
    checkRefused("a: &x 1\nb: *x\n",
                 "t.yaml:1:4: anchor '&x' is not supported (a config has no "
                 "use for anchors and aliases: write the value out)\n"
                 "t.yaml:2:4: alias '*x' is not supported (a config has no "
                 "use for anchors and aliases: write the value out)\n");
    checkRefused("a: !!str 1\n",
                 "t.yaml:1:4: tag 'tag:yaml.org,2002:str' is not supported "
                 "(a config has no use for tags: write the value plainly)\n");
    checkRefused("a: !local {b: 1}\n",
                 "t.yaml:1:4: tag '!local' is not supported (a config has "
                 "no use for tags: write the value plainly)\n");
    checkRefused("a: 1\n---\nb: 2\n",
                 "t.yaml:2:1: a second document is not supported (one file "
                 "holds one configuration; remove the '---' or split the "
                 "file)\n");
    /* One document with the markers is fine. */
    {
        CorConfErrors e = { 0 };
        CorConf* root = load("---\na: 1\n...\n", &e);

        ck_assert_ptr_nonnull(root);
        corConfFree(root);
    }
}
END_TEST

START_TEST(test_bad_keys_refused)
{
    checkRefused("? [a, b]\n: 1\n",
                 "t.yaml:1:3: a key must be a plain string, not a list\n");
    checkRefused("? {a: 1}\n: 1\n",
                 "t.yaml:1:3: a key must be a plain string, not a mapping\n");
    checkRefused("a: \"x\\0y\"\n",
                 "t.yaml:1:4: a NUL character is not allowed in a string\n");
}
END_TEST

START_TEST(test_syntax_errors_carry_marks)
{
    checkRefused("a: \"open\nb: 1\n",
                 "t.yaml:1:4: found unexpected end of stream while scanning "
                 "a quoted scalar that starts here\n");
    checkRefused("a:\n\tb: 1\n",
                 "t.yaml:2:1: found character that cannot start any token; "
                 "YAML does not allow tabs for indentation, use spaces\n");
    checkRefused("a: 1\n b: 2\n",
                 "t.yaml:2:3: mapping values are not allowed in this "
                 "context\n");
    checkRefused("a: [1, 2\nb: 3\n",
                 "t.yaml:2:2: did not find expected ',' or ']' (while "
                 "parsing a flow sequence that starts at 1:4)\n");
    checkRefused("a: \xff\n", "t.yaml:1:4: invalid leading UTF-8 octet "
                              "(byte 0xff)\n");
}
END_TEST

START_TEST(test_empty_refused)
{
    checkRefused("", "t.yaml:1:1: the file is empty (expected a mapping of "
                     "settings)\n");
    checkRefused("# nothing\n\n", "t.yaml:1:1: the file is empty (expected "
                                  "a mapping of settings)\n");
}
END_TEST

START_TEST(test_depth_limited)
{
    char text[2 * COR_CONF_MAX_DEPTH + 8];
    CorConfErrors e = { 0 };
    CorConf* root;
    size_t n = 0;

    for (int i = 0; i < COR_CONF_MAX_DEPTH; i++) {
        text[n++] = '[';
    }
    for (int i = 0; i < COR_CONF_MAX_DEPTH; i++) {
        text[n++] = ']';
    }
    root = corConfLoadString("t.yaml", text, n, &e);
    ck_assert_msg(root != NULL, "%s", e.text);
    corConfFree(root);

    n = 0;
    for (int i = 0; i <= COR_CONF_MAX_DEPTH; i++) {
        text[n++] = '[';
    }
    for (int i = 0; i <= COR_CONF_MAX_DEPTH; i++) {
        text[n++] = ']';
    }
    root = corConfLoadString("t.yaml", text, n, &e);
    ck_assert_ptr_null(root);
    ck_assert_str_eq(e.text, "t.yaml:1:65: nesting is too deep (more than "
                             "64 levels)\n");
    corConfErrorsFree(&e);
}
END_TEST

START_TEST(test_string_getter)
{
    CorConfErrors e = { 0 };
    CorConf* root = load("plain: hello world\nquoted: \"a: b\"\nempty: \"\"\n"
                         "number: 42\nnull1:\nnull2: ~\nmap: {a: 1}\n"
                         "list: [1]\nblock: |\n  two\n  lines\n",
                         &e);

    ck_assert_ptr_nonnull(root);
    ck_assert_str_eq(corConfString(root, "plain", NULL, &e), "hello world");
    ck_assert_str_eq(corConfString(root, "quoted", NULL, &e), "a: b");
    ck_assert_str_eq(corConfString(root, "empty", NULL, &e), "");
    ck_assert_str_eq(corConfString(root, "number", NULL, &e), "42");
    ck_assert_str_eq(corConfString(root, "block", NULL, &e), "two\nlines\n");
    ck_assert_str_eq(corConfString(root, "absent", "def", &e), "def");
    ck_assert_ptr_null(corConfString(root, "absent", NULL, &e));
    ck_assert_uint_eq(e.count, 0);
    ck_assert_str_eq(corConfString(root, "null1", "d", &e), "d");
    ck_assert_str_eq(corConfString(root, "null2", "d", &e), "d");
    ck_assert_str_eq(corConfString(root, "map", "d", &e), "d");
    ck_assert_str_eq(corConfString(root, "list", "d", &e), "d");
    ck_assert_uint_eq(e.count, 4);
    ck_assert_str_eq(e.text,
                     "t.yaml:5:7: null1: expected a string, got nothing\n"
                     "t.yaml:6:8: null2: expected a string, got nothing\n"
                     "t.yaml:7:6: map: expected a string, got a mapping\n"
                     "t.yaml:8:7: list: expected a string, got a list\n");
    corConfErrorsFree(&e);
    corConfFree(root);
}
END_TEST

START_TEST(test_bool_getter)
{
    /* Every on/off key takes the six words alike, in any case: on, true
     * and yes are on (nginx's on was refused, "write true"). */
    static const char* const on[] = { "on",   "true", "yes",   "On",
                                      "TRUE", "Yes",  "\"on\"" };
    static const char* const off[] = { "off",   "false", "no",  "Off",
                                       "FALSE", "No",    "'no'" };

    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        ck_assert_uint_eq(get(GET_BOOL, on[i], 0, 0), 1);
        ck_assert_str_eq(lastError, "");
        ck_assert_uint_eq(get(GET_BOOL, off[i], 0, 0), 0);
        ck_assert_str_eq(lastError, "");
    }
    get(GET_BOOL, "1", 0, 0);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: expected on, off, true, "
                                "false, yes or no, got '1'\n");
    get(GET_BOOL, "y", 0, 0);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: expected on, off, true, "
                                "false, yes or no, got 'y'\n");
    get(GET_BOOL, "[true]", 0, 0);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: expected on, off, true, "
                                "false, yes or no, got a list\n");
}
END_TEST

START_TEST(test_int_getter)
{
    ck_assert_int_eq((int64_t)get(GET_INT, "42", 0, 100), 42);
    ck_assert_int_eq((int64_t)get(GET_INT, "+42", 0, 100), 42);
    ck_assert_int_eq((int64_t)get(GET_INT, "-5", (uint64_t)-10, 100), -5);
    ck_assert_int_eq((int64_t)get(GET_INT, "0", 0, 0), 0);
    ck_assert_str_eq(lastError, "");
    ck_assert_int_eq((int64_t)get(GET_INT, "\"12\"", 0, 100), 12);
    ck_assert_str_eq(lastError, "");

    ck_assert_int_eq((int64_t)get(GET_INT, "70000", 1, 65535), -7);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 70000 is out of range "
                                "(1..65535)\n");
    get(GET_INT, "0", 1, INT64_MAX);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 0 is out of range (at least "
                                "1)\n");
    get(GET_INT, "5", (uint64_t)INT64_MIN, 3);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 5 is out of range (at most "
                                "3)\n");
    get(GET_INT, "99999999999999999999", 1, INT64_MAX);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 99999999999999999999 is out "
                                "of range (at least 1)\n");
    for (size_t i = 0; i < 7; i++) {
        static const char* const bad[] = {
            "abc", "1.5", "0x10", "1e3", "1 2", "--1", "1_000",
        };
        char want[128];

        ck_assert_int_eq((int64_t)get(GET_INT, bad[i], 0, 100), -7);
        snprintf(want, sizeof(want),
                 "t.yaml:1:4: k: expected an integer, got '%s'\n", bad[i]);
        ck_assert_str_eq(lastError, want);
    }
    get(GET_INT, "", 0, 100);
    ck_assert_str_eq(lastError, "t.yaml:1:3: k: expected an integer, got "
                                "nothing\n");
    get(GET_INT, "{a: 1}", 0, 100);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: expected an integer, got a "
                                "mapping\n");
    /* The extremes of int64 parse. */
    {
        CorConfErrors e = { 0 };
        CorConf* root = load("lo: -9223372036854775808\n"
                             "hi: 9223372036854775807\n"
                             "over: 9223372036854775808\n",
                             &e);

        ck_assert_int_eq(corConfInt(root, "lo", 0, INT64_MIN, INT64_MAX, &e),
                         INT64_MIN);
        ck_assert_int_eq(corConfInt(root, "hi", 0, INT64_MIN, INT64_MAX, &e),
                         INT64_MAX);
        ck_assert_uint_eq(e.count, 0);
        ck_assert_int_eq(corConfInt(root, "over", 0, INT64_MIN, INT64_MAX, &e),
                         0);
        ck_assert_uint_eq(e.count, 1);
        corConfErrorsFree(&e);
        corConfFree(root);
    }
}
END_TEST

START_TEST(test_size_units)
{
    static const struct {
        const char* text;
        uint64_t bytes;
    } good[] = {
        { "0", 0 },
        { "512", 512 },
        { "512B", 512 },
        { "10KB", 10000 },
        { "16KiB", 16384 },
        { "256KiB", 262144 },
        { "1MB", 1000000 },
        { "1MiB", 1048576 },
        { "2GB", 2000000000ull },
        { "2GiB", 2147483648ull },
        { "1TB", 1000000000000ull },
        { "1TiB", 1099511627776ull },
        { "2 GiB", 2147483648ull },
        { "\"64 KiB\"", 65536 },
        { "16777215TiB", 16777215ull << 40 },
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t v = get(GET_SIZE, good[i].text, 0, UINT64_MAX);

        ck_assert_msg(v == good[i].bytes, "%s: %llu", good[i].text,
                      (unsigned long long)v);
        ck_assert_msg(lastError[0] == '\0', "%s: %s", good[i].text, lastError);
    }
}
END_TEST

START_TEST(test_size_errors)
{
    static const char* const bad[] = {
        "256 kilobytes", "1.5MiB", "16k",  "16kib", "KiB",
        "16KiBs",        "1 2KiB", "0x10", "ten",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[256];

        ck_assert_uint_eq(get(GET_SIZE, bad[i], 0, UINT64_MAX), 7);
        snprintf(want, sizeof(want),
                 "t.yaml:1:4: k: expected a size such as 512, 16KiB or 1MiB "
                 "(units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got '%s'\n",
                 bad[i]);
        ck_assert_str_eq(lastError, want);
    }
    get(GET_SIZE, "-1KiB", 0, UINT64_MAX);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: expected a size, got '-1KiB' "
                                "(a size cannot be negative)\n");
    get(GET_SIZE, "16777216TiB", 0, UINT64_MAX);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 16777216TiB is out of range "
                                "(at least 0)\n");
    get(GET_SIZE, "99999999999999999999", 0, UINT64_MAX);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 99999999999999999999 is out "
                                "of range (at least 0)\n");
    get(GET_SIZE, "10", 1024, 1048576);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 10 is out of range "
                                "(1KiB..1MiB)\n");
    get(GET_SIZE, "2MB", 1000, 1000000);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 2MB is out of range "
                                "(1KB..1MB)\n");
    get(GET_SIZE, "1", 100, 1500);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 1 is out of range "
                                "(100..1500)\n");
}
END_TEST

START_TEST(test_duration_units)
{
    static const struct {
        const char* text;
        uint64_t ms;
    } good[] = {
        { "0ms", 0 },         { "0s", 0 },          { "100ms", 100 },
        { "30s", 30000 },     { "2m", 120000 },     { "1h", 3600000 },
        { "1.5s", 1500 },     { "0.25s", 250 },     { "1.5m", 90000 },
        { "0.001s", 1 },      { "1h30m", 5400000 }, { "1m30s", 90000 },
        { "2s500ms", 2500 },  { "30 s", 30000 },    { "1.000000000000s", 1000 },
        { "\"10s\"", 10000 },
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t v = get(GET_DURATION, good[i].text, 0, UINT64_MAX);

        ck_assert_msg(v == good[i].ms, "%s: %llu", good[i].text,
                      (unsigned long long)v);
        ck_assert_msg(lastError[0] == '\0', "%s: %s", good[i].text, lastError);
    }
}
END_TEST

START_TEST(test_duration_errors)
{
    static const char* const bad[] = {
        "10 parsecs",  "1d",     ".5s",        "1.s",  "s",
        "ten seconds", "1s 2ms", "10 minutes", "1,5s",
    };
    static const struct {
        const char* text;
        const char* why;
    } refused[] = {
        { "30", "add a unit: ms, s, m, h" },
        { "0", "add a unit: ms, s, m, h" },
        { "1.5", "add a unit: ms, s, m, h" },
        { "1m30", "add a unit: ms, s, m, h" },
        { "-1s", "a duration cannot be negative" },
        { "0.5ms", "the smallest step is 1ms" },
        { "0.0001s", "the smallest step is 1ms" },
        { "0.0000000001h", "the smallest step is 1ms" },
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[256];

        ck_assert_uint_eq(get(GET_DURATION, bad[i], 0, UINT64_MAX), 7);
        snprintf(want, sizeof(want),
                 "t.yaml:1:4: k: expected a duration such as 100ms, 30s, 2m "
                 "or 1h, got '%s'\n",
                 bad[i]);
        ck_assert_str_eq(lastError, want);
    }
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char want[256];

        ck_assert_uint_eq(get(GET_DURATION, refused[i].text, 0, UINT64_MAX), 7);
        snprintf(want, sizeof(want),
                 "t.yaml:1:4: k: expected a duration, got '%s' (%s)\n",
                 refused[i].text, refused[i].why);
        ck_assert_str_eq(lastError, want);
    }
    get(GET_DURATION, "5124095576030432h", 0, UINT64_MAX);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 5124095576030432h is out of "
                                "range (at least 0ms)\n");
    get(GET_DURATION, "2h", 1, 3600000);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 2h is out of range "
                                "(1ms..1h)\n");
    get(GET_DURATION, "10ms", 1000, 90000);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 10ms is out of range "
                                "(1s..90s)\n");
    get(GET_DURATION, "1s", 1500, UINT64_MAX);
    ck_assert_str_eq(lastError, "t.yaml:1:4: k: 1s is out of range (at least "
                                "1500ms)\n");
}
END_TEST

START_TEST(test_map_and_seq_getters)
{
    CorConfErrors e = { 0 };
    CorConf* root = load("m: {a: 1}\ns: [1]\nx: 8080\n", &e);

    ck_assert_ptr_nonnull(corConfMap(root, "m", &e));
    ck_assert_ptr_nonnull(corConfSeq(root, "s", &e));
    ck_assert_ptr_null(corConfMap(root, "absent", &e));
    ck_assert_uint_eq(e.count, 0);
    ck_assert_ptr_null(corConfMap(root, "s", &e));
    ck_assert_ptr_null(corConfSeq(root, "m", &e));
    ck_assert_ptr_null(corConfSeq(root, "x", &e));
    ck_assert_str_eq(e.text, "t.yaml:2:4: s: expected a mapping, got a list\n"
                             "t.yaml:1:4: m: expected a list, got a mapping\n"
                             "t.yaml:3:4: x: expected a list, got '8080'\n");
    corConfErrorsFree(&e);
    corConfFree(root);
}
END_TEST

START_TEST(test_unknown_keys)
{
    static const char* const known[] = { "load", "greeting", NULL };
    CorConfErrors e = { 0 };
    CorConf* root = load("load: hello\ngreting: hi\nzzz: 1\n", &e);

    corConfGet(root, "load");
    ck_assert_uint_eq(corConfUnknownKeys(root, "modules[0]", known, &e), 2);
    ck_assert_str_eq(e.text,
                     "t.yaml:2:1: unknown key 'greting' in modules[0] "
                     "(expected one of: load, greeting); did you mean "
                     "'greeting'?\n"
                     "t.yaml:3:1: unknown key 'zzz' in modules[0] (expected "
                     "one of: load, greeting)\n");
    corConfErrorsFree(&e);

    ck_assert_uint_eq(corConfUnknownKeys(root, NULL, known, &e), 2);
    ck_assert_ptr_nonnull(strstr(e.text, "unknown key 'zzz' at the top "
                                         "level (expected"));
    corConfErrorsFree(&e);

    /* Reading a key, even one of the wrong type, makes it known. */
    corConfInt(root, "greting", 0, 0, 1, &e);
    corConfErrorsFree(&e);
    ck_assert_uint_eq(corConfUnknownKeys(root, "x", known, &e), 1);
    corConfErrorsFree(&e);
    /* So does reaching it by index. */
    corConfAt(root, 2);
    ck_assert_uint_eq(corConfUnknownKeys(root, "x", known, &e), 0);
    ck_assert_uint_eq(corConfUnknownKeys(NULL, "x", known, &e), 0);
    ck_assert_uint_eq(e.count, 0);
    corConfFree(root);
}
END_TEST

START_TEST(test_unused_keys)
{
    CorConfErrors e = { 0 };
    CorConf* root = load("modules:\n  - load: hello\n    greeting: hi\n"
                         "    greting: typo\n",
                         &e);
    const CorConf* module = corConfAt(corConfGet(root, "modules"), 0);

    /* The core reads load, the module reads greeting. */
    corConfGet(module, "load");
    corConfString(module, "greeting", NULL, &e);
    ck_assert_uint_eq(corConfUnusedKeys(module, "modules[0]", &e), 1);
    ck_assert_str_eq(e.text, "t.yaml:4:5: unknown key 'greting' in "
                             "modules[0] (expected one of: load, greeting); "
                             "did you mean 'greeting'?\n");
    corConfErrorsFree(&e);
    corConfFree(root);
}
END_TEST

/* The typo alone: the module looked for greeting and did not find it,
 * which is how the list knows it. */
START_TEST(test_unused_keys_know_what_was_asked)
{
    CorConfErrors e = { 0 };
    CorConf* root = load("load: hello\ngreting: hi\nzzz: 1\n", &e);

    corConfGet(root, "load");
    ck_assert_str_eq(corConfString(root, "greeting", "x", &e), "x");
    ck_assert_ptr_null(corConfGet(root, "greeting")); /* asked twice */
    corConfInt(root, "port", 0, 0, 1, &e);
    ck_assert_uint_eq(corConfUnusedKeys(root, "modules[1]", &e), 2);
    ck_assert_str_eq(e.text, "t.yaml:2:1: unknown key 'greting' in "
                             "modules[1] (expected one of: load, greeting, "
                             "port); did you mean 'greeting'?\n"
                             "t.yaml:3:1: unknown key 'zzz' in modules[1] "
                             "(expected one of: load, greeting, port)\n");
    corConfErrorsFree(&e);
    corConfFree(root);
}
END_TEST

START_TEST(test_suggest)
{
    static const char* const names[] = { "hello", "sleep", "metrics", NULL };
    static const char* const keys[] = { "name", "host", NULL };
    static const char* const none[] = { NULL };
    char buf[64];

    ck_assert_str_eq(corConfSuggest("helo", names, "handlers", buf,
                                    sizeof(buf)),
                     " (handlers: hello, sleep, metrics); did you mean "
                     "'hello'?");
    /* Two neighbours swapped are one edit: "hots" is near "host". */
    ck_assert_str_eq(corConfSuggest("hots", keys, "keys", buf, sizeof(buf)),
                     " (keys: name, host); did you mean 'host'?");
    ck_assert_str_eq(corConfSuggest("zzz", names, "handlers", buf, sizeof(buf)),
                     " (handlers: hello, sleep, metrics)");
    ck_assert_str_eq(corConfSuggest("x", none, "handlers", buf, sizeof(buf)),
                     " (handlers: )");
    /* Cut at the buffer, never past it. */
    ck_assert_uint_eq(strlen(
                          corConfSuggest("helo", names, "handlers", buf, 16)),
                      15);
}
END_TEST

START_TEST(test_errors_format)
{
    CorConfErrors e = { 0 };
    CorConf* root = load("a: 1\n", &e);
    char big[2000];

    corConfErrorf(&e, corConfGet(root, "a"), "bad %s", "thing");
    corConfErrorf(&e, NULL, "no mark %d", 5);
    corConfErrorf(&e, root, "two\nlines\tand\x01");
    ck_assert_uint_eq(e.count, 3);
    ck_assert_str_eq(e.text, "t.yaml:1:4: bad thing\n"
                             "no mark 5\n"
                             "t.yaml:1:1: two\\nlines\\tand?\n");
    ck_assert_uint_eq(e.len, strlen(e.text));
    /* Messages longer than the first buffer, many times over. */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 100; i++) {
        corConfErrorf(&e, NULL, "%s", big);
    }
    ck_assert_uint_eq(e.count, 103);
    ck_assert_uint_eq(e.len, strlen(e.text));
    corConfErrorsFree(&e);
    ck_assert_ptr_null(e.text);
    ck_assert_uint_eq(e.count, 0);
    ck_assert_uint_eq(e.len, 0);
    corConfFree(root);
    corConfFree(NULL);
}
END_TEST

START_TEST(test_long_values_shortened)
{
    char text[400] = "k: ";
    CorConfErrors e = { 0 };
    CorConf* root;

    memset(text + 3, 'a', 300);
    root = load(text, &e);
    corConfInt(root, "k", 0, 0, 1, &e);
    ck_assert_uint_eq(e.count, 1);
    ck_assert_uint_lt(e.len, 120);
    ck_assert_ptr_nonnull(strstr(e.text, "aaa...'\n"));
    corConfErrorsFree(&e);
    corConfFree(root);
}
END_TEST

COR_TEST_SUITE(corConf)
{
    tcase_add_test(tc, test_load_keeps_marks_and_order);
    tcase_add_test(tc, test_get_handles_absent_and_non_maps);
    tcase_add_test(tc, test_load_file);
    tcase_add_test(tc, test_duplicate_keys_refused);
    tcase_add_test(tc, test_anchors_aliases_tags_documents_refused);
    tcase_add_test(tc, test_bad_keys_refused);
    tcase_add_test(tc, test_syntax_errors_carry_marks);
    tcase_add_test(tc, test_empty_refused);
    tcase_add_test(tc, test_depth_limited);
    tcase_add_test(tc, test_string_getter);
    tcase_add_test(tc, test_bool_getter);
    tcase_add_test(tc, test_int_getter);
    tcase_add_test(tc, test_size_units);
    tcase_add_test(tc, test_size_errors);
    tcase_add_test(tc, test_duration_units);
    tcase_add_test(tc, test_duration_errors);
    tcase_add_test(tc, test_map_and_seq_getters);
    tcase_add_test(tc, test_unknown_keys);
    tcase_add_test(tc, test_unused_keys);
    tcase_add_test(tc, test_unused_keys_know_what_was_asked);
    tcase_add_test(tc, test_suggest);
    tcase_add_test(tc, test_errors_format);
    tcase_add_test(tc, test_long_values_shortened);
}
