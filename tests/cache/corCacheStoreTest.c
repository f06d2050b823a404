/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache module's pure parts (modules/cache/corCachePolicy.c,
 * corCacheEntry.c and corCacheStore.c, included): HTTP dates in their
 * three forms, Cache-Control read as RFC 9111 writes it (case, quotes,
 * spaces), the freshness lifetime's order and heuristic, what may be
 * stored, the age of 4.2.3, Vary's values (absent is not empty), a 304's
 * fields over the stored ones, and the store: a shard's LRU order, its
 * byte bound, an evicted entry that stays readable while referenced, a
 * variant replaced, a prefix purged; the disk half (corCacheDisk.c and
 * its file's format): a file written and found again, one cut or
 * corrupt a miss, the size bound, the index rebuilt by a scan, the
 * index's bytes an entry; the index in its zone (core/corZone.c,
 * included) handed to the next generation as the master does, kept
 * whole when a process dies holding its lock, and fresh when the size
 * or the zone's header changed. The functions of the core they call are
 * given here, as the core has them; the worker pool runs each task at
 * once, on the caller's thread.
 */
#include "corTest.h"

#include "corCacheDisk.c"
#include "corCacheDiskWrite.c"
#include "corCacheDiskFile.c"
#include "corCacheEntry.c"
#include "corCacheIndex.c"
#include "corCacheOrder.c"
#include "corCachePolicy.c"
#include "corCacheStore.c"
#include "corZone.c"

#include <strings.h>
#include <sys/wait.h>

/* ---- What the core gives the module (corRequestRead.c, corRespond.c,
 * corUpgrade.c), for the included files alone ---------------------------- */

static const CorHeader*
headerIn(const CorHeader* list, unsigned count, const char* name)
{
    for (unsigned i = 0; i < count; i++) {
        if (corHeaderIs(&list[i], name)) {
            return &list[i];
        }
    }
    return NULL;
}

const CorHeader*
corRequestHeader(const CorRequest* r, const char* name)
{
    return headerIn(r->headers, r->headerCount, name);
}

const CorHeader*
corResponseHeaderGet(const CorRequest* r, const char* name)
{
    return headerIn(r->responseHeaders, r->responseHeaderCount, name);
}

bool
corHeaderListHas(const CorHeader* h, const char* token, size_t tokenLen)
{
    const char* at = h->value;
    const char* end = h->value + h->valueLen;

    while (at < end) {
        const char* one;

        while (at < end && (*at == ',' || *at == ' ')) {
            at++;
        }
        one = at;
        while (at < end && *at != ',' && *at != ' ') {
            at++;
        }
        if ((size_t)(at - one) == tokenLen
            && strncasecmp(one, token, tokenLen) == 0) {
            return true;
        }
    }
    return false;
}

void
corLog(CorLogLevel level, const char* fmt, ...)
{
    (void)level;
    (void)fmt;
}

/* A stop, not a reload: the LRU order is saved. */
bool
corGenerationReplaced(void)
{
    return false;
}

CorEvPool*
corEvPoolCreate(unsigned threads)
{
    (void)threads;
    return (CorEvPool*)(uintptr_t)1;
}

int
corEvPoolPost(CorEvPool* pool, CorEvTask* task, CorEvTaskFn fn)
{
    (void)pool;
    fn(task);
    return 0;
}

void
corEvPoolShutdown(CorEvPool* pool)
{
    (void)pool;
}

void
corEvPoolDestroy(CorEvPool* pool)
{
    (void)pool;
}

/* No answer streams here: its growing body (corCacheStream.c) is the
 * integration tests'; the disk writes of whole entries are these. */
void
cacheGrowingRef(CacheGrowing* g)
{
    (void)g;
    ck_abort_msg("no answer streams here");
}

void
cacheGrowingRelease(CacheGrowing* g)
{
    cacheGrowingRef(g);
}

size_t
cacheGrowingCopyLocked(CacheGrowing* g, size_t at, char* buf, size_t cap,
                       bool* fromFile)
{
    (void)at;
    (void)buf;
    (void)cap;
    (void)fromFile;
    cacheGrowingRef(g);
    return 0;
}

void
cacheGrowingWrittenLocked(CacheGrowing* g, size_t upTo)
{
    (void)upTo;
    cacheGrowingRef(g);
}

/* No fetch is in flight here (corCacheFlight.c is the module's). */
void
cacheFlightFinish(CacheStore* s, CacheFlight* f, int outcome)
{
    (void)s;
    (void)outcome;
    ck_assert_ptr_null(f);
}

/* ---- Helpers ------------------------------------------------------------- */

#define H(n, v)                                                                \
    {                                                                          \
        n, sizeof(n) - 1, v, sizeof(v) - 1                                     \
    }

/* A request with its fields and an answer of status with its own. */
static CorRequest
exchange(const CorHeader* asked, unsigned askedCount, int status,
         CorHeader* answered, unsigned answeredCount)
{
    CorRequest r;

    memset(&r, 0, sizeof(r));
    r.method = "GET";
    r.methodLen = 3;
    r.headers = asked;
    r.headerCount = askedCount;
    r.status = status;
    r.contentType = "text/plain";
    r.responseHeaders = answered;
    r.responseHeaderCount = answeredCount;
    return r;
}

static CacheAnswer
answerOf(CorHeader* fields, unsigned count, int status)
{
    CorRequest r = exchange(NULL, 0, status, fields, count);
    CacheAnswer a;

    cachePolicyAnswer(&r, &a);
    return a;
}

/* ---- Dates and directives ------------------------------------------------ */

START_TEST(test_http_dates_in_three_forms)
{
    ck_assert_int_eq(cacheHttpDate("Sun, 06 Nov 1994 08:49:37 GMT", 29),
                     784111777);
    ck_assert_int_eq(cacheHttpDate("Sunday, 06-Nov-94 08:49:37 GMT", 30),
                     784111777);
    ck_assert_int_eq(cacheHttpDate("Sun Nov  6 08:49:37 1994", 24), 784111777);
    ck_assert_int_eq(cacheHttpDate("yesterday", 9), -1);
    ck_assert_int_eq(cacheHttpDate("Sun, 06 Foo 1994 08:49:37 GMT", 29), -1);
    ck_assert_int_eq(cacheHttpDate("", 0), -1);
}
END_TEST

START_TEST(test_cache_control_as_written)
{
    CorHeader fields[] = { H("CACHE-control", "Public, Max-Age=\"60\""),
                           H("Cache-Control",
                             " s-maxage = 5 ,no-cache=\"a, b\", "
                             "stale-if-error=9") };
    CacheAnswer a = answerOf(fields, 2, 200);

    ck_assert(a.isPublic);
    ck_assert_int_eq(a.maxAge, 60);
    /* "s-maxage = 5": spaces around '=' are not the grammar's; the
     * directive has no value then, and counts for nothing. */
    ck_assert_int_eq(a.sMaxAge, -1);
    ck_assert(a.noCache);
    ck_assert_int_eq(a.staleIfError, 9);
    ck_assert(!a.private && !a.noStore);
}
END_TEST

START_TEST(test_the_lifetime_s_order)
{
    CorHeader all[] = { H("Cache-Control", "max-age=60, s-maxage=7"),
                        H("Expires", "Sun, 06 Nov 1994 08:50:37 GMT"),
                        H("Date", "Sun, 06 Nov 1994 08:49:37 GMT") };
    CorHeader maxAge[] = { H("Cache-Control", "max-age=60"), all[1], all[2] };
    CorHeader expires[] = { all[1], all[2] };
    CorHeader badExpires[] = { H("Expires", "0") };
    CorHeader modified[] = {
        H("Last-Modified", "Sun, 06 Nov 1994 06:49:37 GMT"), all[2]
    };
    CacheAnswer a;

    a = answerOf(all, 3, 200);
    ck_assert_int_eq(cachePolicyLifetime(200, &a, 784111777), 7);
    a = answerOf(maxAge, 3, 200);
    ck_assert_int_eq(cachePolicyLifetime(200, &a, 784111777), 60);
    a = answerOf(expires, 2, 200);
    ck_assert_int_eq(cachePolicyLifetime(200, &a, 784111777), 60);
    a = answerOf(badExpires, 1, 200);
    ck_assert_int_eq(cachePolicyLifetime(200, &a, 784111777), 0);
    /* A tenth of two hours, for a status that allows a heuristic. */
    a = answerOf(modified, 2, 200);
    ck_assert_int_eq(cachePolicyLifetime(200, &a, 784111777), 720);
    ck_assert_int_eq(cachePolicyLifetime(302, &a, 784111777), 0);
}
END_TEST

START_TEST(test_what_may_be_stored)
{
    CorHeader fresh[] = { H("Cache-Control", "max-age=60") };
    CorHeader pub[] = { H("Cache-Control", "public, max-age=60") };
    CorHeader cookie[] = { fresh[0], H("Set-Cookie", "a=1") };
    CorHeader vary[] = { fresh[0], H("Vary", "Accept, *") };
    CorHeader none[] = { H("X-Any", "1") };
    CorHeader auth[] = { H("Authorization", "Basic dTpw") };
    CorHeader noStore[] = { H("Cache-Control", "no-store") };
    CacheAsk plain;
    CacheAsk nos;
    CorRequest r;
    CacheAnswer a;

    r = exchange(NULL, 0, 200, fresh, 1);
    cachePolicyAsk(&r, &plain);
    cachePolicyAnswer(&r, &a);
    ck_assert(cachePolicyStorable(&r, &a, &plain));
    r.status = 206;
    ck_assert(!cachePolicyStorable(&r, &a, &plain));
    r = exchange(noStore, 1, 200, fresh, 1);
    cachePolicyAsk(&r, &nos);
    ck_assert(nos.noStore);
    ck_assert(!cachePolicyStorable(&r, &a, &nos));
    r = exchange(auth, 1, 200, fresh, 1);
    ck_assert(!cachePolicyStorable(&r, &a, &plain));
    r = exchange(auth, 1, 200, pub, 1);
    cachePolicyAnswer(&r, &a);
    ck_assert(cachePolicyStorable(&r, &a, &plain));
    r = exchange(NULL, 0, 200, cookie, 2);
    cachePolicyAnswer(&r, &a);
    ck_assert(!cachePolicyStorable(&r, &a, &plain));
    r = exchange(NULL, 0, 200, vary, 2);
    cachePolicyAnswer(&r, &a);
    ck_assert(!cachePolicyStorable(&r, &a, &plain));
    r = exchange(NULL, 0, 200, none, 1);
    cachePolicyAnswer(&r, &a);
    ck_assert(!cachePolicyStorable(&r, &a, &plain));
}
END_TEST

START_TEST(test_the_request_s_directives)
{
    CorHeader pragma[] = { H("Pragma", "no-cache") };
    CorHeader both[] = { H("Cache-Control", "max-age=5"), pragma[0] };
    CorHeader zero[] = { H("Cache-Control", "max-age=0, only-if-cached") };
    CorRequest r;
    CacheAsk ask;

    r = exchange(pragma, 1, 0, NULL, 0);
    cachePolicyAsk(&r, &ask);
    ck_assert(ask.noCache);
    /* Pragma counts only where Cache-Control is absent. */
    r = exchange(both, 2, 0, NULL, 0);
    cachePolicyAsk(&r, &ask);
    ck_assert(!ask.noCache);
    ck_assert_int_eq(ask.maxAge, 5);
    r = exchange(zero, 1, 0, NULL, 0);
    cachePolicyAsk(&r, &ask);
    ck_assert(ask.noCache && ask.onlyIfCached);
}
END_TEST

/* ---- Entries ------------------------------------------------------------- */

static CacheEntry*
entryOf(const char* key, CorHeader* fields, unsigned count,
        const CorHeader* asked, unsigned askedCount, const char* body,
        int64_t requestMs, int64_t responseMs)
{
    CorRequest r = exchange(asked, askedCount, 200, fields, count);
    CacheAnswer a;
    CacheEntry* e;

    cachePolicyAnswer(&r, &a);
    e = cacheEntryMake(&r, &a, key, strlen(key), requestMs, responseMs, body,
                       strlen(body));
    ck_assert_ptr_nonnull(e);
    e->hash = cacheHash(key, strlen(key));
    return e;
}

START_TEST(test_an_entry_s_age_and_fields)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=60"),
                           H("Age", "10"),
                           H("Date", "Sun, 06 Nov 1994 08:49:30 GMT"),
                           H("Content-Length", "5"),
                           H("Connection", "close"),
                           H("ETag", "\"v1\"") };
    /* Asked at :35.5, answered at :37: the Date says 7 s, Age 10 + the
     * second and a half on the way; the larger is its initial age. */
    CacheEntry* e = entryOf("h/a", fields, 6, NULL, 0, "hello", 784111775500LL,
                            784111777000LL);

    ck_assert_int_eq(cacheEntryAge(e, 784111777000LL), 11);
    ck_assert_int_eq(cacheEntryAge(e, 784111777999LL), 11);
    ck_assert_int_eq(cacheEntryAge(e, 784111779000LL), 13);
    ck_assert(cacheEntryFresh(e, 784111777000LL + 48000));
    ck_assert(!cacheEntryFresh(e, 784111777000LL + 49000));
    /* Framing, hop-by-hop, Age and Date are the answer's, not stored. */
    ck_assert_uint_eq(e->headerCount, 2);
    ck_assert_str_eq(e->etag, "\"v1\"");
    ck_assert_str_eq(cacheEntryKey(e), "h/a");
    ck_assert(memcmp(e->body, "hello", 5) == 0);
    ck_assert_uint_le(sizeof(CacheEntry), 256);
    cacheEntryRelease(e);
}
END_TEST

START_TEST(test_vary_values_absent_is_not_empty)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=60"),
                           H("Vary", "Accept-Language, X-Empty") };
    CorHeader en[] = { H("Accept-Language", "en"), H("X-Empty", "") };
    CorHeader fr[] = { H("accept-language", "fr"), H("X-Empty", "") };
    CorHeader absent[] = { H("Accept-Language", "en") };
    CacheEntry* e = entryOf("h/v", fields, 2, en, 2, "x", 0, 0);
    CorRequest r;

    r = exchange(en, 2, 0, NULL, 0);
    ck_assert(cacheEntryVaryMatch(e, &r));
    r = exchange(fr, 2, 0, NULL, 0);
    ck_assert(!cacheEntryVaryMatch(e, &r));
    r = exchange(absent, 1, 0, NULL, 0);
    ck_assert(!cacheEntryVaryMatch(e, &r));
    cacheEntryRelease(e);
}
END_TEST

START_TEST(test_a_304_s_fields_over_the_stored)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=1"), H("ETag", "\"v1\""),
                           H("X-Old", "kept") };
    CorHeader refresh[] = { H("Cache-Control", "max-age=90"),
                            H("ETag", "\"v1\"") };
    CacheEntry* old = entryOf("h/r", fields, 3, NULL, 0, "body", 0, 0);
    CorRequest r = exchange(NULL, 0, 304, refresh, 2);
    CacheEntry* e = cacheEntryRefreshed(old, &r, 5000, 5000);

    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->lifetime, 90);
    ck_assert_int_eq(e->status, 200);
    ck_assert_uint_eq(e->headerCount, 3);
    ck_assert(memcmp(e->body, "body", 4) == 0 && e->bodyLen == 4);
    ck_assert_str_eq(cacheEntryKey(e), "h/r");
    cacheEntryRelease(old);
    cacheEntryRelease(e);
}
END_TEST

/* ---- The store ----------------------------------------------------------- */

/* n keys that fall in one shard ("h/k0", "h/k17", ...), written to keys. */
static void
keysOfOneShard(CacheStore* s, char keys[][16], unsigned n)
{
    CacheShard* shard = NULL;

    for (unsigned i = 0, found = 0; found < n; i++) {
        char key[16];

        snprintf(key, sizeof(key), "h/k%u", i);
        if (shard == NULL) {
            shard = cacheShardOf(s, cacheHash(key, strlen(key)));
        }
        if (cacheShardOf(s, cacheHash(key, strlen(key))) == shard) {
            strcpy(keys[found++], key);
        }
    }
}

static CacheEntry*
findKey(CacheStore* s, const char* key)
{
    CorRequest r = exchange(NULL, 0, 0, NULL, 0);

    return cacheStoreFind(s, cacheHash(key, strlen(key)), key, strlen(key), &r);
}

START_TEST(test_a_shard_evicts_its_least_recently_used)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=60") };
    char body[790];
    char keys[4][16];
    CacheStore s;
    CacheEntry* held;

    memset(body, 'b', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    /* 16 shards of 2 KiB: two entries of 790 bytes fit in one. */
    ck_assert_int_eq(cacheStoreInit(&s, "t", 32 * 1024), 0);
    keysOfOneShard(&s, keys, 4);
    ck_assert(
        cacheStoreInsert(&s, entryOf(keys[0], fields, 1, NULL, 0, body, 0, 0)));
    ck_assert(
        cacheStoreInsert(&s, entryOf(keys[1], fields, 1, NULL, 0, body, 0, 0)));
    /* keys[0] used last: keys[1] is the one to go. */
    held = findKey(&s, keys[0]);
    ck_assert_ptr_nonnull(held);
    cacheEntryRelease(held);
    ck_assert(
        cacheStoreInsert(&s, entryOf(keys[2], fields, 1, NULL, 0, body, 0, 0)));
    ck_assert_ptr_null(findKey(&s, keys[1]));
    held = findKey(&s, keys[0]);
    ck_assert_ptr_nonnull(held);
    ck_assert_uint_eq(atomic_load(&s.counters.evictions), 1);
    ck_assert_uint_le(cacheShardOf(&s, held->hash)->bytes, s.shardMost);
    /* Evicted while held: its body is still the answer's to send. */
    ck_assert(
        cacheStoreInsert(&s, entryOf(keys[3], fields, 1, NULL, 0, body, 0, 0)));
    ck_assert(
        cacheStoreInsert(&s, entryOf(keys[2], fields, 1, NULL, 0, body, 0, 0)));
    ck_assert_ptr_null(findKey(&s, keys[0]));
    ck_assert(memcmp(held->body, body, sizeof(body) - 1) == 0);
    cacheEntryRelease(held);
    /* One past a shard's part is never stored. */
    {
        char big[3000];

        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        ck_assert(!cacheStoreInsert(&s, entryOf("h/big", fields, 1, NULL, 0,
                                                big, 0, 0)));
    }
    cacheStoreFree(&s);
}
END_TEST

START_TEST(test_variants_replace_their_own_and_purges)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=60"),
                           H("Vary", "Accept-Language") };
    CorHeader en[] = { H("Accept-Language", "en") };
    CorHeader fr[] = { H("Accept-Language", "fr") };
    CacheStore s;
    CacheEntry* e;
    CorRequest r;

    ck_assert_int_eq(cacheStoreInit(&s, "t", 1024 * 1024), 0);
    cacheStoreInsert(&s, entryOf("h/p/a", fields, 2, en, 1, "en1", 0, 1000));
    cacheStoreInsert(&s, entryOf("h/p/a", fields, 2, fr, 1, "fr1", 0, 1000));
    cacheStoreInsert(&s, entryOf("h/p/a", fields, 2, en, 1, "en2", 0, 2000));
    cacheStoreInsert(&s, entryOf("h/p/b", fields, 2, en, 1, "b", 0, 1000));
    cacheStoreInsert(&s, entryOf("h/q", fields, 2, en, 1, "q", 0, 1000));
    ck_assert_int_eq(atomic_load(&s.counters.entries), 4);
    r = exchange(en, 1, 0, NULL, 0);
    e = cacheStoreFind(&s, cacheHash("h/p/a", 5), "h/p/a", 5, &r);
    ck_assert(e != NULL && memcmp(e->body, "en2", 3) == 0);
    cacheEntryRelease(e);
    r = exchange(fr, 1, 0, NULL, 0);
    e = cacheStoreFind(&s, cacheHash("h/p/a", 5), "h/p/a", 5, &r);
    ck_assert(e != NULL && memcmp(e->body, "fr1", 3) == 0);
    cacheEntryRelease(e);
    ck_assert_uint_eq(cacheStoreRemove(&s, "h/p/a", 5), 2);
    ck_assert_uint_eq(cacheStoreRemovePrefix(&s, "h/p/", 4), 1);
    ck_assert_int_eq(atomic_load(&s.counters.entries), 1);
    cacheStoreFree(&s);
}
END_TEST

/* ---- The disk half ------------------------------------------------------ */

static char diskDir[64];

/* A store of 1 MiB in memory and size on disk, in a fresh folder (or
 * the last one, again: a restart). */
static void
diskStore(CacheStore* s, uint64_t size, bool again)
{
    if (!again) {
        strcpy(diskDir, "/tmp/corCacheDiskXXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(diskDir));
    }
    ck_assert_int_eq(cacheStoreInit(s, "t", 1024 * 1024), 0);
    ck_assert_int_eq(cacheDiskOpen(s, diskDir, size), 0);
    ck_assert_int_eq(cacheDiskStart(s), 0); /* its scan, at once here */
}

static void
diskStoreFree(CacheStore* s)
{
    cacheDiskClose(s);
    cacheStoreFree(s);
}

/* The folder gone, with what the test left in it. */
static void
diskFolderRemove(void)
{
    char command[96];

    snprintf(command, sizeof(command), "rm -rf %s", diskDir);
    ck_assert_int_eq(system(command), 0);
}

static long
nowMs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* e written to s's disk (alone: not in memory). */
static void
diskPut(CacheStore* s, CacheEntry* e)
{
    cacheDiskWrite(s, e);
}

/* key's answer (max-age=60, 999 bytes of fill) written to s's disk. */
static void
diskPutSmall(CacheStore* s, const char* key, char fill)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=60") };
    char body[1000];

    memset(body, fill, sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    diskPut(s, entryOf(key, fields, 1, NULL, 0, body, 0, 1000));
}

static CacheEntry*
diskFind(CacheStore* s, const char* key)
{
    CorRequest r = exchange(NULL, 0, 0, NULL, 0);

    return cacheDiskFind(s, cacheHash(key, strlen(key)), key, strlen(key), &r);
}

/* The one file of key's in the store's folder, into name. */
static void
diskFileOf(const char* key, char* name, size_t cap)
{
    char command[256];
    FILE* p;

    snprintf(command, sizeof(command), "ls %s/%016llx-*", diskDir,
             (unsigned long long)cacheHash(key, strlen(key)));
    p = popen(command, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(name, (int)cap, p));
    name[strcspn(name, "\n")] = '\0';
    pclose(p);
}

START_TEST(test_a_file_written_is_found_and_a_bad_one_is_a_miss)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=60"),
                           H("ETag", "\"v1\"") };
    static char big[300 * 1024];
    char name[256];
    CacheStore s;
    CacheEntry* e;
    int fd;

    memset(big, 'b', sizeof(big) - 1);
    diskStore(&s, 64 << 20, false);
    diskPut(&s, entryOf("h/small", fields, 2, NULL, 0, "small", 0, 1000));
    diskPut(&s, entryOf("h/big", fields, 2, NULL, 0, big, 0, 1000));
    ck_assert_int_eq(atomic_load(&s.counters.diskEntries), 2);
    /* Small: read, checked, and kept in memory again. */
    e = diskFind(&s, "h/small");
    ck_assert(e != NULL && e->bodyFd < 0 && e->bodyLen == 5
              && memcmp(e->body, "small", 5) == 0 && e->etag != NULL
              && strcmp(e->etag, "\"v1\"") == 0 && e->lifetime == 60);
    cacheEntryRelease(e);
    ck_assert_int_eq(atomic_load(&s.counters.entries), 1);
    /* Big: its body is sent from its file. */
    e = diskFind(&s, "h/big");
    ck_assert(e != NULL && e->bodyFd >= 0 && e->bodyLen == sizeof(big) - 1);
    cacheEntryRelease(e);
    /* One byte of the big one's head flipped: a miss, and it is gone. */
    diskFileOf("h/big", name, sizeof(name));
    fd = open(name, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "X", 1, 100), 1);
    close(fd);
    ck_assert_ptr_null(diskFind(&s, "h/big"));
    ck_assert_int_ne(access(name, F_OK), 0);
    /* Cut short: a miss. */
    diskPut(&s, entryOf("h/big", fields, 2, NULL, 0, big, 0, 1000));
    diskFileOf("h/big", name, sizeof(name));
    ck_assert_int_eq(truncate(name, 200000), 0);
    ck_assert_ptr_null(diskFind(&s, "h/big"));
    /* A small body's byte flipped (memory no longer has it): a miss. */
    cacheStoreRemovePrefix(&s, "", 0);
    diskPut(&s, entryOf("h/small", fields, 2, NULL, 0, "small", 0, 1000));
    diskFileOf("h/small", name, sizeof(name));
    fd = open(name, O_RDWR);
    ck_assert_int_eq(pwrite(fd, "S", 1, lseek(fd, 0, SEEK_END) - 1), 1);
    close(fd);
    ck_assert_ptr_null(diskFind(&s, "h/small"));
    ck_assert_uint_eq(atomic_load(&s.counters.diskErrors), 3);
    /* A write asked for before a purge of its shard, in after it: not
     * put in (what it says may be what was purged). */
    {
        uint64_t h = cacheHash("h/late", 6);
        uint64_t removals = cacheIndexRemovals(&s, h);
        uint64_t id;

        cacheDiskRemove(&s, h);
        cacheDiskIndexPut(&s, h, 0, 42, 10, true, removals);
        ck_assert_uint_eq(cacheIndexFind(&s, h, &id, 1), 0);
    }
    diskStoreFree(&s);
    diskFolderRemove();
}
END_TEST

START_TEST(test_the_size_bound_and_the_scan_at_start)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=60") };
    char body[1000];
    char name[256];
    char living[256];
    char keys[6][16];
    CacheStore s;
    CacheEntry* e;
    int fd;

    memset(body, 'd', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    /* 16 shards of 4 KiB: three files of about 1.1 KiB in one. */
    diskStore(&s, 16 * 4096, false);
    keysOfOneShard(&s, keys, 6);
    for (unsigned i = 0; i < 4; i++) {
        diskPut(&s, entryOf(keys[i], fields, 1, NULL, 0, body, 0, 1000));
    }
    ck_assert_uint_eq(atomic_load(&s.counters.diskEvictions), 1);
    ck_assert_uint_le(cacheShardOf(&s, cacheHash(keys[0], strlen(keys[0])))
                          ->disk.zone->bytes,
                      s.diskShardMost);
    ck_assert_ptr_null(diskFind(&s, keys[0])); /* the oldest went */
    diskStoreFree(&s);
    /* A restart: the scan finds the three, drops a corrupt one and half
     * a write. */
    diskFileOf(keys[1], name, sizeof(name));
    fd = open(name, O_RDWR);
    ck_assert_int_eq(pwrite(fd, "Z", 1, lseek(fd, 0, SEEK_END) - 1), 1);
    close(fd);
    snprintf(name, sizeof(name), "%s/.tmp-0000000000000001", diskDir);
    close(open(name, O_CREAT | O_WRONLY, 0644));
    /* A living process's write (the generation beside it in a reload)
     * stays. */
    snprintf(living, sizeof(living), "%s/.tmp-%d-0000000000000002", diskDir,
             (int)getpid());
    close(open(living, O_CREAT | O_WRONLY, 0644));
    diskStore(&s, 16 * 4096, true);
    ck_assert(atomic_load(&s.scanned));
    ck_assert_int_eq(atomic_load(&s.counters.diskEntries), 2);
    ck_assert_int_ne(access(name, F_OK), 0);
    ck_assert_int_eq(access(living, F_OK), 0);
    e = diskFind(&s, keys[3]);
    ck_assert(e != NULL && e->bodyLen == sizeof(body) - 1);
    cacheEntryRelease(e);
    ck_assert_ptr_null(diskFind(&s, keys[1]));
    diskStoreFree(&s);
    diskFolderRemove();
}
END_TEST

/* A hit in memory is a use of the file too: the one evicted from disk is
 * the least recently used of the two stores together. */
START_TEST(test_a_memory_hit_keeps_its_file_young)
{
    CorHeader fields[] = { H("Cache-Control", "max-age=60") };
    char body[1000];
    char keys[4][16];
    CacheStore s;
    CacheEntry* e;

    memset(body, 'm', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    diskStore(&s, 16 * 4096, false); /* three such files a shard */
    keysOfOneShard(&s, keys, 4);
    for (unsigned i = 0; i < 3; i++) {
        e = entryOf(keys[i], fields, 1, NULL, 0, body, 0, 1000);
        cacheEntryRef(e);
        ck_assert(cacheStoreInsert(&s, e));
        diskPut(&s, e);
    }
    e = findKey(&s, keys[0]); /* from memory */
    ck_assert_ptr_nonnull(e);
    cacheEntryRelease(e);
    diskPut(&s, entryOf(keys[3], fields, 1, NULL, 0, body, 0, 1000));
    ck_assert_uint_eq(atomic_load(&s.counters.diskEvictions), 1);
    e = diskFind(&s, keys[0]);
    ck_assert_ptr_nonnull(e);
    cacheEntryRelease(e);
    ck_assert_ptr_null(diskFind(&s, keys[1]));
    diskStoreFree(&s);
    diskFolderRemove();
}
END_TEST

/* The scan at start: what it costs a file (each read and checked whole),
 * said; at most a millisecond a file of 1 KB, a loose bound for a loaded
 * machine. */
START_TEST(test_the_scan_s_time_a_file)
{
    enum { N = 2000 };
    CorHeader fields[] = { H("Cache-Control", "max-age=60") };
    char body[1000];
    CacheStore s;
    long t0;
    long ms;

    memset(body, 's', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    diskStore(&s, (uint64_t)1 << 30, false);
    for (unsigned i = 0; i < N; i++) {
        char key[32];

        snprintf(key, sizeof(key), "h/scan%u", i);
        diskPut(&s, entryOf(key, fields, 1, NULL, 0, body, 0, 1000));
    }
    diskStoreFree(&s);
    t0 = nowMs();
    diskStore(&s, (uint64_t)1 << 30, true);
    ms = nowMs() - t0;
    printf("disk scan: %d files of 1 KB in %ld ms\n", N, ms);
    ck_assert_int_eq(atomic_load(&s.counters.diskEntries), N);
    ck_assert_int_le(ms, N);
    diskStoreFree(&s);
    diskFolderRemove();
}
END_TEST

/* The index's bytes an entry on disk: its zone (entries, buckets, the
 * shards' heads) over the files it holds when full; and a store of 1 GiB
 * takes 100 000 files of 1 KB in it without an eviction. The issue
 * bounds an entry to 256 bytes. */
START_TEST(test_the_index_costs_at_most_256_bytes_an_entry)
{
    enum { N = 100000 };
    CacheStore s;
    size_t slots;

    diskStore(&s, (uint64_t)1 << 30, false);
    slots = (size_t)s.shards[0].disk.slots * CACHE_SHARDS;
    for (uint64_t i = 0; i < N; i++) {
        cacheDiskIndexPut(&s, cacheHash((const char*)&i, sizeof(i)), 0, i, 1000,
                          true, CACHE_DISK_REMOVALS_ANY);
    }
    printf("disk index: %zu bytes an entry (a zone of %zu bytes, %zu "
           "entries)\n",
           s.indexBytes / slots, s.indexBytes, slots);
    ck_assert_uint_le(s.indexBytes / slots, 256);
    ck_assert_int_eq(atomic_load(&s.counters.diskEntries), N);
    ck_assert_uint_eq(atomic_load(&s.counters.diskEvictions), 0);
    diskStoreFree(&s);
    diskFolderRemove();
}
END_TEST

/* A restart starts a fresh index, which the scan fills in the folder's
 * order: the order saved at the stop (.lru) is laid over it, so the
 * least recently used is the one the last generation left, and the
 * sidecar is gone once taken up. */
START_TEST(test_the_lru_order_comes_back_after_a_restart)
{
    char keys[3][16];
    char sidecar[128];
    CacheFileId* files;
    CacheStore s;
    CacheEntry* e;
    unsigned shard;

    diskStore(&s, 16 * 4096, false);
    keysOfOneShard(&s, keys, 3);
    for (unsigned i = 0; i < 3; i++) {
        diskPutSmall(&s, keys[i], 'o');
    }
    e = diskFind(&s, keys[0]); /* newest first: 0, 2, 1 */
    ck_assert_ptr_nonnull(e);
    shard = (unsigned)(cacheShardOf(&s, e->hash) - s.shards);
    cacheEntryRelease(e);
    diskStoreFree(&s);
    snprintf(sidecar, sizeof(sidecar), "%s/.lru", diskDir);
    ck_assert_int_eq(access(sidecar, F_OK), 0);
    diskStore(&s, 16 * 4096, true);
    ck_assert(!s.indexKept);
    ck_assert_uint_eq(cacheIndexFiles(&s, shard, &files), 3);
    ck_assert_uint_eq(files[0].hash, cacheHash(keys[0], strlen(keys[0])));
    ck_assert_uint_eq(files[1].hash, cacheHash(keys[2], strlen(keys[2])));
    ck_assert_uint_eq(files[2].hash, cacheHash(keys[1], strlen(keys[1])));
    free(files);
    ck_assert_int_ne(access(sidecar, F_OK), 0);
    diskStoreFree(&s);
    diskFolderRemove();
}
END_TEST

/* ---- The index in its zone, across generations -------------------------- */

/* A generation as the master starts one: the hand-over socket made, the
 * process forked; the child runs gen and exits (or is killed in it), and
 * the master keeps its zones once it exited 0. */
static void
generationRun(void (*gen)(void))
{
    pid_t pid;
    int status;

    ck_assert_int_eq(corZoneHandBegin(), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        corZoneHandChild();
        gen();
        _exit(0);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    corZoneHandEnd(true);
}

static char zoneKeys[4][16];

/* The first generation: three files in one shard, the first then hit
 * (the second is now the least recently used). */
static void
generationFirst(void)
{
    CacheStore s;
    CacheEntry* e;

    diskStore(&s, 16 * 4096, true);
    for (unsigned i = 0; i < 3; i++) {
        diskPutSmall(&s, zoneKeys[i], 'z');
    }
    e = diskFind(&s, zoneKeys[0]);
    if (s.indexKept || e == NULL) {
        _exit(1);
    }
    cacheEntryRelease(e);
    /* No close: the zone outlives the process. */
}

/* A generation killed holding a shard's lock, half way through taking
 * the first key's entry out (out of its bucket, not yet out of the LRU
 * list, the count not yet lowered). */
static void
generationKilledMidway(void)
{
    CacheStore s;
    uint64_t hash = cacheHash(zoneKeys[0], strlen(zoneKeys[0]));
    CacheDiskShard* d;

    diskStore(&s, 16 * 4096, true);
    d = diskOf(&s, hash);
    if (!s.indexKept || lockShard(d) != 0) {
        _exit(1);
    }
    chainOut(d, *bucketOf(d, hash));
    raise(SIGKILL);
}

/* A generation killed while it repaired the shard the last one left
 * half done: past the repair's walk of the LRU list (each entry in it
 * marked walked and placed, the buckets and the count cleared), before
 * its last pass. */
static void
generationKilledRepairing(void)
{
    CacheStore s;
    uint64_t hash = cacheHash(zoneKeys[0], strlen(zoneKeys[0]));
    CacheDiskShard* d;

    diskStore(&s, 16 * 4096, true);
    d = diskOf(&s, hash);
    if (!s.indexKept || lockShard(d) != 0) {
        _exit(1);
    }
    for (uint32_t slot = 1; slot <= d->zone->taken; slot++) {
        if (at(d, slot)->flags & SLOT_USED) {
            at(d, slot)->flags |= SLOT_WALKED | SLOT_PLACED;
        }
    }
    memset(d->buckets, 0, ((size_t)d->bucketMask + 1) * sizeof(uint32_t));
    d->zone->count = 0;
    d->zone->bytes = 0;
    raise(SIGKILL);
}

/* This process as the next generation the master forked (the zones it
 * holds inherited), with a store of size; and its end (its zones kept
 * for the next). */
static void
generationHere(CacheStore* s, uint64_t size)
{
    ck_assert_int_eq(corZoneHandBegin(), 0);
    corZoneHandChild();
    diskStore(s, size, true);
}

static void
generationHereEnd(CacheStore* s)
{
    corZoneHandEnd(true);
    diskStoreFree(s);
}

START_TEST(test_the_index_outlives_a_generation)
{
    uint64_t hash = 0;
    CacheStore s;
    CacheEntry* e;

    strcpy(diskDir, "/tmp/corCacheDiskXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(diskDir));
    ck_assert_int_eq(cacheStoreInit(&s, "t", 1024 * 1024), 0);
    keysOfOneShard(&s, zoneKeys, 4);
    cacheStoreFree(&s);
    generationRun(generationFirst);
    generationRun(generationKilledMidway);
    /* The next generation: the index as the first left it, without a
     * scan; the shard the killed one left half done is rebuilt at the
     * first lock: the three files. */
    generationHere(&s, 16 * 4096);
    ck_assert(s.indexKept && atomic_load(&s.scanned));
    e = diskFind(&s, zoneKeys[0]);
    ck_assert_ptr_nonnull(e);
    hash = e->hash;
    cacheEntryRelease(e);
    ck_assert_uint_eq(diskOf(&s, hash)->zone->count, 3);
    ck_assert_int_eq(atomic_load(&s.counters.diskEntries), 3);
    /* A fourth evicts the least recently used: the second key, as the
     * first generation's hit left the order (a scan would have taken
     * the folder's). */
    diskPutSmall(&s, zoneKeys[3], 'z');
    ck_assert_ptr_null(diskFind(&s, zoneKeys[1]));
    e = diskFind(&s, zoneKeys[2]);
    ck_assert_ptr_nonnull(e);
    cacheEntryRelease(e);
    generationHereEnd(&s);
    /* Another size: a fresh zone, and the scan. */
    generationHere(&s, 32 * 4096);
    ck_assert(!s.indexKept);
    ck_assert_int_eq(atomic_load(&s.counters.diskEntries), 3);
    /* Its header not what this build makes (another binary's layout): a
     * fresh one too. */
    memset((char*)s.index - ZONE_HEADER, 'x', 8);
    generationHereEnd(&s);
    generationHere(&s, 32 * 4096);
    ck_assert(!s.indexKept);
    generationHereEnd(&s);
    diskFolderRemove();
}
END_TEST

/* A repair is itself cut short (its process killed in it): the next
 * locker's repair starts again from what it left, every entry in the
 * LRU list once (seen failing on main: the marks the dead repair left
 * kept every entry out of the list, count 3 and the list empty, and the
 * next eviction took slot 0, the slot before the shard's first). */
START_TEST(test_a_repair_killed_midway_is_done_again)
{
    CacheStore s;
    CacheFileId* files;
    CacheDiskShard* d;
    CacheEntry* e;
    uint64_t hash;

    strcpy(diskDir, "/tmp/corCacheDiskXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(diskDir));
    ck_assert_int_eq(cacheStoreInit(&s, "t", 1024 * 1024), 0);
    keysOfOneShard(&s, zoneKeys, 4);
    cacheStoreFree(&s);
    generationRun(generationFirst);
    generationRun(generationKilledRepairing);
    generationHere(&s, 16 * 4096);
    hash = cacheHash(zoneKeys[0], strlen(zoneKeys[0]));
    d = diskOf(&s, hash);
    ck_assert_int_eq(lockShard(d), 0);
    unlockShard(d);
    ck_assert_uint_eq(d->zone->count, 3);
    ck_assert_uint_eq(cacheIndexFiles(&s,
                                      (unsigned)(cacheShardOf(&s, hash)
                                                 - s.shards),
                                      &files),
                      3);
    free(files);
    /* The order the first generation left: a fourth evicts the second. */
    diskPutSmall(&s, zoneKeys[3], 'z');
    ck_assert_ptr_null(diskFind(&s, zoneKeys[1]));
    e = diskFind(&s, zoneKeys[3]);
    ck_assert_ptr_nonnull(e);
    cacheEntryRelease(e);
    generationHereEnd(&s);
    diskFolderRemove();
}
END_TEST

COR_TEST_SUITE(corCacheStore)
{
    tcase_add_test(tc, test_a_file_written_is_found_and_a_bad_one_is_a_miss);
    tcase_add_test(tc, test_the_size_bound_and_the_scan_at_start);
    tcase_add_test(tc, test_the_index_costs_at_most_256_bytes_an_entry);
    tcase_add_test(tc, test_the_scan_s_time_a_file);
    tcase_add_test(tc, test_a_memory_hit_keeps_its_file_young);
    tcase_add_test(tc, test_the_index_outlives_a_generation);
    tcase_add_test(tc, test_a_repair_killed_midway_is_done_again);
    tcase_add_test(tc, test_the_lru_order_comes_back_after_a_restart);
    tcase_add_test(tc, test_http_dates_in_three_forms);
    tcase_add_test(tc, test_cache_control_as_written);
    tcase_add_test(tc, test_the_lifetime_s_order);
    tcase_add_test(tc, test_what_may_be_stored);
    tcase_add_test(tc, test_the_request_s_directives);
    tcase_add_test(tc, test_an_entry_s_age_and_fields);
    tcase_add_test(tc, test_vary_values_absent_is_not_empty);
    tcase_add_test(tc, test_a_304_s_fields_over_the_stored);
    tcase_add_test(tc, test_a_shard_evicts_its_least_recently_used);
    tcase_add_test(tc, test_variants_replace_their_own_and_purges);
}
