/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT bridge against brokers that misbehave: a fake broker (a child
 * of the test, on a loopback port of its own) that never answers
 * CONNECT, that answers it and then sends a malformed packet, or that
 * closes the connection in the middle of a packet. Each notification to
 * it ends with a clean error in time (its deadline), logged with why; cor
 * neither crashes nor stalls: it answers another request at once while
 * the notification waits, from a coroutine and from a thread.
 */
#include "corTest.h"
#include "corServer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef enum {
    FAKE_SILENT,    /* reads CONNECT, answers nothing */
    FAKE_MALFORMED, /* CONNACK, then a PUBACK too long */
    FAKE_CUT        /* CONNACK, then half a PUBACK, close */
} FakeMode;

static CorServer cor;
static pid_t fakePid;
static int fakePort;
static char buf[1 << 14];

/* CONNACK in 3.1.1 (accepted), and what each mode sends after it. */
static const unsigned char connack[] = { 0x20, 0x02, 0x00, 0x00 };
static const unsigned char malformed[] = { 0x40, 0x05, 0x00, 0x01,
                                           0x00, 0x00, 0x00 };
static const unsigned char half[] = { 0x40, 0x02 };

/* One connection: read the CONNECT, then act as mode says. */
static void
fakeServe(int fd, FakeMode mode)
{
    char in[512];

    if (read(fd, in, sizeof(in)) <= 0) {
        return;
    }
    if (mode == FAKE_SILENT) {
        while (read(fd, in, sizeof(in)) > 0) {
        }
        return;
    }
    if (write(fd, connack, sizeof(connack)) < 0
        || read(fd, in, sizeof(in)) <= 0) { /* the PUBLISH */
        return;
    }
    if (mode == FAKE_MALFORMED) {
        (void)!write(fd, malformed, sizeof(malformed));
        while (read(fd, in, sizeof(in)) > 0) {
        }
    } else {
        (void)!write(fd, half, sizeof(half));
    }
}

/* A fake broker in a child, accepting until it is killed. */
static void
fakeStart(FakeMode mode)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(lfd, (struct sockaddr*)&addr, len), 0);
    ck_assert_int_eq(listen(lfd, 64), 0);
    getsockname(lfd, (struct sockaddr*)&addr, &len);
    fakePort = ntohs(addr.sin_port);
    fakePid = corTestFork(SIGKILL);
    if (fakePid == 0) {
        signal(SIGCHLD, SIG_IGN); /* no zombies of the forks below */
        for (;;) {
            int fd = accept(lfd, NULL, NULL);

            if (fd >= 0 && fork() == 0) {
                fakeServe(fd, mode);
                _exit(0);
            }
            close(fd);
        }
    }
    close(lfd);
}

static const char corConfig[] =
    "runtime: { loops: 1, workers: 2,\n"
    "           coroutines: { enabled: {COROUTINES} } }\n"
    "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: mqtt, version: \"3.1.1\", connect_timeout: 2s,\n"
    "      reconnect_min: 50ms, reconnect_max: 200ms }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"/write\", handler: write }\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
setUp(void)
{
    ck_assert_int_eq(corServerStart(&cor, corConfig), 0);
}

static void
tearDown(void)
{
    corServerStop(&cor);
    if (fakePid > 0) {
        kill(fakePid, SIGKILL);
        waitpid(fakePid, NULL, 0);
        fakePid = 0;
    }
}

static long
failed(void)
{
    return corMetric(cor.port, "cor_notify_failed_total{scheme=\"mqtt\"}");
}

/* A QoS 1 notification to the fake broker (a coroutine's, or a
 * thread's), deadline 800 ms: cor answers /metrics at once meanwhile,
 * and the notification fails by its deadline (a loop's link tries the
 * broker again until then; a thread gives up on a bad packet at once),
 * with why in the log. */
static void
misbehaves(FakeMode mode, const char* why)
{
    char request[512];

    fakeStart(mode);
    for (int worker = 0; worker <= 1; worker++) {
        long t = corNowMs();
        long before = failed();
        long t2;

        snprintf(request, sizeof(request),
                 "POST /write?url=mqtt://"
                 "127.0.0.1:%d/t&timeout_ms=800%s HTTP/1.1\r\nHost: t\r\n"
                 "Content-Length: 1\r\n\r\nx",
                 fakePort, worker ? "&worker=1" : "");
        ck_assert_int_eq(corRequest(cor.port, request, buf, sizeof(buf)), 200);
        t2 = corNowMs();
        failed(); /* the loop answers */
        ck_assert_int_lt(corNowMs() - t2, 500);
        while (failed() == before && corNowMs() - t < 5000) {
            usleep(20 * 1000);
        }
        ck_assert_int_eq(failed(), before + 1);
        ck_assert_int_lt(corNowMs() - t, 3000);
    }
    ck_assert_int_ge(corServerLogCount(&cor, why), 1);
    ck_assert_int_eq(corMetric(cor.port, "cor_notify_sent_total{scheme="
                                         "\"mqtt\"}"),
                     0);
}

START_TEST(test_a_broker_that_never_answers_connect)
{
    /* Which deadline comes first on a loaded machine, the CONNACK's or
     * the notification's, is the scheduler's: either says why in time. */
    misbehaves(FAKE_SILENT, " in time");
}
END_TEST

START_TEST(test_a_broker_that_sends_a_malformed_packet)
{
    misbehaves(FAKE_MALFORMED, "a bad packet");
}
END_TEST

START_TEST(test_a_broker_that_closes_in_the_middle_of_a_packet)
{
    misbehaves(FAKE_CUT, "the broker closed the connection");
}
END_TEST

COR_TEST_SUITE(corMqttFake)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_a_broker_that_never_answers_connect);
    tcase_add_test(tc, test_a_broker_that_sends_a_malformed_packet);
    tcase_add_test(tc, test_a_broker_that_closes_in_the_middle_of_a_packet);
}
