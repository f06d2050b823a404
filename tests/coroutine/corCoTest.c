/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corCo: stepping, registers and FP state across switches, nesting,
 * corCoCurrent, deep stacks, and the pool under 100 000 coroutines.
 */
#include "corTest.h"
#include "corCo.h"

#include <errno.h>
#include <fenv.h>
#include <string.h>

/* ---- Stepping ------------------------------------------------------------ */

static void
countThree(void* arg)
{
    int* steps = arg;

    for (int i = 0; i < 3; i++) {
        (*steps)++;
        corCoYield();
    }
    (*steps)++;
}

START_TEST(test_steps_to_the_end)
{
    int steps = 0;
    CorCo* co = corCoCreate(countThree, &steps);

    ck_assert_ptr_nonnull(co);
    ck_assert_int_eq(steps, 0); /* nothing runs at create */
    for (int i = 1; i <= 3; i++) {
        ck_assert(!corCoResume(co));
        ck_assert_int_eq(steps, i);
    }
    ck_assert(corCoResume(co));
    ck_assert_int_eq(steps, 4);
    corCoDestroy(co);
}
END_TEST

/* ---- Callee-saved registers on both sides ------------------------------- */

/* Garbage in every callee-saved register the test pins values in. */
static inline void
clobberCalleeSaved(void)
{
#if defined(__x86_64__)
    __asm__ volatile("movq $-1, %%rbx\n\tmovq $-2, %%r12\n\t"
                     "movq $-3, %%r13\n\tmovq $-4, %%r14\n\t"
                     "movq $-5, %%r15" ::
                         : "rbx", "r12", "r13", "r14", "r15");
#elif defined(__aarch64__)
    __asm__ volatile("mov x19, #1\n\tmov x20, #2\n\tmov x21, #3\n\t"
                     "mov x22, #4\n\tmov x23, #5\n\tmov x24, #6\n\t"
                     "mov x25, #7\n\tmov x26, #8\n\tmov x27, #9\n\t"
                     "mov x28, #10\n\tfmov d8, xzr\n\tfmov d15, xzr" ::
                         : "x19", "x20", "x21", "x22", "x23", "x24", "x25",
                           "x26", "x27", "x28", "d8", "d15");
#endif
}

/*
 * The inline switch declares every register it does not save as
 * clobbered, so the compiler keeps nothing live in them across it. Twelve
 * values live across each switch, on each side, while the other side puts
 * garbage in every callee-saved register: a register missing from the
 * clobber list holds one of the values and loses it.
 */
#define LIVE_VALUES(seed)                                                      \
    long v0 = seed * 3, v1 = seed * 5, v2 = seed * 7, v3 = seed * 11,          \
         v4 = seed * 13, v5 = seed * 17, v6 = seed * 19, v7 = seed * 23,       \
         v8 = seed * 29, v9 = seed * 31, v10 = seed * 37, v11 = seed * 41
#define LIVE_INTACT(seed)                                                      \
    (v0 == seed * 3 && v1 == seed * 5 && v2 == seed * 7 && v3 == seed * 11     \
     && v4 == seed * 13 && v5 == seed * 17 && v6 == seed * 19                  \
     && v7 == seed * 23 && v8 == seed * 29 && v9 == seed * 31                  \
     && v10 == seed * 37 && v11 == seed * 41)
/* Use the values so that they must be live, in some register or slot. */
#define LIVE_TOUCH()                                                           \
    __asm__ volatile(""                                                        \
                     : "+g"(v0), "+g"(v1), "+g"(v2), "+g"(v3), "+g"(v4),       \
                       "+g"(v5), "+g"(v6), "+g"(v7), "+g"(v8), "+g"(v9),       \
                       "+g"(v10), "+g"(v11))

static volatile long liveSeed = 1000003;

static void
coroutineSide(void* arg)
{
    int* intact = arg;
    long seed = liveSeed + 1;
    LIVE_VALUES(seed);

    for (int i = 0; i < 1000; i++) {
        LIVE_TOUCH();
        clobberCalleeSaved();
        corCoYield();
        LIVE_TOUCH();
        *intact += LIVE_INTACT(seed);
    }
}

START_TEST(test_callee_saved_registers_survive_1000_switches)
{
    int coroutineIntact = 0;
    int resumerIntact = 0;
    CorCo* co = corCoCreate(coroutineSide, &coroutineIntact);
    long seed = liveSeed;
    bool done = false;
    LIVE_VALUES(seed);

    while (!done) {
        LIVE_TOUCH();
        clobberCalleeSaved();
        done = corCoResume(co);
        LIVE_TOUCH();
        resumerIntact += LIVE_INTACT(seed);
    }
    ck_assert_int_eq(resumerIntact, 1001);
    ck_assert_int_eq(coroutineIntact, 1000);
    corCoDestroy(co);
}
END_TEST

/* ---- Floating point on both sides ---------------------------------------- */

typedef struct {
    double sum;
    int roundingSeen;
    int sseDownSeen; /* SSE divisions that rounded down, as they must */
} FloatState;

/* 1/10 in SSE arithmetic: its last bit tells the rounding mode in force
 * (the bits cut off are more than half, so nearest rounds up). */
static double
oneTenth(void)
{
    volatile double one = 1.0;
    volatile double ten = 10.0;

    return one / ten;
}

static void
floatSide(void* arg)
{
    FloatState* st = arg;
    volatile double x = 1.0;

    /* This coroutine rounds down; the resumer must not be affected, and
     * this side must still round down after the resumer ran. */
    double down;

    fesetround(FE_DOWNWARD);
    down = oneTenth();
    for (int i = 0; i < 100; i++) {
        x = x * 1.0000001 + 0.5;
        st->sum += x;
        corCoYield();
        st->roundingSeen = fegetround();
        st->sseDownSeen += oneTenth() == down;
    }
}

START_TEST(test_floating_point_both_sides)
{
    FloatState st = { 0, 0 };
    CorCo* co = corCoCreate(floatSide, &st);
    volatile double mine = 0.0;
    double expectSum = 0.0;
    volatile double x = 1.0;

    double nearest;

    fesetround(FE_TONEAREST);
    nearest = oneTenth();
    for (int i = 0; i < 100; i++) {
        corCoResume(co);
        ck_assert_int_eq(fegetround(), FE_TONEAREST);
        ck_assert(oneTenth() == nearest);
        mine += 0.25 * i;
        if (i > 0) {
            ck_assert_int_eq(st.roundingSeen, FE_DOWNWARD);
        }
    }
    ck_assert(corCoResume(co));
    /* It finished rounding down: its last step back (corCoJump, not a
     * switch) must still give this side its own rounding, x87 and SSE. */
    ck_assert_int_eq(fegetround(), FE_TONEAREST);
    ck_assert(oneTenth() == nearest);
    ck_assert_int_eq(st.sseDownSeen, 100);
    ck_assert(mine == 0.25 * 4950);
    /* The coroutine's arithmetic, redone here rounding down. */
    fesetround(FE_DOWNWARD);
    for (int i = 0; i < 100; i++) {
        x = x * 1.0000001 + 0.5;
        expectSum += x;
    }
    fesetround(FE_TONEAREST);
    ck_assert(st.sum == expectSum);
    corCoDestroy(co);
}
END_TEST

/* ---- Nesting and corCoCurrent -------------------------------------------- */

typedef struct {
    char trace[32];
    int len;
    CorCo* inner;
    CorCo* seenInner;
    CorCo* seenOuter;
} NestState;

static void
nestInner(void* arg)
{
    NestState* st = arg;

    st->seenInner = corCoCurrent();
    st->trace[st->len++] = 'i';
    corCoYield(); /* back to the outer coroutine */
    st->trace[st->len++] = 'j';
}

static void
nestOuter(void* arg)
{
    NestState* st = arg;

    st->trace[st->len++] = 'o';
    st->inner = corCoCreate(nestInner, st);
    ck_assert(!corCoResume(st->inner));
    st->seenOuter = corCoCurrent(); /* the outer again, after the inner */
    st->trace[st->len++] = 'p';
    corCoYield(); /* back to the thread */
    ck_assert(corCoResume(st->inner));
    st->trace[st->len++] = 'q';
    corCoDestroy(st->inner);
}

START_TEST(test_nesting_and_current)
{
    NestState st;
    CorCo* outer;

    memset(&st, 0, sizeof(st));
    ck_assert_ptr_null(corCoCurrent());
    outer = corCoCreate(nestOuter, &st);
    ck_assert(!corCoResume(outer));
    ck_assert_ptr_null(corCoCurrent());
    st.trace[st.len++] = 'm';
    ck_assert(corCoResume(outer));
    ck_assert_ptr_null(corCoCurrent());
    ck_assert_str_eq(st.trace, "oipmjq");
    ck_assert_ptr_eq(st.seenInner, st.inner);
    ck_assert_ptr_eq(st.seenOuter, outer);
    corCoDestroy(outer);
}
END_TEST

/* ---- Stacks -------------------------------------------------------------- */

static void
useStack(void* arg)
{
    size_t bytes = *(size_t*)arg;
    volatile char big[bytes]; /* a VLA: exactly what is asked */

    for (size_t i = 0; i < bytes; i += 512) {
        big[i] = (char)i;
    }
    corCoYield();
    for (size_t i = 0; i < bytes; i += 512) {
        ck_assert_int_eq(big[i], (char)i);
    }
}

START_TEST(test_200k_of_a_256k_stack)
{
    size_t bytes = 200 * 1024;
    CorCo* co;

    ck_assert_uint_eq(corCoStackSize(), COR_CO_STACK_DEFAULT);
    co = corCoCreate(useStack, &bytes);
    ck_assert(!corCoResume(co));
    ck_assert(corCoResume(co));
    corCoDestroy(co);
}
END_TEST

static void
noteData(void* arg)
{
    CorCo** seen = arg;

    *seen = corCoData(corCoCurrent());
}

START_TEST(test_user_data_and_ids)
{
    CorCo* seen = NULL;
    CorCo* co = corCoCreate(noteData, &seen);
    CorCo* other = corCoCreate(noteData, &seen);

    ck_assert_ptr_null(corCoData(co));
    corCoSetData(co, other);
    ck_assert(corCoResume(co));
    ck_assert_ptr_eq(seen, other);
    ck_assert_uint_ne(corCoId(co), corCoId(other));
    corCoDestroy(co);
    corCoDestroy(other);
}
END_TEST

START_TEST(test_stack_size_is_settable)
{
    size_t bytes = 40 * 1024;
    CorCo* co;

    ck_assert_int_eq(corCoStackSizeSet(1024), -EINVAL);
    ck_assert_int_eq(corCoStackSizeSet(64 * 1024 + 1), 0);
    ck_assert_uint_eq(corCoStackSize() % 4096, 0);
    ck_assert_uint_ge(corCoStackSize(), 64 * 1024 + 1);
    co = corCoCreate(useStack, &bytes);
    ck_assert(!corCoResume(co));
    ck_assert(corCoResume(co));
    corCoDestroy(co);
    ck_assert_int_eq(corCoStackSizeSet(COR_CO_STACK_DEFAULT), 0);
}
END_TEST

/* ---- 100 000 coroutines through the pool --------------------------------- */

static void
yieldOnce(void* arg)
{
    (*(long*)arg)++;
    corCoYield();
    (*(long*)arg)++;
}

START_TEST(test_100000_through_the_pool)
{
    enum { BATCH = 1000, TOTAL = 100000 };
    static CorCo* live[BATCH];
    long count = 0;

    for (int done = 0; done < TOTAL; done += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            live[i] = corCoCreate(yieldOnce, &count);
            ck_assert_ptr_nonnull(live[i]);
            ck_assert(!corCoResume(live[i]));
        }
        for (int i = 0; i < BATCH; i++) {
            ck_assert(corCoResume(live[i]));
            corCoDestroy(live[i]);
        }
    }
    ck_assert_int_eq(count, 2L * TOTAL);
}
END_TEST

COR_TEST_SUITE(corCo)
{
    tcase_add_test(tc, test_steps_to_the_end);
    tcase_add_test(tc, test_callee_saved_registers_survive_1000_switches);
    tcase_add_test(tc, test_floating_point_both_sides);
    tcase_add_test(tc, test_nesting_and_current);
    tcase_add_test(tc, test_200k_of_a_256k_stack);
    tcase_add_test(tc, test_user_data_and_ids);
    tcase_add_test(tc, test_stack_size_is_settable);
    tcase_add_test(tc, test_100000_through_the_pool);
}
