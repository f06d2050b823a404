/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The counters behind /metrics, as the serving code counts them: each
 * loop counts its own requests in a block of its own (no atomics on the
 * hot path), what runs off the loops counts in atomics, and the master
 * counts generations and reloads in a shared page every generation sees.
 * Apart from the text (corMetrics.c), which reads them with everything
 * else it reports, so that the requests that count call nothing that
 * answers them.
 */
#include "corCoreInt.h"

#include <stdlib.h>

CorMasterCounters* corMasterCounters;

static CorLoopCounters* loopCounters;
static unsigned loopCount;
static atomic_ulong connectionsRefused;
static atomic_ulong acceptFdLimit;
static atomic_ulong proxyRefused[COR_PROXY_REFUSALS];
/* Connections out off the loops (workers, other threads). */
static atomic_ulong clientOffLoop[4];
static __thread int loopIndex = -1;

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

CorLoopCounters*
corMetricsLoopCurrent(void)
{
    return corMetricsLoop(loopIndex >= 0 ? (unsigned)loopIndex : 0);
}

unsigned
corMetricsLoopCount(void)
{
    return loopCount;
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
corMetricsProxyRefused(CorProxyRefusal why)
{
    atomic_fetch_add(&proxyRefused[why], 1);
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

/* Read without locks: each figure is a word another loop writes, a
 * moment's difference is what a scrape can see anyway. */
void
corMetricsSum(CorLoopCounters* sum, CorOffLoopCounts* off)
{
    *sum = (CorLoopCounters){ 0 };
    for (unsigned i = 0; i < loopCount; i++) {
        const CorLoopCounters* c = &loopCounters[i];

        sum->ranInline += c->ranInline;
        sum->ranCoroutine += c->ranCoroutine;
        sum->ranWorker += c->ranWorker;
        sum->capFallbacks += c->capFallbacks;
        sum->stalls += c->stalls;
        sum->timedOut += c->timedOut;
        sum->cancelled += c->cancelled;
        sum->finishFailed += c->finishFailed;
        for (int k = 0; k < 6; k++) {
            sum->responses[k] += c->responses[k];
        }
        for (int k = 0; k < 4; k++) {
            sum->client[k] += c->client[k];
        }
        for (int k = 0; k < COR_PROTOCOL_KINDS; k++) {
            sum->protocols[k] += c->protocols[k];
        }
    }
    for (int k = 0; k < 4; k++) {
        sum->client[k] += atomic_load(&clientOffLoop[k]);
    }
    off->connectionsRefused = atomic_load(&connectionsRefused);
    off->acceptFdLimit = atomic_load(&acceptFdLimit);
    for (int k = 0; k < COR_PROXY_REFUSALS; k++) {
        off->proxyRefused[k] = atomic_load(&proxyRefused[k]);
    }
}
