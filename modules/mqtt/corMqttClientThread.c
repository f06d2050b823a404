/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MQTT publishes off the loops (a worker, blocking mode, a notification's
 * thread): each thread keeps one connection per broker and makes one
 * publish at a time on it: the connection kit driven by poll()
 * (corKitConnReadWait, corKitConnFlushWait), whose waits a stop or the
 * caller's cancel ends. An acknowledgement of an earlier publish that timed out
 * may still come first: it is read past (a PUBREC of one is released, so
 * that the broker lets its id go). A thread sends no PINGREQ between its
 * publishes: a connection idle past one and a half keep alives (which
 * the broker has closed by then) is replaced before it is used, and one
 * that fails under a publish is replaced and the message published
 * again, DUP set: at once, then (the broker is gone) after a back-off, as
 * the loop's links do, until its deadline, if the broker served this
 * process before (corMqttServed).
 */
#include "corMqttClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ThreadLink {
    CorKitKept kept; /* on the thread's links: its connection,
                      * its bytes (what came and is not yet a
                      * packet, what goes) */
    CorMqttBroker broker;
    char name[300];
    uint16_t nextId;
    unsigned keepAliveMs;
    uint64_t lastUsedMs;
} ThreadLink;

static __thread CorList threadLinks;

/* The key of b among the thread's kept connections: its name, version,
 * user and password (each with its length: no two brokers alike), as
 * corMqttBrokerSame tells brokers apart. */
static void
brokerKey(const CorMqttBroker* b, char* key, size_t cap)
{
    char name[300];

    snprintf(key, cap, "%s %u %d%zu:%s %d%zu:%s",
             corMqttBrokerName(b, name, sizeof(name)), b->version, b->hasUser,
             strlen(b->user), b->user, b->hasPassword, strlen(b->password),
             b->password);
}

/* This thread's connection to b: a kept one not idle too long, or a new
 * one. NULL with rc and why. */
static ThreadLink*
linkFor(const CorMqttBroker* b, uint64_t deadlineMs, int* rc, char* why,
        size_t whyLen)
{
    char key[2 * COR_MQTT_CRED_MAX + 340];
    char clientId[64];
    CorMqttSession s = { .persistent = false };
    CorKitKept* kk;
    ThreadLink* l;
    CorConn* conn;

    brokerKey(b, key, sizeof(key));
    kk = corKitKeptFind(&threadLinks, key);
    l = kk != NULL ? corContainerOf(kk, ThreadLink, kept) : NULL;
    if (l != NULL && l->kept.conn != NULL
        && (l->keepAliveMs == 0
            || corEvClockMs() - l->lastUsedMs < l->keepAliveMs * 3 / 2)) {
        return l;
    }
    if (l == NULL) {
        l = calloc(1, sizeof(*l));
        if (l == NULL || corKitKeptAdd(&threadLinks, &l->kept, key) != 0) {
            free(l);
            *rc = -ENOMEM;
            snprintf(why, whyLen, "no memory for a connection");
            return NULL;
        }
        l->broker = *b;
        corMqttBrokerName(b, l->name, sizeof(l->name));
    }
    /* A kept one too old: l stays, for its input buffer and packet ids. */
    corKitKeptClose(&l->kept);
    corMqttClientIdMake(clientId, sizeof(clientId));
    conn = corMqttSessionOpen(b, clientId, deadlineMs, &s, &l->kept.k.in, rc,
                              why, whyLen);
    if (conn == NULL) {
        return NULL;
    }
    corKitKeptAttach(&l->kept, conn);
    l->keepAliveMs = s.keepAliveS * 1000;
    return l;
}

static int
packetSend(ThreadLink* l, const CorMqttPacket* pkt, uint64_t deadlineMs)
{
    int rc = corMqttBufPut(&l->kept.k.out, l->broker.version, pkt);

    return rc == 0 ? corKitConnFlushWait(&l->kept.k, corMqttLeftMs(deadlineMs))
                   : rc;
}

/* The next whole packet into *pkt (it points into l->kept.k.in until the
 * next call): its length, or -errno with why. */
static int
packetNext(ThreadLink* l, size_t* used, CorMqttPacket* pkt, uint64_t deadlineMs,
           char* why, size_t whyLen)
{
    corBufConsume(&l->kept.k.in, *used);
    *used = 0;
    for (;;) {
        CorMqttStatus st = { 0 };
        ssize_t n;
        int rc = corMqttDecode(corBufHead(&l->kept.k.in),
                               corBufPending(&l->kept.k.in), l->broker.version,
                               COR_MQTT_READ_MAX, pkt, &st);

        if (rc != 0) {
            if (rc < 0) {
                snprintf(why, whyLen, "%s: a bad packet: %s", l->name,
                         st.reason);
            }
            *used = rc > 0 ? (size_t)rc : 0;
            return rc < 0 ? -EPROTO : rc;
        }
        if (corMqttInputReserve(&l->kept.k.in, st.need) != 0) {
            snprintf(why, whyLen, "no memory for a packet");
            return -ENOMEM;
        }
        n = corKitConnReadWait(&l->kept.k, corMqttLeftMs(deadlineMs));
        if (n <= 0) {
            snprintf(why, whyLen, "%s: %s", l->name,
                     n == 0            ? "the broker closed the connection"
                     : n == -ETIMEDOUT ? "no acknowledgement in time"
                                       : strerror((int)-n));
            return n == 0 ? -ECONNRESET : (int)n;
        }
    }
}

/*
 * What pkt means to the publish of id at qos: 1 its end, 0 read on, or
 * -errno with why. A PUBREC is answered with PUBREL (whoever's it is).
 */
static int
packetTake(ThreadLink* l, uint16_t id, unsigned qos, const CorMqttPacket* pkt,
           uint64_t deadlineMs, char* why, size_t whyLen)
{
    bool mine = pkt->packetId == id;

    if (pkt->type == COR_MQTT_PUBREC && pkt->reasonCode < 0x80) {
        CorMqttPacket rel = { .type = COR_MQTT_PUBREL,
                              .packetId = pkt->packetId };

        return packetSend(l, &rel, deadlineMs);
    }
    if ((pkt->type == COR_MQTT_PUBACK || pkt->type == COR_MQTT_PUBREC
         || pkt->type == COR_MQTT_PUBCOMP)
        && mine && pkt->reasonCode >= 0x80) {
        snprintf(why, whyLen,
                 "%s refused the message: %s (reason code "
                 "0x%02x)",
                 l->name,
                 corMqttReasonText(COR_MQTT_V5, false, pkt->reasonCode),
                 pkt->reasonCode);
        return -EACCES;
    }
    if ((pkt->type == COR_MQTT_PUBACK && qos >= 1)
        || (pkt->type == COR_MQTT_PUBCOMP && qos == 2)) {
        if (mine && qos == 2 && pkt->type == COR_MQTT_PUBACK) {
            corMqttDowngradeSay(&l->broker, l->name);
        }
        return mine ? 1 : 0;
    }
    if (pkt->type == COR_MQTT_PUBACK || pkt->type == COR_MQTT_PUBREC
        || pkt->type == COR_MQTT_PUBCOMP || pkt->type == COR_MQTT_PINGRESP) {
        return 0; /* an earlier publish's, timed out */
    }
    snprintf(why, whyLen, "%s: %s", l->name,
             pkt->type == COR_MQTT_DISCONNECT
                 ? corMqttReasonText(COR_MQTT_V5, false, pkt->reasonCode)
                 : "an unexpected packet");
    return -EPROTO;
}

/* One attempt on l. Returns 0, or -errno with why. */
static int
publishOn(ThreadLink* l, const CorMqttMessage* msg, bool dup, char* why,
          size_t whyLen)
{
    uint16_t id = 0;
    size_t used = 0;
    int rc;

    if (msg->qos > 0) {
        l->nextId = l->nextId == UINT16_MAX ? 1 : l->nextId + 1;
        id = l->nextId;
    }
    rc = corMqttBufPublish(&l->kept.k.out, msg, id, dup);
    if (rc == 0) {
        rc = corKitConnFlushWait(&l->kept.k, corMqttLeftMs(msg->deadlineMs));
        if (rc < 0) {
            snprintf(why, whyLen, "%s: %s", l->name, strerror(-rc));
        }
    } else {
        snprintf(why, whyLen, "the codec refused the PUBLISH");
    }
    while (rc == 0 && msg->qos > 0) {
        CorMqttPacket pkt;

        rc = packetNext(l, &used, &pkt, msg->deadlineMs, why, whyLen);
        if (rc > 0) {
            rc = packetTake(l, id, msg->qos, &pkt, msg->deadlineMs, why,
                            whyLen);
        }
        if (rc == 1) {
            break;
        }
    }
    corBufConsume(&l->kept.k.in, used);
    return rc < 0 ? rc : 0;
}

/* Whether a publish that failed with rc may go again (the connection, or
 * the broker, went away). */
static bool
retryable(int rc)
{
    return rc == -ECONNRESET || rc == -EPIPE || rc == -ECONNREFUSED;
}

/*
 * A broker that served this process went away: wait for it as the loop's
 * links do, until the message's deadline: try again at once the first
 * time (it may have closed an idle connection), then after a back-off
 * that doubles. Returns 0 to try again, -1 to stop.
 */
static int
backoffWait(const CorMqttBroker* b, int attempt, uint64_t* backoffMs,
            uint64_t deadlineMs, const char* why)
{
    char name[300];
    uint64_t left = (uint64_t)corMqttLeftMs(deadlineMs);
    uint64_t ms = *backoffMs < left ? *backoffMs : left;
    short revents;

    if (left == 0) {
        return -1;
    }
    if (attempt == 0) {
        return 0;
    }
    corLog(COR_LOG_WARN,
           "mqtt: publisher %s: %s; connecting again in "
           "%llu ms",
           corMqttBrokerName(b, name, sizeof(name)), why,
           (unsigned long long)ms);
    *backoffMs = corMqttBackoffNext(*backoffMs);
    return corRestWaitFd(-1, 0, (int)ms, &revents) < 0 ? -1 : 0;
}

int
corMqttPublishOnThread(const CorMqttMessage* msg, char* why, size_t whyLen)
{
    uint64_t backoffMs = corMqttConf.reconnectMinMs;
    int rc;

    for (int attempt = 0;; attempt++) {
        ThreadLink* l = linkFor(msg->broker, msg->deadlineMs, &rc, why, whyLen);

        if (l != NULL) {
            rc = publishOn(l, msg, attempt > 0, why, whyLen);
            l->lastUsedMs = corEvClockMs();
            if (rc == 0) {
                return 0;
            }
            /* A timeout leaves an ack to come, which the next publish
             * reads past; anything else leaves the connection in doubt. */
            if (rc != -ETIMEDOUT && rc != -EACCES) {
                corKitKeptClose(&l->kept);
            }
        }
        if (!corMqttServed(msg->broker) || !retryable(rc)
            || backoffWait(msg->broker, attempt, &backoffMs, msg->deadlineMs,
                           why)
                   != 0) {
            break;
        }
    }
    return rc == -EPIPE ? -ECONNRESET : rc;
}
