/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collapsed waiters answered as the fetch's body comes (corCacheStream.c),
 * against the real binary: an origin (corCacheStreamOrigin.py) sends the
 * first half of a large body and holds the rest until the test lets it
 * go, so that what each waiter received before the rest left the origin
 * is measured; a body cut mid-way cuts every waiter's answer and is not
 * stored; a waiter that reads slowly holds neither the first client nor
 * the others. The origin and cor start once for the program; each case
 * has a key of its own.
 */
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAITERS 20

static CorServer server;
static pid_t origin;
static int originPort;
static char gates[64]; /* the origin's gates, the clients' bodies */
static char out[1 << 16];

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

static const char* yamlFormat =
    "runtime:\n"
    "  loops: 2\n"
    "  workers: 4\n"
    "  coroutines: { enabled: {COROUTINES} }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - load: forward\n"
    "    upstreams:\n"
    "      - { name: origin, servers: [ \"http://127.0.0.1:%d\" ] }\n"
    "  - load: cache\n"
    "    stores:\n"
    "      - { name: edge, memory: 512MiB, lock_timeout: 60s,\n"
    "          stream_waiters: on }\n"
    "routes:\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "  - { match: \"/*\", handler: origin, cache: edge }\n"
    "log:\n"
    "  pid_file: {DIR}/cor.pid\n";

/* The origin and cor, once for the program (python3's start takes
 * seconds on a loaded machine). */
static void
peersStart(void)
{
    char port[16];
    char yaml[2048];

    strcpy(gates, "/tmp/corCacheStreamXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(gates));
    originPort = corFreePort();
    snprintf(port, sizeof(port), "%d", originPort);
    origin = corTestFork(SIGKILL);
    if (origin == 0) {
        execl("/usr/bin/python3", "python3",
              "tests/integration/corCacheStreamOrigin.py", port, gates,
              (char*)NULL);
        _exit(127);
    }
    for (long deadline = corNowMs() + 60000;; usleep(20 * 1000)) {
        int fd = corConnect(originPort);

        if (fd >= 0) {
            close(fd);
            break;
        }
        ck_assert_msg(corNowMs() < deadline, "the origin did not start");
    }
    snprintf(yaml, sizeof(yaml), yamlFormat, originPort);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
peersStop(void)
{
    corServerStop(&server);
    kill(origin, SIGTERM);
    waitpid(origin, NULL, 0);
    sh("rm -rf %s", gates);
}

/* A gate of the origin's for name: "head", "rest". */
static void
gateOpen(const char* name, const char* gate)
{
    sh("touch %s/%s.%s", gates, name, gate);
}

/* Until path exists, at most 30 s. */
static void
untilExists(const char* name, const char* what)
{
    char path[160];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s.%s", gates, name, what);
    for (long deadline = corNowMs() + 30000; stat(path, &st) != 0;
         usleep(2000)) {
        ck_assert_msg(corNowMs() < deadline, "%s never came", path);
    }
}

/* A client of GET /name?query into gates/name.I, reading at most rate
 * bytes a second (curl's --limit-rate; NULL: no limit): its process. */
static pid_t
clientStart(const char* name, const char* query, int i, const char* rate)
{
    char url[256];
    char file[160];
    pid_t pid;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s?%s", server.port, name,
             query);
    snprintf(file, sizeof(file), "%s/%s.%d", gates, name, i);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (rate != NULL) {
            execlp("curl", "curl", "-s", "-m", "60", "--limit-rate", rate, "-o",
                   file, url, (char*)NULL);
        } else {
            execlp("curl", "curl", "-s", "-m", "60", "-o", file, url,
                   (char*)NULL);
        }
        _exit(127);
    }
    return pid;
}

/* The bytes client i of name received so far. */
static long
received(const char* name, int i)
{
    char file[160];
    struct stat st;

    snprintf(file, sizeof(file), "%s/%s.%d", gates, name, i);
    return stat(file, &st) == 0 ? (long)st.st_size : 0;
}

/* curl's exit status of pid. */
static int
clientExit(pid_t pid)
{
    int status;

    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static long
collapsed(void)
{
    return corMetric(server.port, "cor_cache_collapsed_total{cache=\"edge\"}");
}

static long
originCount(const char* name)
{
    sh("curl -s 'http://127.0.0.1:%d/count?t=%s'", originPort, name);
    return atol(out);
}

/* The first client of name asks (the fetch), then waiters more, which
 * wait for its head (collapsed), the last at slowRate (or NULL): their
 * processes into pids. */
static void
clientsStart(const char* name, const char* query, int waiters, pid_t* pids,
             const char* slowRate)
{
    long before = collapsed();

    pids[0] = clientStart(name, query, 0, NULL);
    untilExists(name, "asked");
    for (int i = 1; i <= waiters; i++) {
        pids[i] = clientStart(name, query, i, i == waiters ? slowRate : NULL);
    }
    for (long deadline = corNowMs() + 30000; collapsed() < before + waiters;
         usleep(5000)) {
        ck_assert_msg(corNowMs() < deadline, "the waiters did not collapse");
    }
}

/* Until each of clients 0..count-1 of name received half bytes (less
 * the forward's read piece, 16 KiB, which it passes on whole: the first
 * client lacks it too), at most 20 s; how long the last took, in ms. */
static long
untilEachHas(const char* name, int count, long half)
{
    long start = corNowMs();
    long last = 0;

    half -= 16384;
    for (int i = 0; i < count; i++) {
        while (received(name, i) < half) {
            ck_assert_msg(corNowMs() < start + 20000,
                          "client %d of %s had %ld of the first %ld bytes "
                          "after 20 s, the rest held back",
                          i, name, received(name, i), half);
            usleep(1000);
        }
        last = corNowMs() - start;
    }
    return last;
}

/* Whether client i's body of name is the origin's whole one of bytes
 * ("0123456789" over and over), read here: no shell for 20 files. */
static bool
bodyWhole(const char* name, int i, long bytes)
{
    char file[160];
    char buf[65536];
    FILE* f;
    long at = 0;
    size_t n;

    snprintf(file, sizeof(file), "%s/%s.%d", gates, name, i);
    f = fopen(file, "rb");
    if (f == NULL) {
        return false;
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        for (size_t k = 0; k < n; k++, at++) {
            if (buf[k] != (char)('0' + at % 10)) {
                fclose(f);
                return false;
            }
        }
    }
    fclose(f);
    return at == bytes;
}

/* Twenty waiters of a 4 MB answer each have its first half while the
 * origin holds the rest (today's: not one byte until it is whole), and
 * then the whole; the origin was asked once. */
START_TEST(test_waiters_receive_the_body_as_it_comes)
{
    const long bytes = 4000000;
    pid_t pids[WAITERS + 1];
    long took;

    clientsStart("s1", "bytes=4000000", WAITERS, pids, NULL);
    gateOpen("s1", "head");
    took = untilEachHas("s1", WAITERS + 1, bytes / 2);
    fprintf(stderr,
            "stream: %d waiters and the first client each had the first "
            "%ld bytes (less 16 KiB) %ld ms after the origin sent them, the "
            "rest held\n",
            WAITERS, bytes / 2, took);
    gateOpen("s1", "rest");
    for (int i = 0; i <= WAITERS; i++) {
        ck_assert_int_eq(clientExit(pids[i]), 0);
        ck_assert_msg(bodyWhole("s1", i, bytes), "client %d: not the body", i);
    }
    ck_assert_int_eq(originCount("s1"), 1);
}
END_TEST

/* The origin cuts the body after its first half: the first client and
 * every waiter get a cut answer (curl: 18, a partial file), and nothing
 * is stored (the next request asks the origin). */
START_TEST(test_a_cut_body_cuts_every_waiter_and_is_not_stored)
{
    const long bytes = 1000000;
    pid_t pids[WAITERS + 1];

    clientsStart("s2", "bytes=1000000&cut=1", WAITERS, pids, NULL);
    gateOpen("s2", "head");
    untilEachHas("s2", WAITERS + 1, bytes / 2);
    gateOpen("s2", "rest");
    for (int i = 0; i <= WAITERS; i++) {
        ck_assert_int_eq(clientExit(pids[i]), 18);
    }
    ck_assert_int_eq(originCount("s2"), 1);
    pids[0] = clientStart("s2", "bytes=1000000&cut=1", 0, NULL);
    clientExit(pids[0]);
    ck_assert_int_eq(originCount("s2"), 2);
}
END_TEST

/* The fetch's own client leaves midway: its handler goes on (its answer
 * is the waiters' too), so the waiters get the whole body, it is stored,
 * and the origin was asked once (on a stream that is not kept the
 * handler is cancelled and the waiters are cut: curl 18). */
START_TEST(test_the_first_client_leaving_holds_nobody)
{
    const long bytes = 4000000;
    const int waiters = 5;
    pid_t pids[6];

    clientsStart("s4", "bytes=4000000", waiters, pids, NULL);
    gateOpen("s4", "head");
    untilEachHas("s4", waiters + 1, bytes / 2);
    kill(pids[0], SIGKILL);
    clientExit(pids[0]);
    gateOpen("s4", "rest");
    for (int i = 1; i <= waiters; i++) {
        ck_assert_int_eq(clientExit(pids[i]), 0);
        ck_assert_msg(bodyWhole("s4", i, bytes), "client %d: not the body", i);
    }
    pids[0] = clientStart("s4", "bytes=4000000", 0, NULL);
    ck_assert_int_eq(clientExit(pids[0]), 0);
    ck_assert(bodyWhole("s4", 0, bytes));
    ck_assert_int_eq(originCount("s4"), 1);
}
END_TEST

/* A waiter that reads at 50 kB/s holds neither the first client nor the
 * other waiters of a 16 MB answer: they end while it has had less than
 * half of it. */
START_TEST(test_a_slow_waiter_holds_nobody)
{
    const long bytes = 16000000;
    const int waiters = 5;
    pid_t pids[6];
    long start;
    long slow;

    clientsStart("s3", "bytes=16000000", waiters, pids, "50k");
    start = corNowMs();
    gateOpen("s3", "head");
    gateOpen("s3", "rest");
    for (int i = 0; i < waiters; i++) {
        ck_assert_int_eq(clientExit(pids[i]), 0);
        ck_assert_msg(bodyWhole("s3", i, bytes), "client %d: not the body", i);
    }
    slow = received("s3", waiters);
    fprintf(stderr,
            "stream: the first client and %d waiters had all %ld bytes in "
            "%ld ms; the slow waiter (50 kB/s) had %ld\n",
            waiters - 1, bytes, corNowMs() - start, slow);
    ck_assert_int_lt(slow, bytes / 2);
    kill(pids[waiters], SIGTERM);
    clientExit(pids[waiters]);
}
END_TEST

/* Several ranges of a stored answer: one multipart/byteranges 206 (RFC
 * 9110 14.6), each part its type and Content-Range, its length said;
 * the first request, a miss, is answered whole. */
START_TEST(test_several_ranges_of_a_stored_answer)
{
    char expect[1024];
    char boundary[80];
    const char* at;
    int n;

    gateOpen("r1", "head");
    gateOpen("r1", "rest");
    sh("curl -s -o /dev/null -w '%%{http_code}' -r 0-9,100-109,-5 "
       "'http://127.0.0.1:%d/r1?bytes=1000'",
       server.port);
    ck_assert_str_eq(out, "200");
    sh("curl -s -D %s/r1.head -o %s/r1.body -r 0-9,100-109,-5 "
       "-w '%%{http_code} %%{size_download}' "
       "'http://127.0.0.1:%d/r1?bytes=1000'; echo; "
       "grep -i '^content-type:' %s/r1.head; "
       "grep -i '^content-length:' %s/r1.head",
       gates, gates, server.port, gates, gates);
    at = strstr(out, "boundary=");
    ck_assert_msg(strncmp(out, "206 ", 4) == 0 && at != NULL,
                  "not a multipart 206: %s", out);
    n = (int)strcspn(at + 9, "\r\n");
    snprintf(boundary, sizeof(boundary), "%.*s", n, at + 9);
    n = snprintf(expect, sizeof(expect),
                 "\r\n--%s\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Range: bytes 0-9/1000\r\n\r\n0123456789"
                 "\r\n--%s\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Range: bytes 100-109/1000\r\n\r\n0123456789"
                 "\r\n--%s\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Range: bytes 995-999/1000\r\n\r\n56789"
                 "\r\n--%s--\r\n",
                 boundary, boundary, boundary, boundary);
    ck_assert_msg(strstr(out, "ength:") != NULL, "no length: %s", out);
    ck_assert_int_eq(atoi(strstr(out, "ength:") + 6), n);
    sh("cat %s/r1.body", gates);
    ck_assert_str_eq(out, expect);
    ck_assert_int_eq(originCount("r1"), 1);
}
END_TEST

COR_TEST_SUITE(corCacheStream)
{
    tcase_add_unchecked_fixture(tc, peersStart, peersStop);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_waiters_receive_the_body_as_it_comes);
    tcase_add_test(tc, test_a_cut_body_cuts_every_waiter_and_is_not_stored);
    tcase_add_test(tc, test_a_slow_waiter_holds_nobody);
    tcase_add_test(tc, test_the_first_client_leaving_holds_nobody);
    tcase_add_test(tc, test_several_ranges_of_a_stored_answer);
}
