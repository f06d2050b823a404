/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /metrics: the counters (corMetricsCount.c, the master's page, the
 * limits' refusals, the notifications per scheme, the coroutines of each
 * loop) summed into Prometheus text, then the lines of the modules'
 * sources (corMetricsSourceAdd: the MQTT bridge's counters per broker),
 * all printed through one writer (corMetricsOut.c). The built-in handler
 * `metrics` (handed to the registry by the generation) serves it; route
 * it like any other.
 */
#include "corAcme.h"

#include <stdlib.h>
#include <string.h>

/* The modules' sources of lines. Registered from init, before any
 * thread serves /metrics, and read-only after: no lock. */
typedef struct {
    CorMetricsSourceFn emit;
    void* arg;
} Source;

static Source* sources;
static unsigned sourceCount;

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

static void
emitCounter(CorMetricsOut* t, const char* name, const char* help,
            uint64_t value)
{
    corMetricsPrintf(t,
                     "# HELP cor_%s %s\n# TYPE cor_%s counter\n"
                     "cor_%s %llu\n",
                     name, help, name, name, (unsigned long long)value);
}

/* A counter by one label: cor_NAME{label="values[i]"} counts[i]. */
static void
emitCounterBy(CorMetricsOut* t, const char* name, const char* help,
              const char* label, const char* const* values,
              const uint64_t* counts, unsigned n)
{
    corMetricsPrintf(t, "# HELP cor_%s %s\n# TYPE cor_%s counter\n", name, help,
                     name);
    for (unsigned i = 0; i < n; i++) {
        corMetricsPrintf(t, "cor_%s{%s=\"%s\"} %llu\n", name, label, values[i],
                         (unsigned long long)counts[i]);
    }
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
        corMetricsPrintf(t, "# HELP cor_%s %s\n# TYPE cor_%s %s\n",
                         families[k].name, families[k].help, families[k].name,
                         families[k].type);
        for (unsigned i = 0; i < corNotifySchemeCount(); i++) {
            CorNotifyStats st;
            const char* scheme = corNotifySchemeStats(i, &st);
            uint64_t v = k == 0 ? st.sent : k == 1 ? st.failed : st.inFlight;

            corMetricsPrintf(t, "cor_%s{scheme=\"%s\"} %llu\n",
                             families[k].name, scheme, (unsigned long long)v);
        }
    }
}

/* The label of each CorProtocolKind. */
/* Labels in the order of CorProxyRefusal and CorClientCount. */
static const char* const proxyReasons[COR_PROXY_REFUSALS] = {
    "invalid",
    "timeout",
    "closed",
};
static const char* const clientResults[] = { "reused", "new", "failed" };

static const char* const protocolLabels[COR_PROTOCOL_KINDS] = {
    [COR_PROTOCOL_OTHER] = "other", [COR_PROTOCOL_HTTP1] = "http1",
    [COR_PROTOCOL_HTTP2] = "http2", [COR_PROTOCOL_COR] = "cor",
    [COR_PROTOCOL_MQTT] = "mqtt",   [COR_PROTOCOL_HTTP3] = "http3",
};

/* Where requests ran, by loop, by protocol, and the responses by status
 * class. */
static void
emitRequests(CorMetricsOut* t, const CorLoopCounters* sum)
{
    corMetricsPrintf(t,
                     "# HELP cor_requests_total Requests served, by "
                     "where they ran.\n# TYPE cor_requests_total counter\n"
                     "cor_requests_total{ran=\"inline\"} %llu\n"
                     "cor_requests_total{ran=\"coroutine\"} %llu\n"
                     "cor_requests_total{ran=\"worker\"} %llu\n",
                     (unsigned long long)sum->ranInline,
                     (unsigned long long)sum->ranCoroutine,
                     (unsigned long long)sum->ranWorker);
    corMetricsPrintf(t, "# HELP cor_loop_requests_total Requests served, by "
                        "the loop that read them.\n# TYPE "
                        "cor_loop_requests_total counter\n");
    for (unsigned i = 0; i < corMetricsLoopCount(); i++) {
        const CorLoopCounters* c = corMetricsLoop(i);

        corMetricsPrintf(t, "cor_loop_requests_total{loop=\"%u\"} %llu\n", i,
                         (unsigned long long)(c->ranInline + c->ranCoroutine
                                              + c->ranWorker));
    }
    corMetricsPrintf(t, "# HELP cor_protocol_requests_total Requests read, "
                        "by the protocol that read them (refused ones too).\n"
                        "# TYPE cor_protocol_requests_total counter\n");
    for (int k = 0; k < COR_PROTOCOL_KINDS; k++) {
        corMetricsPrintf(t,
                         "cor_protocol_requests_total{protocol=\"%s\"} "
                         "%llu\n",
                         protocolLabels[k],
                         (unsigned long long)sum->protocols[k]);
    }
    corMetricsPrintf(t, "# HELP cor_responses_total Responses sent, by "
                        "status class.\n# TYPE cor_responses_total counter\n");
    for (int k = 0; k < 5; k++) {
        corMetricsPrintf(t, "cor_responses_total{class=\"%dxx\"} %llu\n", k + 1,
                         (unsigned long long)sum->responses[k]);
    }
}

/* The master's page: generations and reloads (none off a master). */
static void
emitMaster(CorMetricsOut* t)
{
    if (corMasterCounters == NULL) {
        return;
    }
    emitCounter(t, "generations_total", "Worker generations started.",
                atomic_load(&corMasterCounters->generations));
    emitCounter(t, "generation_crashes_total",
                "Generations that died "
                "unasked: crashed or exited serving, or crashed starting.",
                atomic_load(&corMasterCounters->generationCrashes));
    emitCounter(t, "reload_rollbacks_total",
                "Reloads taken back: the new "
                "configuration's generations kept dying soon after it.",
                atomic_load(&corMasterCounters->reloadRollbacks));
    corMetricsPrintf(t,
                     "# HELP cor_reloads_total Reloads, by outcome.\n"
                     "# TYPE cor_reloads_total counter\n"
                     "cor_reloads_total{result=\"ok\"} %llu\n"
                     "cor_reloads_total{result=\"failed\"} %llu\n",
                     (unsigned long long)atomic_load(
                         &corMasterCounters->reloadsOk),
                     (unsigned long long)atomic_load(
                         &corMasterCounters->reloadsFailed));
}

char*
corMetricsText(size_t* lenP)
{
    CorMetricsOut t;
    CorLoopCounters sum;
    CorOffLoopCounts off;
    CorCoLoopStats co = { 0 };
    uint64_t peak = 0;
    uint64_t live = 0;

    if (corMetricsOutInit(&t, 4096) != 0) {
        return NULL;
    }
    corMetricsSum(&sum, &off);
    for (unsigned i = 0; i < corMetricsLoopCount(); i++) {
        CorCoLoopStats s;

        corCoLoopStatsGet(corRuntime.loops[i], &s);
        co.cancelledWaits += s.cancelledWaits;
        live += s.live;
        peak += s.peak;
    }
    emitRequests(&t, &sum);
    corMetricsPrintf(&t,
                     "# HELP cor_coroutines Coroutines running or "
                     "waiting now.\n# TYPE cor_coroutines gauge\n"
                     "cor_coroutines %llu\n# HELP cor_coroutines_peak The "
                     "most coroutines at once (summed over loops).\n# TYPE "
                     "cor_coroutines_peak gauge\ncor_coroutines_peak %llu\n",
                     (unsigned long long)live, (unsigned long long)peak);

    const struct {
        const char* name;
        const char* help;
        uint64_t value;
    } counters[] = {
        { "coroutine_fallbacks_total",
          "Requests that could wait but ran "
          "on a worker: past the cap or no stack.",
          sum.capFallbacks },
        { "waits_cancelled_total",
          "Coroutine waits ended by a stop, a "
          "deadline or a client that left.",
          co.cancelledWaits },
        { "requests_timed_out_total",
          "Handlers past their deadline: "
          "answered 504, their waits cancelled.",
          sum.timedOut },
        { "requests_cancelled_total",
          "Handlers whose client left while "
          "they ran: their waits cancelled.",
          sum.cancelled },
        { "finish_failed_total",
          "Post-response phases a stop cut short or "
          "skipped.",
          sum.finishFailed },
        { "loop_stalls_total",
          "Handlers that held a loop longer than "
          "runtime.stall_warning.",
          sum.stalls },
        { "connections_refused_total",
          "Connections closed at once past "
          "limits.connections.",
          off.connectionsRefused },
    };

    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        emitCounter(&t, counters[i].name, counters[i].help, counters[i].value);
    }
    corLimitsEmit(&t);
    corTlsTicketsEmit(&t);
    corAcmeEmit(&t);
    emitCounter(&t, "accept_fd_limit_total",
                "Accepts that failed at the fd "
                "limit (EMFILE, ENFILE); accepting paused after each.",
                off.acceptFdLimit);
    emitCounterBy(&t, "proxy_protocol_refused_total",
                  "Connections to a "
                  "proxy_protocol listener closed without a valid PROXY "
                  "header.",
                  "reason", proxyReasons, off.proxyRefused, COR_PROXY_REFUSALS);
    emitCounterBy(&t, "client_opens_total",
                  "Connections out asked for, by "
                  "outcome.",
                  "result", clientResults, sum.client, 3);
    emitNotify(&t);
    emitCounter(&t, "client_stale_total",
                "Idle connections out closed "
                "because the peer closed them or sent bytes while idle.",
                sum.client[COR_CLIENT_STALE]);
    emitMaster(&t);
    for (unsigned i = 0; i < sourceCount; i++) {
        sources[i].emit(&t, sources[i].arg);
    }
    *lenP = t.len;
    return t.text; /* NULL when a realloc failed on the way */
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
