/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT bridge against brokers it did not write, each case once per
 * broker (corMqttPeer.c: mosquitto, RabbitMQ's MQTT plugin, aedes; one
 * not installed is skipped, saying why):
 *
 * - a 5.0 CONNECT to a 3.1.1-only broker is logged as such;
 * - a '#' in a notification's URL is refused, not cut.
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
static char buf[1 << 16];

static void
tearDown(void)
{
    corServerStop(&cor[0]);
    corServerStop(&cor[1]);
    corTestPeerStop(&peer);
}

/* Start a broker of kind; false (the case is skipped, saying why) when it
 * is not installed. */
static bool
peerUp(CorTestPeerKind kind, const char* extra)
{
    char why[256];

    if (corTestPeerStart(&peer, kind, extra, why, sizeof(why)) != 0) {
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
             "log: { pid_file: {DIR}/cor.pid }\n", mqtt);
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

/* A broker of kind, cor 0 with the mqtt settings mqtt, and a
 * notification from its handler to topic there (escaped); false when the
 * broker is not installed. */
static bool
notifyNow(CorTestPeerKind kind, const char* mqtt, const char* topic)
{
    char request[256];

    if (!peerUp(kind, NULL)) {
        return false;
    }
    corUp(0, mqtt);
    snprintf(request, sizeof(request), "GET /notifynow?url=mqtt://127.0.0.1:"
             "%d/%s HTTP/1.1\r\nHost: t\r\n\r\n", peer.port, topic);
    ck_assert_int_eq(corRequest(cor[0].port, request, buf, sizeof(buf)), 200);
    return true;
}

/* A 5.0 CONNECT to a broker that speaks 3.1.1 only (aedes). */
START_TEST(notV5)
{
    if (notifyNow(COR_PEER_AEDES, "    version: \"5\"\n", "x")) {
        ck_assert_int_eq(logWait(0, "the broker does not speak 5.0", 1,
                                 10000), 1);
    }
}
END_TEST

/* A '#' in a notification URL is refused by corNotify, not cut. */
START_TEST(hashRefused)
{
    if (notifyNow(COR_PEER_MOSQUITTO, "", "alarms/%23")) {
        ck_assert_ptr_nonnull(strstr(buf, "rc=-22"));
        ck_assert_int_eq(logWait(0, "in the URL: a topic name holds no", 1,
                                 5000), 1);
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
          "      - { broker: \"mqtt://127.0.0.1/#\", filter: \"a\" }\n", f);
    fclose(f);
    snprintf(command, sizeof(command), "%s -t -c %s 2>&1", getenv("COR_BIN"),
             path);
    ck_assert_int_ne(corShell(command, buf, sizeof(buf)), 0);
    unlink(path);
    ck_assert_msg(strstr(buf, ".yaml:5:19: module mqtt: broker: a '#' "
                          "in the URL") != NULL, "%s", buf);
}
END_TEST

COR_TEST_SUITE(corMqttPeer)
{
    tcase_add_checked_fixture(tc, NULL, tearDown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, notV5);
    tcase_add_test(tc, hashRefused);
    tcase_add_test(tc, hashRefusedAtFileLine);
}
