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
 * the instance (corMqttInstance) and "-sub-N") and a persistent session,
 * subscribed again on each connect.
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
 * again once it drains. No UNSUBSCRIBE: the subscriptions belong to the
 * session, which the next generation goes on with.
 */
#include "corMqttLink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CorMqttSubGroup* corMqttGroups;
unsigned corMqttGroupCount;

/* A message served as a request; owned by itself until its release. */
typedef struct {
    CorRequest r;
    Link* link;
    CorMqttStats* stats;
    unsigned gen;
    unsigned version;
    uint16_t packetId;
    uint8_t qos;
    CorMqttStr responseTopic;
    CorMqttStr correlation;
    char qosText[2];
    CorHeader headers[];
} Inbound;

/* ---- The YAML ------------------------------------------------------------ */

/* The group of url (and client id), or a new one; NULL without memory. */
static CorMqttSubGroup*
groupFor(const char* url, const CorMqttBroker* b, const char* clientId)
{
    CorMqttSubGroup* groups;
    CorMqttSubGroup* g;

    for (unsigned i = 0; i < corMqttGroupCount; i++) {
        g = &corMqttGroups[i];
        if (strcmp(g->url, url) == 0 && corMqttBrokerSame(&g->broker, b)
            && (clientId == NULL || strcmp(g->clientId, clientId) == 0)) {
            return g;
        }
    }
    groups = realloc(corMqttGroups,
                     (corMqttGroupCount + 1) * sizeof(*groups));
    if (groups == NULL) {
        return NULL;
    }
    corMqttGroups = groups;
    g = &groups[corMqttGroupCount];
    memset(g, 0, sizeof(*g));
    g->broker = *b;
    snprintf(g->url, sizeof(g->url), "%s", url);
    snprintf(g->clientId, sizeof(g->clientId), "%s-%s-sub-%u",
             corMqttConf.clientId, corMqttInstance(), corMqttGroupCount + 1);
    if (clientId != NULL) {
        snprintf(g->clientId, sizeof(g->clientId), "%s", clientId);
    }
    corMqttGroupCount++;
    return g;
}

/* Whether a subscription's broker URL is good; else an error at it. */
static bool
brokerCheck(CorModule* m, const CorConf* item, const char* url,
            CorMqttBroker* b)
{
    const CorConf* at = corConfGet(item, "broker");
    char why[256];
    CorUrl u;

    if (url == NULL) {
        corModuleError(m, item, "subscription: a broker is needed "
                       "(broker: \"mqtt://host:port\")");
        return false;
    }
    if (corMqttUrlBroker(url, b, &u, why, sizeof(why)) != 0) {
        corModuleError(m, at, "broker: %s", why);
        return false;
    }
    if (u.targetLen != 1) {
        corModuleError(m, at, "broker: '%s' has a path: the topics are the "
                       "filter's", url);
        return false;
    }
    return true;
}

/* One item of the list into its group. Returns 0, or -1 after an error. */
static int
subscriptionRead(CorModule* m, const CorConf* item, const char* where)
{
    CorConfErrors* errors = corModuleErrors(m);
    const char* url = corConfString(item, "broker", NULL, errors);
    const char* filter = corConfString(item, "filter", NULL, errors);
    const char* clientId = corConfString(item, "client_id", NULL, errors);
    unsigned qos = (unsigned)corConfInt(item, "qos", 1, 0, 2, errors);
    const char* bad = filter != NULL ? corMqttTopicFilterCheck(
                                           filter, strlen(filter)) : NULL;
    CorMqttSubGroup* g;
    CorMqttBroker b;
    CorMqttSub* subs;

    corConfUnusedKeys(item, where, errors);
    if (!brokerCheck(m, item, url, &b)) {
        return -1;
    }
    if (filter == NULL || bad != NULL) {
        corModuleError(m, filter != NULL ? corConfGet(item, "filter") : item,
                       "filter: %s", bad != NULL ? bad : "a topic filter is "
                       "needed (filter: \"sensors/+/temp\")");
        return -1;
    }
    if (clientId != NULL && (clientId[0] == '\0' || strlen(clientId) > 63)) {
        corModuleError(m, corConfGet(item, "client_id"), "client_id: 1 to 63 "
                       "bytes");
        return -1;
    }
    g = groupFor(url, &b, clientId);
    subs = g != NULL ? realloc(g->subs, (g->count + 1) * sizeof(*subs))
                     : NULL;
    if (subs == NULL || (filter = strdup(filter)) == NULL) {
        corModuleError(m, item, "out of memory");
        return -1;
    }
    g->subs = subs;
    subs[g->count++] = (CorMqttSub){ { filter, strlen(filter) },
                                     (uint8_t)qos };
    return 0;
}

int
corMqttSubscriptionsRead(CorModule* m, const CorConf* list)
{
    int rc = 0;

    for (size_t i = 0; i < corConfCount(list); i++) {
        char where[48];
        const CorConf* item = corConfAt(list, i);

        snprintf(where, sizeof(where), "subscriptions[%zu]", i);
        if (corConfKind(item) != COR_CONF_MAP) {
            corModuleError(m, item, "%s: expected a mapping {broker, filter, "
                           "qos}", where);
            rc = -1;
        } else if (subscriptionRead(m, item, where) != 0) {
            rc = -1;
        }
    }
    return rc;
}

void
corMqttSubscriptionsFree(void)
{
    for (unsigned i = 0; i < corMqttGroupCount; i++) {
        for (unsigned k = 0; k < corMqttGroups[i].count; k++) {
            free((char*)corMqttGroups[i].subs[k].filter.data);
        }
        free(corMqttGroups[i].subs);
    }
    free(corMqttGroups);
    corMqttGroups = NULL;
    corMqttGroupCount = 0;
}

/* ---- On the wire --------------------------------------------------------- */

int
corMqttSubscribeSend(Link* l)
{
    /* The link publishes nothing: packet id 1 is free. */
    CorMqttPacket pkt = { .type = COR_MQTT_SUBSCRIBE, .packetId = 1,
                          .subs = l->group->subs,
                          .subCount = l->group->count };

    return corMqttLinkSend(l, &pkt);
}

static void
subackTake(Link* l, const CorMqttPacket* pkt)
{
    for (size_t i = 0; i < pkt->codeCount && i < l->group->count; i++) {
        const CorMqttSub* sub = &l->group->subs[i];
        uint8_t code = pkt->codes[i];

        if (code >= 0x80) {
            corLog(COR_LOG_ERROR, "mqtt: %s refused the subscription to "
                   "'%s': %s (0x%02x)", l->name, sub->filter.data,
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
 * will, and the session stays for its expiry) closes the connection once
 * written; a link between connections is forgotten at once, and one
 * connecting closes its connection when it is made (corMqttClient.c).
 */
static void
linkLetGo(Link* l)
{
    CorMqttPacket bye = { .type = COR_MQTT_DISCONNECT };

    if (l->state == LINK_WAITING) {
        corMqttLinkClose(l);
    } else if (l->state == LINK_READY && !l->bye) {
        corLog(COR_LOG_INFO, "mqtt: %s: draining: %s lets go of its "
               "session", l->name, l->clientId);
        l->bye = corMqttLinkSend(l, &bye) == 0;
        if (!l->bye) {
            corMqttLinkClose(l);    /* a plain close does as much */
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
};

/* Copy s to *p (moved past it); returns where it went. */
static char*
copyStr(char** p, const char* s, size_t len)
{
    char* at = *p;

    if (len > 0) {
        memcpy(at, s, len);     /* s may be NULL then */
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

/* The user properties of pkt as headers. */
static void
userHeadersAdd(Inbound* in, char** p, const CorMqttPacket* pkt)
{
    CorMqttStr name;
    CorMqttStr value;
    size_t pos = 0;

    while (corMqttUserPropNext(&pkt->props, &pos, &name, &value)) {
        CorHeader* h = &in->headers[in->r.headerCount++];

        h->nameLen = name.len;
        h->name = copyStr(p, name.data, name.len);
        h->valueLen = value.len;
        h->value = copyStr(p, value.data, value.len);
    }
}

/* The headers of pkt: its QoS, retain, content type, user properties. */
static void
headersAdd(Inbound* in, char** p, const CorMqttPacket* pkt)
{
    in->r.headers = in->headers;
    headerAdd(in, p, "MQTT-QoS", (CorMqttStr){ in->qosText, 1 });
    if (pkt->retain) {
        headerAdd(in, p, "MQTT-Retain", (CorMqttStr){ "true", 4 });
    }
    if (corMqttPropHas(&pkt->props, COR_MQTT_PROP_CONTENT_TYPE)) {
        headerAdd(in, p, "Content-Type", pkt->props.contentType);
    }
    userHeadersAdd(in, p, pkt);
}

/* pkt, a PUBLISH of l, as a request in one block; NULL without memory. */
static Inbound*
inboundNew(Link* l, const CorMqttPacket* pkt)
{
    const CorMqttProps* props = &pkt->props;
    /* The property block bounds every string its properties hold. */
    size_t size = sizeof(Inbound) + (props->userCount + 3) * sizeof(CorHeader)
                  + pkt->topic.len + pkt->payload.len + props->rawLen * 2
                  + props->userCount * 2 + 64;
    Inbound* in = calloc(1, size);
    char* p;

    if (in == NULL) {
        return NULL;
    }
    p = (char*)&in->headers[props->userCount + 3];
    in->link = l;
    in->stats = corMqttStatsFor(&l->broker);
    in->gen = l->gen;
    in->version = l->broker.version;
    in->packetId = pkt->packetId;
    in->qos = pkt->qos;
    in->qosText[0] = (char)('0' + pkt->qos);
    in->r.method = "MQTT";
    in->r.methodLen = 4;
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
                             { status, (size_t)snprintf(status,
                                                        sizeof(status),
                                                        "%d", r->status) } };
    CorMqttPacket pkt = { .type = COR_MQTT_PUBLISH,
                          .topic = in->responseTopic,
                          .payload = { r->responseBody, r->responseLen } };

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
        corLog(COR_LOG_WARN, "mqtt: %s: the response to %.*s could not be "
               "encoded", in->link->name, (int)r->pathLen, r->path);
    }
}

static void
inboundDone(CorRequest* r)
{
    if (r->stream != NULL) {
        return;                 /* its end ends it */
    }
    responsePublish((Inbound*)r);
    corRequestSent(r);
}

static void
inboundStreamData(CorRequest* r, const void* data, size_t len)
{
    (void)r;
    (void)data;
    (void)len;
}

static void
inboundStreamEnd(CorRequest* r)
{
    corRequestSent(r);
}

static bool
inboundStreamAlive(const CorRequest* r)
{
    (void)r;
    return false;
}

/* The request ended: acknowledge its message if it was served (under
 * 500) on the connection it came on. */
static void
inboundRelease(CorRequest* r)
{
    Inbound* in = (Inbound*)r;
    Link* l = in->link;
    CorMqttPacket ack = { .type = in->qos == 1 ? COR_MQTT_PUBACK
                                               : COR_MQTT_PUBREC,
                          .packetId = in->packetId };

    corMqttStatsCount(in->stats, r->status < 500 ? COR_MQTT_COUNT_RECEIVED
                                 : COR_MQTT_COUNT_UNACKNOWLEDGED);
    l->serving--;
    if (in->qos > 0 && r->status < 500 && l->state == LINK_READY
        && l->gen == in->gen && corMqttLinkSend(l, &ack) != 0) {
        corLog(COR_LOG_WARN, "mqtt: %s: no memory to acknowledge %.*s",
               l->name, (int)r->pathLen, r->path);
    } else if (in->qos > 0 && r->status >= 500) {
        corLog(COR_LOG_WARN, "mqtt: %s: %.*s answered %d: not "
               "acknowledged, the broker sends it again", l->name,
               (int)r->pathLen, r->path, r->status);
    }
    if (l->draining && l->serving == 0) {
        linkLetGo(l);           /* its last acknowledgement is out */
    }
    corMqttLinkRelease(l);
    free(in);
}

int
corMqttInboundTake(Link* l, const CorMqttPacket* pkt, char* why,
                   size_t whyLen)
{
    Inbound* in;

    if (pkt->type == COR_MQTT_SUBACK) {
        subackTake(l, pkt);
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
    if (l->draining) {
        /* Not acknowledged: the session keeps it for the next
         * generation (a QoS 0 one is at most once anyway). */
        return 0;
    }
    in = inboundNew(l, pkt);
    if (in == NULL) {
        snprintf(why, whyLen, "no memory for a message");
        return -1;
    }
    corMqttLinkHold(l);
    l->serving++;
    corRequestServe(&in->r, &inboundOps, in);
    return 0;
}

void
corMqttClientDrain(void)
{
    Link* next;

    for (Link* l = corMqttLoopLinks(); l != NULL; l = next) {
        next = l->next;
        if (l->group == NULL) {
            continue;       /* publishers: the drain waits for their sends */
        }
        l->draining = true;
        if (l->serving == 0) {
            linkLetGo(l);
        }
    }
}
