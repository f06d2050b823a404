/* SPDX-License-Identifier: Apache-2.0 */
/*
 * co.yield_resume and co.create_run_finish, each beside the same loop on
 * Boost.Context's fcontext (bench/boostPeer.cc), in alternating rounds;
 * the medians and their ratio are printed.
 *
 * The two switches keep the FP control state differently. cor's saves the
 * x87 control word and reloads it and MXCSR only when the incoming word
 * differs, so MXCSR is never read and what only it holds (flush-to-zero,
 * denormals-are-zero) stays per thread; Boost's saves and reloads both
 * MXCSR and the x87 word at every jump, and stmxcsr alone costs about
 * 14 cycles on AMD Zen 4. So on x86-64, co.yield_resume.boost_fp is the
 * same cor loop with Boost's policy added around each switch: the side
 * that leaves saves MXCSR and the x87 word on its stack, the side that
 * arrives reloads them. It pays cor's own word check on top, so it leans
 * against cor by that much.
 */
#include "corBench.h"
#include "corCo.h"

#include <stdint.h>

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

#ifdef __x86_64__
#define COR_BENCH_BOOST_FP 1

/* The FP control state as jump_fcontext keeps it, per context. */
typedef struct {
    uint32_t mxcsr;
    uint16_t x87;
} FpControl;

static inline void
fpSave(FpControl* fp)
{
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1"
                     : "=m"(fp->mxcsr), "=m"(fp->x87)
                     :
                     : "memory");
}

static inline void
fpLoad(const FpControl* fp)
{
    __asm__ volatile("ldmxcsr %0\n\tfldcw %1"
                     :
                     : "m"(fp->mxcsr), "m"(fp->x87)
                     : "memory");
}

static void
pingPongBoostFp(void* arg)
{
    FpControl fp;

    (void)arg;
    for (;;) {
        fpSave(&fp);
        corCoYield();
        fpLoad(&fp);
    }
}

static double
corYieldResumeBoostFpNs(long iterations)
{
    CorCo* co = corCoCreate(pingPongBoostFp, NULL);
    FpControl fp;
    double start = corBenchNowNs();
    double ns;

    for (long i = 0; i < iterations; i++) {
        fpSave(&fp);
        corCoResume(co);
        fpLoad(&fp);
    }
    ns = (corBenchNowNs() - start) / (double)iterations;
    corCoDestroy(co);
    return ns;
}
#endif

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

/* ours and peer in alternating rounds; with a variant (VARIANT names it),
 * that too, in the same rounds. */
static void
compare(const char* name, double (*ours)(long), const char* variant,
        double (*oursVariant)(long), double (*peer)(long), long iterations)
{
    double mine[COR_BENCH_ROUNDS];
    double other[COR_BENCH_ROUNDS];
    double theirs[COR_BENCH_ROUNDS];
    char label[64];
    double a;
    double b;
    double v = 0;

    ours(iterations / 10); /* warm the pool and the caches */
    peer(iterations / 10);
    for (int i = 0; i < COR_BENCH_ROUNDS; i++) {
        mine[i] = ours(iterations);
        theirs[i] = peer(iterations);
        if (oursVariant != NULL) {
            other[i] = oursVariant(iterations);
        }
    }
    a = corBenchMedian(mine, COR_BENCH_ROUNDS);
    b = corBenchMedian(theirs, COR_BENCH_ROUNDS);
    snprintf(label, sizeof(label), "co.%s", name);
    corBenchPrint(label, a, "ns");
    snprintf(label, sizeof(label), "peer.boost.%s", name);
    corBenchPrint(label, b, "ns");
    snprintf(label, sizeof(label), "co.%s.ratio_to_boost", name);
    corBenchPrint(label, a / b, "x");
    if (oursVariant != NULL) {
        v = corBenchMedian(other, COR_BENCH_ROUNDS);
        snprintf(label, sizeof(label), "co.%s.%s", name, variant);
        corBenchPrint(label, v, "ns");
        snprintf(label, sizeof(label), "co.%s.%s.ratio_to_boost", name,
                 variant);
        corBenchPrint(label, v / b, "x");
    }
}

int
main(int argc, char** argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 2000000;

#ifdef COR_BENCH_BOOST_FP
    compare("yield_resume", corYieldResumeNs, "boost_fp",
            corYieldResumeBoostFpNs, boostYieldResumeNs, iterations);
#else
    compare("yield_resume", corYieldResumeNs, NULL, NULL, boostYieldResumeNs,
            iterations);
#endif
    compare("create_run_finish", corCreateRunFinishNs, NULL, NULL,
            boostCreateRunFinishNs, iterations);
    return 0;
}
