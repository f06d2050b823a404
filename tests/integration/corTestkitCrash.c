/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's handlers that take the generation down, for the master's
 * replacement and rollback and for the crash report, which must name the
 * thread, the handler, its module and the request whatever killed it and
 * wherever the handler ran:
 *
 *   crash          inline on the loop
 *   crashworker    on a worker thread
 *   crashwait      a coroutine where the suite runs them (a worker when it
 *                  does not), after a wait of 10 ms on the loop
 *   deep           a coroutine that overflows its stack (a 64 MiB frame,
 *                  past a worker's own stack too)
 *
 *   ?how=abort (the default), segv, bus, fpe or ill: how it dies.
 */
#include "cor.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void corTestkitCrashAdd(CorModule* m, int* rc);

/* An address the compiler cannot see is bad, so that it emits the load
 * rather than a trap of its own. */
static volatile uintptr_t badAddress = 8;
static volatile int dividend = 1;
static volatile int zero;

/* The division itself, which a sanitized build's check would otherwise
 * answer with its own report instead of the fault. */
__attribute__((no_sanitize_undefined)) static int
divide(int a, int b)
{
    return a / b;
}

/* A read past the end of a file mapping that the file no longer covers. */
static int
busError(void)
{
    FILE* f = tmpfile();
    volatile char* p;

    if (f == NULL || ftruncate(fileno(f), 4096) != 0) {
        return -1;
    }
    p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fileno(f), 0);
    if (p == MAP_FAILED || ftruncate(fileno(f), 0) != 0) {
        return -1;
    }
    return p[0];
}

static void
die(CorRequest* r)
{
    const char* how = corRequestQuery(r, "how");

    if (how == NULL || strcmp(how, "abort") == 0) {
        abort();
    } else if (strcmp(how, "segv") == 0) {
        *(volatile int*)badAddress = 1;
    } else if (strcmp(how, "bus") == 0) {
        busError();
    } else if (strcmp(how, "fpe") == 0) {
        dividend = divide(dividend, zero);
    } else if (strcmp(how, "ill") == 0) {
        __builtin_trap();
    }
    corRespond(r, 500, "text/plain", "still alive\n", 12);
}

static void
crashWaitServe(CorRequest* r)
{
    short revents;

    corRestWaitFd(-1, 0, 10, &revents);
    die(r);
}

/* A frame larger than any thread's stack (a thread's default is 8 MiB, 32
 * with no stack limit): the stack-clash probes of its allocation walk down
 * page by page into the guard below. Its size is not a constant, so that
 * it is allocated (and probed) at run time. */
static volatile size_t deepBytes = (size_t)64 << 20;

static void
deepServe(CorRequest* r)
{
    volatile char frame[deepBytes];

    frame[0] = 1;
    corRespond(r, 200, "text/plain", "deep\n", 5 + frame[0] - 1);
}

void
corTestkitCrashAdd(CorModule* m, int* rc)
{
    static const CorHandler handlers[] = {
        { .name = "crash", .serve = die, .run = COR_RUN_INLINE },
        { .name = "crashworker", .serve = die, .run = COR_RUN_WORKER },
        { .name = "crashwait",
          .serve = crashWaitServe,
          .run = COR_RUN_COROUTINE },
        { .name = "deep", .serve = deepServe, .run = COR_RUN_COROUTINE },
    };

    for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++) {
        if (*rc == 0) {
            *rc = corHandlerAdd(m, &handlers[i]);
        }
    }
}
