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
    int port;                   /* anonymous */
    int portAuth;               /* user "u", password "p" */
    int portTls;                /* the test CA's certificate */
    int portSelf;               /* a self-signed one */
    char dir[64];               /* its configuration, files, log */
    char certs[64];             /* tests/tls/makeCerts's */
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

/* Counter name of the broker's plain port in the /metrics of the cor on
 * corPort (routed at GET /metrics); -1 if none. */
long corTestBrokerCounter(int corPort, const char* name);

/* How many times needle is in s. */
int corTestCountOf(const char* s, const char* needle);

#endif /* COR_MQTT_BROKER_H */
