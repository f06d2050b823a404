/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory store's slab allocator in a zone (modules/cache/
 * corCacheSlab.c, included), with processes as a reload has them: the
 * zone's bound kept and every chunk given back whole; a chunk another
 * generation still counts stays until that generation is gone, and the
 * next one to open the zone frees it (a generation SIGKILLed with
 * answers in flight leaks nothing); a process killed holding the lock
 * in the middle of taking a chunk leaves lists the next locker rebuilds.
 */
#include "corTest.h"

#include "corCacheSlab.c"

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

COR_TEST_SUITE(cacheSlab)
{
    tcase_add_test(tc, slabBoundAndGivenBack);
    tcase_add_test(tc, slabDeadGenerationsReferencesDropped);
    tcase_add_test(tc, slabLanesOfLiveGenerationsKept);
    tcase_add_test(tc, slabLockOwnerDeadRepaired);
}
