/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's handler "redis": the Redis client of corRedis.h as a
 * module sees it, for corRedisTest. POST /redis with one argument a line,
 * commands apart by a line "--", sends them as one pipeline to the redis
 * module's server named "cache" and answers each reply as its type
 * writes it ("integer 1", "string 3 abc", "status OK", "error ERR ...",
 * "nil", "array 2" and its elements indented), 200; a failure is 503
 * "failed ERRNO: why". A coroutine where coroutines are on, a worker
 * otherwise: the two ways of the client.
 */
#include "cor.h"
#include "corRedis.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define ARGS_MAX 64
#define COMMANDS_MAX 16

void corTestkitRedisAdd(CorModule* m, int* rc);

static size_t
render(const CorRedisReply* reply, unsigned depth, char* out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "%*s", (int)depth * 2, "");

#define PUT(...)                                                               \
    n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, __VA_ARGS__)
    switch (reply->type) {
    case COR_REDIS_NIL:
        PUT("nil\n");
        break;
    case COR_REDIS_STRING:
        PUT("string %zu %s\n", reply->len, reply->str);
        break;
    case COR_REDIS_STATUS:
        PUT("status %s\n", reply->str);
        break;
    case COR_REDIS_ERROR:
        PUT("error %s\n", reply->str);
        break;
    case COR_REDIS_INTEGER:
        PUT("integer %lld\n", reply->integer);
        break;
    case COR_REDIS_ARRAY:
        PUT("array %zu\n", reply->elements);
        for (size_t i = 0; i < reply->elements && n < cap; i++) {
            n += render(reply->element[i], depth + 1, out + n, cap - n);
        }
        break;
    }
#undef PUT
    return n < cap ? n : cap;
}

static void
redisServe(CorRequest* r)
{
    static __thread char text[65536];
    const char* argv[COMMANDS_MAX][ARGS_MAX];
    size_t lens[COMMANDS_MAX][ARGS_MAX];
    CorRedisCommand cmds[COMMANDS_MAX] = { 0 };
    CorRedisReply* replies[COMMANDS_MAX];
    unsigned count = 1;
    char why[256];
    CorRedis* s = corRedisServer("cache", why, sizeof(why));
    char* copy = corRequestAlloc(r, r->bodyLen + 1);
    char* line;
    char* next;
    size_t n = 0;
    int rc;

    if (s == NULL || copy == NULL) {
        corRespondf(r, 500, "text/plain", "%s\n", s == NULL ? why : "memory");
        return;
    }
    memcpy(copy, r->body, r->bodyLen);
    copy[r->bodyLen] = '\0';
    for (line = copy; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) {
            *next++ = '\0';
        }
        if (strcmp(line, "--") == 0) {
            count += count < COMMANDS_MAX;
            continue;
        }
        CorRedisCommand* c = &cmds[count - 1];

        if (c->argc < ARGS_MAX) {
            argv[count - 1][c->argc] = line;
            lens[count - 1][c->argc] = strlen(line);
            c->argc++;
        }
    }
    for (unsigned i = 0; i < count; i++) {
        cmds[i].argv = argv[i];
        cmds[i].argvLen = lens[i];
    }
    rc = corRedisPipeline(s, cmds, count, replies, why, sizeof(why));
    if (rc != 0) {
        corRespondf(r, 503, "text/plain", "failed %d: %s\n", -rc, why);
        return;
    }
    for (unsigned i = 0; i < count; i++) {
        n += render(replies[i], 0, text + n, sizeof(text) - n);
        corRedisReplyFree(replies[i]);
    }
    corRespond(r, 200, "text/plain", text, n);
}

void
corTestkitRedisAdd(CorModule* m, int* rc)
{
    if (*rc == 0
        && corHandlerAdd(m, &(CorHandler){ .name = "redis",
                                           .serve = redisServe,
                                           .run = COR_RUN_COROUTINE })
               != 0) {
        *rc = -1;
    }
}
