/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 request parser: valid heads of every form, the same heads
 * fed a byte at a time and pipelined, the limits, a corpus of malformed and
 * smuggling requests with the status each must get, the character classes
 * byte by byte (as the parser and a client's checks use them), chunked
 * bodies split at every byte, and query splitting.
 */
#include "corTest.h"
#include "corHttpParse.h"

#include <stdio.h>
#include <string.h>

static const CorHttpLimits limits = {
    .headerBytes = 8192,
    .maxHeaders = 100,
    .bodyBytes = 1 << 20,
};

static char buf[65536];
static CorHttpHeader headerArray[1000];
static CorHttpRequestHead head = { .headers = headerArray };

/* A request or a body with its length, for texts holding NUL bytes. */
typedef struct {
    const char* text;
    size_t len;
    int status;
} Case;

#define CASE(text, status)                                                     \
    {                                                                          \
        text, sizeof(text) - 1, status                                         \
    }

static int
parseWith(const char* text, size_t n, const CorHttpLimits* lim)
{
    ck_assert_uint_le(n, sizeof(buf));
    memcpy(buf, text, n);
    return corHttpParseHead(buf, n, lim, &head);
}

static int
parse(const char* text)
{
    return parseWith(text, strlen(text), &limits);
}

static bool
spanIs(const char* p, size_t n, const char* want)
{
    return p != NULL && n == strlen(want) && memcmp(p, want, n) == 0;
}

static const char*
orNull(const char* p)
{
    return p != NULL ? p : "(null)";
}

/* Compare a (pointer, length) span with a C string, printing both. */
#define CHECK_SPAN(p, n, want)                                                 \
    ck_assert_msg(spanIs((p), (n), (want)), "\"%.*s\" != \"%s\"", (int)(n),    \
                  orNull(p), (want))

START_TEST(test_get)
{
    const char* req = "GET /index.html HTTP/1.1\r\n"
                      "Host: example.com\r\n"
                      "User-Agent: test\r\n"
                      "\r\n";

    ck_assert_int_eq(parse(req), (int)strlen(req));
    ck_assert_uint_eq(head.headLen, strlen(req));
    CHECK_SPAN(head.method, head.methodLen, "GET");
    CHECK_SPAN(head.target, head.targetLen, "/index.html");
    CHECK_SPAN(head.path, head.pathLen, "/index.html");
    ck_assert_ptr_null(head.query);
    CHECK_SPAN(head.host, head.hostLen, "example.com");
    ck_assert_int_eq(head.versionMinor, 1);
    ck_assert_uint_eq(head.headerCount, 2);
    CHECK_SPAN(head.headers[1].name, head.headers[1].nameLen, "User-Agent");
    CHECK_SPAN(head.headers[1].value, head.headers[1].valueLen, "test");
    ck_assert_int_eq(head.contentLength, -1);
    ck_assert(!head.chunked);
    ck_assert(head.keepAlive);
    ck_assert(!head.expectContinue);
    ck_assert(!head.head);
    ck_assert(!head.pathRewritten);
}
END_TEST

START_TEST(test_post_with_content_length)
{
    const char* req = "POST /submit HTTP/1.1\r\n"
                      "Host: a\r\n"
                      "Content-Length:  11 \r\n"
                      "\r\n"
                      "hello world";
    size_t headLen = strlen(req) - 11;

    ck_assert_int_eq(parse(req), (int)headLen);
    CHECK_SPAN(head.method, head.methodLen, "POST");
    ck_assert_int_eq(head.contentLength, 11);
    ck_assert(!head.chunked);
    ck_assert(memcmp(buf + headLen, "hello world", 11) == 0);

    ck_assert_int_gt(parse("POST / HTTP/1.1\r\nHost: a\r\n"
                           "Content-Length: 0\r\n\r\n"),
                     0);
    ck_assert_int_eq(head.contentLength, 0);
    /* Leading zeros are digits too (RFC 9110 section 8.6). */
    ck_assert_int_gt(parse("POST / HTTP/1.1\r\nHost: a\r\n"
                           "Content-Length: 007\r\n\r\n"),
                     0);
    ck_assert_int_eq(head.contentLength, 7);
}
END_TEST

START_TEST(test_chunked_request)
{
    ck_assert_int_gt(parse("POST /up HTTP/1.1\r\nHost: a\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n"),
                     0);
    ck_assert(head.chunked);
    ck_assert_int_eq(head.contentLength, -1);
    ck_assert_int_gt(parse("POST /up HTTP/1.1\r\nHost: a\r\n"
                           "transfer-encoding:  ChunKed \r\n\r\n"),
                     0);
    ck_assert(head.chunked);
    /* Empty list elements are allowed around it (RFC 9110 5.6.1). */
    ck_assert_int_gt(parse("POST /up HTTP/1.1\r\nHost: a\r\n"
                           "Transfer-Encoding: , chunked ,\r\n\r\n"),
                     0);
    ck_assert(head.chunked);
}
END_TEST

START_TEST(test_head_method)
{
    ck_assert_int_gt(parse("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    ck_assert(head.head);
    /* The method is case-sensitive: "head" is some other method. */
    ck_assert_int_gt(parse("head / HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    ck_assert(!head.head);
    CHECK_SPAN(head.method, head.methodLen, "head");
    ck_assert_int_eq(parse("M-SEARCH * HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
    ck_assert_int_gt(parse("PROPFIND /x HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
}
END_TEST

/* A fragment is dropped, as llhttp and nginx do: the path and the query
 * end before it. */
START_TEST(test_fragment_dropped)
{
    const char* req = "GET /a/b?x=1#frag/?x HTTP/1.1\r\nHost: a\r\n\r\n";

    ck_assert_int_eq(parse(req), (int)strlen(req));
    CHECK_SPAN(head.target, head.targetLen, "/a/b?x=1");
    CHECK_SPAN(head.path, head.pathLen, "/a/b");
    CHECK_SPAN(head.query, head.queryLen, "x=1");
    req = "GET /p#f HTTP/1.1\r\nHost: a\r\n\r\n";
    ck_assert_int_eq(parse(req), (int)strlen(req));
    CHECK_SPAN(head.path, head.pathLen, "/p");
    ck_assert_ptr_null(head.query);
}
END_TEST

START_TEST(test_absolute_form)
{
    ck_assert_int_gt(parse("GET http://Example.com:8080/a%20b/./c?x=1&y "
                           "HTTP/1.1\r\nHost: other\r\n\r\n"),
                     0);
    CHECK_SPAN(head.host, head.hostLen, "Example.com:8080");
    CHECK_SPAN(head.path, head.pathLen, "/a b/c");
    CHECK_SPAN(head.query, head.queryLen, "x=1&y");
    ck_assert(head.pathRewritten);
    CHECK_SPAN(head.target, head.targetLen,
               "http://Example.com:8080/a b/c?x=1&y");

    ck_assert_int_gt(parse("GET https://h HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    CHECK_SPAN(head.host, head.hostLen, "h");
    CHECK_SPAN(head.path, head.pathLen, "/");
    ck_assert_ptr_null(head.query);

    ck_assert_int_gt(parse("GET HTTP://h?q HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    CHECK_SPAN(head.path, head.pathLen, "/");
    CHECK_SPAN(head.query, head.queryLen, "q");

    /* HTTP/1.0 needs no Host; the authority gives one. */
    ck_assert_int_gt(parse("GET http://[::1]:80/ HTTP/1.0\r\n\r\n"), 0);
    CHECK_SPAN(head.host, head.hostLen, "[::1]:80");
}
END_TEST

START_TEST(test_keep_alive_by_version_and_connection)
{
    static const struct {
        const char* req;
        bool keepAlive;
    } cases[] = {
        { "GET / HTTP/1.0\r\n\r\n", false },
        { "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true },
        { "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true },
        { "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false },
        { "GET / HTTP/1.1\r\nHost: a\r\n\r\n", true },
        { "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false },
        { "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade,  CLOSE \r\n"
          "\r\n",
          false },
        { "GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n", true },
        { "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n"
          "Connection: close\r\n\r\n",
          false },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_msg(parse(cases[i].req) > 0, "case %zu", i);
        ck_assert_msg(head.keepAlive == cases[i].keepAlive, "case %zu", i);
    }
    ck_assert_int_gt(parse("GET / HTTP/1.0\r\n\r\n"), 0);
    ck_assert_int_eq(head.versionMinor, 0);
    ck_assert_ptr_null(head.host);
}
END_TEST

START_TEST(test_expect_continue)
{
    ck_assert_int_gt(parse("PUT /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5"
                           "\r\nExpect: 100-Continue\r\n\r\n"),
                     0);
    ck_assert(head.expectContinue);
    /* An HTTP/1.0 client cannot take a 100 (RFC 9110 section 10.1.1). */
    ck_assert_int_gt(parse("PUT /f HTTP/1.0\r\nContent-Length: 5\r\n"
                           "Expect: 100-continue\r\n\r\n"),
                     0);
    ck_assert(!head.expectContinue);
    ck_assert_int_gt(parse("PUT /f HTTP/1.1\r\nHost: a\r\n"
                           "Expect: 200-ok\r\n\r\n"),
                     0);
    ck_assert(!head.expectContinue);
}
END_TEST

START_TEST(test_path_decoded_in_place_query_raw)
{
    const char* req = "GET /a%2Fb%20c/%7Euser?q=%20x+y HTTP/1.1\r\n"
                      "Host: a\r\n\r\n"
                      "GET /next HTTP/1.1\r\n";
    size_t n = strlen(req);
    int rc = parse(req);
    size_t q;

    ck_assert_int_eq(rc, (int)(n - strlen("GET /next HTTP/1.1\r\n")));
    CHECK_SPAN(head.path, head.pathLen, "/a/b c/~user");
    ck_assert_ptr_eq(head.path, head.target);
    CHECK_SPAN(head.query, head.queryLen, "q=%20x+y");
    ck_assert(head.pathRewritten);
    /* The target reads as the decoded path and the raw query; nothing
     * after it moved: the fields and the next request are as they came. */
    CHECK_SPAN(head.target, head.targetLen, "/a/b c/~user?q=%20x+y");
    q = (size_t)(strstr(req, " HTTP/1.1") - req);
    ck_assert(memcmp(buf + q, req + q, n - q) == 0);

    ck_assert_int_gt(parse("GET /%41%62%63 HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    CHECK_SPAN(head.path, head.pathLen, "/Abc");
    CHECK_SPAN(head.target, head.targetLen, "/Abc");
    /* A '.' that starts no dot segment changes nothing. */
    ck_assert_int_gt(parse("GET /.well-known?a HTTP/1.1\r\nHost: a\r\n\r\n"),
                     0);
    ck_assert(!head.pathRewritten);
    CHECK_SPAN(head.target, head.targetLen, "/.well-known?a");
    /* A decoded '?' is part of the path, not a query. */
    ck_assert_int_gt(parse("GET /a%3Fb HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    CHECK_SPAN(head.path, head.pathLen, "/a?b");
    ck_assert_ptr_null(head.query);
    ck_assert_int_gt(parse("GET /x? HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    ck_assert_ptr_nonnull(head.query);
    ck_assert_uint_eq(head.queryLen, 0);
}
END_TEST

START_TEST(test_dot_segments)
{
    static const struct {
        const char* target;
        const char* path;
    } cases[] = {
        { "/", "/" },
        { "/a/b/../c", "/a/c" },
        { "/a/./b", "/a/b" },
        { "/a/..", "/" },
        { "/a/b/..", "/a/" },
        { "/a/.", "/a/" },
        { "/.", "/" },
        { "/a//../b", "/b" },
        { "/a/%2e%2E/b", "/b" },
        { "/a%2F..%2Fb", "/b" },
        { "/.well-known/x", "/.well-known/x" },
        { "/a/.../b", "/a/.../b" },
        { "/a/..b/c", "/a/..b/c" },
        { "/a/b/../../c/./d/", "/c/d/" },
        /* Empty segments merged, as nginx's merge_slashes: a guard on
         * "/p/" prefix meets every one of these. */
        { "/a//b", "/a/b" },
        { "//p/x", "/p/x" },
        { "///p/x", "/p/x" },
        { "/.//p/x", "/p/x" },
        { "/p//x", "/p/x" },
        { "/p//", "/p/" },
        { "//", "/" },
        { "/%2F/p/x", "/p/x" },
        { "/%70/x", "/p/x" },
        { "/a/..//p/x", "/p/x" },
    };
    char req[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n",
                 cases[i].target);
        ck_assert_msg(parse(req) > 0, "%s", cases[i].target);
        CHECK_SPAN(head.path, head.pathLen, cases[i].path);
    }
}
END_TEST

/* The raw path is the path as the client sent it (what a proxy passes
 * on, as nginx's proxy_pass without a URI); the path is its normal form. */
START_TEST(test_raw_path_for_a_proxy)
{
    static const struct {
        const char* target;
        const char* path;
    } cases[] = {
        { "/a/b?x", "/a/b" },
        { "/a/./b/../c", "/a/c" },
        { "/api/group%2Fproject", "/api/group/project" },
        { "//api//x", "/api/x" },
        { "/a/%2e%2E/b%20c", "/b c" },
        { "/.a", "/.a" },
    };
    static char raw[64];
    char req[256];

    head.rawBuf = raw;
    head.rawCap = sizeof(raw);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n",
                 cases[i].target);
        ck_assert_msg(parse(req) > 0, "%s", cases[i].target);
        CHECK_SPAN(head.path, head.pathLen, cases[i].path);
        ck_assert_uint_eq(head.rawPathLen, strcspn(cases[i].target, "?"));
        ck_assert(memcmp(head.rawPath, cases[i].target, head.rawPathLen) == 0);
    }
    ck_assert_int_eq(parse("GET /a%2F..%2F.. HTTP/1.1\r\nHost: a\r\n\r\n"),
                     -400);
    /* Without room, no raw path: a caller never gets a decoded one. */
    head.rawCap = 4;
    ck_assert_int_gt(parse("GET /a%2Fbc HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    ck_assert_ptr_null(head.rawPath);
    head.rawBuf = NULL;
    head.rawCap = 0;
}
END_TEST

START_TEST(test_many_headers)
{
    CorHttpLimits ten = limits;
    char req[8192];
    size_t n = 0;

    n += (size_t)sprintf(req + n, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 1; i < 100; i++) {
        n += (size_t)sprintf(req + n, "X-Header-%d: value %d\r\n", i, i);
    }
    strcpy(req + n, "\r\n");
    ck_assert_int_eq(parse(req), (int)(n + 2));
    ck_assert_uint_eq(head.headerCount, 100);
    CHECK_SPAN(head.headers[99].name, head.headers[99].nameLen, "X-Header-99");
    CHECK_SPAN(head.headers[99].value, head.headers[99].valueLen, "value 99");

    /* One more than the limit, as soon as the extra line starts; a
     * higher limit takes it. */
    n += (size_t)sprintf(req + n, "X-Extra: 1\r\n\r\n");
    ck_assert_int_eq(parseWith(req, n, &limits), -431);
    ck_assert_int_eq(parseWith(req, n - 13, &limits), -431);
    ten.maxHeaders = 1000;
    ck_assert_int_eq(parseWith(req, n, &ten), (int)n);
    ck_assert_uint_eq(head.headerCount, 101);

    ten.maxHeaders = 10;
    ck_assert_int_eq(parse(req), -431);
    ck_assert_int_eq(parseWith(req, strlen(req), &ten), -431);
}
END_TEST

START_TEST(test_leading_empty_lines)
{
    const char* req = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";

    ck_assert_int_eq(parse(req), (int)strlen(req));
    CHECK_SPAN(head.method, head.methodLen, "GET");
    ck_assert_int_eq(parse("\r\n"), 0);
    ck_assert_int_eq(parse("\r\n\r"), 0);
    ck_assert_int_eq(parse("\r\n\rX"), -400);
    ck_assert_int_eq(parse("\n"), -400);
}
END_TEST

START_TEST(test_options_asterisk)
{
    ck_assert_int_gt(parse("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    CHECK_SPAN(head.path, head.pathLen, "*");
    ck_assert_ptr_null(head.query);
    ck_assert_int_eq(parse("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
    ck_assert_int_eq(parse("OPTIONS *x HTTP/1.1\r\nHost: a\r\n\r\n"), -400);
}
END_TEST

START_TEST(test_header_values)
{
    ck_assert_int_gt(parse("GET / HTTP/1.1\r\nHost:a\r\nX-Empty:\r\n"
                           "X-Blank: \t \r\nX-Ows: \t a \t b \t\r\n"
                           "X-Obs-Text: caf\xc3\xa9\r\n"
                           "X-Odd: \"q\\\"\" (c) {} [] <>\r\n\r\n"),
                     0);
    ck_assert_uint_eq(head.headerCount, 6);
    CHECK_SPAN(head.host, head.hostLen, "a");
    ck_assert_uint_eq(head.headers[1].valueLen, 0);
    ck_assert_uint_eq(head.headers[2].valueLen, 0);
    CHECK_SPAN(head.headers[3].value, head.headers[3].valueLen, "a \t b");
    CHECK_SPAN(head.headers[4].value, head.headers[4].valueLen, "caf\xc3\xa9");
    CHECK_SPAN(head.headers[5].value, head.headers[5].valueLen,
               "\"q\\\"\" (c) {} [] <>");
    /* An empty Host is what a client sends when the URI has no
     * authority (RFC 9112 section 3.2). */
    ck_assert_int_gt(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 0);
    ck_assert_ptr_nonnull(head.host);
    ck_assert_uint_eq(head.hostLen, 0);
}
END_TEST

/* Values of every length around the eight-byte fast path, with a bad byte
 * at every position: each must be refused, and the clean ones kept whole. */
START_TEST(test_long_values_every_bad_position)
{
    static const char bad[] = { '\0', '\n', '\r', 0x7f, 0x01, 0x1f };
    char req[256];

    for (size_t vlen = 1; vlen < 40; vlen++) {
        size_t pre = (size_t)sprintf(req, "GET / HTTP/1.1\r\nHost: a\r\nX: ");

        memset(req + pre, 'v', vlen);
        memcpy(req + pre + vlen, "\r\n\r\n", 4);
        ck_assert_int_eq(parseWith(req, pre + vlen + 4, &limits),
                         (int)(pre + vlen + 4));
        ck_assert_uint_eq(head.headers[1].valueLen, vlen);
        for (size_t at = 0; at < vlen; at++) {
            for (size_t b = 0; b < sizeof(bad); b++) {
                memset(req + pre, 'v', vlen);
                req[pre + at] = bad[b];
                memcpy(req + pre + vlen, "\r\n\r\n", 4);
                ck_assert_msg(parseWith(req, pre + vlen + 4, &limits) == -400,
                              "len %zu at %zu byte %d", vlen, at, bad[b]);
            }
        }
    }
}
END_TEST

START_TEST(test_header_find)
{
    const CorHttpHeader* h;

    ck_assert_int_gt(parse("GET / HTTP/1.1\r\nHost: a\r\nX-Two: 1\r\n"
                           "x-two: 2\r\nCookie: c=1\r\n\r\n"),
                     0);
    h = corHttpHeaderFind(&head, "x-TWO");
    ck_assert_ptr_nonnull(h);
    CHECK_SPAN(h->value, h->valueLen, "1");
    h = corHttpHeaderFind(&head, "COOKIE");
    ck_assert_ptr_nonnull(h);
    CHECK_SPAN(h->value, h->valueLen, "c=1");
    ck_assert_ptr_null(corHttpHeaderFind(&head, "Cookies"));
    ck_assert_ptr_null(corHttpHeaderFind(&head, "X-Tw"));
}
END_TEST

static const char* const validRequests[] = {
    "GET /index.html HTTP/1.1\r\nHost: example.com\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n"
    "Accept: text/html,application/xhtml+xml\r\n"
    "Cookie: a=1; b=2; session=0123456789abcdef\r\n\r\n",
    "POST /a%20b/../c?x=%41 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
    "Expect: 100-continue\r\n\r\n",
    "\r\nPUT http://h:1/p HTTP/1.1\r\nHost: x\r\n"
    "Transfer-Encoding: chunked\r\n\r\n",
    "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a\r\nX:\r\n\r\n",
};

/* Bytes arriving one at a time into the same buffer: nothing until the
 * last byte (and nothing written), then what a one-shot parse gives. */
START_TEST(test_incremental_byte_by_byte)
{
    static char whole[1024];

    for (size_t r = 0; r < sizeof(validRequests) / sizeof(validRequests[0]);
         r++) {
        const char* req = validRequests[r];
        size_t n = strlen(req);
        CorHttpHeader onceHeaders[100];
        CorHttpRequestHead once = { .headers = onceHeaders };
        int rc;

        memcpy(whole, req, n);
        rc = corHttpParseHead(whole, n, &limits, &once);
        ck_assert_int_eq(rc, (int)n);
        memcpy(buf, req, n);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(corHttpParseHead(buf, i, &limits, &head) == 0,
                          "req %zu at %zu", r, i);
        }
        ck_assert(memcmp(buf, req, n) == 0);
        ck_assert_int_eq(corHttpParseHead(buf, n, &limits, &head), rc);
        ck_assert_uint_eq(head.headerCount, once.headerCount);
        ck_assert_uint_eq(head.pathLen, once.pathLen);
        ck_assert(memcmp(head.path, once.path, once.pathLen) == 0);
        ck_assert_int_eq(head.contentLength, once.contentLength);
        ck_assert(head.chunked == once.chunked);
        ck_assert(head.keepAlive == once.keepAlive);
        ck_assert(head.expectContinue == once.expectContinue);
        ck_assert_uint_eq(head.hostLen, once.hostLen);
        for (unsigned i = 0; i < once.headerCount; i++) {
            ck_assert_uint_eq(head.headers[i].valueLen,
                              once.headers[i].valueLen);
            ck_assert_int_eq(head.headers[i].value - buf,
                             once.headers[i].value - whole);
        }
    }
}
END_TEST

/* A bad byte is refused as soon as it arrives, not when the head ends. */
START_TEST(test_errors_before_the_head_completes)
{
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHo st"), -400);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a\r\n "), -400);
    ck_assert_int_eq(parse("GET /\x01"), -400);
    ck_assert_int_eq(parse("GE\tT"), -400);
    ck_assert_int_eq(parse("GET / HTTX"), -400);
    ck_assert_int_eq(parse("GET / HTTP/2.0\r\n"), -505);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n"), -400);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nContent-Length: x\r\n"), -400);
    ck_assert_int_eq(parse("GET /%zz HTTP/1.1\r\n"), -400);
    /* Still well-formed so far: wait. */
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nContent-Length: 5\r\n"), 0);
    ck_assert_int_eq(parse("GET / HTTP/1"), 0);
}
END_TEST

START_TEST(test_pipelining)
{
    const char* reqs = "POST /one HTTP/1.1\r\nHost: a\r\n"
                       "Content-Length: 4\r\n\r\n"
                       "body"
                       "GET /%74wo HTTP/1.1\r\nHost: a\r\n\r\n"
                       "GET /three HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t n = strlen(reqs);
    size_t off;
    int rc;

    memcpy(buf, reqs, n);
    rc = corHttpParseHead(buf, n, &limits, &head);
    ck_assert_int_gt(rc, 0);
    CHECK_SPAN(head.path, head.pathLen, "/one");
    ck_assert(memcmp(buf + rc, "bodyGET /%74wo", 14) == 0);
    off = (size_t)rc + 4;
    rc = corHttpParseHead(buf + off, n - off, &limits, &head);
    ck_assert_int_gt(rc, 0);
    CHECK_SPAN(head.path, head.pathLen, "/two");
    off += (size_t)rc;
    ck_assert(memcmp(buf + off, "GET /three ", 11) == 0);
    rc = corHttpParseHead(buf + off, n - off, &limits, &head);
    ck_assert_int_eq(rc, (int)(n - off));
    CHECK_SPAN(head.path, head.pathLen, "/three");
}
END_TEST

START_TEST(test_limits)
{
    CorHttpLimits small = { .headerBytes = 64,
                            .maxHeaders = 4,
                            .bodyBytes = 100 };
    char req[512];
    size_t n;

    /* A head of exactly headerBytes fits. */
    n = (size_t)sprintf(req, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
    memset(req + n, 'v', 64 - n - 4);
    memcpy(req + 60, "\r\n\r\n", 4);
    ck_assert_int_eq(parseWith(req, 64, &small), 64);
    /* One more byte of value: 431, complete or not. */
    memset(req + n, 'v', 64 - n - 3);
    memcpy(req + 61, "\r\n\r\n", 4);
    ck_assert_int_eq(parseWith(req, 65, &small), -431);
    ck_assert_int_eq(parseWith(req, 64, &small), 0);

    /* A request line longer than headerBytes: 414 once the bytes pass
     * the limit, with or without its CRLF. */
    memcpy(req, "GET /", 5);
    memset(req + 5, 'a', 100);
    memcpy(req + 105, " HTTP/1.1\r\nHost: a\r\n\r\n", 22);
    ck_assert_int_eq(parseWith(req, 64, &small), 0);
    ck_assert_int_eq(parseWith(req, 65, &small), -414);
    ck_assert_int_eq(parseWith(req, 127, &small), -414);

    /* The head grows past the limit in the fields: 431. */
    n = (size_t)sprintf(req, "GET / HTTP/1.1\r\nHost: a\r\nX-Long: ");
    memset(req + n, 'x', 100);
    ck_assert_int_eq(parseWith(req, 64, &small), 0);
    ck_assert_int_eq(parseWith(req, 65, &small), -431);

    /* Empty lines count toward the head as well. */
    memset(req, 0, sizeof(req));
    for (int i = 0; i < 40; i++) {
        memcpy(req + 2 * i, "\r\n", 2);
    }
    ck_assert_int_eq(parseWith(req, 64, &small), 0);
    ck_assert_int_eq(parseWith(req, 80, &small), -431);

    /* Content-Length: up to bodyBytes, then 413. */
    n = (size_t)sprintf(req, "PUT / HTTP/1.1\r\nHost: a\r\n"
                             "Content-Length: 100\r\n\r\n");
    ck_assert_int_gt(parseWith(req, n, &limits), 0);
    small.headerBytes = 8192;
    ck_assert_int_eq(parseWith(req, n, &small), (int)n);
    n = (size_t)sprintf(req, "PUT / HTTP/1.1\r\nHost: a\r\n"
                             "Content-Length: 101\r\n\r\n");
    ck_assert_int_eq(parseWith(req, n, &small), -413);
    n = (size_t)sprintf(req, "PUT / HTTP/1.1\r\nHost: a\r\n"
                             "Content-Length: 9223372036854775807\r\n\r\n");
    ck_assert_int_eq(parseWith(req, n, &small), -413);
}
END_TEST

#define X64 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

/* Run with corpusLimits: 512 bytes of head, 8 fields, 1000 body bytes. */
static const Case badRequests[] = {
    /* Framing: Content-Length and Transfer-Encoding. */
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
         "Transfer-Encoding: chunked\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
         "Content-Length: 5\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n"
         "Transfer-Encoding: gzip\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
         "Content-Length: 5\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
         "Content-Length: 6\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1.0\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\n"
         "Content-Length: 99999999999999999999\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\n"
         "Content-Length: 9223372036854775808\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\n"
         "Transfer-Encoding: chunked, chunked\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
         "Transfer-Encoding: chunked\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n",
         501),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked x\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\n"
         "Transfer-Encoding: chunked, gzip\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\n"
         "Transfer-Encoding: gzip, chunked\r\n\r\n",
         501),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n",
         501),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\n"
         "Transfer-Encoding: chunked;q=1\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\n"
         "Transfer-Encoding: \"chunked\"\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\n"
         "Transfer-Encoding: chunked\x0b\r\n\r\n",
         400),
    CASE("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n"
         " chunked\r\n\r\n",
         400),
    CASE("POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n"
         "Content-Length: 1001\r\n\r\n",
         413),
    /* Line structure: obs-fold, bare CR and LF, NUL, controls. */
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\n\n", 400),
    CASE("GET / HTTP/1.1\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\rHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\n\rX", 400),
    CASE("GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX\0: a\r\n\r\n", 400),
    CASE("GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("G\0T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX: \x1b[0m\r\n\r\n", 400),
    CASE("\r\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    /* The request line. */
    CASE("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /\tHTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /  HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400),
    CASE(" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /\r\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.x\r\nHost: a\r\n\r\n", 400),
    CASE("GET / http/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/11\r\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    CASE("GET / HTTP/0.9\r\n\r\n", 505),
    CASE("GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505),
    CASE("GE/T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /" X64 X64 X64 X64 X64 X64 X64 X64 " HTTP/1.1\r\n"
         "Host: a\r\n\r\n",
         414),
    /* The target. */
    CASE("GET # HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /a#b#c HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /a#b\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /a%4 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /a%4?g HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /a% HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /a%00b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /.. HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /a/../../etc/passwd HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET /%2e%2e/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET a HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 400),
    CASE("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    CASE("GET http:/a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    /* Host. */
    CASE("GET / HTTP/1.1\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nX-Host: a\r\n\r\n", 400),
    CASE("GET http://a/ HTTP/1.1\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    /* Field names. */
    CASE("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\n: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nFoo\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nFo(o: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nF\xc3\xb6o: a\r\n\r\n", 400),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nFoo Bar: a\r\n\r\n", 400),
    /* Limits. */
    CASE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n", 413),
    CASE("GET / HTTP/1.1\r\nHost: a\r\n1: a\r\n2: a\r\n3: a\r\n4: a\r\n"
         "5: a\r\n6: a\r\n7: a\r\n8: a\r\n\r\n",
         431),
    CASE("GET / HTTP/1.1\r\nHost: a\r\nX: " X64 X64 X64 X64 X64 X64 X64 X64
         "\r\n\r\n",
         431),
};

START_TEST(test_malformed_corpus)
{
    const CorHttpLimits corpusLimits = { .headerBytes = 512,
                                         .maxHeaders = 8,
                                         .bodyBytes = 1000 };
    size_t count = sizeof(badRequests) / sizeof(badRequests[0]);

    ck_assert_uint_ge(count, 45);
    for (size_t i = 0; i < count; i++) {
        const Case* t = &badRequests[i];
        int rc = parseWith(t->text, t->len, &corpusLimits);

        ck_assert_msg(rc == -t->status, "case %zu: %d, want -%d: %.*s", i, rc,
                      t->status, (int)t->len, t->text);
        /* Every prefix either waits or is refused the same way. */
        for (size_t n = 0; n < t->len; n++) {
            rc = parseWith(t->text, n, &corpusLimits);
            ck_assert_msg(rc == 0 || rc == -t->status, "case %zu at %zu: %d", i,
                          n, rc);
        }
    }
}
END_TEST

/* Each byte in a header name, a target, a field value and a Host: accepted
 * exactly when the RFC's grammar says so. */
START_TEST(test_character_classes)
{
    static const char tchar[] = "!#$%&'*+-.^_`|~";
    static const char hostExtra[] = "-._~!$&'()*+,;=:[]%";
    static const char hex[] = "0123456789abcdefABCDEF";
    char req[128];
    int n;

    for (int ch = 0; ch < 256; ch++) {
        bool alnum = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z')
                     || (ch >= 'A' && ch <= 'Z');
        bool token = alnum || (ch != 0 && strchr(tchar, ch) != NULL);
        bool vchar = ch >= 0x21 && ch <= 0x7e;
        bool field = vchar || ch >= 0x80 || ch == ' ' || ch == '\t';
        /* '#' starts a fragment, which is dropped. */
        bool target = vchar && ch != '%' && ch != '?';
        bool host = alnum || (ch != 0 && strchr(hostExtra, ch) != NULL);

        /* A ':' would end the name: "X:Y: v" is a fine field. */
        if (ch != ':') {
            n = sprintf(req, "GET / HTTP/1.1\r\nHost: a\r\nX%cY: v\r\n\r\n",
                        ch);
            ck_assert_msg((parseWith(req, (size_t)n, &limits) > 0) == token,
                          "name byte %d", ch);
        }
        /* '%' and '?' have meanings of their own in a target. */
        if (ch != '%' && ch != '?') {
            n = sprintf(req, "GET /a%cb HTTP/1.1\r\nHost: a\r\n\r\n", ch);
            ck_assert_msg((parseWith(req, (size_t)n, &limits) > 0) == target,
                          "target byte %d", ch);
        }
        n = sprintf(req, "GET / HTTP/1.1\r\nHost: a\r\nX: a%cb\r\n\r\n", ch);
        ck_assert_msg((parseWith(req, (size_t)n, &limits) > 0) == field,
                      "value byte %d", ch);
        /* Hex digits, after a '%' in a path. */
        n = sprintf(req, "GET /%%%c1 HTTP/1.1\r\nHost: a\r\n\r\n", ch);
        ck_assert_msg((parseWith(req, (size_t)n, &limits) > 0)
                          == (ch != 0 && strchr(hex, ch) != NULL),
                      "hex byte %d", ch);
        n = sprintf(req, "GET / HTTP/1.1\r\nHost: a%cb\r\n\r\n", ch);
        ck_assert_msg((parseWith(req, (size_t)n, &limits) > 0) == host,
                      "host byte %d", ch);
        /* The same classes as a client checks what it sends: a name, and
         * a value long enough for the wide scan, the byte at its end. */
        memset(req, 'v', 40);
        req[1] = req[39] = (char)ch;
        ck_assert_msg(corHttpIsToken(req, 3) == token, "token byte %d", ch);
        ck_assert_msg(corHttpIsFieldValue(req, 40) == field,
                      "field value byte %d", ch);
    }
    ck_assert(!corHttpIsToken("", 0));
    ck_assert(corHttpIsFieldValue("", 0));
}
END_TEST

/* ---- Chunked bodies ----------------------------------------------------- */

static const char chunkedBody[] = "5\r\nhello\r\n"
                                  "1;name=value\r\n \r\n"
                                  "6 ; a ; b = \"q \\\" ;\" ;c=d\r\nworld!\r\n"
                                  "00010\r\n0123456789abcdef\r\n"
                                  "A\r\n0123456789\r\n"
                                  "0;last\r\n"
                                  "Trailer-One: x\r\n"
                                  "Trailer-Two:\r\n"
                                  "\r\n";
static const char chunkedDecoded[] = "hello world!0123456789abcdef0123456789";
static const char afterBody[] = "GET /next HTTP/1.1\r\n";

START_TEST(test_chunked_valid)
{
    CorHttpChunked c;
    size_t n = sizeof(chunkedBody) - 1;
    size_t consumed;
    size_t produced;

    memcpy(buf, chunkedBody, n);
    memcpy(buf + n, afterBody, sizeof(afterBody));
    corHttpChunkedInit(&c, 1000);
    ck_assert_int_eq(corHttpChunkedDecode(&c, buf, n + sizeof(afterBody) - 1,
                                          &consumed, &produced),
                     1);
    ck_assert_uint_eq(consumed, n);
    CHECK_SPAN(buf, produced, chunkedDecoded);
    /* The next request is where it was. */
    ck_assert(memcmp(buf + n, afterBody, sizeof(afterBody)) == 0);
    /* Done stays done and takes nothing more. */
    ck_assert_int_eq(corHttpChunkedDecode(&c, buf + n, 5, &consumed, &produced),
                     1);
    ck_assert_uint_eq(consumed, 0);
    ck_assert_uint_eq(produced, 0);

    memcpy(buf, "0\r\n\r\n", 5);
    corHttpChunkedInit(&c, 0);
    ck_assert_int_eq(corHttpChunkedDecode(&c, buf, 5, &consumed, &produced), 1);
    ck_assert_uint_eq(produced, 0);
}
END_TEST

/* Decode body in pieces cut at the given offsets (ascending, ending with
 * its length), each piece decoded in place where it lies, and gather what
 * comes out. */
static int
decodePieces(const char* body, size_t n, const size_t* cuts, size_t ncuts,
             uint64_t limit, char* out, size_t* outLen)
{
    CorHttpChunked c;
    size_t from = 0;
    int rc = 0;

    memcpy(buf, body, n);
    *outLen = 0;
    corHttpChunkedInit(&c, limit);
    for (size_t i = 0; i < ncuts; i++) {
        size_t consumed;
        size_t produced;

        rc = corHttpChunkedDecode(&c, buf + from, cuts[i] - from, &consumed,
                                  &produced);
        memcpy(out + *outLen, buf + from, produced);
        *outLen += produced;
        if (rc != 0) {
            return rc;
        }
        ck_assert_uint_eq(consumed, cuts[i] - from);
        from = cuts[i];
    }
    return rc;
}

START_TEST(test_chunked_split_everywhere)
{
    static char out[256];
    size_t n = sizeof(chunkedBody) - 1;
    size_t cuts[512];
    size_t outLen;

    for (size_t at = 0; at <= n; at++) {
        cuts[0] = at;
        cuts[1] = n;
        ck_assert_int_eq(decodePieces(chunkedBody, n, cuts, 2, 1000, out,
                                      &outLen),
                         1);
        CHECK_SPAN(out, outLen, chunkedDecoded);
    }
    for (size_t i = 0; i < n; i++) {
        cuts[i] = i + 1;
    }
    ck_assert_int_eq(decodePieces(chunkedBody, n, cuts, n, 1000, out, &outLen),
                     1);
    CHECK_SPAN(out, outLen, chunkedDecoded);
}
END_TEST

static const Case badChunks[] = {
    CASE("g\r\nx\r\n0\r\n\r\n", 400),
    CASE("\r\nx\r\n0\r\n\r\n", 400),
    CASE("-1\r\nx\r\n0\r\n\r\n", 400),
    CASE("0x1\r\nx\r\n0\r\n\r\n", 400),
    CASE("+1\r\nx\r\n0\r\n\r\n", 400),
    CASE("00000000000000001\r\nx\r\n0\r\n\r\n", 400),
    CASE("10000000000000000\r\n", 400),
    CASE("1 2\r\nx\r\n0\r\n\r\n", 400),
    CASE("1\nx\r\n0\r\n\r\n", 400),
    CASE("1\rx\r\n0\r\n\r\n", 400),
    CASE("1\r\nxy\r\n0\r\n\r\n", 400),
    CASE("1\r\nx\n0\r\n\r\n", 400),
    CASE("1\r\nx\r0\r\n\r\n", 400),
    CASE("1\r\nx0\r\n\r\n", 400),
    CASE("1\r\nx\r\n0\r\n\n", 400),
    CASE("1\r\nx\r\n0\n\r\n", 400),
    CASE("1\r\nx\r\n0\r\n\r\r", 400),
    CASE("1;\r\nx\r\n0\r\n\r\n", 400),
    CASE("1;=v\r\nx\r\n0\r\n\r\n", 400),
    CASE("1;a=\r\nx\r\n0\r\n\r\n", 400),
    CASE("1;a=\"v\r\nx\r\n0\r\n\r\n", 400),
    CASE("1;a=\"v\nx\"\r\nx\r\n0\r\n\r\n", 400),
    CASE("1;a\nb\r\nx\r\n0\r\n\r\n", 400),
    CASE("1;a\rb\r\nx\r\n0\r\n\r\n", 400),
    CASE("1;a\0\r\nx\r\n0\r\n\r\n", 400),
    CASE("1;a=b c\r\nx\r\n0\r\n\r\n", 400),
    CASE("1 x\r\nx\r\n0\r\n\r\n", 400),
    CASE("1\r\nx\r\n0\r\n Folded: x\r\n\r\n", 400),
    CASE("1\r\nx\r\n0\r\nNo-Colon\r\n\r\n", 400),
    CASE("1\r\nx\r\n0\r\nName : x\r\n\r\n", 400),
    CASE("1\r\nx\r\n0\r\nName: a\rb\r\n\r\n", 400),
    CASE("1\r\nx\r\n0\r\nName: a\0\r\n\r\n", 400),
    CASE("1\r\nx\r\n0\r\nName: a\nb\r\n\r\n", 400),
    CASE("65\r\n", 413),
    CASE("40\r\n" X64 "\r\n25\r\n", 413),
    CASE("ffffffffffffffff\r\n", 413),
};

START_TEST(test_chunked_malformed_corpus)
{
    static char out[512];
    size_t count = sizeof(badChunks) / sizeof(badChunks[0]);

    for (size_t i = 0; i < count; i++) {
        const Case* t = &badChunks[i];
        size_t cuts[2];
        size_t outLen;
        int rc;

        cuts[0] = t->len;
        rc = decodePieces(t->text, t->len, cuts, 1, 100, out, &outLen);
        ck_assert_msg(rc == -t->status, "case %zu: %d, want -%d", i, rc,
                      t->status);
        /* Split anywhere, the same refusal. */
        for (size_t at = 0; at <= t->len; at++) {
            cuts[0] = at;
            cuts[1] = t->len;
            rc = decodePieces(t->text, t->len, cuts, 2, 100, out, &outLen);
            ck_assert_msg(rc == -t->status, "case %zu at %zu: %d", i, at, rc);
        }
    }
}
END_TEST

START_TEST(test_chunked_limits)
{
    static char body[20000];
    static char out[256];
    CorHttpChunked c;
    size_t consumed;
    size_t produced;
    size_t cuts[1];
    size_t outLen;
    size_t n;

    /* Exactly the limit, across chunks. */
    strcpy(body, "5\r\n12345\r\n5\r\n67890\r\n0\r\n\r\n");
    cuts[0] = strlen(body);
    ck_assert_int_eq(decodePieces(body, cuts[0], cuts, 1, 10, out, &outLen), 1);
    ck_assert_uint_eq(outLen, 10);
    ck_assert_int_eq(decodePieces(body, cuts[0], cuts, 1, 9, out, &outLen),
                     -413);
    /* Refused from the size line, before its data. */
    ck_assert_uint_eq(outLen, 5);

    /* Sixteen hex digits fit. */
    n = (size_t)sprintf(body, "000000000000000a\r\n0123456789\r\n0\r\n\r\n");
    cuts[0] = n;
    ck_assert_int_eq(decodePieces(body, n, cuts, 1, 10, out, &outLen), 1);

    /* Extensions: COR_HTTP_CHUNK_EXT_BYTES per line, then 400. */
    n = (size_t)sprintf(body, "1;");
    memset(body + n, 'e', COR_HTTP_CHUNK_EXT_BYTES - 2);
    n += COR_HTTP_CHUNK_EXT_BYTES - 2;
    n += (size_t)sprintf(body + n, "\r\nx\r\n0\r\n\r\n");
    cuts[0] = n;
    ck_assert_int_eq(decodePieces(body, n, cuts, 1, 10, out, &outLen), 1);
    n = (size_t)sprintf(body, "1;");
    memset(body + n, 'e', COR_HTTP_CHUNK_EXT_BYTES);
    n += COR_HTTP_CHUNK_EXT_BYTES;
    cuts[0] = n;
    ck_assert_int_eq(decodePieces(body, n, cuts, 1, 10, out, &outLen), -400);

    /* A trailer section over COR_HTTP_TRAILER_BYTES: 431. */
    n = (size_t)sprintf(body, "0\r\n");
    for (int i = 0; i < 1000; i++) {
        n += (size_t)sprintf(body + n, "T: 1234567890\r\n");
    }
    cuts[0] = n;
    ck_assert_int_eq(decodePieces(body, n, cuts, 1, 10, out, &outLen), -431);

    /* A refusal sticks. */
    memcpy(buf, "z", 1);
    corHttpChunkedInit(&c, 10);
    ck_assert_int_eq(corHttpChunkedDecode(&c, buf, 1, &consumed, &produced),
                     -400);
    memcpy(buf, "0\r\n\r\n", 5);
    ck_assert_int_eq(corHttpChunkedDecode(&c, buf, 5, &consumed, &produced),
                     -400);
}
END_TEST

/* Each byte inside a quoted chunk extension value: accepted exactly when
 * it is qdtext (RFC 9110 section 5.6.4). */
START_TEST(test_chunk_extension_quoted_text)
{
    static char out[16];
    char body[64];

    for (int ch = 0; ch < 256; ch++) {
        bool qdtext = ch == '\t' || ch == ' ' || ch == 0x21
                      || (ch >= 0x23 && ch <= 0x5b)
                      || (ch >= 0x5d && ch <= 0x7e) || ch >= 0x80;
        int n = sprintf(body, "1;a=\"%c\"\r\nx\r\n0\r\n\r\n", ch);
        size_t cuts[1] = { (size_t)n };
        size_t outLen;

        ck_assert_msg(decodePieces(body, (size_t)n, cuts, 1, 10, out, &outLen)
                          == (qdtext ? 1 : -400),
                      "byte %d", ch);
    }
}
END_TEST

/* Chunks from 1 byte to 29 KiB, decoded in three pieces: every byte of
 * every chunk, in the order it came. */
START_TEST(test_chunked_large_chunks_in_place)
{
    static char body[70000];
    static char want[70000];
    static char out[70000];
    size_t n = 0;
    size_t w = 0;
    size_t cuts[3];
    size_t outLen;

    for (size_t size = 1; size < 40000; size = size * 3 + 1) {
        n += (size_t)sprintf(body + n, "%zx\r\n", size);
        for (size_t i = 0; i < size; i++) {
            body[n + i] = want[w + i] = (char)('a' + (w + i) % 26);
        }
        n += size;
        w += size;
        memcpy(body + n, "\r\n", 2);
        n += 2;
    }
    n += (size_t)sprintf(body + n, "0\r\n\r\n");
    cuts[0] = n / 3;
    cuts[1] = 2 * n / 3;
    cuts[2] = n;
    ck_assert_int_eq(decodePieces(body, n, cuts, 3, w, out, &outLen), 1);
    ck_assert_uint_eq(outLen, w);
    ck_assert(memcmp(out, want, w) == 0);
}
END_TEST

/* ---- Query strings ------------------------------------------------------ */

START_TEST(test_query_parse)
{
    static const char query[] = "a=1&b=x+y%21&&flag&=v&c=&d=%e2%82%AC";
    char out[sizeof(query)];
    CorHttpQueryParam params[8];
    int n = corHttpQueryParse(query, sizeof(query) - 1, out, params, 8);

    ck_assert_int_eq(n, 6);
    CHECK_SPAN(params[0].key, params[0].keyLen, "a");
    CHECK_SPAN(params[0].value, params[0].valueLen, "1");
    CHECK_SPAN(params[1].key, params[1].keyLen, "b");
    CHECK_SPAN(params[1].value, params[1].valueLen, "x y!");
    CHECK_SPAN(params[2].key, params[2].keyLen, "flag");
    ck_assert_ptr_nonnull(params[2].value);
    ck_assert_uint_eq(params[2].valueLen, 0);
    ck_assert_uint_eq(params[3].keyLen, 0);
    CHECK_SPAN(params[3].value, params[3].valueLen, "v");
    CHECK_SPAN(params[4].key, params[4].keyLen, "c");
    ck_assert_uint_eq(params[4].valueLen, 0);
    CHECK_SPAN(params[5].value, params[5].valueLen, "\xe2\x82\xac");

    /* More pairs than room: counted, the first ones kept. */
    ck_assert_int_eq(corHttpQueryParse(query, sizeof(query) - 1, out, params,
                                       2),
                     6);
    CHECK_SPAN(params[1].key, params[1].keyLen, "b");
    ck_assert_int_eq(corHttpQueryParse("", 0, out, params, 8), 0);
    ck_assert_int_eq(corHttpQueryParse("a=%zz", 5, out, params, 8), -400);
    ck_assert_int_eq(corHttpQueryParse("a=%4", 4, out, params, 8), -400);
    ck_assert_int_eq(corHttpQueryParse("%", 1, out, params, 8), -400);

    /* From a parsed head. */
    ck_assert_int_gt(parse("GET /s?q=cor+http&page=2 HTTP/1.1\r\n"
                           "Host: a\r\n\r\n"),
                     0);
    n = corHttpQueryParse(head.query, head.queryLen, out, params, 8);
    ck_assert_int_eq(n, 2);
    CHECK_SPAN(params[0].value, params[0].valueLen, "cor http");
}
END_TEST

COR_TEST_SUITE(corHttpParse)
{
    tcase_add_test(tc, test_get);
    tcase_add_test(tc, test_post_with_content_length);
    tcase_add_test(tc, test_chunked_request);
    tcase_add_test(tc, test_head_method);
    tcase_add_test(tc, test_absolute_form);
    tcase_add_test(tc, test_keep_alive_by_version_and_connection);
    tcase_add_test(tc, test_expect_continue);
    tcase_add_test(tc, test_path_decoded_in_place_query_raw);
    tcase_add_test(tc, test_raw_path_for_a_proxy);
    tcase_add_test(tc, test_dot_segments);
    tcase_add_test(tc, test_many_headers);
    tcase_add_test(tc, test_fragment_dropped);
    tcase_add_test(tc, test_leading_empty_lines);
    tcase_add_test(tc, test_options_asterisk);
    tcase_add_test(tc, test_header_values);
    tcase_add_test(tc, test_long_values_every_bad_position);
    tcase_add_test(tc, test_header_find);
    tcase_add_test(tc, test_incremental_byte_by_byte);
    tcase_add_test(tc, test_errors_before_the_head_completes);
    tcase_add_test(tc, test_pipelining);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_malformed_corpus);
    tcase_add_test(tc, test_character_classes);
    tcase_add_test(tc, test_chunked_valid);
    tcase_add_test(tc, test_chunked_split_everywhere);
    tcase_add_test(tc, test_chunked_malformed_corpus);
    tcase_add_test(tc, test_chunked_limits);
    tcase_add_test(tc, test_chunk_extension_quoted_text);
    tcase_add_test(tc, test_chunked_large_chunks_in_place);
    tcase_add_test(tc, test_query_parse);
}
