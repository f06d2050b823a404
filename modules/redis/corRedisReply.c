/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replies as module authors see them (CorRedisReply), built by hiredis's
 * RESP reader itself through its object functions, so that no reply is
 * parsed twice or copied from hiredis's own type: a string reply is one
 * block (the reply and its bytes), an array its reply and its element
 * table. hiredis parses; this only allocates what it found.
 */
#include "corRedisInt.h"

#include <hiredis/read.h>

#include <stdlib.h>
#include <string.h>

static CorRedisType
typeOf(int hiredisType)
{
    switch (hiredisType) {
    case REDIS_REPLY_STRING:
        return COR_REDIS_STRING;
    case REDIS_REPLY_STATUS:
        return COR_REDIS_STATUS;
    case REDIS_REPLY_ERROR:
        return COR_REDIS_ERROR;
    case REDIS_REPLY_INTEGER:
        return COR_REDIS_INTEGER;
    case REDIS_REPLY_ARRAY:
        return COR_REDIS_ARRAY;
    default:
        return COR_REDIS_NIL;
    }
}

/* A reply of task's type with extra bytes after it, put in its parent's
 * place when it has one. */
static CorRedisReply*
replyNew(const redisReadTask* task, size_t extra)
{
    CorRedisReply* reply = calloc(1, sizeof(*reply) + extra);

    if (reply == NULL) {
        return NULL;
    }
    reply->type = typeOf(task->type);
    reply->str = "";
    if (task->parent != NULL) {
        CorRedisReply* parent = task->parent->obj;

        parent->element[task->idx] = reply;
    }
    return reply;
}

static void*
stringMake(const redisReadTask* task, char* str, size_t len)
{
    CorRedisReply* reply = len < SIZE_MAX - sizeof(*reply)
                               ? replyNew(task, len + 1)
                               : NULL;

    if (reply != NULL) {
        char* bytes = (char*)(reply + 1);

        memcpy(bytes, str, len);
        bytes[len] = '\0';
        reply->str = bytes;
        reply->len = len;
    }
    return reply;
}

static void*
arrayMake(const redisReadTask* task, int elements)
{
    CorRedisReply* reply = replyNew(task, 0);

    if (reply != NULL && elements > 0) {
        reply->element = calloc((size_t)elements, sizeof(*reply->element));
        if (reply->element == NULL) {
            /* The parent frees it with itself: leave it there empty. */
            if (task->parent == NULL) {
                free(reply);
            }
            return NULL;
        }
        reply->elements = (size_t)elements;
    }
    return reply;
}

static void*
integerMake(const redisReadTask* task, long long value)
{
    CorRedisReply* reply = replyNew(task, 0);

    if (reply != NULL) {
        reply->integer = value;
    }
    return reply;
}

/* A nil bulk string or array: the task's type is the one it would have
 * had. */
static void*
nilMake(const redisReadTask* task)
{
    CorRedisReply* reply = replyNew(task, 0);

    if (reply != NULL) {
        reply->type = COR_REDIS_NIL;
    }
    return reply;
}

void
corRedisReplyDestroy(CorRedisReply* reply)
{
    if (reply == NULL) {
        return;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        corRedisReplyDestroy(reply->element[i]);
    }
    free(reply->element);
    free(reply);
}

static void
objectFree(void* reply)
{
    corRedisReplyDestroy(reply);
}

static redisReplyObjectFunctions replyFunctions = {
    .createString = stringMake,
    .createArray = arrayMake,
    .createInteger = integerMake,
    .createNil = nilMake,
    .freeObject = objectFree,
};

struct redisReader*
corRedisReaderNew(void)
{
    return redisReaderCreateWithFunctions(&replyFunctions);
}
