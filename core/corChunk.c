/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Blocks of memory a request takes and gives back by the dozen (its
 * arena's chunks, a cor:// request, a client's exchange), kept per
 * thread by size class.
 *
 * glibc keeps seven freed blocks of a size per thread (its tcache); a
 * loop with sixteen requests in flight frees more than seven of each
 * size at a time, and the rest go through its bins: under callgrind a
 * forwarding cor:// server spent 15 % of its instructions in malloc and
 * free, most of them there. Here a thread keeps up to CLASS_KEEP_BYTES
 * of each class, so that what one turn frees the next one takes, with
 * no lock and no search. A block given back on another thread than the
 * one that took it (a request that finished on a worker) simply joins
 * that thread's list.
 *
 * Builds with AddressSanitizer keep nothing: a block must be freed for
 * real for a use after its release to be caught.
 */
#include "corKit.h"

#include <pthread.h>
#include <stdlib.h>

#define CLASS_SMALLEST 128
#define CLASS_COUNT 7 /* 128, 256, 512, 1 Ki ... 8 Ki */
#define CLASS_KEEP_BYTES (64 * 1024)

#if defined(__SANITIZE_ADDRESS__)
#define CHUNK_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHUNK_CACHE 0
#endif
#endif
#ifndef CHUNK_CACHE
#define CHUNK_CACHE 1
#endif

typedef struct Kept {
    struct Kept* next;
} Kept;

typedef struct {
    Kept* head[CLASS_COUNT];
    unsigned count[CLASS_COUNT];
    bool registered;
} Cache;

static __thread Cache cache;
static pthread_key_t cacheKey;
static pthread_once_t cacheOnce = PTHREAD_ONCE_INIT;

/* A thread that ends gives its blocks back to malloc. A block given
 * after this (by another key's destructor) registers the cache again,
 * which runs this once more. */
static void
cacheEnd(void* arg)
{
    Cache* c = arg;

    c->registered = false;

    for (unsigned i = 0; i < CLASS_COUNT; i++) {
        while (c->head[i] != NULL) {
            Kept* next = c->head[i]->next;

            free(c->head[i]);
            c->head[i] = next;
        }
        c->count[i] = 0;
    }
}

static void
cacheKeyMake(void)
{
    pthread_key_create(&cacheKey, cacheEnd);
}

/* The class of a block of size bytes, or -1 past the largest. */
static inline int
classOf(size_t size)
{
    int i = size <= CLASS_SMALLEST
                ? 0
                : 64 - __builtin_clzll((unsigned long long)size - 1)
                      - __builtin_ctzll(CLASS_SMALLEST);

    return i < CLASS_COUNT ? i : -1;
}

size_t
corChunkSize(size_t size)
{
    int i = classOf(size);

    return i < 0 ? size : (size_t)CLASS_SMALLEST << i;
}

void*
corChunkTake(size_t* sizeP)
{
    int i = classOf(*sizeP);

    if (i < 0) {
        return malloc(*sizeP);
    }
    *sizeP = (size_t)CLASS_SMALLEST << i;
    if (CHUNK_CACHE && cache.head[i] != NULL) {
        Kept* block = cache.head[i];

        cache.head[i] = block->next;
        cache.count[i]--;
        return block;
    }
    return malloc(*sizeP);
}

void
corChunkGive(void* block, size_t size)
{
    int i;

    if (block == NULL) {
        return;
    }
    i = classOf(size);
    /* Only a block of exactly a class's size came from corChunkTake's
     * classes; any other size is malloc's. */
    if (!CHUNK_CACHE || i < 0 || size != (size_t)CLASS_SMALLEST << i
        || (cache.count[i] + 1) * size > CLASS_KEEP_BYTES) {
        free(block);
        return;
    }
    if (!cache.registered) {
        pthread_once(&cacheOnce, cacheKeyMake);
        pthread_setspecific(cacheKey, &cache);
        cache.registered = true;
    }
    ((Kept*)block)->next = cache.head[i];
    cache.head[i] = block;
    cache.count[i]++;
}
