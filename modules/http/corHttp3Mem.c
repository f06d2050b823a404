/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ngtcp2's and nghttp3's memory: the loop's cache of freed small blocks
 * (corHttpBlocks.c) before malloc. Why it exists: a request over HTTP/3
 * is eight of nghttp3's mallocs and as many frees (its stream, its
 * frames, the QPACK fields' buffers), with 100 streams of a connection
 * coming and going together, past glibc's per-thread cache of seven a
 * size; the loop is a thread, so the rest went to the arena's bins
 * behind its lock (the example server, one thread, takes none). A
 * connection lives and dies on its loop, and so does every block of its
 * libraries'.
 */
#include "corHttp3Int.h"

#include <stdlib.h>
#include <string.h>

static void*
memMalloc(size_t n, void* arg)
{
    return corHttpBlockTake(arg, n);
}

static void
memFree(void* p, void* arg)
{
    if (p != NULL) {
        corHttpBlockGive(arg, p);
    }
}

static void*
memCalloc(size_t count, size_t size, void* arg)
{
    void* p;

    if (size != 0 && count > SIZE_MAX / size) {
        return NULL;
    }
    p = corHttpBlockTake(arg, count * size);
    if (p != NULL) {
        memset(p, 0, count * size);
    }
    return p;
}

/* A cached block is one of malloc's: realloc takes it as it is. */
static void*
memRealloc(void* p, size_t n, void* arg)
{
    (void)arg;
    return realloc(p, n);
}

void
corHttp3MemInit(Http3Loop* h, HttpLoop* hl)
{
    h->quicMem = (ngtcp2_mem){ hl, memMalloc, memFree, memCalloc, memRealloc };
    h->h3Mem = (nghttp3_mem){ hl, memMalloc, memFree, memCalloc, memRealloc };
}
