/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lookup table of a memory store kept across reloads (the shape in
 * corCacheTable.h). The zone: the table's head (the shards' locks, LRU
 * ends and counts), the shards' buckets, then the slab allocator's
 * part. An item is a chunk: the table's head (its hash, its bucket's
 * next, its LRU neighbours, its order and size, whether it is linked),
 * then its user's bytes. Lock order: a shard's, then the allocator's,
 * never the other way. A process that dies holding a shard's lock leaves
 * EOWNERDEAD to the next locker, which rebuilds the shard from the
 * items the allocator has handed out (repair, below): a linked item is
 * linked again, in its LRU order as far as the list holds; one that the
 * store still counts but is not linked (the death fell between the two)
 * is let go.
 */
#include "corCacheTable.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_VERSION 1
#define BUCKET_BYTES 1024 /* a bucket for every so many bytes */
#define BUCKETS_LEAST 64

enum { ITEM_LINKED = 1, ITEM_SEEN = 2, ITEM_WALKED = 4, ITEM_PLACED = 8 };

typedef struct {
    uint64_t hash;
    uint64_t chain; /* the next item of its bucket, 0 none */
    uint64_t newer;
    uint64_t older;
    int64_t order;
    uint32_t size; /* what it counts against the shard's part */
    uint32_t flags;
} TableHead;

_Static_assert(sizeof(TableHead) == CACHE_TABLE_HEAD, "the table's head");
_Static_assert(sizeof(TableHead) <= CACHE_SLAB_ZEROED, "a head zeroed");

typedef struct {
    pthread_mutex_t lock;
    uint64_t newest;
    uint64_t oldest;
    uint64_t count;
    uint64_t bytes;
    uint64_t bucketsAt; /* in the zone */
    uint64_t bucketMask;
} TableShard;

struct CacheTableZone {
    uint32_t version;
    uint32_t pad;
    uint64_t bytes;
    uint64_t slabAt;
    TableShard shards[CACHE_TABLE_SHARDS];
};

static TableHead*
head(CacheTable* t, uint64_t item)
{
    return cacheSlabAt(&t->slab, item);
}

static unsigned
shardIndex(uint64_t hash)
{
    return hash >> 60 & (CACHE_TABLE_SHARDS - 1);
}

static TableShard*
shardOf(CacheTable* t, uint64_t hash)
{
    return &t->zone->shards[shardIndex(hash)];
}

static uint64_t*
bucketOf(CacheTable* t, TableShard* sh, uint64_t hash)
{
    return (uint64_t*)((char*)t->zone + sh->bucketsAt)
           + (hash & sh->bucketMask);
}

/* ---- Links (the shard locked) -------------------------------------------- */

static void
lruOut(CacheTable* t, TableShard* sh, uint64_t item)
{
    TableHead* h = head(t, item);

    if (h->newer != 0) {
        head(t, h->newer)->older = h->older;
    } else {
        sh->newest = h->older;
    }
    if (h->older != 0) {
        head(t, h->older)->newer = h->newer;
    } else {
        sh->oldest = h->newer;
    }
    h->newer = h->older = 0;
}

static void
lruFront(CacheTable* t, TableShard* sh, uint64_t item)
{
    TableHead* h = head(t, item);

    h->newer = 0;
    h->older = sh->newest;
    if (sh->newest != 0) {
        head(t, sh->newest)->newer = item;
    } else {
        sh->oldest = item;
    }
    sh->newest = item;
}

static void
lruBack(CacheTable* t, TableShard* sh, uint64_t item)
{
    TableHead* h = head(t, item);

    h->older = 0;
    h->newer = sh->oldest;
    if (sh->oldest != 0) {
        head(t, sh->oldest)->older = item;
    } else {
        sh->newest = item;
    }
    sh->oldest = item;
}

static void
chainIn(CacheTable* t, TableShard* sh, uint64_t item)
{
    uint64_t* bucket = bucketOf(t, sh, head(t, item)->hash);

    head(t, item)->chain = *bucket;
    *bucket = item;
}

static void
chainOut(CacheTable* t, TableShard* sh, uint64_t item)
{
    uint64_t* link = bucketOf(t, sh, head(t, item)->hash);

    while (*link != 0 && *link != item) {
        link = &head(t, *link)->chain;
    }
    if (*link == item) {
        *link = head(t, item)->chain;
    }
}

/* Item out of the table, the store's count of it let go (freed when no
 * answer is made of it). Unlinked first, counted out last: a death
 * between leaves a count the repair lets go. */
static void
unlinkItem(CacheTable* t, TableShard* sh, uint64_t item)
{
    TableHead* h = head(t, item);

    chainOut(t, sh, item);
    lruOut(t, sh, item);
    sh->count--;
    sh->bytes -= h->size;
    h->flags = 0;
    cacheSlabRelease(&t->slab, item, CACHE_SLAB_STORE);
}

/* ---- The lock, and its repair -------------------------------------------- */

typedef struct {
    CacheTable* t;
    unsigned shard;
    uint64_t* loose; /* counted by the store, not linked */
    size_t looseCount;
    size_t looseCap;
} RepairWalk;

static void
repairSee(CacheSlab* slab, uint64_t item, void* arg)
{
    RepairWalk* w = arg;
    TableHead* h = cacheSlabAt(slab, item);

    if (shardIndex(h->hash) != w->shard) {
        return;
    }
    if (h->flags & ITEM_LINKED) {
        h->flags = ITEM_LINKED | ITEM_SEEN;
        return;
    }
    if (cacheSlabRefs(slab, item, CACHE_SLAB_STORE) > 0) {
        if (w->looseCount == w->looseCap) {
            size_t cap = w->looseCap > 0 ? w->looseCap * 2 : 16;
            uint64_t* grown = realloc(w->loose, cap * sizeof(*grown));

            if (grown == NULL) {
                return; /* it stays counted: a leak, not a wrong answer */
            }
            w->loose = grown;
            w->looseCap = cap;
        }
        w->loose[w->looseCount++] = item;
    }
}

static void
repairPlace(CacheSlab* slab, uint64_t item, void* arg)
{
    RepairWalk* w = arg;
    TableHead* h = cacheSlabAt(slab, item);
    TableShard* sh = &w->t->zone->shards[w->shard];

    if (shardIndex(h->hash) != w->shard || !(h->flags & ITEM_SEEN)) {
        return;
    }
    if (!(h->flags & ITEM_PLACED)) {
        lruBack(w->t, sh, item);
    }
    h->flags = ITEM_LINKED;
    chainIn(w->t, sh, item);
    sh->count++;
    sh->bytes += h->size;
}

static bool
walkable(CacheTable* t, uint64_t item, uint32_t want, uint32_t not )
{
    return item != 0 && item < t->zone->bytes - t->zone->slabAt
           && (head(t, item)->flags & (want | not )) == want;
}

/*
 * Shard i made again from the items handed out: its LRU list as far as
 * it holds from the newest (each item linked and seen once), then the
 * other linked items at its old end; its buckets, count and bytes from
 * them; the store's counts of items not linked let go.
 */
static void
shardRepair(CacheTable* t, unsigned i)
{
    TableShard* sh = &t->zone->shards[i];
    RepairWalk w = { .t = t, .shard = i };
    uint64_t start = sh->newest;
    uint64_t item;

    cacheSlabEach(&t->slab, repairSee, &w);
    for (item = start; walkable(t, item, ITEM_SEEN, ITEM_WALKED);
         item = head(t, item)->older) {
        head(t, item)->flags |= ITEM_WALKED;
    }
    memset((char*)t->zone + sh->bucketsAt, 0,
           (sh->bucketMask + 1) * sizeof(uint64_t));
    sh->newest = sh->oldest = 0;
    sh->count = sh->bytes = 0;
    for (item = start; walkable(t, item, ITEM_WALKED, ITEM_PLACED);) {
        uint64_t older = head(t, item)->older;

        head(t, item)->flags |= ITEM_PLACED;
        lruBack(t, sh, item);
        item = older;
    }
    cacheSlabEach(&t->slab, repairPlace, &w);
    for (size_t k = 0; k < w.looseCount; k++) {
        cacheSlabRelease(&t->slab, w.loose[k], CACHE_SLAB_STORE);
    }
    free(w.loose);
}

static int
shardLock(CacheTable* t, TableShard* sh)
{
    int rc = pthread_mutex_lock(&sh->lock);

    if (rc == EOWNERDEAD) {
        shardRepair(t, (unsigned)(sh - t->zone->shards));
        pthread_mutex_consistent(&sh->lock);
        return 0;
    }
    return rc;
}

static void
shardUnlock(TableShard* sh)
{
    pthread_mutex_unlock(&sh->lock);
}

/* ---- What the store asks ------------------------------------------------- */

static int
tableLayOut(CacheTableZone* z, size_t bytes)
{
    uint64_t buckets = BUCKETS_LEAST;
    uint64_t at = (sizeof(*z) + 63) / 64 * 64;

    while (buckets * CACHE_TABLE_SHARDS * BUCKET_BYTES < bytes) {
        buckets <<= 1;
    }
    memset(z, 0, sizeof(*z));
    z->version = TABLE_VERSION;
    z->bytes = bytes;
    for (unsigned i = 0; i < CACHE_TABLE_SHARDS; i++) {
        z->shards[i].bucketsAt = at;
        z->shards[i].bucketMask = buckets - 1;
        at += buckets * sizeof(uint64_t);
        if (cacheRobustLockInit(&z->shards[i].lock) != 0) {
            return -1;
        }
    }
    z->slabAt = at;
    return at < bytes ? 0 : -1;
}

int
cacheTableOpen(CacheTable* t, void* zone, size_t bytes, bool reused)
{
    CacheTableZone* z = zone;

    t->zone = z;
    if (bytes < sizeof(*z)) {
        return -1;
    }
    if (!reused || z->version != TABLE_VERSION || z->bytes != bytes) {
        reused = false;
        if (tableLayOut(z, bytes) != 0) {
            return -1;
        }
    }
    if (cacheSlabOpen(&t->slab, (char*)zone + z->slabAt, bytes - z->slabAt,
                      reused)
        != 0) {
        return -1;
    }
    t->shardMost = cacheSlabCapacity(&t->slab) / CACHE_TABLE_SHARDS;
    return 0;
}

void
cacheTableClose(CacheTable* t)
{
    cacheSlabClose(&t->slab);
}

/* The least recently used item of shard i out; false when it has none. */
static bool
evictFrom(CacheTable* t, unsigned i)
{
    TableShard* sh = &t->zone->shards[i];
    bool evicted = false;

    if (shardLock(t, sh) != 0) {
        return false;
    }
    if (sh->oldest != 0) {
        unlinkItem(t, sh, sh->oldest);
        evicted = true;
    }
    shardUnlock(sh);
    return evicted;
}

uint64_t
cacheTableAlloc(CacheTable* t, uint64_t hash, size_t len, unsigned* evicted)
{
    unsigned first = shardIndex(hash);
    unsigned tried = 0;
    uint64_t item = 0;

    if (CACHE_TABLE_HEAD + len > t->shardMost) {
        return 0; /* never stored: evicting for it would empty the table */
    }
    /* Its own shard's oldest first, then the others' in turn: what a
     * full allocator frees is what the LRU says least wanted. */
    while ((item = cacheSlabAlloc(&t->slab, CACHE_TABLE_HEAD + len)) == 0
           && tried < CACHE_TABLE_SHARDS) {
        if (evictFrom(t, (first + tried) % CACHE_TABLE_SHARDS)) {
            (*evicted)++;
        } else {
            tried++;
        }
    }
    if (item != 0) {
        head(t, item)->hash = hash;
        head(t, item)->size = (uint32_t)(CACHE_TABLE_HEAD + len);
    }
    return item;
}

bool
cacheTableInsert(CacheTable* t, uint64_t item, int64_t order,
                 CacheTableMatch same, unsigned* evicted)
{
    TableHead* h = head(t, item);
    TableShard* sh = shardOf(t, h->hash);
    const void* user = cacheTableAt(t, item);

    if (h->size > t->shardMost || shardLock(t, sh) != 0) {
        return false;
    }
    for (uint64_t old = *bucketOf(t, sh, h->hash), next; old != 0; old = next) {
        next = head(t, old)->chain;
        if (head(t, old)->hash == h->hash && same(cacheTableAt(t, old), user)) {
            unlinkItem(t, sh, old);
        }
    }
    h->order = order;
    /* Counted first, linked after: a death between leaves a count the
     * repair lets go. */
    cacheSlabRef(&t->slab, item, CACHE_SLAB_STORE);
    h->flags = ITEM_LINKED;
    chainIn(t, sh, item);
    lruFront(t, sh, item);
    sh->count++;
    sh->bytes += h->size;
    while (sh->bytes > t->shardMost && sh->count > 1) {
        unlinkItem(t, sh, sh->oldest);
        (*evicted)++;
    }
    shardUnlock(sh);
    return true;
}

uint64_t
cacheTableFind(CacheTable* t, uint64_t hash, CacheTableMatch match,
               const void* arg)
{
    TableShard* sh = shardOf(t, hash);
    uint64_t found = 0;

    if (shardLock(t, sh) != 0) {
        return 0;
    }
    for (uint64_t item = *bucketOf(t, sh, hash); item != 0;
         item = head(t, item)->chain) {
        if (head(t, item)->hash == hash && match(cacheTableAt(t, item), arg)
            && (found == 0 || head(t, item)->order > head(t, found)->order)) {
            found = item;
        }
    }
    if (found != 0 && !cacheSlabRef(&t->slab, found, t->slab.lane)) {
        found = 0; /* its lane is full: a miss */
    }
    if (found != 0) {
        lruOut(t, sh, found);
        lruFront(t, sh, found);
    }
    shardUnlock(sh);
    return found;
}

void
cacheTableRelease(CacheTable* t, uint64_t item)
{
    cacheSlabRelease(&t->slab, item, t->slab.lane);
}

unsigned
cacheTableRemove(CacheTable* t, uint64_t hash, CacheTableMatch match,
                 const void* arg)
{
    unsigned n = 0;

    for (unsigned i = 0; i < CACHE_TABLE_SHARDS; i++) {
        TableShard* sh = &t->zone->shards[i];

        if ((hash != 0 && i != shardIndex(hash)) || shardLock(t, sh) != 0) {
            continue;
        }
        for (uint64_t item = hash != 0 ? *bucketOf(t, sh, hash) : sh->newest,
                      next;
             item != 0; item = next) {
            next = hash != 0 ? head(t, item)->chain : head(t, item)->older;
            if ((hash == 0 || head(t, item)->hash == hash)
                && match(cacheTableAt(t, item), arg)) {
                unlinkItem(t, sh, item);
                n++;
            }
        }
        shardUnlock(sh);
    }
    return n;
}

uint64_t
cacheTableCount(CacheTable* t)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < CACHE_TABLE_SHARDS; i++) {
        n += t->zone->shards[i].count;
    }
    return n;
}

uint64_t
cacheTableBytes(CacheTable* t)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < CACHE_TABLE_SHARDS; i++) {
        n += t->zone->shards[i].bytes;
    }
    return n;
}
