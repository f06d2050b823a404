/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The getters the core's schema readers share (corConfigRead.h): a
 * required key, a non-empty string, one of a few words, a string copied
 * into its field, a path taken beside the configuration file. Apart from
 * corConfig.c, which calls the section readers of corConfigTls.c and
 * corConfigNotify.c, so that they call down into this file and not back
 * up into it.
 */
#include "corConfigRead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Replace *field with a copy of value. */
void
corConfigSetString(char** field, const char* value, CorConfErrors* e)
{
    char* copy;

    if (value == *field) {
        return;
    }
    copy = value ? strdup(value) : NULL;
    if (value != NULL && copy == NULL) {
        corConfErrorf(e, NULL, "out of memory reading the configuration");
        return;
    }
    free(*field);
    *field = copy;
}

/* The value of a key a mapping must have; reports it missing at the
 * mapping. */
const CorConf*
corConfigRequired(const CorConf* map, const char* key, const char* where,
                  const char* example, CorConfErrors* e)
{
    const CorConf* node = corConfGet(map, key);

    if (node == NULL) {
        corConfErrorf(e, map, "%s: missing '%s' (%s)", where, key, example);
    }
    return node;
}

/* A string that may not be empty. */
const char*
corConfigNonEmpty(const CorConf* map, const char* key, const char* def,
                  const char* what, CorConfErrors* e)
{
    const char* v = corConfString(map, key, def, e);

    if (v != NULL && v[0] == '\0') {
        corConfErrorf(e, corConfGet(map, key), "%s: expected %s, got ''", key,
                      what);
        return def;
    }
    return v;
}

/* A string that must be one of a few words. */
const char*
corConfigOneOf(const CorConf* map, const char* key, const char* def,
               const char* const* words, CorConfErrors* e)
{
    const char* v = corConfString(map, key, def, e);
    char list[128];
    size_t len = 0;

    for (size_t i = 0; words[i] != NULL; i++) {
        if (v != NULL && strcmp(v, words[i]) == 0) {
            return v;
        }
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
                                i ? ", " : "", words[i]);
        if (len >= sizeof(list)) {
            len = sizeof(list) - 1;
        }
    }
    corConfErrorf(e, corConfGet(map, key), "%s: expected one of %s, got '%s'",
                  key, list, v);
    return def;
}

const char*
corConfigFirstAt(const CorConf* first, const CorConf* at, char* buf,
                 size_t size)
{
    bool sameFile = strcmp(corConfFile(first), corConfFile(at)) == 0;

    snprintf(buf, size, "%s%s%u:%u", sameFile ? "" : corConfFile(first),
             sameFile ? "" : ":", corConfLine(first), corConfColumn(first));
    return buf;
}

void
corConfigSetPath(char** field, const CorConf* map, const char* key,
                 CorConfErrors* e)
{
    const char* path = corConfigNonEmpty(map, key, NULL, "a path", e);

    free(*field);
    *field = path != NULL ? corConfigPathBeside(corConfFile(map), path) : NULL;
    if (path != NULL && *field == NULL) {
        corConfErrorf(e, NULL, "out of memory reading the configuration");
    }
}

char*
corConfigPathBeside(const char* configFile, const char* path)
{
    const char* slash = strrchr(configFile, '/');
    int dirLen = slash != NULL ? (int)(slash - configFile) : 1;
    size_t len = (size_t)dirLen + 1 + strlen(path) + 1;
    char* joined;

    if (path[0] == '/') {
        return strdup(path);
    }
    /* "./x.so" is "x.so": the folder is prefixed once ("././x.so" from
     * cor --module-info ./x.so said it twice). */
    while (path[0] == '.' && path[1] == '/') {
        path += 2;
        len -= 2;
    }
    joined = malloc(len);
    if (joined != NULL) {
        snprintf(joined, len, "%.*s/%s", dirLen,
                 slash != NULL ? configFile : ".", path);
    }
    return joined;
}
