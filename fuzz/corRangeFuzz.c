/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the Range parser (core/corRange.c). The first 8
 * bytes are the file's size, the rest the header's value. Beyond the
 * sanitizers, it aborts when a property breaks:
 *
 *   - a 206 has between 1 and COR_RANGES_MAX ranges, each non-empty
 *     and inside the file, and together no more bytes than the file;
 *   - a 416 or a whole answer gives no range;
 *   - the same value parsed again gives the same answer (no state).
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Icore
 *        core/corRange.c fuzz/corRangeFuzz.c
 */
#include "corRange.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CorRange ranges[COR_RANGES_MAX];
    CorRange again[COR_RANGES_MAX];
    unsigned count = 0;
    unsigned countAgain = 0;
    uint64_t fileSize = 0;
    uint64_t total = 0;
    CorRangeResult rc;

    if (size < sizeof(fileSize)) {
        return 0;
    }
    memcpy(&fileSize, data, sizeof(fileSize));
    fileSize >>= 8; /* sizes a file can have, and small ones */
    data += sizeof(fileSize);
    size -= sizeof(fileSize);
    rc = corRangeParse((const char*)data, size, fileSize, ranges, &count);
    if (rc == COR_RANGE_PARTIAL) {
        if (count == 0 || count > COR_RANGES_MAX) {
            abort();
        }
        for (unsigned i = 0; i < count; i++) {
            if (ranges[i].len == 0 || ranges[i].start >= fileSize
                || ranges[i].len > fileSize - ranges[i].start) {
                abort();
            }
            total += ranges[i].len;
        }
        if (total > fileSize) {
            abort();
        }
    }
    if (corRangeParse((const char*)data, size, fileSize, again, &countAgain)
            != rc
        || (rc == COR_RANGE_PARTIAL
            && (countAgain != count
                || memcmp(again, ranges, count * sizeof(*ranges)) != 0))) {
        abort();
    }
    return 0;
}
