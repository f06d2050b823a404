/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache-purge: a handler that takes its request's URL (host, path and
 * query, as the lookup keys it) out of every store; a path that ends in
 * '*' takes every URL of that host that starts with what is before it.
 * Route it with a guard: `{ match: "PURGE /app/...", handler: cache-purge,
 * guard: lan }`. 200 with how many entries went, 404 when none was
 * there (as the purge of nginx's ngx_cache_purge and Varnish's usual VCL
 * answer).
 */
#include "corCacheInt.h"

void
cachePurgeServe(CorRequest* r)
{
    char* key;
    size_t len;
    unsigned gone = 0;
    bool prefix;

    if (cacheKeyOf(r, &key, &len) != 0) {
        corRespondStatic(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    prefix = r->query == NULL && len > 0 && key[len - 1] == '*';
    for (unsigned i = 0; i < cacheStoreCount; i++) {
        gone += prefix ? cacheStoreRemovePrefix(&cacheStores[i], key, len - 1)
                       : cacheStoreRemove(&cacheStores[i], key, len);
    }
    if (gone == 0) {
        corRespondStatic(r, 404, "text/plain", "not in the cache\n", 17);
        return;
    }
    corRespondf(r, 200, "text/plain", "purged %u\n", gone);
}
