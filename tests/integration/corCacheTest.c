/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache module against the real binary: an origin of its own
 * (corCacheOrigin.py, whose query says what each answer carries and which
 * counts what it was asked) behind forward, cached; RFC 9111's cases run
 * by corCacheCompare.py against cor, and beside it against nginx's
 * proxy_cache and Varnish on the same origin where they are installed
 * (their column printed: docs/cache.md's table); fifty concurrent misses
 * make one origin request; any handler is cached (static's file, over
 * HTTP/1.1, HTTP/2 and cor://); purge; the memory bound; /metrics and
 * the access log; cor -t's errors.
 */
#include "corTest.h"
#include "corServer.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static pid_t origin;
static int originPort;
static char out[1 << 16];

/* A peer of one test's (nginx, Varnish), stopped by its PID at its end;
 * the origin is the whole program's. */
static pid_t peers[4];
static unsigned peerCount;

static pid_t
run(char* const argv[])
{
    pid_t pid = corTestFork(SIGKILL);

    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);

        dup2(null, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    ck_assert_int_gt(pid, 0);
    return pid;
}

static pid_t
spawn(char* const argv[])
{
    pid_t pid = run(argv);

    peers[peerCount++] = pid;
    return pid;
}

/* The origin, once for the whole program (an unchecked fixture: in the
 * process that forks the tests): python3's start took 0.3-0.5 s a test,
 * seconds on a loaded machine. Each test asks it for targets of its own,
 * so the counts it keeps by target do not mix. */
static void
originStart(void)
{
    char port[16];

    originPort = corFreePort();
    snprintf(port, sizeof(port), "%d", originPort);
    origin = run((char* const[]){ "/usr/bin/python3",
                                  "tests/integration/corCacheOrigin.py", port,
                                  NULL });
    ck_assert_msg(corWaitListening(originPort, origin, 60000),
                  "the origin did not start");
}

static void
originStop(void)
{
    kill(origin, SIGTERM);
    waitpid(origin, NULL, 0);
}

static void
setUp(void)
{
    peerCount = 0;
}

static void
tearDown(void)
{
    /* The peers first: their folders are in the server's. */
    for (unsigned i = 0; i < peerCount; i++) {
        kill(peers[i], SIGTERM);
        waitpid(peers[i], NULL, 0);
    }
    peerCount = 0;
    corServerStop(&server);
}

/* cor with the origin behind forward under /c (cached, in a store of
 * memory bytes), a static root under /s (cached, with a Cache-Control
 * the route adds), purge, /metrics and a json access log. */
static void
start(const char* memory)
{
    char yaml[4096];

    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 4\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
             "  - { protocol: cor, address: 127.0.0.1:{PORT2} }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: cor }\n"
             "  - { load: static, roots: [ { name: site, root: {DIR} } ] }\n"
             "  - load: forward\n"
             "    upstreams:\n"
             "      - { name: origin, servers: [ \"http://127.0.0.1:%d\" ] }\n"
             "  - { load: compress, encodings: [ gzip ], min_bytes: 10000 }\n"
             "  - load: cache\n"
             "    stores:\n"
             "      - { name: edge, memory: %s, lock_timeout: 20s }\n"
             "      - { name: files, memory: 1MiB }\n"
             "      - { name: brief, memory: 1MiB, lock_timeout: 300ms }\n"
             "routes:\n"
             "  - { match: \"PURGE /*\", handler: cache-purge }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "  - { match: \"/c/*\", handler: origin, cache: edge }\n"
             "  - { match: \"/b/*\", handler: origin, cache: brief }\n"
             "  - { match: \"GET /s/*\", handler: site, strip_prefix: /s,\n"
             "      cache: files, headers: { Cache-Control: max-age=60 } }\n"
             "log:\n"
             "  pid_file: {DIR}/cor.pid\n"
             "  access: {DIR}/access.log\n"
             "  access_format: json\n",
             originPort, memory);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

/* A shell command, printf-style; its output in out. */
static int
sh(const char* fmt, ...)
{
    char command[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(command, sizeof(command), fmt, ap);
    va_end(ap);
    return corShell(command, out, sizeof(out));
}

/* A counter of the edge store's in /metrics ("cor_cache_hits_total"). */
static long
edgeMetric(const char* family)
{
    char name[128];

    snprintf(name, sizeof(name), "%s{cache=\"edge\"}", family);
    return corMetric(server.port, name);
}

/* How often the origin was asked for target. */
static long
originCount(const char* target)
{
    sh("curl -s 'http://127.0.0.1:%d/count?t=%s'", originPort, target);
    return atol(out);
}

/* nginx with proxy_cache (and its lock) on the origin, in a folder of
 * the test's; its port, or 0 where nginx is not installed. */
static int
nginxStart(void)
{
    char conf[256];
    char prefix[192];
    int port = corFreePort();
    pid_t pid;
    FILE* f;

    if (access("/usr/sbin/nginx", X_OK) != 0) {
        return 0;
    }
    snprintf(prefix, sizeof(prefix), "%s/nginx", server.dir);
    mkdir(prefix, 0755);
    /* Its workers run as nobody when the test is root: they must reach
     * the cache's folder through the test's own. */
    chmod(server.dir, 0755);
    snprintf(conf, sizeof(conf), "%s/nginx.conf", prefix);
    f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "daemon off;\nmaster_process on;\nworker_processes 1;\n"
            "pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\n"
            "http {\n  access_log off;\n"
            "  client_body_temp_path %s/t;\n  proxy_temp_path %s/t;\n"
            "  fastcgi_temp_path %s/t;\n  uwsgi_temp_path %s/t;\n"
            "  scgi_temp_path %s/t;\n"
            "  proxy_cache_path %s/cache keys_zone=edge:10m;\n"
            "  server {\n    listen 127.0.0.1:%d;\n    location / {\n"
            "      proxy_pass http://127.0.0.1:%d;\n"
            "      proxy_http_version 1.1;\n      proxy_cache edge;\n"
            "      proxy_cache_lock on;\n      proxy_cache_revalidate on;\n"
            "    }\n  }\n}\n",
            prefix, prefix, prefix, prefix, prefix, prefix, prefix, prefix,
            port, originPort);
    fclose(f);
    pid = spawn(
        (char* const[]){ "/usr/sbin/nginx", "-p", prefix, "-c", conf, NULL });
    return corWaitListening(port, pid, 20000) ? port : 0;
}

/* Varnish (its builtin VCL) on the origin, by PID (-F) in a folder of
 * the test's (-n); its port, or 0 where it is not installed. */
static int
varnishStart(void)
{
    char name[192];
    char listen[32];
    char backend[32];
    int port = corFreePort();
    pid_t pid;

    if (access("/usr/sbin/varnishd", X_OK) != 0) {
        return 0;
    }
    snprintf(name, sizeof(name), "%s/varnish", server.dir);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    snprintf(backend, sizeof(backend), "127.0.0.1:%d", originPort);
    pid = spawn((char* const[]){ "/usr/sbin/varnishd", "-F", "-n", name, "-a",
                                 listen, "-b", backend, "-s", "malloc,32m",
                                 NULL });
    return corWaitListening(port, pid, 30000) ? port : 0;
}

START_TEST(test_rfc9111_cases_beside_nginx_and_varnish)
{
    char caches[128];
    int nginx;
    int varnish;
    int rc;

    start("16MiB");
    nginx = nginxStart();
    varnish = varnishStart();
    snprintf(caches, sizeof(caches), "cor=%d", server.port);
    if (nginx > 0) {
        snprintf(caches + strlen(caches), sizeof(caches) - strlen(caches),
                 " nginx=%d", nginx);
    }
    if (varnish > 0) {
        snprintf(caches + strlen(caches), sizeof(caches) - strlen(caches),
                 " varnish=%d", varnish);
    }
    /* Debian's python3 by its path, as the origin: pyenv's shim, first
     * on a developer's PATH, runs a few shell scripts first (2 s here). */
    rc = sh("/usr/bin/python3 tests/integration/corCacheCompare.py %d %s 2>&1",
            originPort, caches);
    printf("%s", out);
    ck_assert_msg(rc == 0, "cor differs from RFC 9111:\n%s", out);
}
END_TEST

START_TEST(test_fifty_concurrent_misses_make_one_origin_request)
{
    long collapsed;
    long hits;

    start("16MiB");
    /* The origin takes 2 s: the fifty are all asking before it answers,
     * even when starting fifty curls takes a loaded machine a while. */
    sh("for i in $(seq 50); do curl -s "
       "'http://127.0.0.1:%d/c/fifty?cc=max-age=60&delay=2000' & done; wait",
       server.port);
    /* Every one of the fifty got the one answer. */
    ck_assert_msg(strstr(out, "n=2") == NULL, "%s", out);
    ck_assert_int_eq(originCount("/c/fifty?cc=max-age=60%26delay=2000"), 1);
    collapsed = edgeMetric("cor_cache_collapsed_total");
    hits = edgeMetric("cor_cache_hits_total");
    /* Those that came while it was fetched waited; any later, a hit. */
    ck_assert_int_gt(collapsed, 0);
    ck_assert_int_eq(hits, 49);
}
END_TEST

/* A reload while fifty misses wait for one fetch: the old generation
 * drains its waiters with the one answer, none hangs, none gets anything
 * but an answer of the origin's. A fetch in flight is its generation's
 * own (only what is stored is shared): those that reached the new one
 * before the answer was stored fetch once more there. */
START_TEST(test_a_reload_during_fifty_collapsed_misses)
{
    FILE* run;
    char line[256];
    int answered = 0;
    int right = 0;
    char command[512];

    start("16MiB");
    snprintf(command, sizeof(command),
             "for i in $(seq 50); do curl -s -m 30 "
             "'http://127.0.0.1:%d/c/reload?cc=max-age=60&delay=2000'"
             " & done; wait",
             server.port);
    run = popen(command, "r");
    ck_assert_ptr_nonnull(run);
    usleep(500 * 1000); /* some asking, the fetch under way */
    kill(server.pid, SIGHUP);
    while (fgets(line, sizeof(line), run) != NULL) {
        answered++;
        right += strcmp(line, "n=1 \n") == 0 || strcmp(line, "n=2 \n") == 0;
    }
    pclose(run);
    ck_assert_int_eq(answered, 50);
    ck_assert_int_eq(right, 50);
    ck_assert_int_le(originCount("/c/reload?cc=max-age=60%26delay=2000"), 2);
}
END_TEST

/* The client of a fetch leaves midway through a 20 MB body (it reads at
 * 200 KB/s and gives up after a second: more than the socket buffers
 * hold is still to send): the fetch goes on for the two that wait
 * (stream_waiters, the default), which get the whole body from the one
 * origin request; nothing of a cut answer is served. */
START_TEST(test_a_fetch_cut_midway_serves_no_one_a_part)
{
    start("512MiB");
    sh("curl -s -o /dev/null --limit-rate 200k -m 1 "
       "'http://127.0.0.1:%d/c/cut?cc=max-age=60&bytes=20000000' & "
       "sleep 0.3; "
       "for i in 1 2; do curl -s -o /dev/null -w '%%{size_download}\\n' "
       "'http://127.0.0.1:%d/c/cut?cc=max-age=60&bytes=20000000' & done; "
       "wait",
       server.port, server.port);
    ck_assert_str_eq(out, "20000000\n20000000\n");
    ck_assert_int_eq(originCount("/c/cut?cc=max-age=60%26bytes=20000000"), 1);
}
END_TEST

/* A fetch that cannot be stored (private): those that waited for it run
 * their own, and each gets its own answer. */
START_TEST(test_waiters_of_an_unstorable_answer_fetch_their_own)
{
    start("16MiB");
    sh("for i in $(seq 8); do curl -s "
       "'http://127.0.0.1:%d/c/priv?cc=private&delay=300' & done; wait",
       server.port);
    ck_assert_int_eq(originCount("/c/priv?cc=private%26delay=300"), 8);
}
END_TEST

/* A fetch that takes past the store's lock_timeout (300 ms): those that
 * waited for it leave and fetch their own, unstored; none hangs. */
START_TEST(test_waiters_give_up_after_the_lock_timeout)
{
    start("16MiB");
    sh("for i in 1 2 3; do curl -s "
       "'http://127.0.0.1:%d/b/slow?cc=max-age=60&delay=1500' & done; wait",
       server.port);
    ck_assert_msg(strstr(out, "n=1") && strstr(out, "n=2")
                      && strstr(out, "n=3"),
                  "%s", out);
    /* Waiting out the 1.5 s, the two would have had the first's stored
     * answer (one origin request); each left at 300 ms instead. */
    ck_assert_int_eq(originCount("/b/slow?cc=max-age=60%26delay=1500"), 3);
}
END_TEST

/* The static handler's file, cached: a change on disk is not seen until
 * it is purged; the hit over HTTP/2 and over cor:// too. */
START_TEST(test_any_handler_over_each_protocol)
{
    char path[256];
    char args[256];
    FILE* f;

    start("16MiB");
    snprintf(path, sizeof(path), "%s/page.txt", server.dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("first\n", f);
    fclose(f);
    sh("curl -s http://127.0.0.1:%d/s/page.txt", server.port);
    ck_assert_str_eq(out, "first\n");
    f = fopen(path, "w");
    fputs("second\n", f);
    fclose(f);
    sh("curl -s -D- http://127.0.0.1:%d/s/page.txt", server.port);
    ck_assert_msg(strstr(out, "first\n") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "Cache-Status: files; hit") != NULL, "%s", out);
    /* The route's header is said once: the core's, not a stored copy. */
    ck_assert_ptr_nonnull(strstr(out, "Cache-Control"));
    ck_assert_msg(strstr(strstr(out, "Cache-Control") + 1, "Cache-Control")
                      == NULL,
                  "%s", out);
    sh("curl -s --http2-prior-knowledge -D- http://127.0.0.1:%d/s/page.txt",
       server.port);
    ck_assert_msg(strstr(out, "first\n") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "cache-status: files; hit") != NULL, "%s", out);
    /* cor:// keys by its own host field: a miss, then a hit. */
    snprintf(args, sizeof(args), "cor://127.0.0.1:{PORT2}/c/cor?cc=max-age=60");
    ck_assert_int_eq(corRequestTool(&server, args, out, sizeof(out)), 0);
    ck_assert_int_eq(corRequestTool(&server, args, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "edge; hit") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "n=1") != NULL, "%s", out);
    /* The purge: the next is the file as it is now. */
    sh("curl -s -X PURGE http://127.0.0.1:%d/s/page.txt", server.port);
    ck_assert_str_eq(out, "purged 1\n");
    sh("curl -s http://127.0.0.1:%d/s/page.txt", server.port);
    ck_assert_str_eq(out, "second\n");
}
END_TEST

/* compress loaded before cache: the stored bytes are the compressed
 * ones, each encoding a variant (Vary: Accept-Encoding), so a hit costs
 * no compression and a client that takes none gets its own variant. */
START_TEST(test_each_encoding_is_a_variant)
{
    const char* url = "http://127.0.0.1:%d/c/z?cc=max-age=60&bytes=20000";
    char command[256];

    start("16MiB");
    snprintf(command, sizeof(command),
             "curl -s -o /dev/null -D- -H 'Accept-Encoding: gzip' '%s'", url);
    sh(command, server.port);
    ck_assert_msg(strstr(out, "Content-Encoding: gzip") != NULL, "%s", out);
    sh(command, server.port);
    ck_assert_msg(strstr(out, "Content-Encoding: gzip") != NULL
                      && strstr(out, "Cache-Status: edge; hit") != NULL,
                  "%s", out);
    snprintf(command, sizeof(command), "curl -s -o /dev/null -D- '%s'", url);
    sh(command, server.port);
    ck_assert_msg(strstr(out, "Content-Encoding") == NULL
                      && strstr(out, "Cache-Status: edge; fwd=uri-miss")
                             != NULL,
                  "%s", out);
    sh(command, server.port);
    ck_assert_msg(strstr(out, "Content-Encoding") == NULL
                      && strstr(out, "Cache-Status: edge; hit") != NULL
                      && strstr(out, "Content-Length: 20000") != NULL,
                  "%s", out);
    ck_assert_int_eq(originCount("/c/z?cc=max-age=60%26bytes=20000"), 2);
}
END_TEST

START_TEST(test_purge_a_url_and_a_prefix)
{
    start("16MiB");
    for (int i = 0; i < 3; i++) {
        sh("curl -s 'http://127.0.0.1:%d/c/p/%d?cc=max-age=60'", server.port,
           i);
    }
    sh("curl -s -X PURGE 'http://127.0.0.1:%d/c/p/0?cc=max-age=60'",
       server.port);
    ck_assert_str_eq(out, "purged 1\n");
    sh("curl -s -X PURGE 'http://127.0.0.1:%d/c/p/0?cc=max-age=60'",
       server.port);
    ck_assert_str_eq(out, "not in the cache\n");
    sh("curl -s -X PURGE 'http://127.0.0.1:%d/c/p/*'", server.port);
    ck_assert_str_eq(out, "purged 2\n");
    sh("curl -s 'http://127.0.0.1:%d/c/p/1?cc=max-age=60'", server.port);
    ck_assert_str_eq(out, "n=2 \n");
}
END_TEST

/* A store of 64 KiB (16 shards of 4 KiB): forty answers of 3000 bytes
 * push the least recently used out, and the bytes stay in the bound. */
START_TEST(test_the_memory_bound_evicts_the_least_recently_used)
{
    long bytes;

    start("64KiB");
    /* One shell for the forty, one after another: a shell of their own
     * each took 10 s of a loaded machine. */
    sh("for i in $(seq 0 39); do curl -s -o /dev/null "
       "\"http://127.0.0.1:%d/c/e/$i?cc=max-age=60&bytes=3000\"; done",
       server.port);
    bytes = edgeMetric("cor_cache_memory_bytes");
    ck_assert_int_gt(bytes, 0);
    ck_assert_int_le(bytes, 64 * 1024);
    ck_assert_int_gt(edgeMetric("cor_cache_evictions_total"), 0);
    /* Past what a shard holds: answered, never stored. */
    sh("curl -s -o /dev/null -D- 'http://127.0.0.1:%d/c/big?cc=max-age=60&"
       "bytes=9000'",
       server.port);
    sh("curl -s -o /dev/null -D- 'http://127.0.0.1:%d/c/big?cc=max-age=60&"
       "bytes=9000'",
       server.port);
    ck_assert_msg(strstr(out, "200 OK") != NULL, "%s", out);
    ck_assert_int_eq(originCount("/c/big?cc=max-age=60%26bytes=9000"), 2);
}
END_TEST

START_TEST(test_metrics_and_the_access_log_say_what_happened)
{
    start("16MiB");
    sh("curl -s 'http://127.0.0.1:%d/c/m?cc=max-age=60'", server.port);
    sh("curl -s 'http://127.0.0.1:%d/c/m?cc=max-age=60'", server.port);
    sh("curl -s 'http://127.0.0.1:%d/c/m2?cc=max-age=0&etag=a'", server.port);
    sh("curl -s 'http://127.0.0.1:%d/c/m2?cc=max-age=0&etag=a'", server.port);
    ck_assert_int_eq(edgeMetric("cor_cache_hits_total"), 1);
    ck_assert_int_eq(edgeMetric("cor_cache_misses_total"), 2);
    ck_assert_int_eq(edgeMetric("cor_cache_stale_total"), 1);
    ck_assert_int_eq(edgeMetric("cor_cache_revalidated_total"), 1);
    ck_assert_int_eq(edgeMetric("cor_cache_entries"), 2);
    /* The access log's lines are written as answers go out: waited for. */
    for (long deadline = corNowMs() + 10000; corNowMs() < deadline;) {
        sh("grep -c '\"cache\":\"' %s/access.log", server.dir);
        if (atoi(out) >= 4) {
            break;
        }
        usleep(50 * 1000);
    }
    sh("grep -o '\"cache\":\"[A-Z]*\"' %s/access.log | tr '\\n' ' '",
       server.dir);
    ck_assert_str_eq(out, "\"cache\":\"MISS\" \"cache\":\"HIT\" "
                          "\"cache\":\"MISS\" \"cache\":\"REVALIDATED\" ");
}
END_TEST

START_TEST(test_cor_t_reports_mistakes)
{
    const char* bin = getenv("COR_BIN") ? getenv("COR_BIN") : "build/cor";
    const char* yaml =
        "listen:\n"
        "  - { protocol: http, address: 127.0.0.1:1 }\n"
        "modules:\n"
        "  - { load: http }\n"
        "  - { load: hello }\n"
        "  - load: cache\n"
        "    stores: [ { name: edge, size: 1GiB } ]\n"
        "routes:\n"
        "  - { match: \"GET /a\", handler: hello, cache: egde }\n";
    char path[256];
    FILE* f;

    start("16MiB");
    snprintf(path, sizeof(path), "%s/bad.yaml", server.dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(yaml, f);
    fclose(f);
    ck_assert_int_eq(sh("%s -t -c %s 2>&1", bin, path), 1);
    ck_assert_msg(strstr(out, "bad.yaml:7:") != NULL
                      && strstr(out, "disk store") != NULL,
                  "%s", out);
}
END_TEST

COR_TEST_SUITE(corCache)
{
    tcase_add_unchecked_fixture(tc, originStart, originStop);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_rfc9111_cases_beside_nginx_and_varnish);
    tcase_add_test(tc, test_fifty_concurrent_misses_make_one_origin_request);
    tcase_add_test(tc, test_a_reload_during_fifty_collapsed_misses);
    tcase_add_test(tc, test_waiters_of_an_unstorable_answer_fetch_their_own);
    tcase_add_test(tc, test_a_fetch_cut_midway_serves_no_one_a_part);
    tcase_add_test(tc, test_waiters_give_up_after_the_lock_timeout);
    tcase_add_test(tc, test_any_handler_over_each_protocol);
    tcase_add_test(tc, test_each_encoding_is_a_variant);
    tcase_add_test(tc, test_purge_a_url_and_a_prefix);
    tcase_add_test(tc, test_the_memory_bound_evicts_the_least_recently_used);
    tcase_add_test(tc, test_metrics_and_the_access_log_say_what_happened);
    tcase_add_test(tc, test_cor_t_reports_mistakes);
}
