/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a request runs, and its lifecycle:
 *
 *   handler cannot wait (COR_RUN_INLINE)            inline, on the loop
 *   can wait, the hook (or COR_RUN_COROUTINE) says  a coroutine of the loop
 *   yes
 *   the hook says no, COR_RUN_WORKER with no hook,  a worker thread
 *   past the cap, no stack, coroutines off
 *
 * Whatever the path, the handler's end comes back to the loop that read the
 * request (a coroutine is already there; a worker posts it back), which
 * hands the response to the protocol (ops->done). Once the protocol has sent
 * it (corRequestSent), the post-response phase runs the same way, then the
 * arena is freed and the protocol releases the request (corRequestHold.c,
 * once nothing else holds it).
 *
 * A handler that may wait can be cut short: by its deadline (a timer on
 * the loop, which answers 504 unless the handler answered first) or by its
 * client leaving (corRequestCancel). Either cancels the request's
 * CorRestCancel, to which the handler's waits are bound wherever it runs:
 * the coroutine's wait is settled on the loop, a worker's poll() is woken
 * through its thread's eventfd.
 */
#include "corAcme.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The request a worker or an inline handler serves (a coroutine keeps its
 * own in its data pointer, since the thread is shared). An inline handler
 * may run on a coroutine's stack (the next request of a connection, served
 * as the coroutine's request ends), so this one is asked first. */
static __thread CorRequest* threadRequest;

/*
 * What the last coroutine that finished a request on this thread served:
 * the loop reports a stall after the slice that ended it, when the request
 * may already be released, so the report reads this instead.
 */
static __thread struct {
    const char* handler;
    char what[112];
} lastServed;

static void runFinish(CorRequest* r);
static void sessionStart(CorRequest* r);
static void sessionEnd(CorRequest* r);

CorRequest*
corRequestCurrent(void)
{
    CorCo* co;

    if (threadRequest != NULL) {
        return threadRequest;
    }
    co = corCoCurrent();
    return co != NULL ? corCoData(co) : NULL;
}

/* ---- Where it runs ------------------------------------------------------- */

static unsigned
gaugeSum(size_t offset)
{
    unsigned sum = 0;

    for (unsigned i = 0; i < corRuntime.loopCount; i++) {
        sum += atomic_load(
            (atomic_uint*)(void*)((char*)corMetricsLoop(i) + offset));
    }
    return sum;
}

unsigned
corRequestsInFlight(void)
{
    return gaugeSum(offsetof(CorLoopCounters, inFlight));
}

unsigned
corRequestsFinishing(void)
{
    return gaugeSum(offsetof(CorLoopCounters, finishing));
}

unsigned
corRequestsOnWorkers(void)
{
    return gaugeSum(offsetof(CorLoopCounters, onWorkers));
}

static bool
wantsCoroutine(CorRun run, bool (*hook)(const CorRequest*), const CorRequest* r)
{
    if (run == COR_RUN_INLINE) {
        return false;
    }
    return hook != NULL ? hook(r) : run == COR_RUN_COROUTINE;
}

/* The handler is done (on the loop): a response there must be. */
static void
served(CorRequest* r)
{
    corEvTimerStop(r->loop, &r->deadline);
    r->serving = false;
    if (!corListEmpty(&r->cleanups)) {
        corRequestCleanupsEnd(r);
    }
    if (r->deadline.fn != NULL && atomic_load(&r->answer) == ANSWER_TIMEOUT) {
        corRespondSet(r, 504, "text/plain", "the handler timed out\n", 22);
    } else if (!r->responded) {
        /* A handler whose wait was cancelled by a stop runs its failure
         * path and may not answer: the client still gets one. */
        corRespondSet(r, corRuntime.stopping ? 503 : 500, "text/plain",
                      "the handler gave no response\n", 29);
    }
    if (r->status >= 300) {
        corRouteErrorPageApply(r);
    }
    if (corFilterCount != 0 && r->stream == NULL) {
        /* a file body they take becomes a stream */
        corFilterResponse(r, corStreamFile);
    }
    if (r->stream != NULL) {
        corStreamServed(r); /* its head is out, or goes now */
        return;
    }
    corRequestAnswer(r, r->ops->done);
}

/* The request's last phase is over: released now, or by the last of the
 * notifications it started (corRequestLetGo, here on r's loop). Still
 * counted in flight meanwhile, so that a drain waits for them. */
static void
requestEnd(CorRequest* r)
{
    if (!corListEmpty(&r->cleanups)) {
        corRequestCleanupsEnd(r);
    }
    corRequestLetGo(r);
}

/* Whether r is in its last phase, an upgraded connection's session. */
static bool
inSession(const CorRequest* r)
{
    return r->upgrade != NULL && r->upgrade->running;
}

/* Run the phase the request is in: its handler, the post-response phase,
 * or an upgraded connection's session. */
static void
runPhase(CorRequest* r)
{
    if (inSession(r)) {
        r->upgrade->fn(r->upgrade, r->upgrade->arg);
    } else if (r->inFinish) {
        r->handler->handler.finish(r);
    } else {
        r->handler->handler.serve(r);
    }
}

/* Back on the loop after a phase: answer, or end. */
static void
phaseDone(CorRequest* r)
{
    if (inSession(r)) {
        sessionEnd(r);
    } else if (r->inFinish) {
        requestEnd(r);
    } else {
        served(r);
    }
}

static void
servedOnLoop(CorEvTask* task)
{
    corMetricsGaugeAdd(&corMetricsLoopCurrent()->onWorkers, -1);
    phaseDone(corContainerOf(task, CorRequest, task));
}

static void
serveOnWorker(CorEvTask* task)
{
    CorRequest* r = corContainerOf(task, CorRequest, task);

    if (atomic_load(&corRuntime.stopping) && !r->inFinish && !inSession(r)) {
        /* Still queued when the stop came: its handler never starts, as
         * on a loop a stop leaves nothing new to run. Started, it would
         * find every wait cancelled, but not a wait of its own that no
         * cancel reaches (a condition variable it looks at now and then):
         * hundreds of those queued on a few workers held a stop past the
         * master's patience. Answered as the pool refuses one once shut
         * (dispatch); a post-response phase and a session still run, as
         * there. */
        corRespondSet(r, 503, "text/plain", "stopping\n", 9);
        corEvLoopPost(r->loop, &r->task, servedOnLoop);
        return;
    }
    threadRequest = r;
    corRestCancelBind(&r->cancel);
    runPhase(r);
    /* Unbound before the post: once on the loop, r may be released. */
    corRestCancelBind(NULL);
    threadRequest = NULL;
    corEvLoopPost(r->loop, &r->task, servedOnLoop);
}

static void
noteServed(const CorRequest* r)
{
    size_t method = r->methodLen < 16 ? r->methodLen : 16;
    size_t path = r->pathLen < sizeof(lastServed.what) - method - 2
                      ? r->pathLen
                      : sizeof(lastServed.what) - method - 2;

    lastServed.handler = corRequestHandlerName(r);
    memcpy(lastServed.what, r->method, method);
    lastServed.what[method] = ' ';
    memcpy(lastServed.what + method + 1, r->path, path);
    lastServed.what[method + 1 + path] = '\0';
}

static void
serveInCoroutine(void* arg)
{
    CorRequest* r = arg;
    CorCo* co = corCoCurrent();

    corCoSetData(co, r);
    corRestCancelBind(&r->cancel);
    runPhase(r);
    corRestCancelBind(NULL);
    /* The request may be released below, before the loop looks at this
     * slice: leave what a stall report needs. */
    noteServed(r);
    corCoSetData(co, NULL);
    /* On the loop's thread already: the response goes out from here, and
     * the protocol may serve the connection's next request on this stack
     * (serveInline keeps that one from waiting as this coroutine). */
    phaseDone(r);
}

static void
serveInline(CorRequest* r, CorHandlerFn fn)
{
    uint64_t stallMs = corRuntime.config->runtime.stallWarningMs;
    CorRequest* outer = threadRequest;
    struct timespec start;
    struct timespec end;
    bool yield;

    /* On a coroutine's stack, a wait here would suspend that coroutine
     * for a request it does not serve: it polls, as on the loop's. */
    yield = corRestYieldAllow(false);
    threadRequest = r;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &start);
    fn(r);
    clock_gettime(CLOCK_MONOTONIC_COARSE, &end);
    threadRequest = outer;
    corRestYieldAllow(yield);
    uint64_t heldMs = (uint64_t)(end.tv_sec - start.tv_sec) * 1000
                      + (uint64_t)(end.tv_nsec - start.tv_nsec) / 1000000;

    if (stallMs > 0 && heldMs > stallMs) {
        corMetricsLoopCurrent()->stalls++;
        corLog(COR_LOG_WARN,
               "loop %d held %llu ms by handler %s (%.*s "
               "%.*s), which runs inline: it must not block",
               corLoopIndexCurrent(), (unsigned long long)heldMs,
               corRequestHandlerName(r), (int)r->methodLen, r->method,
               (int)r->pathLen, r->path);
    }
}

static void
deadlinePassed(CorEvTimer* timer)
{
    CorRequest* r = corContainerOf(timer, CorRequest, deadline);
    unsigned open = ANSWER_OPEN;

    if (!atomic_compare_exchange_strong(&r->answer, &open, ANSWER_TIMEOUT)) {
        return; /* the handler answered in time: let it end */
    }
    corMetricsLoopCurrent()->timedOut++;
    corRestCancel(&r->cancel);
    corRequestCleanupsCancel(r);
}

/*
 * Hand r to a coroutine of its loop or to a worker; either carries it on
 * (r may be gone when this returns). A coroutine refused (past the cap, no
 * stack to be had) falls back to a worker. Counted before the hand-off,
 * since a coroutine may finish the request before the spawn returns; the
 * deadline is armed before it too, since the handler races it from its
 * first instruction.
 */
static void
dispatch(CorRequest* r, bool coroutine, uint64_t timeoutMs)
{
    CorLoopCounters* c = r->inFinish || inSession(r) ? NULL
                                                     : corMetricsLoopCurrent();
    int rc;

    r->serving = !r->inFinish;
    if (timeoutMs > 0) {
        corEvTimerStart(r->loop, &r->deadline, timeoutMs, deadlinePassed);
    }
    if (coroutine) {
        r->ran = COR_RAN_COROUTINE;
        if (c != NULL) {
            c->ranCoroutine++;
        }
        rc = corCoLoopSpawn(r->loop, serveInCoroutine, r);
        if (rc == 0) {
            return;
        }
        if (c != NULL) {
            c->ranCoroutine--;
            c->capFallbacks += rc != -ECANCELED;
        }
    }
    r->ran = COR_RAN_WORKER;
    if (c != NULL) {
        c->ranWorker++;
    }
    if (corEvPoolPost(corRuntime.workers, &r->task, serveOnWorker) == 0) {
        /* Counted on r's loop, given back there (servedOnLoop). */
        corMetricsGaugeAdd(&corMetricsLoopCurrent()->onWorkers, 1);
        return;
    }
    /* The pool is shutting down. The response is out already when this
     * is the post-response phase: it fails (requestEnd counts it), and
     * the request ends without a second answer. */
    if (r->inFinish) {
        requestEnd(r);
        return;
    }
    if (inSession(r)) {
        /* fn runs once, as promised, here on the loop: the pool refuses
         * only at a stop, after corRestCancelAll, so every wait of fn
         * ends with ECANCELED at once and the loop is not held; its
         * connection open, it can still say goodbye (a WebSocket's 1001)
         * and free what arg holds. */
        runPhase(r);
        sessionEnd(r);
        return;
    }
    corRespondSet(r, 503, "text/plain", "stopping\n", 9);
    served(r);
}

/* The core's fields of a request, whatever the protocol left in them. */
static void
requestInit(CorRequest* r, const CorProtocolOps* ops, void* protocolData)
{
    r->ops = ops;
    r->protocolData = protocolData;
    r->fileFd = -1;
    r->loop = corEvLoopCurrent();
    r->startMs = corEvNow(r->loop);
    r->serving = false;
    r->upgrade = NULL;
    r->responseTrailers = NULL;
    r->responseTrailerCount = r->responseTrailerCap = 0;
    r->bodyTaken = 0;
    r->filterRun = NULL;
    r->filtersOff = 0;
    r->notify = NULL;
    r->captures = NULL;
    r->errorPages = NULL;
    r->rewrites = 0;
    r->cacheFront = NULL;
    r->cacheData = NULL;
    r->cacheStatus = NULL;
    corListInit(&r->cleanups);
    memset(&r->cancel, 0, sizeof(r->cancel));
    memset(&r->deadline, 0, sizeof(r->deadline));
    atomic_init(&r->answer, ANSWER_OPEN);
    atomic_init(&r->holds, 1);
}

/* The short text of a refusal whose guard did not answer. */
static void
refusalAnswer(CorRequest* r, int status)
{
    switch (status) {
    case 401:
        corRespondSet(r, 401, "text/plain", "unauthorized\n", 13);
        break;
    case 403:
        corRespondSet(r, 403, "text/plain", "forbidden\n", 10);
        break;
    case 429:
        corRespondSet(r, 429, "text/plain", "too many requests\n", 18);
        break;
    default:
        corRespondSet(r, status >= 400 && status < 600 ? status : 500,
                      "text/plain", "refused\n", 8);
    }
}

/* r is refused with status (>= 400), answered so unless its guard did. */
static void
refused(CorRequest* r, int status)
{
    if (!r->responded) {
        refusalAnswer(r, status);
    }
    served(r);
}

static void requestRoute(CorRequest* r);

/* A rewrite's target routed again, at most this often: a rule that
 * rewrites to itself must not spin. */
#define REWRITES_MAX 10

/* r's route rewrote its target: routed again, unless the rewrites loop. */
static void
rewritten(CorRequest* r, const CorRouteMatch* match)
{
    if (++r->rewrites > REWRITES_MAX) {
        corLog(COR_LOG_ERROR,
               "route '%s' (routes[%u]) rewrote %.*s "
               "%u times: the rewrites loop; 500",
               corConfText(corConfGet(match->rules.route->node, "match")),
               match->rules.index, (int)r->pathLen, r->path, r->rewrites);
        corRespondSet(r, 500, "text/plain", "rewrite loop\n", 13);
        served(r);
        return;
    }
    if (corRouteRewrite(r, match->rules.route) != 0) {
        served(r);
        return;
    }
    requestRoute(r);
}

static void handlerRun(CorRequest* r, const CorRouteMatch* match);

static const CorCacheNext cacheNext = { .pass = handlerRun,
                                        .answered = served };

/* r passed its route's guards: on to what the route does. */
static void
routed(CorRequest* r, const CorRouteMatch* match)
{
    const CorConfigRoute* in = match->rules.route;

    if (corRouteCapturesKeep(r, match) != 0
        || corRouteRequestHeaders(r, in) != 0) {
        served(r);
        return;
    }
    if (in->redirect != NULL) {
        corRouteRedirect(r, in);
        served(r);
        return;
    }
    if (in->rewrite != NULL) {
        rewritten(r, match);
        return;
    }
    r->handler = match->handler;
    r->notify = match->rules.notify;
    if (match->rules.cache != NULL) {
        corCacheLookup(r, match, &cacheNext);
        return;
    }
    handlerRun(r, match);
}

/* r goes to its route's handler: inline, or handed to a coroutine or a
 * worker. */
static void
handlerRun(CorRequest* r, const CorRouteMatch* match)
{
    const CorHandler* handler = &match->handler->handler;
    CorLoopCounters* c = corMetricsLoopCurrent();
    bool coroutine;

    if (match->rules.stripLen > 0) {
        corRoutePathStrip(r, match->rules.stripLen);
    }
    if (handler->run == COR_RUN_INLINE) {
        r->ran = COR_RAN_INLINE;
        c->ranInline++;
        serveInline(r, handler->serve);
        served(r);
        return;
    }
    coroutine = wantsCoroutine(handler->run, handler->coroutineHook, r)
                && corRuntime.coroutines;
    dispatch(r, coroutine, match->timeoutMs);
}

/* The status a body that failed while it was gathered is refused
 * with: the protocol answered it already where it could (413, 400, 408),
 * so this one goes nowhere but the access log. */
static int
bodyFailedStatus(int rc)
{
    switch (rc) {
    case -EMSGSIZE:
        return 413;
    case -ETIMEDOUT:
        return 408;
    case -EPROTO:
    case -ECONNRESET:
        return 400;
    default:
        return 500; /* its file could not be written */
    }
}

/* r's body came whole (or failed) after its route accepted it. */
static void
bodyGathered(CorRequest* r, int rc, void* arg)
{
    if (rc < 0) {
        r->cut = rc == -ECONNRESET;
        refused(r, bodyFailedStatus(rc));
        return;
    }
    routed(r, arg);
}

/*
 * r passed its limits, its route and its guards. A body still to come
 * (r was served at its head) is wanted now, not before: a client that
 * waits to be told (Expect: 100-continue) is told only here, so that one
 * refused sends none of it, as nginx's. A handler that takes it whole
 * gets it once it came.
 */
static void
admitted(CorRequest* r, const CorRouteMatch* match)
{
    CorRouteMatch* kept;

    /* A redirect reads no body (none is asked for: a 100 would say it is
     * wanted); a rewrite's is the route's it ends on. */
    if (match->handler == NULL) {
        routed(r, match);
        return;
    }
    if (r->bodyIn != NULL && r->ops->bodyWanted != NULL) {
        r->ops->bodyWanted(r);
    }
    if (!corRequestBodyGathers(r, &match->handler->handler)) {
        routed(r, match);
        return;
    }
    kept = corRequestAlloc(r, sizeof(*kept));
    if (kept == NULL) {
        refused(r, 500);
        return;
    }
    *kept = *match;
    corRequestBodyGather(r, bodyGathered, kept);
}

static const CorGuardNext guardNext = { .routed = admitted,
                                        .refused = refused };

/* r's route found, its guards run: the 404 and 405 are the core's. */
static void
requestRoute(CorRequest* r)
{
    CorRouteMatch match;
    CorRouteResult found = corRouteFind(r, &match);

    r->errorPages = match.rules.errorPages;
    /* The route's headers go on whatever answers it: its handler, a
     * guard's refusal, a timeout, the core's 405. */
    if (match.rules.headerCount > 0
        && corResponseHeadersAdd(r, match.rules.headers,
                                 match.rules.headerCount)
               != 0) {
        corRespondSet(r, 500, "text/plain", "out of memory\n", 14);
        served(r);
        return;
    }
    switch (found) {
    case COR_ROUTE_NO_PATH:
        corRespondSet(r, 404, "text/plain", "not found\n", 10);
        served(r);
        return;
    case COR_ROUTE_FAILED:
        corRespondSet(r, 500, "text/plain", "route lookup failed\n", 20);
        served(r);
        return;
    case COR_ROUTE_NO_METHOD:
        corResponseHeader(r, "Allow", match.allow);
        corRespondSet(r, 405, "text/plain", "method not allowed\n", 19);
        served(r);
        return;
    case COR_ROUTE_FOUND:
        break;
    }
    r->filtersOff = match.rules.filtersOff;
    corGuardsRun(r, &match, &guardNext);
}

void
corRequestServe(CorRequest* r, const CorProtocolOps* ops, void* protocolData)
{
    CorLoopCounters* c = corMetricsLoopCurrent();
    int refused;

    requestInit(r, ops, protocolData);
    corRealIpApply(r);
    corMetricsGaugeAdd(&c->inFlight, 1);
    c->protocols[ops->kind < COR_PROTOCOL_KINDS ? ops->kind
                                                : COR_PROTOCOL_OTHER]++;
    if (r->bodyLen > 0) {
        corRequestLimits(r); /* a protocol that did not ask */
    }
    refused = corLimitsRequest(r);
    if (refused != 0) {
        corLimitsAnswer(r, refused);
        served(r);
        return;
    }
    if (corAcmeHttp01Answer(r)) {
        served(r);
        return;
    }
    requestRoute(r);
}

void
corRequestCancel(CorRequest* r)
{
    if (!r->serving || corRestCancelled(&r->cancel)) {
        return;
    }
    /* Its answer reaches nobody, whatever the protocol still writes: the
     * access log must not call it complete. */
    r->cut = true;
    if (corStreamKept(r)) {
        return; /* the handler's answer goes on, to others */
    }
    corMetricsLoopCurrent()->cancelled++;
    corRestCancel(&r->cancel);
    corRequestCleanupsCancel(r);
}

/* ---- After the response -------------------------------------------------- */

static void
runFinish(CorRequest* r)
{
    const CorHandler* handler = &r->handler->handler;

    r->inFinish = true;
    /* A fresh cancel: a client that left cancelled the handler, not the
     * notifications that follow its answer. */
    memset(&r->cancel, 0, sizeof(r->cancel));
    corMetricsGaugeAdd(&corMetricsLoopCurrent()->finishing, 1);
    if (handler->finishRun == COR_RUN_INLINE) {
        serveInline(r, handler->finish);
        requestEnd(r);
        return;
    }
    /* What the request points to is its protocol's until the release,
     * which follows this phase: nothing to copy. */
    dispatch(r,
             wantsCoroutine(handler->finishRun, handler->finishCoroutineHook, r)
                 && corRuntime.coroutines,
             0);
}

/* Every request of every protocol has its line, once sent. */
static void
accessLog(const CorRequest* r)
{
    if (corAccessLogEnabled()) {
        corAccessLogRequest(r);
    }
}

void
corRequestSent(CorRequest* r)
{
    accessLog(r);
    corMetricsLoopCurrent()
        ->responses[r->status >= 100 && r->status < 600 ? r->status / 100 - 1
                                                        : 5]++;
    if (r->upgrade != NULL) {
        /* Not handed over (the client left, the 101 did not go out): the
         * session still runs, on a connection that is gone. */
        sessionStart(r);
        return;
    }
    /* Before the finish phase: the notifications start beside it, and
     * hold r until they end. */
    if (r->notify != NULL) {
        corRouteNotifySend(r);
    }
    if (r->handler != NULL && r->handler->handler.finish != NULL) {
        if (!corRuntime.stopping) {
            runFinish(r);
            return;
        }
        /* A drain waited for it as long as stop_timeout allows. */
        corMetricsLoopCurrent()->finishFailed++;
    }
    requestEnd(r);
}

/* ---- An upgraded connection's session ----------------------------------- */

/*
 * The session runs where the handler would (its run and hook decide; an
 * inline handler's session is a coroutine, since a session waits), with a
 * fresh cancel: a stop ends its waits, as a request's.
 */
static void
sessionStart(CorRequest* r)
{
    const CorHandler* handler = &r->handler->handler;
    CorRun run = handler->run == COR_RUN_INLINE ? COR_RUN_COROUTINE
                                                : handler->run;

    r->upgrade->running = true;
    memset(&r->cancel, 0, sizeof(r->cancel));
    dispatch(r,
             wantsCoroutine(run, handler->coroutineHook, r)
                 && corRuntime.coroutines,
             0);
}

/* The session returned: its connection closes, the request ends (no
 * post-response phase follows an upgrade). */
static void
sessionEnd(CorRequest* r)
{
    corUpgradedFree(r->upgrade);
    r->upgrade = NULL;
    r->serving = false;
    requestEnd(r);
}

void
corRequestUpgraded(CorRequest* r, const CorTransport* t, const void* rest,
                   size_t restLen, const void* unsent, size_t unsentLen)
{
    corMetricsLoopCurrent()->responses[0]++;
    accessLog(r);
    corUpgradedAdopt(r->upgrade, t, rest, restLen, unsent, unsentLen);
    sessionStart(r);
}

/* ---- Stalls in coroutines ------------------------------------------------ */

static void
coroutineStalled(CorCo* co, uint64_t heldMs)
{
    CorRequest* r = corCoData(co);

    if (r != NULL) {
        noteServed(r);
    }
    corMetricsLoopCurrent()->stalls++;
    corLog(COR_LOG_WARN,
           "loop %d held %llu ms by handler %s (%s) between "
           "two waits: it blocks and should run on a worker (its coroutine "
           "hook said yes)",
           corLoopIndexCurrent(), (unsigned long long)heldMs,
           lastServed.handler, lastServed.what);
}

void
corRequestStallInit(CorEvLoop* loop)
{
    corCoLoopStallSet(loop, corRuntime.config->runtime.stallWarningMs,
                      coroutineStalled);
}
