/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whether two decoded MQTT packets say the same, field by field and list
 * entry by list entry (not byte by byte: a packet may be written in more
 * than one way). Shared by the codec's unit test and its fuzz target, which
 * both decode, encode and decode again.
 */
#ifndef COR_MQTT_EQUAL_H
#define COR_MQTT_EQUAL_H

#include "corMqttCodec.h"

#include <string.h>

static inline bool
mqttStrEq(CorMqttStr a, CorMqttStr b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

/* Each macro returns the name of the field that differs. */
#define MQTT_SAME(a, b, f)                                                     \
    if ((a)->f != (b)->f)                                                      \
    return #f
#define MQTT_SAME_STR(a, b, f)                                                 \
    if (!mqttStrEq((a)->f, (b)->f))                                            \
    return #f

static inline const char*
mqttListsDiffer(const CorMqttProps* a, const CorMqttProps* b)
{
    size_t pa = 0, pb = 0;
    CorMqttStr na, va, nb, vb;
    uint32_t ia, ib;
    bool more;

    do {
        more = corMqttUserPropNext(a, &pa, &na, &va);
        if (more != corMqttUserPropNext(b, &pb, &nb, &vb)
            || (more && (!mqttStrEq(na, nb) || !mqttStrEq(va, vb)))) {
            return "user property";
        }
    } while (more);
    pa = pb = 0;
    do {
        more = corMqttSubIdNext(a, &pa, &ia);
        if (more != corMqttSubIdNext(b, &pb, &ib) || (more && ia != ib)) {
            return "subscription identifier";
        }
    } while (more);
    return NULL;
}

static inline const char*
mqttPropsDiffer(const CorMqttProps* a, const CorMqttProps* b)
{
    MQTT_SAME(a, b, has);
    MQTT_SAME(a, b, payloadFormat);
    MQTT_SAME(a, b, messageExpiry);
    MQTT_SAME_STR(a, b, contentType);
    MQTT_SAME_STR(a, b, responseTopic);
    MQTT_SAME_STR(a, b, correlationData);
    MQTT_SAME(a, b, subscriptionId);
    MQTT_SAME(a, b, sessionExpiry);
    MQTT_SAME_STR(a, b, assignedClientId);
    MQTT_SAME(a, b, serverKeepAlive);
    MQTT_SAME_STR(a, b, authMethod);
    MQTT_SAME_STR(a, b, authData);
    MQTT_SAME(a, b, requestProblemInfo);
    MQTT_SAME(a, b, willDelay);
    MQTT_SAME(a, b, requestResponseInfo);
    MQTT_SAME_STR(a, b, responseInfo);
    MQTT_SAME_STR(a, b, serverReference);
    MQTT_SAME_STR(a, b, reasonString);
    MQTT_SAME(a, b, receiveMaximum);
    MQTT_SAME(a, b, topicAliasMaximum);
    MQTT_SAME(a, b, maximumQos);
    MQTT_SAME(a, b, retainAvailable);
    MQTT_SAME(a, b, maximumPacketSize);
    MQTT_SAME(a, b, wildcardSubAvailable);
    MQTT_SAME(a, b, subIdAvailable);
    MQTT_SAME(a, b, sharedSubAvailable);
    MQTT_SAME(a, b, userCount);
    MQTT_SAME(a, b, subIdCount);
    return mqttListsDiffer(a, b);
}

static inline const char*
mqttSubsDiffer(const CorMqttPacket* a, const CorMqttPacket* b)
{
    size_t pa = 0, pb = 0;
    CorMqttSub sa, sb;
    bool more;

    do {
        more = corMqttSubNext(a, &pa, &sa);
        if (more != corMqttSubNext(b, &pb, &sb)
            || (more
                && (!mqttStrEq(sa.filter, sb.filter)
                    || sa.options != sb.options))) {
            return "topic filter";
        }
    } while (more);
    return NULL;
}

/* NULL when a and b are the same packet, else the first field that is
 * not. */
static inline const char*
mqttPacketDiffers(const CorMqttPacket* a, const CorMqttPacket* b)
{
    const char* why;

    MQTT_SAME(a, b, type);
    MQTT_SAME(a, b, version);
    MQTT_SAME(a, b, dup);
    MQTT_SAME(a, b, qos);
    MQTT_SAME(a, b, retain);
    MQTT_SAME(a, b, packetId);
    MQTT_SAME(a, b, reasonCode);
    MQTT_SAME(a, b, sessionPresent);
    MQTT_SAME(a, b, cleanStart);
    MQTT_SAME(a, b, keepAlive);
    MQTT_SAME(a, b, hasUsername);
    MQTT_SAME(a, b, hasPassword);
    MQTT_SAME(a, b, hasWill);
    MQTT_SAME_STR(a, b, clientId);
    MQTT_SAME_STR(a, b, username);
    MQTT_SAME_STR(a, b, password);
    MQTT_SAME_STR(a, b, will.topic);
    MQTT_SAME_STR(a, b, will.payload);
    MQTT_SAME(a, b, will.qos);
    MQTT_SAME(a, b, will.retain);
    MQTT_SAME_STR(a, b, topic);
    MQTT_SAME_STR(a, b, payload);
    MQTT_SAME(a, b, subCount);
    MQTT_SAME(a, b, codeCount);
    if (a->codeCount > 0 && memcmp(a->codes, b->codes, a->codeCount) != 0) {
        return "codes";
    }
    why = mqttPropsDiffer(&a->will.props, &b->will.props);
    if (why == NULL) {
        why = mqttPropsDiffer(&a->props, &b->props);
    }
    return why != NULL ? why : mqttSubsDiffer(a, b);
}

#undef MQTT_SAME
#undef MQTT_SAME_STR

#endif /* COR_MQTT_EQUAL_H */
