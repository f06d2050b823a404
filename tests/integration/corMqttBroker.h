/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The broker of the MQTT bridge's tests (corMqttBroker.c): mosquitto, in
 * a scratch folder of its own with persistence, an unbounded queue per
 * client and four loopback listeners: plain and anonymous, plain with a
 * password file (user "u", password "p"), TLS with a certificate of the
 * test CA, and TLS with a self-signed one (a CA nobody trusts). Started
 * and stopped by its PID; mosquitto_sub as the receiver.
 */
#ifndef COR_MQTT_BROKER_H
#define COR_MQTT_BROKER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;       /* anonymous */
    int portAuth;   /* user "u", password "p" */
    int portTls;    /* the test CA's certificate */
    int portSelf;   /* a self-signed one */
    char dir[64];   /* its configuration, files, log */
    char certs[64]; /* tests/tls/makeCerts's */
} CorTestBroker;

/* A receiver: mosquitto_sub and the file it writes. */
typedef struct {
    pid_t pid;
    char out[128];
} CorTestSub;

extern CorTestBroker corTestBroker;

/* Make the broker's folder, certificates, password file and ports, and
 * start it. */
void corTestBrokerMake(void);
/* Start it (again, on the same ports); returns once its plain port
 * answers. */
void corTestBrokerStart(void);
/* Stop it with sig, and wait for it. */
void corTestBrokerStop(int sig);
/* Stop it and remove its folder and certificates. */
void corTestBrokerRemove(void);

/* mosquitto_sub -t topic at QoS 1 in 5.0, each message a line "TOPIC
 * PAYLOAD USER-PROPERTIES" in s->out, until count came (then it exits;
 * 0: until corTestSubCollect); extra: more options. Returns once the
 * broker has its SUBSCRIBE. */
void corTestSubStart(CorTestSub* s, const char* topic, int count,
                     const char* extra);
/* Wait for s to have its count (it exits then), up to ms, else stop it;
 * its output (cap bytes at most) into out. Returns the number of lines. */
int corTestSubCollect(CorTestSub* s, int ms, char* out, size_t cap);

/* count free loopback ports at once. */
void corTestPortsTake(int* ports, int count);

/*
 * The brokers the tests take as a parameter (corMqttPeer.c), each on a
 * loopback port of its own: mosquitto (3.1.1 and 5.0), RabbitMQ's MQTT
 * plugin (3.1.1: it grants QoS 1 for QoS 2) and aedes (3.1.1).
 */
typedef enum {
    COR_PEER_MOSQUITTO,
    COR_PEER_RABBITMQ,
    COR_PEER_AEDES,
    COR_PEER_KINDS
} CorTestPeerKind;

typedef struct {
    CorTestPeerKind kind;
    pid_t pid;
    pid_t epmd;   /* RabbitMQ's own */
    int port;     /* MQTT, anonymous */
    int ports[3]; /* RabbitMQ's epmd, node and dist ports */
    char dir[64]; /* its files, log (broker.log) */
} CorTestPeer;

const char* corTestPeerName(CorTestPeerKind kind);
/* Start a broker of kind (extra: more lines of mosquitto's configuration)
 * and return once it answers: 0, or -1 with why when it is not
 * installed (the test skips then, saying why). */
int corTestPeerStart(CorTestPeer* p, CorTestPeerKind kind, const char* extra,
                     char* why, size_t whyLen);
/* Stop it (by its PID) and remove its folder. */
void corTestPeerStop(CorTestPeer* p);

/* Counter name of the broker on brokerPort in the /metrics of the cor on
 * corPort; -1 if none. */
long corTestBrokerCounterAt(int corPort, int brokerPort, const char* name);

/* The sessions mosquitto keeps for clients not connected
 * ($SYS/broker/clients/total less clients/connected), as it says them
 * (every second, when they change) 1.5 s after the call; -1 if it did
 * not. Takes 3.5 s. */
long corTestBrokerSessionsKept(void);

/* Counter name of the broker's plain port in the /metrics of the cor on
 * corPort (routed at GET /metrics); -1 if none. */
long corTestBrokerCounter(int corPort, const char* name);

/* The notification counter name{scheme="scheme"} (cor_notify_sent_total,
 * cor_notify_failed_total...) in the /metrics of the cor on corPort; -1 if
 * none. */
long corTestNotifyCount(int corPort, const char* name, const char* scheme);

/* Wait until the scheme's notifications sent and failed reach want in
 * all, up to ms; the test fails if they are not exactly want then. */
void corTestNotifiedWait(int corPort, const char* scheme, long want, int ms);

/* How many times needle is in s. */
int corTestCountOf(const char* s, const char* needle);

#endif /* COR_MQTT_BROKER_H */
