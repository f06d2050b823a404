/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Route caches: a module registers a cache by name (corCacheAdd, from
 * init); a route's `cache: NAME` runs its lookup on the loop after the
 * route's guards, before its handler. The lookup answers from its store,
 * lets the handler run, or keeps the request waiting (another request
 * fetches the same answer) until corCacheResume, with r's place in the
 * route kept in r's arena as a late guard's is. The core knows nothing of
 * what is stored: the module sees answers through a response filter.
 */
#include "corCoreInt.h"

#include <stdlib.h>
#include <string.h>

static CorCacheFront* caches;
static unsigned cacheCount;

struct CorCacheWait {
    CorRequest* r;
    CorRouteMatch match;
    const CorCacheNext* then;
};

int
corCacheAdd(CorModule* m, const CorCache* cache)
{
    CorCacheFront* grown;

    if (cache->name == NULL || cache->name[0] == '\0'
        || cache->lookup == NULL) {
        corModuleError(m, NULL, "a cache needs a name and a lookup");
        return -1;
    }
    if (corCacheFind(cache->name) != NULL) {
        corModuleError(m, NULL, "cache '%s' is already registered",
                       cache->name);
        return -1;
    }
    grown = realloc(caches, (cacheCount + 1) * sizeof(*caches));
    if (grown == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    caches = grown;
    caches[cacheCount] = (CorCacheFront){ .cache = *cache, .module = m };
    caches[cacheCount].cache.name = strdup(cache->name);
    if (caches[cacheCount].cache.name == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    cacheCount++;
    return 0;
}

const CorCacheFront*
corCacheFind(const char* name)
{
    for (unsigned i = 0; i < cacheCount; i++) {
        if (strcmp(caches[i].cache.name, name) == 0) {
            return &caches[i];
        }
    }
    return NULL;
}

const char**
corCacheNames(void)
{
    const char** names = malloc((cacheCount + 1) * sizeof(*names));

    for (unsigned i = 0; names != NULL && i < cacheCount; i++) {
        names[i] = caches[i].cache.name;
    }
    if (names != NULL) {
        names[cacheCount] = NULL;
    }
    return names;
}

void
corCacheLookup(CorRequest* r, const CorRouteMatch* match,
               const CorCacheNext* next)
{
    const CorCache* cache = &match->rules.cache->cache;
    CorCacheWait* w = corRequestAlloc(r, sizeof(*w));

    if (w == NULL) {
        corRespondSet(r, 500, "text/plain", "out of memory\n", 14);
        next->answered(r);
        return;
    }
    w->r = r;
    w->match = *match;
    w->then = next;
    r->cacheFront = match->rules.cache;
    corCacheResume(w, cache->lookup(r, cache->arg, w));
}

void
corCacheResume(CorCacheWait* w, int verdict)
{
    switch (verdict) {
    case COR_CACHE_LATER:
        return;
    case COR_CACHE_ANSWERED:
        w->then->answered(w->r);
        return;
    default:
        w->then->pass(w->r, &w->match);
    }
}

void
corCacheRelease(CorRequest* r)
{
    const CorCacheFront* front = r->cacheFront;

    if (front != NULL && r->cacheData != NULL && front->cache.release != NULL) {
        front->cache.release(r, front->cache.arg);
    }
    r->cacheData = NULL;
}
