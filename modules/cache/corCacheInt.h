/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache module's parts, shared between its files: the stored entry,
 * the store (a memory bound, least recently used evicted, in shards each
 * under its own lock), RFC 9111's rules, the fetches in flight that
 * other requests of the same key wait for, and what one request of a
 * cached route is to the cache (its run). docs/cache.md says why each is
 * so.
 */
#ifndef COR_CACHE_INT_H
#define COR_CACHE_INT_H

#include "cor.h"
#include "corCacheDiskFile.h"
#include "corCacheTable.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---- Entries ------------------------------------------------------------- */

enum {
    ENTRY_NO_CACHE = 1,        /* no-cache: validated before each use */
    ENTRY_MUST_REVALIDATE = 2, /* must-revalidate or proxy-revalidate */
    ENTRY_VARY_ANY = 4         /* Vary: *: never matches a request */
};

/* A stored header field: where its name and value (each NUL-terminated)
 * are in its entry, from the entry's start. */
typedef struct {
    uint32_t nameAt;
    uint32_t nameLen;
    uint32_t valueAt;
    uint32_t valueLen;
} CacheField;

/*
 * One stored answer: the index's part first (what a lookup touches),
 * then, in the same allocation, its fields, key, the request values its
 * Vary names, its fields' text and its body. Position-free: what is in
 * it is said by offsets from its start, never pointers, so that the
 * bytes are the same answer wherever they are mapped (a memory store's
 * entries are in a zone every generation maps where it may, see
 * corCacheMem.c). Immutable once stored: a 304 makes a new one. refs
 * (an entry of this process's heap: one made for the store, or a disk
 * entry's) count its holders, the last one frees it; an entry in a
 * store's zone is counted there instead (zoned), so that an eviction
 * never frees a body being sent by any process.
 */
typedef struct CacheEntry {
    uint64_t hash; /* of the key */
    atomic_uint refs;
    uint16_t status;
    uint8_t flags;
    uint8_t varyCount;            /* names of Vary (each "name\0value\0") */
    uint32_t keyLen;              /* the key's, after the fields in data */
    uint32_t varyLen;             /* then the Vary names and values */
    uint32_t headerCount;         /* CacheField[] at data */
    uint32_t size;                /* what it counts against the bound */
    int64_t responseTime;         /* when it came (s, the epoch's) */
    int64_t initialAge;           /* its corrected initial age (s) */
    int64_t lifetime;             /* its freshness lifetime (s) */
    int32_t staleWhileRevalidate; /* s past it answered while refreshed,
                                     -1: none (RFC 5861) */
    int32_t staleIfError;         /* s past it answered for an error, -1 */
    uint32_t typeAt;              /* Content-Type, 0: none */
    uint32_t etagAt;              /* ETag's value, 0: none */
    uint32_t modifiedAt;          /* Last-Modified's value, 0: none */
    uint32_t bodyIn;              /* its body in memory (0: in bodyFd) */
    size_t bodyLen;
    int bodyFd;              /* a disk entry's file (its own), or -1 */
    uint32_t bodyAt;         /* where its body starts in it */
    bool zoned;              /* in a store's zone: counted there */
    _Alignas(8) char data[]; /* CacheField[] first */
} CacheEntry;

/* The index's part of an entry, what the issue bounds (256 B). */
_Static_assert(sizeof(CacheEntry) <= 256, "an index entry past 256 bytes");

/* What an entry says at an offset of its own: a NUL-terminated text, or
 * NULL for 0 (none). */
static inline const char*
cacheEntryText(const CacheEntry* e, uint32_t at)
{
    return at != 0 ? (const char*)e + at : NULL;
}

static inline const char*
cacheEntryType(const CacheEntry* e)
{
    return cacheEntryText(e, e->typeAt);
}

static inline const char*
cacheEntryEtag(const CacheEntry* e)
{
    return cacheEntryText(e, e->etagAt);
}

static inline const char*
cacheEntryModified(const CacheEntry* e)
{
    return cacheEntryText(e, e->modifiedAt);
}

/* Its body in memory (a disk entry's, bodyFd >= 0, is in its file). */
static inline const char*
cacheEntryBody(const CacheEntry* e)
{
    return cacheEntryText(e, e->bodyIn);
}

/* Its stored field i, as the core's header type (pointing into e). */
static inline CorHeader
cacheEntryField(const CacheEntry* e, unsigned i)
{
    const CacheField* f = (const CacheField*)(const void*)e->data + i;

    return (CorHeader){ (const char*)e + f->nameAt, f->nameLen,
                        (const char*)e + f->valueAt, f->valueLen };
}

/* Its key (NUL-terminated, keyLen bytes), and its Vary block (varyLen
 * bytes of varyCount "name\0value\0"). */
const char* cacheEntryKey(const CacheEntry* e);
const char* cacheEntryVary(const CacheEntry* e);
/* Another reference, and the end of one (freed at the last). */
void cacheEntryRef(CacheEntry* e);
void cacheEntryRelease(CacheEntry* e);
/* The entry's current age (RFC 9111 4.2.3, in seconds) at nowMs, and
 * whether it is fresh then. */
int64_t cacheEntryAge(const CacheEntry* e, int64_t now);
bool cacheEntryFresh(const CacheEntry* e, int64_t now);
/* Whether stale e may still answer at nowMs: while it is refreshed
 * (stale-while-revalidate), or for an error (stale-if-error, the
 * answer's or the request's, askIfError; -1 none). Never when it must be
 * validated (no-cache, must-revalidate). */
bool cacheEntryStaleWhileRevalidate(const CacheEntry* e, int64_t nowMs);
bool cacheEntryStaleIfError(const CacheEntry* e, int64_t askIfError,
                            int64_t nowMs);
/* Whether r's request headers are those e's Vary named. */
bool cacheEntryVaryMatch(const CacheEntry* e, const CorRequest* r);

/* What an answer is to the cache, read at its head (corCachePolicy.c). */
typedef struct {
    int64_t date;     /* Date, -1 when none */
    int64_t age;      /* Age, 0 when none */
    int64_t expires;  /* Expires, -1 when none; 0 for one that is no date */
    int64_t maxAge;   /* max-age, -1 when none */
    int64_t sMaxAge;  /* s-maxage, -1 when none */
    int64_t modified; /* Last-Modified, -1 when none */
    bool noStore;
    bool private;
    bool noCache;
    bool isPublic;
    bool mustRevalidate;
    bool setCookie;
    bool varyAny;
    int64_t staleWhileRevalidate; /* -1 when none */
    int64_t staleIfError;         /* -1 when none */
} CacheAnswer;

/* An entry made of r's answer as it is now (status, type, headers) with
 * body, key and r's values of Vary, asked at requestMs and answered at
 * responseMs; NULL when out of memory. */
CacheEntry* cacheEntryMake(const CorRequest* r, const CacheAnswer* a,
                           const char* key, size_t keyLen, int64_t requestTime,
                           int64_t responseTime, const void* body,
                           size_t bodyLen);
/* A new entry of old's body and key with the header fields of the 304 r
 * is answered with over old's (RFC 9111 4.3.4); NULL when out of memory. */
CacheEntry* cacheEntryRefreshed(const CacheEntry* old, const CorRequest* r,
                                int64_t requestTime, int64_t responseTime);

/* An entry of a file's head as read (its body left in fd, which it
 * takes); NULL when out of memory. */
CacheEntry* cacheEntryFromDisk(const CacheDiskHead* d, int fd);
/* A copy of e with its body in memory (read from its file when it is a
 * disk entry's); NULL when out of memory or the file is short. */
CacheEntry* cacheEntryInMemory(const CacheEntry* e);

/* ---- RFC 9111's rules (corCachePolicy.c) --------------------------------- */

/* What the request's Cache-Control (and Pragma) say. */
typedef struct {
    bool noCache;         /* validate whatever is stored */
    bool noStore;         /* store nothing of this exchange */
    bool onlyIfCached;    /* a 504 rather than a fetch */
    int64_t maxAge;       /* -1: none */
    int64_t staleIfError; /* -1: none */
} CacheAsk;

void cachePolicyAsk(const CorRequest* r, CacheAsk* ask);
void cachePolicyAnswer(const CorRequest* r, CacheAnswer* a);
/* Whether r's answer may be stored (section 3) by a shared cache, given
 * what it and its request say. */
bool cachePolicyStorable(const CorRequest* r, const CacheAnswer* a,
                         const CacheAsk* ask);
/* The freshness lifetime (4.2.1; heuristic, 4.2.2, for a status that
 * allows it), in seconds, at responseTime. */
int64_t cachePolicyLifetime(int status, const CacheAnswer* a,
                            int64_t responseTime);
/* An HTTP date (IMF-fixdate, and RFC 850's and asctime's), -1 when none
 * of them. */
int64_t cacheHttpDate(const char* s, size_t len);
/* Milliseconds of the epoch, now: what an entry's times are kept in, so
 * that its Age (whole seconds) is its resident time's, not the clock's
 * second ticks'. */
int64_t cacheNowMs(void);

/* ---- The store (corCacheStore.c) ----------------------------------------- */

#define CACHE_SHARDS 16

typedef struct CacheFlight CacheFlight;
typedef struct CacheGrowing CacheGrowing;

/* A shard's part of the disk index (corCacheIndex.c): in the store's
 * zone, which every generation of the instance maps (its places in this
 * process's mapping; NULL when the store has no disk). */
typedef struct CacheIndexShard CacheIndexShard;
typedef struct CacheIndexEntry CacheIndexEntry;

typedef struct {
    CacheIndexShard* zone;
    uint32_t* buckets;        /* slot numbers, 0 none */
    CacheIndexEntry* entries; /* slot n is entries[n - 1] */
    uint32_t bucketMask;
    uint32_t slots;
} CacheDiskShard;

/* A shard of this generation's: its fetches in flight (the entries are
 * in the store's zone, shared with the generation beside it). */
typedef struct {
    pthread_mutex_t lock;
    CacheFlight* flights; /* the fetches in flight of its keys */
    CacheDiskShard disk;  /* its keys' files (the zone's lock) */
} CacheShard;

typedef struct {
    atomic_ullong hits;
    atomic_ullong misses;
    atomic_ullong stale;
    atomic_ullong revalidated;
    atomic_ullong collapsed;
    atomic_ullong evictions;
    atomic_ullong stored;
    atomic_llong bytes;
    atomic_llong entries;
    atomic_llong diskBytes;
    atomic_llong diskEntries;
    atomic_ullong diskEvictions;
    atomic_ullong diskErrors;
} CacheCounters;

typedef struct CacheStore {
    char* name;
    size_t memory;          /* the bound, all shards together */
    size_t shardMost;       /* each shard's part of it */
    CacheTable table;       /* the entries, in the zone (corCacheMem.c) */
    void* zone;             /* its zone, memory bytes */
    void* zoneOwn;          /* or one of this generation's alone */
    bool zoneKept;          /* the last generation's entries are in it */
    uint64_t lockTimeoutMs; /* how long a miss waits for another's fetch */
    bool streamWaiters;     /* waiters read the fetch's body as it comes */
    CacheShard shards[CACHE_SHARDS];
    CacheCounters counters;
    /* The disk half (corCacheDisk.c), path NULL when none. */
    char* path;
    uint64_t size;               /* its bound, all shards together */
    uint64_t diskShardMost;      /* each shard's part of it */
    _Atomic(CorEvPool*) writers; /* write the files, scan them at start */
    CorEvTask scan;
    atomic_bool stopping;        /* the scan stops: the generation ends */
    atomic_bool scanned;         /* the scan at start is done */
    atomic_bool folderGone;      /* said once, until it is back */
    atomic_ullong nextId;        /* the next file's id (random start) */
    atomic_ullong writesPending; /* bytes queued to the writers */
    void* index;                 /* the disk index's zone (corCacheIndex.c) */
    size_t indexBytes;           /* its size */
    bool indexKept;              /* it is the last generation's */
} CacheStore;

/* The store named name, its entries in a zone of memory bytes (the last
 * generation's, with what it stored, while memory is the same). */
int cacheStoreInit(CacheStore* s, const char* name, size_t memory);
void cacheStoreFree(CacheStore* s);
CacheShard* cacheShardOf(CacheStore* s, uint64_t hash);
/* The newest entry of key that r's Vary values select, referenced (the
 * caller releases it), now the most recently used; NULL when none. */
CacheEntry* cacheStoreFind(CacheStore* s, uint64_t hash, const char* key,
                           size_t keyLen, const CorRequest* r);
/* Put e in (the store takes the caller's reference): it replaces the entry
 * of its key and variant; the least recently used go while the shard is
 * past its bound. false (e released) when e alone is past it. */
bool cacheStoreInsert(CacheStore* s, CacheEntry* e);
/* Take every variant of key out; returns how many. */
unsigned cacheStoreRemove(CacheStore* s, const char* key, size_t keyLen);
/* Take every entry whose key starts with prefix out; how many. */
unsigned cacheStoreRemovePrefix(CacheStore* s, const char* prefix, size_t len);
/* The largest answer s stores: its memory's part for one shard, or a
 * disk's part of size for one shard (streamed to its file). */
size_t cacheStoreEntryMost(const CacheStore* s);

/* ---- The memory store's zone (corCacheMem.c) ----------------------------- */

/* The zone "cachemem:NAME" of s->memory bytes opened and its table in
 * it (s->zoneKept when the last generation's); 0, or -1. */
int cacheMemOpen(CacheStore* s);
void cacheMemClose(CacheStore* s);
/* e, an entry in a zone, counted once more (this generation's) and once
 * less; its memory goes with the last count of any process. */
void cacheMemRef(CacheEntry* e);
void cacheMemRelease(CacheEntry* e);

/* ---- The disk half (corCacheDisk.c, corCacheDiskWrite.c)
 * -------------------------------------- */

/* A disk hit's body is read into memory (and the entry kept there, its
 * CRC checked) up to this; a larger one is sent from its file. */
#define CACHE_DISK_PROMOTE_MOST ((size_t)256 << 10)
/* A stale disk entry is revalidated (its body read into memory for the
 * refreshed one, or for stale-if-error's answer) up to this; a larger
 * one is fetched whole again. */
#define CACHE_DISK_REFRESH_MOST ((size_t)64 << 20)

/* The store's folder made (0, or -1 with errno); its writers and scan
 * start with the generation's loops (cacheDiskStart) and end at exit. */
int cacheDiskOpen(CacheStore* s, const char* path, uint64_t size);
int cacheDiskStart(CacheStore* s);
void cacheDiskClose(CacheStore* s);
/* Write e to its file off the loops (the writers take a reference):
 * an entry whose body is whole already (a 304's refresh). */
void cacheDiskWrite(CacheStore* s, CacheEntry* e);
/* A fetch's answer written to its file as it comes (g, its growing
 * body, referenced): by the writers, off the loops, a piece at a time,
 * under a name of its own, renamed into place when whole. NULL (kept in
 * memory alone, as far as it goes) without writers or memory. From the
 * fetch's loop: more (the bytes just appended to g: 0, or -1 when the
 * writers are too far behind, then the answer is not stored), and the
 * end, once g ended: flight, when not NULL, ends once the file is in
 * the index (an answer not kept in memory is found there by those who
 * wait for it); a cut g leaves no file. */
typedef struct CacheDiskStream CacheDiskStream;
CacheDiskStream* cacheDiskStreamOpen(CacheStore* s, CacheGrowing* g,
                                     uint64_t hash);
int cacheDiskStreamMore(CacheDiskStream* ds, size_t len);
/* onlyCopy: memory keeps none of it (the file, once placed, is a store
 * of its own in cor_cache_stored_total). */
void cacheDiskStreamEnd(CacheDiskStream* ds, CacheFlight* flight,
                        bool onlyCopy);
/* The newest entry of key on disk that r's Vary values select: one in
 * memory (its body read and checked, and now in the memory store too)
 * when small, else one whose body is its file; NULL when none, or its
 * file is missing, cut or corrupt (then taken out of the index). */
CacheEntry* cacheDiskFind(CacheStore* s, uint64_t hash, const char* key,
                          size_t keyLen, const CorRequest* r);
/* A hit of e in memory is a use of its file too (shard locked): its
 * file goes to the front of the disk's LRU, so that a file whose answer
 * is hot in memory is not the disk's oldest. */
void cacheDiskTouchLocked(CacheShard* shard, const CacheEntry* e);
/* Between the index (corCacheDisk.c) and the writes (corCacheDiskWrite.c):
 * the name of file (hash, id); a file in the index, a new answer's
 * (replace: its variant's older files go) or the scan's, unless a purge
 * or an invalidation of its shard came after removals (its count when
 * the answer was asked for; CACHE_DISK_REMOVALS_ANY: the scan's). */
#define CACHE_DISK_REMOVALS_ANY UINT64_MAX
void cacheDiskFileName(const CacheStore* s, uint64_t hash, uint64_t id,
                       char* out, size_t cap);
void cacheDiskIndexPut(CacheStore* s, uint64_t hash, uint64_t variant,
                       uint64_t id, uint64_t size, bool replace,
                       uint64_t removals);
/* Take out (and unlink) every file of the key's hash; of the keys that
 * start with prefix (each file's head read: off the loops). How many. */
unsigned cacheDiskRemove(CacheStore* s, uint64_t hash);
unsigned cacheDiskRemovePrefix(CacheStore* s, const char* prefix, size_t len);

/* ---- The disk index (corCacheIndex.c) ------------------------------------ */

/* A file, by its name's two parts. */
typedef struct {
    uint64_t hash;
    uint64_t id;
} CacheFileId;

/* Files the index let go, for the caller to unlink outside the lock. */
typedef struct {
    CacheFileId* files;
    size_t count;
    size_t cap;
} CacheGone;

void cacheGoneAdd(CacheGone* gone, uint64_t hash, uint64_t id);

enum { INDEX_PUT, INDEX_OLDER, INDEX_SAME };

/* The store's index in its zone ("cache:NAME", sized by its size): the
 * last generation's as it left it (*reused), or a new one, empty (0), or
 * -1 with errno. */
int cacheIndexOpen(CacheStore* s, bool* reused);
void cacheIndexClose(CacheStore* s);
/* File (hash, id) of size bytes, the key's variant, in: a new answer's
 * (replace: the files of its variant go) or the scan's (not put in when
 * its variant is there: INDEX_OLDER, or INDEX_SAME the very file). A
 * new answer asked for before a purge of its shard (removals moved
 * since; UINT64_MAX: any) is INDEX_OLDER. What goes is added to gone
 * (the least recently used too, past the shard's part of size). */
int cacheIndexPut(CacheStore* s, const CacheFileId* f, uint64_t variant,
                  uint64_t size, bool replace, uint64_t removals,
                  CacheGone* gone);
/* File f out of the index; a purge's (not error) counts as a removal. */
void cacheIndexForget(CacheStore* s, const CacheFileId* f, bool error);
/* Up to most ids of the files of hash, now the most recently used. */
unsigned cacheIndexFind(CacheStore* s, uint64_t hash, uint64_t* ids,
                        unsigned most);
/* The file of hash's variant, now the most recently used. */
void cacheIndexTouch(CacheShard* shard, uint64_t hash, uint64_t variant);
/* Every file of hash out (into gone); how many. */
unsigned cacheIndexRemove(CacheStore* s, uint64_t hash, CacheGone* gone);
/* The files of shard i as they are now, malloc'ed (*filesP); how many. */
size_t cacheIndexFiles(CacheStore* s, unsigned i, CacheFileId** filesP);
/* The purges and invalidations of hash's shard so far. */
uint64_t cacheIndexRemovals(CacheStore* s, uint64_t hash);
/* File f, when in the index (true), now the most recently used. */
bool cacheIndexUse(CacheStore* s, const CacheFileId* f);
/* Whether a scan of the folder went to its end into this index (one cut
 * short by a generation's end is done again by the next); said so. */
bool cacheIndexWhole(const CacheStore* s);
void cacheIndexWholeSet(CacheStore* s);

/* ---- The LRU order across a restart (corCacheOrder.c) -------------------- */

/* At the stop: the index's order, oldest first, into the folder's
 * sidecar (PATH/.lru), unless one not yet taken up is there. After the
 * scan at start: the sidecar's order laid over the scan's (a file it
 * names that the scan found goes to the front, oldest first), and the
 * sidecar removed; how many files it named that the index has. */
void cacheOrderSave(CacheStore* s);
size_t cacheOrderLoad(CacheStore* s);

/* ---- A request of a cached route (its r->cacheData) ---------------------- */

typedef enum {
    RUN_HIT,        /* answered from entry */
    RUN_FETCH,      /* its handler's answer is stored (a miss) */
    RUN_REVALIDATE, /* its handler was asked whether entry still holds */
    RUN_PASS,       /* its handler answers; nothing is stored */
    RUN_INVALIDATE, /* an unsafe method: a success takes its URL out */
    RUN_WAIT        /* waits for another request's fetch */
} CacheRunKind;

typedef struct CacheRun {
    CacheRunKind kind;
    CorRequest* r;
    CorRequest* client; /* r as the client sent it (its headers) */
    bool stale;         /* a stored answer was there, stale */
    bool refresh;       /* the cache's own request (cacheRefreshStart) */
    CacheStore* store;
    char* key; /* in r's arena */
    size_t keyLen;
    uint64_t hash;
    CacheEntry* entry;   /* referenced: answered from, or revalidated */
    CacheFlight* flight; /* the fetch it leads, or NULL */
    int64_t requestTime; /* when its handler was asked (s) */
    CacheAsk ask;
    bool clientConditional; /* the client's own If-None-Match etc. */
    bool headWanted;        /* a HEAD run as a GET, to be stored */
    unsigned routeFields;   /* r's answer fields before its handler's:
                               its route's `headers`, said on each
                               answer by the core, never stored */
    CorCacheWait* wait;     /* RUN_WAIT: where it goes on */
    CorEvTask task;         /* RUN_WAIT: the wake, to r's loop */
    CorEvTimer patience;    /* RUN_WAIT: its store's lock_timeout */
    CorList waiting;        /* RUN_WAIT: in its flight's list */
    int outcome;            /* RUN_WAIT: what the fetch ended as */
} CacheRun;

/* The key of r (its host, path and query) into r's arena. */
int cacheKeyOf(CorRequest* r, char** keyP, size_t* lenP);

/* ---- Fetches in flight (corCacheFlight.c) -------------------------------- */

enum {
    FLIGHT_STORED, /* the answer is in the store: look again */
    FLIGHT_PASS,   /* it may not be stored: each runs its handler */
    FLIGHT_FAILED, /* it ended without an answer: look again */
    FLIGHT_HEAD    /* its head came: look again, read its body */
};

/* What cacheFlightJoin made of run. */
enum {
    JOIN_LEAD,  /* it fetches (run->flight, unless out of memory) */
    JOIN_WAIT,  /* r waits, and is resumed when the fetch's head or end
                   comes */
    JOIN_STREAM /* the fetch's body comes: *growingP, referenced */
};

/* run leads the fetch of its key, or waits for one in flight, or reads
 * the body of one whose head came. */
int cacheFlightJoin(CorRequest* r, CacheRun* run, CacheGrowing** growingP);
/* The fetch run leads has its head: its growing body g (referenced
 * here) for the waiters, woken to read it (those it cannot serve wait
 * again for the end). */
void cacheFlightStream(CacheRun* run, CacheGrowing* g);
/* The fetch run leads ended as outcome: its waiters are woken. */
void cacheFlightEnd(CacheRun* run, int outcome);
/* The fetch run leads, taken from it (to end later, on any thread, by
 * cacheFlightFinish); NULL when it leads none. */
CacheFlight* cacheFlightTake(CacheRun* run);
void cacheFlightFinish(CacheStore* s, CacheFlight* f, int outcome);

/* ---- Waiters answered as the body comes (corCacheStream.c) -------------- */

/* A fetch's body as it comes, which its waiters read at their own pace:
 * head is the answer's entry with no body (status, fields, times); body
 * grows until ended (whole, or cut: then emptied). refs: the fetch's
 * filter, its flight, each reader. */
struct CacheGrowing {
    pthread_mutex_t lock;
    atomic_uint refs;
    CacheEntry* head;
    char* body; /* bytes base to len of it */
    size_t base;
    size_t len;
    size_t cap;
    /* A disk store's answer goes to its file as it comes (a
     * CacheDiskStream): kept whole in memory up to keepMost (SIZE_MAX
     * when it has no file), past it only what is not written yet, at most
     * heldMost; the bytes before base are read from fd at fileAt. */
    size_t keepMost;
    size_t heldMost;
    int fd;
    uint64_t fileAt;
    bool ended;
    bool whole;
    CorList readers; /* each waiter reading it */
};

/* A growing body of head's answer (it takes the reference), NULL when
 * out of memory; a reference more, and one let go. */
CacheGrowing* cacheGrowingNew(CacheEntry* head);
void cacheGrowingRef(CacheGrowing* g);
void cacheGrowingRelease(CacheGrowing* g);
/* Bytes more of it (0; -ENOMEM; -ENOBUFS past what it may hold while
 * its file is written), and its end: whole, or cut (its readers' answers
 * are cut too). From the fetch's loop. */
int cacheGrowingAppend(CacheGrowing* g, const void* data, size_t len);
void cacheGrowingEnd(CacheGrowing* g, bool whole);
/* Whether its body is in memory whole (once ended: to be stored there). */
bool cacheGrowingInMemory(const CacheGrowing* g);
/* Lock held: up to cap bytes of its body from at into buf, how many (0
 * when there are none yet); *fromFile (the bytes before base) when they
 * are to be read from g->fd instead, at g->fileAt + at. */
size_t cacheGrowingCopyLocked(CacheGrowing* g, size_t at, char* buf, size_t cap,
                              bool* fromFile);
/* Lock held: the bytes before upTo are in its file: what memory held of
 * them goes, once past keepMost. */
void cacheGrowingWrittenLocked(CacheGrowing* g, size_t upTo);
/* r (a waiter of run) answered from g as it grows, by a task of r's loop
 * (g's reference is taken); 0, or -1 (g let go, r not answered) without
 * memory or a task. */
int cacheStreamAnswer(CorRequest* r, CacheRun* run, CacheGrowing* g);
/* Whether run's request may be answered from head's growing body: a GET
 * with no Range and no condition of its own, which head's Vary values and
 * freshness serve (else it waits for the stored whole, as before). */
bool cacheStreamable(const CacheRun* run, const CacheEntry* head);

/* ---- The parts that meet the core ---------------------------------------- */

/* The lookup (corCacheFront.c), again once the fetch a waiter waited for
 * ended, and the answer from an entry. */
int cacheLookup(CorRequest* r, void* arg, CorCacheWait* wait);
int cacheLookupAgain(CacheRun* run);
void cacheRelease(CorRequest* r, void* arg);
/* Answer r from run->entry (a 304 when the client's conditions hold, a
 * 206 of one range the client's Range asks), its Cache-Status params
 * said; and those fields alone (its stored ones, Age, Cache-Status). */
void cacheAnswerFromEntry(CorRequest* r, CacheRun* run, const char* params);
void cacheEntryFieldsSay(CorRequest* r, const CacheRun* run,
                         const char* params);
/* Whether r's conditions (If-None-Match, If-Modified-Since) hold for e:
 * a 304 is the answer. */
bool cacheConditionMet(const CorRequest* r, const CacheEntry* e);
/* Cache-Status (RFC 9211) on r's answer: store's name and params. */
void cacheStatusSay(CorRequest* r, const CacheStore* s, const char* params);

/* stale-while-revalidate's refresh of from's key, by a request of the
 * cache's own on from's loop (corCacheRefresh.c); its ops tell the
 * lookup it is one. */
void cacheRefreshStart(const CorRequest* from);
extern const CorProtocolOps cacheRefreshOps;
/* Whether a fetch of run's key is in flight (corCacheFlight.c). */
bool cacheFlightBusy(const CacheRun* run);

/* The filter that sees the answers of cached routes (corCacheFill.c). */
extern const CorFilter cacheFilter;

/* The handler cache-purge (corCachePurge.c); the stores it purges. */
void cachePurgeServe(CorRequest* r);
extern CacheStore* cacheStores;
extern unsigned cacheStoreCount;

#endif /* COR_CACHE_INT_H */
