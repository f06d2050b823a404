/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A worker generation: the process the master forks to serve one
 * configuration. It loads the modules, starts the loops (a thread each)
 * and the worker pool, starts the protocols on the listeners the master
 * opened, tells the master it is ready, and then waits for signals:
 *
 *   SIGQUIT  drain: stop accepting and close the listening sockets (the
 *            master and a new generation keep their own), finish what
 *            is in flight (each connection's next request is answered
 *            with a close), post-response phases included, up to
 *            runtime.stop_timeout; then the stop below. A reload sends
 *            it to the old generation.
 *   SIGTERM  stop: every wait off the loops is cancelled and the worker
 *            pool drained, then the loops stop, which cancels their
 *            coroutines' waits; each request runs its failure path to the
 *            end and is answered as failed (a post-response phase cut
 *            short is counted and logged); then the protocols close their
 *            connections. Nothing is waited out: a stop is prompt.
 *   SIGUSR1  reopen the logs.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* A drain that lasts says what it waits for: after a second, then every
 * five. */
#define DRAIN_LOG_FIRST_MS 1000
#define DRAIN_LOG_EVERY_MS 5000

typedef struct {
    pthread_t thread;
    unsigned index;
    int startRc;
    CorListener* listeners;
    unsigned listenerCount;
    sem_t* started;
    CorEvTimer beat; /* the heartbeat the master watches */
} LoopThread;

/* The core's own handlers, routed like a module's. They answer from
 * above the requests they serve (the counters' text, the generation's
 * state), so the generation, which starts both, hands them to the
 * registry rather than the registry reaching up for them. */
static const CorHandler builtins[] = {
    { .name = "metrics", .serve = corMetricsServe, .run = COR_RUN_INLINE },
    { .name = "health", .serve = corHealthServe, .run = COR_RUN_INLINE },
};

static LoopThread* loopThreads;
/* The listening sockets, the generation's copies of the master's. */
static CorListener* listenersOwn;
static unsigned listenerOwnCount;
/* Loops that have run their protocols' drain (and so stopped accepting). */
static atomic_uint loopsDrained;

/* The master said another generation takes this one's place. */
static atomic_bool replaced;

/* ---- Listeners ----------------------------------------------------------- */

int
corListenerFd(const CorListener* l, unsigned loopIndex)
{
    return l->fds[l->reusePort ? loopIndex % l->fdCount : 0];
}

const char*
corListenerAddress(const CorListener* l)
{
    return l->address;
}

bool
corListenerReusePort(const CorListener* l)
{
    return l->reusePort;
}

bool
corListenerHttp2(const CorListener* l)
{
    return l->http2;
}

bool
corListenerHttp3(const CorListener* l)
{
    return l->http3;
}

/* ---- Loops --------------------------------------------------------------- */

/* Start every protocol on this loop with its listeners. */
static int
protocolsStart(LoopThread* t, CorEvLoop* loop)
{
    for (unsigned p = 0; p < corProtocolCount(); p++) {
        const CorProtocolEntry* entry = corProtocolAt(p);
        CorListener* mine[t->listenerCount ? t->listenerCount : 1];
        unsigned count = 0;

        for (unsigned i = 0; i < t->listenerCount; i++) {
            if (corProtocolFind(t->listeners[i].protocol) == entry) {
                mine[count++] = &t->listeners[i];
            }
        }
        if (count > 0
            && entry->protocol.start(entry->module, loop, t->index, mine, count)
                   != 0) {
            return -1;
        }
    }
    return 0;
}

static void*
loopMain(void* arg)
{
    LoopThread* t = arg;
    CorEvLoop* loop = corRuntime.loops[t->index];

    corLoopIndexSet((int)t->index);
    corCoCrashArm();
    corEvLoopBind(loop);
    corRequestStallInit(loop);
    t->startRc = corModulesLoopInit(loop, t->index);
    if (t->startRc == 0) {
        t->startRc = protocolsStart(t, loop);
    }
    sem_post(t->started);
    if (t->startRc == 0) {
        corHeartbeatStart(loop, t->index, &t->beat);
        corEvLoopRun(loop);
        for (unsigned p = 0; p < corProtocolCount(); p++) {
            const CorProtocolEntry* entry = corProtocolAt(p);

            if (entry->protocol.stop != NULL) {
                entry->protocol.stop(entry->module, loop, t->index);
            }
        }
    }
    corModulesLoopExit(loop, t->index);
    corSchemesLoopExit();
    corConnPoolLoopExit();
    corCoThreadExit();
    return NULL;
}

static int
loopsStart(CorListener* listeners, unsigned listenerCount)
{
    sem_t started;
    int rc = 0;

    sem_init(&started, 0, 0);
    loopThreads = calloc(corRuntime.loopCount, sizeof(*loopThreads));
    if (loopThreads == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < corRuntime.loopCount; i++) {
        LoopThread* t = &loopThreads[i];

        *t = (LoopThread){ .index = i,
                           .listeners = listeners,
                           .listenerCount = listenerCount,
                           .started = &started };
        if (pthread_create(&t->thread, NULL, loopMain, t) != 0) {
            corLog(COR_LOG_ERROR, "cannot start loop %u: %s", i,
                   strerror(errno));
            return -1;
        }
    }
    for (unsigned i = 0; i < corRuntime.loopCount; i++) {
        sem_wait(&started);
    }
    for (unsigned i = 0; i < corRuntime.loopCount; i++) {
        rc |= loopThreads[i].startRc;
    }
    sem_destroy(&started);
    return rc;
}

/* ---- Stopping ------------------------------------------------------------ */

typedef struct {
    CorEvTask task;
    unsigned index;
} DrainTask;

static void
drainOnLoop(CorEvTask* task)
{
    DrainTask* d = corContainerOf(task, DrainTask, task);

    for (unsigned p = 0; p < corProtocolCount(); p++) {
        const CorProtocolEntry* entry = corProtocolAt(p);

        if (entry->protocol.drain != NULL) {
            entry->protocol.drain(entry->module, corRuntime.loops[d->index],
                                  d->index);
        }
    }
    atomic_fetch_add(&loopsDrained, 1);
    corHeartbeatDrained();
}

/*
 * Close this generation's copies of the listening sockets, once every loop
 * stopped watching them (a socket still in an epoll set would go on firing
 * there while another process holds it). In a reload the master and the
 * new generation keep theirs, which go on accepting; in a stop the master
 * closed its own first, so this was the last copy and a new client is
 * refused at once instead of waiting in a backlog nobody accepts from, as
 * nginx does. A protocol with no drain goes on watching: its sockets stay.
 */
static void
listenersCloseOwn(void)
{
    for (unsigned i = 0; i < listenerOwnCount; i++) {
        CorListener* l = &listenersOwn[i];
        const CorProtocolEntry* entry = corProtocolFind(l->protocol);

        if (entry == NULL || entry->protocol.drain == NULL) {
            continue;
        }
        for (unsigned k = 0; k < l->fdCount; k++) {
            close(l->fds[k]);
        }
        l->fdCount = 0;
    }
}

/* The connections protocol p has open on every loop. */
static unsigned
protocolConnections(const CorProtocolEntry* entry)
{
    unsigned open = 0;

    for (unsigned i = 0;
         entry->protocol.connections != NULL && i < corRuntime.loopCount; i++) {
        open += entry->protocol.connections(entry->module, i);
    }
    return open;
}

static unsigned
connectionsOpen(void)
{
    unsigned open = 0;

    for (unsigned p = 0; p < corProtocolCount(); p++) {
        open += protocolConnections(corProtocolAt(p));
    }
    return open;
}

/* What a drain still waits for, said while it waits: a drain that runs to
 * runtime.stop_timeout is otherwise silent about why. */
static void
drainWaitingLog(uint64_t deadline)
{
    char byProtocol[256] = "";
    size_t n = 0;

    for (unsigned p = 0; p < corProtocolCount(); p++) {
        const CorProtocolEntry* entry = corProtocolAt(p);
        unsigned open = protocolConnections(entry);

        if (open > 0 && n < sizeof(byProtocol)) {
            n += (size_t)snprintf(byProtocol + n, sizeof(byProtocol) - n,
                                  "%s%s %u", n > 0 ? ", " : "",
                                  entry->protocol.name, open);
        }
    }
    corLog(COR_LOG_INFO,
           "draining: waiting for %u connection%s%s%s%s, %u "
           "request%s in flight (%u on workers, %u in a post-response "
           "phase); stopped in %llu ms at the latest (runtime.stop_timeout)",
           connectionsOpen(), connectionsOpen() == 1 ? "" : "s",
           n > 0 ? " (" : "", byProtocol, n > 0 ? ")" : "",
           corRequestsInFlight(), corRequestsInFlight() == 1 ? "" : "s",
           corRequestsOnWorkers(), corRequestsFinishing(),
           (unsigned long long)(deadline - corEvClockMs()));
}

/* Stop accepting, close the listeners, and let what is in flight finish,
 * up to the timeout; a SIGTERM or SIGINT meanwhile cuts it short (the stop
 * follows). In flight is every request not yet released, not only the
 * connections: a post-response phase (the notifications of a write just
 * answered) runs after its connection may have closed. */
static void
drain(const sigset_t* signals)
{
    static DrainTask* tasks;
    uint64_t deadline = corEvClockMs()
                        + corRuntime.config->runtime.stopTimeoutMs;
    uint64_t nextLog = corEvClockMs() + DRAIN_LOG_FIRST_MS;
    struct timespec tick = { 0, 10 * 1000 * 1000 };
    bool closed = false;

    tasks = calloc(corRuntime.loopCount, sizeof(*tasks));
    if (tasks == NULL) {
        return;
    }
    for (unsigned i = 0; i < corRuntime.loopCount; i++) {
        tasks[i].index = i;
        corEvLoopPost(corRuntime.loops[i], &tasks[i].task, drainOnLoop);
    }
    while (corEvClockMs() < deadline) {
        int sig;

        if (!closed && atomic_load(&loopsDrained) == corRuntime.loopCount) {
            listenersCloseOwn();
            closed = true;
        }
        if (closed && connectionsOpen() == 0 && corRequestsInFlight() == 0) {
            return;
        }
        if (corEvClockMs() >= nextLog) {
            drainWaitingLog(deadline);
            nextLog += DRAIN_LOG_EVERY_MS;
        }
        sig = sigtimedwait(signals, NULL, &tick);

        if (sig == SIGTERM || sig == SIGINT) {
            return;
        }
        if (sig == SIGUSR1) {
            corLogReopen();
        }
    }
}

static void
stop(void)
{
    unsigned finishing = corRequestsFinishing();
    unsigned inFlight = corRequestsInFlight();

    if (inFlight > finishing) {
        corLog(COR_LOG_INFO,
               "stopping with %u request%s in flight (%u on "
               "workers): their waits are cancelled, and a handler still "
               "queued for a worker does not start",
               inFlight - finishing, inFlight - finishing == 1 ? "" : "s",
               corRequestsOnWorkers());
    }
    if (finishing > 0) {
        corLog(COR_LOG_WARN,
               "stopping with %u post-response phase%s still "
               "running: their waits are cancelled (runtime.stop_timeout "
               "allows longer)",
               finishing, finishing == 1 ? "" : "s");
    }
    atomic_store(&corRuntime.stopping, true);
    corNotifyStopping();
    corRestCancelAll();
    corTasksStop();
    corEvPoolShutdown(corRuntime.workers);
    corCoBlockingShutdown();
    for (unsigned i = 0; i < corRuntime.loopCount; i++) {
        corEvLoopStop(corRuntime.loops[i]);
    }
    for (unsigned i = 0; i < corRuntime.loopCount; i++) {
        pthread_join(loopThreads[i].thread, NULL);
    }
    corNotifyStopped();
    corConnPoolShutdown();
    corModulesExit();
}

/* ---- The generation ------------------------------------------------------ */

bool
corGenerationReplaced(void)
{
    return atomic_load(&replaced);
}

static void
reportAndExit(int readyFd, CorConfErrors* errors)
{
    const char* text = errors->text != NULL ? errors->text
                                            : "the generation failed\n";

    if (write(readyFd, "E", 1) < 0 || write(readyFd, text, strlen(text)) < 0) {
        corLog(COR_LOG_ERROR, "%s", text);
    }
    _exit(1);
}

static int
checkListeners(const CorConfig* config, CorConfErrors* errors)
{
    int rc = 0;

    for (unsigned i = 0; i < config->listenCount; i++) {
        const CorConfigListen* l = &config->listen[i];
        const CorProtocolEntry* entry = corProtocolFind(l->protocol);

        if (entry == NULL) {
            corConfErrorf(errors, l->node,
                          "listen: no module registered "
                          "the protocol '%s' (load the module that serves "
                          "it)",
                          l->protocol);
            rc = -1;
        } else if (l->tls == NULL && entry->protocol.tlsName != NULL
                   && strcmp(entry->protocol.tlsName, l->protocol) == 0) {
            corConfErrorf(errors, l->node,
                          "listen: protocol %s needs tls: "
                          "{ certificate: FILE, key: FILE }",
                          l->protocol);
            rc = -1;
        }
    }
    return rc;
}

/* The resolver of every loop and worker, from the resolver section; the
 * reader checked the values, so a failure here is one of memory. */
static int
resolverConfigure(const CorConfig* config, CorConfErrors* errors)
{
    int rc = corResolverConfigure(&(CorResolverConfig){
        .servers = config->resolver.servers,
        .timeoutMs = (int)config->resolver.timeoutMs,
        .minTtlS = config->resolver.minTtlS,
        .maxTtlS = config->resolver.maxTtlS,
        .negativeTtlS = config->resolver.negativeTtlS,
    });

    if (rc != 0) {
        corConfErrorf(errors, NULL, "resolver: cannot be set up: %s",
                      strerror(-rc));
        return -1;
    }
    return 0;
}

/* Load and check everything a generation needs; `cor -t` runs this too. */
int
corGenerationPrepare(const CorConfig* config, CorConfErrors* errors)
{
    int rc = 0;

    corRuntime.config = config;
    corRuntime.limits = (CorLimits){
        .connections = config->limits.connections,
        .headerBytes = config->limits.headerBytes,
        .headerCount = config->limits.headerCount,
        .bodyBytes = config->limits.bodyBytes,
        .requestTimeoutMs = config->limits.requestTimeoutMs,
        .bodyTimeoutMs = config->limits.bodyTimeoutMs,
        .keepaliveTimeoutMs = config->limits.keepaliveTimeoutMs,
        .sendTimeoutMs = config->limits.sendTimeoutMs,
        .bodyMemory = config->limits.bodyMemory,
        .bodySpoolDir = config->limits.bodySpoolDir,
    };
    corRuntime.loopCount = config->runtime.loops;
    corRuntime.coroutines = config->runtime.coroutines.enabled
                            && COR_HAVE_COROUTINES;
    corCoStackSizeSet(config->runtime.coroutines.stack);
    rc |= corConnSetup(config, errors);
    if (corMetricsInit(corRuntime.loopCount) != 0) {
        return -1;
    }
    rc |= resolverConfigure(config, errors);
    rc |= corModulesLoad(config, builtins,
                         sizeof(builtins) / sizeof(builtins[0]), errors);
    rc |= corRoutesBuild(config, errors);
    rc |= checkListeners(config, errors);
    rc |= corTlsServersLoad(config, errors);
    return rc;
}

/* A loop on the backend the configuration asks for. A kernel that refuses
 * io_uring (too old, io_uring_disabled, a container's seccomp filter) is
 * the machine's doing: the loop runs on epoll and the log says why, once. */
static CorEvLoop*
loopCreate(const CorConfig* config, unsigned index)
{
    CorEvLoop* loop;

    if (!config->runtime.uring) {
        return corEvLoopCreate();
    }
    loop = corEvLoopCreateWith(COR_EV_URING);
    if (loop == NULL && index == 0) {
        corLog(COR_LOG_WARN,
               "runtime.io: uring: the kernel refused "
               "io_uring (%s); the loops run on epoll",
               strerror(errno));
    }
    return loop != NULL ? loop : corEvLoopCreate();
}

/*
 * A generation whose master died (kill -9, a crash) drains as on a reload
 * and exits: its listeners close at once, so the port is free for a new
 * master, and what is in flight is answered within runtime.stop_timeout.
 * Left serving, it would hold the port with no one to reload or stop it.
 * The kernel sends the signal when the master exits; one that died
 * before it could be asked is seen by the parent having changed.
 */
static void
masterDeathWatch(pid_t master)
{
    if (prctl(PR_SET_PDEATHSIG, SIGQUIT) != 0) {
        corLog(COR_LOG_WARN,
               "the generation will not notice its master's "
               "death: prctl: %s",
               strerror(errno));
    }
    if (getppid() != master) {
        kill(getpid(), SIGQUIT);
    }
}

void
corGenerationRun(const CorConfig* config, CorListener* listeners,
                 unsigned listenerCount, int readyFd, unsigned generation,
                 pid_t master)
{
    CorConfErrors errors = { 0 };
    sigset_t signals;
    int sig;

    masterDeathWatch(master);
    corCrashReportInit();

    corLog(COR_LOG_INFO,
           "generation %u starting: %u loop%s%s, %u worker%s, "
           "coroutines %s",
           generation, config->runtime.loops,
           config->runtime.loops == 1 ? "" : "s",
           config->runtime.uring ? " on io_uring" : "", config->runtime.workers,
           config->runtime.workers == 1 ? "" : "s",
           config->runtime.coroutines.enabled && COR_HAVE_COROUTINES ? "on"
                                                                     : "off");
    if (corGenerationPrepare(config, &errors) != 0
        || corAccessLogOpen(config->log.access, config->log.accessFormat,
                            &errors)
               != 0) {
        reportAndExit(readyFd, &errors);
    }
    /* The master opened the listeners in the order of the file. */
    for (unsigned i = 0; i < listenerCount; i++) {
        listeners[i].tls = corTlsServerAt(i);
        listeners[i].http2 = config->listen[i].http2;
        listeners[i].http3 = config->listen[i].http3;
        listeners[i].proxyProtocol = config->listen[i].proxyProtocol;
    }
    corRuntime.workers = corEvPoolCreate(config->runtime.workers);
    corRuntime.loops = calloc(corRuntime.loopCount, sizeof(CorEvLoop*));
    for (unsigned i = 0; corRuntime.loops != NULL && i < corRuntime.loopCount;
         i++) {
        corRuntime.loops[i] = loopCreate(config, i);
        if (corRuntime.loops[i] == NULL) {
            corRuntime.workers = NULL;
            break;
        }
        corCoLoopCapSet(corRuntime.loops[i],
                        config->runtime.coroutines.perLoop);
    }
    corTasksOpen();
    if (corRuntime.workers == NULL || corRuntime.loops == NULL
        || loopsStart(listeners, listenerCount) != 0) {
        corConfErrorf(&errors, NULL,
                      "the generation could not start its "
                      "loops and workers (see the log)");
        reportAndExit(readyFd, &errors);
    }
    corTlsServersStart();
    listenersOwn = listeners;
    listenerOwnCount = listenerCount;
    if (write(readyFd, "R", 1) != 1) {
        corLog(COR_LOG_ERROR, "cannot report to the master: %s",
               strerror(errno));
    }
    close(readyFd);
    corHealthSet(COR_GENERATION_READY);
    corLog(COR_LOG_INFO, "generation %u ready", generation);

    sigemptyset(&signals);
    sigaddset(&signals, SIGQUIT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGUSR1);
    for (;;) {
        siginfo_t info;

        if ((sig = sigwaitinfo(&signals, &info)) < 0) {
            continue;
        }
        if (sig == SIGQUIT && info.si_code == SI_QUEUE && info.si_pid == master
            && info.si_value.sival_int == COR_SIGNAL_REPLACED) {
            atomic_store(&replaced, true);
        }
        if (sig == SIGUSR1) {
            corLogReopen();
            continue;
        }
        if (sig == SIGQUIT) {
            if (getppid() != master) {
                corLog(COR_LOG_WARN,
                       "generation %u: its master (pid %d) "
                       "died; draining (up to runtime.stop_timeout), then "
                       "exiting, so that a new master can take the port",
                       generation, (int)master);
            }
            corHealthSet(COR_GENERATION_DRAINING);
            drain(&signals);
        }
        break;
    }
    corHealthSet(COR_GENERATION_STOPPING);
    stop();
    corLog(COR_LOG_INFO, "generation %u stopped", generation);
    _exit(0);
}
