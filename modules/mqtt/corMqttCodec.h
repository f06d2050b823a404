/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT codec: MQTT 3.1.1 (protocol level 4) and 5.0 (level 5) control
 * packets written into a caller's buffer and read from the bytes received
 * so far, with the version as a parameter of every call. Pure: no I/O, no
 * allocation, no state between calls, so that the bridge's client (one
 * connection per broker per loop) owns every buffer and the codec is unit
 * tested and fuzzed on its own.
 *
 * Decoding is zero-copy: the strings of a decoded packet point into the
 * caller's input, which must outlive the packet. Lists (user properties,
 * subscription identifiers, SUBSCRIBE's filters) stay in their encoded
 * form and are walked with the *Next iterators.
 *
 * Topic aliases are refused: the bridge sends Topic Alias Maximum 0 (the
 * default), so a broker may not send one, and a PUBLISH that carries one is
 * refused with 0x94 (Topic Alias invalid). AUTH (5.0 enhanced
 * authentication) packets are read and written, but nothing drives them.
 */
#ifndef COR_MQTT_CODEC_H
#define COR_MQTT_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Protocol levels, as CONNECT carries them. */
#define COR_MQTT_V311 4
#define COR_MQTT_V5 5

/* The remaining length is at most four bytes of seven bits. */
#define COR_MQTT_REMAINING_MAX 268435455u
/* The largest packet: a type byte, four bytes of length, the rest. */
#define COR_MQTT_PACKET_MAX (1u + 4u + COR_MQTT_REMAINING_MAX)
/* The largest string or binary field (a two-byte length). */
#define COR_MQTT_STR_MAX 65535u
/* The largest subscription identifier (a variable byte integer, not 0). */
#define COR_MQTT_SUB_ID_MAX COR_MQTT_REMAINING_MAX

typedef enum {
    COR_MQTT_CONNECT = 1,
    COR_MQTT_CONNACK = 2,
    COR_MQTT_PUBLISH = 3,
    COR_MQTT_PUBACK = 4,
    COR_MQTT_PUBREC = 5,
    COR_MQTT_PUBREL = 6,
    COR_MQTT_PUBCOMP = 7,
    COR_MQTT_SUBSCRIBE = 8,
    COR_MQTT_SUBACK = 9,
    COR_MQTT_UNSUBSCRIBE = 10,
    COR_MQTT_UNSUBACK = 11,
    COR_MQTT_PINGREQ = 12,
    COR_MQTT_PINGRESP = 13,
    COR_MQTT_DISCONNECT = 14,
    COR_MQTT_AUTH = 15 /* 5.0 only */
} CorMqttType;

/*
 * Reason codes (5.0 section 2.4). In 3.1.1 a CONNACK carries a return code
 * 0-5 in the same field, and a SUBACK 0, 1, 2 or 0x80.
 */
typedef enum {
    COR_MQTT_RC_SUCCESS = 0x00, /* also Granted QoS 0 */
    COR_MQTT_RC_GRANTED_QOS1 = 0x01,
    COR_MQTT_RC_GRANTED_QOS2 = 0x02,
    COR_MQTT_RC_DISCONNECT_WITH_WILL = 0x04,
    COR_MQTT_RC_NO_MATCHING_SUBSCRIBERS = 0x10,
    COR_MQTT_RC_NO_SUBSCRIPTION_EXISTED = 0x11,
    COR_MQTT_RC_CONTINUE_AUTH = 0x18,
    COR_MQTT_RC_REAUTHENTICATE = 0x19,
    COR_MQTT_RC_UNSPECIFIED = 0x80,
    COR_MQTT_RC_MALFORMED = 0x81,
    COR_MQTT_RC_PROTOCOL_ERROR = 0x82,
    COR_MQTT_RC_IMPLEMENTATION_SPECIFIC = 0x83,
    COR_MQTT_RC_UNSUPPORTED_VERSION = 0x84,
    COR_MQTT_RC_CLIENT_ID_INVALID = 0x85,
    COR_MQTT_RC_BAD_USER_OR_PASSWORD = 0x86,
    COR_MQTT_RC_NOT_AUTHORIZED = 0x87,
    COR_MQTT_RC_SERVER_UNAVAILABLE = 0x88,
    COR_MQTT_RC_SERVER_BUSY = 0x89,
    COR_MQTT_RC_BANNED = 0x8A,
    COR_MQTT_RC_SERVER_SHUTTING_DOWN = 0x8B,
    COR_MQTT_RC_BAD_AUTH_METHOD = 0x8C,
    COR_MQTT_RC_KEEP_ALIVE_TIMEOUT = 0x8D,
    COR_MQTT_RC_SESSION_TAKEN_OVER = 0x8E,
    COR_MQTT_RC_TOPIC_FILTER_INVALID = 0x8F,
    COR_MQTT_RC_TOPIC_NAME_INVALID = 0x90,
    COR_MQTT_RC_PACKET_ID_IN_USE = 0x91,
    COR_MQTT_RC_PACKET_ID_NOT_FOUND = 0x92,
    COR_MQTT_RC_RECEIVE_MAXIMUM_EXCEEDED = 0x93,
    COR_MQTT_RC_TOPIC_ALIAS_INVALID = 0x94,
    COR_MQTT_RC_PACKET_TOO_LARGE = 0x95,
    COR_MQTT_RC_MESSAGE_RATE_TOO_HIGH = 0x96,
    COR_MQTT_RC_QUOTA_EXCEEDED = 0x97,
    COR_MQTT_RC_ADMINISTRATIVE_ACTION = 0x98,
    COR_MQTT_RC_PAYLOAD_FORMAT_INVALID = 0x99,
    COR_MQTT_RC_RETAIN_NOT_SUPPORTED = 0x9A,
    COR_MQTT_RC_QOS_NOT_SUPPORTED = 0x9B,
    COR_MQTT_RC_USE_ANOTHER_SERVER = 0x9C,
    COR_MQTT_RC_SERVER_MOVED = 0x9D,
    COR_MQTT_RC_SHARED_SUBS_NOT_SUPPORTED = 0x9E,
    COR_MQTT_RC_CONNECTION_RATE_EXCEEDED = 0x9F,
    COR_MQTT_RC_MAXIMUM_CONNECT_TIME = 0xA0,
    COR_MQTT_RC_SUB_IDS_NOT_SUPPORTED = 0xA1,
    COR_MQTT_RC_WILDCARD_SUBS_NOT_SUPPORTED = 0xA2
} CorMqttReasonCode;

/* Property identifiers (5.0 section 2.2.2.2). */
typedef enum {
    COR_MQTT_PROP_PAYLOAD_FORMAT = 0x01,
    COR_MQTT_PROP_MESSAGE_EXPIRY = 0x02,
    COR_MQTT_PROP_CONTENT_TYPE = 0x03,
    COR_MQTT_PROP_RESPONSE_TOPIC = 0x08,
    COR_MQTT_PROP_CORRELATION_DATA = 0x09,
    COR_MQTT_PROP_SUBSCRIPTION_ID = 0x0B,
    COR_MQTT_PROP_SESSION_EXPIRY = 0x11,
    COR_MQTT_PROP_ASSIGNED_CLIENT_ID = 0x12,
    COR_MQTT_PROP_SERVER_KEEP_ALIVE = 0x13,
    COR_MQTT_PROP_AUTH_METHOD = 0x15,
    COR_MQTT_PROP_AUTH_DATA = 0x16,
    COR_MQTT_PROP_REQUEST_PROBLEM_INFO = 0x17,
    COR_MQTT_PROP_WILL_DELAY = 0x18,
    COR_MQTT_PROP_REQUEST_RESPONSE_INFO = 0x19,
    COR_MQTT_PROP_RESPONSE_INFO = 0x1A,
    COR_MQTT_PROP_SERVER_REFERENCE = 0x1C,
    COR_MQTT_PROP_REASON_STRING = 0x1F,
    COR_MQTT_PROP_RECEIVE_MAXIMUM = 0x21,
    COR_MQTT_PROP_TOPIC_ALIAS_MAXIMUM = 0x22,
    COR_MQTT_PROP_TOPIC_ALIAS = 0x23,
    COR_MQTT_PROP_MAXIMUM_QOS = 0x24,
    COR_MQTT_PROP_RETAIN_AVAILABLE = 0x25,
    COR_MQTT_PROP_USER = 0x26,
    COR_MQTT_PROP_MAXIMUM_PACKET_SIZE = 0x27,
    COR_MQTT_PROP_WILDCARD_SUB_AVAILABLE = 0x28,
    COR_MQTT_PROP_SUB_ID_AVAILABLE = 0x29,
    COR_MQTT_PROP_SHARED_SUB_AVAILABLE = 0x2A
} CorMqttPropId;

/*
 * A string or binary field: len bytes at data, not NUL-terminated. Decoded,
 * it points into the input buffer; to encode, into the caller's memory.
 */
typedef struct CorMqttStr {
    const char* data;
    size_t len;
} CorMqttStr;

/* A user property: a name and a value, both UTF-8. */
typedef struct CorMqttUserProp {
    CorMqttStr name;
    CorMqttStr value;
} CorMqttUserProp;

/*
 * A packet's 5.0 properties, owned by the packet that holds them. A scalar
 * property is present when its bit, corMqttPropHas(), is set in has; the
 * field of an absent one is 0 or empty. Ignored in 3.1.1.
 *
 * The two that may repeat are lists: decoded, raw and rawLen are the
 * whole property block as received (walk it with corMqttUserPropNext and
 * corMqttSubIdNext; userCount and subIdCount say how many there are, and
 * subscriptionId is the first identifier). To encode, the entries of raw
 * are copied (so a decoded packet encodes again as it was), then user's
 * userCount entries are added and, when subscriptionId is set and raw
 * has none, that one identifier. Leave raw NULL to build properties.
 */
typedef struct CorMqttProps {
    uint64_t has;           /* 1 << CorMqttPropId, for each one */
    uint8_t payloadFormat;  /* 0 bytes, 1 UTF-8 */
    uint32_t messageExpiry; /* seconds */
    CorMqttStr contentType;
    CorMqttStr responseTopic;
    CorMqttStr correlationData; /* binary */
    uint32_t subscriptionId;
    uint32_t sessionExpiry; /* seconds */
    CorMqttStr assignedClientId;
    uint16_t serverKeepAlive; /* seconds */
    CorMqttStr authMethod;
    CorMqttStr authData; /* binary */
    uint8_t requestProblemInfo;
    uint32_t willDelay; /* seconds */
    uint8_t requestResponseInfo;
    CorMqttStr responseInfo;
    CorMqttStr serverReference;
    CorMqttStr reasonString;
    uint16_t receiveMaximum;
    uint16_t topicAliasMaximum;
    uint8_t maximumQos;
    uint8_t retainAvailable;
    uint32_t maximumPacketSize;
    uint8_t wildcardSubAvailable;
    uint8_t subIdAvailable;
    uint8_t sharedSubAvailable;
    const CorMqttUserProp* user; /* to encode: userCount of them */
    unsigned userCount;
    unsigned subIdCount; /* decoded */
    const uint8_t* raw;  /* decoded: the property block */
    size_t rawLen;
} CorMqttProps;

/* CONNECT's will message. */
typedef struct CorMqttWill {
    CorMqttStr topic;
    CorMqttStr payload; /* binary */
    uint8_t qos;
    bool retain;
    CorMqttProps props; /* 5.0 will properties */
} CorMqttWill;

/*
 * A subscription: a topic filter and its options byte: bits 0-1 the
 * maximum QoS; in 5.0 also bit 2 No Local, bit 3 Retain As Published and
 * bits 4-5 Retain Handling (COR_MQTT_SUB_* below).
 */
typedef struct CorMqttSub {
    CorMqttStr filter;
    uint8_t options;
} CorMqttSub;

#define COR_MQTT_SUB_NO_LOCAL 0x04
#define COR_MQTT_SUB_RETAIN_AS_PUBLISHED 0x08
#define COR_MQTT_SUB_RETAIN_HANDLING_SHIFT 4

/*
 * One control packet, owned by the caller; which fields count depends on
 * type (the others are ignored when encoding and zero when decoded):
 *
 *   CONNECT      version, cleanStart, keepAlive, clientId, hasUsername +
 *                username, hasPassword + password, hasWill + will, props
 *   CONNACK      sessionPresent, reasonCode (3.1.1: the return code), props
 *   PUBLISH      dup, qos, retain, topic, packetId (QoS 1 and 2), props,
 *                payload
 *   PUBACK, PUBREC, PUBREL, PUBCOMP
 *                packetId, reasonCode and props (5.0)
 *   SUBSCRIBE    packetId, props, subs: encode subCount of subs[], or,
 *                with subs NULL, the list as decoded (corMqttSubNext)
 *   SUBACK       packetId, props, codeCount reason codes at codes
 *   UNSUBSCRIBE  packetId, props, filters as SUBSCRIBE's (options unused)
 *   UNSUBACK     packetId, props and (5.0) codes
 *   PINGREQ, PINGRESP
 *                nothing
 *   DISCONNECT, AUTH
 *                reasonCode and props (5.0)
 */
typedef struct CorMqttPacket {
    uint8_t type;    /* CorMqttType */
    uint8_t version; /* CONNECT: the protocol level */
    bool dup;
    uint8_t qos;
    bool retain;
    uint16_t packetId;
    uint8_t reasonCode; /* CorMqttReasonCode */
    bool sessionPresent;
    bool cleanStart;    /* 3.1.1: Clean Session */
    uint16_t keepAlive; /* seconds, 0 for none */
    bool hasUsername;
    bool hasPassword;
    bool hasWill;
    CorMqttStr clientId;
    CorMqttStr username;
    CorMqttStr password; /* binary */
    CorMqttWill will;
    CorMqttStr topic;
    CorMqttStr payload;     /* binary */
    const CorMqttSub* subs; /* to encode */
    unsigned subCount;
    const uint8_t* list; /* decoded: the encoded filters */
    size_t listLen;
    const uint8_t* codes; /* SUBACK, UNSUBACK */
    size_t codeCount;
    CorMqttProps props;
} CorMqttPacket;

/*
 * What corMqttDecode says besides its result: when it needs more, how
 * many bytes in all the packet takes (0 while its length is not all in);
 * when it refuses, why, for the log, and the reason code a 5.0 peer is
 * sent in DISCONNECT before the connection is closed (a 3.1.1 peer only
 * sees the close).
 */
typedef struct CorMqttStatus {
    size_t need;
    uint8_t reasonCode; /* CorMqttReasonCode */
    const char* reason; /* static text */
} CorMqttStatus;

/*
 * Read one packet from the len bytes received so far at buf, for protocol
 * version (COR_MQTT_V311 or COR_MQTT_V5; a CONNECT is read by the level
 * it carries, which must be one of them). maxSize bounds a packet's whole
 * length (0: COR_MQTT_PACKET_MAX); a larger one is refused as soon as its
 * length is read, before its bytes arrive.
 *
 * Returns the packet's length N > 0 with *pkt decoded (its strings point
 * into buf; the bytes after N are the next packet's); 0 when more bytes
 * are needed (st->need); or -reasonCode when the packet is malformed or
 * breaks the protocol (st->reasonCode and st->reason say which): a
 * remaining length of a fifth byte, a field that runs past the packet or
 * bytes left after it, a string that is not UTF-8 (RFC 3629) or holds
 * U+0000, a topic name empty or with a wildcard, a bad topic filter,
 * reserved flag bits set, QoS 3, packet identifier 0 where one is needed,
 * a property the packet type may not carry or twice where it may only
 * once, a property's value out of its range, a reason code the packet
 * type does not have, and a topic alias (see above).
 */
int corMqttDecode(const uint8_t* buf, size_t len, unsigned version,
                  size_t maxSize, CorMqttPacket* pkt, CorMqttStatus* st);

/*
 * Write pkt, for protocol version, into the cap bytes at out (CONNECT
 * writes pkt->version when it is set, else version). Returns the packet's
 * length; -ENOBUFS when it does not fit in cap (corMqttEncodedSize says
 * how much does; out is left as it was); -EINVAL for a packet that
 * corMqttDecode would refuse (out then holds the refused bytes), or one
 * too long for MQTT (a string over 65535 bytes, a remaining length over
 * COR_MQTT_REMAINING_MAX). Whether it fits the peer's Maximum Packet Size
 * is the caller's to check.
 */
int corMqttEncode(uint8_t* out, size_t cap, unsigned version,
                  const CorMqttPacket* pkt);

/*
 * The length corMqttEncode takes to write pkt, so that a caller can grow
 * its buffer first; -EINVAL when it is too long for MQTT.
 */
int corMqttEncodedSize(unsigned version, const CorMqttPacket* pkt);

/* The name of packet type type ("PUBLISH"), or "reserved", for logs. */
const char* corMqttTypeName(unsigned type);

/*
 * Walk a decoded packet's user properties (props may be a will's): *pos
 * starts at 0. Returns true with *name and *value set, false after the
 * last.
 */
bool corMqttUserPropNext(const CorMqttProps* props, size_t* pos,
                         CorMqttStr* name, CorMqttStr* value);

/* Walk a decoded packet's subscription identifiers, as above. */
bool corMqttSubIdNext(const CorMqttProps* props, size_t* pos, uint32_t* id);

/*
 * Walk a decoded SUBSCRIBE's or UNSUBSCRIBE's topic filters, as above
 * (an UNSUBSCRIBE's options are 0).
 */
bool corMqttSubNext(const CorMqttPacket* pkt, size_t* pos, CorMqttSub* sub);

/*
 * NULL when the len bytes at s are a valid topic name (what a PUBLISH
 * carries: UTF-8 without U+0000, not empty, no '+' or '#'); else why not.
 */
const char* corMqttTopicNameCheck(const char* s, size_t len);

/*
 * NULL when the len bytes at s are a valid topic filter (UTF-8 without
 * U+0000, not empty, '+' a whole level, '#' a whole level and the last,
 * a shared subscription "$share/NAME/FILTER" with a NAME of no wildcard
 * and a valid FILTER); else why not, for `cor -t` to print at file:line.
 */
const char* corMqttTopicFilterCheck(const char* s, size_t len);

/*
 * Whether topic name topic matches the valid topic filter filter: '+'
 * matches one level (an empty one too), '#' the level above and every one
 * below; a topic beginning with '$' is not matched by a filter that begins
 * with a wildcard. A shared subscription's filter matches as its FILTER.
 */
bool corMqttTopicMatch(const char* filter, size_t filterLen, const char* topic,
                       size_t topicLen);

/* Whether len bytes at s are an MQTT UTF-8 string: well-formed (RFC 3629:
 * no overlongs, no surrogates, nothing past U+10FFFF) and no U+0000. */
bool corMqttUtf8Valid(const char* s, size_t len);

/* Whether property id is present in props. */
static inline bool corMqttPropHas(const CorMqttProps* props, unsigned id);

/* Mark property id present in props (its field set by the caller). */
static inline void corMqttPropSet(CorMqttProps* props, unsigned id);

/* ---- inline definitions ------------------------------------------------ */

static inline bool
corMqttPropHas(const CorMqttProps* props, unsigned id)
{
    return id < 64 && (props->has >> id & 1) != 0;
}

static inline void
corMqttPropSet(CorMqttProps* props, unsigned id)
{
    if (id < 64) {
        props->has |= (uint64_t)1 << id;
    }
}

#endif /* COR_MQTT_CODEC_H */
