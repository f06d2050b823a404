/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Counters: each loop counts its own requests (no atomics on the hot
 * path), the master counts generations and reloads in a shared page every
 * generation sees, and /metrics sums them into Prometheus text, then
 * adds the lines of the modules' sources (corMetricsSourceAdd: the MQTT
 * bridge's counters per broker). The built-in handler `metrics`
 * (registered with the modules' handlers) serves it; route it like any
 * other.
 */
#include "corCoreInt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CorMasterCounters* corMasterCounters;

static CorLoopCounters* loopCounters;
static unsigned loopCount;
static atomic_ulong connectionsRefused;
static atomic_ulong acceptFdLimit;
/* Connections out off the loops (workers, other threads). */
static atomic_ulong clientOffLoop[4];
static __thread int loopIndex = -1;

/* The modules' sources of lines. Registered from init, before any
 * thread serves /metrics, and read-only after: no lock. */
typedef struct {
    CorMetricsSourceFn emit;
    void* arg;
} Source;

static Source* sources;
static unsigned sourceCount;

int
corMetricsInit(unsigned loops)
{
    loopCounters = corCallocLines(loops, sizeof(*loopCounters));
    loopCount = loops;
    return loopCounters != NULL ? 0 : -1;
}

void
corMetricsFree(void)
{
    free(loopCounters);
    loopCounters = NULL;
    loopCount = 0;
}

CorLoopCounters*
corMetricsLoop(unsigned index)
{
    return &loopCounters[index < loopCount ? index : 0];
}

int
corLoopIndexCurrent(void)
{
    return loopIndex;
}

void
corLoopIndexSet(int index)
{
    loopIndex = index;
}

void
corMetricsConnectionRefused(void)
{
    atomic_fetch_add(&connectionsRefused, 1);
}

void
corMetricsAcceptFdLimit(void)
{
    atomic_fetch_add(&acceptFdLimit, 1);
}

void
corMetricsClient(CorClientCount which)
{
    int index = corLoopIndexCurrent();

    if (index >= 0 && (unsigned)index < loopCount) {
        loopCounters[index].client[which]++;
    } else {
        atomic_fetch_add_explicit(&clientOffLoop[which], 1,
                                  memory_order_relaxed);
    }
}

int
corMetricsSourceAdd(CorModule* m, CorMetricsSourceFn emit, void* arg)
{
    Source* grown = realloc(sources, (sourceCount + 1) * sizeof(*sources));

    if (grown == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    sources = grown;
    sources[sourceCount++] = (Source){ emit, arg };
    return 0;
}

/* A growing text buffer: the text of /metrics being written. */
struct CorMetricsOut {
    char* text;
    size_t len;
    size_t cap;
};

static void
emitv(CorMetricsOut* t, const char* fmt, va_list args)
{
    va_list ap;
    int n;

    if (t->text == NULL) {
        return;
    }
    for (;;) {
        va_copy(ap, args);
        n = vsnprintf(t->text + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)(n > 0 ? n : 0);
        char* grown = n >= 0 ? realloc(t->text, cap) : NULL;

        if (grown == NULL) {
            /* The text is lost as a whole: a scrape with a hole in it
             * would read as counters gone back. */
            free(t->text);
            *t = (CorMetricsOut){ NULL, 0, 0 };
            return;
        }
        t->text = grown;
        t->cap = cap;
    }
}

static void __attribute__((format(printf, 2, 3)))
emit(CorMetricsOut* t, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emitv(t, fmt, ap);
    va_end(ap);
}

/* The modules' lines go through the same writer as the core's. */
void
corMetricsPrintf(CorMetricsOut* out, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emitv(out, fmt, ap);
    va_end(ap);
}


static void
emitCounter(CorMetricsOut* t, const char* name, const char* help,
            const char* labels, uint64_t value)
{
    emit(t, "# HELP cor_%s %s\n# TYPE cor_%s counter\ncor_%s%s %llu\n", name,
         help, name, name, labels, (unsigned long long)value);
}

/* Notifications, per scheme (corNotify.c). */
static void
emitNotify(CorMetricsOut* t)
{
    static const struct {
        const char* name;
        const char* type;
        const char* help;
    } families[3] = {
        { "notify_sent_total", "counter",
          "Notifications the receiver acknowledged, by scheme." },
        { "notify_failed_total", "counter",
          "Notifications refused, timed out or cut short by a stop, by "
          "scheme." },
        { "notify_in_flight", "gauge",
          "Notifications being sent now, by scheme." },
    };

    for (int k = 0; k < 3; k++) {
        emit(t, "# HELP cor_%s %s\n# TYPE cor_%s %s\n", families[k].name,
             families[k].help, families[k].name, families[k].type);
        for (unsigned i = 0; i < corNotifySchemeCount(); i++) {
            CorNotifyStats st;
            const char* scheme = corNotifySchemeStats(i, &st);
            uint64_t v = k == 0 ? st.sent : k == 1 ? st.failed : st.inFlight;

            emit(t, "cor_%s{scheme=\"%s\"} %llu\n", families[k].name,
                 scheme, (unsigned long long)v);
        }
    }
}

char*
corMetricsText(size_t* lenP)
{
    CorMetricsOut t = { malloc(4096), 0, 4096 };
    CorLoopCounters sum = { 0 };
    CorCoLoopStats co = { 0 };
    uint64_t peak = 0;
    uint64_t live = 0;

    if (t.text == NULL) {
        return NULL;
    }
    /* Read without locks: each figure is a word another loop writes, a
     * moment's difference is what a scrape can see anyway. */
    for (unsigned i = 0; i < loopCount; i++) {
        const CorLoopCounters* c = &loopCounters[i];
        CorCoLoopStats s;

        sum.ranInline += c->ranInline;
        sum.ranCoroutine += c->ranCoroutine;
        sum.ranWorker += c->ranWorker;
        sum.capFallbacks += c->capFallbacks;
        sum.stalls += c->stalls;
        sum.timedOut += c->timedOut;
        sum.cancelled += c->cancelled;
        sum.finishFailed += c->finishFailed;
        for (int k = 0; k < 6; k++) {
            sum.responses[k] += c->responses[k];
        }
        for (int k = 0; k < 4; k++) {
            sum.client[k] += c->client[k];
        }
        corCoLoopStatsGet(corRuntime.loops[i], &s);
        co.cancelledWaits += s.cancelledWaits;
        live += s.live;
        peak += s.peak;
    }
    emit(&t, "# HELP cor_requests_total Requests served, by where they "
         "ran.\n# TYPE cor_requests_total counter\n");
    emit(&t, "cor_requests_total{ran=\"inline\"} %llu\n",
         (unsigned long long)sum.ranInline);
    emit(&t, "cor_requests_total{ran=\"coroutine\"} %llu\n",
         (unsigned long long)sum.ranCoroutine);
    emit(&t, "cor_requests_total{ran=\"worker\"} %llu\n",
         (unsigned long long)sum.ranWorker);
    emit(&t, "# HELP cor_loop_requests_total Requests served, by the loop "
         "that read them.\n# TYPE cor_loop_requests_total counter\n");
    for (unsigned i = 0; i < loopCount; i++) {
        const CorLoopCounters* c = &loopCounters[i];

        emit(&t, "cor_loop_requests_total{loop=\"%u\"} %llu\n", i,
             (unsigned long long)(c->ranInline + c->ranCoroutine
                                  + c->ranWorker));
    }
    emit(&t, "# HELP cor_responses_total Responses sent, by status class.\n"
         "# TYPE cor_responses_total counter\n");
    for (int k = 0; k < 5; k++) {
        emit(&t, "cor_responses_total{class=\"%dxx\"} %llu\n", k + 1,
             (unsigned long long)sum.responses[k]);
    }
    emit(&t, "# HELP cor_coroutines Coroutines running or waiting now.\n"
         "# TYPE cor_coroutines gauge\ncor_coroutines %llu\n",
         (unsigned long long)live);
    emit(&t, "# HELP cor_coroutines_peak The most coroutines at once "
         "(summed over loops).\n# TYPE cor_coroutines_peak gauge\n"
         "cor_coroutines_peak %llu\n", (unsigned long long)peak);
    emitCounter(&t, "coroutine_fallbacks_total", "Requests that could wait "
                "but ran on a worker: past the cap or no stack.", "",
                sum.capFallbacks);
    emitCounter(&t, "waits_cancelled_total", "Coroutine waits ended by a "
                "stop, a deadline or a client that left.", "",
                co.cancelledWaits);
    emitCounter(&t, "requests_timed_out_total", "Handlers past their "
                "deadline: answered 504, their waits cancelled.", "",
                sum.timedOut);
    emitCounter(&t, "requests_cancelled_total", "Handlers whose client "
                "left while they ran: their waits cancelled.", "",
                sum.cancelled);
    emitCounter(&t, "finish_failed_total", "Post-response phases a stop "
                "cut short or skipped.", "", sum.finishFailed);
    emitCounter(&t, "loop_stalls_total", "Handlers that held a loop longer "
                "than runtime.stall_warning.", "", sum.stalls);
    emitCounter(&t, "connections_refused_total", "Connections closed at "
                "once past limits.connections.", "",
                atomic_load(&connectionsRefused));
    corLimitsEmit(&t);
    emitCounter(&t, "accept_fd_limit_total", "Accepts that failed at the "
                "fd limit (EMFILE, ENFILE); accepting paused after each.", "",
                atomic_load(&acceptFdLimit));
    for (int k = 0; k < 4; k++) {
        sum.client[k] += atomic_load(&clientOffLoop[k]);
    }
    emit(&t, "# HELP cor_client_opens_total Connections out asked for, by "
         "outcome.\n# TYPE cor_client_opens_total counter\n"
         "cor_client_opens_total{result=\"reused\"} %llu\n"
         "cor_client_opens_total{result=\"new\"} %llu\n"
         "cor_client_opens_total{result=\"failed\"} %llu\n",
         (unsigned long long)sum.client[COR_CLIENT_REUSED],
         (unsigned long long)sum.client[COR_CLIENT_NEW],
         (unsigned long long)sum.client[COR_CLIENT_FAILED]);
    emitNotify(&t);
    emitCounter(&t, "client_stale_total", "Idle connections out closed "
                "because the peer closed them or sent bytes while idle.", "",
                sum.client[COR_CLIENT_STALE]);
    if (corMasterCounters != NULL) {
        emitCounter(&t, "generations_total", "Worker generations started.",
                    "", atomic_load(&corMasterCounters->generations));
        emitCounter(&t, "generation_crashes_total", "Generations that died "
                    "and were replaced.", "",
                    atomic_load(&corMasterCounters->generationCrashes));
        emit(&t, "# HELP cor_reloads_total Reloads, by outcome.\n"
             "# TYPE cor_reloads_total counter\n"
             "cor_reloads_total{result=\"ok\"} %llu\n"
             "cor_reloads_total{result=\"failed\"} %llu\n",
             (unsigned long long)atomic_load(&corMasterCounters->reloadsOk),
             (unsigned long long)atomic_load(
                 &corMasterCounters->reloadsFailed));
    }
    for (unsigned i = 0; i < sourceCount; i++) {
        sources[i].emit(&t, sources[i].arg);
    }
    *lenP = t.len;
    return t.text;      /* NULL when a realloc failed on the way */
}

void
corMetricsServe(CorRequest* r)
{
    size_t len = 0;
    char* text = corMetricsText(&len);

    if (text == NULL) {
        corRespond(r, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    corRespond(r, 200, "text/plain; version=0.0.4", text, len);
    free(text);
}
