/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How a group chooses a request's server: round robin (the default),
 * least_conn (the fewest requests in flight, counted across every loop
 * and worker), or hash (a consistent hash of the client's address, the
 * path, or a request field).
 *
 * The hash is a ring of virtual nodes (160 a server, as ketama and
 * nginx's hash ... consistent): a key goes to the first point at or past
 * its hash, and when that server is down (a failed connect, a failed
 * health check) to the next point of another server. The ring is built
 * once a generation and only read after, so the request path takes no
 * lock; a server that goes down moves only its own keys (each to the
 * server after it on the ring, spread over the others by the virtual
 * nodes), and they come back when it does. Jump hash was rejected: it
 * can only drop the last bucket, so skipping a server in the middle
 * would remap the others' keys or need a second hash. Maglev spreads a
 * little more evenly but, to skip a server, needs its table rebuilt on
 * every up or down (a lookup table per loop, or a lock), and even then
 * moves some keys of servers that did not change.
 */
#include "corForwardInt.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>

/* Virtual nodes a server has on the ring. */
#define FORWARD_RING_POINTS 160

/* ---- Hashing ------------------------------------------------------------- */

/* FNV-1a over the bytes, then murmur3's 64-bit finalizer: FNV alone
 * leaves near keys ("a#1", "a#2") near on the ring. */
static uint64_t
hashBytes(const void* data, size_t len)
{
    const unsigned char* p = data;
    uint64_t h = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static int
pointCompare(const void* a, const void* b)
{
    const ForwardRingPoint* x = a;
    const ForwardRingPoint* y = b;

    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* The ring of g: each server's points at the hashes of "URL#i". */
static int
ringBuild(ForwardGroup* g)
{
    g->ringCount = g->serverCount * FORWARD_RING_POINTS;
    g->ring = calloc(g->ringCount, sizeof(ForwardRingPoint));
    if (g->ring == NULL) {
        return -1;
    }
    for (unsigned s = 0; s < g->serverCount; s++) {
        for (unsigned i = 0; i < FORWARD_RING_POINTS; i++) {
            ForwardRingPoint* p = &g->ring[s * FORWARD_RING_POINTS + i];
            char name[512];
            int n = snprintf(name, sizeof(name), "%s#%u", g->servers[s].url, i);

            p->hash = hashBytes(name, (size_t)n);
            p->server = s;
        }
    }
    qsort(g->ring, g->ringCount, sizeof(ForwardRingPoint), pointCompare);
    return 0;
}

/* The key of r that g hashes, or NULL when r has none (no such field):
 * such a request goes round robin rather than all to one server. */
static const char*
hashKeyOf(const ForwardGroup* g, const CorRequest* r, size_t* lenP)
{
    const CorHeader* h;

    switch (g->hashKey) {
    case FORWARD_HASH_IP:
        *lenP = r->remote != NULL ? strlen(r->remote) : 0;
        return r->remote;
    case FORWARD_HASH_PATH:
        /* The normal form: "//a" and "/a" are one page, on one server. */
        *lenP = r->pathLen;
        return r->path;
    case FORWARD_HASH_HEADER:
        h = corRequestHeader(r, g->hashHeader);
        if (h == NULL) {
            return NULL;
        }
        *lenP = h->valueLen;
        return h->value;
    }
    return NULL;
}

/* ---- Choosing ------------------------------------------------------------ */

bool
corForwardServerUsable(ForwardServer* s, uint64_t now)
{
    return !atomic_load(&s->unhealthy) && atomic_load(&s->downUntil) <= now;
}

/* The choice among the untried servers in the order order[0..n): the
 * first that is usable (healthy, not resting), or with least_conn the
 * usable one with the fewest in flight (the first of them in a tie); the
 * first untried one when none is usable. -1 when all were tried. */
static int
choose(ForwardGroup* g, const unsigned* order, unsigned n, const bool* tried)
{
    uint64_t now = corEvClockMs();
    int fallback = -1;
    int best = -1;
    unsigned bestLoad = 0;

    for (unsigned i = 0; i < n; i++) {
        unsigned k = order[i];
        unsigned load;

        if (tried[k]) {
            continue;
        }
        if (fallback < 0) {
            fallback = (int)k;
        }
        if (!corForwardServerUsable(&g->servers[k], now)) {
            continue;
        }
        if (g->balance != FORWARD_BALANCE_LEAST_CONN) {
            return (int)k;
        }
        load = atomic_load(&g->servers[k].inFlight);
        if (best < 0 || load < bestLoad) {
            best = (int)k;
            bestLoad = load;
        }
    }
    return best >= 0 ? best : fallback;
}

/* The servers in the ring's order from key's point: each once, at its
 * first point past the key's hash. Returns how many went to order. */
static unsigned
ringOrder(const ForwardGroup* g, const char* key, size_t len, unsigned* order,
          bool* seen)
{
    uint64_t h = hashBytes(key, len);
    unsigned lo = 0;
    unsigned hi = g->ringCount;
    unsigned n = 0;

    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;

        if (g->ring[mid].hash < h) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    memset(seen, 0, g->serverCount * sizeof(bool));
    for (unsigned i = 0; i < g->ringCount && n < g->serverCount; i++) {
        unsigned s = g->ring[(lo + i) % g->ringCount].server;

        if (!seen[s]) {
            seen[s] = true;
            order[n++] = s;
        }
    }
    return n;
}

ForwardServer*
corForwardPick(ForwardGroup* g, const CorRequest* r, bool* tried)
{
    unsigned* order = corRequestAlloc((CorRequest*)r,
                                      g->serverCount
                                          * (sizeof(unsigned) + sizeof(bool)));
    const char* key = NULL;
    size_t len = 0;
    unsigned n = g->serverCount;
    int k;

    if (order == NULL) {
        return NULL;
    }
    if (g->balance == FORWARD_BALANCE_HASH) {
        key = hashKeyOf(g, r, &len);
    }
    if (key != NULL) {
        n = ringOrder(g, key, len, order, (bool*)(order + g->serverCount));
    } else {
        unsigned start = atomic_fetch_add(&g->next, 1);

        for (unsigned i = 0; i < n; i++) {
            order[i] = (start + i) % n;
        }
    }
    k = choose(g, order, n, tried);
    if (k < 0) {
        return NULL;
    }
    tried[k] = true;
    atomic_fetch_add(&g->servers[k].inFlight, 1);
    return &g->servers[k];
}

void
corForwardServerDone(ForwardServer* s)
{
    if (s != NULL) {
        atomic_fetch_sub(&s->inFlight, 1);
    }
}

/* ---- Configuration ------------------------------------------------------- */

/* hash: ip | path | "header:NAME". */
static int
hashRead(CorModule* m, const CorConf* entry, ForwardGroup* g)
{
    const char* key = corConfString(entry, "hash", "ip", corModuleErrors(m));

    if (strcmp(key, "ip") == 0) {
        g->hashKey = FORWARD_HASH_IP;
    } else if (strcmp(key, "path") == 0) {
        g->hashKey = FORWARD_HASH_PATH;
    } else if (strncasecmp(key, "header:", 7) == 0 && key[7] != '\0'
               && strpbrk(key + 7, " \t\r\n:") == NULL) {
        g->hashKey = FORWARD_HASH_HEADER;
        g->hashHeader = strdup(key + 7);
        return g->hashHeader != NULL ? 0 : -1;
    } else {
        corModuleError(m, corConfGet(entry, "hash"),
                       "hash: expected ip, "
                       "path or \"header:NAME\", got '%s'",
                       key);
        return -1;
    }
    return 0;
}

int
corForwardBalanceRead(CorModule* m, const CorConf* entry, ForwardGroup* g)
{
    static const char* const names[] = { "round_robin", "least_conn", "hash" };
    const char* balance = corConfString(entry, "balance", "round_robin",
                                        corModuleErrors(m));
    unsigned i = 0;

    while (i < 3 && strcmp(balance, names[i]) != 0) {
        i++;
    }
    if (i == 3) {
        corModuleError(m, corConfGet(entry, "balance"),
                       "balance: expected "
                       "round_robin, least_conn or hash, got '%s'",
                       balance);
        return -1;
    }
    g->balance = (ForwardBalance)i;
    if (g->balance != FORWARD_BALANCE_HASH) {
        if (corConfGet(entry, "hash") != NULL) {
            corModuleError(m, corConfGet(entry, "hash"),
                           "hash: only with "
                           "balance: hash");
            return -1;
        }
        return 0;
    }
    if (hashRead(m, entry, g) < 0) {
        return -1;
    }
    if (ringBuild(g) < 0) {
        corModuleError(m, entry, "no memory");
        return -1;
    }
    return 0;
}
