/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Range header (RFC 9110 14.1.2): "bytes=0-99", "bytes=500-",
 * "bytes=-200", several separated by commas. The core's (corRange.h):
 * static answers ranges of files with it, cache of stored answers. Pure:
 * the unit test feeds it hostile values (tests/core/corRangeTest.c).
 *
 * What is not understood is ignored rather than refused (14.2 allows
 * either): another unit, bad syntax, a last before its first. Ranges that
 * ask for more bytes than the file has in all (overlaps: "0-,0-,0-" is a
 * way to make a small request cost a large answer) or more than
 * COR_RANGES_MAX of them get the whole file once, as nginx's
 * max_ranges does.
 */
#include "corRange.h"

#include <stdbool.h>
#include <strings.h>

/* A run of digits at *p (before end) as a number that saturates at
 * UINT64_MAX; false when there is no digit. */
static bool
numberRead(const char** p, const char* end, uint64_t* n)
{
    const char* start = *p;
    uint64_t v = 0;

    while (*p < end && **p >= '0' && **p <= '9') {
        unsigned d = (unsigned)(**p - '0');

        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
        (*p)++;
    }
    *n = v;
    return *p > start;
}

static const char*
spaceSkip(const char* p, const char* end)
{
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    return p;
}

typedef enum { SPEC_BAD, SPEC_OUTSIDE, SPEC_INSIDE } SpecKind;

/* One range-spec at *p: into *range when it starts inside the file. */
static SpecKind
specRead(const char** p, const char* end, uint64_t size, CorRange* range)
{
    uint64_t first;
    uint64_t last;

    if (*p < end && **p == '-') {
        (*p)++;
        /* A suffix: the last n bytes, all of a shorter file. */
        if (!numberRead(p, end, &last)) {
            return SPEC_BAD;
        }
        if (last == 0 || size == 0) {
            return SPEC_OUTSIDE;
        }
        range->start = last >= size ? 0 : size - last;
        range->len = size - range->start;
        return SPEC_INSIDE;
    }
    if (!numberRead(p, end, &first) || *p == end || **p != '-') {
        return SPEC_BAD;
    }
    (*p)++;
    if (!numberRead(p, end, &last)) {
        last = UINT64_MAX; /* "first-": to the end */
    } else if (last < first) {
        return SPEC_BAD;
    }
    if (first >= size) {
        return SPEC_OUTSIDE;
    }
    range->start = first;
    range->len = (last >= size - 1 ? size - 1 : last) - first + 1;
    return SPEC_INSIDE;
}

CorRangeResult
corRangeParse(const char* value, size_t len, uint64_t size, CorRange* out,
              unsigned* count)
{
    const char* p = value;
    const char* end = value + len;
    unsigned specs = 0;
    uint64_t total = 0;

    *count = 0;
    p = spaceSkip(p, end);
    if (end - p < 6 || strncasecmp(p, "bytes=", 6) != 0) {
        return COR_RANGE_WHOLE;
    }
    p += 6;
    /* 1#range-spec: empty elements and blanks around commas allowed. */
    while (p < end) {
        CorRange range;
        SpecKind kind;

        p = spaceSkip(p, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p == end) {
            break;
        }
        kind = specRead(&p, end, size, &range);
        p = spaceSkip(p, end);
        if (kind == SPEC_BAD || (p < end && *p != ',')) {
            return COR_RANGE_WHOLE;
        }
        specs++;
        if (kind == SPEC_OUTSIDE) {
            continue;
        }
        if (*count == COR_RANGES_MAX) {
            return COR_RANGE_WHOLE;
        }
        total += range.len;
        if (total > size) {
            return COR_RANGE_WHOLE;
        }
        out[(*count)++] = range;
    }
    if (specs == 0) {
        return COR_RANGE_WHOLE;
    }
    return *count > 0 ? COR_RANGE_PARTIAL : COR_RANGE_UNSATISFIABLE;
}
