/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Counters per broker, in /metrics beside the core's counters per scheme
 * (a source of lines the module registers, corMetricsSourceAdd):
 *
 *     cor_mqtt_sent_total{broker="mqtt://127.0.0.1:1883"} 12
 *
 * A broker is its scheme, host and port. Its counters are made at its
 * first message and live until the module's exit, found under a lock that
 * is never held across a wait; they are atomics, since every loop and
 * thread counts.
 */
#include "corMqttClientInt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct CorMqttStats {
    struct CorMqttStats* next;
    bool tls; /* the key: scheme, host and port */
    unsigned port;
    char host[sizeof(((CorMqttBroker*)0)->host)];
    char name[300]; /* the key as /metrics shows it */
    atomic_ulong sent;
    atomic_ulong failed;
    atomic_uint inFlight;
    atomic_ulong received;
    atomic_ulong unacknowledged;
    atomic_ulong refused;
};

static pthread_mutex_t statsLock = PTHREAD_MUTEX_INITIALIZER;
static CorMqttStats* statsList;

/* Found by the key's fields, not by the name: formatting the name was a
 * tenth of a notification's cost, and it is the same key. */
CorMqttStats*
corMqttStatsFor(const CorMqttBroker* b)
{
    CorMqttStats* s;

    pthread_mutex_lock(&statsLock);
    for (s = statsList; s != NULL; s = s->next) {
        if (s->port == b->port && s->tls == b->tls
            && strcmp(s->host, b->host) == 0) {
            break;
        }
    }
    if (s == NULL && (s = calloc(1, sizeof(*s))) != NULL) {
        s->tls = b->tls;
        s->port = b->port;
        memcpy(s->host, b->host, sizeof(s->host));
        corMqttBrokerName(b, s->name, sizeof(s->name));
        s->next = statsList;
        statsList = s;
    }
    pthread_mutex_unlock(&statsLock);
    return s;
}

void
corMqttStatsCount(CorMqttStats* s, CorMqttCount which)
{
    if (s == NULL) {
        return; /* no memory for them: not counted */
    }
    switch (which) {
    case COR_MQTT_COUNT_START:
        atomic_fetch_add(&s->inFlight, 1);
        break;
    case COR_MQTT_COUNT_SENT:
    case COR_MQTT_COUNT_FAILED:
        atomic_fetch_sub(&s->inFlight, 1);
        atomic_fetch_add(which == COR_MQTT_COUNT_SENT ? &s->sent : &s->failed,
                         1);
        break;
    case COR_MQTT_COUNT_RECEIVED:
        atomic_fetch_add(&s->received, 1);
        break;
    case COR_MQTT_COUNT_UNACKNOWLEDGED:
        atomic_fetch_add(&s->unacknowledged, 1);
        break;
    case COR_MQTT_COUNT_REFUSED:
        atomic_fetch_add(&s->refused, 1);
        break;
    }
}

/* The families of /metrics, each a field of every broker's counters. */
static const struct {
    const char* name;
    const char* type;
    const char* help;
    size_t offset;
} families[] = {
    { "cor_mqtt_sent_total", "counter",
      "Notifications the broker acknowledged.", offsetof(CorMqttStats, sent) },
    { "cor_mqtt_failed_total", "counter",
      "Notifications refused, timed out or cancelled.",
      offsetof(CorMqttStats, failed) },
    { "cor_mqtt_in_flight", "gauge", "Notifications being sent now.",
      offsetof(CorMqttStats, inFlight) },
    { "cor_mqtt_received_total", "counter", "Messages of subscriptions served.",
      offsetof(CorMqttStats, received) },
    { "cor_mqtt_unacknowledged_total", "counter",
      "Messages of subscriptions answered 5xx or cut short: not "
      "acknowledged.",
      offsetof(CorMqttStats, unacknowledged) },
    { "cor_mqtt_refused_total", "counter",
      "Messages of subscriptions past limits.body_bytes (or the head's "
      "limits): acknowledged, never handled.",
      offsetof(CorMqttStats, refused) },
};

void
corMqttStatsEmit(CorMetricsOut* out, void* arg)
{
    (void)arg;
    pthread_mutex_lock(&statsLock);
    for (size_t k = 0; k < sizeof(families) / sizeof(families[0]); k++) {
        const char* name = families[k].name;

        corMetricsPrintf(out, "# HELP %s %s\n# TYPE %s %s\n", name,
                         families[k].help, name, families[k].type);
        for (CorMqttStats* s = statsList; s != NULL; s = s->next) {
            const void* field = (const char*)s + families[k].offset;
            unsigned long v = families[k].offset
                                      == offsetof(CorMqttStats, inFlight)
                                  ? atomic_load((const atomic_uint*)field)
                                  : atomic_load((const atomic_ulong*)field);

            corMetricsPrintf(out, "%s{broker=\"%s\"} %lu\n", name, s->name, v);
        }
    }
    pthread_mutex_unlock(&statsLock);
}

void
corMqttStatsFree(void)
{
    pthread_mutex_lock(&statsLock);
    while (statsList != NULL) {
        CorMqttStats* s = statsList;

        statsList = s->next;
        free(s);
    }
    pthread_mutex_unlock(&statsLock);
}
