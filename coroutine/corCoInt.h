/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of coroutine/: the coroutine record, the context switch and the
 * stack pool. Never included from outside coroutine/.
 */
#ifndef COR_CO_INT_H
#define COR_CO_INT_H

#include "corCo.h"

#include <stdatomic.h>

#if COR_HAVE_ASAN
#include <sanitizer/asan_interface.h>
#endif

/*
 * A coroutine. It lives at the top of its own stack mapping, so creating one
 * costs no allocation beyond the stack (which the pool usually has): the
 * frames grow down from just below this record. Owned by the thread that
 * created it.
 */
struct CorCo {
    CorCoCore core; /* first: what the inline resume and yield touch */
    CorCoFn fn;
    void* arg;
    void* data;
    void* sched;
    CorCo* nextFree;  /* the pool's free list */
    char* stackLow;   /* lowest usable byte, just above the guard page */
    size_t stackSize; /* usable bytes, guard excluded */
    uint64_t id;
    unsigned valgrindId;
#if COR_HAVE_ASAN
    void* asanFake; /* ASan's fake stack of whoever is switched away */
    const void* asanResumerLow;
    size_t asanResumerSize;
#endif
};

/*
 * The thread's stack pool (corCoStack.c). Taking and giving back are inline
 * so that corCoCreate and corCoDestroy cost a pointer pop and push and no
 * call; mapping, unmapping and a thread's first stack are out of line.
 */
typedef struct {
    CorCo* head; /* free stacks, all of corCoStackBytes */
    unsigned count;
    uint64_t lastId; /* 0 until the thread's first stack (and its crash
                      * report) is set up by corCoStackTake */
} CorCoPool;

extern __thread CorCoPool corCoPool __attribute__((tls_model("initial-exec")));
extern _Atomic size_t corCoStackBytes; /* the size of new stacks */
extern _Atomic unsigned corCoPoolMax;

/* A pooled stack of the current size, or NULL when there is none or the
 * thread has not taken one before: then corCoStackTake. */
static inline CorCo* corCoStackPop(void);
/* A mapped, guarded stack with its CorCo record at the top, or NULL with
 * errno set. */
CorCo* corCoStackTake(void);
static inline void corCoStackGive(CorCo* co);
/* Unmap a stack the pool has no room for. */
void corCoStackUnmap(CorCo* co);

/*
 * The PROT_NONE guard below each stack: 64 KiB of address space, no
 * memory. One page would do for code built with -fstack-clash-protection
 * (which probes every page of a large frame); a frame of module code built
 * without it may skip a page, but not 16 of them.
 */
#define COR_CO_GUARD_BYTES ((size_t)64 * 1024)

/* The thread's crash-report stack, let go (corCoThreadExit). */
void corCoGuardThreadExit(void);

/* ---- Inline definitions ------------------------------------------------ */

static inline CorCo*
corCoStackPop(void)
{
    CorCo* co = corCoPool.head;

    if (co == NULL || corCoPool.lastId == 0
        || co->stackSize
               != atomic_load_explicit(&corCoStackBytes,
                                       memory_order_relaxed)) {
        return NULL;
    }
    corCoPool.head = co->nextFree;
    corCoPool.count--;
    co->id = ++corCoPool.lastId;
    return co;
}

static inline void
corCoStackGive(CorCo* co)
{
#if COR_HAVE_ASAN
    /* A coroutine destroyed while suspended leaves its frames poisoned;
     * the next one on this memory must not inherit that. */
    ASAN_UNPOISON_MEMORY_REGION(co->stackLow, co->stackSize);
#endif
    if (corCoPool.count
        >= atomic_load_explicit(&corCoPoolMax, memory_order_relaxed)) {
        corCoStackUnmap(co);
        return;
    }
    co->nextFree = corCoPool.head;
    corCoPool.head = co;
    corCoPool.count++;
}

#endif /* COR_CO_INT_H */
