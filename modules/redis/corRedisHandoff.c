/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corRedisSend where the loop cannot wait for Redis itself: a build
 * without coroutines has none to connect a loop's peer in. There a
 * command sent from a loop (limit's guard) goes to a thread of the
 * module's, which makes it the way a worker does (corRedisThread.c: its
 * own connection, poll()) and posts the reply back to the loop, where the
 * caller's function gets it as on the loop's own way. The blocking build
 * is the one for plain stack traces; it gets the same answers, not the
 * pipelining.
 */
#include "corRedisInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Threads that make the loops' commands (each its own connections). */
#define HANDOFF_THREADS 2

typedef struct {
    CorEvTask task; /* on the pool, then back on the loop */
    CorEvLoop* loop;
    CorRedis* server;
    CorRedisReplyFn fn;
    void* arg;
    int rc;
    CorRedisReply* reply;
    char why[256];
    int argc;
    const char** argv; /* into the block, after it */
    size_t* lens;
} Handoff;

static CorEvPool* threads;
static pthread_mutex_t threadsLock = PTHREAD_MUTEX_INITIALIZER;

static void
handoffDone(CorEvTask* task)
{
    Handoff* h = corContainerOf(task, Handoff, task);

    h->fn(h->arg, h->rc, h->reply, h->why);
    free(h);
}

static void
handoffRun(CorEvTask* task)
{
    Handoff* h = corContainerOf(task, Handoff, task);
    CorRedisCommand cmd = { h->argc, h->argv, h->lens };

    h->rc = corRedisThreadPipeline(h->server, &cmd, 1, &h->reply, h->why,
                                   sizeof(h->why));
    corEvLoopPost(h->loop, &h->task, handoffDone);
}

/* The command copied whole into one block with its record. */
static Handoff*
handoffNew(const CorRedisCommand* cmd)
{
    size_t bytes = 0;
    Handoff* h;
    char* at;

    for (int i = 0; i < cmd->argc; i++) {
        bytes += cmd->argvLen != NULL ? cmd->argvLen[i] : strlen(cmd->argv[i]);
    }
    h = calloc(1, sizeof(*h)
                      + (size_t)cmd->argc * (sizeof(char*) + sizeof(size_t))
                      + bytes);
    if (h == NULL) {
        return NULL;
    }
    h->argc = cmd->argc;
    h->argv = (const char**)(h + 1);
    h->lens = (size_t*)(h->argv + cmd->argc);
    at = (char*)(h->lens + cmd->argc);
    for (int i = 0; i < cmd->argc; i++) {
        h->lens[i] = cmd->argvLen != NULL ? cmd->argvLen[i]
                                          : strlen(cmd->argv[i]);
        memcpy(at, cmd->argv[i], h->lens[i]);
        h->argv[i] = at;
        at += h->lens[i];
    }
    return h;
}

int
corRedisHandoff(CorRedis* s, const CorRedisCommand* cmd, CorRedisReplyFn fn,
                void* arg, char* why, size_t whyLen)
{
    Handoff* h = handoffNew(cmd);

    pthread_mutex_lock(&threadsLock);
    if (threads == NULL) {
        threads = corEvPoolCreate(HANDOFF_THREADS);
    }
    pthread_mutex_unlock(&threadsLock);
    if (h == NULL || threads == NULL) {
        free(h);
        snprintf(why, whyLen, "Redis %s: no memory, or no thread", s->name);
        return -ENOMEM;
    }
    h->loop = corEvLoopCurrent();
    h->server = s;
    h->fn = fn;
    h->arg = arg;
    if (corEvPoolPost(threads, &h->task, handoffRun) != 0) {
        free(h);
        snprintf(why, whyLen, "Redis %s: the generation is stopping", s->name);
        return -ECANCELED;
    }
    return 0;
}

void
corRedisHandoffStop(void)
{
    if (threads != NULL) {
        corEvPoolShutdown(threads);
        corEvPoolDestroy(threads);
        threads = NULL;
    }
}
