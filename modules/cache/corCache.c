/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache module: a shared HTTP cache (RFC 9111) in front of any
 * route's handler.
 *
 *   modules:
 *     - load: cache
 *       stores:
 *         - { name: edge, memory: 256MiB }
 *   routes:
 *     - { match: "/app/...", handler: app, cache: edge }  (a prefix)
 *     - { match: "PURGE /app/...", handler: cache-purge, guard: lan }
 *
 * Each store is a cache routes name (corCacheAdd); one response filter
 * sees the answers of every cached route (corCacheFill.c); cache-purge
 * takes a URL, or a prefix, out of every store; /metrics counts each
 * store's hits, misses, stale, revalidated, collapsed, bytes and
 * evictions. docs/cache.md is the design.
 */
#include "corCacheInt.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CacheStore* cacheStores;
unsigned cacheStoreCount;

static int
storeRead(CorModule* m, const CorConf* entry, void* record, unsigned index)
{
    static const char* const keys[] = {
        "name", "memory", "path", "size", "lock_timeout", "stream_waiters", NULL
    };
    CacheStore* s = record;
    CorConfErrors* e = corModuleErrors(m);
    const char* name = corConfString(entry, "name", NULL, e);
    uint64_t memory = corConfSize(entry, "memory", 64 * 1024 * 1024,
                                  CACHE_SHARDS * 4096, (uint64_t)1 << 40, e);
    uint64_t lockTimeoutMs = corConfDurationMs(entry, "lock_timeout", 5000, 1,
                                               3600 * 1000, e);
    /* On by default: the fetch goes on when its client leaves
     * (corResponseStreamKeep), so a waiter no longer shares that
     * client's fate; off sends each waiter the stored whole. */
    bool streamWaiters = corConfBool(entry, "stream_waiters", true, e);
    const char* path = corConfString(entry, "path", NULL, e);
    uint64_t size = corConfSize(entry, "size", (uint64_t)1 << 30,
                                CACHE_SHARDS * 4096, (uint64_t)1 << 50, e);
    char where[32];

    snprintf(where, sizeof(where), "stores[%u]", index);
    corConfUnknownKeys(entry, where, keys, e);
    if (name == NULL || name[0] == '\0'
        || name[strcspn(name, "\";\\\r\n ")] != '\0') {
        corModuleError(m, entry,
                       "%s: a name (what a route's cache names, no "
                       "space, quote, semicolon or backslash) is needed",
                       where);
        return -1;
    }
    if (path == NULL && corConfGet(entry, "size") != NULL) {
        corModuleError(m, corConfGet(entry, "size"),
                       "%s: size bounds the disk store: it needs a path "
                       "(the folder its files are kept in)",
                       where);
        return -1;
    }
    if (cacheStoreInit(s, name, (size_t)memory) != 0) {
        corModuleError(m, entry, "%s: out of memory", where);
        return -1;
    }
    if (path != NULL && cacheDiskOpen(s, path, size) != 0) {
        corModuleError(m, corConfGet(entry, "path"), "%s: path %s: %s", where,
                       path, strerror(errno));
        return -1;
    }
    s->lockTimeoutMs = lockTimeoutMs;
    s->streamWaiters = streamWaiters;
    return corCacheAdd(m, &(CorCache){ .name = s->name,
                                       .lookup = cacheLookup,
                                       .release = cacheRelease,
                                       .arg = s });
}

static void
storeFree(void* record)
{
    cacheDiskClose(record); /* its writers first: they use the shards */
    cacheStoreFree(record);
}

/* What /metrics says of each store, one family a counter of it. */
static const struct {
    const char* name;
    const char* type;
    const char* help;
    size_t offset; /* in CacheCounters */
    bool isSigned; /* an atomic_llong (a gauge) */
} families[] = {
    { "cor_cache_hits_total", "counter", "Answers from the store.",
      offsetof(CacheCounters, hits), false },
    { "cor_cache_misses_total", "counter",
      "Lookups that found nothing and ran the handler.",
      offsetof(CacheCounters, misses), false },
    { "cor_cache_stale_total", "counter",
      "Lookups that found a stale answer: revalidated or fetched again, "
      "or answered while it is refreshed (stale-while-revalidate).",
      offsetof(CacheCounters, stale), false },
    { "cor_cache_revalidated_total", "counter",
      "Stale answers a 304 refreshed.", offsetof(CacheCounters, revalidated),
      false },
    { "cor_cache_collapsed_total", "counter",
      "Misses that waited for another's fetch of their key.",
      offsetof(CacheCounters, collapsed), false },
    { "cor_cache_stored_total", "counter", "Answers put in the store.",
      offsetof(CacheCounters, stored), false },
    { "cor_cache_evictions_total", "counter",
      "Entries the memory bound pushed out.",
      offsetof(CacheCounters, evictions), false },
    { "cor_cache_memory_bytes", "gauge", "Bytes of the entries in memory.",
      offsetof(CacheCounters, bytes), true },
    { "cor_cache_entries", "gauge", "Entries in memory.",
      offsetof(CacheCounters, entries), true },
    { "cor_cache_disk_bytes", "gauge",
      "Bytes of the entry files on disk (a disk store's).",
      offsetof(CacheCounters, diskBytes), true },
    { "cor_cache_disk_entries", "gauge", "Entry files on disk.",
      offsetof(CacheCounters, diskEntries), true },
    { "cor_cache_disk_evictions_total", "counter",
      "Entry files the size bound unlinked.",
      offsetof(CacheCounters, diskEvictions), false },
    { "cor_cache_disk_errors_total", "counter",
      "Entry files not written (the disk full, the folder gone) or found "
      "missing, cut or corrupt (each a miss).",
      offsetof(CacheCounters, diskErrors), false },
};

static void
cacheMetrics(CorMetricsOut* out, void* arg)
{
    (void)arg;
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        corMetricsPrintf(out, "# HELP %s %s\n# TYPE %s %s\n", families[f].name,
                         families[f].help, families[f].name, families[f].type);
        for (unsigned i = 0; i < cacheStoreCount; i++) {
            const char* at = (const char*)&cacheStores[i].counters
                             + families[f].offset;
            long long value = families[f].isSigned ? (long long)atomic_load(
                                  (const atomic_llong*)at)
                                                   : (long long)atomic_load((
                                                       const atomic_ullong*)at);

            corMetricsPrintf(out, "%s{cache=\"%s\"} %lld\n", families[f].name,
                             cacheStores[i].name, value);
        }
    }
}

static int
cacheInit(CorModule* m, const CorConf* conf)
{
    cacheStores = corModuleRecordsRead(m, conf, "stores",
                                       "{ name, memory, path, size }",
                                       sizeof(CacheStore), storeRead, storeFree,
                                       &cacheStoreCount);
    if (cacheStores == NULL) {
        return -1;
    }
    if (corFilterAdd(m, &cacheFilter) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "cache-purge",
                                           .serve = cachePurgeServe,
                                           /* a prefix reads the head of
                                              each file on disk */
                                           .run = COR_RUN_WORKER })
               != 0) {
        return -1;
    }
    return corMetricsSourceAdd(m, cacheMetrics, NULL);
}

/* The disk stores' writers, and their scan, once the generation serves
 * (not at `cor -t`'s init). */
static int
cacheLoopInit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    (void)loop;
    for (unsigned i = 0; index == 0 && i < cacheStoreCount; i++) {
        if (cacheDiskStart(&cacheStores[i]) != 0) {
            return -1;
        }
    }
    return 0;
}

COR_MODULE(cache, .init = cacheInit, .loopInit = cacheLoopInit);
