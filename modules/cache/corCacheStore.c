/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory store: a hash of keys to entries, bounded in bytes, the
 * least recently used evicted first. Every loop of the instance (and
 * every worker) reads it, so it is cut into CACHE_SHARDS shards by the
 * key's hash, each under its own mutex, held only for a lookup or an
 * insert (a few hundred nanoseconds, never across a wait): two loops
 * rarely want one shard at once, and a shard's LRU is exact. A lookup
 * takes a reference to what it found, so an eviction (or a purge) only
 * takes the entry out; its memory goes with the last answer made from
 * it.
 */
#include "corCacheInt.h"

#include <stdlib.h>
#include <string.h>

#define BUCKETS_FIRST 64

CacheShard*
cacheShardOf(CacheStore* s, uint64_t hash)
{
    return &s->shards[hash >> 60 & (CACHE_SHARDS - 1)];
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
        CacheShard* shard = &s->shards[i];

        pthread_mutex_init(&shard->lock, NULL);
        corListInit(&shard->lru);
        shard->buckets = calloc(BUCKETS_FIRST, sizeof(*shard->buckets));
        if (shard->buckets == NULL) {
            return -1;
        }
        shard->bucketCount = BUCKETS_FIRST;
    }
    return 0;
}

void
cacheStoreFree(CacheStore* s)
{
    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        CacheShard* shard = &s->shards[i];

        for (size_t b = 0; shard->buckets != NULL && b < shard->bucketCount;
             b++) {
            CacheEntry* e = shard->buckets[b];

            while (e != NULL) {
                CacheEntry* next = e->chain;

                cacheEntryRelease(e);
                e = next;
            }
        }
        free(shard->buckets);
        pthread_mutex_destroy(&shard->lock);
    }
    free(s->name);
}

static bool
keyIs(const CacheEntry* e, uint64_t hash, const char* key, size_t len)
{
    return e->hash == hash && e->keyLen == len
           && memcmp(cacheEntryKey(e), key, len) == 0;
}

CacheEntry*
cacheStoreFind(CacheStore* s, uint64_t hash, const char* key, size_t keyLen,
               const CorRequest* r)
{
    CacheShard* shard = cacheShardOf(s, hash);
    CacheEntry* found = NULL;

    pthread_mutex_lock(&shard->lock);
    for (CacheEntry* e = shard->buckets[hash & (shard->bucketCount - 1)];
         e != NULL; e = e->chain) {
        if (keyIs(e, hash, key, keyLen) && cacheEntryVaryMatch(e, r)
            && (found == NULL || e->responseTime > found->responseTime)) {
            found = e;
        }
    }
    if (found != NULL) {
        cacheEntryRef(found);
        corListRemove(&found->lru);
        corListInsert(&shard->lru, &found->lru);
        cacheDiskTouchLocked(shard, found);
    }
    pthread_mutex_unlock(&shard->lock);
    return found;
}

/* Take e out of its shard (locked): its bucket, its LRU, its bytes; the
 * store's reference is the caller's to release. */
static void
unlinkLocked(CacheStore* s, CacheShard* shard, CacheEntry* e)
{
    CacheEntry** at = &shard->buckets[e->hash & (shard->bucketCount - 1)];

    while (*at != e) {
        at = &(*at)->chain;
    }
    *at = e->chain;
    corListRemove(&e->lru);
    shard->count--;
    shard->bytes -= e->size;
    atomic_fetch_sub(&s->counters.bytes, e->size);
    atomic_fetch_sub(&s->counters.entries, 1);
}

/* Twice the buckets, once the shard holds as many entries as they. */
static void
growLocked(CacheShard* shard)
{
    size_t count = shard->bucketCount * 2;
    CacheEntry** grown = calloc(count, sizeof(*grown));

    if (grown == NULL) {
        return; /* the chains grow longer instead */
    }
    for (size_t b = 0; b < shard->bucketCount; b++) {
        CacheEntry* e = shard->buckets[b];

        while (e != NULL) {
            CacheEntry* next = e->chain;

            e->chain = grown[e->hash & (count - 1)];
            grown[e->hash & (count - 1)] = e;
            e = next;
        }
    }
    free(shard->buckets);
    shard->buckets = grown;
    shard->bucketCount = count;
}

/* Whether a and b are the same variant of one key: their Vary blocks
 * (names and the request's values) are the same bytes. */
static bool
sameVariant(const CacheEntry* a, const CacheEntry* b)
{
    return a->varyLen == b->varyLen
           && memcmp(cacheEntryKey(a) + a->keyLen + 1,
                     cacheEntryKey(b) + b->keyLen + 1, a->varyLen)
                  == 0;
}

bool
cacheStoreInsert(CacheStore* s, CacheEntry* e)
{
    CacheShard* shard = cacheShardOf(s, e->hash);
    CacheEntry* gone[8];
    unsigned goneCount = 0;

    if (e->size > s->shardMost) {
        cacheEntryRelease(e);
        return false;
    }
    pthread_mutex_lock(&shard->lock);
    for (CacheEntry *old = shard->buckets[e->hash & (shard->bucketCount - 1)],
                    *next;
         old != NULL; old = next) {
        next = old->chain;
        if (keyIs(old, e->hash, cacheEntryKey(e), e->keyLen)
            && sameVariant(old, e) && goneCount < 8) {
            unlinkLocked(s, shard, old);
            gone[goneCount++] = old;
        }
    }
    if (shard->count >= shard->bucketCount) {
        growLocked(shard);
    }
    e->chain = shard->buckets[e->hash & (shard->bucketCount - 1)];
    shard->buckets[e->hash & (shard->bucketCount - 1)] = e;
    corListInsert(&shard->lru, &e->lru);
    shard->count++;
    shard->bytes += e->size;
    atomic_fetch_add(&s->counters.bytes, e->size);
    atomic_fetch_add(&s->counters.entries, 1);
    atomic_fetch_add(&s->counters.stored, 1);
    while (shard->bytes > s->shardMost) {
        CacheEntry* last = corContainerOf(shard->lru.prev, CacheEntry, lru);

        unlinkLocked(s, shard, last);
        atomic_fetch_add(&s->counters.evictions, 1);
        /* Released outside the lock: a free of a large body is not
         * what the next lookup of this shard should wait for. */
        if (goneCount < 8) {
            gone[goneCount++] = last;
        } else {
            cacheEntryRelease(last);
        }
    }
    pthread_mutex_unlock(&shard->lock);
    for (unsigned i = 0; i < goneCount; i++) {
        cacheEntryRelease(gone[i]);
    }
    return true;
}

/* Take out the entries of shard that match(e, arg); returns how many. */
static unsigned
removeWhere(CacheStore* s, CacheShard* shard,
            bool (*match)(const CacheEntry* e, const void* arg),
            const void* arg)
{
    CorList* node;
    CorList* next;
    CorList gone;
    unsigned n = 0;

    corListInit(&gone);
    pthread_mutex_lock(&shard->lock);
    corListForEach(node, next, &shard->lru)
    {
        CacheEntry* e = corContainerOf(node, CacheEntry, lru);

        if (match(e, arg)) {
            unlinkLocked(s, shard, e);
            corListInsert(&gone, &e->lru);
            n++;
        }
    }
    pthread_mutex_unlock(&shard->lock);
    corListForEach(node, next, &gone)
    {
        corListRemove(node);
        cacheEntryRelease(corContainerOf(node, CacheEntry, lru));
    }
    return n;
}

typedef struct {
    const char* key;
    size_t len;
} KeyMatch;

static bool
prefixMatches(const CacheEntry* e, const void* arg)
{
    const KeyMatch* k = arg;

    return e->keyLen >= k->len && memcmp(cacheEntryKey(e), k->key, k->len) == 0;
}

unsigned
cacheStoreRemove(CacheStore* s, const char* key, size_t keyLen)
{
    uint64_t hash = cacheHash(key, keyLen);
    CacheShard* shard = cacheShardOf(s, hash);
    CacheEntry* gone = NULL;
    unsigned n = 0;

    pthread_mutex_lock(&shard->lock);
    for (CacheEntry *e = shard->buckets[hash & (shard->bucketCount - 1)], *next;
         e != NULL; e = next) {
        next = e->chain;
        if (keyIs(e, hash, key, keyLen)) {
            unlinkLocked(s, shard, e);
            e->chain = gone;
            gone = e;
            n++;
        }
    }
    pthread_mutex_unlock(&shard->lock);
    while (gone != NULL) {
        CacheEntry* next = gone->chain;

        cacheEntryRelease(gone);
        gone = next;
    }
    return n + cacheDiskRemove(s, hash);
}

unsigned
cacheStoreRemovePrefix(CacheStore* s, const char* prefix, size_t len)
{
    KeyMatch k = { prefix, len };
    unsigned n = 0;

    for (unsigned i = 0; i < CACHE_SHARDS; i++) {
        n += removeWhere(s, &s->shards[i], prefixMatches, &k);
    }
    return n + cacheDiskRemovePrefix(s, prefix, len);
}

size_t
cacheStoreEntryMost(const CacheStore* s)
{
    return s->path != NULL && s->diskShardMost > s->shardMost
               ? (size_t)s->diskShardMost
               : s->shardMost;
}
