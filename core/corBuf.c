/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Growable byte buffers with a consume offset (corKit.h): the one growth
 * rule for what encoders append to and connections read into. No loop and
 * no I/O, so the codecs and the tools link it alone.
 */
#include "corKit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The first size of a buffer that grows by doubling. */
#define BUF_FIRST 256

int
corBufReserve(CorBuf* b, size_t n)
{
    size_t cap = b->cap == 0 ? BUF_FIRST : b->cap;

    if (n <= b->cap - b->len) {
        return 0;
    }
    if (n > SIZE_MAX / 2 - b->len) {
        return -ENOMEM;
    }
    while (cap - b->len < n) {
        cap *= 2;
    }
    return corBufGrowTo(b, cap);
}

int
corBufGrowTo(CorBuf* b, size_t cap)
{
    uint8_t* data;

    if (cap <= b->cap) {
        return 0;
    }
    data = realloc(b->data, cap);
    if (data == NULL) {
        return -ENOMEM;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

int
corBufAppend(CorBuf* b, const void* p, size_t n)
{
    if (corBufReserve(b, n) != 0) {
        return -ENOMEM;
    }
    if (n > 0) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
    return 0;
}

void
corBufCompact(CorBuf* b)
{
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
}

void
corBufFree(CorBuf* b)
{
    free(b->data);
    *b = (CorBuf){ 0 };
}
