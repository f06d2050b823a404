/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache's disk store against the real binary, apart from corCacheTest
 * (no nginx, no Varnish: the origin, corCacheOrigin.py, started once for
 * the program): answers found again on disk once memory let them go,
 * after a reload and after a restart (the scan at start holds up no
 * request), a range and HTTP/2 of a file sent by sendfile; a corrupt or
 * cut file, the store's folder removed under a running server and a disk
 * that takes no more (a file size limit, and a tmpfs in a mount namespace
 * of the server's own) each a miss and a right answer, never a wrong one;
 * answers streamed to their files as they come (past 64 MiB, read by
 * collapsed waiters from the file, cut or too large leaving nothing),
 * several ranges of a file as a multipart stream; the size bound; a reload
 * during fifty collapsed misses of an answer kept on disk alone; the
 * index kept across a reload (no scan) and across a generation killed
 * under load, repaired after a process killed holding its locks, fresh
 * when the store's size changes; its LRU order across a restart.
 */
#include "corTest.h"
#include "corServer.h"

#include "../../modules/cache/corCacheIndexZone.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static pid_t origin;
static int originPort;
static char store[64]; /* the store's folder: outlives a server */
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

/* The origin, once for the program (python3's start takes seconds on a
 * loaded machine). */
static void
originStart(void)
{
    char port[16];

    originPort = corFreePort();
    snprintf(port, sizeof(port), "%d", originPort);
    origin = corTestFork(SIGKILL);
    if (origin == 0) {
        execl("/usr/bin/python3", "python3",
              "tests/integration/corCacheOrigin.py", port, (char*)NULL);
        _exit(127);
    }
    for (long deadline = corNowMs() + 60000; corNowMs() < deadline;) {
        int fd = corConnect(originPort);

        if (fd >= 0) {
            close(fd);
            return;
        }
        usleep(20 * 1000);
    }
    ck_abort_msg("the origin did not start");
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
    strcpy(store, "/tmp/corCacheDiskXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(store));
}

static void
tearDown(void)
{
    corServerStop(&server);
    sh("rm -rf %s", store);
}

static const char* yamlFormat =
    "runtime:\n"
    "  loops: 2\n"
    "  workers: 4\n"
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
    "      - { name: edge, path: %s, size: %s, memory: 64KiB,\n"
    "          lock_timeout: 20s }\n"
    "routes:\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "  - { match: \"/c/*\", handler: origin, cache: edge }\n"
    "log:\n"
    "  pid_file: {DIR}/cor.pid\n";

/* cor with the origin under /c, cached in a store of 64 KiB of memory
 * (4 KiB a shard: what is bigger is on disk alone) and size on disk in
 * the test's folder; child (or NULL) runs in its process first. */
static void
start(const char* size, CorServerChildFn child)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml), yamlFormat, originPort, store, size);
    ck_assert_int_eq(corServerStartChild(&server, yaml, child, NULL), 0);
}

static long
metric(const char* family)
{
    char name[128];

    snprintf(name, sizeof(name), "%s{cache=\"edge\"}", family);
    return corMetric(server.port, name);
}

static long
originCount(const char* target)
{
    sh("curl -s 'http://127.0.0.1:%d/count?t=%s'", originPort, target);
    return atol(out);
}

/* Whether GET path's body is the origin's n-th answer of bytes bytes
 * ("n=N \n" again and again), curl's extra args before it; its
 * Cache-Status into out. The host is the same whatever the port (it is
 * in the key): a restart's server has another. */
static bool
answerIs(const char* args, const char* path, int n, long bytes)
{
    sh("a=$(curl -s -H 'Host: cache.test' %s -D %s/head "
       "'http://127.0.0.1:%d%s' | md5sum); "
       "b=$(yes 'n=%d ' | head -c %ld | md5sum); "
       "[ \"$a\" = \"$b\" ] && echo same; grep -i '^cache-status' %s/head",
       args, server.dir, server.port, path, n, bytes, server.dir);
    if (strncmp(out, "same\n", 5) != 0) {
        fprintf(stderr, "%s: not the answer n=%d: %s\n", path, n, out);
        return false;
    }
    return true;
}

/* Until family's value is count or more, at most 10 s; else the store's
 * files and the log, and why. */
static void
metricReach(const char* family, long count, const char* why)
{
    for (long deadline = corNowMs() + 10000; metric(family) < count;) {
        if (corNowMs() >= deadline) {
            sh("ls -la %s", store);
            fprintf(stderr, "%s", out);
            corServerLogPrint(&server);
            ck_abort_msg("%s", why);
        }
        usleep(20 * 1000);
    }
}

/* Until the scan at start put count files in the index. */
static void
scanned(long count)
{
    metricReach("cor_cache_disk_entries", count, "the scan did not end");
}

/* Until the file of the answer just fetched is written (off the loop). */
static void
written(long count)
{
    scanned(count);
}

/* cor -s reload: back once the new generation serves and the old one
 * takes no more. */
static void
reload(void)
{
    ck_assert_int_eq(sh("%s -s reload -c %s 2>&1",
                        getenv("COR_BIN") ? getenv("COR_BIN") : "build/cor",
                        server.config),
                     0);
}

/* An answer of 300 000 bytes, too big for memory, its path each test's
 * own (the origin counts each path across the program). */
#define BIG(name) "/c/" name "?cc=max-age=600&bytes=300000"
#define BIG_COUNT(name) "/c/" name "?cc=max-age=600%26bytes=300000"

START_TEST(test_answers_come_back_from_disk_after_a_reload_and_a_restart)
{
    long t0;

    start("8MiB", NULL);
    ck_assert(answerIs("", BIG("back"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss; stored"));
    written(1);
    /* Past memory's part for a shard: sent from its file. */
    ck_assert(answerIs("", BIG("back"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert(answerIs("--http2-prior-knowledge", BIG("back"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert_int_eq(corCurl(server.port, "-H 'Host: cache.test' -r 10-19",
                             BIG("back"), out, sizeof(out)),
                     0);
    ck_assert_str_eq(out, "n=1 \nn=1 \n");
    ck_assert_int_ge(metric("cor_cache_disk_bytes"), 300000);
    ck_assert_int_eq(originCount(BIG_COUNT("back")), 1);

    /* A reload: the new generation finds the file (the index the old
     * one left it). */
    reload();
    scanned(1);
    ck_assert(answerIs("", BIG("back"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));

    /* A restart: the first request is answered at once, the scan beside
     * it; then the file is a hit again. */
    corServerStop(&server);
    start("8MiB", NULL);
    t0 = corNowMs();
    ck_assert(answerIs("", "/c/first?cc=max-age=600", 1, 5));
    ck_assert_int_lt(corNowMs() - t0, 2000);
    scanned(2);
    ck_assert(answerIs("", BIG("back"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert_int_eq(originCount(BIG_COUNT("back")), 1);
    /* The stop saved the index's order, the scan took it up. */
    for (long deadline = corNowMs() + 10000;
         corServerLogCount(&server, "order of 1 files as the last stop") < 1;) {
        ck_assert_msg(corNowMs() < deadline, "the order was not taken up");
        usleep(20 * 1000);
    }
}
END_TEST

/* The file of BIG in the store's folder, into out. */
static void
bigFile(void)
{
    sh("ls -S %s | head -1", store);
    out[strcspn(out, "\n")] = '\0';
}

START_TEST(test_a_corrupt_or_cut_file_is_a_miss)
{
    start("8MiB", NULL);
    ck_assert(answerIs("", BIG("corrupt"), 1, 300000));
    written(1);
    bigFile();
    /* A byte of its head flipped, under the running server. */
    ck_assert_int_eq(sh("printf X | dd of=%s/%s bs=1 seek=150 conv=notrunc "
                        "2>/dev/null",
                        store, out),
                     0);
    ck_assert(answerIs("", BIG("corrupt"), 2, 300000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss; stored"));
    written(1);
    /* Cut short. */
    bigFile();
    ck_assert_int_eq(sh("truncate -s 200000 %s/%s", store, out), 0);
    ck_assert(answerIs("", BIG("corrupt"), 3, 300000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss"));
    ck_assert_int_ge(metric("cor_cache_disk_errors_total"), 2);
    written(1);
    ck_assert(answerIs("", BIG("corrupt"), 3, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    /* A POST's success takes the file out too (RFC 9111 4.4). */
    sh("curl -s -o /dev/null -w '%%{http_code}' -H 'Host: cache.test' -X POST "
       "'http://127.0.0.1:%d%s'",
       server.port, BIG("corrupt"));
    ck_assert_str_eq(out, "204");
    ck_assert_int_eq(metric("cor_cache_disk_entries"), 0);
    ck_assert(answerIs("", BIG("corrupt"), 4, 300000));
}
END_TEST

/* Until the disk errors counted reach count, at most 10 s. */
static void
errorsReach(long count)
{
    for (long deadline = corNowMs() + 10000;
         metric("cor_cache_disk_errors_total") < count;) {
        ck_assert_msg(corNowMs() < deadline, "no disk error counted");
        usleep(20 * 1000);
    }
}

/* Removed, the folder is not made again (it may be a mount taken away
 * on purpose, the disk under it not the store's): answers are served,
 * not stored, and it is said once; once it is back, files are written
 * there again. */
START_TEST(test_the_folder_removed_under_a_running_server)
{
    start("8MiB", NULL);
    ck_assert(answerIs("", BIG("removed"), 1, 300000));
    written(1);
    sh("rm -rf %s", store);
    ck_assert(answerIs("", BIG("removed"), 2, 300000));
    ck_assert(answerIs("", BIG("removed"), 3, 300000));
    /* Its file found gone, and two writes that found no folder. */
    errorsReach(3);
    ck_assert_int_eq(access(store, F_OK), -1);
    ck_assert_int_eq(corServerLogCount(&server, "is gone"), 1);
    ck_assert_int_eq(mkdir(store, 0700), 0);
    ck_assert(answerIs("", BIG("removed"), 4, 300000));
    written(1);
    ck_assert(answerIs("", BIG("removed"), 4, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert_int_eq(corServerLogCount(&server, "is back"), 1);
    ck_assert_int_eq(originCount(BIG_COUNT("removed")), 4);
}
END_TEST

/* Whether the store's folder holds no temporary file within 10 s (each
 * writer done with what it was given). */
static bool
noTemporary(const char* folder)
{
    for (long deadline = corNowMs() + 10000; corNowMs() < deadline;
         usleep(20 * 1000)) {
        sh("ls -A %s | grep -c '^.tmp-'", folder);
        if (atoi(out) == 0) {
            return true;
        }
    }
    fprintf(stderr, "%s: a temporary file stays\n", folder);
    return false;
}

/* An answer past the 64 MiB the store once buffered whole (not stored
 * then): streamed to its file as it comes, memory holding only what the
 * file lacks yet, then a hit from its file, then validated: fetched
 * whole again rather than read into memory for a 304's refresh. The
 * generation's peak grew by the whole buffer before (at least 64 MiB); a
 * sanitizer's quarantine keeps what was freed, so there it is not judged. */
START_TEST(test_an_answer_past_64_MiB_is_streamed_to_its_file)
{
    const char* sanitized = getenv("COR_TEST_SANITIZED");
    const char* path = "/c/huge?cc=max-age=600&etag=h&bytes=80000000";
    pid_t gen;
    long before;
    long after;

    start("2GiB", NULL);
    gen = corServerGeneration(&server);
    before = corProcStatusKb(gen, "VmHWM");
    ck_assert(answerIs("", path, 1, 80000000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss; stored"));
    /* Its file is its only copy, and counts as stored. */
    metricReach("cor_cache_stored_total", 1, "not counted as stored");
    ck_assert_int_eq(metric("cor_cache_stored_total"), 1);
    after = corProcStatusKb(gen, "VmHWM");
    fprintf(stderr,
            "corCacheDiskTest: an 80 MB answer stored, the peak +%ld "
            "KiB\n",
            after - before);
    if (sanitized == NULL || strcmp(sanitized, "1") != 0) {
        ck_assert_int_lt(after - before, 40 * 1024);
    }
    ck_assert(answerIs("", path, 1, 80000000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert_int_ge(metric("cor_cache_disk_bytes"), 80000000);
    /* Validated (the client's max-age=0): a 304's refresh would read it
     * into memory, so it is fetched whole again, and streamed. */
    ck_assert(answerIs("-H 'Cache-Control: max-age=0'", path, 2, 80000000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=stale; stored"));
    metricReach("cor_cache_stored_total", 2, "not counted as stored");
    ck_assert_int_eq(metric("cor_cache_stored_total"), 2);
    after = corProcStatusKb(gen, "VmHWM");
    if (sanitized == NULL || strcmp(sanitized, "1") != 0) {
        ck_assert_int_lt(after - before, 40 * 1024);
    }
    ck_assert(answerIs("", path, 2, 80000000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
}
END_TEST

/* Twenty misses of a 3 MB answer wait for one fetch (the origin waits
 * half a second before its head), then read its body as it comes: past
 * the 4 KiB memory keeps of it, from its file. One curl makes them at
 * once (-Z). */
START_TEST(test_collapsed_misses_read_a_large_answer_from_its_file)
{
    char command[8192];
    size_t at;

    start("256MiB", NULL);
    at = (size_t)snprintf(command, sizeof(command),
                          "cd %s && curl -s -m 30 -Z --parallel-max 20 "
                          "--no-progress-meter -H 'Host: cache.test'",
                          server.dir);
    for (int i = 0; i < 20; i++) {
        at += (size_t)snprintf(command + at, sizeof(command) - at,
                               " -o w%d 'http://127.0.0.1:%d/c/"
                               "waiters?cc=max-age=600&delay=500&"
                               "bytes=3000000'",
                               i, server.port);
    }
    ck_assert_int_eq(sh("%s", command), 0);
    sh("cd %s && a=$(yes 'n=1 ' | head -c 3000000 | md5sum | cut -c1-32); "
       "md5sum w* | cut -c1-32 | grep -c $a",
       server.dir);
    ck_assert_int_eq(atoi(out), 20);
    ck_assert_int_eq(
        originCount("/c/waiters?cc=max-age=600%26delay=500%26bytes=3000000"),
        1);
    written(1);
    ck_assert(answerIs("", "/c/waiters?cc=max-age=600&delay=500&bytes=3000000",
                       1, 3000000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
}
END_TEST

/* An answer cut midway by the origin, and one past the store's part of
 * size for a shard (16 MiB: 1 MiB a shard): each served as it came,
 * nothing left in the folder, the next request a miss. */
START_TEST(test_a_cut_or_too_large_answer_leaves_no_file)
{
    const char* cut = "/c/cut?cc=max-age=600&bytes=3000000&cut=1500000";
    const char* large = "/c/large?cc=max-age=600&bytes=3000000";

    start("16MiB", NULL);
    sh("curl -s -H 'Host: cache.test' -o /dev/null "
       "'http://127.0.0.1:%d%s'; echo $?",
       server.port, cut);
    ck_assert_int_eq(atoi(out), 18); /* a partial answer */
    ck_assert(answerIs("", large, 1, 3000000));
    ck_assert(noTemporary(store));
    sh("ls -A %s | wc -l", store);
    ck_assert_int_eq(atoi(out), 0);
    ck_assert_int_eq(metric("cor_cache_disk_entries"), 0);
    ck_assert(answerIs("", large, 2, 3000000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss"));
    ck_assert_int_eq(originCount("/c/cut?cc=max-age=600%26bytes=3000000%26"
                                 "cut=1500000"),
                     1);
    sh("curl -s -H 'Host: cache.test' -o /dev/null "
       "'http://127.0.0.1:%d%s'; echo $?",
       server.port, cut);
    ck_assert_int_eq(originCount("/c/cut?cc=max-age=600%26bytes=3000000%26"
                                 "cut=1500000"),
                     2);
}
END_TEST

/* The server's files at most 100 000 bytes (its writes past it fail as
 * on a full disk, EFBIG for ENOSPC), SIGXFSZ not its death. */
static void
diskFull(void* arg)
{
    struct rlimit limit = { 100000, 100000 };

    (void)arg;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &limit);
}

START_TEST(test_a_full_disk_and_the_size_bound)
{
    start("4MiB", diskFull);
    /* Not written: each is fetched, and answered right. */
    ck_assert(answerIs("", "/c/full?cc=max-age=600&bytes=150000", 1, 150000));
    for (long deadline = corNowMs() + 10000;
         metric("cor_cache_disk_errors_total") < 1;) {
        ck_assert_msg(corNowMs() < deadline, "the write did not fail");
        usleep(20 * 1000);
    }
    ck_assert(answerIs("", "/c/full?cc=max-age=600&bytes=150000", 2, 150000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss; stored"));
    /* 40 files of 90 000 bytes in 4 MiB (256 KiB a shard: two files
     * each, 32 in all): the bound holds, the least recently used go. */
    sh("curl -s -H 'Host: cache.test' "
       "'http://127.0.0.1:%d/c/many[1-40]?cc=max-age=90000&bytes=90000' "
       ">/dev/null",
       server.port);
    for (long deadline = corNowMs() + 10000;
         metric("cor_cache_disk_evictions_total") < 1;) {
        ck_assert_msg(corNowMs() < deadline, "nothing was evicted");
        usleep(20 * 1000);
    }
    ck_assert_int_le(metric("cor_cache_disk_bytes"), 4 * 1024 * 1024);
    sh("du -sb %s | cut -f1", store);
    ck_assert_int_le(atol(out), 4 * 1024 * 1024 + 4096);
    ck_assert(answerIs("", "/c/many40?cc=max-age=90000&bytes=90000", 1, 90000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
}
END_TEST

/* Several ranges of an answer on disk, more than the 256 KiB of parts
 * read into memory: a multipart/byteranges 206 streamed from its file
 * (before, the whole 200 went instead), over HTTP/1.1 and HTTP/2, each
 * part's bytes the stored body's. */
START_TEST(test_several_ranges_of_a_file_as_a_multipart_stream)
{
    const char* versions[] = { "", "--http2-prior-knowledge" };
    const char* path = "/c/parts?cc=max-age=600&bytes=600000";

    start("64MiB", NULL);
    ck_assert(answerIs("", path, 1, 600000));
    written(1);
    for (unsigned i = 0; i < 2; i++) {
        sh("cd %s && curl -s %s -H 'Host: cache.test' -r "
           "0-299999,400000-599999 -D head -o body "
           "'http://127.0.0.1:%d%s' && "
           "grep -ic '^content-type: multipart/byteranges' head && "
           "grep -c '^Content-Range: bytes 0-299999/600000' body && "
           "grep -c '^Content-Range: bytes 400000-599999/600000' body && "
           "grep -i '^content-length' head | tr -dc 0-9 && echo && "
           "wc -c < body && "
           "grep -c '^n=1 $' body",
           server.dir, versions[i], server.port, path);
        /* Each part's bytes are whole lines of the body (it starts at a
         * line and its ranges end at one): 60 000 + 40 000 of them. */
        ck_assert_msg(strncmp(out, "1\n1\n1\n", 6) == 0, "%s", out);
        ck_assert_int_eq(atol(out + 6), 500000 + 238);
        ck_assert_int_eq(atol(strchr(out + 6, '\n') + 1), 500000 + 238);
        ck_assert_int_eq(atol(strrchr(out, '\n') - 6), 100000);
    }
    ck_assert_int_eq(originCount("/c/parts?cc=max-age=600%26bytes=600000"), 1);
}
END_TEST

/* The server's own mount of a tmpfs of 1 MiB on the store's folder (a
 * mount namespace of its own: the test's folder stays as it was). */
static void
smallDisk(void* arg)
{
    (void)arg;
    if (unshare(CLONE_NEWNS) != 0
        || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0
        || mount("tmpfs", store, "tmpfs", 0, "size=1m") != 0) {
        _exit(126);
    }
}

/* A store of 64 MiB on a disk of 1 MiB: a 3 MB answer's writes fail
 * midway (ENOSPC) and it is served whole all the same, then asked again
 * (nothing half-written is served); its room is given back, so that a
 * smaller answer is stored after it. */
START_TEST(test_a_disk_smaller_than_the_store)
{
    const char* large = "/c/fill?cc=max-age=600&bytes=3000000";
    char folder[128];

    if (sh("unshare -m true") != 0) {
        fprintf(stderr, "corCacheDiskTest: no mount namespace here: the "
                        "small disk's case is skipped\n");
        return;
    }
    start("64MiB", smallDisk);
    snprintf(folder, sizeof(folder), "/proc/%d/root%s",
             (int)corServerGeneration(&server), store);
    sh("echo $(( $(stat -f -c '%%b * %%S' %s) / 1024 ))", folder);
    ck_assert_int_eq(atoi(out), 1024);
    ck_assert(answerIs("", large, 1, 3000000));
    errorsReach(1);
    ck_assert(noTemporary(folder));
    ck_assert(answerIs("", large, 2, 3000000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss"));
    errorsReach(2);
    ck_assert(answerIs("", BIG("fits"), 1, 300000));
    written(1);
    ck_assert(answerIs("", BIG("fits"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
}
END_TEST

/* A reload while fifty misses wait for one fetch of an answer too big
 * for memory (they wait for its file): each is answered whole, by the
 * old generation's one fetch or the new one's; nothing hangs. One curl
 * makes the fifty at once (-Z), each into a file of its own. */
START_TEST(test_a_reload_during_fifty_collapsed_misses)
{
    const char* url = "'http://127.0.0.1:%d/c/reload?cc=max-age=60&delay=1000&"
                      "bytes=20000'";
    char command[8192];
    char one[160];
    size_t at;
    FILE* run;

    start("8MiB", NULL);
    at = (size_t)
        snprintf(command, sizeof(command),
                 "cd %s && curl -s -m 30 -Z --parallel-max 50 2>/dev/null",
                 server.dir);
    for (int i = 0; i < 50; i++) {
        snprintf(one, sizeof(one), " -o r%d ", i);
        at += (size_t)snprintf(command + at, sizeof(command) - at, "%s", one);
        at += (size_t)snprintf(command + at, sizeof(command) - at, url,
                               server.port);
    }
    run = popen(command, "r");
    ck_assert_ptr_nonnull(run);
    usleep(300 * 1000); /* some asking, the fetch under way */
    kill(server.pid, SIGHUP);
    ck_assert_int_eq(pclose(run), 0);
    /* Each body the origin's first or second answer, whole. */
    sh("cd %s && a=$(yes 'n=1 ' | head -c 20000 | md5sum | cut -c1-32); "
       "b=$(yes 'n=2 ' | head -c 20000 | md5sum | cut -c1-32); "
       "md5sum r* | cut -c1-32 | grep -c -e $a -e $b",
       server.dir);
    ck_assert_int_eq(atoi(out), 50);
    ck_assert_int_le(originCount(
                         "/c/reload?cc=max-age=60%26delay=1000%26bytes=20000"),
                     2);
}
END_TEST

/* The file of the key of BIG(name) (its hash unknown here: the only
 * file whose head names it), into out. */
static void
fileOf(const char* name)
{
    sh("grep -l -a '/c/%s?' %s/* | head -1", name, store);
    out[strcspn(out, "\n")] = '\0';
}

/* After a reload the index is the one the old generation left (in a
 * zone the master hands on): no scan (the log says so), its files hits
 * at once; a file removed behind its back is still in it (a scan would
 * not have found it), so a miss counted an error, answered right; a
 * corrupt one is a miss too. */
START_TEST(test_a_reload_keeps_the_index_without_a_scan)
{
    start("8MiB", NULL);
    ck_assert(answerIs("", BIG("kept"), 1, 300000));
    ck_assert(answerIs("", BIG("gone"), 1, 300000));
    ck_assert(answerIs("", BIG("flipped"), 1, 300000));
    written(3);
    fileOf("gone");
    ck_assert_int_eq(sh("rm %s", out), 0);
    fileOf("flipped");
    ck_assert_int_eq(sh("printf X | dd of=%s bs=1 seek=150 conv=notrunc "
                        "2>/dev/null",
                        out),
                     0);
    reload();
    ck_assert(answerIs("", BIG("kept"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert_int_eq(metric("cor_cache_disk_entries"), 3);
    ck_assert_int_eq(metric("cor_cache_disk_errors_total"), 0);
    ck_assert(answerIs("", BIG("gone"), 2, 300000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss"));
    ck_assert_int_eq(metric("cor_cache_disk_errors_total"), 1);
    ck_assert(answerIs("", BIG("flipped"), 2, 300000));
    ck_assert_ptr_nonnull(strstr(out, "fwd=uri-miss"));
    ck_assert_int_eq(metric("cor_cache_disk_errors_total"), 2);
    ck_assert_int_eq(corServerLogCount(&server, "a new disk index: scanning"),
                     1);
    ck_assert_int_eq(corServerLogCount(&server, "kept from the last generation "
                                                "(3 files): no scan"),
                     1);
    ck_assert_int_eq(originCount(BIG_COUNT("kept")), 1);
}
END_TEST

/* A generation killed (SIGKILL) while its loops serve disk hits, each
 * of which takes a lock of the index: the master's next generation
 * takes the index on (repaired where the dead one held a lock), and
 * serves its files as hits; the origin is not asked again. */
START_TEST(test_a_generation_killed_mid_operation_leaves_a_usable_index)
{
    char config[256];
    char command[512];
    pid_t killed;
    pid_t next = -1;
    FILE* run;
    FILE* f;

    start("8MiB", NULL);
    ck_assert(answerIs("", BIG("killed"), 1, 300000));
    written(1);
    snprintf(config, sizeof(config), "%s/hits.curl", server.dir);
    f = fopen(config, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 400; i++) {
        fprintf(f, "url = \"http://127.0.0.1:%d%s\"\noutput = /dev/null\n",
                server.port, BIG("killed"));
    }
    fclose(f);
    snprintf(command, sizeof(command),
             "curl -s -m 20 -Z --parallel-max 16 -H 'Host: cache.test' "
             "-K %s 2>/dev/null",
             config);
    run = popen(command, "r");
    ck_assert_ptr_nonnull(run);
    killed = corServerGeneration(&server);
    ck_assert_int_gt(killed, 0);
    usleep(200 * 1000); /* the hits under way */
    kill(killed, SIGKILL);
    pclose(run);
    for (long deadline = corNowMs() + 20000; corNowMs() < deadline;) {
        next = corServerGeneration(&server);
        if (next > 0 && next != killed
            && corServerLogCount(&server, "no scan") >= 1) {
            break;
        }
        usleep(20 * 1000);
    }
    ck_assert_msg(next > 0 && next != killed, "no generation after the kill");
    ck_assert_int_eq(corServerLogCount(&server, "kept from the last generation "
                                                "(1 files): no scan"),
                     1);
    ck_assert(answerIs("", BIG("killed"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert_int_eq(originCount(BIG_COUNT("killed")), 1);
    /* Whether this kill came while the dead one held a lock is chance
     * (corCacheStoreTest kills one that holds it): said. */
    printf("killed holding a lock of the index: %s\n",
           corServerLogCount(&server, "died holding a lock") > 0
               ? "yes, its shard rebuilt"
               : "no");
}
END_TEST

/* In a child: the master's fd of the zone of the store edge's index,
 * mapped; each shard's lock taken, and the child killed holding them,
 * as a generation killed inside an operation would be. */
static void
zoneLocksHeldByOneKilled(pid_t master)
{
    char path[300];
    char link[256];
    struct dirent* ent;
    struct stat st;
    DIR* dir;
    char* zone = MAP_FAILED;
    uint32_t headerSize;
    CacheIndexZone* index;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)master);
    dir = opendir(path);
    while (dir != NULL && zone == MAP_FAILED && (ent = readdir(dir)) != NULL) {
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)master,
                 ent->d_name);
        n = readlink(path, link, sizeof(link) - 1);
        link[n > 0 ? n : 0] = '\0';
        if (strstr(link, "memfd:cache:edge") != NULL
            && (fd = open(path, O_RDWR)) >= 0 && fstat(fd, &st) == 0) {
            zone = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                        MAP_SHARED, fd, 0);
        }
    }
    if (zone == MAP_FAILED) {
        _exit(1);
    }
    /* The core's header says how long it is (after its magic and
     * version). */
    memcpy(&headerSize, zone + 12, sizeof(headerSize));
    index = (CacheIndexZone*)(zone + headerSize);
    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        pthread_mutex_lock(&index->shards[i].lock);
    }
    raise(SIGKILL);
}

/* A process killed holding the locks of the running server's index:
 * the server's next use of a shard rebuilds it (the log says so), and
 * its file is a hit. */
START_TEST(test_a_process_killed_holding_the_index_s_locks)
{
    pid_t child;
    int status;

    start("8MiB", NULL);
    ck_assert(answerIs("", BIG("held"), 1, 300000));
    written(1);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        zoneLocksHeldByOneKilled(server.pid);
    }
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ck_assert(answerIs("", BIG("held"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert_int_eq(corServerLogCount(&server, "died holding a lock of the "
                                                "disk index: its shard was "
                                                "rebuilt from its 1 entries"),
                     1);
    ck_assert(answerIs("", "/c/after?cc=max-age=600", 1, 5));
    ck_assert_int_eq(originCount(BIG_COUNT("held")), 1);
}
END_TEST

/* A store whose size the new configuration changes gets a fresh index
 * (the old one's bound is not the new one's): the new generation scans,
 * and finds the files. */
START_TEST(test_a_changed_size_starts_a_fresh_index)
{
    char yaml[2048];

    start("8MiB", NULL);
    ck_assert(answerIs("", BIG("resized"), 1, 300000));
    written(1);
    snprintf(yaml, sizeof(yaml), yamlFormat, originPort, store, "16MiB");
    ck_assert_int_eq(corServerWriteConfig(&server, yaml), 0);
    reload();
    ck_assert_int_eq(corServerLogCount(&server, "no scan"), 0);
    ck_assert_int_eq(corServerLogCount(&server, "a new disk index: scanning"),
                     2);
    scanned(1);
    ck_assert(answerIs("", BIG("resized"), 1, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
}
END_TEST

COR_TEST_SUITE(corCacheDisk)
{
    tcase_add_unchecked_fixture(tc, originStart, originStop);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(
        tc, test_answers_come_back_from_disk_after_a_reload_and_a_restart);
    tcase_add_test(tc, test_a_corrupt_or_cut_file_is_a_miss);
    tcase_add_test(tc, test_the_folder_removed_under_a_running_server);
    tcase_add_test(tc, test_a_full_disk_and_the_size_bound);
    tcase_add_test(tc, test_a_disk_smaller_than_the_store);
    tcase_add_test(tc, test_several_ranges_of_a_file_as_a_multipart_stream);
    tcase_add_test(tc, test_an_answer_past_64_MiB_is_streamed_to_its_file);
    tcase_add_test(tc, test_collapsed_misses_read_a_large_answer_from_its_file);
    tcase_add_test(tc, test_a_cut_or_too_large_answer_leaves_no_file);
    tcase_add_test(tc, test_a_reload_during_fifty_collapsed_misses);
    tcase_add_test(tc, test_a_reload_keeps_the_index_without_a_scan);
    tcase_add_test(
        tc, test_a_generation_killed_mid_operation_leaves_a_usable_index);
    tcase_add_test(tc, test_a_changed_size_starts_a_fresh_index);
    tcase_add_test(tc, test_a_process_killed_holding_the_index_s_locks);
}
