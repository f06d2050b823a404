/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The integration harness (corServer.h): the real binary, started and
 * stopped by PID, on a port that was free a moment before.
 */
#include "corServer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long
corNowMs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool
corTestCoroutines(void)
{
    const char* env = getenv("COR_TEST_COROUTINES");

    return env == NULL || strcmp(env, "0") != 0;
}

/* The test's own process ends with the one that forked it, check's
 * runner: tests/run's timeout kills the runner, and a test that nothing
 * waits for any more would hold what it started as long as it hangs. */
static void
testBind(void)
{
    static pid_t bound;
    pid_t runner = getppid();

    if (bound == getpid()) {
        return;
    }
    bound = getpid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != runner) {
        raise(SIGKILL);
    }
}

pid_t
corTestFork(int deathSignal)
{
    pid_t test = getpid();
    pid_t pid;

    testBind();
    pid = fork();

    /* A test that ended before the prctl is not seen ending after it. */
    if (pid == 0
        && (prctl(PR_SET_PDEATHSIG, deathSignal) != 0 || getppid() != test)) {
        _exit(127);
    }
    return pid;
}

int
corFreePort(void)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = 0;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr*)&addr, sizeof(addr)) == 0
        && getsockname(fd, (struct sockaddr*)&addr, &len) == 0) {
        port = ntohs(addr.sin_port);
    }
    if (fd >= 0) {
        close(fd);
    }
    return port;
}

static const char*
binary(void)
{
    const char* bin = getenv("COR_BIN");

    return bin != NULL ? bin : "build/cor";
}

/* Replace {PORT} {PORT2} {DIR} {COROUTINES} {MODULES} in yaml. */
static char*
expand(const CorServer* s, const char* yaml)
{
    size_t cap = strlen(yaml) * 2 + 4096;
    char* out = malloc(cap);
    char modules[256];
    size_t n = 0;
    const char* bin = binary();
    const char* slash = strrchr(bin, '/');

    snprintf(modules, sizeof(modules), "%.*s/modules",
             slash ? (int)(slash - bin) : 1, slash ? bin : ".");
    for (const char* p = yaml; *p != '\0' && n + 512 < cap;) {
        if (strncmp(p, "{PORT}", 6) == 0) {
            n += (size_t)sprintf(out + n, "%d", s->port);
            p += 6;
        } else if (strncmp(p, "{PORT2}", 7) == 0) {
            n += (size_t)sprintf(out + n, "%d", s->port2);
            p += 7;
        } else if (strncmp(p, "{DIR}", 5) == 0) {
            n += (size_t)sprintf(out + n, "%s", s->dir);
            p += 5;
        } else if (strncmp(p, "{COROUTINES}", 12) == 0) {
            n += (size_t)sprintf(out + n, "%s",
                                 corTestCoroutines() ? "true" : "false");
            p += 12;
        } else if (strncmp(p, "{MODULES}", 9) == 0) {
            n += (size_t)sprintf(out + n, "%s", modules);
            p += 9;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return out;
}

/*
 * COR_TEST_IO=uring runs a suite on the io_uring loops: runtime.io: uring
 * goes into every configuration that serves coroutines (blocking mode
 * refuses it), in a flow map ("runtime: { io: uring, ...") or a block one,
 * or as a runtime section of its own where there is none.
 */
static char*
ioInject(char* text)
{
    const char* io = getenv("COR_TEST_IO");
    char* runtime = strncmp(text, "runtime:", 8) == 0
                        ? text
                        : strstr(text, "\nruntime:");
    size_t at;
    char* out;

    if (io == NULL || strcmp(io, "uring") != 0 || !corTestCoroutines()
        || strstr(text, "enabled: false") != NULL) {
        return text;
    }
    /* What goes in: a few words, and an indent no longer than a line. */
    out = malloc(2 * strlen(text) + 64);
    if (runtime == NULL) {
        sprintf(out, "%sruntime: { io: uring }\n", text);
    } else {
        runtime += *runtime == '\n' ? 9 : 8;
        at = (size_t)(runtime - text);
        if (strncmp(runtime, " {", 2) == 0) {
            sprintf(out, "%.*s { io: uring,%s", (int)at, text, runtime + 2);
        } else {
            /* After the section's first key, so that the lines an error
             * message names in the rest of it stay where the test put
             * them. */
            const char* line = strchr(runtime, '\n');
            const char* next = line != NULL ? strchr(line + 1, '\n') : NULL;
            size_t indent = line != NULL ? strspn(line + 1, " ") : 0;

            if (line == NULL) {
                free(out);
                return text;
            }
            if (next == NULL || indent == 0) {
                next = line; /* no key of its own yet */
                indent = 2;
            }
            at = (size_t)(next + 1 - text);
            sprintf(out, "%.*s%*sio: uring\n%s", (int)at, text, (int)indent, "",
                    next + 1);
        }
    }
    free(text);
    return out;
}

int
corServerWriteConfig(CorServer* s, const char* yaml)
{
    char* text = ioInject(expand(s, yaml));
    FILE* f = fopen(s->config, "w");

    if (f == NULL) {
        free(text);
        return -1;
    }
    fputs(text, f);
    fclose(f);
    free(text);
    return 0;
}

int
corServerStartWebsocket(CorServer* s, bool tls, const char* certs)
{
    return corServerStartListen(
        s, tls, certs,
        "modules:\n"
        "  - { load: http }\n"
        "  - { load: {MODULES}/websocket.so, max_message: 256KiB }\n"
        "routes:\n"
        "  - { match: \"GET /ws\", handler: websocket }\n"
        "log: { pid_file: {DIR}/cor.pid }\n");
}

bool
corWebsocketClient(const CorServer* s, const char* client, bool tls,
                   const char* certs, const char* after, char* out, size_t cap)
{
    char command[512];

    snprintf(command, sizeof(command),
             "timeout 90 %s %s://127.0.0.1:%d/ws "
             "%s %s%s 2>&1",
             client, tls ? "wss" : "ws", s->port, after, tls ? certs : "",
             tls ? "/ca.pem" : "");
    return corShell(command, out, cap) == 0 && strstr(out, "ALL OK") != NULL;
}

int
corServerStartListen(CorServer* s, bool tls, const char* certs,
                     const char* rest)
{
    char tlsLine[256] = "";
    char yaml[16384];

    if (tls) {
        snprintf(tlsLine, sizeof(tlsLine),
                 "    tls: { certificate: "
                 "%s/server.pem, key: %s/server.key }\n",
                 certs, certs);
    }
    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 4\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "  stop_timeout: 5s\n"
             "listen:\n"
             "  - protocol: %s\n"
             "    address: 127.0.0.1:{PORT}\n"
             "%s%s",
             tls ? "https" : "http", tlsLine, rest);
    return corServerStart(s, yaml);
}

int
corConfigCheck(const CorServer* s, const char* name, const char* yaml,
               char* out, size_t cap)
{
    char path[320];
    char command[768];
    FILE* f;

    snprintf(path, sizeof(path), "%s/%s", s->dir, name);
    f = fopen(path, "w");
    if (f == NULL) {
        return -1;
    }
    fputs(yaml, f);
    fclose(f);
    snprintf(command, sizeof(command), "%s -t -c %s 2>&1", getenv("COR_BIN"),
             path);
    return corShell(command, out, cap);
}

void
corServerLogPrint(const CorServer* s)
{
    char command[256];

    snprintf(command, sizeof(command), "cat %s >&2", s->log);
    if (system(command) != 0) {
        fprintf(stderr, "(no log)\n");
    }
}

/* Start cor; a non-zero fdHard sets its RLIMIT_NOFILE, and child, when
 * given, runs in the child just before the exec. */
static int
start(CorServer* s, const char* yaml, unsigned long fdSoft,
      unsigned long fdHard, CorServerChildFn child, void* arg)
{
    char pidFile[256];

    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "/tmp/cor-test-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        return -1;
    }
    snprintf(s->config, sizeof(s->config), "%s/cor.yaml", s->dir);
    snprintf(s->log, sizeof(s->log), "%s/error.log", s->dir);
    s->port = corFreePort();
    do {
        s->port2 = corFreePort(); /* the kernel may give the same again */
    } while (s->port2 == s->port);
    if (corServerWriteConfig(s, yaml) != 0) {
        return -1;
    }
    /* SIGKILL: a master that hangs still goes; its generation drains and
     * exits when it sees its master gone. */
    s->pid = corTestFork(SIGKILL);
    if (s->pid == 0) {
        FILE* log = freopen(s->log, "w", stderr);

        (void)log;
        dup2(STDERR_FILENO, STDOUT_FILENO);
        /* A group of its own: a server that signals its process group by
         * mistake (kill(0)) must not take the test down with it. */
        setpgid(0, 0);
        if (fdHard != 0) {
            struct rlimit limit = { fdSoft, fdHard };

            setrlimit(RLIMIT_NOFILE, &limit);
        }
        if (child != NULL) {
            child(arg);
        }
        execl(binary(), "cor", "-c", s->config, (char*)NULL);
        _exit(127);
    }
    /* The master writes its pid file once the generation is ready; one
     * that fails exits, so a minute costs only a loaded machine's wait. */
    snprintf(pidFile, sizeof(pidFile), "%s/cor.pid", s->dir);
    for (long deadline = corNowMs() + 60000; corNowMs() < deadline;) {
        if (access(pidFile, R_OK) == 0) {
            return 0;
        }
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            break;
        }
        usleep(20 * 1000);
    }
    corServerLogPrint(s);
    corServerStop(s);
    return -1;
}

int
corServerStart(CorServer* s, const char* yaml)
{
    return start(s, yaml, 0, 0, NULL, NULL);
}

int
corServerStartChild(CorServer* s, const char* yaml, CorServerChildFn child,
                    void* arg)
{
    return start(s, yaml, 0, 0, child, arg);
}

int
corServerStartFdLimit(CorServer* s, const char* yaml, unsigned long fdSoft,
                      unsigned long fdHard)
{
    return start(s, yaml, fdSoft, fdHard, NULL, NULL);
}

int
corServerStartWith(CorServer* s, const char* extra)
{
    char yaml[8192];

    snprintf(yaml, sizeof(yaml),
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /sleep\", handler: sleep }\n"
             "  - { match: \"GET /park\", handler: park }\n"
             "  - { match: \"GET /wake\", handler: wake }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "  - { match: \"/echo\", handler: echo }\n"
             "  - { match: \"GET /bytes\", handler: bytes }\n"
             "  - { match: \"GET /block\", handler: block }\n"
             "  - { match: \"GET /never\", handler: never }\n"
             "  - { match: \"GET /crash\", handler: crash }\n"
             "  - { match: \"GET /file\", handler: file }\n"
             "  - { match: \"GET /stream\", handler: stream }\n"
             "  - { match: \"/notify/*\", handler: notify }\n"
             "  - { match: \"/waitecho\", handler: waitecho }\n"
             "  - { match: \"/bodysum\", handler: bodysum }\n"
             "log: { pid_file: {DIR}/cor.pid, access: {DIR}/access.log }\n"
             "%s",
             extra ? extra : "");
    return corServerStartListen(s, false, NULL, yaml);
}

void
corServerStop(CorServer* s)
{
    char command[512];
    int sanitizerReports;

    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    /* A server built with sanitizers reports into its log: any report
     * fails the test, even one from a generation the master replaced. */
    snprintf(command, sizeof(command),
             "grep -q -e 'ERROR: AddressSanitizer'"
             " -e 'runtime error:' -e 'ERROR: LeakSanitizer' %s 2>/dev/null",
             s->log);
    sanitizerReports = s->log[0] != '\0' && system(command) == 0;
    if (sanitizerReports) {
        corServerLogPrint(s);
    }
    if (s->dir[0] != '\0') {
        snprintf(command, sizeof(command), "rm -rf %s", s->dir);
        if (system(command) != 0) {
            fprintf(stderr, "cannot remove %s\n", s->dir);
        }
    }
    memset(s, 0, sizeof(*s));
    if (sanitizerReports) {
        fprintf(stderr, "the server's log holds a sanitizer report\n");
        abort();
    }
}

int
corConnect(int port)
{
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

bool
corWaitListening(int port, pid_t pid, long ms)
{
    for (long deadline = corNowMs() + ms; corNowMs() < deadline;) {
        int fd = corConnect(port);

        if (fd >= 0) {
            close(fd);
            return true;
        }
        if (pid > 0 && waitpid(pid, NULL, WNOHANG) != 0) {
            return false;
        }
        usleep(20 * 1000);
    }
    return false;
}

int
corSendAll(int fd, const void* data, size_t len)
{
    const char* p = data;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static bool
waitReadable(int fd, long deadline)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    long left = deadline - corNowMs();

    return left > 0 && poll(&pfd, 1, (int)left) > 0;
}

ssize_t
corReadResponse(int fd, char* buf, size_t cap, int timeoutMs)
{
    long deadline = corNowMs() + timeoutMs;
    size_t len = 0;

    for (;;) {
        char* end;

        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
        if (end != NULL) {
            const char* cl = strcasestr(buf, "\r\nContent-Length:");
            size_t head = (size_t)(end + 4 - buf);
            size_t body = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;

            if (strncmp(buf, "HTTP/1.1 100", 12) == 0) {
                memmove(buf, end + 4, len - head);
                len -= head;
                continue;
            }
            if (len >= head + body) {
                return (ssize_t)(head + body);
            }
        }
        if (len + 1 >= cap || !waitReadable(fd, deadline)) {
            return -1;
        }
        /* Byte by byte in the head (a pipelined answer may follow), then
         * the rest of the body at once. */
        size_t want = 1;

        if (end != NULL) {
            const char* cl = strcasestr(buf, "\r\nContent-Length:");
            size_t head = (size_t)(end + 4 - buf);
            size_t body = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;

            want = head + body - len;
            if (want > cap - 1 - len) {
                want = cap - 1 - len;
            }
        }
        ssize_t n = recv(fd, buf + len, want, 0);

        if (n <= 0) {
            return len > 0 ? -1 : 0;
        }
        len += (size_t)n;
    }
}

ssize_t
corReadHead(int fd, char* buf, size_t cap, int timeoutMs)
{
    long deadline = corNowMs() + timeoutMs;
    size_t len = 0;

    buf[0] = '\0';
    while (strstr(buf, "\r\n\r\n") == NULL) {
        ssize_t n;

        if (len + 1 >= cap || !waitReadable(fd, deadline)) {
            return -1;
        }
        n = recv(fd, buf + len, 1, 0); /* what follows is not ours */
        if (n <= 0) {
            return len > 0 ? -1 : 0;
        }
        buf[++len] = '\0';
    }
    return (ssize_t)len;
}

bool
corPeerClosed(int fd, int timeoutMs)
{
    long deadline = corNowMs() + timeoutMs;
    char byte;

    while (waitReadable(fd, deadline)) {
        ssize_t n = recv(fd, &byte, 1, 0);

        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return true;
        }
    }
    return false;
}

int
corStatus(const char* response)
{
    int status = -1;

    if (response == NULL || sscanf(response, "HTTP/1.%*d %d", &status) != 1) {
        return -1;
    }
    return status;
}

const char*
corBody(const char* response)
{
    const char* end = strstr(response, "\r\n\r\n");

    return end ? end + 4 : "";
}

int
corRequest(int port, const char* request, char* buf, size_t cap)
{
    int fd = corConnect(port);
    ssize_t n;

    if (fd < 0) {
        return -1;
    }
    if (corSendAll(fd, request, strlen(request)) != 0) {
        close(fd);
        return -1;
    }
    n = corReadResponse(fd, buf, cap, 5000);
    close(fd);
    return n > 0 ? corStatus(buf) : -1;
}

int
corShell(const char* command, char* out, size_t cap)
{
    FILE* p = popen(command, "r");
    size_t n = 0;
    int status;

    if (p == NULL) {
        return -1;
    }
    while (out != NULL && n + 1 < cap) {
        size_t got = fread(out + n, 1, cap - 1 - n, p);

        if (got == 0) {
            break;
        }
        n += got;
    }
    if (out != NULL) {
        out[n] = '\0';
    }
    status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* How many lines of s's log match pattern, as grep's flag reads it. */
static int
logCount(const CorServer* s, const char* flag, const char* pattern)
{
    char command[1024];
    char quoted[512];
    char out[64];
    size_t n = 0;
    int rc;

    /* Inside the shell's single quotes, a quote of the pattern's own is
     * closed, escaped and opened again. */
    for (const char* p = pattern; *p != '\0' && n + 5 < sizeof(quoted); p++) {
        if (*p == '\'') {
            memcpy(quoted + n, "'\\''", 4);
            n += 4;
        } else {
            quoted[n++] = *p;
        }
    }
    quoted[n] = '\0';
    snprintf(command, sizeof(command), "grep -c %s -e '%s' %s", flag, quoted,
             s->log);
    rc = corShell(command, out, sizeof(out));
    return rc == 0 || rc == 1 ? atoi(out) : -1; /* 1: no line */
}

int
corServerLogCount(const CorServer* s, const char* text)
{
    return logCount(s, "-F", text);
}

int
corServerLogMatches(const CorServer* s, const char* regex)
{
    return logCount(s, "-E", regex);
}

void
corRequestToolCommand(const CorServer* s, const char* args, char* command,
                      size_t cap)
{
    char* expanded = expand(s, args);
    const char* bin = binary();
    const char* slash = strrchr(bin, '/');

    snprintf(command, cap, "%.*s/cor-request %s 2>&1",
             slash ? (int)(slash - bin) : 1, slash ? bin : ".", expanded);
    free(expanded);
}

int
corRequestTool(const CorServer* s, const char* args, char* out, size_t cap)
{
    char command[4096];

    corRequestToolCommand(s, args, command, sizeof(command));
    return corShell(command, out, cap);
}

long
corSummaryCount(const char* out, const char* label)
{
    const char* at = strstr(out, label);

    return at != NULL ? strtol(at + strlen(label), NULL, 10) : -1;
}

long
corMetric(int port, const char* name)
{
    static char buf[65536];
    char key[256];
    const char* at;

    if (corRequest(port, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n", buf,
                   sizeof(buf))
        != 200) {
        return -1;
    }
    snprintf(key, sizeof(key), "\n%s ", name);
    at = strstr(buf, key);
    return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

/* The certificates are made once per build, beside the server under test
 * (COR_BIN's folder, test-certs), and copied for each test: sixteen
 * openssl runs cost 0.7-1.5 s of every TLS test's setup. A copy, not the
 * folder itself, since a test may change its own (a reload with another
 * certificate). A test that cannot make or remove them cannot go on. */
void
corTestCertsShared(char* dir, size_t cap)
{
    const char* bin = getenv("COR_BIN");
    const char* slash = bin != NULL ? strrchr(bin, '/') : NULL;
    char command[512];

    if (slash != NULL) {
        snprintf(dir, cap, "%.*s/test-certs", (int)(slash - bin), bin);
    } else {
        snprintf(dir, cap, "build/test-certs");
    }
    snprintf(command, sizeof(command), "tests/tls/makeCerts %s", dir);
    if (system(command) != 0) {
        fprintf(stderr, "cannot make the test certificates in %s\n", dir);
        abort();
    }
}

void
corTestCertsMake(char* dir, size_t cap)
{
    char made[256];
    char command[1280];

    corTestCertsShared(made, sizeof(made));
    snprintf(dir, cap, "/tmp/cor-certs-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "cannot make a folder for the test certificates\n");
        abort();
    }
    snprintf(command, sizeof(command), "cp -p %s/*.pem %s/*.key %s/", made,
             made, dir);
    if (system(command) != 0) {
        fprintf(stderr, "cannot copy the test certificates to %s\n", dir);
        abort();
    }
}

void
corTestCertsRemove(const char* dir)
{
    char command[256];

    snprintf(command, sizeof(command), "rm -rf %s", dir);
    if (system(command) != 0) {
        fprintf(stderr, "cannot remove %s\n", dir);
        abort();
    }
}

int
corServerStartHttpsHello(CorServer* s, const char* certDir)
{
    char yaml[1024];

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 1 }\n"
             "listen:\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:{PORT}\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             certDir, certDir);
    return corServerStart(s, yaml);
}

pid_t
corServerGeneration(const CorServer* s)
{
    char path[64];
    long pid = -1;
    FILE* f;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)s->pid,
             (int)s->pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    if (fscanf(f, "%ld", &pid) != 1) {
        pid = -1;
    }
    fclose(f);
    return (pid_t)pid;
}

long
corProcStatusKb(pid_t pid, const char* field)
{
    char path[64];
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    FILE* f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = atol(line + n + 1);
        }
    }
    fclose(f);
    return kb;
}

pid_t
corUpstreamStart(int* portP)
{
    *portP = 0;
    return corUpstreamStartAt(portP);
}

pid_t
corUpstreamStartAt(int* portP)
{
    char self[PATH_MAX];
    char program[PATH_MAX + 32];
    char portFile[64];
    char port[16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    pid_t pid;

    snprintf(port, sizeof(port), "%d", *portP);
    *portP = 0;
    if (n <= 0) {
        return -1;
    }
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(program, sizeof(program), "%s/corHttpUpstream", self);
    snprintf(portFile, sizeof(portFile), "/tmp/corHttpUpstream.%d.%ld.port",
             (int)getpid(), corNowMs());
    unlink(portFile);
    pid = corTestFork(SIGKILL);
    if (pid == 0) {
        execl(program, program, portFile, port, (char*)NULL);
        _exit(127);
    }
    /* Up to a minute for a loaded machine, unless it exited. */
    for (long deadline = corNowMs() + 60000;
         *portP == 0 && corNowMs() < deadline
         && waitpid(pid, NULL, WNOHANG) == 0;) {
        FILE* f = fopen(portFile, "r");

        if (f == NULL || fscanf(f, "%d", portP) != 1) {
            usleep(10000);
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    unlink(portFile);
    return *portP > 0 ? pid : -1;
}

void
corUpstreamStop(pid_t* pidP)
{
    if (*pidP > 0) {
        kill(*pidP, SIGTERM);
        waitpid(*pidP, NULL, 0);
        *pidP = 0;
    }
}

int
corCurl(int port, const char* args, const char* path, char* out, size_t cap)
{
    char command[1024];

    snprintf(command, sizeof(command),
             "curl -s --max-time 20 %s "
             "'http://127.0.0.1:%d%s' 2>&1",
             args, port, path);
    return corShell(command, out, cap);
}

int
corCurlStatus(int port, const char* args, const char* path, char* out,
              size_t cap)
{
    char command[2048];
    const char* space;

    snprintf(command, sizeof(command),
             "curl -si --max-time 20 --path-as-is "
             "%s 'http://127.0.0.1:%d%s' 2>&1",
             args, port, path);
    if (corShell(command, out, cap) != 0) {
        return 0;
    }
    space = strchr(out, ' ');
    return space != NULL ? atoi(space + 1) : 0;
}

int
corShellAt(int port, const char* dir, char* out, size_t cap, const char* fmt,
           ...)
{
    char command[4096];
    char body[3072];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    snprintf(command, sizeof(command), "P=%d D=%s; %s 2>&1", port, dir, body);
    return corShell(command, out, cap);
}

int
corNotifyOpen(bool abstract, char* name, size_t cap)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    socklen_t len = sizeof(addr);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    static unsigned seq;

    snprintf(name, cap, "%s/tmp/cor-notify-%d-%u", abstract ? "@" : "",
             (int)getpid(), seq++);
    if (fd < 0 || strlen(name) >= sizeof(addr.sun_path)) {
        return -1;
    }
    memcpy(addr.sun_path, name, strlen(name));
    if (abstract) {
        addr.sun_path[0] = '\0';
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path)
                          + strlen(name));
    }
    if (bind(fd, (struct sockaddr*)&addr, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void
corNotifyClose(int fd, const char* name)
{
    close(fd);
    if (name[0] == '/') {
        unlink(name);
    }
}

bool
corNotifyHasLine(const char* datagram, const char* line)
{
    size_t n = strlen(line);

    for (const char* p = datagram; p != NULL;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0')) {
            return true;
        }
    }
    return false;
}

bool
corNotifyNext(int fd, char* out, size_t cap, int timeoutMs)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    ssize_t n;

    if (poll(&pfd, 1, timeoutMs) <= 0) {
        return false;
    }
    n = recv(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    return n > 0;
}

bool
corNotifyWait(int fd, const char* line, char* out, size_t cap, int timeoutMs)
{
    for (long deadline = corNowMs() + timeoutMs;;) {
        long left = deadline - corNowMs();

        if (left <= 0 || !corNotifyNext(fd, out, cap, (int)left)) {
            return false;
        }
        if (corNotifyHasLine(out, line)) {
            return true;
        }
    }
}
