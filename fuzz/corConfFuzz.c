/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A libFuzzer target for the configuration: arbitrary bytes are loaded as
 * a config file, through the tree and the core's schema, and the tree is
 * also walked and read with every getter, the way a module would. Nothing
 * may crash, leak or read out of bounds, whatever the input; every error
 * must come back as a message.
 *
 * The input stands for a file in a folder made at the start, whose files
 * its include can name: lists to append, a cycle, a chain deeper than
 * include goes, keys an included file may not hold, a syntax error, a
 * list, an empty file, a folder. An input whose include names a path
 * (a '/') is not loaded through the schema, so that the fuzzer reads no
 * file outside that folder.
 *
 *     make build/fuzz/corConfFuzz
 *     build/fuzz/corConfFuzz -max_total_time=60 build/fuzz/conf conf/bad \
 *         fuzz/corpus/conf
 */
#include "corConf.h"
#include "corConfig.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The input's name: a file in the folder of included files. */
static char inputName[64];

static void
fileWrite(const char* folder, const char* name, const char* text)
{
    char path[128];
    FILE* f;

    snprintf(path, sizeof(path), "%s/%s", folder, name);
    f = fopen(path, "w");
    if (f == NULL) {
        abort();
    }
    fputs(text, f);
    fclose(f);
}

int
LLVMFuzzerInitialize(int* argc, char*** argv)
{
    static char folder[] = "/tmp/corConfFuzz.XXXXXX";
    static const char* const files[][2] = {
        { "fuzz.yaml", "include: fuzz.yaml\n" },
        { "a.yaml", "routes:\n  - { match: \"GET /a\", handler: h }\n"
                    "listen:\n  - { protocol: http, address: 127.0.0.1:1 }\n" },
        { "b.yaml", "include: [a.yaml, c.yaml]\nmodules: [ { load: m } ]\n" },
        { "c.yaml", "include: b.yaml\nroutes: []\n" },
        { "d.yaml", "limits: {}\nrotues: []\nroutes: 3\ninclude: {}\n" },
        { "e.yaml", "routes: [\n" },
        { "f.yaml", "- a\n" },
        { "g.yaml", "" },
    };
    char name[32];
    char text[64];

    (void)argc;
    (void)argv;
    if (mkdtemp(folder) == NULL) {
        abort();
    }
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        fileWrite(folder, files[i][0], files[i][1]);
    }
    for (int i = 0; i <= COR_CONF_INCLUDE_DEPTH + 1; i++) {
        snprintf(name, sizeof(name), "chain%d.yaml", i);
        snprintf(text, sizeof(text),
                 "include: chain%d.yaml\n"
                 "routes: [ { match: /c%d, handler: h } ]\n",
                 i + 1, i);
        fileWrite(folder, name, text);
    }
    snprintf(name, sizeof(name), "%s/h.yaml", folder);
    mkdir(name, 0700);
    snprintf(inputName, sizeof(inputName), "%s/fuzz.yaml", folder);
    return 0;
}

/* Whether each of root's include entries stays in the folder. */
static bool
includesStayIn(const CorConf* root)
{
    const CorConf* include = corConfGet(root, "include");
    size_t n;

    if (include == NULL) {
        return true;
    }
    n = corConfKind(include) == COR_CONF_SEQ ? corConfCount(include) : 1;
    for (size_t i = 0; i < n; i++) {
        const CorConf* entry = corConfKind(include) == COR_CONF_SEQ
                                   ? corConfAt(include, i)
                                   : include;
        const char* text = corConfText(entry);

        if (text != NULL && strchr(text, '/') != NULL) {
            return false;
        }
    }
    return true;
}

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
        static const char* const none[] = { NULL };

        corConfUnknownKeys(node, "x", none, e);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CorConfErrors e = { 0 };
    CorConfig* cf;
    CorConf* root;
    bool whole;
    bool stays;

    root = corConfLoadStringPartial(inputName, (const char*)data, size, &e,
                                    &whole);
    stays = includesStayIn(root);
    if (root != NULL) {
        walk(root, &e, 0);
        corConfFree(root);
    }
    corConfErrorsFree(&e);
    if (!stays) {
        return 0;
    }

    cf = corConfigLoadString(inputName, (const char*)data, size, &e);
    if ((cf == NULL) != (e.count > 0)) {
        abort();
    }
    if (e.count > 0 && (e.text == NULL || e.len != strlen(e.text))) {
        abort();
    }
    /* Every file read is one the input could name. */
    for (size_t i = 0; cf != NULL && corConfFileRead(cf->root, i); i++) {
        if (strncmp(corConfFileRead(cf->root, i), inputName,
                    strlen(inputName) - strlen("fuzz.yaml"))
            != 0) {
            abort();
        }
    }
    corConfigFree(cf);
    corConfErrorsFree(&e);
    return 0;
}
