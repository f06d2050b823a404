/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a static root does beyond serving its files, against the real
 * binary and curl in both modes: a fallback for paths that name nothing
 * (a single-page app's index.html, as try_files $uri $uri/ /index.html),
 * expires (Cache-Control), names starting with '.' refused unless
 * dotfiles: allow, a folder without its index listed (autoindex: HTML with
 * its names escaped, JSON for Accept: application/json), and media types
 * from /etc/mime.types beside the built-in table. A single-page app under
 * /app/ in headless Chromium: a deep path gets the app, whose script
 * reads the path and fetches its data; an asset that is missing is 404
 * where the routes give it a root without fallback.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CorServer server;
static char dir[64];
static char out[1 << 16];

static const char* configFormat =
    "runtime:\n"
    "  loops: 1\n"
    "  workers: 2\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - load: static\n"
    "    roots:\n"
    "      - { name: app, root: %s/app, fallback: /index.html,\n"
    "          expires: 1h }\n"
    "      - { name: files, root: %s/files, autoindex: on, index: \"\" }\n"
    "      - { name: dots, root: %s/files, dotfiles: allow }\n"
    "      - { name: spa, root: %s/site, fallback: /index.html }\n"
    "      - { name: assets, root: %s/site }\n"
    "routes:\n"
    "  - { match: \"GET ~^/app/.+\\\\.[a-z0-9]+$\", handler: assets }\n"
    "  - { match: \"GET /app/*\", handler: spa }\n"
    "  - { match: \"GET /files/*\", handler: files, strip_prefix: /files }\n"
    "  - { match: \"GET /dots/*\", handler: dots, strip_prefix: /dots }\n"
    "  - { match: \"GET /*\", handler: app }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

/* The single-page app: its page, and its script, which writes the path
 * it was loaded at and a value it fetches into the page. */
static const char* spaIndex =
    "<!doctype html><html><body><div id=path>none</div>"
    "<div id=data>none</div><script src=/app/main.js></script>"
    "</body></html>";
static const char* spaScript =
    "document.getElementById(\"path\").textContent = "
    "\"path=\" + location.pathname;\n"
    "fetch(\"/app/data.json\").then(r => r.json()).then(j => {\n"
    "  document.getElementById(\"data\").textContent = "
    "\"value=\" + j.value;\n"
    "});\n";

/* A shell command with $P and $D set; its output in out. */
#define SH(...) corShellAt(server.port, dir, out, sizeof(out), __VA_ARGS__)

/* curl -si with args on path; the status, the answer in out. */
static int
get(const char* args, const char* path)
{
    return corCurlStatus(server.port, args, path, out, sizeof(out));
}

#define CHECK_HAS(text) COR_CHECK_HAS(out, text)
#define CHECK_HAS_NOT(text) COR_CHECK_HAS_NOT(out, text)

static void
setUp(void)
{
    char yaml[4096];

    snprintf(dir, sizeof(dir), "/tmp/cor-roots-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(SH("mkdir -p $D/app/assets $D/files/sub && "
                        "echo '<div id=app></div>' > $D/app/index.html && "
                        "echo 'body{}' > $D/app/assets/a.css && "
                        "echo secret > $D/app/.env && "
                        "echo x > $D/files/plain.txt && "
                        "echo y > \"$D/files/<b>&'q.txt\" && "
                        "echo z > $D/files/.hidden && "
                        "echo m > $D/files/movie.mkv"),
                     0);
    ck_assert_int_eq(SH("mkdir -p $D/site/app && cd $D/site && "
                        "printf '%%s' '%s' > index.html && "
                        "printf '%%s' '%s' > app/main.js && "
                        "echo '{\"value\": 4242}' > app/data.json",
                        spaIndex, spaScript),
                     0);
    snprintf(yaml, sizeof(yaml), configFormat, dir, dir, dir, dir, dir);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
tearDown(void)
{
    char command[128];

    corServerStop(&server);
    snprintf(command, sizeof(command), "rm -rf %s", dir);
    corShell(command, NULL, 0);
}

static const char* const protocols[] = { "--http1.1",
                                         "--http2-prior-knowledge" };

START_TEST(test_fallback_and_expires)
{
    for (size_t p = 0; p < 2; p++) {
        /* A route the app draws itself: its index.html, 200. */
        ck_assert_int_eq(get(protocols[p], "/users/42/edit"), 200);
        CHECK_HAS("<div id=app></div>");
        CHECK_HAS("cache-control: max-age=3600");
        ck_assert_int_eq(get(protocols[p], "/assets/a.css"), 200);
        CHECK_HAS("body{}");
        CHECK_HAS("content-type: text/css");
        /* A file that exists is never the fallback's, nor a dotfile. */
        ck_assert_int_eq(get(protocols[p], "/.env"), 404);
        CHECK_HAS_NOT("secret");
        ck_assert_int_eq(get(protocols[p], "/assets/../.env"), 404);
    }
}
END_TEST

START_TEST(test_dotfiles)
{
    ck_assert_int_eq(get("", "/files/.hidden"), 404);
    ck_assert_int_eq(get("", "/dots/.hidden"), 200);
    CHECK_HAS("\r\n\r\nz");
}
END_TEST

START_TEST(test_autoindex)
{
    for (size_t p = 0; p < 2; p++) {
        ck_assert_int_eq(get(protocols[p], "/files/"), 200);
        CHECK_HAS("content-type: text/html");
        CHECK_HAS("<a href=\"plain.txt\">plain.txt</a>");
        CHECK_HAS("<a href=\"sub/\">sub/</a>");
        CHECK_HAS("<a href=\"%3Cb%3E%26%27q.txt\">&lt;b&gt;&amp;&#39;q.txt"
                  "</a>");
        CHECK_HAS_NOT(".hidden");
        ck_assert_int_eq(get("-H 'Accept: application/json'", "/files/"), 200);
        CHECK_HAS("content-type: application/json");
        CHECK_HAS("{\"name\":\"sub\",\"type\":\"directory\"}");
        CHECK_HAS("{\"name\":\"plain.txt\",\"type\":\"file\"}");
    }
    ck_assert_int_eq(
        SH("curl -s 'http://127.0.0.1:'$P'/files/' -H "
           "'Accept: application/json' | /usr/bin/python3 -c 'import "
           "json,sys; print(len(json.load(sys.stdin)))'"),
        0);
    ck_assert_str_eq(out, "4\n");
}
END_TEST

/* .mkv is in Debian's /etc/mime.types, not in the built-in table. */
START_TEST(test_system_media_types)
{
    ck_assert_int_eq(SH("grep -qw mkv /etc/mime.types"), 0);
    ck_assert_int_eq(get("", "/files/movie.mkv"), 200);
    CHECK_HAS("content-type: video/x-matroska");
}
END_TEST

/* The app in a browser: Chromium loads a path the app draws, runs its
 * script (served by the assets root), which fetches its data; the DOM
 * it dumps has both. --virtual-time-budget lets the fetch finish before
 * the dump (without it the DOM is dumped at the load event). */
START_TEST(test_single_page_app_in_chromium)
{
    /* What the routes say: a name with an extension under /app/ is the
     * assets root's, which has no fallback (nginx: try_files $uri
     * =404); the spa root's fallback, like try_files $uri $uri/
     * /index.html, would serve the page for it too. */
    ck_assert_int_eq(get("", "/app/missing.js"), 404);
    ck_assert_int_eq(get("", "/app/users/42"), 200);
    CHECK_HAS("<div id=path>none</div>");
    ck_assert_int_eq(get("", "/missing.js"), 200);
    CHECK_HAS("<div id=app></div>");
    if (SH("command -v chromium") != 0) {
        fprintf(stderr,
                "corStaticRootTest: no chromium (./configure "
                "--install-deps installs it): the browser check skips\n");
        return;
    }
    ck_assert_int_eq(SH("timeout 240 chromium --headless --no-sandbox "
                        "--disable-gpu --user-data-dir=$D/chromium "
                        "--virtual-time-budget=10000 --dump-dom "
                        "http://127.0.0.1:$P/app/users/42 "
                        "2>$D/chromium.log"),
                     0);
    CHECK_HAS("<div id=\"path\">path=/app/users/42</div>");
    CHECK_HAS("<div id=\"data\">value=4242</div>");
}
END_TEST

COR_TEST_SUITE(corStaticRoot)
{
    /* Chromium starts in about 10 s here, far more on a loaded machine. */
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_fallback_and_expires);
    tcase_add_test(tc, test_dotfiles);
    tcase_add_test(tc, test_autoindex);
    tcase_add_test(tc, test_system_media_types);
    tcase_add_test(tc, test_single_page_app_in_chromium);
}
