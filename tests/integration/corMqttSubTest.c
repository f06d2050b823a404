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

/* What a test's cor subscribes to, beside the three subscriptions every
 * one has (corSubscribingWith). */
typedef struct {
    int broker; /* the broker's port */
    bool neverEchoes;
    unsigned perLoop;    /* coroutines.per_loop, 0: the default */
    const char* keys;    /* more keys of the module, "    k: v\n" */
    const char* subs;    /* more subscriptions, "      - {...}\n" */
    const char* routes;  /* more routes, "  - {...}\n" */
    const char* runtime; /* more keys of runtime, ", k: v" */
    const char* modules; /* more modules, "  - {...}\n" */
} SubConf;

/* cor again with subscriptions to the broker: in/a/+ (QoS 1) served by
 * echo, in/b/# (QoS 2) by waitecho (which answers with what it got, after
 * 100 ms), in/never/# (QoS 1) by never (which answers nothing: the core
 * answers 500), or by echo when neverEchoes; and what sc adds. */
static int
corSubscribingWith(const SubConf* sc)
{
    char yaml[4096];
    char perLoop[32] = "";

    if (sc->perLoop > 0) {
        snprintf(perLoop, sizeof(perLoop), ", per_loop: %u", sc->perLoop);
    }
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 2, workers: 4%s,\n"
             "           coroutines: { enabled: {COROUTINES}%s } }\n"
             "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - load: mqtt\n"
             "    reconnect_max: 200ms\n"
             "%s"
             "    subscriptions:\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"in/a/+\",\n"
             "          client_id: cor-sub-1 }\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"in/b/#\",\n"
             "          qos: 2, client_id: cor-sub-1 }\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\",\n"
             "          filter: \"in/never/#\", client_id: cor-sub-1 }\n"
             "%s"
             "%s"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"MQTT /in/a/*\", handler: echo }\n"
             "  - { match: \"MQTT /in/b/*\", handler: waitecho }\n"
             "  - { match: \"MQTT /in/never/*\", handler: %s }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "%s"
             "log: { pid_file: {DIR}/cor.pid }\n",
             sc->runtime != NULL ? sc->runtime : "", perLoop,
             sc->keys != NULL ? sc->keys : "", sc->broker, sc->broker,
             sc->broker, sc->subs != NULL ? sc->subs : "",
             sc->modules != NULL ? sc->modules : "",
             sc->neverEchoes ? "echo" : "never",
             sc->routes != NULL ? sc->routes : "");
    corServerStop(&cor);
    return corServerStart(&cor, yaml);
}

static int
corSubscribing(bool neverEchoes)
{
    return corSubscribingWith(
        &(SubConf){ .broker = corTestBroker.port, .neverEchoes = neverEchoes });
}

#if COR_HAVE_COROUTINES
/* Wait until cor's log says "subscribed to" count times, and, where
 * filter is not NULL, once for filter: a link that reconnected says its
 * own again, which met the count alone before the subscription a test
 * publishes to was made (its QoS 0 messages were then lost). */
static void
subscribedWait(int count, const char* filter)
{
    char line[128];

    snprintf(line, sizeof(line), "subscribed to '%s'",
             filter != NULL ? filter : "");
    for (long t = corNowMs();
         corServerLogCount(&cor, "subscribed to") < count
         || (filter != NULL && corServerLogCount(&cor, line) < 1);) {
        ck_assert_msg(corNowMs() - t < 10000, "not %d subscriptions and %s",
                      count, line);
        usleep(20 * 1000);
    }
}

/* cor subscribing, once its three subscriptions are made. */
static void
corWithSubscriptions(bool neverEchoes)
{
    ck_assert_int_eq(corSubscribing(neverEchoes), 0);
    subscribedWait(3, NULL);
}

/* mosquitto_pub, 5.0, QoS qos, the response to out/reply. */
static void
publish(const char* topic, const char* message, int qos, const char* more)
{
    char command[1024];

    snprintf(command, sizeof(command),
             "mosquitto_pub -h 127.0.0.1 -p %d "
             "-V mqttv5 -q %d -t '%s' -m '%s' -D publish response-topic "
             "out/reply %s",
             corTestBroker.port, qos, topic, message, more);
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
    publish("in/b/x/y", "world", 2,
            "-D publish user-property k v "
            "-D publish correlation-data c7");
    publish("in/c/1", "nobody", 1, "");
    publish("in/a/1/2", "nobody", 1, "");
    repliesWait(&s, 2, 5000);
    ck_assert_int_eq(corTestCountOf(buf, "status:"), 2);
    ck_assert_msg(strstr(buf, "out/reply hello status:200") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "out/reply MQTT /in/b/x/y\nMQTT-QoS: 2\n"
                              "k: v\nworld status:200")
                      != NULL,
                  "%s", buf);
    ck_assert_int_eq(corTestCountOf(buf, "nobody"), 0);
    ck_assert_int_eq(corTestBrokerCounter(cor.port, "cor_mqtt_received_total"),
                     2);
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
    usleep(300 * 1000); /* in their handlers */
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

    snprintf(command, sizeof(command),
             "for i in $(seq 1 %d); do echo m$i; "
             "sleep 0.01; done | mosquitto_pub -h 127.0.0.1 -p %d -V mqttv5 "
             "-q 1 -t '%s' -l -D publish response-topic out/reply",
             count, corTestBroker.port, topic);
    pid = corTestFork(SIGKILL);
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
    while ((missing = repliesMissing(&s, COUNT)) > 0 && corNowMs() < deadline) {
        usleep(100 * 1000);
    }
    corTestSubCollect(&s, 0, buf, sizeof(buf));
    connects = subscriberConnects();
    fprintf(stderr,
            "corMqttSubTest: reload mid-subscription: %d messages, "
            "%d responses, %d missing, %d connects (%s)\n",
            COUNT, corTestCountOf(buf, "status:200"), missing, connects,
            corTestCoroutines() ? "coroutines" : "threads");
    ck_assert_int_eq(missing, 0);
    ck_assert_int_le(connects, 4);
    ck_assert_int_ne(corServerGeneration(&cor), old); /* it drained */
    usleep(1000 * 1000);
    ck_assert_int_eq(subscriberConnects(), connects);
}
END_TEST

/* Distinct responses "PREFIXn status:200" in s's output so far. */
static int
repliesDistinct(const CorTestSub* s, const char* prefix)
{
    char command[256];

    snprintf(command, sizeof(command),
             "grep -o ' %s[0-9]* status:200' %s "
             "| sort -u | wc -l",
             prefix, s->out);
    corShell(command, buf, sizeof(buf));
    return atoi(buf);
}

/* A process publishing PREFIX1 to PREFIXcount to topic at qos, a hundred
 * every 100 ms (mosquitto_pub -l), each with out/reply as its Response
 * Topic. Its PID. */
static pid_t
streamStart(const char* prefix, int count, int qos, const char* topic)
{
    char command[512];
    pid_t pid;

    snprintf(command, sizeof(command),
             "for i in $(seq 1 %d); do echo %s$i; "
             "[ $((i %% 100)) -eq 0 ] && sleep 0.1; done | mosquitto_pub "
             "-h 127.0.0.1 -p %d -V mqttv5 -q %d -t %s -l -D publish "
             "response-topic out/reply",
             count, prefix, corTestBroker.port, qos, topic);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", command, (char*)NULL);
        _exit(127);
    }
    return pid;
}

static void
streamWait(pid_t pid)
{
    int status;

    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(status, 0);
}

/* Reload cor and wait until its new generation serves (up to 10 s). */
static void
reloadOnce(void)
{
    pid_t old = corServerGeneration(&cor);
    long deadline = corNowMs() + 10000;

    ck_assert_int_eq(kill(cor.pid, SIGHUP), 0);
    while (corServerGeneration(&cor) == old && corNowMs() < deadline) {
        usleep(20 * 1000);
    }
    ck_assert_int_ne(corServerGeneration(&cor), old);
}

/* The sessions the broker keeps, read until they are want or 20 s went
 * by: mosquitto says them once a second, late on a loaded machine, and
 * a read may see the count from before the last change. */
static long
sessionsKeptAwait(long want)
{
    long kept = corTestBrokerSessionsKept();

    for (long deadline = corNowMs() + 20000;
         kept != want && corNowMs() < deadline;) {
        kept = corTestBrokerSessionsKept();
    }
    return kept;
}

/*
 * Two reloads in the middle of a QoS 1 and a QoS 2 stream (2000 and 1000
 * messages in about two seconds) into a subscriber with the default
 * client id: the id is the instance's (its master's), not the
 * generation's, so each new generation goes on with the session the old
 * one let go of. Every message is handled, the broker keeps no session of
 * an old generation ($SYS/broker/clients/total equals connected), and a
 * retained message is handled once in the instance's life, not again at
 * each reload. Before: a new session per generation, the old ones kept on
 * the broker (and the messages queued there), the retained message
 * handled at each reload.
 */
START_TEST(test_reloads_go_on_with_one_session)
{
    enum { COUNT1 = 2000, COUNT2 = 1000 };
    char command[512];
    char subs[256];
    CorTestSub s;
    pid_t qos1;
    pid_t qos2;
    long deadline;
    int handled1;
    int handled2 = 0;
    int kept;

    snprintf(command, sizeof(command),
             "mosquitto_pub -h 127.0.0.1 -p %d "
             "-V mqttv5 -q 1 -r -t in/r/kept -m kept -D publish "
             "response-topic out/reply",
             corTestBroker.port);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    corTestSubStart(&s, "out/#", 0, "");
    /* Another URL for the broker: a group of its own, the default id. */
    snprintf(subs, sizeof(subs),
             "      - { broker: \"mqtt://127.0.0.1:%d/\","
             " filter: \"in/r/#\", qos: 2 }\n",
             corTestBroker.port);
    ck_assert_int_eq(
        corSubscribingWith(&(SubConf){
            .broker = corTestBroker.port,
            .subs = subs,
            .routes = "  - { match: \"MQTT /in/r/*\", handler: echo }\n" }),
        0);
    subscribedWait(4, "in/r/#");
    qos1 = streamStart("m", COUNT1, 1, "in/r/s");
    qos2 = streamStart("n", COUNT2, 2, "in/r/t");
    usleep(500 * 1000);
    reloadOnce();
    usleep(300 * 1000);
    reloadOnce();
    streamWait(qos1);
    streamWait(qos2);
    deadline = corNowMs() + 20000;
    while (((handled1 = repliesDistinct(&s, "m")) < COUNT1
            || (handled2 = repliesDistinct(&s, "n")) < COUNT2)
           && corNowMs() < deadline) {
        usleep(100 * 1000);
    }
    handled2 = repliesDistinct(&s, "n");
    kept = (int)sessionsKeptAwait(0); /* the old ones ended */
    corTestSubCollect(&s, 0, buf, sizeof(buf));
    fprintf(stderr,
            "corMqttSubTest: two reloads in QoS 1 and 2 streams: "
            "%d of %d and %d of %d handled, the retained one %d times, %d "
            "sessions kept (%s)\n",
            handled1, COUNT1, handled2, COUNT2,
            corTestCountOf(buf, "reply kept status:200"), kept,
            corTestCoroutines() ? "coroutines" : "threads");
    ck_assert_int_eq(handled1, COUNT1);
    ck_assert_int_eq(handled2, COUNT2);
    ck_assert_int_eq(corTestCountOf(buf, "reply kept status:200"), 1);
    ck_assert_int_eq(kept, 0);
}
END_TEST

/*
 * After a stop (cor -s stop: SIGTERM), the broker keeps no session of a
 * subscriber with the default client id, in 5.0 and in 3.1.1 (whose
 * sessions never expire by themselves): no later cor can take up an id of
 * this instance. A client_id given (cor-sub-1) keeps its session for the
 * next cor that has it. Before: both kept.
 */
static void
stopKeepsNoSession(const char* version)
{
    char keys[64];
    char subs[256];
    long kept;

    snprintf(keys, sizeof(keys), "    version: \"%s\"\n", version);
    snprintf(subs, sizeof(subs),
             "      - { broker: \"mqtt://127.0.0.1:%d/\","
             " filter: \"in/s/#\" }\n",
             corTestBroker.port);
    ck_assert_int_eq(corSubscribingWith(
                         &(SubConf){ .broker = corTestBroker.port,
                                     .keys = keys,
                                     .subs = subs }),
                     0);
    subscribedWait(4, "in/s/#");
    corServerStop(&cor);
    kept = sessionsKeptAwait(1);
    fprintf(stderr,
            "corMqttSubTest: after a stop in %s: %ld sessions kept "
            "(%s)\n",
            version, kept, corTestCoroutines() ? "coroutines" : "threads");
    ck_assert_int_eq(kept, 1);
}

START_TEST(test_a_stop_keeps_no_session_in_5)
{
    stopKeepsNoSession("5");
}
END_TEST

START_TEST(test_a_stop_keeps_no_session_in_311)
{
    stopKeepsNoSession("3.1.1");
}
END_TEST

/* Wait until the broker's counter name in cor's /metrics is at least
 * value, up to ms; its value then. */
static long
counterWait(const char* name, long value, int ms)
{
    long deadline = corNowMs() + ms;
    long v;

    while ((v = corTestBrokerCounter(cor.port, name)) < value
           && corNowMs() < deadline) {
        usleep(20 * 1000);
    }
    return v;
}

/* Publish count messages "PREFIX1".. at QoS qos to topic on port, as
 * fast as mosquitto_pub -l goes, each with out/reply as its Response
 * Topic. */
static void
publishMany(int port, const char* topic, const char* prefix, int count, int qos)
{
    char command[512];

    snprintf(command, sizeof(command),
             "seq -f '%s%%g' 1 %d | mosquitto_pub "
             "-h 127.0.0.1 -p %d -V mqttv5 -q %d -t '%s' -l -D publish "
             "response-topic out/reply",
             prefix, count, port, qos, topic);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
}

/* Requests handed to a coroutine or a worker so far, less the messages
 * they ended: the messages in handlers, or fewer (read in that order,
 * what ended meanwhile is subtracted too). */
static long
inHandlers(void)
{
    long handed = corMetric(cor.port, "cor_requests_total{ran=\"coroutine\"}")
                  + corMetric(cor.port, "cor_requests_total{ran=\"worker\"}");

    return handed - corTestBrokerCounter(cor.port, "cor_mqtt_received_total")
           - corTestBrokerCounter(cor.port, "cor_mqtt_unacknowledged_total");
}

/*
 * A QoS 0 flood on one subscription into a handler that takes 100 ms:
 * at most max_in_handlers (20) messages are in handlers at once (the
 * subscriber stops reading its socket at the bound and reads again as
 * handlers end), and every message is handled in the end. Without the
 * bound, all of them were requests at once.
 */
static void
floodIsBounded(int broker)
{
    enum { COUNT = 400, BOUND = 20 };
    char subs[256];
    long peak = 0;
    long deadline;

    snprintf(subs, sizeof(subs),
             "      - { broker: \"mqtt://127.0.0.1:%d\","
             " filter: \"in/flood/#\", qos: 0 }\n",
             broker);
    ck_assert_int_eq(
        corSubscribingWith(&(SubConf){
            .broker = broker,
            .keys = "    max_in_handlers: 20\n",
            .subs = subs,
            .routes =
                "  - { match: \"MQTT /in/flood/*\", handler: waitecho }\n" }),
        0);
    subscribedWait(4, "in/flood/#");
    publishMany(broker, "in/flood/x", "f", COUNT, 0);
    deadline = corNowMs() + 40000; /* under the case's 60 s: said, not cut */
    while (corTestBrokerCounter(cor.port, "cor_mqtt_received_total") < COUNT
           && corNowMs() < deadline) {
        long n = inHandlers();

        peak = n > peak ? n : peak;
        usleep(20 * 1000);
    }
    fprintf(stderr,
            "corMqttSubTest: QoS 0 flood of %d: %ld handled, at most %ld "
            "in handlers (%s)\n",
            COUNT, corTestBrokerCounter(cor.port, "cor_mqtt_received_total"),
            peak, corTestCoroutines() ? "coroutines" : "threads");
    ck_assert_int_le(peak, BOUND);
    ck_assert_int_eq(corTestBrokerCounter(cor.port, "cor_mqtt_received_total"),
                     COUNT);
}

START_TEST(test_a_qos0_flood_is_bounded)
{
    floodIsBounded(corTestBroker.port);
}
END_TEST

/*
 * A graceful stop with messages parked on worker threads: 600 QoS 0
 * messages into hello's park handler (which waits until /wake), past the
 * coroutines (per_loop: 4; all of them in blocking mode) on the four
 * workers, most of them queued there. The drain says what it waits for
 * (the requests on workers), and at runtime.stop_timeout (2 s) the stop
 * cancels the workers' waits as the loops': a handler that had not
 * started never starts. Before, each queued one ran and parked until its
 * first look for a cancel (50 ms): 600 / 4 x 50 ms, past the master's
 * stop_timeout + 5 s, which killed the generation.
 */
START_TEST(test_a_stop_with_messages_parked_on_workers_ends)
{
    enum { COUNT = 600 };
    char subs[256];
    long handed = 0;
    long deadline;
    long t;
    int status;

    snprintf(subs, sizeof(subs),
             "      - { broker: \"mqtt://127.0.0.1:%d\","
             " filter: \"in/park/#\", qos: 0 }\n",
             corTestBroker.port);
    ck_assert_int_eq(
        corSubscribingWith(&(SubConf){
            .broker = corTestBroker.port,
            .perLoop = 4,
            .runtime = ", stop_timeout: 2s",
            .keys = "    max_in_handlers: 1000\n",
            .subs = subs,
            .modules = "  - { load: {MODULES}/hello.so }\n",
            .routes = "  - { match: \"MQTT /in/park/*\", handler: park }\n" }),
        0);
    subscribedWait(4, "in/park/#");
    publishMany(corTestBroker.port, "in/park/x", "p", COUNT, 0);
    deadline = corNowMs() + 20000;
    while (
        (handed = corMetric(cor.port, "cor_requests_total{ran=\"coroutine\"}")
                  + corMetric(cor.port, "cor_requests_total{ran=\"worker\"}"))
            < COUNT
        && corNowMs() < deadline) {
        usleep(20 * 1000);
    }
    ck_assert_int_ge(handed, COUNT);
    t = corNowMs();
    ck_assert_int_eq(kill(cor.pid, SIGQUIT), 0);
    ck_assert_int_eq(waitpid(cor.pid, &status, 0), cor.pid);
    t = corNowMs() - t;
    cor.pid = 0;
    fprintf(stderr,
            "corMqttSubTest: graceful stop with %d messages parked "
            "(stop_timeout 2 s): %ld ms (%s)\n",
            COUNT, t, corTestCoroutines() ? "coroutines" : "threads");
    ck_assert_int_eq(corServerLogCount(&cor, "did not stop in"), 0);
    ck_assert_int_ge(corServerLogCount(&cor, "on workers"), 1);
    ck_assert_int_eq(corServerLogCount(&cor, "generation 1 stopped"), 1);
    ck_assert_int_lt(t, 5000);
}
END_TEST

/*
 * Messages routed to a forward group go upstream as HTTP: POST (or the
 * subscription's method:), never the method MQTT, which an application
 * answers 501; the 5.0 user properties as MQTT-User-<name> fields, so that
 * a publisher cannot write the upstream's Host, Authorization, Cookie,
 * framing, hop-by-hop or forwarding fields. The upstream echoes the head
 * it got, which the response carries to the Response Topic. A handler
 * still sees the method MQTT and the properties as they came.
 */
START_TEST(test_messages_forwarded_go_as_http)
{
    static const char* const never[] = {
        "\nAuthorization:",
        "\nX-Forwarded-For: 6.6.6.6",
        "\nHost: evil",
        "\nCookie:",
        "\nTransfer-Encoding:",
        "\nForwarded:",
        "\nConnection: close",
        "\nContent-Length: 999",
        "MQTT /",
        "bad name",
    };
    char subs[512];
    char modules[256];
    CorTestSub s;
    pid_t upstream;
    int port;

    upstream = corUpstreamStart(&port);
    ck_assert_int_gt(upstream, 0);
    snprintf(subs, sizeof(subs),
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"in/fwd/#\","
             " client_id: cor-sub-1 }\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"in/put/#\","
             " client_id: cor-sub-1, method: PUT }\n",
             corTestBroker.port, corTestBroker.port);
    snprintf(modules, sizeof(modules),
             "  - load: forward\n    upstreams:\n"
             "      - { name: app, servers: [ \"http://127.0.0.1:%d\" ] }\n",
             port);
    ck_assert_int_eq(
        corSubscribingWith(&(SubConf){
            .broker = corTestBroker.port,
            .subs = subs,
            .modules = modules,
            .routes = "  - { match: \"MQTT /in/fwd/*\", handler: app }\n"
                      "  - { match: \"MQTT /in/put/*\", handler: app }\n" }),
        0);
    subscribedWait(5, "in/fwd/#");
    subscribedWait(5, "in/put/#");
    corTestSubStart(&s, "out/#", 3, "");
    publish("in/fwd/echo", "up", 1,
            "-D publish user-property Authorization "
            "secret -D publish user-property X-Forwarded-For 6.6.6.6 "
            "-D publish user-property Host evil -D publish user-property "
            "Cookie c=1 -D publish user-property Transfer-Encoding chunked "
            "-D publish user-property Connection close -D publish "
            "user-property Forwarded for=6.6.6.6 -D publish user-property "
            "Content-Length 999 -D publish user-property 'bad name' x "
            "-D publish user-property k v");
    publish("in/put/echo", "put", 1, "");
    publish("in/a/1", "local", 1, "-D publish user-property k v");
    corTestSubCollect(&s, 10000, buf, sizeof(buf));
    corUpstreamStop(&upstream);
    ck_assert_msg(strstr(buf, "POST /in/fwd/echo HTTP/1.1\r\n") != NULL, "%s",
                  buf);
    ck_assert_msg(strstr(buf, "PUT /in/put/echo HTTP/1.1\r\n") != NULL, "%s",
                  buf);
    ck_assert_msg(strstr(buf, "\nMQTT-User-Authorization: secret") != NULL,
                  "%s", buf);
    ck_assert_msg(strstr(buf, "\nMQTT-User-Host: evil") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "\nMQTT-User-k: v") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "\nMQTT-QoS: 1") != NULL, "%s", buf);
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
        ck_assert_msg(strstr(buf, never[i]) == NULL, "%s in:\n%s", never[i],
                      buf);
    }
    ck_assert_int_eq(corTestCountOf(buf, "status:200"), 3);
    /* The echo handler saw it as a message, its properties as they are. */
    ck_assert_msg(strstr(buf, "out/reply local status:200") != NULL, "%s", buf);
}
END_TEST

/*
 * At the coroutine cap (per_loop: 1), a subscriber whose connect finds
 * no coroutine is not abandoned: two subscribers (two client ids) take
 * turns with the one coroutine, at the start and when the broker comes
 * back, and both are served; the log says so once per episode.
 */
static void
capKeepsTrying(int broker)
{
    char subs[256];

    snprintf(subs, sizeof(subs),
             "      - { broker: \"mqtt://127.0.0.1:%d\","
             " filter: \"in/c/+\", client_id: other }\n",
             broker);
    ck_assert_int_eq(
        corSubscribingWith(&(SubConf){
            .broker = broker,
            .perLoop = 1,
            .subs = subs,
            .routes = "  - { match: \"MQTT /in/c/*\", handler: echo }\n" }),
        0);
    subscribedWait(4, "in/c/+");
    ck_assert_int_eq(corServerLogCount(&cor, "no coroutine to connect"), 1);
    corTestBrokerStop(SIGTERM);
    corTestBrokerStart();
    subscribedWait(8, NULL);
    /* The back-off's line says whose connection it is. */
    ck_assert_int_ge(corServerLogCount(&cor, "mqtt: subscriber mqtt://"), 1);
    for (int i = 0; i < 2; i++) {
        CorTestSub s;

        corTestSubStart(&s, "out/#", 0, "");
        publish(i == 0 ? "in/a/1" : "in/c/1", "served", 1, "");
        repliesWait(&s, 1, 10000);
        ck_assert_int_eq(corTestCountOf(buf, "out/reply served status:200"), 1);
    }
}

START_TEST(test_subscribers_at_the_coroutine_cap_keep_trying)
{
    capKeepsTrying(corTestBroker.port);
}
END_TEST

/*
 * Poison messages: QoS 1 messages whose handler answers 500 are served
 * again twice (redeliver: 2), then acknowledged and published to the
 * dead-letter topic with their topic, status and attempts; they do not
 * fill the window (max_in_handlers: 4, six of them), so a good message
 * after them is served, and the next cor does not get them again.
 */
static void
poisonIsDeadLettered(int broker)
{
    static const char keys[] =
        "    max_in_handlers: 4\n    redeliver: 2\n"
        "    redeliver_delay: 100ms\n    dead_letter: \"dead/in\"\n";
    CorTestSub dead;
    CorTestSub s;

    ck_assert_int_eq(corSubscribingWith(
                         &(SubConf){ .broker = broker, .keys = keys }),
                     0);
    subscribedWait(3, NULL);
    corTestSubStart(&dead, "dead/#", 6, "");
    corTestSubStart(&s, "out/#", 0, "");
    publishMany(broker, "in/never/p", "p", 6, 1);
    publish("in/a/1", "good", 1, "");
    ck_assert_int_eq(corTestSubCollect(&dead, 20000, buf, sizeof(buf)), 6);
    for (int i = 1; i <= 6; i++) {
        char want[96];

        snprintf(want, sizeof(want),
                 "dead/in p%d topic:in/never/p status:"
                 "500 attempts:3",
                 i);
        ck_assert_msg(strstr(buf, want) != NULL, "%s not in:\n%s", want, buf);
    }
    repliesWait(&s, 1, 5000);
    ck_assert_int_eq(corTestCountOf(buf, "out/reply good status:200"), 1);
    ck_assert_int_eq(corServerLogCount(&cor, "given up, acknowledged, "
                                             "published to dead/in"),
                     6);
    ck_assert_int_eq(corSubscribingWith(
                         &(SubConf){ .broker = broker, .keys = keys }),
                     0);
    subscribedWait(3, NULL);
    corTestSubStart(&s, "out/#", 0, "");
    publish("in/a/1", "next", 1, "");
    repliesWait(&s, 1, 5000);
    ck_assert_int_eq(corTestCountOf(buf, "out/reply next status:200"), 1);
    ck_assert_int_eq(corTestBrokerCounter(cor.port,
                                          "cor_mqtt_unacknowledged_total"),
                     0);
}

START_TEST(test_a_poison_message_is_dead_lettered)
{
    poisonIsDeadLettered(corTestBroker.port);
}
END_TEST

/*
 * A retained message is handled once, not again at the next connect of
 * the same session (a restart): 5.0 subscribes with Retain Handling 1,
 * 3.1.1 does not subscribe again when the session is present. The fresh
 * message published after the restart comes after any retained one, so
 * once it is counted, a retained one would have been.
 */
static void
retainedOnce(int broker, const char* version)
{
    char keys[64];
    char command[256];

    snprintf(keys, sizeof(keys), "    version: \"%s\"\n", version);
    snprintf(command, sizeof(command),
             "mosquitto_pub -h 127.0.0.1 -p %d "
             "-q 1 -r -t in/a/r -m kept",
             broker);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    for (int run = 0; run < 2; run++) {
        ck_assert_int_eq(corSubscribingWith(
                             &(SubConf){ .broker = broker, .keys = keys }),
                         0);
        subscribedWait(3, NULL);
        if (run == 1) {
            publish("in/a/fresh", "fresh", 1, "");
        }
        ck_assert_int_eq(counterWait("cor_mqtt_received_total", 1, 10000), 1);
        usleep(300 * 1000);
        ck_assert_int_eq(corTestBrokerCounter(cor.port,
                                              "cor_mqtt_received_total"),
                         1);
    }
}

START_TEST(test_retained_messages_once_in_5)
{
    retainedOnce(corTestBroker.port, "5");
}
END_TEST

START_TEST(test_retained_messages_once_in_311)
{
    retainedOnce(corTestBroker.port, "3.1.1");
}
END_TEST

/*
 * limits.body_bytes holds for messages as for HTTP bodies: one past it
 * (2 MiB under the default 1 MiB, QoS 1) never reaches its handler, is
 * logged once with its topic and size, counted, and acknowledged, so the
 * message after it on the subscription is served.
 */
START_TEST(test_a_message_past_body_bytes_is_never_handled)
{
    char command[512];
    CorTestSub s;

    corWithSubscriptions(false); /* limits.body_bytes: 1MiB */
    corTestSubStart(&s, "out/#", 0, "");
    snprintf(command, sizeof(command),
             "head -c 2097152 /dev/zero | tr "
             "'\\0' x > %s/big && mosquitto_pub -h 127.0.0.1 -p %d -V "
             "mqttv5 -q 1 -t in/a/big -f %s/big -D publish response-topic "
             "out/reply",
             cor.dir, corTestBroker.port, cor.dir);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    publish("in/a/1", "small", 1, "");
    /* Up to 30 s: a server under ASan, three test programs beside it,
     * took more than 5 to read and drop the 2 MiB before the small one. */
    repliesWait(&s, 1, 30000);
    ck_assert_int_eq(corTestCountOf(buf, "status:"), 1);
    ck_assert_msg(strstr(buf, "out/reply small status:200") != NULL, "%s", buf);
    ck_assert_int_eq(corServerLogCount(&cor, "a message of 2097152 bytes "
                                             "on in/a/big is past the limits"),
                     1);
    ck_assert_int_eq(corTestBrokerCounter(cor.port, "cor_mqtt_refused_total"),
                     1);
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
        ck_assert_msg(strstr(buf, want[i]) != NULL, "%s not in:\n%s", want[i],
                      buf);
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
    tcase_add_test(tc, test_a_message_past_body_bytes_is_never_handled);
    tcase_add_test(tc, test_a_qos0_flood_is_bounded);
    tcase_add_test(tc, test_a_stop_with_messages_parked_on_workers_ends);
    tcase_add_test(tc, test_messages_forwarded_go_as_http);
    tcase_add_test(tc, test_reloads_go_on_with_one_session);
    tcase_add_test(tc, test_a_stop_keeps_no_session_in_5);
    tcase_add_test(tc, test_a_stop_keeps_no_session_in_311);
    tcase_add_test(tc, test_subscribers_at_the_coroutine_cap_keep_trying);
    tcase_add_test(tc, test_a_poison_message_is_dead_lettered);
    tcase_add_test(tc, test_retained_messages_once_in_5);
    tcase_add_test(tc, test_retained_messages_once_in_311);
#else
    tcase_add_test(tc, test_subscriptions_refused_without_coroutines);
#endif
    tcase_add_test(tc, test_cor_t_checks_subscriptions_at_file_line);
}
