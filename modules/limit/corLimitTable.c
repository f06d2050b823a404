/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The buckets of a limit, by key, shared by every loop and worker of the
 * generation: a key's bucket must be one wherever its requests land.
 * Split in shards by the key's hash, each a chained hash under its own
 * mutex (held for a lookup and a take, never across a wait), so that
 * loops contend only when their keys share a shard. Memory is bounded:
 * each shard holds its part of max_keys, and a new key past it takes the
 * place of a full bucket among the least recently used few (forgetting
 * it loses nothing: a new one starts full), else of the least recently
 * used.
 */
#include "corLimitInt.h"

#include <cor.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define SHARDS_MAX 64
#define SHARD_KEYS_MIN 1024     /* a smaller table is one shard */
#define EVICT_LOOK 8            /* LRU keys looked at for a full bucket */

typedef struct Entry {
    struct Entry* next;         /* its hash chain */
    CorList lru;                /* most recent first */
    uint64_t hash;
    uint64_t tat;
    size_t keyLen;
    char key[];
} Entry;

typedef struct {
    pthread_mutex_t lock;
    Entry** chains;
    unsigned chainCount;
    unsigned count;
    unsigned cap;
    CorList lru;
} Shard;

struct LimitTable {
    Shard shards[SHARDS_MAX];
    unsigned shardCount;
    uint64_t seed;              /* a client cannot aim keys at one chain */
    atomic_uint keys;
    atomic_uint_fast64_t evictions;
};

LimitTable*
corLimitTableCreate(unsigned maxKeys)
{
    LimitTable* t = calloc(1, sizeof(*t));

    if (t == NULL) {
        return NULL;
    }
    t->shardCount = maxKeys >= SHARDS_MAX * SHARD_KEYS_MIN ? SHARDS_MAX : 1;
    if (getrandom(&t->seed, sizeof(t->seed), 0) != sizeof(t->seed)) {
        t->seed = (uint64_t)(uintptr_t)t ^ 0x9e3779b97f4a7c15u;
    }
    for (unsigned i = 0; i < t->shardCount; i++) {
        Shard* s = &t->shards[i];

        pthread_mutex_init(&s->lock, NULL);
        corListInit(&s->lru);
        s->cap = maxKeys / t->shardCount + (i < maxKeys % t->shardCount);
        s->chainCount = s->cap;
        s->chains = calloc(s->chainCount, sizeof(*s->chains));
        if (s->chains == NULL) {
            t->shardCount = i + 1;
            corLimitTableFree(t);
            return NULL;
        }
    }
    return t;
}

void
corLimitTableFree(LimitTable* t)
{
    if (t == NULL) {
        return;
    }
    for (unsigned i = 0; i < t->shardCount; i++) {
        Shard* s = &t->shards[i];

        for (unsigned c = 0; s->chains != NULL && c < s->chainCount; c++) {
            for (Entry* e = s->chains[c]; e != NULL;) {
                Entry* next = e->next;

                free(e);
                e = next;
            }
        }
        free(s->chains);
        pthread_mutex_destroy(&s->lock);
    }
    free(t);
}

/* FNV-1a from the table's seed. */
static uint64_t
keyHash(const LimitTable* t, const char* key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325u ^ t->seed;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)key[i]) * 0x100000001b3u;
    }
    return h ^ (h >> 29);
}

static void
entryUnlink(Shard* s, Entry* victim)
{
    Entry** at = &s->chains[victim->hash % s->chainCount];

    while (*at != victim) {
        at = &(*at)->next;
    }
    *at = victim->next;
    corListRemove(&victim->lru);
    s->count--;
}

/* Room for one more key in a full shard. */
static void
evict(LimitTable* t, Shard* s, uint64_t nowNs)
{
    CorList* node = s->lru.prev;
    Entry* victim = corContainerOf(node, Entry, lru);

    for (unsigned i = 0; i < EVICT_LOOK && node != &s->lru;
         i++, node = node->prev) {
        Entry* e = corContainerOf(node, Entry, lru);

        if (corLimitFull(e->tat, nowNs)) {
            victim = e;
            break;
        }
    }
    entryUnlink(s, victim);
    free(victim);
    atomic_fetch_sub(&t->keys, 1);
    atomic_fetch_add(&t->evictions, 1);
}

static Entry*
entryFind(Shard* s, uint64_t hash, const char* key, size_t len)
{
    for (Entry* e = s->chains[hash % s->chainCount]; e != NULL; e = e->next) {
        if (e->hash == hash && e->keyLen == len
            && memcmp(e->key, key, len) == 0) {
            return e;
        }
    }
    return NULL;
}

bool
corLimitTableTake(LimitTable* t, const char* key, size_t keyLen,
                  uint64_t nowNs, const LimitRate* rate, uint64_t* waitNs)
{
    uint64_t hash = keyHash(t, key, keyLen);
    Shard* s = &t->shards[hash % t->shardCount];
    Entry* e;
    bool taken;

    pthread_mutex_lock(&s->lock);
    e = entryFind(s, hash, key, keyLen);
    if (e != NULL) {
        corListRemove(&e->lru);
    } else {
        if (s->count >= s->cap) {
            evict(t, s, nowNs);
        }
        e = malloc(sizeof(*e) + keyLen);
        if (e == NULL) {
            /* No memory for the key: let it pass, as a key forgotten
             * would have. */
            pthread_mutex_unlock(&s->lock);
            return true;
        }
        *e = (Entry){ .hash = hash, .keyLen = keyLen };
        memcpy(e->key, key, keyLen);
        e->next = s->chains[hash % s->chainCount];
        s->chains[hash % s->chainCount] = e;
        s->count++;
        atomic_fetch_add(&t->keys, 1);
    }
    corListInsert(&s->lru, &e->lru);
    taken = corLimitTake(&e->tat, nowNs, rate, waitNs);
    pthread_mutex_unlock(&s->lock);
    return taken;
}

unsigned
corLimitTableKeys(LimitTable* t)
{
    return atomic_load(&t->keys);
}

uint64_t
corLimitTableEvictions(LimitTable* t)
{
    return atomic_load(&t->evictions);
}
