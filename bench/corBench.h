/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the benchmarks share: a clock, the median of repeated rounds, and
 * the one output format, `bench: NAME VALUE UNIT`, that bench/run collects.
 * Rounds of cor and its peer alternate, so that the noise of a shared
 * machine falls on both alike.
 */
#ifndef COR_BENCH_H
#define COR_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define COR_BENCH_ROUNDS 11

static inline double
corBenchNowNs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int
corBenchCompare(const void* a, const void* b)
{
    double x = *(const double*)a;
    double y = *(const double*)b;

    return (x > y) - (x < y);
}

static inline double
corBenchMedian(double* values, int count)
{
    qsort(values, (size_t)count, sizeof(*values), corBenchCompare);
    return values[count / 2];
}

static inline void
corBenchPrint(const char* name, double value, const char* unit)
{
    printf("bench: %s %.2f %s\n", name, value, unit);
    fflush(stdout);
}

#endif /* COR_BENCH_H */
