/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT bridge as a module: it registers the notification schemes mqtt
 * and mqtts and its counters per broker in /metrics, reads its
 * settings and subscriptions, makes the subscriptions on loop 0, and
 * closes each loop's broker connections when the loop ends. It registers
 * a protocol with no listener, "mqtt-subscriptions", only to be told
 * when the generation drains, and so hand its subscribers' sessions to
 * the next one (corMqttSubscribe.c).
 *
 *     modules:
 *       - load: mqtt
 *         client_id: cor         # prefix: cor-HOST-PID-RAND-... each
 *         keepalive: 60s         # CONNECT's keep alive (0s: none)
 *         max_in_flight: 64      # QoS 1/2 unacknowledged per connection
 *         connect_timeout: 10s   # the connect, TLS and the CONNACK
 *         reconnect_min: 100ms   # the back-off after a lost connection,
 *         reconnect_max: 5s      #   doubling up to this
 *         qos: 1                 # a notification's, by default
 *         version: "5"           # "3.1.1" or "5", by default
 *         session_expiry: 24h    # a subscriber's 5.0 session, kept
 *         max_in_handlers: 64    # a subscriber's messages in handlers
 *         redeliver: 3           # a failed message served again (5xx)
 *         redeliver_delay: 1s    #   after this
 *         dead_letter: ""        # where it goes then (a topic), if set
 *         subscriptions:         # corMqttSubscribe.c
 *           - { broker: "mqtt://127.0.0.1", filter: "a/+/b", qos: 1 }
 */
#include "corMqttLink.h"

#include <stdio.h>
#include <string.h>

/* The settings of subscribers: flow control, redelivery, dead letters.
 * Returns 0, or -1 after an error. */
static int
subscriberConfRead(CorModule* m, const CorConf* conf)
{
    CorConfErrors* errors = corModuleErrors(m);
    const char* dead = corConfString(conf, "dead_letter", "", errors);
    const char* bad = corMqttTopicNameCheck(dead, strlen(dead));

    corMqttConf.maxInHandlers = (unsigned)corConfInt(conf, "max_in_handlers",
                                                     64, 1, 65535, errors);
    corMqttConf.redeliver = (unsigned)corConfInt(conf, "redeliver", 3, 0, 1000,
                                                 errors);
    corMqttConf.redeliverDelayMs = corConfDurationMs(conf, "redeliver_delay",
                                                     1000, 0, 3600000, errors);
    if (dead[0] != '\0'
        && (bad != NULL || strlen(dead) >= sizeof(corMqttConf.deadLetter))) {
        corModuleError(m, corConfGet(conf, "dead_letter"), "dead_letter: %s",
                       bad != NULL ? bad : "over 255 bytes");
        return -1;
    }
    snprintf(corMqttConf.deadLetter, sizeof(corMqttConf.deadLetter), "%s",
             dead);
    return 0;
}

/* The settings, into corMqttConf. Returns 0, or -1 after an error. */
static int
confRead(CorModule* m, const CorConf* conf)
{
    CorConfErrors* errors = corModuleErrors(m);
    const char* id = corConfString(conf, "client_id", "cor", errors);
    const char* version = corConfString(conf, "version", "5", errors);

    if (strlen(id) == 0 || strlen(id) >= sizeof(corMqttConf.clientId)) {
        corModuleError(m, corConfGet(conf, "client_id"),
                       "client_id: 1 to "
                       "%zu bytes",
                       sizeof(corMqttConf.clientId) - 1);
        return -1;
    }
    snprintf(corMqttConf.clientId, sizeof(corMqttConf.clientId), "%s", id);
    corMqttConf.keepAliveS = (unsigned)(corConfDurationMs(conf, "keepalive",
                                                          60000, 0, 65535000,
                                                          errors)
                                        / 1000);
    corMqttConf.maxInFlight = (unsigned)corConfInt(conf, "max_in_flight", 64, 1,
                                                   65535, errors);
    corMqttConf.connectTimeoutMs = corConfDurationMs(conf, "connect_timeout",
                                                     10000, 1, 600000, errors);
    corMqttConf.reconnectMinMs = corConfDurationMs(conf, "reconnect_min", 100,
                                                   1, 3600000, errors);
    corMqttConf.reconnectMaxMs = corConfDurationMs(conf, "reconnect_max", 5000,
                                                   1, 3600000, errors);
    corMqttConf.sessionExpiryS = (uint32_t)(corConfDurationMs(conf,
                                                              "session_expiry",
                                                              86400000, 1000,
                                                              4294967295000ull,
                                                              errors)
                                            / 1000);
    corMqttConf.qos = (unsigned)corConfInt(conf, "qos", 1, 0, 2, errors);
    if (subscriberConfRead(m, conf) != 0) {
        return -1;
    }
    if (strcmp(version, "3.1.1") == 0) {
        corMqttConf.version = COR_MQTT_V311;
    } else if (strcmp(version, "5") == 0 || strcmp(version, "5.0") == 0) {
        corMqttConf.version = COR_MQTT_V5;
    } else {
        corModuleError(m, corConfGet(conf, "version"),
                       "version: \"3.1.1\" "
                       "or \"5\", not '%s'",
                       version);
        return -1;
    }
    return 0;
}

/* A listener of the protocol is a mistake: it only drains. */
static int
subscriptionsStart(CorModule* m, CorEvLoop* loop, unsigned loopIndex,
                   CorListener* const* listeners, unsigned count)
{
    (void)m;
    (void)loop;
    (void)listeners;
    (void)count;
    if (loopIndex == 0) {
        corLog(COR_LOG_ERROR,
               "listen: the protocol mqtt-subscriptions "
               "takes no listener (it hands sessions over at a reload)");
    }
    return -1;
}

static void
subscriptionsDrain(CorModule* m, CorEvLoop* loop, unsigned loopIndex)
{
    (void)m;
    (void)loop;
    (void)loopIndex;
    corMqttClientDrain();
}

/* The drain is over once every subscriber let go of its session (all of
 * them are loop 0's). */
static unsigned
subscriptionsOpen(CorModule* m, unsigned loopIndex)
{
    (void)m;
    return loopIndex == 0 ? corMqttSubscribersOpen() : 0;
}

static int
mqttInit(CorModule* m, const CorConf* conf)
{
    const CorConf* subs = corConfSeq(conf, "subscriptions", corModuleErrors(m));

    if (confRead(m, conf) != 0 || corMqttSubscriptionsRead(m, subs) != 0
        || corSchemeAdd(m, &(CorScheme){ .scheme = "mqtt",
                                         .send = corMqttNotifySend,
                                         .check = corMqttNotifyCheck })
               != 0
        || corSchemeAdd(m, &(CorScheme){ .scheme = "mqtts",
                                         .send = corMqttNotifySend,
                                         .check = corMqttNotifyCheck })
               != 0
        || corMetricsSourceAdd(m, corMqttStatsEmit, NULL) != 0
        || corProtocolAdd(m, &(CorProtocol){ .name = "mqtt-subscriptions",
                                             .start = subscriptionsStart,
                                             .drain = subscriptionsDrain,
                                             .connections = subscriptionsOpen })
               != 0) {
        return -1;
    }
    return 0;
}

/* Loop 0 makes the subscriptions: one connection per broker for the
 * process (each loop's would get every message once more). */
static int
mqttLoopInit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    char why[256];

    (void)loop;
    for (unsigned i = 0; index == 0 && i < corMqttGroupCount; i++) {
        if (corMqttLinkSubscriber(&corMqttGroups[i], why, sizeof(why)) != 0) {
            corModuleError(m, NULL, "cannot subscribe on %s: %s",
                           corMqttGroups[i].url, why);
            return -1;
        }
    }
    return 0;
}

static void
mqttLoopExit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    (void)loop;
    if (index == 0) { /* the subscriptions' loop */
        corMqttInboundsDrop();
        corMqttSessionsByeAtExit();
    }
    corMqttClientLoopExit();
    if (index == 0) {
        corMqttSessionsEnd();
    }
}

static void
mqttExit(CorModule* m)
{
    (void)m;
    corMqttServedClear();
    corMqttSubscriptionsFree();
    corMqttStatsFree();
}

COR_MODULE(mqtt, .init = mqttInit, .loopInit = mqttLoopInit,
           .loopExit = mqttLoopExit, .exit = mqttExit);
