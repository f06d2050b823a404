/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A size-class (slab) allocator in a zone (corZoneOpen), for a memory
 * store whose entries outlive a generation: every process of the
 * instance maps the zone where it may, so what it hands out are
 * offsets, never pointers, and what it keeps of itself is offsets too.
 * Each chunk carries the count of the references to it, one 16-bit lane
 * for the store and one for each generation that uses the zone, so that
 * a generation killed with answers in flight leaves counts the next one
 * can drop (its lane), and no process frees a chunk another still sends.
 * docs/cache.md, "A memory store across a reload", says why it is so.
 */
#ifndef COR_CACHE_SLAB_H
#define COR_CACHE_SLAB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The lanes of a chunk's count: the store's, then the generations'. */
#define CACHE_SLAB_STORE 0
#define CACHE_SLAB_LANES 4

typedef struct CacheSlabZone CacheSlabZone;

/* A zone as this process maps it. */
typedef struct {
    CacheSlabZone* zone;
    char* base;
    unsigned lane; /* this generation's lane of every count */
} CacheSlab;

/* A mutex that processes share and that a death does not leave locked
 * (EOWNERDEAD to the next locker, who repairs what it guards). */
int cacheRobustLockInit(pthread_mutex_t* m);

/* The allocator of zone (bytes long): laid out anew unless reused; this
 * process takes a generation's lane, and the counts of generations gone
 * (dead, or a zombie) are dropped first, freeing what only they held.
 * 0, or -1 (the zone too small, or every lane's generation alive). */
int cacheSlabOpen(CacheSlab* s, void* zone, size_t bytes, bool reused);
/* This generation's lane let go (what it still counts is dropped by the
 * next one to open the zone). */
void cacheSlabClose(CacheSlab* s);

/* A chunk of at least len bytes, counted once in this generation's
 * lane, its first CACHE_SLAB_ZEROED bytes zero (a head its user writes,
 * never what the memory held before); 0 when none is free (the caller
 * evicts and asks again). */
#define CACHE_SLAB_ZEROED 48
uint64_t cacheSlabAlloc(CacheSlab* s, size_t len);
/* Where chunk off is in this process. */
static inline void*
cacheSlabAt(const CacheSlab* s, uint64_t off)
{
    return s->base + off;
}
/* One more reference of lane to chunk off; false when its lane is full
 * (the caller does without it). */
bool cacheSlabRef(CacheSlab* s, uint64_t off, unsigned lane);
/* One reference of lane to off let go: the chunk is freed with the last
 * of all lanes (true then). */
bool cacheSlabRelease(CacheSlab* s, uint64_t off, unsigned lane);
/* fn(off) for each chunk handed out, under the allocator's lock (what
 * a repair of its user walks: no chunk is taken or freed meanwhile).
 * fn may not allocate nor free. */
void cacheSlabEach(CacheSlab* s,
                   void (*fn)(CacheSlab* s, uint64_t off, void* arg),
                   void* arg);
/* Lane's count of off, now. */
uint64_t cacheSlabRefs(const CacheSlab* s, uint64_t off, unsigned lane);
/* The bytes of chunks handed out, and the most there can be. */
uint64_t cacheSlabUsed(const CacheSlab* s);
uint64_t cacheSlabCapacity(const CacheSlab* s);
/* The largest len cacheSlabAlloc can give. */
uint64_t cacheSlabLargest(const CacheSlab* s);

#endif /* COR_CACHE_SLAB_H */
