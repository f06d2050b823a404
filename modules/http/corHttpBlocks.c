/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A loop's cache of freed small blocks, for the libraries that allocate
 * and free a few of them a request: nghttp2 (corHttp2Mem.c), ngtcp2 and
 * nghttp3 (corHttp3Mem.c). Why it exists: a connection's streams of a
 * turn come and go together, past glibc's per-thread cache of seven a
 * size, and the rest went to its bins behind the arena's lock (1 000
 * instructions a request over HTTP/2; over HTTP/3, 100 streams at once,
 * more). The cache is the loop's, so no lock.
 *
 * A block is filed by its size as glibc says it (malloc_usable_size:
 * the libraries' free says none), so a kept block is one of malloc's, as
 * large as any request filed under it needs; realloc and free take it
 * as they take any of malloc's.
 */
#include "corHttpInt.h"

#include <malloc.h>
#include <stdlib.h>

/* glibc's chunks: a block's size and its header's, the smallest. */
#define CHUNK_STEP 16
#define CHUNK_HEAD 8
#define CHUNK_MIN 32

/* Under a sanitizer every block is malloc's, so that a use after its
 * free is seen. */
#if defined(__SANITIZE_ADDRESS__)
#define BLOCKS_CACHED false
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCKS_CACHED false
#endif
#endif
#ifndef BLOCKS_CACHED
#define BLOCKS_CACHED true
#endif

/* The cache's class of a glibc chunk of chunk bytes, or -1. */
static inline int
classOf(size_t chunk)
{
    size_t i = chunk / CHUNK_STEP - CHUNK_MIN / CHUNK_STEP;

    return i < HTTP_BLOCK_CLASSES ? (int)i : -1;
}

void*
corHttpBlockTake(HttpLoop* hl, size_t n)
{
    size_t chunk = (n + CHUNK_HEAD + CHUNK_STEP - 1)
                   & ~(size_t)(CHUNK_STEP - 1);
    int i = classOf(chunk < CHUNK_MIN ? CHUNK_MIN : chunk);
    void** head = i >= 0 ? &hl->blocks[i] : NULL;

    if (head != NULL && *head != NULL) {
        void* p = *head;

        *head = *(void**)p;
        hl->blockCount[i]--;
        return p;
    }
    return malloc(n);
}

void
corHttpBlockGive(HttpLoop* hl, void* p)
{
    int i = BLOCKS_CACHED && !hl->h2StreamsClosed
                ? classOf(malloc_usable_size(p) + CHUNK_HEAD)
                : -1;

    if (i < 0 || hl->blockCount[i] >= HTTP_BLOCKS_KEPT) {
        free(p);
        return;
    }
    *(void**)p = hl->blocks[i];
    hl->blocks[i] = p;
    hl->blockCount[i]++;
}

void
corHttpBlocksEnd(HttpLoop* hl)
{
    hl->h2StreamsClosed = true; /* what is freed after goes to malloc */
    for (unsigned i = 0; i < HTTP_BLOCK_CLASSES; i++) {
        while (hl->blocks[i] != NULL) {
            void* p = hl->blocks[i];

            hl->blocks[i] = *(void**)p;
            free(p);
        }
        hl->blockCount[i] = 0;
    }
}
