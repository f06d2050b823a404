/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the cor:// codec share and nothing outside
 * modules/cor reads: one table (its entries in the order they came, and
 * a hash from an entry to its index), the splitting rule, the output
 * buffer's growth, and the why messages.
 */
#ifndef COR_COR_INT_H
#define COR_COR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corCorCodec.h"

/* One table: append-only, except that a failed frame truncates it back. */
typedef struct {
    char** items;               /* NUL-terminated copies, malloc'ed */
    uint32_t* lens;
    unsigned count;
    unsigned cap;               /* of items and lens */
    unsigned max;               /* COR_COR_NAMES_MAX or _NAMESPACES_MAX */
    uint32_t* slots;            /* index + 1 of an entry, 0 when empty */
    unsigned slotCount;         /* a power of two, or 0 */
    uint64_t seed;              /* of the hash */
} CorCorTable;

struct CorCorTables {
    CorCorTable namespaces;
    CorCorTable names;
};

/* The index of the entry s (len bytes), or -1 when absent. */
int corCorTableFind(const CorCorTable* tb, const char* s, size_t len);

/* Whether an entry of len bytes would be appended (the table has room,
 * the entry is not too long): both sides ask the same question. */
bool corCorTableTakes(const CorCorTable* tb, size_t len);

/* Append s when corCorTableTakes says so. Returns 0, or -ENOMEM. */
int corCorTableAppend(CorCorTable* tb, const char* s, size_t len);

/* Drop the entries from count on: a frame that failed is undone. */
void corCorTableTruncate(CorCorTable* tb, unsigned count);

/* The length of the namespace of the string s: 0 when it is not split
 * (neither "://" in it nor "urn:" at its start), else up to and with its
 * last '/', '#' or ':'. */
size_t corCorSplit(const char* s, size_t len);

/* Make room for n more bytes in b. Returns 0, or -ENOMEM. */
int corCorBufReserve(CorCorBuf* b, size_t n);

/* Whether the len bytes at s are UTF-8 (RFC 3629: shortest forms, no
 * surrogates, nothing past U+10FFFF). */
bool corCorUtf8(const uint8_t* s, size_t len);

/* Write a message into why (when not NULL), as snprintf. */
void corCorWhy(char* why, size_t whyLen, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Refuse input: the message into why, after "tree byte N: " when at >= 0
 * (where in the tree it went wrong). Returns -EPROTO. */
int corCorRefuse(char* why, size_t whyLen, long at, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* COR_COR_INT_H */
