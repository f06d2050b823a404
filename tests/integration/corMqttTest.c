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
#include "corAutoConfig.h"

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

typedef struct {
    pid_t pid;
    int port;                   /* anonymous */
    int portAuth;               /* user "u", password "p" */
    int portTls;                /* the test CA's certificate */
    int portSelf;               /* a self-signed one */
    char dir[64];
} Broker;

typedef struct {
    pid_t pid;
    char out[128];
} Sub;

static Broker broker;
static CorServer cor;
static char certs[64];
static char buf[1 << 16];

/* count ports free at once (each bound until all are known). */
static void
portsTake(int* ports, int count)
{
    int fds[8];

    for (int i = 0; i < count; i++) {
        struct sockaddr_in addr = { .sin_family = AF_INET };
        socklen_t len = sizeof(addr);

        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_eq(bind(fds[i], (struct sockaddr*)&addr, len), 0);
        getsockname(fds[i], (struct sockaddr*)&addr, &len);
        ports[i] = ntohs(addr.sin_port);
    }
    for (int i = 0; i < count; i++) {
        close(fds[i]);
    }
}

/* Start (or start again, on the same ports) the broker; returns once its
 * plain port answers. */
static void
brokerStart(void)
{
    char path[128];
    FILE* f;
    long deadline = corNowMs() + 5000;

    snprintf(path, sizeof(path), "%s/mosquitto.conf", broker.dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "user root\nper_listener_settings true\n"
            "persistence true\npersistence_location %s/\n"
            "max_queued_messages 0\n"
            "log_dest file %s/mosquitto.log\nlog_type all\n"
            "listener %d 127.0.0.1\nallow_anonymous true\n"
            "listener %d 127.0.0.1\nallow_anonymous false\n"
            "password_file %s/passwd\n"
            "listener %d 127.0.0.1\nallow_anonymous true\n"
            "certfile %s/server.pem\nkeyfile %s/server.key\n"
            "listener %d 127.0.0.1\nallow_anonymous true\n"
            "certfile %s/self.pem\nkeyfile %s/self.key\n",
            broker.dir, broker.dir, broker.port, broker.portAuth, broker.dir,
            broker.portTls, certs, certs, broker.portSelf, certs, certs);
    fclose(f);
    broker.pid = fork();
    if (broker.pid == 0) {
        /* Not its warning that it runs as root (to read the files). */
        if (freopen("/dev/null", "w", stderr) != NULL) {
            execlp("mosquitto", "mosquitto", "-c", path, (char*)NULL);
        }
        _exit(127);
    }
    while (corNowMs() < deadline) {
        int fd = corConnect(broker.port);

        if (fd >= 0) {
            close(fd);
            return;
        }
        ck_assert_int_eq(waitpid(broker.pid, NULL, WNOHANG), 0);
        usleep(20 * 1000);
    }
    ck_abort_msg("mosquitto did not answer on %d", broker.port);
}

static void
brokerStop(int sig)
{
    if (broker.pid > 0) {
        kill(broker.pid, sig);
        waitpid(broker.pid, NULL, 0);
        broker.pid = 0;
    }
}

/* mosquitto_sub -t topic at QoS 1 in 5.0, each message a line "TOPIC
 * PAYLOAD USER-PROPERTIES" in s->out, until count came (then it exits;
 * 0: until subCollect); extra: more options. Returns once the broker has
 * its SUBSCRIBE. */
static void
subStart(Sub* s, const char* topic, int count, const char* extra)
{
    char command[512];
    char log[128];
    long deadline = corNowMs() + 5000;
    static int subs;
    char id[32];
    char until[32] = "";

    snprintf(id, sizeof(id), "sub%d", ++subs);
    if (count > 0) {
        snprintf(until, sizeof(until), "-C %d", count);
    }
    snprintf(s->out, sizeof(s->out), "%s/%s.out", broker.dir, id);
    snprintf(command, sizeof(command), "exec mosquitto_sub -h 127.0.0.1 -p "
             "%d -V mqttv5 -q 1 -i %s -t '%s' %s -W 60 -F '%%t %%p %%P' "
             "%s > %s", broker.port, id, topic, until, extra, s->out);
    s->pid = fork();
    if (s->pid == 0) {
        execl("/bin/sh", "sh", "-c", command, (char*)NULL);
        _exit(127);
    }
    snprintf(log, sizeof(log), "Received SUBSCRIBE from %s", id);
    while (corNowMs() < deadline) {
        snprintf(command, sizeof(command), "grep -c '%s' %s/mosquitto.log",
                 log, broker.dir);
        if (corShell(command, buf, sizeof(buf)) == 0) {
            return;
        }
        usleep(20 * 1000);
    }
    ck_abort_msg("mosquitto_sub did not subscribe");
}

/* Wait for s to have its count (it exits then), up to ms; its output
 * into buf. Returns the number of lines. */
static int
subCollect(Sub* s, int ms)
{
    long deadline = corNowMs() + ms;
    char command[192];
    int lines = 0;

    while (corNowMs() < deadline && waitpid(s->pid, NULL, WNOHANG) == 0) {
        usleep(20 * 1000);
    }
    if (corNowMs() >= deadline) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
    }
    s->pid = 0;
    snprintf(command, sizeof(command), "head -c 60000 %s", s->out);
    corShell(command, buf, sizeof(buf));
    for (const char* p = buf; (p = strchr(p, '\n')) != NULL; p++) {
        lines++;
    }
    return lines;
}

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
    int ports[4];
    char command[256];

    corTestCertsMake(certs, sizeof(certs));
    snprintf(broker.dir, sizeof(broker.dir), "/tmp/cor-mqtt-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(broker.dir));
    snprintf(command, sizeof(command), "mosquitto_passwd -b -c %s/passwd u p",
             broker.dir);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
    portsTake(ports, 4);
    broker.port = ports[0];
    broker.portAuth = ports[1];
    broker.portTls = ports[2];
    broker.portSelf = ports[3];
    brokerStart();
    snprintf(yaml, sizeof(yaml), corConfig, certs);
    ck_assert_int_eq(corServerStart(&cor, yaml), 0);
}

static void
tearDown(void)
{
    char command[256];

    corServerStop(&cor);
    brokerStop(SIGTERM);
    snprintf(command, sizeof(command), "rm -rf %s", broker.dir);
    corShell(command, buf, sizeof(buf));
    corTestCertsRemove(certs);
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
    snprintf(request, sizeof(request), "POST /write?url=%s&n=%d%s "
             "HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n%s", arg, n,
             query, strlen(body), body);
    return corRequest(cor.port, request, buf, sizeof(buf));
}

static long
metric(const char* name, const char* scheme)
{
    char full[96];

    snprintf(full, sizeof(full), "%s{scheme=\"%s\"}", name, scheme);
    return corMetric(cor.port, full);
}

/* Wait until the scheme's notifications sent and failed reach want in
 * all, up to ms. */
static void
notifiedWait(const char* scheme, long want, int ms)
{
    long deadline = corNowMs() + ms;
    long total = 0;

    while ((total = metric("cor_notify_sent_total", scheme)
                    + metric("cor_notify_failed_total", scheme)) < want
           && corNowMs() < deadline) {
        usleep(20 * 1000);
    }
    ck_assert_int_eq(total, want);
}

/* How many times needle is in s. */
static int
countOf(const char* s, const char* needle)
{
    int n = 0;

    while ((s = strstr(s, needle)) != NULL) {
        n++;
        s += strlen(needle);
    }
    return n;
}

/* QoS 0, 1 and 2 in version, from a coroutine and from a thread: each
 * message reaches the subscriber once (the thread's QoS 0 too). */
static void
deliver(const char* version)
{
    Sub s;
    char url[256];
    char line[128];
    int want = 0;

    subStart(&s, "d/#", 12, "");
    for (int qos = 0; qos <= 2; qos++) {
        for (int worker = 0; worker <= 1; worker++) {
            char body[32];

            snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/d/%d?qos=%d&"
                     "version=%s", broker.port, qos, qos, version);
            snprintf(body, sizeof(body), "%s-q%d-w%d", version, qos, worker);
            ck_assert_int_eq(notify(url, 2, body, worker ? "&worker=1" : ""),
                             200);
            want += 2;
        }
    }
    notifiedWait("mqtt", want, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 0);
    ck_assert_int_eq(subCollect(&s, 5000), 12);
    for (int qos = 0; qos <= 2; qos++) {
        for (int worker = 0; worker <= 1; worker++) {
            snprintf(line, sizeof(line), "d/%d %s-q%d-w%d", qos, version,
                     qos, worker);
            ck_assert_msg(countOf(buf, line) == 2, "%s not twice in:\n%s",
                          line, buf);
        }
    }
    /* 5.0 carries the X-Write header as a user property; 3.1.1 has
     * nowhere to put it. */
    ck_assert_int_eq(countOf(buf, "X-Write:1"), version[0] == '5' ? 6 : 0);
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
    Sub s;
    char url[256];

    subStart(&s, "auth", 2, "");
    for (int v = 0; v < 2; v++) {
        const char* version = v == 0 ? "5" : "3.1.1";

        snprintf(url, sizeof(url), "mqtt://u:p@127.0.0.1:%d/auth?version=%s",
                 broker.portAuth, version);
        ck_assert_int_eq(notify(url, 1, "in", ""), 200);
        snprintf(url, sizeof(url), "mqtt://u:wrong@127.0.0.1:%d/auth?"
                 "version=%s", broker.portAuth, version);
        ck_assert_int_eq(notify(url, 1, "out", ""), 200);
    }
    notifiedWait("mqtt", 4, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 2);
    ck_assert_int_eq(subCollect(&s, 5000), 2);
    ck_assert_int_eq(countOf(buf, "auth in"), 2);
    ck_assert_int_eq(corServerLogCount(&cor, "refused the connection: not "
                                       "authorized (reason code 0x87)"), 1);
    ck_assert_int_eq(corServerLogCount(&cor, "refused the connection: not "
                                       "authorized (return code 0x05)"), 1);
    /* The password is not in the log. */
    ck_assert_int_eq(corServerLogCount(&cor, "wrong"), 0);
}
END_TEST

/* mqtts with the test CA; a broker whose certificate no CA cor trusts
 * signed is refused. */
START_TEST(test_mqtts_verified_and_a_wrong_ca_refused)
{
    Sub s;
    char url[256];

    subStart(&s, "tls", 2, "");
    snprintf(url, sizeof(url), "mqtts://localhost:%d/tls", broker.portTls);
    ck_assert_int_eq(notify(url, 1, "ok", ""), 200);
    ck_assert_int_eq(notify(url, 1, "ok", "&worker=1"), 200);
    snprintf(url, sizeof(url), "mqtts://localhost:%d/tls", broker.portSelf);
    ck_assert_int_eq(notify(url, 1, "bad", ""), 200);
    notifiedWait("mqtts", 3, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtts"), 1);
    ck_assert_int_eq(subCollect(&s, 5000), 2);
    ck_assert_int_eq(countOf(buf, "tls ok"), 2);
    ck_assert_int_eq(countOf(buf, "bad"), 0);
    ck_assert_int_eq(corServerLogCount(&cor, "self-signed certificate"), 1);
}
END_TEST

/* Keepalive 2 s: idle for 5 s, the loop's connection is still the one
 * it was (its PINGREQs kept it; mosquitto drops a client silent for 1.5
 * keep alives). A thread's connection is replaced instead. */
START_TEST(test_keepalive_keeps_the_connection)
{
    Sub s;
    char url[256];

    subStart(&s, "ka", 2, "");
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/ka", broker.port);
    ck_assert_int_eq(notify(url, 1, "one", ""), 200);
    notifiedWait("mqtt", 1, 5000);
    sleep(5);
    ck_assert_int_eq(notify(url, 1, "two", ""), 200);
    notifiedWait("mqtt", 2, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 0);
    ck_assert_int_eq(subCollect(&s, 5000), 2);
    if (corTestCoroutines()) {
        ck_assert_int_eq(corServerLogCount(&cor, "mqtt: connected to"), 1);
        ck_assert_int_eq(corServerLogCount(&cor, "connecting again"), 0);
    }
}
END_TEST

/* A bad URL, a bad option: refused at once, with why. */
START_TEST(test_bad_urls_are_refused)
{
    char url[256];

    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/a/+/b", broker.port);
    ck_assert_int_eq(notify(url, 1, "x", ""), 200);
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/a?qos=3", broker.port);
    ck_assert_int_eq(notify(url, 1, "x", ""), 200);
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/a?version=6",
             broker.port);
    ck_assert_int_eq(notify(url, 1, "x", ""), 200);
    notifiedWait("mqtt", 3, 5000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 3);
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
bulkRead(const Sub* s, int* dups, int* late)
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

        ck_assert_msg(sscanf(line, "bulk w%d X-Write:%d", &w, &k) == 2
                      && w >= 0 && w < BULK_WRITES && k >= 0
                      && k < BULK_PER_WRITE, "a bad line: %s", line);
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
    Sub s;
    char url[256];
    long t = corNowMs();
    int dups;
    int late;

    subStart(&s, "bulk", BULK_COUNT, "");
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/bulk?qos=1",
             broker.port);
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
    fprintf(stderr, "corMqttTest: %d QoS 1 notifications acknowledged in "
            "%ld ms (%s)\n", BULK_COUNT, corNowMs() - t,
            corTestCoroutines() ? "coroutines" : "threads");
    subCollect(&s, 30000);
    ck_assert_int_eq(bulkRead(&s, &dups, &late), BULK_COUNT);
    ck_assert_int_eq(dups, 0);
    if (corTestCoroutines()) {
        ck_assert_int_eq(late, 0);
    }
}
END_TEST

/*
 * The broker stopped (SIGTERM: it saves its sessions) and started again
 * in the middle of a QoS 1 stream: the bridge connects again by itself
 * after its back-off, publishes again what was not acknowledged (DUP
 * set), and nothing is lost; duplicates are allowed, and counted. The
 * subscriber's session is persistent (-c), so what the broker takes
 * while the subscriber is away waits for it.
 */
START_TEST(test_a_broker_restarted_mid_stream_loses_nothing)
{
    enum { WRITES = 20, COUNT = WRITES * BULK_PER_WRITE };
    Sub s;
    char url[256];
    char command[192];
    long deadline;
    int dups;
    int late;

    subStart(&s, "bulk", 0, "-c");
    snprintf(url, sizeof(url), "mqtt://127.0.0.1:%d/bulk?qos=1",
             broker.port);
    for (int w = 0; w < WRITES; w++) {
        char body[16];

        snprintf(body, sizeof(body), "w%d", w);
        ck_assert_int_eq(notify(url, BULK_PER_WRITE, body,
                                "&timeout_ms=30000"), 200);
        if (w == WRITES / 2) {
            brokerStop(SIGTERM);
            usleep(300 * 1000);
            brokerStart();
        }
        while (metric("cor_notify_in_flight", "mqtt") > 2000) {
            usleep(1000);
        }
    }
    notifiedWait("mqtt", COUNT, 60000);
    ck_assert_int_eq(metric("cor_notify_failed_total", "mqtt"), 0);
    deadline = corNowMs() + 30000;
    snprintf(command, sizeof(command), "wc -l < %s", s.out);
    while ((corShell(command, buf, sizeof(buf)), atol(buf)) < COUNT
           && corNowMs() < deadline) {
        usleep(50 * 1000);
    }
    usleep(200 * 1000);         /* duplicates still on their way */
    subCollect(&s, 0);
    ck_assert_int_eq(bulkRead(&s, &dups, &late), COUNT);
    fprintf(stderr, "corMqttTest: broker restarted mid-stream: %d "
            "messages, %d duplicates (%s)\n", COUNT, dups,
            corTestCoroutines() ? "coroutines" : "threads");
    ck_assert_int_ge(corServerLogCount(&cor, "connecting again"), 1);
}
END_TEST

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
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"in/a/+\" }\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\", filter: \"in/b/#\",\n"
             "          qos: 2 }\n"
             "      - { broker: \"mqtt://127.0.0.1:%d\",\n"
             "          filter: \"in/never/#\" }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"MQTT /in/a/*\", handler: echo }\n"
             "  - { match: \"MQTT /in/b/*\", handler: waitecho }\n"
             "  - { match: \"MQTT /in/never/*\", handler: %s }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             broker.port, broker.port, broker.port,
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
             "out/reply %s", broker.port, qos, topic, message, more);
    ck_assert_int_eq(corShell(command, buf, sizeof(buf)), 0);
}

/* Wait for count responses (their status lines) on s, up to ms; then
 * a moment for any more, and collect. */
static void
repliesWait(Sub* s, int count, int ms)
{
    char command[192];
    long deadline = corNowMs() + ms;

    snprintf(command, sizeof(command), "grep -c 'status:' %s", s->out);
    while (corNowMs() < deadline
           && (corShell(command, buf, sizeof(buf)), atoi(buf)) < count) {
        usleep(20 * 1000);
    }
    usleep(300 * 1000);
    subCollect(s, 0);
}

/*
 * Messages to matching filters reach their route's handler (method MQTT,
 * the topic as the path, the payload as the body, properties as headers)
 * and its response goes to the Response Topic; messages no filter
 * matches reach nobody.
 */
START_TEST(test_subscriptions_reach_the_right_handler_only)
{
    Sub s;

    corWithSubscriptions(false);
    subStart(&s, "out/#", 0, "");
    publish("in/a/1", "hello", 1, "");
    publish("in/b/x/y", "world", 2, "-D publish user-property k v "
            "-D publish correlation-data c7");
    publish("in/c/1", "nobody", 1, "");
    publish("in/a/1/2", "nobody", 1, "");
    repliesWait(&s, 2, 5000);
    ck_assert_int_eq(countOf(buf, "status:"), 2);
    ck_assert_msg(strstr(buf, "out/reply hello status:200") != NULL, "%s",
                  buf);
    ck_assert_msg(strstr(buf, "out/reply MQTT /in/b/x/y\nMQTT-QoS: 2\n"
                         "k: v\nworld status:200") != NULL, "%s", buf);
    ck_assert_int_eq(countOf(buf, "nobody"), 0);
}
END_TEST

/* A handler that waits (for ever) holds up no other message. */
START_TEST(test_a_waiting_handler_holds_up_no_other_message)
{
    Sub s;
    long t;

    corWithSubscriptions(false);
    subStart(&s, "out/#", 0, "");
    publish("in/never/1", "waits", 1, "");
    publish("in/never/2", "waits", 1, "");
    t = corNowMs();
    publish("in/a/1", "goes", 1, "");
    repliesWait(&s, 1, 5000);
    ck_assert_int_eq(countOf(buf, "out/reply goes status:200"), 1);
    ck_assert_int_lt(corNowMs() - t, 2000);
}
END_TEST

/* cor stopped with QoS 1 messages in their handlers: not acknowledged,
 * so the broker, which kept the subscriber's session, sends them again
 * to the cor that comes next (whose route answers them). */
START_TEST(test_messages_in_handlers_at_a_stop_come_again)
{
    Sub s;

    corWithSubscriptions(false);
    subStart(&s, "out/#", 0, "");
    publish("in/never/1", "again1", 1, "");
    publish("in/never/2", "again2", 1, "");
    usleep(300 * 1000);         /* in their handlers */
    corWithSubscriptions(true);
    repliesWait(&s, 2, 5000);
    ck_assert_int_ge(countOf(buf, "out/reply again1 status:200"), 1);
    ck_assert_int_ge(countOf(buf, "out/reply again2 status:200"), 1);
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
    char path[128];
    char command[512];
    FILE* f;

    snprintf(path, sizeof(path), "%s/bad.yaml", broker.dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(yaml, f);
    fclose(f);
    snprintf(command, sizeof(command), "%s -t -c %s 2>&1", getenv("COR_BIN"),
             path);
    ck_assert_int_ne(corShell(command, buf, sizeof(buf)), 0);
    ck_assert_msg(strstr(buf, "bad.yaml:6:47: module mqtt: filter: '#' not "
                         "the whole last level") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "bad.yaml:7:57: qos: 3 is out of range (0..2)")
                  != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "bad.yaml:8:19: module mqtt: broker: not an "
                         "mqtt:// or mqtts:// URL") != NULL, "%s", buf);
    ck_assert_msg(strstr(buf, "bad.yaml:9:19: module mqtt: broker: "
                         "'mqtt://127.0.0.1/t' has a path") != NULL, "%s",
                  buf);
    ck_assert_msg(strstr(buf, "bad.yaml:10:52: unknown key 'qoss' in "
                         "subscriptions[4]") != NULL, "%s", buf);
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
#if COR_HAVE_COROUTINES
    tcase_add_test(tc, test_subscriptions_reach_the_right_handler_only);
    tcase_add_test(tc, test_a_waiting_handler_holds_up_no_other_message);
    tcase_add_test(tc, test_messages_in_handlers_at_a_stop_come_again);
#else
    tcase_add_test(tc, test_subscriptions_refused_without_coroutines);
#endif
    tcase_add_test(tc, test_cor_t_checks_subscriptions_at_file_line);
}
