/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lookup table of a memory store kept across reloads: the items
 * (each a chunk of the zone's slab allocator, corCacheSlab.h, whatever
 * its user puts after the table's head) found by their key's hash, in
 * CACHE_TABLE_SHARDS shards each with a robust, process-shared lock, a
 * hash table and an LRU list, all offsets, in the same zone as the
 * chunks; the store's hold on an item is its count's store lane, an
 * answer's the lane of the generation that sends it. What a store of
 * the cache needs of it, not what its items mean: that is the caller's
 * (match callbacks).
 */
#ifndef COR_CACHE_TABLE_H
#define COR_CACHE_TABLE_H

#include "corCacheSlab.h"

#define CACHE_TABLE_SHARDS 16
/* The table's head of an item, before its user's bytes. */
#define CACHE_TABLE_HEAD 48

typedef struct CacheTableZone CacheTableZone;

typedef struct {
    CacheTableZone* zone;
    CacheSlab slab;
    uint64_t shardMost; /* each shard's part of the bytes */
} CacheTable;

/* Whether the item at its user bytes matches what arg names. */
typedef bool (*CacheTableMatch)(const void* item, const void* arg);

/* The table in zone (bytes long, from corZoneOpen): laid out anew
 * unless reused; this process takes its generation's lane. 0, or -1. */
int cacheTableOpen(CacheTable* t, void* zone, size_t bytes, bool reused);
void cacheTableClose(CacheTable* t);
/* An item of len user bytes for hash, not yet in the table, counted in
 * this generation's lane: the least recently used of its shard are
 * evicted (their count each) while none is free; 0 when none is still,
 * or when len is past a shard's part (it would never be inserted). */
uint64_t cacheTableAlloc(CacheTable* t, uint64_t hash, size_t len,
                         unsigned* evicted);
static inline void*
cacheTableAt(const CacheTable* t, uint64_t item)
{
    return cacheSlabAt(&t->slab, item + CACHE_TABLE_HEAD);
}
/* Item in its shard, the newest (order: larger is newer) of those that
 * same (matched with it) replaces; what it puts past the shard's part
 * evicted from the least recently used (counted in *evicted). false when
 * it alone is past it. The caller's count stays the caller's. */
bool cacheTableInsert(CacheTable* t, uint64_t item, int64_t order,
                      CacheTableMatch same, unsigned* evicted);
/* The newest item of hash that match takes, counted in this generation's
 * lane (cacheTableRelease it), now the most recently used; 0 none. */
uint64_t cacheTableFind(CacheTable* t, uint64_t hash, CacheTableMatch match,
                        const void* arg);
void cacheTableRelease(CacheTable* t, uint64_t item);
/* Every item of hash (or, hash 0, of every shard) that match takes out
 * of the table; how many. */
unsigned cacheTableRemove(CacheTable* t, uint64_t hash, CacheTableMatch match,
                          const void* arg);
/* Items and their bytes in the table. */
uint64_t cacheTableCount(CacheTable* t);
uint64_t cacheTableBytes(CacheTable* t);

#endif /* COR_CACHE_TABLE_H */
