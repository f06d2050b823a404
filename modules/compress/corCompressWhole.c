/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gzip of a body whose bytes are all there before any goes out (a file,
 * a body in memory) and not long: libdeflate's deflate of one buffer
 * rather than zlib's stream. At the same level it makes the same format
 * and a slightly smaller answer for 0.61x zlib's instructions (callgrind,
 * a 100 KB page of words and 100 KB of one sentence repeated; see
 * docs/performance.md). A stream's body, whose flushes must go out as
 * they come, stays with zlib (corCompressCodec.c).
 */
#include "corCompressInt.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>

/* The body's bytes deflated in one go and passed on as one piece. */
static int
wholeDeflate(int level, const void* in, size_t len, CorFilterOut* out)
{
    struct libdeflate_compressor* c = libdeflate_alloc_compressor(level);
    unsigned char* buf = NULL;
    size_t made = 0;
    int rc;

    if (c != NULL) {
        size_t bound = libdeflate_gzip_compress_bound(c, len);

        buf = malloc(bound);
        if (buf != NULL) {
            made = libdeflate_gzip_compress(c, in, len, buf, bound);
        }
        libdeflate_free_compressor(c);
    }
    rc = buf == NULL ? -ENOMEM
         : made == 0 ? -EIO
                     : corFilterPass(out, buf, made);
    free(buf);
    return rc;
}

/* Keep len more bytes of the body (more than it said: the room grows). */
static int
wholeKeep(CompressEncoder* e, const void* data, size_t len)
{
    if (len > e->wholeCap - e->wholeLen || e->whole == NULL) {
        size_t cap = e->wholeLen + len > e->wholeCap ? e->wholeLen + len
                                                     : e->wholeCap;
        unsigned char* grown = realloc(e->whole, cap);

        if (grown == NULL) {
            return -ENOMEM;
        }
        e->whole = grown;
        e->wholeCap = cap;
    }
    memcpy(e->whole + e->wholeLen, data, len);
    e->wholeLen += len;
    return 0;
}

int
corCompressWholeEncode(CompressEncoder* e, const void* data, size_t len,
                       unsigned flags, CorFilterOut* out)
{
    bool last = (flags & COR_FILTER_LAST) != 0;

    /* A body in memory comes whole with its end: deflated where it is. */
    if (last && e->wholeLen == 0) {
        return wholeDeflate(e->level, data, len, out);
    }
    if (len > 0 && wholeKeep(e, data, len) != 0) {
        return -ENOMEM;
    }
    /* Such a body has no writer whose flush must go out: only its end
     * makes bytes. */
    return last ? wholeDeflate(e->level, e->whole, e->wholeLen, out) : 0;
}
