/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS client API against `openssl s_server`, started by the test on a
 * loopback port and stopped by its PID, with the certificates of
 * tests/tls/makeCerts: a verified handshake with ALPN, a request over it,
 * resumption on the next connection; self-signed, expired and wrong-host
 * certificates refused with their reason; insecure mode; a server that
 * never answers the handshake hits the deadline. The waits poll here, and
 * (with coroutines) yield in a coroutine of a loop.
 */
#include "corTest.h"
#include "cor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char certs[64];
static pid_t serverPid;
static int serverPort;

static void
setUp(void)
{
    char command[256];

    snprintf(certs, sizeof(certs), "/tmp/cor-tls-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(certs));
    snprintf(command, sizeof(command), "tests/tls/makeCerts %s", certs);
    ck_assert_int_eq(system(command), 0);
}

static void
tearDown(void)
{
    char command[256];

    if (serverPid > 0) {
        kill(serverPid, SIGTERM);
        waitpid(serverPid, NULL, 0);
        serverPid = 0;
    }
    snprintf(command, sizeof(command), "rm -rf %s", certs);
    ck_assert_int_eq(system(command), 0);
}

static int
freePort(void)
{
    struct sockaddr_in sin = { .sin_family = AF_INET };
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr*)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr*)&sin, &len), 0);
    port = ntohs(sin.sin_port);
    close(fd);
    return port;
}

/* A connected non-blocking socket to the port, or -1. */
static int
connectTo(int port)
{
    struct sockaddr_in sin = { .sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    short revents;

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr*)&sin, sizeof(sin)) == 0) {
        return fd;
    }
    if (errno != EINPROGRESS || corRestWaitFd(fd, POLLOUT, 1000, &revents) != 1
        || (revents & (POLLERR | POLLHUP))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* openssl s_server with the certificate NAME.pem, answering HTTP (-www)
 * and ALPN http/1.1; returns once it accepts. */
static void
serverStart(const char* name)
{
    char cert[128];
    char key[128];
    char accept[32];

    snprintf(cert, sizeof(cert), "%s/%s.pem", certs, name);
    snprintf(key, sizeof(key), "%s/%s.key", certs, name);
    serverPort = freePort();
    snprintf(accept, sizeof(accept), "127.0.0.1:%d", serverPort);
    serverPid = fork();
    if (serverPid == 0) {
        int null = open("/dev/null", O_RDWR);

        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execlp("openssl", "openssl", "s_server", "-accept", accept, "-cert",
               cert, "-key", key, "-www", "-alpn", "http/1.1", (char*)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        int fd = connectTo(serverPort);

        if (fd >= 0) {
            close(fd);
            return;
        }
        usleep(10 * 1000);
    }
    ck_abort_msg("openssl s_server did not start");
}

static CorTlsClient*
clientNew(bool insecure)
{
    char ca[128];
    char why[256];
    CorTlsClient* ctx;

    snprintf(ca, sizeof(ca), "%s/ca.pem", certs);
    ctx = corTlsClientNew(&(CorTlsClientOptions){ .caFile = ca,
                                                  .insecure = insecure,
                                                  .alpn = "h2,http/1.1" },
                          why, sizeof(why));
    ck_assert_msg(ctx != NULL, "%s", why);
    return ctx;
}

/* A handshake with serverName; returns its result, the transport open on
 * success (closed otherwise). */
static int
handshake(CorTlsClient* ctx, CorTransport* t, const char* serverName, int port,
          int timeoutMs, char* why, size_t whyLen)
{
    int fd = connectTo(port);
    int rc;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corTransportTlsClient(t, fd, ctx, serverName,
                                           (unsigned)port),
                     0);
    rc = corTransportTlsHandshake(t, timeoutMs, why, whyLen);
    if (rc != 0) {
        t->ops->close(t);
    }
    return rc;
}

/* GET / and read the answer to its end (s_server -www closes): the TLS
 * 1.3 ticket comes in front of it. Returns the bytes read. */
static size_t
fetch(CorTransport* t, char* buf, size_t cap)
{
    static const char get[] = "GET / HTTP/1.0\r\n\r\n";
    size_t len = 0;

    ck_assert_int_eq(t->ops->send(t, get, sizeof(get) - 1),
                     (ssize_t)sizeof(get) - 1);
    while (len < cap - 1) {
        ssize_t n = t->ops->recv(t, buf + len, cap - 1 - len);
        short revents;

        if (n > 0) {
            len += (size_t)n;
        } else if (n == 0) {
            break;
        } else {
            ck_assert_int_eq(errno, EAGAIN);
            ck_assert(!corTransportPending(t));
            ck_assert_int_eq(corRestWaitFd(t->fd, POLLIN, 5000, &revents), 1);
        }
    }
    buf[len] = '\0';
    return len;
}

/* A verified handshake, ALPN, a request, then a resumed second one. */
static void
verifiedAndResumed(void* arg)
{
    CorTlsClient* ctx = clientNew(false);
    CorTransport t;
    char why[256] = "";
    char buf[8192];

    (void)arg;
    ck_assert_msg(handshake(ctx, &t, "localhost", serverPort, 5000, why,
                            sizeof(why))
                      == 0,
                  "%s", why);
    ck_assert(!corTransportTlsResumed(&t));
    ck_assert_str_eq(corTransportTlsAlpn(&t), "http/1.1");
    ck_assert_uint_gt(fetch(&t, buf, sizeof(buf)), 0);
    ck_assert_msg(strncmp(buf, "HTTP/1.0 200", 12) == 0, "%s", buf);
    t.ops->close(&t);

    ck_assert_msg(handshake(ctx, &t, "localhost", serverPort, 5000, why,
                            sizeof(why))
                      == 0,
                  "%s", why);
    ck_assert(corTransportTlsResumed(&t));
    t.ops->close(&t);
    corTlsClientFree(ctx);
}

START_TEST(test_verified_handshake_alpn_and_resumption)
{
    serverStart("server");
    verifiedAndResumed(NULL);
}
END_TEST

#if COR_HAVE_COROUTINES
static bool coroutineDone;

static void
inCoroutine(void* arg)
{
    verifiedAndResumed(arg);
    coroutineDone = true;
}

START_TEST(test_in_a_coroutine_the_handshake_yields)
{
    CorEvLoop* loop = corEvLoopCreate();
    CorCoLoopStats stats;

    serverStart("server");
    corEvLoopBind(loop);
    ck_assert_int_eq(corCoLoopSpawn(loop, inCoroutine, NULL), 0);
    do {
        corEvLoopRunOnce(loop, 100);
        corCoLoopStatsGet(loop, &stats);
    } while (stats.live > 0);
    ck_assert(coroutineDone);
    corEvLoopDestroy(loop);
}
END_TEST
#endif

/* The certificate NAME is refused, connecting as serverName, with a reason
 * that says reason. */
static void
refused(const char* name, const char* serverName, const char* reason)
{
    CorTlsClient* ctx;
    CorTransport t;
    char why[256] = "";

    serverStart(name);
    ctx = clientNew(false);
    ck_assert_int_eq(handshake(ctx, &t, serverName, serverPort, 5000, why,
                               sizeof(why)),
                     -EPROTO);
    ck_assert_msg(strstr(why, reason) != NULL, "%s: want '%s', got '%s'", name,
                  reason, why);
    corTlsClientFree(ctx);
}

START_TEST(test_self_signed_is_refused)
{
    refused("self", "localhost", "self");
}
END_TEST

START_TEST(test_expired_is_refused)
{
    refused("expired", "localhost", "certificate has expired");
}
END_TEST

START_TEST(test_wrong_host_is_refused)
{
    refused("wronghost", "localhost", "hostname mismatch");
}
END_TEST

START_TEST(test_an_ip_address_is_checked_as_one)
{
    CorTlsClient* ctx;
    CorTransport t;
    char why[256] = "";

    serverStart("server");
    ctx = clientNew(false);
    ck_assert_msg(handshake(ctx, &t, "127.0.0.1", serverPort, 5000, why,
                            sizeof(why))
                      == 0,
                  "%s", why);
    t.ops->close(&t);
    corTlsClientFree(ctx);
}
END_TEST

START_TEST(test_insecure_takes_a_self_signed_certificate)
{
    CorTlsClient* ctx;
    CorTransport t;
    char why[256] = "";

    serverStart("self");
    ctx = clientNew(true);
    ck_assert_msg(handshake(ctx, &t, "localhost", serverPort, 5000, why,
                            sizeof(why))
                      == 0,
                  "%s", why);
    t.ops->close(&t);
    corTlsClientFree(ctx);
}
END_TEST

/* A peer that accepts (the kernel does, from the backlog) and never
 * answers: the handshake ends at its deadline. */
START_TEST(test_a_silent_server_times_out)
{
    struct sockaddr_in sin = { .sin_family = AF_INET };
    socklen_t len = sizeof(sin);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    CorTlsClient* ctx;
    CorTransport t;
    char why[256] = "";
    uint64_t start;

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(listener, (struct sockaddr*)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(listener, 8), 0);
    ck_assert_int_eq(getsockname(listener, (struct sockaddr*)&sin, &len), 0);
    ctx = clientNew(false);
    start = corEvClockMs();
    ck_assert_int_eq(handshake(ctx, &t, "localhost", ntohs(sin.sin_port), 200,
                               why, sizeof(why)),
                     -ETIMEDOUT);
    ck_assert_uint_ge(corEvClockMs() - start, 190);
    ck_assert_uint_lt(corEvClockMs() - start, 2000);
    corTlsClientFree(ctx);
    close(listener);
}
END_TEST

START_TEST(test_a_bad_ca_file_is_reported)
{
    char why[256] = "";

    ck_assert_ptr_null(
        corTlsClientNew(&(CorTlsClientOptions){ .caFile = "/nonexistent.pem" },
                        why, sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "/nonexistent.pem"));
    ck_assert_ptr_null(
        corTlsClientNew(&(CorTlsClientOptions){ .alpn = "http/1.1,,h2" }, why,
                        sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "alpn"));
}
END_TEST

COR_TEST_SUITE(corTlsClient)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_verified_handshake_alpn_and_resumption);
#if COR_HAVE_COROUTINES
    tcase_add_test(tc, test_in_a_coroutine_the_handshake_yields);
#endif
    tcase_add_test(tc, test_self_signed_is_refused);
    tcase_add_test(tc, test_expired_is_refused);
    tcase_add_test(tc, test_wrong_host_is_refused);
    tcase_add_test(tc, test_an_ip_address_is_checked_as_one);
    tcase_add_test(tc, test_insecure_takes_a_self_signed_certificate);
    tcase_add_test(tc, test_a_silent_server_times_out);
    tcase_add_test(tc, test_a_bad_ca_file_is_reported);
}
