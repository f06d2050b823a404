/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The why text of a failed call: the calls that can fail for reasons a
 * person must read (a lookup, a connect) take a buffer for one beside
 * their -errno, and fill it through corEvWhy. On the lowest floor that has
 * such calls (corResolve), so that every floor above can use it.
 */
#include "corEv.h"

#include <stdarg.h>
#include <stdio.h>

void
corEvWhy(char* why, size_t whyLen, const char* format, ...)
{
    va_list ap;

    if (why == NULL || whyLen == 0) {
        return;
    }
    va_start(ap, format);
    vsnprintf(why, whyLen, format, ap);
    va_end(ap);
}
