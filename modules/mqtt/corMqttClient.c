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
 * unwritten (corMqttLink.c: a broker that reads slowly), once its bytes
 * went to the socket. One queue, written in order: the messages of one
 * loop to one topic reach the broker in the order they were published,
 * resends included.
 *
 * A publish that timed out or was cancelled leaves the queue; if it was
 * in flight, its packet id stays taken (an corMqttOrphan) until its
 * acknowledgement comes or the connection ends, so a late PUBACK never
 * acknowledges another message.
 *
 * The link's connection (made, read, made again) is corMqttLinkConn.c's;
 * what waits on it, corMqttLink.c's.
 */
#include "corMqttLink.h"

#include <errno.h>
#include <stdio.h>

/* The loop's link to b, or a new one. NULL with rc and why. */
static Link*
linkFor(const CorMqttBroker* b, int* rc, char* why, size_t whyLen)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, corMqttLoopLinks())
    {
        Link* l = corContainerOf(node, Link, link);

        if (l->group == NULL && corMqttBrokerSame(&l->broker, b)) {
            return l;
        }
    }
    return corMqttLinkNew(b, NULL, rc, why, whyLen);
}

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
    corMqttLinkRelease(l);
    return p.rc;
}
