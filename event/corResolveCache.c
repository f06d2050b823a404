/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resolver's cache: one per loop or thread, so it is never locked.
 * An entry is a name's answer (addresses or an error) until it expires,
 * or the query in flight for it, with the lookups that wait for it: that
 * is how concurrent lookups of one name share one query.
 *
 * A hash table with chains, of a fixed size: a bounded number of entries
 * (a server that resolves every name it is handed must not grow without
 * end). A full table first drops what has expired, then the answer that
 * would expire first among those it looks at; an entry in flight is never
 * dropped, since its query's callback holds it.
 */
#include "corEvInt.h"

#include <stdlib.h>
#include <string.h>

#define BUCKETS 4096u
#define ENTRIES_MAX 4096u

struct CorResolveCache {
    CorResolveEntry* buckets[BUCKETS];
    unsigned count;
};

CorResolveCache*
corResolveCacheCreate(void)
{
    return calloc(1, sizeof(CorResolveCache));
}

void
corResolveCacheDestroy(CorResolveCache* cache)
{
    if (cache == NULL) {
        return;
    }
    for (unsigned i = 0; i < BUCKETS; i++) {
        CorResolveEntry* entry = cache->buckets[i];

        while (entry != NULL) {
            CorResolveEntry* next = entry->next;

            free(entry);
            entry = next;
        }
    }
    free(cache);
}

/* FNV-1a of the name as it is kept: lower case. */
static uint32_t
hashName(const char* name)
{
    uint32_t h = 2166136261u;

    for (; *name != '\0'; name++) {
        h = (h ^ (unsigned char)*name) * 16777619u;
    }
    return h;
}

CorResolveEntry*
corResolveCacheFind(CorResolveCache* cache, const char* name)
{
    CorResolveEntry* entry = cache->buckets[hashName(name) % BUCKETS];

    while (entry != NULL && strcmp(entry->name, name) != 0) {
        entry = entry->next;
    }
    return entry;
}

static void
unlinkEntry(CorResolveCache* cache, CorResolveEntry* entry)
{
    CorResolveEntry** link = &cache->buckets[hashName(entry->name) % BUCKETS];

    while (*link != entry) {
        link = &(*link)->next;
    }
    *link = entry->next;
    cache->count--;
    free(entry);
}

/* Make room for one entry: whatever expired goes, and when nothing did,
 * the answer nearest its end. */
static void
makeRoom(CorResolveCache* cache, uint64_t now)
{
    CorResolveEntry* oldest = NULL;

    for (unsigned i = 0; i < BUCKETS; i++) {
        CorResolveEntry* entry = cache->buckets[i];

        while (entry != NULL) {
            CorResolveEntry* next = entry->next;

            if (!entry->pending && entry->expires <= now) {
                unlinkEntry(cache, entry);
            } else if (!entry->pending
                       && (oldest == NULL
                           || entry->expires < oldest->expires)) {
                oldest = entry;
            }
            entry = next;
        }
    }
    if (cache->count >= ENTRIES_MAX && oldest != NULL) {
        unlinkEntry(cache, oldest);
    }
}

CorResolveEntry*
corResolveCacheAdd(CorResolveCache* cache, const char* name, uint64_t now)
{
    size_t len = strlen(name);
    CorResolveEntry* entry;
    uint32_t bucket;

    if (cache->count >= ENTRIES_MAX) {
        makeRoom(cache, now);
        if (cache->count >= ENTRIES_MAX) {
            return NULL; /* every entry is a query in flight */
        }
    }
    entry = calloc(1, sizeof(*entry) + len + 1);
    if (entry == NULL) {
        return NULL;
    }
    memcpy(entry->name, name, len + 1);
    bucket = hashName(name) % BUCKETS;
    entry->next = cache->buckets[bucket];
    cache->buckets[bucket] = entry;
    cache->count++;
    return entry;
}
