/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the static module's Range parser. The first 8
 * bytes are the file's size, the rest the header's value. Beyond the
 * sanitizers, it aborts when a property breaks:
 *
 *   - a 206 has between 1 and STATIC_RANGES_MAX ranges, each non-empty
 *     and inside the file, and together no more bytes than the file;
 *   - a 416 or a whole answer gives no range;
 *   - the same value parsed again gives the same answer (no state).
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Imodules/static
 *        -Icore -Ievent -Ibuild modules/static/corStaticRange.c
 *        fuzz/corStaticRangeFuzz.c
 */
#include "corStaticInt.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    StaticRange ranges[STATIC_RANGES_MAX];
    StaticRange again[STATIC_RANGES_MAX];
    unsigned count = 0;
    unsigned countAgain = 0;
    uint64_t fileSize = 0;
    uint64_t total = 0;
    StaticRangeResult rc;

    if (size < sizeof(fileSize)) {
        return 0;
    }
    memcpy(&fileSize, data, sizeof(fileSize));
    fileSize >>= 8; /* sizes a file can have, and small ones */
    data += sizeof(fileSize);
    size -= sizeof(fileSize);
    rc = corStaticRangeParse((const char*)data, size, fileSize, ranges, &count);
    if (rc == STATIC_RANGE_PARTIAL) {
        if (count == 0 || count > STATIC_RANGES_MAX) {
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
    if (corStaticRangeParse((const char*)data, size, fileSize, again,
                            &countAgain)
            != rc
        || (rc == STATIC_RANGE_PARTIAL
            && (countAgain != count
                || memcmp(again, ranges, count * sizeof(*ranges)) != 0))) {
        abort();
    }
    return 0;
}
