/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor under a service manager, against the real binary, with the test
 * playing systemd (systemd-run --user is not assumed): it opens the
 * listening sockets and passes them from fd 3 (LISTEN_FDS, LISTEN_PID set
 * in the child between fork and exec), binds the notify socket
 * (NOTIFY_SOCKET) and reads what the master says there: READY=1, then
 * RELOADING=1 and READY=1 around a reload with its outcome in STATUS=,
 * STOPPING=1 at a stop, and WATCHDOG=1 while every loop beats (and not
 * while a handler holds one). And the `health` route a load balancer
 * asks: 200 while the generation serves, 503 once it drains.
 */
#include "corTest.h"
#include "corServer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WATCHDOG_USEC "400000"

/* What the child gets, as systemd would give it. */
typedef struct {
    int passed[2];            /* to be fds 3 and 4; -1: none */
    char notify[108];         /* NOTIFY_SOCKET, "" for none */
    const char* watchdogUsec; /* WATCHDOG_USEC, NULL for none */
    bool watchdogPidOther;    /* WATCHDOG_PID names another process */
    bool listenPidOther;      /* LISTEN_PID names another process */
} Manager;

static CorServer server;
static Manager manager;
static int notifyFd = -1;
static char buf[1 << 16];

static void
tearDown(void)
{
    corServerStop(&server);
    for (int i = 0; i < 2; i++) {
        if (manager.passed[i] >= 0) {
            close(manager.passed[i]);
        }
    }
    if (notifyFd >= 0) {
        corNotifyClose(notifyFd, manager.notify);
        notifyFd = -1;
    }
}

static void
setUp(void)
{
    manager = (Manager){ .passed = { -1, -1 } };
}

/* A listening socket on 127.0.0.1 and a port the kernel picks. */
static int
listenSocket(int* portP)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr*)&addr, sizeof(addr)), 0);
    ck_assert_int_eq(listen(fd, 64), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr*)&addr, &len), 0);
    *portP = ntohs(addr.sin_port);
    return fd;
}

/* The notify socket: an abstract name, or a path in /tmp. */
static void
notifyOpen(bool abstract)
{
    notifyFd = corNotifyOpen(abstract, manager.notify, sizeof(manager.notify));
    ck_assert_int_ge(notifyFd, 0);
}

/* In the child: the sockets to fds 3 and up, and the environment. The
 * sockets go high first, so that one already at 3 or 4 is not lost. */
static void
managerChild(void* arg)
{
    const Manager* m = arg;
    char text[32];
    int count = 0;
    int high[2];

    for (int i = 0; i < 2 && m->passed[i] >= 0; i++) {
        high[count++] = fcntl(m->passed[i], F_DUPFD, 64);
    }
    for (int i = 0; i < count; i++) {
        dup2(high[i], 3 + i);
        close(high[i]);
    }
    if (count > 0) {
        snprintf(text, sizeof(text), "%d", count);
        setenv("LISTEN_FDS", text, 1);
        snprintf(text, sizeof(text), "%d",
                 m->listenPidOther ? 1 : (int)getpid());
        setenv("LISTEN_PID", text, 1);
    }
    if (m->notify[0] != '\0') {
        setenv("NOTIFY_SOCKET", m->notify, 1);
    }
    if (m->watchdogUsec != NULL) {
        setenv("WATCHDOG_USEC", m->watchdogUsec, 1);
        snprintf(text, sizeof(text), "%d",
                 m->watchdogPidOther ? 1 : (int)getpid());
        setenv("WATCHDOG_PID", text, 1);
    }
}

static bool
notifyWait(const char* line, char* out, size_t cap, int timeoutMs)
{
    return corNotifyWait(notifyFd, line, out, cap, timeoutMs);
}

/* How many datagrams holding line come within ms. */
static int
notifyCount(const char* line, int ms)
{
    char datagram[1024];
    int count = 0;

    for (long deadline = corNowMs() + ms;;) {
        long left = deadline - corNowMs();

        if (left <= 0
            || !corNotifyNext(notifyFd, datagram, sizeof(datagram),
                              (int)left)) {
            return count;
        }
        count += corNotifyHasLine(datagram, line);
    }
}

static void
notifyDiscard(void)
{
    char datagram[1024];

    while (corNotifyNext(notifyFd, datagram, sizeof(datagram), 0)) {
    }
}

static int
get(int port, const char* path)
{
    char request[256];

    snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n",
             path);
    return corRequest(port, request, buf, sizeof(buf));
}

/* ---- health -------------------------------------------------------------- */

static const char* const healthYaml =
    "runtime: { loops: 2, workers: 2, coroutines: { enabled: {COROUTINES} "
    "}, stop_timeout: 5s }\n"
    "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
    "modules: [ { load: http }, { load: hello }, "
    "{ load: {MODULES}/testkit.so } ]\n"
    "routes:\n"
    "  - { match: \"GET /health\", handler: health }\n"
    "  - { match: \"GET /hello\", handler: hello }\n"
    "  - { match: \"GET /sleep\", handler: sleep }\n"
    "  - { match: \"GET /block\", handler: block }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

typedef struct {
    int port;
    const char* path;
    int status;
} Pending;

static void*
pendingRun(void* arg)
{
    Pending* p = arg;
    char request[256];
    char local[4096];

    snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n",
             p->path);
    p->status = corRequest(p->port, request, local, sizeof(local));
    return NULL;
}

/* /health on the keep-alive connection fd: its status, the whole answer
 * in buf. */
static int
healthAsk(int fd)
{
    static const char ask[] = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";

    ck_assert_int_eq(corSendAll(fd, ask, sizeof(ask) - 1), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    return corStatus(buf);
}

/* A keep-alive connection asks /health: 200 "ready". A graceful stop
 * with a request in flight (which holds the drain open) drains the
 * generation: the same connection's next /health is 503 "draining" and
 * closes it, while the request in flight is still answered. */
START_TEST(test_health_is_200_while_serving_and_503_while_draining)
{
    Pending pending;
    pthread_t thread;
    int fd;

    ck_assert_int_eq(corServerStart(&server, healthYaml), 0);
    fd = corConnect(server.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(healthAsk(fd), 200);
    ck_assert_str_eq(corBody(buf), "ready\n");
    ck_assert_ptr_nonnull(strcasestr(buf, "Cache-Control: no-store"));

    pending = (Pending){ server.port, "/sleep?ms=1500", 0 };
    pthread_create(&thread, NULL, pendingRun, &pending);
    usleep(300 * 1000);
    kill(server.pid, SIGQUIT);
    usleep(200 * 1000);
    ck_assert_msg(healthAsk(fd) == 503, "%s", buf);
    ck_assert_str_eq(corBody(buf), "draining\n");
    ck_assert_ptr_nonnull(strcasestr(buf, "Connection: close"));
    close(fd);
    pthread_join(thread, NULL);
    ck_assert_int_eq(pending.status, 200);
}
END_TEST

/* ---- Notify and socket activation --------------------------------------- */

static void
activationYaml(char* yaml, size_t cap, int passedPort)
{
    snprintf(yaml, cap,
             "runtime: { loops: 2, workers: 2, coroutines: { enabled: "
             "{COROUTINES} } }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:%d }\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
             "modules: [ { load: http }, { load: hello } ]\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /health\", handler: health }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             passedPort);
}

/* Whether a connect to port on loopback is refused. */
static bool
refused(int port)
{
    int fd = corConnect(port);

    if (fd >= 0) {
        close(fd);
        return false;
    }
    return errno == ECONNREFUSED;
}

/* Wait for RELOADING=1 and READY=1 after a SIGHUP; the READY datagram
 * holds status. RELOADING carries MONOTONIC_USEC, of this clock. */
static void
reloadSeen(const char* status)
{
    char datagram[1024];
    struct timespec now;
    const char* usec;
    long long delta;

    kill(server.pid, SIGHUP);
    ck_assert(notifyWait("RELOADING=1", datagram, sizeof(datagram), 5000));
    clock_gettime(CLOCK_MONOTONIC, &now);
    usec = strstr(datagram, "MONOTONIC_USEC=");
    ck_assert_msg(usec != NULL, "%s", datagram);
    delta = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000
            - atoll(usec + 15);
    ck_assert_msg(delta >= 0 && delta < 5000000,
                  "MONOTONIC_USEC off by "
                  "%lld us",
                  delta);
    ck_assert(notifyWait("READY=1", datagram, sizeof(datagram), 10000));
    ck_assert_msg(strstr(datagram, status) != NULL, "'%s' in: %s", status,
                  datagram);
}

/* The test passes one socket the YAML listens on (fd 3) and one it does
 * not (fd 4), and keeps its own copies, as systemd does: cor could not
 * bind that address itself, so a served request proves the passed socket
 * serves. The other listener is bound as usual; the stray socket is
 * logged and closed. Then READY=1, a reload and a failed one, a stop. */
START_TEST(test_notify_and_socket_activation)
{
    char yaml[2048];
    char datagram[1024];
    char line[128];
    int passedPort;
    int strayPort;

    manager.passed[0] = listenSocket(&passedPort);
    manager.passed[1] = listenSocket(&strayPort);
    notifyOpen(true);
    activationYaml(yaml, sizeof(yaml), passedPort);
    ck_assert_int_eq(corServerStartChild(&server, yaml, managerChild, &manager),
                     0);
    ck_assert(notifyWait("READY=1", datagram, sizeof(datagram), 5000));
    ck_assert_ptr_nonnull(strstr(datagram, "STATUS=generation 1 serving"));
    ck_assert_int_eq(get(passedPort, "/hello"), 200);
    ck_assert_int_eq(get(server.port, "/hello"), 200);
    ck_assert_int_eq(get(server.port, "/health"), 200);
    snprintf(line, sizeof(line), "fd 4 (127.0.0.1:%d) matches no listener",
             strayPort);
    ck_assert_int_eq(corServerLogCount(&server, line), 1);
    close(manager.passed[1]);
    manager.passed[1] = -1;
    ck_assert_msg(refused(strayPort), "the stray socket was not closed");

    reloadSeen("STATUS=reload ok: generation 2 serving");
    ck_assert_int_eq(get(passedPort, "/hello"), 200);
    ck_assert_int_eq(corServerWriteConfig(&server, "listen: [ oops\n"), 0);
    reloadSeen("STATUS=reload failed: generation 2 serving; ");
    ck_assert_int_eq(get(passedPort, "/hello"), 200);

    kill(server.pid, SIGTERM);
    ck_assert(notifyWait("STOPPING=1", datagram, sizeof(datagram), 5000));
    ck_assert_int_eq(waitpid(server.pid, NULL, 0), server.pid);
    server.pid = 0;
}
END_TEST

/* LISTEN_PID names another process: the sockets are not cor's. It says
 * so, and neither takes nor closes them (a connect to the passed one,
 * whose copy the test let go, still lands in its backlog). */
START_TEST(test_sockets_for_another_pid_are_left_alone)
{
    int passedPort;

    manager.passed[0] = listenSocket(&passedPort);
    manager.listenPidOther = true;
    ck_assert_int_eq(corServerStartChild(&server, healthYaml, managerChild,
                                         &manager),
                     0);
    ck_assert_int_eq(corServerLogCount(&server, "not this master"), 1);
    ck_assert_int_eq(corServerLogCount(&server, "matches no listener"), 0);
    close(manager.passed[0]);
    manager.passed[0] = -1;
    ck_assert(!refused(passedPort));
    ck_assert_int_eq(get(server.port, "/health"), 200);
}
END_TEST

/* ---- The watchdog -------------------------------------------------------- */

/* WATCHDOG_USEC of 400 ms: WATCHDOG=1 about every 200 ms while both
 * loops beat; none while /block holds a loop for 1.5 s (the master logs
 * which); again once the loop is free. */
START_TEST(test_watchdog_is_petted_only_while_every_loop_beats)
{
    Pending pending;
    pthread_t thread;
    char datagram[1024];
    int pets;

    notifyOpen(false);
    manager.watchdogUsec = WATCHDOG_USEC;
    ck_assert_int_eq(corServerStartChild(&server, healthYaml, managerChild,
                                         &manager),
                     0);
    ck_assert(notifyWait("READY=1", datagram, sizeof(datagram), 5000));
    pets = notifyCount("WATCHDOG=1", 1000);
    ck_assert_msg(pets >= 3 && pets <= 7, "%d pets in 1 s", pets);

    pending = (Pending){ server.port, "/block?ms=1500", 0 };
    pthread_create(&thread, NULL, pendingRun, &pending);
    usleep(500 * 1000);
    notifyDiscard();
    pets = notifyCount("WATCHDOG=1", 700);
    ck_assert_msg(pets == 0, "%d pets while a loop was held", pets);
    ck_assert_int_ge(corServerLogCount(&server, "has not beaten for"), 1);
    pthread_join(thread, NULL);
    ck_assert_int_eq(pending.status, 200);
    ck_assert(notifyWait("WATCHDOG=1", datagram, sizeof(datagram), 1000));
    ck_assert_int_ge(corServerLogCount(&server, "beat again"), 1);
}
END_TEST

/* WATCHDOG_PID names another process: the watchdog is not cor's, and no
 * WATCHDOG=1 is sent (READY=1 is). */
START_TEST(test_watchdog_of_another_pid_is_not_petted)
{
    char datagram[1024];

    notifyOpen(false);
    manager.watchdogUsec = WATCHDOG_USEC;
    manager.watchdogPidOther = true;
    ck_assert_int_eq(corServerStartChild(&server, healthYaml, managerChild,
                                         &manager),
                     0);
    ck_assert(notifyWait("READY=1", datagram, sizeof(datagram), 5000));
    ck_assert_int_eq(notifyCount("WATCHDOG=1", 1000), 0);
}
END_TEST

COR_TEST_SUITE(corSystemd)
{
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_health_is_200_while_serving_and_503_while_draining);
    tcase_add_test(tc, test_notify_and_socket_activation);
    tcase_add_test(tc, test_sockets_for_another_pid_are_left_alone);
    tcase_add_test(tc, test_watchdog_is_petted_only_while_every_loop_beats);
    tcase_add_test(tc, test_watchdog_of_another_pid_is_not_petted);
}
