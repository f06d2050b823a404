/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corCo: create, start, finish and destroy. Resume and yield are inline in
 * corCo.h, the switch itself is assembly (corCoSwitchX8664.h,
 * corCoSwitchAarch64.h) with its running pointer in corCoSwitch.c, stacks
 * come from corCoStack.c. Each coroutine remembers who resumed it, which is
 * all nesting needs: a yield always returns to the resumer, whether that is
 * the thread or another coroutine.
 */
#include "corCoInt.h"

#include <errno.h>

#if COR_HAVE_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if COR_HAVE_COROUTINES

/*
 * Where a new coroutine starts, entered by a jump with a call's stack
 * layout; it is the one corCoResume just marked running. It leaves by
 * corCoJump, not a switch: its own context is never resumed, so saving it
 * (and the callee-saved registers a switch makes the compiler keep) would
 * be work for nobody.
 */
static void __attribute__((noreturn)) coroutineMain(void)
{
    CorCo* co = corCoRunning;

#if COR_HAVE_ASAN
    __sanitizer_finish_switch_fiber(NULL, &co->asanResumerLow,
                                    &co->asanResumerSize);
#endif
    co->fn(co->arg);
    co->core.finished = true;
    corCoRunning = co->core.resumer;
#if COR_HAVE_ASAN
    /* A NULL save slot tells ASan this stack is done with. */
    __sanitizer_start_switch_fiber(NULL, co->asanResumerLow,
                                   co->asanResumerSize);
#endif
    corCoJump(co->core.resumerSp);
}

/*
 * The first context of a new coroutine, below top. Both switches keep a
 * suspended context in four words on a 16-byte boundary; corCoFrameFill,
 * the switch's own, writes all four.
 */
static inline void*
frameInit(char* top, void (*entry)(void))
{
    uint64_t* frame;

    top = (char*)((uintptr_t)top & ~(uintptr_t)15);
    frame = (uint64_t*)(top - 32);
    corCoFrameFill(frame, entry);
    return frame;
}

static inline CorCo*
coInit(CorCo* co, CorCoFn fn, void* arg)
{
    co->fn = fn;
    co->arg = arg;
    co->data = NULL;
    co->sched = NULL;
    co->core.finished = false; /* resumer is set by each resume */
    co->core.sp = frameInit((char*)co, coroutineMain);
    return co;
}

/* Out of line, so that the usual create, a pool pop, saves no registers
 * for the call. */
static CorCo* __attribute__((noinline)) createSlow(CorCoFn fn, void* arg)
{
    CorCo* co = corCoStackTake();

    return co == NULL ? NULL : coInit(co, fn, arg);
}

CorCo*
corCoCreate(CorCoFn fn, void* arg)
{
    CorCo* co = corCoStackPop();

    if (__builtin_expect(co == NULL, 0)) {
        return createSlow(fn, arg);
    }
    return coInit(co, fn, arg);
}

void
corCoDestroy(CorCo* co)
{
    if (co != NULL) {
        corCoStackGive(co);
    }
}

#else /* !COR_HAVE_COROUTINES */

/*
 * Built with --disable-coroutines: nothing can be created, so every caller
 * takes its no-coroutine path (a worker thread, plain poll()).
 */
CorCo*
corCoCreate(CorCoFn fn, void* arg)
{
    (void)fn;
    (void)arg;
    errno = ENOTSUP;
    return NULL;
}

void
corCoDestroy(CorCo* co)
{
    (void)co;
}

#endif /* COR_HAVE_COROUTINES */

void
corCoSetData(CorCo* co, void* data)
{
    co->data = data;
}

void*
corCoData(const CorCo* co)
{
    return co->data;
}

void
corCoSetSched(CorCo* co, void* sched)
{
    co->sched = sched;
}

void*
corCoSched(const CorCo* co)
{
    return co->sched;
}

uint64_t
corCoId(const CorCo* co)
{
    return co->id;
}
