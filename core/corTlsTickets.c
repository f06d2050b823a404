/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Session ticket keys shared by every cor instance behind one balancer
 * (tls: { tickets: "redis://..." }). Without it each process makes its
 * own keys (OpenSSL's, at the context's birth), so a session made on one
 * instance is a full handshake on the next. With it the keys live in
 * Redis and every instance reads them:
 *
 * - cor:tls:tickets holds up to KEY_COUNT keys, newest first, each
 *   KEY_BYTES (a name, an AES-256-CBC key, an HMAC-SHA256 key). The
 *   newest encrypts; all decrypt, and a ticket under an older one is
 *   renewed (the callback says 2).
 * - One instance at a time rotates: the one whose `SET
 *   cor:tls:tickets:lease ID NX PX session_lifetime/2` succeeds puts a
 *   new key in front. The lease's expiry is the rotation period, so
 *   whoever asks first after it ends rotates next; the others only read.
 *   A key encrypts for half a lifetime and decrypts for a whole one after
 *   (three keys, not two: a ticket made just before a rotation lives its
 *   whole session_lifetime).
 * - A task of the generation (a thread of its own, off the loops: the
 *   handshakes never wait on Redis) asks every quarter of the period and
 *   copies the keys into this process, under a lock the ticket callback
 *   takes for a copy of one key.
 * - Redis down: the last keys serve (at start, keys of this process
 *   alone, so tickets resume where they were made); said once in the log,
 *   and again when it answers; every failed ask is counted in /metrics.
 */
#include "corCoreInt.h"
#include "corRedis.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY_COUNT 3
#define NAME_BYTES 16
#define AES_BYTES 32
#define HMAC_BYTES 32
#define KEY_BYTES (NAME_BYTES + AES_BYTES + HMAC_BYTES)
#define KEYS_KEY "cor:tls:tickets"
#define LEASE_KEY "cor:tls:tickets:lease"
/* The asks' period, as a part of the rotation's, within bounds. */
#define ASKS_PER_ROTATION 4
#define ASK_MIN_MS 250
#define ASK_MAX_MS 10000

typedef struct {
    unsigned char name[NAME_BYTES];
    unsigned char aes[AES_BYTES];
    unsigned char hmac[HMAC_BYTES];
} TicketKey;

_Static_assert(sizeof(TicketKey) == KEY_BYTES, "a key is its bytes in Redis");

struct CorTlsTickets {
    pthread_mutex_t lock;
    TicketKey keys[KEY_COUNT]; /* under lock; [0] encrypts */
    unsigned count;
    CorRedis* redis;
    char* where;       /* tls.tickets as written, for the log */
    unsigned rotateMs; /* session_lifetime / 2: the lease's life */
    char owner[40];    /* this process's lease value */
    bool failing;      /* the last ask failed (the task's alone) */
};

static _Atomic uint64_t redisErrors;
static _Atomic uint64_t rotations;
static int exIndex = -1;
static pthread_once_t exOnce = PTHREAD_ONCE_INIT;

static void
exIndexMake(void)
{
    exIndex = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* Keys of this process alone, until Redis gives the shared ones. */
static int
keyMake(TicketKey* k)
{
    return RAND_bytes((unsigned char*)k, sizeof(*k)) == 1 ? 0 : -1;
}

/* OpenSSL's ticket callback: the key to encrypt a new ticket with (1),
 * or the one a ticket names to decrypt it (1: the newest, 2: an older
 * one, renew it), or 0 (unknown: a full handshake), -1 (failed). */
static int
onTicketKey(SSL* ssl, unsigned char name[NAME_BYTES], unsigned char* iv,
            EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int enc)
{
    CorTlsTickets* t = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), exIndex);
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    TicketKey k;
    int found = -1;
    int rc;

    if (t == NULL) {
        return -1;
    }
    pthread_mutex_lock(&t->lock);
    for (unsigned i = 0; i < t->count && found < 0; i++) {
        if (enc || memcmp(t->keys[i].name, name, NAME_BYTES) == 0) {
            k = t->keys[i];
            found = (int)i;
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (found < 0) {
        return 0;
    }
    if (enc) {
        memcpy(name, k.name, NAME_BYTES);
        rc = RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) == 1
             && EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), NULL, k.aes, iv)
                    == 1;
    } else {
        rc = EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), NULL, k.aes, iv)
             == 1;
    }
    rc = rc && EVP_MAC_init(mac, k.hmac, HMAC_BYTES, params) == 1;
    OPENSSL_cleanse(&k, sizeof(k));
    if (!rc) {
        return -1;
    }
    return enc || found == 0 ? 1 : 2;
}

CorTlsTickets*
corTlsTicketsNew(const CorConfigTls* tls, CorConfErrors* e)
{
    const CorConf* at = corConfGet(tls->node, "tickets");
    CorTlsTickets* t = calloc(1, sizeof(*t));
    unsigned char id[8];
    char why[256];

    if (t == NULL || (t->where = strdup(tls->tickets)) == NULL) {
        corConfErrorf(e, at, "out of memory");
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->rotateMs = tls->sessionLifetimeS * 1000 / 2;
    t->redis = corRedisServer(tls->tickets, why, sizeof(why));
    if (t->redis == NULL) {
        corConfErrorf(e, at, "tickets: %s", why);
        corTlsTicketsFree(t);
        return NULL;
    }
    pthread_once(&exOnce, exIndexMake);
    if (exIndex < 0 || keyMake(&t->keys[0]) != 0
        || RAND_bytes(id, sizeof(id)) != 1) {
        corConfErrorf(e, at, "tickets: cannot make a key (OpenSSL)");
        corTlsTicketsFree(t);
        return NULL;
    }
    t->count = 1;
    snprintf(t->owner, sizeof(t->owner), "%ld-%02x%02x%02x%02x%02x%02x%02x%02x",
             (long)getpid(), id[0], id[1], id[2], id[3], id[4], id[5], id[6],
             id[7]);
    return t;
}

void
corTlsTicketsUse(CorTlsTickets* t, SSL_CTX* ctx)
{
    SSL_CTX_set_ex_data(ctx, exIndex, t);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, onTicketKey);
}

void
corTlsTicketsFree(CorTlsTickets* t)
{
    if (t == NULL) {
        return;
    }
    OPENSSL_cleanse(t->keys, sizeof(t->keys));
    pthread_mutex_destroy(&t->lock);
    free(t->where);
    free(t);
}

/* ---- The refresh ------------------------------------------------------- */

/* Take the keys of a value of cor:tls:tickets. Returns 0, or -1 when
 * the value is not keys. */
static int
keysTake(CorTlsTickets* t, const char* value, size_t len)
{
    unsigned count = (unsigned)(len / KEY_BYTES);

    if (len == 0 || len % KEY_BYTES != 0 || count > KEY_COUNT) {
        return -1;
    }
    pthread_mutex_lock(&t->lock);
    memcpy(t->keys, value, len);
    t->count = count;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

/* As the lease's holder: a new key in front of the ones Redis has (old:
 * its value, NULL when none), written back. Returns 0 or -1 with why. */
static int
rotate(CorTlsTickets* t, const CorRedisReply* old, char* why, size_t whyLen)
{
    unsigned char value[KEY_COUNT * KEY_BYTES];
    size_t keep = 0;
    const char* argv[3] = { "SET", KEYS_KEY, (const char*)value };
    size_t argvLen[3] = { 3, sizeof(KEYS_KEY) - 1, 0 };
    CorRedisReply* reply = NULL;
    int rc;

    if (old != NULL && old->type == COR_REDIS_STRING && old->len > 0
        && old->len % KEY_BYTES == 0) {
        keep = old->len < (KEY_COUNT - 1) * KEY_BYTES
                   ? old->len
                   : (KEY_COUNT - 1) * KEY_BYTES;
        memcpy(value + KEY_BYTES, old->str, keep);
    } else {
        /* Redis has none (its first use, or it restarted empty): carry
         * this instance's, so that the sessions they made resume still. */
        pthread_mutex_lock(&t->lock);
        keep = (t->count < KEY_COUNT - 1 ? t->count : KEY_COUNT - 1)
               * KEY_BYTES;
        memcpy(value + KEY_BYTES, t->keys, keep);
        pthread_mutex_unlock(&t->lock);
    }
    if (keyMake((TicketKey*)value) != 0) {
        snprintf(why, whyLen, "cannot make a key (OpenSSL)");
        return -1;
    }
    argvLen[2] = KEY_BYTES + keep;
    rc = corRedisCommand(t->redis, &(CorRedisCommand){ 3, argv, argvLen },
                         &reply, why, whyLen);
    if (rc == 0 && reply->type == COR_REDIS_ERROR) {
        snprintf(why, whyLen, "Redis %s: SET answered %s", t->where,
                 reply->str);
        rc = -1;
    }
    corRedisReplyFree(reply);
    if (rc == 0) {
        keysTake(t, (const char*)value, argvLen[2]);
        atomic_fetch_add(&rotations, 1);
        corLog(COR_LOG_INFO,
               "tls: ticket keys rotated in Redis %s (this instance held "
               "the lease)",
               t->where);
    }
    OPENSSL_cleanse(value, sizeof(value));
    return rc == 0 ? 0 : -1;
}

/* One ask: the lease tried and the keys read in one round trip; the
 * lease's winner rotates. Returns 0, or -1 with why. */
static int
askOnce(CorTlsTickets* t, char* why, size_t whyLen)
{
    char px[24];
    const char* lease[] = { "SET", LEASE_KEY, t->owner, "NX", "PX", px };
    const char* get[] = { "GET", KEYS_KEY };
    CorRedisCommand cmds[2] = { { 6, lease, NULL }, { 2, get, NULL } };
    CorRedisReply* replies[2] = { NULL, NULL };
    int rc;

    snprintf(px, sizeof(px), "%u", t->rotateMs);
    rc = corRedisPipeline(t->redis, cmds, 2, replies, why, whyLen);
    if (rc != 0) {
        return -1;
    }
    if (replies[0]->type == COR_REDIS_ERROR
        || replies[1]->type == COR_REDIS_ERROR) {
        snprintf(why, whyLen, "Redis %s answered %s", t->where,
                 (replies[0]->type == COR_REDIS_ERROR ? replies[0] : replies[1])
                     ->str);
        rc = -1;
    } else if (replies[0]->type == COR_REDIS_STATUS) {
        rc = rotate(t, replies[1], why, whyLen);
    } else if (replies[1]->type == COR_REDIS_STRING
               && keysTake(t, replies[1]->str, replies[1]->len) < 0) {
        snprintf(why, whyLen, "Redis %s: %s holds %zu bytes, not ticket keys",
                 t->where, KEYS_KEY, replies[1]->len);
        rc = -1;
    }
    /* NIL: the holder of the lease has not written them yet. */
    corRedisReplyFree(replies[0]);
    corRedisReplyFree(replies[1]);
    return rc;
}

static void
ticketsTask(void* arg)
{
    CorTlsTickets* t = arg;
    unsigned waitMs = t->rotateMs / ASKS_PER_ROTATION;
    char why[256];

    waitMs = waitMs < ASK_MIN_MS   ? ASK_MIN_MS
             : waitMs > ASK_MAX_MS ? ASK_MAX_MS
                                   : waitMs;
    do {
        if (askOnce(t, why, sizeof(why)) == 0) {
            if (t->failing) {
                corLog(COR_LOG_INFO,
                       "tls: ticket keys: Redis %s answers again: the "
                       "shared keys serve",
                       t->where);
                t->failing = false;
            }
            continue;
        }
        if (atomic_load(&corRuntime.stopping)) {
            return;
        }
        atomic_fetch_add(&redisErrors, 1);
        if (!t->failing) {
            corLog(COR_LOG_WARN,
                   "tls: ticket keys: %s; the last keys serve, asked again "
                   "every %u ms",
                   why, waitMs);
            t->failing = true;
        }
    } while (corTaskScheduleAfter((int)waitMs) == 0);
}

int
corTlsTicketsStart(CorTlsTickets* t)
{
    return corTaskSpawn(ticketsTask, t, "tickets");
}

void
corTlsTicketsEmit(CorMetricsOut* out)
{
    corMetricsPrintf(out,
                     "# HELP cor_tls_ticket_redis_errors_total Asks for the "
                     "shared TLS ticket keys (tls.tickets) that Redis did "
                     "not answer; the last keys served.\n"
                     "# TYPE cor_tls_ticket_redis_errors_total counter\n"
                     "cor_tls_ticket_redis_errors_total %lu\n"
                     "# HELP cor_tls_ticket_rotations_total Rotations of the "
                     "shared TLS ticket keys this instance made (it held "
                     "the lease).\n"
                     "# TYPE cor_tls_ticket_rotations_total counter\n"
                     "cor_tls_ticket_rotations_total %lu\n",
                     (unsigned long)atomic_load(&redisErrors),
                     (unsigned long)atomic_load(&rotations));
}
