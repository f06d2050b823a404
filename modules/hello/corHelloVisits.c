/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hello's visits: what a handler that keeps state in Redis looks like.
 *
 *     modules:
 *       - load: redis
 *         servers: [ { name: cache, url: "redis://127.0.0.1:6379/0" } ]
 *       - { load: hello, redis: cache }
 *     routes:
 *       - { match: "GET /visits", handler: visits }
 *
 * GET /visits increments a counter in Redis (INCR cor:visits) and
 * answers its value. A coroutine of the loop where coroutines are on
 * (the loop's requests share one connection, their INCRs go out in one
 * write), a worker otherwise (its own connection, poll()): the same
 * source. Redis down, slow or refusing: 503 with why, at once (the
 * client's timeout, then its back-off, keep it short).
 */
#include "cor.h"
#include "corRedis.h"

#include <stdio.h>
#include <string.h>

static CorRedis* visitsServer;

/* The count and a newline into line (24 bytes hold any); its length.
 * Not printf: its machinery cost 700 instructions a request, a fifth
 * of what a whole GET /hello costs (callgrind). */
static size_t
countLine(long long count, char* line)
{
    char digits[24];
    char* at = digits + sizeof(digits);
    unsigned long long n = count < 0 ? 0ULL - (unsigned long long)count
                                     : (unsigned long long)count;
    size_t len;

    *--at = '\n';
    do {
        *--at = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    if (count < 0) {
        *--at = '-';
    }
    len = (size_t)(digits + sizeof(digits) - at);
    memcpy(line, at, len);
    return len;
}

static void
visitsServe(CorRequest* r)
{
    static const char* const incr[] = { "INCR", "cor:visits" };
    CorRedisReply* reply = NULL;
    char why[256];
    char line[24];

    if (visitsServer == NULL) {
        corRespondf(r, 503, "text/plain",
                    "no Redis: name one in hello's redis:\n");
        return;
    }
    if (corRedisCommand(visitsServer, &(CorRedisCommand){ 2, incr, NULL },
                        &reply, why, sizeof(why))
        != 0) {
        corRespondf(r, 503, "text/plain", "%s\n", why);
    } else if (reply->type != COR_REDIS_INTEGER) {
        corRespondf(r, 503, "text/plain", "Redis said: %s\n", reply->str);
    } else {
        corRespond(r, 200, "text/plain", line, countLine(reply->integer, line));
    }
    corRedisReplyFree(reply);
}

/* The visits handler, and the server hello's `redis:` names (none: it
 * answers 503). Returns 0, or -1 after a module error. */
int corHelloVisitsAdd(CorModule* m, const CorConf* conf);

int
corHelloVisitsAdd(CorModule* m, const CorConf* conf)
{
    const char* name = corConfString(conf, "redis", NULL, corModuleErrors(m));
    char why[256];

    visitsServer = NULL;
    if (name != NULL
        && (visitsServer = corRedisServer(name, why, sizeof(why))) == NULL) {
        corModuleError(m, corConfGet(conf, "redis"), "redis: %s", why);
        return -1;
    }
    return corHandlerAdd(m, &(CorHandler){ .name = "visits",
                                           .serve = visitsServe,
                                           .run = COR_RUN_COROUTINE });
}
