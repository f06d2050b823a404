/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk store's entry file: what one stored answer is on disk, and the
 * reader that decides whether a file is one. On its own (libc alone) so
 * that the fuzzer reads files through the very code the server does.
 *
 *   header (CacheDiskHeader, 96 bytes): magic, version, the head's and
 *       the body's lengths, the key's hash, the answer's times, status
 *       and flags, the body's CRC-32C and the header's and head's
 *   head (headLen bytes): the key, NUL; the Vary block (varyCount
 *       "name\0value\0"); fieldCount "name\0value\0"; the type and a NUL
 *       when typeLen is not CACHE_DISK_NO_TYPE
 *   body (bodyLen bytes)
 *
 * A file is an entry only when its header and head check out (magic,
 * version, every length inside the file, each string where it is said
 * to end, the key's hash, the CRC) and its size is the three's sum: a
 * truncated or corrupt one is a miss, never an answer.
 */
#ifndef COR_CACHE_DISK_FILE_H
#define COR_CACHE_DISK_FILE_H

#include <stddef.h>
#include <stdint.h>

#define CACHE_DISK_MAGIC "CORCACHE"
#define CACHE_DISK_VERSION 1u
#define CACHE_DISK_HEAD_MOST (1u << 20)
#define CACHE_DISK_FIELDS_MOST 1000u
#define CACHE_DISK_NO_TYPE UINT32_MAX

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t headLen;
    uint64_t keyHash;
    uint64_t bodyLen;
    uint32_t bodyCrc;
    uint32_t headCrc; /* of this header with headCrc 0, then the head */
    int64_t responseTime;
    int64_t initialAge;
    int64_t lifetime;
    int32_t staleWhileRevalidate;
    int32_t staleIfError;
    uint16_t status;
    uint8_t flags;
    uint8_t varyCount;
    uint32_t keyLen;
    uint32_t varyLen;
    uint32_t fieldCount;
    uint32_t typeLen;
    uint32_t reserved;
} CacheDiskHeader;

_Static_assert(sizeof(CacheDiskHeader) == 96, "the entry file's header");

/* A file's header and head as read: pointers into the bytes read. */
typedef struct {
    CacheDiskHeader h;
    const char* key;
    const char* vary;
    const char* fields; /* fieldCount "name\0value\0" */
    const char* type;   /* or NULL */
} CacheDiskHead;

/* CRC-32C (Castagnoli) of len bytes, going on from crc (0 to start). */
uint32_t cacheCrc(uint32_t crc, const void* data, size_t len);
/* The key's hash: it picks a shard and a bucket, and names entry files. */
uint64_t cacheHash(const char* key, size_t len);

/* Read the first len bytes of a file into *out: 0 when they hold a valid
 * header and head; more than 0, the bytes it needs when len is short of
 * them (read that many and call again); -1 when they are no entry's. */
long cacheDiskHeadParse(const void* data, size_t len, CacheDiskHead* out);

#endif /* COR_CACHE_DISK_FILE_H */
