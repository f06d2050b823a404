/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory store: keys to entries, bounded in bytes, the least
 * recently used evicted first, in the store's zone (corCacheMem.c) so
 * that the entries outlive a generation; the table there
 * (corCacheTable.c) is cut into shards by the key's hash, each under a
 * lock of its own held only for a lookup or an insert. A lookup counts
 * what it found for this generation, so an eviction (or a purge) only
 * takes the entry out; its memory goes with the last answer made from
 * it, in whichever process. An entry is made in this process's heap
 * and copied into the zone when it is stored (a miss's cost, not a
 * hit's): the caller's copy stays the caller's.
 */
#include "corCacheInt.h"

#include <stdlib.h>
#include <string.h>

CacheShard*
cacheShardOf(CacheStore* s, uint64_t hash)
{
    return &s->shards[hash >> 60 & (CACHE_SHARDS - 1)];
}

/* The zone's bytes and entries, for /metrics (whichever generation
 * stored them). */
static void
countersSet(CacheStore* s, unsigned evicted)
{
    atomic_store(&s->counters.bytes, (long long)cacheTableBytes(&s->table));
    atomic_store(&s->counters.entries, (long long)cacheTableCount(&s->table));
    atomic_fetch_add(&s->counters.evictions, evicted);
}

int
cacheStoreInit(CacheStore* s, const char* name, size_t memory)
{
    memset(s, 0, sizeof(*s));
    s->name = strdup(name);
    s->memory = memory;
    s->shardMost = memory / CACHE_SHARDS;
    if (s->name == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        pthread_mutex_init(&s->shards[i].lock, NULL);
    }
    if (cacheMemOpen(s) != 0) {
        return -1;
    }
    countersSet(s, 0); /* what the last generation left */
    return 0;
}

void
cacheStoreFree(CacheStore* s)
{
    /* The entries stay in the zone, for the next generation. */
    cacheMemClose(s);
    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        pthread_mutex_destroy(&s->shards[i].lock);
    }
    free(s->name);
}

static bool
keyIs(const CacheEntry* e, uint64_t hash, const char* key, size_t len)
{
    return e->hash == hash && e->keyLen == len
           && memcmp(cacheEntryKey(e), key, len) == 0;
}

/* What a lookup asks of an entry. */
typedef struct {
    uint64_t hash;
    const char* key;
    size_t keyLen;
    const CorRequest* r;
} Wanted;

static bool
wantedMatch(const void* item, const void* arg)
{
    const CacheEntry* e = item;
    const Wanted* w = arg;

    return keyIs(e, w->hash, w->key, w->keyLen) && cacheEntryVaryMatch(e, w->r);
}

CacheEntry*
cacheStoreFind(CacheStore* s, uint64_t hash, const char* key, size_t keyLen,
               const CorRequest* r)
{
    Wanted w = { hash, key, keyLen, r };
    uint64_t item = cacheTableFind(&s->table, hash, wantedMatch, &w);
    CacheEntry* found;

    if (item == 0) {
        return NULL;
    }
    found = cacheTableAt(&s->table, item);
    cacheDiskTouchLocked(cacheShardOf(s, hash), found);
    return found;
}

/* Whether a and b are the same variant of one key: their keys and Vary
 * blocks (names and the request's values) are the same bytes. */
static bool
sameVariant(const void* old, const void* item)
{
    const CacheEntry* a = old;
    const CacheEntry* b = item;

    return keyIs(a, b->hash, cacheEntryKey(b), b->keyLen)
           && a->varyLen == b->varyLen
           && memcmp(cacheEntryVary(a), cacheEntryVary(b), a->varyLen) == 0;
}

bool
cacheStoreInsert(CacheStore* s, CacheEntry* e)
{
    unsigned evicted = 0;
    uint64_t item = 0;
    CacheEntry* copy;
    bool stored = false;

    if (e->size + CACHE_TABLE_HEAD <= s->shardMost && e->bodyFd < 0) {
        item = cacheTableAlloc(&s->table, e->hash, e->size, &evicted);
    }
    if (item != 0) {
        copy = cacheTableAt(&s->table, item);
        memcpy(copy, e, e->size);
        atomic_init(&copy->refs, 0);
        copy->zoned = true;
        stored = cacheTableInsert(&s->table, item, copy->responseTime,
                                  sameVariant, &evicted);
        cacheTableRelease(&s->table, item);
    }
    cacheEntryRelease(e);
    if (stored) {
        atomic_fetch_add(&s->counters.stored, 1);
    }
    countersSet(s, evicted);
    return stored;
}

typedef struct {
    const char* key;
    size_t len;
} KeyMatch;

static bool
keyMatches(const void* item, const void* arg)
{
    const CacheEntry* e = item;
    const KeyMatch* k = arg;

    return e->keyLen == k->len && memcmp(cacheEntryKey(e), k->key, k->len) == 0;
}

static bool
prefixMatches(const void* item, const void* arg)
{
    const CacheEntry* e = item;
    const KeyMatch* k = arg;

    return e->keyLen >= k->len && memcmp(cacheEntryKey(e), k->key, k->len) == 0;
}

unsigned
cacheStoreRemove(CacheStore* s, const char* key, size_t keyLen)
{
    uint64_t hash = cacheHash(key, keyLen);
    KeyMatch k = { key, keyLen };
    unsigned n = cacheTableRemove(&s->table, hash, keyMatches, &k);

    countersSet(s, 0);
    return n + cacheDiskRemove(s, hash);
}

unsigned
cacheStoreRemovePrefix(CacheStore* s, const char* prefix, size_t len)
{
    KeyMatch k = { prefix, len };
    unsigned n = cacheTableRemove(&s->table, 0, prefixMatches, &k);

    countersSet(s, 0);
    return n + cacheDiskRemovePrefix(s, prefix, len);
}

size_t
cacheStoreEntryMost(const CacheStore* s)
{
    return s->path != NULL && s->diskShardMost > s->shardMost
               ? (size_t)s->diskShardMost
               : s->shardMost;
}
