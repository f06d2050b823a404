/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/3's settings (the http module's `http3:` mapping) and what it
 * counts for /metrics: connections and streams, and the events of its
 * UDP side that no other protocol has (a datagram handed to the loop
 * that owns its connection, a Retry, a stateless reset, a connection
 * closed idle), so that an operator, and the tests, see them happen;
 * and the connections ended for abuse, by kind, as HTTP/2 counts them.
 */
#include "corHttp3Int.h"

#include <stdatomic.h>

Http3Conf corHttp3Conf;

static atomic_ulong counts[H3_COUNT_KINDS];
static atomic_ulong abuses[H3_ABUSE_COUNT];

/* Each kind of abuse: its /metrics label (HTTP/2's), and what the log
 * says. */
static const struct {
    const char* label;
    const char* text;
} abuseKinds[H3_ABUSE_COUNT] = {
    [H3_ABUSE_RAPID_RESET] = { "rapid_reset",
                               "rapid reset (streams cancelled past "
                               "http2.rapid_reset_limit)" },
    [H3_ABUSE_NO_PROGRESS] = { "no_progress",
                               "frames that make no progress past "
                               "http2.idle_frame_limit (empty DATA, "
                               "reserved types, PRIORITY_UPDATE)" },
};

static const char* const labels[H3_COUNT_KINDS] = {
    [H3_COUNT_CONNECTION] = "connection", [H3_COUNT_STREAM] = "stream",
    [H3_COUNT_HANDOFF] = "handoff",       [H3_COUNT_RETRY] = "retry",
    [H3_COUNT_RESET] = "stateless_reset", [H3_COUNT_IDLE] = "idle_close",
};

void
corHttp3Count(Http3CountKind kind)
{
    atomic_fetch_add_explicit(&counts[kind], 1, memory_order_relaxed);
}

void
corHttp3CountAbuse(Http3Abuse why)
{
    atomic_fetch_add_explicit(&abuses[why], 1, memory_order_relaxed);
}

const char*
corHttp3AbuseText(Http3Abuse why)
{
    return abuseKinds[why].text;
}

static void
metricsEmit(CorMetricsOut* out, void* arg)
{
    (void)arg;
    corMetricsPrintf(out, "# HELP cor_http3_total HTTP/3 connections, "
                          "streams and QUIC events, by kind.\n"
                          "# TYPE cor_http3_total counter\n");
    for (unsigned i = 0; i < H3_COUNT_KINDS; i++) {
        corMetricsPrintf(out, "cor_http3_total{kind=\"%s\"} %lu\n", labels[i],
                         atomic_load(&counts[i]));
    }
    corMetricsPrintf(out, "# HELP cor_http3_abuse_total HTTP/3 connections "
                          "ended for abuse, by kind.\n"
                          "# TYPE cor_http3_abuse_total counter\n");
    for (unsigned i = 0; i < H3_ABUSE_COUNT; i++) {
        corMetricsPrintf(out, "cor_http3_abuse_total{kind=\"%s\"} %lu\n",
                         abuseKinds[i].label, atomic_load(&abuses[i]));
    }
}

int
corHttp3ConfRead(CorModule* m, const CorConf* conf)
{
    static const char* const keys[] = { "retry_above", NULL };
    CorConfErrors* e = corModuleErrors(m);
    const CorConf* h3 = conf != NULL ? corConfMap(conf, "http3", e) : NULL;

    corHttp3Conf.retryAbove = (unsigned)corConfInt(h3, "retry_above", 128, 0,
                                                   1000000, e);
    if (h3 != NULL) {
        corConfUnknownKeys(h3, "http3", keys, e);
    }
    return corMetricsSourceAdd(m, metricsEmit, NULL);
}
