/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The layout of the disk index's zone (corCacheIndex.c), apart so that a
 * test can map a running server's zone and hold its locks as a process
 * that dies would (corCacheDiskTest). The zone is, after the core's
 * header page: this head, each shard's buckets (slot numbers), then each
 * shard's slots. Change it and INDEX_VERSION (corCacheIndex.c) goes up.
 */
#ifndef COR_CACHE_INDEX_ZONE_H
#define COR_CACHE_INDEX_ZONE_H

#include "corCacheInt.h"

/* A slot's flags: it holds a file; the repair's marks. */
enum { SLOT_USED = 1, SLOT_WALKED = 2, SLOT_PLACED = 4 };

struct CacheIndexEntry {
    uint64_t hash;    /* of the key */
    uint64_t variant; /* of its Vary block: one file a variant */
    uint64_t id;      /* names its file, with the hash */
    uint64_t size;    /* the file's bytes */
    uint32_t chain;   /* the next slot of its bucket */
    uint32_t newer;   /* its LRU neighbours' slots */
    uint32_t older;
    uint32_t flags;
};

_Static_assert(sizeof(CacheIndexEntry) == 48, "an index entry is 48 bytes");

struct CacheIndexShard {
    pthread_mutex_t lock; /* robust, process-shared */
    uint32_t newest;
    uint32_t oldest;
    uint32_t free;  /* a list through chain */
    uint32_t taken; /* slots handed out at least once: 1..taken */
    uint32_t count;
    uint32_t unused;
    uint64_t bytes;
    uint64_t removals; /* purges and invalidations so far: a write that
                          saw fewer when it was asked for is dropped */
};

typedef struct {
    uint32_t slots;         /* a shard's */
    uint32_t buckets;       /* a shard's, a power of two */
    _Atomic uint32_t whole; /* a scan of the folder went to its end */
    uint32_t unused;
    CacheIndexShard shards[CACHE_SHARDS];
    /* then each shard's buckets (uint32_t), then each shard's slots */
} CacheIndexZone;

#endif
