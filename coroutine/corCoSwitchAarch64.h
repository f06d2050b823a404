/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aarch64 context switch (AAPCS64), as inline assembly; why inline is
 * said in corCoSwitchX8664.h: a called switch leaves the return-address
 * predictor wrong on both stacks.
 *
 * The asm declares every general register but sp and x29 (which may be the
 * frame pointer), and every vector register, as clobbered: the compiler
 * saves what is live across it, x19-x28 and d8-d15 included, as around a
 * call. x29 and FPCR are saved by hand; FPCR is written only when it
 * differs, since the write stalls.
 *
 * It branches through x16, and the place it lands on starts with `bti jc`
 * (a no-op without branch protection), so binaries built with
 * -mbranch-protection run: an indirect branch through x16 may land on a
 * function's `bti c` (a new coroutine's first function) or on `bti jc`.
 *
 * A suspended context, from its saved stack pointer up (32 bytes, sp stays
 * 16-byte aligned): x29, the address to continue at, FPCR, padding.
 */
#ifndef COR_CO_SWITCH_AARCH64_H
#define COR_CO_SWITCH_AARCH64_H

#include <stdint.h>

/*
 * The arriving half of a switch, shared by corCoSwitch and corCoJump: x1
 * is the incoming context, x10 the leaving side's FPCR.
 */
#define COR_CO_SWITCH_ARRIVE                                                   \
    "mov     sp, x1\n\t"                                                       \
    "ldp     x29, x16, [sp]\n\t"                                               \
    "ldr     x11, [sp, #16]\n\t"                                               \
    "add     sp, sp, #32\n\t"                                                  \
    "cmp     x10, x11\n\t"                                                     \
    "b.eq    2f\n\t"                                                           \
    "msr     fpcr, x11\n"                                                      \
    "2:\n\t"                                                                   \
    "br      x16\n"

/* Save the running context in *fromSp and continue the one saved at toSp. */
static inline __attribute__((always_inline)) void
corCoSwitch(void** fromSp, void* toSp)
{
    register void** from __asm__("x0") = fromSp;
    register void* to __asm__("x1") = toSp;

    __asm__ volatile("adr     x16, 1f\n\t"
                     "mrs     x10, fpcr\n\t"
                     "sub     sp, sp, #32\n\t"
                     "stp     x29, x16, [sp]\n\t"
                     "str     x10, [sp, #16]\n\t"
                     "mov     x11, sp\n\t"
                     "str     x11, [x0]\n\t" COR_CO_SWITCH_ARRIVE "1:\n\t"
                     "hint    #38\n\t" /* bti jc */
                     : "+r"(from), "+r"(to)
                     :
                     : "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10",
                       "x11", "x12", "x13", "x14", "x15", "x16", "x17", "x18",
                       "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26",
                       "x27", "x28", "x30", "v0", "v1", "v2", "v3", "v4", "v5",
                       "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13",
                       "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21",
                       "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29",
                       "v30", "v31", "memory", "cc");
}

/*
 * Continue the context saved at toSp and drop the running one: a finished
 * coroutine's last step. Nothing is saved, so the compiler need keep
 * nothing for after it; FPCR is still compared, as in a switch.
 */
static inline __attribute__((always_inline, noreturn)) void
corCoJump(void* toSp)
{
    register void* to __asm__("x1") = toSp;

    __asm__ volatile("mrs     x10, fpcr\n\t" COR_CO_SWITCH_ARRIVE
                     :
                     : "r"(to)
                     : "x10", "x11", "x16", "memory", "cc");
    __builtin_unreachable();
}

/*
 * The first context of a new coroutine, the four words at frame: the
 * switch into it loads x29 = 0 (the end of the frame chain) and FPCR = 0
 * (its reset value), and branches to entry.
 */
static inline void
corCoFrameFill(uint64_t frame[4], void (*entry)(void))
{
    frame[0] = 0; /* x29 */
    frame[1] = (uintptr_t)entry;
    frame[2] = 0; /* FPCR */
    frame[3] = 0;
}

#endif /* COR_CO_SWITCH_AARCH64_H */
