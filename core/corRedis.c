/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The way from corRedis.h to the Redis client: the core keeps the module
 * API's calls and forwards them to the client the redis module registers
 * (modules/redis), as corScheme.c leads a URL to its module's client.
 * Modules never link each other: hello and limit call these, the redis
 * module answers, and the core holds no hiredis. Filled from the redis
 * module's init (a generation is a process of its own) and only read
 * after: no lock.
 */
#include "corCoreInt.h"
#include "corRedis.h"

#include <errno.h>
#include <stdio.h>

static CorRedisOps provider;
static bool provided;

int
corRedisProvide(CorModule* m, const CorRedisOps* ops)
{
    if (provided) {
        corModuleError(m, NULL, "a Redis client is registered already");
        return -1;
    }
    provider = *ops;
    provided = true;
    return 0;
}

CorRedis*
corRedisServer(const char* nameOrUrl, char* why, size_t whyLen)
{
    if (!provided) {
        snprintf(why, whyLen,
                 "Redis '%s': no Redis client (load the redis module "
                 "before the modules that use it: - load: redis)",
                 nameOrUrl);
        return NULL;
    }
    return provider.server(nameOrUrl, why, whyLen);
}

const char*
corRedisName(const CorRedis* s)
{
    return provider.name(s);
}

int
corRedisPipeline(CorRedis* s, const CorRedisCommand* cmds, unsigned count,
                 CorRedisReply** replies, char* why, size_t whyLen)
{
    return provider.pipeline(s, cmds, count, replies, why, whyLen);
}

int
corRedisCommand(CorRedis* s, const CorRedisCommand* cmd, CorRedisReply** replyP,
                char* why, size_t whyLen)
{
    return provider.pipeline(s, cmd, 1, replyP, why, whyLen);
}

int
corRedisSend(CorRedis* s, const CorRedisCommand* cmd, CorRedisReplyFn fn,
             void* arg, char* why, size_t whyLen)
{
    return provider.send(s, cmd, fn, arg, why, whyLen);
}

void
corRedisReplyFree(CorRedisReply* reply)
{
    if (reply != NULL) {
        provider.replyFree(reply);
    }
}
