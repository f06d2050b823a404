/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The route table's index (corRouteIndex.h): string hashes to the ids of
 * the routes that may take a path, and to the tables of the host keys.
 */
#include "corRouteIndex.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct CorRouteSlot {
    const char* key; /* NULL: free */
    size_t len;
    uint32_t hash;
    unsigned value;
};

int
corRouteIdsAdd(CorRouteIds* ids, unsigned id)
{
    if (ids->count == ids->cap) {
        unsigned cap = ids->cap ? 2 * ids->cap : 4;
        unsigned* grown = realloc(ids->ids, cap * sizeof(*grown));

        if (grown == NULL) {
            return -1;
        }
        ids->ids = grown;
        ids->cap = cap;
    }
    ids->ids[ids->count++] = id;
    return 0;
}

/* FNV-1a: the keys are the configuration's, not a client's, and short. */
static uint32_t
keyHash(const char* key, size_t len)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)key[i]) * 16777619u;
    }
    return h;
}

static struct CorRouteSlot*
slotFind(const CorRouteMap* m, const char* key, size_t len, uint32_t hash)
{
    for (unsigned i = hash & m->mask;; i = (i + 1) & m->mask) {
        struct CorRouteSlot* s = &m->slots[i];

        if (s->key == NULL
            || (s->hash == hash && s->len == len
                && memcmp(s->key, key, len) == 0)) {
            return s;
        }
    }
}

long
corRouteMapGet(const CorRouteMap* m, const char* key, size_t len)
{
    const struct CorRouteSlot* s;

    if (m->used == 0) {
        return -1;
    }
    s = slotFind(m, key, len, keyHash(key, len));
    return s->key != NULL ? (long)s->value : -1;
}

/* Room for one more key at most half full. */
static int
mapGrow(CorRouteMap* m)
{
    CorRouteMap grown;

    if (m->mask != 0 && 2 * (m->used + 1) <= m->mask + 1) {
        return 0;
    }
    grown.mask = m->mask ? 2 * m->mask + 1 : 15;
    grown.used = m->used;
    grown.slots = calloc(grown.mask + 1, sizeof(*grown.slots));
    if (grown.slots == NULL) {
        return -1;
    }
    for (unsigned i = 0; m->mask != 0 && i <= m->mask; i++) {
        if (m->slots[i].key != NULL) {
            *slotFind(&grown, m->slots[i].key, m->slots[i].len,
                      m->slots[i].hash) = m->slots[i];
        }
    }
    free(m->slots);
    *m = grown;
    return 0;
}

/* The value of key in m, set to value when it is new; -1 when out of
 * memory. */
static long
mapGetOrPut(CorRouteMap* m, const char* key, unsigned value)
{
    size_t len = strlen(key);
    uint32_t hash = keyHash(key, len);
    struct CorRouteSlot* s;

    if (mapGrow(m) != 0) {
        return -1;
    }
    s = slotFind(m, key, len, hash);
    if (s->key == NULL) {
        *s = (struct CorRouteSlot){ key, len, hash, value };
        m->used++;
    }
    return (long)s->value;
}

CorRouteTable*
corRouteIndexTable(CorRouteIndex* x, const char* host)
{
    bool wild = strncmp(host, "*.", 2) == 0;
    CorRouteMap* map = wild ? &x->wildcards : &x->hosts;
    long at;

    if (host[0] == '\0') {
        at = 0;
    } else {
        at = mapGetOrPut(map, host + 2 * wild, x->tableCount);
    }
    if (at < 0) {
        return NULL;
    }
    if ((unsigned)at == x->tableCount) {
        CorRouteTable* grown = realloc(x->tables,
                                       (x->tableCount + 1) * sizeof(*grown));

        if (grown == NULL) {
            return NULL;
        }
        x->tables = grown;
        x->tables[x->tableCount++] = (CorRouteTable){ 0 };
    }
    return &x->tables[at];
}

/* A new node under parent, reached through byte; 0 when out of memory
 * (0 is the root, never a child). */
static unsigned
nodeAdd(CorRouteTable* t, unsigned parent, unsigned char byte)
{
    CorRouteNode* grown = realloc(t->nodes,
                                  (t->nodeCount + 1) * sizeof(*grown));
    unsigned at = t->nodeCount;

    if (grown == NULL) {
        return 0;
    }
    t->nodes = grown;
    t->nodes[at] = (CorRouteNode){ .byte = byte,
                                   .sibling = t->nodes[parent].child };
    t->nodes[parent].child = at;
    t->nodeCount++;
    return at;
}

/* The trie's node for prefix, made as needed; 0 with nodeCount 0 when out
 * of memory. */
static int
prefixAdd(CorRouteTable* t, const char* prefix, unsigned id)
{
    unsigned at = 0;

    if (t->nodeCount == 0) {
        t->nodes = calloc(1, sizeof(*t->nodes));
        if (t->nodes == NULL) {
            return -1;
        }
        t->nodeCount = 1;
    }
    for (const char* p = prefix; *p != '\0'; p++) {
        unsigned next = corRouteNodeChild(t, at, (unsigned char)*p);

        if (next == 0 && (next = nodeAdd(t, at, (unsigned char)*p)) == 0) {
            return -1;
        }
        at = next;
    }
    return corRouteIdsAdd(&t->nodes[at].ids, id);
}

int
corRouteTableAdd(CorRouteTable* t, const char* path, bool exact, unsigned id)
{
    long at;

    if (!exact) {
        return prefixAdd(t, path, id);
    }
    at = mapGetOrPut(&t->exact, path, t->listCount);
    if (at < 0) {
        return -1;
    }
    if ((unsigned)at == t->listCount) {
        CorRouteIds* grown = realloc(t->lists,
                                     (t->listCount + 1) * sizeof(*grown));

        if (grown == NULL) {
            return -1;
        }
        t->lists = grown;
        t->lists[t->listCount++] = (CorRouteIds){ 0 };
    }
    return corRouteIdsAdd(&t->lists[at], id);
}

void
corRouteIndexFree(CorRouteIndex* x)
{
    for (unsigned i = 0; i < x->tableCount; i++) {
        CorRouteTable* t = &x->tables[i];

        for (unsigned k = 0; k < t->listCount; k++) {
            free(t->lists[k].ids);
        }
        free(t->lists);
        for (unsigned k = 0; k < t->nodeCount; k++) {
            free(t->nodes[k].ids.ids);
        }
        free(t->nodes);
        free(t->exact.slots);
    }
    free(x->tables);
    free(x->hosts.slots);
    free(x->wildcards.slots);
    *x = (CorRouteIndex){ 0 };
}
