/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A route's notify key against the real binary, in both modes: the
 * testkit's status handler answers /orders with the status it is asked
 * for, and the route sends each answered write's body to an http://
 * receiver (python3's http.server, tests/integration/notifyReceiver.py,
 * which writes down each body and its Content-Type) and to mosquitto
 * (mosquitto_sub as the receiver, the MQTT suites' broker). What is not
 * a listed write with a listed status sends nothing; a failed send is
 * counted and logged once; `cor -t` names the mistakes at their lines.
 */
#include "corTest.h"
#include "corServer.h"
#include "corMqttBroker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG_BODY 40000

static CorServer cor;
static pid_t receiver;
static int receiverPort;
static char receiverDir[64];
static int silentFd = -1; /* listens, never accepts nor answers */
static int silentPort;
static char buf[1 << 18];

static const char corConfig[] =
    "runtime: { loops: 1, workers: 2, coroutines: { enabled: {COROUTINES} } "
    "}\n"
    "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
    "client: { notify_timeout: 2s }\n"
    "modules:\n"
    "  - { load: http }\n"
    "  - { load: mqtt }\n"
    "  - { load: {MODULES}/testkit.so }\n"
    "routes:\n"
    "  - { match: \"/orders\", handler: status,\n"
    "      notify: [ \"http://127.0.0.1:%d/in\",\n"
    "                \"mqtt://127.0.0.1:%d/orders?qos=1&version=5\" ] }\n"
    "  - { match: \"/audit\", handler: status,\n"
    "      notify: { urls: \"http://127.0.0.1:%d/audit\", methods: [ PUT ],\n"
    "                statuses: [ 202, 4xx ] } }\n"
    "  - { match: \"/lost\", handler: status,\n"
    "      notify: \"http://127.0.0.1:%d/nobody\" }\n"
    "  - { match: \"GET /metrics\", handler: metrics }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

/* ---- The http receiver --------------------------------------------------- */

/* python3 http.server in a folder of its own, on the port it took. */
static void
receiverStart(void)
{
    char portFile[96];
    FILE* f;

    snprintf(receiverDir, sizeof(receiverDir), "/tmp/cor-notify-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(receiverDir));
    snprintf(portFile, sizeof(portFile), "%s/port", receiverDir);
    receiver = corTestFork(SIGKILL);
    if (receiver == 0) {
        execl("/usr/bin/python3", "python3",
              "tests/integration/notifyReceiver.py", receiverDir, portFile,
              (char*)NULL);
        _exit(127);
    }
    receiverPort = 0;
    /* Waited for, up to a minute: python3's start takes seconds on a
     * loaded machine (5 s were too few at load 30). */
    for (long deadline = corNowMs() + 60000;
         receiverPort == 0 && corNowMs() < deadline;) {
        f = fopen(portFile, "r");
        if (f == NULL || fscanf(f, "%d", &receiverPort) != 1) {
            usleep(10 * 1000);
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    ck_assert_int_gt(receiverPort, 0);
}

static void
receiverStop(void)
{
    char command[96];

    if (receiver > 0) {
        kill(receiver, SIGTERM);
        waitpid(receiver, NULL, 0);
        receiver = 0;
    }
    snprintf(command, sizeof(command), "rm -rf %s", receiverDir);
    corShell(command, buf, sizeof(buf));
}

/* The receiver's lines ("N METHOD PATH TYPE LENGTH") into buf; how many. */
static int
received(void)
{
    char command[128];

    snprintf(command, sizeof(command), "cat %s/requests 2>/dev/null",
             receiverDir);
    corShell(command, buf, sizeof(buf));
    return corTestCountOf(buf, "\n");
}

static void
receivedWait(int want)
{
    long deadline = corNowMs() + 10000;

    while (received() < want && corNowMs() < deadline) {
        usleep(20 * 1000);
    }
    ck_assert_int_eq(received(), want);
}

/* Whether the body of the receiver's request n is want, whole. */
static void
bodyIs(int n, const char* want, size_t len)
{
    static char body[BIG_BODY * 2];
    char path[96];
    FILE* f;
    size_t got;

    snprintf(path, sizeof(path), "%s/body.%d", receiverDir, n);
    f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    got = fread(body, 1, sizeof(body), f);
    fclose(f);
    ck_assert_uint_eq(got, len);
    ck_assert(memcmp(body, want, len) == 0);
}

/* A receiver that takes connections (the kernel does) and never
 * answers. */
static void
silentListen(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t len = sizeof(a);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    silentFd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(silentFd, 0);
    ck_assert_int_eq(bind(silentFd, (struct sockaddr*)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(silentFd, 16), 0);
    getsockname(silentFd, (struct sockaddr*)&a, &len);
    silentPort = ntohs(a.sin_port);
}

/* ---- Fixture ------------------------------------------------------------- */

static void
setUp(void)
{
    char yaml[2048];

    corTestBrokerMake();
    receiverStart();
    silentListen();
    snprintf(yaml, sizeof(yaml), corConfig, receiverPort, corTestBroker.port,
             receiverPort, silentPort);
    ck_assert_int_eq(corServerStart(&cor, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&cor);
    close(silentFd);
    receiverStop();
    corTestBrokerRemove();
}

/* ---- Requests ------------------------------------------------------------ */

/* method path (its query the status handler's) with body of type, on a
 * new connection; the status. */
static int
ask(const char* method, const char* target, const char* type, const char* body,
    size_t len)
{
    static char request[BIG_BODY + 512];
    static char answer[1 << 16];
    int head = snprintf(request, sizeof(request),
                        "%s %s HTTP/1.1\r\nHost: "
                        "t\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                        "\r\n",
                        method, target, type, len);

    ck_assert_uint_lt((size_t)head + len, sizeof(request));
    memcpy(request + head, body, len);
    request[head + len] = '\0';
    return corRequest(cor.port, request, answer, sizeof(answer));
}

static long
metric(const char* name, const char* scheme)
{
    return corTestNotifyCount(cor.port, name, scheme);
}

static void
notifiedWait(const char* scheme, long want)
{
    corTestNotifiedWait(cor.port, scheme, want, 10000);
}

/* A shell command's output into buf; its status. */
static int
sh(const char* fmt, ...)
{
    char command[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(command, sizeof(command), fmt, ap);
    va_end(ap);
    return corShell(command, buf, sizeof(buf));
}

/* ---- Tests --------------------------------------------------------------- */

/*
 * A 201 to a POST: its body and Content-Type reach the http receiver
 * (POSTed, as every notification by default) and the broker (an MQTT 5
 * content type), each counted sent.
 */
START_TEST(test_a_2xx_write_goes_to_http_and_mqtt)
{
    static const char order[] = "{\"id\":1,\"item\":\"tea\"}";
    CorTestSub sub;
    int lines;

    corTestSubStart(&sub, "orders", 1, "-F '%t %C %p'");
    ck_assert_int_eq(ask("POST", "/orders?code=201", "application/json", order,
                         strlen(order)),
                     201);
    receivedWait(1);
    ck_assert_msg(strstr(buf, "1 POST /in application/json 21\n") == buf, "%s",
                  buf);
    bodyIs(1, order, strlen(order));
    lines = corTestSubCollect(&sub, 10000, buf, sizeof(buf));
    ck_assert_int_eq(lines, 1);
    ck_assert_str_eq(buf, "orders application/json {\"id\":1,\"item\":"
                          "\"tea\"}\n");
    notifiedWait("http", 1);
    notifiedWait("mqtt", 1);
    ck_assert_int_eq(metric("cor_notify_sent_total", "http"), 1);
    ck_assert_int_eq(metric("cor_notify_sent_total", "mqtt"), 1);
}
END_TEST

/*
 * A 4xx to a POST, a 200 to a GET and a 5xx to a DELETE send nothing;
 * the write answered 204 after them is the only one that goes.
 */
START_TEST(test_a_4xx_a_get_and_a_5xx_send_nothing)
{
    ck_assert_int_eq(ask("POST", "/orders?code=422", "text/plain", "no", 2),
                     422);
    ck_assert_int_eq(ask("GET", "/orders?code=200", "text/plain", "", 0), 200);
    ck_assert_int_eq(ask("DELETE", "/orders?code=503", "text/plain", "", 0),
                     503);
    ck_assert_int_eq(ask("PATCH", "/orders?code=204", "text/plain", "marker",
                         6),
                     204);
    notifiedWait("http", 1);
    notifiedWait("mqtt", 1);
    usleep(300 * 1000); /* anything that was to follow */
    ck_assert_int_eq(received(), 1);
    ck_assert_msg(strstr(buf, "1 POST /in text/plain 6\n") == buf, "%s", buf);
    ck_assert_int_eq(metric("cor_notify_sent_total", "http"), 1);
    ck_assert_int_eq(metric("cor_notify_failed_total", "http"), 0);
}
END_TEST

/* A body of 40 KB arrives whole, at both receivers, with its type. */
START_TEST(test_a_40_KB_body_arrives_intact)
{
    static char body[BIG_BODY + 1];
    static char want[BIG_BODY + 64];
    CorTestSub sub;

    for (size_t i = 0; i < BIG_BODY; i++) {
        body[i] = (char)('!' + (i * 7919 + i / 97) % 94);
    }
    corTestSubStart(&sub, "orders", 1, "-F '%t %C %p'");
    ck_assert_int_eq(ask("PUT", "/orders?code=200", "application/x-order", body,
                         BIG_BODY),
                     200);
    receivedWait(1);
    ck_assert_msg(strstr(buf, "1 POST /in application/x-order 40000\n") == buf,
                  "%s", buf);
    bodyIs(1, body, BIG_BODY);
    ck_assert_int_eq(corTestSubCollect(&sub, 10000, buf, sizeof(buf)), 1);
    snprintf(want, sizeof(want), "orders application/x-order %s\n", body);
    ck_assert(strcmp(buf, want) == 0);
}
END_TEST

/*
 * methods and statuses: the audit route sends a PUT answered 202 or 4xx,
 * not a POST 202 nor a PUT 200.
 */
START_TEST(test_methods_and_statuses_choose)
{
    ck_assert_int_eq(ask("POST", "/audit?code=202", "text/plain", "a", 1), 202);
    ck_assert_int_eq(ask("PUT", "/audit?code=200", "text/plain", "b", 1), 200);
    ck_assert_int_eq(ask("PUT", "/audit?code=404", "text/plain", "c", 1), 404);
    ck_assert_int_eq(ask("PUT", "/audit?code=202", "text/plain", "d", 1), 202);
    receivedWait(2);
    usleep(300 * 1000);
    ck_assert_int_eq(received(), 2);
    ck_assert_msg(strstr(buf, " POST /audit text/plain 1\n") != NULL, "%s",
                  buf);
    ck_assert_int_eq(sh("cat %s/body.1 %s/body.2 | fold -w1 | sort | tr -d "
                        "'\\n'",
                        receiverDir, receiverDir),
                     0);
    ck_assert_str_eq(buf, "cd");
    notifiedWait("http", 2);
    ck_assert_int_eq(metric("cor_notify_sent_total", "mqtt"), 0);
}
END_TEST

/*
 * A receiver that never answers: the write's answer is not held up (it
 * is out before the send starts, and the next request is served at
 * once); the notification is tried once, for
 * client.notify_timeout (2 s here), then counted failed and logged with
 * its URL.
 */
START_TEST(test_a_silent_receiver_delays_nothing_and_fails_once)
{
    char line[96];
    long start = corNowMs();

    ck_assert_int_eq(ask("POST", "/lost?code=201", "text/plain", "x", 1), 201);
    ck_assert_int_eq(ask("GET", "/metrics", "text/plain", "", 0), 200);
    ck_assert_int_lt(corNowMs() - start, 1000);
    ck_assert_int_eq(metric("cor_notify_in_flight", "http"), 1);
    notifiedWait("http", 1);
    ck_assert_int_ge(corNowMs() - start, 1900);
    ck_assert_int_eq(metric("cor_notify_failed_total", "http"), 1);
    ck_assert_int_eq(metric("cor_notify_sent_total", "http"), 0);
    snprintf(line, sizeof(line),
             "notification POST http://127.0.0.1:%d/"
             "nobody failed",
             silentPort);
    ck_assert_int_eq(corServerLogCount(&cor, line), 1);
}
END_TEST

/* `cor -t` on a configuration of one route whose notify is route: 1,
 * with each of said in its output. */
static void
refused(const char* name, const char* route, const char* const* said)
{
    const char* bin = getenv("COR_BIN") ? getenv("COR_BIN") : "build/cor";
    char path[128];
    FILE* f;

    snprintf(path, sizeof(path), "%s/%s", receiverDir, name);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "listen:\n"
            "  - { protocol: http, address: 127.0.0.1:1 }\n"
            "modules:\n"
            "  - { load: http }\n"
            "  - { load: mqtt }\n"
            "  - { load: hello }\n"
            "routes:\n"
            "  - { match: \"POST /a\", handler: hello,\n"
            "      notify: %s }\n",
            route);
    fclose(f);
    ck_assert_int_eq(sh("%s -t -c %s 2>&1", bin, path), 1);
    for (unsigned i = 0; said[i] != NULL; i++) {
        ck_assert_msg(strstr(buf, said[i]) != NULL, "%s in %s", said[i], buf);
    }
}

START_TEST(test_cor_t_names_the_mistakes)
{
    refused("scheme.yaml", "[ \"http://a/b\", \"ftp://a/b\" ]",
            (const char* const[]){ "scheme.yaml:9:", "'ftp://a/b'",
                                   "http, https, mqtt, mqtts", NULL });
    refused("option.yaml", "\"mqtt://a/t?qos=7\"",
            (const char* const[]){ "option.yaml:9:", "qos=7", NULL });
    refused("url.yaml", "\"http://a b/\"",
            (const char* const[]){ "url.yaml:9:", "'http://a b/'", NULL });
    refused("shape.yaml", "{ urls: [ ], methods: [ post ] }",
            (const char* const[]){ "shape.yaml:9:", "expected a URL", NULL });
    refused("methods.yaml", "{ urls: \"http://a/\", methods: [ post ] }",
            (const char* const[]){ "methods.yaml:9:", "method in capitals",
                                   NULL });
    refused("statuses.yaml", "{ urls: \"http://a/\", statuses: [ 700 ] }",
            (const char* const[]){ "statuses.yaml:9:", "'700'", NULL });
    refused("keys.yaml", "{ url: \"http://a/\" }",
            (const char* const[]){ "keys.yaml:9:", "did you mean 'urls'",
                                   NULL });
}
END_TEST

COR_TEST_SUITE(corNotifyRoute)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_a_2xx_write_goes_to_http_and_mqtt);
    tcase_add_test(tc, test_a_4xx_a_get_and_a_5xx_send_nothing);
    tcase_add_test(tc, test_a_40_KB_body_arrives_intact);
    tcase_add_test(tc, test_methods_and_statuses_choose);
    tcase_add_test(tc, test_a_silent_receiver_delays_nothing_and_fails_once);
    tcase_add_test(tc, test_cor_t_names_the_mistakes);
}
