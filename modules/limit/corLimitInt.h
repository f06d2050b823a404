/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The limit module's parts: the bucket's arithmetic (corLimitBucket.c,
 * pure, unit-tested), what is kept of a key (corLimitKey.c), the table of
 * keys every loop and worker shares (corLimitTable.c), the guards and
 * their counters (corLimit.c).
 */
#ifndef COR_LIMIT_INT_H
#define COR_LIMIT_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A rate as a token's interval: "10/s" is one token each 100 ms. */
typedef struct {
    uint64_t intervalNs;
    unsigned burst; /* the bucket's size, in tokens */
} LimitRate;

/* "N/s" or "N/m" (N from 1 to 1000000) into rate->intervalNs; -1 when it
 * is neither. */
int corLimitRateParse(const char* text, LimitRate* rate);

/*
 * Take a token from a bucket at nowNs. A bucket is one number, its
 * theoretical arrival time (GCRA): the moment it would be full again
 * were no token taken from now on, 0 for a full one. True when a token
 * was there (*tat moves on one interval); false leaves the bucket alone
 * and sets *waitNs to the time until the next token.
 */
bool corLimitTake(uint64_t* tat, uint64_t nowNs, const LimitRate* rate,
                  uint64_t* waitNs);

/* Whether a bucket is full at nowNs (forgetting it loses nothing). */
bool corLimitFull(uint64_t tat, uint64_t nowNs);

/* The whole seconds a client is told to wait (Retry-After), at least 1. */
unsigned corLimitRetrySeconds(uint64_t waitNs);

/* What the table keeps of a key: 128 bits of a keyed hash
 * (corLimitKey.c), never the key itself. */
typedef struct {
    uint64_t word[2];
} LimitKeyId;

/* SipHash-2-4 with its 128-bit output of the len bytes at data, under
 * the 16 bytes of secret. */
void corLimitKeyHash(const uint8_t secret[16], const void* data, size_t len,
                     LimitKeyId* id);

/* A table of buckets by key, shared by every thread: shards, each a hash
 * with its own mutex and its own LRU order, holding at most maxKeys in
 * all. */
typedef struct LimitTable LimitTable;

LimitTable* corLimitTableCreate(unsigned maxKeys);
void corLimitTableFree(LimitTable* t);

/* Take a token of key's bucket (made full when new; the least recently
 * used key of its shard makes room when the shard is full, a full
 * bucket first). As corLimitTake. */
bool corLimitTableTake(LimitTable* t, const char* key, size_t keyLen,
                       uint64_t nowNs, const LimitRate* rate, uint64_t* waitNs);

/* Keys held now, and keys let go to make room, since creation. */
unsigned corLimitTableKeys(LimitTable* t);
uint64_t corLimitTableEvictions(LimitTable* t);

/* ---- Buckets in Redis (corLimitStore.c) ---------------------------------- */

struct CorRequest;
struct CorGuardWait;

/* What a guard counts, for /metrics. */
typedef struct {
    atomic_uint_fast64_t passed;
    atomic_uint_fast64_t limited;
    atomic_uint_fast64_t storeErrors; /* its store failed */
} LimitCounts;

/* A take's verdict for r (corLimit.c): passed, counted; or 429 with
 * Retry-After, waitNs from the next token. */
int corLimitVerdict(struct CorRequest* r, LimitCounts* counts, bool passed,
                    uint64_t waitNs);

typedef struct LimitStore LimitStore;

/* The store at where (a redis:// URL, or a server the redis module names)
 * of the guard named guard (kept), with its rate and counts (kept); deny:
 * its on_store_error. NULL with why (no redis module, a bad URL). */
LimitStore* corLimitStoreNew(const char* where, const char* guard,
                             const LimitRate* rate, LimitCounts* counts,
                             bool deny, char* why, size_t whyLen);
void corLimitStoreFree(LimitStore* st);

/* Take a token of key's bucket in the store: COR_GUARD_LATER (the
 * verdict comes through wait), or a verdict now when the store failed at
 * once (on_store_error's). */
int corLimitStoreTake(LimitStore* st, struct CorRequest* r, const char* key,
                      size_t len, struct CorGuardWait* wait);

#endif /* COR_LIMIT_INT_H */
