/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the cache's entry file reader
 * (modules/cache/corCacheDiskFile.c): the bytes are a file's first ones,
 * as the disk store reads them before it trusts a file. The first byte
 * picks how: even, as they are (the CRC stands in the way of almost
 * every change); odd, with the magic, the version and the head's CRC
 * made right first, so that the lengths and strings behind them are
 * what is fuzzed. Beyond the sanitizers, it aborts when a property
 * breaks:
 *
 *   - an entry's key, Vary block, fields and type are inside the bytes
 *     read, each string ends with a NUL where its length says, the Vary
 *     block holds varyCount pairs and nothing else, and the key's hash
 *     is the header's;
 *   - bytes short of an entry ask for more than they are, or are refused,
 *     never accepted; given what they asked for, the answer is the same
 *     as for the whole.
 *
 * Build: make build/fuzz/corCacheDiskFuzz (clang, ASan, UBSan).
 */
#include "corCacheDiskFile.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void
check(const char* data, size_t size, const CacheDiskHead* d)
{
    const char* head = data + sizeof(d->h);
    const char* end = head + d->h.headLen;
    const char* at;

    if (sizeof(d->h) + d->h.headLen > size || d->key != head
        || d->key[d->h.keyLen] != '\0' || strlen(d->key) != d->h.keyLen
        || cacheHash(d->key, d->h.keyLen) != d->h.keyHash
        || d->vary != d->key + d->h.keyLen + 1
        || d->vary + d->h.varyLen != d->fields) {
        abort();
    }
    at = d->vary;
    for (unsigned i = 0; i < 2u * d->h.varyCount; i++) {
        at += strlen(at) + 1;
    }
    if (at != d->fields) {
        abort();
    }
    for (unsigned i = 0; i < 2u * d->h.fieldCount; i++) {
        at += strlen(at) + 1;
        if (at > end) {
            abort();
        }
    }
    if (d->type != NULL
        && (d->type != at || strlen(d->type) != d->h.typeLen
            || d->type + d->h.typeLen + 1 != end)) {
        abort();
    }
    if (d->type == NULL && at != end) {
        abort();
    }
}

/* The magic, the version and the CRC made right for what data says of
 * the head's length (when it has that much). */
static void
mend(char* data, size_t size)
{
    CacheDiskHeader h;

    if (size < sizeof(h)) {
        return;
    }
    memcpy(&h, data, sizeof(h));
    memcpy(h.magic, CACHE_DISK_MAGIC, sizeof(h.magic));
    h.version = CACHE_DISK_VERSION;
    h.headLen %= (uint32_t)(size - sizeof(h) + 1);
    h.headCrc = 0;
    h.headCrc = cacheCrc(cacheCrc(0, &h, sizeof(h)), data + sizeof(h),
                         h.headLen);
    memcpy(data, &h, sizeof(h));
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CacheDiskHead d;
    CacheDiskHead again;
    char* copy;
    long rc;

    if (size < 1) {
        return 0;
    }
    copy = malloc(size);
    memcpy(copy, data + 1, size - 1);
    size--;
    if ((data[0] & 1) != 0) {
        mend(copy, size);
    }
    rc = cacheDiskHeadParse(copy, size, &d);
    if (rc == 0) {
        check(copy, size, &d);
        /* Just the header and head: the same entry. */
        if (cacheDiskHeadParse(copy, sizeof(d.h) + d.h.headLen, &again) != 0
            || again.key != d.key) {
            abort();
        }
    } else if (rc > 0) {
        if ((size_t)rc <= size) {
            abort(); /* it had what it asks for */
        }
    }
    /* A prefix is never an entry unless it holds the header and head. */
    for (size_t cut = 0; cut < size && cut < 200; cut += 13) {
        long part = cacheDiskHeadParse(copy, cut, &again);

        if (part == 0 && (rc != 0 || cut < sizeof(d.h) + d.h.headLen)) {
            abort();
        }
    }
    free(copy);
    return 0;
}
