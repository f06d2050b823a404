/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MQTT 5.0 properties (section 2.2.2): one table row per property, its
 * data type, the packets that may carry it and the field that holds it,
 * so that reading, writing and every rule on them (allowed where, once or
 * many times, in range) follow from the table rather than from a switch
 * per packet.
 */
#include "corMqttInt.h"

typedef enum {
    KIND_NONE = 0, /* not a property identifier */
    KIND_FLAG,     /* a byte, 0 or 1 */
    KIND_U16,
    KIND_U32,
    KIND_VARINT,
    KIND_STR,
    KIND_BIN,
    KIND_PAIR /* a user property: two strings */
} Kind;

typedef enum {
    CHECK_NONE = 0,
    CHECK_NONZERO, /* 0 is a protocol error */
    CHECK_TOPIC    /* a topic name, no wildcard */
} Check;

typedef struct PropDesc {
    uint8_t kind;    /* Kind */
    uint8_t check;   /* Check */
    uint16_t owners; /* 1 << packet type; bit 0 the will */
    size_t offset;   /* of the field in CorMqttProps */
} PropDesc;

/* One value as read, before it is checked and stored. */
typedef struct PropValue {
    uint32_t num;
    CorMqttStr a;
    CorMqttStr b;
} PropValue;

#define OWNER(t) (1u << (t))
#define WILL OWNER(COR_MQTT_PROPS_WILL)
#define MESSAGE (OWNER(COR_MQTT_PUBLISH) | WILL)
#define CONNECTS (OWNER(COR_MQTT_CONNECT) | OWNER(COR_MQTT_CONNACK))
#define ACKS                                                                   \
    (OWNER(COR_MQTT_PUBACK) | OWNER(COR_MQTT_PUBREC) | OWNER(COR_MQTT_PUBREL)  \
     | OWNER(COR_MQTT_PUBCOMP) | OWNER(COR_MQTT_SUBACK)                        \
     | OWNER(COR_MQTT_UNSUBACK))
#define ALL 0xFFFFu
#define FIELD(f) offsetof(CorMqttProps, f)
#define PROP_COUNT (COR_MQTT_PROP_SHARED_SUB_AVAILABLE + 1)

static const PropDesc table[PROP_COUNT] = {
    [COR_MQTT_PROP_PAYLOAD_FORMAT] = { KIND_FLAG, CHECK_NONE, MESSAGE,
                                       FIELD(payloadFormat) },
    [COR_MQTT_PROP_MESSAGE_EXPIRY] = { KIND_U32, CHECK_NONE, MESSAGE,
                                       FIELD(messageExpiry) },
    [COR_MQTT_PROP_CONTENT_TYPE] = { KIND_STR, CHECK_NONE, MESSAGE,
                                     FIELD(contentType) },
    [COR_MQTT_PROP_RESPONSE_TOPIC] = { KIND_STR, CHECK_TOPIC, MESSAGE,
                                       FIELD(responseTopic) },
    [COR_MQTT_PROP_CORRELATION_DATA] = { KIND_BIN, CHECK_NONE, MESSAGE,
                                         FIELD(correlationData) },
    [COR_MQTT_PROP_SUBSCRIPTION_ID] = { KIND_VARINT, CHECK_NONZERO,
                                        OWNER(COR_MQTT_PUBLISH)
                                            | OWNER(COR_MQTT_SUBSCRIBE),
                                        FIELD(subscriptionId) },
    [COR_MQTT_PROP_SESSION_EXPIRY] = { KIND_U32, CHECK_NONE,
                                       CONNECTS | OWNER(COR_MQTT_DISCONNECT),
                                       FIELD(sessionExpiry) },
    [COR_MQTT_PROP_ASSIGNED_CLIENT_ID] = { KIND_STR, CHECK_NONE,
                                           OWNER(COR_MQTT_CONNACK),
                                           FIELD(assignedClientId) },
    [COR_MQTT_PROP_SERVER_KEEP_ALIVE] = { KIND_U16, CHECK_NONE,
                                          OWNER(COR_MQTT_CONNACK),
                                          FIELD(serverKeepAlive) },
    [COR_MQTT_PROP_AUTH_METHOD] = { KIND_STR, CHECK_NONE,
                                    CONNECTS | OWNER(COR_MQTT_AUTH),
                                    FIELD(authMethod) },
    [COR_MQTT_PROP_AUTH_DATA] = { KIND_BIN, CHECK_NONE,
                                  CONNECTS | OWNER(COR_MQTT_AUTH),
                                  FIELD(authData) },
    [COR_MQTT_PROP_REQUEST_PROBLEM_INFO] = { KIND_FLAG, CHECK_NONE,
                                             OWNER(COR_MQTT_CONNECT),
                                             FIELD(requestProblemInfo) },
    [COR_MQTT_PROP_WILL_DELAY] = { KIND_U32, CHECK_NONE, WILL,
                                   FIELD(willDelay) },
    [COR_MQTT_PROP_REQUEST_RESPONSE_INFO] = { KIND_FLAG, CHECK_NONE,
                                              OWNER(COR_MQTT_CONNECT),
                                              FIELD(requestResponseInfo) },
    [COR_MQTT_PROP_RESPONSE_INFO] = { KIND_STR, CHECK_NONE,
                                      OWNER(COR_MQTT_CONNACK),
                                      FIELD(responseInfo) },
    [COR_MQTT_PROP_SERVER_REFERENCE] = { KIND_STR, CHECK_NONE,
                                         OWNER(COR_MQTT_CONNACK)
                                             | OWNER(COR_MQTT_DISCONNECT),
                                         FIELD(serverReference) },
    [COR_MQTT_PROP_REASON_STRING] = { KIND_STR, CHECK_NONE,
                                      OWNER(COR_MQTT_CONNACK) | ACKS
                                          | OWNER(COR_MQTT_DISCONNECT)
                                          | OWNER(COR_MQTT_AUTH),
                                      FIELD(reasonString) },
    [COR_MQTT_PROP_RECEIVE_MAXIMUM] = { KIND_U16, CHECK_NONZERO, CONNECTS,
                                        FIELD(receiveMaximum) },
    [COR_MQTT_PROP_TOPIC_ALIAS_MAXIMUM] = { KIND_U16, CHECK_NONE, CONNECTS,
                                            FIELD(topicAliasMaximum) },
    [COR_MQTT_PROP_MAXIMUM_QOS] = { KIND_FLAG, CHECK_NONE,
                                    OWNER(COR_MQTT_CONNACK),
                                    FIELD(maximumQos) },
    [COR_MQTT_PROP_RETAIN_AVAILABLE] = { KIND_FLAG, CHECK_NONE,
                                         OWNER(COR_MQTT_CONNACK),
                                         FIELD(retainAvailable) },
    [COR_MQTT_PROP_USER] = { KIND_PAIR, CHECK_NONE, ALL, 0 },
    [COR_MQTT_PROP_MAXIMUM_PACKET_SIZE] = { KIND_U32, CHECK_NONZERO, CONNECTS,
                                            FIELD(maximumPacketSize) },
    [COR_MQTT_PROP_WILDCARD_SUB_AVAILABLE] = { KIND_FLAG, CHECK_NONE,
                                               OWNER(COR_MQTT_CONNACK),
                                               FIELD(wildcardSubAvailable) },
    [COR_MQTT_PROP_SUB_ID_AVAILABLE] = { KIND_FLAG, CHECK_NONE,
                                         OWNER(COR_MQTT_CONNACK),
                                         FIELD(subIdAvailable) },
    [COR_MQTT_PROP_SHARED_SUB_AVAILABLE] = { KIND_FLAG, CHECK_NONE,
                                             OWNER(COR_MQTT_CONNACK),
                                             FIELD(sharedSubAvailable) },
};

/*
 * Read one property's identifier and value (its type's form only; the
 * rules are propStore's). Topic Alias is refused here: see corMqttCodec.h.
 */
static const PropDesc*
propReadOne(CorMqttReader* r, uint32_t* idP, PropValue* v)
{
    uint32_t id;
    uint8_t b;
    uint16_t u16;
    bool ok = false;

    if (!corMqttReadVarint(r, &id)) {
        return NULL;
    }
    if (id == COR_MQTT_PROP_TOPIC_ALIAS) {
        corMqttFail(r, COR_MQTT_RC_TOPIC_ALIAS_INVALID,
                    "topic alias, and Topic Alias Maximum is 0");
        return NULL;
    }
    if (id >= PROP_COUNT || table[id].kind == KIND_NONE) {
        corMqttFail(r, COR_MQTT_RC_MALFORMED, "unknown property");
        return NULL;
    }
    switch (table[id].kind) {
    case KIND_FLAG:
        ok = corMqttReadByte(r, &b);
        v->num = b;
        break;
    case KIND_U16:
        ok = corMqttReadU16(r, &u16);
        v->num = u16;
        break;
    case KIND_U32:
        ok = corMqttReadU32(r, &v->num);
        break;
    case KIND_VARINT:
        ok = corMqttReadVarint(r, &v->num);
        break;
    case KIND_STR:
        ok = corMqttReadStr(r, &v->a);
        break;
    case KIND_BIN:
        ok = corMqttReadBin(r, &v->a);
        break;
    case KIND_PAIR:
        ok = corMqttReadStr(r, &v->a) && corMqttReadStr(r, &v->b);
        break;
    }
    *idP = id;
    return ok ? &table[id] : NULL;
}

/* Check one property read for owner against the 5.0 rules. */
static bool
propCheck(CorMqttReader* r, unsigned owner, uint32_t id, const PropDesc* d,
          const PropValue* v, const CorMqttProps* props)
{
    bool repeats = id == COR_MQTT_PROP_USER
                   || (id == COR_MQTT_PROP_SUBSCRIPTION_ID
                       && owner == COR_MQTT_PUBLISH);

    if ((d->owners & OWNER(owner)) == 0) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "property not allowed in this packet");
    }
    if (!repeats && corMqttPropHas(props, id)) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR,
                           "property more than once");
    }
    if ((d->kind == KIND_FLAG && v->num > 1)
        || (d->check == CHECK_NONZERO && v->num == 0)) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR,
                           "property value out of range");
    }
    if (d->check == CHECK_TOPIC
        && corMqttTopicNameCheck(v->a.data, v->a.len) != NULL) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR,
                           "response topic not a topic name");
    }
    return true;
}

/* Keep a checked property: its field, or its list's count. */
static void
propKeep(uint32_t id, const PropDesc* d, const PropValue* v,
         CorMqttProps* props)
{
    char* field = (char*)props + d->offset;

    corMqttPropSet(props, id);
    if (id == COR_MQTT_PROP_USER) {
        props->userCount++;
        return;
    }
    if (id == COR_MQTT_PROP_SUBSCRIPTION_ID && props->subIdCount++ > 0) {
        return;
    }
    switch (d->kind) {
    case KIND_FLAG:
        *(uint8_t*)field = (uint8_t)v->num;
        break;
    case KIND_U16:
        *(uint16_t*)field = (uint16_t)v->num;
        break;
    case KIND_U32:
    case KIND_VARINT:
        *(uint32_t*)field = v->num;
        break;
    default:
        *(CorMqttStr*)field = v->a;
        break;
    }
}

bool
corMqttPropsRead(CorMqttReader* r, unsigned owner, CorMqttProps* props)
{
    CorMqttReader pr;
    uint32_t len;

    memset(props, 0, sizeof(*props));
    if (!corMqttReadVarint(r, &len)) {
        return false;
    }
    if (len > (size_t)(r->end - r->p)) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "properties run past the packet");
    }
    pr = (CorMqttReader){ r->p, r->p + len, r->st };
    props->raw = r->p;
    props->rawLen = len;
    r->p += len;
    while (pr.p < pr.end) {
        PropValue v;
        uint32_t id;
        const PropDesc* d = propReadOne(&pr, &id, &v);

        if (d == NULL || !propCheck(&pr, owner, id, d, &v, props)) {
            return false;
        }
        propKeep(id, d, &v, props);
    }
    if (corMqttPropHas(props, COR_MQTT_PROP_AUTH_DATA)
        && !corMqttPropHas(props, COR_MQTT_PROP_AUTH_METHOD)) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR,
                           "authentication data without a method");
    }
    return true;
}

/*
 * The next property of a decoded block whose identifier is want (a list's:
 * user property or subscription identifier); *start is where it begins.
 */
static bool
listNext(const CorMqttProps* props, size_t* pos, uint32_t want, PropValue* v,
         size_t* start)
{
    CorMqttStatus st = { 0 };

    while (*pos < props->rawLen) {
        CorMqttReader r = { props->raw + *pos, props->raw + props->rawLen,
                            &st };
        uint32_t id;

        *start = *pos;
        if (propReadOne(&r, &id, v) == NULL) {
            return false;
        }
        *pos = (size_t)(r.p - props->raw);
        if (id == want) {
            return true;
        }
    }
    return false;
}

bool
corMqttUserPropNext(const CorMqttProps* props, size_t* pos, CorMqttStr* name,
                    CorMqttStr* value)
{
    PropValue v;
    size_t start;

    if (!listNext(props, pos, COR_MQTT_PROP_USER, &v, &start)) {
        return false;
    }
    *name = v.a;
    *value = v.b;
    return true;
}

bool
corMqttSubIdNext(const CorMqttProps* props, size_t* pos, uint32_t* id)
{
    PropValue v;
    size_t start;

    if (!listNext(props, pos, COR_MQTT_PROP_SUBSCRIPTION_ID, &v, &start)) {
        return false;
    }
    *id = v.num;
    return true;
}

/* The scalar properties: every one but the two lists. */
#define SCALARS                                                                \
    ((((uint64_t)1 << PROP_COUNT) - 1) & ~((uint64_t)1 << COR_MQTT_PROP_USER)  \
     & ~((uint64_t)1 << COR_MQTT_PROP_SUBSCRIPTION_ID))

/* Write the scalar properties present, from their fields, by increasing
 * identifier. The bits of has are walked, not the table: a message has one
 * or two of the 40, and a PUBLISH's block is written six times (twice in
 * each of corMqttPropsWrite's three calls: the packet's size, the body's,
 * the packet), which walking the table made a sixth of a notification's
 * cost. */
static void
scalarsWrite(CorMqttWriter* w, const CorMqttProps* props)
{
    for (uint64_t left = props->has & SCALARS; left != 0; left &= left - 1) {
        unsigned id = (unsigned)__builtin_ctzll(left);
        const PropDesc* d = &table[id];
        const char* field = (const char*)props + d->offset;

        if (d->kind == KIND_NONE) {
            continue;
        }
        corMqttPutByte(w, (uint8_t)id);
        switch (d->kind) {
        case KIND_FLAG:
            corMqttPutByte(w, *(const uint8_t*)field);
            break;
        case KIND_U16:
            corMqttPutU16(w, *(const uint16_t*)field);
            break;
        case KIND_U32:
            corMqttPutU32(w, *(const uint32_t*)field);
            break;
        default:
            corMqttPutBin(w, *(const CorMqttStr*)field);
            break;
        }
    }
}

/* Write the lists: raw's entries as they were, then the caller's. */
static void
listsWrite(CorMqttWriter* w, const CorMqttProps* props)
{
    size_t pos = 0;
    size_t start;
    PropValue v;

    while (listNext(props, &pos, COR_MQTT_PROP_USER, &v, &start)) {
        corMqttPut(w, props->raw + start, pos - start);
    }
    pos = 0;
    while (listNext(props, &pos, COR_MQTT_PROP_SUBSCRIPTION_ID, &v, &start)) {
        corMqttPut(w, props->raw + start, pos - start);
    }
    for (unsigned i = 0; props->user != NULL && i < props->userCount; i++) {
        corMqttPutByte(w, COR_MQTT_PROP_USER);
        corMqttPutBin(w, props->user[i].name);
        corMqttPutBin(w, props->user[i].value);
    }
    if (corMqttPropHas(props, COR_MQTT_PROP_SUBSCRIPTION_ID)
        && props->subIdCount == 0) {
        corMqttPutByte(w, COR_MQTT_PROP_SUBSCRIPTION_ID);
        corMqttPutVarint(w, props->subscriptionId);
    }
}

void
corMqttPropsWrite(CorMqttWriter* w, const CorMqttProps* props)
{
    CorMqttWriter m = { 0 };

    scalarsWrite(&m, props);
    listsWrite(&m, props);
    if (m.n > COR_MQTT_REMAINING_MAX) {
        w->bad = true;
        return;
    }
    corMqttPutVarint(w, (uint32_t)m.n);
    scalarsWrite(w, props);
    listsWrite(w, props);
}

bool
corMqttPropsEmpty(const CorMqttProps* props)
{
    return props->has == 0 && (props->user == NULL || props->userCount == 0);
}
