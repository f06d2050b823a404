/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binary upgrade on the fly (`cor -s upgrade`, SIGUSR2), against the
 * real binary run from a folder of the test's own, so that the test can
 * put a new binary where the running one was: under wrk load, the new
 * master takes over with no socket error and no non-2xx; a new binary
 * that cannot start leaves the old master serving. The test is a child
 * subreaper: the new master, orphaned when the old one exits, becomes
 * the test's child, to be stopped and reaped as the first one was.
 */
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static char folder[128];
static char built[512];
static char buf[1 << 16];
static char out[1 << 16];

/* The binary in a folder of its own, beside the built modules; COR_BIN
 * points there from now on, so the harness runs it. */
static void
setUp(void)
{
    const char* bin = getenv("COR_BIN");
    char command[1536];

    snprintf(built, sizeof(built), "%s", bin != NULL ? bin : "build/cor");
    snprintf(folder, sizeof(folder), "/tmp/cor-upgrade-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(folder));
    snprintf(command, sizeof(command),
             "cp %s %s/cor && ln -s $(cd $(dirname "
             "%s) && pwd)/modules %s/modules",
             built, folder, built, folder);
    ck_assert_int_eq(system(command), 0);
    snprintf(command, sizeof(command), "%s/cor", folder);
    setenv("COR_BIN", command, 1);
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}

static void
tearDown(void)
{
    char command[256];

    corServerStop(&server);
    snprintf(command, sizeof(command), "rm -rf %s", folder);
    ck_assert_int_eq(system(command), 0);
}

/* Put text (a shell script) or a copy of the built binary (NULL) where
 * the running binary was: a new file, as an install does. */
static void
binaryReplace(const char* script)
{
    char command[1536];

    if (script == NULL) {
        snprintf(command, sizeof(command),
                 "cp %s %s/cor.new && mv %s/cor.new "
                 "%s/cor",
                 built, folder, folder, folder);
    } else {
        snprintf(command, sizeof(command),
                 "printf '%%s' '%s' > %s/cor.new && "
                 "chmod +x %s/cor.new && mv %s/cor.new %s/cor",
                 script, folder, folder, folder, folder);
    }
    ck_assert_int_eq(system(command), 0);
}

/* `cor -s upgrade` with the built binary (the one in the folder may be
 * anything by now); its exit status, its output in out. */
static int
upgradeAsk(void)
{
    char command[1024];

    snprintf(command, sizeof(command), "%s -s upgrade -c %s 2>&1", built,
             server.config);
    return corShell(command, out, sizeof(out));
}

static pid_t
pidFile(void)
{
    char path[256];
    FILE* f;
    int pid = -1;

    snprintf(path, sizeof(path), "%s/cor.pid", server.dir);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%d", &pid) != 1) {
            pid = -1;
        }
        fclose(f);
    }
    return (pid_t)pid;
}

/* What the masters told systemd, from the start to now: whether line
 * was said, and whether STOPPING=1 was (the old master must not say it:
 * the service goes on). */
static bool
notifySaid(int fd, const char* line, bool* stoppingP)
{
    char datagram[1024];
    bool said = false;

    while (corNotifyNext(fd, datagram, sizeof(datagram), said ? 0 : 5000)) {
        said |= corNotifyHasLine(datagram, line);
        *stoppingP |= corNotifyHasLine(datagram, "STOPPING=1");
    }
    return said;
}

/* A shared listener and a reuseport one (a socket per loop: the upgrade
 * passes them all). */
static const char* const upgradeYaml =
    "runtime: { loops: 2, workers: 2, coroutines: { enabled: {COROUTINES} "
    "}, stop_timeout: 5s }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT2}, accept: reuseport }\n"
    "modules: [ { load: http }, { load: hello } ]\n"
    "routes: [ { match: \"GET /hello\", handler: hello } ]\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static int
helloAt(int port)
{
    return corRequest(port, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", buf,
                      sizeof(buf));
}

static int
hello(void)
{
    return helloAt(server.port);
}

/* Under wrk load: no socket error, no non-2xx; the new master is on the
 * pid file, tells systemd (through the old one) it is the main pid now,
 * and reloads as any master does. */
START_TEST(test_upgrade_under_load_loses_nothing)
{
    char command[1024];
    char notify[108];
    char line[64];
    bool stopping = false;
    FILE* wrk;
    pid_t old;
    int status;
    int fd = corNotifyOpen(false, notify, sizeof(notify));

    ck_assert_int_ge(fd, 0);
    setenv("NOTIFY_SOCKET", notify, 1); /* the server inherits it */
    ck_assert_int_eq(corServerStart(&server, upgradeYaml), 0);
    old = server.pid;
    snprintf(command, sizeof(command),
             "wrk -t1 -c16 -d4s "
             "http://127.0.0.1:%d/hello 2>&1",
             server.port);
    wrk = popen(command, "r");
    ck_assert_ptr_nonnull(wrk);
    sleep(1);
    binaryReplace(NULL);
    ck_assert_msg(upgradeAsk() == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "upgrade ok"));
    /* The old master drains and exits; the new one is on the pid file. */
    ck_assert_int_eq(waitpid(old, &status, 0), old);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    server.pid = pidFile();
    ck_assert_int_gt(server.pid, 0);
    ck_assert_int_ne(server.pid, old);
    snprintf(line, sizeof(line), "MAINPID=%d", (int)server.pid);
    ck_assert_msg(notifySaid(fd, line, &stopping), "no %s", line);
    ck_assert_msg(!stopping, "the old master said STOPPING=1");
    corNotifyClose(fd, notify);
    size_t n = fread(out, 1, sizeof(out) - 1, wrk);

    out[n] = '\0';
    ck_assert_int_eq(pclose(wrk), 0);
    ck_assert_msg(strstr(out, "requests in") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "Socket errors") == NULL, "%s", out);
    ck_assert_msg(strstr(out, "Non-2xx") == NULL, "%s", out);
    ck_assert_int_eq(hello(), 200);
    /* Every socket found its listener: the reuseport one kept its two. */
    ck_assert_int_eq(helloAt(server.port2), 200);
    ck_assert_int_eq(corServerLogCount(&server, "matches no listener"), 0);
    ck_assert_int_eq(corServerLogCount(&server, "fewer sockets passed"), 0);
    /* The new master is a master like any: it reloads. */
    snprintf(command, sizeof(command), "%s -s reload -c %s 2>&1", built,
             server.config);
    ck_assert_msg(corShell(command, out, sizeof(out)) == 0, "%s", out);
    ck_assert_int_eq(hello(), 200);
}
END_TEST

/* A new "binary" that exits at once: the old master keeps serving, on
 * the pid file; a good binary later goes through. */
START_TEST(test_failed_upgrade_keeps_the_old_master_serving)
{
    pid_t old;

    ck_assert_int_eq(corServerStart(&server, upgradeYaml), 0);
    old = server.pid;
    binaryReplace("#!/bin/sh\nexit 3\n");
    ck_assert_int_eq(upgradeAsk(), 1);
    ck_assert_msg(strstr(out, "upgrade failed") != NULL, "%s", out);
    ck_assert_int_eq(waitpid(old, NULL, WNOHANG), 0);
    ck_assert_int_eq(pidFile(), old);
    ck_assert_int_eq(hello(), 200);
    ck_assert_int_eq(corServerLogCount(&server, "keeps serving"), 1);
    /* A good binary later: the upgrade goes through. */
    binaryReplace(NULL);
    ck_assert_msg(upgradeAsk() == 0, "%s", out);
    ck_assert_int_eq(waitpid(old, NULL, 0), old);
    server.pid = pidFile();
    ck_assert_int_ne(server.pid, old);
    ck_assert_int_eq(hello(), 200);
    ck_assert_int_eq(helloAt(server.port2), 200);
}
END_TEST

/* The zones go with the sockets: the new master's first generation
 * takes the cache's disk index on (no scan) where the layout is the
 * same, as a reload's does. */
START_TEST(test_an_upgrade_hands_the_zones_on)
{
    pid_t old;

    ck_assert_int_eq(
        corServerStart(&server,
                       "runtime: { loops: 1, workers: 1, coroutines: { "
                       "enabled: {COROUTINES} } }\n"
                       "listen: [ { protocol: http, address: "
                       "127.0.0.1:{PORT} } ]\n"
                       "modules:\n"
                       "  - { load: http }\n"
                       "  - { load: hello }\n"
                       "  - load: cache\n"
                       "    stores: [ { name: edge, path: {DIR}/cache, size: "
                       "8MiB } ]\n"
                       "routes: [ { match: \"GET /hello\", handler: hello, "
                       "cache: edge } ]\n"
                       "log: { pid_file: {DIR}/cor.pid }\n"),
        0);
    old = server.pid;
    ck_assert_int_eq(corServerLogCount(&server, "a new disk index"), 1);
    binaryReplace(NULL);
    ck_assert_msg(upgradeAsk() == 0, "%s", out);
    ck_assert_int_eq(waitpid(old, NULL, 0), old);
    server.pid = pidFile();
    ck_assert_int_eq(hello(), 200);
    ck_assert_int_eq(corServerLogCount(&server, "a new disk index"), 1);
    ck_assert_int_eq(corServerLogCount(&server, "kept from the last "
                                                "generation (0 files): no "
                                                "scan"),
                     1);
}
END_TEST

COR_TEST_SUITE(corMasterUpgrade)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_upgrade_under_load_loses_nothing);
    tcase_add_test(tc, test_failed_upgrade_keeps_the_old_master_serving);
    tcase_add_test(tc, test_an_upgrade_hands_the_zones_on);
}
