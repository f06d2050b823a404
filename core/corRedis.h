/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corRedis.h: Redis for modules, beside corClient.h. A module that keeps
 * state in Redis (a counter, a session, a rate limit's buckets) sends
 * commands as argument vectors (never a format string built from input)
 * and gets typed replies; the waits are the loop's (a coroutine yields, a
 * worker or the blocking build polls), as every client of cor waits.
 *
 *     #include <corRedis.h>
 *
 *     static CorRedis* cache;                  (corRedisServer in init)
 *
 *     const char* argv[] = { "INCR", "visits" };
 *     CorRedisReply* reply;
 *     char why[256];
 *
 *     if (corRedisCommand(cache, &(CorRedisCommand){ 2, argv, NULL },
 *                         &reply, why, sizeof(why)) == 0
 *         && reply->type == COR_REDIS_INTEGER) {
 *         corRespondf(r, 200, "text/plain", "%lld\n", reply->integer);
 *     } else {
 *         corRespondf(r, 503, "text/plain", "%s\n", why);
 *     }
 *     corRedisReplyFree(reply);                (NULL-safe)
 *
 * The client is the `redis` module's (modules/redis: hiredis reads and
 * writes RESP, cor's connection kit carries the bytes); the core keeps
 * only this header and the registry that leads to it (docs/redis.md
 * says why). A module that uses it is loaded after `- load: redis`.
 *
 * On a loop, every request of the loop shares one connection to each
 * server, and the commands a turn of the loop queues go out together in
 * one write (pipelined: Redis answers in order). Off the loops (a worker,
 * blocking mode) each thread keeps a connection of its own per server
 * and waits with poll(). A server that does not answer within its
 * `timeout` fails what waits on it at once, and its connection with it;
 * the next command reconnects, after a back-off while connecting fails
 * (100 ms doubling to 5 s: meanwhile commands fail at once, -ECONNREFUSED
 * or the connect's error). redis://[user:password@]host[:port][/db] (AUTH
 * and SELECT sent first on each connection), rediss:// over TLS (the
 * core's TLS client, client.ca_file's trust).
 */
#ifndef COR_REDIS_H
#define COR_REDIS_H

#include "corModule.h"

/* What a reply is, as RESP2 types them. */
typedef enum {
    COR_REDIS_NIL,
    COR_REDIS_STRING,  /* a bulk string: str, len (binary-safe) */
    COR_REDIS_STATUS,  /* +OK: str */
    COR_REDIS_ERROR,   /* -ERR ...: str (an answer, not a failure) */
    COR_REDIS_INTEGER, /* integer */
    COR_REDIS_ARRAY    /* element[0, elements) */
} CorRedisType;

/* A reply; the caller's, freed with corRedisReplyFree (its elements go
 * with it). */
typedef struct CorRedisReply {
    CorRedisType type;
    long long integer;
    const char* str; /* len bytes and a NUL; "" when none */
    size_t len;
    struct CorRedisReply** element;
    size_t elements;
} CorRedisReply;

/* One command: argc arguments, argv[i] of argvLen[i] bytes (argvLen
 * NULL: each a C string). Read during the call only. */
typedef struct {
    int argc;
    const char* const* argv;
    const size_t* argvLen;
} CorRedisCommand;

/* A server: one of the redis module's `servers:`, or a URL's. */
typedef struct CorRedis CorRedis;

/*
 * The server the redis module names name (`servers: [ { name: cache,
 * url: ... } ]`), or the one of a URL ("redis://127.0.0.1:6379/0", made
 * at its first ask and kept for the generation; the same URL twice is
 * one server). From a module's init or later, any thread. Returns it, or
 * NULL with why: no redis module loaded (before the caller), an unknown
 * name, a bad URL.
 */
CorRedis* corRedisServer(const char* nameOrUrl, char* why, size_t whyLen);

/* What messages call the server ("cache", or its URL without a password). */
const char* corRedisName(const CorRedis* s);

/*
 * Send count commands and wait for their replies: replies[i] is
 * cmds[i]'s (an ERROR reply is a reply). All go out in one write, with
 * whatever else the loop sends to the server this turn. Returns 0 with
 * every reply set, or -errno with why (replies all NULL): -ETIMEDOUT (no
 * answer within the server's timeout), -ECONNREFUSED and the errors of
 * corConnOpen (the server is down, or backing off), -ECONNRESET (the
 * connection closed before the answers), -EACCES (AUTH or SELECT was
 * refused), -EPROTO (a reply that is not RESP), -ECANCELED (the request's
 * cancel, a stop), -EINVAL (no command, argc < 1), -ENOMEM. May yield.
 */
int corRedisPipeline(CorRedis* s, const CorRedisCommand* cmds, unsigned count,
                     CorRedisReply** replies, char* why, size_t whyLen);

/* One command, as corRedisPipeline with one. May yield. */
int corRedisCommand(CorRedis* s, const CorRedisCommand* cmd,
                    CorRedisReply** replyP, char* why, size_t whyLen);

/*
 * Send one command from a loop's thread without waiting (a guard, an
 * inline handler): fn(arg, rc, reply, why) runs later on this loop, once,
 * with the reply (the callee's to free) or -errno and why, as
 * corRedisPipeline says. Returns 0, or -errno with why when it failed at
 * once (fn is then not called): -EPERM off a loop's thread, the server
 * backing off, -EINVAL, -ENOMEM.
 */
typedef void (*CorRedisReplyFn)(void* arg, int rc, CorRedisReply* reply,
                                const char* why);
int corRedisSend(CorRedis* s, const CorRedisCommand* cmd, CorRedisReplyFn fn,
                 void* arg, char* why, size_t whyLen);

/* Free a reply and its elements; NULL is ignored. */
void corRedisReplyFree(CorRedisReply* reply);

/* ---- The provider: what the redis module registers ----------------------- */

typedef struct {
    CorRedis* (*server)(const char* nameOrUrl, char* why, size_t whyLen);
    const char* (*name)(const CorRedis* s);
    int (*pipeline)(CorRedis* s, const CorRedisCommand* cmds, unsigned count,
                    CorRedisReply** replies, char* why, size_t whyLen);
    int (*send)(CorRedis* s, const CorRedisCommand* cmd, CorRedisReplyFn fn,
                void* arg, char* why, size_t whyLen);
    void (*replyFree)(CorRedisReply* reply);
} CorRedisOps;

/* Register the client (copied), from the redis module's init. Returns 0,
 * or -1 after a module error (one is registered already). */
int corRedisProvide(CorModule* m, const CorRedisOps* ops);

#endif /* COR_REDIS_H */
