/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a hostile or clumsy client does to a connection, against the real
 * binary: a connection reset under requests in flight, a chunked body in
 * tiny chunks, an upload refused while it is still being sent, a body that
 * trickles, a head sent a byte at a time, a fragment in the target, many
 * header fields, and what idle connections cost in memory.
 */
#include "corTest.h"
#include "corServer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static CorServer server;
static char buf[1 << 21];

static void
start(const char* extra)
{
    ck_assert_int_eq(corServerStartWith(&server, extra), 0);
}

static void
tearDown(void)
{
    corServerStop(&server);
}

/* The generation: the master's one child. */
static pid_t
generationPid(void)
{
    char path[64];
    long pid = 0;
    FILE* f;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", server.pid,
             server.pid);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld", &pid), 1);
    fclose(f);
    return (pid_t)pid;
}

/* A /proc/PID/status field in kB. */
static long
statusKb(pid_t pid, const char* field)
{
    char path[64];
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    FILE* f;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = atol(line + n + 1);
        }
    }
    fclose(f);
    return kb;
}

/* User and system CPU time of a process, in ms. */
static long
cpuMs(pid_t pid)
{
    char path[64];
    char stat[1024];
    unsigned long user = 0;
    unsigned long sys = 0;
    const char* p;
    FILE* f;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(stat, sizeof(stat), f));
    fclose(f);
    p = strrchr(stat, ')');
    ck_assert_int_eq(sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
                            "%*u %*u %lu %lu",
                            &user, &sys),
                     2);
    return (long)((user + sys) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

static void
resetConnection(int fd)
{
    struct linger reset = { .l_onoff = 1, .l_linger = 0 };

    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(fd);
}

static void
helloStillServed(void)
{
    ck_assert_int_eq(corRequest(server.port,
                                "GET /hello HTTP/1.1\r\n"
                                "Host: t\r\n\r\n",
                                buf, sizeof(buf)),
                     200);
}

/*
 * A connection that dies while a request of it waits (a coroutine, or a
 * worker with ?worker=1), with output pending ahead of it: an answer
 * bigger than the kernel's send buffer, read only until the requests
 * behind it are served (a 900 000-byte answer, under the high water, then
 * the waiting one), so that the second answer is still unsent; then a
 * reset (the flush fails) or no more reading (the send timer fires). The
 * waiting one reads its method, path, headers and body after its connection is
 * gone; the ASan run catches a read of freed memory.
 */
/* What the answers' reader is told and says. */
typedef struct {
    int fd;
    atomic_bool stop;
    int failed; /* errno, or ECONNRESET for an end */
} AnswerReader;

static AnswerReader reader;
static pthread_t readerThread;

static void*
readAnswers(void* arg)
{
    AnswerReader* r = arg;
    static char sink[65536];

    r->failed = 0;
    while (!atomic_load(&r->stop)) {
        struct pollfd p = { .fd = r->fd, .events = POLLIN };
        ssize_t n;

        if (poll(&p, 1, 10) <= 0) {
            continue;
        }
        n = recv(r->fd, sink, sizeof(sink), 0);
        if (n <= 0) {
            r->failed = n < 0 ? errno : ECONNRESET;
            break;
        }
    }
    return NULL;
}

/* One try; false when the server cut the connection before the waiting
 * request ran (the reader fell behind past send_timeout: what the test
 * means to do did not happen, and it is tried again). */
static bool
dieUnderOnce(const char* query, bool reset)
{
    const char* ran = corTestCoroutines() && query[0] == '\0'
                          ? "cor_requests_total{ran=\"coroutine\"}"
                          : "cor_requests_total{ran=\"worker\"}";
    long servedBefore = corMetric(server.port, ran);
    char req[1024];
    int fd = corConnect(server.port);
    long t0 = corNowMs();
    int n = snprintf(req, sizeof(req),
                     "GET /bytes?n=6000000 HTTP/1.1\r\nHost: t\r\n\r\n"
                     "GET /bytes?n=900000 HTTP/1.1\r\nHost: t\r\n\r\n"
                     "POST /waitecho?ms=1500%s HTTP/1.1\r\nHost: t\r\n"
                     "X-Long: %0200d\r\nContent-Length: 5\r\n\r\nhello"
                     "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n",
                     query, 7);

    ck_assert_int_eq(corSendAll(fd, req, (size_t)n), 0);
    /* The answers are read on a thread of their own while this one asks
     * the server whether the waiting request ran: read between two such
     * questions, a loaded machine's slow one left the connection unread
     * past send_timeout, and the server rightly cut it first. */
    reader.fd = fd;
    atomic_store(&reader.stop, false);
    ck_assert_int_eq(pthread_create(&readerThread, NULL, readAnswers, &reader),
                     0);
    while (corMetric(server.port, ran) == servedBefore
           && corNowMs() - t0 < 10000) {
        usleep(10 * 1000);
    }
    atomic_store(&reader.stop, true);
    pthread_join(readerThread, NULL);
    if (reader.failed != 0) {
        fprintf(stderr,
                "corHttpHarden: the answers ended before the "
                "waiting request ran (recv: %s), after %ld ms: again\n",
                strerror(reader.failed), corNowMs() - t0);
        close(fd);
        return false;
    }
    ck_assert_int_lt(corNowMs() - t0, 10000);
    if (reset) {
        resetConnection(fd);
    }
    usleep(2000 * 1000);
    if (!reset) {
        close(fd);
    }
    helloStillServed();
    return true;
}

/* Three tries at most: a machine so loaded that the reader falls behind
 * three times running says nothing about the server. */
static void
dieUnder(const char* query, bool reset)
{
    int tries = 1;

    while (!dieUnderOnce(query, reset)) {
        ck_assert_msg(++tries <= 3, "the server cut the connection before "
                                    "the waiting request ran, three times");
        helloStillServed();
    }
}

START_TEST(test_connection_dies_under_a_waiting_coroutine_request)
{
    start("limits: { send_timeout: 500ms }\n");
    dieUnder("", true);
    dieUnder("", false);
}
END_TEST

START_TEST(test_connection_dies_under_a_waiting_worker_request)
{
    start("limits: { send_timeout: 500ms }\n");
    dieUnder("&worker=1", true);
    dieUnder("&worker=1", false);
}
END_TEST

/* A client that pipelined its requests and then shut its side still gets
 * every answer, the waiting one's first. */
START_TEST(test_pipelined_then_shut_gets_its_answers)
{
    const char* req = "POST /waitecho?ms=200 HTTP/1.1\r\nHost: t\r\n"
                      "Content-Length: 4\r\n\r\nbody"
                      "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd;

    start(NULL);
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    shutdown(fd, SHUT_WR);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert_ptr_nonnull(strstr(corBody(buf), "POST /waitecho"));
    ck_assert_ptr_nonnull(strstr(corBody(buf), "body"));
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    close(fd);
}
END_TEST

/*
 * The same with the waiting request last. Its client's end may come in
 * the segment of the requests (a half-close the server can see as such:
 * the request is served) or just after, while the request waits, which a
 * server cannot tell from a client that left (nginx cancels it too): the
 * request is then cancelled. Either way the answer before it arrives
 * whole, the waiting one is answered, and the connection then ends.
 */
START_TEST(test_half_closed_batch_ending_in_a_wait_gets_its_answers)
{
    const char* req = "GET /bytes?n=900000 HTTP/1.1\r\nHost: t\r\n\r\n"
                      "GET /sleep?ms=300 HTTP/1.1\r\nHost: t\r\n\r\n";
    ssize_t got;
    int fd;

    start(NULL);
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    shutdown(fd, SHUT_WR);
    /* Read late: the first answer's output events, each carrying the
     * client's end, come while the second request waits. */
    usleep(100 * 1000);
    got = corReadResponse(fd, buf, sizeof(buf), 5000);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert_int_eq(got, strstr(buf, "\r\n\r\n") - buf + 4 + 900000);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert(corStatus(buf) == 200 || corStatus(buf) == 503);
    ck_assert(corPeerClosed(fd, 1000));
    close(fd);
}
END_TEST

/* A request whose end came with it is answered, then the connection
 * closes at once, not at keepalive_timeout. */
START_TEST(test_half_closed_keep_alive_closes_after_its_answer)
{
    const char* req = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd;

    start(NULL);
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    shutdown(fd, SHUT_WR);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert(corPeerClosed(fd, 1000));
    close(fd);
}
END_TEST

/* More pipelined requests than the input buffer holds, with a head cut
 * at the buffer's end: every one is answered (a read that filled the
 * buffer reads on once requests were served). */
START_TEST(test_pipeline_longer_than_the_buffer)
{
    enum { COUNT = 1000 };
    static char req[COUNT * 48];
    size_t n = 0;
    int fd;

    start("limits: { header_bytes: 1KiB, body_bytes: 0, "
          "request_timeout: 3s }\n");
    for (int i = 0; i < COUNT; i++) {
        n += (size_t)sprintf(req + n,
                             "GET /hello?%04d HTTP/1.1\r\n"
                             "Host: t\r\n\r\n",
                             i);
    }
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, n), 0);
    for (int i = 0; i < COUNT; i++) {
        ck_assert_msg(corReadResponse(fd, buf, sizeof(buf), 2000) > 0,
                      "answer %d", i);
        ck_assert_int_eq(corStatus(buf), 200);
    }
    close(fd);
}
END_TEST

/* A client that leaves while its request waits (a close or a reset)
 * cancels the request: its wait ends long before its 5 s, on a coroutine
 * or a worker. */
static void
leaveDuring(bool reset)
{
    long cancelled = corMetric(server.port, "cor_requests_cancelled_total");
    const char* req = "GET /sleep?ms=5000 HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd = corConnect(server.port);
    long t;

    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    usleep(100 * 1000);
    if (reset) {
        resetConnection(fd);
    } else {
        close(fd);
    }
    t = corNowMs();
    while (corMetric(server.port, "cor_requests_cancelled_total") == cancelled
           && corNowMs() - t < 4000) {
        usleep(20 * 1000);
    }
    ck_assert_int_lt(corNowMs() - t, 2000);
}

START_TEST(test_client_leaving_cancels_its_request)
{
    start(NULL);
    leaveDuring(false);
    leaveDuring(true);
    helloStillServed();
}
END_TEST

/* What a waiting request reads is its own, whole, after the wait. */
START_TEST(test_waiting_request_reads_its_own_input)
{
    const char* req = "POST /waitecho?ms=100 HTTP/1.1\r\nHost: t\r\n"
                      "X-One: first\r\nContent-Length: 6\r\n\r\nabcdef"
                      "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd;

    start(NULL);
    fd = corConnect(server.port);
    ck_assert_int_eq(corSendAll(fd, req, strlen(req)), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert_ptr_nonnull(strstr(corBody(buf), "X-One: first\n"));
    ck_assert_ptr_nonnull(strstr(corBody(buf), "\nabcdef"));
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    close(fd);
}
END_TEST

/* 1 048 000 bytes in 16-byte chunks, under body_bytes: the framing counts
 * against neither the buffer nor the limit. */
START_TEST(test_chunked_body_in_tiny_chunks)
{
    const size_t bodyLen = 1048000;
    const char* head = "POST /echo HTTP/1.1\r\nHost: t\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n";
    size_t cap = strlen(head) + bodyLen / 16 * 22 + 8;
    char* req = malloc(cap);
    size_t n = 0;
    long t0;
    long ms;
    ssize_t got;
    int fd;

    ck_assert_ptr_nonnull(req);
    start("limits: { body_bytes: 1MiB }\n");
    n += (size_t)sprintf(req, "%s", head);
    for (size_t i = 0; i < bodyLen / 16; i++) {
        n += (size_t)sprintf(req + n, "10\r\n%016zu\r\n", i);
    }
    n += (size_t)sprintf(req + n, "0\r\n\r\n");
    fd = corConnect(server.port);
    t0 = corNowMs();
    ck_assert_int_eq(corSendAll(fd, req, n), 0);
    got = corReadResponse(fd, buf, sizeof(buf), 10000);
    ms = corNowMs() - t0;
    fprintf(stderr, "1 048 000 bytes in 16-byte chunks: %ld ms\n", ms);
    ck_assert_int_gt(got, (ssize_t)bodyLen);
    ck_assert_int_eq(corStatus(buf), 200);
    ck_assert_int_eq(memcmp(corBody(buf), "0000000000000000", 16), 0);
    ck_assert_int_lt(ms, 3000);
    close(fd);
    free(req);
}
END_TEST

/*
 * A 2 MiB upload refused with 413 while the client is still sending it:
 * the client reads the answer, not a reset (lingering close), every time.
 */
START_TEST(test_refused_upload_still_reads_its_answer)
{
    static char body[2 << 20];
    const char* head = "POST /echo HTTP/1.1\r\nHost: t\r\n"
                       "Content-Length: 2097152\r\n\r\n";

    start("limits: { body_bytes: 1MiB }\n");
    memset(body, 'x', sizeof(body));
    for (int i = 0; i < 5; i++) {
        int fd = corConnect(server.port);
        size_t sent = 0;

        ck_assert_int_eq(corSendAll(fd, head, strlen(head)), 0);
        while (sent < sizeof(body)) {
            ssize_t n = send(fd, body + sent, sizeof(body) - sent,
                             MSG_NOSIGNAL);

            ck_assert_msg(n > 0, "send: %s", strerror(errno));
            sent += (size_t)n;
        }
        ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
        ck_assert_int_eq(corStatus(buf), 413);
        ck_assert(corPeerClosed(fd, 2000));
        close(fd);
    }
    helloStillServed();
}
END_TEST

/* A body that trickles in a byte every 200 ms keeps within body_timeout,
 * but the whole request is bound by request_timeout: the connection is cut
 * then (with a 408, which a client still sending may see as a reset). */
START_TEST(test_trickling_body_is_cut_at_the_request_timeout)
{
    const char* head = "POST /echo HTTP/1.1\r\nHost: t\r\n"
                       "Content-Length: 100\r\n\r\n";
    long t0;
    long ms;
    int fd;
    ssize_t got;

    start("limits: { request_timeout: 1s, body_timeout: 5s }\n");
    fd = corConnect(server.port);
    t0 = corNowMs();
    ck_assert_int_eq(corSendAll(fd, head, strlen(head)), 0);
    while (corNowMs() - t0 < 4000) {
        struct pollfd answer = { .fd = fd, .events = POLLIN };

        if (send(fd, "x", 1, MSG_NOSIGNAL) != 1 || poll(&answer, 1, 200) > 0) {
            break;
        }
    }
    ms = corNowMs() - t0;
    got = corReadResponse(fd, buf, sizeof(buf), 2000);
    ck_assert_int_lt(ms, 2500);
    ck_assert(got <= 0 || corStatus(buf) == 408);
    close(fd);
}
END_TEST

/* A head sent a byte at a time costs the server linear time: it is parsed
 * when its end comes (or it doubled), not at every byte. */
START_TEST(test_head_a_byte_at_a_time_is_cheap)
{
    static char req[40000];
    size_t n = 0;
    long cpu;
    int fd;

    start("limits: { header_bytes: 64KiB }\n");
    n += (size_t)sprintf(req, "GET /hello HTTP/1.1\r\nHost: t\r\n");
    while (n < sizeof(req) - 1000) {
        n += (size_t)sprintf(req + n, "X-Pad-%zu: %0900d\r\n", n, 0);
    }
    n += (size_t)sprintf(req + n, "\r\n");
    fd = corConnect(server.port);
    cpu = cpuMs(generationPid());
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(send(fd, req + i, 1, MSG_NOSIGNAL), 1);
    }
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 10000), 0);
    ck_assert_int_eq(corStatus(buf), 200);
    cpu = cpuMs(generationPid()) - cpu;
    fprintf(stderr,
            "a %zu-byte head, a byte a send: %ld ms of the "
            "server's CPU\n",
            n, cpu);
    /* The reads alone cost that many system calls; a parse per read of
     * all that came before costs seconds. */
    ck_assert_int_lt(cpu, 1500);
    close(fd);
}
END_TEST

START_TEST(test_fragment_is_dropped)
{
    start(NULL);
    ck_assert_int_eq(corRequest(server.port,
                                "GET /hello#top HTTP/1.1\r\n"
                                "Host: t\r\n\r\n",
                                buf, sizeof(buf)),
                     200);
    ck_assert_int_eq(corRequest(server.port,
                                "GET /echo?x=1#a/b?c "
                                "HTTP/1.1\r\nHost: t\r\n\r\n",
                                buf, sizeof(buf)),
                     200);
}
END_TEST

/* header_count can be raised past 100; past it, 431. */
static int
manyHeaders(int count)
{
    static char req[65536];
    size_t n = (size_t)sprintf(req, "GET /hello HTTP/1.1\r\nHost: t\r\n");

    for (int i = 1; i < count; i++) {
        n += (size_t)sprintf(req + n, "X-H%d: %d\r\n", i, i);
    }
    sprintf(req + n, "\r\n");
    return corRequest(server.port, req, buf, sizeof(buf));
}

START_TEST(test_header_count_past_100)
{
    start("limits: { header_count: 300, header_bytes: 32KiB }\n");
    ck_assert_int_eq(manyHeaders(250), 200);
    ck_assert_int_eq(manyHeaders(300), 200);
    ck_assert_int_eq(manyHeaders(301), 431);
}
END_TEST

/* A server built with sanitizers holds more per allocation than a user's:
 * what it holds per connection says nothing. */
static bool
serverSanitized(void)
{
    const char* sanitized = getenv("COR_TEST_SANITIZED");

    return sanitized != NULL && strcmp(sanitized, "1") == 0;
}

/* A server of one loop, for what its process holds per connection. */
static void
startOneLoop(void)
{
    struct rlimit files;

    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    ck_assert_int_eq(
        corServerStart(
            &server,
            "runtime: { loops: 1, coroutines: { enabled: {COROUTINES}, "
            "per_loop: 4096 } }\n"
            "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
            "modules: [ { load: http }, { load: hello } ]\n"
            "routes: [ { match: \"GET /hello\", handler: hello }, "
            "{ match: \"GET /sleep\", handler: sleep } ]\n"
            "log: { pid_file: {DIR}/cor.pid }\n"),
        0);
    /* Warm the loop's caches and the allocator first. */
    for (int i = 0; i < 50; i++) {
        helloStillServed();
    }
}

/* RSS growth per connection, in bytes, over conns connections that each
 * sent req, their answers read (wait false) or not (a request waits). */
static long
bytesPerConnection(const char* req, int conns, bool wait)
{
    static int fds[4000];
    pid_t gen = generationPid();
    long before = statusKb(gen, "VmRSS");
    long after;

    ck_assert_int_le(conns, 4000);
    for (int i = 0; i < conns; i++) {
        fds[i] = corConnect(server.port);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(corSendAll(fds[i], req, strlen(req)), 0);
        if (!wait) {
            ck_assert_int_gt(corReadResponse(fds[i], buf, sizeof(buf), 5000),
                             0);
        }
    }
    usleep(300 * 1000);
    after = statusKb(gen, "VmRSS");
    for (int i = 0; i < conns; i++) {
        close(fds[i]);
    }
    return (after - before) * 1024 / conns;
}

/*
 * Idle keep-alive connections, each after one request, hold no buffer: a
 * few hundred bytes each (nginx: about 500), where they held 15.6 KB.
 * make bench measures it beside nginx; this bound only catches a
 * connection that keeps its buffers again.
 */
START_TEST(test_idle_connections_hold_no_buffers)
{
    long each;

    if (serverSanitized()) {
        return;
    }
    startOneLoop();
    each = bytesPerConnection("GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", 2000,
                              false);
    fprintf(stderr, "2000 idle connections: %ld bytes each\n", each);
    ck_assert_int_lt(each, 2048);
}
END_TEST

/* A connection with a coroutine waiting costs its stack's touched page,
 * its request's head and a small arena: under the 8 KB target (it cost
 * 19.7 KB). Coroutines only: a worker holds a thread. */
START_TEST(test_waiting_coroutines_are_cheap)
{
    long each;

    if (!corTestCoroutines() || serverSanitized()) {
        return;
    }
    startOneLoop();
    each = bytesPerConnection("GET /sleep?ms=5000 HTTP/1.1\r\nHost: t\r\n"
                              "\r\n",
                              1000, true);
    fprintf(stderr, "1000 waiting coroutines: %ld bytes each\n", each);
    ck_assert_int_lt(each, 8192);
}
END_TEST

COR_TEST_SUITE(corHttpHarden)
{
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_connection_dies_under_a_waiting_coroutine_request);
    tcase_add_test(tc, test_connection_dies_under_a_waiting_worker_request);
    tcase_add_test(tc, test_pipelined_then_shut_gets_its_answers);
    tcase_add_test(tc, test_client_leaving_cancels_its_request);
    tcase_add_test(tc,
                   test_half_closed_batch_ending_in_a_wait_gets_its_answers);
    tcase_add_test(tc, test_half_closed_keep_alive_closes_after_its_answer);
    tcase_add_test(tc, test_pipeline_longer_than_the_buffer);
    tcase_add_test(tc, test_waiting_request_reads_its_own_input);
    tcase_add_test(tc, test_chunked_body_in_tiny_chunks);
    tcase_add_test(tc, test_refused_upload_still_reads_its_answer);
    tcase_add_test(tc, test_trickling_body_is_cut_at_the_request_timeout);
    tcase_add_test(tc, test_head_a_byte_at_a_time_is_cheap);
    tcase_add_test(tc, test_fragment_is_dropped);
    tcase_add_test(tc, test_header_count_past_100);
    tcase_add_test(tc, test_idle_connections_hold_no_buffers);
    tcase_add_test(tc, test_waiting_coroutines_are_cheap);
}
