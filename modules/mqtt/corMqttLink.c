/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A loop's link to a broker as what waits on it: its publishes (one queue,
 * written in order, the window of packet ids in flight, the QoS 0 ones
 * that wait for the socket), its references, the loop's list of links,
 * and its end. The bottom of the loop client: its connection
 * (corMqttLinkConn.c), the subscriber (corMqttSubscribe.c) and a publish
 * (corMqttClient.c) call into it, and it calls none of them.
 */
#include "corMqttLink.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* Output not yet written past which a QoS 0 publish waits for the socket
 * rather than ending once its PUBLISH is in the output. */
#define OUT_HIGH ((size_t)1024 * 1024)

/* What a slot holds whose publish left (timed out, cancelled). */
Pub corMqttOrphan;

static __thread CorList loopLinks;

/* Subscriber links on every loop not yet forgotten: what a drain waits
 * for (counted on loop 0, read by the generation's main thread). */
static atomic_uint subscribersOpen;

/* ---- Publishes ----------------------------------------------------------- */

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

void
corMqttPubsFail(Link* l, CorList* list, int rc, const char* why)
{
    while (!corListEmpty(list)) {
        corMqttPubFinish(l, pubFirst(list), rc, why);
    }
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
            corMqttPubFinish(l, p, rc,
                             rc == -ENOMEM ? "no memory for a PUBLISH"
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

void
corMqttLinkWrote(Link* l)
{
    while (!corListEmpty(&l->written)
           && pubFirst(&l->written)->outEnd <= l->k.sentBytes) {
        corMqttPubFinish(l, pubFirst(&l->written), 0, NULL);
    }
    if (corBufPending(&l->k.out) == 0 && l->bye) {
        corMqttLinkClose(l); /* DISCONNECT written: let go */
    }
}

/* ---- Links --------------------------------------------------------------- */

void
corMqttLinkAdd(Link* l)
{
    corListInsert(&loopLinks, &l->link);
    if (l->group != NULL) {
        atomic_fetch_add(&subscribersOpen, 1);
    }
}

void
corMqttLinkRelease(Link* l)
{
    if (--l->refs > 0) {
        return;
    }
    corKitConnFree(&l->k);
    free(l->slots);
    free(l);
}

void
corMqttLinkClose(Link* l)
{
    corKitConnStop(&l->k);
    corConnClose(l->conn); /* NULL-safe */
    l->conn = NULL;
    l->state = LINK_DEAD;
    corEvTimerStop(l->k.loop, &l->ping);
    corEvTimerStop(l->k.loop, &l->retry);
    if (corListLinked(&l->link)) {
        corListRemove(&l->link);
        if (l->group != NULL) {
            atomic_fetch_sub(&subscribersOpen, 1);
        }
        corMqttLinkRelease(l);
    }
}

void
corMqttLinkGiveUp(Link* l, int rc, const char* why)
{
    corMqttPubsFail(l, &l->written, rc, why);
    corMqttPubsFail(l, &l->queue, rc, why);
    corMqttLinkClose(l);
}

void
corMqttLinkHold(Link* l)
{
    l->refs++;
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
        corKitConnFlushSoon(&l->k); /* it reads on if it may */
    }
}

CorList*
corMqttLoopLinks(void)
{
    return &loopLinks;
}

unsigned
corMqttSubscribersOpen(void)
{
    return atomic_load(&subscribersOpen);
}

void
corMqttClientLoopExit(void)
{
    while (!corListEmpty(&loopLinks)) {
        corMqttLinkGiveUp(corContainerOf(corListFirst(&loopLinks), Link, link),
                          -ECANCELED, "the loop stopped");
    }
}
