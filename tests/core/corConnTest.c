/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connections out without a server: writes that wait for room (partial
 * writes on the connection's own fd) and one that runs out of time, the
 * keep-alive pool (reuse, one pool per peer, the per-peer bound, a
 * connection the peer closed, a broken one never pooled, a release on
 * another thread), a connect a cancel ends on a thread of its own, and a
 * coroutine that yields on a loop and reuses from the loop's own pool.
 * The core's files are included; the peers are sockets of this process.
 */
#include "corTest.h"

#include "../../core/corConn.c"
#include "../../core/corConnPool.c"
#include "../../core/corTransport.c"

#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

CorRuntime corRuntime;

/* The metrics' counter, kept here. */
static unsigned long counted[4];

void
corMetricsClient(CorClientCount which)
{
    counted[which]++;
}

/* A loopback listener; its port in *portP. */
static int
listener(int backlog, unsigned* portP)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr*)&addr, sizeof(addr)), 0);
    ck_assert_int_eq(listen(fd, backlog), 0);
    getsockname(fd, (struct sockaddr*)&addr, &len);
    *portP = ntohs(addr.sin_port);
    return fd;
}

static CorConn*
open1(unsigned port, const char* host)
{
    char why[256] = "";
    int err = 0;
    CorConn* c = corConnOpen(&(CorConnTarget){ .host = host, .port = port },
                             &err, why, sizeof(why));

    ck_assert_msg(c != NULL, "%d %s", err, why);
    return c;
}

static void
setUp(void)
{
    signal(SIGPIPE, SIG_IGN);
    corConnSetup(NULL, NULL);
}

/* ---- Writes -------------------------------------------------------------- */

typedef struct {
    int fd;
    size_t total;
} Drain;

/* Reads what comes, slowly at first, to its end. */
static void*
drainPeer(void* arg)
{
    Drain* d = arg;
    char chunk[65536];
    ssize_t n;

    usleep(50 * 1000);
    while ((n = read(d->fd, chunk, sizeof(chunk))) > 0) {
        d->total += (size_t)n;
    }
    return NULL;
}

/* 8 MiB into a peer that reads late: the socket takes part, the write
 * waits for room (poll here: no coroutine) and goes on, to the end. */
START_TEST(test_write_waits_for_room)
{
    enum { LEN = 8 << 20 };
    unsigned port;
    int l = listener(4, &port);
    CorConn* c = open1(port, "127.0.0.1");
    char* data = calloc(1, LEN);
    Drain d = { .fd = accept(l, NULL, NULL) };
    pthread_t thread;

    pthread_create(&thread, NULL, drainPeer, &d);
    ck_assert_int_eq(corConnWriteAll(c, data, LEN, 30000), 0);
    corConnClose(c);
    pthread_join(thread, NULL);
    ck_assert_uint_eq(d.total, LEN);
    free(data);
    close(d.fd);
    close(l);
}
END_TEST

/* A peer that never reads: the write's deadline, and the connection is
 * not pooled after. */
START_TEST(test_write_to_a_full_buffer_times_out)
{
    enum { LEN = 64 << 20 };
    unsigned port;
    int l = listener(4, &port);
    CorConn* c = open1(port, "127.0.0.1");
    char* data = calloc(1, LEN);

    ck_assert_int_eq(corConnWriteAll(c, data, LEN, 100), -ETIMEDOUT);
    corConnRelease(c);
    c = open1(port, "127.0.0.1");
    ck_assert(!corConnReused(c));
    corConnClose(c);
    free(data);
    close(l);
}
END_TEST

/* ---- The pool ------------------------------------------------------------ */

START_TEST(test_pool_reuses_per_peer_up_to_its_bound)
{
    CorConfig cf = { .client = { .connectTimeoutMs = 1000,
                                 .keepalivePerPeer = 2,
                                 .idleTimeoutMs = 60000 } };
    unsigned port;
    int l = listener(16, &port);
    CorConn* c[3];
    CorConn* other;
    char name[64];
    int reused = 0;

    corConnSetup(&cf, NULL);
    for (int i = 0; i < 3; i++) {
        c[i] = open1(port, "127.0.0.1");
        ck_assert(!corConnReused(c[i]));
    }
    for (int i = 0; i < 3; i++) {
        corConnRelease(c[i]);
    }
    /* Another peer (the same address by another name) has none. */
    other = open1(port, "::ffff:127.0.0.1");
    ck_assert(!corConnReused(other));
    snprintf(name, sizeof(name), "[::ffff:127.0.0.1]:%u", port);
    ck_assert_str_eq(corConnPeer(other), name);
    corConnClose(other);
    for (int i = 0; i < 3; i++) {
        c[i] = open1(port, "127.0.0.1");
        reused += corConnReused(c[i]);
    }
    ck_assert_int_eq(reused, 2);
    for (int i = 0; i < 3; i++) {
        corConnClose(c[i]);
    }
    close(l);
}
END_TEST

/* The default (auto) keeps what the load had in use at once: 64 given
 * back at the same moment are 64 taken again, none opened anew (a bound
 * of 32 closed half of them at every such burst). */
START_TEST(test_pool_by_default_keeps_what_was_in_use)
{
    enum { N = 64 };
    unsigned port;
    int l = listener(N + 8, &port);
    CorConn* c[N];
    int reused = 0;

    corConnSetup(
        &(CorConfig){ .client = { .connectTimeoutMs = 1000,
                                  .keepalivePerPeer = COR_CONN_KEEPALIVE_AUTO,
                                  .idleTimeoutMs = 60000 } },
        NULL);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            c[i] = open1(port, "127.0.0.1");
            reused += corConnReused(c[i]);
        }
        for (int i = 0; i < N; i++) {
            corConnRelease(c[i]);
        }
    }
    ck_assert_int_eq(reused, N);
    for (int i = 0; i < N; i++) {
        corConnClose(open1(port, "127.0.0.1"));
    }
    close(l);
}
END_TEST

/* A listener whose one connection is in the pool and was closed by the
 * peer just now. */
static int
pooledThenClosedByPeer(unsigned* port)
{
    int l = listener(4, port);
    CorConn* c = open1(*port, "127.0.0.1");
    int peer = accept(l, NULL, NULL);

    corConnRelease(c);
    close(peer);
    return l;
}

/* The peer closed the idle connection, or sent bytes nobody asked for:
 * the shared pool's take looks, however young the connection is. */
START_TEST(test_pool_skips_what_the_peer_closed)
{
    unsigned port;
    int l = pooledThenClosedByPeer(&port);
    CorConn* c;
    int peer;

    usleep(20 * 1000);
    c = open1(port, "127.0.0.1");
    ck_assert(!corConnReused(c));
    corConnRelease(c);
    /* Stray bytes make it unfit too. */
    peer = accept(l, NULL, NULL);
    ck_assert_int_eq(write(peer, "x", 1), 1);
    usleep(20 * 1000);
    c = open1(port, "127.0.0.1");
    ck_assert(!corConnReused(c));
    corConnClose(c);
    ck_assert_uint_eq(counted[COR_CLIENT_STALE], 2);
    ck_assert_uint_eq(counted[COR_CLIENT_NEW], 3);
    ck_assert_uint_eq(counted[COR_CLIENT_REUSED], 0);
    close(peer);
    close(l);
}
END_TEST

/* A connection read to the peer's end is not pooled; one released on
 * another thread than its own is closed. */
static void*
releaseHere(void* arg)
{
    corConnRelease(arg);
    return NULL;
}

START_TEST(test_pool_keeps_only_fit_connections)
{
    unsigned port;
    int l = listener(4, &port);
    CorConn* c = open1(port, "127.0.0.1");
    int peer = accept(l, NULL, NULL);
    char byte;
    pthread_t thread;

    close(peer);
    ck_assert_int_eq(corConnRead(c, &byte, 1, 1000), 0);
    corConnRelease(c);
    c = open1(port, "127.0.0.1");
    ck_assert(!corConnReused(c));
    ck_assert_int_eq(corConnRead(c, &byte, 1, 0), -EAGAIN);
    ck_assert_int_eq(corConnRead(c, &byte, 1, 50), -ETIMEDOUT);
    corConnRelease(c);
    c = open1(port, "127.0.0.1");
    ck_assert(!corConnReused(c));
    corConnRelease(c);
    c = open1(port, "127.0.0.1");
    ck_assert(corConnReused(c));
    /* A worker shares the main thread's pool: the same pool, kept. */
    pthread_create(&thread, NULL, releaseHere, c);
    pthread_join(thread, NULL);
    c = open1(port, "127.0.0.1");
    ck_assert(corConnReused(c));
    corConnClose(c);
    corConnPoolShutdown();
    close(l);
}
END_TEST

/* Several addresses share the connect deadline: each an equal part of
 * what is left, the last all of it. */
START_TEST(test_addresses_share_the_connect_deadline)
{
    uint64_t now = corEvClockMs();
    uint64_t deadline = now + 1000;
    uint64_t first = attemptDeadline(deadline, 2);

    ck_assert_uint_ge(first, now + 450);
    ck_assert_uint_le(first, now + 550);
    ck_assert_uint_le(attemptDeadline(deadline, 4), now + 300);
    ck_assert_uint_eq(attemptDeadline(deadline, 1), deadline);
    ck_assert_uint_eq(attemptDeadline(now - 1, 3), now - 1);
}
END_TEST

/* ---- Cancels ------------------------------------------------------------- */

typedef struct {
    unsigned port;
    CorRestCancel cancel;
    int err;
    char why[256];
} Connecting;

static void*
connectCancelled(void* arg)
{
    Connecting* w = arg;
    CorConn* c;

    corRestCancelBind(&w->cancel);
    c = corConnOpen(&(CorConnTarget){ .host = "127.0.0.1",
                                      .port = w->port,
                                      .connectTimeoutMs = 60000 },
                    &w->err, w->why, sizeof(w->why));
    corRestCancelBind(NULL);
    ck_assert_ptr_null(c);
    return NULL;
}

/* A connect that never completes (a full backlog), on a thread: its
 * request's cancel ends it, ECANCELED, and no other address is tried. */
START_TEST(test_cancel_ends_a_connect)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    Connecting w = { 0 };
    int l = listener(0, &w.port);
    int filler = socket(AF_INET, SOCK_STREAM, 0);
    pthread_t thread;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)w.port);
    ck_assert_int_eq(connect(filler, (struct sockaddr*)&addr, sizeof(addr)), 0);
    pthread_create(&thread, NULL, connectCancelled, &w);
    usleep(100 * 1000);
    corRestCancel(&w.cancel);
    pthread_join(thread, NULL);
    ck_assert_int_eq(w.err, -ECANCELED);
    ck_assert_msg(strstr(w.why, "cancelled") != NULL, "%s", w.why);
    close(filler);
    close(l);
}
END_TEST

/* ---- On a loop ----------------------------------------------------------- */

typedef struct {
    unsigned port;
    int reused[2];
    char echo[2][8];
    bool done;
} Exchange;

/* Echoes each connection's bytes back, one connection at a time. */
static void*
echoPeer(void* arg)
{
    int l = *(int*)arg;
    int fd = accept(l, NULL, NULL);
    char chunk[64];
    ssize_t n;

    while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
        if (write(fd, chunk, (size_t)n) != n) {
            break;
        }
    }
    close(fd);
    return NULL;
}

static void
exchangeTwice(void* arg)
{
    Exchange* x = arg;

    for (int i = 0; i < 2; i++) {
        CorConn* c = open1(x->port, "localhost");

        x->reused[i] = corConnReused(c);
        ck_assert_int_eq(corConnWriteAll(c, "ping", 4, 1000), 0);
        ck_assert_int_eq(corConnRead(c, x->echo[i], 4, 1000), 4);
        corConnRelease(c);
    }
    x->done = true;
}

/* A coroutine's waits yield to the loop; its connection goes back to the
 * loop's own pool (not the shared one) and comes out of it again. */
START_TEST(test_coroutine_uses_the_loops_pool)
{
    Exchange x = { 0 };
    int l = listener(4, &x.port);
    CorEvLoop* loop = corEvLoopCreate();
    pthread_t thread;

    pthread_create(&thread, NULL, echoPeer, &l);
    corEvLoopBind(loop);
    ck_assert_int_eq(corCoLoopSpawn(loop, exchangeTwice, &x), 0);
    while (!x.done) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 1000), 0);
    }
    ck_assert_int_eq(x.reused[0], 0);
    ck_assert_int_eq(x.reused[1], 1);
    ck_assert_str_eq(x.echo[1], "ping");
    ck_assert_ptr_nonnull(loopPool);
    ck_assert_ptr_null(idleOldest(&sharedPool));
    ck_assert_ptr_nonnull(idleOldest(loopPool));
    corConnPoolLoopExit();
    ck_assert_ptr_null(corConnPoolCurrent());
    pthread_join(thread, NULL);
    corEvLoopDestroy(loop);
    close(l);
}
END_TEST

/* Opens a connection and gives it back to the loop's pool, or opens one
 * and says whether it came from there. */
typedef struct {
    unsigned port;
    bool reused;
    bool done;
} Idle;

static void
idleRelease(void* arg)
{
    Idle* x = arg;
    CorConn* c = open1(x->port, "127.0.0.1");

    x->reused = corConnReused(c);
    corConnRelease(c);
    x->done = true;
}

/* Run idleRelease as a coroutine of loop to its end; whether its
 * connection came from the pool. */
static bool
idleRun(CorEvLoop* loop, Idle* x)
{
    x->done = false;
    ck_assert_int_eq(corCoLoopSpawn(loop, idleRelease, x), 0);
    for (int i = 0; i < 500 && !x->done; i++) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 10), 0);
    }
    ck_assert(x->done);
    return x->reused;
}

/* Turn loop until what counts STALE grew past stale (5 s at most). */
static void
turnUntilStale(CorEvLoop* loop, unsigned long stale)
{
    for (int i = 0; i < 500 && counted[COR_CLIENT_STALE] == stale; i++) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 10), 0);
    }
    ck_assert_uint_eq(counted[COR_CLIENT_STALE], stale + 1);
}

/* An idle connection of a loop's pool is watched by its loop: bytes that
 * come on it (the rest of an answer, one nobody asked for), or the peer's
 * end, close it at once, so no later take can hand it out. */
static void
loopPoolWatches(CorEvLoop* loop)
{
    Idle x = { 0 };
    int l = listener(4, &x.port);
    int peer;

    ck_assert_ptr_nonnull(loop);
    corEvLoopBind(loop);
    for (int round = 0; round < 2; round++) {
        unsigned long stale = counted[COR_CLIENT_STALE];

        ck_assert(!idleRun(loop, &x));
        peer = accept(l, NULL, NULL);
        if (round == 0) {
            ck_assert_int_eq(write(peer, "HTTP/1.1 200 OK\r\n", 17), 17);
        } else {
            close(peer);
        }
        turnUntilStale(loop, stale);
        ck_assert_ptr_null(idleOldest(loopPool));
        if (round == 0) {
            close(peer);
        }
    }
    ck_assert(!idleRun(loop, &x));
    ck_assert(idleRun(loop, &x));
    corConnPoolLoopExit();
    loopPoolClosed = false;
    corEvLoopDestroy(loop);
    close(l);
}

START_TEST(test_loop_pool_closes_what_the_peer_sends)
{
    loopPoolWatches(corEvLoopCreate());
}
END_TEST

START_TEST(test_loop_pool_closes_what_the_peer_sends_uring)
{
    CorEvLoop* loop = corEvLoopCreateWith(COR_EV_URING);

    if (loop == NULL) {
        return; /* no io_uring here (a seccomp filter, a kernel) */
    }
    loopPoolWatches(loop);
}
END_TEST

/* ---- A TLS record that comes in two pieces --------------------------------
 */

typedef struct {
    int listenFd;
    char certs[64];
} SplitServer;

/*
 * A TLS server that, once the handshake is done, sends one record of
 * application data in two pieces 3 s apart: its first 10 bytes, then the
 * rest. Its handshake runs over the socket; the record is written into a
 * memory BIO so that its bytes can be cut.
 */
static void*
splitServe(void* arg)
{
    SplitServer* s = arg;
    char path[128];
    char raw[256];
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    int fd = accept(s->listenFd, NULL, NULL);
    SSL* ssl;
    BIO* mem;
    int n;

    snprintf(path, sizeof(path), "%s/server.pem", s->certs);
    SSL_CTX_use_certificate_chain_file(ctx, path);
    snprintf(path, sizeof(path), "%s/server.key", s->certs);
    SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM);
    SSL_CTX_set_num_tickets(ctx, 0);
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
        mem = BIO_new(BIO_s_mem());
        SSL_set0_wbio(ssl, mem);
        SSL_write(ssl, "hello, in two pieces", 20);
        n = BIO_read(mem, raw, sizeof(raw));
        if (n > 10 && write(fd, raw, 10) == 10) {
            sleep(3);
            if (write(fd, raw + 10, (size_t)n - 10) < 0) {
                /* The client gave up: what the test expects. */
            }
        }
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return NULL;
}

/* Thread CPU time in ms. */
static long
threadCpuMs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Half a record came: the read waits for the rest on the socket, within
 * its deadline, instead of spinning on what OpenSSL holds undecoded. */
START_TEST(test_tls_read_of_half_a_record_waits)
{
    SplitServer server;
    CorTlsClient* tls;
    pthread_t thread;
    unsigned port;
    char command[128];
    char buf[64];
    char why[256] = "";
    int err = 0;
    CorConn* c;
    long cpu;
    struct timespec t0;
    struct timespec t1;
    ssize_t n;

    snprintf(server.certs, sizeof(server.certs), "/tmp/cor-conn-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(server.certs));
    snprintf(command, sizeof(command), "tests/tls/makeCerts %s", server.certs);
    ck_assert_int_eq(system(command), 0);
    server.listenFd = listener(4, &port);
    pthread_create(&thread, NULL, splitServe, &server);
    tls = corTlsClientNew(&(CorTlsClientOptions){ .insecure = true }, why,
                          sizeof(why));
    ck_assert_msg(tls != NULL, "%s", why);
    c = corConnOpen(&(CorConnTarget){ .host = "127.0.0.1",
                                      .port = port,
                                      .tls = true,
                                      .tlsClient = tls },
                    &err, why, sizeof(why));
    ck_assert_msg(c != NULL, "%d %s", err, why);
    cpu = threadCpuMs();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    n = corConnRead(c, buf, sizeof(buf), 1000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cpu = threadCpuMs() - cpu;
    ck_assert_int_eq(n, -ETIMEDOUT);
    ck_assert_int_lt((t1.tv_sec - t0.tv_sec) * 1000
                         + (t1.tv_nsec - t0.tv_nsec) / 1000000,
                     2000);
    ck_assert_int_lt(cpu, 300);
    corConnClose(c);
    corTlsClientFree(tls);
    pthread_join(thread, NULL);
    close(server.listenFd);
    snprintf(command, sizeof(command), "rm -rf %s", server.certs);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

COR_TEST_SUITE(corConn)
{
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setUp, NULL);
    tcase_add_test(tc, test_write_waits_for_room);
    tcase_add_test(tc, test_write_to_a_full_buffer_times_out);
    tcase_add_test(tc, test_pool_reuses_per_peer_up_to_its_bound);
    tcase_add_test(tc, test_pool_by_default_keeps_what_was_in_use);
    tcase_add_test(tc, test_pool_skips_what_the_peer_closed);
    tcase_add_test(tc, test_pool_keeps_only_fit_connections);
    tcase_add_test(tc, test_addresses_share_the_connect_deadline);
    tcase_add_test(tc, test_cancel_ends_a_connect);
    tcase_add_test(tc, test_tls_read_of_half_a_record_waits);
    if (COR_HAVE_COROUTINES) {
        tcase_add_test(tc, test_coroutine_uses_the_loops_pool);
        tcase_add_test(tc, test_loop_pool_closes_what_the_peer_sends);
        tcase_add_test(tc, test_loop_pool_closes_what_the_peer_sends_uring);
    }
}
