/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT bridge's subscriptions against a real broker (mosquitto, with
 * mosquitto_pub as the sender and mosquitto_sub as the receiver of the
 * responses, corMqttBroker.h): each message of a subscription is a
 * request (MQTT /topic) that routes send to a testkit handler, whose
 * response goes to the message's Response Topic.
 */
#include "corTest.h"
#include "corServer.h"
#include "corMqttBroker.h"
#include "corAutoConfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer cor;
static char buf[1 << 16];

static void
setUp(void)
{
    corTestBrokerMake();
}

static void
tearDown(void)
{
    corServerStop(&cor);
    corTestBrokerRemove();
}

/* cor again with subscriptions to the broker: in/a/+ (QoS 1) served by
 * echo, in/b/# (QoS 2) by waitecho (which answers with what it got, after
 * 100 ms), in/never/# (QoS 1) by never (waits for ever), or by echo when
 * neverEchoes. */
static int
corSubscribing(bool neverEchoes)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 2, workers: 2,\n"
             "           coroutines: { enabled: {COROUTINES} } }\n"
             "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: mqtt\n"
             "    reconnect_max: 200ms\n"
             "    subscriptions:\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"in/a/+\",\n"
             "          client_id: cor-sub-1 }\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"in/b/#\",\n"
             "          qos: 2, client_id: cor-sub-1 }\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\",\n"
             "          filter: \"in/never/#\", client_id: cor-sub-1 }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"MQTT /in/a/*\", handler: echo }\n"
             "  - { match: \"MQTT /in/b/*\", handler: waitecho }\n"
             "  - { match: \"MQTT /in/never/*\", handler: %s }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             corTestBroker.port, corTestBroker.port, corTestBroker.port,
             neverEchoes ? "echo" : "never");
    corServerStop(&cor);
    return corServerStart(&cor, yaml);
}

#if COR_HAVE_COROUTINES
/* cor subscribing, once its three subscriptions are made. */
static void
corWithSubscriptions(bool neverEchoes)
{
    ck_assert_int_eq(corSubscribing(neverEchoes), 0);
    for (long t = corNowMs(); corServerLogCount(&cor, "subscribed to") < 3;) {
        ck_assert_int_lt(corNowMs() - t, 5000);
        usleep(20 * 1000);
    }
}

/* mosquitto_pub, 5.0, QoS qos, the response to out/reply. */
static void
publish(const char* topic, const char* message, int qos, const char* more)
{
    char command[512];

    snprintf(command, sizeof(command), "mosquitto_pub -h 127.0.0.1 -p %d "
             "-V mqttv5 -q %d -t '%s' -m '%s' -D publish response-topic "
             "out/reply %s", corTestBroker.port, qos, topic, message, more);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
}

/* Wait for count responses (their status lines) on s, up to ms; then
 * a moment for any more, and collect. */
static void
repliesWait(CorTestSub* s, int count, int ms)
{
    char command[192];
    long deadline = corNowMs() + ms;

    snprintf(command, sizeof(command), "grep -c 'status:' %s", s->out);
    while (corNowMs() < deadline
           && (corShell(command, buf, sizeof(buf)), atoi(buf)) < count) {
        usleep(20 * 1000);
    }
    usleep(300 * 1000);
    corTestSubCollect(s, 0, buf, sizeof(buf));
}

/*
 * Messages to matching filters reach their route's handler (method MQTT,
 * the topic as the path, the payload as the body, properties as headers)
 * and its response goes to the Response Topic; messages no filter
 * matches reach nobody.
 */
START_TEST(test_subscriptions_reach_the_right_handler_only)
{
    CorTestSub s;

    corWithSubscriptions(false);
    corTestSubStart(&s, "out/#", 0, "");
    publish("in/a/1", "hello", 1, "");
    publish("in/b/x/y", "world", 2, "-D publish user-property k v "
            "-D publish correlation-data c7");
    publish("in/c/1", "nobody", 1, "");
    publish("in/a/1/2", "nobody", 1, "");
    repliesWait(&s, 2, 5000);
    ck_assert_int_eq(corTestCountOf(buf, "status:"), 2);
    ck_assert_msg(strstr(buf, "out/reply hello status:200") != NULL, "%s",
                  buf);
    ck_assert_msg(strstr(buf, "out/reply MQTT /in/b/x/y\nMQTT-QoS: 2\n"
                         "k: v\nworld status:200") != NULL, "%s", buf);
    ck_assert_int_eq(corTestCountOf(buf, "nobody"), 0);
    ck_assert_int_eq(corTestBrokerCounter(cor.port,
                                          "cor_mqtt_received_total"), 2);
}
END_TEST

/* A handler that waits (for ever) holds up no other message. */
START_TEST(test_a_waiting_handler_holds_up_no_other_message)
{
    CorTestSub s;
    long t;

    corWithSubscriptions(false);
    corTestSubStart(&s, "out/#", 0, "");
    publish("in/never/1", "waits", 1, "");
    publish("in/never/2", "waits", 1, "");
    t = corNowMs();
    publish("in/a/1", "goes", 1, "");
    repliesWait(&s, 1, 5000);
    ck_assert_int_eq(corTestCountOf(buf, "out/reply goes status:200"), 1);
    ck_assert_int_lt(corNowMs() - t, 2000);
}
END_TEST

/* cor stopped with QoS 1 messages in their handlers: not acknowledged,
 * so the broker, which kept the subscriber's session, sends them again
 * to the cor that comes next (whose route answers them). */
START_TEST(test_messages_in_handlers_at_a_stop_come_again)
{
    CorTestSub s;

    corWithSubscriptions(false);
    corTestSubStart(&s, "out/#", 0, "");
    publish("in/never/1", "again1", 1, "");
    publish("in/never/2", "again2", 1, "");
    usleep(300 * 1000);         /* in their handlers */
    corWithSubscriptions(true);
    repliesWait(&s, 2, 5000);
    ck_assert_int_ge(corTestCountOf(buf, "out/reply again1 status:200"), 1);
    ck_assert_int_ge(corTestCountOf(buf, "out/reply again2 status:200"), 1);
}
END_TEST

/* A process publishing count QoS 1 messages "m1" to "mCOUNT" to topic,
 * one every 10 ms or so (mosquitto_pub -l), each with out/reply as its
 * Response Topic. Its PID. */
static pid_t
publishSteadily(const char* topic, int count)
{
    char command[512];
    pid_t pid;

    snprintf(command, sizeof(command), "for i in $(seq 1 %d); do echo m$i; "
             "sleep 0.01; done | mosquitto_pub -h 127.0.0.1 -p %d -V mqttv5 "
             "-q 1 -t '%s' -l -D publish response-topic out/reply",
             count, corTestBroker.port, topic);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", command, (char*)NULL);
        _exit(127);
    }
    return pid;
}

/* How many of "m1" to "mCOUNT" have no response in s's output yet
 * (duplicates do not stand in for them). */
static int
repliesMissing(const CorTestSub* s, int count)
{
    char command[192];
    int missing = 0;

    snprintf(command, sizeof(command), "cat %s", s->out);
    corShell(command, buf, sizeof(buf));
    for (int i = 1; i <= count; i++) {
        char want[32];

        snprintf(want, sizeof(want), "\nm%d status:200", i);
        missing += corTestCountOf(buf, want) == 0;
    }
    return missing;
}

/* The subscriber's connections made so far, both generations'. */
static int
subscriberConnects(void)
{
    return corServerLogCount(&cor, "as cor-sub-1 (");
}

/*
 * A reload in the middle of a steady QoS 1 stream into a handler that
 * takes 100 ms (waitecho): every message is handled at least once (its
 * response seen), and the two generations do not take the session from
 * each other in a loop: the old one, draining, serves nothing new, lets
 * go once its handlers are done and never connects again, so the
 * subscriber connects a bounded number of times (once per generation,
 * and once more each if the new one's connect took the session before
 * the old one drained) and then stays connected.
 */
START_TEST(test_a_reload_mid_subscription_loses_nothing)
{
    enum { COUNT = 200 };
    CorTestSub s;
    pid_t publisher;
    pid_t old;
    long deadline;
    int missing;
    int status;
    int connects;

    corWithSubscriptions(false);
    corTestSubStart(&s, "out/#", 0, "");
    old = corServerGeneration(&cor);
    publisher = publishSteadily("in/b/r", COUNT);
    usleep(1000 * 1000);
    ck_assert_int_eq(kill(cor.pid, SIGHUP), 0);
    ck_assert_int_eq(waitpid(publisher, &status, 0), publisher);
    ck_assert_int_eq(status, 0);
    deadline = corNowMs() + 30000;
    while ((missing = repliesMissing(&s, COUNT)) > 0
           && corNowMs() < deadline) {
        usleep(100 * 1000);
    }
    corTestSubCollect(&s, 0, buf, sizeof(buf));
    connects = subscriberConnects();
    fprintf(stderr, "corMqttSubTest: reload mid-subscription: %d messages, "
            "%d responses, %d missing, %d connects (%s)\n", COUNT,
            corTestCountOf(buf, "status:200"), missing, connects,
            corTestCoroutines() ? "coroutines" : "threads");
    ck_assert_int_eq(missing, 0);
    ck_assert_int_le(connects, 4);
    ck_assert_int_ne(corServerGeneration(&cor), old);   /* it drained */
    usleep(1000 * 1000);
    ck_assert_int_eq(subscriberConnects(), connects);
}
END_TEST

#else
/* A subscriber's connection lives in a coroutine of loop 0: a cor built
 * without coroutines refuses subscriptions at start, saying why (the
 * harness prints the log of a server that did not start, and removes
 * it). */
START_TEST(test_subscriptions_refused_without_coroutines)
{
    ck_assert_int_ne(corSubscribing(false), 0);
}
END_TEST
#endif

/* cor -t reports each bad subscription at its file:line: a filter, a
 * QoS, a URL of another scheme, a broker URL with a path, a typo. */
START_TEST(test_cor_t_checks_subscriptions_at_file_line)
{
    static const char yaml[] =
        "listen: [ { protocol: http, address: 127.0.0.1:1 } ]\n"
        "modules:\n"
        "  - { load: http }\n"
        "  - load: mqtt\n"
        "    subscriptions:\n"
        "      - { broker: \"mqtt://127.0.0.1\", filter: \"a/#/b\" }\n"
        "      - { broker: \"mqtt://127.0.0.1\", filter: \"a\", qos: 3 }\n"
        "      - { broker: \"http://127.0.0.1\", filter: \"a\" }\n"
        "      - { broker: \"mqtt://127.0.0.1/t\", filter: \"a\" }\n"
        "      - { broker: \"mqtt://127.0.0.1\", filter: \"a\", qoss: 1 }\n";
    static const char* const want[] = {
        "bad.yaml:6:47: module mqtt: filter: '#' not the whole last level",
        "bad.yaml:7:57: qos: 3 is out of range (0..2)",
        "bad.yaml:8:19: module mqtt: broker: not an mqtt:// or mqtts:// URL",
        "bad.yaml:9:19: module mqtt: broker: 'mqtt://127.0.0.1/t' has a path",
        "bad.yaml:10:52: unknown key 'qoss' in subscriptions[4]",
    };
    char path[128];
    char command[512];
    FILE* f;

    snprintf(path, sizeof(path), "%s/bad.yaml", corTestBroker.dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(yaml, f);
    fclose(f);
    snprintf(command, sizeof(command), "%s -t -c %s 2>&1", getenv("COR_BIN"),
             path);
    ck_assert_int_ne(corShell(command, buf, sizeof(buf)), 0);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ck_assert_msg(strstr(buf, want[i]) != NULL, "%s not in:\n%s",
                      want[i], buf);
    }
}
END_TEST

COR_TEST_SUITE(corMqttSub)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
#if COR_HAVE_COROUTINES
    tcase_add_test(tc, test_subscriptions_reach_the_right_handler_only);
    tcase_add_test(tc, test_a_waiting_handler_holds_up_no_other_message);
    tcase_add_test(tc, test_messages_in_handlers_at_a_stop_come_again);
    tcase_add_test(tc, test_a_reload_mid_subscription_loses_nothing);
#else
    tcase_add_test(tc, test_subscriptions_refused_without_coroutines);
#endif
    tcase_add_test(tc, test_cor_t_checks_subscriptions_at_file_line);
}
