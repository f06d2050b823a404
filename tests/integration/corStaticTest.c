/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The static module against the real binary and real curl: whole files
 * (a big one byte for byte), HEAD, 304 by If-None-Match and
 * If-Modified-Since, ranges (one, several as multipart/byteranges taken
 * apart here, 416), If-Range, index files and the 301 to a directory's
 * slash, media types, each way out of the root refused (dot segments as
 * they came with --path-as-is, escaped ones, an escaped '/', a NUL, a
 * symlink out), over TLS and over HTTP/2, the head in the file's first
 * segment, a file changed on disk served fresh, the open-file cache's
 * bound, strip_prefix, and cor -t's errors.
 */
#include "corTest.h"
#include "corServer.h"

#include <netinet/in.h>
#include <linux/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static CorServer server;
static char certs[64];
static char site[64]; /* www/ (the root) and secret.txt beside */
static char out[1 << 16];

#define BIG_BYTES (5 * 1024 * 1024 + 123)
static unsigned char big[BIG_BYTES];
static unsigned char got[BIG_BYTES + 65536];

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

/* The site: text files, a big one of known bytes, folders with and
 * without an index, symlinks in and out, a secret outside the root. */
static void
siteMake(void)
{
    char command[512];
    uint32_t x = 2463534242u;

    snprintf(site, sizeof(site), "/tmp/cor-static-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(site));
    snprintf(command, sizeof(command),
             "cd %s && mkdir -p www/sub www/empty "
             "outside && ln -s a.txt www/in-link && ln -s ../secret.txt "
             "www/out-link && ln -s ../outside www/out-dir && ln -s %s/"
             "secret.txt www/abs-link",
             site, site);
    ck_assert_int_eq(corShell(command, NULL, 0), 0);
    for (size_t i = 0; i < sizeof(big); i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        big[i] = (unsigned char)x;
    }
    fileWrite("www/big.bin", big, sizeof(big));
    fileWrite("www/a.txt", "hello, file\n", 12);
    fileWrite("www/index.html", "<p>top</p>\n", 11);
    fileWrite("www/sub/index.html", "<p>sub</p>\n", 11);
    fileWrite("www/app.wasm", "\0asm", 4);
    fileWrite("www/notes.cor", "cor\n", 4);
    fileWrite("www/blob.zzz", "zzz\n", 4);
    fileWrite("secret.txt", "the secret\n", 11);
    fileWrite("outside/x.txt", "the secret\n", 11);
}

static void
setUp(void)
{
    corTestCertsMake(certs, sizeof(certs));
    siteMake();
}

static void
tearDown(void)
{
    char command[128];

    corServerStop(&server);
    corTestCertsRemove(certs);
    snprintf(command, sizeof(command), "rm -rf %s", site);
    corShell(command, NULL, 0);
}

/* A plain listener (HTTP/1.1 and h2c) on {PORT}, TLS on {PORT2}; the
 * site's root under /s (stripped), under /www (not: the root is the
 * site's folder), and again with symlinks: follow under /f. */
static void
start(void)
{
    char yaml[4096];

    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 4\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:{PORT2}\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: static\n"
             "    open_file_cache: 4\n"
             "    open_file_cache_valid: 300ms\n"
             "    types: { \".wasm\": application/wasm, \".cor\": "
             "text/x-cor }\n"
             "    roots:\n"
             "      - { name: site, root: %s/www, index: index.html }\n"
             "      - { name: whole, root: %s, index: \"\" }\n"
             "      - { name: loose, root: %s/www, symlinks: follow }\n"
             "routes:\n"
             "  - { match: \"GET /s/*\", handler: site, strip_prefix: /s }\n"
             "  - { match: \"GET /www/*\", handler: whole }\n"
             "  - { match: \"GET /f/*\", handler: loose, strip_prefix: /f }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             certs, certs, site, site, site);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

/* A shell command, printf-style, with $P (plain), $T (TLS), $C (the
 * certificates) and $S (the site) set; its output in out. */
static int
sh(const char* fmt, ...)
{
    char command[4096];
    char body[3072];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(command, sizeof(command), "P=%d T=%d C=%s S=%s; %s 2>&1",
             server.port, server.port2, certs, site, body);
    return corShell(command, out, sizeof(out));
}

/* The status and the bytes curl got for path with args, the body in got
 * (its length returned), the head in $S/head. */
static size_t
fetch(const char* args, const char* url, int* status)
{
    char path[128];
    FILE* f;
    size_t n;

    ck_assert_int_eq(sh("rm -f $S/body; curl -sS --max-time 20 %s -D $S/head "
                        "-o $S/body -w '%%{http_code}' \"%s\"",
                        args, url),
                     0);
    *status = atoi(out);
    snprintf(path, sizeof(path), "%s/body", site);
    f = fopen(path, "rb");
    if (f == NULL) {
        return 0; /* no body at all (HEAD) */
    }
    n = fread(got, 1, sizeof(got), f);
    fclose(f);
    return n;
}

/* from into to[0..cap), cut there. */
static void
keep(char* to, size_t cap, const char* from)
{
    size_t n = strnlen(from, cap - 1);

    memcpy(to, from, n);
    to[n] = '\0';
}

/* A field of the head fetch saved, without case, or "" when absent. */
static const char*
field(const char* name)
{
    static char value[512];

    sh("grep -i '^%s:' $S/head | head -1 | cut -d' ' -f2- | tr -d '\\r\\n'",
       name);
    keep(value, sizeof(value), out);
    return value;
}

#define PLAIN(path) "http://127.0.0.1:$P" path

START_TEST(test_whole_files_byte_for_byte)
{
    int status;
    size_t n;

    start();
    n = fetch("", PLAIN("/s/big.bin"), &status);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(n, sizeof(big));
    ck_assert(memcmp(got, big, sizeof(big)) == 0);
    ck_assert_str_eq(field("content-type"), "application/octet-stream");
    ck_assert_str_eq(field("accept-ranges"), "bytes");
    n = fetch("", PLAIN("/s/a.txt"), &status);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_eq(n, 12);
    ck_assert(memcmp(got, "hello, file\n", 12) == 0);
    ck_assert_str_eq(field("content-length"), "12");
    ck_assert_str_eq(field("content-type"), "text/plain; charset=utf-8");
    /* Without strip_prefix the whole path is under the root. */
    n = fetch("", PLAIN("/www/a.txt"), &status);
    ck_assert_int_eq(status, 200);
    ck_assert(n == 12 && memcmp(got, "hello, file\n", 12) == 0);
    /* Keep-alive: two files on one connection, curl says it reused it. */
    ck_assert_int_eq(sh("curl -sS -o /dev/null -o /dev/null -w "
                        "'%%{num_connects} ' http://127.0.0.1:$P/s/a.txt "
                        "http://127.0.0.1:$P/s/big.bin"),
                     0);
    ck_assert_str_eq(out, "1 0 ");
}
END_TEST

/* An answer's head leaves in the same segment as its file's first
 * bytes: a head alone is a small segment from which the client's kernel
 * takes a round trip of microseconds, and its receive buffer then never
 * grows (a 1 MiB file at 64 connections went at 0.7x nginx's rate). The
 * client counts the segments with data it got: one, for a small file. */
START_TEST(test_the_head_leaves_with_the_file)
{
    static const char request[] = "GET /s/a.txt HTTP/1.1\r\nHost: x\r\n\r\n";
    char answer[1024];
    struct tcp_info info;
    socklen_t len = sizeof(info);
    int fd;

    start();
    fd = corConnect(server.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, request, sizeof(request) - 1), 0);
    ck_assert_int_gt(corReadResponse(fd, answer, sizeof(answer), 5000), 0);
    ck_assert_int_eq(corStatus(answer), 200);
    ck_assert_str_eq(corBody(answer), "hello, file\n");
    ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len), 0);
    ck_assert_uint_eq(info.tcpi_data_segs_in, 1);
    close(fd);
}
END_TEST

START_TEST(test_head_has_the_get_head_and_no_body)
{
    char etag[64];
    int status;

    start();
    fetch("", PLAIN("/s/big.bin"), &status);
    keep(etag, sizeof(etag), field("etag"));
    fetch("-I", PLAIN("/s/big.bin"), &status);
    ck_assert_int_eq(status, 200);
    ck_assert_str_eq(field("etag"), etag);
    ck_assert_int_eq(atoi(field("content-length")), BIG_BYTES);
    ck_assert_str_ne(field("last-modified"), "");
    ck_assert_int_eq(sh("curl -s -I -o /dev/null -w '%%{size_download}' " PLAIN(
                         "/s/big.bin")),
                     0);
    ck_assert_str_eq(out, "0");
    /* A HEAD then a GET on one connection: the HEAD's answer holds no
     * byte of body, or the GET's would not parse. */
    ck_assert_int_eq(
        sh("curl -s -I -o /dev/null " PLAIN(
            "/s/a.txt") " --next -s -w '%%{num_connects}' " PLAIN("/s/a.txt")),
        0);
    ck_assert_str_eq(out, "hello, file\n0");
}
END_TEST

START_TEST(test_not_modified)
{
    char args[128];
    char etag[64];
    char date[64];
    int status;

    start();
    fetch("", PLAIN("/s/a.txt"), &status);
    keep(etag, sizeof(etag), field("etag"));
    keep(date, sizeof(date), field("last-modified"));
    ck_assert_msg(etag[0] == '"', "%s", etag);
    snprintf(args, sizeof(args), "-H 'If-None-Match: %s'", etag);
    ck_assert_uint_eq(fetch(args, PLAIN("/s/a.txt"), &status), 0);
    ck_assert_int_eq(status, 304);
    ck_assert_str_eq(field("etag"), etag);
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' -H "
                        "'If-None-Match: \"x\", W/%s' " PLAIN("/s/a.txt"),
                        etag),
                     0);
    ck_assert_str_eq(out, "304");
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' -H "
                        "'If-None-Match: \"other\"' " PLAIN("/s/a.txt")),
                     0);
    ck_assert_str_eq(out, "200");
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' -H "
                        "'If-Modified-Since: %s' " PLAIN("/s/a.txt"),
                        date),
                     0);
    ck_assert_str_eq(out, "304");
    ck_assert_int_eq(
        sh("curl -s -o /dev/null -w '%%{http_code}' -H "
           "'If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT' " PLAIN(
               "/s/a.txt")),
        0);
    ck_assert_str_eq(out, "200");
    /* If-None-Match decides when both are there (RFC 9110 13.2.2). */
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' -H "
                        "'If-None-Match: \"other\"' -H 'If-Modified-Since: "
                        "%s' " PLAIN("/s/a.txt"),
                        date),
                     0);
    ck_assert_str_eq(out, "200");
}
END_TEST

/* Take a multipart/byteranges body apart: each part's Content-Range
 * names bytes of big, which its body must be; the parts' starts go to
 * starts. Returns the number of parts. */
static unsigned
partsCheck(const unsigned char* body, size_t len, const char* boundary,
           unsigned long long* starts, unsigned cap)
{
    char delim[96];
    size_t dlen = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
    const unsigned char* p = body;
    const unsigned char* end = body + len;
    unsigned parts = 0;

    for (;;) {
        unsigned long long a, b, size;
        const char* range;
        const unsigned char* data;

        ck_assert_msg(end - p >= (long)dlen && memcmp(p, delim, dlen) == 0,
                      "no boundary at part %u", parts);
        p += dlen;
        if (end - p >= 4 && memcmp(p, "--\r\n", 4) == 0) {
            ck_assert_ptr_eq(p + 4, end);
            return parts;
        }
        data = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
        ck_assert_ptr_nonnull(data);
        range = memmem(p, (size_t)(data - p), "Content-Range: bytes ", 21);
        ck_assert_ptr_nonnull(range);
        ck_assert_int_eq(sscanf(range + 21, "%llu-%llu/%llu", &a, &b, &size),
                         3);
        ck_assert_uint_eq(size, BIG_BYTES);
        ck_assert_ptr_nonnull(memmem(p, (size_t)(data - p),
                                     "Content-Type: "
                                     "application/octet-stream",
                                     38));
        data += 4;
        ck_assert(data + (b - a + 1) <= end);
        ck_assert(memcmp(data, big + a, b - a + 1) == 0);
        ck_assert_uint_lt(parts, cap);
        starts[parts++] = a;
        p = data + (b - a + 1);
    }
}

/* Ranges over the URL base (plain, TLS or h2c, as args say). */
static void
rangesCheck(const char* args, const char* base)
{
    char url[128];
    char more[256];
    unsigned long long starts[8];
    const char* type;
    int status;
    size_t n;

    snprintf(url, sizeof(url), "%s/s/big.bin", base);
    snprintf(more, sizeof(more), "%s -r 1000-1999", args);
    n = fetch(more, url, &status);
    ck_assert_int_eq(status, 206);
    ck_assert_uint_eq(n, 1000);
    ck_assert(memcmp(got, big + 1000, 1000) == 0);
    snprintf(out, sizeof(out), "bytes 1000-1999/%d", BIG_BYTES);
    ck_assert_str_eq(field("content-range"), out);
    /* A suffix, and an open end past a piece of the file's size. */
    snprintf(more, sizeof(more), "%s -r -100", args);
    n = fetch(more, url, &status);
    ck_assert(status == 206 && n == 100);
    ck_assert(memcmp(got, big + BIG_BYTES - 100, 100) == 0);
    snprintf(more, sizeof(more), "%s -r 4000000-", args);
    n = fetch(more, url, &status);
    ck_assert(status == 206 && n == BIG_BYTES - 4000000);
    ck_assert(memcmp(got, big + 4000000, n) == 0);
    /* Several: a multipart body, each part checked. */
    snprintf(more, sizeof(more), "%s -r 0-9,5000-70000,3000000-3000099", args);
    n = fetch(more, url, &status);
    ck_assert_int_eq(status, 206);
    type = field("content-type");
    ck_assert_msg(strncmp(type, "multipart/byteranges; boundary=", 31) == 0,
                  "%s", type);
    ck_assert_uint_eq(partsCheck(got, n, type + 31, starts, 8), 3);
    ck_assert(starts[0] == 0 && starts[1] == 5000 && starts[2] == 3000000);
    /* Past the end: 416, with the size. */
    snprintf(more, sizeof(more), "%s -r 99999999-", args);
    fetch(more, url, &status);
    ck_assert_int_eq(status, 416);
    snprintf(out, sizeof(out), "bytes */%d", BIG_BYTES);
    ck_assert_str_eq(field("content-range"), out);
}

START_TEST(test_ranges_single_multi_and_unsatisfiable)
{
    start();
    rangesCheck("", "http://127.0.0.1:$P");
    /* Overlaps asking for more than the file: the whole of it, once. */
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code} "
                        "%%{size_download}' -r 0-,0-,0- " PLAIN("/s/a.txt")),
                     0);
    ck_assert_str_eq(out, "200 12");
    /* Another unit, and a range backwards: ignored. */
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' -H "
                        "'Range: lines=1-2' " PLAIN("/s/a.txt")),
                     0);
    ck_assert_str_eq(out, "200");
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' -r 5-2 " PLAIN(
                         "/s/a.txt")),
                     0);
    ck_assert_str_eq(out, "200");
}
END_TEST

START_TEST(test_if_range)
{
    char etag[64];
    char date[64];

    start();
    fetch("", PLAIN("/s/a.txt"), &(int){ 0 });
    keep(etag, sizeof(etag), field("etag"));
    keep(date, sizeof(date), field("last-modified"));
    ck_assert_int_eq(sh("curl -s -w ' %%{http_code}' -r 0-4 -H 'If-Range: "
                        "%s' " PLAIN("/s/a.txt"),
                        etag),
                     0);
    ck_assert_str_eq(out, "hello 206");
    ck_assert_int_eq(sh("curl -s -w ' %%{http_code}' -r 0-4 -H 'If-Range: "
                        "%s' " PLAIN("/s/a.txt"),
                        date),
                     0);
    ck_assert_str_eq(out, "hello 206");
    /* Another version: the whole, new file. */
    ck_assert_int_eq(sh("curl -s -w ' %%{http_code}' -r 0-4 -H 'If-Range: "
                        "\"1-2\"' " PLAIN("/s/a.txt")),
                     0);
    ck_assert_str_eq(out, "hello, file\n 200");
    ck_assert_int_eq(sh("curl -s -w ' %%{http_code}' -r 0-4 -H 'If-Range: "
                        "W/%s' " PLAIN("/s/a.txt"),
                        etag),
                     0);
    ck_assert_str_eq(out, "hello, file\n 200");
}
END_TEST

START_TEST(test_index_and_the_slash_redirect)
{
    start();
    ck_assert_int_eq(sh("curl -s -w ' %%{http_code}' " PLAIN("/s/")), 0);
    ck_assert_str_eq(out, "<p>top</p>\n 200");
    ck_assert_int_eq(sh("curl -s -w ' %%{http_code}' " PLAIN("/s/sub/")), 0);
    ck_assert_str_eq(out, "<p>sub</p>\n 200");
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code} "
                        "%%{redirect_url}' " PLAIN("/s/sub?x=1")),
                     0);
    ck_assert_msg(strncmp(out, "301 http://127.0.0.1:", 21) == 0
                      && strstr(out, "/s/sub/?x=1") != NULL,
                  "%s", out);
    /* Followed, it ends at the index. */
    ck_assert_int_eq(sh("curl -sL " PLAIN("/s/sub")), 0);
    ck_assert_str_eq(out, "<p>sub</p>\n");
}
END_TEST

START_TEST(test_media_types)
{
    static const char* const cases[][2] = {
        { "/s/app.wasm", "application/wasm" },
        { "/s/notes.cor", "text/x-cor" },
        { "/s/blob.zzz", "application/octet-stream" },
        { "/s/index.html", "text/html; charset=utf-8" },
        { "/s/", "text/html; charset=utf-8" },
    };

    start();
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{content_type}' "
                            "http://127.0.0.1:$P%s",
                            cases[i][0]),
                         0);
        ck_assert_msg(strcmp(out, cases[i][1]) == 0, "%s: %s", cases[i][0],
                      out);
    }
}
END_TEST

START_TEST(test_nothing_outside_the_root)
{
    static const char* const paths[] = {
        "/s/../secret.txt",
        "/s/%2e%2e/secret.txt",
        "/s/..%2fsecret.txt",
        "/s/%2e%2e%2fsecret.txt",
        "/s/sub/..%2f..%2fsecret.txt",
        "/s/sub/%2e%2e/%2e%2e/secret.txt",
        "/s/a.txt%00.html",
        "/s/sub%2fa.txt",
        "/s/out-link",
        "/s/out-dir/x.txt",
        "/s/abs-link",
        "/www/../secret.txt",
        "/www/www/../../secret.txt",
        "/s/%252e%252e/secret.txt",
        "/s/.%2e/secret.txt",
    };

    start();
    for (unsigned i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        int status;

        ck_assert_int_eq(sh("rm -f $S/body; touch $S/body; "
                            "curl -s --path-as-is -o $S/body -w "
                            "'%%{http_code} ' \"http://127.0.0.1:$P%s\"; "
                            "grep -c secret $S/body",
                            paths[i]),
                         1);
        status = atoi(out);
        ck_assert_msg(status == 400 || status == 403 || status == 404, "%s: %s",
                      paths[i], out);
    }
    /* The symlinks out are refused as such: 403, not a missing file. */
    ck_assert_int_eq(sh("curl -s -o /dev/null -o /dev/null -o /dev/null "
                        "-w '%%{http_code} ' " PLAIN("/s/out-link") " " PLAIN(
                            "/s/out-dir/x.txt") " " PLAIN("/s/abs-link")),
                     0);
    ck_assert_str_eq(out, "403 403 403 ");
    /* One inside is followed; a missing file is 404; a root that says
     * follow goes anywhere. */
    ck_assert_int_eq(sh("curl -s " PLAIN("/s/in-link")), 0);
    ck_assert_str_eq(out, "hello, file\n");
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' " PLAIN(
                         "/s/nothing.txt")),
                     0);
    ck_assert_str_eq(out, "404");
    ck_assert_int_eq(sh("curl -s " PLAIN("/f/out-link")), 0);
    ck_assert_str_eq(out, "the secret\n");
    /* A folder without an index is not listed. */
    ck_assert_int_eq(sh("curl -s -o /dev/null -o /dev/null -w "
                        "'%%{http_code}' " PLAIN("/s/empty/") " " PLAIN(
                            "/www/")),
                     0);
    ck_assert_str_eq(out, "403403");
}
END_TEST

START_TEST(test_over_tls)
{
    char base[64];
    int status;
    size_t n;

    start();
    n = fetch("--http1.1 --cacert $C/ca.pem", "https://localhost:$T/s/big.bin",
              &status);
    ck_assert(status == 200 && n == sizeof(big));
    ck_assert(memcmp(got, big, sizeof(big)) == 0);
    snprintf(base, sizeof(base), "https://localhost:$T");
    rangesCheck("--http1.1 --cacert $C/ca.pem", base);
    /* h2 by ALPN on the same listener. */
    n = fetch("--http2 --cacert $C/ca.pem", "https://localhost:$T/s/big.bin",
              &status);
    ck_assert(status == 200 && n == sizeof(big));
    ck_assert(memcmp(got, big, sizeof(big)) == 0);
    rangesCheck("--http2 --cacert $C/ca.pem", base);
}
END_TEST

START_TEST(test_over_http2)
{
    char etag[64];
    int status;
    size_t n;

    start();
    n = fetch("--http2-prior-knowledge", PLAIN("/s/big.bin"), &status);
    ck_assert(status == 200 && n == sizeof(big));
    ck_assert(memcmp(got, big, sizeof(big)) == 0);
    ck_assert_int_eq(sh("head -1 $S/head | tr -d '\\r\\n'"), 0);
    ck_assert_str_eq(out, "HTTP/2 200 ");
    keep(etag, sizeof(etag), field("etag"));
    rangesCheck("--http2-prior-knowledge", "http://127.0.0.1:$P");
    fetch("--http2-prior-knowledge -I", PLAIN("/s/big.bin"), &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(atoi(field("content-length")), BIG_BYTES);
    ck_assert_int_eq(sh("curl -s --http2-prior-knowledge -I -o /dev/null -w "
                        "'%%{size_download}' " PLAIN("/s/big.bin")),
                     0);
    ck_assert_str_eq(out, "0");
    ck_assert_int_eq(sh("curl -s --http2-prior-knowledge -o /dev/null -w "
                        "'%%{http_code}' -H 'If-None-Match: %s' " PLAIN(
                            "/s/big.bin"),
                        etag),
                     0);
    ck_assert_str_eq(out, "304");
    ck_assert_int_eq(sh("curl -s --http2-prior-knowledge -o /dev/null -w "
                        "'%%{http_code} %%{redirect_url}' " PLAIN("/s/sub")),
                     0);
    ck_assert_msg(strncmp(out, "301 http://127.0.0.1:", 21) == 0
                      && strstr(out, "/s/sub/") != NULL,
                  "%s", out);
}
END_TEST

START_TEST(test_a_changed_file_is_served_fresh)
{
    char etag[64];
    int status;

    start();
    fetch("", PLAIN("/s/a.txt"), &status);
    keep(etag, sizeof(etag), field("etag"));
    /* Written in place: the next request sees it (fstat says so). */
    fileWrite("www/a.txt", "changed in place\n", 17);
    ck_assert_int_eq(sh("curl -s " PLAIN("/s/a.txt")), 0);
    ck_assert_str_eq(out, "changed in place\n");
    fetch("", PLAIN("/s/a.txt"), &status);
    ck_assert_str_ne(field("etag"), etag);
    /* Replaced by a rename: seen once the entry is older than
     * open_file_cache_valid (300ms). */
    fileWrite("new.txt", "renamed over\n", 13);
    ck_assert_int_eq(
        sh("mv $S/new.txt $S/www/a.txt && sleep 0.4 && curl -s " PLAIN(
            "/s/a.txt")),
        0);
    ck_assert_str_eq(out, "renamed over\n");
    /* Removed: 404 then. */
    ck_assert_int_eq(sh("rm $S/www/a.txt && sleep 0.4 && curl -s -o /dev/null "
                        "-w '%%{http_code}' " PLAIN("/s/a.txt")),
                     0);
    ck_assert_str_eq(out, "404");
}
END_TEST

/* open_file_cache: 4. Forty files served, twice, each right: the
 * generation holds at most four of the site's files open (the cache's),
 * and holds some (it does cache). */
START_TEST(test_the_cache_is_bounded)
{
    char name[64];
    pid_t gen;

    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "www/f%d.txt", i);
        fileWrite(name, name, strlen(name));
    }
    start();
    gen = corServerGeneration(&server);
    ck_assert_int_gt(gen, 0);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 40; i++) {
            ck_assert_int_eq(sh("curl -s http://127.0.0.1:$P/s/f%d.txt", i), 0);
            snprintf(name, sizeof(name), "www/f%d.txt", i);
            ck_assert_str_eq(out, name);
        }
    }
    ck_assert_int_eq(sh("sleep 0.3; ls -l /proc/%d/fd | grep -c $S/www/",
                        (int)gen),
                     0);
    ck_assert_msg(atoi(out) >= 1 && atoi(out) <= 4, "%s", out);
}
END_TEST

/* cor -t reads every key and says where each mistake is. */
START_TEST(test_cor_t_reports_each_mistake_at_its_line)
{
    const char* bin = getenv("COR_BIN") ? getenv("COR_BIN") : "build/cor";
    char path[128];
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:1 }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: static\n"
             "    types: { wasm: application/wasm, \".x\": nothing }\n"
             "    roots:\n"
             "      - { name: a, root: %s/nowhere }\n"
             "      - { name: b, root: %s/www, symlinks: sometimes }\n"
             "      - { name: c, root: %s/www, indx: x.html }\n",
             site, site, site);
    snprintf(path, sizeof(path), "bad.yaml");
    fileWrite(path, yaml, strlen(yaml));
    ck_assert_int_eq(sh("%s -t -c $S/bad.yaml", bin), 1);
    ck_assert_msg(strstr(out, "bad.yaml:6:") != NULL
                      && strstr(out, "wasm") != NULL,
                  "%s", out);
    ck_assert_msg(strstr(out, "'.x': a media type") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "bad.yaml:8:") != NULL
                      && strstr(out, "nowhere") != NULL,
                  "%s", out);
    ck_assert_msg(strstr(out, "bad.yaml:9:") != NULL
                      && strstr(out, "sometimes") != NULL,
                  "%s", out);
    ck_assert_msg(strstr(out, "'indx'") != NULL, "%s", out);
}
END_TEST

START_TEST(test_strip_prefix_must_start_the_path)
{
    const char* bin = getenv("COR_BIN") ? getenv("COR_BIN") : "build/cor";
    char yaml[1024];

    snprintf(yaml, sizeof(yaml),
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:1 }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: static, roots: [ { name: a, root: %s/www } ] }\n"
             "routes:\n"
             "  - { match: \"GET /a/*\", handler: a, strip_prefix: /b }\n"
             "  - { match: \"GET /ab/*\", handler: a, strip_prefix: /a }\n"
             "  - { match: \"GET /c/*\", handler: a, strip_prefix: /c }\n",
             site);
    fileWrite("strip.yaml", yaml, strlen(yaml));
    ck_assert_int_eq(sh("%s -t -c $S/strip.yaml", bin), 1);
    ck_assert_msg(strstr(out, "strip.yaml:7:") != NULL
                      && strstr(out, "strip.yaml:8:") != NULL
                      && strstr(out, "strip.yaml:9:") == NULL,
                  "%s", out);
}
END_TEST

COR_TEST_SUITE(corStatic)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_whole_files_byte_for_byte);
    tcase_add_test(tc, test_the_head_leaves_with_the_file);
    tcase_add_test(tc, test_head_has_the_get_head_and_no_body);
    tcase_add_test(tc, test_not_modified);
    tcase_add_test(tc, test_ranges_single_multi_and_unsatisfiable);
    tcase_add_test(tc, test_if_range);
    tcase_add_test(tc, test_index_and_the_slash_redirect);
    tcase_add_test(tc, test_media_types);
    tcase_add_test(tc, test_nothing_outside_the_root);
    tcase_add_test(tc, test_over_tls);
    tcase_add_test(tc, test_over_http2);
    tcase_add_test(tc, test_a_changed_file_is_served_fresh);
    tcase_add_test(tc, test_the_cache_is_bounded);
    tcase_add_test(tc, test_cor_t_reports_each_mistake_at_its_line);
    tcase_add_test(tc, test_strip_prefix_must_start_the_path);
}
