/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A guard's buckets in Redis (`store: "redis://..."`), so that every
 * instance behind a load balancer takes from one budget. A take is one
 * round trip: one script (EVALSHA; EVAL once when Redis does not have it
 * yet) that does the GCRA step of corLimitBucket.c atomically on the
 * server, with the server's clock (TIME), so that instances whose clocks
 * differ still agree. Each bucket is one key, cor:limit:GUARD:KEY (a
 * KEY past 128 bytes by its SHA-1), that expires once its bucket is full
 * again: Redis holds only the keys in use.
 *
 * The guard sends from the loop and answers later (COR_GUARD_LATER), so
 * nothing waits on the loop. With the store down or failing, the guard's
 * on_store_error decides (allow, the default, or deny: 503), the
 * failure said once in the log until the store answers again, and each
 * counted in /metrics (cor_limit_store_errors_total).
 */
#include "corLimitInt.h"

#include <cor.h>
#include <corRedis.h>

#include <openssl/sha.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS[1] the bucket; ARGV[1] the interval, ARGV[2] the burst, in
 * microseconds and tokens. Returns 0 when a token was taken, else the
 * microseconds until the next one. */
static const char script[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local interval = tonumber(ARGV[1])\n"
    "local room = interval * tonumber(ARGV[2])\n"
    "local tat = tonumber(redis.call('GET', KEYS[1]) or 0)\n"
    "local nxt = (tat > now and tat or now) + interval\n"
    "if nxt - now <= room then\n"
    "  redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX',\n"
    "             math.ceil((nxt - now) / 1000) + 1)\n"
    "  return 0\n"
    "end\n"
    "return nxt - now - room\n";

struct LimitStore {
    CorRedis* server;
    const char* guard; /* its name, the guard's */
    char* prefix;      /* cor:limit:GUARD: */
    size_t prefixLen;
    const LimitRate* rate;
    LimitCounts* counts;
    bool deny;
    atomic_bool down; /* said in the log, not yet answered again */
    char sha[2 * SHA_DIGEST_LENGTH + 1];
    char interval[24];
    char burst[16];
};

/* A take waiting for its reply; in the request's arena. */
typedef struct {
    LimitStore* st;
    CorRequest* r;
    CorGuardWait* wait;
    bool evaled; /* sent again as EVAL after NOSCRIPT */
    size_t redisKeyLen;
    char redisKey[]; /* cor:limit:GUARD:KEY, or :#SHA1 of a long KEY */
} Take;

LimitStore*
corLimitStoreNew(const char* where, const char* guard, const LimitRate* rate,
                 LimitCounts* counts, bool deny, char* why, size_t whyLen)
{
    LimitStore* st = calloc(1, sizeof(*st));
    unsigned char digest[SHA_DIGEST_LENGTH];

    if (st == NULL) {
        snprintf(why, whyLen, "no memory");
        return NULL;
    }
    st->server = corRedisServer(where, why, whyLen);
    if (st->server == NULL) {
        free(st);
        return NULL;
    }
    st->guard = guard;
    st->prefixLen = strlen("cor:limit::") + strlen(guard);
    st->prefix = malloc(st->prefixLen + 1);
    if (st->prefix == NULL) {
        snprintf(why, whyLen, "no memory");
        free(st);
        return NULL;
    }
    snprintf(st->prefix, st->prefixLen + 1, "cor:limit:%s:", guard);
    st->rate = rate;
    st->counts = counts;
    st->deny = deny;
    SHA1((const unsigned char*)script, sizeof(script) - 1, digest);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++) {
        snprintf(st->sha + 2 * i, 3, "%02x", digest[i]);
    }
    snprintf(st->interval, sizeof(st->interval), "%llu",
             (unsigned long long)(rate->intervalNs / 1000));
    snprintf(st->burst, sizeof(st->burst), "%u", rate->burst);
    return st;
}

void
corLimitStoreFree(LimitStore* st)
{
    if (st != NULL) {
        free(st->prefix);
        free(st);
    }
}

/* The store failed (why): the guard's on_store_error, said once. */
static int
storeFailed(LimitStore* st, const char* why)
{
    atomic_fetch_add_explicit(&st->counts->storeErrors, 1,
                              memory_order_relaxed);
    if (!atomic_exchange(&st->down, true)) {
        corLog(COR_LOG_WARN,
               "limit: guard %s: its store failed (%s): requests %s "
               "until it answers again",
               st->guard, why, st->deny ? "are refused (503)" : "pass");
    }
    return st->deny ? 503 : COR_GUARD_PASS;
}

static void
storeAnswered(LimitStore* st)
{
    if (atomic_load_explicit(&st->down, memory_order_relaxed)
        && atomic_exchange(&st->down, false)) {
        corLog(COR_LOG_INFO, "limit: guard %s: its store answers again",
               st->guard);
    }
}

static void takeReply(void* arg, int rc, CorRedisReply* reply, const char* why);

/* A key past this many bytes is named in Redis by its SHA-1 instead: a
 * client's header does not make Redis hold kilobytes a bucket. */
#define KEY_RAW_MOST 128

/* EVALSHA (or EVAL: the script itself) of t's bucket, whose Redis key
 * (cor:limit:GUARD:KEY) is t->redisKey. */
static int
takeSend(Take* t, char* why, size_t whyLen)
{
    LimitStore* st = t->st;
    const char* argv[] = { t->evaled ? "EVAL" : "EVALSHA",
                           t->evaled ? script : st->sha,
                           "1",
                           t->redisKey,
                           st->interval,
                           st->burst };
    size_t lens[] = { strlen(argv[0]), strlen(argv[1]), 1,
                      t->redisKeyLen,  strlen(argv[4]), strlen(argv[5]) };

    return corRedisSend(st->server, &(CorRedisCommand){ 6, argv, lens },
                        takeReply, t, why, whyLen);
}

/* What the script said: a verdict, or a store error. */
static int
takeVerdict(Take* t, CorRedisReply* reply, bool* againP)
{
    char why[256];

    *againP = false;
    if (reply->type == COR_REDIS_INTEGER) {
        storeAnswered(t->st);
        return corLimitVerdict(t->r, t->st->counts, reply->integer <= 0,
                               (uint64_t)reply->integer * 1000);
    }
    if (reply->type == COR_REDIS_ERROR && !t->evaled
        && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        t->evaled = true; /* Redis restarted, or flushed its scripts */
        if (takeSend(t, why, sizeof(why)) == 0) {
            *againP = true;
            return COR_GUARD_LATER;
        }
        return storeFailed(t->st, why);
    }
    snprintf(why, sizeof(why), "Redis %s said: %s", corRedisName(t->st->server),
             reply->type == COR_REDIS_ERROR ? reply->str : "not a number");
    return storeFailed(t->st, why);
}

static void
takeReply(void* arg, int rc, CorRedisReply* reply, const char* why)
{
    Take* t = arg;
    bool again = false;
    int verdict = rc == 0 ? takeVerdict(t, reply, &again)
                          : storeFailed(t->st, why);

    corRedisReplyFree(reply);
    if (!again) {
        corGuardResume(t->wait, verdict);
    }
}

int
corLimitStoreTake(LimitStore* st, CorRequest* r, const char* key, size_t len,
                  CorGuardWait* wait)
{
    size_t keyLen = len <= KEY_RAW_MOST ? len : 1 + 2 * SHA_DIGEST_LENGTH;
    Take* t = corRequestAlloc(r, sizeof(*t) + st->prefixLen + keyLen);
    char why[256];

    if (t == NULL) {
        return storeFailed(st, "no memory");
    }
    *t = (Take){
        .st = st, .r = r, .wait = wait, .redisKeyLen = st->prefixLen + keyLen
    };
    memcpy(t->redisKey, st->prefix, st->prefixLen);
    if (len <= KEY_RAW_MOST) {
        memcpy(t->redisKey + st->prefixLen, key, len);
    } else {
        unsigned char digest[SHA_DIGEST_LENGTH];
        char* hex = t->redisKey + st->prefixLen;

        SHA1((const unsigned char*)key, len, digest);
        hex[0] = '#';
        for (int i = 0; i < SHA_DIGEST_LENGTH; i++) {
            hex[1 + 2 * i] = "0123456789abcdef"[digest[i] >> 4];
            hex[2 + 2 * i] = "0123456789abcdef"[digest[i] & 15];
        }
    }
    if (takeSend(t, why, sizeof(why)) != 0) {
        return storeFailed(st, why);
    }
    return COR_GUARD_LATER;
}
