/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master: owns the configuration file, the listening sockets, the
 * signals and the pid file, and one worker generation it forks and
 * watches. It never loads module code: a module that crashes takes a
 * generation down, and the master replaces it.
 *
 * Reload (SIGHUP): the file is read again. A bad one is logged with its
 * file:line:column errors and changes nothing. A good one gets its
 * listeners (the sockets the running generation already has are kept, so
 * no connection waiting in a backlog is lost) and a new generation; when
 * it reports ready, the old one is told to drain (SIGQUIT): it stops
 * accepting, finishes what it has in flight, answers each connection's
 * next request with a close, and exits. A new generation that fails to
 * start leaves the old one serving. Each outcome is written to the status
 * file (the pid file + ".reload") that `cor -s reload` waits on. A new
 * configuration whose generations keep dying soon after is rolled back
 * (corMasterRollback.c says when): the one before it serves again.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 30000
#define REPLACED_ACCEPT_WAIT_MS 1000
#define LISTEN_BACKLOG 4096
/* The fds a generation needs besides its connections: listeners, each
 * loop's epoll and wake fds, logs, modules, a worker's files. */
#define FDS_RESERVED 64

typedef struct {
    CorConfig* config;
    CorListener* listeners;
    unsigned listenerCount;
    pid_t pid;
    unsigned number;
    CorHeartbeat* heartbeat; /* its loops' beats, mapped before the fork */
} Generation;

#define DRAINING_MAX 64

static const char* configFile;
static Generation current;
/* The master's signals, read while it waits for a generation to start, so
 * that a stop is not held up by a start; a stop seen then is kept here. */
static int signalFd = -1;
static int pendingStop;
static unsigned deferred;
/* Old generations still finishing their requests after a reload. */
static pid_t draining[DRAINING_MAX];
static unsigned generations;
/* The binary upgrade: the master that started this one (0: none), and
 * the one this master handed its sockets to (0: none yet). */
static pid_t upgradedFrom;
static pid_t upgradedTo;

/* ---- Listeners ----------------------------------------------------------- */

static int
openSocket(const CorConfigListen* l, bool reusePort, CorConfErrors* errors)
{
    int one = 1;
    int fd = socket(l->addr.ss_family,
                    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        corConfErrorf(errors, l->node, "listen %s: socket: %s", l->address,
                      strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reusePort) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    }
    if (l->addr.ss_family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if (bind(fd, (const struct sockaddr*)&l->addr, l->addrLen) != 0
        || listen(fd, LISTEN_BACKLOG) != 0) {
        corConfErrorf(errors, l->node, "listen %s: %s", l->address,
                      strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void
listenersClose(CorListener* listeners, unsigned count, const Generation* keep)
{
    for (unsigned i = 0; i < count; i++) {
        for (unsigned k = 0; k < listeners[i].fdCount; k++) {
            bool kept = false;

            for (unsigned j = 0; keep != NULL && j < keep->listenerCount; j++) {
                for (unsigned m = 0; m < keep->listeners[j].fdCount; m++) {
                    kept |= keep->listeners[j].fds[m] == listeners[i].fds[k];
                }
            }
            if (!kept) {
                close(listeners[i].fds[k]);
            }
        }
        free(listeners[i].fds);
    }
    free(listeners);
}

/* The running generation's sockets for the same address and mode. */
static const CorListener*
listenerKept(const CorConfigListen* l, unsigned fdCount)
{
    for (unsigned i = 0; i < current.listenerCount; i++) {
        const CorListener* old = &current.listeners[i];

        /* A socket systemd passed is one, whatever accept says. */
        if (strcmp(old->address, l->address) == 0
            && (old->passed
                || (old->reusePort == l->reusePort
                    && old->fdCount == fdCount))) {
            return old;
        }
    }
    return NULL;
}

/*
 * The sockets of one listener: the running generation's, those passed for
 * its address, or new ones. An upgrade passes every socket of a reuseport
 * listener; systemd passes one, and one socket is a shared listener (loop
 * 0 accepts and deals connections out), which a reload then keeps as it
 * is, whatever accept says. Returns 0 or -1 (errors set).
 */
static int
listenerFill(CorListener* out, const CorConfigListen* in, unsigned fdCount,
             CorConfErrors* errors)
{
    const CorListener* kept = listenerKept(in, fdCount);
    unsigned passed = 0;

    out->protocol = in->protocol;
    out->address = in->address;
    out->reusePort = in->reusePort;
    out->fds = calloc(fdCount, sizeof(int));
    if (out->fds != NULL && kept == NULL) {
        passed = corSystemdListenTakeAll(&in->addr, in->addrLen, out->fds,
                                         fdCount);
    }
    if ((passed > 0 && (passed < fdCount || fdCount == 1))
        || (kept != NULL && kept->passed)) {
        if (passed > 0 && in->reusePort) {
            corLog(COR_LOG_WARN,
                   "listen %s: fewer sockets passed than "
                   "loops: one socket, accept: share",
                   in->address);
        }
        for (unsigned k = 1; k < passed; k++) {
            close(out->fds[k]);
        }
        passed = passed > 0 ? 1 : 0;
        out->passed = true;
        out->reusePort = false;
        fdCount = 1;
    }
    out->fdCount = passed;
    for (unsigned k = passed; out->fds != NULL && k < fdCount; k++) {
        out->fds[k] = kept ? kept->fds[k]
                           : openSocket(in, in->reusePort, errors);
        if (out->fds[k] < 0) {
            break;
        }
        out->fdCount++;
    }
    return out->fdCount == fdCount ? 0 : -1;
}

static CorListener*
listenersOpen(const CorConfig* config, CorConfErrors* errors)
{
    CorListener* listeners = calloc(config->listenCount, sizeof(*listeners));

    if (listeners == NULL) {
        return NULL;
    }
    for (unsigned i = 0; i < config->listenCount; i++) {
        const CorConfigListen* in = &config->listen[i];

        if (listenerFill(&listeners[i], in,
                         in->reusePort ? config->runtime.loops : 1, errors)
            != 0) {
            listenersClose(listeners, i + 1, &current);
            return NULL;
        }
    }
    return listeners;
}

/* ---- The fd limit -------------------------------------------------------- */

/* Every connection is an fd, and the soft limit is often 1024 where the
 * hard one allows far more: take what the hard limit gives. */
static void
fdLimitRaise(void)
{
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) == 0
        && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
            corLog(COR_LOG_WARN, "cannot raise the fd limit to %llu: %s",
                   (unsigned long long)limit.rlim_max, strerror(errno));
        }
    }
}

/* Say so when limits.connections cannot be reached: past the fd limit,
 * accepts fail and pause instead of being refused and counted. */
static void
fdLimitCheck(const CorConfig* config)
{
    struct rlimit limit;
    unsigned long long room;

    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY
        || (rlim_t)config->limits.connections + FDS_RESERVED
               <= limit.rlim_cur) {
        return;
    }
    room = limit.rlim_cur > FDS_RESERVED ? limit.rlim_cur - FDS_RESERVED : 0;
    corLog(COR_LOG_WARN,
           "limits.connections is %u but the fd limit "
           "(RLIMIT_NOFILE) is %llu, enough for about %llu connection%s: "
           "raise the limit (ulimit -n, LimitNOFILE) or lower "
           "limits.connections",
           config->limits.connections, (unsigned long long)limit.rlim_cur, room,
           room == 1 ? "" : "s");
}

/* ---- Generations --------------------------------------------------------- */

/* A signal that came while a generation starts: a stop gives the start
 * up; the others wait for the main loop (a bit each). */
static void
stopSignalTake(void)
{
    struct signalfd_siginfo info;

    if (read(signalFd, &info, sizeof(info)) != sizeof(info)) {
        return;
    }
    if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT
        || info.ssi_signo == SIGQUIT) {
        pendingStop = (int)info.ssi_signo;
    } else if (info.ssi_signo < 32) {
        deferred |= 1u << info.ssi_signo;
    }
}

/* The next signal for the main loop: a pending stop, a deferred one, or
 * the next from signalfd. */
static int
nextSignal(void)
{
    struct signalfd_siginfo info;

    if (pendingStop != 0) {
        return pendingStop;
    }
    for (int sig = 1; sig < 32; sig++) {
        if (deferred & (1u << sig)) {
            deferred &= ~(1u << sig);
            return sig;
        }
    }
    /* Woken for the watchdog too: 0 is no signal. */
    struct pollfd pfd = { .fd = signalFd, .events = POLLIN };

    if (poll(&pfd, 1, corSystemdWatchdogWaitMs()) <= 0
        || read(signalFd, &info, sizeof(info)) != sizeof(info)) {
        return 0;
    }
    return (int)info.ssi_signo;
}

/* The serving generation's heartbeats for the watchdog: none while no
 * generation serves (a replacement under way). */
static void
watchdogTick(void)
{
    corSystemdWatchdogTick(current.pid > 0 ? current.heartbeat : NULL,
                           current.number);
}

/*
 * Read a starting generation's word into buf: 'R' (ready), or 'E' and its
 * errors. A stop signal meanwhile gives it up; the watchdog is still
 * looked after for the generation that serves (a reload can take a
 * while: its modules start). Returns the bytes read.
 */
static size_t
readyWait(int fd, char* buf, size_t cap, bool serving)
{
    uint64_t deadline = corEvClockMs() + READY_TIMEOUT_MS;
    struct pollfd pfd[2] = {
        { .fd = fd, .events = POLLIN },
        { .fd = signalFd, .events = POLLIN },
    };
    size_t len = 0;

    while (len < cap - 1 && pendingStop == 0) {
        int wait = corDeadlineLeftMs(deadline);
        int watchdog = corSystemdWatchdogWaitMs();
        int n;

        if (wait <= 0) {
            break;
        }
        n = poll(pfd, signalFd >= 0 ? 2 : 1,
                 serving && watchdog >= 0 && watchdog < wait ? watchdog : wait);
        if (serving) {
            watchdogTick();
        }
        if (n <= 0) {
            continue;
        }
        if (pfd[1].revents & POLLIN) {
            stopSignalTake();
            continue;
        }
        ssize_t got = read(fd, buf + len, cap - 1 - len);

        if (got <= 0) {
            break;
        }
        len += (size_t)got;
        if (buf[0] == 'R') {
            break;
        }
    }
    buf[len] = '\0';
    return len;
}

/* Fork a generation and wait for its word: ready, or its errors. */
static int
generationStart(Generation* g, CorConfErrors* errors)
{
    int pipeFds[2];
    char buf[8192];
    size_t len;
    pid_t master;
    int status = 0;

    /* The page of the generation it replaces (after a crash) is let go:
     * each generation beats on a fresh one. */
    corHeartbeatFree(g->heartbeat);
    g->heartbeat = corHeartbeatCreate(g->config->runtime.loops,
                                      corSystemdBeatMs());
    if (g->heartbeat == NULL && corSystemdWatchdogMs() > 0) {
        corLog(COR_LOG_ERROR,
               "no page for the loops' heartbeats (%s): the "
               "watchdog will not be petted",
               strerror(errno));
    }
    if (pipe2(pipeFds, O_CLOEXEC) != 0) {
        return -1;
    }
    g->number = ++generations;
    master = getpid();
    if (corZoneHandBegin() != 0) {
        corLog(COR_LOG_WARN,
               "no socket for the zones (%s): the generation "
               "starts fresh ones",
               strerror(errno));
    }
    g->pid = fork();
    if (g->pid < 0) {
        corConfErrorf(errors, NULL, "fork: %s", strerror(errno));
        g->pid = 0;
        close(pipeFds[0]);
        close(pipeFds[1]);
        corZoneHandEnd(false);
        return -1;
    }
    if (g->pid == 0) {
        close(pipeFds[0]);
        corZoneHandChild();
        corUpgradeForget();
        corHeartbeat = g->heartbeat;
        corGenerationRun(g->config, g->listeners, g->listenerCount, pipeFds[1],
                         g->number, master);
    }
    close(pipeFds[1]);
    len = readyWait(pipeFds[0], buf, sizeof(buf), g != &current);
    close(pipeFds[0]);
    /* The zones it opened are kept for the next one, or dropped. */
    corZoneHandEnd(len > 0 && buf[0] == 'R');
    if (len > 0 && buf[0] == 'R') {
        atomic_fetch_add(&corMasterCounters->generations, 1);
        return 0;
    }
    kill(g->pid, SIGKILL);
    waitpid(g->pid, &status, 0);
    /* The pid is reaped and may be reused: nothing may signal it now. */
    g->pid = 0;
    if (len > 1) {
        /* Its errors, one a line, as it wrote them. */
        for (char* line = strtok(buf + 1, "\n"); line != NULL;
             line = strtok(NULL, "\n")) {
            corConfErrorf(errors, NULL, "%s", line);
        }
    } else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL) {
        /* A crash before its word (a module's init, a request served as
         * its loops started) is a crash as a serving one's is. */
        atomic_fetch_add(&corMasterCounters->generationCrashes, 1);
        corConfErrorf(errors, NULL,
                      "the new generation died (signal %d) "
                      "before it was ready: see its crash report in the log",
                      WTERMSIG(status));
    } else {
        corConfErrorf(errors, NULL,
                      "the new generation did not start (it "
                      "crashed or hung; see the log)");
    }
    return -1;
}

/* ---- Signals ------------------------------------------------------------- */

static void
drainingAdd(pid_t pid)
{
    for (unsigned i = 0; i < DRAINING_MAX; i++) {
        if (draining[i] == 0) {
            draining[i] = pid;
            return;
        }
    }
}

static void
drainingForget(pid_t pid)
{
    for (unsigned i = 0; i < DRAINING_MAX; i++) {
        if (draining[i] == pid) {
            draining[i] = 0;
        }
    }
}

/* Tell generation pid to drain because another takes its place (a reload,
 * an upgrade), not because the instance stops: the SIGQUIT says so in its
 * value (corGenerationReplaced). */
static void
generationReplaced(pid_t pid)
{
    if (sigqueue(pid, SIGQUIT,
                 (union sigval){ .sival_int = COR_SIGNAL_REPLACED })
        != 0) {
        kill(pid, SIGQUIT);
    }
}

/* Every generation, the running one and those draining. (A pid of 0 is
 * none: kill(0) would signal the whole process group.) */
static void
signalGenerations(int sig)
{
    if (current.pid > 0) {
        kill(current.pid, sig);
    }
    for (unsigned i = 0; i < DRAINING_MAX; i++) {
        if (draining[i] != 0) {
            kill(draining[i], sig);
        }
    }
}

/* The errors as one log entry: a line each would read as several
 * events, and the text's last newline as a blank one. */
static void
reloadFailedLog(const CorConfErrors* errors)
{
    char joined[4096];
    size_t n = 0;

    for (const char* p = errors->text;
         p != NULL && *p != '\0' && n + 3 < sizeof(joined); p++) {
        if (*p != '\n') {
            joined[n++] = *p;
        } else if (p[1] != '\0') {
            joined[n++] = ';';
            joined[n++] = ' ';
        }
    }
    joined[n] = '\0';
    corLog(COR_LOG_ERROR,
           "reload failed, generation %u keeps serving "
           "(%u error%s): %s",
           current.number, errors->count, errors->count == 1 ? "" : "s",
           joined);
}

static void
reloadFailed(Generation* next, CorConfErrors* errors)
{
    reloadFailedLog(errors);
    atomic_fetch_add(&corMasterCounters->reloadsFailed, 1);
    corMasterStatusWrite(current.config, "failed", errors->text);
    corSystemdReloaded("failed", current.number, errors->text);
    if (next->listeners != NULL) {
        listenersClose(next->listeners, next->listenerCount, &current);
    }
    corHeartbeatFree(next->heartbeat);
    corConfigFree(next->config);
    corConfErrorsFree(errors);
}

/* Open next's listeners (next->config's) and start its generation.
 * Returns 0, or -1 with errors set. */
static int
generationOpen(Generation* next, CorConfErrors* errors)
{
    fdLimitCheck(next->config);
    next->listeners = listenersOpen(next->config, errors);
    next->listenerCount = next->config->listenCount;
    if (next->listeners == NULL) {
        return -1;
    }
    return generationStart(next, errors);
}

/*
 * next, started, takes over: the old generation drains; its sockets that
 * the new one does not use are closed here (its own copies close when it
 * drains). After a failed replacement there is no old generation: its pid
 * is 0, and kill(0) would signal the whole process group, this master
 * too. Returns the old configuration, the caller's now.
 */
static CorConfig*
generationSwitch(Generation* next)
{
    CorConfig* old = current.config;

    if (current.pid > 0) {
        generationReplaced(current.pid);
        drainingAdd(current.pid);
        /* Until its loops stop watching the listeners they share with
         * next, the old generation may still take a new connection: a
         * reload said done must mean the new configuration answers. A
         * loop that a handler holds cannot say so, and does not hold up
         * the reload past a second. */
        if (!corHeartbeatDrainedWait(current.heartbeat,
                                     REPLACED_ACCEPT_WAIT_MS)) {
            corLog(COR_LOG_WARN,
                   "generation %u still accepts %u ms after "
                   "it was replaced (a loop held?): a connection may yet "
                   "reach it",
                   current.number, REPLACED_ACCEPT_WAIT_MS);
        }
    }
    listenersClose(current.listeners, current.listenerCount, next);
    if (strcmp(current.config->log.pidFile, next->config->log.pidFile) != 0
        && corMasterPidFileWrite(next->config->log.pidFile) == 0) {
        unlink(current.config->log.pidFile);
    }
    corHeartbeatFree(current.heartbeat);
    current = *next;
    return old;
}

/* The configuration it replaced is kept, for a rollback while the new one
 * is young (corMasterRollback.c). */
static void
reload(void)
{
    CorConfErrors errors = { 0 };
    Generation next = { 0 };

    corSystemdReloading(configFile);
    corLog(COR_LOG_INFO, "reloading %s", configFile);
    next.config = corConfigLoad(configFile, &errors);
    if (next.config == NULL || generationOpen(&next, &errors) != 0) {
        reloadFailed(&next, &errors);
        return;
    }
    corMasterRollbackKeep(generationSwitch(&next));
    atomic_fetch_add(&corMasterCounters->reloadsOk, 1);
    corLog(COR_LOG_INFO, "reload done: generation %u serving", current.number);
    corMasterStatusWrite(current.config, "ok", NULL);
    corSystemdReloaded("ok", current.number, NULL);
    corConfErrorsFree(&errors);
}

static void replace(void);

/*
 * Go back to the configuration before the last reload, whose successor
 * keeps dying (why): a generation of it takes over, as in a reload. The
 * file still holds the new one, which a later reload reads again. If the
 * old one cannot start either, the new one is replaced as before.
 */
static void
rollback(CorConfig* config, const char* why)
{
    CorConfErrors errors = { 0 };
    Generation back = { .config = config };

    corLog(COR_LOG_ERROR,
           "rolling back to the configuration before the "
           "last reload: %s; %s still holds the new one",
           why, configFile);
    if (generationOpen(&back, &errors) != 0) {
        corLog(COR_LOG_ERROR,
               "the rollback failed, the new configuration "
               "is started again: %s",
               errors.text ? errors.text : "");
        if (back.listeners != NULL) {
            listenersClose(back.listeners, back.listenerCount, &current);
        }
        corHeartbeatFree(back.heartbeat);
        corConfigFree(config);
        corConfErrorsFree(&errors);
        replace();
        return;
    }
    corConfigFree(generationSwitch(&back));
    atomic_fetch_add(&corMasterCounters->reloadRollbacks, 1);
    corLog(COR_LOG_INFO,
           "rollback done: generation %u serving the "
           "configuration before the last reload",
           current.number);
    corSystemdNotify("STATUS=generation %u serving the configuration "
                     "before the last reload (rolled back)",
                     current.number);
    corConfErrorsFree(&errors);
}

/*
 * Start a generation in place of one that died, or go back to the
 * configuration before the last reload when the new one keeps dying. A
 * failure (a module file gone meanwhile) leaves none, so it is tried
 * again each second (SIGALRM) until one starts; the listeners stay open
 * meanwhile.
 */
static void
replace(void)
{
    CorConfErrors errors = { 0 };
    char why[256];
    CorConfig* back;

    sleep(1); /* a crash loop must not spin */
    if (generationStart(&current, &errors) != 0) {
        current.pid = 0;
        back = corMasterRollbackDue(why, sizeof(why));
        /* Say what comes next: a rollback is not a try again. */
        corLog(COR_LOG_ERROR, "no generation could start, %s:\n%s",
               back != NULL ? "rolling back" : "trying again in 1 s",
               errors.text ? errors.text : "");
        if (back != NULL) {
            rollback(back, why);
        } else {
            alarm(1);
        }
    }
    corConfErrorsFree(&errors);
}

/* Reap what exited; a generation that died unasked is replaced, or its
 * configuration rolled back. */
static void
reap(void)
{
    char why[256];
    CorConfig* back;
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        drainingForget(pid);
        if (pid != current.pid) {
            continue;
        }
        atomic_fetch_add(&corMasterCounters->generationCrashes, 1);
        back = corMasterRollbackDue(why, sizeof(why));
        corLog(COR_LOG_ERROR, "generation %u (pid %d) died (%s %d): %s",
               current.number, (int)pid,
               WIFSIGNALED(status) ? "signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
               back != NULL ? "rolling back" : "starting another");
        current.pid = 0;
        if (back != NULL) {
            rollback(back, why);
        } else {
            replace();
        }
    }
}

static bool
generationsLeft(void)
{
    bool left = current.pid > 0;

    for (unsigned i = 0; i < DRAINING_MAX; i++) {
        left |= draining[i] != 0;
    }
    return left;
}

/*
 * Wait for every generation to exit. One stuck past the stop's own
 * timeout (a worker handler that blocks for good, which no cancel reaches)
 * is killed: a stop always ends.
 */
static void
waitForChildren(uint64_t graceMs)
{
    uint64_t deadline = corEvClockMs() + graceMs;
    bool killed = false;

    for (;;) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);

        /* Generations only: a new master an upgrade started is a child
         * too, and outlives this one. */
        if ((pid < 0 && errno == ECHILD) || !generationsLeft()) {
            return;
        }
        if (pid > 0) {
            /* Reaped: its pid may be reused, so it is signalled no more. */
            drainingForget(pid);
            if (pid == current.pid) {
                current.pid = 0;
            }
            continue;
        }
        if (!killed && corEvClockMs() >= deadline) {
            corLog(COR_LOG_ERROR,
                   "a generation did not stop in %llu ms: "
                   "killing it",
                   (unsigned long long)graceMs);
            signalGenerations(SIGKILL);
            killed = true;
        }
        usleep(10 * 1000);
    }
}

/* The master's signals, read from signalFd rather than in handlers. */
static void
signalsTake(void)
{
    static const int taken[] = { SIGHUP,  SIGTERM, SIGINT,  SIGQUIT,
                                 SIGUSR1, SIGUSR2, SIGCHLD, SIGALRM };
    sigset_t signals;

    sigemptyset(&signals);
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
        sigaddset(&signals, taken[i]);
    }
    sigprocmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    signalFd = signalfd(-1, &signals, SFD_CLOEXEC);
}

/* The listeners (systemd's sockets where it passed some), the first
 * generation and the pid file. Returns 0, or -1 (errors on stderr). */
static int
masterStart(void)
{
    CorConfErrors errors = { 0 };

    corSystemdListenInit();
    current.listeners = listenersOpen(current.config, &errors);
    current.listenerCount = current.config->listenCount;
    corSystemdListenCloseRest();
    if (current.listeners == NULL || generationStart(&current, &errors) != 0
        || corMasterPidFileWrite(current.config->log.pidFile) != 0) {
        fprintf(stderr, "%s", errors.text ? errors.text : "");
        if (current.pid > 0) {
            kill(current.pid, SIGTERM);
        }
        corConfErrorsFree(&errors);
        return -1;
    }
    corLog(COR_LOG_INFO, "cor %s serving %s (master pid %d)", COR_VERSION,
           configFile, (int)getpid());
    corSystemdNotify("READY=1\nSTATUS=generation %u serving %s", current.number,
                     configFile);
    corUpgradeReport();
    return 0;
}

/* SIGTERM, SIGINT: stop; SIGQUIT: graceful. */
static void
masterStop(int sig)
{
    char* status;

    /* After an upgrade, the service, its pid file and its status file are
     * the new master's: this one leaves without a word. */
    if (upgradedTo == 0) {
        corSystemdNotify("STOPPING=1\nSTATUS=%s",
                         sig == SIGQUIT ? "graceful stop: draining"
                                        : "stopping");
    }
    corLog(COR_LOG_INFO, "%s: stopping generation %u",
           sig == SIGQUIT ? "graceful stop" : "stop", current.number);
    /* The listeners close first: once the generations close their copies
     * as they drain, a new client is refused rather than left in a
     * backlog that nobody accepts from. */
    listenersClose(current.listeners, current.listenerCount, NULL);
    current.listeners = NULL;
    current.listenerCount = 0;
    if (upgradedTo != 0 && current.pid > 0) {
        generationReplaced(current.pid); /* the new master's goes on */
    }
    signalGenerations(sig == SIGQUIT ? SIGQUIT : SIGTERM);
    waitForChildren(current.config->runtime.stopTimeoutMs + 5000);
    if (upgradedTo == 0) {
        unlink(current.config->log.pidFile);
        status = corMasterStatusPath(current.config);
        unlink(status);
        free(status);
    }
    corLog(COR_LOG_INFO, "stopped");
}

/* SIGUSR2: the binary at our path again, on our sockets
 * (corMasterUpgrade.c). True when the new master serves: this one then
 * drains and exits. False leaves this one serving, as it was. */
static bool
upgrade(void)
{
    char word[64];
    int fd = -1;
    pid_t pid;

    corLog(COR_LOG_INFO, "upgrade: starting %s", corSelfPath);
    pid = corUpgradeSpawn(current.listeners, current.listenerCount, configFile,
                          &fd);
    if (pid > 0 && readyWait(fd, word, sizeof(word), true) > 0
        && word[0] == 'R') {
        close(fd);
        upgradedTo = pid;
        corLog(COR_LOG_INFO,
               "upgrade: the new master (pid %d) serves: "
               "this one drains and exits",
               (int)pid);
        corMasterStatusWrite(current.config, "ok", NULL);
        corSystemdNotify("MAINPID=%d\nREADY=1\nSTATUS=upgraded: master "
                         "pid %d serving",
                         (int)pid, (int)pid);
        return true;
    }
    if (fd >= 0) {
        close(fd);
    }
    if (pid > 0) {
        corUpgradeAbandon(pid);
    }
    corLog(COR_LOG_ERROR,
           "upgrade failed: the new master did not start "
           "(see the log above); this one (pid %d) keeps serving",
           (int)getpid());
    corMasterStatusWrite(current.config, "failed",
                         "the new binary did not "
                         "start (see the log)\n");
    corSystemdNotify("READY=1\nSTATUS=upgrade failed: master pid %d "
                     "serving",
                     (int)getpid());
    return false;
}

/* The configuration, the logs, the fd limit, the shared counters; none
 * other master on the pid file. Returns 0 or -1 (said on stderr). */
static int
masterOpen(const char* file)
{
    CorConfErrors errors = { 0 };
    pid_t running;

    configFile = file;
    current.config = corConfigLoad(configFile, &errors);
    if (current.config == NULL) {
        fprintf(stderr, "%s", errors.text ? errors.text : "");
        corConfErrorsFree(&errors);
        return -1;
    }
    if (corLogOpen(current.config->log.error, current.config->log.level) != 0) {
        return -1;
    }
    fdLimitRaise();
    fdLimitCheck(current.config);
    upgradedFrom = corUpgradeInit();
    corZoneInherit(upgradedFrom > 0);
    corInstanceInit(upgradedFrom > 0);
    running = corMasterPidFileAlive(current.config->log.pidFile);
    if (running > 0 && running != upgradedFrom) {
        fprintf(stderr,
                "cor: a master is running already (pid %d, pid file "
                "%s)\n",
                (int)running, current.config->log.pidFile);
        return -1;
    }
    if (upgradedFrom > 0) {
        corMasterStatusContinue(current.config);
    } else {
        corMasterStatusReset(current.config);
    }
    corMasterCounters = mmap(NULL, sizeof(*corMasterCounters),
                             PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                             -1, 0);
    return corMasterCounters == MAP_FAILED ? -1 : 0;
}

int
corMasterRun(const CorOptions* options)
{
    if (masterOpen(options->configFile) != 0) {
        return 1;
    }
    corSystemdInit();
    signalsTake();
    if (masterStart() != 0) {
        return 1;
    }
    for (;;) {
        int sig;

        watchdogTick();
        sig = nextSignal();
        switch (sig) {
        case 0:
            break;
        case SIGHUP:
            reload();
            break;
        case SIGUSR1:
            corLogReopen();
            signalGenerations(SIGUSR1);
            break;
        case SIGUSR2:
            if (upgrade()) {
                masterStop(SIGQUIT);
                return 0;
            }
            break;
        case SIGCHLD:
            reap();
            break;
        case SIGALRM:
            if (current.pid == 0) {
                replace();
            }
            break;
        default:
            masterStop(sig);
            return 0;
        }
    }
}
