/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A libFuzzer target for the configuration: arbitrary bytes are loaded as
 * a config file, through the tree and the core's schema, and the tree is
 * also walked and read with every getter, the way a module would. Nothing
 * may crash, leak or read out of bounds, whatever the input; every error
 * must come back as a message.
 *
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -Icore \
 *         core/corConf.c core/corConfig.c fuzz/corConfFuzz.c \
 *         -o corConfFuzz $(pkg-config --libs yaml-0.1)
 *     ./corConfFuzz -max_total_time=60 conf/bad
 */
#include "corConf.h"
#include "corConfig.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Read every key of every mapping with each getter, and check that a
 * failed load always says why. */
static void
walk(const CorConf* node, CorConfErrors* e, unsigned depth)
{
    size_t count = corConfCount(node);

    if (depth > COR_CONF_MAX_DEPTH) {
        abort();
    }
    for (size_t i = 0; i < count; i++) {
        const char* key = corConfKeyAt(node, i);

        if (key != NULL) {
            corConfString(node, key, NULL, e);
            corConfBool(node, key, false, e);
            corConfInt(node, key, 0, INT64_MIN, INT64_MAX, e);
            corConfSize(node, key, 0, 1, UINT64_MAX - 1, e);
            corConfDurationMs(node, key, 0, 1, UINT64_MAX - 1, e);
        }
        walk(corConfAt(node, i), e, depth + 1);
    }
    if (corConfKind(node) == COR_CONF_MAP) {
        static const char* const none[] = {NULL};

        corConfUnknownKeys(node, "x", none, e);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CorConfErrors e = {0};
    CorConfig* cf;
    CorConf* root;

    cf = corConfigLoadString("fuzz.yaml", (const char*)data, size, &e);
    if ((cf == NULL) != (e.count > 0)) {
        abort();
    }
    if (e.count > 0 && (e.text == NULL || e.len != strlen(e.text))) {
        abort();
    }
    corConfigFree(cf);
    corConfErrorsFree(&e);

    root = corConfLoadString("fuzz.yaml", (const char*)data, size, &e);
    if (root != NULL) {
        walk(root, &e, 0);
        corConfFree(root);
    }
    corConfErrorsFree(&e);
    return 0;
}
