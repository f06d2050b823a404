/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Redis on a loop: every request of the loop shares one connection to
 * each server (a peer of the connection kit, connected in a coroutine of
 * its own so that no request's cancel takes it down). A command is
 * formatted into the peer's output at once and waits in its queue;
 * whatever the loop's handlers queue in one turn goes out in one write
 * before the loop sleeps, and Redis answers in order, so each reply is
 * the first waiter's. A waiter is a function (a guard's, called on the
 * loop) or a coroutine parked on its replies; a coroutine that gives up
 * (its request cancelled) leaves its place in the queue, and its replies
 * are dropped when they come.
 *
 * The first command in the queue must be answered within the server's
 * timeout, counted from when it was sent (or from the connect, for those
 * queued before it): past it the connection is failed, and with it every
 * command on it, at once, since those behind wait for the same server.
 * The next command connects again; a connect that fails starts the
 * back-off (corRedisSlot.c).
 */
#include "corRedisInt.h"

#include <hiredis/read.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for each read: a reply of this much comes in one. */
#define READ_ROOM 16384

/* A waiter; a block of the thread's (corChunkTake: a command's
 * allocations are what GET /visits costs beyond GET /hello). */
typedef struct {
    CorList link; /* the peer's queue, in the order sent */
    CorRedisReplyFn fn;
    void* arg;
    uint64_t sinceMs; /* queued, corEvNow time */
    size_t size;      /* the block's */
} Pending;

static void
pendingFree(Pending* q)
{
    corChunkGive(q, q->size);
}

struct RedisPeer {
    CorKitPeer base;
    CorRedis* server;
    struct redisReader* reader;
    CorList pending;
    uint64_t readyMs;  /* connected, corEvNow time; 0: not yet */
    size_t preludeLen; /* AUTH and SELECT, before the connect */
    bool armed;        /* the deadline's timer runs */
};

/* ---- The queue ----------------------------------------------------------- */

/* When the first waiter's answer is due: its send (or the connect, for
 * what was queued before it) and the timeout; 0 when none waits or the
 * peer is not connected yet (the connect has its own timeout). */
static uint64_t
headDueMs(const RedisPeer* p)
{
    CorList* first = corListFirst(&p->pending);
    uint64_t since;

    if (first == NULL || p->readyMs == 0) {
        return 0;
    }
    since = corContainerOf(first, Pending, link)->sinceMs;
    return (since > p->readyMs ? since : p->readyMs)
           + (uint64_t)p->server->timeoutMs;
}

/* Arm the deadline for the first waiter, unless it is armed: the timer
 * is not moved at each reply (a heap's remove and insert a read), but
 * looks again when it fires (peerExpired), so it is armed at most once
 * a timeout while answers come. */
static void
deadlineArm(RedisPeer* p)
{
    uint64_t due = headDueMs(p);

    if (due != 0 && !p->armed) {
        p->armed = true;
        corKitConnDeadline(&p->base.k, due - (uint64_t)p->server->timeoutMs,
                           (uint64_t)p->server->timeoutMs);
    }
}

static int
enqueue(RedisPeer* p, CorRedisReplyFn fn, void* arg)
{
    size_t size = sizeof(Pending);
    Pending* q = corChunkTake(&size);
    bool first = corListEmpty(&p->pending);

    if (q == NULL) {
        return -ENOMEM;
    }
    q->size = size;
    q->fn = fn;
    q->arg = arg;
    q->sinceMs = corEvNow(p->base.k.loop);
    corListAppend(&p->pending, &q->link);
    if (first) {
        deadlineArm(p);
    }
    return 0;
}

/* The reply of what AUTH and SELECT said: a refusal fails the peer. */
static void
preludeReply(void* arg, int rc, CorRedisReply* reply, const char* why)
{
    RedisPeer* p = arg;

    (void)why;
    if (rc == 0 && reply->type == COR_REDIS_ERROR) {
        char refused[300];

        snprintf(refused, sizeof(refused), "AUTH or SELECT refused: %s",
                 reply->str);
        corKitPeerFail(&p->base, -EACCES, refused);
    }
    corRedisReplyDestroy(reply);
}

/* ---- The peer's ops ------------------------------------------------------ */

static void
peerFree(CorKitPeer* base)
{
    RedisPeer* p = corContainerOf(base, RedisPeer, base);

    if (p->reader != NULL) {
        redisReaderFree(p->reader);
    }
    free(p);
}

/* The connection is gone: its slot forgets it (backing off when it never
 * connected, or AUTH refused), and every waiter fails. */
static void
peerFailed(CorKitPeer* base)
{
    RedisPeer* p = corContainerOf(base, RedisPeer, base);
    RedisSlot* slot = corRedisSlot(p->server);

    if (slot != NULL && slot->peer == p) {
        slot->peer = NULL;
        if (!base->connected || base->failure == -EACCES) {
            corRedisSlotDown(slot, base->failure, base->why);
        }
        corKitPeerRelease(base); /* the slot's */
    }
    while (!corListEmpty(&p->pending)) {
        Pending* q = corContainerOf(corListFirst(&p->pending), Pending, link);

        corListRemove(&q->link);
        if (q->fn != preludeReply) {
            atomic_fetch_add_explicit(&p->server->failed, 1,
                                      memory_order_relaxed);
        }
        q->fn(q->arg, base->failure, NULL, base->why);
        pendingFree(q);
    }
}

static bool
peerIdle(const CorKitPeer* base)
{
    return corListEmpty(&corContainerOf(base, const RedisPeer, base)->pending);
}

/* Before each flush: the first one after the connect starts the clock of
 * the commands queued meanwhile. */
static int
peerSend(CorKitPeer* base)
{
    RedisPeer* p = corContainerOf(base, RedisPeer, base);

    if (p->readyMs == 0) {
        p->readyMs = corEvNow(base->k.loop);
        p->preludeLen = 0;
        atomic_fetch_add_explicit(&p->server->connects, 1,
                                  memory_order_relaxed);
        deadlineArm(p);
    }
    return 0;
}

/* Every whole reply read, to its waiter in turn (the kit's take). */
static int
repliesTake(CorKitConn* k)
{
    RedisPeer* p = corContainerOf(k, RedisPeer, base.k);
    size_t len = corBufPending(&k->in);
    RedisSlot* slot = corRedisSlot(p->server);

    if (redisReaderFeed(p->reader, (const char*)corBufHead(&k->in), len)
        != REDIS_OK) {
        corKitPeerFail(&p->base, -ENOMEM, "no memory for a reply");
        return -1;
    }
    corBufConsume(&k->in, len);
    for (;;) {
        void* reply = NULL;
        Pending* q;

        if (redisReaderGetReply(p->reader, &reply) != REDIS_OK) {
            char why[200];

            snprintf(why, sizeof(why), "not RESP: %s",
                     redisReaderGetError(p->reader));
            corKitPeerFail(&p->base, -EPROTO, why);
            return -1;
        }
        if (reply == NULL) {
            break;
        }
        if (corListEmpty(&p->pending)) {
            corRedisReplyDestroy(reply);
            corKitPeerFail(&p->base, -EPROTO, "a reply to no command");
            return -1;
        }
        if (slot != NULL) {
            corRedisSlotUp(slot);
        }
        q = corContainerOf(corListFirst(&p->pending), Pending, link);
        corListRemove(&q->link);
        if (q->fn != preludeReply) {
            atomic_fetch_add_explicit(&p->server->commands, 1,
                                      memory_order_relaxed);
        }
        q->fn(q->arg, 0, reply, NULL);
        pendingFree(q);
        if (p->base.state == COR_KIT_PEER_DEAD) {
            return -1;
        }
    }
    deadlineArm(p);
    return 0;
}

static int
peerReserve(CorKitConn* k)
{
    return corBufReserve(&k->in, READ_ROOM);
}

/* The deadline fired: the first waiter's answer is late, or the waiter
 * it was armed for was answered and the next one's time is not up yet
 * (armed again for it). */
static void
peerExpired(CorKitConn* k)
{
    RedisPeer* p = corContainerOf(k, RedisPeer, base.k);
    uint64_t due = headDueMs(p);
    char why[96];

    p->armed = false;
    if (due == 0) {
        return;
    }
    if (due > corEvNow(k->loop)) {
        deadlineArm(p);
        return;
    }
    snprintf(why, sizeof(why), "no answer within %d ms", p->server->timeoutMs);
    corKitPeerFail(&p->base, -ETIMEDOUT, why);
}

static const CorKitOps kitOps = {
    .ready = corKitPeerReady,
    .take = repliesTake,
    .end = corKitPeerEnd,
    .fail = corKitPeerBroken,
    .reserve = peerReserve,
    .expired = peerExpired,
};

static const CorKitPeerOps peerOps = {
    .send = peerSend,
    .failed = peerFailed,
    .idle = peerIdle,
    .free = peerFree,
};

/* ---- Connecting ---------------------------------------------------------- */

/* A new peer for s in slot, AUTH and SELECT first in its output, its
 * connect started. Returns 0, or -errno with why (the slot backs off). */
static int
peerOpen(CorRedis* s, RedisSlot* slot, char* why, size_t whyLen)
{
    RedisPeer* p = calloc(1, sizeof(*p));
    unsigned replies = 0;
    int rc;

    if (p == NULL) {
        snprintf(why, whyLen, "no memory for a connection");
        return -ENOMEM;
    }
    corKitPeerInit(&p->base, &peerOps, corEvLoopCurrent(), &kitOps, s->url.host,
                   s->url.port);
    p->server = s;
    p->base.tls = s->url.tls;
    p->base.connectTimeoutMs = s->connectTimeoutMs;
    snprintf(p->base.name, sizeof(p->base.name), "Redis %s", s->name);
    p->reader = corRedisReaderNew();
    rc = p->reader != NULL ? corRedisPrelude(&s->url, &p->base.k.out, &replies)
                           : -ENOMEM;
    p->preludeLen = corBufPending(&p->base.k.out);
    while (rc == 0 && replies-- > 0) {
        rc = enqueue(p, preludeReply, p);
    }
    if (rc != 0) {
        corKitPeerRelease(&p->base);
        snprintf(why, whyLen, "no memory for a connection");
        return rc;
    }
    corKitPeerHold(&p->base); /* the slot's */
    slot->peer = p;
    rc = corKitPeerStart(&p->base, why, whyLen);
    if (rc == 0) {
        corKitPeerRelease(&p->base); /* ours: the slot keeps it */
    }
    return rc;
}

/* ---- Sending ------------------------------------------------------------- */

int
corRedisLoopSend(CorRedis* s, const CorRedisCommand* cmd, CorRedisReplyFn fn,
                 void* arg, char* why, size_t whyLen)
{
    RedisSlot* slot;
    RedisPeer* p;
    bool batch;
    int rc;

    if (corEvLoopCurrent() == NULL) {
        snprintf(why, whyLen, "Redis %s: not on a loop's thread", s->name);
        return -EPERM;
    }
    if (cmd->argc < 1) {
        snprintf(why, whyLen, "Redis %s: an empty command", s->name);
        return -EINVAL;
    }
    if (!COR_HAVE_COROUTINES) {
        return corRedisHandoff(s, cmd, fn, arg, why, whyLen);
    }
    slot = corRedisSlot(s);
    if (slot == NULL) {
        snprintf(why, whyLen, "no memory");
        return -ENOMEM;
    }
    if (slot->peer == NULL
        && ((rc = corRedisSlotWaiting(slot, s, why, whyLen)) != 0
            || (rc = peerOpen(s, slot, why, whyLen)) != 0)) {
        atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
        return rc;
    }
    p = slot->peer;
    /* The first command of a write: nothing before it but AUTH and
     * SELECT, which go with it. */
    batch = corBufPending(&p->base.k.out) == p->preludeLen;
    rc = corRedisFormat(cmd, &p->base.k.out);
    if (rc == 0) {
        rc = enqueue(p, fn, arg);
    }
    if (rc != 0) {
        /* What was formatted goes unanswered: the connection is lost. */
        corKitPeerFail(&p->base, rc, "no memory for a command");
        snprintf(why, whyLen, "no memory for a command");
        return rc;
    }
    if (batch) {
        atomic_fetch_add_explicit(&s->writes, 1, memory_order_relaxed);
    }
    corKitConnFlushSoon(&p->base.k);
    return 0;
}

/* ---- A coroutine's commands ----------------------------------------------
 *
 * The replies of one pipeline, gathered where they outlive the coroutine
 * that gave up on them: the last reply frees them then. */

typedef struct Gather Gather;

typedef struct {
    Gather* gather;
    CorRedisReply* reply;
} GatherItem;

struct Gather {
    size_t size;   /* the block's (corChunkTake) */
    unsigned left; /* replies still to come */
    bool abandoned;
    int rc; /* the first failure */
    char why[256];
    CorCoPark park;
    GatherItem items[];
};

static void
gatherFree(Gather* g, unsigned count)
{
    for (unsigned i = 0; i < count; i++) {
        corRedisReplyDestroy(g->items[i].reply);
    }
    corChunkGive(g, g->size);
}

static void
gatherReply(void* arg, int rc, CorRedisReply* reply, const char* why)
{
    GatherItem* item = arg;
    Gather* g = item->gather;

    item->reply = reply;
    if (rc != 0 && g->rc == 0) {
        g->rc = rc;
        snprintf(g->why, sizeof(g->why), "%s", why);
    }
    if (--g->left > 0) {
        return;
    }
    if (g->abandoned) {
        gatherFree(g, (unsigned)(item - g->items) + 1);
    } else if (g->park != 0) {
        corCoLoopWake(g->park);
    }
}

int
corRedisLoopPipeline(CorRedis* s, const CorRedisCommand* cmds, unsigned count,
                     CorRedisReply** replies, char* why, size_t whyLen)
{
    size_t size = sizeof(Gather) + count * sizeof(GatherItem);
    Gather* g = corChunkTake(&size);
    unsigned sent = 0;
    int rc = 0;

    if (g == NULL) {
        snprintf(why, whyLen, "no memory");
        return -ENOMEM;
    }
    g->size = size;
    g->left = 0;
    g->abandoned = false;
    g->rc = 0;
    g->park = 0;
    for (; sent < count; sent++) {
        g->items[sent] = (GatherItem){ .gather = g };
        g->left++;
        rc = corRedisLoopSend(s, &cmds[sent], gatherReply, &g->items[sent], why,
                              whyLen);
        if (rc != 0) {
            g->left--;
            break;
        }
    }
    /* No deadline of its own: every command is answered or failed by
     * its peer (a reply, the timeout, the connect's, the loop's stop),
     * so the wait needs no timer. */
    while (g->left > 0) {
        int waited = corCoLoopParkUntil(&g->park, 0);

        if (waited < 0 && g->left > 0) {
            g->abandoned = true; /* the last reply frees it */
            snprintf(why, whyLen, "Redis %s: cancelled", s->name);
            return waited;
        }
    }
    if (rc == 0 && g->rc != 0) {
        rc = g->rc;
        snprintf(why, whyLen, "%s", g->why);
    }
    for (unsigned i = 0; i < count; i++) {
        replies[i] = rc == 0 ? g->items[i].reply : NULL;
        if (rc == 0) {
            g->items[i].reply = NULL;
        }
    }
    gatherFree(g, sent);
    return rc;
}

void
corRedisLoopExit(void)
{
    corKitPeersStop(&peerOps);
}
