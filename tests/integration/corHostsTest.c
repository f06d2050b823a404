/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor across hosts, not only on loopback: network namespaces this test
 * makes itself, each a host with an address of its own on a bridge in a
 * private range, a cor in each. This kernel has no netem, so a peer that
 * is 50 ms away is one whose /sleep takes 50 ms.
 *
 *   h0           the front: gather, forward round robin, the chain's start
 *   h1 .. h8     the hosts it calls (h1 also a broker, mosquitto, for
 *                two subscribers on h2 and h3)
 *
 * Skipped, saying why, where namespaces cannot be made (not root, no ip).
 */
#include "corAutoConfig.h"
#include "corTest.h"
#include "corServer.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOSTS 9 /* h0, the front, and eight */

static CorServer hosts[HOSTS];
static char names[HOSTS][16]; /* the namespaces */
static char bridge[16];
static char subnet[16]; /* "10.N.0": N from the pid, so that two
                           runs at once do not meet */
static bool netUp;
static char out[1 << 16];

static void
hostAddress(int i, char* addr, size_t cap)
{
    snprintf(addr, cap, "%s.%d", subnet, 10 + i);
}

static int sh(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

static int
sh(const char* fmt, ...)
{
    char command[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(command, sizeof(command), fmt, ap);
    va_end(ap);
    return corShell(command, out, sizeof(out));
}

static void
netDown(void)
{
    for (int i = 0; i < HOSTS; i++) {
        sh("ip netns del %s 2>/dev/null", names[i]);
    }
    sh("ip link del %s 2>/dev/null", bridge);
}

/* The bridge with .1 in the root namespace (where the test and its
 * clients are), and each host's veth on it with .10+i. */
static void
netMake(void)
{
    int tag = (int)(getpid() % 10000);

    snprintf(subnet, sizeof(subnet), "10.%d.0", 100 + (int)(getpid() % 150));
    snprintf(bridge, sizeof(bridge), "cor%db", tag);
    for (int i = 0; i < HOSTS; i++) {
        snprintf(names[i], sizeof(names[i]), "cor%dh%d", tag, i);
    }
    netDown();
    if (sh("ip link add %s type bridge && ip addr add %s.1/24 dev %s"
           " && ip link set %s up",
           bridge, subnet, bridge, bridge)
        != 0) {
        fprintf(stderr, "SKIP corHosts: cannot make a bridge (%s)\n", out);
        netDown();
        return;
    }
    for (int i = 0; i < HOSTS; i++) {
        char addr[32];

        hostAddress(i, addr, sizeof(addr));
        if (sh("ip netns add %s && ip link add %sv type veth peer name eth0"
               " netns %s && ip link set %sv master %s up"
               " && ip -n %s addr add %s/24 dev eth0"
               " && ip -n %s link set eth0 up && ip -n %s link set lo up",
               names[i], names[i], names[i], names[i], bridge, names[i], addr,
               names[i], names[i])
            != 0) {
            fprintf(stderr, "SKIP corHosts: cannot make namespace %s (%s)\n",
                    names[i], out);
            netDown();
            return;
        }
    }
    netUp = true;
}

/* In the server's child, before the exec: into its host's namespace. */
static void
enterHost(void* arg)
{
    char path[64];
    int fd;

    snprintf(path, sizeof(path), "/run/netns/%s", (const char*)arg);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        _exit(126);
    }
    close(fd);
}

/* Host i's cor: http on :8080, cor:// on :7070, hello (its greeting names
 * it) and the testkit, and what extra adds under modules (its routes
 * after). */
static int
hostStart(int i, const char* modules, const char* routes)
{
    char yaml[8192];
    char addr[32];

    hostAddress(i, addr, sizeof(addr));
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 4,\n"
             "           coroutines: { enabled: {COROUTINES} } }\n"
             "listen:\n"
             "  - { protocol: http, address: %s:8080 }\n"
             "  - { protocol: cor, address: %s:7070 }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: cor }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "%s"
             "routes:\n"
             "  - { match: \"GET /sleep\", handler: sleep }\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"/echo\", handler: echo }\n"
             "%s"
             "log: { pid_file: {DIR}/cor.pid, access: {DIR}/access.log }\n",
             addr, addr, modules, routes);
    return corServerStartChild(&hosts[i], yaml, enterHost, names[i]);
}

/* An end host: hello says its number. */
static int
endStart(int i)
{
    char modules[128];

    snprintf(modules, sizeof(modules),
             "  - { load: hello, greeting: \"host %d\" }\n", i);
    return hostStart(i, modules,
                     "  - { match: \"GET /rr/hello\", handler: hello }\n");
}

/* curl on host i's HTTP port; its exit status, the body in out. */
static int
curlHost(int i, const char* path)
{
    char addr[32];

    hostAddress(i, addr, sizeof(addr));
    return sh("curl -s -S --max-time 20 http://%s:8080%s", addr, path);
}

/* Whatever a test that failed left running in the hosts (a failed
 * check ends its process before its teardown). */
static void
setUp(void)
{
    for (int i = 0; netUp && i < HOSTS; i++) {
        sh("pids=$(ip netns pids %s); [ -z \"$pids\" ] || "
           "{ kill -9 $pids; sleep 0.2; }",
           names[i]);
    }
}

static void
tearDown(void)
{
    for (int i = 0; i < HOSTS; i++) {
        corServerStop(&hosts[i]);
    }
}

static void
suiteEnd(void)
{
    if (netUp) {
        netDown();
        netUp = false;
    }
}

/* The seed's distributed operation: eight hosts, each 50 ms away, four
 * over cor:// and four over http://, called at once: about 50 ms, not
 * eight times that. The best of five, on a machine other tests share. */
START_TEST(test_gather_over_eight_hosts_takes_the_slowest_ones_time)
{
    char modules[4096];
    size_t n;
    long best = -1;

    if (!netUp) {
        return;
    }
    n = (size_t)snprintf(modules, sizeof(modules),
                         "  - load: hello\n    gather:\n");
    for (int i = 1; i < HOSTS; i++) {
        char addr[32];

        ck_assert_int_eq(endStart(i), 0);
        hostAddress(i, addr, sizeof(addr));
        n += (size_t)snprintf(modules + n, sizeof(modules) - n,
                              i % 2
                                  ? "      - \"cor://%s:7070/sleep?ms=50\"\n"
                                  : "      - \"http://%s:8080/sleep?ms=50\"\n",
                              addr);
    }
    ck_assert_int_eq(hostStart(0, modules,
                               "  - { match: \"GET /gather\", "
                               "handler: gather }\n"),
                     0);
    for (int round = 0; round < 5; round++) {
        long ms;
        const char* took;
        int answered = 0;

        ck_assert_int_eq(curlHost(0, "/gather"), 0);
        for (const char* p = out; (p = strstr(p, "200 ")) != NULL; p++) {
            answered++;
        }
        ck_assert_msg(answered == HOSTS - 1, "%s", out);
        took = strstr(out, "took ");
        ck_assert_ptr_nonnull(took);
        ms = strtol(took + 5, NULL, 10);
        ck_assert_msg(ms >= 50, "%s", out);
        best = best < 0 || ms < best ? ms : best;
    }
    fprintf(stderr,
            "corHosts: gather over 8 hosts 50 ms away: best of 5 "
            "%ld ms\n",
            best);
    /* Eight waits one after another would be 400 ms. */
    ck_assert_msg(best < 150, "the best of five gathers took %ld ms", best);
}
END_TEST

static long
accessLines(const CorServer* s)
{
    char path[256];
    long lines = 0;
    FILE* f;
    int ch;

    snprintf(path, sizeof(path), "%s/access.log", s->dir);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    while ((ch = fgetc(f)) != EOF) {
        lines += ch == '\n';
    }
    fclose(f);
    return lines;
}

/* A host killed outright: its master and generation, and so every
 * connection to it, gone at once. */
static void
hostKill(int i)
{
    kill(-hosts[i].pid, SIGKILL);
    waitpid(hosts[i].pid, NULL, 0);
    hosts[i].pid = 0;
    corServerStop(&hosts[i]);
}

/* Round robin over the eight under load; host 3 killed in the middle:
 * no request fails beyond those in flight on it (8 clients: 8 at most;
 * an idempotent GET that met the dead host before any byte of its answer
 * is sent to the next one), and once it is back its share returns. */
START_TEST(test_round_robin_over_eight_survives_a_host_killed)
{
    char modules[4096];
    char command[1024];
    char addr[32];
    size_t n;
    FILE* load;
    size_t got;

    if (!netUp) {
        return;
    }
    n = (size_t)snprintf(modules, sizeof(modules),
                         "  - { load: hello }\n"
                         "  - load: forward\n"
                         "    upstreams:\n"
                         "      - name: eight\n"
                         "        fail_timeout: 1s\n"
                         "        servers:\n");
    for (int i = 1; i < HOSTS; i++) {
        ck_assert_int_eq(endStart(i), 0);
        hostAddress(i, addr, sizeof(addr));
        n += (size_t)snprintf(modules + n, sizeof(modules) - n,
                              "          - \"http://%s:8080\"\n", addr);
    }
    ck_assert_int_eq(hostStart(0, modules,
                               "  - { match: \"/rr/*\", handler: eight }\n"),
                     0);
    hostAddress(0, addr, sizeof(addr));
    snprintf(modules, sizeof(modules),
             "-c 8 --duration 7s http://%s:8080/rr/hello", addr);
    corRequestToolCommand(&hosts[0], modules, command, sizeof(command));
    load = popen(command, "r");
    ck_assert_ptr_nonnull(load);
    usleep(2000 * 1000);
    ck_assert_int_gt(accessLines(&hosts[3]), 0);
    hostKill(3);
    usleep(1500 * 1000);
    ck_assert_int_eq(endStart(3), 0);
    got = fread(out, 1, sizeof(out) - 1, load);
    out[got] = '\0';
    ck_assert_int_eq(pclose(load), 0);
    fprintf(stderr,
            "corHosts: round robin, host 3 killed and back: %ld "
            "requests, %ld failed, %ld non-2xx; host 3 served %ld after its "
            "restart\n",
            corSummaryCount(out, "requests "), corSummaryCount(out, "failed "),
            corSummaryCount(out, "non-2xx "), accessLines(&hosts[3]));
    ck_assert_msg(corSummaryCount(out, "requests ") > 1000, "%s", out);
    ck_assert_msg(corSummaryCount(out, "failed ") <= 8, "%s", out);
    ck_assert_msg(corSummaryCount(out, "non-2xx ") <= 8, "%s", out);
    /* Back for the last 3.5 s, past its 1 s fail_timeout. */
    ck_assert_msg(accessLines(&hosts[3]) > 100,
                  "host 3 served %ld after "
                  "its restart",
                  accessLines(&hosts[3]));
}
END_TEST

/* h0 -> h1 -> h2, each hop the forward module over cor://: the answer is
 * the one h2 gives when asked itself, byte for byte. */
START_TEST(test_a_chain_across_three_hosts_answers_as_one_host)
{
    char modules[1024];
    static char direct[sizeof(out)];
    char addr[32];

    if (!netUp) {
        return;
    }
    ck_assert_int_eq(hostStart(2,
                               "  - { load: hello, greeting: "
                               "\"host 2\" }\n",
                               "  - { match: \"/c/echo\", handler: echo }\n"
                               "  - { match: \"GET /c/hello\", "
                               "handler: hello }\n"),
                     0);
    for (int i = 1; i >= 0; i--) {
        hostAddress(i + 1, addr, sizeof(addr));
        snprintf(modules, sizeof(modules),
                 "  - { load: hello }\n"
                 "  - { load: forward, upstreams: [ { name: next, "
                 "servers: [ \"cor://%s:7070\" ] } ] }\n",
                 addr);
        ck_assert_int_eq(hostStart(i, modules,
                                   "  - { match: \"/c/*\", handler: next }\n"),
                         0);
    }
    ck_assert_int_eq(curlHost(2, "/c/hello -i -o /dev/null -w '%{http_code}"
                                 " %{content_type} %{size_download}'"),
                     0);
    snprintf(direct, sizeof(direct), "%s", out);
    ck_assert_int_eq(curlHost(0, "/c/hello -i -o /dev/null -w '%{http_code}"
                                 " %{content_type} %{size_download}'"),
                     0);
    ck_assert_str_eq(out, direct);
    ck_assert_int_eq(curlHost(0, "/c/hello"), 0);
    ck_assert_str_eq(out, "host 2\n");
    ck_assert_int_eq(curlHost(0, "/c/echo --data-binary 'across three'"), 0);
    ck_assert_str_eq(out, "across three");
}
END_TEST

/* mosquitto on host i, port 1883, started in its namespace; its pid. */
static pid_t
brokerStart(int i)
{
    static char conf[128];
    char addr[32];
    FILE* f;
    pid_t pid;

    hostAddress(i, addr, sizeof(addr));
    snprintf(conf, sizeof(conf), "/tmp/cor-hosts-mosquitto-%d.conf",
             (int)getpid());
    f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "listener 1883 %s\nallow_anonymous true\n", addr);
    fclose(f);
    pid = corTestFork(SIGKILL);
    if (pid == 0) {
        enterHost(names[i]);
        execl("/usr/sbin/mosquitto", "mosquitto", "-c", conf, (char*)NULL);
        _exit(127);
    }
    return pid;
}

static long
logWait(int i, const char* text, long timeoutMs)
{
    long deadline = corNowMs() + timeoutMs;
    long n;

    while ((n = corServerLogCount(&hosts[i], text)) == 0
           && corNowMs() < deadline) {
        usleep(50 * 1000);
    }
    return n;
}

/* Two instances on h2 and h3 share one subscription ($share/g/s/#) on a
 * broker on h1; 20 000 QoS 1 messages; h3 stopped gracefully (SIGQUIT)
 * while they come: the two split them, and none is lost (h3 leaves the
 * group before it lets go of its session, which the broker would go on
 * giving its share). */
START_TEST(test_a_shared_subscription_loses_nothing_when_one_stops)
{
    enum { MESSAGES = 20000 };
    char modules[1024];
    char addr[32];
    pid_t broker;
    FILE* pub;
    long total = 0;
    long before;
    long deadline;

    if (!netUp) {
        return;
    }
    if (access("/usr/sbin/mosquitto", X_OK) != 0) {
        fprintf(stderr, "SKIP shared subscription: no mosquitto "
                        "(./configure --install-deps)\n");
        return;
    }
    broker = brokerStart(1);
    ck_assert_int_gt(broker, 0);
    hostAddress(1, addr, sizeof(addr));
    snprintf(modules, sizeof(modules),
             "  - { load: hello }\n"
             "  - load: mqtt\n"
             "    subscriptions:\n"
             "      - { broker: \"mqtt://%s:1883\", "
             "filter: \"$share/g/s/#\", qos: 1 }\n",
             addr);
    usleep(300 * 1000);
    for (int i = 2; i <= 3; i++) {
        ck_assert_int_eq(hostStart(i, modules,
                                   "  - { match: \"MQTT /*\", "
                                   "handler: echo }\n"),
                         0);
        ck_assert_int_ge(logWait(i, "subscribed to", 15000), 1);
    }
    snprintf(modules, sizeof(modules),
             "seq %d | mosquitto_pub -h %s "
             "-p 1883 -q 1 -t s/x -l",
             MESSAGES, addr);
    pub = popen(modules, "r");
    ck_assert_ptr_nonnull(pub);
    for (deadline = corNowMs() + 10000;
         accessLines(&hosts[3]) < MESSAGES / 10 && corNowMs() < deadline;) {
        usleep(10 * 1000);
    }
    kill(hosts[3].pid, SIGQUIT);
    waitpid(hosts[3].pid, NULL, 0);
    before = accessLines(&hosts[3]);
    ck_assert_int_eq(pclose(pub), 0);
    /* Waited for while h2 still makes progress: a loaded machine's h2
     * was 700 messages short of its share when a fixed 20 s ran out. */
    for (long last = -1, still = corNowMs();
         (total = accessLines(&hosts[2]) + before) < MESSAGES
         && corNowMs() - still < 5000;) {
        if (total != last) {
            last = total;
            still = corNowMs();
        }
        usleep(50 * 1000);
    }
    fprintf(stderr,
            "corHosts: shared subscription, %d messages: h2 %ld, h3 "
            "%ld (stopped while they came)\n",
            MESSAGES, accessLines(&hosts[2]), before);
    hosts[3].pid = 0;
    kill(broker, SIGTERM);
    waitpid(broker, NULL, 0);
    ck_assert_int_gt(before, 0);
    ck_assert_int_gt(accessLines(&hosts[2]), 0);
    ck_assert_msg(total >= MESSAGES, "h2 %ld + h3 %ld of %d",
                  accessLines(&hosts[2]), before, MESSAGES);
}
END_TEST

COR_TEST_SUITE(corHosts)
{
    tcase_set_timeout(tc, 90);
    tcase_add_unchecked_fixture(tc, netMake, suiteEnd);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc,
                   test_gather_over_eight_hosts_takes_the_slowest_ones_time);
    tcase_add_test(tc, test_round_robin_over_eight_survives_a_host_killed);
    tcase_add_test(tc, test_a_chain_across_three_hosts_answers_as_one_host);
#if COR_HAVE_COROUTINES
    tcase_add_test(tc, test_a_shared_subscription_loses_nothing_when_one_stops);
#endif
}
