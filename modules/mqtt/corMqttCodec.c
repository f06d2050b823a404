/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT control packets (3.1.1 and 5.0 chapter 3): the fixed header,
 * then one reader and one writer per packet layout, chosen by type from
 * two tables. The encoder checks what it wrote with the decoder, so that
 * the one set of rules lives in the readers and the codec never sends a
 * packet it would itself refuse.
 */
#include "corMqttInt.h"

#include <errno.h>

typedef bool (*ReadFn)(CorMqttReader* r, unsigned version, CorMqttPacket* pkt);
typedef void (*WriteFn)(CorMqttWriter* w, unsigned version,
                        const CorMqttPacket* pkt);

/* The reason codes each 5.0 packet type may carry (section 2.4). */
static const uint8_t connackCodes[] = { 0x00, 0x80, 0x81, 0x82, 0x83, 0x84,
                                        0x85, 0x86, 0x87, 0x88, 0x89, 0x8A,
                                        0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A,
                                        0x9B, 0x9C, 0x9D, 0x9F };
static const uint8_t pubackCodes[] = { 0x00, 0x10, 0x80, 0x83, 0x87,
                                       0x90, 0x91, 0x97, 0x99 };
static const uint8_t pubrelCodes[] = { 0x00, 0x92 };
static const uint8_t subackCodes[] = { 0x00, 0x01, 0x02, 0x80, 0x83, 0x87,
                                       0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2 };
static const uint8_t unsubackCodes[] = { 0x00, 0x11, 0x80, 0x83,
                                         0x87, 0x8F, 0x91 };
static const uint8_t disconnectCodes[] = { 0x00, 0x04, 0x80, 0x81, 0x82, 0x83,
                                           0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F,
                                           0x90, 0x93, 0x94, 0x95, 0x96, 0x97,
                                           0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D,
                                           0x9E, 0x9F, 0xA0, 0xA1, 0xA2 };
static const uint8_t authCodes[] = { 0x00, 0x18, 0x19 };
/* 3.1.1's CONNACK return codes and SUBACK results. */
static const uint8_t connack311Codes[] = { 0, 1, 2, 3, 4, 5 };
static const uint8_t suback311Codes[] = { 0x00, 0x01, 0x02, 0x80 };

typedef struct CodeSet {
    const uint8_t* codes;
    size_t n;
} CodeSet;

#define CODES(a)                                                               \
    {                                                                          \
        a, sizeof(a)                                                           \
    }

static const CodeSet codes5[16] = {
    [COR_MQTT_CONNACK] = CODES(connackCodes),
    [COR_MQTT_PUBACK] = CODES(pubackCodes),
    [COR_MQTT_PUBREC] = CODES(pubackCodes),
    [COR_MQTT_PUBREL] = CODES(pubrelCodes),
    [COR_MQTT_PUBCOMP] = CODES(pubrelCodes),
    [COR_MQTT_SUBACK] = CODES(subackCodes),
    [COR_MQTT_UNSUBACK] = CODES(unsubackCodes),
    [COR_MQTT_DISCONNECT] = CODES(disconnectCodes),
    [COR_MQTT_AUTH] = CODES(authCodes),
};
static const CodeSet codes311[16] = {
    [COR_MQTT_CONNACK] = CODES(connack311Codes),
    [COR_MQTT_SUBACK] = CODES(suback311Codes),
};

static bool
reasonCheck(CorMqttReader* r, unsigned version, uint8_t type, uint8_t code)
{
    const CodeSet* set = version == COR_MQTT_V5 ? &codes5[type]
                                                : &codes311[type];

    if (memchr(set->codes, code, set->n) == NULL) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR,
                           "reason code not one of the packet type's");
    }
    return true;
}

static bool
packetIdRead(CorMqttReader* r, uint16_t* id)
{
    if (!corMqttReadU16(r, id)) {
        return false;
    }
    if (*id == 0) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR, "packet id 0");
    }
    return true;
}

static bool
topicNameRead(CorMqttReader* r, CorMqttStr* topic)
{
    const char* why;

    if (!corMqttReadStr(r, topic)) {
        return false;
    }
    why = corMqttTopicNameCheck(topic->data, topic->len);
    if (why != NULL) {
        return corMqttFail(r, COR_MQTT_RC_TOPIC_NAME_INVALID, why);
    }
    return true;
}

/* The parts of CONNECT's payload after the client id. */
static bool
connectTail(CorMqttReader* r, CorMqttPacket* pkt)
{
    if (pkt->hasWill) {
        if (pkt->version == COR_MQTT_V5
            && !corMqttPropsRead(r, COR_MQTT_PROPS_WILL, &pkt->will.props)) {
            return false;
        }
        if (!topicNameRead(r, &pkt->will.topic)
            || !corMqttReadBin(r, &pkt->will.payload)) {
            return false;
        }
    }
    if (pkt->hasUsername && !corMqttReadStr(r, &pkt->username)) {
        return false;
    }
    return !pkt->hasPassword || corMqttReadBin(r, &pkt->password);
}

/* CONNECT's flags byte, for the level already read. */
static bool
connectFlags(CorMqttReader* r, uint8_t flags, CorMqttPacket* pkt)
{
    pkt->cleanStart = (flags & 0x02) != 0;
    pkt->hasWill = (flags & 0x04) != 0;
    pkt->will.qos = flags >> 3 & 3;
    pkt->will.retain = (flags & 0x20) != 0;
    pkt->hasPassword = (flags & 0x40) != 0;
    pkt->hasUsername = (flags & 0x80) != 0;
    if ((flags & 0x01) != 0) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "reserved CONNECT flag set");
    }
    if (pkt->will.qos == 3
        || (!pkt->hasWill && (pkt->will.qos != 0 || pkt->will.retain))) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "will QoS 3, or will QoS or retain without one");
    }
    if (pkt->version == COR_MQTT_V311 && pkt->hasPassword
        && !pkt->hasUsername) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "password without a user name");
    }
    return true;
}

static bool
connectRead(CorMqttReader* r, unsigned version, CorMqttPacket* pkt)
{
    CorMqttStr name;
    uint8_t flags;

    (void)version;
    if (!corMqttReadStr(r, &name) || !corMqttReadByte(r, &pkt->version)) {
        return false;
    }
    if (name.len != 4 || memcmp(name.data, "MQTT", 4) != 0
        || (pkt->version != COR_MQTT_V311 && pkt->version != COR_MQTT_V5)) {
        return corMqttFail(r, COR_MQTT_RC_UNSUPPORTED_VERSION,
                           "protocol not MQTT 3.1.1 or 5.0");
    }
    if (!corMqttReadByte(r, &flags) || !corMqttReadU16(r, &pkt->keepAlive)
        || !connectFlags(r, flags, pkt)) {
        return false;
    }
    if (pkt->version == COR_MQTT_V5
        && !corMqttPropsRead(r, COR_MQTT_CONNECT, &pkt->props)) {
        return false;
    }
    return corMqttReadStr(r, &pkt->clientId) && connectTail(r, pkt);
}

static bool
connackRead(CorMqttReader* r, unsigned version, CorMqttPacket* pkt)
{
    uint8_t flags;

    if (!corMqttReadByte(r, &flags) || !corMqttReadByte(r, &pkt->reasonCode)) {
        return false;
    }
    if ((flags & 0xFE) != 0) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "reserved CONNACK flag set");
    }
    pkt->sessionPresent = flags != 0;
    if (!reasonCheck(r, version, COR_MQTT_CONNACK, pkt->reasonCode)) {
        return false;
    }
    if (pkt->sessionPresent && pkt->reasonCode != 0) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR,
                           "session present on a refused connection");
    }
    return version != COR_MQTT_V5
           || corMqttPropsRead(r, COR_MQTT_CONNACK, &pkt->props);
}

static bool
publishRead(CorMqttReader* r, unsigned version, CorMqttPacket* pkt)
{
    if (!topicNameRead(r, &pkt->topic)) {
        return false;
    }
    if (pkt->qos > 0 && !packetIdRead(r, &pkt->packetId)) {
        return false;
    }
    if (version == COR_MQTT_V5
        && !corMqttPropsRead(r, COR_MQTT_PUBLISH, &pkt->props)) {
        return false;
    }
    pkt->payload.data = (const char*)r->p;
    pkt->payload.len = (size_t)(r->end - r->p);
    r->p = r->end;
    return true;
}

/*
 * The optional end of a 5.0 acknowledgement, DISCONNECT or AUTH: a reason
 * code (0 when absent), then properties (none when absent). Nothing in
 * 3.1.1.
 */
static bool
reasonTailRead(CorMqttReader* r, unsigned version, CorMqttPacket* pkt)
{
    if (version != COR_MQTT_V5 || r->p == r->end) {
        return true;
    }
    if (!corMqttReadByte(r, &pkt->reasonCode)
        || !reasonCheck(r, version, pkt->type, pkt->reasonCode)) {
        return false;
    }
    return r->p == r->end || corMqttPropsRead(r, pkt->type, &pkt->props);
}

static bool
ackRead(CorMqttReader* r, unsigned version, CorMqttPacket* pkt)
{
    return packetIdRead(r, &pkt->packetId) && reasonTailRead(r, version, pkt);
}

/* One SUBSCRIBE entry's options byte. */
static bool
optionsCheck(CorMqttReader* r, unsigned version, CorMqttStr filter,
             uint8_t options)
{
    uint8_t reserved = version == COR_MQTT_V5 ? 0xC0 : 0xFC;

    if ((options & reserved) != 0 || (options & 3) == 3) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "reserved subscription option bits, or QoS 3");
    }
    if (options >> COR_MQTT_SUB_RETAIN_HANDLING_SHIFT == 3) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR, "retain handling 3");
    }
    if ((options & COR_MQTT_SUB_NO_LOCAL) != 0 && filter.len >= 7
        && memcmp(filter.data, "$share/", 7) == 0) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR,
                           "no local on a shared subscription");
    }
    return true;
}

/* SUBSCRIBE and UNSUBSCRIBE: topic filters, with options for SUBSCRIBE. */
static bool
filtersRead(CorMqttReader* r, unsigned version, CorMqttPacket* pkt)
{
    if (!packetIdRead(r, &pkt->packetId)
        || (version == COR_MQTT_V5
            && !corMqttPropsRead(r, pkt->type, &pkt->props))) {
        return false;
    }
    pkt->list = r->p;
    while (r->p < r->end) {
        CorMqttStr filter;
        uint8_t options = 0;
        const char* why;

        if (!corMqttReadStr(r, &filter)) {
            return false;
        }
        why = corMqttTopicFilterCheck(filter.data, filter.len);
        if (why != NULL) {
            return corMqttFail(r, COR_MQTT_RC_TOPIC_FILTER_INVALID, why);
        }
        if (pkt->type == COR_MQTT_SUBSCRIBE
            && (!corMqttReadByte(r, &options)
                || !optionsCheck(r, version, filter, options))) {
            return false;
        }
        pkt->subCount++;
    }
    pkt->listLen = (size_t)(r->p - pkt->list);
    if (pkt->subCount == 0) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR, "no topic filter");
    }
    return true;
}

/* SUBACK and UNSUBACK (which has no codes in 3.1.1). */
static bool
codesRead(CorMqttReader* r, unsigned version, CorMqttPacket* pkt)
{
    if (!packetIdRead(r, &pkt->packetId)) {
        return false;
    }
    if (pkt->type == COR_MQTT_UNSUBACK && version == COR_MQTT_V311) {
        return true;
    }
    if (version == COR_MQTT_V5
        && !corMqttPropsRead(r, pkt->type, &pkt->props)) {
        return false;
    }
    pkt->codes = r->p;
    pkt->codeCount = (size_t)(r->end - r->p);
    r->p = r->end;
    if (pkt->codeCount == 0) {
        return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR, "no reason code");
    }
    for (size_t i = 0; i < pkt->codeCount; i++) {
        if (!reasonCheck(r, version, pkt->type, pkt->codes[i])) {
            return false;
        }
    }
    return true;
}

/* PINGREQ and PINGRESP: nothing, which the caller's check of bytes left
 * after the packet enforces. */
static bool
emptyRead(CorMqttReader* r, unsigned version, CorMqttPacket* pkt)
{
    (void)r, (void)version, (void)pkt;
    return true;
}

static const ReadFn readers[16] = {
    [COR_MQTT_CONNECT] = connectRead, [COR_MQTT_CONNACK] = connackRead,
    [COR_MQTT_PUBLISH] = publishRead, [COR_MQTT_PUBACK] = ackRead,
    [COR_MQTT_PUBREC] = ackRead,      [COR_MQTT_PUBREL] = ackRead,
    [COR_MQTT_PUBCOMP] = ackRead,     [COR_MQTT_SUBSCRIBE] = filtersRead,
    [COR_MQTT_SUBACK] = codesRead,    [COR_MQTT_UNSUBSCRIBE] = filtersRead,
    [COR_MQTT_UNSUBACK] = codesRead,  [COR_MQTT_PINGREQ] = emptyRead,
    [COR_MQTT_PINGRESP] = emptyRead,  [COR_MQTT_DISCONNECT] = reasonTailRead,
    [COR_MQTT_AUTH] = reasonTailRead,
};

/* The fixed header's first byte: the type and its flag bits. */
static bool
firstByteRead(CorMqttReader* r, unsigned version, uint8_t b, CorMqttPacket* pkt)
{
    uint8_t flags = b & 0x0F;
    uint8_t want;

    pkt->type = b >> 4;
    if (pkt->type == 0
        || (pkt->type == COR_MQTT_AUTH && version != COR_MQTT_V5)) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED, "reserved packet type");
    }
    if (pkt->type == COR_MQTT_PUBLISH) {
        pkt->dup = (flags & 0x08) != 0;
        pkt->qos = flags >> 1 & 3;
        pkt->retain = (flags & 0x01) != 0;
        if (pkt->qos == 3) {
            return corMqttFail(r, COR_MQTT_RC_MALFORMED, "QoS 3");
        }
        if (pkt->dup && pkt->qos == 0) {
            return corMqttFail(r, COR_MQTT_RC_PROTOCOL_ERROR,
                               "DUP set on a QoS 0 message");
        }
        return true;
    }
    want = pkt->type == COR_MQTT_PUBREL || pkt->type == COR_MQTT_SUBSCRIBE
                   || pkt->type == COR_MQTT_UNSUBSCRIBE
               ? 0x02
               : 0x00;
    if (flags != want) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "reserved fixed header flags");
    }
    return true;
}

/*
 * The remaining length at buf[1..len): the header's length (2 to 5), 0
 * while it is not all in, or -1 when it runs to a fifth byte.
 */
static int
remainingRead(const uint8_t* buf, size_t len, uint32_t* remaining)
{
    uint32_t value = 0;

    for (unsigned i = 0; i < 4; i++) {
        if (1 + i >= len) {
            return 0;
        }
        value |= (uint32_t)(buf[1 + i] & 0x7F) << (7 * i);
        if ((buf[1 + i] & 0x80) == 0) {
            *remaining = value;
            return (int)(2 + i);
        }
    }
    return -1;
}

int
corMqttDecode(const uint8_t* buf, size_t len, unsigned version, size_t maxSize,
              CorMqttPacket* pkt, CorMqttStatus* st)
{
    /* Only for a refusal of the header: the body gets a reader of its
     * own once its bounds are known. */
    CorMqttReader r = { buf, buf, st };
    uint32_t remaining = 0;
    size_t total;
    int head;

    memset(pkt, 0, sizeof(*pkt));
    memset(st, 0, sizeof(*st));
    pkt->version = (uint8_t)version;
    if (maxSize == 0 || maxSize > COR_MQTT_PACKET_MAX) {
        maxSize = COR_MQTT_PACKET_MAX;
    }
    if (len == 0) {
        return 0;
    }
    if (!firstByteRead(&r, version, buf[0], pkt)) {
        goto failed;
    }
    head = remainingRead(buf, len, &remaining);
    if (head < 0) {
        corMqttFail(&r, COR_MQTT_RC_MALFORMED,
                    "remaining length of more than 4 bytes");
        goto failed;
    }
    if (head == 0) {
        return 0;
    }
    total = (size_t)head + remaining;
    if (total > maxSize) {
        corMqttFail(&r, COR_MQTT_RC_PACKET_TOO_LARGE,
                    "packet larger than the maximum packet size");
        goto failed;
    }
    if (len < total) {
        st->need = total;
        return 0;
    }
    r = (CorMqttReader){ buf + head, buf + total, st };
    if (!readers[pkt->type](&r, version, pkt)) {
        goto failed;
    }
    if (r.p != r.end) {
        corMqttFail(&r, COR_MQTT_RC_MALFORMED, "bytes left after the packet");
        goto failed;
    }
    return (int)total;

failed:
    return -(int)st->reasonCode;
}

static void
qosPut(CorMqttWriter* w, uint8_t qos)
{
    /* A QoS that would spill into the next flag cannot be written. */
    if (qos > 3) {
        w->bad = true;
    }
}

static void
connectWrite(CorMqttWriter* w, unsigned version, const CorMqttPacket* pkt)
{
    unsigned level = pkt->version != 0 ? pkt->version : version;

    qosPut(w, pkt->will.qos);
    corMqttPutBin(w, (CorMqttStr){ "MQTT", 4 });
    corMqttPutByte(w, (uint8_t)level);
    corMqttPutByte(w, (uint8_t)((pkt->hasUsername ? 0x80 : 0)
                                | (pkt->hasPassword ? 0x40 : 0)
                                | (pkt->will.retain ? 0x20 : 0)
                                | (pkt->will.qos & 3) << 3
                                | (pkt->hasWill ? 0x04 : 0)
                                | (pkt->cleanStart ? 0x02 : 0)));
    corMqttPutU16(w, pkt->keepAlive);
    if (level == COR_MQTT_V5) {
        corMqttPropsWrite(w, &pkt->props);
    }
    corMqttPutBin(w, pkt->clientId);
    if (pkt->hasWill) {
        if (level == COR_MQTT_V5) {
            corMqttPropsWrite(w, &pkt->will.props);
        }
        corMqttPutBin(w, pkt->will.topic);
        corMqttPutBin(w, pkt->will.payload);
    }
    if (pkt->hasUsername) {
        corMqttPutBin(w, pkt->username);
    }
    if (pkt->hasPassword) {
        corMqttPutBin(w, pkt->password);
    }
}

static void
connackWrite(CorMqttWriter* w, unsigned version, const CorMqttPacket* pkt)
{
    corMqttPutByte(w, pkt->sessionPresent ? 1 : 0);
    corMqttPutByte(w, pkt->reasonCode);
    if (version == COR_MQTT_V5) {
        corMqttPropsWrite(w, &pkt->props);
    }
}

static void
publishWrite(CorMqttWriter* w, unsigned version, const CorMqttPacket* pkt)
{
    corMqttPutBin(w, pkt->topic);
    if (pkt->qos > 0) {
        corMqttPutU16(w, pkt->packetId);
    }
    if (version == COR_MQTT_V5) {
        corMqttPropsWrite(w, &pkt->props);
    }
    corMqttPut(w, pkt->payload.data, pkt->payload.len);
}

/* The short forms: no reason code when it is 0 and nothing follows, no
 * properties when there are none. */
static void
reasonTailWrite(CorMqttWriter* w, unsigned version, const CorMqttPacket* pkt)
{
    bool noProps = corMqttPropsEmpty(&pkt->props);

    if (version != COR_MQTT_V5 || (pkt->reasonCode == 0 && noProps)) {
        return;
    }
    corMqttPutByte(w, pkt->reasonCode);
    if (!noProps) {
        corMqttPropsWrite(w, &pkt->props);
    }
}

static void
ackWrite(CorMqttWriter* w, unsigned version, const CorMqttPacket* pkt)
{
    corMqttPutU16(w, pkt->packetId);
    reasonTailWrite(w, version, pkt);
}

static void
filtersWrite(CorMqttWriter* w, unsigned version, const CorMqttPacket* pkt)
{
    corMqttPutU16(w, pkt->packetId);
    if (version == COR_MQTT_V5) {
        corMqttPropsWrite(w, &pkt->props);
    }
    if (pkt->subs == NULL) {
        corMqttPut(w, pkt->list, pkt->listLen);
        return;
    }
    for (unsigned i = 0; i < pkt->subCount; i++) {
        corMqttPutBin(w, pkt->subs[i].filter);
        if (pkt->type == COR_MQTT_SUBSCRIBE) {
            corMqttPutByte(w, pkt->subs[i].options);
        }
    }
}

static void
codesWrite(CorMqttWriter* w, unsigned version, const CorMqttPacket* pkt)
{
    corMqttPutU16(w, pkt->packetId);
    if (pkt->type == COR_MQTT_UNSUBACK && version == COR_MQTT_V311) {
        return;
    }
    if (version == COR_MQTT_V5) {
        corMqttPropsWrite(w, &pkt->props);
    }
    corMqttPut(w, pkt->codes, pkt->codeCount);
}

static void
emptyWrite(CorMqttWriter* w, unsigned version, const CorMqttPacket* pkt)
{
    (void)w, (void)version, (void)pkt;
}

static const WriteFn writers[16] = {
    [COR_MQTT_CONNECT] = connectWrite, [COR_MQTT_CONNACK] = connackWrite,
    [COR_MQTT_PUBLISH] = publishWrite, [COR_MQTT_PUBACK] = ackWrite,
    [COR_MQTT_PUBREC] = ackWrite,      [COR_MQTT_PUBREL] = ackWrite,
    [COR_MQTT_PUBCOMP] = ackWrite,     [COR_MQTT_SUBSCRIBE] = filtersWrite,
    [COR_MQTT_SUBACK] = codesWrite,    [COR_MQTT_UNSUBSCRIBE] = filtersWrite,
    [COR_MQTT_UNSUBACK] = codesWrite,  [COR_MQTT_PINGREQ] = emptyWrite,
    [COR_MQTT_PINGRESP] = emptyWrite,  [COR_MQTT_DISCONNECT] = reasonTailWrite,
    [COR_MQTT_AUTH] = reasonTailWrite,
};

static uint8_t
firstByte(const CorMqttPacket* pkt)
{
    uint8_t flags = 0;

    if (pkt->type == COR_MQTT_PUBLISH) {
        flags = (uint8_t)((pkt->dup ? 0x08 : 0) | (pkt->qos & 3) << 1
                          | (pkt->retain ? 0x01 : 0));
    } else if (pkt->type == COR_MQTT_PUBREL || pkt->type == COR_MQTT_SUBSCRIBE
               || pkt->type == COR_MQTT_UNSUBSCRIBE) {
        flags = 0x02;
    }
    return (uint8_t)(pkt->type << 4 | flags);
}

/* The remaining length of pkt, or -EINVAL. */
static int
bodySize(unsigned version, const CorMqttPacket* pkt)
{
    CorMqttWriter w = { 0 };

    if ((version != COR_MQTT_V311 && version != COR_MQTT_V5) || pkt->type == 0
        || pkt->type > COR_MQTT_AUTH) {
        return -EINVAL;
    }
    if (pkt->type == COR_MQTT_PUBLISH) {
        qosPut(&w, pkt->qos);
    }
    writers[pkt->type](&w, version, pkt);
    if (w.bad || w.n > COR_MQTT_REMAINING_MAX) {
        return -EINVAL;
    }
    return (int)w.n;
}

int
corMqttEncodedSize(unsigned version, const CorMqttPacket* pkt)
{
    int body = bodySize(version, pkt);

    if (body < 0) {
        return body;
    }
    return 1 + (int)corMqttVarintSize((uint32_t)body) + body;
}

int
corMqttEncode(uint8_t* out, size_t cap, unsigned version,
              const CorMqttPacket* pkt)
{
    int body = bodySize(version, pkt);
    CorMqttWriter w = { out, cap, 0, false };
    CorMqttPacket check;
    CorMqttStatus st;
    size_t size;

    if (body < 0) {
        return body;
    }
    size = 1 + corMqttVarintSize((uint32_t)body) + (size_t)body;
    if (size > cap) {
        return -ENOBUFS;
    }
    corMqttPutByte(&w, firstByte(pkt));
    corMqttPutVarint(&w, (uint32_t)body);
    writers[pkt->type](&w, version, pkt);
    if (corMqttDecode(out, size, version, 0, &check, &st) != (int)size) {
        return -EINVAL;
    }
    return (int)size;
}

const char*
corMqttTypeName(unsigned type)
{
    static const char* const names[16] = {
        "reserved",  "CONNECT",  "CONNACK",     "PUBLISH",
        "PUBACK",    "PUBREC",   "PUBREL",      "PUBCOMP",
        "SUBSCRIBE", "SUBACK",   "UNSUBSCRIBE", "UNSUBACK",
        "PINGREQ",   "PINGRESP", "DISCONNECT",  "AUTH",
    };

    return type < 16 ? names[type] : names[0];
}

bool
corMqttSubNext(const CorMqttPacket* pkt, size_t* pos, CorMqttSub* sub)
{
    CorMqttStatus st = { 0 };
    CorMqttReader r;

    if (*pos >= pkt->listLen) {
        return false;
    }
    r = (CorMqttReader){ pkt->list + *pos, pkt->list + pkt->listLen, &st };
    if (!corMqttReadBin(&r, &sub->filter)) {
        return false;
    }
    sub->options = 0;
    if (pkt->type == COR_MQTT_SUBSCRIBE
        && !corMqttReadByte(&r, &sub->options)) {
        return false;
    }
    *pos = (size_t)(r.p - pkt->list);
    return true;
}
