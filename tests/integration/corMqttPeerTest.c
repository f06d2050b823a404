/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT bridge against brokers it did not write, each case once per
 * broker (corMqttPeer.c: mosquitto, RabbitMQ's MQTT plugin, aedes; one
 * not installed is skipped, saying why):
 *
 * - the window: 30 QoS 2 notifications at once in 3.1.1 all arrive
 *   (mosquitto drops past its 20 in flight; RabbitMQ answers QoS 2 with
 *   PUBACK, which is delivery);
 * - instances: two cors of one configuration each keep their subscriber
 *   connected (their default client ids differ), and two that are given
 *   one client id fight with a back-off that grows, saying so once;
 * - a 5.0 CONNECT to a 3.1.1-only broker is logged as such;
 * - shared subscriptions spread messages over two cors (mosquitto, 5.0).
 */
#include "corMqttBroker.h"

#include "corAutoConfig.h"
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer cor[2];
static CorTestPeer peer;
/* RabbitMQ takes 10 s or more to start: one for the whole program,
 * started before the first case (in check's parent, which outlives
 * each case's child) and lent to each case that asks for it. */
static CorTestPeer rabbit;
static char rabbitWhy[256];
static char buf[1 << 16];

static void
rabbitUp(void)
{
    if (corTestPeerStart(&rabbit, COR_PEER_RABBITMQ, NULL, rabbitWhy,
                         sizeof(rabbitWhy))
        != 0) {
        rabbit.pid = 0;
    }
}

static void
rabbitDown(void)
{
    corTestPeerStop(&rabbit);
}

static void
tearDown(void)
{
    corServerStop(&cor[0]);
    corServerStop(&cor[1]);
    if (peer.pid != rabbit.pid) {
        corTestPeerStop(&peer);
    }
}

/* Start a broker of kind (RabbitMQ: lend the program's); false (the case
 * is skipped, saying why) when it is not installed. */
static bool
peerUp(CorTestPeerKind kind)
{
    char why[256];

    if (kind == COR_PEER_RABBITMQ) {
        if (rabbit.pid == 0) {
            fprintf(stderr, "SKIP rabbitmq: %s\n", rabbitWhy);
            return false;
        }
        peer = rabbit;
        return true;
    }
    if (corTestPeerStart(&peer, kind, NULL, why, sizeof(why)) != 0) {
        fprintf(stderr, "SKIP %s: %s\n", corTestPeerName(kind), why);
        return false;
    }
    return true;
}

/* cor number i with the mqtt module's settings and subscriptions. */
static void
corUp(int i, const char* mqtt)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 2,\n"
             "           coroutines: { enabled: {COROUTINES} } }\n"
             "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: mqtt\n%s"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"/write\", handler: write }\n"
             "  - { match: \"MQTT /*\", handler: echo }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "  - { match: \"GET /notifynow\", handler: notifynow }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             mqtt);
    ck_assert_int_eq(corServerStart(&cor[i], yaml), 0);
}

/* Wait until cor i's log holds text count times or more, up to ms. */
static int
logWait(int i, const char* text, int count, int ms)
{
    long deadline = corNowMs() + ms;
    int n;

    while ((n = corServerLogCount(&cor[i], text)) < count
           && corNowMs() < deadline) {
        usleep(50 * 1000);
    }
    return n;
}

/* A 3.1.1 receiver of topic at QoS 2 into peer.dir/recv.out, once it
 * gets what is published (a probe, retried). Its PID. */
static pid_t
receiverStart(const char* topic)
{
    char command[512];
    long deadline = corNowMs() + 30000;
    pid_t pid = corTestFork(SIGKILL);

    if (pid == 0) {
        snprintf(command, sizeof(command),
                 "exec mosquitto_sub -h 127.0.0.1 "
                 "-p %d -V mqttv311 -q 2 -t '%s' -t probe -F '%%t' > "
                 "%s/recv.out",
                 peer.port, topic, peer.dir);
        execl("/bin/sh", "sh", "-c", command, (char*)NULL);
        _exit(127);
    }
    snprintf(command, sizeof(command),
             "mosquitto_pub -h 127.0.0.1 -p %d "
             "-V mqttv311 -q 1 -t probe -m p; grep -c probe %s/recv.out",
             peer.port, peer.dir);
    while (corShell(command, buf, sizeof(buf)) != 0) {
        ck_assert_int_lt(corNowMs(), deadline);
        usleep(200 * 1000);
    }
    return pid;
}

/* Lines of recv.out that are topic. */
static int
received(const char* topic)
{
    char command[256];

    snprintf(command, sizeof(command), "grep -cx '%s' %s/recv.out", topic,
             peer.dir);
    corShell(command, buf, sizeof(buf));
    return atoi(buf);
}

/* 30 QoS 2 notifications at once, in 3.1.1: every one arrives. */
static void
windowCheck(CorTestPeerKind kind)
{
    char request[512];
    pid_t recv;
    long deadline;

    if (!peerUp(kind)) {
        return;
    }
    corUp(0, "    version: \"3.1.1\"\n    qos: 2\n"
             "    reconnect_min: 100ms\n    reconnect_max: 1s\n");
    recv = receiverStart("w/t");
    snprintf(request, sizeof(request),
             "POST /write?url=mqtt://127.0.0.1:"
             "%d/w/t&n=30&timeout_ms=60000 HTTP/1.1\r\nHost: t\r\n"
             "Content-Length: 1\r\n\r\nm",
             peer.port);
    ck_assert_int_eq(corRequest(cor[0].port, request, buf, sizeof(buf)), 200);
    deadline = corNowMs() + 60000;
    while (corTestBrokerCounterAt(cor[0].port, peer.port, "cor_mqtt_sent_total")
                   + corTestBrokerCounterAt(cor[0].port, peer.port,
                                            "cor_mqtt_failed_total")
               < 30
           && corNowMs() < deadline) {
        usleep(100 * 1000);
    }
    ck_assert_int_eq(corTestBrokerCounterAt(cor[0].port, peer.port,
                                            "cor_mqtt_sent_total"),
                     30);
    for (deadline = corNowMs() + 10000;
         received("w/t") < 30 && corNowMs() < deadline;) {
        usleep(100 * 1000);
    }
    kill(recv, SIGTERM);
    waitpid(recv, NULL, 0);
    ck_assert_int_ge(received("w/t"), 30);
    ck_assert_int_lt(received("w/t"), 60);
    ck_assert_int_le(corServerLogCount(&cor[0], "connecting again"), 1);
}

START_TEST(window)
{
    windowCheck((CorTestPeerKind)_i);
}
END_TEST

#if COR_HAVE_COROUTINES
/* Two cors of one configuration, a subscription each (3.1.1, so that
 * every broker takes it) and, with clientId, one client id. */
static void
twoUp(const char* clientId)
{
    char mqtt[512];

    snprintf(mqtt, sizeof(mqtt),
             "    version: \"3.1.1\"\n"
             "    reconnect_min: 100ms\n    reconnect_max: 2s\n"
             "    subscriptions:\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"s/#\"%s%s"
             " }\n",
             peer.port, clientId != NULL ? ", client_id: " : "",
             clientId != NULL ? clientId : "");
    corUp(0, mqtt);
    corUp(1, mqtt);
}

/* Two instances of one configuration keep one connection each. */
START_TEST(instances)
{
    if (!peerUp((CorTestPeerKind)_i)) {
        return;
    }
    twoUp(NULL);
    ck_assert_int_ge(logWait(0, "subscribed to", 1, 30000), 1);
    ck_assert_int_ge(logWait(1, "subscribed to", 1, 30000), 1);
    usleep(3000 * 1000);
    ck_assert_int_eq(corServerLogCount(&cor[0], "connected to"), 1);
    ck_assert_int_eq(corServerLogCount(&cor[1], "connected to"), 1);
}
END_TEST

/* Two given one client id take it from each other: the back-off grows
 * (at most a connect each 2 s, once it has grown: not 8 s of 100 ms
 * tries), and each says once what to do. */
START_TEST(takeover)
{
    if (!peerUp((CorTestPeerKind)_i)) {
        return;
    }
    twoUp("same");
    ck_assert_int_ge(logWait(0, "connected to", 2, 30000)
                         + logWait(1, "connected to", 2, 30000),
                     4);
    usleep(8000 * 1000);
    ck_assert_int_lt(corServerLogCount(&cor[0], "connected to")
                         + corServerLogCount(&cor[1], "connected to"),
                     24);
    ck_assert_int_le(corServerLogCount(&cor[0], "took the session over")
                         + corServerLogCount(&cor[1], "took the session over"),
                     2);
    ck_assert_int_ge(corServerLogCount(&cor[0], "took the session over")
                         + corServerLogCount(&cor[1], "took the session over"),
                     1);
}
END_TEST

#endif

/* A broker of kind, cor 0 with the mqtt settings mqtt, and a
 * notification from its handler to topic there (escaped); false when the
 * broker is not installed. */
static bool
notifyNow(CorTestPeerKind kind, const char* mqtt, const char* topic)
{
    char request[256];

    if (!peerUp(kind)) {
        return false;
    }
    corUp(0, mqtt);
    snprintf(request, sizeof(request),
             "GET /notifynow?url=mqtt://127.0.0.1:"
             "%d/%s HTTP/1.1\r\nHost: t\r\n\r\n",
             peer.port, topic);
    ck_assert_int_eq(corRequest(cor[0].port, request, buf, sizeof(buf)), 200);
    return true;
}

/* A 5.0 CONNECT to a broker that speaks 3.1.1 only (aedes). */
START_TEST(notV5)
{
    if (notifyNow(COR_PEER_AEDES, "    version: \"5\"\n", "x")) {
        ck_assert_int_eq(logWait(0, "the broker does not speak 5.0", 1, 10000),
                         1);
    }
}
END_TEST

/* A '#' in a notification URL is refused by corNotify, not cut. */
START_TEST(hashRefused)
{
    if (notifyNow(COR_PEER_MOSQUITTO, "", "alarms/%23")) {
        ck_assert_ptr_nonnull(strstr(buf, "rc=-22"));
        ck_assert_int_eq(logWait(0, "in the URL: a topic name holds no", 1,
                                 5000),
                         1);
    }
}
END_TEST

/* A '#' in a subscription's broker URL: an error at its file:line. */
START_TEST(hashRefusedAtFileLine)
{
    char path[] = "/tmp/cor-bad-XXXXXX.yaml";
    char command[512];
    int fd = mkstemps(path, 5);
    FILE* f = fdopen(fd, "w");

    ck_assert_ptr_nonnull(f);
    fputs("listen: [ { protocol: http, address: 127.0.0.1:1 } ]\n"
          "modules:\n  - load: mqtt\n    subscriptions:\n"
          "      - { broker: \"mqtt://127.0.0.1/#\", filter: \"a\" }\n",
          f);
    fclose(f);
    snprintf(command, sizeof(command), "%s -t -c %s 2>&1", getenv("COR_BIN"),
             path);
    ck_assert_int_ne(corShell(command, buf, sizeof(buf)), 0);
    unlink(path);
    ck_assert_msg(strstr(buf, ".yaml:5:19: module mqtt: broker: a '#' "
                              "in the URL")
                      != NULL,
                  "%s", buf);
}
END_TEST

#if COR_HAVE_COROUTINES
/* $share/g/s/# over two cors: each message handled once, by either. */
START_TEST(shared)
{
    char mqtt[512];
    char command[256];
    long deadline = corNowMs() + 30000;
    long a = 0;
    long b = 0;

    if (!peerUp(COR_PEER_MOSQUITTO)) {
        return;
    }
    snprintf(mqtt, sizeof(mqtt),
             "    subscriptions:\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\", "
             "filter: \"$share/g/s/#\" }\n",
             peer.port);
    corUp(0, mqtt);
    corUp(1, mqtt);
    ck_assert_int_ge(logWait(0, "subscribed to", 1, 30000), 1);
    ck_assert_int_ge(logWait(1, "subscribed to", 1, 30000), 1);
    snprintf(command, sizeof(command),
             "for i in $(seq 20); do "
             "mosquitto_pub -h 127.0.0.1 -p %d -q 1 -t s/$i -m $i; done",
             peer.port);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    while (a + b < 20 && corNowMs() < deadline) {
        usleep(100 * 1000);
        a = corTestBrokerCounterAt(cor[0].port, peer.port,
                                   "cor_mqtt_received_total");
        b = corTestBrokerCounterAt(cor[1].port, peer.port,
                                   "cor_mqtt_received_total");
    }
    ck_assert_int_eq(a + b, 20);
    ck_assert_int_gt(a, 0);
    ck_assert_int_gt(b, 0);
}
END_TEST
#endif

COR_TEST_SUITE(corMqttPeer)
{
    tcase_add_unchecked_fixture(tc, rabbitUp, rabbitDown);
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, window, 0, COR_PEER_KINDS);
    tcase_add_test(tc, notV5);
    tcase_add_test(tc, hashRefused);
    tcase_add_test(tc, hashRefusedAtFileLine);
#if COR_HAVE_COROUTINES
    tcase_add_loop_test(tc, instances, 0, COR_PEER_KINDS);
    tcase_add_loop_test(tc, takeover, 0, COR_PEER_KINDS);
    tcase_add_test(tc, shared);
#endif
}
