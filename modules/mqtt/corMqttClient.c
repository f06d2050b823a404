/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT client on a loop: every publish of the loop to one broker
 * shares one connection (a link), as the cor:// client's calls share a
 * peer. A publish puts itself at the tail of its link's queue and parks;
 * the loop does the rest: it writes the queue's head as the window allows
 * (QoS 1 and 2 messages unacknowledged are at most the broker's Receive
 * Maximum, and corMqttConf.maxInFlight), reads every packet that comes,
 * and wakes each publish when its acknowledgement arrives (PUBACK, or
 * PUBREC, PUBREL, then PUBCOMP). A QoS 0 publish ends once its PUBLISH
 * is in the output, which the loop writes at its next iteration with all
 * this iteration added (one write for many), or, past OUT_HIGH of output
 * unwritten (a broker that reads slowly), once its bytes went to the
 * socket. One queue, written in order: the messages of one loop to one
 * topic reach the broker in the order they were published, resends
 * included.
 *
 * The connect (corConnOpen, TLS, CONNECT, CONNACK) runs in a coroutine of
 * its own, so no publisher's cancel takes a shared connection down;
 * publishes queue meanwhile. A link that fails after it served (the broker
 * went away) connects again after a back-off that doubles from
 * reconnectMinMs to reconnectMaxMs, as long as publishes wait on it, and
 * publishes again (DUP set) every message not acknowledged; one that
 * never connected, or that the broker refused (a CONNACK's reason code),
 * fails what waits on it with the reason, and the next publish tries
 * anew. A publish that timed out or was cancelled leaves the queue; if it
 * was in flight, its packet id stays taken (an corMqttOrphan) until its
 * acknowledgement comes or the connection ends, so a late PUBACK never
 * acknowledges another message.
 *
 * Keepalive: a PINGREQ once three quarters of the keep alive passed with
 * nothing written; the link is dropped (and connects again) when its
 * PINGRESP has not come a keep alive later.
 */
#include "corMqttLink.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Output not yet written past which a QoS 0 publish waits for the socket
 * rather than ending once its PUBLISH is in the output. */
#define OUT_HIGH ((size_t)1024 * 1024)

/* What a slot holds whose publish left (timed out, cancelled). */
Pub corMqttOrphan;

static __thread CorList loopLinks;

/* Subscriber links on every loop not yet forgotten: what a drain waits
 * for (counted on loop 0, read by the generation's main thread). */
static atomic_uint subscribersOpen;


/* ---- Lists and publishes ------------------------------------------------- */

/* Take p off its link (whichever list holds it) and free its slot. */
static void
pubUnlink(Link* l, Pub* p)
{
    if (l->pending == p) {
        l->pending = pubAfter(&l->queue, p);
    }
    corListRemove(&p->link);
    if (p->stage == PUB_SENT || p->stage == PUB_RELEASED) {
        l->slots[p->packetId - 1] = NULL;
        l->inFlight--;
    }
}

void
corMqttPubFinish(Link* l, Pub* p, int rc, const char* why)
{
    pubUnlink(l, p);
    p->done = true;
    p->rc = rc;
    if (rc != 0) {
        snprintf(p->why, sizeof(p->why), "%s", why);
    }
    if (p->park != 0) {
        corCoLoopWake(p->park);
    }
}

static void
listFail(Link* l, CorList* list, int rc, const char* why)
{
    while (!corListEmpty(list)) {
        corMqttPubFinish(l, pubFirst(list), rc, why);
    }
}

/* ---- Links ------------------------------------------------------------- */

static void
linkRelease(Link* l)
{
    if (--l->refs > 0) {
        return;
    }
    corKitConnFree(&l->k);
    free(l->slots);
    free(l);
}

/* Off the loop's list, its connection (if any) closed: the next publish
 * makes a new link. */
static void
linkForget(Link* l)
{
    corKitConnStop(&l->k);
    corConnClose(l->conn);      /* NULL-safe */
    l->conn = NULL;
    l->state = LINK_DEAD;
    corEvTimerStop(l->k.loop, &l->ping);
    corEvTimerStop(l->k.loop, &l->retry);
    if (corListLinked(&l->link)) {
        corListRemove(&l->link);
        if (l->group != NULL) {
            atomic_fetch_sub(&subscribersOpen, 1);
        }
        linkRelease(l);
    }
}

/* Nothing more will be tried: every publish on l fails, l is forgotten. */
static void
linkGiveUp(Link* l, int rc, const char* why)
{
    listFail(l, &l->written, rc, why);
    listFail(l, &l->queue, rc, why);
    linkForget(l);
}

void
corMqttLinkWrote(Link* l)
{
    while (!corListEmpty(&l->written)
           && pubFirst(&l->written)->outEnd <= l->k.sentBytes) {
        corMqttPubFinish(l, pubFirst(&l->written), 0, NULL);
    }
    if (corBufPending(&l->k.out) == 0 && l->bye) {
        corMqttLinkClose(l);    /* DISCONNECT written: let go */
    }
}

/* Write what the socket takes; EPOLLOUT brings the rest. */
void
corMqttLinkFlush(Link* l)
{
    if (l->state != LINK_READY) {
        return;
    }
    if (corKitConnFlush(&l->k) != 0) {
        corMqttLinkDrop(l, -ECONNRESET, "the connection failed while "
                        "writing");
        return;
    }
    corMqttLinkWrote(l);
}

/* A free packet id for a QoS 1/2 publish (window > inFlight). */
static uint16_t
slotTake(Link* l, Pub* p)
{
    while (l->slots[l->nextSlot] != NULL) {
        l->nextSlot = (l->nextSlot + 1) % l->window;
    }
    l->slots[l->nextSlot] = p;
    l->inFlight++;
    return (uint16_t)(l->nextSlot + 1);
}

/* Encode the queued publishes the window lets out. */
void
corMqttLinkPump(Link* l)
{
    while (l->state == LINK_READY && l->pending != NULL
           && (l->pending->msg->qos == 0 || l->inFlight < l->window)) {
        Pub* p = l->pending;
        uint16_t id = p->msg->qos > 0 ? slotTake(l, p) : 0;
        int rc = corMqttBufPublish(&l->k.out, p->msg, id, p->dup);

        l->pending = pubAfter(&l->queue, p);
        p->packetId = id;
        p->stage = p->msg->qos > 0 ? PUB_SENT : PUB_QUEUED;
        if (rc != 0) {
            corMqttPubFinish(l, p, rc, rc == -ENOMEM ? "no memory for a PUBLISH"
                      : "the codec refused the PUBLISH");
        } else if (p->msg->qos == 0 && corBufPending(&l->k.out) > OUT_HIGH) {
            corListRemove(&p->link);
            p->stage = PUB_WRITTEN;
            p->outEnd = l->k.sentBytes + corBufPending(&l->k.out);
            corListAppend(&l->written, &p->link);
        } else if (p->msg->qos == 0) {
            corMqttPubFinish(l, p, 0, NULL);
        }
    }
}

static void linkConnect(void* arg);
static void linkNoCoroutine(Link* l, int rc);

static void
retryFire(CorEvTimer* timer)
{
    Link* l = corContainerOf(timer, Link, retry);
    int rc;

    l->state = LINK_CONNECTING;
    l->refs++;                  /* the connector's */
    rc = corCoLoopSpawn(l->k.loop, linkConnect, l);
    if (rc != 0) {
        l->refs--;
        linkNoCoroutine(l, rc);
    }
}

/* No coroutine to connect in (the loop's cap, no stack): a subscriber
 * tries again after its back-off, saying so once; publishes fail. */
static void
linkNoCoroutine(Link* l, int rc)
{
    if (l->group == NULL || l->draining || rc == -ECANCELED
        || rc == -ENOTSUP) {
        linkGiveUp(l, rc, "no coroutine to connect");
        return;
    }
    if (!l->capSaid) {
        corLog(COR_LOG_WARN, "mqtt: %s: no coroutine to connect as %s "
               "(runtime.coroutines.per_loop reached?): trying again every "
               "%llu ms until one is free", l->name, l->group->clientId,
               (unsigned long long)l->backoffMs);
        l->capSaid = true;
    }
    l->state = LINK_WAITING;
    corEvTimerStart(l->k.loop, &l->retry, l->backoffMs, retryFire);
}

/* Connect again after the back-off, if anything waits (a subscriber
 * always does); else let go. */
static void
linkRetry(Link* l, const char* why)
{
    if ((corListEmpty(&l->queue) && l->group == NULL) || l->draining) {
        linkForget(l);
        return;
    }
    corLog(COR_LOG_WARN, "mqtt: %s %s: %s; connecting again in %llu ms",
           l->group != NULL ? "subscriber" : "publisher", l->name, why,
           (unsigned long long)l->backoffMs);
    l->state = LINK_WAITING;
    corEvTimerStart(l->k.loop, &l->retry, l->backoffMs, retryFire);
    l->backoffMs = corMqttBackoffNext(l->backoffMs);
}

/*
 * What a lost connection teaches: the back-off starts again only after a
 * connection that lived (one lost at once, a broker that refuses what it
 * is sent or a takeover fight, waits longer each time); a broker that
 * closed it with the window full refuses past a smaller one.
 */
static void
linkLost(Link* l, int rc)
{
    bool lived = corEvNow(l->k.loop) - l->readyMs >= corMqttConf.reconnectMaxMs;

    if (lived) {
        l->backoffMs = corMqttConf.reconnectMinMs;
    }
    if (rc == -ECONNRESET && l->inFlight == l->window && l->window > 1) {
        corLog(COR_LOG_WARN, "mqtt: %s closed the connection with %u "
               "messages in flight: at most %u from now on", l->name,
               l->inFlight, corMqttWindowShrink(&l->broker, l->inFlight));
    }
    if (rc == -ECONNRESET && l->group != NULL && !lived
        && l->broker.version == COR_MQTT_V311) {
        /* 3.1.1 says nothing: a takeover is a close. */
        corMqttTakeoverSay(&l->broker, l->name, l->clientId, true);
    }
}

/*
 * The connection is gone. QoS 0 messages written into it are lost (at
 * most once); every QoS 1/2 message in flight goes back to the queue, in
 * its place, to be published again with DUP set.
 */
void
corMqttLinkDrop(Link* l, int rc, const char* why)
{
    char text[640];

    if (l->state != LINK_READY) {
        return;
    }
    snprintf(text, sizeof(text), "%s: %s", l->name, why);
    linkLost(l, rc);
    corKitConnStop(&l->k);
    corConnClose(l->conn);
    l->conn = NULL;
    corEvTimerStop(l->k.loop, &l->ping);
    listFail(l, &l->written, rc, text);
    for (Pub* p = pubFirst(&l->queue); p != l->pending;
         p = pubAfter(&l->queue, p)) {
        p->stage = PUB_QUEUED;
        p->dup = true;
    }
    memset(l->slots, 0, l->window * sizeof(*l->slots));
    l->inFlight = 0;
    l->pending = pubFirst(&l->queue);
    l->k.out.len = l->k.out.off = 0;
    l->k.in.len = l->k.in.off = 0;
    l->pingDue = false;
    linkRetry(l, why);
}

/* ---- Connecting ---------------------------------------------------------- */

/* The session is open on conn: the loop takes it from here. */
static void
linkReady(Link* l, CorConn* conn, const CorMqttSession* s)
{
    Pub** slots = realloc(l->slots, s->window * sizeof(*slots));

    if (slots == NULL) {
        corConnClose(conn);
        linkGiveUp(l, -ENOMEM, "no memory for a connection");
        return;
    }
    memset(slots, 0, s->window * sizeof(*slots));
    l->slots = slots;
    l->window = s->window;
    l->nextSlot = 0;
    l->conn = conn;
    l->state = LINK_READY;
    l->served = true;
    l->capSaid = false;
    l->readyMs = corEvNow(l->k.loop);
    l->keepAliveMs = s->keepAliveS * 1000;
    l->k.sentMs = corEvNow(l->k.loop);
    l->gen++;
    if (corKitConnStart(&l->k, corConnTransport(conn), NULL) != 0) {
        corMqttLinkDrop(l, -EIO, "the loop cannot watch the connection");
        return;
    }
    corLog(COR_LOG_INFO, "mqtt: connected to %s as %s (window %u)", l->name,
           l->clientId, l->window);
    if (l->keepAliveMs > 0) {
        corEvTimerStart(l->k.loop, &l->ping, l->keepAliveMs / 4 + 1,
                        corMqttLinkPingFire);
    }
    if (l->group != NULL && corMqttSubscribeSend(l, s->present) != 0) {
        corMqttLinkDrop(l, -ENOMEM, "no memory for SUBSCRIBE");
    } else if (corMqttPacketsTake(&l->k) == 0) {
        corMqttLinkPump(l);
        corMqttLinkFlush(l);
    }
}

/* The link's own coroutine: the session opens, then the loop reads. */
static void
linkConnect(void* arg)
{
    Link* l = arg;
    CorMqttSession s = { .persistent = l->group != NULL };
    char why[400];
    int err = 0;
    CorConn* conn;

    if (l->group != NULL) {
        snprintf(l->clientId, sizeof(l->clientId), "%s", l->group->clientId);
    } else {
        corMqttClientIdMake(l->clientId, sizeof(l->clientId));
    }
    conn = corMqttSessionOpen(&l->broker, l->clientId,
                              corEvClockMs() + corMqttConf.connectTimeoutMs,
                              &s, &l->k.in, &err, why, sizeof(why));
    if (l->state == LINK_DEAD || l->draining) {
        /* NULL-safe. The loop stopped meanwhile, or the generation drains
         * and lets the session go to the next one. */
        corConnClose(conn);
        if (l->state != LINK_DEAD) {
            linkForget(l);
        }
    } else if (conn != NULL) {
        linkReady(l, conn, &s);
    } else if (err != -ECANCELED && (l->group != NULL
               || ((l->served || corMqttServed(&l->broker))
                   && err != -EACCES))) {
        linkRetry(l, why);
    } else {
        linkGiveUp(l, err, why);
    }
    linkRelease(l);
}

/* A new link to b (group's, for a subscriber), connecting in a coroutine
 * of its own. NULL with rc and why. */
static Link*
linkNew(const CorMqttBroker* b, const CorMqttSubGroup* group, int* rc,
        char* why, size_t whyLen)
{
    Link* l = calloc(1, sizeof(*l));

    if (l == NULL) {
        *rc = -ENOMEM;
        snprintf(why, whyLen, "no memory for a connection");
        return NULL;
    }
    l->broker = *b;
    l->group = group;
    corMqttBrokerName(b, l->name, sizeof(l->name));
    corKitConnInit(&l->k, corEvLoopCurrent(), &corMqttLinkOps);
    l->state = LINK_CONNECTING;
    l->backoffMs = corMqttConf.reconnectMinMs;
    l->refs = 2;                /* the list, the connector */
    corListInsert(&loopLinks, &l->link);
    if (group != NULL) {
        atomic_fetch_add(&subscribersOpen, 1);
    }
    *rc = corCoLoopSpawn(l->k.loop, linkConnect, l);
    if (*rc != 0) {
        snprintf(why, whyLen, "no coroutine to connect to %s", l->name);
        l->refs--;
        if (group != NULL && *rc == -EAGAIN) {
            linkNoCoroutine(l, *rc);    /* a subscriber waits for one */
            *rc = 0;
            return l;
        }
        linkForget(l);
        return NULL;
    }
    return l;
}

/* The loop's link to b, or a new one. NULL with rc and why. */
static Link*
linkFor(const CorMqttBroker* b, int* rc, char* why, size_t whyLen)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &loopLinks) {
        Link* l = corContainerOf(node, Link, link);

        if (l->group == NULL && corMqttBrokerSame(&l->broker, b)) {
            return l;
        }
    }
    return linkNew(b, NULL, rc, why, whyLen);
}

/* ---- One publish on a loop ----------------------------------------------- */

/* Wait until p is done or its deadline. May yield. */
static void
pubWait(Link* l, Pub* p)
{
    while (!p->done) {
        int left = corMqttLeftMs(p->msg->deadlineMs);
        int rc = left == 0 ? 0 : corCoLoopPark(&p->park, left);

        if (rc <= 0 && !p->done) {
            bool late = corMqttLeftMs(p->msg->deadlineMs) == 0;

            if (p->stage == PUB_SENT || p->stage == PUB_RELEASED) {
                /* Its id stays taken until its ack or the connection's
                 * end; as queued, pubUnlink leaves the slot alone. */
                l->slots[p->packetId - 1] = &corMqttOrphan;
                p->stage = PUB_QUEUED;
            }
            corMqttPubFinish(l, p, late ? -ETIMEDOUT : -ECANCELED,
                      late ? "no acknowledgement in time" : "cancelled");
        }
    }
}

int
corMqttPublishOnLoop(const CorMqttMessage* msg, char* why, size_t whyLen)
{
    Pub p = { .msg = msg, .stage = PUB_QUEUED };
    int rc;
    Link* l = linkFor(msg->broker, &rc, why, whyLen);

    if (l == NULL) {
        return rc;
    }
    l->refs++;
    corListAppend(&l->queue, &p.link);
    if (l->pending == NULL) {
        l->pending = &p;
    }
    corMqttLinkPump(l);
    corKitConnFlushSoon(&l->k);
    pubWait(l, &p);
    if (p.rc != 0) {
        snprintf(why, whyLen, "%s", p.why);
    }
    linkRelease(l);
    return p.rc;
}

int
corMqttLinkSubscriber(const CorMqttSubGroup* group, char* why, size_t whyLen)
{
    int rc;

    if (linkNew(&group->broker, group, &rc, why, whyLen) == NULL) {
        /* A subscriber's connection lives in a coroutine of loop 0. */
        if (rc == -ENOTSUP) {
            snprintf(why, whyLen, "subscriptions need coroutines, and this "
                     "cor was built with --disable-coroutines");
        }
        return rc;
    }
    return 0;
}

int
corMqttLinkSend(Link* l, const CorMqttPacket* pkt)
{
    int rc = corMqttBufPut(&l->k.out, l->broker.version, pkt);

    if (rc == 0) {
        corKitConnFlushSoon(&l->k);
    }
    return rc;
}

void
corMqttLinkResume(Link* l)
{
    if (l->k.readPaused) {
        corKitConnFlushSoon(&l->k);  /* it reads on if it may */
    }
}

CorList*
corMqttLoopLinks(void)
{
    return &loopLinks;
}

void
corMqttLinkClose(Link* l)
{
    linkForget(l);
}

unsigned
corMqttSubscribersOpen(void)
{
    return atomic_load(&subscribersOpen);
}

void
corMqttLinkHold(Link* l)
{
    l->refs++;
}

void
corMqttLinkRelease(Link* l)
{
    linkRelease(l);
}

void
corMqttClientLoopExit(void)
{
    while (!corListEmpty(&loopLinks)) {
        linkGiveUp(corContainerOf(corListFirst(&loopLinks), Link, link),
                   -ECANCELED, "the loop stopped");
    }
}
