/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A memory-only store across reloads, against the real binary: what one
 * generation stored is a hit in the next (no origin request); an answer
 * the old generation is still sending when the new one evicts its entry
 * under pressure arrives whole (the entry's memory is the old one's
 * until it is sent); a generation SIGKILLed under hits leaves a zone the
 * next one stores in past its memory, evicting (no reference of the dead
 * one's holds memory). One origin (corCacheOrigin.py) for the program.
 */
#include "corTest.h"
#include "corServer.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static pid_t origin;
static int originPort;
static char out[1 << 16];

static void
originStart(void)
{
    char port[16];

    originPort = corFreePort();
    snprintf(port, sizeof(port), "%d", originPort);
    origin = corTestFork(SIGKILL);
    if (origin == 0) {
        int null = open("/dev/null", O_WRONLY);

        dup2(null, 1);
        execl("/usr/bin/python3", "/usr/bin/python3",
              "tests/integration/corCacheOrigin.py", port, (char*)NULL);
        _exit(127);
    }
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
tearDown(void)
{
    corServerStop(&server);
}

/* cor with the origin cached under /c in a memory-only store. */
static void
start(const char* memory)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 4\n"
             "  stop_timeout: 60s\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT}, http2: on }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: forward\n"
             "    upstreams:\n"
             "      - { name: origin, servers: [ \"http://127.0.0.1:%d\" ] }\n"
             "  - load: cache\n"
             "    stores:\n"
             "      - { name: edge, memory: %s }\n"
             "routes:\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "  - { match: \"/c/*\", handler: origin, cache: edge }\n"
             "log:\n"
             "  pid_file: {DIR}/cor.pid\n",
             originPort, memory);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

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

static long
originCount(const char* target)
{
    sh("curl -s 'http://127.0.0.1:%d/count?t=%s'", originPort, target);
    return atol(out);
}

static long
edgeMetric(const char* family)
{
    char name[128];

    snprintf(name, sizeof(name), "%s{cache=\"edge\"}", family);
    return corMetric(server.port, name);
}

/* cor -s reload: back once the new generation serves. */
static void
reload(void)
{
    ck_assert_int_eq(sh("%s -s reload -c %s 2>&1",
                        getenv("COR_BIN") ? getenv("COR_BIN") : "build/cor",
                        server.config),
                     0);
}

/* GET target's head and body into out; its Cache-Status there. */
static void
get(const char* target)
{
    sh("curl -s -D- 'http://127.0.0.1:%d%s'", server.port, target);
}

START_TEST(test_a_stored_answer_is_a_hit_after_a_reload)
{
    start("4MiB");
    get("/c/kept?cc=max-age=600");
    ck_assert_msg(strstr(out, "edge; fwd=uri-miss; stored") != NULL, "%s", out);
    reload();
    get("/c/kept?cc=max-age=600");
    ck_assert_msg(strstr(out, "edge; hit") != NULL, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "n=1 "));
    ck_assert_int_eq(originCount("/c/kept?cc=max-age=600"), 1);
}
END_TEST

/* Whether path holds len bytes of the origin's body of its first
 * answer to a request with no Accept-Language ("n=1 \n" again). */
static bool
bodyWhole(const char* path, long len)
{
    FILE* f = fopen(path, "rb");
    const char* unit = "n=1 \n";
    long at = 0;
    int c;

    ck_assert_ptr_nonnull(f);
    while ((c = fgetc(f)) != EOF && c == unit[at % 5]) {
        at++;
    }
    fclose(f);
    return c == EOF && at == len;
}

/* An answer of 900 000 bytes that the old generation sends to an HTTP/2
 * client holding it to one flow-control window (h2slow.py) while the
 * reload comes and the new generation stores 36 MB through the 16 MiB
 * (a shard's part 1 MiB), evicting its entry: the rest is sent after,
 * from the entry's memory, which no process freed or reused meanwhile. */
START_TEST(test_an_answer_in_flight_across_a_reload_arrives_whole)
{
    char body[256];
    char go[256];
    char line[128];
    FILE* slow;
    long filled;

    start("16MiB");
    snprintf(body, sizeof(body), "%s/slow.body", server.dir);
    snprintf(go, sizeof(go), "%s/slow.go", server.dir);
    get("/c/slow?cc=max-age=600&bytes=900000");
    ck_assert_int_eq(originCount("/c/slow?cc=max-age=600%26bytes=900000"), 1);
    snprintf(out, sizeof(out),
             "/usr/bin/python3 tests/integration/h2slow.py %d "
             "'/c/slow?cc=max-age=600&bytes=900000' %s %s",
             server.port, body, go);
    slow = popen(out, "r");
    ck_assert_ptr_nonnull(slow);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), slow));
    ck_assert_str_eq(line, "held\n");
    reload();
    /* Another body ("n=1 zz"), so that memory reused would show; ten at
     * a time until the held one's entry is evicted (only-if-cached: a
     * 504, nothing fetched), which one of them in its shard does. */
    sh("for b in $(seq 12); do for i in $(seq 10); do curl -s -o /dev/null "
       "-H 'Accept-Language: zz' "
       "\"http://127.0.0.1:%d/c/fill/$b/$i?cc=max-age=600&bytes=900000\"; "
       "done; curl -s -o /dev/null -w '%%{http_code}' -H "
       "'Cache-Control: only-if-cached' "
       "'http://127.0.0.1:%d/c/slow?cc=max-age=600&bytes=900000' "
       "| grep -q 504 && break; done",
       server.port, server.port);
    filled = corNowMs();
    ck_assert_int_gt(edgeMetric("cor_cache_evictions_total"), 0);
    ck_assert_int_le(edgeMetric("cor_cache_memory_bytes"), 16 << 20);
    /* Evicted: asked of the origin again. */
    get("/c/slow?cc=max-age=600&bytes=900000");
    ck_assert_int_eq(originCount("/c/slow?cc=max-age=600%26bytes=900000"), 2);
    close(open(go, O_CREAT | O_WRONLY, 0644));
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), slow));
    pclose(slow);
    ck_assert_str_eq(line, "done 200 900000\n");
    ck_assert_msg(bodyWhole(body, 900000), "the held answer is not whole");
    printf("the held answer ended %ld ms after the fill\n",
           corNowMs() - filled);
}
END_TEST

START_TEST(test_a_generation_killed_under_hits_leaves_a_usable_zone)
{
    char config[256];
    char command[512];
    pid_t killed;
    pid_t next = -1;
    FILE* run;
    FILE* f;
    long evictions;

    start("4MiB");
    /* 20 answers of 50 000 bytes: 1 MB of the 4 MiB, a shard's part
     * 256 KiB. */
    sh("for i in $(seq 20); do curl -s -o /dev/null "
       "\"http://127.0.0.1:%d/c/k/$i?cc=max-age=600&bytes=50000\"; done",
       server.port);
    snprintf(config, sizeof(config), "%s/hits.curl", server.dir);
    f = fopen(config, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 400; i++) {
        fprintf(f,
                "url = \"http://127.0.0.1:%d/c/k/%d?cc=max-age=600&"
                "bytes=50000\"\noutput = /dev/null\n",
                server.port, i % 20 + 1);
    }
    fclose(f);
    snprintf(command, sizeof(command),
             "curl -s -m 20 -Z --parallel-max 16 --limit-rate 2M -K %s "
             "2>/dev/null",
             config);
    run = popen(command, "r");
    ck_assert_ptr_nonnull(run);
    killed = corServerGeneration(&server);
    ck_assert_int_gt(killed, 0);
    usleep(300 * 1000); /* the hits under way */
    kill(killed, SIGKILL);
    pclose(run);
    for (long deadline = corNowMs() + 20000; corNowMs() < deadline;) {
        next = corServerGeneration(&server);
        if (next > 0 && next != killed
            && sh("curl -s -o /dev/null -w '%%{http_code}' "
                  "'http://127.0.0.1:%d/metrics'",
                  server.port)
                   == 0
            && strcmp(out, "200") == 0) {
            break;
        }
        usleep(20 * 1000);
    }
    ck_assert_msg(next > 0 && next != killed, "no generation after the kill");
    /* What the dead one stored is a hit in the next. */
    get("/c/k/1?cc=max-age=600&bytes=50000");
    ck_assert_msg(strstr(out, "edge; hit") != NULL, "%.300s", out);
    ck_assert_int_eq(originCount("/c/k/1?cc=max-age=600%26bytes=50000"), 1);
    /* 120 answers of 50 000 bytes through 4 MiB: evicted as they come,
     * and the last ones are hits (nothing the dead one held stops it). */
    sh("for i in $(seq 120); do curl -s -o /dev/null "
       "\"http://127.0.0.1:%d/c/more/$i?cc=max-age=600&bytes=50000\"; done",
       server.port);
    evictions = edgeMetric("cor_cache_evictions_total");
    ck_assert_int_gt(evictions, 20);
    ck_assert_int_le(edgeMetric("cor_cache_memory_bytes"), 4 << 20);
    get("/c/more/120?cc=max-age=600&bytes=50000");
    ck_assert_msg(strstr(out, "edge; hit") != NULL, "%.300s", out);
    ck_assert_int_eq(originCount("/c/more/120?cc=max-age=600%26bytes=50000"),
                     1);
}
END_TEST

COR_TEST_SUITE(corCacheMem)
{
    tcase_add_unchecked_fixture(tc, originStart, originStop);
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_a_stored_answer_is_a_hit_after_a_reload);
    tcase_add_test(tc, test_an_answer_in_flight_across_a_reload_arrives_whole);
    tcase_add_test(tc,
                   test_a_generation_killed_under_hits_leaves_a_usable_zone);
}
