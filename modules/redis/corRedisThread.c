/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Redis off the loops (a worker, blocking mode, a thread of a module's
 * own): each thread keeps one connection per server and sends a
 * caller's commands in one write, then reads their replies, waiting with
 * poll() through the connection kit (corKitConnFlushWait,
 * corKitConnReadWait: a stop or the request's cancel ends a wait). A
 * connection found readable between two calls (the server closed it, or
 * said what nobody asked) is closed and a new one made; one that failed
 * or timed out in a call is closed, since replies may still come on it.
 */
#include "corRedisInt.h"

#include <hiredis/read.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_ROOM 16384

static int
leftMs(uint64_t deadlineMs)
{
    uint64_t now = corEvClockMs();

    return deadlineMs > now ? (int)(deadlineMs - now) : 0;
}

static void
threadClose(RedisSlot* slot)
{
    corConnClose(slot->conn); /* NULL-safe */
    slot->conn = NULL;
    corKitConnFree(&slot->k);
    corKitConnInit(&slot->k, NULL, NULL);
    if (slot->reader != NULL) {
        redisReaderFree(slot->reader);
        slot->reader = NULL;
    }
}

/* Whether the kept connection is as it was left: nothing to read. */
static bool
threadIdle(RedisSlot* slot)
{
    struct pollfd pfd = { .fd = corConnTransport(slot->conn)->fd,
                          .events = POLLIN };

    return poll(&pfd, 1, 0) == 0;
}

/* The next reply, read as it comes until deadlineMs. */
static int
replyRead(CorRedis* s, RedisSlot* slot, uint64_t deadlineMs,
          CorRedisReply** replyP, char* why, size_t whyLen)
{
    for (;;) {
        void* reply = NULL;
        ssize_t n;

        if (redisReaderGetReply(slot->reader, &reply) != REDIS_OK) {
            snprintf(why, whyLen, "Redis %s: not RESP: %s", s->name,
                     redisReaderGetError(slot->reader));
            return -EPROTO;
        }
        if (reply != NULL) {
            *replyP = reply;
            return 0;
        }
        if (corBufReserve(&slot->k.in, READ_ROOM) != 0) {
            snprintf(why, whyLen, "no memory for a reply");
            return -ENOMEM;
        }
        n = corKitConnReadWait(&slot->k, leftMs(deadlineMs));
        if (n <= 0) {
            n = n == 0 ? -ECONNRESET : n == -EAGAIN ? -ETIMEDOUT : n;
            snprintf(why, whyLen, "Redis %s: %s", s->name,
                     n == -ECONNRESET  ? "the server closed the connection"
                     : n == -ETIMEDOUT ? "no answer in time"
                                       : strerror((int)-n));
            return (int)n;
        }
        if (redisReaderFeed(slot->reader, (const char*)corBufHead(&slot->k.in),
                            corBufPending(&slot->k.in))
            != REDIS_OK) {
            snprintf(why, whyLen, "no memory for a reply");
            return -ENOMEM;
        }
        corBufConsume(&slot->k.in, corBufPending(&slot->k.in));
    }
}

/* Write what k.out holds. */
static int
flush(CorRedis* s, RedisSlot* slot, uint64_t deadlineMs, char* why,
      size_t whyLen)
{
    int rc = corKitConnFlushWait(&slot->k, leftMs(deadlineMs));

    if (rc != 0) {
        snprintf(why, whyLen, "Redis %s: %s", s->name,
                 rc == -ETIMEDOUT ? "no room to write in time" : strerror(-rc));
    }
    return rc;
}

/* A new connection for the slot, AUTH and SELECT said and answered. */
static int
threadConnect(CorRedis* s, RedisSlot* slot, char* why, size_t whyLen)
{
    CorConnTarget target = { .host = s->url.host,
                             .port = s->url.port,
                             .tls = s->url.tls,
                             .connectTimeoutMs = s->connectTimeoutMs,
                             .fresh = true };
    uint64_t deadline = corEvClockMs() + (uint64_t)s->timeoutMs;
    unsigned replies = 0;
    int rc = 0;

    char failed[256];

    slot->conn = corConnOpen(&target, &rc, failed, sizeof(failed));
    if (slot->conn == NULL) {
        snprintf(why, whyLen, "Redis %s: %s", s->name, failed);
        corRedisSlotDown(slot, rc, failed);
        return rc;
    }
    atomic_fetch_add_explicit(&s->connects, 1, memory_order_relaxed);
    corKitConnAttach(&slot->k, corConnTransport(slot->conn));
    slot->reader = corRedisReaderNew();
    if (slot->reader == NULL
        || corRedisPrelude(&s->url, &slot->k.out, &replies) != 0) {
        snprintf(why, whyLen, "no memory for a connection");
        rc = -ENOMEM;
    } else if (replies > 0) {
        rc = flush(s, slot, deadline, why, whyLen);
    }
    while (rc == 0 && replies-- > 0) {
        CorRedisReply* reply = NULL;

        rc = replyRead(s, slot, deadline, &reply, why, whyLen);
        if (rc == 0 && reply->type == COR_REDIS_ERROR) {
            snprintf(why, whyLen, "Redis %s: AUTH or SELECT refused: %s",
                     s->name, reply->str);
            rc = -EACCES;
            corRedisSlotDown(slot, rc, why);
        }
        corRedisReplyDestroy(reply);
    }
    if (rc != 0) {
        threadClose(slot);
    }
    return rc;
}

int
corRedisThreadPipeline(CorRedis* s, const CorRedisCommand* cmds, unsigned count,
                       CorRedisReply** replies, char* why, size_t whyLen)
{
    RedisSlot* slot = corRedisSlot(s);
    uint64_t deadline;
    unsigned got = 0;
    int rc = 0;

    if (slot == NULL) {
        snprintf(why, whyLen, "no memory");
        return -ENOMEM;
    }
    if (slot->conn != NULL && !threadIdle(slot)) {
        threadClose(slot);
    }
    if (slot->conn == NULL
        && ((rc = corRedisSlotWaiting(slot, s, why, whyLen)) != 0
            || (rc = threadConnect(s, slot, why, whyLen)) != 0)) {
        atomic_fetch_add_explicit(&s->failed, count, memory_order_relaxed);
        return rc;
    }
    for (unsigned i = 0; rc == 0 && i < count; i++) {
        rc = corRedisFormat(&cmds[i], &slot->k.out);
        if (rc != 0) {
            snprintf(why, whyLen, "Redis %s: %s", s->name,
                     rc == -EINVAL ? "an empty command" : "no memory");
        }
    }
    deadline = corEvClockMs() + (uint64_t)s->timeoutMs;
    if (rc == 0) {
        atomic_fetch_add_explicit(&s->writes, 1, memory_order_relaxed);
        rc = flush(s, slot, deadline, why, whyLen);
    }
    while (rc == 0 && got < count) {
        rc = replyRead(s, slot, deadline, &replies[got], why, whyLen);
        got += rc == 0;
    }
    if (rc != 0) {
        while (got > 0) {
            corRedisReplyDestroy(replies[--got]);
        }
        for (unsigned i = 0; i < count; i++) {
            replies[i] = NULL;
        }
        threadClose(slot);
        atomic_fetch_add_explicit(&s->failed, count, memory_order_relaxed);
        return rc;
    }
    corRedisSlotUp(slot);
    atomic_fetch_add_explicit(&s->commands, count, memory_order_relaxed);
    return 0;
}
