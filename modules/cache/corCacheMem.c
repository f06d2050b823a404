/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a store's entries live: a zone of the core's (corZoneOpen) of
 * its `memory` bytes, so that a reload's next generation finds the
 * entries the last one stored (and both use them while they overlap),
 * as the disk index's zone is found again (corCacheIndex.c). The zone
 * holds the lookup table and the slab allocator the entries are cut
 * from (corCacheTable.c, corCacheSlab.c); a changed `memory` or layout
 * (the tag) starts a fresh one. An entry in a zone is released by its
 * address alone (cacheEntryRelease does not know its store), so the
 * zones this process opened are kept here, to find each entry's.
 */
#include "corCacheInt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* The layout's version: a build whose entries differ starts afresh. */
#define MEM_VERSION 1
#define MEM_STORES_MOST 64

/* The stores whose zones this process maps (opened at the module's
 * init, before any loop runs: read without a lock after). */
static CacheStore* opened[MEM_STORES_MOST];
static unsigned openedCount;

static uint64_t
zoneTag(const CacheStore* s)
{
    uint64_t layout[] = {
        MEM_VERSION,      sizeof(CacheEntry),      sizeof(CacheField),
        CACHE_TABLE_HEAD, sizeof(pthread_mutex_t), s->memory
    };

    return cacheHash((const char*)layout, sizeof(layout));
}

/* A zone of this generation's own (no memfd, or every lane of the kept
 * one taken by a generation still alive): fresh, handed to none. */
static void*
zoneOwn(size_t bytes)
{
    void* z = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    return z != MAP_FAILED ? z : NULL;
}

int
cacheMemOpen(CacheStore* s)
{
    char name[64];
    bool reused = false;

    if (openedCount == MEM_STORES_MOST) {
        errno = ENFILE;
        return -1;
    }
    snprintf(name, sizeof(name), "cachemem:%s", s->name);
    s->zone = corZoneOpen(name, s->memory, zoneTag(s), &reused);
    if (s->zone != NULL
        && cacheTableOpen(&s->table, s->zone, s->memory, reused) != 0) {
        corLog(COR_LOG_WARN,
               "cache %s: its kept entries cannot be shared (%s): this "
               "generation starts an empty store of its own",
               s->name,
               reused ? "every generation using them is alive"
                      : "memory too small");
        corZoneClose(s->zone, s->memory);
        s->zone = NULL;
        reused = false;
        s->zoneOwn = zoneOwn(s->memory);
        if (s->zoneOwn == NULL
            || cacheTableOpen(&s->table, s->zoneOwn, s->memory, false) != 0) {
            return -1;
        }
    }
    if (s->zone == NULL && s->zoneOwn == NULL) {
        return -1;
    }
    s->zoneKept = reused;
    s->shardMost = s->memory / CACHE_TABLE_SHARDS;
    s->table.shardMost = s->shardMost;
    opened[openedCount++] = s;
    return 0;
}

void
cacheMemClose(CacheStore* s)
{
    for (unsigned i = 0; i < openedCount; i++) {
        if (opened[i] == s) {
            opened[i] = opened[--openedCount];
            break;
        }
    }
    if (s->zone == NULL && s->zoneOwn == NULL) {
        return;
    }
    cacheTableClose(&s->table);
    if (s->zone != NULL) {
        corZoneClose(s->zone, s->memory);
    } else {
        munmap(s->zoneOwn, s->memory);
    }
    s->zone = s->zoneOwn = NULL;
}

/* The store whose zone holds e, and e's item there. */
static CacheTable*
tableOf(const CacheEntry* e, uint64_t* item)
{
    for (unsigned i = 0; i < openedCount; i++) {
        CacheStore* s = opened[i];
        const char* base = s->zone != NULL ? s->zone : s->zoneOwn;

        if ((const char*)e >= base && (const char*)e < base + s->memory) {
            *item = (uint64_t)((const char*)e - CACHE_TABLE_HEAD
                               - s->table.slab.base);
            return &s->table;
        }
    }
    return NULL;
}

void
cacheMemRef(CacheEntry* e)
{
    uint64_t item;
    CacheTable* t = tableOf(e, &item);

    if (t != NULL) {
        cacheSlabRef(&t->slab, item, t->slab.lane);
    }
}

void
cacheMemRelease(CacheEntry* e)
{
    uint64_t item;
    CacheTable* t = tableOf(e, &item);

    if (t != NULL) {
        cacheTableRelease(t, item);
    }
}
