/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory store's slab allocator in a zone (modules/cache/
 * corCacheSlab.c, included), with processes as a reload has them: the
 * zone's bound kept and every chunk given back whole; a chunk another
 * generation still counts stays until that generation is gone, and the
 * next one to open the zone frees it (a generation SIGKILLed with
 * answers in flight leaks nothing); a process killed holding the lock
 * in the middle of taking a chunk leaves lists the next locker rebuilds.
 * And the lookup table on it (corCacheTable.c, included): what one
 * generation stored the next finds; the bound kept by eviction, an
 * evicted item still whole for the answer that holds it; a generation
 * SIGKILLed under hits leaves a table the next fills past its bytes
 * with evictions, nothing leaked; a death in the middle of an insert
 * holding a shard's lock, repaired.
 */
#include "corTest.h"

#include "corCacheSlab.c"
#include "corCacheTable.c"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define ZONE_BYTES ((size_t)256 << 10)

static void*
zoneNew(void)
{
    void* z = mmap(NULL, ZONE_BYTES, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    ck_assert_ptr_ne(z, MAP_FAILED);
    return z;
}

/* How many chunks of len the zone gives before it is full; each kept in
 * offs (up to most). */
static unsigned
fill(CacheSlab* s, size_t len, uint64_t* offs, unsigned most)
{
    unsigned n = 0;
    uint64_t off;

    while (n < most && (off = cacheSlabAlloc(s, len)) != 0) {
        memset(cacheSlabAt(s, off), 'x', len);
        offs[n++] = off;
    }
    return n;
}

static void
releaseAll(CacheSlab* s, uint64_t* offs, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        ck_assert(cacheSlabRelease(s, offs[i], s->lane));
    }
}

START_TEST(slabBoundAndGivenBack)
{
    static uint64_t offs[8192];
    size_t sizes[] = { 10, 1000, 3000, 100000 };
    CacheSlab s;
    void* z = zoneNew();

    ck_assert_int_eq(cacheSlabOpen(&s, z, ZONE_BYTES, false), 0);
    ck_assert_uint_le(cacheSlabCapacity(&s), ZONE_BYTES);
    ck_assert_uint_ge(cacheSlabCapacity(&s), ZONE_BYTES * 9 / 10);
    for (unsigned k = 0; k < 4; k++) {
        unsigned n = fill(&s, sizes[k], offs, 8192);
        unsigned again;

        ck_assert_uint_gt(n, 0);
        ck_assert_uint_ge(cacheSlabUsed(&s), cacheSlabCapacity(&s) / 2);
        ck_assert_uint_le(cacheSlabUsed(&s), cacheSlabCapacity(&s));
        for (unsigned i = 0; i < n; i++) {
            ck_assert_uint_ge(offs[i], s.zone->pagesAt);
            ck_assert_uint_le(offs[i] + sizes[k], ZONE_BYTES);
        }
        releaseAll(&s, offs, n);
        ck_assert_uint_eq(cacheSlabUsed(&s), 0);
        again = fill(&s, sizes[k], offs, 8192);
        ck_assert_uint_eq(again, n);
        releaseAll(&s, offs, again);
    }
    /* Pages of one class given back serve another. */
    ck_assert_uint_gt(fill(&s, 100000, offs, 8192), 0);
    munmap(z, ZONE_BYTES);
}
END_TEST

/* A child that opens the zone as the next generation would, runs gen,
 * and is killed (or exits); its exit status. */
static int
generation(void* z, void (*gen)(CacheSlab* s, void* arg), void* arg, bool kill)
{
    pid_t pid = fork();
    int status = 0;

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        CacheSlab s;

        if (cacheSlabOpen(&s, z, ZONE_BYTES, true) != 0) {
            _exit(2);
        }
        gen(&s, arg);
        if (kill) {
            raise(SIGKILL);
        }
        cacheSlabClose(&s);
        _exit(0);
    }
    waitpid(pid, &status, 0);
    return status;
}

static void
refAndDie(CacheSlab* s, void* arg)
{
    uint64_t off = *(uint64_t*)arg;

    for (unsigned i = 0; i < 3; i++) {
        if (!cacheSlabRef(s, off, s->lane)) {
            _exit(3);
        }
    }
}

static void
nothing(CacheSlab* s, void* arg)
{
    (void)s;
    (void)arg;
}

START_TEST(slabDeadGenerationsReferencesDropped)
{
    CacheSlab old;
    void* z = zoneNew();
    uint64_t off;
    int status;

    ck_assert_int_eq(cacheSlabOpen(&old, z, ZONE_BYTES, false), 0);
    off = cacheSlabAlloc(&old, 2000);
    ck_assert_uint_ne(off, 0);
    ck_assert(cacheSlabRef(&old, off, CACHE_SLAB_STORE));
    /* A new generation sends it and is killed in the middle. */
    status = generation(z, refAndDie, &off, true);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* The old generation's answer ends, the store lets it go: the dead
     * one's count still holds it. */
    ck_assert(!cacheSlabRelease(&old, off, old.lane));
    ck_assert(!cacheSlabRelease(&old, off, CACHE_SLAB_STORE));
    ck_assert_uint_gt(cacheSlabUsed(&old), 0);
    /* The generation the master starts in its place drops it. */
    status = generation(z, nothing, NULL, false);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_uint_eq(cacheSlabUsed(&old), 0);
    cacheSlabClose(&old);
    munmap(z, ZONE_BYTES);
}
END_TEST

START_TEST(slabLanesOfLiveGenerationsKept)
{
    CacheSlab old;
    void* z = zoneNew();
    uint64_t off;
    int status;

    ck_assert_int_eq(cacheSlabOpen(&old, z, ZONE_BYTES, false), 0);
    off = cacheSlabAlloc(&old, 100);
    /* Two more generations open it while the first is alive: its count
     * is never dropped. */
    status = generation(z, nothing, NULL, false);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    status = generation(z, nothing, NULL, false);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_uint_gt(cacheSlabUsed(&old), 0);
    ck_assert(cacheSlabRelease(&old, off, old.lane));
    ck_assert_uint_eq(cacheSlabUsed(&old), 0);
    munmap(z, ZONE_BYTES);
}
END_TEST

/* Killed holding the lock, a chunk taken off its page's free list and
 * not yet marked used, and a page half carved. */
static void
dieHalfway(CacheSlab* s, void* arg)
{
    uint32_t c = 3;
    uint32_t p;
    SlabPage* page;

    (void)arg;
    pthread_mutex_lock(&s->zone->lock);
    p = s->zone->classPages[c] - 1;
    page = pageAt(s, p);
    page->free = *nextOf(s, page->free);
    page->used++;
    p = pagesFind(s, 1);
    pageAt(s, p)->kind = PAGE_CARVING;
    chunkAt(s, pageOffset(s, p) + CHUNK_HEAD)->state = CHUNK_USED;
}

START_TEST(slabLockOwnerDeadRepaired)
{
    static uint64_t offs[8192];
    CacheSlab s;
    void* z = zoneNew();
    uint64_t first;
    unsigned whole;
    unsigned after;
    int status;

    ck_assert_int_eq(cacheSlabOpen(&s, z, ZONE_BYTES, false), 0);
    whole = fill(&s, 100, offs, 8192);
    releaseAll(&s, offs, whole);
    first = cacheSlabAlloc(&s, 100); /* class 3's page has room */
    ck_assert_uint_eq(s.zone->classSize[3], 144);
    status = generation(z, dieHalfway, NULL, true);
    ck_assert(WIFSIGNALED(status));
    ck_assert(cacheSlabRelease(&s, first, s.lane));
    after = fill(&s, 100, offs, 8192);
    ck_assert_uint_eq(after, whole);
    releaseAll(&s, offs, after);
    ck_assert_uint_eq(cacheSlabUsed(&s), 0);
    munmap(z, ZONE_BYTES);
}
END_TEST

/* ---- The table ----------------------------------------------------------- */

/* An item: its key, then its body of a byte repeated. */
typedef struct {
    char key[24];
    uint32_t len;
    char body[];
} Item;

static uint64_t
keyHash(const char* key)
{
    uint64_t h = 1469598103934665603ull;

    for (; *key != '\0'; key++) {
        h = (h ^ (unsigned char)*key) * 1099511628211ull;
    }
    h = (h ^ h >> 30) * 0xbf58476d1ce4e5b9ull; /* splitmix64's finish: */
    h = (h ^ h >> 27) * 0x94d049bb133111ebull; /* the top bits pick the */
    return h ^ h >> 31;                        /* shard */
}

static bool
keyMatch(const void* item, const void* arg)
{
    return strcmp(((const Item*)item)->key, arg) == 0;
}

static bool
sameKey(const void* old, const void* item)
{
    return strcmp(((const Item*)old)->key, ((const Item*)item)->key) == 0;
}

static bool
anyItem(const void* item, const void* arg)
{
    (void)item;
    (void)arg;
    return true;
}

/* Key k's item of len body bytes in; how many it evicted. */
static unsigned
put(CacheTable* t, unsigned k, size_t len)
{
    char key[24];
    unsigned evicted = 0;
    uint64_t item;
    Item* it;

    snprintf(key, sizeof(key), "/k%u", k);
    item = cacheTableAlloc(t, keyHash(key), sizeof(Item) + len, &evicted);
    ck_assert_uint_ne(item, 0);
    it = cacheTableAt(t, item);
    snprintf(it->key, sizeof(it->key), "%s", key);
    it->len = (uint32_t)len;
    memset(it->body, 'a' + (int)(k % 26), len);
    ck_assert(cacheTableInsert(t, item, k, sameKey, &evicted));
    cacheTableRelease(t, item);
    return evicted;
}

/* Key k's item, referenced (0 when none), its body checked whole. */
static uint64_t
get(CacheTable* t, unsigned k)
{
    char key[24];
    uint64_t item;
    const Item* it;

    snprintf(key, sizeof(key), "/k%u", k);
    item = cacheTableFind(t, keyHash(key), keyMatch, key);
    if (item != 0) {
        it = cacheTableAt(t, item);
        for (uint32_t i = 0; i < it->len; i++) {
            ck_assert_int_eq(it->body[i], 'a' + (int)(k % 26));
        }
    }
    return item;
}

static int
tableGeneration(void* z, void (*gen)(CacheTable* t, void* arg), void* arg,
                bool kill)
{
    pid_t pid = fork();
    int status = 0;

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        CacheTable t;

        if (cacheTableOpen(&t, z, ZONE_BYTES, true) != 0) {
            _exit(2);
        }
        gen(&t, arg);
        if (kill) {
            raise(SIGKILL);
        }
        cacheTableClose(&t);
        _exit(0);
    }
    waitpid(pid, &status, 0);
    return status;
}

static void
findTen(CacheTable* t, void* arg)
{
    (void)arg;
    for (unsigned k = 0; k < 10; k++) {
        uint64_t item = get(t, k);

        if (item == 0) {
            _exit(3);
        }
        cacheTableRelease(t, item);
    }
}

START_TEST(tableFoundByTheNextGeneration)
{
    CacheTable t;
    void* z = zoneNew();
    int status;

    ck_assert_int_eq(cacheTableOpen(&t, z, ZONE_BYTES, false), 0);
    for (unsigned k = 0; k < 10; k++) {
        put(&t, k, 1000);
    }
    cacheTableClose(&t);
    status = tableGeneration(z, findTen, NULL, false);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    munmap(z, ZONE_BYTES);
}
END_TEST

START_TEST(tableBoundAndAnswerInFlight)
{
    CacheTable t;
    void* z = zoneNew();
    unsigned evicted = 0;
    uint64_t held;
    uint64_t count;

    ck_assert_int_eq(cacheTableOpen(&t, z, ZONE_BYTES, false), 0);
    put(&t, 0, 3000);
    held = get(&t, 0); /* an answer being sent */
    for (unsigned k = 1; k < 400; k++) {
        evicted += put(&t, k, 1000 + k * 7 % 2000);
        ck_assert_uint_le(cacheTableBytes(&t), cacheSlabCapacity(&t.slab));
        ck_assert_uint_le(cacheSlabUsed(&t.slab), cacheSlabCapacity(&t.slab));
    }
    ck_assert_uint_gt(evicted, 100);
    ck_assert_uint_eq(get(&t, 0), 0); /* evicted */
    /* One past a shard's part is refused before it evicts anything. */
    count = cacheTableCount(&t);
    ck_assert_uint_eq(cacheTableAlloc(&t, 1, t.shardMost, &evicted), 0);
    ck_assert_uint_eq(cacheTableCount(&t), count);
    /* ... and still whole for the answer that holds it. */
    for (uint32_t i = 0; i < 3000; i++) {
        ck_assert_int_eq(((Item*)cacheTableAt(&t, held))->body[i], 'a');
    }
    cacheTableRelease(&t, held);
    count = cacheTableCount(&t);
    ck_assert_uint_eq(cacheTableRemove(&t, 0, anyItem, NULL), count);
    ck_assert_uint_eq(cacheTableCount(&t), 0);
    ck_assert_uint_eq(cacheSlabUsed(&t.slab), 0);
    munmap(z, ZONE_BYTES);
}
END_TEST

static void
holdAll(CacheTable* t, void* arg)
{
    (void)arg;
    for (unsigned k = 0; k < 40; k++) {
        get(t, k); /* never released: killed under its hits */
    }
}

static void
fillPast(CacheTable* t, void* arg)
{
    unsigned evicted = 0;

    for (unsigned k = 100; k < 400; k++) {
        evicted += put(t, k, 2000);
    }
    *(unsigned*)arg = evicted;
}

START_TEST(tableKilledUnderHitsLeaksNothing)
{
    CacheTable t;
    void* z = zoneNew();
    unsigned* evicted = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int status;

    ck_assert_int_eq(cacheTableOpen(&t, z, ZONE_BYTES, false), 0);
    for (unsigned k = 0; k < 40; k++) {
        put(&t, k, 3000);
    }
    cacheTableClose(&t);
    status = tableGeneration(z, holdAll, NULL, true);
    ck_assert(WIFSIGNALED(status));
    /* The store lets them all go: the dead generation still counts. */
    ck_assert_int_eq(cacheTableOpen(&t, z, ZONE_BYTES, true), 0);
    ck_assert_uint_eq(cacheTableRemove(&t, 0, anyItem, NULL), 40);
    ck_assert_uint_eq(cacheTableCount(&t), 0);
    cacheTableClose(&t);
    /* The next generation drops its counts, and fills the zone past its
     * bytes, evicting. */
    status = tableGeneration(z, fillPast, evicted, false);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_uint_gt(*evicted, 100);
    ck_assert_int_eq(cacheTableOpen(&t, z, ZONE_BYTES, true), 0);
    cacheTableRemove(&t, 0, anyItem, NULL);
    ck_assert_uint_eq(cacheSlabUsed(&t.slab), 0);
    munmap(evicted, 4096);
    munmap(z, ZONE_BYTES);
}
END_TEST

/* Killed holding shard 0's lock in the middle of an insert: counted by
 * the store and marked linked, not yet in its bucket or its list. */
static void
dieInInsert(CacheTable* t, void* arg)
{
    uint64_t item = *(uint64_t*)arg;
    TableShard* sh = shardOf(t, head(t, item)->hash);

    pthread_mutex_lock(&sh->lock);
    cacheSlabRef(&t->slab, item, CACHE_SLAB_STORE);
    head(t, item)->flags = ITEM_LINKED;
    head(t, item)->order = 99;
}

START_TEST(tableShardLockOwnerDeadRepaired)
{
    CacheTable t;
    void* z = zoneNew();
    unsigned evicted = 0;
    uint64_t item;
    Item* it;
    uint64_t found;
    uint64_t count;
    int status;

    ck_assert_int_eq(cacheTableOpen(&t, z, ZONE_BYTES, false), 0);
    for (unsigned k = 0; k < 30; k++) {
        put(&t, k, 500);
    }
    count = cacheTableCount(&t);
    item = cacheTableAlloc(&t, keyHash("/new"), sizeof(Item) + 10, &evicted);
    it = cacheTableAt(&t, item);
    snprintf(it->key, sizeof(it->key), "/new");
    status = tableGeneration(z, dieInInsert, &item, true);
    ck_assert(WIFSIGNALED(status));
    found = cacheTableFind(&t, keyHash("/new"), keyMatch, "/new");
    ck_assert_uint_eq(found, item); /* linked by the repair */
    cacheTableRelease(&t, found);
    ck_assert_uint_eq(cacheTableCount(&t), count + 1);
    for (unsigned k = 0; k < 30; k++) {
        uint64_t got = get(&t, k);

        ck_assert_uint_ne(got, 0);
        cacheTableRelease(&t, got);
    }
    cacheTableRelease(&t, item);
    ck_assert_uint_eq(cacheTableRemove(&t, 0, anyItem, NULL), count + 1);
    ck_assert_uint_eq(cacheSlabUsed(&t.slab), 0);
    munmap(z, ZONE_BYTES);
}
END_TEST

COR_TEST_SUITE(cacheSlab)
{
    tcase_add_test(tc, slabBoundAndGivenBack);
    tcase_add_test(tc, slabDeadGenerationsReferencesDropped);
    tcase_add_test(tc, slabLanesOfLiveGenerationsKept);
    tcase_add_test(tc, slabLockOwnerDeadRepaired);
    tcase_add_test(tc, tableFoundByTheNextGeneration);
    tcase_add_test(tc, tableBoundAndAnswerInFlight);
    tcase_add_test(tc, tableKilledUnderHitsLeaksNothing);
    tcase_add_test(tc, tableShardLockOwnerDeadRepaired);
}
