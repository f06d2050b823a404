/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The route table's index: which routes may take a request, found in one
 * hash probe per key instead of a walk over every route. Built once per
 * generation, read by every loop without a lock.
 *
 * A table holds the routes of one host key (an exact name, a "*.suffix",
 * or "any host"): its exact paths in a hash (a path to the ids of its
 * routes, ascending), its prefixes (and the literal starts of its
 * regexes) in a trie of bytes, each node with the ids of the routes
 * whose prefix ends there. A lookup walks the path down the trie once:
 * the routes that may take it are the lists it passes. The index maps
 * host names and wildcard suffixes to their tables.
 */
#ifndef COR_ROUTE_INDEX_H
#define COR_ROUTE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Ids of routes, ascending (their order in the file). */
typedef struct {
    unsigned* ids;
    unsigned count;
    unsigned cap;
} CorRouteIds;

/* A string-keyed open-addressing hash to a value; keys are not copied. */
typedef struct {
    struct CorRouteSlot* slots;
    unsigned mask; /* slots - 1; 0: empty */
    unsigned used;
} CorRouteMap;

/* A node of the prefix trie: the byte that leads to it from its parent,
 * its first child and its next sibling (0: none; node 0 is the root,
 * the empty prefix), and the routes whose prefix ends here. */
typedef struct {
    unsigned char byte;
    unsigned child;
    unsigned sibling;
    CorRouteIds ids;
} CorRouteNode;

typedef struct {
    CorRouteMap exact; /* path -> index into lists */
    CorRouteIds* lists;
    unsigned listCount;
    CorRouteNode* nodes; /* the prefix trie; nodes[0] the root */
    unsigned nodeCount;
} CorRouteTable;

typedef struct {
    CorRouteMap hosts;     /* name -> index into tables */
    CorRouteMap wildcards; /* suffix ("example.org") -> tables */
    CorRouteTable* tables; /* [0]: routes for any host */
    unsigned tableCount;
} CorRouteIndex;

int corRouteIdsAdd(CorRouteIds* ids, unsigned id);

/* The value of key[0..len) in m, or -1. */
long corRouteMapGet(const CorRouteMap* m, const char* key, size_t len);

/* The table of a host key ("" for any host, "*.suffix" for a wildcard),
 * made on first use; NULL when out of memory. */
CorRouteTable* corRouteIndexTable(CorRouteIndex* x, const char* host);

/* Add route id, matching path (exact) into t; or, with exact false, a
 * prefix route (or a regex whose literal start path is) to its trie. -1
 * when out of memory. */
int corRouteTableAdd(CorRouteTable* t, const char* path, bool exact,
                     unsigned id);

/* The child of node at through byte, or 0. */
static inline unsigned
corRouteNodeChild(const CorRouteTable* t, unsigned at, unsigned char byte)
{
    for (unsigned c = t->nodes[at].child; c != 0; c = t->nodes[c].sibling) {
        if (t->nodes[c].byte == byte) {
            return c;
        }
    }
    return 0;
}

void corRouteIndexFree(CorRouteIndex* x);

#endif
