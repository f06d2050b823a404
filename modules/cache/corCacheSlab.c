/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The slab allocator of a memory store kept across reloads (the shape in
 * corCacheSlab.h). The zone is a head, a map of its pages and the pages.
 * A page is free, cut into chunks of one size class (64 bytes, then
 * each class a quarter larger, up to half a page), or part of a run of
 * whole pages for one larger chunk. Every chunk starts with a 16-byte
 * head: its count (four 16-bit lanes in one 64-bit word, so that the
 * last release of all lanes is one atomic operation and exactly one
 * process sees it) and its state. One robust, process-shared mutex
 * guards the map and the free lists; a process that dies holding it
 * leaves EOWNERDEAD to the next, which rebuilds them from the pages'
 * kinds and the chunks' states (repair), as the disk index's shards
 * are rebuilt from their slots. Writes are ordered so that what a death
 * leaves half done is read back right: a chunk is marked used after it
 * leaves its free list and free before it joins one, a page is carved
 * while its kind says so and only then named a class's.
 */
#include "corCacheSlab.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLAB_VERSION 1
#define SLAB_CLASSES_MOST 40
#define CHUNK_LEAST 64
#define CHUNK_HEAD 16
#define CHUNK_USED 0x44455355u /* "USED" */
#define CHUNK_FREE 0x45455246u /* "FREE" */
#define LANE_MOST 0xffffu
#define LANE_REFUSED 0xf000u
#define LANE_BITS 16

enum {
    PAGE_FREE,
    PAGE_CARVING, /* being cut (or a run being made): free to a repair */
    PAGE_RUN,     /* the first page of a run: one chunk, run pages */
    PAGE_TAIL,    /* another page of a run */
    PAGE_CLASS    /* PAGE_CLASS + c: cut into chunks of class c */
};

typedef struct {
    uint32_t kind;
    uint32_t run;  /* a run's pages */
    uint32_t used; /* a class page's chunks handed out */
    uint32_t next; /* in its class's list of pages with room: index + 1 */
    uint32_t prev;
    uint32_t pad;
    uint64_t free; /* its first free chunk (the chunk's offset), 0 none */
} SlabPage;

typedef struct {
    _Atomic uint64_t refs; /* CACHE_SLAB_LANES lanes of LANE_BITS */
    uint32_t state;
    uint32_t pad;
    /* a free chunk's next free one follows (its first 8 bytes) */
} SlabChunk;

_Static_assert(sizeof(SlabChunk) == CHUNK_HEAD, "a chunk's head");

/* Who holds a lane: a process, by its pid and its start time (a pid
 * the kernel gave again is not the same process). */
typedef struct {
    int32_t pid;
    uint32_t pad;
    uint64_t start;
} SlabLane;

struct CacheSlabZone {
    uint32_t version;
    uint32_t classCount;
    uint64_t bytes;
    uint64_t pageSize;
    uint32_t pageCount;
    uint32_t pad;
    uint64_t mapAt;   /* the page map's offset */
    uint64_t pagesAt; /* the first page's */
    uint64_t used;    /* bytes of chunks handed out */
    pthread_mutex_t lock;
    SlabLane lanes[CACHE_SLAB_LANES];
    uint64_t classSize[SLAB_CLASSES_MOST];
    uint32_t classPages[SLAB_CLASSES_MOST]; /* pages with room: index + 1 */
};

static SlabPage*
pageAt(CacheSlab* s, uint32_t p)
{
    return (SlabPage*)(s->base + s->zone->mapAt) + p;
}

static uint64_t
pageOffset(CacheSlab* s, uint32_t p)
{
    return s->zone->pagesAt + (uint64_t)p * s->zone->pageSize;
}

static SlabChunk*
chunkAt(CacheSlab* s, uint64_t off)
{
    return (SlabChunk*)(s->base + off - CHUNK_HEAD);
}

static uint64_t*
nextOf(CacheSlab* s, uint64_t off)
{
    return (uint64_t*)(s->base + off);
}

static uint32_t
pageOf(CacheSlab* s, uint64_t off)
{
    return (uint32_t)((off - CHUNK_HEAD - s->zone->pagesAt)
                      / s->zone->pageSize);
}

/* ---- Pages with room, per class (the lock held) -------------------------- */

static void
roomIn(CacheSlab* s, uint32_t p, uint32_t c)
{
    SlabPage* page = pageAt(s, p);

    page->prev = 0;
    page->next = s->zone->classPages[c];
    if (page->next != 0) {
        pageAt(s, page->next - 1)->prev = p + 1;
    }
    s->zone->classPages[c] = p + 1;
}

static void
roomOut(CacheSlab* s, uint32_t p, uint32_t c)
{
    SlabPage* page = pageAt(s, p);

    if (page->prev != 0) {
        pageAt(s, page->prev - 1)->next = page->next;
    } else {
        s->zone->classPages[c] = page->next;
    }
    if (page->next != 0) {
        pageAt(s, page->next - 1)->prev = page->prev;
    }
    page->next = page->prev = 0;
}

/* Page p cut into chunks of class c, each free; kind says so last. */
static void
carve(CacheSlab* s, uint32_t p, uint32_t c)
{
    SlabPage* page = pageAt(s, p);
    uint64_t size = s->zone->classSize[c];
    uint64_t count = s->zone->pageSize / size;

    page->kind = PAGE_CARVING;
    page->used = 0;
    page->free = 0;
    for (uint64_t i = count; i-- > 0;) {
        uint64_t off = pageOffset(s, p) + i * size + CHUNK_HEAD;

        chunkAt(s, off)->state = CHUNK_FREE;
        atomic_store(&chunkAt(s, off)->refs, 0);
        *nextOf(s, off) = page->free;
        page->free = off;
    }
    page->kind = PAGE_CLASS + c;
    roomIn(s, p, c);
}

/* The first of n free pages in a row; pageCount when none. */
static uint32_t
pagesFind(CacheSlab* s, uint32_t n)
{
    uint32_t row = 0;

    for (uint32_t p = 0; p < s->zone->pageCount; p++) {
        row = pageAt(s, p)->kind == PAGE_FREE ? row + 1 : 0;
        if (row == n) {
            return p + 1 - n;
        }
    }
    return s->zone->pageCount;
}

static uint64_t
runTake(CacheSlab* s, uint64_t len)
{
    uint64_t pages = (len + CHUNK_HEAD + s->zone->pageSize - 1)
                     / s->zone->pageSize;
    uint32_t p = pages <= s->zone->pageCount ? pagesFind(s, (uint32_t)pages)
                                             : s->zone->pageCount;
    uint64_t off;

    if (p == s->zone->pageCount) {
        return 0;
    }
    off = pageOffset(s, p) + CHUNK_HEAD;
    pageAt(s, p)->kind = PAGE_CARVING;
    pageAt(s, p)->run = (uint32_t)pages;
    for (uint32_t t = 1; t < pages; t++) {
        pageAt(s, p + t)->kind = PAGE_TAIL;
    }
    chunkAt(s, off)->state = CHUNK_USED;
    pageAt(s, p)->kind = PAGE_RUN;
    s->zone->used += pages * s->zone->pageSize;
    return off;
}

static uint64_t
chunkTake(CacheSlab* s, uint32_t c)
{
    uint32_t p;
    SlabPage* page;
    uint64_t off;

    if (s->zone->classPages[c] == 0) {
        p = pagesFind(s, 1);
        if (p == s->zone->pageCount) {
            return 0;
        }
        carve(s, p, c);
    }
    p = s->zone->classPages[c] - 1;
    page = pageAt(s, p);
    off = page->free;
    page->free = *nextOf(s, off);
    page->used++;
    if (page->free == 0) {
        roomOut(s, p, c);
    }
    chunkAt(s, off)->state = CHUNK_USED;
    s->zone->used += s->zone->classSize[c];
    return off;
}

/* Chunk off back (the lock held): to its page's free list, the page
 * to the free pages when none of it is handed out. */
static void
chunkFree(CacheSlab* s, uint64_t off)
{
    uint32_t p = pageOf(s, off);
    SlabPage* page = pageAt(s, p);

    chunkAt(s, off)->state = CHUNK_FREE;
    if (page->kind == PAGE_RUN) {
        s->zone->used -= (uint64_t)page->run * s->zone->pageSize;
        for (uint32_t t = page->run; t-- > 0;) {
            pageAt(s, p + t)->kind = PAGE_FREE;
        }
        return;
    }
    uint32_t c = page->kind - PAGE_CLASS;

    s->zone->used -= s->zone->classSize[c];
    *nextOf(s, off) = page->free;
    if (page->free == 0) {
        roomIn(s, p, c);
    }
    page->free = off;
    if (--page->used == 0) {
        roomOut(s, p, c);
        page->kind = PAGE_FREE;
    }
}

/* ---- The lock, and its repair -------------------------------------------- */

/* The map and the free lists made again from the pages' kinds and the
 * chunks' states, after a process died holding the lock. */
static void
repair(CacheSlab* s)
{
    CacheSlabZone* z = s->zone;

    z->used = 0;
    memset(z->classPages, 0, sizeof(z->classPages));
    for (uint32_t p = 0; p < z->pageCount; p++) {
        SlabPage* page = pageAt(s, p);
        uint64_t first = pageOffset(s, p) + CHUNK_HEAD;

        page->next = page->prev = 0;
        if (page->kind == PAGE_RUN && page->run >= 1
            && page->run <= z->pageCount - p
            && chunkAt(s, first)->state == CHUNK_USED) {
            for (uint32_t t = 1; t < page->run; t++) {
                pageAt(s, p + t)->kind = PAGE_TAIL;
            }
            z->used += (uint64_t)page->run * z->pageSize;
            p += page->run - 1;
            continue;
        }
        if (page->kind < PAGE_CLASS
            || page->kind - PAGE_CLASS >= z->classCount) {
            page->kind = PAGE_FREE;
            continue;
        }
        uint32_t c = page->kind - PAGE_CLASS;
        uint64_t size = z->classSize[c];

        page->used = 0;
        page->free = 0;
        for (uint64_t i = z->pageSize / size; i-- > 0;) {
            uint64_t off = pageOffset(s, p) + i * size + CHUNK_HEAD;

            if (chunkAt(s, off)->state == CHUNK_USED) {
                page->used++;
                continue;
            }
            chunkAt(s, off)->state = CHUNK_FREE;
            *nextOf(s, off) = page->free;
            page->free = off;
        }
        z->used += page->used * size;
        if (page->used == 0) {
            page->kind = PAGE_FREE;
        } else if (page->free != 0) {
            roomIn(s, p, c);
        }
    }
}

static int
lock(CacheSlab* s)
{
    int rc = pthread_mutex_lock(&s->zone->lock);

    if (rc == EOWNERDEAD) {
        repair(s);
        pthread_mutex_consistent(&s->zone->lock);
        return 0;
    }
    return rc;
}

static void
unlock(CacheSlab* s)
{
    pthread_mutex_unlock(&s->zone->lock);
}

/* ---- Lanes: which generation counts in which ----------------------------- */

/* A process's start time (field 22 of /proc/PID/stat), 0 when it is gone
 * or a zombie. */
static uint64_t
startOf(int pid)
{
    char path[64];
    char text[1024];
    ssize_t n;
    int fd;
    const char* at;
    unsigned long long start = 0;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    at = strrchr(text, ')');
    if (at == NULL || at[1] != ' ' || at[2] == 'Z' || at[2] == 'X') {
        return 0;
    }
    at += 2; /* field 3 */
    for (int field = 3; field < 22 && at != NULL; field++) {
        at = strchr(at, ' ');
        at = at != NULL ? at + 1 : NULL;
    }
    if (at == NULL || sscanf(at, "%llu", &start) != 1) {
        return 0;
    }
    return start;
}

/* fn(off) for each chunk handed out (the lock held). */
static void
usedEach(CacheSlab* s, void (*fn)(CacheSlab* s, uint64_t off, void* arg),
         void* arg)
{
    CacheSlabZone* z = s->zone;

    for (uint32_t p = 0; p < z->pageCount; p++) {
        SlabPage* page = pageAt(s, p);
        uint64_t size = z->pageSize;
        uint64_t count = 1;

        if (page->kind >= PAGE_CLASS) {
            size = z->classSize[page->kind - PAGE_CLASS];
            count = z->pageSize / size;
        } else if (page->kind != PAGE_RUN) {
            continue;
        }
        for (uint64_t i = 0; i < count; i++) {
            uint64_t off = pageOffset(s, p) + i * size + CHUNK_HEAD;

            if (chunkAt(s, off)->state == CHUNK_USED) {
                fn(s, off, arg);
            }
        }
    }
}

/* A lane's count of off dropped; freed when it was the last. */
static void
laneDropOne(CacheSlab* s, uint64_t off, void* arg)
{
    uint64_t mask = (uint64_t)LANE_MOST << (*(unsigned*)arg * LANE_BITS);
    uint64_t was = atomic_fetch_and(&chunkAt(s, off)->refs, ~mask);

    if ((was & mask) != 0 && (was & ~mask) == 0) {
        chunkFree(s, off);
    }
}

void
cacheSlabEach(CacheSlab* s, void (*fn)(CacheSlab* s, uint64_t off, void* arg),
              void* arg)
{
    if (lock(s) == 0) {
        usedEach(s, fn, arg);
        unlock(s);
    }
}

uint64_t
cacheSlabRefs(const CacheSlab* s, uint64_t off, unsigned lane)
{
    return atomic_load(&((SlabChunk*)(s->base + off - CHUNK_HEAD))->refs)
               >> (lane * LANE_BITS)
           & LANE_MOST;
}

/* ---- What the store asks ------------------------------------------------- */

static void
layOut(CacheSlab* s, size_t bytes)
{
    CacheSlabZone* z = s->zone;
    uint64_t page = 4096;
    uint64_t size = CHUNK_LEAST;
    uint64_t room;

    while (page < ((uint64_t)1 << 20) && page * 256 < bytes) {
        page <<= 1;
    }
    memset(z, 0, sizeof(*z));
    z->version = SLAB_VERSION;
    z->bytes = bytes;
    z->pageSize = page;
    z->mapAt = (sizeof(*z) + 63) / 64 * 64;
    room = bytes > z->mapAt ? bytes - z->mapAt : 0;
    z->pageCount = (uint32_t)(room / (page + sizeof(SlabPage)));
    z->pagesAt = (z->mapAt + (uint64_t)z->pageCount * sizeof(SlabPage) + 63)
                 / 64 * 64;
    while (z->pageCount > 0
           && z->pagesAt + (uint64_t)z->pageCount * page > bytes) {
        z->pageCount--;
    }
    while (size <= page / 2 && z->classCount < SLAB_CLASSES_MOST) {
        z->classSize[z->classCount++] = size;
        size = (size + size / 4 + 15) / 16 * 16;
    }
}

int
cacheRobustLockInit(pthread_mutex_t* m)
{
    pthread_mutexattr_t attr;
    int rc = pthread_mutexattr_init(&attr);

    rc = rc != 0 ? rc
                 : pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    rc = rc != 0 ? rc
                 : pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    rc = rc != 0 ? rc : pthread_mutex_init(m, &attr);
    pthread_mutexattr_destroy(&attr);
    return rc;
}

int
cacheSlabOpen(CacheSlab* s, void* zone, size_t bytes, bool reused)
{
    int self = (int)getpid();
    uint64_t start = startOf(self);

    s->zone = zone;
    s->base = zone;
    s->lane = 0;
    if (bytes < sizeof(CacheSlabZone) + 4096) {
        return -1;
    }
    if (!reused || s->zone->version != SLAB_VERSION
        || s->zone->bytes != bytes) {
        layOut(s, bytes);
        if (cacheRobustLockInit(&s->zone->lock) != 0) {
            return -1;
        }
    }
    if (lock(s) != 0) {
        return -1;
    }
    for (unsigned lane = 1; lane < CACHE_SLAB_LANES; lane++) {
        SlabLane* l = &s->zone->lanes[lane];

        if (l->pid != 0 && startOf(l->pid) == l->start) {
            continue; /* alive */
        }
        usedEach(s, laneDropOne, &lane);
        *l = (SlabLane){ 0 };
        if (s->lane == 0) {
            s->lane = lane;
            *l = (SlabLane){ .pid = self, .start = start };
        }
    }
    unlock(s);
    return s->lane != 0 ? 0 : -1;
}

void
cacheSlabClose(CacheSlab* s)
{
    if (s->lane != 0 && lock(s) == 0) {
        s->zone->lanes[s->lane] = (SlabLane){ 0 };
        unlock(s);
    }
    s->lane = 0;
}

uint64_t
cacheSlabAlloc(CacheSlab* s, size_t len)
{
    CacheSlabZone* z = s->zone;
    uint64_t want = len + CHUNK_HEAD;
    uint64_t off = 0;
    uint32_t c = 0;

    while (c < z->classCount && z->classSize[c] < want) {
        c++;
    }
    if (lock(s) != 0) {
        return 0;
    }
    off = c < z->classCount ? chunkTake(s, c) : runTake(s, len);
    if (off != 0) {
        memset(cacheSlabAt(s, off), 0, CACHE_SLAB_ZEROED);
        atomic_store(&chunkAt(s, off)->refs,
                     (uint64_t)1 << (s->lane * LANE_BITS));
    }
    unlock(s);
    return off;
}

bool
cacheSlabRef(CacheSlab* s, uint64_t off, unsigned lane)
{
    SlabChunk* c = chunkAt(s, off);
    uint64_t one = (uint64_t)1 << (lane * LANE_BITS);
    uint64_t was = atomic_fetch_add(&c->refs, one);

    /* Refused well before the lane is full, so that the adds racing this
     * one never carry into the next lane. */
    if ((was >> (lane * LANE_BITS) & LANE_MOST) >= LANE_REFUSED) {
        atomic_fetch_sub(&c->refs, one);
        return false;
    }
    return true;
}

bool
cacheSlabRelease(CacheSlab* s, uint64_t off, unsigned lane)
{
    uint64_t one = (uint64_t)1 << (lane * LANE_BITS);

    if (atomic_fetch_sub(&chunkAt(s, off)->refs, one) != one) {
        return false;
    }
    if (lock(s) == 0) {
        chunkFree(s, off);
        unlock(s);
    }
    return true;
}

uint64_t
cacheSlabUsed(const CacheSlab* s)
{
    return s->zone->used;
}

uint64_t
cacheSlabCapacity(const CacheSlab* s)
{
    return (uint64_t)s->zone->pageCount * s->zone->pageSize;
}

uint64_t
cacheSlabLargest(const CacheSlab* s)
{
    return cacheSlabCapacity(s) - CHUNK_HEAD;
}
