/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Basic authentication (RFC 7617) against an htpasswd file
 * (corAccessUsers.c; the hashes it may hold: corAccessHash.c).
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
 *
 * The file is looked at again at most once a second, on the loop (a
 * stat); a changed one is read on the threads and takes the place of the
 * old at once, the remembered pairs forgotten with it. One that cannot be
 * read, or is wrong, is logged and the users read before stay.
 */
#include "corAccessInt.h"

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

#define CACHE_SLOTS 4096 /* passed pairs remembered, per guard */
#define THREADS 2
#define QUEUE_MAX 256 /* checks waiting for a thread */
#define WATCH_MS 1000 /* the file is looked at, at most */

struct AccessBasic {
    char* header;                 /* WWW-Authenticate's value */
    char* path;                   /* the htpasswd file */
    unsigned char key[32];        /* the HMAC's, this generation's */
    pthread_mutex_t lock;         /* users and the cache */
    AccessUsers* users;           /* the file as last read */
    unsigned char (*cache)[32];   /* a pair's HMAC, by its first bytes */
    atomic_uint_fast64_t watchAt; /* when the file is looked at next */
    atomic_bool reading;          /* a read of it is on a thread */
    CorEvTask reread;
};

/* One check on a thread, in the request's arena. */
typedef struct {
    CorEvTask task;
    AccessBasic* b;
    CorRequest* r;
    CorGuardWait* wait;
    AccessUsers* users; /* held while the check runs */
    char* user;
    char* password;
    unsigned char mac[32];
    bool passed;
} Check;

static CorEvPool* threads;
static atomic_uint queued;

/* ---- The file ------------------------------------------------------------ */

/* The weak hashes are said at each read: they work, and should go. */
static void
weakSay(const char* path, unsigned weak, unsigned count)
{
    if (weak > 0) {
        corLog(COR_LOG_WARN,
               "basic_auth: %s: %u of %u users have a weak "
               "hash ($apr1$ or {SHA}, fast to guess): give them bcrypt "
               "(htpasswd -B)",
               path, weak, count);
    }
}

AccessBasic*
corAccessBasicRead(CorModule* m, const CorConf* conf)
{
    CorConfErrors* e = corModuleErrors(m);
    const char* realm = corConfString(conf, "realm", "restricted", e);
    const char* users = corConfString(conf, "users", NULL, e);
    AccessBasic* b = calloc(1, sizeof(*b));
    char why[512];
    unsigned weak;

    if (b == NULL) {
        corModuleError(m, conf, "no memory");
        return NULL;
    }
    pthread_mutex_init(&b->lock, NULL);
    if (realm == NULL || realm[strcspn(realm, "\"\\\r\n")] != '\0') {
        corModuleError(m, corConfGet(conf, "realm"),
                       "basic_auth: realm: "
                       "a string without quotes, backslashes or line ends");
        goto failed;
    }
    if (users == NULL || users[0] == '\0') {
        corModuleError(m, conf,
                       "basic_auth: users: the htpasswd file is "
                       "needed");
        goto failed;
    }
    if (asprintf(&b->header, "Basic realm=\"%s\"", realm) < 0) {
        b->header = NULL;
        goto failed;
    }
    b->path = strdup(users);
    b->cache = calloc(CACHE_SLOTS, sizeof(*b->cache));
    if (b->path == NULL || b->cache == NULL
        || RAND_bytes(b->key, sizeof(b->key)) != 1) {
        corModuleError(m, conf, "no memory");
        goto failed;
    }
    b->users = corAccessUsersRead(users, why, sizeof(why), &weak);
    if (b->users == NULL) {
        corModuleError(m, corConfGet(conf, "users"), "basic_auth: users: %s",
                       why);
        goto failed;
    }
    weakSay(users, weak, corAccessUsersCount(b->users));
    atomic_init(&b->watchAt, corEvClockMs() + WATCH_MS);
    corConfUnknownKeys(conf, "basic_auth",
                       (const char* const[]){ "realm", "users", NULL }, e);
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
    corAccessUsersRelease(b->users);
    free(b->path);
    free(b->header);
    free(b->cache);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

/* On a thread: the changed file read, and put in place of the old one
 * with the pairs remembered under it forgotten. */
static void
reread(CorEvTask* task)
{
    AccessBasic* b = corContainerOf(task, AccessBasic, reread);
    char why[512];
    unsigned weak;
    AccessUsers* fresh = corAccessUsersRead(b->path, why, sizeof(why), &weak);
    AccessUsers* old;

    if (fresh == NULL) {
        corLog(COR_LOG_ERROR,
               "basic_auth: users: %s: the users read before "
               "stay",
               why);
        atomic_store(&b->reading, false);
        return;
    }
    pthread_mutex_lock(&b->lock);
    old = b->users;
    b->users = fresh;
    memset(b->cache, 0, CACHE_SLOTS * sizeof(*b->cache));
    pthread_mutex_unlock(&b->lock);
    corAccessUsersRelease(old);
    corLog(COR_LOG_INFO, "basic_auth: %s read again: %u users", b->path,
           corAccessUsersCount(fresh));
    weakSay(b->path, weak, corAccessUsersCount(fresh));
    atomic_store(&b->reading, false);
}

/* On the loop, at most once a second: a stat of the file; a changed one
 * is read on a thread. A file that changed but could not be read is read
 * again at the next look, until it can. */
static void
fileWatch(AccessBasic* b)
{
    uint64_t now = corEvClockMs();
    uint_fast64_t at = atomic_load(&b->watchAt);
    AccessUsers* users;
    bool changed;

    if (now < at || atomic_load(&b->reading)
        || !atomic_compare_exchange_strong(&b->watchAt, &at, now + WATCH_MS)) {
        return;
    }
    /* The stat outside the lock, which the loops' cache looks take. */
    pthread_mutex_lock(&b->lock);
    users = corAccessUsersHold(b->users);
    pthread_mutex_unlock(&b->lock);
    changed = corAccessUsersChanged(users, b->path);
    corAccessUsersRelease(users);
    if (changed && !atomic_exchange(&b->reading, true)
        && corEvPoolPost(threads, &b->reread, reread) != 0) {
        atomic_store(&b->reading, false);
    }
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

/* r's Authorization header, NULL when none; *twiceP when it has two or
 * more, which nginx refuses 400 (which of them would count is a guess a
 * proxy in front may make otherwise). */
static const CorHeader*
authorization(const CorRequest* r, bool* twiceP)
{
    const CorHeader* found = NULL;

    *twiceP = false;
    for (unsigned i = 0; i < r->headerCount; i++) {
        if (corHeaderIs(&r->headers[i], "authorization")) {
            *twiceP = found != NULL;
            if (*twiceP) {
                break;
            }
            found = &r->headers[i];
        }
    }
    return found;
}

/* The credentials of "Authorization: Basic base64(user:password)" h, the
 * decoded text in r's arena, split at its first ':'; false when absent
 * or malformed. */
static bool
credentials(CorRequest* r, const CorHeader* h, char** userP, char** passwordP)
{
    const char* v;
    size_t len;
    unsigned char* text;
    int n;
    char* colon;

    if (h == NULL || h->valueLen < 6
        || strncasecmp(h->value, "Basic ", 6) != 0) {
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
    n -= (v[len - 1] == '=') + (v[len - 2] == '='); /* the padding */
    text[n] = '\0';
    colon = memchr(text, ':', (size_t)n);
    if (colon == NULL || strlen((char*)text) != (size_t)n) {
        return false; /* no ':', or a NUL inside */
    }
    *colon = '\0';
    *userP = (char*)text;
    *passwordP = colon + 1;
    return true;
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

    memcpy(buf, user, userLen + 1); /* with its NUL: "a" "bc" is not
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

/* A newer pair takes its slot: the table's bound. Only under the users
 * it was checked against: a pair checked against a file since read again
 * is not remembered. */
static void
cachePut(AccessBasic* b, const AccessUsers* users, const unsigned char mac[32])
{
    pthread_mutex_lock(&b->lock);
    if (b->users == users) {
        memcpy(b->cache[slotOf(mac)], mac, 32);
    }
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
        cachePut(c->b, c->users, c->mac);
    }
    corAccessUsersRelease(c->users);
    corGuardResume(c->wait, c->passed ? COR_GUARD_PASS : refuse(c->b, c->r));
}

/* On a thread: the user's hash (found without telling by the time
 * whether the user exists), the password checked against it. An unknown
 * user is checked against the file's costliest hash all the same, so
 * that it takes as long as the slowest known one. */
static void
check(CorEvTask* task)
{
    Check* c = corContainerOf(task, Check, task);
    bool known;
    const char* hash = corAccessUsersHash(c->users, c->user, &known);
    bool matches = corAccessHashMatches(c->password, hash);

    c->passed = known && matches;
    corEvLoopPost(c->r->loop, &c->task, checked);
}

int
corAccessBasicCheck(AccessBasic* b, CorRequest* r, CorGuardWait* wait)
{
    const CorHeader* h;
    bool twice;
    char* user;
    char* password;
    Check* c;

    fileWatch(b);
    h = authorization(r, &twice);
    if (twice) {
        return 400;
    }
    if (!credentials(r, h, &user, &password)) {
        return refuse(b, r);
    }
    c = corRequestAlloc(r, sizeof(*c));
    if (c == NULL) {
        return 500;
    }
    *c = (Check){
        .b = b, .r = r, .wait = wait, .user = user, .password = password
    };
    pairMac(b, user, password, c->mac);
    /* Only pairs that passed are remembered: a hit is a user that
     * exists. */
    if (cacheHas(b, c->mac)) {
        return COR_GUARD_PASS;
    }
    pthread_mutex_lock(&b->lock);
    c->users = corAccessUsersHold(b->users);
    pthread_mutex_unlock(&b->lock);
    if (atomic_fetch_add(&queued, 1) >= QUEUE_MAX
        || corEvPoolPost(threads, &c->task, check) != 0) {
        atomic_fetch_sub(&queued, 1);
        corAccessUsersRelease(c->users);
        corResponseHeader(r, "Retry-After", "1");
        return 503;
    }
    return COR_GUARD_LATER;
}
