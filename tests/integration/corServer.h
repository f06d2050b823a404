/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The integration harness: start the real cor binary on a loopback port
 * with a configuration written for the test, talk to it over raw sockets
 * and with real clients, and stop it by its PID. COR_BIN names the binary;
 * COR_TEST_COROUTINES=0 runs the whole suite in blocking mode;
 * COR_TEST_IO=uring runs it on the io_uring loops (runtime.io).
 */
#ifndef COR_SERVER_H
#define COR_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    int port2;     /* another free port, for a second listener */
    char dir[128]; /* a scratch folder of the test's own */
    char config[192];
    char log[192];
} CorServer;

/*
 * Write yaml to a config file and start cor on it. In yaml, {PORT} is a
 * free loopback port ({PORT2} another), {DIR} the scratch folder, {COROUTINES}
 * true or false as the suite runs, {MODULES} the folder of the built modules.
 * Waits until the port answers. Returns 0, or -1 (the log is printed).
 */
int corServerStart(CorServer* s, const char* yaml);
/* The same with the server's RLIMIT_NOFILE set to fdSoft and fdHard (cor
 * raises the soft limit to the hard one: set both to hold it down). */
int corServerStartFdLimit(CorServer* s, const char* yaml, unsigned long fdSoft,
                          unsigned long fdHard);
/* The same with child(arg) run in the server's process between the fork
 * and the exec (its pid is getpid() there): to set its environment and
 * hand it file descriptors, as a service manager does. */
typedef void (*CorServerChildFn)(void* arg);
int corServerStartChild(CorServer* s, const char* yaml, CorServerChildFn child,
                        void* arg);
/* The standard test configuration with extra YAML appended under the
 * top level (limits, routes, ...). */
int corServerStartWith(CorServer* s, const char* extraLimits);
void corServerStop(CorServer* s);
/* Rewrite the config file (for a reload). */
int corServerWriteConfig(CorServer* s, const char* yaml);
bool corTestCoroutines(void);
/*
 * fork() for what a test starts (a server, an upstream, a broker, a peer):
 * the child gets deathSignal when the test's process ends, however it
 * ends. check _exits from a failed assertion, skipping the teardown, and
 * kills a test past its timeout, by its process group, which the servers
 * left (setpgid): without this they ran on for good. The kernel sends it
 * when the thread that forked ends, so fork from the test's own thread.
 * The test's process gets SIGKILL in turn when check's runner ends (killed
 * by tests/run's timeout).
 */
pid_t corTestFork(int deathSignal);
/* corServerStart with two loops, four workers, and a listener on {PORT}:
 * http, or https with the test certificates of certs (corTestCertsMake);
 * rest is the YAML after it (modules, routes, log). */
int corServerStartListen(CorServer* s, bool tls, const char* certs,
                         const char* rest);
/* That with modules/websocket's echo on GET /ws (max_message 256 KiB). */
int corServerStartWebsocket(CorServer* s, bool tls, const char* certs);
/* Run a WebSocket client (its command, which ends with its arguments
 * before the URL) on ws[s]://127.0.0.1:PORT/ws of s, then after and, with
 * tls, certs's CA; its output to out. Whether it said ALL OK. */
bool corWebsocketClient(const CorServer* s, const char* client, bool tls,
                        const char* certs, const char* after, char* out,
                        size_t cap);
/* Write yaml (as it is) to the file name in s's folder and run `cor -t`
 * on it; its output to out. Returns its exit status. */
int corConfigCheck(const CorServer* s, const char* name, const char* yaml,
                   char* out, size_t cap);

/* A loopback port free now (bound to port 0, then closed), or 0. Done
 * here, not by a python3 one-liner: a python3 start through pyenv's
 * shims took 2-5 s on a loaded machine, and tests paid it per test. */
int corFreePort(void);
/* A connected blocking socket to the server, or -1. */
int corConnect(int port);
/* Whether something takes connections on port within ms: false as soon
 * as pid (when > 0: the peer started to listen there) has ended. For the
 * peers a test starts (an origin, a broker, a database). */
bool corWaitListening(int port, pid_t pid, long ms);
int corSendAll(int fd, const void* data, size_t len);
/* Read one whole response (head, and the body by Content-Length) into buf;
 * returns its length, 0 when the peer closed first, -1 on timeout. */
ssize_t corReadResponse(int fd, char* buf, size_t cap, int timeoutMs);
/* Read the first head the server sends (a 100 Continue's, or a final
 * answer's), no further, into buf; returns its length, 0 when the peer
 * closed first, -1 on timeout. */
ssize_t corReadHead(int fd, char* buf, size_t cap, int timeoutMs);
/* Whether the peer closed the connection within timeoutMs. */
bool corPeerClosed(int fd, int timeoutMs);
/* A whole exchange on a new connection; returns the status or -1. */
int corRequest(int port, const char* request, char* buf, size_t cap);
int corStatus(const char* response);
const char* corBody(const char* response);
/* Run a shell command, capture its output; returns the exit status. */
int corShell(const char* command, char* out, size_t cap);
/* The test certificates of tests/tls/makeCerts, made once beside the
 * binary and shared by the programs that only read them: their folder's
 * path goes to dir (cap bytes). */
void corTestCertsShared(char* dir, size_t cap);
/* The same in a fresh folder of one's own, whose path goes to dir (cap
 * bytes, at least 32); and its removal. */
void corTestCertsMake(char* dir, size_t cap);
void corTestCertsRemove(const char* dir);
/* How many lines of s's log hold text (a fixed string, no quote). */
int corServerLogCount(const CorServer* s, const char* text);
/* The same for an extended regular expression (no single quote). */
int corServerLogMatches(const CorServer* s, const char* regex);
/* s's whole log to stderr: what a failed wait shows to explain itself. */
void corServerLogPrint(const CorServer* s);
/* Run cor-request (beside COR_BIN) with args, expanded as a config is
 * ({PORT}, {PORT2}, {DIR}); its output (stderr too) goes to out. Returns
 * its exit status. */
int corRequestTool(const CorServer* s, const char* args, char* out, size_t cap);
/* Its command line, for a run in the background (popen). */
void corRequestToolCommand(const CorServer* s, const char* args, char* command,
                           size_t cap);
/* The number after label in cor-request's load summary ("requests "), or
 * -1. */
long corSummaryCount(const char* out, const char* label);
/* A metric's value from /metrics, or -1. */
long corMetric(int port, const char* name);
long corNowMs(void);
/* Start cor as an https server of the hello module (GET /hello) with the
 * test certificates of certDir (corTestCertsMake): an upstream for the
 * clients' tests. Returns 0 or -1, as corServerStart. */
int corServerStartHttpsHello(CorServer* s, const char* certDir);
/* The server's generation (the master's one child), or -1. */
pid_t corServerGeneration(const CorServer* s);
/* A /proc/PID/status field ("VmRSS", "VmHWM") in kB, or -1. */
long corProcStatusKb(pid_t pid, const char* field);
/* Start tests/integration/corHttpUpstream (beside the running test
 * program) on a free loopback port; its PID, with the port in *portP, or
 * -1. Stop it with corUpstreamStop. */
pid_t corUpstreamStart(int* portP);
/* The same on the port *portP (0: a free one), for an upstream that comes
 * back where it was. */
pid_t corUpstreamStartAt(int* portP);
/* Stop the upstream *pidP if it runs (> 0), and set *pidP to 0. */
void corUpstreamStop(pid_t* pidP);
/* curl -s with args on http://127.0.0.1:port/path (a 20 s limit), its
 * output and errors in out; its exit status. */
int corCurl(int port, const char* args, const char* path, char* out,
            size_t cap);
/* curl -si --path-as-is with args on http://127.0.0.1:port/path, sent as
 * written: the status (0 when none came), the whole answer in out. */
int corCurlStatus(int port, const char* args, const char* path, char* out,
                  size_t cap);
/* A shell command, printf-style, with $P (port) and $D (dir) set; its
 * output, errors too, in out; its exit status. */
int corShellAt(int port, const char* dir, char* out, size_t cap,
               const char* fmt, ...) __attribute__((format(printf, 5, 6)));
/* Whether out holds text, without case: a check's words for it. */
#define COR_CHECK_HAS(out, text)                                               \
    ck_assert_msg(strcasestr((out), (text)) != NULL, "no '%s' in: %s", (text), \
                  (out))
#define COR_CHECK_HAS_NOT(out, text)                                           \
    ck_assert_msg(strcasestr((out), (text)) == NULL, "'%s' in: %s", (text),    \
                  (out))

/* A service manager's notify socket (sd_notify's NOTIFY_SOCKET): bound
 * at an abstract name ("@/tmp/...") or a path in /tmp, its name into name
 * (cap at least 108). Returns the fd, or -1. Close it with
 * corNotifyClose (a path is removed). */
int corNotifyOpen(bool abstract, char* name, size_t cap);
void corNotifyClose(int fd, const char* name);
/* Whether a datagram holds line ("READY=1") as a whole line. */
bool corNotifyHasLine(const char* datagram, const char* line);
/* The next datagram within timeoutMs into out; false on timeout. */
bool corNotifyNext(int fd, char* out, size_t cap, int timeoutMs);
/* Read datagrams until one holds line, within timeoutMs; that one stays
 * in out. */
bool corNotifyWait(int fd, const char* line, char* out, size_t cap,
                   int timeoutMs);

#endif /* COR_SERVER_H */
