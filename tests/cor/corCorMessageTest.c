/* SPDX-License-Identifier: Apache-2.0 */
/*
 * REQUEST and RESPONSE frames as messages: each body comes back byte for
 * byte through a frame (the chain test's condition), as a tree when it is
 * JSON that prints back the same, as "text" when not, as "bytes" when it
 * is not UTF-8; headers keep their case and order, Date and
 * Content-Length do not travel; bad messages are refused both ways.
 */
#include "corTest.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "corCorCodec.h"

/* Send m as a frame of type through the tables s, receive it through r
 * into *back; returns the member its body travelled as (or NULL). */
static const char*
sendThrough(CorCorTables* s, CorCorTables* r, CorCorType type,
            const CorCorMessage* m, CorCorMessage* back)
{
    CorBuf b = { 0 };
    char why[COR_COR_WHY_MAX] = "";
    json_t* tree = corCorMessageTree(type, m, why, sizeof(why));
    const char* member = NULL;
    CorCorHead h;
    json_t* got;

    ck_assert_msg(tree != NULL, "%s", why);
    ck_assert_int_gt(corCorFrameEncode(s, type, 5, tree, &b, why, sizeof(why)),
                     0);
    ck_assert_msg(corCorFrameDecode(r, b.data, b.len, COR_COR_FRAME_MAX, &h,
                                    &got, why, sizeof(why))
                      == 0,
                  "%s", why);
    ck_assert_int_eq(h.type, type);
    ck_assert_msg(corCorMessageRead(type, got, back, why, sizeof(why)) == 0,
                  "%s", why);
    member = json_object_get(tree, "body")    ? "body"
             : json_object_get(tree, "text")  ? "text"
             : json_object_get(tree, "bytes") ? "bytes"
                                              : NULL;
    json_decref(tree);
    corBufFree(&b);
    return member;
}

/* A response of body (len bytes) comes back the same, having travelled as
 * want. */
static void
bodyTravels(const char* body, size_t len, const char* want)
{
    CorCorTables* s = corCorTablesNew();
    CorCorTables* r = corCorTablesNew();
    CorCorMessage m = { .status = 200,
                        .contentType = "application/json",
                        .body = body,
                        .bodyLen = len };
    CorCorMessage back;
    const char* member = sendThrough(s, r, COR_COR_RESPONSE, &m, &back);

    ck_assert_msg(member != NULL && strcmp(member, want) == 0,
                  "%.*s travelled as %s, not %s", (int)len, body,
                  member ? member : "nothing", want);
    ck_assert_uint_eq(back.bodyLen, len);
    ck_assert_mem_eq(back.body, body, len);
    ck_assert_int_eq(((const char*)back.body)[len], '\0');
    ck_assert_str_eq(back.contentType, "application/json");
    ck_assert_int_eq(back.status, 200);
    corCorMessageClear(&back);
    corCorTablesFree(s);
    corCorTablesFree(r);
}

#define TRAVELS(lit, want) bodyTravels(lit, sizeof(lit) - 1, want)

START_TEST(test_json_that_prints_back_travels_as_its_tree)
{
    TRAVELS("{}", "body");
    TRAVELS("[]", "body");
    TRAVELS("{\"a\":1,\"b\":[true,null,false]}", "body");
    TRAVELS("{\"b\":1,\"a\":2}", "body");
    TRAVELS("\"just a string\"", "body");
    TRAVELS("42", "body");
    TRAVELS("-1.5", "body");
    TRAVELS("-0.0", "body");
    TRAVELS("1.0", "body");
    TRAVELS("true", "body");
    TRAVELS("null", "body");
    TRAVELS("-9223372036854775808", "body");
    TRAVELS("{\"url\":\"http://x/y\",\"n\":[1,2.5,-7],\"\xc3\xa9\":\"\"}",
            "body");
    TRAVELS("[\"a\\nb\\\"c\\\\\"]", "body");
}
END_TEST

START_TEST(test_json_that_would_not_print_back_travels_as_text)
{
    TRAVELS("{\"a\": 1}", "text");        /* a space */
    TRAVELS("{\"a\":1}\n", "text");       /* a final newline */
    TRAVELS("{\"a\":1,\"a\":2}", "text"); /* a duplicate key */
    TRAVELS("1e2", "text");               /* a number form */
    TRAVELS("0.1", "text");               /* printed 0.1000...1 */
    TRAVELS("-0", "text");
    TRAVELS("1.50", "text");
    TRAVELS("[\"\\u00e9\"]", "text"); /* an escape */
    TRAVELS("[\"\\/\"]", "text");
    TRAVELS("123456789012345678901234567890", "text");
    TRAVELS("{\"a\":1", "text"); /* not JSON */
    TRAVELS("hello, world\n", "text");
    TRAVELS("see http://example.com/a and urn:x:y", "text");
}
END_TEST

/* A body 3000 brackets deep. */
static void*
deepBody(void* arg)
{
    size_t n = 3000;
    char* body = malloc(2 * n);

    (void)arg;
    memset(body, '[', n);
    memset(body + n, ']', n);
    bodyTravels(body, 2 * n, "text");
    free(body);
    return NULL;
}

START_TEST(test_deep_bodies_are_text_and_take_little_stack)
{
    char body[2 * 255 + 5];
    pthread_attr_t attr;
    pthread_t thread;

    /* jansson's parser recurses a level at a time, up to 2048 levels,
     * which would take more than this stack: a body deeper than a tree
     * may be is text without being parsed. */
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)128 * 1024);
    ck_assert_int_eq(pthread_create(&thread, &attr, deepBody, NULL), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    pthread_attr_destroy(&attr);
    /* 254 arrays and a string under the root: a tree; one more: text.
     * Brackets and quotes in strings do not count. */
    for (size_t k = 254; k <= 255; k++) {
        memset(body, '[', k);
        memcpy(body + k, "\"[\\\"\"", 5);
        memset(body + k + 5, ']', k);
        bodyTravels(body, 2 * k + 5, k == 254 ? "body" : "text");
    }
}
END_TEST

START_TEST(test_bytes_travel_as_base64)
{
    char all[256];

    TRAVELS("\xff", "bytes");
    TRAVELS("a\0b", "bytes");     /* a NUL */
    TRAVELS("\xc3\x28", "bytes"); /* not UTF-8 */
    TRAVELS("\x00\x01", "bytes");
    TRAVELS("\x00\x01\x02", "bytes");
    TRAVELS("\x00\x01\x02\x03", "bytes");
    for (int i = 0; i < 256; i++) {
        all[i] = (char)i;
    }
    for (size_t n = 1; n <= sizeof(all); n += 37) {
        bodyTravels(all + sizeof(all) - n, n, "bytes");
    }
}
END_TEST

START_TEST(test_a_request_keeps_its_headers)
{
    CorCorTables* s = corCorTablesNew();
    CorCorTables* r = corCorTablesNew();
    const CorHeader headers[] = {
        /* Lengths, not NULs, end names and values. */
        { "X-Trace: x", 7, "abcdef", 3 },
        { "Date", 4, "Mon, 30 Nov 2026 07:00:00 GMT", 29 },
        { "content-length", 14, "2", 1 },
        { "Set-Cookie", 10, "a=1", 3 },
        { "accept", 6, "*/*", 3 },
        { "Set-Cookie", 10, "b=2", 3 },
        { "Content-Type", 12, "text/plain; junk", 10 },
    };
    CorCorMessage m = { .verb = "POST",
                        .path = "/a/b?x=1&y=%20",
                        .headers = headers,
                        .headerCount = 7,
                        .body = "{}",
                        .bodyLen = 2 };
    CorCorMessage back;

    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(sendThrough(s, r, COR_COR_REQUEST, &m, &back), "body");
        ck_assert_str_eq(back.verb, "POST");
        ck_assert_str_eq(back.path, "/a/b?x=1&y=%20");
        /* The content type from the headers, since m had none. */
        ck_assert_str_eq(back.contentType, "text/plain");
        ck_assert_uint_eq(back.headerCount, 4);
        ck_assert_str_eq(back.headers[0].name, "X-Trace");
        ck_assert_str_eq(back.headers[0].value, "abc");
        ck_assert_str_eq(back.headers[1].name, "Set-Cookie");
        ck_assert_str_eq(back.headers[1].value, "a=1");
        ck_assert_str_eq(back.headers[2].name, "Set-Cookie");
        ck_assert_str_eq(back.headers[2].value, "b=2");
        ck_assert_str_eq(back.headers[3].name, "accept");
        ck_assert_uint_eq(back.headers[3].valueLen, 3);
        ck_assert_uint_eq(back.bodyLen, 2);
        corCorMessageClear(&back);
    }
    /* Once the names are in the tables, requests go by index. */
    ck_assert_uint_eq(corCorTablesNames(s), corCorTablesNames(r));
    ck_assert_uint_ge(corCorTablesNames(r), 7);
    corCorTablesFree(s);
    corCorTablesFree(r);
}
END_TEST

START_TEST(test_empty_bodies_send_no_member)
{
    CorCorMessage m = { .verb = "GET", .path = "/" };
    CorCorMessage back;
    json_t* tree = corCorMessageTree(COR_COR_REQUEST, &m, NULL, 0);
    const char* key;
    json_t* v;
    const char* order[] = { "verb", "path", "headers" };
    int i = 0;

    json_object_foreach(tree, key, v)
    {
        ck_assert_str_eq(key, order[i++]);
    }
    ck_assert_int_eq(i, 3);
    json_decref(tree);
    ck_assert_ptr_null(sendThrough(NULL, NULL, COR_COR_REQUEST, &m, &back));
    ck_assert_uint_eq(back.bodyLen, 0);
    ck_assert_ptr_null(back.contentType);
    ck_assert_uint_eq(back.headerCount, 0);
    corCorMessageClear(&back);
    m = (CorCorMessage){ .status = 204 };
    ck_assert_ptr_null(sendThrough(NULL, NULL, COR_COR_RESPONSE, &m, &back));
    ck_assert_int_eq(back.status, 204);
    ck_assert_ptr_null(back.verb);
    corCorMessageClear(&back);
}
END_TEST

/* A message the sender refuses, with why holding expect. */
static void
notSent(CorCorType type, const CorCorMessage* m, const char* expect)
{
    char why[COR_COR_WHY_MAX] = "";

    ck_assert_ptr_null(corCorMessageTree(type, m, why, sizeof(why)));
    ck_assert_msg(strstr(why, expect) != NULL, "\"%s\" is not \"%s\"", why,
                  expect);
}

START_TEST(test_bad_messages_are_not_sent)
{
    const CorHeader badName[] = { { "Bad Name", 8, "v", 1 } };
    const CorHeader crlf[] = { { "X", 1, "a\r\nInjected: 1", 15 } };
    const CorHeader latin1[] = { { "X", 1, "caf\xe9", 4 } };

    notSent(COR_COR_REQUEST, &(CorCorMessage){ .verb = "GE T", .path = "/" },
            "token verb");
    notSent(COR_COR_REQUEST, &(CorCorMessage){ .verb = "GET", .path = "" },
            "token verb");
    notSent(COR_COR_REQUEST, &(CorCorMessage){ .path = "/" }, "token verb");
    notSent(COR_COR_PUSH, &(CorCorMessage){ .status = 200 }, "type 5");
    notSent(COR_COR_RESPONSE, &(CorCorMessage){ .status = 99 }, "status 99");
    notSent(COR_COR_RESPONSE, &(CorCorMessage){ .status = 1000 },
            "status 1000");
    /* No interim answer, no upgrade, nothing an HTTP client refuses. */
    notSent(COR_COR_RESPONSE, &(CorCorMessage){ .status = 100 }, "status 100");
    notSent(COR_COR_RESPONSE, &(CorCorMessage){ .status = 101 }, "status 101");
    notSent(COR_COR_RESPONSE, &(CorCorMessage){ .status = 600 }, "status 600");
    notSent(COR_COR_RESPONSE,
            &(CorCorMessage){
                .status = 200, .headers = badName, .headerCount = 1 },
            "not a token");
    notSent(COR_COR_RESPONSE,
            &(CorCorMessage){
                .status = 200, .headers = crlf, .headerCount = 1 },
            "control character");
    notSent(COR_COR_RESPONSE,
            &(CorCorMessage){
                .status = 200, .headers = latin1, .headerCount = 1 },
            "not UTF-8");
    notSent(COR_COR_RESPONSE,
            &(CorCorMessage){ .status = 200, .contentType = "text/plain\n" },
            "control character");
}
END_TEST

/* A tree read as a message of type is refused with expect. */
static void
notRead(CorCorType type, const char* text, const char* expect)
{
    char why[COR_COR_WHY_MAX] = "";
    CorCorMessage m;
    json_t* tree = json_loads(text, 0, NULL);

    ck_assert_msg(tree != NULL, "%s", text);
    ck_assert_int_eq(corCorMessageRead(type, tree, &m, why, sizeof(why)),
                     -EPROTO);
    ck_assert_msg(strstr(why, expect) != NULL, "%s: \"%s\" is not \"%s\"", text,
                  why, expect);
    ck_assert_ptr_null(m.tree);
}

START_TEST(test_bad_messages_are_refused)
{
    static const struct {
        CorCorType type;
        const char* text;
        const char* expect;
    } bad[] = {
        { COR_COR_REQUEST, "[]", "not an object" },
        { COR_COR_PING, "{}", "not an object" },
        { COR_COR_REQUEST, "{\"path\":\"/\"}", "no token verb" },
        { COR_COR_REQUEST, "{\"verb\":\"GET\"}", "no token verb" },
        { COR_COR_REQUEST, "{\"verb\":1,\"path\":\"/\"}", "\"verb\"" },
        { COR_COR_REQUEST, "{\"verb\":\"G T\",\"path\":\"/\"}",
          "no token verb" },
        { COR_COR_REQUEST, "{\"verb\":\"GET\",\"path\":\"/\",\"x\":1}",
          "\"x\" unknown" },
        { COR_COR_REQUEST, "{\"verb\":\"GET\",\"path\":\"/\",\"status\":200}",
          "\"status\"" },
        { COR_COR_RESPONSE, "{\"status\":200,\"verb\":\"GET\"}", "\"verb\"" },
        { COR_COR_RESPONSE, "{}", "no status" },
        { COR_COR_RESPONSE, "{\"status\":42}", "no status" },
        { COR_COR_RESPONSE, "{\"status\":100}", "no status in 200..599" },
        { COR_COR_RESPONSE, "{\"status\":101}", "no status in 200..599" },
        { COR_COR_RESPONSE, "{\"status\":199}", "no status in 200..599" },
        { COR_COR_RESPONSE, "{\"status\":600}", "no status in 200..599" },
        { COR_COR_RESPONSE, "{\"status\":\"200\"}", "\"status\"" },
        { COR_COR_RESPONSE, "{\"status\":200,\"body\":1,\"text\":\"a\"}",
          "second body" },
        { COR_COR_RESPONSE, "{\"status\":200,\"text\":1}", "\"text\"" },
        { COR_COR_RESPONSE, "{\"status\":200,\"headers\":[]}", "\"headers\"" },
        { COR_COR_RESPONSE, "{\"status\":200,\"headers\":{\"A\":1}}",
          "not a string" },
        { COR_COR_RESPONSE, "{\"status\":200,\"headers\":{\"A\":[]}}",
          "no value" },
        { COR_COR_RESPONSE, "{\"status\":200,\"headers\":{\"A\":[\"x\",2]}}",
          "not a string" },
        { COR_COR_RESPONSE,
          "{\"status\":200,\"headers\":{\"A\":\"a\\r\\nB: c\"}}",
          "not a string HTTP can carry" },
        { COR_COR_RESPONSE, "{\"status\":200,\"headers\":{\"A B\":\"x\"}}",
          "not a token" },
        { COR_COR_RESPONSE,
          "{\"status\":200,\"headers\":{\"Content-Type\":\"a\","
          "\"content-type\":\"b\"}}",
          "more than one Content-Type" },
        { COR_COR_RESPONSE,
          "{\"status\":200,\"headers\":{\"Content-Type\":[\"a\",\"b\"]}}",
          "more than one Content-Type" },
        { COR_COR_RESPONSE, "{\"status\":200,\"bytes\":\"QQ=\"}",
          "not base64" },
        { COR_COR_RESPONSE, "{\"status\":200,\"bytes\":\"Q===\"}",
          "not base64" },
        { COR_COR_RESPONSE, "{\"status\":200,\"bytes\":\"QR==\"}",
          "not base64" },
        { COR_COR_RESPONSE, "{\"status\":200,\"bytes\":\"QUI=QUI=\"}",
          "not base64" },
        { COR_COR_RESPONSE, "{\"status\":200,\"bytes\":\"Zm9v!A==\"}",
          "not base64" },
        { COR_COR_RESPONSE, "{\"status\":200,\"bytes\":\"QUJ=\"}",
          "not base64" },
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        notRead(bad[i].type, bad[i].text, bad[i].expect);
    }
}
END_TEST

START_TEST(test_received_date_and_length_are_dropped)
{
    CorCorMessage m;
    json_t* tree = json_loads("{\"status\":200,\"headers\":{\"Date\":\"x\","
                              "\"CONTENT-LENGTH\":\"9\",\"A\":[\"1\",\"2\"]},"
                              "\"bytes\":\"QUJD\"}",
                              0, NULL);

    ck_assert_int_eq(corCorMessageRead(COR_COR_RESPONSE, tree, &m, NULL, 0), 0);
    ck_assert_uint_eq(m.headerCount, 2);
    ck_assert_str_eq(m.headers[1].value, "2");
    ck_assert_uint_eq(m.bodyLen, 3);
    ck_assert_str_eq(m.body, "ABC");
    corCorMessageClear(&m);
}
END_TEST

COR_TEST_SUITE(corCorMessage)
{
    tcase_add_test(tc, test_json_that_prints_back_travels_as_its_tree);
    tcase_add_test(tc, test_json_that_would_not_print_back_travels_as_text);
    tcase_add_test(tc, test_bytes_travel_as_base64);
    tcase_add_test(tc, test_deep_bodies_are_text_and_take_little_stack);
    tcase_add_test(tc, test_a_request_keeps_its_headers);
    tcase_add_test(tc, test_empty_bodies_send_no_member);
    tcase_add_test(tc, test_bad_messages_are_not_sent);
    tcase_add_test(tc, test_bad_messages_are_refused);
    tcase_add_test(tc, test_received_date_and_length_are_dropped);
}
