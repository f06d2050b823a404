/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for what the redis module reads itself: a server's
 * URL (modules/redis/corRedisUrl.c: the user, password and database
 * beyond the core's URL parser), and the reply trees its functions build
 * as hiredis's reader parses RESP (corRedisReply.c: hiredis parses, they
 * allocate and link), and the commands it writes itself. The first byte
 * chooses. Beyond the sanitizers, it aborts when a property breaks:
 *
 *   - an accepted URL has a port in 1..65535 and a database up to
 *     1000000, its name (for messages) is its scheme, user, host, port
 *     and db and no more (never its password), and
 *     the same text parses the same again;
 *   - its AUTH and SELECT, as RESP, read back (through the same reader)
 *     as the commands they are: AUTH [user] password, SELECT db;
 *   - every reply tree is whole: a known type, a string NUL-terminated
 *     at its length, every element of an array there;
 *   - a command (the input cut into arguments at each NUL) is written
 *     byte for byte as hiredis's redisFormatCommandArgv writes it.
 *
 * Build: make build/fuzz/corRedisFuzz (Makefile.in's fuzz target).
 */
#include "corRedisInt.h"

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void
treeCheck(const CorRedisReply* reply)
{
    if (reply == NULL || reply->type > COR_REDIS_ARRAY
        || reply->str[reply->len] != '\0') {
        abort();
    }
    for (size_t i = 0; i < reply->elements; i++) {
        treeCheck(reply->element[i]);
    }
}

/* The replies of len bytes of resp, fed in two parts (at cut); the number
 * read, or -1 when the reader refused them. replies[] gets the first
 * few, the rest are checked and freed. */
static int
repliesRead(const char* resp, size_t len, size_t cut, CorRedisReply** replies,
            int cap)
{
    redisReader* reader = corRedisReaderNew();
    int count = 0;

    if (reader == NULL) {
        abort();
    }
    cut = cut < len ? cut : len;
    if (len > 0
        && (redisReaderFeed(reader, resp, cut) != REDIS_OK
            || redisReaderFeed(reader, resp + cut, len - cut) != REDIS_OK)) {
        abort();
    }
    for (;;) {
        void* reply = NULL;

        if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
            count = -1;
            break;
        }
        if (reply == NULL) {
            break;
        }
        treeCheck(reply);
        if (count < cap) {
            replies[count] = reply;
        } else {
            corRedisReplyDestroy(reply);
        }
        count++;
    }
    redisReaderFree(reader);
    return count;
}

static bool
argIs(const CorRedisReply* reply, size_t i, const char* text)
{
    return i < reply->elements && reply->element[i]->type == COR_REDIS_STRING
           && reply->element[i]->len == strlen(text)
           && memcmp(reply->element[i]->str, text, reply->element[i]->len) == 0;
}

static void
preludeCheck(const RedisUrl* u)
{
    CorBuf out = { 0 };
    CorRedisReply* replies[2] = { 0 };
    unsigned expected = 0;
    int n;

    if (corRedisPrelude(u, &out, &expected) != 0 || expected > 2) {
        abort();
    }
    n = repliesRead((const char*)out.data, out.len, out.len / 2, replies, 2);
    if (n != (int)expected) {
        abort();
    }
    if (u->hasPassword) {
        size_t pw = u->user[0] != '\0' ? 2 : 1;

        if (!argIs(replies[0], 0, "AUTH") || !argIs(replies[0], pw, u->password)
            || (pw == 2 && !argIs(replies[0], 1, u->user))) {
            abort();
        }
    }
    if (u->db != 0 && !argIs(replies[expected - 1], 0, "SELECT")) {
        abort();
    }
    for (int i = 0; i < n; i++) {
        corRedisReplyDestroy(replies[i]);
    }
    corBufFree(&out);
}

static void
urlCheck(const uint8_t* data, size_t size)
{
    char* text = malloc(size + 1);
    char why[256];
    RedisUrl u;
    RedisUrl again;
    int rc;

    if (text == NULL) {
        abort();
    }
    memcpy(text, data, size);
    text[size] = '\0';
    rc = corRedisUrlParse(text, &u, why, sizeof(why));
    if (corRedisUrlParse(text, &again, why, sizeof(why)) != rc) {
        abort();
    }
    if (rc == 0) {
        char tail[32];
        /* The name is the scheme, the user, the host, the port and the db,
         * no more: its length says the password is not in it. */
        size_t expected = (u.tls ? 9 : 8) + strlen(u.user) + (u.user[0] != '\0')
                          + strlen(u.host)
                          + (strchr(u.host, ':') != NULL ? 2 : 0)
                          + (size_t)snprintf(tail, sizeof(tail), ":%u/%u",
                                             u.port, u.db);

        if (u.port < 1 || u.port > 65535 || u.db > 1000000
            || memcmp(&u, &again, sizeof(u)) != 0
            || strlen(u.name) != expected) {
            abort();
        }
        preludeCheck(&u);
    }
    free(text);
}

/* size bytes cut at each NUL into arguments (at most 64). */
static void
formatCheck(const uint8_t* data, size_t size)
{
    const char* argv[64];
    size_t lens[64];
    int argc = 0;
    size_t start = 0;
    CorBuf out = { 0 };
    char* theirs = NULL;
    int theirLen;

    for (size_t i = 0; i <= size && argc < 64; i++) {
        if (i == size || data[i] == 0) {
            argv[argc] = (const char*)data + start;
            lens[argc++] = i - start;
            start = i + 1;
        }
    }
    theirLen = redisFormatCommandArgv(&theirs, argc, argv, lens);
    if (corRedisFormat(&(CorRedisCommand){ argc, argv, lens }, &out) != 0
        || theirLen < 0 || out.len != (size_t)theirLen
        || memcmp(out.data, theirs, out.len) != 0) {
        abort();
    }
    redisFreeCommand(theirs);
    corBufFree(&out);
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CorRedisReply* none[1];

    if (size < 2) {
        return 0;
    }
    switch (data[0] % 3) {
    case 0:
        repliesRead((const char*)data + 2, size - 2, data[1], none, 0);
        break;
    case 1:
        urlCheck(data + 1, size - 1);
        break;
    default:
        formatCheck(data + 1, size - 1);
        break;
    }
    return 0;
}
