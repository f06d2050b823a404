/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/limit: request rates by key, as guards.
 *
 *     modules:
 *       - load: limit
 *         guards:
 *           - { name: perip, rate: 10/s, burst: 20, key: ip }
 *           - { name: perkey, rate: 600/m, burst: 10, key: "header:X-Api-Key",
 *               max_keys: 100000 }
 *     routes:
 *       - { match: "/api/...", handler: app, guard: [ perip ] }
 *
 * Each key has a bucket of `burst` tokens refilled at `rate`; a request
 * takes one, or is answered 429 with Retry-After (the seconds until a
 * token). The buckets are shared by every loop and worker (a sharded
 * table, corLimitTable.c) and bounded by max_keys. A request without the
 * key's header is not counted, as nginx leaves an empty key alone.
 * Counted in /metrics per guard.
 *
 * With `store: "redis://host:port"` (and the redis module loaded before
 * limit) a guard's buckets are kept in Redis instead, so that instances
 * share them (corLimitStore.c); `on_store_error: allow | deny` (default
 * allow) decides while the store fails.
 */
#include "corLimitInt.h"

#include <cor.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    char* name;
    char* header; /* key: header:NAME; NULL: the address */
    LimitRate rate;
    LimitTable* table;
    LimitStore* store; /* NULL: the buckets are the table's */
    LimitCounts counts;
} Guard;

/* The guards; the core's (corModuleRecordsRead), from init to exit. */
static Guard* guards;
static unsigned guardCount;

/* The request's key into *keyP; false when it has none. An IPv4 client
 * of a dual-stack listener (::ffff:a.b.c.d) is a.b.c.d, one key
 * whichever socket it came through. */
static bool
keyOf(const Guard* g, const CorRequest* r, const char** keyP, size_t* lenP)
{
    const CorHeader* h;

    if (g->header != NULL) {
        h = corRequestHeader(r, g->header);
        if (h == NULL || h->valueLen == 0) {
            return false;
        }
        *keyP = h->value;
        *lenP = h->valueLen;
        return true;
    }
    if (r->remote == NULL) {
        return false;
    }
    *keyP = r->remote;
    if (strncasecmp(*keyP, "::ffff:", 7) == 0 && strchr(*keyP, '.') != NULL) {
        *keyP += 7;
    }
    *lenP = strlen(*keyP);
    return true;
}

int
corLimitVerdict(CorRequest* r, LimitCounts* counts, bool passed,
                uint64_t waitNs)
{
    char seconds[16];

    if (passed) {
        atomic_fetch_add_explicit(&counts->passed, 1, memory_order_relaxed);
        return COR_GUARD_PASS;
    }
    atomic_fetch_add_explicit(&counts->limited, 1, memory_order_relaxed);
    snprintf(seconds, sizeof(seconds), "%u", corLimitRetrySeconds(waitNs));
    corResponseHeader(r, "Retry-After", seconds);
    return 429;
}

static int
limitCheck(CorRequest* r, void* arg, CorGuardWait* wait)
{
    Guard* g = arg;
    const char* key;
    size_t len;
    uint64_t waitNs = 0;
    bool passed;

    if (!keyOf(g, r, &key, &len)) {
        return COR_GUARD_PASS;
    }
    if (g->store != NULL) {
        return corLimitStoreTake(g->store, r, key, len, wait);
    }
    /* Taken first: waitNs is its output, read after. */
    passed = corLimitTableTake(g->table, key, len, corEvClockNs(), &g->rate,
                               &waitNs);
    return corLimitVerdict(r, &g->counts, passed, waitNs);
}

static void
limitMetrics(CorMetricsOut* out, void* arg)
{
    (void)arg;
    corMetricsPrintf(out, "# HELP cor_limit_requests_total Requests a limit "
                          "guard let pass or refused (429).\n"
                          "# TYPE cor_limit_requests_total counter\n");
    for (unsigned i = 0; i < guardCount; i++) {
        corMetricsPrintf(out,
                         "cor_limit_requests_total{guard=\"%s\","
                         "result=\"passed\"} %llu\n"
                         "cor_limit_requests_total{guard=\"%s\","
                         "result=\"limited\"} %llu\n",
                         guards[i].name,
                         (unsigned long long)atomic_load(
                             &guards[i].counts.passed),
                         guards[i].name,
                         (unsigned long long)atomic_load(
                             &guards[i].counts.limited));
    }
    corMetricsPrintf(out, "# HELP cor_limit_store_errors_total Requests whose "
                          "guard's store (Redis) failed: on_store_error "
                          "decided.\n"
                          "# TYPE cor_limit_store_errors_total counter\n");
    for (unsigned i = 0; i < guardCount; i++) {
        corMetricsPrintf(out,
                         "cor_limit_store_errors_total{guard=\"%s\"} %llu\n",
                         guards[i].name,
                         (unsigned long long)atomic_load(
                             &guards[i].counts.storeErrors));
    }
    corMetricsPrintf(out, "# HELP cor_limit_keys Keys a limit guard holds a "
                          "bucket for.\n# TYPE cor_limit_keys gauge\n");
    for (unsigned i = 0; i < guardCount; i++) {
        corMetricsPrintf(out, "cor_limit_keys{guard=\"%s\"} %u\n",
                         guards[i].name, corLimitTableKeys(guards[i].table));
    }
    corMetricsPrintf(out, "# HELP cor_limit_evictions_total Keys let go to "
                          "keep within max_keys.\n"
                          "# TYPE cor_limit_evictions_total counter\n");
    for (unsigned i = 0; i < guardCount; i++) {
        corMetricsPrintf(out,
                         "cor_limit_evictions_total{guard=\"%s\"} "
                         "%llu\n",
                         guards[i].name,
                         (unsigned long long)corLimitTableEvictions(
                             guards[i].table));
    }
}

/* key: ip or header:NAME. */
static int
keyRead(CorModule* m, const CorConf* entry, Guard* g)
{
    const char* key = corConfString(entry, "key", "ip", corModuleErrors(m));

    if (key == NULL) {
        return -1;
    }
    if (strcmp(key, "ip") == 0) {
        return 0;
    }
    if (strncmp(key, "header:", 7) == 0 && key[7] != '\0'
        && key[7 + strcspn(key + 7, " \t:\r\n")] == '\0') {
        g->header = strdup(key + 7);
        return g->header != NULL ? 0 : -1;
    }
    corModuleError(m, corConfGet(entry, "key"),
                   "key: expected ip or "
                   "header:NAME (such as header:X-Api-Key), got '%s'",
                   key);
    return -1;
}

/* store: a redis:// URL (or a server the redis module names), and
 * on_store_error: allow or deny. */
static int
storeRead(CorModule* m, const CorConf* entry, Guard* g, const char* where)
{
    CorConfErrors* e = corModuleErrors(m);
    const char* store = corConfString(entry, "store", NULL, e);
    const char* onError = corConfString(entry, "on_store_error", "allow", e);
    char why[256];
    bool deny = onError != NULL && strcmp(onError, "deny") == 0;
    int rc = 0;

    if (onError == NULL || (!deny && strcmp(onError, "allow") != 0)) {
        corModuleError(m, corConfGet(entry, "on_store_error"),
                       "%s: on_store_error: expected allow or deny, got '%s'",
                       where, onError != NULL ? onError : "");
        rc = -1;
    }
    if (store == NULL || g->name == NULL) {
        return rc;
    }
    g->store = corLimitStoreNew(store, g->name, &g->rate, &g->counts, deny, why,
                                sizeof(why));
    if (g->store == NULL) {
        corModuleError(m, corConfGet(entry, "store"), "%s: store: %s", where,
                       why);
        rc = -1;
    }
    return rc;
}

static int
guardRead(CorModule* m, const CorConf* entry, void* record, unsigned index)
{
    Guard* g = record;
    static const char* const keys[] = { "name",           "rate",
                                        "burst",          "key",
                                        "max_keys",       "store",
                                        "on_store_error", NULL };
    CorConfErrors* e = corModuleErrors(m);
    const char* name = corConfString(entry, "name", NULL, e);
    const char* rate = corConfString(entry, "rate", NULL, e);
    char where[32];
    int rc = 0;

    snprintf(where, sizeof(where), "guards[%u]", index);
    if (name == NULL || name[0] == '\0'
        || name[strcspn(name, "\"\\\r\n")] != '\0') {
        corModuleError(m, entry,
                       "%s: a name (what a route's guard names, "
                       "no quote or backslash) is needed",
                       where);
        rc = -1;
    } else if ((g->name = strdup(name)) == NULL) {
        rc = -1;
    }
    if (rate == NULL || corLimitRateParse(rate, &g->rate) != 0) {
        corModuleError(m, rate != NULL ? corConfGet(entry, "rate") : entry,
                       "%s: rate: expected N/s or N/m (N from 1 to 1000000), "
                       "such as 10/s, got '%s'",
                       where, rate ? rate : "none");
        rc = -1;
    }
    g->rate.burst = (unsigned)corConfInt(entry, "burst", 1, 1, 1000000, e);
    rc |= keyRead(m, entry, g);
    g->table = corLimitTableCreate(
        (unsigned)corConfInt(entry, "max_keys", 100000, 1, 100000000, e));
    if (g->table == NULL) {
        corModuleError(m, entry,
                       "%s: no memory, or no random bytes, for "
                       "its table",
                       where);
        rc = -1;
    }
    rc |= storeRead(m, entry, g, where);
    corConfUnknownKeys(entry, where, keys, e);
    return rc != 0 ? -1 : corGuardAdd(m, g->name, limitCheck, g);
}

static void
guardFree(void* record)
{
    Guard* g = record;

    free(g->name);
    free(g->header);
    corLimitTableFree(g->table);
    corLimitStoreFree(g->store);
}

static int
limitInit(CorModule* m, const CorConf* conf)
{
    guards = corModuleRecordsRead(m, conf, "guards",
                                  "{ name, rate, burst, key }", sizeof(Guard),
                                  guardRead, guardFree, &guardCount);
    return guards == NULL ? -1 : corMetricsSourceAdd(m, limitMetrics, NULL);
}

COR_MODULE(limit, .init = limitInit);
