/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replies as module authors see them (CorRedisReply), built by hiredis's
 * RESP reader itself through its object functions, so that no reply is
 * parsed twice or copied from hiredis's own type: a string reply is one
 * block (the reply and its bytes), an array its reply and its element
 * table. hiredis parses; this only allocates what it found. An array's
 * table grows as its elements come, never to the count its header
 * claims: "*400000000" from a broken server costs the bytes that come,
 * not gigabytes at once (hiredis 0.14 sets no bound; the fuzzer found
 * it).
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

/* The room an array's table has for n elements: powers of two from 4. */
static size_t
tableRoom(size_t n)
{
    size_t room = 4;

    if (n == 0) {
        return 0;
    }
    while (room < n) {
        room *= 2;
    }
    return room;
}

/* Put reply last in parent's table (hiredis gives the elements in
 * order), grown as needed. Returns 0, or -1 without memory. */
static int
elementAdd(CorRedisReply* parent, CorRedisReply* reply)
{
    size_t n = parent->elements;

    if (tableRoom(n) < n + 1) {
        CorRedisReply** grown = realloc(parent->element,
                                        tableRoom(n + 1) * sizeof(*grown));

        if (grown == NULL) {
            return -1;
        }
        parent->element = grown;
    }
    parent->element[n] = reply;
    parent->elements = n + 1;
    return 0;
}

/* A reply's block: the thread's (corChunkTake, given back on any
 * thread), its size before the reply. */
typedef struct {
    size_t size;
    CorRedisReply reply;
} ReplyBlock;

/* A reply of task's type with extra bytes after it, put in its parent's
 * table when it has one. */
static CorRedisReply*
replyNew(const redisReadTask* task, size_t extra)
{
    size_t size = sizeof(ReplyBlock) + extra;
    ReplyBlock* block = corChunkTake(&size);
    CorRedisReply* reply;

    if (block == NULL) {
        return NULL;
    }
    block->size = size;
    reply = &block->reply;
    *reply = (CorRedisReply){ .type = typeOf(task->type) };
    reply->str = "";
    if (task->parent != NULL && elementAdd(task->parent->obj, reply) != 0) {
        corChunkGive(block, size);
        return NULL;
    }
    return reply;
}

static void*
stringMake(const redisReadTask* task, char* str, size_t len)
{
    CorRedisReply* reply = len < SIZE_MAX - sizeof(ReplyBlock)
                               ? replyNew(task, len + 1)
                               : NULL;

    if (reply != NULL) {
        char* bytes = (char*)(corContainerOf(reply, ReplyBlock, reply) + 1);

        memcpy(bytes, str, len);
        bytes[len] = '\0';
        reply->str = bytes;
        reply->len = len;
    }
    return reply;
}

/* An array, empty until its elements come (elementAdd). */
static void*
arrayMake(const redisReadTask* task, int elements)
{
    (void)elements;
    return replyNew(task, 0);
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
    ReplyBlock* block;

    if (reply == NULL) {
        return;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        corRedisReplyDestroy(reply->element[i]);
    }
    free(reply->element);
    block = corContainerOf(reply, ReplyBlock, reply);
    corChunkGive(block, block->size);
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
