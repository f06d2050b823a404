/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the core's Accept-Encoding reading
 * (corAcceptEncoding.c), which compress and static both choose by. The
 * first byte picks the server's preference order (a permutation of the
 * codings, and how many of them), the rest is the header's value.
 * Beyond the sanitizers, it aborts when a property breaks:
 *
 *   - every weight is at most 1000;
 *   - the first choice is -1 or one of the preferred codings, one with
 *     a weight above 0, and every coding before it in the order has 0;
 *   - a choice from a longer preference list that holds the shorter
 *     one's answer first is that answer (the order decides);
 *   - no header (NULL) weighs nothing and chooses nothing.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Icore
 *        core/corAcceptEncoding.c fuzz/corAcceptEncodingFuzz.c
 */
#include "corAcceptEncoding.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* The six orders of the three codings. */
static const CorCoding orders[6][COR_CODINGS] = {
    { COR_CODING_ZSTD, COR_CODING_BR, COR_CODING_GZIP },
    { COR_CODING_ZSTD, COR_CODING_GZIP, COR_CODING_BR },
    { COR_CODING_BR, COR_CODING_ZSTD, COR_CODING_GZIP },
    { COR_CODING_BR, COR_CODING_GZIP, COR_CODING_ZSTD },
    { COR_CODING_GZIP, COR_CODING_ZSTD, COR_CODING_BR },
    { COR_CODING_GZIP, COR_CODING_BR, COR_CODING_ZSTD },
};

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    unsigned weights[COR_CODINGS];
    const CorCoding* prefer;
    const char* value;
    unsigned count;
    unsigned i = 0;
    int chosen;
    int first;

    if (size < 1) {
        return 0;
    }
    prefer = orders[data[0] % 6];
    count = 1 + (unsigned)(data[0] / 6) % COR_CODINGS;
    value = (const char*)data + 1;
    corAcceptEncodingWeights(value, size - 1, weights);
    for (int k = 0; k < COR_CODINGS; k++) {
        if (weights[k] > 1000) {
            abort();
        }
    }
    chosen = corAcceptEncodingFirst(value, size - 1, prefer, count);
    while (i < count && (int)prefer[i] != chosen) {
        if (weights[prefer[i]] != 0) {
            abort();
        }
        i++;
    }
    if ((chosen == -1) != (i == count)
        || (chosen != -1 && weights[chosen] == 0)) {
        abort();
    }
    /* The first preference alone: accepted there only if it is what the
     * whole list chose when it comes first in it. */
    first = corAcceptEncodingFirst(value, size - 1, prefer, 1);
    if (first != -1 && chosen != first) {
        abort();
    }
    corAcceptEncodingWeights(NULL, 0, weights);
    if (corAcceptEncodingFirst(NULL, 0, prefer, count) != -1 || weights[0] != 0
        || weights[1] != 0 || weights[2] != 0) {
        abort();
    }
    return 0;
}
