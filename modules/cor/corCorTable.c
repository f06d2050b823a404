/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tables that follow the stream (docs/cor-protocol.md, "Tables"): per
 * direction one of namespaces and one of names, each an append-only list
 * (the index is what travels) with a hash beside it (an encoder looks a
 * name up on every node; a decoder looks it up too, to refuse a name sent
 * inline that was already in its table). Also the small helpers the
 * codec's files share: the splitting rule, buffer growth, UTF-8, why.
 */
#include "corCorInt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Eight bytes at a time (the tail as a word of its own, with the length
 * in it), each word multiplied in from a seed of the table's own, then
 * mixed so that the low bits (the slot) depend on every byte and on the
 * seed: the names come from the peer, which must not be able to pick
 * names that all fall in one slot and make every lookup walk the whole
 * table. An encoder hashes every name it sends, so a byte at a time
 * (FNV-1a, as it was) cost as much as the rest of a node. */
static uint64_t
hashOf(const CorCorTable* tb, const char* s, size_t len)
{
    const uint64_t k = 0x9e3779b97f4a7c15u;
    uint64_t h = tb->seed;
    uint64_t tail = (uint64_t)len << 56; /* tells 1 to 3 bytes apart */
    size_t i = 0;

    for (; len - i >= 8; i += 8) {
        h = (h ^ corCorWordAt(s + i)) * k;
        h ^= h >> 32;
    }
    h = (h ^ corCorTailAt(s + i, len - i, 0) ^ tail) * k;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9u;
    return h ^ h >> 32;
}

/* A seed no peer can guess; without the kernel's, one that at least
 * differs from table to table. */
static uint64_t
seedOf(const void* p)
{
    uint64_t seed;
    struct timespec ts;

    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == sizeof(seed)) {
        return seed;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)(uintptr_t)p ^ (uint64_t)ts.tv_nsec << 20
           ^ 0xcbf29ce484222325u;
}

static void
slotPut(CorCorTable* tb, unsigned index)
{
    const CorCorEntry* e = corCorTableAt(tb, index);
    unsigned mask = tb->slotCount - 1;
    unsigned i = (unsigned)hashOf(tb, e->s, e->len) & mask;

    while (tb->slots[i] != 0) {
        i = (i + 1) & mask;
    }
    tb->slots[i] = index + 1;
}

/* Rebuild the hash with room for want entries at most half full; with
 * want == count it also drops what a truncation left behind. */
static int
rehash(CorCorTable* tb, unsigned want)
{
    unsigned n = 16;
    uint32_t* slots;

    while (n < want * 2) {
        n *= 2;
    }
    slots = calloc(n, sizeof(*slots));
    if (slots == NULL) {
        return -ENOMEM;
    }
    free(tb->slots);
    tb->slots = slots;
    tb->slotCount = n;
    for (unsigned i = 0; i < tb->count; i++) {
        slotPut(tb, i);
    }
    return 0;
}

int
corCorTableFind(const CorCorTable* tb, const char* s, size_t len)
{
    unsigned mask;
    unsigned i;

    if (tb->slotCount == 0) {
        return -1;
    }
    mask = tb->slotCount - 1;
    for (i = (unsigned)hashOf(tb, s, len) & mask; tb->slots[i] != 0;
         i = (i + 1) & mask) {
        unsigned index = tb->slots[i] - 1;
        const CorCorEntry* e = corCorTableAt(tb, index);

        if (e->len == len && memcmp(e->s, s, len) == 0) {
            return (int)index;
        }
    }
    return -1;
}

bool
corCorTableTakes(const CorCorTable* tb, size_t len)
{
    return tb->count < tb->max && len <= COR_COR_ENTRY_MAX;
}

int
corCorTableAppend(CorCorTable* tb, const char* s, size_t len)
{
    CorCorEntry* e;
    char* copy;

    if (!corCorTableTakes(tb, len)) {
        return 0;
    }
    if (corBufReserve(&tb->entries, sizeof(*e)) != 0
        || ((tb->count + 1) * 2 > tb->slotCount
            && rehash(tb, tb->count + 1) != 0)) {
        return -ENOMEM;
    }
    copy = malloc(len + 1);
    if (copy == NULL) {
        return -ENOMEM;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    e = (CorCorEntry*)(void*)(tb->entries.data + tb->entries.len);
    e->s = copy;
    e->len = (uint32_t)len;
    e->token = corCorToken(copy, len);
    e->kind = corCorNameKind(copy, len);
    if ((e->kind & COR_COR_NAME_KNOWN) != 0) {
        tb->known[(e->kind & COR_COR_NAME_KNOWN) - 1] = tb->count + 1;
    }
    tb->entries.len += sizeof(*e);
    slotPut(tb, tb->count);
    tb->count++;
    return 0;
}

void
corCorTableTruncate(CorCorTable* tb, unsigned count)
{
    if (count >= tb->count) {
        return;
    }
    while (tb->count > count) {
        free(corCorTableAt(tb, --tb->count)->s);
    }
    for (unsigned i = 0; i < COR_COR_KNOWN_COUNT; i++) {
        if (tb->known[i] > count) {
            tb->known[i] = 0;
        }
    }
    tb->entries.len = tb->count * sizeof(CorCorEntry);
    /* Open addressing cannot simply forget an entry: rebuild, which only
     * a failed frame pays for. Without memory for it, clear the slots in
     * place and put the survivors back. */
    if (rehash(tb, tb->count) != 0) {
        memset(tb->slots, 0, tb->slotCount * sizeof(*tb->slots));
        for (unsigned i = 0; i < tb->count; i++) {
            slotPut(tb, i);
        }
    }
}

static void
tableFree(CorCorTable* tb)
{
    corCorTableTruncate(tb, 0);
    corBufFree(&tb->entries);
    free(tb->slots);
}

CorCorTables*
corCorTablesNew(void)
{
    CorCorTables* t = calloc(1, sizeof(*t));

    if (t == NULL) {
        return NULL;
    }
    t->namespaces.max = COR_COR_NAMESPACES_MAX;
    t->names.max = COR_COR_NAMES_MAX;
    t->namespaces.seed = seedOf(&t->namespaces);
    t->names.seed = seedOf(&t->names);
    return t;
}

void
corCorTablesFree(CorCorTables* t)
{
    if (t == NULL) {
        return;
    }
    tableFree(&t->namespaces);
    tableFree(&t->names);
    free(t);
}

unsigned
corCorTablesNamespaces(const CorCorTables* t)
{
    return t->namespaces.count;
}

unsigned
corCorTablesNames(const CorCorTables* t)
{
    return t->names.count;
}

size_t
corCorSplit(const char* s, size_t len)
{
    bool split = len >= 4 && memcmp(s, "urn:", 4) == 0;
    const char* colon = s;

    /* From colon to colon: most strings (header values, paths) have
     * none, and memchr finds that without a compare at every byte. */
    while (!split && len - (size_t)(colon - s) >= 3
           && (colon = memchr(colon, ':', len - (size_t)(colon - s) - 2))
                  != NULL) {
        split = colon[1] == '/' && colon[2] == '/';
        colon++;
    }
    if (!split) {
        return 0;
    }
    /* "urn:" and "://" both hold a ':', so a separator is found. */
    while (s[len - 1] != '/' && s[len - 1] != '#' && s[len - 1] != ':') {
        len--;
    }
    return len;
}

/* The length of the UTF-8 sequence that starts with lead, and the range
 * its second byte must be in (which excludes overlong forms, surrogates
 * and code points past U+10FFFF); 0 for a byte no sequence starts with. */
static unsigned
utf8Lead(uint8_t lead, uint8_t* lo, uint8_t* hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        return 2;
    }
    if (lead >= 0xE0 && lead <= 0xEF) {
        *lo = lead == 0xE0 ? 0xA0 : 0x80;
        *hi = lead == 0xED ? 0x9F : 0xBF;
        return 3;
    }
    if (lead >= 0xF0 && lead <= 0xF4) {
        *lo = lead == 0xF0 ? 0x90 : 0x80;
        *hi = lead == 0xF4 ? 0x8F : 0xBF;
        return 4;
    }
    return 0;
}

bool
corCorUtf8(const uint8_t* s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        uint8_t lo;
        uint8_t hi;
        unsigned n;

        if (s[i] < 0x80) {
            i++;
            /* ASCII, most strings' whole length, eight bytes at a time. */
            while (len - i >= 8
                   && (corCorWordAt(s + i) & 0x8080808080808080u) == 0) {
                i += 8;
            }
            continue;
        }
        n = utf8Lead(s[i], &lo, &hi);
        if (n == 0 || len - i < n || s[i + 1] < lo || s[i + 1] > hi) {
            return false;
        }
        for (unsigned k = 2; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return false;
            }
        }
        i += n;
    }
    return true;
}

bool
corCorPrintable(const char* s, size_t len)
{
    size_t i = 0;

    for (;; i += 8) {
        uint64_t w = len - i >= 8 ? corCorWordAt(s + i)
                                  : corCorTailAt(s + i, len - i, 'a');

        if ((w & 0x8080808080808080u) != 0 || corCorWordControl(w)) {
            return false;
        }
        if (len - i <= 8) {
            return true;
        }
    }
}

static void
whyPut(char* why, size_t whyLen, const char* prefix, const char* fmt,
       va_list ap)
{
    int n;

    if (why == NULL || whyLen == 0) {
        return;
    }
    n = snprintf(why, whyLen, "%s", prefix);
    if (n >= 0 && (size_t)n < whyLen) {
        vsnprintf(why + n, whyLen - (size_t)n, fmt, ap);
    }
}

void
corCorWhy(char* why, size_t whyLen, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    whyPut(why, whyLen, "", fmt, ap);
    va_end(ap);
}

int
corCorRefuse(char* why, size_t whyLen, long at, const char* fmt, ...)
{
    char prefix[40] = "";
    va_list ap;

    if (at >= 0) {
        snprintf(prefix, sizeof(prefix), "tree byte %ld: ", at);
    }
    va_start(ap, fmt);
    whyPut(why, whyLen, prefix, fmt, ap);
    va_end(ap);
    return -EPROTO;
}
