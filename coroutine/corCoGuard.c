/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The crash report for a coroutine stack overflow.
 *
 * An overflow runs into the PROT_NONE guard page below the stack and raises
 * SIGSEGV. The handler cannot run on the stack that overflowed, so each
 * thread that runs coroutines gets an alternate signal stack. When the fault
 * address lies in the running coroutine's guard, the handler writes one
 * line naming the coroutine and its stack size, restores the default action
 * and returns: the faulting instruction runs again and the process dies of
 * SIGSEGV as a crash does, with its core dump and a truthful exit status.
 * Any other fault goes back to whatever handler was there before us.
 */
#include "corCoInt.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALT_STACK_SIZE ((size_t)64 * 1024)

static struct sigaction previous;
static pthread_once_t installOnce = PTHREAD_ONCE_INIT;
static int installError;
static __thread void* altStack;

/* Async-signal-safe formatting: write() only, no stdio. */
static char*
putText(char* p, const char* text)
{
    while (*text != '\0') {
        *p++ = *text++;
    }
    return p;
}

static char*
putNumber(char* p, uint64_t value, unsigned base)
{
    char digits[24];
    int n = 0;

    do {
        digits[n++] = "0123456789abcdef"[value % base];
        value /= base;
    } while (value != 0);
    if (base == 16) {
        p = putText(p, "0x");
    }
    while (n > 0) {
        *p++ = digits[--n];
    }
    return p;
}

static void
reportOverflow(const CorCo* co, const void* addr)
{
    char line[256];
    char* p = line;

    p = putText(p, "cor: coroutine ");
    p = putNumber(p, co->id, 10);
    p = putText(p, " overflowed its ");
    p = putNumber(p, co->stackSize, 10);
    p = putText(p, "-byte stack (fault at ");
    p = putNumber(p, (uintptr_t)addr, 16);
    p = putText(p, ", function ");
    p = putNumber(p, (uintptr_t)co->fn, 16);
    p = putText(p, ")\n");
    if (write(STDERR_FILENO, line, (size_t)(p - line)) < 0) {
        /* Nothing left to tell it to: the process is about to die. */
    }
}

static void
onSegv(int sig, siginfo_t* info, void* context)
{
    const CorCo* co = corCoRunning;
    const char* addr = info->si_addr;

    (void)context;
    if (info->si_code > 0 && co != NULL
        && addr >= co->stackLow - COR_CO_GUARD_BYTES && addr < co->stackLow) {
        reportOverflow(co, addr);
        signal(sig, SIG_DFL);
        return;
    }
    /* Not ours: whoever handled SIGSEGV before us gets it. A fault runs
     * again on return and reaches that handler; a signal sent with kill()
     * or raise() does not come back by itself, so it is sent again. */
    sigaction(sig, &previous, NULL);
    if (info->si_code <= 0) {
        raise(sig);
    }
}

static void
installHandler(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = onSegv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &previous) != 0) {
        installError = errno;
    }
}

int
corCoGuardArm(void)
{
    stack_t ss;

    pthread_once(&installOnce, installHandler);
    if (installError != 0) {
        errno = installError;
        return -1;
    }
    if (altStack != NULL) {
        return 0;
    }
    /* A thread that has an alternate stack already (a sanitizer's) keeps
     * it: the handler runs on whichever there is. */
    if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE)
        && ss.ss_size >= 16 * 1024) {
        return 0;
    }
    altStack = mmap(NULL, ALT_STACK_SIZE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (altStack == MAP_FAILED) {
        altStack = NULL;
        return -1;
    }
    memset(&ss, 0, sizeof(ss));
    ss.ss_sp = altStack;
    ss.ss_size = ALT_STACK_SIZE;
    if (sigaltstack(&ss, NULL) != 0) {
        int err = errno;

        munmap(altStack, ALT_STACK_SIZE);
        altStack = NULL;
        errno = err;
        return -1;
    }
    return 0;
}

void
corCoGuardThreadExit(void)
{
    stack_t ss;

    if (altStack == NULL) {
        return;
    }
    memset(&ss, 0, sizeof(ss));
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    munmap(altStack, ALT_STACK_SIZE);
    altStack = NULL;
}
