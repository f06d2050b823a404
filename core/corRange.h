/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corRange.h: the Range header's byte ranges (RFC 9110 14.1.2). The
 * core's, for every module that answers a part of what it has (static,
 * of a file; cache, of a stored answer), so that none depends on another
 * for it; corModule.h includes it.
 */
#ifndef COR_RANGE_H
#define COR_RANGE_H

#include <stddef.h>
#include <stdint.h>

/* The most ranges one request may ask for: more, and the whole is sent
 * (RFC 9110 14.2 lets a server ignore a Range it finds abusive). */
#define COR_RANGES_MAX 16

/* Bytes [start, start + len) of the whole. */
typedef struct {
    uint64_t start;
    uint64_t len;
} CorRange;

typedef enum {
    COR_RANGE_WHOLE,        /* ignore the header: send all (another unit,
                               bad syntax, too many ranges, or more bytes
                               than the whole has) */
    COR_RANGE_PARTIAL,      /* 206 with the ranges */
    COR_RANGE_UNSATISFIABLE /* 416: none starts inside the whole */
} CorRangeResult;

/*
 * Parse a Range value, value[0..len), for a whole of size bytes, into at
 * most COR_RANGES_MAX ranges of out (in the order asked; the ones that
 * start past the end are left out, and the others cut at the end) with
 * their number in *count. Any input is safe: numbers of any length
 * saturate, and nothing is read past len.
 */
CorRangeResult corRangeParse(const char* value, size_t len, uint64_t size,
                             CorRange* out, unsigned* count);

/*
 * A multipart/byteranges body (RFC 9110 14.6, corRangeParts.c): a
 * boundary (out of at least 40 bytes), each part's head before its bytes
 * (into out, COR_RANGE_PART_HEAD_MAX; type the whole's Content-Type) and
 * the end after the last (the same), each returning its length; and the
 * whole body's length, to say before its first byte.
 */
#define COR_RANGE_PART_HEAD_MAX 512

void corRangeBoundary(char* out, size_t size);
int corRangePartHead(char* out, const char* boundary, const char* type,
                     const CorRange* range, uint64_t whole);
int corRangeEnd(char* out, const char* boundary);
uint64_t corRangeMultipartLength(const char* boundary, const char* type,
                                 const CorRange* ranges, unsigned count,
                                 uint64_t whole);

#endif /* COR_RANGE_H */
