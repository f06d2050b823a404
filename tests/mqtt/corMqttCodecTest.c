/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT codec: every packet type written and read back in 3.1.1 and
 * 5.0, with every prefix asking for more; byte vectors worked out from the
 * specifications; the remaining length at each of its boundaries; every
 * malformation the codec refuses, each with its reason code and reason;
 * the encoder's refusals; and the 5.0 properties' rules and lists. Topics
 * and UTF-8 are corMqttTopicTest's.
 */
#include "corTest.h"

#include "corMqttEqual.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V4 COR_MQTT_V311
#define V5 COR_MQTT_V5
#define BUF_MAX 4096

static CorMqttStr
str(const char* s)
{
    return (CorMqttStr){ s, strlen(s) };
}

/* Bytes from hex pairs, spaces between them ignored. */
static size_t
hex(const char* s, uint8_t* out)
{
    size_t n = 0;

    while (*s != '\0') {
        unsigned v;

        if (*s == ' ') {
            s++;
            continue;
        }
        ck_assert_int_eq(sscanf(s, "%2x", &v), 1);
        out[n++] = (uint8_t)v;
        s += 2;
    }
    return n;
}

/*
 * Write pkt, check that each prefix asks for more (and, once the length is
 * in, says how much), decode it into *out, write that again to the same
 * bytes, and decode that to the same packet. Returns the length.
 */
static int
roundTrip(const CorMqttPacket* pkt, unsigned version, uint8_t* buf,
          CorMqttPacket* out)
{
    uint8_t again[BUF_MAX];
    CorMqttPacket back;
    CorMqttStatus st;
    int n = corMqttEncode(buf, BUF_MAX, version, pkt);

    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(corMqttEncodedSize(version, pkt), n);
    for (int k = 0; k < n; k++) {
        ck_assert_int_eq(corMqttDecode(buf, (size_t)k, version, 0, out, &st),
                         0);
        ck_assert(st.need == 0 || st.need == (size_t)n);
        ck_assert(k < 5 || st.need == (size_t)n);
    }
    ck_assert_int_eq(corMqttDecode(buf, (size_t)n, version, 0, out, &st), n);
    ck_assert_ptr_null(st.reason);
    ck_assert_int_eq(corMqttEncode(again, sizeof(again), version, out), n);
    ck_assert_mem_eq(again, buf, (size_t)n);
    ck_assert_int_eq(corMqttDecode(again, (size_t)n, version, 0, &back, &st),
                     n);
    ck_assert_ptr_null(mqttPacketDiffers(out, &back));
    return n;
}

/* Decode len bytes at buf and expect a refusal with code and a reason
 * that holds why. */
static void
expectRefused(const uint8_t* buf, size_t len, unsigned version, uint8_t code,
              const char* why)
{
    CorMqttPacket pkt;
    CorMqttStatus st;
    int rc = corMqttDecode(buf, len, version, 0, &pkt, &st);

    ck_assert_msg(rc == -(int)code, "expected -0x%02x, got %d (%s)", code, rc,
                  st.reason != NULL ? st.reason : "no reason");
    ck_assert_uint_eq(st.reasonCode, code);
    ck_assert_ptr_nonnull(st.reason);
    ck_assert_msg(strstr(st.reason, why) != NULL, "reason '%s', not '%s'",
                  st.reason, why);
}

START_TEST(test_known_vectors)
{
    static const struct {
        unsigned version;
        const char* bytes;
        CorMqttPacket pkt;
    } cases[] = {
        { V4, "c0 00", { .type = COR_MQTT_PINGREQ } },
        { V5, "d0 00", { .type = COR_MQTT_PINGRESP } },
        { V4, "e0 00", { .type = COR_MQTT_DISCONNECT } },
        /* 5.0 DISCONNECT 0 without properties: the short form. */
        { V5, "e0 00", { .type = COR_MQTT_DISCONNECT } },
        { V5, "e0 01 04", { .type = COR_MQTT_DISCONNECT, .reasonCode = 4 } },
        /* CONNECT "abc", clean session, keep alive 60 (3.1.1 3.1). */
        { V4,
          "10 0f 00 04 4d 51 54 54 04 02 00 3c 00 03 61 62 63",
          { .type = COR_MQTT_CONNECT,
            .cleanStart = true,
            .keepAlive = 60,
            .clientId = { "abc", 3 } } },
        /* The same in 5.0: a property length of 0 after keep alive. */
        { V5,
          "10 10 00 04 4d 51 54 54 05 02 00 3c 00 00 03 61 62 63",
          { .type = COR_MQTT_CONNECT,
            .cleanStart = true,
            .keepAlive = 60,
            .clientId = { "abc", 3 } } },
        /* CONNACK accepted, session present. */
        { V4,
          "20 02 01 00",
          { .type = COR_MQTT_CONNACK, .sessionPresent = true } },
        { V5, "20 03 00 00 00", { .type = COR_MQTT_CONNACK } },
        /* PUBLISH "a/b" "hello", QoS 0, then QoS 1 id 1 retained. */
        { V4,
          "30 0a 00 03 61 2f 62 68 65 6c 6c 6f",
          { .type = COR_MQTT_PUBLISH,
            .topic = { "a/b", 3 },
            .payload = { "hello", 5 } } },
        { V4,
          "33 0c 00 03 61 2f 62 00 01 68 65 6c 6c 6f",
          { .type = COR_MQTT_PUBLISH,
            .qos = 1,
            .retain = true,
            .packetId = 1,
            .topic = { "a/b", 3 },
            .payload = { "hello", 5 } } },
        { V5,
          "3c 0a 00 03 61 2f 62 00 07 00 68 69",
          { .type = COR_MQTT_PUBLISH,
            .qos = 2,
            .dup = true,
            .packetId = 7,
            .topic = { "a/b", 3 },
            .payload = { "hi", 2 } } },
        /* Acknowledgements: 3.1.1, then 5.0's short forms. */
        { V4, "40 02 00 01", { .type = COR_MQTT_PUBACK, .packetId = 1 } },
        { V5, "50 02 12 34", { .type = COR_MQTT_PUBREC, .packetId = 0x1234 } },
        { V5,
          "62 03 00 05 92",
          { .type = COR_MQTT_PUBREL, .packetId = 5, .reasonCode = 0x92 } },
        { V5, "70 02 00 05", { .type = COR_MQTT_PUBCOMP, .packetId = 5 } },
        { V5,
          "40 03 00 01 10",
          { .type = COR_MQTT_PUBACK, .packetId = 1, .reasonCode = 0x10 } },
        /* SUBACK granting QoS 1 and refusing one; UNSUBACK. */
        { V4,
          "90 04 00 02 01 80",
          { .type = COR_MQTT_SUBACK,
            .packetId = 2,
            .codes = (const uint8_t*)"\x01\x80",
            .codeCount = 2 } },
        { V4, "b0 02 00 03", { .type = COR_MQTT_UNSUBACK, .packetId = 3 } },
        { V5,
          "b0 04 00 03 00 11",
          { .type = COR_MQTT_UNSUBACK,
            .packetId = 3,
            .codes = (const uint8_t*)"\x11",
            .codeCount = 1 } },
        /* AUTH with no reason code: success. */
        { V5, "f0 00", { .type = COR_MQTT_AUTH } },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t want[64];
        uint8_t buf[BUF_MAX];
        size_t n = hex(cases[i].bytes, want);
        CorMqttPacket got;

        ck_assert_int_eq(corMqttEncode(buf, sizeof(buf), cases[i].version,
                                       &cases[i].pkt),
                         (int)n);
        ck_assert_mem_eq(buf, want, n);
        ck_assert_int_eq(roundTrip(&cases[i].pkt, cases[i].version, buf, &got),
                         (int)n);
        ck_assert_uint_eq(got.type, cases[i].pkt.type);
        ck_assert_uint_eq(got.packetId, cases[i].pkt.packetId);
        ck_assert_uint_eq(got.reasonCode, cases[i].pkt.reasonCode);
        ck_assert(mqttStrEq(got.topic, cases[i].pkt.topic));
        ck_assert(mqttStrEq(got.payload, cases[i].pkt.payload));
        ck_assert(mqttStrEq(got.clientId, cases[i].pkt.clientId));
    }
}
END_TEST

/* The 5.0 CONNECT of the specification's figure 3-9 (flags 0xCE, keep
 * alive 10, session expiry 10), with its payload filled in. */
START_TEST(test_spec_connect_v5)
{
    uint8_t buf[BUF_MAX];
    size_t n = hex("10 2b 00 04 4d 51 54 54 05 ce 00 0a 05 11 00 00 00 0a"
                   " 00 02 69 64"                      /* client id "id" */
                   " 00 00 03 61 2f 77 00 03 62 79 65" /* will a/w "bye" */
                   " 00 04 75 73 65 72"                /* user name */
                   " 00 04 70 61 73 73",               /* password */
                   buf);
    CorMqttPacket pkt;
    CorMqttStatus st;
    uint8_t again[BUF_MAX];

    ck_assert_int_eq(corMqttDecode(buf, n, V4, 0, &pkt, &st), (int)n);
    ck_assert_uint_eq(pkt.version, V5);
    ck_assert(pkt.cleanStart && pkt.hasWill && pkt.hasUsername
              && pkt.hasPassword);
    ck_assert_uint_eq(pkt.will.qos, 1);
    ck_assert(!pkt.will.retain);
    ck_assert_uint_eq(pkt.keepAlive, 10);
    ck_assert(corMqttPropHas(&pkt.props, COR_MQTT_PROP_SESSION_EXPIRY));
    ck_assert_uint_eq(pkt.props.sessionExpiry, 10);
    ck_assert(mqttStrEq(pkt.clientId, str("id")));
    ck_assert(mqttStrEq(pkt.will.topic, str("a/w")));
    ck_assert(mqttStrEq(pkt.will.payload, str("bye")));
    ck_assert(mqttStrEq(pkt.username, str("user")));
    ck_assert(mqttStrEq(pkt.password, str("pass")));
    /* Written again from what was read, whatever version is asked: a
     * CONNECT carries its own. */
    ck_assert_int_eq(corMqttEncode(again, sizeof(again), V4, &pkt), (int)n);
    ck_assert_mem_eq(again, buf, n);
}
END_TEST

static const CorMqttUserProp userProps[] = {
    { { "trace", 5 }, { "abc", 3 } },
    { { "trace", 5 }, { "d\xc3\xa9", 3 } }, /* a name may repeat */
};

/* 5.0 properties for a PUBLISH, as the bridge sends them. */
static CorMqttProps
publishProps(void)
{
    CorMqttProps p = { .payloadFormat = 1,
                       .messageExpiry = 3600,
                       .contentType = { "text/plain", 10 },
                       .responseTopic = { "reply/here", 10 },
                       .correlationData = { "\x00\x01", 2 },
                       .user = userProps,
                       .userCount = 2 };

    corMqttPropSet(&p, COR_MQTT_PROP_PAYLOAD_FORMAT);
    corMqttPropSet(&p, COR_MQTT_PROP_MESSAGE_EXPIRY);
    corMqttPropSet(&p, COR_MQTT_PROP_CONTENT_TYPE);
    corMqttPropSet(&p, COR_MQTT_PROP_RESPONSE_TOPIC);
    corMqttPropSet(&p, COR_MQTT_PROP_CORRELATION_DATA);
    return p;
}

START_TEST(test_connect_round_trips)
{
    for (unsigned version = V4; version <= V5; version++) {
        CorMqttPacket pkt = {
            .type = COR_MQTT_CONNECT,
            .version = (uint8_t)version,
            .cleanStart = version == V4,
            .keepAlive = 30,
            .clientId = str("cor-bridge"),
            .hasUsername = true,
            .username = str("user"),
            .hasPassword = true,
            .password = { "\x00pw", 3 },
            .hasWill = true,
            .will = { .topic = str("cor/status"),
                      .payload = str("gone"),
                      .qos = 1,
                      .retain = true,
                      .props = publishProps() },
            .props = { .sessionExpiry = 600,
                       .receiveMaximum = 20,
                       .maximumPacketSize = 1 << 20,
                       .user = userProps,
                       .userCount = 1 },
        };
        uint8_t buf[BUF_MAX];
        CorMqttPacket got;
        CorMqttStr name, value;
        size_t pos = 0;

        corMqttPropSet(&pkt.props, COR_MQTT_PROP_SESSION_EXPIRY);
        corMqttPropSet(&pkt.props, COR_MQTT_PROP_RECEIVE_MAXIMUM);
        corMqttPropSet(&pkt.props, COR_MQTT_PROP_MAXIMUM_PACKET_SIZE);
        corMqttPropSet(&pkt.props, COR_MQTT_PROP_TOPIC_ALIAS_MAXIMUM);
        corMqttPropSet(&pkt.will.props, COR_MQTT_PROP_WILL_DELAY);
        roundTrip(&pkt, version, buf, &got);
        ck_assert_uint_eq(got.version, version);
        ck_assert_int_eq(got.cleanStart, version == V4);
        ck_assert_uint_eq(got.keepAlive, 30);
        ck_assert(mqttStrEq(got.clientId, pkt.clientId));
        ck_assert(mqttStrEq(got.username, pkt.username));
        ck_assert(mqttStrEq(got.password, pkt.password));
        ck_assert(got.hasWill && got.will.retain);
        ck_assert_uint_eq(got.will.qos, 1);
        ck_assert(mqttStrEq(got.will.topic, pkt.will.topic));
        ck_assert(mqttStrEq(got.will.payload, pkt.will.payload));
        if (version == V4) {
            /* 3.1.1 has no properties: none written, none read. */
            ck_assert_uint_eq(got.props.has, 0);
            ck_assert_uint_eq(got.will.props.has, 0);
            continue;
        }
        ck_assert_uint_eq(got.props.sessionExpiry, 600);
        ck_assert_uint_eq(got.props.receiveMaximum, 20);
        ck_assert_uint_eq(got.props.maximumPacketSize, 1 << 20);
        ck_assert(
            corMqttPropHas(&got.props, COR_MQTT_PROP_TOPIC_ALIAS_MAXIMUM));
        ck_assert_uint_eq(got.props.topicAliasMaximum, 0);
        ck_assert(corMqttUserPropNext(&got.props, &pos, &name, &value));
        ck_assert(mqttStrEq(name, str("trace")));
        ck_assert(!corMqttUserPropNext(&got.props, &pos, &name, &value));
        ck_assert(corMqttPropHas(&got.will.props, COR_MQTT_PROP_WILL_DELAY));
        ck_assert(mqttStrEq(got.will.props.contentType, str("text/plain")));
        ck_assert_uint_eq(got.will.props.userCount, 2);
    }
}
END_TEST

START_TEST(test_connack_round_trips)
{
    CorMqttPacket pkt = {
        .type = COR_MQTT_CONNACK,
        .sessionPresent = true,
        .props = { .receiveMaximum = 10,
                   .maximumQos = 1,
                   .retainAvailable = 0,
                   .maximumPacketSize = 65536,
                   .assignedClientId = { "auto-1", 6 },
                   .serverKeepAlive = 25,
                   .reasonString = { "ok", 2 },
                   .topicAliasMaximum = 5,
                   .wildcardSubAvailable = 1,
                   .sharedSubAvailable = 0,
                   .subIdAvailable = 1 },
    };
    const unsigned ids[] = {
        COR_MQTT_PROP_RECEIVE_MAXIMUM,
        COR_MQTT_PROP_MAXIMUM_QOS,
        COR_MQTT_PROP_RETAIN_AVAILABLE,
        COR_MQTT_PROP_MAXIMUM_PACKET_SIZE,
        COR_MQTT_PROP_ASSIGNED_CLIENT_ID,
        COR_MQTT_PROP_SERVER_KEEP_ALIVE,
        COR_MQTT_PROP_REASON_STRING,
        COR_MQTT_PROP_TOPIC_ALIAS_MAXIMUM,
        COR_MQTT_PROP_WILDCARD_SUB_AVAILABLE,
        COR_MQTT_PROP_SHARED_SUB_AVAILABLE,
        COR_MQTT_PROP_SUB_ID_AVAILABLE,
    };
    uint8_t buf[BUF_MAX];
    CorMqttPacket got;

    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        corMqttPropSet(&pkt.props, ids[i]);
    }
    roundTrip(&pkt, V4, buf, &got);
    ck_assert(got.sessionPresent);
    ck_assert_uint_eq(got.props.has, 0);
    roundTrip(&pkt, V5, buf, &got);
    ck_assert(got.sessionPresent);
    ck_assert_uint_eq(got.props.receiveMaximum, 10);
    ck_assert_uint_eq(got.props.maximumQos, 1);
    ck_assert(corMqttPropHas(&got.props, COR_MQTT_PROP_RETAIN_AVAILABLE));
    ck_assert_uint_eq(got.props.retainAvailable, 0);
    ck_assert_uint_eq(got.props.maximumPacketSize, 65536);
    ck_assert(mqttStrEq(got.props.assignedClientId, str("auto-1")));
    ck_assert_uint_eq(got.props.serverKeepAlive, 25);
    ck_assert(mqttStrEq(got.props.reasonString, str("ok")));
    /* A refusal: 3.1.1's return code 5, 5.0's reason code 0x87. */
    pkt = (CorMqttPacket){ .type = COR_MQTT_CONNACK, .reasonCode = 5 };
    roundTrip(&pkt, V4, buf, &got);
    ck_assert_uint_eq(got.reasonCode, 5);
    pkt.reasonCode = COR_MQTT_RC_NOT_AUTHORIZED;
    roundTrip(&pkt, V5, buf, &got);
    ck_assert_uint_eq(got.reasonCode, COR_MQTT_RC_NOT_AUTHORIZED);
}
END_TEST

START_TEST(test_publish_round_trips)
{
    for (unsigned version = V4; version <= V5; version++) {
        for (uint8_t qos = 0; qos <= 2; qos++) {
            CorMqttPacket pkt = {
                .type = COR_MQTT_PUBLISH,
                .qos = qos,
                .dup = qos > 0,
                .retain = qos == 1,
                .packetId = qos > 0 ? 65535 : 0,
                .topic = str("sensors/kitchen/t\xc3\xa9"),
                .payload = { "\x00\xff bytes", 8 },
                .props = publishProps(),
            };
            uint8_t buf[BUF_MAX];
            CorMqttPacket got;
            CorMqttStr name, value;
            size_t pos = 0;

            roundTrip(&pkt, version, buf, &got);
            ck_assert_uint_eq(got.qos, qos);
            ck_assert_int_eq(got.dup, qos > 0);
            ck_assert_int_eq(got.retain, qos == 1);
            ck_assert_uint_eq(got.packetId, pkt.packetId);
            ck_assert(mqttStrEq(got.topic, pkt.topic));
            ck_assert(mqttStrEq(got.payload, pkt.payload));
            if (version == V4) {
                continue;
            }
            ck_assert_uint_eq(got.props.payloadFormat, 1);
            ck_assert_uint_eq(got.props.messageExpiry, 3600);
            ck_assert(mqttStrEq(got.props.contentType, str("text/plain")));
            ck_assert(mqttStrEq(got.props.responseTopic, str("reply/here")));
            ck_assert(mqttStrEq(got.props.correlationData,
                                (CorMqttStr){ "\x00\x01", 2 }));
            ck_assert_uint_eq(got.props.userCount, 2);
            for (unsigned i = 0; i < 2; i++) {
                ck_assert(corMqttUserPropNext(&got.props, &pos, &name, &value));
                ck_assert(mqttStrEq(name, userProps[i].name));
                ck_assert(mqttStrEq(value, userProps[i].value));
            }
            ck_assert(!corMqttUserPropNext(&got.props, &pos, &name, &value));
        }
    }
}
END_TEST

START_TEST(test_acks_round_trip)
{
    const uint8_t types[] = { COR_MQTT_PUBACK, COR_MQTT_PUBREC, COR_MQTT_PUBREL,
                              COR_MQTT_PUBCOMP };
    const uint8_t codes[] = { 0x10, 0x80, 0x92, 0x92 };

    for (size_t i = 0; i < sizeof(types); i++) {
        CorMqttPacket pkt = { .type = types[i], .packetId = 42 };
        uint8_t buf[BUF_MAX];
        CorMqttPacket got;

        /* The 2-byte form in both versions, then 5.0's longer ones. */
        ck_assert_int_eq(roundTrip(&pkt, V4, buf, &got), 4);
        ck_assert_uint_eq(got.packetId, 42);
        ck_assert_int_eq(roundTrip(&pkt, V5, buf, &got), 4);
        pkt.reasonCode = codes[i];
        ck_assert_int_eq(roundTrip(&pkt, V5, buf, &got), 5);
        ck_assert_uint_eq(got.reasonCode, codes[i]);
        pkt.props.reasonString = str("why");
        corMqttPropSet(&pkt.props, COR_MQTT_PROP_REASON_STRING);
        ck_assert_int_eq(roundTrip(&pkt, V5, buf, &got), 12);
        ck_assert(mqttStrEq(got.props.reasonString, str("why")));
        /* Properties with reason 0 keep the reason byte. */
        pkt.reasonCode = 0;
        ck_assert_int_eq(roundTrip(&pkt, V5, buf, &got), 12);
        /* 3.1.1 writes neither. */
        ck_assert_int_eq(roundTrip(&pkt, V4, buf, &got), 4);
    }
}
END_TEST

START_TEST(test_subscribe_round_trips)
{
    const CorMqttSub subs[] = {
        { { "sport/tennis/+", 14 }, 1 },
        { { "sport/#", 7 },
          2 | COR_MQTT_SUB_NO_LOCAL | COR_MQTT_SUB_RETAIN_AS_PUBLISHED
              | 2 << COR_MQTT_SUB_RETAIN_HANDLING_SHIFT },
        { { "$share/group/a/b", 16 }, 0 },
    };
    uint8_t buf[BUF_MAX];
    CorMqttPacket got;
    CorMqttSub sub;

    for (unsigned version = V4; version <= V5; version++) {
        for (uint8_t type = COR_MQTT_SUBSCRIBE; type <= COR_MQTT_UNSUBSCRIBE;
             type += 2) {
            CorMqttPacket pkt = {
                .type = type, .packetId = 9, .subs = subs, .subCount = 3
            };
            size_t pos = 0;

            if (version == V5 && type == COR_MQTT_SUBSCRIBE) {
                pkt.props.subscriptionId = 268435455;
                corMqttPropSet(&pkt.props, COR_MQTT_PROP_SUBSCRIPTION_ID);
            }
            if (version == V4) {
                pkt.subCount = 1; /* options of 5.0 only in the others */
            }
            roundTrip(&pkt, version, buf, &got);
            ck_assert_uint_eq(got.packetId, 9);
            ck_assert_uint_eq(got.subCount, pkt.subCount);
            for (unsigned i = 0; i < pkt.subCount; i++) {
                ck_assert(corMqttSubNext(&got, &pos, &sub));
                ck_assert(mqttStrEq(sub.filter, subs[i].filter));
                ck_assert_uint_eq(sub.options, type == COR_MQTT_SUBSCRIBE
                                                   ? subs[i].options
                                                   : 0);
            }
            ck_assert(!corMqttSubNext(&got, &pos, &sub));
            ck_assert_uint_eq(got.props.subscriptionId,
                              pkt.props.subscriptionId);
        }
    }
}
END_TEST

START_TEST(test_suback_and_disconnect_round_trip)
{
    CorMqttPacket pkt = { .type = COR_MQTT_SUBACK,
                          .packetId = 3,
                          .codes = (const uint8_t*)"\x00\x01\x02\x80",
                          .codeCount = 4 };
    uint8_t buf[BUF_MAX];
    CorMqttPacket got;

    roundTrip(&pkt, V4, buf, &got);
    ck_assert_uint_eq(got.codeCount, 4);
    ck_assert_mem_eq(got.codes, "\x00\x01\x02\x80", 4);
    pkt.codes = (const uint8_t*)"\x02\xa2";
    pkt.codeCount = 2;
    pkt.props.reasonString = str("no wildcards");
    corMqttPropSet(&pkt.props, COR_MQTT_PROP_REASON_STRING);
    roundTrip(&pkt, V5, buf, &got);
    ck_assert_mem_eq(got.codes, "\x02\xa2", 2);
    ck_assert(mqttStrEq(got.props.reasonString, str("no wildcards")));
    pkt = (CorMqttPacket){ .type = COR_MQTT_DISCONNECT,
                           .reasonCode = COR_MQTT_RC_SESSION_TAKEN_OVER,
                           .props = { .sessionExpiry = 0,
                                      .serverReference = { "other", 5 } } };
    corMqttPropSet(&pkt.props, COR_MQTT_PROP_SESSION_EXPIRY);
    corMqttPropSet(&pkt.props, COR_MQTT_PROP_SERVER_REFERENCE);
    roundTrip(&pkt, V5, buf, &got);
    ck_assert_uint_eq(got.reasonCode, COR_MQTT_RC_SESSION_TAKEN_OVER);
    ck_assert(mqttStrEq(got.props.serverReference, str("other")));
    ck_assert_int_eq(roundTrip(&pkt, V4, buf, &got), 2);
    pkt = (CorMqttPacket){ .type = COR_MQTT_AUTH,
                           .reasonCode = COR_MQTT_RC_CONTINUE_AUTH,
                           .props = { .authMethod = { "SCRAM", 5 },
                                      .authData = { "\x01", 1 } } };
    corMqttPropSet(&pkt.props, COR_MQTT_PROP_AUTH_METHOD);
    corMqttPropSet(&pkt.props, COR_MQTT_PROP_AUTH_DATA);
    roundTrip(&pkt, V5, buf, &got);
    ck_assert(mqttStrEq(got.props.authMethod, str("SCRAM")));
}
END_TEST

/* A PUBLISH of body bytes in all: its encoded length, and its header. */
START_TEST(test_remaining_length_boundaries)
{
    static const struct {
        uint32_t body;
        size_t head;
    } cases[] = {
        { 127, 2 },     { 128, 3 },     { 16383, 3 },     { 16384, 4 },
        { 2097151, 4 }, { 2097152, 5 }, { 268435455, 5 },
    };
    static char payload[2097152];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CorMqttPacket pkt = {
            .type = COR_MQTT_PUBLISH,
            .topic = { "t", 1 },
            .payload = { payload, cases[i].body - 3 },
        };
        uint8_t head[8];
        CorMqttPacket got;
        CorMqttStatus st;

        ck_assert_int_eq(corMqttEncodedSize(V4, &pkt),
                         (int)(cases[i].head + cases[i].body));
        /* Only the header in: the whole length is known. */
        ck_assert_int_eq(corMqttEncode(head, sizeof(head), V4, &pkt), -ENOBUFS);
        if (cases[i].body <= sizeof(payload)) {
            size_t size = cases[i].head + cases[i].body;
            uint8_t* buf = malloc(size);

            ck_assert_int_eq(corMqttEncode(buf, size, V4, &pkt), (int)size);
            ck_assert_int_eq(corMqttDecode(buf, cases[i].head, V4, 0, &got,
                                           &st),
                             0);
            ck_assert_uint_eq(st.need, size);
            ck_assert_int_eq(corMqttDecode(buf, size, V4, 0, &got, &st),
                             (int)size);
            ck_assert_uint_eq(got.payload.len, cases[i].body - 3);
            free(buf);
        }
    }
    /* The largest: ff ff ff 7f; one more needs a fifth byte. */
    {
        uint8_t buf[8];
        size_t n = hex("30 ff ff ff 7f", buf);
        CorMqttPacket pkt = { .type = COR_MQTT_PUBLISH,
                              .topic = { "t", 1 },
                              .payload = { payload, 268435456 - 3 } };
        CorMqttPacket got;
        CorMqttStatus st;

        ck_assert_int_eq(corMqttDecode(buf, n, V4, 0, &got, &st), 0);
        ck_assert_uint_eq(st.need, 5 + COR_MQTT_REMAINING_MAX);
        ck_assert_int_eq(corMqttEncodedSize(V4, &pkt), -EINVAL);
        n = hex("30 80 80 80 80 01", buf);
        expectRefused(buf, n, V4, COR_MQTT_RC_MALFORMED, "more than 4");
        /* Not the shortest form, but bounded: accepted. */
        n = hex("c0 80 80 80 00", buf);
        ck_assert_int_eq(corMqttDecode(buf, n, V4, 0, &got, &st), 5);
        ck_assert_uint_eq(got.type, COR_MQTT_PINGREQ);
    }
}
END_TEST

START_TEST(test_maximum_packet_size)
{
    uint8_t buf[16];
    size_t n = hex("30 ff ff 03", buf);
    CorMqttPacket got;
    CorMqttStatus st;

    /* Refused on its header alone, before its 65535 bytes arrive. */
    ck_assert_int_eq(corMqttDecode(buf, n, V5, 65535, &got, &st),
                     -COR_MQTT_RC_PACKET_TOO_LARGE);
    ck_assert_uint_eq(st.reasonCode, COR_MQTT_RC_PACKET_TOO_LARGE);
    ck_assert_ptr_nonnull(st.reason);
    ck_assert_int_eq(corMqttDecode(buf, n, V5, 65535 + 4, &got, &st), 0);
    ck_assert_uint_eq(st.need, 65535 + 4);
    /* Nothing received yet: nothing known. */
    ck_assert_int_eq(corMqttDecode(NULL, 0, V5, 0, &got, &st), 0);
    ck_assert_uint_eq(st.need, 0);
    /* Exactly the maximum is allowed. */
    n = hex("c0 00", buf);
    ck_assert_int_eq(corMqttDecode(buf, n, V4, 2, &got, &st), 2);
    ck_assert_int_eq(corMqttDecode(buf, n, V4, 1, &got, &st),
                     -COR_MQTT_RC_PACKET_TOO_LARGE);
}
END_TEST

static const struct {
    unsigned version;
    const char* bytes;
    uint8_t code;
    const char* why;
} malformed[] = {
    /* The fixed header. */
    { V4, "00 00", 0x81, "reserved packet type" },
    { V4, "f0 00", 0x81, "reserved packet type" }, /* AUTH */
    { V4, "c1 00", 0x81, "reserved fixed header" },
    { V5, "60 02 00 01", 0x81, "reserved fixed header" }, /* PUBREL */
    { V4, "80 06 00 01 00 01 61 00", 0x81, "reserved fixed header" },
    { V5, "a0 05 00 01 00 01 61", 0x81, "reserved fixed header" },
    { V4, "36 05 00 03 61 2f 62", 0x81, "QoS 3" },
    { V4, "38 05 00 03 61 2f 62", 0x82, "DUP" },
    { V4, "c0 01 00", 0x81, "bytes left" },
    { V5, "d0 01 00", 0x81, "bytes left" },
    /* Truncated fields. */
    { V4, "30 03 00 05 61", 0x81, "runs past" },
    { V4, "30 01 00", 0x81, "runs past" },
    { V4, "32 05 00 03 61 2f 62", 0x81, "runs past" }, /* no id */
    { V5, "30 05 00 03 61 2f 62", 0x81, "runs past" }, /* no props */
    { V5, "30 07 00 03 61 2f 62 05 01", 0x81, "run past" },
    { V4, "40 01 00", 0x81, "runs past" },
    { V4, "20 01 00", 0x81, "runs past" },
    /* Topic names and UTF-8. */
    { V4, "30 05 00 03 61 2b 62", 0x90, "wildcard" },
    { V4, "30 05 00 03 61 2f 23", 0x90, "wildcard" },
    { V4, "30 02 00 00", 0x90, "empty topic" },
    { V4, "30 05 00 03 61 c0 80", 0x81, "UTF-8" }, /* overlong */
    { V4, "30 05 00 03 61 00 62", 0x81, "U+0000" },
    { V4, "30 05 00 03 ed a0 80", 0x81, "UTF-8" },    /* surrogate */
    { V4, "30 06 00 04 f4 90 80 80", 0x81, "UTF-8" }, /* > U+10FFFF */
    { V4, "30 04 00 02 c3 28", 0x81, "UTF-8" },
    { V4, "30 03 00 01 ff", 0x81, "UTF-8" },
    /* Packet identifiers. */
    { V4, "32 07 00 03 61 2f 62 00 00", 0x82, "packet id 0" },
    { V4, "40 02 00 00", 0x82, "packet id 0" },
    { V5, "62 02 00 00", 0x82, "packet id 0" },
    { V4, "82 06 00 00 00 01 61 00", 0x82, "packet id 0" },
    { V4, "90 03 00 00 00", 0x82, "packet id 0" },
    /* Acknowledgements. */
    { V4, "40 03 00 01 00", 0x81, "bytes left" },
    { V5, "40 03 00 01 05", 0x82, "reason code" },
    { V5, "62 03 00 01 10", 0x82, "reason code" },
    { V5, "40 05 00 01 00 05 1f", 0x81, "run past" },
    /* 5.0 properties. */
    { V5, "30 09 00 03 61 2f 62 03 23 00 01", 0x94, "topic alias" },
    { V5, "30 0b 00 03 61 2f 62 05 11 00 00 00 01", 0x81, "not allowed" },
    { V5, "30 0a 00 03 61 2f 62 04 01 01 01 01", 0x82, "more than once" },
    { V5, "30 08 00 03 61 2f 62 02 01 02", 0x82, "out of range" },
    { V5, "30 08 00 03 61 2f 62 02 7f 00", 0x81, "unknown property" },
    { V5, "30 08 00 03 61 2f 62 02 00 00", 0x81, "unknown property" },
    { V5, "30 0b 00 03 61 2f 62 05 08 00 02 61 23", 0x82, "response topic" },
    { V5, "30 0b 00 03 61 2f 62 05 26 00 01 ff 00", 0x81, "UTF-8" },
    { V5, "30 0b 00 03 61 2f 62 05 0b 80 80 80 80", 0x81, "more than 4" },
    { V5, "20 06 00 00 03 21 00 00", 0x82, "out of range" },
    { V5, "20 05 00 00 02 24 02", 0x82, "out of range" },
    { V5, "20 09 00 00 06 13 00 01 13 00 02", 0x82, "more than once" },
    { V5, "20 08 00 00 05 27 00 00 00 00", 0x82, "out of range" },
    { V5, "20 06 00 00 03 16 00 00", 0x82, "without a method" },
    { V5, "82 09 00 01 02 0b 00 00 01 61 00", 0x82, "out of range" },
    { V5, "82 0b 00 01 04 0b 01 0b 02 00 01 61 00", 0x82, "more than once" },
    { V5, "e0 02 00 05", 0x81, "run past" },
    /* CONNACK. */
    { V4, "20 02 02 00", 0x81, "reserved CONNACK" },
    { V4, "20 02 00 06", 0x82, "reason code" },
    { V4, "20 02 01 05", 0x82, "session present" },
    { V4, "20 03 00 00 00", 0x81, "bytes left" },
    { V5, "20 03 00 05 00", 0x82, "reason code" },
    { V5, "20 02 00 00", 0x81, "runs past" },
    /* SUBSCRIBE and UNSUBSCRIBE. */
    { V4, "82 02 00 01", 0x82, "no topic filter" },
    { V4, "a2 02 00 01", 0x82, "no topic filter" },
    { V4, "82 06 00 01 00 01 61 04", 0x81, "option bits" },
    { V4, "82 06 00 01 00 01 61 03", 0x81, "option bits" },
    { V5, "82 07 00 01 00 00 01 61 40", 0x81, "option bits" },
    { V5, "82 07 00 01 00 00 01 61 30", 0x82, "retain handling" },
    { V4, "82 05 00 01 00 01 61", 0x81, "runs past" },
    { V4, "82 0a 00 01 00 05 61 2f 23 2f 62 00", 0x8f, "'#'" },
    { V4, "82 07 00 01 00 02 61 2b 00", 0x8f, "'+'" },
    { V4, "82 05 00 01 00 00 00", 0x8f, "empty topic filter" },
    { V4, "a2 06 00 01 00 01 23 00", 0x81, "runs past" },
    { V5, "82 10 00 01 00 00 0a 24 73 68 61 72 65 2f 67 2f 61 04", 0x82,
      "shared" },
    { V5, "82 0e 00 01 00 00 08 24 73 68 61 72 65 2f 67 00", 0x8f, "shared" },
    /* SUBACK and UNSUBACK. */
    { V4, "90 02 00 01", 0x82, "no reason code" },
    { V4, "90 03 00 01 03", 0x82, "reason code" },
    { V5, "90 04 00 01 00 05", 0x82, "reason code" },
    { V4, "b0 03 00 01 00", 0x81, "bytes left" },
    { V5, "b0 03 00 01 00", 0x82, "no reason code" },
    { V5, "b0 04 00 01 00 01", 0x82, "reason code" },
    /* CONNECT. */
    { V4, "10 0e 00 06 4d 51 49 73 64 70 03 02 00 3c 00 00", 0x84, "not MQTT" },
    { V4, "10 0c 00 04 4d 51 54 54 06 02 00 3c 00 00", 0x84, "not MQTT" },
    { V4, "10 0c 00 04 4d 51 54 54 04 03 00 3c 00 00", 0x81,
      "reserved CONNECT" },
    { V4, "10 0c 00 04 4d 51 54 54 04 1c 00 3c 00 00", 0x81, "will QoS" },
    { V4, "10 0c 00 04 4d 51 54 54 04 22 00 3c 00 00", 0x81, "will QoS" },
    { V4, "10 0c 00 04 4d 51 54 54 04 08 00 3c 00 00", 0x81, "will QoS" },
    { V4, "10 0e 00 04 4d 51 54 54 04 42 00 3c 00 00 00 00", 0x81,
      "password without" },
    { V4, "10 11 00 04 4d 51 54 54 04 06 00 3c 00 00 00 01 23 00 00", 0x90,
      "wildcard" },
    { V4, "10 0c 00 04 4d 51 54 54 04 86 00 3c 00 00", 0x81, "runs past" },
    { V4, "10 0e 00 04 4d 51 54 54 04 02 00 3c 00 02 c0 af", 0x81, "UTF-8" },
    { V5, "10 0c 00 04 4d 51 54 54 05 02 00 3c 00 00", 0x81, "runs past" },
    { V5,
      "10 18 00 04 4d 51 54 54 05 06 00 3c 00 00 00 05 11 00 00 00 01"
      " 00 01 61 00 00",
      0x81, "not allowed" },
    { V5, "10 10 00 04 4d 51 54 54 05 02 00 3c 03 23 00 01 00 00", 0x94,
      "topic alias" },
    /* DISCONNECT and AUTH. */
    { V4, "e0 01 00", 0x81, "bytes left" },
    { V5, "e0 01 05", 0x82, "reason code" },
    { V5, "e0 03 00 00 00", 0x81, "bytes left" },
    { V5, "f0 01 01", 0x82, "reason code" },
    { V5, "f2 00", 0x81, "reserved fixed header" },
};

START_TEST(test_malformed_packets_are_refused)
{
    uint8_t buf[64];
    size_t n = hex(malformed[_i].bytes, buf);

    expectRefused(buf, n, malformed[_i].version, malformed[_i].code,
                  malformed[_i].why);
}
END_TEST

START_TEST(test_encoder_refusals)
{
    static char big[COR_MQTT_STR_MAX + 1];
    const CorMqttSub bad = { { "a/#/b", 5 }, 0 };
    const struct {
        unsigned version;
        CorMqttPacket pkt;
    } cases[] = {
        { V4, { .type = COR_MQTT_PUBLISH, .topic = { "a/+", 3 } } },
        { V4, { .type = COR_MQTT_PUBLISH, .topic = { "", 0 } } },
        { V4,
          { .type = COR_MQTT_PUBLISH,
            .topic = { "a", 1 },
            .qos = 3,
            .packetId = 1 } },
        { V4,
          { .type = COR_MQTT_PUBLISH,
            .topic = { "a", 1 },
            .qos = 9,
            .packetId = 1 } },
        { V4, { .type = COR_MQTT_PUBLISH, .topic = { "a", 1 }, .qos = 1 } },
        { V4, { .type = COR_MQTT_PUBLISH, .topic = { big, sizeof(big) } } },
        { V4, { .type = COR_MQTT_PUBACK } },
        { V4, { .type = COR_MQTT_SUBSCRIBE, .packetId = 1 } },
        { V4,
          { .type = COR_MQTT_SUBSCRIBE,
            .packetId = 1,
            .subs = &bad,
            .subCount = 1 } },
        { V5, { .type = COR_MQTT_PUBACK, .packetId = 1, .reasonCode = 3 } },
        { V4, { .type = COR_MQTT_CONNACK, .reasonCode = 6 } },
        { V4, { .type = COR_MQTT_AUTH } },
        { V4, { .type = 0 } },
        { V4, { .type = 16 } },
        { 3, { .type = COR_MQTT_PINGREQ } },
        { V4, { .type = COR_MQTT_CONNECT, .version = 3 } },
        { V5,
          { .type = COR_MQTT_PUBLISH,
            .topic = { "a", 1 },
            .props = { .has = 1u << COR_MQTT_PROP_SESSION_EXPIRY } } },
        { V5,
          { .type = COR_MQTT_SUBSCRIBE,
            .packetId = 1,
            .subs = &bad,
            .subCount = 0 } },
    };
    uint8_t buf[BUF_MAX];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int size = corMqttEncodedSize(cases[i].version, &cases[i].pkt);

        ck_assert_msg(corMqttEncode(buf, sizeof(buf), cases[i].version,
                                    &cases[i].pkt)
                          == -EINVAL,
                      "case %zu written", i);
        ck_assert(size == -EINVAL || size > 0);
    }
    /* Too small a buffer: -ENOBUFS, and nothing written. */
    {
        CorMqttPacket pkt = { .type = COR_MQTT_PUBLISH, .topic = str("a/b") };

        memset(buf, 0xAA, sizeof(buf));
        ck_assert_int_eq(corMqttEncode(buf, 6, V4, &pkt), -ENOBUFS);
        ck_assert_uint_eq(buf[0], 0xAA);
        ck_assert_int_eq(corMqttEncode(buf, 7, V4, &pkt), 7);
    }
}
END_TEST

START_TEST(test_property_lists)
{
    /* A broker's PUBLISH matching two subscriptions: two identifiers,
     * and user properties between them. */
    uint8_t buf[BUF_MAX];
    size_t n = hex("30 19 00 01 74 13 0b 05 26 00 01 6b 00 01 76 0b 80 01"
                   " 26 00 01 6b 00 01 77 70 6c",
                   buf);
    CorMqttPacket pkt;
    CorMqttStatus st;
    CorMqttStr name, value;
    uint8_t again[BUF_MAX];
    CorMqttPacket back;
    uint32_t id;
    size_t pos = 0;

    ck_assert_int_eq(corMqttDecode(buf, n, V5, 0, &pkt, &st), (int)n);
    ck_assert_uint_eq(pkt.props.subIdCount, 2);
    ck_assert_uint_eq(pkt.props.subscriptionId, 5);
    ck_assert(corMqttSubIdNext(&pkt.props, &pos, &id));
    ck_assert_uint_eq(id, 5);
    ck_assert(corMqttSubIdNext(&pkt.props, &pos, &id));
    ck_assert_uint_eq(id, 128);
    ck_assert(!corMqttSubIdNext(&pkt.props, &pos, &id));
    ck_assert_uint_eq(pkt.props.userCount, 2);
    pos = 0;
    ck_assert(corMqttUserPropNext(&pkt.props, &pos, &name, &value));
    ck_assert(mqttStrEq(value, str("v")));
    ck_assert(corMqttUserPropNext(&pkt.props, &pos, &name, &value));
    ck_assert(mqttStrEq(value, str("w")));
    ck_assert(!corMqttUserPropNext(&pkt.props, &pos, &name, &value));
    ck_assert(mqttStrEq(pkt.payload, str("pl")));
    /* Written again, the lists keep their entries and their order. */
    n = (size_t)corMqttEncode(again, sizeof(again), V5, &pkt);
    ck_assert_int_eq(corMqttDecode(again, n, V5, 0, &back, &st), (int)n);
    ck_assert_ptr_null(mqttPacketDiffers(&pkt, &back));
}
END_TEST

START_TEST(test_type_names)
{
    ck_assert_str_eq(corMqttTypeName(COR_MQTT_CONNECT), "CONNECT");
    ck_assert_str_eq(corMqttTypeName(COR_MQTT_PUBREL), "PUBREL");
    ck_assert_str_eq(corMqttTypeName(COR_MQTT_AUTH), "AUTH");
    ck_assert_str_eq(corMqttTypeName(0), "reserved");
    ck_assert_str_eq(corMqttTypeName(16), "reserved");
}
END_TEST

COR_TEST_SUITE(corMqttCodec)
{
    tcase_add_test(tc, test_known_vectors);
    tcase_add_test(tc, test_spec_connect_v5);
    tcase_add_test(tc, test_connect_round_trips);
    tcase_add_test(tc, test_connack_round_trips);
    tcase_add_test(tc, test_publish_round_trips);
    tcase_add_test(tc, test_acks_round_trip);
    tcase_add_test(tc, test_subscribe_round_trips);
    tcase_add_test(tc, test_suback_and_disconnect_round_trip);
    tcase_add_test(tc, test_remaining_length_boundaries);
    tcase_add_test(tc, test_maximum_packet_size);
    tcase_add_loop_test(tc, test_malformed_packets_are_refused, 0,
                        (int)(sizeof(malformed) / sizeof(malformed[0])));
    tcase_add_test(tc, test_encoder_refusals);
    tcase_add_test(tc, test_property_lists);
    tcase_add_test(tc, test_type_names);
}
