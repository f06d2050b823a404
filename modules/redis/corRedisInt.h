/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the redis module: a server as the module knows it
 * (corRedisModule.c), its URL (corRedisUrl.c, pure: fuzzed), replies as
 * hiredis's reader builds them (corRedisReply.c), what each thread keeps
 * of each server (corRedisSlot.c), and the two ways a command goes: on a
 * loop, pipelined with the loop's others (corRedisLoop.c), or off the
 * loops with poll() (corRedisThread.c; a loop's, in a build without
 * coroutines, on the module's threads: corRedisHandoff.c).
 */
#ifndef COR_REDIS_INT_H
#define COR_REDIS_INT_H

#include "cor.h"
#include "corKit.h"
#include "corRedis.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COR_REDIS_PORT 6379
/* The back-off between failed connects: from the first to the most. */
#define COR_REDIS_BACKOFF_FIRST_MS 100
#define COR_REDIS_BACKOFF_MOST_MS 5000

/* A redis:// or rediss:// URL taken apart. */
typedef struct {
    char host[256];
    unsigned port;
    bool tls;
    char user[128]; /* "" when none */
    char password[256];
    bool hasPassword;
    unsigned db;
    char name[448]; /* the URL without its password, for messages */
} RedisUrl;

/*
 * [user[:password]@]host[:port][/db] of redis:// or rediss://, the user
 * and password percent-decoded (a password may hold any byte but NUL).
 * Returns 0, or -EINVAL with why: another scheme, a bad host or port, a
 * db that is not a number up to 1000000, a query, a NUL decoded.
 */
int corRedisUrlParse(const char* text, RedisUrl* u, char* why, size_t whyLen);

/* What every connection to u sends first, RESP-formatted into out: AUTH
 * [user] password, then SELECT db (when not 0); *repliesP says how many
 * replies they have. Returns 0 or -ENOMEM. */
int corRedisPrelude(const RedisUrl* u, CorBuf* out, unsigned* repliesP);

/* One command RESP-formatted onto the end of out, as hiredis's
 * redisFormatCommandArgv writes it. Returns 0, -EINVAL (argc < 1) or
 * -ENOMEM. */
int corRedisFormat(const CorRedisCommand* cmd, CorBuf* out);

/* A server; made once, kept for the generation. */
struct CorRedis {
    char* name; /* its servers: name, or its URL's */
    RedisUrl url;
    int timeoutMs;                 /* a command's answer */
    int connectTimeoutMs;          /* the name, the connect, TLS */
    unsigned index;                /* its slot in each thread's table */
    atomic_uint_fast64_t commands; /* answered */
    atomic_uint_fast64_t failed;   /* failed without an answer */
    atomic_uint_fast64_t writes;   /* batches of commands sent */
    atomic_uint_fast64_t connects; /* connections opened */
};

/* hiredis's reader, building CorRedisReply trees; NULL without memory. */
struct redisReader* corRedisReaderNew(void);
void corRedisReplyDestroy(CorRedisReply* reply);

/* What a thread keeps of a server: its loop peer (on a loop's thread) or
 * its own connection (off the loops), and the back-off after a failed
 * connect, which makes commands fail at once until retryAtMs. */
typedef struct RedisPeer RedisPeer;

typedef struct {
    RedisPeer* peer; /* on a loop: the one connection, or NULL */
    /* Off the loops: */
    CorConn* conn;
    CorKitConn k;
    struct redisReader* reader;
    /* Both: */
    uint64_t retryAtMs; /* corEvClockMs time; 0: go */
    unsigned backoffMs; /* the next wait after a failed connect */
    int downRc;         /* why it is down, while backing off */
    char downWhy[300];
} RedisSlot;

/* The calling thread's slot of s (made at first use); NULL without
 * memory. */
RedisSlot* corRedisSlot(const CorRedis* s);
/* A connect failed (rc, why): commands fail at once for the back-off,
 * which doubles up to COR_REDIS_BACKOFF_MOST_MS. */
void corRedisSlotDown(RedisSlot* slot, int rc, const char* why);
/* An answer came: the next failure begins the back-off anew. */
void corRedisSlotUp(RedisSlot* slot);
/* Whether slot is backing off now: -errno with why, or 0. */
int corRedisSlotWaiting(const RedisSlot* slot, const CorRedis* s, char* why,
                        size_t whyLen);

/* The loop's way (a loop's thread: send; a coroutine of it: pipeline). */
int corRedisLoopSend(CorRedis* s, const CorRedisCommand* cmd,
                     CorRedisReplyFn fn, void* arg, char* why, size_t whyLen);
int corRedisLoopPipeline(CorRedis* s, const CorRedisCommand* cmds,
                         unsigned count, CorRedisReply** replies, char* why,
                         size_t whyLen);
/* Close the calling loop's connections (its loopExit). */
void corRedisLoopExit(void);

/* A loop's command made on a thread of the module's, its reply posted
 * back to the loop (corRedisHandoff.c): corRedisSend in a build without
 * coroutines. As corRedisSend. Stop: at the module's exit. */
int corRedisHandoff(CorRedis* s, const CorRedisCommand* cmd, CorRedisReplyFn fn,
                    void* arg, char* why, size_t whyLen);
void corRedisHandoffStop(void);

/* The thread's way: one batch at a time on the thread's connection. */
int corRedisThreadPipeline(CorRedis* s, const CorRedisCommand* cmds,
                           unsigned count, CorRedisReply** replies, char* why,
                           size_t whyLen);

#endif /* COR_REDIS_INT_H */
