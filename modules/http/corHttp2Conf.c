/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/2's settings and counters: the http module's `http2:` mapping
 * (docs/configuration.md), read once per generation, and the lines it
 * adds to /metrics: connections and streams served over HTTP/2, and the
 * connections ended for abuse, by kind (corHttp2Conn.c says which).
 */
#include "corHttp2Int.h"

#include <stdatomic.h>

Http2Conf corHttp2Conf;

static atomic_ulong connections;
static atomic_ulong streams;
static atomic_ulong abuses[H2_ABUSE_COUNT];

/* Each kind of abuse: its /metrics label, and what the log says. */
static const struct {
    const char* label;
    const char* text;
} abuseKinds[H2_ABUSE_COUNT] = {
    [H2_ABUSE_RAPID_RESET] = { "rapid_reset",
                               "rapid reset (RST_STREAM flood)" },
    [H2_ABUSE_CONTINUATION] = { "continuation_flood", "CONTINUATION flood" },
    [H2_ABUSE_HEADER_LIST] = { "header_list", "header list past the limit "
                                              "(HPACK bomb)" },
    [H2_ABUSE_SETTINGS] = { "settings_flood", "SETTINGS flood" },
    [H2_ABUSE_PING] = { "ping_flood", "PING flood" },
    [H2_ABUSE_ZERO_WINDOW] = { "zero_window",
                               "a window kept shut past send_timeout" },
    [H2_ABUSE_PROTOCOL] = { "protocol_error", "a protocol error" },
    [H2_ABUSE_NO_PROGRESS] = { "no_progress",
                               "frames that make no progress "
                               "past http2.idle_frame_limit (empty DATA "
                               "flood and kin)" },
};

void
corHttp2Count(Http2Abuse why)
{
    atomic_fetch_add_explicit(&abuses[why], 1, memory_order_relaxed);
}

const char*
corHttp2AbuseText(Http2Abuse why)
{
    return abuseKinds[why].text;
}

void
corHttp2CountConnection(void)
{
    atomic_fetch_add_explicit(&connections, 1, memory_order_relaxed);
}

void
corHttp2CountStream(void)
{
    atomic_fetch_add_explicit(&streams, 1, memory_order_relaxed);
}

static void
metricsEmit(CorMetricsOut* out, void* arg)
{
    (void)arg;
    corMetricsPrintf(out,
                     "# HELP cor_http2_connections_total Connections "
                     "that spoke HTTP/2 (h2 by ALPN, h2c by its preface).\n"
                     "# TYPE cor_http2_connections_total counter\n"
                     "cor_http2_connections_total %lu\n",
                     atomic_load(&connections));
    corMetricsPrintf(out,
                     "# HELP cor_http2_streams_total Streams opened by "
                     "HTTP/2 peers.\n# TYPE cor_http2_streams_total counter\n"
                     "cor_http2_streams_total %lu\n",
                     atomic_load(&streams));
    corMetricsPrintf(out, "# HELP cor_http2_abuse_total HTTP/2 connections "
                          "ended for abuse, by kind.\n"
                          "# TYPE cor_http2_abuse_total counter\n");
    for (unsigned i = 0; i < H2_ABUSE_COUNT; i++) {
        corMetricsPrintf(out, "cor_http2_abuse_total{kind=\"%s\"} %lu\n",
                         abuseKinds[i].label, atomic_load(&abuses[i]));
    }
}

int
corHttp2ConfRead(CorModule* m, const CorConf* conf)
{
    static const char* const keys[] = {
        "max_concurrent_streams", "initial_window_size",
        "connection_window_size", "max_header_list_size",
        "rapid_reset_limit",      "control_frame_limit",
        "idle_frame_limit",       NULL,
    };
    CorConfErrors* e = corModuleErrors(m);
    const CorConf* h2 = conf != NULL ? corConfMap(conf, "http2", e) : NULL;

    corHttp2Conf.maxConcurrentStreams = (unsigned)
        corConfInt(h2, "max_concurrent_streams", 128, 1, 10000, e);
    corHttp2Conf.initialWindowSize = (uint32_t)
        corConfSize(h2, "initial_window_size", 65535, 1024,
                    NGHTTP2_MAX_WINDOW_SIZE, e);
    corHttp2Conf.connectionWindowSize = (uint32_t)
        corConfSize(h2, "connection_window_size", 1 << 20, 65535,
                    NGHTTP2_MAX_WINDOW_SIZE, e);
    corHttp2Conf.maxHeaderListSize = corConfSize(h2, "max_header_list_size", 0,
                                                 0, 16 << 20, e);
    corHttp2Conf.resetsPerSecond = (unsigned)corConfInt(h2, "rapid_reset_limit",
                                                        200, 1, 1000000, e);
    corHttp2Conf.controlPerSecond = (unsigned)corConfInt(h2,
                                                         "control_frame_limit",
                                                         100, 1, 1000000, e);
    corHttp2Conf.idlePerSecond = (unsigned)corConfInt(h2, "idle_frame_limit",
                                                      1000, 1, 1000000, e);
    if (h2 != NULL) {
        corConfUnknownKeys(h2, "http2", keys, e);
    }
    return corMetricsSourceAdd(m, metricsEmit, NULL);
}
