/* SPDX-License-Identifier: Apache-2.0 */
/*
 * co.yield_resume and co.create_run_finish, each beside the same loop on
 * Boost.Context's fcontext (bench/boostPeer.cc), in alternating rounds;
 * the medians and their ratio are printed.
 */
#include "corBench.h"
#include "corCo.h"

double boostYieldResumeNs(long iterations);
double boostCreateRunFinishNs(long iterations);

static void
pingPong(void* arg)
{
    (void)arg;
    for (;;) {
        corCoYield();
    }
}

static void
nothing(void* arg)
{
    (void)arg;
}

static double
corYieldResumeNs(long iterations)
{
    CorCo* co = corCoCreate(pingPong, NULL);
    double start = corBenchNowNs();
    double ns;

    for (long i = 0; i < iterations; i++) {
        corCoResume(co);
    }
    ns = (corBenchNowNs() - start) / (double)iterations;
    corCoDestroy(co);
    return ns;
}

static double
corCreateRunFinishNs(long iterations)
{
    double start = corBenchNowNs();

    for (long i = 0; i < iterations; i++) {
        CorCo* co = corCoCreate(nothing, NULL);

        corCoResume(co);
        corCoDestroy(co);
    }
    return (corBenchNowNs() - start) / (double)iterations;
}

static void
compare(const char* name, double (*ours)(long), double (*peer)(long),
        long iterations)
{
    double mine[COR_BENCH_ROUNDS];
    double theirs[COR_BENCH_ROUNDS];
    char label[64];
    double a;
    double b;

    ours(iterations / 10);          /* warm the pool and the caches */
    peer(iterations / 10);
    for (int i = 0; i < COR_BENCH_ROUNDS; i++) {
        mine[i] = ours(iterations);
        theirs[i] = peer(iterations);
    }
    a = corBenchMedian(mine, COR_BENCH_ROUNDS);
    b = corBenchMedian(theirs, COR_BENCH_ROUNDS);
    snprintf(label, sizeof(label), "co.%s", name);
    corBenchPrint(label, a, "ns");
    snprintf(label, sizeof(label), "peer.boost.%s", name);
    corBenchPrint(label, b, "ns");
    snprintf(label, sizeof(label), "co.%s.ratio_to_boost", name);
    corBenchPrint(label, a / b, "x");
}

int
main(int argc, char** argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 2000000;

    compare("yield_resume", corYieldResumeNs, boostYieldResumeNs, iterations);
    compare("create_run_finish", corCreateRunFinishNs, boostCreateRunFinishNs,
            iterations);
    return 0;
}
