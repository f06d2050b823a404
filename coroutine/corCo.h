/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corCo: stackful coroutines. A coroutine runs a function on a stack of its
 * own and gives the thread back with corCoYield(); whoever resumed it gets
 * control back from corCoResume(). Coroutines nest: a coroutine may resume
 * another, and the inner one's yield returns to the outer one.
 *
 * A coroutine belongs to the thread that created it and is only ever resumed
 * on that thread. Stacks come from a per-thread pool, are mmap()ed with
 * MAP_NORESERVE (only touched pages cost memory) and have a PROT_NONE guard
 * page below them: an overflow is a SIGSEGV whose report names the coroutine.
 */
#ifndef COR_CO_H
#define COR_CO_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct CorCo CorCo;
typedef void (*CorCoFn)(void* arg);

/* The stack size used when nothing else was set: 256 KiB of address space. */
#define COR_CO_STACK_DEFAULT ((size_t)256 * 1024)
/* The smallest stack corCoStackSizeSet() accepts. */
#define COR_CO_STACK_MIN ((size_t)16 * 1024)

/*
 * Create a coroutine that will run fn(arg) when first resumed. The stack
 * comes from the calling thread's pool. Returns NULL with errno set when no
 * stack can be had (ENOMEM), or ENOTSUP when built with --disable-coroutines.
 * The caller owns the result and releases it with corCoDestroy().
 */
CorCo* corCoCreate(CorCoFn fn, void* arg);

/*
 * Run co until it yields or finishes. Returns true when fn has returned (the
 * coroutine can only be destroyed then), false when it yielded. Must not be
 * called on a finished coroutine, on the running one, or on one that is
 * resuming another. Inline, like corCoYield: see the end of this file.
 */
static inline bool corCoResume(CorCo* co);

/* Give control back to whoever resumed the running coroutine. Must be called
 * inside a coroutine. May yield (it is the yield). */
static inline void corCoYield(void);

/* The coroutine running on this thread, or NULL outside any coroutine. */
static inline CorCo* corCoCurrent(void);

/* Release a coroutine that has finished or never started; its stack goes
 * back to the thread's pool. Destroying a suspended coroutine abandons its
 * frames without unwinding them: that is the caller's decision to make. */
void corCoDestroy(CorCo* co);

/* One pointer of user data per coroutine, NULL at creation. */
void corCoSetData(CorCo* co, void* data);
void* corCoData(const CorCo* co);

/*
 * One pointer for the scheduler that resumes the coroutine (the event loop
 * keeps its own bookkeeping here), so corCoData stays the application's.
 */
void corCoSetSched(CorCo* co, void* sched);
void* corCoSched(const CorCo* co);

/* A number that names the coroutine in crash reports and logs: unique per
 * process for its lifetime. */
uint64_t corCoId(const CorCo* co);

/*
 * The stack size of coroutines created from now on, in bytes; rounded up to
 * whole pages. Returns 0, or -EINVAL below COR_CO_STACK_MIN. Set it before
 * the threads start creating coroutines: each thread's pool only keeps
 * stacks of the current size.
 */
int corCoStackSizeSet(size_t bytes);
size_t corCoStackSize(void);

/*
 * Give back the pages of the running coroutine's stack below the caller's
 * frame (madvise MADV_DONTNEED; they read as zeros when touched again).
 * For a coroutine about to wait long: what a deep call touched before
 * (a connect, a printf) would otherwise stay resident all the wait. Does
 * nothing outside a coroutine. Returns 0 or -errno.
 */
int corCoStackTrim(void);

/* How many free stacks each thread's pool keeps for reuse (default 1024). */
void corCoPoolMaxSet(unsigned count);

/*
 * Size the pool to LIVE coroutines a thread may run at once (an event
 * loop's cap), never below the default: a burst up to the cap comes back
 * to stacks it already touched instead of three system calls and fresh
 * page faults a coroutine. Sanitizer builds keep none, whatever the cap.
 */
void corCoPoolFit(unsigned live);

/* Release the calling thread's pooled stacks and its crash-report stack.
 * Threads that created coroutines call it before they exit. */
void corCoThreadExit(void);

/* ---- Crash reports ------------------------------------------------------ */

/*
 * A thread that dies of SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT writes
 * one line (corCoGuard.c): what the report function says of it, and the
 * coroutine whose stack overflowed if that is what killed it. A thread
 * gets the report with its first coroutine, or with corCoCrashArm.
 */

/* A line built in a signal handler: no malloc, no stdio; what does not fit
 * is cut. */
typedef struct {
    char text[1024];
    size_t len;
} CorCoCrashLine;

void corCoCrashPut(CorCoCrashLine* line, const char* bytes, size_t len);
void corCoCrashPutText(CorCoCrashLine* line, const char* text);
/* In base 10, or 16 with a 0x. */
void corCoCrashPutNumber(CorCoCrashLine* line, uint64_t value, unsigned base);

/*
 * Says what the dying thread was doing, into line, for signal sig. Runs in
 * the signal handler on the thread's alternate stack: only async-signal-
 * safe calls, nothing that takes a lock or allocates.
 */
typedef void (*CorCoCrashReportFn)(CorCoCrashLine* line, int sig,
                                   const siginfo_t* info);

/*
 * The process's report function, and the fd its lines go to (stderr until
 * then). Without one, only an overflow is reported. Set it before the
 * threads start.
 */
void corCoCrashReportSet(int fd, CorCoCrashReportFn fn);

/*
 * Arm the report on the calling thread: the handler (once per process) and
 * an alternate signal stack for this thread, released by corCoThreadExit.
 * Returns 0, or -1 with errno set.
 */
int corCoCrashArm(void);

/* ---- Inline definitions ------------------------------------------------ */

/*
 * Resume and yield are inline so that a switch costs no call and no return:
 * a `ret` after a switch pops a return address the other stack pushed and
 * always mispredicts (docs/performance.md has the figures). What they touch
 * of a coroutine is its head, CorCoCore; the rest of CorCo is private.
 */
#include "corAutoConfig.h"

#if COR_HAVE_COROUTINES
#if defined(__x86_64__)
#include "corCoSwitchX8664.h"
#elif defined(__aarch64__)
#include "corCoSwitchAarch64.h"
#else
#error "corCo switches stacks on x86-64 and aarch64 only"
#endif
#endif

/* The first member of every CorCo. */
typedef struct {
    void* sp;        /* its saved stack pointer while it is suspended */
    void* resumerSp; /* the resumer's saved stack pointer while it runs */
    CorCo* resumer;  /* who resumed it: a coroutine, or NULL (the thread) */
    bool finished;
} CorCoCore;

/* The coroutine running on this thread (corCoSwitch.c). */
extern __thread CorCo* corCoRunning __attribute__((tls_model("initial-exec")));

#if COR_HAVE_ASAN
/* AddressSanitizer is told of each switch (corCoSwitch.c); only its builds
 * pay. */
void corCoAsanResume(CorCo* co, void** fakeP);
void corCoAsanResumed(void* fake);
void corCoAsanYield(CorCo* co);
void corCoAsanYielded(CorCo* co);
#endif

static inline CorCo*
corCoCurrent(void)
{
    return corCoRunning;
}

#if COR_HAVE_COROUTINES

static inline bool
corCoResume(CorCo* co)
{
    CorCoCore* core = (CorCoCore*)co;

    core->resumer = corCoRunning;
    corCoRunning = co;
#if COR_HAVE_ASAN
    void* fake;

    corCoAsanResume(co, &fake);
    corCoSwitch(&core->resumerSp, core->sp);
    corCoAsanResumed(fake);
#else
    corCoSwitch(&core->resumerSp, core->sp);
#endif
    return core->finished;
}

static inline void
corCoYield(void)
{
    CorCo* co = corCoRunning;
    CorCoCore* core = (CorCoCore*)co;

    corCoRunning = core->resumer;
#if COR_HAVE_ASAN
    corCoAsanYield(co);
    corCoSwitch(&core->sp, core->resumerSp);
    corCoAsanYielded(co);
#else
    corCoSwitch(&core->sp, core->resumerSp);
#endif
}

#else /* !COR_HAVE_COROUTINES: nothing can be created, nothing switches. */

static inline bool
corCoResume(CorCo* co)
{
    (void)co;
    return true;
}

static inline void
corCoYield(void)
{
}

#endif /* COR_HAVE_COROUTINES */

#endif /* COR_CO_H */
