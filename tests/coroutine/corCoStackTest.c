/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Coroutine stacks: an overflow dies of SIGSEGV with a report naming the
 * coroutine and its stack size (after what the process's report function
 * says, which speaks for any fatal signal), and a stack costs only the
 * pages it touched.
 */
#include "corTest.h"
#include "corCo.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Deeper and deeper until the guard page; the limit is only there to keep
 * the compiler from calling the recursion infinite. */
static int
recurse(long depth)
{
    volatile char frame[512];

    frame[0] = (char)depth;
    if (depth < 1L << 40) {
        return recurse(depth + 1) + frame[0];
    }
    return frame[0];
}

static void
overflow(void* arg)
{
    (void)arg;
    recurse(0);
}

/* The report function of the tests that set one. */
static void
sayWho(CorCoCrashLine* line, int sig, const siginfo_t* info)
{
    (void)info;
    corCoCrashPutText(line, "the test's thread, signal ");
    corCoCrashPutNumber(line, (uint64_t)sig, 10);
}

/* An overflowing coroutine with stacks of arg bytes. */
static void
overflowWith(size_t arg)
{
    CorCo* co;

    corCoStackSizeSet(arg);
    co = corCoCreate(overflow, NULL);
    printf("id %llu\n", (unsigned long long)corCoId(co));
    fflush(stdout);
    corCoResume(co);
}

/* A thread that armed the report and aborts, no coroutine in sight. */
static void
abortArmed(size_t arg)
{
    (void)arg;
    ck_assert_int_eq(corCoCrashArm(), 0);
    abort();
}

/* Run body(arg) in a child, with sayWho as the report function or none;
 * return its status and output. */
static int
dieInChild(void (*body)(size_t), size_t arg, bool report, char* out,
           size_t outSize)
{
    int fds[2];
    pid_t pid;
    int status;
    size_t len = 0;
    ssize_t n;

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit noCore = { 0, 0 };

        setrlimit(RLIMIT_CORE, &noCore);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        if (report) {
            corCoCrashReportSet(STDERR_FILENO, sayWho);
        }
        body(arg);
        _exit(0);
    }
    close(fds[1]);
    while ((n = read(fds[0], out + len, outSize - 1 - len)) > 0) {
        len += (size_t)n;
    }
    out[len] = '\0';
    close(fds[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

static void
checkOverflowReport(size_t stackSize, bool report)
{
    char out[4096];
    char expect[160];
    unsigned long long id = 0;
    int status = dieInChild(overflowWith, stackSize, report, out, sizeof(out));

    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
                  "the child should die of SIGSEGV, status %d, output: %s",
                  status, out);
    ck_assert_int_eq(sscanf(out, "id %llu", &id), 1);
    snprintf(expect, sizeof(expect),
             "%scoroutine %llu overflowed its %zu-byte stack",
             report ? "the test's thread, signal 11; " : "cor: ", id,
             stackSize);
    ck_assert_msg(strstr(out, expect) != NULL, "expected '%s' in: %s", expect,
                  out);
}

START_TEST(test_overflow_is_reported_then_dies_of_sigsegv)
{
    checkOverflowReport(COR_CO_STACK_DEFAULT, false);
}
END_TEST

START_TEST(test_overflow_report_names_the_stack_size)
{
    checkOverflowReport(32 * 1024, false);
}
END_TEST

/* The process's report function speaks first, the overflow after it. */
START_TEST(test_overflow_report_follows_the_report_function)
{
    checkOverflowReport(32 * 1024, true);
}
END_TEST

/* Any fatal signal, on a thread that armed the report: the function's
 * line, and the death the signal would have been without us. */
START_TEST(test_an_abort_is_reported_then_dies_of_sigabrt)
{
    char out[4096];
    int status = dieInChild(abortArmed, 0, true, out, sizeof(out));

    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                  "the child should die of SIGABRT, status %d, output: %s",
                  status, out);
    /* First: qemu-user, under which the aarch64 run goes, says its own
     * line about the abort after it. */
    ck_assert_msg(strncmp(out, "the test's thread, signal 6\n", 28) == 0, "%s",
                  out);
}
END_TEST

/* ---- Only touched pages cost memory -------------------------------------- */

static long
residentBytes(void)
{
    long pages = 0;
    long resident = 0;
    FILE* f = fopen("/proc/self/statm", "r");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld %ld", &pages, &resident), 2);
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

/* Resident bytes per coroutine of count, each run to its first yield
 * (fn(arg)), then resumed to its end. */
static long
residentPerCoroutine(CorCoFn fn, void* arg, int count)
{
    static CorCo* cos[2000];
    long before = residentBytes();
    long perCoroutine;

    ck_assert_int_le(count, 2000);
    for (int i = 0; i < count; i++) {
        cos[i] = corCoCreate(fn, arg);
        ck_assert_ptr_nonnull(cos[i]);
        ck_assert(!corCoResume(cos[i]));
    }
    perCoroutine = (residentBytes() - before) / count;
    for (int i = 0; i < count; i++) {
        ck_assert(corCoResume(cos[i]));
        corCoDestroy(cos[i]);
    }
    return perCoroutine;
}

static void
touchALittle(void* arg)
{
    volatile char buf[1024];

    buf[0] = 1;
    buf[1023] = (char)(long)arg;
    corCoYield();
    ck_assert_int_eq(buf[0], 1);
}

START_TEST(test_untouched_stack_costs_nothing)
{
    long perCoroutine = residentPerCoroutine(touchALittle, NULL, 2000);

    /* 256 KiB of address space each; a page or two of it resident. */
    ck_assert_msg(perCoroutine < 16 * 1024, "%ld resident bytes per coroutine",
                  perCoroutine);
}
END_TEST

/* A deep call that leaves 24 KiB of the stack touched below its caller. */
static __attribute__((noinline)) void
touchDeep(void)
{
    volatile char deep[24 * 1024];

    for (size_t i = 0; i < sizeof(deep); i += 64) {
        deep[i] = 1;
    }
}

/* Touch deep, then wait (yield) with or without giving the pages back;
 * the caller's own frame must come through whole. */
static void
deepThenWait(void* arg)
{
    volatile char mine[256];

    for (size_t i = 0; i < sizeof(mine); i++) {
        mine[i] = 7;
    }
    touchDeep();
    if (arg != NULL) {
        ck_assert_int_eq(corCoStackTrim(), 0);
    }
    corCoYield();
    for (size_t i = 0; i < sizeof(mine); i++) {
        ck_assert_int_eq(mine[i], 7);
    }
    touchDeep(); /* the pages come back, as zeros first */
}

START_TEST(test_trim_gives_back_what_a_deep_call_touched)
{
    long kept;
    long trimmed;

    corCoPoolMaxSet(0); /* fresh stacks: none touched before */
    kept = residentPerCoroutine(deepThenWait, NULL, 500);
    trimmed = residentPerCoroutine(deepThenWait, &kept, 500);
    ck_assert_msg(kept >= 24 * 1024, "%ld bytes kept", kept);
    ck_assert_msg(trimmed <= 8 * 1024, "%ld bytes after the trim", trimmed);
    ck_assert_int_eq(corCoStackTrim(), 0); /* not a coroutine: nothing */
}
END_TEST

COR_TEST_SUITE(corCoStack)
{
    tcase_add_test(tc, test_trim_gives_back_what_a_deep_call_touched);
    tcase_add_test(tc, test_overflow_is_reported_then_dies_of_sigsegv);
    tcase_add_test(tc, test_overflow_report_names_the_stack_size);
    tcase_add_test(tc, test_overflow_report_follows_the_report_function);
    tcase_add_test(tc, test_an_abort_is_reported_then_dies_of_sigabrt);
    tcase_add_test(tc, test_untouched_stack_costs_nothing);
}
