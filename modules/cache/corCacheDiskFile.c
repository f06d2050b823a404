/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk store's entry file read (corCacheDiskFile.h says its layout):
 * every length is checked against what was read before it is followed,
 * so that a file cut short, flipped or written by something else is
 * refused, never read past. The fuzzer (fuzz/corCacheDiskFuzz.c) runs
 * this very code.
 */
#include "corCacheDiskFile.h"

#include <string.h>

static uint32_t crcTable[256];

static void
crcTableMake(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;

        for (int k = 0; k < 8; k++) {
            c = (c & 1) != 0 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        }
        crcTable[i] = c;
    }
}

static uint32_t
crcBytes(uint32_t crc, const unsigned char* p, size_t len)
{
    /* Made by the first call; a second thread making it at once writes
     * the same values. */
    if (crcTable[1] == 0) {
        crcTableMake();
    }
    for (size_t i = 0; i < len; i++) {
        crc = crcTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    }
    return crc;
}

#if defined(__x86_64__)
/* SSE 4.2's crc32 instruction is CRC-32C: eight bytes a step, some
 * twenty times the table's speed, where the CPU has it (a promoted body
 * of 256 KiB is checked on the loop: 36 us, not 670). */
__attribute__((target("sse4.2"))) static uint32_t
crcWords(uint32_t crc, const unsigned char* p, size_t len)
{
    uint64_t c = crc;

    for (; len >= 8; p += 8, len -= 8) {
        uint64_t word;

        memcpy(&word, p, sizeof(word));
        c = __builtin_ia32_crc32di(c, word);
    }
    return crcBytes((uint32_t)c, p, len);
}
#endif

uint32_t
cacheCrc(uint32_t crc, const void* data, size_t len)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) {
        return ~crcWords(~crc, data, len);
    }
#endif
    return ~crcBytes(~crc, data, len);
}

uint64_t
cacheHash(const char* key, size_t len)
{
    /* FNV-1a, then a mix: the low bits pick the bucket, the high the
     * shard. */
    uint64_t h = 0xcbf29ce484222325u;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)key[i]) * 0x100000001b3u;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    return h;
}

/* The string at *at, NUL-terminated before end: its start, *at past its
 * NUL; NULL when no NUL is there. */
static const char*
stringTake(const char** at, const char* end)
{
    const char* s = *at;
    const char* nul = s < end ? memchr(s, '\0', (size_t)(end - s)) : NULL;

    if (nul == NULL) {
        return NULL;
    }
    *at = nul + 1;
    return s;
}

/* count "name\0value\0" pairs from *at, each inside end. */
static int
pairsTake(const char** at, const char* end, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        if (stringTake(at, end) == NULL || stringTake(at, end) == NULL) {
            return -1;
        }
    }
    return 0;
}

static int
headRead(const char* head, CacheDiskHead* out)
{
    const CacheDiskHeader* h = &out->h;
    const char* end = head + h->headLen;
    const char* at = head;
    const char* varyEnd;

    /* The key: keyLen bytes, no NUL among them, then one. */
    if (h->keyLen >= h->headLen || memchr(head, '\0', h->keyLen) != NULL
        || head[h->keyLen] != '\0'
        || cacheHash(head, h->keyLen) != h->keyHash) {
        return -1;
    }
    out->key = head;
    at = head + h->keyLen + 1;
    if (h->varyLen > (size_t)(end - at)) {
        return -1;
    }
    out->vary = at;
    varyEnd = at + h->varyLen;
    if (pairsTake(&at, varyEnd, h->varyCount) != 0 || at != varyEnd) {
        return -1;
    }
    out->fields = at;
    if (h->fieldCount > CACHE_DISK_FIELDS_MOST
        || pairsTake(&at, end, h->fieldCount) != 0) {
        return -1;
    }
    out->type = NULL;
    if (h->typeLen != CACHE_DISK_NO_TYPE) {
        if (h->typeLen >= (size_t)(end - at) || at[h->typeLen] != '\0'
            || memchr(at, '\0', h->typeLen) != NULL) {
            return -1;
        }
        out->type = at;
        at += h->typeLen + 1;
    }
    return at == end ? 0 : -1;
}

long
cacheDiskHeadParse(const void* data, size_t len, CacheDiskHead* out)
{
    CacheDiskHeader* h = &out->h;
    CacheDiskHeader zeroed;
    uint32_t crc;

    if (len < sizeof(*h)) {
        return (long)sizeof(*h);
    }
    memcpy(h, data, sizeof(*h));
    if (memcmp(h->magic, CACHE_DISK_MAGIC, sizeof(h->magic)) != 0
        || h->version != CACHE_DISK_VERSION || h->headLen == 0
        || h->headLen > CACHE_DISK_HEAD_MOST || h->status < 100
        || h->status > 999 || h->bodyLen > INT64_MAX) {
        return -1;
    }
    if (len < sizeof(*h) + h->headLen) {
        return (long)(sizeof(*h) + h->headLen);
    }
    zeroed = *h;
    zeroed.headCrc = 0;
    crc = cacheCrc(0, &zeroed, sizeof(zeroed));
    crc = cacheCrc(crc, (const char*)data + sizeof(*h), h->headLen);
    if (crc != h->headCrc) {
        return -1;
    }
    return headRead((const char*)data + sizeof(*h), out);
}
