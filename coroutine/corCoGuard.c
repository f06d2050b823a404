/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The crash report: one line a thread writes as it dies of SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL (a compiler's trap for undefined behaviour) or SIGABRT.
 *
 * Its first cause was the coroutine stack overflow, which runs into the
 * PROT_NONE guard page below the stack and raises SIGSEGV. The handler
 * cannot run on the stack that overflowed, so each thread that runs
 * coroutines, or that arms the report itself (a server's loops and
 * workers), gets an alternate signal stack. The line says what the
 * process's report function knows of the thread (a server: its loop, the
 * handler, its module, the request) and, when the fault address lies in
 * the running coroutine's guard, that coroutine and its stack size.
 *
 * It is written in the handler, where almost nothing is safe: no malloc,
 * no stdio, no lock; the line is built in a buffer on the signal stack and
 * handed to one write(). Then the signal goes on as if we had not been
 * there: an overflow to the default action (the faulting instruction runs
 * again and the process dies of SIGSEGV, with its core dump and a truthful
 * exit status), anything else to the handler that was there before us (the
 * default, or a sanitizer's, which then writes its own report). A signal
 * sent with kill() or raise() (abort()) does not come back by itself, so it
 * is sent again.
 */
#include "corCoInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALT_STACK_SIZE ((size_t)64 * 1024)

static const int fatalSignals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
#define FATAL_COUNT (sizeof(fatalSignals) / sizeof(fatalSignals[0]))

static struct sigaction previous[FATAL_COUNT];
static pthread_once_t installOnce = PTHREAD_ONCE_INIT;
static int installError;
static __thread void* altStack;
/* Set while this thread writes its report: a fault in the report itself
 * (a request's memory the crash tore) must end the process, not recurse. */
static __thread volatile sig_atomic_t reporting
    __attribute__((tls_model("initial-exec")));
static CorCoCrashReportFn reportFn;
static int reportFd = STDERR_FILENO;

/* ---- The line, built without malloc or stdio ----------------------------- */

void
corCoCrashPut(CorCoCrashLine* line, const char* bytes, size_t len)
{
    size_t room = sizeof(line->text) - 1 - line->len;

    if (len > room) {
        len = room; /* the newline always fits */
    }
    memcpy(line->text + line->len, bytes, len);
    line->len += len;
}

void
corCoCrashPutText(CorCoCrashLine* line, const char* text)
{
    corCoCrashPut(line, text, strlen(text));
}

void
corCoCrashPutNumber(CorCoCrashLine* line, uint64_t value, unsigned base)
{
    char digits[24];
    char out[26];
    int n = 0;
    size_t len = 0;

    do {
        digits[n++] = "0123456789abcdef"[value % base];
        value /= base;
    } while (value != 0);
    if (base == 16) {
        out[len++] = '0';
        out[len++] = 'x';
    }
    while (n > 0) {
        out[len++] = digits[--n];
    }
    corCoCrashPut(line, out, len);
}

/* ---- The handler --------------------------------------------------------- */

static void
putOverflow(CorCoCrashLine* line, const CorCo* co, const void* addr)
{
    corCoCrashPutText(line, "coroutine ");
    corCoCrashPutNumber(line, co->id, 10);
    corCoCrashPutText(line, " overflowed its ");
    corCoCrashPutNumber(line, co->stackSize, 10);
    corCoCrashPutText(line, "-byte stack (fault at ");
    corCoCrashPutNumber(line, (uintptr_t)addr, 16);
    corCoCrashPutText(line, ", function ");
    corCoCrashPutNumber(line, (uintptr_t)co->fn, 16);
    corCoCrashPutText(line, ")");
}

/* The running coroutine when the fault hit its guard, else NULL. */
static const CorCo*
overflowed(int sig, const siginfo_t* info)
{
    const CorCo* co = corCoRunning;
    const char* addr = info->si_addr;

    if (sig == SIGSEGV && info->si_code > 0 && co != NULL
        && addr >= co->stackLow - COR_CO_GUARD_BYTES && addr < co->stackLow) {
        return co;
    }
    return NULL;
}

static void
report(int sig, const siginfo_t* info, const CorCo* co)
{
    CorCoCrashReportFn fn = reportFn;
    CorCoCrashLine line;

    line.len = 0;
    if (fn != NULL) {
        fn(&line, sig, info);
        if (co != NULL) {
            corCoCrashPutText(&line, "; ");
        }
    } else if (co != NULL) {
        corCoCrashPutText(&line, "cor: ");
    }
    if (co != NULL) {
        putOverflow(&line, co, info->si_addr);
    }
    if (line.len == 0) {
        return;
    }
    line.text[line.len++] = '\n';
    if (write(reportFd, line.text, line.len) < 0) {
        /* Nothing left to tell it to: the process is about to die. */
    }
}

static void
onFatal(int sig, siginfo_t* info, void* context)
{
    const CorCo* co = overflowed(sig, info);
    unsigned i = 0;

    (void)context;
    while (i + 1 < FATAL_COUNT && fatalSignals[i] != sig) {
        i++;
    }
    if (reporting) {
        signal(sig, SIG_DFL);
    } else {
        reporting = 1;
        report(sig, info, co);
        if (co != NULL) {
            signal(sig, SIG_DFL);
        } else {
            sigaction(sig, &previous[i], NULL);
        }
    }
    if (info->si_code <= 0) {
        raise(sig);
    }
}

static void
installHandler(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = onFatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (unsigned i = 0; i < FATAL_COUNT; i++) {
        if (sigaction(fatalSignals[i], &sa, &previous[i]) != 0) {
            installError = errno;
        }
    }
}

void
corCoCrashReportSet(int fd, CorCoCrashReportFn fn)
{
    reportFd = fd;
    reportFn = fn;
}

int
corCoCrashArm(void)
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
