/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A loop's connection to a broker (a link): what waits on it
 * (corMqttLink.c), its connection (corMqttLinkConn.c), a publish on it
 * (corMqttClient.c) and a subscriber's (corMqttSubscribe.c), which
 * subscribes on one and serves the messages that come. Nothing outside
 * modules/mqtt/ includes it.
 */
#ifndef COR_MQTT_LINK_H
#define COR_MQTT_LINK_H

#include "corMqttClientInt.h"

typedef struct CorMqttLink Link;

typedef enum {
    PUB_QUEUED,
    PUB_SENT,     /* PUBLISH written, its ack due */
    PUB_RELEASED, /* QoS 2: PUBREL written, PUBCOMP due */
    PUB_WRITTEN   /* QoS 0: waits for the socket */
} PubStage;

/* A publish waiting on a link; on its coroutine's stack. */
typedef struct Pub {
    CorList link; /* in its link's queue or written */
    const CorMqttMessage* msg;
    PubStage stage;
    uint16_t packetId;
    bool dup;        /* published before on a lost connection */
    uint64_t outEnd; /* QoS 0: written when the kit's
                      * sentBytes is past */
    CorCoPark park;
    bool done;
    int rc;
    char why[200];
} Pub;

/* The first publish of list, or NULL. */
static inline Pub*
pubFirst(const CorList* list)
{
    CorList* node = corListFirst(list);

    return node != NULL ? corContainerOf(node, Pub, link) : NULL;
}

/* The publish after p in list, or NULL. */
static inline Pub*
pubAfter(const CorList* list, const Pub* p)
{
    return p->link.next != list ? corContainerOf(p->link.next, Pub, link)
                                : NULL;
}

typedef enum {
    LINK_CONNECTING,
    LINK_READY,
    LINK_WAITING, /* a back-off before the next connect */
    LINK_DEAD
} LinkState;

/* One loop's connection to one broker; the loop's. */
struct CorMqttLink {
    CorList link; /* the loop's links */
    CorMqttBroker broker;
    char name[300]; /* mqtt://host:port, for messages */
    char clientId[64];
    LinkState state;
    bool served;   /* a CONNACK came once: reconnect */
    unsigned refs; /* the list, the connector, publishes */
    CorConn* conn;
    CorKitConn k; /* its bytes, on the loop: the output
                   * written once an iteration; not read
                   * while paused (k.readPaused: its
                   * subscriber's handlers are full) */
    CorEvTimer ping;
    CorEvTimer retry;
    uint64_t backoffMs;
    uint64_t readyMs; /* when the last CONNACK came */
    unsigned keepAliveMs;
    bool pingDue; /* a PINGREQ went, no PINGRESP yet */
    uint64_t pingSentMs;
    CorList queue;   /* in flight, then queued: in order */
    Pub* pending;    /* the first queued, or NULL */
    CorList written; /* QoS 0 waiting for the socket */
    Pub** slots;     /* packet id - 1 to its publish */
    unsigned window;
    unsigned inFlight;
    unsigned nextSlot;
    /* A subscriber's: its subscriptions, and the connections made (an
     * ack for a message of an older one is not sent). */
    const CorMqttSubGroup* group;
    unsigned gen;
    unsigned serving; /* its messages in their handlers */
    bool draining;    /* serve nothing new, never reconnect */
    bool bye;         /* DISCONNECT queued: close once written */
    bool leaving;     /* draining, its $share filters' UNSUBACK
                         awaited: what comes meanwhile is served */
    bool capSaid;     /* "no coroutine to connect" logged */
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

/* The calling loop's links (Link.link). */
CorList* corMqttLoopLinks(void);

/* Close l's connection, if any, and forget l: nothing more is tried. A
 * link whose bye is set is closed so once its output was written. */
void corMqttLinkClose(Link* l);

/* One reference to l more, one less (it is freed at none). */
void corMqttLinkHold(Link* l);
void corMqttLinkRelease(Link* l);

/* ---- corMqttLink.c: what waits on a link --------------------------------- */

/* What a slot holds whose publish left (timed out, cancelled). */
extern Pub corMqttOrphan;

/* End p (rc 0: acknowledged; else why) and wake its publisher; end every
 * publish of list so. */
void corMqttPubFinish(Link* l, Pub* p, int rc, const char* why);
void corMqttPubsFail(Link* l, CorList* list, int rc, const char* why);

/* Encode the queued publishes the window lets out. */
void corMqttLinkPump(Link* l);
/* After a write: the QoS 0 publishes whose bytes all went end, and a
 * link that said DISCONNECT lets go once it is written. */
void corMqttLinkWrote(Link* l);

/* Put a new l on the calling loop's list (its reference). */
void corMqttLinkAdd(Link* l);
/* Nothing more will be tried: every publish on l fails, l is forgotten. */
void corMqttLinkGiveUp(Link* l, int rc, const char* why);

/* ---- corMqttLinkConn.c: its connection ----------------------------------- */

/* A new link to b (group's, for a subscriber) on the calling loop,
 * connecting in a coroutine of its own. NULL with rc and why. */
Link* corMqttLinkNew(const CorMqttBroker* b, const CorMqttSubGroup* group,
                     int* rc, char* why, size_t whyLen);

/* ---- corMqttSubscribe.c -------------------------------------------------- */

/* l is connected, the broker had its session if present: send its
 * SUBSCRIBE (in 3.1.1, only to a new session). Returns 0, or -errno. */
int corMqttSubscribeSend(Link* l, bool present);

/* Let go of every message waiting to be served again (loop 0, where the
 * subscriptions live, ends): the broker sends them again. */
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

/* ---- corMqttSessionEnd.c: a default id's session ends with cor ---------- */

/* Whether g's session ends when this generation does: its id is the
 * instance's (no client_id given) and no generation takes its place. */
bool corMqttSessionEnds(const CorMqttSubGroup* g);
/* Make bye (l's DISCONNECT) end the session when it ends (5.0). */
void corMqttByeEnds(const Link* l, CorMqttPacket* bye);
/* Keep where l (a subscriber) is connected, to end its session there. */
void corMqttSessionPeerKeep(const Link* l);
/* A fast stop, as the calling loop ends: its subscribers whose sessions
 * end say so in a DISCONNECT (5.0). */
void corMqttSessionsByeAtExit(void);
/* Once the subscriptions' loop ended: end the 3.1.1 sessions that end. */
void corMqttSessionsEnd(void);

#endif /* COR_MQTT_LINK_H */
