/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT client's side that reads: every packet a broker sends to a
 * link (acknowledgements of its publishes, PINGRESP, DISCONNECT, and a
 * subscriber's messages, which corMqttSubscribe.c serves), and the
 * keepalive that notices a broker gone quiet, on the connection kit
 * (corKit.h), which reads and wakes it. corMqttClient.c writes.
 */
#include "corMqttLink.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

    snprintf(why, sizeof(why), "%s refused the message: %s (reason code "
             "0x%02x)", l->name, corMqttReasonText(COR_MQTT_V5, false,
                                                   pkt->reasonCode),
             pkt->reasonCode);
    corMqttPubFinish(l, p, -EACCES, why);
}

/* A PUBACK, PUBREC or PUBCOMP. Returns 0, or -1 when it fits nothing. */
static int
ackTake(Link* l, const CorMqttPacket* pkt)
{
    Pub* p = slotFind(l, pkt->packetId);
    CorMqttPacket rel = { .type = COR_MQTT_PUBREL,
                          .packetId = pkt->packetId };

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
               || (pkt->type == COR_MQTT_PUBCOMP
                   && p->stage == PUB_RELEASED)) {
        if (p->msg->qos == 2 && pkt->type == COR_MQTT_PUBACK) {
            corMqttDowngradeSay(&l->broker, l->name);   /* QoS 1 granted */
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
        snprintf(why, sizeof(why), "a %s for packet id %u, which is not in "
                 "flight", corMqttTypeName(pkt->type), pkt->packetId);
        break;
    case COR_MQTT_PINGRESP:
        l->pingDue = false;
        return 0;
    case COR_MQTT_DISCONNECT:
        snprintf(why, sizeof(why), "the broker disconnected: %s (reason "
                 "code 0x%02x)", corMqttReasonText(COR_MQTT_V5, false,
                                                   pkt->reasonCode),
                 pkt->reasonCode);
        if (pkt->reasonCode == 0x8E) {
            corMqttTakeoverSay(&l->broker, l->name, l->clientId, false);
        }
        /* As a 3.1.1 broker's close: a takeover, a window refused. */
        corMqttLinkDrop(l, pkt->reasonCode == 0x8E || pkt->reasonCode == 0x93
                    ? -ECONNRESET : -EPROTO, why);
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
    corMqttLinkDrop(l, -EPROTO, why);
    return -1;
}

/* Take every whole packet read (the kit's take). Returns 0, or -1 after
 * dropping. */
int
corMqttPacketsTake(CorKitConn* k)
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
            corMqttLinkDrop(l, -EPROTO, why);
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
linkReady(CorKitConn* k)
{
    Link* l = corContainerOf(k, Link, k);

    if (l->state != LINK_READY) {
        return;                 /* dropped earlier in this batch */
    }
    l->refs++;      /* a packet may drop it: it stays readable here */
    if (corKitConnRead(k) == 0) {
        corMqttLinkPump(l);
        corMqttLinkFlush(l);
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
    corMqttLinkDrop(corContainerOf(k, Link, k), -ECONNRESET,
                    "the broker closed the connection");
    return -1;
}

static void
linkBroken(CorKitConn* k, int rc, const char* why)
{
    corMqttLinkDrop(corContainerOf(k, Link, k), rc,
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

const CorKitOps corMqttLinkOps = {
    .ready = linkReady,
    .take = corMqttPacketsTake,
    .end = linkEnd,
    .fail = linkBroken,
    .reserve = linkReserve,
    .readMay = linkReadMay,
    .wrote = linkWroteKit,
};

void
corMqttLinkPingFire(CorEvTimer* timer)
{
    Link* l = corContainerOf(timer, Link, ping);
    uint64_t now = corEvNow(l->k.loop);

    l->refs++;      /* a failed write may drop it: it stays readable */
    /* A paused subscriber reads no PINGRESP, but pings still. */
    if (l->pingDue && !l->k.readPaused
        && now - l->pingSentMs >= l->keepAliveMs) {
        corMqttLinkDrop(l, -ETIMEDOUT, "no PINGRESP within the keep alive");
    } else if ((!l->pingDue || l->k.readPaused)
               && now - l->k.sentMs >= l->keepAliveMs * 3 / 4) {
        CorMqttPacket ping = { .type = COR_MQTT_PINGREQ };

        if (corMqttBufPut(&l->k.out, l->broker.version, &ping) == 0) {
            l->pingDue = true;
            l->pingSentMs = now;
            corMqttLinkFlush(l);
        }
    }
    if (l->state == LINK_READY) {
        corEvTimerStart(l->k.loop, &l->ping, l->keepAliveMs / 4 + 1,
                        corMqttLinkPingFire);
    }
    corMqttLinkRelease(l);
}

