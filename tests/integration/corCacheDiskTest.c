/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache's disk store against the real binary, apart from corCacheTest
 * (no nginx, no Varnish: the origin, corCacheOrigin.py, started once for
 * the program): answers found again on disk once memory let them go,
 * after a reload and after a restart (the scan at start holds up no
 * request), a range and HTTP/2 of a file sent by sendfile; a corrupt or
 * cut file, the store's folder removed under a running server and a disk
 * that takes no more (a file size limit: a tmpfs needs mount rights) each
 * a miss and a right answer, never a wrong one; the size bound; a reload
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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* Until the scan at start put count files in the index, at most 10 s. */
static void
scanned(long count)
{
    for (long deadline = corNowMs() + 10000;
         metric("cor_cache_disk_entries") < count;) {
        ck_assert_msg(corNowMs() < deadline, "the scan did not end");
        usleep(20 * 1000);
    }
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

START_TEST(test_the_folder_removed_under_a_running_server)
{
    start("8MiB", NULL);
    ck_assert(answerIs("", BIG("removed"), 1, 300000));
    written(1);
    sh("rm -rf %s", store);
    ck_assert(answerIs("", BIG("removed"), 2, 300000));
    /* Its write made the folder again. */
    written(1);
    ck_assert(answerIs("", BIG("removed"), 2, 300000));
    ck_assert_ptr_nonnull(strstr(out, "edge; hit"));
    ck_assert_int_eq(originCount(BIG_COUNT("removed")), 2);
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
    tcase_add_test(tc, test_a_reload_during_fifty_collapsed_misses);
    tcase_add_test(tc, test_a_reload_keeps_the_index_without_a_scan);
    tcase_add_test(
        tc, test_a_generation_killed_mid_operation_leaves_a_usable_index);
    tcase_add_test(tc, test_a_changed_size_starts_a_fresh_index);
    tcase_add_test(tc, test_a_process_killed_holding_the_index_s_locks);
}
