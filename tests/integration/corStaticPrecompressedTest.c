/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A static root's precompressed: on, against the real binary and curl in
 * both modes, over HTTP/1.1 and h2: NAME.zst, NAME.br and NAME.gz beside
 * a file, chosen by Accept-Encoding's q (the smaller coding on a tie, q=0
 * refuses), sent with Content-Encoding, Vary and their own validators
 * (Range, HEAD and If-None-Match on a variant, its ETag never the
 * file's), the media type the file's; and with the compress filter on
 * the route too, a variant is not compressed again.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CorServer server;
static char dir[64];
static char out[1 << 16];

/* After the harness's listener (corServerStartListen): h2c on it; one
 * folder, two roots: pre (precompressed) and plain (without); the
 * compress filter only on /c/. */
static const char* configFormat =
    "    http2: on\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: compress, min_bytes: 1 }\n"
    "  - load: static\n"
    "    roots:\n"
    "      - { name: pre, root: %s/www, precompressed: on,\n"
    "          fallback: /index.html }\n"
    "      - { name: plain, root: %s/www }\n"
    "routes:\n"
    "  - { match: \"GET /c/*\", handler: pre, strip_prefix: /c }\n"
    "  - { match: \"GET /plain/*\", handler: plain, strip_prefix: /plain,\n"
    "      filters: { compress: off } }\n"
    "  - { match: \"GET /*\", handler: pre, filters: { compress: off } }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

#define SH(...) corShellAt(server.port, dir, out, sizeof(out), __VA_ARGS__)

#define CHECK_HAS(text) COR_CHECK_HAS(out, text)
#define CHECK_HAS_NOT(text) COR_CHECK_HAS_NOT(out, text)

static const char* const protocols[] = { "--http1.1",
                                         "--http2-prior-knowledge" };

/* curl -si on path with Accept-Encoding: accept (NULL: no header) and
 * more args; the status, the answer in out. */
static int
getAccepting(const char* args, const char* accept, const char* path)
{
    char all[256];

    snprintf(all, sizeof(all), "%s -H 'Accept-Encoding:%s%s'", args,
             accept != NULL ? " " : "", accept != NULL ? accept : "");
    return corCurlStatus(server.port, all, path, out, sizeof(out));
}

/* The body of the answer in out (past its head). */
static const char*
body(void)
{
    const char* at = strstr(out, "\r\n\r\n");

    return at != NULL ? at + 4 : "";
}

/* The value of the header name in out ("" when absent), into value. */
static const char*
header(const char* name, char* value, size_t cap)
{
    size_t n = strlen(name);

    value[0] = '\0';
    for (const char* line = out; line != NULL && line < body();
         line = strstr(line, "\r\n") != NULL ? strstr(line, "\r\n") + 2
                                             : NULL) {
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            snprintf(value, cap, "%.*s", (int)strcspn(line + n + 2, "\r"),
                     line + n + 2);
            break;
        }
    }
    return value;
}

static void
setUp(void)
{
    char yaml[4096];

    snprintf(dir, sizeof(dir), "/tmp/cor-precomp-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* Markers for what is chosen; one variant real (gzip -k keeps the
     * time); two of the same size and time, their ETags apart only by
     * the coding. */
    ck_assert_int_eq(
        SH("mkdir -p $D/www && cd $D/www && "
           "printf plain > app.js && printf ZS > app.js.zst && "
           "printf BR > app.js.br && printf GZ > app.js.gz && "
           "touch -d '2020-01-02 03:04:05 UTC' app.js.gz && "
           "printf 'a{}' > only.css && printf GZ > only.css.gz && "
           "printf none > none.txt && "
           "printf '<p>index</p>' > index.html && "
           "printf GI > index.html.gz && "
           "printf 12345 > same.txt && printf abcde > same.txt.gz && "
           "touch -r same.txt same.txt.gz && "
           "seq 1 3000 > big.txt && gzip -k big.txt"),
        0);
    snprintf(yaml, sizeof(yaml), configFormat, dir, dir);
    ck_assert_int_eq(corServerStartListen(&server, false, NULL, yaml), 0);
}

static void
tearDown(void)
{
    char command[128];

    corServerStop(&server);
    snprintf(command, sizeof(command), "rm -rf %s", dir);
    corShell(command, NULL, 0);
}

/* The coding Accept-Encoding: accept gets for /app.js ("" for none):
 * its body's marker, checked against Content-Encoding. */
static const char*
chosen(const char* protocol, const char* accept)
{
    static char coding[32];

    ck_assert_int_eq(getAccepting(protocol, accept, "/app.js"), 200);
    CHECK_HAS("content-type: text/javascript");
    CHECK_HAS("vary: accept-encoding");
    header("content-encoding", coding, sizeof(coding));
    ck_assert_str_eq(body(), strcmp(coding, "zstd") == 0   ? "ZS"
                             : strcmp(coding, "br") == 0   ? "BR"
                             : strcmp(coding, "gzip") == 0 ? "GZ"
                                                           : "plain");
    return coding;
}

START_TEST(test_negotiation)
{
    for (size_t p = 0; p < 2; p++) {
        const char* proto = protocols[p];

        ck_assert_str_eq(chosen(proto, "gzip, br, zstd"), "zstd");
        ck_assert_str_eq(chosen(proto, "gzip, deflate, br"), "br");
        ck_assert_str_eq(chosen(proto, "gzip;q=1, br;q=0.5, zstd;q=0.4"),
                         "gzip");
        ck_assert_str_eq(chosen(proto, "zstd;q=0.8, br;q=0.9, gzip;q=0.2"),
                         "br");
        ck_assert_str_eq(chosen(proto, "zstd;q=0, br;q=0.000, *"), "gzip");
        ck_assert_str_eq(chosen(proto, "x-gzip"), "gzip");
        ck_assert_str_eq(chosen(proto, "*;q=0.5, zstd;q=0"), "br");
        ck_assert_str_eq(chosen(proto, "identity"), "");
        ck_assert_str_eq(chosen(proto, "*;q=0"), "");
        ck_assert_str_eq(chosen(proto, NULL), "");
        /* A variant that is not there: the plain file, Vary still said
         * (only.css has .gz alone). */
        ck_assert_int_eq(getAccepting(proto, "br, zstd", "/only.css"), 200);
        ck_assert_str_eq(body(), "a{}");
        CHECK_HAS("vary: accept-encoding");
        CHECK_HAS_NOT("content-encoding");
        /* No variant at all: no Vary. */
        ck_assert_int_eq(getAccepting(proto, "gzip", "/none.txt"), 200);
        CHECK_HAS_NOT("vary:");
        CHECK_HAS_NOT("content-encoding");
        /* A root without precompressed: the file as it is. */
        ck_assert_int_eq(getAccepting(proto, "gzip", "/plain/app.js"), 200);
        ck_assert_str_eq(body(), "plain");
        CHECK_HAS_NOT("vary:");
        /* The fallback's file has its variants too. */
        ck_assert_int_eq(getAccepting(proto, "gzip", "/deep/route"), 200);
        ck_assert_str_eq(body(), "GI");
        CHECK_HAS("content-type: text/html");
    }
}
END_TEST

START_TEST(test_validators)
{
    char plainTag[64];
    char gzTag[64];
    char value[128];

    for (size_t p = 0; p < 2; p++) {
        const char* proto = protocols[p];

        ck_assert_int_eq(getAccepting(proto, NULL, "/app.js"), 200);
        header("etag", plainTag, sizeof(plainTag));
        ck_assert_int_eq(getAccepting(proto, "gzip", "/app.js"), 200);
        header("etag", gzTag, sizeof(gzTag));
        ck_assert_str_ne(gzTag, plainTag);
        ck_assert_ptr_nonnull(strstr(gzTag, "-gzip\""));
        CHECK_HAS("last-modified: Thu, 02 Jan 2020 03:04:05 GMT");
        CHECK_HAS("content-length: 2");
        /* Its tag is the variant's: 304 for it, 200 for the plain file. */
        snprintf(value, sizeof(value), "%s -H 'If-None-Match: %s'", proto,
                 gzTag);
        ck_assert_int_eq(getAccepting(value, "gzip", "/app.js"), 304);
        CHECK_HAS("vary: accept-encoding");
        CHECK_HAS("content-encoding: gzip");
        ck_assert_int_eq(getAccepting(value, NULL, "/app.js"), 200);
        ck_assert_str_eq(body(), "plain");
        /* The same size and time: the tags still differ. */
        ck_assert_int_eq(getAccepting(proto, NULL, "/same.txt"), 200);
        header("etag", plainTag, sizeof(plainTag));
        ck_assert_int_eq(getAccepting(proto, "gzip", "/same.txt"), 200);
        ck_assert_str_eq(body(), "abcde");
        header("etag", gzTag, sizeof(gzTag));
        ck_assert_str_ne(gzTag, plainTag);
    }
}
END_TEST

START_TEST(test_range_and_head)
{
    for (size_t p = 0; p < 2; p++) {
        const char* proto = protocols[p];
        char args[128];

        /* Ranges of the variant's bytes, its length the variant's. */
        snprintf(args, sizeof(args), "%s -H 'Range: bytes=1-'", proto);
        ck_assert_int_eq(getAccepting(args, "br", "/app.js"), 206);
        CHECK_HAS("content-range: bytes 1-1/2");
        CHECK_HAS("content-encoding: br");
        ck_assert_str_eq(body(), "R");
        snprintf(args, sizeof(args), "%s -I", proto);
        ck_assert_int_eq(getAccepting(args, "zstd", "/app.js"), 200);
        CHECK_HAS("content-encoding: zstd");
        CHECK_HAS("content-length: 2");
        CHECK_HAS("content-type: text/javascript");
        ck_assert_str_eq(body(), "");
    }
}
END_TEST

/* The compress filter on the same route: a variant goes as it is (once
 * encoded, its bytes the file's), and a file without the client's
 * variant is compressed on the fly, Vary said once. */
START_TEST(test_with_compress_filter)
{
    for (size_t p = 0; p < 2; p++) {
        const char* proto = protocols[p];

        ck_assert_int_eq(SH("curl -s %s -H 'Accept-Encoding: gzip' "
                            "http://127.0.0.1:$P/c/big.txt | "
                            "cmp - $D/www/big.txt.gz && "
                            "curl -s %s --compressed "
                            "http://127.0.0.1:$P/c/big.txt | "
                            "cmp - $D/www/big.txt",
                            proto, proto),
                         0);
        ck_assert_int_eq(getAccepting(proto, "gzip", "/c/app.js"), 200);
        ck_assert_str_eq(body(), "GZ");
        ck_assert_int_eq(SH("curl -si %s -H 'Accept-Encoding: gzip' "
                            "http://127.0.0.1:$P/c/app.js | "
                            "grep -ci '^content-encoding:'",
                            proto),
                         0);
        ck_assert_str_eq(out, "1\n");
        ck_assert_int_eq(getAccepting(proto, "br", "/c/only.css"), 200);
        CHECK_HAS("content-encoding: br");
        ck_assert_int_eq(SH("curl -si %s -H 'Accept-Encoding: br' "
                            "http://127.0.0.1:$P/c/only.css | "
                            "grep -ci '^vary:.*accept-encoding'",
                            proto),
                         0);
        ck_assert_str_eq(out, "1\n");
    }
}
END_TEST

COR_TEST_SUITE(corStaticPrecompressed)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_negotiation);
    tcase_add_test(tc, test_validators);
    tcase_add_test(tc, test_range_and_head);
    tcase_add_test(tc, test_with_compress_filter);
}
