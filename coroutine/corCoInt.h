/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of coroutine/: the coroutine record, the context switch and the
 * stack pool. Never included from outside coroutine/.
 */
#ifndef COR_CO_INT_H
#define COR_CO_INT_H

#include "corCo.h"

/*
 * A coroutine. It lives at the top of its own stack mapping, so creating one
 * costs no allocation beyond the stack (which the pool usually has): the
 * frames grow down from just below this record. Owned by the thread that
 * created it.
 */
struct CorCo {
    CorCoCore core;      /* first: what the inline resume and yield touch */
    CorCoFn fn;
    void* arg;
    void* data;
    void* sched;
    CorCo* nextFree;     /* the pool's free list */
    char* stackLow;      /* lowest usable byte, just above the guard page */
    size_t stackSize;    /* usable bytes, guard excluded */
    uint64_t id;
    unsigned valgrindId;
#if COR_HAVE_ASAN
    void* asanFake;      /* ASan's fake stack of whoever is switched away */
    const void* asanResumerLow;
    size_t asanResumerSize;
#endif
};

/* The thread's stack pool: a mapped, guarded stack with its CorCo record at
 * the top, or NULL with errno set. */
CorCo* corCoStackTake(void);
void corCoStackGive(CorCo* co);

/*
 * The PROT_NONE guard below each stack: 64 KiB of address space, no
 * memory. One page would do for code built with -fstack-clash-protection
 * (which probes every page of a large frame); a frame of module code built
 * without it may skip a page, but not 16 of them.
 */
#define COR_CO_GUARD_BYTES ((size_t)64 * 1024)

/* The crash report for an overflow: armed once per thread before its first
 * coroutine runs. */
int corCoGuardArm(void);
void corCoGuardThreadExit(void);

#endif /* COR_CO_INT_H */
