/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Limits and timeouts against the real binary: 431, 414, 413 (with
 * Expect: 100-continue too: never a 100 first), a body past
 * limits.body_memory spooled to an unlinked file that goes with its
 * request (read whole and mapped by its handler), the connection limit,
 * slowloris, a client that never reads, idle keep-alive connections, 10 000
 * idle connections beside a busy one, and accepting at the fd limit.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <dirent.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static CorServer server;
static char buf[1 << 16];

static void
start(const char* limits)
{
    ck_assert_int_eq(corServerStartWith(&server, limits), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
}

START_TEST(test_header_too_large_is_431)
{
    static char req[8192];
    int fd;

    start("limits: { header_bytes: 4KiB }\n");
    snprintf(req, sizeof(req),
             "GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: "
             "%05000d\r\n\r\n",
             0);
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 431);
    ck_assert(corPeerClosed(fd, 2000));
    close(fd);
}
END_TEST

START_TEST(test_target_too_long_is_414)
{
    static char req[8192];

    start("limits: { header_bytes: 4KiB }\n");
    memset(req, 'a', 6000);
    memcpy(req, "GET /", 5);
    strcpy(req + 6000, " HTTP/1.1\r\nHost: t\r\n\r\n");
    ck_assert_int_eq(corRequest(server.port, req, buf, sizeof(buf)), 414);
}
END_TEST

START_TEST(test_body_too_large_is_413_before_the_body)
{
    int fd;
    const char* head = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: "
                       "2000000\r\n\r\n";

    start("limits: { body_bytes: 1MiB }\n");
    fd = corConnect(server.port);
    /* Decided from the header: no body byte is sent at all. */
    ck_assert_int_eq(corSendAll(fd, head, strlen(head)), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 413);
    close(fd);
}
END_TEST

/* Asked to wait (Expect: 100-continue) with a length past the limit: the
 * 413 comes first, never a 100. */
START_TEST(test_body_too_large_is_413_not_100)
{
    int fd;
    const char* head = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: "
                       "2000000\r\nExpect: 100-continue\r\n\r\n";

    start("limits: { body_bytes: 1MiB }\n");
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, head, strlen(head)), 0);
    ck_assert_int_gt(corReadHead(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 413);
    close(fd);
}
END_TEST

/* The files of pid's open descriptors that were unlinked, in dir. */
static int
spooledFiles(pid_t pid, const char* dir)
{
    char path[64];
    char target[512];
    struct dirent* e;
    DIR* d;
    int count = 0;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    d = opendir(path);
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        char link[384];
        ssize_t n;

        snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
        n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0) {
            continue;
        }
        target[n] = '\0';
        count += strncmp(target, dir, strlen(dir)) == 0
                 && strstr(target, "(deleted)") != NULL;
    }
    closedir(d);
    return count;
}

/* Wait up to 3 s for pid to hold want spooled files in dir. */
static void
spooledWait(pid_t pid, const char* dir, int want)
{
    for (int i = 0; i < 150 && spooledFiles(pid, dir) != want; i++) {
        usleep(20 * 1000);
    }
    ck_assert_int_eq(spooledFiles(pid, dir), want);
}

static uint32_t
sum31(const char* p, size_t n)
{
    uint32_t sum = 0;

    for (size_t i = 0; i < n; i++) {
        sum = sum * 31 + (unsigned char)p[i];
    }
    return sum;
}

/*
 * Past limits.body_memory a body its handler takes whole goes to an
 * unlinked file in body_spool_dir, held while the body comes and the
 * handler runs, and gone with the request: answered, or its client gone
 * midway. The handler gets it whole, read (corRequestBodyRead) or mapped
 * (r->body); chunked too.
 */
START_TEST(test_body_past_body_memory_spooled_for_its_request_only)
{
    static char body[3000000];
    const char* head = "POST /bodysum HTTP/1.1\r\nHost: t\r\n"
                       "Content-Length: 3000000\r\n\r\n";
    char expect[64];
    char command[256];
    pid_t gen;
    int fd;

    start("limits: { body_bytes: 8MiB, body_memory: 64KiB, "
          "body_spool_dir: {DIR} }\n");
    gen = corServerGeneration(&server);
    for (size_t i = 0; i < sizeof(body); i++) {
        body[i] = (char)(i * 7 + i / 1000);
    }
    snprintf(expect, sizeof(expect), "length 3000000 sum %u\n",
             (unsigned)sum31(body, sizeof(body)));
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, head, strlen(head)), 0);
    ck_assert_int_eq(corSendAll(fd, body, 1000000), 0);
    spooledWait(gen, server.dir, 1);
    ck_assert_int_eq(corSendAll(fd, body + 1000000, 2000000), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_str_eq(corBody(buf), expect);
    spooledWait(gen, server.dir, 0);
    close(fd);
    /* A client that leaves midway takes its file with it. */
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, head, strlen(head)), 0);
    ck_assert_int_eq(corSendAll(fd, body, 1000000), 0);
    spooledWait(gen, server.dir, 1);
    close(fd);
    spooledWait(gen, server.dir, 0);
    /* Mapped, and chunked. */
    snprintf(command, sizeof(command), "%s/up.bin", server.dir);
    FILE* f = fopen(command, "w");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(body, 1, sizeof(body), f), sizeof(body));
    fclose(f);
    snprintf(command, sizeof(command),
             "-H 'Transfer-Encoding: chunked' "
             "--data-binary @%s/up.bin",
             server.dir);
    ck_assert_int_eq(corCurl(server.port, command, "/bodysum?map=1", buf,
                             sizeof(buf)),
                     0);
    ck_assert_str_eq(buf, expect);
    spooledWait(gen, server.dir, 0);
}
END_TEST

START_TEST(test_connections_past_the_limit_are_closed_and_counted)
{
    int fds[8];
    int extra;
    const char* req = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";

    start("limits: { connections: 8 }\n");
    for (int i = 0; i < 8; i++) {
        fds[i] = corConnect(server.port);
        ck_assert_int_eq(corSendAll(fds[i], req, strlen(req)), 0);
        ck_assert_int_gt(corReadResponse(fds[i], buf, sizeof(buf), 5000), 0);
    }
    extra = corConnect(server.port);
    ck_assert(corPeerClosed(extra, 2000));
    close(extra);
    close(fds[0]);
    usleep(200 * 1000);
    ck_assert_int_ge(corMetric(server.port, "cor_connections_refused_total"),
                     1);
    for (int i = 1; i < 8; i++) {
        close(fds[i]);
    }
}
END_TEST

START_TEST(test_slowloris_is_cut_while_others_are_served)
{
    const char* req = "GET /hello HTTP/1.1\r\nHost: t\r\nX-Slow: "
                      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    long start_ms;
    int slow;
    size_t sent = 0;

    start("limits: { request_timeout: 1s }\n");
    slow = corConnect(server.port);
    start_ms = corNowMs();
    /* One byte every 100 ms: the head would take 7 s to come. */
    while (sent < strlen(req) && corNowMs() - start_ms < 3000) {
        if (send(slow, req + sent, 1, MSG_NOSIGNAL) != 1) {
            break;
        }
        sent++;
        if (sent % 5 == 0) {
            long t = corNowMs();

            ck_assert_int_eq(corRequest(server.port,
                                        "GET /hello HTTP/1.1\r\n"
                                        "Host: t\r\n\r\n",
                                        buf, sizeof(buf)),
                             200);
            ck_assert_int_lt(corNowMs() - t, 500);
        }
        usleep(100 * 1000);
    }
    /* Cut at the deadline of the whole head, with a 408. */
    ck_assert_int_gt(corReadResponse(slow, buf, sizeof(buf), 3000), 0);
    ck_assert_int_eq(corStatus(buf), 408);
    ck_assert_int_lt(corNowMs() - start_ms, 2500);
    close(slow);
}
END_TEST

START_TEST(test_client_that_never_reads_is_cut_at_the_send_timeout)
{
    const char* req = "GET /bytes?n=20000000 HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd;
    int small = 4096;
    long got = 0;
    ssize_t n;

    start("limits: { send_timeout: 1s }\n");
    fd = corConnect(server.port);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    sleep(3);
    /* The server gave up: what is buffered, then the end. */
    while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        got += n;
    }
    ck_assert(corPeerClosed(fd, 2000));
    ck_assert_int_lt(got, 20000000);
    close(fd);
    ck_assert_int_eq(corRequest(server.port,
                                "GET /hello HTTP/1.1\r\nHost: t"
                                "\r\n\r\n",
                                buf, sizeof(buf)),
                     200);
}
END_TEST

START_TEST(test_idle_keep_alive_connection_closed_at_its_timeout)
{
    const char* req = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd;
    long t;

    start("limits: { keepalive_timeout: 1s }\n");
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    t = corNowMs();
    ck_assert(corPeerClosed(fd, 3000));
    ck_assert_int_ge(corNowMs() - t, 900);
    close(fd);
}
END_TEST

/* keepalive_timeout 0 turns keep-alive off, as in nginx: a client that
 * takes its time over its first request is served (it was reset at
 * once), and the answer says Connection: close, then closes. */
START_TEST(test_keepalive_timeout_0_serves_one_request_a_connection)
{
    const char* req = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd;

    start("limits: { keepalive_timeout: 0s }\n");
    fd = corConnect(server.port);
    usleep(300 * 1000);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert_ptr_nonnull(strcasestr(buf, "Connection: close"));
    ck_assert(corPeerClosed(fd, 3000));
    close(fd);
}
END_TEST

static long
medianLatencyUs(int fd, int count)
{
    long samples[200];
    const char* req = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";

    for (int i = 0; i < count; i++) {
        struct timespec a;
        struct timespec b;

        clock_gettime(CLOCK_MONOTONIC, &a);
        ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
        ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        samples[i] = (b.tv_sec - a.tv_sec) * 1000000
                     + (b.tv_nsec - a.tv_nsec) / 1000;
    }
    for (int i = 0; i < count; i++) {
        for (int j = i + 1; j < count; j++) {
            if (samples[j] < samples[i]) {
                long t = samples[i];

                samples[i] = samples[j];
                samples[j] = t;
            }
        }
    }
    return samples[count / 2];
}

START_TEST(test_10000_idle_connections_beside_a_busy_one)
{
    enum { IDLE = 10000 };
    static int idle[IDLE];
    struct rlimit files;
    int busy;
    long before;
    long after;
    const char* req = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";

    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    ck_assert_uint_ge(files.rlim_cur, IDLE + 100);
    start("limits: { connections: 12000, keepalive_timeout: 120s }\n");
    busy = corConnect(server.port);
    before = medianLatencyUs(busy, 101);
    for (int i = 0; i < IDLE; i++) {
        idle[i] = corConnect(server.port);
        ck_assert_int_ge(idle[i], 0);
        if (i % 1000 == 0) {
            /* Each is a served keep-alive connection, not just a SYN. */
            ck_assert_int_eq(corSendAll(idle[i], req, strlen(req)), 0);
            ck_assert_int_gt(corReadResponse(idle[i], buf, sizeof(buf), 5000),
                             0);
        }
    }
    after = medianLatencyUs(busy, 101);
    /* All still open, and the busy one as quick (within noise). */
    ck_assert(!corPeerClosed(idle[IDLE - 1], 100));
    ck_assert_msg(after < before * 5 + 2000,
                  "median %ld us before, %ld us "
                  "with 10 000 idle connections",
                  before, after);
    for (int i = 0; i < IDLE; i++) {
        close(idle[i]);
    }
    close(busy);
}
END_TEST

/* Output that drained while a later pipelined request was still with its
 * handler: the send timer must not outlive it and cut that request. */
START_TEST(test_send_timer_does_not_cut_a_request_in_flight)
{
    const char* req = "GET /bytes?n=3000000 HTTP/1.1\r\nHost: t\r\n\r\n"
                      "GET /sleep?ms=1500 HTTP/1.1\r\nHost: t\r\n\r\n";
    static char big[4000000];
    int fd;

    start("limits: { send_timeout: 1s }\n");
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    ck_assert_int_gt(corReadResponse(fd, big, sizeof(big), 5000), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    close(fd);
}
END_TEST

/* User plus system CPU time of pid and its children, in clock ticks. */
static long
cpuTicks(pid_t pid)
{
    char command[256];
    char text[4096];
    long ticks = 0;

    snprintf(command, sizeof(command),
             "for p in %d $(pgrep -P %d); do cut "
             "-d')' -f2 /proc/$p/stat; done",
             (int)pid, (int)pid);
    ck_assert_int_eq(corShell(command, text, sizeof(text)), 0);
    for (char* line = strtok(text, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        unsigned long utime = 0;
        unsigned long stime = 0;

        /* After "pid (comm)": state, then 10 fields, then utime stime. */
        sscanf(line, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &utime, &stime);
        ticks += (long)(utime + stime);
    }
    return ticks;
}

static long
logLines(const char* text)
{
    char command[512];
    char count[64];

    snprintf(command, sizeof(command), "grep -c -F '%s' %s", text, server.log);
    corShell(command, count, sizeof(count));
    return strtol(count, NULL, 10);
}

/*
 * 100 clients hold connections to a server limited to 64 fds: accept
 * fails with EMFILE. It must pause instead of retrying at once (which
 * spun a core and wrote millions of log lines a second), report once a
 * second, count it, warn that limits.connections cannot be reached, and
 * serve again once the clients are gone.
 */
START_TEST(test_accept_at_the_fd_limit_pauses_and_reports)
{
    enum { CLIENTS = 100, WINDOW_MS = 2000 };
    int fds[CLIENTS];
    long ticks0;
    long lines0;
    long wall;
    double cpu;
    long t;

    ck_assert_int_eq(
        corServerStartFdLimit(
            &server,
            "runtime: { loops: 2, workers: 2, coroutines: { enabled: "
            "{COROUTINES} } }\n"
            "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
            "modules: [ { load: http }, { load: hello } ]\n"
            "routes: [ { match: \"GET /hello\", handler: hello }, "
            "{ match: \"GET /metrics\", handler: metrics } ]\n"
            "log: { pid_file: {DIR}/cor.pid }\n",
            64, 64),
        0);
    for (int i = 0; i < CLIENTS; i++) {
        fds[i] = corConnect(server.port);
        ck_assert_int_ge(fds[i], 0);
    }
    for (t = corNowMs(); logLines("Too many open files") == 0;) {
        ck_assert_int_lt(corNowMs() - t, 5000);
        usleep(20 * 1000);
    }
    ticks0 = cpuTicks(server.pid);
    lines0 = logLines("Too many open files");
    t = corNowMs();
    usleep(WINDOW_MS * 1000);
    wall = corNowMs() - t;
    cpu = (double)(cpuTicks(server.pid) - ticks0) / sysconf(_SC_CLK_TCK)
          * 1000.0 / (double)wall;
    ck_assert_msg(cpu < 0.3,
                  "the server used %.0f%% of a core at the fd "
                  "limit",
                  cpu * 100);
    ck_assert_int_le(logLines("Too many open files") - lines0, 4);
    ck_assert_int_eq(logLines("limits.connections is 10000 but the fd "
                              "limit (RLIMIT_NOFILE) is 64"),
                     1);

    for (int i = 0; i < CLIENTS; i++) {
        close(fds[i]);
    }
    for (t = corNowMs(); corRequest(server.port,
                                    "GET /hello HTTP/1.1\r\n"
                                    "Host: t\r\n\r\n",
                                    buf, sizeof(buf))
                         != 200;) {
        ck_assert_int_lt(corNowMs() - t, 5000);
        usleep(50 * 1000);
    }
    ck_assert_int_ge(corMetric(server.port, "cor_accept_fd_limit_total"), 1);
}
END_TEST

/* A soft fd limit below the hard one is raised to it at start: the
 * warning names the raised limit. */
START_TEST(test_the_soft_fd_limit_is_raised_to_the_hard_one)
{
    ck_assert_int_eq(
        corServerStartFdLimit(
            &server,
            "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
            "modules: [ { load: http } ]\n"
            "log: { pid_file: {DIR}/cor.pid }\n",
            64, 2048),
        0);
    ck_assert_int_eq(logLines("limits.connections is 10000 but the fd "
                              "limit (RLIMIT_NOFILE) is 2048"),
                     1);
}
END_TEST

COR_TEST_SUITE(corHttpLimits)
{
    tcase_add_test(tc, test_send_timer_does_not_cut_a_request_in_flight);
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_add_test(tc, test_header_too_large_is_431);
    tcase_add_test(tc, test_target_too_long_is_414);
    tcase_add_test(tc, test_body_too_large_is_413_before_the_body);
    tcase_add_test(tc, test_body_too_large_is_413_not_100);
    tcase_add_test(tc, test_body_past_body_memory_spooled_for_its_request_only);
    tcase_add_test(tc, test_connections_past_the_limit_are_closed_and_counted);
    tcase_add_test(tc, test_slowloris_is_cut_while_others_are_served);
    tcase_add_test(tc, test_client_that_never_reads_is_cut_at_the_send_timeout);
    tcase_add_test(tc, test_idle_keep_alive_connection_closed_at_its_timeout);
    tcase_add_test(tc,
                   test_keepalive_timeout_0_serves_one_request_a_connection);
    tcase_add_test(tc, test_10000_idle_connections_beside_a_busy_one);
    tcase_add_test(tc, test_accept_at_the_fd_limit_pauses_and_reports);
    tcase_add_test(tc, test_the_soft_fd_limit_is_raised_to_the_hard_one);
}
