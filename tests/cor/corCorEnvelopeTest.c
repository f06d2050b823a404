/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The direct message codec (corCorEnvelope.c) against the reference, the
 * json_t path: corCorMessageEncode writes the bytes corCorMessageTree and
 * corCorFrameEncode write, byte for byte, with the tables in the same
 * state, over the message test's cases and over random messages that fill
 * the tables across thousands of frames; the direct decoder takes and
 * refuses what corCorFrameDecode and corCorMessageRead take and refuse,
 * over those frames, frames cut, bent and grown at random, and trees
 * that are not quite messages, with equal messages and equal tables.
 */
#include "corTest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "corCorInt.h"

/* A sender's tables and, for each decoder, the receiver's. */
typedef struct {
    CorCorTables* refSent;
    CorCorTables* sent;
    CorCorTables* refReceived;
    CorCorTables* received;
    CorCorTables* publicReceived;
    unsigned frames;
    unsigned refused;
    unsigned bends; /* bent copies of each frame decoded first */
} Pair;

static void
pairInit(Pair* p)
{
    *p = (Pair){ corCorTablesNew(),
                 corCorTablesNew(),
                 corCorTablesNew(),
                 corCorTablesNew(),
                 corCorTablesNew(),
                 0,
                 0,
                 0 };
}

static void
pairFree(Pair* p)
{
    corCorTablesFree(p->refSent);
    corCorTablesFree(p->sent);
    corCorTablesFree(p->refReceived);
    corCorTablesFree(p->received);
    corCorTablesFree(p->publicReceived);
}

/* One check at the end: check writes down every assertion that passes,
 * which thousands of entries a frame would make the test's whole cost. */
static void
tableEq(const CorCorTable* a, const CorCorTable* b)
{
    unsigned i = 0;

    ck_assert_uint_eq(a->count, b->count);
    while (i < a->count && corCorTableAt(a, i)->len == corCorTableAt(b, i)->len
           && memcmp(corCorTableAt(a, i)->s, corCorTableAt(b, i)->s,
                     corCorTableAt(a, i)->len)
                  == 0) {
        i++;
    }
    ck_assert_msg(i == a->count, "entry %u differs", i);
}

static void
tablesEq(const CorCorTables* a, const CorCorTables* b)
{
    tableEq(&a->namespaces, &b->namespaces);
    tableEq(&a->names, &b->names);
}

static void
tablesBack(CorCorTables* t, unsigned namespaces, unsigned names)
{
    corCorTableTruncate(&t->namespaces, namespaces);
    corCorTableTruncate(&t->names, names);
}

static void
strEq(const char* a, const char* b)
{
    ck_assert_msg((a == NULL) == (b == NULL), "%s / %s", a ? a : "NULL",
                  b ? b : "NULL");
    if (a != NULL) {
        ck_assert_str_eq(a, b);
    }
}

static void
messageEq(const CorCorMessage* a, const CorCorMessage* b)
{
    strEq(a->verb, b->verb);
    strEq(a->path, b->path);
    strEq(a->contentType, b->contentType);
    ck_assert_int_eq(a->status, b->status);
    ck_assert_uint_eq(a->headerCount, b->headerCount);
    for (unsigned i = 0; i < a->headerCount; i++) {
        const CorHeader* x = &a->headers[i];
        const CorHeader* y = &b->headers[i];

        ck_assert_mem_eq(x->name, y->name, x->nameLen);
        ck_assert_uint_eq(x->nameLen, y->nameLen);
        ck_assert_uint_eq(x->valueLen, y->valueLen);
        ck_assert_mem_eq(x->value, y->value, x->valueLen);
        ck_assert_int_eq(y->name[y->nameLen], '\0');
        ck_assert_int_eq(y->value[y->valueLen], '\0');
    }
    ck_assert_uint_eq(a->bodyLen, b->bodyLen);
    ck_assert_mem_eq(a->body, b->body, a->bodyLen);
    ck_assert_int_eq(((const char*)b->body)[b->bodyLen], '\0');
}

/* The frame at f decoded by the reference, the direct decoder alone and
 * the public one, from tables alike: the same verdict, the same message,
 * the same tables (the direct one's back as before on a refusal). With
 * keep false every table goes back as before, whatever the verdict. */
static int
decodeAlike(Pair* p, const uint8_t* f, size_t len, bool keep)
{
    unsigned ns = p->refReceived->namespaces.count;
    unsigned names = p->refReceived->names.count;
    char why[COR_COR_WHY_MAX] = "";
    char whyPublic[COR_COR_WHY_MAX] = "";
    CorCorMessage ref = { 0 };
    CorCorMessage direct;
    CorCorMessage pub;
    CorCorHead h;
    json_t* tree;
    int rc = corCorFrameDecode(p->refReceived, f, len, COR_COR_FRAME_MAX, &h,
                               &tree, why, sizeof(why));
    int directRc = corCorEnvelopeRead(p->received, f, len, COR_COR_FRAME_MAX,
                                      &h, &direct, NULL, 0);
    int publicRc = corCorMessageDecode(p->publicReceived, f, len,
                                       COR_COR_FRAME_MAX, &h, &pub, whyPublic,
                                       sizeof(whyPublic));

    if (rc == 0) {
        rc = corCorMessageRead(h.type, tree, &ref, why, sizeof(why));
    }
    ck_assert_msg((rc == 0) == (directRc == 0),
                  "reference %d (%s), direct "
                  "%d, frame %u",
                  rc, why, directRc, p->frames);
    ck_assert_int_eq(rc, publicRc);
    ck_assert_str_eq(why, whyPublic);
    tablesEq(p->refReceived, p->publicReceived);
    if (rc == 0) {
        messageEq(&ref, &direct);
        messageEq(&ref, &pub);
        tablesEq(p->refReceived, p->received);
    } else {
        ck_assert_ptr_null(direct.store);
        ck_assert_ptr_null(pub.store);
        ck_assert_uint_eq(p->received->namespaces.count, ns);
        ck_assert_uint_eq(p->received->names.count, names);
        p->refused++;
    }
    if (rc != 0 || !keep) {
        tablesBack(p->refReceived, ns, names);
        tablesBack(p->received, ns, names);
        tablesBack(p->publicReceived, ns, names);
    }
    corCorMessageClear(&ref);
    corCorMessageClear(&direct);
    corCorMessageClear(&pub);
    return rc;
}

static unsigned
pick(unsigned n)
{
    return (unsigned)random() % n;
}

static const char*
pickFrom(const char* const* list, unsigned n)
{
    return list[pick(16) == 0 ? n - 1 - pick(2) : pick(n - 2)];
}

/* A copy of frame whose tree is cut, grown or has a byte changed, with
 * its header's length kept true (or, once in a while, not). */
static size_t
bend(const uint8_t* frame, size_t len, uint8_t* out)
{
    size_t at = COR_COR_HEAD_LEN + pick((unsigned)(len - COR_COR_HEAD_LEN));
    size_t n = len;
    unsigned how = pick(6);

    memcpy(out, frame, len);
    if (how == 0) {
        n = at;
    } else if (how == 1) {
        memmove(out + at + 1, out + at, len - at);
        out[at] = (uint8_t)pick(256);
        n = len + 1;
    } else if (how == 5) {
        out[pick(16)] ^= (uint8_t)(1 << pick(8));
        return n;
    } else {
        out[at] = how == 2 ? (uint8_t)pick(256)
                           : (uint8_t)(out[at] ^ 1 << pick(8));
    }
    corCorHeadWrite(out, (CorCorType)out[4], 7,
                    (uint32_t)(n - COR_COR_HEAD_LEN));
    return n;
}

/* m sent both ways: the same bytes or the same refusal, the tables
 * alike; then received, as decodeAlike. */
static void
sendAlike(Pair* p, CorCorType type, const CorCorMessage* m)
{
    char why[COR_COR_WHY_MAX] = "";
    CorBuf ref = { 0 };
    CorBuf direct = { 0 };
    json_t* tree = corCorMessageTree(type, m, why, sizeof(why));
    int rc = tree != NULL ? corCorFrameEncode(p->refSent, type, 7, tree, &ref,
                                              why, sizeof(why))
                          : -EINVAL;
    int directRc = corCorMessageEncode(p->sent, type, 7, m, &direct, why,
                                       sizeof(why));

    ck_assert_msg((rc > 0) == (directRc > 0), "reference %d, direct %d: %s", rc,
                  directRc, why);
    ck_assert_uint_eq(ref.len, direct.len);
    if (ref.len > 0) {
        ck_assert_mem_eq(ref.data, direct.data, ref.len);
    }
    tablesEq(p->refSent, p->sent);
    for (unsigned k = 0; rc > 0 && k < p->bends; k++) {
        uint8_t bent[4096];

        if (direct.len < sizeof(bent) - 1) {
            decodeAlike(p, bent, bend(direct.data, direct.len, bent), false);
        }
    }
    if (rc > 0) {
        ck_assert_int_eq(decodeAlike(p, direct.data, direct.len, true), 0);
    }
    p->frames++;
    json_decref(tree);
    corBufFree(&ref);
    corBufFree(&direct);
}

/* ---- The message test's cases ----------------------------------------- */

static const char* const bodies[] = {
    "{}",
    "[]",
    "{\"a\":1,\"b\":[true,null,false]}",
    "{\"b\":1,\"a\":2}",
    "\"just a string\"",
    "42",
    "-1.5",
    "-0.0",
    "1.0",
    "true",
    "null",
    "-9223372036854775808",
    "{\"url\":\"http://x/y\",\"n\":[1,2.5,-7],\"\xc3\xa9\":\"\"}",
    "[\"a\\nb\\\"c\\\\\"]",
    "{\"a\": 1}",
    "{\"a\":1}\n",
    "{\"a\":1,\"a\":2}",
    "1e2",
    "0.1",
    "-0",
    "1.50",
    "[\"\\u00e9\"]",
    "[\"\\/\"]",
    "123456789012345678901234567890",
    "{\"a\":1",
    "hello, world\n",
    "see http://example.com/a and urn:x:y",
    "caf\xe9",
    "\x01\x02\x03",
    "a\0b",
    "\xff",
    "urn:isbn:0451450523",
    "",
    " {}",
};

START_TEST(test_the_message_cases_encode_and_decode_alike)
{
    const CorHeader headers[] = {
        { "X-Trace", 7, "abc", 3 },
        { "Set-Cookie", 10, "a=1", 3 },
        { "Date", 4, "Mon", 3 },
        { "content-type", 12, "text/x", 6 },
        { "Set-Cookie", 10, "b=2", 3 },
        { "set-cookie", 10, "c", 1 },
        { "Content-Length", 14, "9", 1 },
        { "Link", 4, "http://a/b", 10 },
        { "X-Tab", 5, "a\tb", 3 },
        { "X-Empty", 7, "", 0 },
        { "Set-Cookie", 10, "urn:x:y", 7 },
    };
    const CorHeader bad[] = { { "Bad Name", 8, "v", 1 },
                              { "X", 1, "a\r\nInjected: 1", 15 },
                              { "X", 1, "caf\xe9", 4 } };
    Pair p;

    pairInit(&p);
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        for (unsigned n = 0; n <= 11; n += 11) {
            CorCorMessage m = { .verb = "GET",
                                .path = "/a/b?x=1",
                                .status = 200,
                                .headers = headers,
                                .headerCount = n,
                                .body = bodies[i],
                                .bodyLen = strlen(bodies[i]) };

            sendAlike(&p, COR_COR_REQUEST, &m);
            m.contentType = "application/json";
            sendAlike(&p, COR_COR_RESPONSE, &m);
            m.path = "http://example.com/x/y";
            sendAlike(&p, COR_COR_REQUEST, &m);
        }
    }
    sendAlike(&p, COR_COR_RESPONSE,
              &(CorCorMessage){ .status = 204, .body = "a\0b", .bodyLen = 3 });
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sendAlike(&p, COR_COR_RESPONSE,
                  &(CorCorMessage){
                      .status = 200, .headers = &bad[i], .headerCount = 1 });
    }
    sendAlike(&p, COR_COR_REQUEST,
              &(CorCorMessage){ .verb = "GE T", .path = "/" });
    sendAlike(&p, COR_COR_REQUEST,
              &(CorCorMessage){ .verb = "GET", .path = "" });
    sendAlike(&p, COR_COR_REQUEST,
              &(CorCorMessage){ .verb = "GET", .path = "/\xff" });
    sendAlike(&p, COR_COR_REQUEST, &(CorCorMessage){ .path = "/" });
    sendAlike(&p, COR_COR_PUSH, &(CorCorMessage){ .status = 200 });
    sendAlike(&p, COR_COR_RESPONSE, &(CorCorMessage){ .status = 99 });
    sendAlike(&p, COR_COR_RESPONSE, &(CorCorMessage){ .status = 1000 });
    /* No interim answer, no upgrade, nothing an HTTP client refuses. */
    sendAlike(&p, COR_COR_RESPONSE, &(CorCorMessage){ .status = 101 });
    sendAlike(&p, COR_COR_RESPONSE, &(CorCorMessage){ .status = 199 });
    sendAlike(&p, COR_COR_RESPONSE, &(CorCorMessage){ .status = 600 });
    sendAlike(&p, COR_COR_RESPONSE,
              &(CorCorMessage){ .status = 200, .contentType = "text/plain\n" });
    pairFree(&p);
}
END_TEST

/* ---- Random messages ---------------------------------------------------- */

/* Lists whose last two are refused, and picked once in 16 times. */
static const char* const verbs[] = { "GET", "POST", "DELETE", "G ET", "" };
static const char* const names[] = {
    "Content-Type", "content-type", "Date", "Content-Length", "X-A", "x-a",
    "Set-Cookie",   "Accept",       "Link", "Bad:Name",       "",
};
static const char* const values[] = {
    "",
    "a",
    "text/html",
    "http://h/p/q",
    "urn:a:b",
    "a\tb",
    "\xc3\xa9t\xc3\xa9",
    "https://example.com/ns#name",
    "x://",
    "a\nb",
    "\xc3",
};

/* A string into buf: from a list, or made to fill a table (a new name or
 * namespace most times), or long (never appended). */
static const char*
randomString(char* buf, size_t size, const char* const* list, unsigned n,
             bool name)
{
    static unsigned fresh;
    unsigned k = pick(8);

    if (k < 3) {
        return pickFrom(list, n);
    }
    if (k < 7) {
        /* Now and then one seen before, mostly a new one. */
        snprintf(buf, size, name ? "X-%u" : "http://h%u/p/%u",
                 k == 3 ? pick(100) : ++fresh, pick(4));
        return buf;
    }
    memset(buf, name ? 'N' : 'v', size - 1);
    buf[size - 1] = '\0';
    if (!name) {
        memcpy(buf, "urn:long:", 9);
    }
    return buf;
}

static void
randomMessage(Pair* p)
{
    char text[12][300];
    CorHeader headers[12];
    unsigned n = pick(13);
    CorCorMessage m = { .verb = pickFrom(verbs, 5),
                        .status = pick(16) ? 100 + (int)pick(900) : 1000,
                        .headers = headers,
                        .headerCount = n };

    m.path = pick(4) == 0 ? "/p" : randomString(text[0], 64, values, 11, 0);
    for (unsigned i = 0; i < n; i++) {
        const char* name = randomString(text[i], pick(8) ? 20 : 300, names, 11,
                                        true);
        const char* value = pick(3) == 0 ? m.path : pickFrom(values, 11);

        headers[i] = (CorHeader){ name, strlen(name), value, strlen(value) };
    }
    m.contentType = pick(4) == 0 ? "text/plain" : NULL;
    m.body = bodies[pick(sizeof(bodies) / sizeof(bodies[0]))];
    m.bodyLen = strlen(m.body);
    sendAlike(p, pick(2) ? COR_COR_REQUEST : COR_COR_RESPONSE, &m);
}

START_TEST(test_random_messages_encode_alike_as_the_tables_fill)
{
    Pair p;

    srandom(1);
    pairInit(&p);
    for (unsigned i = 0; i < 20000; i++) {
        randomMessage(&p);
    }
    ck_assert_uint_eq(corCorTablesNames(p.sent), COR_COR_NAMES_MAX);
    ck_assert_uint_eq(corCorTablesNamespaces(p.sent), COR_COR_NAMESPACES_MAX);
    tablesEq(p.refReceived, p.sent);
    pairFree(&p);
}
END_TEST

/* The envelope's names go by the index their table keeps; a frame that
 * failed after it appended them takes them out again, and the next one
 * sends them inline, as the reference does. */
START_TEST(test_known_names_follow_a_failed_frame_back)
{
    static const CorHeader bad[] = { { "X-A", 3, "a\nb", 3 } };
    static const CorHeader good[] = { { "X-A", 3, "ok", 2 } };
    CorCorMessage failing = { .status = 200,
                              .headers = bad,
                              .headerCount = 1,
                              .body = "hi",
                              .bodyLen = 2 };
    CorCorMessage passing = failing;
    Pair p;

    passing.headers = good;
    pairInit(&p);
    sendAlike(&p, COR_COR_RESPONSE, &failing);
    ck_assert_uint_eq(p.sent->names.known[COR_COR_KNOWN_STATUS], 0);
    ck_assert_uint_eq(p.sent->names.known[COR_COR_KNOWN_HEADERS], 0);
    for (unsigned i = 0; i < 3; i++) {
        sendAlike(&p, COR_COR_RESPONSE, &passing);
        ck_assert_uint_eq(p.sent->names.known[COR_COR_KNOWN_STATUS], 1);
        ck_assert_uint_eq(p.received->names.known[COR_COR_KNOWN_STATUS], 1);
        ck_assert_uint_eq(p.sent->names.known[COR_COR_KNOWN_TEXT],
                          p.received->names.known[COR_COR_KNOWN_TEXT]);
        sendAlike(&p, COR_COR_RESPONSE, &failing);
    }
    ck_assert_uint_ne(p.sent->names.known[COR_COR_KNOWN_TEXT], 0);
    pairFree(&p);
}
END_TEST

/* ---- Frames bent at random ---------------------------------------------- */

START_TEST(test_bent_frames_are_refused_or_taken_alike)
{
    Pair p;

    srandom(2);
    pairInit(&p);
    p.bends = 20;
    for (unsigned i = 0; i < 2000; i++) {
        randomMessage(&p);
    }
    ck_assert_uint_gt(p.refused, 10000);
    pairFree(&p);
}
END_TEST

/* Trees that decode but are not quite messages: members unknown, twice,
 * of the wrong type, headers that HTTP could not carry. */
START_TEST(test_trees_that_are_not_messages_are_refused_alike)
{
    static const char* const trees[] = {
        "{\"status\":200,\"headers\":{}}",
        "{\"status\":200}",
        "{\"status\":99}",
        "{\"status\":100}",
        "{\"status\":101}",
        "{\"status\":600}",
        "{\"status\":\"200\"}",
        "{\"status\":200,\"verb\":\"GET\"}",
        "{\"verb\":\"GET\",\"path\":\"/\"}",
        "{\"verb\":\"GET\",\"path\":\"\"}",
        "{\"verb\":\"G T\",\"path\":\"/\"}",
        "{\"verb\":\"GET\"}",
        "{\"path\":\"/\",\"verb\":\"GET\",\"headers\":[]}",
        "{\"status\":200,\"other\":1}",
        "{\"status\":200,\"text\":\"a\",\"bytes\":\"YQ==\"}",
        "{\"status\":200,\"body\":[1],\"text\":\"a\"}",
        "{\"status\":200,\"bytes\":\"YQ=\"}",
        "{\"status\":200,\"bytes\":\"YR==\"}",
        "{\"status\":200,\"bytes\":\"Y===\"}",
        "{\"status\":200,\"bytes\":\"\"}",
        "{\"status\":200,\"text\":\"\"}",
        "{\"status\":200,\"text\":5}",
        "{\"status\":200,\"body\":{\"a\":[1,2.5,null]}}",
        "{\"status\":200,\"body\":\"s\"}",
        "{\"status\":200,\"headers\":{\"A\":[]}}",
        "{\"status\":200,\"headers\":{\"A\":[\"1\",\"2\"],\"B\":\"3\"}}",
        "{\"status\":200,\"headers\":{\"A\":[\"1\",2]}}",
        "{\"status\":200,\"headers\":{\"A\":1}}",
        "{\"status\":200,\"headers\":{\"A B\":\"1\"}}",
        "{\"status\":200,\"headers\":{\"A\":\"1\\n\"}}",
        "{\"status\":200,\"headers\":{\"Content-Type\":[\"a\",\"b\"]}}",
        "{\"status\":200,\"headers\":{\"Content-Type\":\"a\","
        "\"content-type\":\"b\"}}",
        "{\"status\":200,\"headers\":{\"Content-Type\":[\"a\"],"
        "\"Date\":\"x\",\"content-length\":[\"1\",\"2\"],\"X\":\"y\"}}",
        "{\"status\":200,\"headers\":{\"X\":{\"a\":\"b\"}}}",
        "[]",
        "\"GET\"",
    };
    CorCorType types[] = { COR_COR_RESPONSE, COR_COR_REQUEST, COR_COR_PUSH,
                           COR_COR_HELLO };
    char why[COR_COR_WHY_MAX];
    Pair p;

    for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
        for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
            json_t* tree = json_loads(trees[i], JSON_DECODE_ANY, NULL);
            CorBuf b = { 0 };

            pairInit(&p);
            ck_assert_ptr_nonnull(tree);
            ck_assert_int_gt(corCorFrameEncode(p.refSent, types[k], 1, tree, &b,
                                               why, sizeof(why)),
                             0);
            decodeAlike(&p, b.data, b.len, true);
            json_decref(tree);
            corBufFree(&b);
            pairFree(&p);
        }
    }
}
END_TEST

COR_TEST_SUITE(corCorEnvelope)
{
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_the_message_cases_encode_and_decode_alike);
    tcase_add_test(tc, test_random_messages_encode_alike_as_the_tables_fill);
    tcase_add_test(tc, test_known_names_follow_a_failed_frame_back);
    tcase_add_test(tc, test_bent_frames_are_refused_or_taken_alike);
    tcase_add_test(tc, test_trees_that_are_not_messages_are_refused_alike);
}
