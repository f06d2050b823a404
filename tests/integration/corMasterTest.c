/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master against the real binary: a reload after a generation could
 * not be replaced, the listeners a graceful stop closes (and a reload
 * keeps), a master killed with SIGKILL (its generation follows it, a new
 * one starts afresh), what cor -t looks at before a start, the paths a
 * configuration names relative to its own folder (modules, the pid file), and
 * typos that get a "did you mean".
 */
#include "corTest.h"
#include "corServer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static char buf[1 << 16];
static char scratch[128];

static void
tearDown(void)
{
    char command[256];

    corServerStop(&server);
    if (scratch[0] != '\0') {
        snprintf(command, sizeof(command), "rm -rf %s", scratch);
        ck_assert_int_eq(system(command), 0);
        scratch[0] = '\0';
    }
}

static const char*
bin(void)
{
    const char* b = getenv("COR_BIN");

    return b ? b : "build/cor";
}

/* A scratch folder of the test's own, outside the server's. */
static void
scratchMake(void)
{
    snprintf(scratch, sizeof(scratch), "/tmp/cor-master-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(scratch));
}

/* Whether the server's log holds text, within timeoutMs. */
static bool
logSays(const CorServer* s, const char* text, int timeoutMs)
{
    char command[512];

    snprintf(command, sizeof(command), "grep -q -F '%s' %s", text, s->log);
    for (long deadline = corNowMs() + timeoutMs;;) {
        if (system(command) == 0) {
            return true;
        }
        if (corNowMs() >= deadline) {
            return false;
        }
        usleep(50 * 1000);
    }
}

static bool
masterAlive(const CorServer* s)
{
    return waitpid(s->pid, NULL, WNOHANG) == 0;
}

/* ---- Reload after a failed replacement ----------------------------------- */

/*
 * The generation crashes and cannot be replaced (its module file is gone),
 * so the master has no generation; a reload to a configuration without
 * that module then starts one. The master signalled "the old generation",
 * pid 0, which is its whole process group: itself included.
 */
START_TEST(test_reload_after_a_failed_replacement_keeps_the_master)
{
    char yaml[2048];
    char command[512];
    long t;

    scratchMake();
    /* COR_BIN is build/cor: its modules are beside it. */
    snprintf(command, sizeof(command),
             "cp $(dirname %s)/modules/hello.so "
             "%s/",
             bin(), scratch);
    ck_assert_int_eq(system(command), 0);
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 2, coroutines: { enabled: "
             "{COROUTINES} } }\n"
             "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
             "modules:\n  - { load: http }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "  - { load: %s/hello.so }\n"
             "routes:\n  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /crash\", handler: crash }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             scratch);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
    ck_assert_int_eq(corRequest(server.port,
                                "GET /hello HTTP/1.1\r\nHost: t"
                                "\r\n\r\n",
                                buf, sizeof(buf)),
                     200);
    snprintf(command, sizeof(command), "%s/hello.so", scratch);
    ck_assert_int_eq(unlink(command), 0);
    ck_assert_int_eq(corRequest(server.port,
                                "GET /crash HTTP/1.1\r\nHost: t"
                                "\r\n\r\n",
                                buf, sizeof(buf)),
                     -1);
    ck_assert(logSays(&server, "no generation could start", 10000));

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 2, coroutines: { enabled: "
             "{COROUTINES} } }\n"
             "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
             "modules: [ { load: http } ]\n"
             "routes: [ { match: \"GET /metrics\", handler: metrics } ]\n"
             "log: { pid_file: {DIR}/cor.pid }\n");
    ck_assert_int_eq(corServerWriteConfig(&server, yaml), 0);
    kill(server.pid, SIGHUP);
    ck_assert(logSays(&server, "reload done", 10000));
    /* A master that signalled itself stops within its drain; give it the
     * time to, then it must still be there and serving. */
    usleep(500 * 1000);
    ck_assert_msg(masterAlive(&server), "the master exited after the reload");
    for (t = corNowMs(); corRequest(server.port,
                                    "GET /metrics HTTP/1.1\r\n"
                                    "Host: t\r\n\r\n",
                                    buf, sizeof(buf))
                         != 200;) {
        ck_assert_int_lt(corNowMs() - t, 5000);
        usleep(50 * 1000);
    }
    ck_assert(masterAlive(&server));
    ck_assert(!logSays(&server, "graceful stop", 0));
}
END_TEST

/* ---- A graceful stop closes the listeners -------------------------------- */

typedef struct {
    int port;
    int status;
    int ms; /* how long it sleeps */
} Pending;

static void*
slowRequest(void* arg)
{
    Pending* p = arg;
    char local[4096];
    char request[128];

    snprintf(request, sizeof(request),
             "GET /sleep?ms=%d HTTP/1.1\r\nHost: "
             "t\r\n\r\n",
             p->ms);
    p->status = corRequest(p->port, request, local, sizeof(local));
    return NULL;
}

/* Whether a connect to port is refused within timeoutMs. */
static bool
connectRefused(int port, int timeoutMs)
{
    for (long deadline = corNowMs() + timeoutMs;;) {
        int fd = corConnect(port);
        int err = errno;

        if (fd < 0 && err == ECONNREFUSED) {
            return true;
        }
        if (fd >= 0) {
            close(fd);
        }
        if (corNowMs() >= deadline) {
            return false;
        }
        usleep(20 * 1000);
    }
}

/* SIGQUIT with a slow request in flight: a new client is refused at once
 * (it waited in a backlog nobody accepted from), the request in flight
 * is answered, and the server exits. */
START_TEST(test_graceful_stop_refuses_new_connections)
{
    Pending pending;
    pthread_t thread;
    int status;
    long t;

    ck_assert_int_eq(corServerStartWith(&server, NULL), 0);
    pending = (Pending){ server.port, 0, 1500 };
    pthread_create(&thread, NULL, slowRequest, &pending);
    usleep(300 * 1000);
    t = corNowMs();
    kill(server.pid, SIGQUIT);
    ck_assert_msg(connectRefused(server.port, 500),
                  "a new connection was "
                  "not refused during the drain");
    ck_assert_int_lt(corNowMs() - t, 1000);
    pthread_join(thread, NULL);
    ck_assert_int_eq(pending.status, 200);
    ck_assert_int_eq(waitpid(server.pid, &status, 0), server.pid);
    server.pid = 0;
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* A reload while a slow request is in flight: the old generation closes
 * its listeners, the new one goes on accepting on the master's, and every
 * connection made around the reload is served; the old one says what
 * its drain waits for. */
START_TEST(test_reload_keeps_accepting_while_the_old_one_drains)
{
    Pending pending;
    pthread_t thread;
    char command[512];
    int served = 0;

    ck_assert_int_eq(corServerStartWith(&server, NULL), 0);
    pending = (Pending){ server.port, 0, 3000 };
    pthread_create(&thread, NULL, slowRequest, &pending);
    usleep(300 * 1000);
    snprintf(command, sizeof(command), "%s -s reload -c %s 2>&1", bin(),
             server.config);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    for (long t = corNowMs(); corNowMs() - t < 1500; served++) {
        ck_assert_int_eq(corRequest(server.port,
                                    "GET /hello HTTP/1.1\r\n"
                                    "Host: t\r\n\r\n",
                                    buf, sizeof(buf)),
                         200);
        usleep(10 * 1000);
    }
    /* The old generation says what its drain waits for. */
    ck_assert(logSays(&server,
                      "draining: waiting for 1 connection (http 1), "
                      "1 request in flight",
                      3000));
    pthread_join(thread, NULL);
    ck_assert_int_eq(pending.status, 200);
    ck_assert_int_gt(served, 20);
    ck_assert(masterAlive(&server));
}
END_TEST

/* ---- cor -t looks at the files a start opens ---------------------------- */

/* cor -t on yaml, written to the scratch folder; its output into buf. */
static int
check(const char* yaml)
{
    char path[256];
    char command[512];
    FILE* f;

    snprintf(path, sizeof(path), "%s/cor.yaml", scratch);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(yaml, f);
    fclose(f);
    snprintf(command, sizeof(command), "%s -t -c %s 2>&1", bin(), path);
    return corShell(command, buf, sizeof(buf));
}

/* A log in a folder that does not exist, a pid file where a folder is:
 * cor -t fails at each key's line (it used to pass a configuration that
 * could not start), and an access log that exists is left as it was. */
START_TEST(test_check_refuses_files_a_start_could_not_open)
{
    char path[256];
    char yaml[1024];
    char command[1024];
    FILE* f;

    scratchMake();
    snprintf(path, sizeof(path), "%s/access.log", scratch);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("kept\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/folder", scratch);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(yaml, sizeof(yaml),
             "listen: [ { protocol: http, address: 127.0.0.1:1 } ]\n"
             "modules: [ { load: http } ]\n"
             "log:\n"
             "  error: %s/none/error.log\n"
             "  access: %s/access.log\n"
             "  pid_file: folder\n",
             scratch, scratch);
    ck_assert_int_ne(check(yaml), 0);
    ck_assert_msg(strstr(buf, "cor.yaml:4:10: log.error: cannot create") != NULL
                      && strstr(buf, "/none does not exist") != NULL,
                  "%s", buf);
    ck_assert_msg(strstr(buf, "cor.yaml:6:13: log.pid_file: ") != NULL
                      && strstr(buf, "is a folder") != NULL,
                  "%s", buf);
    ck_assert_msg(strstr(buf, "access") == NULL, "%s", buf);
    snprintf(command, sizeof(command), "cat %s/access.log", scratch);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "kept\n");
}
END_TEST

/* ---- A master killed with SIGKILL --------------------------------------- */

/* Whether pid is gone (or a zombie of whoever adopted it), within
 * timeoutMs. */
static bool
processGone(pid_t pid, int timeoutMs)
{
    char path[64];
    char stat[256] = "";

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    for (long deadline = corNowMs() + timeoutMs;;) {
        FILE* f = fopen(path, "r");
        bool gone = f == NULL || fgets(stat, sizeof(stat), f) == NULL
                    || strstr(stat, ") Z ") != NULL;

        if (f != NULL) {
            fclose(f);
        }
        if (gone) {
            return true;
        }
        if (corNowMs() >= deadline) {
            return false;
        }
        usleep(50 * 1000);
    }
}

/* Start a master again on the server's configuration, its log after the
 * old one's. */
static void
masterRestart(CorServer* s)
{
    s->pid = corTestFork(SIGKILL);
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        FILE* log = freopen(s->log, "a", stderr);

        (void)log;
        dup2(STDERR_FILENO, STDOUT_FILENO);
        setpgid(0, 0);
        execl(bin(), "cor", "-c", s->config, (char*)NULL);
        _exit(127);
    }
}

/*
 * kill -9 of the master, after a reload: its generation drains and exits
 * (it used to go on serving, adopted by init, holding the port), a new
 * master starts on the same port, and its first reload's outcome is its
 * own (the dead master's outcome file used to make `cor -s reload` wait
 * its whole minute for a sequence number already there).
 */
START_TEST(test_a_killed_master_leaves_nothing_behind)
{
    char command[512];
    pid_t generation;
    int fd;

    ck_assert_int_eq(corServerStartWith(&server, NULL), 0);
    snprintf(command, sizeof(command), "timeout 20 %s -s reload -c %s 2>&1",
             bin(), server.config);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    ck_assert_ptr_nonnull(strstr(buf, "reload ok"));
    generation = corServerGeneration(&server);
    ck_assert_int_gt(generation, 0);

    kill(server.pid, SIGKILL);
    waitpid(server.pid, NULL, 0);
    ck_assert_msg(processGone(generation, 10000),
                  "the generation outlived its master");
    ck_assert(logSays(&server, "died; draining", 0));
    /* The generation the reload replaced may still be letting go of its
     * listeners on a loaded machine: within the same bound, nothing. */
    for (long t = corNowMs(); (fd = corConnect(server.port)) >= 0;) {
        close(fd);
        ck_assert_msg(corNowMs() - t < 10000, "the listener outlived its "
                                              "master");
        usleep(50 * 1000);
    }

    masterRestart(&server);
    for (long t = corNowMs(); corRequest(server.port,
                                         "GET /hello HTTP/1.1"
                                         "\r\nHost: t\r\n\r\n",
                                         buf, sizeof(buf))
                              != 200;) {
        ck_assert_msg(corNowMs() - t < 10000, "no new master serving");
        usleep(50 * 1000);
    }
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    ck_assert_ptr_nonnull(strstr(buf, "reload ok"));
}
END_TEST

/* ---- Paths beside the configuration file -------------------------------- */

/* `load: hello.so` and `load: mods/hello.so` beside the file, checked with
 * `cor -t -c cor.yaml` run in that folder: a bare name ending in .so went
 * to dlopen's search path. */
START_TEST(test_module_path_is_relative_to_the_config_file)
{
    char command[1024];
    char* yaml = "listen: [ { protocol: http, address: 127.0.0.1:1 } ]\n"
                 "modules: [ { load: http }, { load: hello.so } ]\n";

    scratchMake();
    snprintf(command, sizeof(command),
             "mkdir %s/mods && cp $(dirname "
             "%s)/modules/hello.so %s/ && cp %s/hello.so %s/mods/ && "
             "printf '%%s' '%s' > %s/cor.yaml",
             scratch, bin(), scratch, scratch, scratch, yaml, scratch);
    ck_assert_int_eq(system(command), 0);
    snprintf(command, sizeof(command), "cd %s && %s -t -c cor.yaml 2>&1",
             scratch, bin());
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    ck_assert_msg(strstr(buf, "configuration ok") != NULL, "%s", buf);

    /* From elsewhere, with a folder in the path: the same files. */
    snprintf(command, sizeof(command),
             "sed -i 's|load: hello.so|load: "
             "mods/hello.so|' %s/cor.yaml && cd / && %s -t -c %s/cor.yaml "
             "2>&1",
             scratch, bin(), scratch);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    ck_assert_msg(strstr(buf, "configuration ok") != NULL, "%s", buf);
}
END_TEST

/* `pid_file: cor.pid` lands beside the configuration, not in the folder
 * the master was started from (the harness waits for {DIR}/cor.pid), and
 * `cor -s reload` run from another folder finds it. */
START_TEST(test_pid_file_is_relative_to_the_config_file)
{
    char command[1024];

    ck_assert_int_eq(
        corServerStart(
            &server,
            "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
            "modules: [ { load: http } ]\n"
            "routes: [ { match: \"GET /metrics\", handler: metrics } ]\n"
            "log: { pid_file: cor.pid }\n"),
        0);
    ck_assert_int_ne(access("cor.pid", F_OK), 0);
    snprintf(command, sizeof(command), "cd / && %s -s reload -c %s 2>&1", bin(),
             server.config);
    ck_assert_msg(corShell(command, buf, sizeof(buf)) == 0, "%s", buf);
    ck_assert_int_eq(corMetric(server.port, "cor_reloads_total{result=\"ok\"}"),
                     1);
}
END_TEST

/* ---- include ------------------------------------------------------------- */

/* Write conf.d/hello.yaml with greeting (broken: cut short), then
 * `cor -s reload` the server's configuration; its exit status, its output
 * in buf. */
static int
helloReload(const char* greeting, bool broken)
{
    char path[256];
    char command[512];
    FILE* f;

    snprintf(path, sizeof(path), "%s/conf.d/hello.yaml", server.dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "modules: [ { load: hello, greeting: %s } ]\n"
            "routes: [ { match: \"GET /hello\", handler: hello %s\n",
            greeting, broken ? "" : "} ]");
    fclose(f);
    snprintf(command, sizeof(command), "%s -s reload -c %s 2>&1", bin(),
             server.config);
    return corShell(command, buf, sizeof(buf));
}

/* Whether GET /hello answers 200 with greeting. */
static bool
helloSays(const char* greeting)
{
    return corRequest(server.port, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n",
                      buf, sizeof(buf))
               == 200
           && strstr(corBody(buf), greeting) != NULL;
}

/*
 * A reload reads the included files again: a file added to conf.d, then
 * one changed, take effect; an included file that does not parse fails
 * the reload with its file:line:column and the running configuration
 * keeps serving, as for the main file. cor -t lists every file it read.
 */
START_TEST(test_reload_reads_the_included_files_again)
{
    char command[512];
    char want[256];

    ck_assert_int_eq(
        corServerStart(
            &server,
            "runtime: { loops: 1, workers: 2, coroutines: { enabled: "
            "{COROUTINES} } }\n"
            "include: \"conf.d/*.yaml\"\n"
            "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
            "modules: [ { load: http } ]\n"
            "routes: [ { match: \"GET /metrics\", handler: metrics } ]\n"
            "log: { pid_file: {DIR}/cor.pid }\n"),
        0);
    ck_assert_int_eq(corRequest(server.port,
                                "GET /hello HTTP/1.1\r\nHost: "
                                "t\r\n\r\n",
                                buf, sizeof(buf)),
                     404);

    snprintf(command, sizeof(command), "mkdir %s/conf.d", server.dir);
    ck_assert_int_eq(system(command), 0);
    ck_assert_msg(helloReload("first", false) == 0, "%s", buf);
    ck_assert_msg(helloSays("first"), "%s", buf);
    ck_assert_msg(helloReload("second", false) == 0, "%s", buf);
    ck_assert_msg(helloSays("second"), "%s", buf);

    snprintf(command, sizeof(command), "%s -t -c %s 2>&1", bin(),
             server.config);
    ck_assert_msg(corShell(command, buf, sizeof(buf)) == 0, "%s", buf);
    snprintf(want, sizeof(want), "read %s/conf.d/hello.yaml\n", server.dir);
    ck_assert_msg(strstr(buf, want) != NULL, "%s", buf);

    ck_assert_int_ne(helloReload("third", true), 0);
    snprintf(want, sizeof(want), "%s/conf.d/hello.yaml:3:1: ", server.dir);
    ck_assert_msg(strstr(buf, want) != NULL, "%s", buf);
    ck_assert(logSays(&server, "keeps serving", 10000));
    ck_assert_msg(helloSays("second"), "%s", buf);
}
END_TEST

/* ---- Typos --------------------------------------------------------------- */

/* A typo in a module's key and in a handler's name: what exists, and the
 * nearest, as for the core's own keys. */
START_TEST(test_typos_in_module_keys_and_handlers_say_what_exists)
{
    char command[1024];

    scratchMake();
    snprintf(command, sizeof(command),
             "printf '%%s' 'listen: [ { protocol: "
             "http, address: 127.0.0.1:1 } ]\nmodules: [ { load: http }, "
             "{ load: hello, greting: hi } ]\nroutes: [ { match: \"GET "
             "/x\", handler: helo } ]\n' > %s/cor.yaml && %s -t -c "
             "%s/cor.yaml 2>&1",
             scratch, bin(), scratch);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 1);
    ck_assert_msg(strstr(buf, "cor.yaml:2:43: unknown key 'greting' in "
                              "modules[1] (expected one of: load, greeting, "
                              "gather, database, redis); did you mean "
                              "'greeting'?")
                      != NULL,
                  "%s", buf);
    ck_assert_msg(strstr(buf, "cor.yaml:3:11: route 'GET /x': no module "
                              "registered a handler named 'helo' (handlers: ")
                      != NULL,
                  "%s", buf);
    ck_assert_msg(strstr(buf,
                         "hello_worker, sleep, park, wake, gather, dbtime, "
                         "visits); "
                         "did you mean 'hello'?")
                      != NULL,
                  "%s", buf);
}
END_TEST

/* Nested keys get the nearest too, two letters swapped (tsl, hots) being
 * one edit; and a module's key near one it asked for is named even when
 * the module stopped at an error of its own (a forward without
 * "upstreams", whose author wrote "upstream"). */
START_TEST(test_typos_in_nested_keys_say_the_nearest)
{
    scratchMake();
    ck_assert_int_eq(check("listen: [ { protocol: http, address: "
                           "127.0.0.1:1, tsl: {} } ]\n"),
                     1);
    ck_assert_msg(strstr(buf, "cor.yaml:1:51: unknown key 'tsl' in listen[0] "
                              "(expected one of: protocol, address, tls, "
                              "accept, http2, http3, proxy_protocol); did you "
                              "mean 'tls'?")
                      != NULL,
                  "%s", buf);
    ck_assert_int_eq(check("listen: [ { protocol: http, address: "
                           "127.0.0.1:1 } ]\nmodules:\n  - { load: http }\n"
                           "  - load: forward\n    upstreams: [ { name: a, "
                           "servers: [ \"http://127.0.0.1:1\" ], hots: b "
                           "} ]\n"),
                     1);
    ck_assert_msg(strstr(buf, "cor.yaml:5:64: unknown key 'hots' in "
                              "upstreams[0] (")
                          != NULL
                      && strstr(buf, "); did you mean 'host'?") != NULL,
                  "%s", buf);
    ck_assert_int_eq(check("listen: [ { protocol: http, address: "
                           "127.0.0.1:1 } ]\nmodules:\n  - { load: http }\n"
                           "  - load: forward\n    upstream: [ { name: a, "
                           "servers: [ \"http://127.0.0.1:1\" ] } ]\n"),
                     1);
    ck_assert_msg(strstr(buf,
                         "cor.yaml:5:5: unknown key 'upstream' in "
                         "modules[1] (expected one of: load, upstreams); did "
                         "you mean 'upstreams'?")
                      != NULL,
                  "%s", buf);
}
END_TEST

COR_TEST_SUITE(corMaster)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_add_test(tc, test_reload_after_a_failed_replacement_keeps_the_master);
    tcase_add_test(tc, test_graceful_stop_refuses_new_connections);
    tcase_add_test(tc, test_reload_keeps_accepting_while_the_old_one_drains);
    tcase_add_test(tc, test_a_killed_master_leaves_nothing_behind);
    tcase_add_test(tc, test_check_refuses_files_a_start_could_not_open);
    tcase_add_test(tc, test_module_path_is_relative_to_the_config_file);
    tcase_add_test(tc, test_pid_file_is_relative_to_the_config_file);
    tcase_add_test(tc, test_reload_reads_the_included_files_again);
    tcase_add_test(tc, test_typos_in_module_keys_and_handlers_say_what_exists);
    tcase_add_test(tc, test_typos_in_nested_keys_say_the_nearest);
}
