/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Subscriptions in: the messages of topic filters on brokers become
 * requests, served like any other.
 *
 *     modules:
 *       - load: mqtt
 *         subscriptions:
 *           - { broker: "mqtt://127.0.0.1:1883", filter: "sensors/+/temp",
 *               qos: 1 }
 *     routes:
 *       - { match: "MQTT /sensors/a/temp", handler: temp }
 *
 * A message is a request with the method MQTT, the topic as its path
 * ("/sensors/a/temp"), the payload as its body, and as headers its 5.0
 * user properties, its Content-Type and MQTT-QoS (and MQTT-Retain: true
 * for a retained one); routes pick its handler, which runs where its
 * registration says (inline, a coroutine, a worker), so a handler that
 * waits holds up no other message. A message of QoS 1 or 2 is
 * acknowledged (PUBACK, PUBREC) only once its request ended, handler and
 * post-response phase, with a status under 500: one that failed, was
 * cancelled by a stop, or was lost with cor is not, and the broker, which
 * keeps the subscriber's session, sends it again when the subscriber is
 * back (at least once). A 5.0 message with a Response Topic gets the
 * response as a QoS 0 message there, with its Correlation Data and the
 * status as the user property "status".
 *
 * The subscriptions to one broker share a connection, made by loop 0
 * (one per process: another loop's would get every message again), with
 * a client id of its own (client_id, by default the module's client_id,
 * the instance (corInstance: its master's, the same across reloads) and
 * "-sub-N") and a persistent session, subscribed again on each connect.
 *
 * A reload runs two generations side by side, and two connections with
 * one client id take the session from each other. So a draining
 * generation's subscriber serves nothing new (what comes stays
 * unacknowledged in the session), never connects again, and once the
 * messages in its handlers were acknowledged sends DISCONNECT, which
 * keeps the session; the new generation's subscriber, connected with the
 * same id, gets from the broker every message the old one did not
 * acknowledge. If the new one connects first, the broker's takeover
 * closes the old connection, whose unacknowledged messages go to the new
 * one as well: at least once either way, as the old one never connects
 * again once it drains. No UNSUBSCRIBE of a plain filter: the
 * subscriptions belong to the session, which the next generation goes on
 * with (and a plain subscriber stopped for good finds what came meanwhile
 * in its session when it is back).
 *
 * A shared subscription ($share/GROUP/FILTER) is the exception: while the
 * session of a member that stopped lives, the broker goes on giving it
 * its share (mosquitto: 4 350 of 20 000 messages lost to a member stopped
 * in the middle), which the other members should have had. So a draining
 * subscriber first leaves its groups: an UNSUBSCRIBE of its $share
 * filters, serving what comes until the UNSUBACK (the broker sent it
 * before it took the member out), then its last acknowledgements and the
 * DISCONNECT as above. And a $share filter is subscribed at every connect,
 * a session present or not (a generation that left took it out of the
 * session; a broker sends no retained message to a shared subscription).
 */
#include "corMqttLink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What becomes of a message once its request ended. */
typedef enum {
    FATE_ACK,    /* served (under 500): acknowledged */
    FATE_LEAVE,  /* failed, its connection gone or draining:
                    the broker sends it again */
    FATE_AGAIN,  /* failed: served again after a delay */
    FATE_GIVE_UP /* failed for good: acknowledged (after its
                    dead letter) */
} Fate;

/* A message served as a request; owned by itself until it is freed, after
 * its last request's release (or while it waits to be served again). */
typedef struct Inbound {
    CorRequest r;
    Link* link;
    CorMqttStats* stats;
    struct Inbound* nextWaiting; /* waits to be served again */
    CorEvTimer again;
    unsigned attempts; /* requests made of it */
    Fate fate;
    unsigned gen;
    unsigned version;
    uint16_t packetId;
    uint8_t qos;
    CorMqttStr responseTopic;
    CorMqttStr correlation;
    CorBuf streamed; /* a streamed response's body, for the
                        Response Topic */
    char qosText[2];
    CorHeader headers[];
} Inbound;

/* A streamed response (a forward's) kept for the Response Topic, at
 * most: past it the stream is cut. */
#define STREAMED_MAX ((size_t)1024 * 1024)

/* The fields the bridge writes itself: MQTT-QoS, MQTT-Retain,
 * Content-Type, MQTT-Method. */
#define OWN_FIELDS 4

/* Loop 0's messages waiting to be served again. */
static Inbound* waiting;

/* ---- On the wire --------------------------------------------------------- */

/* The link publishes nothing: its packet ids are free for these. */
#define SUBSCRIBE_PACKET_ID 1
#define LEAVE_PACKET_ID 2

static bool
shared(const CorMqttSub* sub)
{
    return strncmp(sub->filter.data, "$share/", 7) == 0;
}

/* l's $share filters into subs (room for all of l's); how many. */
static size_t
sharedSubs(const Link* l, CorMqttSub* subs)
{
    size_t n = 0;

    for (unsigned i = 0; i < l->group->count; i++) {
        if (shared(&l->group->subs[i])) {
            subs[n++] = l->group->subs[i];
        }
    }
    return n;
}

int
corMqttSubscribeSend(Link* l, bool present)
{
    CorMqttSub subs[l->group->count];
    CorMqttPacket pkt = { .type = COR_MQTT_SUBSCRIBE,
                          .packetId = SUBSCRIBE_PACKET_ID,
                          .subs = l->group->subs,
                          .subCount = l->group->count };

    if (present && l->broker.version == COR_MQTT_V311) {
        /* The session has the plain ones, and a SUBSCRIBE again would
         * bring every retained message again (3.1.1 has no Retain
         * Handling); the shared ones go again (see the top). */
        for (unsigned i = 0; i < l->group->count; i++) {
            if (!shared(&l->group->subs[i])) {
                corLog(COR_LOG_INFO,
                       "mqtt: subscribed to '%s' on %s (kept "
                       "by the session)",
                       l->group->subs[i].filter.data, l->name);
            }
        }
        pkt.subs = subs;
        pkt.subCount = sharedSubs(l, subs);
        if (pkt.subCount == 0) {
            return 0;
        }
    }
    return corMqttLinkSend(l, &pkt);
}

/* A draining l leaves its shared subscriptions' groups: whether it sent
 * the UNSUBSCRIBE (it then serves on until the UNSUBACK). */
static bool
sharedLeave(Link* l)
{
    CorMqttSub subs[l->group->count];
    CorMqttPacket pkt = { .type = COR_MQTT_UNSUBSCRIBE,
                          .packetId = LEAVE_PACKET_ID,
                          .subs = subs };

    if (l->state != LINK_READY || l->bye) {
        return false;
    }
    pkt.subCount = sharedSubs(l, subs);
    if (pkt.subCount == 0 || corMqttLinkSend(l, &pkt) != 0) {
        return false;
    }
    corLog(COR_LOG_INFO,
           "mqtt: %s: draining: %s leaves %u shared "
           "subscription%s",
           l->name, l->clientId, pkt.subCount, pkt.subCount > 1 ? "s" : "");
    return true;
}

static void
subackTake(Link* l, const CorMqttPacket* pkt)
{
    for (size_t i = 0; i < pkt->codeCount && i < l->group->count; i++) {
        const CorMqttSub* sub = &l->group->subs[i];
        uint8_t code = pkt->codes[i];

        if (code >= 0x80) {
            corLog(COR_LOG_ERROR,
                   "mqtt: %s refused the subscription to "
                   "'%s': %s (0x%02x)",
                   l->name, sub->filter.data,
                   corMqttReasonText(COR_MQTT_V5, false, code), code);
        } else {
            corLog(COR_LOG_INFO, "mqtt: subscribed to '%s' on %s (QoS %u)",
                   sub->filter.data, l->name, code);
        }
    }
}

/* ---- Letting go at a drain ----------------------------------------------- */

/*
 * A draining l lets go of its broker: a DISCONNECT (reason 0 in 5.0: no
 * will, and the session stays for its expiry, or ends with it when the
 * instance stops: corMqttSessionEnd.c) closes the connection once
 * written; a link between connections is forgotten at once, and one
 * connecting closes its connection when it is made (corMqttClient.c).
 */
static void
linkLetGo(Link* l)
{
    CorMqttPacket bye = { .type = COR_MQTT_DISCONNECT };

    if (l->leaving && l->state == LINK_READY) {
        return; /* at the UNSUBACK */
    }
    if (l->state == LINK_WAITING) {
        corMqttLinkClose(l);
    } else if (l->state == LINK_READY && !l->bye) {
        corMqttByeEnds(l, &bye);
        corLog(COR_LOG_INFO, "mqtt: %s: draining: %s %s", l->name, l->clientId,
               corMqttPropHas(&bye.props, COR_MQTT_PROP_SESSION_EXPIRY)
                   ? "ends its session"
                   : "lets go of its session");
        l->bye = corMqttLinkSend(l, &bye) == 0;
        if (!l->bye) {
            corMqttLinkClose(l); /* a plain close does as much */
        }
    }
}

/* ---- Messages as requests ------------------------------------------------ */

static void inboundDone(CorRequest* r);
static void inboundRelease(CorRequest* r);
static void inboundStreamData(CorRequest* r, const void* data, size_t len);
static void inboundStreamEnd(CorRequest* r);
static bool inboundStreamAlive(const CorRequest* r);

/* A message has nobody to stream to: a streamed response is dropped and
 * its end ends the request. */
static const CorProtocolOps inboundOps = {
    .done = inboundDone,
    .release = inboundRelease,
    .streamData = inboundStreamData,
    .streamEnd = inboundStreamEnd,
    .streamAlive = inboundStreamAlive,
    .kind = COR_PROTOCOL_MQTT,
};

/* Copy s to *p (moved past it); returns where it went. */
static char*
copyStr(char** p, const char* s, size_t len)
{
    char* at = *p;

    if (len > 0) {
        memcpy(at, s, len); /* s may be NULL then */
    }
    at[len] = '\0';
    *p += len + 1;
    return at;
}

static void
headerAdd(Inbound* in, char** p, const char* name, CorMqttStr value)
{
    CorHeader* h = &in->headers[in->r.headerCount++];

    h->nameLen = strlen(name);
    h->name = copyStr(p, name, h->nameLen);
    h->valueLen = value.len;
    h->value = copyStr(p, value.data, value.len);
}

/* Whether a user property named name would pass for one of the fields
 * the bridge writes itself (headersAdd), which a handler, and a forward
 * that makes them HTTP, take as the message's own. */
static bool
ownName(CorMqttStr name)
{
    static const char* const own[] = { "MQTT-QoS", "MQTT-Retain", "MQTT-Method",
                                       "Content-Type" };

    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        if (corHeaderIsLen(&(CorHeader){ name.data, name.len, NULL, 0 }, own[i],
                           strlen(own[i]))) {
            return true;
        }
    }
    return false;
}

/* The user properties of pkt as headers, after the bridge's own: as they
 * are, but for one named as an own field, which is MQTT-User-NAME. */
static void
userHeadersAdd(Inbound* in, char** p, const CorMqttPacket* pkt)
{
    CorMqttStr name;
    CorMqttStr value;
    size_t pos = 0;

    while (corMqttUserPropNext(&pkt->props, &pos, &name, &value)) {
        CorHeader* h = &in->headers[in->r.headerCount++];
        bool own = ownName(name);

        h->name = *p;
        if (own) {
            memcpy(*p, COR_MQTT_USER_PREFIX, COR_MQTT_USER_PREFIX_LEN);
            *p += COR_MQTT_USER_PREFIX_LEN;
        }
        copyStr(p, name.data, name.len);
        h->nameLen = name.len + (own ? COR_MQTT_USER_PREFIX_LEN : 0);
        h->valueLen = value.len;
        h->value = copyStr(p, value.data, value.len);
    }
}

/* The method: of l's first subscription whose filter matches topic, or
 * NULL. */
static const char*
methodOf(const Link* l, CorMqttStr topic)
{
    for (unsigned i = 0; i < l->group->count; i++) {
        const CorMqttSub* sub = &l->group->subs[i];

        if (corMqttTopicMatch(sub->filter.data, sub->filter.len, topic.data,
                              topic.len)) {
            return l->group->methods[i];
        }
    }
    return NULL;
}

/* The headers of pkt: its QoS, retain, content type, the method a
 * forward sends it with when its subscription says one, then its user
 * properties. */
static void
headersAdd(Inbound* in, char** p, const CorMqttPacket* pkt)
{
    const char* method = methodOf(in->link, pkt->topic);

    in->r.headers = in->headers;
    headerAdd(in, p, "MQTT-QoS", (CorMqttStr){ in->qosText, 1 });
    if (pkt->retain) {
        headerAdd(in, p, "MQTT-Retain", (CorMqttStr){ "true", 4 });
    }
    if (corMqttPropHas(&pkt->props, COR_MQTT_PROP_CONTENT_TYPE)) {
        headerAdd(in, p, "Content-Type", pkt->props.contentType);
    }
    if (method != NULL) {
        headerAdd(in, p, "MQTT-Method", (CorMqttStr){ method, strlen(method) });
    }
    userHeadersAdd(in, p, pkt);
}

/* pkt, a PUBLISH of l, as a request in one block; NULL without memory. */
static Inbound*
inboundNew(Link* l, const CorMqttPacket* pkt)
{
    const CorMqttProps* props = &pkt->props;
    /* The property block bounds every string its properties hold; the
     * bridge's own fields, the method's included, take under 128 bytes. */
    size_t size = sizeof(Inbound)
                  + (props->userCount + OWN_FIELDS) * sizeof(CorHeader)
                  + pkt->topic.len + pkt->payload.len + props->rawLen * 2
                  + props->userCount * (2 + COR_MQTT_USER_PREFIX_LEN) + 128;
    Inbound* in = calloc(1, size);
    char* p;

    if (in == NULL) {
        return NULL;
    }
    p = (char*)&in->headers[props->userCount + OWN_FIELDS];
    in->link = l;
    in->stats = corMqttStatsFor(&l->broker);
    in->gen = l->gen;
    in->version = l->broker.version;
    in->packetId = pkt->packetId;
    in->qos = pkt->qos;
    in->qosText[0] = (char)('0' + pkt->qos);
    in->r.method = "MQTT";
    in->r.methodLen = 4;
    in->r.version = in->version == COR_MQTT_V5 ? "MQTT/5.0" : "MQTT/3.1.1";
    *p = '/';
    in->r.pathLen = pkt->topic.len + 1;
    in->r.path = p;
    p++;
    copyStr(&p, pkt->topic.data, pkt->topic.len);
    in->r.bodyLen = pkt->payload.len;
    in->r.body = copyStr(&p, pkt->payload.data, pkt->payload.len);
    headersAdd(in, &p, pkt);
    if (corMqttPropHas(props, COR_MQTT_PROP_RESPONSE_TOPIC)) {
        in->responseTopic.len = props->responseTopic.len;
        in->responseTopic.data = copyStr(&p, props->responseTopic.data,
                                         props->responseTopic.len);
        in->correlation.len = props->correlationData.len;
        in->correlation.data = copyStr(&p, props->correlationData.data,
                                       props->correlationData.len);
    }
    return in;
}

/* The response to the Response Topic, at QoS 0, if the message has one
 * and its connection is up. */
static void
responsePublish(Inbound* in)
{
    CorRequest* r = &in->r;
    char status[16];
    CorMqttUserProp user = { { "status", 6 },
                             { status, (size_t)snprintf(status, sizeof(status),
                                                        "%d", r->status) } };
    CorMqttPacket pkt = { .type = COR_MQTT_PUBLISH,
                          .topic = in->responseTopic,
                          .payload = { r->responseBody, r->responseLen } };

    if (r->stream != NULL) {
        pkt.payload = (CorMqttStr){ (const char*)corBufHead(&in->streamed),
                                    corBufPending(&in->streamed) };
    }

    if (in->responseTopic.len == 0 || in->link->state != LINK_READY) {
        return;
    }
    pkt.props.user = &user;
    pkt.props.userCount = 1;
    if (in->correlation.len > 0) {
        pkt.props.correlationData = in->correlation;
        corMqttPropSet(&pkt.props, COR_MQTT_PROP_CORRELATION_DATA);
    }
    if (r->contentType != NULL) {
        pkt.props.contentType = (CorMqttStr){ r->contentType,
                                              strlen(r->contentType) };
        corMqttPropSet(&pkt.props, COR_MQTT_PROP_CONTENT_TYPE);
    }
    if (corMqttLinkSend(in->link, &pkt) != 0) {
        corLog(COR_LOG_WARN,
               "mqtt: %s: the response to %.*s could not be "
               "encoded",
               in->link->name, (int)r->pathLen, r->path);
    }
}

/* Whether in's connection is the one it came on, up, and not draining:
 * only there can it be acknowledged. */
static bool
inboundCurrent(const Inbound* in)
{
    const Link* l = in->link;

    return l->state == LINK_READY && l->gen == in->gen && !l->draining;
}

/* Append to *p (cap bytes left) s percent-encoded but for '/' and the
 * unreserved characters of a URL. */
static void
percentEncode(char** p, size_t* cap, const char* s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s != '\0' && *cap > 3; s++) {
        unsigned char ch = (unsigned char)*s;

        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
            || (ch >= '0' && ch <= '9') || strchr("-._~/", ch) != NULL) {
            *(*p)++ = (char)ch;
            *cap -= 1;
        } else {
            *(*p)++ = '%';
            *(*p)++ = hex[ch >> 4];
            *(*p)++ = hex[ch & 15];
            *cap -= 3;
        }
    }
    **p = '\0';
}

/*
 * Publish in's message to the dead-letter topic, on its broker, as a
 * notification of its request (whose release, the acknowledgement, waits
 * for it): the payload, its content type, and as headers (5.0 user
 * properties) its topic, the last status and the attempts. Returns 0, or
 * -errno when it could not start.
 */
static int
deadLetterSend(Inbound* in)
{
    CorRequest* r = &in->r;
    const CorHeader* type = corRequestHeader(r, "Content-Type");
    char url[1200];
    char status[16];
    char attempts[16];
    char* p = url;
    size_t cap = sizeof(url) - 8;
    int n = snprintf(url, cap, "%s", in->link->group->url);
    CorHeader headers[] = {
        { "topic", 5, r->path + 1, r->pathLen - 1 },
        { "status", 6, status,
          (size_t)snprintf(status, sizeof(status), "%d", r->status) },
        { "attempts", 8, attempts,
          (size_t)snprintf(attempts, sizeof(attempts), "%u", in->attempts) }
    };

    p += n > 0 && url[n - 1] == '/' ? n - 1 : n; /* no path: checked */
    cap -= (size_t)(p - url);
    percentEncode(&p, &cap, "/");
    percentEncode(&p, &cap, corMqttConf.deadLetter);
    snprintf(p, 8, "?qos=%s", in->qosText);
    return corNotify(r, &(CorNotification){
                            .url = url,
                            .headers = headers,
                            .headerCount = 3,
                            .contentType = type != NULL ? type->value : NULL,
                            .body = r->body,
                            .bodyLen = r->bodyLen });
}

/* in's request failed for good: logged, and published to the dead-letter
 * topic if there is one. Its fate: acknowledged, or left to the broker
 * when the dead letter could not start. */
static Fate
inboundGiveUp(Inbound* in)
{
    CorRequest* r = &in->r;
    Link* l = in->link;
    bool dead = corMqttConf.deadLetter[0] != '\0';
    int rc = dead ? deadLetterSend(in) : 0;

    if (rc != 0) {
        corLog(COR_LOG_ERROR,
               "mqtt: %s: %.*s answered %d; no dead letter "
               "to '%s' (%s): not acknowledged",
               l->name, (int)r->pathLen, r->path, r->status,
               corMqttConf.deadLetter, strerror(-rc));
        return FATE_LEAVE;
    }
    corLog(COR_LOG_WARN,
           "mqtt: %s: %.*s (QoS %u) answered %d, %u time%s: "
           "given up%s%s%s",
           l->name, (int)r->pathLen, r->path, in->qos, r->status, in->attempts,
           in->attempts > 1 ? "s" : "", in->qos > 0 ? ", acknowledged" : "",
           dead ? ", published to " : "", dead ? corMqttConf.deadLetter : "");
    return FATE_GIVE_UP;
}

/* The request was answered: what becomes of its message. */
static void
inboundAnswered(CorRequest* r)
{
    Inbound* in = (Inbound*)r;

    if (r->status < 500) {
        in->fate = FATE_ACK;
    } else if (!inboundCurrent(in)) {
        in->fate = FATE_LEAVE;
    } else if (in->qos > 0 && in->attempts <= corMqttConf.redeliver) {
        in->fate = FATE_AGAIN;
    } else {
        in->fate = inboundGiveUp(in);
    }
    corRequestSent(r);
}

static void
inboundDone(CorRequest* r)
{
    if (r->stream != NULL) {
        return; /* its end ends it */
    }
    responsePublish((Inbound*)r);
    inboundAnswered(r);
}

/* A streamed response's pieces are kept for the Response Topic (a
 * forwarded message's answer comes so): a message without one has nobody
 * to stream to. */
static void
inboundStreamData(CorRequest* r, const void* data, size_t len)
{
    Inbound* in = (Inbound*)r;

    if (inboundStreamAlive(r) && corBufAppend(&in->streamed, data, len) != 0) {
        corBufFree(&in->streamed);
        in->responseTopic.len = 0; /* no memory: no response */
    }
}

static void
inboundStreamEnd(CorRequest* r)
{
    responsePublish((Inbound*)r);
    inboundAnswered(r);
}

static bool
inboundStreamAlive(const CorRequest* r)
{
    const Inbound* in = (const Inbound*)r;

    return in->responseTopic.len > 0
           && corBufPending(&in->streamed) < STREAMED_MAX;
}

/* in is over: off the bound (its link reads again if it paused), and
 * freed. */
static void
inboundFree(Inbound* in)
{
    Link* l = in->link;

    l->serving--;
    corMqttLinkResume(l);
    if (l->draining && l->serving == 0) {
        linkLetGo(l); /* its last acknowledgement is out */
    }
    corMqttLinkRelease(l);
    corBufFree(&in->streamed);
    free(in);
}

static void
waitingRemove(Inbound* in)
{
    for (Inbound** at = &waiting; *at != NULL; at = &(*at)->nextWaiting) {
        if (*at == in) {
            *at = in->nextWaiting;
            return;
        }
    }
}

/* Serve in again, as a fresh request, if its connection is still the
 * one it came on; else the broker sends it again: let it go. */
static void
againFire(CorEvTimer* timer)
{
    Inbound* in = corContainerOf(timer, Inbound, again);
    CorRequest* r = &in->r;
    CorRequest input = { .method = r->method,
                         .methodLen = r->methodLen,
                         .path = r->path,
                         .pathLen = r->pathLen,
                         .headers = r->headers,
                         .headerCount = r->headerCount,
                         .body = r->body,
                         .bodyLen = r->bodyLen };

    waitingRemove(in);
    if (!inboundCurrent(in)) {
        inboundFree(in);
        return;
    }
    memcpy(r, &input, sizeof(input));
    corBufFree(&in->streamed);
    in->attempts++;
    corRequestServe(r, &inboundOps, in);
}

/* The request ended: acknowledge its message if it was served (under
 * 500), or failed for good, on the connection it came on; or serve it
 * again later. */
static void
inboundRelease(CorRequest* r)
{
    Inbound* in = (Inbound*)r;
    Link* l = in->link;
    CorMqttPacket ack = { .type = in->qos == 1 ? COR_MQTT_PUBACK
                                               : COR_MQTT_PUBREC,
                          .packetId = in->packetId };

    corMqttStatsCount(in->stats, r->status < 500
                                     ? COR_MQTT_COUNT_RECEIVED
                                     : COR_MQTT_COUNT_UNACKNOWLEDGED);
    if (in->fate == FATE_AGAIN && inboundCurrent(in)) {
        corLog(COR_LOG_WARN,
               "mqtt: %s: %.*s answered %d: served again in "
               "%llu ms",
               l->name, (int)r->pathLen, r->path, r->status,
               (unsigned long long)corMqttConf.redeliverDelayMs);
        in->nextWaiting = waiting;
        waiting = in;
        corEvTimerStart(l->k.loop, &in->again, corMqttConf.redeliverDelayMs,
                        againFire);
        return; /* still on the bound */
    }
    if (in->qos > 0 && (in->fate == FATE_ACK || in->fate == FATE_GIVE_UP)
        && l->state == LINK_READY && l->gen == in->gen
        && corMqttLinkSend(l, &ack) != 0) {
        corLog(COR_LOG_WARN, "mqtt: %s: no memory to acknowledge %.*s", l->name,
               (int)r->pathLen, r->path);
    } else if (in->qos > 0 && in->fate == FATE_LEAVE) {
        corLog(COR_LOG_WARN,
               "mqtt: %s: %.*s answered %d: not "
               "acknowledged, the broker sends it again",
               l->name, (int)r->pathLen, r->path, r->status);
    }
    inboundFree(in);
}

/* Let go of l's messages waiting to be served again (all of them, for
 * NULL): the broker sends them again. */
static void
waitingDrop(const Link* l)
{
    for (Inbound** at = &waiting; *at != NULL;) {
        Inbound* in = *at;

        if (l == NULL || in->link == l) {
            *at = in->nextWaiting;
            corEvTimerStop(in->link->k.loop, &in->again);
            inboundFree(in);
        } else {
            at = &in->nextWaiting;
        }
    }
}

bool
corMqttInboundFull(const Link* l)
{
    return l->group != NULL && l->serving >= corMqttConf.maxInHandlers;
}

void
corMqttInboundsDrop(void)
{
    waitingDrop(NULL);
}

/* A message past the limits of every protocol's requests never reaches a
 * handler: said and counted as the core says every refusal
 * (corLimitsRefused), counted for its broker too, and acknowledged (no
 * answer published), so that the broker does not send it again and it
 * does not hold the subscription. */
static int
inboundRefuse(Link* l, const CorMqttPacket* pkt, int status)
{
    CorMqttPacket ack = { .type = pkt->qos == 1 ? COR_MQTT_PUBACK
                                                : COR_MQTT_PUBREC,
                          .packetId = pkt->packetId };
    char what[160];

    snprintf(what, sizeof(what), "a message of %zu bytes on %.*s",
             pkt->payload.len, (int)(pkt->topic.len < 96 ? pkt->topic.len : 96),
             pkt->topic.data);
    corLimitsRefused("mqtt", l->name, what, status);
    corMqttStatsCount(corMqttStatsFor(&l->broker), COR_MQTT_COUNT_REFUSED);
    if (pkt->qos > 0 && corMqttLinkSend(l, &ack) != 0) {
        corLog(COR_LOG_WARN, "mqtt: %s: no memory to acknowledge %.*s", l->name,
               (int)pkt->topic.len, pkt->topic.data);
    }
    return 0;
}

int
corMqttInboundTake(Link* l, const CorMqttPacket* pkt, char* why, size_t whyLen)
{
    int status;

    Inbound* in;

    if (pkt->type == COR_MQTT_SUBACK) {
        subackTake(l, pkt);
        return 0;
    }
    if (pkt->type == COR_MQTT_UNSUBACK && pkt->packetId == LEAVE_PACKET_ID
        && l->leaving) {
        corLog(COR_LOG_INFO, "mqtt: %s: left the shared subscriptions",
               l->name);
        l->leaving = false;
        if (l->serving == 0) {
            linkLetGo(l);
        }
        return 0;
    }
    if (pkt->type == COR_MQTT_PUBREL) {
        CorMqttPacket comp = { .type = COR_MQTT_PUBCOMP,
                               .packetId = pkt->packetId };

        return corMqttLinkSend(l, &comp) == 0 ? 0 : -1;
    }
    if (pkt->type != COR_MQTT_PUBLISH) {
        return 1;
    }
    if (l->draining && !l->leaving) {
        /* Not acknowledged: the session keeps it for the next
         * generation (a QoS 0 one is at most once anyway). */
        return 0;
    }
    if ((status = corLimitsBody(NULL, pkt->payload.len)) != 0) {
        return inboundRefuse(l, pkt, status);
    }
    in = inboundNew(l, pkt);
    if (in == NULL) {
        snprintf(why, whyLen, "no memory for a message");
        return -1;
    }
    if ((status = corLimitsHead(&in->r)) != 0) {
        free(in);
        return inboundRefuse(l, pkt, status);
    }
    corMqttLinkHold(l);
    l->serving++;
    in->attempts = 1;
    corRequestServe(&in->r, &inboundOps, in);
    return 0;
}

void
corMqttClientDrain(void)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, corMqttLoopLinks())
    {
        Link* l = corContainerOf(node, Link, link);

        if (l->group == NULL) {
            continue; /* publishers: the drain waits for their sends */
        }
        l->draining = true;
        corMqttLinkHold(l); /* a let-go may forget it */
        l->leaving = sharedLeave(l);
        waitingDrop(l);
        if (l->serving == 0) {
            linkLetGo(l);
        }
        corMqttLinkRelease(l);
    }
}
