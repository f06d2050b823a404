/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the loop path and the thread path of the MQTT client share: the
 * output buffer packets are encoded into, the PUBLISH of a message, and
 * the opening of a session (the connection, CONNECT, CONNACK). The
 * session is opened by straight-line code that waits through the
 * connection layer, so that the loop path runs it in a coroutine of its
 * own (no caller's cancel can take a shared connection down) and the
 * thread path runs it on the calling thread, the same source.
 *
 * Sessions are clean (Clean Session 1, Clean Start 1 with no Session
 * Expiry): what a broker held for an earlier connection is not taken
 * over, so every QoS 1/2 message not acknowledged when a connection
 * failed is published again (DUP set) on the next one, QoS 2 too: a
 * broker that releases QoS 2 messages at PUBREL (mosquitto) has lost one
 * whose PUBREL did not arrive with the session. At least once, then.
 */
#include "corMqttClientInt.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INPUT_ROOM 4096

CorMqttConf corMqttConf = {
    .clientId = "cor",
    .keepAliveS = 60,
    .maxInFlight = 64,
    .connectTimeoutMs = 10000,
    .reconnectMinMs = 100,
    .reconnectMaxMs = 5000,
    .sessionExpiryS = 86400,
    .qos = 1,
    .version = COR_MQTT_V5,
};

static atomic_uint clientIdCount;

/* The brokers a connection of this process was accepted by, and what
 * each showed: the window it refused past (0: none), the notes said. */
typedef struct Served {
    struct Served* next;
    CorMqttBroker broker;
    unsigned window;
    unsigned said; /* 1 << CorMqttNote */
} Served;

static pthread_mutex_t servedLock = PTHREAD_MUTEX_INITIALIZER;
static Served* servedList;

/* Encoded into the room there is first: only a packet that does not fit
 * pays for its size twice (measured, then encoded, which measures it
 * again). */
int
corMqttBufPut(CorBuf* b, unsigned version, const CorMqttPacket* pkt)
{
    int size = b->cap > b->len ? corMqttEncode(b->data + b->len,
                                               b->cap - b->len, version, pkt)
                               : -ENOBUFS;

    if (size == -ENOBUFS) {
        size = corMqttEncodedSize(version, pkt);
        if (size < 0) {
            return -EINVAL;
        }
        if (corBufReserve(b, (size_t)size) != 0) {
            return -ENOMEM;
        }
        size = corMqttEncode(b->data + b->len, b->cap - b->len, version, pkt);
    }
    if (size < 0) {
        return size == -ENOBUFS ? -ENOMEM : size;
    }
    b->len += (size_t)size;
    return 0;
}

int
corMqttBufPublish(CorBuf* b, const CorMqttMessage* msg, uint16_t packetId,
                  bool dup)
{
    CorMqttPacket pkt = { .type = COR_MQTT_PUBLISH,
                          .qos = (uint8_t)msg->qos,
                          .retain = msg->retain,
                          .dup = dup && msg->qos > 0,
                          .packetId = packetId,
                          .topic = msg->topic,
                          .payload = msg->payload };

    if (msg->props != NULL) {
        pkt.props = *msg->props;
    }
    return corMqttBufPut(b, msg->broker->version, &pkt);
}

int
corMqttInputReserve(CorBuf* in, size_t need)
{
    size_t want;

    corBufCompact(in);
    want = in->len + INPUT_ROOM;
    return corBufGrowTo(in, need > want ? need : want);
}

/* The generation's PID in it: a publisher's session is clean, and an old
 * generation's, still sending while it drains, must not be taken over by
 * the new one's of the same number. */
void
corMqttClientIdMake(char* out, size_t cap)
{
    snprintf(out, cap, "%s-%s-%ld-%u", corMqttConf.clientId, corInstance(),
             (long)getpid(), atomic_fetch_add(&clientIdCount, 1) + 1);
}

const char*
corMqttReasonText(unsigned version, bool connack, uint8_t code)
{
    static const char* const connack311[] = { "accepted",
                                              "unacceptable protocol version",
                                              "client id rejected",
                                              "server unavailable",
                                              "bad user name or password",
                                              "not authorized" };
    static const struct {
        uint8_t code;
        const char* text;
    } texts[] = {
        { 0x00, "success" },
        { 0x10, "no matching subscribers" },
        { 0x80, "unspecified error" },
        { 0x81, "malformed packet" },
        { 0x82, "protocol error" },
        { 0x83, "implementation specific error" },
        { 0x84, "unsupported protocol version" },
        { 0x85, "client id not valid" },
        { 0x86, "bad user name or password" },
        { 0x87, "not authorized" },
        { 0x88, "server unavailable" },
        { 0x89, "server busy" },
        { 0x8A, "banned" },
        { 0x8B, "server shutting down" },
        { 0x8D, "keep alive timeout" },
        { 0x8E, "session taken over" },
        { 0x90, "topic name invalid" },
        { 0x91, "packet id in use" },
        { 0x92, "packet id not found" },
        { 0x93, "receive maximum exceeded" },
        { 0x95, "packet too large" },
        { 0x96, "message rate too high" },
        { 0x97, "quota exceeded" },
        { 0x98, "administrative action" },
        { 0x99, "payload format invalid" },
        { 0x9A, "retain not supported" },
        { 0x9B, "QoS not supported" },
        { 0x9C, "use another server" },
        { 0x9D, "server moved" },
        { 0x9F, "connection rate exceeded" },
    };

    if (version == COR_MQTT_V311 && connack) {
        return code < 6 ? connack311[code] : "unknown return code";
    }
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        if (texts[i].code == code) {
            return texts[i].text;
        }
    }
    return "unknown reason code";
}

uint64_t
corMqttBackoffNext(uint64_t ms)
{
    return ms * 2 < corMqttConf.reconnectMaxMs ? ms * 2
                                               : corMqttConf.reconnectMaxMs;
}

int
corMqttLeftMs(uint64_t deadlineMs)
{
    uint64_t now = corEvClockMs();

    return deadlineMs > now ? (int)(deadlineMs - now) : 0;
}

const char*
corMqttBrokerName(const CorMqttBroker* b, char* out, size_t cap)
{
    bool v6 = strchr(b->host, ':') != NULL;

    snprintf(out, cap, "%s://%s%s%s:%u", b->tls ? "mqtts" : "mqtt",
             v6 ? "[" : "", b->host, v6 ? "]" : "", b->port);
    return out;
}

bool
corMqttBrokerSame(const CorMqttBroker* a, const CorMqttBroker* b)
{
    return a->port == b->port && a->tls == b->tls && a->version == b->version
           && a->hasUser == b->hasUser && a->hasPassword == b->hasPassword
           && strcmp(a->host, b->host) == 0 && strcmp(a->user, b->user) == 0
           && strcmp(a->password, b->password) == 0;
}

static Served*
servedFind(const CorMqttBroker* b)
{
    for (Served* s = servedList; s != NULL; s = s->next) {
        if (corMqttBrokerSame(&s->broker, b)) {
            return s;
        }
    }
    return NULL;
}

void
corMqttServedMark(const CorMqttBroker* b)
{
    Served* s;

    pthread_mutex_lock(&servedLock);
    if (servedFind(b) == NULL && (s = calloc(1, sizeof(*s))) != NULL) {
        s->broker = *b;
        s->next = servedList;
        servedList = s;
    }
    pthread_mutex_unlock(&servedLock);
}

bool
corMqttServed(const CorMqttBroker* b)
{
    bool served;

    pthread_mutex_lock(&servedLock);
    served = servedFind(b) != NULL;
    pthread_mutex_unlock(&servedLock);
    return served;
}

unsigned
corMqttWindowCap(const CorMqttBroker* b, unsigned window)
{
    Served* s;

    if (b->version == COR_MQTT_V311 && window > COR_MQTT_V311_WINDOW) {
        window = COR_MQTT_V311_WINDOW;
    }
    pthread_mutex_lock(&servedLock);
    s = servedFind(b);
    if (s != NULL && s->window > 0 && s->window < window) {
        window = s->window;
    }
    pthread_mutex_unlock(&servedLock);
    return window;
}

unsigned
corMqttWindowShrink(const CorMqttBroker* b, unsigned inFlight)
{
    unsigned window = inFlight > 1 ? inFlight / 2 : 1;
    Served* s;

    pthread_mutex_lock(&servedLock);
    s = servedFind(b);
    if (s != NULL && (s->window == 0 || window < s->window)) {
        s->window = window;
    }
    pthread_mutex_unlock(&servedLock);
    return window;
}

bool
corMqttSayOnce(const CorMqttBroker* b, CorMqttNote note)
{
    bool first = false;
    Served* s;

    pthread_mutex_lock(&servedLock);
    s = servedFind(b);
    if (s != NULL && !(s->said & (1u << note))) {
        s->said |= 1u << note;
        first = true;
    }
    pthread_mutex_unlock(&servedLock);
    return first;
}

void
corMqttDowngradeSay(const CorMqttBroker* b, const char* name)
{
    if (corMqttSayOnce(b, COR_MQTT_NOTE_DOWNGRADE)) {
        corLog(COR_LOG_WARN,
               "mqtt: %s answers QoS 2 with PUBACK: it grants "
               "QoS 1 (as RabbitMQ does), so messages reach it at least "
               "once, not exactly once",
               name);
    }
}

void
corMqttTakeoverSay(const CorMqttBroker* b, const char* name,
                   const char* clientId, bool maybe)
{
    if (corMqttSayOnce(b, COR_MQTT_NOTE_TAKEOVER)) {
        corLog(COR_LOG_WARN,
               "mqtt: %s: %s client connected with client id "
               "'%s' and took the session over; give each instance its own "
               "client_id (or leave it out: the default is unique), and "
               "spread a subscription over instances with "
               "$share/GROUP/filter",
               name,
               maybe ? "the broker closed the connection at once: maybe "
                       "another"
                     : "another",
               clientId);
    }
}

void
corMqttServedClear(void)
{
    pthread_mutex_lock(&servedLock);
    while (servedList != NULL) {
        Served* s = servedList;

        servedList = s->next;
        free(s);
    }
    pthread_mutex_unlock(&servedLock);
}

/* ---- Opening a session --------------------------------------------------- */

static int
connectSend(CorConn* c, const CorMqttBroker* b, const char* clientId,
            bool persistent, uint64_t deadlineMs)
{
    CorBuf out = { 0 };
    CorMqttPacket pkt = { .type = COR_MQTT_CONNECT,
                          .version = (uint8_t)b->version,
                          .cleanStart = !persistent,
                          .keepAlive = (uint16_t)corMqttConf.keepAliveS,
                          .clientId = { clientId, strlen(clientId) },
                          .hasUsername = b->hasUser,
                          .hasPassword = b->hasPassword,
                          .username = { b->user, strlen(b->user) },
                          .password = { b->password, strlen(b->password) } };
    int rc;

    if (b->version == COR_MQTT_V5) {
        /* A subscriber's QoS 1/2 messages in flight are at most what
         * its handlers take at once (its socket is not read past it). */
        pkt.props.receiveMaximum = (uint16_t)(persistent
                                                  ? corMqttConf.maxInHandlers
                                                  : corMqttConf.maxInFlight);
        corMqttPropSet(&pkt.props, COR_MQTT_PROP_RECEIVE_MAXIMUM);
        if (persistent) {
            /* 0, the default, would end the session with the
             * connection. */
            pkt.props.sessionExpiry = corMqttConf.sessionExpiryS;
            corMqttPropSet(&pkt.props, COR_MQTT_PROP_SESSION_EXPIRY);
        }
    }
    rc = corMqttBufPut(&out, b->version, &pkt);
    if (rc == 0) {
        rc = corConnWriteAll(c, out.data, out.len, corMqttLeftMs(deadlineMs));
    }
    corBufFree(&out);
    return rc;
}

/* Read until one whole packet is in; its length, or -errno with why. */
static int
packetRead(CorConn* c, const CorMqttBroker* b, uint64_t deadlineMs,
           CorMqttPacket* pkt, CorBuf* in, char* why, size_t whyLen)
{
    for (;;) {
        CorMqttStatus st = { 0 };
        ssize_t n;
        int rc = corMqttDecode(corBufHead(in), corBufPending(in), b->version,
                               COR_MQTT_READ_MAX, pkt, &st);

        if (rc != 0) {
            if (rc < 0) {
                snprintf(why, whyLen, "a bad packet: %s", st.reason);
            }
            return rc < 0 ? -EPROTO : rc;
        }
        if (corMqttInputReserve(in, st.need) != 0) {
            snprintf(why, whyLen, "no memory for a packet");
            return -ENOMEM;
        }
        n = corConnRead(c, in->data + in->len, in->cap - in->len,
                        corMqttLeftMs(deadlineMs));
        if (n <= 0) {
            snprintf(why, whyLen, "%s",
                     n == 0            ? "the broker closed the "
                                         "connection"
                     : n == -ETIMEDOUT ? "no CONNACK in time"
                                       : strerror((int)-n));
            return n == 0 ? -ECONNRESET : (int)n;
        }
        in->len += (size_t)n;
    }
}

/* What the CONNACK in pkt says: 0, or -EACCES / -EPROTO with why. */
static int
connackTake(const CorMqttBroker* b, const CorMqttPacket* pkt, CorMqttSession* s,
            char* why, size_t whyLen)
{
    if (pkt->type != COR_MQTT_CONNACK) {
        snprintf(why, whyLen, "a %s instead of CONNACK",
                 corMqttTypeName(pkt->type));
        return -EPROTO;
    }
    if (pkt->reasonCode != 0) {
        snprintf(why, whyLen,
                 "the broker refused the connection: %s "
                 "(%s 0x%02x)",
                 corMqttReasonText(b->version, true, pkt->reasonCode),
                 b->version == COR_MQTT_V5 ? "reason code" : "return code",
                 pkt->reasonCode);
        return -EACCES;
    }
    s->present = pkt->sessionPresent;
    s->window = corMqttWindowCap(b, corMqttConf.maxInFlight);
    s->keepAliveS = corMqttConf.keepAliveS;
    if (corMqttPropHas(&pkt->props, COR_MQTT_PROP_RECEIVE_MAXIMUM)
        && pkt->props.receiveMaximum < s->window) {
        s->window = pkt->props.receiveMaximum;
    }
    if (corMqttPropHas(&pkt->props, COR_MQTT_PROP_SERVER_KEEP_ALIVE)) {
        s->keepAliveS = pkt->props.serverKeepAlive;
    }
    return 0;
}

/*
 * A 5.0 CONNECT answered with a 3.1.1 CONNACK that refuses the protocol
 * level (return code 1, which the 5.0 decoder refuses as malformed): the
 * broker speaks 3.1.1 only (aedes, RabbitMQ before 3.13). Says so in why
 * and returns -EACCES, or returns rc.
 */
static int
v311Refusal(const CorMqttBroker* b, const uint8_t* in, size_t inLen, int rc,
            char* why, size_t whyLen)
{
    if (rc != -EPROTO || b->version != COR_MQTT_V5 || inLen < 4 || in[0] != 0x20
        || in[1] != 0x02 || in[3] != 0x01) {
        return rc;
    }
    snprintf(why, whyLen,
             "the broker does not speak 5.0 (its 3.1.1 "
             "CONNACK refused the protocol level): use version \"3.1.1\" "
             "(the module's key, or ?version=3.1.1 in a URL)");
    return -EACCES;
}

CorConn*
corMqttSessionOpen(const CorMqttBroker* b, const char* clientId,
                   uint64_t deadlineMs, CorMqttSession* s, CorBuf* in,
                   int* errP, char* why, size_t whyLen)
{
    char name[300];
    char reason[256] = "";
    CorMqttPacket pkt;
    CorConn* c = corConnOpen(
        &(CorConnTarget){ .host = b->host,
                          .port = b->port,
                          .tls = b->tls,
                          .fresh = true,
                          .connectTimeoutMs = corMqttLeftMs(deadlineMs) > 0
                                                  ? corMqttLeftMs(deadlineMs)
                                                  : 1 },
        errP, why, whyLen);
    int rc;

    if (c == NULL) {
        return NULL;
    }
    in->len = in->off = 0;
    rc = connectSend(c, b, clientId, s->persistent, deadlineMs);
    if (rc < 0) {
        snprintf(reason, sizeof(reason), "CONNECT: %s", strerror(-rc));
    } else if ((rc = packetRead(c, b, deadlineMs, &pkt, in, reason,
                                sizeof(reason)))
               > 0) {
        size_t used = (size_t)rc;

        rc = connackTake(b, &pkt, s, reason, sizeof(reason));
        if (rc == 0) {
            corMqttServedMark(b);
        }
        corBufConsume(in, used);
    } else {
        rc = v311Refusal(b, corBufHead(in), corBufPending(in), rc, reason,
                         sizeof(reason));
    }
    if (rc < 0) {
        snprintf(why, whyLen, "%s: %s",
                 corMqttBrokerName(b, name, sizeof(name)), reason);
        *errP = rc;
        corConnClose(c);
        return NULL;
    }
    return c;
}
