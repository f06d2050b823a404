/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A loop's connection to a broker (a link), shared by corMqttClient.c,
 * which runs it and publishes on it, and corMqttSubscribe.c, which
 * subscribes on one and serves the messages that come. Nothing outside
 * modules/mqtt/ includes it.
 */
#ifndef COR_MQTT_LINK_H
#define COR_MQTT_LINK_H

#include "corMqttClientInt.h"

typedef struct CorMqttLink Link;

typedef enum {
    PUB_QUEUED,
    PUB_SENT,                   /* PUBLISH written, its ack due */
    PUB_RELEASED,               /* QoS 2: PUBREL written, PUBCOMP due */
    PUB_WRITTEN                 /* QoS 0: waits for the socket */
} PubStage;

/* A publish waiting on a link; on its coroutine's stack. */
typedef struct Pub {
    struct Pub* next;
    struct Pub* prev;
    const CorMqttMessage* msg;
    PubStage stage;
    uint16_t packetId;
    bool dup;                   /* published before on a lost connection */
    uint64_t outEnd;            /* QoS 0: written when the output is past */
    CorCoPark park;
    bool done;
    int rc;
    char why[200];
} Pub;

typedef struct {
    Pub* head;
    Pub* tail;
} PubList;

/* A list of publishes, in order. */
static inline void
listAppend(PubList* list, Pub* p)
{
    p->next = NULL;
    p->prev = list->tail;
    if (list->tail != NULL) {
        list->tail->next = p;
    } else {
        list->head = p;
    }
    list->tail = p;
}

static inline void
listRemove(PubList* list, Pub* p)
{
    if (p->prev != NULL) {
        p->prev->next = p->next;
    } else {
        list->head = p->next;
    }
    if (p->next != NULL) {
        p->next->prev = p->prev;
    } else {
        list->tail = p->prev;
    }
    p->next = p->prev = NULL;
}

typedef enum {
    LINK_CONNECTING,
    LINK_READY,
    LINK_WAITING,               /* a back-off before the next connect */
    LINK_DEAD
} LinkState;

/* One loop's connection to one broker; the loop's. */
struct CorMqttLink {
    struct CorMqttLink* next;   /* the loop's links */
    CorEvLoop* loop;
    CorMqttBroker broker;
    char name[300];             /* mqtt://host:port, for messages */
    char clientId[64];
    LinkState state;
    bool served;                /* a CONNACK came once: reconnect */
    unsigned refs;              /* the list, the connector, publishes */
    CorConn* conn;
    CorEvIo io;
    CorEvTimer ping;
    CorEvTimer retry;
    CorEvTimer flushSoon;       /* the output written once an iteration */
    uint64_t backoffMs;
    uint64_t readyMs;           /* when the last CONNACK came */
    unsigned keepAliveMs;
    uint64_t lastWriteMs;
    bool pingDue;               /* a PINGREQ went, no PINGRESP yet */
    uint64_t pingSentMs;
    CorMqttBuf out;
    size_t outSent;
    uint64_t outStart;          /* bytes written before out's first */
    uint8_t* in;
    size_t inLen;
    size_t inCap;
    PubList queue;              /* in flight, then queued: in order */
    Pub* pending;               /* the first queued, or NULL */
    PubList written;            /* QoS 0 waiting for the socket */
    Pub** slots;                /* packet id - 1 to its publish */
    unsigned window;
    unsigned inFlight;
    unsigned nextSlot;
    /* A subscriber's: its subscriptions, and the connections made (an
     * ack for a message of an older one is not sent). */
    const CorMqttSubGroup* group;
    unsigned gen;
    unsigned serving;           /* its messages in their handlers */
    bool draining;              /* serve nothing new, never reconnect */
    bool bye;                   /* DISCONNECT queued: close once written */
    bool paused;                /* not read: its handlers are full */
    bool capSaid;               /* "no coroutine to connect" logged */
};

/*
 * Make a subscriber link to group's broker on the calling loop: it
 * connects in a coroutine of its own with group's client id and a
 * persistent session, subscribes (corMqttSubscribeSend) each time it is
 * connected, and connects again after a back-off whenever it fails, until
 * the loop ends. Returns 0, or -errno with why.
 */
int corMqttLinkSubscriber(const CorMqttSubGroup* group, char* why,
                          size_t whyLen);

/* Encode pkt into l's output, written at the loop's next iteration with
 * whatever else this one adds. Returns 0, or -errno (the codec refused
 * it, no memory). */
int corMqttLinkSend(Link* l, const CorMqttPacket* pkt);

/* A subscriber's handlers took a message off the bound: l reads again
 * at the loop's next iteration if it paused. */
void corMqttLinkResume(Link* l);

/* The calling loop's links, linked by next. */
Link* corMqttLoopLinks(void);

/* Close l's connection, if any, and forget l: nothing more is tried. A
 * link whose bye is set is closed so once its output was written. */
void corMqttLinkClose(Link* l);

/* One reference to l more, one less (it is freed at none). */
void corMqttLinkHold(Link* l);
void corMqttLinkRelease(Link* l);

/* ---- Between corMqttClient.c (writes) and corMqttLinkRead.c (reads) ----- */

/* What a slot holds whose publish left (timed out, cancelled). */
extern Pub corMqttOrphan;

/* End p (rc 0: acknowledged; else why) and wake its publisher. */
void corMqttPubFinish(Link* l, Pub* p, int rc, const char* why);

/* The connection is gone (rc, why): in-flight QoS 1/2 publishes go back
 * to the queue, and the link connects again after its back-off. */
void corMqttLinkDrop(Link* l, int rc, const char* why);

/* Encode the queued publishes the window lets out; write what the
 * socket takes (EPOLLOUT brings the rest). */
void corMqttLinkPump(Link* l);
void corMqttLinkFlush(Link* l);

/* Take every whole packet read: 0, or -1 after dropping the link. */
int corMqttPacketsTake(Link* l);

/* Read until EAGAIN (or a paused subscriber's bound), taking packets. */
void corMqttLinkRead(Link* l);

/* The link's socket watcher and keepalive timer. */
void corMqttLinkIo(CorEvIo* io, unsigned events);
void corMqttLinkPingFire(CorEvTimer* timer);

/* ---- corMqttSubscribe.c -------------------------------------------------- */

/* l is connected, the broker had its session if present: send its
 * SUBSCRIBE (in 3.1.1, only to a new session). Returns 0, or -errno. */
int corMqttSubscribeSend(Link* l, bool present);

/* Let go of every message waiting to be served again (the loop ends):
 * the broker sends them again. */
void corMqttInboundsDrop(void);

/* Whether l is a subscriber whose messages in handlers reached the
 * bound (max_in_handlers): it reads nothing more from its broker. */
bool corMqttInboundFull(const Link* l);

/*
 * A packet only a subscriber takes (PUBLISH, PUBREL, SUBACK): 0 taken,
 * 1 not one of those, or -1 with why (l is dropped then).
 */
int corMqttInboundTake(Link* l, const CorMqttPacket* pkt, char* why,
                       size_t whyLen);

#endif /* COR_MQTT_LINK_H */
