/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The x86-64 context switch (System V ABI), as inline assembly.
 *
 * Why inline and not a called function: a `call` pushes a return address
 * on the CPU's return-stack predictor, and a switch never returns to it.
 * Every `ret` after a called switch, on either side, then pops a stale
 * prediction and mispredicts. Switching inside the caller's own code keeps
 * calls and returns paired on both stacks; the `jmp` into the other context
 * is one indirect branch per side, each with a single usual target
 * (corCoResume always lands in corCoYield, and back), which the branch
 * predictor learns. Measured: about 2x faster than the called version (see
 * docs/performance.md).
 *
 * The asm declares every general register but rsp and rbp, every vector
 * register and the x87 stack as clobbered, so the compiler saves what is
 * live across it, callee-saved registers included, as around a call. Only
 * rbp (which may be the frame pointer, and cannot be clobbered) and the FP
 * control state are saved by hand.
 *
 * The FP control state. Each context keeps its own rounding mode, exception
 * masks and x87 precision, as the ABI's callee-saved rule asks. The x87
 * control word records them: it is saved at every switch (fnstcw is cheap)
 * and compared with the incoming context's. Only when they differ is the
 * incoming word loaded and its rounding mode and masks mirrored into MXCSR,
 * where SSE arithmetic reads them. MXCSR itself is never read on the fast
 * path: on AMD Zen 4 stmxcsr costs about 14 cycles, four times the rest of
 * the switch, and Boost.Context pays it twice per round trip. This is
 * exact for every change made through <fenv.h> (fesetround, fesetenv,
 * feenableexcept...), which always sets the x87 word and MXCSR together.
 * What only MXCSR has, flush-to-zero and denormals-are-zero, and MXCSR
 * written directly with _mm_setcsr, stays per thread: docs/engine.md.
 *
 * A suspended context, from its saved stack pointer up: the address to
 * continue at, the x87 control word (2 bytes, then 6 of scratch), rbp;
 * above them the 128-byte red zone of the suspended function, which the
 * pushes must not touch.
 */
#ifndef COR_CO_SWITCH_X8664_H
#define COR_CO_SWITCH_X8664_H

#include <stdint.h>

/* Built for AVX-512, the compiler also keeps values in xmm16-31 and in the
 * mask registers k0-k7 (all caller-saved), which the other side may
 * change. */
#ifdef __AVX512F__
#define COR_CO_CLOBBER_AVX512                                                  \
    , "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",  \
        "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30",         \
        "xmm31", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"
#else
#define COR_CO_CLOBBER_AVX512
#endif

/*
 * The arriving half of a switch, shared by corCoSwitch and corCoJump: rsp
 * is the incoming context's just past its continue address (in rcx), ax is
 * its x87 control word, the flags are the comparison with the leaving
 * side's word.
 */
#define COR_CO_SWITCH_ARRIVE                                                   \
    "jne     2f\n"                                                             \
    "3:\n\t"                                                                   \
    "addq    $8, %%rsp\n\t"                                                    \
    "popq    %%rbp\n\t"                                                        \
    "jmpq    *%%rcx\n"                                                         \
    "2:\n\t" /* environments differ */                                         \
    "fldcw   (%%rsp)\n\t"                                                      \
    "stmxcsr 4(%%rsp)\n\t"                                                     \
    "movl    4(%%rsp), %%r8d\n\t"                                              \
    "andl    $0xffff807f, %%r8d\n\t" /* clear MXCSR masks and RC */            \
    "movl    %%eax, %%r9d\n\t"                                                 \
    "andl    $0x3f, %%r9d\n\t" /* x87 masks, bits 0-5 ... */                   \
    "shll    $7, %%r9d\n\t"    /* ... are MXCSR bits 7-12 */                   \
    "orl     %%r9d, %%r8d\n\t"                                                 \
    "andl    $0xc00, %%eax\n\t" /* x87 RC, bits 10-11 ... */                   \
    "shll    $3, %%eax\n\t"     /* ... is MXCSR RC, 13-14 */                   \
    "orl     %%eax, %%r8d\n\t"                                                 \
    "movl    %%r8d, 4(%%rsp)\n\t"                                              \
    "ldmxcsr 4(%%rsp)\n\t"                                                     \
    "jmp     3b\n"

/* Save the running context in *fromSp and continue the one saved at toSp. */
static inline __attribute__((always_inline)) void
corCoSwitch(void** fromSp, void* toSp)
{
    __asm__ volatile(
        "leaq    -128(%%rsp), %%rsp\n\t" /* step over the red zone */
        "pushq   %%rbp\n\t"
        "subq    $8, %%rsp\n\t"
        "fnstcw  (%%rsp)\n\t"
        "leaq    1f(%%rip), %%rax\n\t"
        "pushq   %%rax\n\t"
        "movq    %%rsp, %%rdx\n\t"
        "movq    %%rsp, (%%rdi)\n\t"
        "movq    %%rsi, %%rsp\n\t"
        "popq    %%rcx\n\t" /* where the other one goes on */
        "movzwl  (%%rsp), %%eax\n\t"
        "cmpw    8(%%rdx), %%ax\n\t" COR_CO_SWITCH_ARRIVE "1:\n\t"
        "leaq    128(%%rsp), %%rsp\n\t"
        : "+D"(fromSp), "+S"(toSp)
        :
        : "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "r12", "r13",
          "r14", "r15", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
          "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
          "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)",
          "st(7)", "mm0", "mm1", "mm2", "mm3", "mm4", "mm5", "mm6", "mm7",
          "memory", "cc" COR_CO_CLOBBER_AVX512);
}

/*
 * Continue the context saved at toSp and drop the running one: a finished
 * coroutine's last step. Nothing is saved, so the compiler need keep
 * nothing for after it; the x87 word is still compared, as in a switch.
 */
static inline __attribute__((always_inline, noreturn)) void
corCoJump(void* toSp)
{
    uint16_t word;

    __asm__ volatile("fnstcw %0" : "=m"(word));
    __asm__ volatile("movq    %1, %%rsp\n\t"
                     "popq    %%rcx\n\t"
                     "movzwl  (%%rsp), %%eax\n\t"
                     "cmpw    %0, %%ax\n\t" COR_CO_SWITCH_ARRIVE
                     :
                     : "d"(word), "S"(toSp)
                     : "rax", "rcx", "r8", "r9", "memory", "cc");
    __builtin_unreachable();
}

/*
 * The first context of a new coroutine, the four words at frame: the
 * switch into it pops entry as the address to continue at, the x87
 * control word at reset, and rbp = 0 (the end of the frame chain), and
 * arrives in entry with the stack as a call would leave it (a null return
 * address on a 16-byte boundary).
 */
static inline void
corCoFrameFill(uint64_t frame[4], void (*entry)(void))
{
    frame[0] = (uintptr_t)entry;
    frame[1] = 0x037f; /* x87 control word at reset */
    frame[2] = 0;      /* rbp */
    frame[3] = 0;      /* the return address of entry */
}

#endif /* COR_CO_SWITCH_X8664_H */
