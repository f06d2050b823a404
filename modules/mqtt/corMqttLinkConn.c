/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A link's connection to its broker: made, read, lost and made again.
 *
 * The connect (corConnOpen, TLS, CONNECT, CONNACK) runs in a coroutine of
 * its own, so no publisher's cancel takes a shared connection down;
 * publishes queue meanwhile. Then the connection kit (corKit.h) reads it
 * and wakes it: every packet a broker sends (acknowledgements of the
 * link's publishes, PINGRESP, DISCONNECT, and a subscriber's messages,
 * which corMqttSubscribe.c serves), and the publishes due are written
 * after each read.
 *
 * A link that fails after it served (the broker went away) connects again
 * after a back-off that doubles from reconnectMinMs to reconnectMaxMs, as
 * long as publishes wait on it, and publishes again (DUP set) every
 * message not acknowledged; one that never connected, or that the broker
 * refused (a CONNACK's reason code), fails what waits on it with the
 * reason, and the next publish tries anew.
 *
 * Keepalive: a PINGREQ once three quarters of the keep alive passed with
 * nothing written; the link is dropped (and connects again) when its
 * PINGRESP has not come a keep alive later.
 *
 * What waits on a link (its publishes, its references) is corMqttLink.c's.
 */
#include "corMqttLink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void linkDrop(Link* l, int rc, const char* why);
static void linkFlush(Link* l);
static void linkConnect(void* arg);
static void linkNoCoroutine(Link* l, int rc);

/* ---- Reading ------------------------------------------------------------- */

/* The publish of packet id, stage stage (NULL: none; &corMqttOrphan: left). */
static Pub*
slotFind(Link* l, uint16_t id)
{
    return id >= 1 && id <= l->window ? l->slots[id - 1] : NULL;
}

static void
orphanFree(Link* l, uint16_t id)
{
    l->slots[id - 1] = NULL;
    l->inFlight--;
}

/* The broker's word on a message it refused (a 5.0 reason code). */
static void
pubRefused(Link* l, Pub* p, const CorMqttPacket* pkt)
{
    char why[400];

    snprintf(why, sizeof(why),
             "%s refused the message: %s (reason code "
             "0x%02x)",
             l->name, corMqttReasonText(COR_MQTT_V5, false, pkt->reasonCode),
             pkt->reasonCode);
    corMqttPubFinish(l, p, -EACCES, why);
}

/* A PUBACK, PUBREC or PUBCOMP. Returns 0, or -1 when it fits nothing. */
static int
ackTake(Link* l, const CorMqttPacket* pkt)
{
    Pub* p = slotFind(l, pkt->packetId);
    CorMqttPacket rel = { .type = COR_MQTT_PUBREL, .packetId = pkt->packetId };

    if (p == NULL) {
        return -1;
    }
    if (pkt->type == COR_MQTT_PUBREC && pkt->reasonCode < 0x80) {
        if (p != &corMqttOrphan) {
            p->stage = PUB_RELEASED;
        }
        return corMqttBufPut(&l->k.out, l->broker.version, &rel) == 0 ? 0 : -1;
    }
    if (p == &corMqttOrphan) {
        orphanFree(l, pkt->packetId);
    } else if (pkt->reasonCode >= 0x80) {
        pubRefused(l, p, pkt);
    } else if ((pkt->type == COR_MQTT_PUBACK && p->stage == PUB_SENT)
               || (pkt->type == COR_MQTT_PUBCOMP && p->stage == PUB_RELEASED)) {
        if (p->msg->qos == 2 && pkt->type == COR_MQTT_PUBACK) {
            corMqttDowngradeSay(&l->broker, l->name); /* QoS 1 granted */
        }
        corMqttPubFinish(l, p, 0, NULL);
    } else {
        return -1;
    }
    return 0;
}

/* One packet. Returns 0, or -1 after dropping the link. */
static int
packetTake(Link* l, const CorMqttPacket* pkt)
{
    char why[400];
    int rc;

    switch (pkt->type) {
    case COR_MQTT_PUBACK:
    case COR_MQTT_PUBREC:
    case COR_MQTT_PUBCOMP:
        if (ackTake(l, pkt) == 0) {
            return 0;
        }
        snprintf(why, sizeof(why),
                 "a %s for packet id %u, which is not in "
                 "flight",
                 corMqttTypeName(pkt->type), pkt->packetId);
        break;
    case COR_MQTT_PINGRESP:
        l->pingDue = false;
        return 0;
    case COR_MQTT_DISCONNECT:
        snprintf(why, sizeof(why),
                 "the broker disconnected: %s (reason "
                 "code 0x%02x)",
                 corMqttReasonText(COR_MQTT_V5, false, pkt->reasonCode),
                 pkt->reasonCode);
        if (pkt->reasonCode == 0x8E) {
            corMqttTakeoverSay(&l->broker, l->name, l->clientId, false);
        }
        /* As a 3.1.1 broker's close: a takeover, a window refused. */
        linkDrop(l,
                 pkt->reasonCode == 0x8E || pkt->reasonCode == 0x93
                     ? -ECONNRESET
                     : -EPROTO,
                 why);
        return -1;
    default:
        rc = l->group != NULL ? corMqttInboundTake(l, pkt, why, sizeof(why))
                              : 1;
        if (rc == 0) {
            return 0;
        }
        if (rc > 0) {
            snprintf(why, sizeof(why), "an unexpected %s",
                     corMqttTypeName(pkt->type));
        }
        break;
    }
    linkDrop(l, -EPROTO, why);
    return -1;
}

/* Take every whole packet read (the kit's take). Returns 0, or -1 after
 * dropping. */
static int
packetsTake(CorKitConn* k)
{
    Link* l = corContainerOf(k, Link, k);
    const uint8_t* in = corBufHead(&k->in);
    size_t len = corBufPending(&k->in);
    size_t off = 0;

    while (l->state == LINK_READY && off < len
           && !(k->readPaused = corMqttInboundFull(l))) {
        CorMqttPacket pkt;
        CorMqttStatus st = { 0 };
        int n = corMqttDecode(in + off, len - off, l->broker.version,
                              COR_MQTT_READ_MAX, &pkt, &st);

        if (n == 0) {
            break;
        }
        if (n < 0) {
            char why[200];

            snprintf(why, sizeof(why), "a bad packet: %s", st.reason);
            linkDrop(l, -EPROTO, why);
            return -1;
        }
        if (packetTake(l, &pkt) != 0) {
            return -1;
        }
        off += (size_t)n;
    }
    corBufConsume(&k->in, off);
    return 0;
}

/* The socket has something, or a paused subscriber may read again: read
 * what the bound lets in, then write the publishes and answers due. */
static void
linkReadable(CorKitConn* k)
{
    Link* l = corContainerOf(k, Link, k);

    if (l->state != LINK_READY) {
        return; /* dropped earlier in this batch */
    }
    l->refs++; /* a packet may drop it: it stays readable here */
    if (corKitConnRead(k) == 0) {
        corMqttLinkPump(l);
        linkFlush(l);
    }
    corMqttLinkRelease(l);
}

static int
linkReserve(CorKitConn* k)
{
    return corMqttInputReserve(&k->in, 0);
}

/* A subscriber whose handlers are full reads nothing more. */
static bool
linkReadMay(CorKitConn* k)
{
    Link* l = corContainerOf(k, Link, k);

    return l->state == LINK_READY && !corMqttInboundFull(l);
}

static int
linkEnd(CorKitConn* k)
{
    linkDrop(corContainerOf(k, Link, k), -ECONNRESET,
             "the broker closed the connection");
    return -1;
}

static void
linkBroken(CorKitConn* k, int rc, const char* why)
{
    linkDrop(corContainerOf(k, Link, k), rc,
             rc == -ENOMEM ? "no memory for a packet" : why);
}

/* The kit wrote on its own (EPOLLOUT, the flush of the next iteration). */
static void
linkWroteKit(CorKitConn* k)
{
    Link* l = corContainerOf(k, Link, k);

    if (l->state == LINK_READY) {
        corMqttLinkWrote(l);
    }
}

static const CorKitOps linkOps = {
    .ready = linkReadable,
    .take = packetsTake,
    .end = linkEnd,
    .fail = linkBroken,
    .reserve = linkReserve,
    .readMay = linkReadMay,
    .wrote = linkWroteKit,
};

/* The keepalive. */
static void
linkPingFire(CorEvTimer* timer)
{
    Link* l = corContainerOf(timer, Link, ping);
    uint64_t now = corEvNow(l->k.loop);

    l->refs++; /* a failed write may drop it: it stays readable */
    /* A paused subscriber reads no PINGRESP, but pings still. */
    if (l->pingDue && !l->k.readPaused
        && now - l->pingSentMs >= l->keepAliveMs) {
        linkDrop(l, -ETIMEDOUT, "no PINGRESP within the keep alive");
    } else if ((!l->pingDue || l->k.readPaused)
               && now - l->k.sentMs >= l->keepAliveMs * 3 / 4) {
        CorMqttPacket ping = { .type = COR_MQTT_PINGREQ };

        if (corMqttBufPut(&l->k.out, l->broker.version, &ping) == 0) {
            l->pingDue = true;
            l->pingSentMs = now;
            linkFlush(l);
        }
    }
    if (l->state == LINK_READY) {
        corEvTimerStart(l->k.loop, &l->ping, l->keepAliveMs / 4 + 1,
                        linkPingFire);
    }
    corMqttLinkRelease(l);
}

/* Write what the socket takes; EPOLLOUT brings the rest. */
static void
linkFlush(Link* l)
{
    if (l->state != LINK_READY) {
        return;
    }
    if (corKitConnFlush(&l->k) != 0) {
        linkDrop(l, -ECONNRESET, "the connection failed while writing");
        return;
    }
    corMqttLinkWrote(l);
}

/* ---- Lost, and made again ----------------------------------------------- */

static void
retryFire(CorEvTimer* timer)
{
    Link* l = corContainerOf(timer, Link, retry);
    int rc;

    l->state = LINK_CONNECTING;
    l->refs++; /* the connector's */
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
    if (l->group == NULL || l->draining || rc == -ECANCELED || rc == -ENOTSUP) {
        corMqttLinkGiveUp(l, rc, "no coroutine to connect");
        return;
    }
    if (!l->capSaid) {
        corLog(COR_LOG_WARN,
               "mqtt: %s: no coroutine to connect as %s "
               "(runtime.coroutines.per_loop reached?): trying again every "
               "%llu ms until one is free",
               l->name, l->group->clientId, (unsigned long long)l->backoffMs);
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
        corMqttLinkClose(l);
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
        corLog(COR_LOG_WARN,
               "mqtt: %s closed the connection with %u "
               "messages in flight: at most %u from now on",
               l->name, l->inFlight,
               corMqttWindowShrink(&l->broker, l->inFlight));
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
static void
linkDrop(Link* l, int rc, const char* why)
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
    corMqttPubsFail(l, &l->written, rc, text);
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
linkOpened(Link* l, CorConn* conn, const CorMqttSession* s)
{
    Pub** slots = realloc(l->slots, s->window * sizeof(*slots));

    if (slots == NULL) {
        corConnClose(conn);
        corMqttLinkGiveUp(l, -ENOMEM, "no memory for a connection");
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
        linkDrop(l, -EIO, "the loop cannot watch the connection");
        return;
    }
    corLog(COR_LOG_INFO, "mqtt: connected to %s as %s (window %u)", l->name,
           l->clientId, l->window);
    if (l->group != NULL) {
        corMqttSessionPeerKeep(l);
    }
    if (l->keepAliveMs > 0) {
        corEvTimerStart(l->k.loop, &l->ping, l->keepAliveMs / 4 + 1,
                        linkPingFire);
    }
    if (l->group != NULL && corMqttSubscribeSend(l, s->present) != 0) {
        linkDrop(l, -ENOMEM, "no memory for SUBSCRIBE");
    } else if (packetsTake(&l->k) == 0) {
        corMqttLinkPump(l);
        linkFlush(l);
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
                              corEvClockMs() + corMqttConf.connectTimeoutMs, &s,
                              &l->k.in, &err, why, sizeof(why));
    if (l->state == LINK_DEAD || l->draining) {
        /* NULL-safe. The loop stopped meanwhile, or the generation drains
         * and lets the session go to the next one. */
        corConnClose(conn);
        if (l->state != LINK_DEAD) {
            corMqttLinkClose(l);
        }
    } else if (conn != NULL) {
        linkOpened(l, conn, &s);
    } else if (err != -ECANCELED
               && (l->group != NULL
                   || ((l->served || corMqttServed(&l->broker))
                       && err != -EACCES))) {
        linkRetry(l, why);
    } else {
        corMqttLinkGiveUp(l, err, why);
    }
    corMqttLinkRelease(l);
}

Link*
corMqttLinkNew(const CorMqttBroker* b, const CorMqttSubGroup* group, int* rc,
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
    corKitConnInit(&l->k, corEvLoopCurrent(), &linkOps);
    l->state = LINK_CONNECTING;
    l->backoffMs = corMqttConf.reconnectMinMs;
    l->refs = 2; /* the list, the connector */
    corMqttLinkAdd(l);
    *rc = corCoLoopSpawn(l->k.loop, linkConnect, l);
    if (*rc != 0) {
        snprintf(why, whyLen, "no coroutine to connect to %s", l->name);
        l->refs--;
        if (group != NULL && *rc == -EAGAIN) {
            linkNoCoroutine(l, *rc); /* a subscriber waits for one */
            *rc = 0;
            return l;
        }
        corMqttLinkClose(l);
        return NULL;
    }
    return l;
}

int
corMqttLinkSubscriber(const CorMqttSubGroup* group, char* why, size_t whyLen)
{
    int rc;

    if (corMqttLinkNew(&group->broker, group, &rc, why, whyLen) == NULL) {
        /* A subscriber's connection lives in a coroutine of loop 0. */
        if (rc == -ENOTSUP) {
            snprintf(why, whyLen,
                     "subscriptions need coroutines, and this "
                     "cor was built with --disable-coroutines");
        }
        return rc;
    }
    return 0;
}
