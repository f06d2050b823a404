/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pieces of a multipart/byteranges body (RFC 9110 14.6), the answer
 * to several ranges at once: its boundary, each part's head (its
 * Content-Type and Content-Range) and the whole body's length, said
 * before the first byte. The core's, beside the parser (corRange.h), for
 * static (of a file) and cache (of a stored answer) alike.
 */
#include "corRange.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void
corRangeBoundary(char* out, size_t size)
{
    static atomic_ulong next;
    struct timespec ts;

    /* A counter and the clock, in hex: no body is likely to hold it (RFC
     * 2046 5.1.1: at most 70 characters). */
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, size, "cor%016llx%08lx",
             (unsigned long long)ts.tv_sec * 1000000000ULL
                 + (unsigned long long)ts.tv_nsec,
             (unsigned long)atomic_fetch_add(&next, 1) & 0xffffffffUL);
}

int
corRangePartHead(char* out, const char* boundary, const char* type,
                 const CorRange* range, uint64_t whole)
{
    return snprintf(out, COR_RANGE_PART_HEAD_MAX,
                    "\r\n--%s\r\nContent-Type: %s\r\n"
                    "Content-Range: bytes %llu-%llu/%llu\r\n\r\n",
                    boundary, type, (unsigned long long)range->start,
                    (unsigned long long)(range->start + range->len - 1),
                    (unsigned long long)whole);
}

int
corRangeEnd(char* out, const char* boundary)
{
    return snprintf(out, COR_RANGE_PART_HEAD_MAX, "\r\n--%s--\r\n", boundary);
}

uint64_t
corRangeMultipartLength(const char* boundary, const char* type,
                        const CorRange* ranges, unsigned count, uint64_t whole)
{
    char head[COR_RANGE_PART_HEAD_MAX];
    uint64_t total = (uint64_t)corRangeEnd(head, boundary);

    for (unsigned i = 0; i < count; i++) {
        total += (uint64_t)corRangePartHead(head, boundary, type, &ranges[i],
                                            whole)
                 + ranges[i].len;
    }
    return total;
}
