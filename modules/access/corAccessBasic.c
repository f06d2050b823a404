/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Basic authentication (RFC 7617) against an htpasswd file of bcrypt
 * ($2y$, $2b$, $2a$) and SHA-512 crypt ($6$) hashes, checked by
 * libxcrypt's crypt_rn and compared in constant time.
 *
 * A bcrypt check costs milliseconds to tens of them (its cost factor),
 * far too long for the loop, where guards run. So a check runs on the
 * module's own threads (the guard answers COR_GUARD_LATER and resumes
 * on the request's loop), and a pair that passed is remembered: an HMAC
 * of the user and the password under a key of the generation's own, in a
 * bounded table, so the next request with it passes on the loop in a
 * microsecond. Both, not one: a cache alone would still hold the loop
 * for each new or wrong password (an attacker sends only those); threads
 * alone would hash every request of a logged-in client. Wrong passwords
 * are not remembered. The threads' queue is bounded too: past it a
 * check is refused 503, not queued.
 */
#include "corAccessInt.h"

#include <crypt.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CACHE_SLOTS 4096        /* passed pairs remembered, per guard */
#define THREADS 2
#define QUEUE_MAX 256           /* checks waiting for a thread */

typedef struct {
    char* name;
    char* hash;
} User;

struct AccessBasic {
    char* header;               /* WWW-Authenticate's value */
    User* users;
    unsigned userCount;
    unsigned char key[32];      /* the HMAC's, this generation's */
    pthread_mutex_t lock;       /* the cache's */
    unsigned char (*cache)[32]; /* a pair's HMAC, by its first bytes */
};

/* One check on a thread, in the request's arena. */
typedef struct {
    CorEvTask task;
    AccessBasic* b;
    CorRequest* r;
    CorGuardWait* wait;
    const User* user;           /* NULL: no such user (hashed anyway) */
    char* password;
    unsigned char mac[32];
    bool passed;
} Check;

static CorEvPool* threads;
static atomic_uint queued;

/* ---- The file ------------------------------------------------------------ */

static bool
hashKnown(const char* hash)
{
    return strncmp(hash, "$2y$", 4) == 0 || strncmp(hash, "$2b$", 4) == 0
           || strncmp(hash, "$2a$", 4) == 0 || strncmp(hash, "$6$", 3) == 0;
}

/* One "user:hash" line into b; -1 after a module error. */
static int
lineRead(CorModule* m, const CorConf* at, AccessBasic* b, char* line,
         const char* path, unsigned number)
{
    char* colon = strchr(line, ':');
    User* grown;

    if (colon == NULL || colon == line || !hashKnown(colon + 1)) {
        corModuleError(m, at, "basic_auth: %s:%u: expected user:hash with a "
                       "bcrypt ($2y$, htpasswd -B) or SHA-512 ($6$) hash",
                       path, number);
        return -1;
    }
    grown = realloc(b->users, (b->userCount + 1) * sizeof(*grown));
    if (grown == NULL) {
        return -1;
    }
    b->users = grown;
    *colon = '\0';
    b->users[b->userCount].name = strdup(line);
    b->users[b->userCount].hash = strdup(colon + 1);
    b->userCount++;
    return grown[b->userCount - 1].name != NULL
           && grown[b->userCount - 1].hash != NULL ? 0 : -1;
}

static int
fileRead(CorModule* m, const CorConf* at, AccessBasic* b, const char* path)
{
    FILE* f = fopen(path, "r");
    char line[1024];
    unsigned number = 0;
    int rc = 0;

    if (f == NULL) {
        corModuleError(m, at, "basic_auth: users: cannot read %s: %s", path,
                       strerror(errno));
        return -1;
    }
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        number++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '\0' && line[0] != '#') {
            rc = lineRead(m, at, b, line, path, number);
        }
    }
    fclose(f);
    if (rc == 0 && b->userCount == 0) {
        corModuleError(m, at, "basic_auth: users: %s holds no user", path);
        rc = -1;
    }
    return rc;
}

AccessBasic*
corAccessBasicRead(CorModule* m, const CorConf* conf)
{
    CorConfErrors* e = corModuleErrors(m);
    const char* realm = corConfString(conf, "realm", "restricted", e);
    const char* users = corConfString(conf, "users", NULL, e);
    AccessBasic* b = calloc(1, sizeof(*b));

    if (b == NULL) {
        corModuleError(m, conf, "no memory");
        return NULL;
    }
    pthread_mutex_init(&b->lock, NULL);
    if (realm == NULL || realm[strcspn(realm, "\"\\\r\n")] != '\0') {
        corModuleError(m, corConfGet(conf, "realm"), "basic_auth: realm: "
                       "a string without quotes, backslashes or line ends");
        goto failed;
    }
    if (users == NULL || users[0] == '\0') {
        corModuleError(m, conf, "basic_auth: users: the htpasswd file is "
                       "needed");
        goto failed;
    }
    if (asprintf(&b->header, "Basic realm=\"%s\"", realm) < 0) {
        b->header = NULL;
        goto failed;
    }
    b->cache = calloc(CACHE_SLOTS, sizeof(*b->cache));
    if (b->cache == NULL || RAND_bytes(b->key, sizeof(b->key)) != 1
        || fileRead(m, corConfGet(conf, "users"), b, users) != 0) {
        goto failed;
    }
    corConfUnknownKeys(conf, "basic_auth", (const char* const[]){
                           "realm", "users", NULL }, e);
    if (threads == NULL && (threads = corEvPoolCreate(THREADS)) == NULL) {
        corModuleError(m, conf, "basic_auth: no thread to hash on: %s",
                       strerror(errno));
        goto failed;
    }
    return b;

failed:
    corAccessBasicFree(b);
    return NULL;
}

void
corAccessBasicFree(AccessBasic* b)
{
    if (b == NULL) {
        return;
    }
    for (unsigned i = 0; i < b->userCount; i++) {
        free(b->users[i].name);
        free(b->users[i].hash);
    }
    free(b->users);
    free(b->header);
    free(b->cache);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

void
corAccessBasicThreadsStop(void)
{
    if (threads != NULL) {
        corEvPoolShutdown(threads);
        corEvPoolDestroy(threads);
        threads = NULL;
    }
}

/* ---- A request ----------------------------------------------------------- */

/* The credentials of "Authorization: Basic base64(user:password)", the
 * decoded text in r's arena, split at its first ':'; false when absent
 * or malformed. */
static bool
credentials(CorRequest* r, char** userP, char** passwordP)
{
    const CorHeader* h = corRequestHeader(r, "Authorization");
    const char* v;
    size_t len;
    unsigned char* text;
    int n;
    char* colon;

    if (h == NULL || h->valueLen < 6 || strncasecmp(h->value, "Basic ", 6)
        != 0) {
        return false;
    }
    v = h->value + 6;
    len = h->valueLen - 6;
    while (len > 0 && *v == ' ') {
        v++;
        len--;
    }
    if (len == 0 || len % 4 != 0 || len > 4096) {
        return false;
    }
    text = corRequestAlloc(r, len / 4 * 3 + 1);
    if (text == NULL) {
        return false;
    }
    n = EVP_DecodeBlock(text, (const unsigned char*)v, (int)len);
    if (n < 0) {
        return false;
    }
    n -= (v[len - 1] == '=') + (v[len - 2] == '=');     /* the padding */
    text[n] = '\0';
    colon = memchr(text, ':', (size_t)n);
    if (colon == NULL || strlen((char*)text) != (size_t)n) {
        return false;           /* no ':', or a NUL inside */
    }
    *colon = '\0';
    *userP = (char*)text;
    *passwordP = colon + 1;
    return true;
}

static const User*
userFind(const AccessBasic* b, const char* name)
{
    for (unsigned i = 0; i < b->userCount; i++) {
        if (strcmp(b->users[i].name, name) == 0) {
            return &b->users[i];
        }
    }
    return NULL;
}

/* The pair's HMAC-SHA-256 under the generation's key: what the cache
 * holds, never the password. */
static void
pairMac(const AccessBasic* b, const char* user, const char* password,
        unsigned char mac[32])
{
    size_t userLen = strlen(user);
    size_t passwordLen = strlen(password);
    unsigned char buf[4096 + 2];
    unsigned macLen = 32;

    memcpy(buf, user, userLen + 1);     /* with its NUL: "a" "bc" is not
                                           "ab" "c" */
    memcpy(buf + userLen + 1, password, passwordLen);
    HMAC(EVP_sha256(), b->key, sizeof(b->key), buf, userLen + 1 + passwordLen,
         mac, &macLen);
}

static unsigned
slotOf(const unsigned char mac[32])
{
    unsigned slot;

    memcpy(&slot, mac, sizeof(slot));
    return slot % CACHE_SLOTS;
}

static bool
cacheHas(AccessBasic* b, const unsigned char mac[32])
{
    bool hit;

    pthread_mutex_lock(&b->lock);
    hit = CRYPTO_memcmp(b->cache[slotOf(mac)], mac, 32) == 0;
    pthread_mutex_unlock(&b->lock);
    return hit;
}

/* A newer pair takes its slot: the table's bound. */
static void
cachePut(AccessBasic* b, const unsigned char mac[32])
{
    pthread_mutex_lock(&b->lock);
    memcpy(b->cache[slotOf(mac)], mac, 32);
    pthread_mutex_unlock(&b->lock);
}

static int
refuse(AccessBasic* b, CorRequest* r)
{
    corResponseHeader(r, "WWW-Authenticate", b->header);
    return 401;
}

/* On the request's loop, with the thread's verdict. */
static void
checked(CorEvTask* task)
{
    Check* c = corContainerOf(task, Check, task);

    atomic_fetch_sub(&queued, 1);
    if (c->passed) {
        cachePut(c->b, c->mac);
    }
    corGuardResume(c->wait, c->passed ? COR_GUARD_PASS : refuse(c->b, c->r));
}

/* On a thread: the hash of the password with the user's salt, compared
 * whole in constant time. An unknown user is hashed against the first
 * user's hash all the same, so that the time does not tell who exists. */
static void
check(CorEvTask* task)
{
    Check* c = corContainerOf(task, Check, task);
    const char* hash = c->user != NULL ? c->user->hash : c->b->users[0].hash;
    size_t hashLen = strlen(hash);
    struct crypt_data* data = calloc(1, sizeof(*data));
    const char* out = data != NULL
                      ? crypt_rn(c->password, hash, data, sizeof(*data))
                      : NULL;

    c->passed = c->user != NULL && out != NULL && strlen(out) == hashLen
                && CRYPTO_memcmp(out, hash, hashLen) == 0;
    if (data != NULL) {
        OPENSSL_cleanse(data, sizeof(*data));
    }
    free(data);
    corEvLoopPost(c->r->loop, &c->task, checked);
}

int
corAccessBasicCheck(AccessBasic* b, CorRequest* r, CorGuardWait* wait)
{
    char* user;
    char* password;
    Check* c;

    if (!credentials(r, &user, &password)) {
        return refuse(b, r);
    }
    c = corRequestAlloc(r, sizeof(*c));
    if (c == NULL) {
        return 500;
    }
    *c = (Check){ .b = b, .r = r, .wait = wait, .user = userFind(b, user),
                  .password = password };
    pairMac(b, user, password, c->mac);
    if (c->user != NULL && cacheHas(b, c->mac)) {
        return COR_GUARD_PASS;
    }
    if (atomic_fetch_add(&queued, 1) >= QUEUE_MAX
        || corEvPoolPost(threads, &c->task, check) != 0) {
        atomic_fetch_sub(&queued, 1);
        corResponseHeader(r, "Retry-After", "1");
        return 503;
    }
    return COR_GUARD_LATER;
}
