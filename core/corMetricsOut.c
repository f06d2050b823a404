/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The writer of /metrics' text: a buffer that grows as lines are printed
 * into it, lost as a whole when it cannot grow. The core's sections
 * (corMetrics.c, the limits' refusals in corLimits.c) and the modules'
 * sources all print through it, so that none of them needs the others.
 */
#include "corCoreInt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int
corMetricsOutInit(CorMetricsOut* out, size_t cap)
{
    *out = (CorMetricsOut){ malloc(cap), 0, cap };
    return out->text != NULL ? 0 : -1;
}

static void
printv(CorMetricsOut* t, const char* fmt, va_list args)
{
    va_list ap;
    int n;

    if (t->text == NULL) {
        return;
    }
    for (;;) {
        va_copy(ap, args);
        n = vsnprintf(t->text + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)(n > 0 ? n : 0);
        char* grown = n >= 0 ? realloc(t->text, cap) : NULL;

        if (grown == NULL) {
            /* The text is lost as a whole: a scrape with a hole in it
             * would read as counters gone back. */
            free(t->text);
            *t = (CorMetricsOut){ NULL, 0, 0 };
            return;
        }
        t->text = grown;
        t->cap = cap;
    }
}

void
corMetricsPrintf(CorMetricsOut* out, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    printv(out, fmt, ap);
    va_end(ap);
}
