/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The buckets of a limit, by key, shared by every loop and worker of the
 * generation: a key's bucket must be one wherever its requests land.
 * Split in shards by the key's hash, each a chained hash under its own
 * mutex (held for a lookup and a take, never across a wait), so that
 * loops contend only when their keys share a shard. Memory is bounded:
 * a key is kept as 128 bits of its keyed hash (corLimitKey.c), never
 * whole, so an entry is 48 bytes whatever the key's length; each shard
 * holds its part of max_keys, and a new key past it takes the place of a
 * full bucket among the least recently used few (forgetting it loses
 * nothing: a new one starts full), else of the least recently used.
 */
#include "corLimitInt.h"

#include <cor.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define SHARDS_MAX 64
#define SHARD_KEYS_MIN 1024 /* a smaller table is one shard */
#define EVICT_LOOK 8        /* LRU keys looked at for a full bucket */

typedef struct Entry {
    struct Entry* next; /* its hash chain */
    CorList lru;        /* most recent first */
    LimitKeyId id;      /* word[0] picks the shard, word[1] the
                           chain */
    uint64_t tat;
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
    uint8_t secret[16]; /* the keyed hash's: a client cannot aim
                           keys at one chain, nor at one id */
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
    if (getrandom(t->secret, sizeof(t->secret), 0) != sizeof(t->secret)) {
        free(t);
        return NULL;
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

static void
entryUnlink(Shard* s, Entry* victim)
{
    Entry** at = &s->chains[victim->id.word[1] % s->chainCount];

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
entryFind(Shard* s, const LimitKeyId* id)
{
    for (Entry* e = s->chains[id->word[1] % s->chainCount]; e != NULL;
         e = e->next) {
        if (e->id.word[0] == id->word[0] && e->id.word[1] == id->word[1]) {
            return e;
        }
    }
    return NULL;
}

bool
corLimitTableTake(LimitTable* t, const char* key, size_t keyLen, uint64_t nowNs,
                  const LimitRate* rate, uint64_t* waitNs)
{
    LimitKeyId id;
    Shard* s;
    Entry* e;
    bool taken;

    corLimitKeyHash(t->secret, key, keyLen, &id);
    s = &t->shards[id.word[0] % t->shardCount];
    pthread_mutex_lock(&s->lock);
    e = entryFind(s, &id);
    if (e != NULL) {
        corListRemove(&e->lru);
    } else {
        if (s->count >= s->cap) {
            evict(t, s, nowNs);
        }
        e = malloc(sizeof(*e));
        if (e == NULL) {
            /* No memory for the key: let it pass, as a key forgotten
             * would have. */
            pthread_mutex_unlock(&s->lock);
            return true;
        }
        *e = (Entry){ .id = id };
        e->next = s->chains[id.word[1] % s->chainCount];
        s->chains[id.word[1] % s->chainCount] = e;
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
