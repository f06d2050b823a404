/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Latencies in a log-linear histogram (HdrHistogram's idea, which Debian
 * does not package for C): exact below 128 ns, then 64 buckets per power
 * of two, so a percentile is within 1.6 % of the truth at any scale, in
 * 30 KiB, with an O(1) add.
 */
#include "corRequest.h"

#define SUB_BITS 6
#define LINEAR (1u << (SUB_BITS + 1))

static unsigned
bucketOf(uint64_t ns)
{
    unsigned exponent;

    if (ns < LINEAR) {
        return (unsigned)ns;
    }
    exponent = (unsigned)(63 - __builtin_clzll(ns)) - SUB_BITS;
    return LINEAR + (exponent - 1) * (1u << SUB_BITS)
           + (unsigned)((ns >> exponent) - (1u << SUB_BITS));
}

/* The middle of bucket i. */
static uint64_t
valueOf(unsigned i)
{
    unsigned exponent;
    uint64_t mantissa;

    if (i < LINEAR) {
        return i;
    }
    exponent = (i - LINEAR) / (1u << SUB_BITS) + 1;
    mantissa = (i - LINEAR) % (1u << SUB_BITS) + (1u << SUB_BITS);
    return (mantissa << exponent) + ((uint64_t)1 << exponent) / 2;
}

void
corReqHistAdd(CorReqHist* h, uint64_t ns)
{
    h->counts[bucketOf(ns)]++;
    h->total++;
    if (ns > h->max) {
        h->max = ns;
    }
}

uint64_t
corReqHistPercentile(const CorReqHist* h, double percent)
{
    uint64_t rank = (uint64_t)((double)h->total * percent / 100.0 + 0.5);
    uint64_t seen = 0;

    if (rank == 0) {
        rank = 1;
    }
    for (unsigned i = 0; i < COR_REQ_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t v = valueOf(i);

            return v < h->max ? v : h->max;
        }
    }
    return h->max;
}
