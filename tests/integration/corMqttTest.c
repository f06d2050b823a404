/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT bridge against a real broker: mosquitto, started for each test
 * on loopback ports of its own and stopped by its PID, with mosquitto_sub
 * as the receiver. cor's testkit answers POST /write and sends its body
 * as notifications to the URL it is given (corTestkitNotify.c), on a
 * coroutine of the loop or, with ?worker=1 and in blocking mode, on a
 * thread: the same notifications go through both paths of the client.
 *
 * The broker listens four times: plain and anonymous, plain with a
 * password file, TLS with a certificate of the test CA (which cor's
 * client.ca_file trusts), and TLS with a self-signed certificate (a CA
 * cor does not know).
 */
#include "corTest.h"
#include "corServer.h"
#include "corMqttBroker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define BULK_WRITES 100
#define BULK_PER_WRITE 1000
#define BULK_COUNT (BULK_WRITES * BULK_PER_WRITE)

static CorServer cor;
static char buf[1 << 16];

static const char corConfig[] =
    "runtime: { loops: 1, workers: 2,\n"
    "           coroutines: { enabled: {COROUTINES}, per_loop: 4096 } }\n"
    "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
    "client: { ca_file: %s/ca.pem, notify_timeout: 10s }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: mqtt, keepalive: 2s, reconnect_min: 50ms,\n"
    "      reconnect_max: 400ms }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"/write\", handler: write }\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
setUp(void)
{
    char yaml[2048];

    corTestBrokerMake();
    snprintf(yaml, sizeof(yaml), corConfig, corTestBroker.certs);
    ck_assert_int_eq(corServerStart(&cor, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&cor);
    corTestBrokerRemove();
}

/* POST /write: n notifications of body to url (its ? & = + escaped),
 * query more of /write's own. The status. */
static int
notify(const char* url, int n, const char* body, const char* query)
{
    char request[2048];
    char arg[1024];
    size_t len = 0;

    for (const char* p = url; *p != '\0' && len < sizeof(arg) - 4; p++) {
        len += (size_t)(strchr("?&=+", *p) != NULL
                            ? sprintf(arg + len, "%%%02X", *p)
                            : sprintf(arg + len, "%c", *p));
    }
    snprintf(request, sizeof(request),
             "POST /write?url=%s&n=%d%s "
             "HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n%s",
             arg, n, query, strlen(body), body);
    return corRequest(cor.port, request, buf, sizeof(buf));
}

static long
metric(const char* name, const char* scheme)
{
    return corTestNotifyCount(cor.port, name, scheme);
}

static void
notifiedWait(const char* scheme, long want, int ms)
{
    corTestNotifiedWait(cor.port, scheme, want, ms);
}

/* QoS 0, 1 and 2 in version, from a coroutine and from a thread: each
 * message reaches the subscriber once (the thread's QoS 0 too). */
static void
deliver(const char* version)
{
    CorTestSub s;
    char url[256];
    char line[128];
    int want = 0;

    corTestSubStart(&s, "d/#", 12, "");
    for (int qos = 0; qos <= 2; qos++) {
        for (int worker = 0; worker <= 1; worker++) {
            char body[32];

            snprintf(url, sizeof(url),
                     "mqtt://127.0.0.1:%d/d/%d?qos=%d&"
                     "version=%s",
                     corTestBroker.port, qos, qos, version);
            snprintf(body, sizeof(body), "%s-q%d-w%d", version, qos, worker);
            ck_assert_int_eq(notify(url, 2, body, worker ? "&worker=1" : ""),
                             200);
            want += 2;
        }
    }
    notifiedWait("mqtt", want, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 0);
    ck_assert_int_eq(corTestSubCollect(&s, 5000, buf, sizeof(buf)), 12);
    for (int qos = 0; qos <= 2; qos++) {
        for (int worker = 0; worker <= 1; worker++) {
            snprintf(line, sizeof(line), "d/%d %s-q%d-w%d", qos, version, qos,
                     worker);
            ck_assert_msg(corTestCountOf(buf, line) == 2,
                          "%s not twice in:\n%s", line, buf);
        }
    }
    /* 5.0 carries the X-Write header as a user property; 3.1.1 has
     * nowhere to put it. */
    ck_assert_int_eq(corTestCountOf(buf, "X-Write:1"),
                     version[0] == '5' ? 6 : 0);
    ck_assert_int_eq(corTestBrokerCounter(cor.port, "cor_mqtt_sent_total"), 12);
    ck_assert_int_eq(corTestBrokerCounter(cor.port, "cor_mqtt_failed_total"),
                     0);
    ck_assert_int_eq(corTestBrokerCounter(cor.port, "cor_mqtt_in_flight"), 0);
}

START_TEST(test_qos_0_1_2_in_5)
{
    deliver("5");
}
END_TEST

START_TEST(test_qos_0_1_2_in_3_1_1)
{
    deliver("3.1.1");
}
END_TEST

/* A user and a password the broker knows, then a wrong password: refused,
 * with the broker's reason in the log, in both versions. */
START_TEST(test_user_and_password_accepted_and_refused)
{
    CorTestSub s;
    char url[256];

    corTestSubStart(&s, "auth", 2, "");
    for (int v = 0; v < 2; v++) {
        const char* version = v == 0 ? "5" : "3.1.1";

        snprintf(url, sizeof(url), "mqtt://u:p@127.0.0.1:%d/auth?version=%s",
                 corTestBroker.portAuth, version);
        ck_assert_int_eq(notify(url, 1, "in", ""), 200);
        snprintf(url, sizeof(url),
                 "mqtt://u:wrong@127.0.0.1:%d/auth?"
                 "version=%s",
                 corTestBroker.portAuth, version);
        ck_assert_int_eq(notify(url, 1, "out", ""), 200);
    }
    notifiedWait("mqtt", 4, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 2);
    ck_assert_int_eq(corTestSubCollect(&s, 5000, buf, sizeof(buf)), 2);
    ck_assert_int_eq(corTestCountOf(buf, "auth in"), 2);
    ck_assert_int_eq(corServerLogCount(&cor, "refused the connection: not "
                                             "authorized (reason code 0x87)"),
                     1);
    ck_assert_int_eq(corServerLogCount(&cor, "refused the connection: not "
                                             "authorized (return code 0x05)"),
                     1);
    /* The password is not in the log. */
    ck_assert_int_eq(corServerLogCount(&cor, "wrong"), 0);
}
END_TEST

/* mqtts with the test CA; a broker whose certificate no CA cor trusts
 * signed is refused. */
START_TEST(test_mqtts_verified_and_a_wrong_ca_refused)
{
    CorTestSub s;
    char url[256];

    corTestSubStart(&s, "tls", 2, "");
    snprintf(url, sizeof(url), "mqtts://localhost:%d/tls",
             corTestBroker.portTls);
    ck_assert_int_eq(notify(url, 1, "ok", ""), 200);
    ck_assert_int_eq(notify(url, 1, "ok", "&worker=1"), 200);
    snprintf(url, sizeof(url), "mqtts://localhost:%d/tls",
             corTestBroker.portSelf);
    ck_assert_int_eq(notify(url, 1, "bad", ""), 200);
    notifiedWait("mqtts", 3, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtts"), 1);
    ck_assert_int_eq(corTestSubCollect(&s, 5000, buf, sizeof(buf)), 2);
    ck_assert_int_eq(corTestCountOf(buf, "tls ok"), 2);
    ck_assert_int_eq(corTestCountOf(buf, "bad"), 0);
    ck_assert_int_eq(corServerLogCount(&cor, "self-signed certificate"), 1);
}
END_TEST

/* Keepalive 2 s: idle for 5 s, the loop's connection is still the one
 * it was (its PINGREQs kept it; mosquitto drops a client silent for 1.5
 * keep alives). A thread's connection is replaced instead. */
START_TEST(test_keepalive_keeps_the_connection)
{
    CorTestSub s;
    char url[256];

    corTestSubStart(&s, "ka", 2, "");
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/ka", corTestBroker.port);
    ck_assert_int_eq(notify(url, 1, "one", ""), 200);
    notifiedWait("mqtt", 1, 5000);
    sleep(5);
    ck_assert_int_eq(notify(url, 1, "two", ""), 200);
    notifiedWait("mqtt", 2, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 0);
    ck_assert_int_eq(corTestSubCollect(&s, 5000, buf, sizeof(buf)), 2);
    if (corTestCoroutines()) {
        ck_assert_int_eq(corServerLogCount(&cor, "mqtt: connected to"), 1);
        ck_assert_int_eq(corServerLogCount(&cor, "connecting again"), 0);
    }
}
END_TEST

/* Wait until text is in cor's log want times, up to ms. */
static void
logWait(const char* text, int want, int ms)
{
    long deadline = corNowMs() + ms;

    while (corServerLogCount(&cor, text) < want && corNowMs() < deadline) {
        usleep(20 * 1000);
    }
    ck_assert_int_eq(corServerLogCount(&cor, text), want);
}

/* A bad URL, a bad option: refused at once, with why. */
START_TEST(test_bad_urls_are_refused)
{
    char url[256];

    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/a/+/b", corTestBroker.port);
    ck_assert_int_eq(notify(url, 1, "x", ""), 200);
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/a?qos=3",
             corTestBroker.port);
    ck_assert_int_eq(notify(url, 1, "x", ""), 200);
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/a?version=6",
             corTestBroker.port);
    ck_assert_int_eq(notify(url, 1, "x", ""), 200);
    /* Refused at corNotify, before anything starts: logged, never
     * counted as a notification that failed. */
    logWait("corNotify refused", 3, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 0);
    ck_assert_int_eq(corServerLogCount(&cor, "a bad topic"), 1);
    ck_assert_int_eq(corServerLogCount(&cor, "a bad option"), 2);
    ck_assert_int_eq(corServerLogCount(&cor, "qos=3"), 1);
    ck_assert_int_eq(corServerLogCount(&cor, "version=6"), 1);
}
END_TEST

/* Read s's output (after subCollect): each line "bulk wW X-Write:K" is
 * message W * BULK_PER_WRITE + K. Counts what came twice into *dups and
 * what came out of order into *late (behind one sent after it). Returns
 * how many distinct messages came. */
static int
bulkRead(const CorTestSub* s, int* dups, int* late)
{
    static bool seen[BULK_COUNT];
    FILE* f = fopen(s->out, "r");
    char line[128];
    int distinct = 0;
    int last = -1;

    ck_assert_ptr_nonnull(f);
    memset(seen, 0, sizeof(seen));
    *dups = *late = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        int w;
        int k;

        ck_assert_msg(sscanf(line, "bulk w%d X-Write:%d", &w, &k) == 2 && w >= 0
                          && w < BULK_WRITES && k >= 0 && k < BULK_PER_WRITE,
                      "a bad line: %s", line);
        k += w * BULK_PER_WRITE;
        *dups += seen[k];
        distinct += !seen[k];
        *late += k < last && !seen[k];
        seen[k] = true;
        last = k > last ? k : last;
    }
    fclose(f);
    return distinct;
}

/*
 * 100 000 QoS 1 notifications to one topic, as fast as writes come (each
 * write sends 1000; the next write comes once fewer than 2000 are in
 * flight, so that a loop's coroutines hold them all): every one arrives,
 * and on a loop in the order they were written (one connection, one
 * queue; the window keeps the broker's queues from overflowing). On
 * threads each thread has a connection of its own: every one arrives, in
 * no order across threads.
 */
START_TEST(test_100000_qos1_notifications_arrive_in_order)
{
    CorTestSub s;
    char url[256];
    long t = corNowMs();
    int dups;
    int late;

    corTestSubStart(&s, "bulk", BULK_COUNT, "");
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/bulk?qos=1",
             corTestBroker.port);
    for (int w = 0; w < BULK_WRITES; w++) {
        char body[16];

        snprintf(body, sizeof(body), "w%d", w);
        ck_assert_int_eq(notify(url, BULK_PER_WRITE, body, ""), 200);
        while (metric("cor_notify_in_flight", "mqtt") > 2000) {
            usleep(1000);
        }
    }
    notifiedWait("mqtt", BULK_COUNT, 60000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 0);
    fprintf(stderr,
            "corMqttTest: %d QoS 1 notifications acknowledged in "
            "%ld ms (%s)\n",
            BULK_COUNT, corNowMs() - t,
            corTestCoroutines() ? "coroutines" : "threads");
    corTestSubCollect(&s, 30000, buf, sizeof(buf));
    ck_assert_int_eq(bulkRead(&s, &dups, &late), BULK_COUNT);
    ck_assert_int_eq(dups, 0);
    if (corTestCoroutines()) {
        ck_assert_int_eq(late, 0);
    }
}
END_TEST

/* The broker stopped (SIGTERM: it saves its sessions) and started
 * again. */
static void
brokerRestart(void)
{
    corTestBrokerStop(SIGTERM);
    usleep(300 * 1000);
    corTestBrokerStart();
}

/* A reload (SIGHUP to the master), once the new generation runs. */
static void
corReload(void)
{
    pid_t old = corServerGeneration(&cor);
    long deadline = corNowMs() + 10000;

    ck_assert_int_eq(kill(cor.pid, SIGHUP), 0);
    while (corServerGeneration(&cor) == old && corNowMs() < deadline) {
        usleep(10 * 1000);
    }
    ck_assert_int_ne(corServerGeneration(&cor), old);
}

/*
 * A QoS 1 stream of 20 000 notifications with interrupt() in its middle;
 * every message arrives (duplicates allowed, counted, and returned). The
 * subscriber's session is persistent (-c), so what the broker takes while
 * the subscriber is away waits for it. Waits on what arrives, not on
 * /metrics, whose counters are a generation's.
 */
static int
streamAcross(void (*interrupt)(void), const char* what)
{
    enum { WRITES = 20, COUNT = WRITES * BULK_PER_WRITE };
    CorTestSub s;
    char url[256];
    char command[192];
    long deadline;
    int dups;
    int late;

    corTestSubStart(&s, "bulk", 0, "-c");
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/bulk?qos=1",
             corTestBroker.port);
    for (int w = 0; w < WRITES; w++) {
        char body[16];

        snprintf(body, sizeof(body), "w%d", w);
        ck_assert_int_eq(notify(url, BULK_PER_WRITE, body, "&timeout_ms=30000"),
                         200);
        if (w == WRITES / 2) {
            interrupt();
        }
        while (metric("cor_notify_in_flight", "mqtt") > 2000) {
            usleep(1000);
        }
    }
    /* Distinct lines: a duplicate is the same line again, and counting
     * it would end the wait while a redelivery is still on its way. */
    deadline = corNowMs() + 60000;
    snprintf(command, sizeof(command), "sort -u %s | wc -l", s.out);
    while ((corShell(command, buf, sizeof(buf)), atol(buf)) < COUNT
           && corNowMs() < deadline) {
        usleep(50 * 1000);
    }
    usleep(200 * 1000); /* duplicates still on their way */
    corTestSubCollect(&s, 0, buf, sizeof(buf));
    ck_assert_int_eq(bulkRead(&s, &dups, &late), COUNT);
    fprintf(stderr,
            "corMqttTest: %s mid-stream: %d messages, %d "
            "duplicates (%s)\n",
            what, COUNT, dups, corTestCoroutines() ? "coroutines" : "threads");
    return dups;
}

/*
 * The broker restarted in the middle of a QoS 1 stream: the bridge
 * connects again by itself after its back-off, publishes again what was
 * not acknowledged (DUP set), and nothing is lost.
 */
START_TEST(test_a_broker_restarted_mid_stream_loses_nothing)
{
    streamAcross(brokerRestart, "broker restarted");
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 0);
    ck_assert_int_ge(corServerLogCount(&cor, "mqtt: publisher mqtt://"), 1);
}
END_TEST

/*
 * A reload in the middle of a QoS 1 stream: the old generation's drain
 * waits for the notifications of the writes it answered (each holds its
 * request until its acknowledgement), the new one takes the writes that
 * come after, each with connections (and client ids) of its own, and
 * nothing is lost.
 */
START_TEST(test_a_reload_mid_stream_loses_nothing)
{
    streamAcross(corReload, "reload");
    ck_assert_int_eq(corServerLogCount(&cor, "failed: "), 0);
}
END_TEST

COR_TEST_SUITE(corMqtt)
{
    tcase_set_timeout(tc, 90);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_qos_0_1_2_in_5);
    tcase_add_test(tc, test_qos_0_1_2_in_3_1_1);
    tcase_add_test(tc, test_user_and_password_accepted_and_refused);
    tcase_add_test(tc, test_mqtts_verified_and_a_wrong_ca_refused);
    tcase_add_test(tc, test_keepalive_keeps_the_connection);
    tcase_add_test(tc, test_bad_urls_are_refused);
    tcase_add_test(tc, test_100000_qos1_notifications_arrive_in_order);
    tcase_add_test(tc, test_a_broker_restarted_mid_stream_loses_nothing);
    tcase_add_test(tc, test_a_reload_mid_stream_loses_nothing);
}
