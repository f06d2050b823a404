/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the compress module's Accept-Encoding
 * negotiation. The first byte picks the server's preference order (a
 * permutation of the encodings, and how many of them), the rest is the
 * header's value. Beyond the sanitizers, it aborts when a property
 * breaks:
 *
 *   - the answer is -1 or one of the preferred encodings;
 *   - an encoding chosen from a longer preference list that holds the
 *     shorter one's answer first is that answer (the order decides);
 *   - no header (NULL) chooses nothing.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined
 *        -Imodules/compress -Icore -Ievent -Ibuild
 *        modules/compress/corCompressAccept.c fuzz/corCompressAcceptFuzz.c
 */
#include "corCompressInt.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* The six orders of the three encodings. */
static const CompressEncoding orders[6][COMPRESS_ENCODINGS] = {
    { COMPRESS_ZSTD, COMPRESS_BR, COMPRESS_GZIP },
    { COMPRESS_ZSTD, COMPRESS_GZIP, COMPRESS_BR },
    { COMPRESS_BR, COMPRESS_ZSTD, COMPRESS_GZIP },
    { COMPRESS_BR, COMPRESS_GZIP, COMPRESS_ZSTD },
    { COMPRESS_GZIP, COMPRESS_ZSTD, COMPRESS_BR },
    { COMPRESS_GZIP, COMPRESS_BR, COMPRESS_ZSTD },
};

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const CompressEncoding* prefer;
    unsigned count;
    int chosen;
    int first;

    if (size < 1) {
        return 0;
    }
    prefer = orders[data[0] % 6];
    count = 1 + (unsigned)(data[0] / 6) % COMPRESS_ENCODINGS;
    chosen = corCompressNegotiate((const char*)data + 1, size - 1, prefer,
                                  count);
    if (chosen != -1) {
        unsigned i = 0;

        while (i < count && (int)prefer[i] != chosen) {
            i++;
        }
        if (i == count) {
            abort();
        }
    }
    /* The first preference alone: accepted there only if it is what the
     * whole list chose when it comes first in it. */
    first = corCompressNegotiate((const char*)data + 1, size - 1, prefer, 1);
    if (first != -1 && chosen != first) {
        abort();
    }
    if (corCompressNegotiate(NULL, 0, prefer, count) != -1) {
        abort();
    }
    return 0;
}
