/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the MQTT bridge (modules/mqtt) beside its codec: the
 * broker a publish goes to, one publish as the loop path
 * (corMqttClient.c) and the thread path (corMqttClientThread.c) make it,
 * and what both share (corMqttSession.c): the module's settings, the
 * output buffer, CONNECT and CONNACK, the reason codes' words.
 */
#ifndef COR_MQTT_CLIENT_INT_H
#define COR_MQTT_CLIENT_INT_H

#include "cor.h"
#include "corMqttCodec.h"
#include "corKit.h"

#include <sys/socket.h>

/* The default ports of mqtt:// and mqtts://. */
#define COR_MQTT_PORT 1883
#define COR_MQTTS_PORT 8883
/* A user name or a password from a URL, at most. */
#define COR_MQTT_CRED_MAX 256
/* A subscription's method: (what a forward sends its messages as), at
 * most. */
#define COR_MQTT_METHOD_MAX 16
/* What a user property named as a field of the bridge's own goes as (a
 * forward sends every one so). */
#define COR_MQTT_USER_PREFIX "MQTT-User-"
#define COR_MQTT_USER_PREFIX_LEN 10
/* The largest packet the bridge reads from a broker. */
#define COR_MQTT_READ_MAX ((size_t)16 * 1024 * 1024)

/* The module's settings (modules: - load: mqtt), read once at init. */
typedef struct {
    char clientId[24];         /* the prefix of every client id */
    unsigned keepAliveS;       /* CONNECT's keep alive, 0: none */
    unsigned maxInFlight;      /* QoS 1/2 publishes unacknowledged per
                                  connection (the broker's Receive
                                  Maximum lowers it) */
    uint64_t connectTimeoutMs; /* the connect and the CONNACK */
    uint64_t reconnectMinMs;   /* the first back-off */
    uint64_t reconnectMaxMs;   /* its ceiling (it doubles) */
    uint32_t sessionExpiryS;   /* a subscriber's 5.0 session, kept */
    unsigned maxInHandlers;    /* a subscriber's messages in handlers at
                                  once: past it, its socket is not read */
    unsigned redeliver;        /* a failed message served again, at most */
    uint64_t redeliverDelayMs; /* before each time */
    char deadLetter[256];      /* a topic for messages that failed for
                                  good, or "" */
    unsigned qos;              /* a notification's, by default */
    unsigned version;          /* COR_MQTT_V311 or COR_MQTT_V5 */
} CorMqttConf;

extern CorMqttConf corMqttConf;

/*
 * A broker as a connection is keyed by: every publish of a loop (of a
 * thread) to the same key shares one connection. The caller's.
 */
typedef struct {
    char host[256];
    unsigned port;
    bool tls;
    unsigned version;
    bool hasUser;
    bool hasPassword;
    char user[COR_MQTT_CRED_MAX];
    char password[COR_MQTT_CRED_MAX];
} CorMqttBroker;

/*
 * The subscriptions to one broker (the module's YAML), made by loop 0 on
 * one connection with a client id and a session of their own, which
 * outlive cor's restarts: what the broker holds for it while cor is away
 * comes when it is back. Read at init, the module's until its exit.
 */
typedef struct {
    CorMqttBroker broker;
    char url[512]; /* as written, for messages */
    char clientId[64];
    CorMqttSub* subs; /* filter (owned) and options (QoS) */
    char** methods;   /* each one's method: (owned), or NULL */
    unsigned count;
    bool named; /* a client_id given: its session outlives
                   the instance */
    /* The broker's address as the subscriber last connected to it (loop
     * 0's): where its 3.1.1 session is ended (corMqttSessionEnd.c). */
    struct sockaddr_storage peer;
    socklen_t peerLen;
} CorMqttSubGroup;

extern CorMqttSubGroup* corMqttGroups;
extern unsigned corMqttGroupCount;

/* One message to publish; the caller's, read until the publish returns. */
typedef struct {
    const CorMqttBroker* broker;
    CorMqttStr topic;
    CorMqttStr payload;
    unsigned qos;
    bool retain;
    const CorMqttProps* props; /* 5.0 PUBLISH properties, or NULL */
    uint64_t deadlineMs;       /* corEvClockMs() time */
} CorMqttMessage;

/*
 * Publish msg on the calling coroutine's loop (its connection to the
 * broker, shared) or on the calling thread (a connection of the thread's
 * own), and wait for its acknowledgement: QoS 0 its bytes handed to the
 * socket, QoS 1 PUBACK, QoS 2 PUBCOMP. Returns 0, or -errno with why:
 * -ETIMEDOUT, -ECANCELED, the errors of corConnOpen, -EACCES (the broker
 * refused the connection or the message: its reason code in why),
 * -ECONNRESET, -EPROTO, -ENOMEM. May yield.
 */
int corMqttPublishOnLoop(const CorMqttMessage* msg, char* why, size_t whyLen);
int corMqttPublishOnThread(const CorMqttMessage* msg, char* why, size_t whyLen);

/*
 * Take an mqtt:// or mqtts:// URL apart into u and its broker b (the
 * default port filled in, the user and password percent-decoded, the
 * module's default version). Returns 0, or -EINVAL with why (a literal
 * '#' too: a URL's fragment would silently cut the topic).
 */
int corMqttUrlBroker(const char* url, CorMqttBroker* b, CorUrl* u, char* why,
                     size_t whyLen);

/* The mqtt and mqtts schemes' sender (corMqttNotify.c). May yield. */
int corMqttNotifySend(CorModule* m, const CorNotification* n, char* why,
                      size_t whyLen);
/* Their check, before a send starts: the URL and its topic. */
int corMqttNotifyCheck(const char* url, char* why, size_t whyLen);

/* Close the calling loop's connections (its loopExit). */
void corMqttClientLoopExit(void);

/*
 * The generation drains (a reload, a graceful stop): the calling loop's
 * subscribers stop serving new messages and never connect again; each
 * lets go of its broker (DISCONNECT, the persistent session kept for the
 * next generation) once the messages in its handlers were answered and
 * acknowledged.
 */
void corMqttClientDrain(void);

/* Subscriber connections of the process not yet let go (a drain waits
 * for none); any thread. */
unsigned corMqttSubscribersOpen(void);

/*
 * The module's subscriptions (a YAML list) into corMqttGroups, checked:
 * each a broker URL (no path), a topic filter and a QoS, each error at
 * its file:line. Returns 0, or -1 after module errors.
 */
int corMqttSubscriptionsRead(CorModule* m, const CorConf* list);

/* Free corMqttGroups (the module's exit). */
void corMqttSubscriptionsFree(void);

/* ---- corMqttStats.c: counters per broker --------------------------------- */

typedef struct CorMqttStats CorMqttStats;

typedef enum {
    COR_MQTT_COUNT_START,          /* a notification starts */
    COR_MQTT_COUNT_SENT,           /* it ended acknowledged */
    COR_MQTT_COUNT_FAILED,         /* it ended otherwise */
    COR_MQTT_COUNT_RECEIVED,       /* a subscription's message served */
    COR_MQTT_COUNT_UNACKNOWLEDGED, /* and not acknowledged (5xx) */
    COR_MQTT_COUNT_REFUSED         /* one past the limits: no handler */
} CorMqttCount;

/* b's counters (by its scheme, host and port), made at first; NULL
 * without memory (then nothing is counted). From any thread. */
CorMqttStats* corMqttStatsFor(const CorMqttBroker* b);
void corMqttStatsCount(CorMqttStats* s, CorMqttCount which);

/* Every broker's counters as lines of /metrics (a source of lines,
 * corMetricsSourceAdd; arg unused); any thread. */
void corMqttStatsEmit(CorMetricsOut* out, void* arg);

/* Free them all (the module's exit). */
void corMqttStatsFree(void);

/* ---- corMqttSession.c ---------------------------------------------------- */

/* Append pkt encoded for version. Returns 0, -EINVAL (the codec refused
 * it), -ENOMEM. */
int corMqttBufPut(CorBuf* b, unsigned version, const CorMqttPacket* pkt);

/* Append msg's PUBLISH with packetId (0 for QoS 0), DUP as dup. */
int corMqttBufPublish(CorBuf* b, const CorMqttMessage* msg, uint16_t packetId,
                      bool dup);

/* Make room for more bytes in an input buffer (what is pending moved to
 * its front): at least 4096, and the whole of a packet whose length need
 * says. 0, -ENOMEM. */
int corMqttInputReserve(CorBuf* in, size_t need);

/* A fresh publisher's client id: the prefix, the instance (corInstance),
 * the generation's PID, a number of the process. */
void corMqttClientIdMake(char* out, size_t cap);

/* The words of a CONNACK's code (3.1.1 return code, 5.0 reason code) or
 * of a 5.0 reason code elsewhere. Static text. */
const char* corMqttReasonText(unsigned version, bool connack, uint8_t code);

/* What a session asks for, and what it learnt from its CONNACK. */
typedef struct {
    bool persistent;     /* in: Clean Session 0 (a subscriber's) */
    unsigned window;     /* QoS 1/2 in flight at most */
    unsigned keepAliveS; /* what the broker wants, if it says */
    bool present;        /* the broker had the session */
} CorMqttSession;

/*
 * Open a connection to b and run CONNECT/CONNACK on it (clean session
 * unless s->persistent, clientId, b's user and password, corMqttConf's
 * keep alive) by
 * deadlineMs. Bytes read past the CONNACK are left pending in in (its
 * owner's). Returns the connection, or NULL with
 * *errP (-EACCES for a refusal: its reason in why) and why. May yield.
 */
CorConn* corMqttSessionOpen(const CorMqttBroker* b, const char* clientId,
                            uint64_t deadlineMs, CorMqttSession* s, CorBuf* in,
                            int* errP, char* why, size_t whyLen);

/*
 * Whether a connection of this process to b was accepted once: a broker
 * that served and went away is waited for (reconnect, back-off) until a
 * message's deadline; one that never served fails a publish at once.
 * Marked by corMqttSessionOpen, from any thread; cleared at the module's
 * exit.
 */
void corMqttServedMark(const CorMqttBroker* b);
bool corMqttServed(const CorMqttBroker* b);
void corMqttServedClear(void);

/*
 * The window of QoS 1/2 messages in flight to b: window, at most
 * COR_MQTT_V311_WINDOW in 3.1.1 (which has no Receive Maximum; a broker
 * past its own drops or refuses: mosquitto's is 20), and at most what
 * corMqttWindowShrink learnt. Shrink: b closed a connection with inFlight
 * in flight (a 3.1.1 refusal, or 5.0's 0x93): half of it from now on, for
 * the process's life. Returns the new window. Any thread.
 */
#define COR_MQTT_V311_WINDOW 20
unsigned corMqttWindowCap(const CorMqttBroker* b, unsigned window);
unsigned corMqttWindowShrink(const CorMqttBroker* b, unsigned inFlight);

/* What is logged once per broker and process. */
typedef enum {
    COR_MQTT_NOTE_DOWNGRADE, /* QoS 2 answered with PUBACK */
    COR_MQTT_NOTE_TAKEOVER   /* our client id taken by another */
} CorMqttNote;

/* Whether note about b is new (true once; the caller logs it). */
bool corMqttSayOnce(const CorMqttBroker* b, CorMqttNote note);
/* Log once per broker: b (named name) answered a QoS 2 PUBLISH with
 * PUBACK; another client took clientId's session (maybe: a 3.1.1 close
 * only looks like one), with what to do. */
void corMqttDowngradeSay(const CorMqttBroker* b, const char* name);
void corMqttTakeoverSay(const CorMqttBroker* b, const char* name,
                        const char* clientId, bool maybe);

/* The back-off after ms: doubled, up to reconnectMaxMs. */
uint64_t corMqttBackoffNext(uint64_t ms);

/* Milliseconds from now to deadlineMs (0 if past). */
int corMqttLeftMs(uint64_t deadlineMs);

/* "mqtt://host:port" or "mqtts://host:port" of b, for messages. */
const char* corMqttBrokerName(const CorMqttBroker* b, char* out, size_t cap);

/* Whether a and b are the same key. */
bool corMqttBrokerSame(const CorMqttBroker* a, const CorMqttBroker* b);

#endif /* COR_MQTT_CLIENT_INT_H */
