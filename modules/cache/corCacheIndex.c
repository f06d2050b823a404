/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk store's index, in a zone of the core's (corZoneOpen) so that
 * it outlives a generation: after a reload the new generation finds it
 * as the old one left it (no scan of the folder, the least recently
 * used order kept), and both use it while they overlap, the old one
 * finishing its answers (and writing the files it was asked for), the
 * new one serving. Per shard: a robust, process-shared mutex, a hash
 * table of slot numbers, the entries (48 bytes each: which file, its
 * variant, its size, its links) and their LRU list, all offsets, never
 * pointers (each process maps the zone where it may). A process that
 * dies holding a shard's lock (a generation killed mid-operation) leaves
 * it to the next locker as EOWNERDEAD: that one rebuilds the shard's
 * table, list and free slots from the entries themselves (repair below)
 * before it goes on. The zone is fixed in size (from the store's size),
 * so a shard whose slots are all taken lets its least recently used
 * file go, as nginx's keys zone does when it is full.
 */
#include "corCacheIndexZone.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layout's version: a build whose zone differs starts a fresh one. */
#define INDEX_VERSION 1
/* A slot for every so many bytes of the store's size: a store of small
 * answers keeps fewer files than size allows past it. */
#define INDEX_BYTES_A_FILE 2048
#define INDEX_SLOTS_LEAST 64
#define INDEX_SLOTS_MOST ((uint32_t)1 << 22)

static uint32_t
slotsOf(uint64_t size)
{
    uint64_t slots = size / INDEX_BYTES_A_FILE / CACHE_SHARDS;

    if (slots < INDEX_SLOTS_LEAST) {
        return INDEX_SLOTS_LEAST;
    }
    return slots > INDEX_SLOTS_MOST ? INDEX_SLOTS_MOST : (uint32_t)slots;
}

static uint32_t
bucketsOf(uint32_t slots)
{
    uint32_t n = 1;

    while (n < slots) {
        n <<= 1;
    }
    return n;
}

static size_t
zoneBytes(uint32_t slots, uint32_t buckets)
{
    return sizeof(CacheIndexZone)
           + (size_t)CACHE_SHARDS
                 * (buckets * sizeof(uint32_t)
                    + slots * sizeof(CacheIndexEntry));
}

static CacheIndexEntry*
at(CacheDiskShard* d, uint32_t slot)
{
    return &d->entries[slot - 1];
}

static uint32_t*
bucketOf(CacheDiskShard* d, uint64_t hash)
{
    return &d->buckets[hash & d->bucketMask];
}

/* ---- Links (the shard locked) -------------------------------------------- */

static void
lruOut(CacheDiskShard* d, uint32_t slot)
{
    CacheIndexShard* z = d->zone;
    CacheIndexEntry* e = at(d, slot);

    if (e->newer != 0) {
        at(d, e->newer)->older = e->older;
    } else {
        z->newest = e->older;
    }
    if (e->older != 0) {
        at(d, e->older)->newer = e->newer;
    } else {
        z->oldest = e->newer;
    }
    e->newer = e->older = 0;
}

static void
lruFront(CacheDiskShard* d, uint32_t slot)
{
    CacheIndexShard* z = d->zone;
    CacheIndexEntry* e = at(d, slot);

    e->newer = 0;
    e->older = z->newest;
    if (z->newest != 0) {
        at(d, z->newest)->newer = slot;
    } else {
        z->oldest = slot;
    }
    z->newest = slot;
}

static void
lruBack(CacheDiskShard* d, uint32_t slot)
{
    CacheIndexShard* z = d->zone;
    CacheIndexEntry* e = at(d, slot);

    e->older = 0;
    e->newer = z->oldest;
    if (z->oldest != 0) {
        at(d, z->oldest)->older = slot;
    } else {
        z->newest = slot;
    }
    z->oldest = slot;
}

static void
chainIn(CacheDiskShard* d, uint32_t slot)
{
    uint32_t* bucket = bucketOf(d, at(d, slot)->hash);

    at(d, slot)->chain = *bucket;
    *bucket = slot;
}

static void
chainOut(CacheDiskShard* d, uint32_t slot)
{
    uint32_t* link = bucketOf(d, at(d, slot)->hash);

    while (*link != 0 && *link != slot) {
        link = &at(d, *link)->chain;
    }
    if (*link == slot) {
        *link = at(d, slot)->chain;
    }
}

void
cacheGoneAdd(CacheGone* gone, uint64_t hash, uint64_t id)
{
    if (gone->count == gone->cap) {
        size_t cap = gone->cap > 0 ? gone->cap * 2 : 8;
        CacheFileId* grown = realloc(gone->files, cap * sizeof(*grown));

        if (grown == NULL) {
            return; /* the file stays, unknown: the next start's scan */
        }
        gone->files = grown;
        gone->cap = cap;
    }
    gone->files[gone->count++] = (CacheFileId){ .hash = hash, .id = id };
}

/* Slot out of the index, its file added to gone (when not NULL). The
 * slot is marked free last: a process that dies before leaves an entry
 * whose file is still there, which the repair puts back. */
static void
slotFree(CacheStore* s, CacheDiskShard* d, uint32_t slot, CacheGone* gone)
{
    CacheIndexShard* z = d->zone;
    CacheIndexEntry* e = at(d, slot);

    chainOut(d, slot);
    lruOut(d, slot);
    z->count--;
    z->bytes -= e->size;
    atomic_fetch_sub(&s->counters.diskBytes, (long long)e->size);
    atomic_fetch_sub(&s->counters.diskEntries, 1);
    if (gone != NULL) {
        cacheGoneAdd(gone, e->hash, e->id);
    }
    e->flags = 0;
    e->chain = z->free;
    z->free = slot;
}

static void
evictOldest(CacheStore* s, CacheDiskShard* d, CacheGone* gone)
{
    slotFree(s, d, d->zone->oldest, gone);
    atomic_fetch_add(&s->counters.diskEvictions, 1);
}

/* A free slot: a freed one, one never used, or the least recently used
 * file's (the shard's slots all taken); 0 when none. */
static uint32_t
slotTake(CacheStore* s, CacheDiskShard* d, CacheGone* gone)
{
    CacheIndexShard* z = d->zone;
    uint32_t slot;

    if (z->free == 0 && z->taken < d->slots) {
        return ++z->taken;
    }
    if (z->free == 0 && z->oldest != 0) {
        evictOldest(s, d, gone);
    }
    slot = z->free;
    if (slot != 0) {
        z->free = at(d, slot)->chain;
    }
    return slot;
}

/* ---- The lock, and its repair -------------------------------------------- */

/*
 * The shard rebuilt from its slots, after a process died holding its
 * lock anywhere in an operation: the LRU list as far as it holds (from
 * the newest, each slot a used one seen once), then every other used
 * slot at its old end; the buckets, the free slots, the count and the
 * bytes made again from them. A process killed in it leaves the next
 * locker EOWNERDEAD again, and this done again. Returns the files it
 * holds.
 */
static uint32_t
repair(CacheDiskShard* d)
{
    CacheIndexShard* z = d->zone;
    uint32_t start = z->newest;
    uint32_t slot;

    if (z->taken > d->slots) {
        z->taken = d->slots;
    }
    /* The marks of a repair whose process died in it, cleared: this one
     * starts again from the entries. */
    for (slot = 1; slot <= z->taken; slot++) {
        at(d, slot)->flags &= SLOT_USED;
    }
    for (slot = start;
         slot != 0 && slot <= z->taken
         && (at(d, slot)->flags & (SLOT_USED | SLOT_WALKED)) == SLOT_USED;
         slot = at(d, slot)->older) {
        at(d, slot)->flags |= SLOT_WALKED;
    }
    memset(d->buckets, 0, ((size_t)d->bucketMask + 1) * sizeof(uint32_t));
    z->newest = z->oldest = z->free = 0;
    z->count = 0;
    z->bytes = 0;
    for (slot = start; slot != 0 && slot <= z->taken
                       && (at(d, slot)->flags & (SLOT_WALKED | SLOT_PLACED))
                              == SLOT_WALKED;) {
        uint32_t older = at(d, slot)->older;

        at(d, slot)->flags |= SLOT_PLACED;
        lruBack(d, slot);
        slot = older;
    }
    for (slot = z->taken; slot >= 1; slot--) {
        CacheIndexEntry* e = at(d, slot);

        if ((e->flags & SLOT_USED) && !(e->flags & SLOT_PLACED)) {
            lruBack(d, slot);
        }
        if (e->flags & SLOT_USED) {
            e->flags = SLOT_USED;
            chainIn(d, slot);
            z->count++;
            z->bytes += e->size;
        } else {
            e->flags = 0;
            e->chain = z->free;
            z->free = slot;
        }
    }
    return z->count;
}

/* The shard of hash locked: 0, or -1 (no disk, or a lock past use). */
static int
lockShard(CacheDiskShard* d)
{
    int rc;

    if (d->zone == NULL) {
        return -1;
    }
    rc = pthread_mutex_lock(&d->zone->lock);
    if (rc == EOWNERDEAD) {
        uint32_t files = repair(d);

        pthread_mutex_consistent(&d->zone->lock);
        corLog(COR_LOG_WARN,
               "cache: a process died holding a lock of the disk index: "
               "its shard was rebuilt from its %u entries",
               files);
        return 0;
    }
    return rc == 0 ? 0 : -1;
}

static void
unlockShard(CacheDiskShard* d)
{
    pthread_mutex_unlock(&d->zone->lock);
}

static CacheDiskShard*
diskOf(CacheStore* s, uint64_t hash)
{
    return &cacheShardOf(s, hash)->disk;
}

/* ---- What the store asks ------------------------------------------------- */

int
cacheIndexPut(CacheStore* s, const CacheFileId* f, uint64_t variant,
              uint64_t size, bool replace, uint64_t removals, CacheGone* gone)
{
    CacheDiskShard* d = diskOf(s, f->hash);
    CacheIndexShard* z = d->zone;
    uint32_t slot;
    CacheIndexEntry* e;

    if (lockShard(d) != 0) {
        return INDEX_OLDER;
    }
    if (removals != UINT64_MAX && removals != z->removals) {
        unlockShard(d);
        return INDEX_OLDER;
    }
    for (uint32_t old = *bucketOf(d, f->hash), next; old != 0; old = next) {
        next = at(d, old)->chain;
        if (at(d, old)->hash == f->hash && at(d, old)->variant == variant) {
            if (!replace) {
                int rc = at(d, old)->id == f->id ? INDEX_SAME : INDEX_OLDER;

                unlockShard(d);
                return rc;
            }
            slotFree(s, d, old, gone);
        }
    }
    slot = slotTake(s, d, gone);
    if (slot == 0) {
        unlockShard(d);
        return INDEX_OLDER;
    }
    e = at(d, slot);
    *e = (CacheIndexEntry){
        .hash = f->hash, .variant = variant, .id = f->id, .size = size
    };
    /* Used first, linked after: a process that dies between leaves an
     * entry the repair links. */
    e->flags = SLOT_USED;
    chainIn(d, slot);
    lruFront(d, slot);
    z->count++;
    z->bytes += size;
    atomic_fetch_add(&s->counters.diskBytes, (long long)size);
    atomic_fetch_add(&s->counters.diskEntries, 1);
    while (z->bytes > s->diskShardMost && z->count > 1) {
        evictOldest(s, d, gone);
    }
    unlockShard(d);
    return INDEX_PUT;
}

void
cacheIndexForget(CacheStore* s, const CacheFileId* f, bool error)
{
    CacheDiskShard* d = diskOf(s, f->hash);

    if (lockShard(d) != 0) {
        return;
    }
    for (uint32_t slot = *bucketOf(d, f->hash); slot != 0;
         slot = at(d, slot)->chain) {
        if (at(d, slot)->hash == f->hash && at(d, slot)->id == f->id) {
            slotFree(s, d, slot, NULL);
            break;
        }
    }
    d->zone->removals += !error;
    unlockShard(d);
}

unsigned
cacheIndexFind(CacheStore* s, uint64_t hash, uint64_t* ids, unsigned most)
{
    CacheDiskShard* d = diskOf(s, hash);
    unsigned n = 0;

    if (lockShard(d) != 0) {
        return 0;
    }
    for (uint32_t slot = *bucketOf(d, hash); slot != 0 && n < most;
         slot = at(d, slot)->chain) {
        if (at(d, slot)->hash == hash) {
            ids[n++] = at(d, slot)->id;
            lruOut(d, slot);
            lruFront(d, slot);
        }
    }
    unlockShard(d);
    return n;
}

void
cacheIndexTouch(CacheShard* shard, uint64_t hash, uint64_t variant)
{
    CacheDiskShard* d = &shard->disk;

    if (lockShard(d) != 0) {
        return;
    }
    for (uint32_t slot = *bucketOf(d, hash); slot != 0;
         slot = at(d, slot)->chain) {
        if (at(d, slot)->hash == hash && at(d, slot)->variant == variant) {
            lruOut(d, slot);
            lruFront(d, slot);
            break;
        }
    }
    unlockShard(d);
}

unsigned
cacheIndexRemove(CacheStore* s, uint64_t hash, CacheGone* gone)
{
    CacheDiskShard* d = diskOf(s, hash);
    unsigned n = 0;

    if (lockShard(d) != 0) {
        return 0;
    }
    for (uint32_t slot = *bucketOf(d, hash), next; slot != 0; slot = next) {
        next = at(d, slot)->chain;
        if (at(d, slot)->hash == hash) {
            slotFree(s, d, slot, gone);
            n++;
        }
    }
    d->zone->removals++;
    unlockShard(d);
    return n;
}

size_t
cacheIndexFiles(CacheStore* s, unsigned i, CacheFileId** filesP)
{
    CacheDiskShard* d = &s->shards[i].disk;
    size_t n = 0;

    *filesP = NULL;
    if (lockShard(d) != 0) {
        return 0;
    }
    *filesP = malloc(((size_t)d->zone->count + 1) * sizeof(**filesP));
    for (uint32_t slot = d->zone->newest; *filesP != NULL && slot != 0;
         slot = at(d, slot)->older) {
        (*filesP)[n++] = (CacheFileId){ .hash = at(d, slot)->hash,
                                        .id = at(d, slot)->id };
    }
    unlockShard(d);
    return n;
}

uint64_t
cacheIndexRemovals(CacheStore* s, uint64_t hash)
{
    CacheDiskShard* d = diskOf(s, hash);
    uint64_t removals;

    if (lockShard(d) != 0) {
        return 0;
    }
    removals = d->zone->removals;
    unlockShard(d);
    return removals;
}

bool
cacheIndexUse(CacheStore* s, const CacheFileId* f)
{
    CacheDiskShard* d = diskOf(s, f->hash);
    bool found = false;

    if (lockShard(d) != 0) {
        return false;
    }
    for (uint32_t slot = *bucketOf(d, f->hash); slot != 0 && !found;
         slot = at(d, slot)->chain) {
        if (at(d, slot)->hash == f->hash && at(d, slot)->id == f->id) {
            lruOut(d, slot);
            lruFront(d, slot);
            found = true;
        }
    }
    unlockShard(d);
    return found;
}

bool
cacheIndexWhole(const CacheStore* s)
{
    return s->index != NULL && atomic_load(&((CacheIndexZone*)s->index)->whole);
}

void
cacheIndexWholeSet(CacheStore* s)
{
    if (s->index != NULL) {
        atomic_store(&((CacheIndexZone*)s->index)->whole, 1);
    }
}

/* ---- The zone ------------------------------------------------------------ */

/* What the zone's contents depend on: its layout (a build whose structs
 * differ), the folder its entries name and the bound they were kept
 * within. */
static uint64_t
zoneTag(const CacheStore* s)
{
    uint64_t layout[] = { INDEX_VERSION, sizeof(CacheIndexZone),
                          sizeof(CacheIndexEntry), sizeof(pthread_mutex_t),
                          s->size };

    return cacheHash((const char*)layout, sizeof(layout))
           ^ cacheHash(s->path, strlen(s->path));
}

int
cacheIndexOpen(CacheStore* s, bool* reused)
{
    uint32_t slots = slotsOf(s->size);
    uint32_t buckets = bucketsOf(slots);
    size_t bytes = zoneBytes(slots, buckets);
    char name[64];
    CacheIndexZone* zone;
    char* bucketBase;
    char* slotBase;

    snprintf(name, sizeof(name), "cache:%s", s->name);
    zone = corZoneOpen(name, bytes, zoneTag(s), reused);
    if (zone == NULL) {
        return -1;
    }
    s->index = zone;
    s->indexBytes = bytes;
    if (!*reused) {
        zone->slots = slots;
        zone->buckets = buckets;
    }
    bucketBase = (char*)zone + sizeof(CacheIndexZone);
    slotBase = bucketBase + (size_t)CACHE_SHARDS * buckets * sizeof(uint32_t);
    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        CacheDiskShard* d = &s->shards[i].disk;

        d->zone = &zone->shards[i];
        d->buckets = (uint32_t*)(bucketBase
                                 + (size_t)i * buckets * sizeof(uint32_t));
        d->entries = (CacheIndexEntry*)(slotBase
                                        + (size_t)i * slots
                                              * sizeof(CacheIndexEntry));
        d->bucketMask = buckets - 1;
        d->slots = slots;
        if (!*reused && cacheRobustLockInit(&d->zone->lock) != 0) {
            return -1;
        }
        if (*reused) {
            /* This process's gauges start from what the index holds. */
            atomic_fetch_add(&s->counters.diskBytes, (long long)d->zone->bytes);
            atomic_fetch_add(&s->counters.diskEntries, d->zone->count);
        }
    }
    return 0;
}

void
cacheIndexClose(CacheStore* s)
{
    corZoneClose(s->index, s->indexBytes);
    s->index = NULL;
    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        memset(&s->shards[i].disk, 0, sizeof(s->shards[i].disk));
    }
}
