/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The compress module against the real binary and real curl (which
 * decodes gzip, br and zstd: --compressed): each encoding's bytes,
 * decoded, are the file's; the server's order among what the client
 * accepts, q=0, "*" and identity; what is never compressed (a body under
 * min_bytes, an image, 304, a range, a route with filters: {
 * compress: off }); a HEAD's head as its GET's; a body in memory (a
 * handler's answer), a file (the static module) and a streamed answer of
 * several MB (forward passing an
 * upstream's on) compressed and whole; over HTTP/2; Vary on each answer
 * of a compressible type; cor -t's errors.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorServer server;
static char site[64];
static char out[1 << 16];

#define BIG_BYTES (6 * 1024 * 1024 + 77)
static char big[BIG_BYTES];
static char got[BIG_BYTES + 65536];

/* A greeting of 240 bytes: over min_bytes (200), answered from memory. */
#define GREETING                                                               \
    "compressible greeting, compressible greeting, "                           \
    "compressible greeting, compressible greeting, compressible greeting, "    \
    "compressible greeting, compressible greeting, compressible greeting, "    \
    "compressible greeting, compressible!"

static void
fileWrite(const char* name, const void* data, size_t len)
{
    char path[256];
    FILE* f;

    snprintf(path, sizeof(path), "%s/%s", site, name);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* Text of words in an order no window repeats: compressible, but every
 * byte matters. */
static void
setUp(void)
{
    static const char* const words[] = { "cor ",     "filter ", "zstd ",
                                         "brotli ",  "gzip ",   "loop ",
                                         "stream\n", "chunk " };
    uint32_t x = 2463534242u;
    size_t n = 0;

    snprintf(site, sizeof(site), "/tmp/cor-compress-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(site));
    while (n < sizeof(big)) {
        const char* w;
        size_t len;

        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        w = words[x % 8];
        len = strlen(w);
        len = len < sizeof(big) - n ? len : sizeof(big) - n;
        memcpy(big + n, w, len);
        n += len;
    }
    fileWrite("big.txt", big, sizeof(big));
    fileWrite("a.json", big, 4000);
    fileWrite("small.txt", "short\n", 6);
    fileWrite("image.png", big, 4000);
}

static void
tearDown(void)
{
    char command[128];

    corServerStop(&server);
    snprintf(command, sizeof(command), "rm -rf %s", site);
    corShell(command, NULL, 0);
}

/* One listener, HTTP/1.1 and h2c: the site under /s, again under /n with
 * compression off, forward to /n on this same server under /p (an
 * upstream's answer, streamed), and the greeting from memory. */
static void
start(void)
{
    char yaml[4096];

    snprintf(
        yaml, sizeof(yaml),
        "runtime:\n"
        "  loops: 2\n"
        "  workers: 4\n"
        "  coroutines: { enabled: {COROUTINES} }\n"
        "listen:\n"
        "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
        "modules:\n"
        "  - { load: http }\n"
        "  - { load: hello, greeting: \"" GREETING "\" }\n"
        "  - { load: static, roots: [ { name: site, root: %s } ] }\n"
        "  - load: forward\n"
        "    upstreams:\n"
        "      - { name: self, servers: [ \"http://127.0.0.1:{PORT}\" ] }\n"
        "  - load: compress\n"
        "    encodings: [ zstd, br, gzip ]\n"
        "    min_bytes: 200\n"
        "    level: { gzip: 6, br: 4, zstd: 3 }\n"
        "routes:\n"
        "  - { match: \"GET /hello\", handler: hello }\n"
        "  - { match: \"GET /s/*\", handler: site, strip_prefix: /s }\n"
        "  - { match: \"GET /n/*\", handler: site, strip_prefix: /n,\n"
        "      filters: { compress: off } }\n"
        "  - { match: \"GET /p/*\", handler: self, strip_prefix: /p }\n"
        "log: { pid_file: {DIR}/cor.pid }\n",
        site);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

/* A shell command, printf-style, with $P (the port) and $S (the site);
 * its output in out. */
static int
sh(const char* fmt, ...)
{
    char command[4096];
    char body[3072];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(command, sizeof(command), "P=%d S=%s; %s 2>&1", server.port, site,
             body);
    return corShell(command, out, sizeof(out));
}

/* What curl got for path with args: the status, the body in got (its
 * length returned), the head in $S/head, the bytes that came (before
 * decoding) in *wireP. */
static size_t
fetch(const char* args, const char* path, int* status, long* wireP)
{
    char file[128];
    FILE* f;
    size_t n;

    ck_assert_int_eq(sh("rm -f $S/body; curl -sS --max-time 30 %s -D $S/head "
                        "-o $S/body -w '%%{http_code} %%{size_download}' "
                        "\"http://127.0.0.1:$P%s\"",
                        args, path),
                     0);
    *status = atoi(out);
    if (wireP != NULL) {
        *wireP = atol(strchr(out, ' ') + 1);
    }
    snprintf(file, sizeof(file), "%s/body", site);
    f = fopen(file, "rb");
    if (f == NULL) {
        return 0;
    }
    n = fread(got, 1, sizeof(got), f);
    fclose(f);
    return n;
}

/* A field of the last head, without case, or "" when absent. */
static const char*
field(const char* name)
{
    static char value[512];
    size_t n;

    sh("grep -i '^%s:' $S/head | head -1 | cut -d' ' -f2- | tr -d '\\r\\n'",
       name);
    n = strnlen(out, sizeof(value) - 1);
    memcpy(value, out, n);
    value[n] = '\0';
    return value;
}

/* The encoding the last answer went out in ("" for none). */
#define ENCODING() field("content-encoding")

/* Asked with only enc accepted, a file comes in enc, decoded byte for
 * byte, chunked with no length, a weak ETag, Vary, and much smaller. */
static void
fileIn(const char* enc, const char* extra)
{
    char args[256];
    long wire;
    int status;
    size_t n;

    snprintf(args, sizeof(args), "--compressed -H 'Accept-Encoding: %s' %s",
             enc, extra);
    n = fetch(args, "/s/big.txt", &status, &wire);
    ck_assert_int_eq(status, 200);
    ck_assert_str_eq(ENCODING(), enc);
    ck_assert_str_eq(field("content-length"), "");
    ck_assert_str_eq(field("vary"), "Accept-Encoding");
    ck_assert_msg(strncmp(field("etag"), "W/\"", 3) == 0, "%s", field("etag"));
    ck_assert_uint_eq(n, sizeof(big));
    ck_assert(memcmp(got, big, sizeof(big)) == 0);
    ck_assert_msg(wire > 0 && wire < (long)sizeof(big) / 3,
                  "%s: %ld bytes on the wire for %zu", enc, wire, sizeof(big));
}

START_TEST(test_each_encoding_decodes_to_the_file)
{
    start();
    fileIn("gzip", "");
    fileIn("br", "");
    fileIn("zstd", "");
    ck_assert_str_eq(field("transfer-encoding"), "chunked");
}
END_TEST

/* The encoding an Accept-Encoding value gets for the JSON file. */
static const char*
chosen(const char* accept)
{
    char args[256];
    int status;
    size_t n;

    snprintf(args, sizeof(args), "--compressed -H 'Accept-Encoding: %s'",
             accept);
    n = fetch(args, "/s/a.json", &status, NULL);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(n, 4000);
    ck_assert(memcmp(got, big, 4000) == 0);
    ck_assert_str_eq(field("vary"), "Accept-Encoding");
    return ENCODING();
}

START_TEST(test_the_server_order_among_what_the_client_accepts)
{
    start();
    ck_assert_str_eq(chosen("gzip, br, zstd"), "zstd");
    ck_assert_str_eq(chosen("gzip;q=1.0, br;q=0.1"), "br");
    ck_assert_str_eq(chosen("zstd;q=0, gzip;q=0.000, br"), "br");
    ck_assert_str_eq(chosen("zstd;q=0, br;q=0"), "");
    ck_assert_str_eq(chosen("GZIP"), "gzip");
    ck_assert_str_eq(chosen("*;q=0.5, zstd;q=0"), "br");
    ck_assert_str_eq(chosen("*"), "zstd");
    ck_assert_str_eq(chosen("identity"), "");
    ck_assert_str_eq(field("content-length"), "4000");
    ck_assert_str_eq(chosen("*;q=0"), "");
    ck_assert_str_eq(chosen("deflate, compress"), "");
}
END_TEST

START_TEST(test_what_is_never_compressed)
{
    const char* gz = "-H 'Accept-Encoding: gzip, br, zstd'";
    char args[1024];
    char etag[512];
    int status;
    size_t n;

    start();
    /* Under min_bytes: as it is, Vary still said. */
    n = fetch(gz, "/s/small.txt", &status, NULL);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(n, 6);
    ck_assert_str_eq(ENCODING(), "");
    ck_assert_str_eq(field("vary"), "Accept-Encoding");
    /* An image: as it is, and no Vary (no variant of it exists). */
    n = fetch(gz, "/s/image.png", &status, NULL);
    ck_assert_uint_eq(n, 4000);
    ck_assert_str_eq(ENCODING(), "");
    ck_assert_str_eq(field("vary"), "");
    /* The file's own ETag, as the route without compression says it. */
    fetch(gz, "/n/a.json", &status, NULL);
    snprintf(etag, sizeof(etag), "%s", field("etag"));
    ck_assert_msg(etag[0] == '"', "%s", etag);
    /* 304: no body to encode. */
    snprintf(args, sizeof(args), "%s -H 'If-None-Match: %s'", gz, etag);
    n = fetch(args, "/s/a.json", &status, NULL);
    ck_assert_int_eq(status, 304);
    ck_assert_uint_eq(n, 0);
    ck_assert_str_eq(ENCODING(), "");
    /* A range: the bytes of the file, not of an encoding of it. */
    snprintf(args, sizeof(args), "%s -r 100-1099", gz);
    n = fetch(args, "/s/a.json", &status, NULL);
    ck_assert_int_eq(status, 206);
    ck_assert_uint_eq(n, 1000);
    ck_assert(memcmp(got, big + 100, 1000) == 0);
    ck_assert_str_eq(ENCODING(), "");
    /* The route that turns compression off: a HEAD as its GET. */
    snprintf(args, sizeof(args), "-I %s", gz);
    fetch(args, "/n/a.json", &status, NULL);
    ck_assert_int_eq(status, 200);
    ck_assert_str_eq(field("content-length"), "4000");
    ck_assert_str_eq(field("etag"), etag); /* strong: the bytes are it */
    n = fetch(gz, "/n/big.txt", &status, NULL);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(n, sizeof(big));
    ck_assert_str_eq(ENCODING(), "");
    ck_assert_str_eq(field("vary"), "");
}
END_TEST

/* The head of path's answer to method (GET or HEAD) with args, its
 * fields sorted, their names in lower case, less Date and the framing of
 * a body that a HEAD has not (Transfer-Encoding), in out. */
static void
headOf(const char* method, const char* args, const char* path)
{
    ck_assert_int_eq(sh("curl -sS --max-time 30 %s %s -D - -o /dev/null "
                        "\"http://127.0.0.1:$P%s\" | tr -d '\\r' | sed "
                        "'s/^[^:]*:/\\L&/' | grep -v "
                        "'^date:\\|^transfer-encoding:' | sort",
                        strcmp(method, "HEAD") == 0 ? "-I" : "", args, path),
                     0);
}

/*
 * A HEAD gets the head its GET would (RFC 9110 9.3.2), compressed or
 * not: Content-Encoding, Vary, the weak ETag, and Content-Length when the
 * GET says one (a body from memory: its compressed length) and none when
 * the GET streams (a file, a forwarded answer), over HTTP/1.1 and HTTP/2.
 * HEAD used to go out uncompressed: no Content-Encoding, the file's
 * length and its strong ETag. nginx 1.22's gzip gives a HEAD its GET's
 * head too (Content-Encoding, Vary, the weak ETag, no length).
 */
START_TEST(test_a_head_says_what_its_get_would)
{
    static const char* const paths[] = { "/s/a.json", "/s/big.txt", "/hello",
                                         "/p/n/big.txt", "/s/small.txt" };
    static const char* const args[] = {
        "-H 'Accept-Encoding: gzip, br, zstd'",
        "-H 'Accept-Encoding: gzip'",
        "--http2-prior-knowledge -H 'Accept-Encoding: br'",
    };
    char get[4096] = "";

    start();
    for (size_t a = 0; a < sizeof(args) / sizeof(args[0]); a++) {
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
            headOf("GET", args[a], paths[i]);
            memcpy(get, out, sizeof(get) - 1);
            headOf("HEAD", args[a], paths[i]);
            ck_assert_msg(strcmp(get, out) == 0, "%s %s:\nGET:\n%sHEAD:\n%s",
                          args[a], paths[i], get, out);
        }
    }
    /* What they agree on, once: the file compressed, its length unsaid. */
    headOf("HEAD", args[0], "/s/a.json");
    ck_assert_msg(strstr(out, "content-encoding: zstd\n") != NULL
                      && strstr(out, "etag: W/\"") != NULL
                      && strstr(out, "vary: Accept-Encoding\n") != NULL
                      && strstr(out, "content-length") == NULL,
                  "%s", out);
    headOf("HEAD", args[1], "/hello");
    ck_assert_msg(strstr(out, "content-encoding: gzip\n") != NULL
                      && strstr(out, "content-length: ") != NULL,
                  "%s", out);
}
END_TEST

START_TEST(test_a_body_from_memory_keeps_a_length)
{
    long wire;
    int status;
    size_t n;

    start();
    n = fetch("--compressed -H 'Accept-Encoding: gzip'", "/hello", &status,
              &wire);
    ck_assert_int_eq(status, 200);
    ck_assert_str_eq(ENCODING(), "gzip");
    ck_assert_uint_eq(n, strlen(GREETING) + 1);
    ck_assert(memcmp(got, GREETING "\n", n) == 0);
    /* Compressed whole: its new length is said, no chunks. */
    ck_assert_int_eq(atol(field("content-length")), wire);
    ck_assert_int_lt(wire, (long)n);
    ck_assert_str_eq(field("transfer-encoding"), "");
}
END_TEST

START_TEST(test_a_streamed_answer_of_megabytes)
{
    const char* encs[] = { "gzip", "br", "zstd" };
    char args[128];
    long wire;
    int status;
    size_t n;

    start();
    for (unsigned i = 0; i < 3; i++) {
        /* forward streams the upstream's answer (given with its length,
         * uncompressed: /n): compressed here, chunked, whole. */
        snprintf(args, sizeof(args), "--compressed -H 'Accept-Encoding: %s'",
                 encs[i]);
        n = fetch(args, "/p/n/big.txt", &status, &wire);
        ck_assert_int_eq(status, 200);
        ck_assert_str_eq(ENCODING(), encs[i]);
        ck_assert_str_eq(field("content-length"), "");
        ck_assert_str_eq(field("transfer-encoding"), "chunked");
        ck_assert_uint_eq(n, sizeof(big));
        ck_assert(memcmp(got, big, sizeof(big)) == 0);
        ck_assert_int_lt(wire, (long)sizeof(big) / 3);
    }
}
END_TEST

START_TEST(test_over_http2)
{
    const char* h2 = "--http2-prior-knowledge --compressed "
                     "-H 'Accept-Encoding: br, gzip'";
    long wire;
    int status;
    size_t n;

    start();
    n = fetch(h2, "/s/big.txt", &status, &wire);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(sh("head -1 $S/head | grep -c 'HTTP/2'"), 0);
    ck_assert_str_eq(ENCODING(), "br");
    ck_assert_str_eq(field("vary"), "Accept-Encoding");
    ck_assert_str_eq(field("content-length"), "");
    ck_assert_uint_eq(n, sizeof(big));
    ck_assert(memcmp(got, big, sizeof(big)) == 0);
    ck_assert_int_lt(wire, (long)sizeof(big) / 3);
    n = fetch(h2, "/p/n/big.txt", &status, &wire);
    ck_assert_str_eq(ENCODING(), "br");
    ck_assert_uint_eq(n, sizeof(big));
    ck_assert(memcmp(got, big, sizeof(big)) == 0);
    n = fetch(h2, "/hello", &status, &wire);
    ck_assert_str_eq(ENCODING(), "br");
    ck_assert_int_eq(atol(field("content-length")), wire);
    ck_assert(n == strlen(GREETING) + 1 && memcmp(got, GREETING, n - 1) == 0);
}
END_TEST

/* cor -t on a configuration of the hello module, compress with extra
 * keys and a route with its own: it fails, naming each line of lines
 * (0-ended) and what is said. */
static void
refused(const char* name, const char* compress, const char* route,
        const unsigned* lines, const char* said)
{
    const char* bin = getenv("COR_BIN") ? getenv("COR_BIN") : "build/cor";
    char yaml[1024];
    char at[64];

    snprintf(yaml, sizeof(yaml),
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:1 }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "  - load: compress\n"
             "%s"
             "routes:\n"
             "  - { match: \"GET /a\", handler: hello%s }\n",
             compress, route);
    fileWrite(name, yaml, strlen(yaml));
    ck_assert_int_eq(sh("%s -t -c $S/%s", bin, name), 1);
    for (unsigned i = 0; lines[i] != 0; i++) {
        snprintf(at, sizeof(at), "%s:%u:", name, lines[i]);
        ck_assert_msg(strstr(out, at) != NULL, "%s in %s", at, out);
    }
    ck_assert_msg(strstr(out, said) != NULL, "%s in %s", said, out);
}

START_TEST(test_cor_t_reports_mistakes)
{
    refused("keys.yaml",
            "    encodings: [ br, lzma ]\n"
            "    level: { gzip: 12 }\n",
            "", (const unsigned[]){ 7, 8, 0 }, "lzma");
    refused("value.yaml", "", ", filters: { compress: maybe }",
            (const unsigned[]){ 8, 0 }, "on, off");
    /* A filter's name is checked once the modules added theirs. */
    refused("name.yaml", "", ", filters: { compres: off }",
            (const unsigned[]){ 8, 0 }, "compress");
}
END_TEST

COR_TEST_SUITE(corCompress)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_each_encoding_decodes_to_the_file);
    tcase_add_test(tc, test_the_server_order_among_what_the_client_accepts);
    tcase_add_test(tc, test_what_is_never_compressed);
    tcase_add_test(tc, test_a_head_says_what_its_get_would);
    tcase_add_test(tc, test_a_body_from_memory_keeps_a_length);
    tcase_add_test(tc, test_a_streamed_answer_of_megabytes);
    tcase_add_test(tc, test_over_http2);
    tcase_add_test(tc, test_cor_t_reports_mistakes);
}
