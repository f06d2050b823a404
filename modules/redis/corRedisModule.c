/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/redis: the Redis client of corRedis.h, and the servers it
 * knows by name.
 *
 *     modules:
 *       - load: redis
 *         servers:
 *           - { name: cache, url: "redis://127.0.0.1:6379/0",
 *               timeout: 1s, connect_timeout: 1s }
 *       - { load: hello, redis: cache }
 *
 * A module finds a server by its name, or by a URL of its own (the limit
 * module's `store:`), through the core (corRedisServer), which this
 * module's init provides with its client: so it is loaded before the
 * modules that use it. A server is made once and kept for the
 * generation; each loop and each thread keeps its own connection to it
 * (corRedisLoop.c, corRedisThread.c). Counted in /metrics per server.
 */
#include "corRedisInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 1000
#define CONNECT_TIMEOUT_MS 1000

/* Every server, named or made for a URL; under lock, as a URL's may be
 * made on any thread. A server is never freed before the module's exit,
 * so that a pointer handed out stays good. */
static CorRedis** servers;
static unsigned serverCount;
static pthread_mutex_t serversLock = PTHREAD_MUTEX_INITIALIZER;

/* A new server on the list (serversLock held). */
static CorRedis*
serverAdd(const char* name, const RedisUrl* url, int timeoutMs,
          int connectTimeoutMs)
{
    CorRedis** grown = realloc(servers, (serverCount + 1) * sizeof(*servers));
    CorRedis* s = calloc(1, sizeof(*s));

    if (grown != NULL) {
        servers = grown;
    }
    if (grown == NULL || s == NULL || (s->name = strdup(name)) == NULL) {
        free(s);
        return NULL;
    }
    /* A name that /metrics can quote as it is. */
    for (char* c = s->name; *c != '\0'; c++) {
        *c = *c == '"' || *c == '\\' ? '_' : *c;
    }
    s->url = *url;
    s->timeoutMs = timeoutMs;
    s->connectTimeoutMs = connectTimeoutMs;
    s->index = serverCount;
    servers[serverCount++] = s;
    return s;
}

static CorRedis*
serverFind(const char* nameOrUrl, char* why, size_t whyLen)
{
    CorRedis* found = NULL;
    RedisUrl url;

    if (strstr(nameOrUrl, "://") != NULL
        && corRedisUrlParse(nameOrUrl, &url, why, whyLen) != 0) {
        return NULL;
    }
    pthread_mutex_lock(&serversLock);
    for (unsigned i = 0; found == NULL && i < serverCount; i++) {
        if (strcmp(servers[i]->name, nameOrUrl) == 0) {
            found = servers[i];
        }
    }
    if (found == NULL && strstr(nameOrUrl, "://") != NULL) {
        /* Its name is the URL without the password: the same URL is the
         * same server, whichever way its password was written. */
        for (unsigned i = 0; found == NULL && i < serverCount; i++) {
            if (strcmp(servers[i]->name, url.name) == 0
                && strcmp(servers[i]->url.password, url.password) == 0) {
                found = servers[i];
            }
        }
        if (found == NULL) {
            found = serverAdd(url.name, &url, TIMEOUT_MS, CONNECT_TIMEOUT_MS);
        }
        if (found == NULL) {
            snprintf(why, whyLen, "no memory for Redis %s", url.name);
        }
    } else if (found == NULL) {
        snprintf(why, whyLen,
                 "no Redis server named '%s' (the redis module's servers: "
                 "name, or a redis:// URL)",
                 nameOrUrl);
    }
    pthread_mutex_unlock(&serversLock);
    return found;
}

static const char*
serverName(const CorRedis* s)
{
    return s->name;
}

static int
pipeline(CorRedis* s, const CorRedisCommand* cmds, unsigned count,
         CorRedisReply** replies, char* why, size_t whyLen)
{
    for (unsigned i = 0; i < count; i++) {
        replies[i] = NULL;
        if (cmds[i].argc < 1) {
            snprintf(why, whyLen, "Redis %s: an empty command", s->name);
            return -EINVAL;
        }
    }
    if (count == 0) {
        snprintf(why, whyLen, "Redis %s: no command", s->name);
        return -EINVAL;
    }
    return corRestMayPark()
               ? corRedisLoopPipeline(s, cmds, count, replies, why, whyLen)
               : corRedisThreadPipeline(s, cmds, count, replies, why, whyLen);
}

static const CorRedisOps ops = {
    .server = serverFind,
    .name = serverName,
    .pipeline = pipeline,
    .send = corRedisLoopSend,
    .replyFree = corRedisReplyDestroy,
};

/* ---- Configuration ------------------------------------------------------- */

static int
serverRead(CorModule* m, const CorConf* entry, void* record, unsigned index)
{
    static const char* const keys[] = { "name", "url", "timeout",
                                        "connect_timeout", NULL };
    CorConfErrors* e = corModuleErrors(m);
    const char* name = corConfString(entry, "name", NULL, e);
    const char* text = corConfString(entry, "url", NULL, e);
    int timeoutMs = (int)corConfDurationMs(entry, "timeout", TIMEOUT_MS, 1,
                                           600000, e);
    int connectMs = (int)corConfDurationMs(entry, "connect_timeout",
                                           CONNECT_TIMEOUT_MS, 1, 600000, e);
    char where[32];
    char why[256];
    RedisUrl url;
    int rc = 0;

    snprintf(where, sizeof(where), "servers[%u]", index);
    corConfUnknownKeys(entry, where, keys, e);
    if (name == NULL || name[0] == '\0' || strstr(name, "://") != NULL
        || name[strcspn(name, "\"\\\r\n")] != '\0') {
        corModuleError(m, entry,
                       "%s: a name (what modules call the server by: no "
                       "\"://\", quote or backslash) is needed",
                       where);
        rc = -1;
    }
    if (text == NULL || corRedisUrlParse(text, &url, why, sizeof(why)) != 0) {
        corModuleError(m, text != NULL ? corConfGet(entry, "url") : entry,
                       "%s: url: %s", where,
                       text != NULL ? why
                                    : "expected redis://[user:password@]"
                                      "host[:port][/db] or rediss://...");
        rc = -1;
    }
    if (rc == 0) {
        pthread_mutex_lock(&serversLock);
        for (unsigned i = 0; i < serverCount; i++) {
            if (strcmp(servers[i]->name, name) == 0) {
                corModuleError(m, entry, "%s: a second server named '%s'",
                               where, name);
                rc = -1;
            }
        }
        *(CorRedis**)record = rc == 0
                                  ? serverAdd(name, &url, timeoutMs, connectMs)
                                  : NULL;
        pthread_mutex_unlock(&serversLock);
        if (rc == 0 && *(CorRedis**)record == NULL) {
            corModuleError(m, entry, "%s: no memory", where);
            rc = -1;
        }
    }
    return rc;
}

static void
redisMetrics(CorMetricsOut* out, void* arg)
{
    (void)arg;
    pthread_mutex_lock(&serversLock);
    corMetricsPrintf(out, "# HELP cor_redis_commands_total Redis commands "
                          "answered, or failed without an answer.\n"
                          "# TYPE cor_redis_commands_total counter\n");
    for (unsigned i = 0; i < serverCount; i++) {
        corMetricsPrintf(
            out,
            "cor_redis_commands_total{server=\"%s\",result=\"answered\"} "
            "%llu\n"
            "cor_redis_commands_total{server=\"%s\",result=\"failed\"} "
            "%llu\n",
            servers[i]->name,
            (unsigned long long)atomic_load(&servers[i]->commands),
            servers[i]->name,
            (unsigned long long)atomic_load(&servers[i]->failed));
    }
    corMetricsPrintf(out, "# HELP cor_redis_writes_total Batches of "
                          "commands written to Redis (pipelined: many "
                          "commands a write).\n"
                          "# TYPE cor_redis_writes_total counter\n");
    for (unsigned i = 0; i < serverCount; i++) {
        corMetricsPrintf(out, "cor_redis_writes_total{server=\"%s\"} %llu\n",
                         servers[i]->name,
                         (unsigned long long)atomic_load(&servers[i]->writes));
    }
    corMetricsPrintf(out, "# HELP cor_redis_connects_total Connections "
                          "opened to Redis.\n"
                          "# TYPE cor_redis_connects_total counter\n");
    for (unsigned i = 0; i < serverCount; i++) {
        corMetricsPrintf(out, "cor_redis_connects_total{server=\"%s\"} %llu\n",
                         servers[i]->name,
                         (unsigned long long)atomic_load(
                             &servers[i]->connects));
    }
    pthread_mutex_unlock(&serversLock);
}

static int
redisInit(CorModule* m, const CorConf* conf)
{
    unsigned count = 0;

    /* The client first: a module after this one that names a server
     * hears of that server, not of a missing client, when a server's
     * entry was wrong. */
    if (corRedisProvide(m, &ops) != 0) {
        return -1;
    }
    if (corConfGet(conf, "servers") != NULL
        && corModuleRecordsRead(m, conf, "servers", "{ name, url }",
                                sizeof(CorRedis*), serverRead, NULL, &count)
               == NULL) {
        return -1;
    }
    return corMetricsSourceAdd(m, redisMetrics, NULL);
}

static void
redisLoopExit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    (void)loop;
    (void)index;
    corRedisLoopExit();
}

static void
redisExit(CorModule* m)
{
    (void)m;
    corRedisHandoffStop();
    for (unsigned i = 0; i < serverCount; i++) {
        free(servers[i]->name);
        free(servers[i]);
    }
    free(servers);
    servers = NULL;
    serverCount = 0;
}

COR_MODULE(redis, .init = redisInit, .loopExit = redisLoopExit,
           .exit = redisExit);
