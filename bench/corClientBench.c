/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.get: requests per second from one loop's coroutines to a local
 * upstream (cor itself, one loop, /hello) through connections out: each
 * coroutine opens a CorConn (from the loop's pool), writes a GET, reads the
 * answer by its Content-Length and releases the connection, over and over.
 *
 *   client.get              plain, pooled keep-alive connections
 *   client.get.tls          TLS (the test CA), pooled
 *   client.get.new          plain, a new connection per request (what the
 *                           pool saves)
 *   client.get.tls.resumed  TLS, a new connection per request, each
 *                           resuming the session of the one before
 *
 * Rounds of the four alternate; medians are printed. Usage:
 * corClientBench BUILD [SECONDS] [ROUNDS], from the repository root (it
 * runs BUILD/cor and tests/tls/makeCerts).
 */
#include "corBench.h"
#include "cor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define COROUTINES 16

typedef struct {
    const CorConnTarget* target;
    bool close;
    double until;
    long done;
    long resumed;
    int running;
} Run;

static int
freePort(void)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0
        || getsockname(fd, (struct sockaddr*)&addr, &len) != 0) {
        perror("bind");
        exit(1);
    }
    port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

/* One exchange; 0, or -1 when the answer is not a whole 200. */
static int
exchange(CorConn* c)
{
    static const char req[] = "GET /hello HTTP/1.1\r\nHost: bench\r\n\r\n";
    char in[4096];
    size_t have = 0;
    char* end = NULL;
    const char* cl;
    size_t want;

    if (corConnWriteAll(c, req, sizeof(req) - 1, 5000) != 0) {
        return -1;
    }
    while (end == NULL) {
        ssize_t n = corConnRead(c, in + have, sizeof(in) - 1 - have, 5000);

        if (n <= 0) {
            return -1;
        }
        have += (size_t)n;
        in[have] = '\0';
        end = strstr(in, "\r\n\r\n");
    }
    if (strncmp(in, "HTTP/1.1 200", 12) != 0) {
        return -1;
    }
    cl = strcasestr(in, "\r\nContent-Length:");
    want = (size_t)(end + 4 - in) + (cl ? strtoul(cl + 17, NULL, 10) : 0);
    while (have < want) {
        ssize_t n = corConnRead(c, in, sizeof(in), 5000);

        if (n <= 0) {
            return -1;
        }
        have += (size_t)n;
    }
    return have == want ? 0 : -1;
}

static void
client(void* arg)
{
    Run* run = arg;
    char why[256];

    while (corBenchNowNs() < run->until) {
        int err = 0;
        CorConn* c = corConnOpen(run->target, &err, why, sizeof(why));

        if (c == NULL) {
            fprintf(stderr, "client.get: %s\n", why);
            exit(1);
        }
        if (exchange(c) != 0) {
            fprintf(stderr, "client.get: a bad answer from %s\n",
                    corConnPeer(c));
            exit(1);
        }
        run->resumed += corTransportTlsResumed(corConnTransport(c));
        if (run->close) {
            corConnClose(c);
        } else {
            corConnRelease(c);
        }
        run->done++;
    }
    run->running--;
}

/* Requests per second of COROUTINES clients for seconds. */
static double
measure(CorEvLoop* loop, const CorConnTarget* target, bool close,
        double seconds)
{
    Run run = { .target = target, .close = close };
    double start = corBenchNowNs();

    run.until = start + seconds * 1e9;
    for (int i = 0; i < COROUTINES; i++) {
        if (corCoLoopSpawn(loop, client, &run) != 0) {
            fprintf(stderr, "client.get: cannot spawn\n");
            exit(1);
        }
        run.running++;
    }
    while (run.running > 0) {
        corEvLoopRunOnce(loop, 100);
    }
    /* Resumption is what the figure is about: say when it did not
     * happen. */
    if (target->tls && close && run.resumed < run.done / 2) {
        fprintf(stderr,
                "client.get.tls.resumed: only %ld of %ld "
                "connections resumed\n",
                run.resumed, run.done);
    }
    return (double)run.done / ((corBenchNowNs() - start) / 1e9);
}

static pid_t
upstreamStart(const char* build, const char* dir, const char* certs, int port,
              int tlsPort)
{
    char path[512];
    char pidFile[512];
    char bin[PATH_MAX];
    FILE* f;
    pid_t pid;

    snprintf(path, sizeof(path), "%s/cor.yaml", dir);
    snprintf(pidFile, sizeof(pidFile), "%s/cor.pid", dir);
    f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fprintf(f,
            "runtime: { loops: 1, workers: 2 }\n"
            "listen:\n"
            "  - { protocol: http, address: 127.0.0.1:%d }\n"
            "  - protocol: https\n"
            "    address: 127.0.0.1:%d\n"
            "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
            "modules: [{ load: http }, { load: hello }]\n"
            "routes: [{ match: \"GET /hello\", handler: hello }]\n"
            "log: { pid_file: %s, level: warn }\n",
            port, tlsPort, certs, certs, pidFile);
    fclose(f);
    snprintf(bin, sizeof(bin), "%s/cor", build);
    pid = fork();
    if (pid == 0) {
        execl(bin, "cor", "-c", path, (char*)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && access(pidFile, R_OK) != 0; i++) {
        usleep(20 * 1000);
    }
    if (access(pidFile, R_OK) != 0) {
        fprintf(stderr, "client.get: the upstream did not start\n");
        kill(pid, SIGTERM);
        exit(1);
    }
    return pid;
}

int
main(int argc, char** argv)
{
    const char* build = argc > 1 ? argv[1] : "build";
    double seconds = argc > 2 ? atof(argv[2]) : 2;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    static const char* const names[] = {
        "client.get",
        "client.get.tls",
        "client.get.new",
        "client.get.tls.resumed",
    };
    double results[4][COR_BENCH_ROUNDS];
    char dir[] = "/tmp/corClientBench-XXXXXX";
    char certs[PATH_MAX];
    char absolute[PATH_MAX];
    char command[PATH_MAX + 64];
    char caFile[PATH_MAX + 16];
    CorTlsClient* tlsClient;
    char why[256];
    CorConnTarget plain;
    CorConnTarget tls;
    CorEvLoop* loop;
    int port = freePort();
    int tlsPort = freePort();
    pid_t pid;

    signal(SIGPIPE, SIG_IGN);
    rounds = rounds < 1                  ? 1
             : rounds > COR_BENCH_ROUNDS ? COR_BENCH_ROUNDS
                                         : rounds;
    snprintf(certs, sizeof(certs), "%s/test-certs", build);
    snprintf(command, sizeof(command), "tests/tls/makeCerts %s", certs);
    if (mkdtemp(dir) == NULL || system(command) != 0
        || realpath(certs, absolute) == NULL) {
        fprintf(stderr, "client.get: no scratch folder or certificates\n");
        return 1;
    }
    snprintf(certs, sizeof(certs), "%s", absolute);
    pid = upstreamStart(build, dir, certs, port, tlsPort);
    snprintf(caFile, sizeof(caFile), "%s/ca.pem", certs);
    /* The pool's defaults (client.keepalive_per_peer auto, idle 60 s)
     * keep every coroutine's connection. */
    tlsClient = corTlsClientNew(&(CorTlsClientOptions){ .caFile = caFile }, why,
                                sizeof(why));
    if (tlsClient == NULL) {
        fprintf(stderr, "client.get: %s\n", why);
        return 1;
    }
    plain = (CorConnTarget){ .host = "127.0.0.1",
                             .port = (unsigned)port,
                             .connectTimeoutMs = 5000 };
    tls = (CorConnTarget){ .host = "127.0.0.1",
                           .port = (unsigned)tlsPort,
                           .tls = true,
                           .connectTimeoutMs = 5000,
                           .tlsClient = tlsClient };
    loop = corEvLoopCreate();
    corEvLoopBind(loop);
    for (int r = 0; r < rounds; r++) {
        results[0][r] = measure(loop, &plain, false, seconds);
        results[1][r] = measure(loop, &tls, false, seconds);
        results[2][r] = measure(loop, &plain, true, seconds);
        results[3][r] = measure(loop, &tls, true, seconds);
    }
    for (int i = 0; i < 4; i++) {
        corBenchPrint(names[i], corBenchMedian(results[i], rounds), "req/s");
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    snprintf(command, sizeof(command), "rm -rf %s", dir);
    return system(command) == 0 ? 0 : 1;
}
