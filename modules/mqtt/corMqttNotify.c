/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Notifications to MQTT brokers: the mqtt and mqtts schemes' sender.
 *
 *     mqtt[s]://[user[:password]@]host[:port]/topic[?qos=Q&retain=R&version=V]
 *
 * The path, percent-decoded, is the topic (a topic name: no wildcard);
 * the user and the password, percent-decoded too, go in CONNECT. QoS (0,
 * 1, 2), retain (true, false) and the protocol version (3.1.1 or 5) come
 * from the module's defaults, then the URL's query, then the headers
 * MQTT-QoS, MQTT-Retain and MQTT-Version, which are not sent. In 5.0 the
 * Content-Type goes as the Content Type property and every other header
 * as a user property; 3.1.1 has nowhere to put them. The body is the
 * payload. The send ends when the broker acknowledged the message (QoS 1
 * PUBACK, QoS 2 PUBCOMP; QoS 0 when written).
 */
#include "corMqttClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A topic from a URL, at most. */
#define TOPIC_MAX 4096

static int
hexValue(char ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* Percent-decode len bytes at s into out (cap bytes, NUL-terminated).
 * Returns the length, or -1 (a bad escape, a NUL, too long). */
static int
percentDecode(const char* s, size_t len, char* out, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        int v = (unsigned char)s[i];

        if (s[i] == '%') {
            if (i + 2 >= len || hexValue(s[i + 1]) < 0
                || hexValue(s[i + 2]) < 0) {
                return -1;
            }
            v = hexValue(s[i + 1]) * 16 + hexValue(s[i + 2]);
            i += 2;
        }
        if (v == 0 || n + 1 >= cap) {
            return -1;
        }
        out[n++] = (char)v;
    }
    out[n] = '\0';
    return (int)n;
}

/* "3.1.1"/"4" or "5"/"5.0": the protocol level; 0 for anything else. */
static unsigned
versionParse(const char* s, size_t len)
{
    if ((len == 5 && memcmp(s, "3.1.1", 5) == 0) || (len == 1 && *s == '4')) {
        return COR_MQTT_V311;
    }
    if ((len == 1 && *s == '5') || (len == 3 && memcmp(s, "5.0", 3) == 0)) {
        return COR_MQTT_V5;
    }
    return 0;
}

int
corMqttUrlBroker(const char* url, CorMqttBroker* b, CorUrl* u, char* why,
                 size_t whyLen)
{
    int rc = corUrlParse(url, u, why, whyLen);

    if (rc == 0 && strchr(url, '#') != NULL) {
        /* The URL's fragment to corUrlParse, which drops it: "alarms/#"
         * would go to "alarms/". A topic name holds no wildcard. */
        snprintf(why, whyLen,
                 "a '#' in the URL: a topic name holds no "
                 "wildcard (and a URL no fragment)");
        rc = -EINVAL;
    }
    if (rc != 0) {
        return rc;
    }
    memset(b, 0, sizeof(*b));
    if (strcmp(u->scheme, "mqtt") != 0 && strcmp(u->scheme, "mqtts") != 0) {
        snprintf(why, whyLen, "not an mqtt:// or mqtts:// URL");
        return -EINVAL;
    }
    b->tls = strcmp(u->scheme, "mqtts") == 0;
    b->port = u->port != 0 ? u->port : b->tls ? COR_MQTTS_PORT : COR_MQTT_PORT;
    /* The same size, and u's is terminated: a copy, not a format (which
     * was a twentieth of a notification, twice: check and send). */
    _Static_assert(sizeof(b->host) == sizeof(u->host), "host sizes");
    memcpy(b->host, u->host, sizeof(b->host));
    b->version = corMqttConf.version;
    b->hasUser = u->user != NULL;
    b->hasPassword = u->password != NULL;
    if ((b->hasUser
         && percentDecode(u->user, u->userLen, b->user, sizeof(b->user)) < 0)
        || (b->hasPassword
            && percentDecode(u->password, u->passwordLen, b->password,
                             sizeof(b->password))
                   < 0)) {
        snprintf(why, whyLen,
                 "a bad user name or password (a bad %% escape "
                 "or over %d bytes)",
                 COR_MQTT_CRED_MAX - 1);
        return -EINVAL;
    }
    return 0;
}

/* One option (qos, retain, version) set to value. 0, or -EINVAL. */
static int
optionSet(CorMqttMessage* msg, CorMqttBroker* b, const char* name,
          size_t nameLen, const char* value, size_t valueLen)
{
    if (nameLen == 3 && strncasecmp(name, "qos", 3) == 0) {
        if (valueLen != 1 || value[0] < '0' || value[0] > '2') {
            return -EINVAL;
        }
        msg->qos = (unsigned)(value[0] - '0');
    } else if (nameLen == 6 && strncasecmp(name, "retain", 6) == 0) {
        if (valueLen == 4 && memcmp(value, "true", 4) == 0) {
            msg->retain = true;
        } else if (valueLen == 5 && memcmp(value, "false", 5) == 0) {
            msg->retain = false;
        } else {
            return -EINVAL;
        }
    } else if (nameLen == 7 && strncasecmp(name, "version", 7) == 0) {
        b->version = versionParse(value, valueLen);
        return b->version != 0 ? 0 : -EINVAL;
    } else {
        return -EINVAL;
    }
    return 0;
}

/* The options of the query q (len bytes, after '?'). */
static int
queryTake(CorMqttMessage* msg, CorMqttBroker* b, const char* q, size_t len,
          char* why, size_t whyLen)
{
    const char* end = q + len;

    while (q < end) {
        const char* amp = memchr(q, '&', (size_t)(end - q));
        const char* stop = amp != NULL ? amp : end;
        const char* eq = memchr(q, '=', (size_t)(stop - q));

        if (eq == NULL
            || optionSet(msg, b, q, (size_t)(eq - q), eq + 1,
                         (size_t)(stop - eq - 1))
                   != 0) {
            snprintf(why, whyLen,
                     "a bad option '%.*s' (qos=0|1|2, "
                     "retain=true|false, version=3.1.1|5)",
                     (int)(stop - q), q);
            return -EINVAL;
        }
        q = stop + (amp != NULL);
    }
    return 0;
}

/* The headers: the MQTT-* options taken, the others 5.0 user properties
 * (users has room for n->headerCount). */
static int
headersTake(const CorNotification* n, CorMqttMessage* msg, CorMqttBroker* b,
            CorMqttProps* props, CorMqttUserProp* users, char* why,
            size_t whyLen)
{
    for (unsigned i = 0; i < n->headerCount; i++) {
        const CorHeader* h = &n->headers[i];

        if (h->nameLen > 5 && strncasecmp(h->name, "MQTT-", 5) == 0) {
            if (optionSet(msg, b, h->name + 5, h->nameLen - 5, h->value,
                          h->valueLen)
                != 0) {
                snprintf(why, whyLen, "a bad header %.*s: %.*s",
                         (int)h->nameLen, h->name, (int)h->valueLen, h->value);
                return -EINVAL;
            }
        } else {
            users[props->userCount++] = (CorMqttUserProp){
                { h->name, h->nameLen }, { h->value, h->valueLen }
            };
        }
    }
    props->user = props->userCount > 0 ? users : NULL;
    if (n->contentType != NULL) {
        props->contentType = (CorMqttStr){ n->contentType,
                                           strlen(n->contentType) };
        corMqttPropSet(props, COR_MQTT_PROP_CONTENT_TYPE);
    }
    return 0;
}

/* The topic of u's path: in the URL itself, or decoded into *copy (the
 * caller frees it) when it has escapes. NULL with why. */
static const char*
topicTake(const CorUrl* u, size_t pathLen, int* len, char** copy, char* why,
          size_t whyLen)
{
    /* No path before a query ("mqtt://h?qos=1"): no topic, as for "/". */
    const char* topic = u->target + (pathLen > 0);
    const char* bad;

    *len = pathLen > 0 ? (int)pathLen - 1 : 0;
    if (memchr(topic, '%', (size_t)*len) != NULL) {
        *copy = malloc(TOPIC_MAX);
        *len = *copy != NULL
                   ? percentDecode(topic, (size_t)*len, *copy, TOPIC_MAX)
                   : -1;
        topic = *copy;
    }
    bad = *len < 0 ? "a bad escape, or too long"
                   : corMqttTopicNameCheck(topic, (size_t)*len);
    if (bad != NULL) {
        snprintf(why, whyLen, "a bad topic: %s", bad);
        return NULL;
    }
    return topic;
}

int
corMqttNotifyCheck(const char* url, char* why, size_t whyLen)
{
    CorMqttBroker b;
    CorMqttMessage scratch = { .broker = &b };
    CorUrl u;
    size_t pathLen;
    int len;
    char* copy = NULL;
    int rc = corMqttUrlBroker(url, &b, &u, why, whyLen);

    if (rc != 0) {
        return rc;
    }
    pathLen = strcspn(u.target, "?");
    if (topicTake(&u, pathLen, &len, &copy, why, whyLen) == NULL
        || (pathLen < u.targetLen
            && queryTake(&scratch, &b, u.target + pathLen + 1,
                         u.targetLen - pathLen - 1, why, whyLen)
                   != 0)) {
        rc = -EINVAL;
    }
    free(copy);
    return rc;
}

int
corMqttNotifySend(CorModule* m, const CorNotification* n, char* why,
                  size_t whyLen)
{
    CorMqttUserProp users[COR_NOTIFY_HEADERS_MAX];
    CorMqttProps props = { 0 };
    CorMqttBroker b;
    CorUrl u;
    size_t pathLen;
    int len;
    char* copy = NULL;
    const char* topic;
    CorMqttMessage msg = { .broker = &b,
                           .qos = corMqttConf.qos,
                           .props = &props,
                           .payload = { n->body, n->bodyLen },
                           .deadlineMs = corEvClockMs()
                                         + (uint64_t)n->timeoutMs };
    int rc = corMqttUrlBroker(n->url, &b, &u, why, whyLen);

    (void)m;
    if (rc != 0) {
        return rc;
    }
    pathLen = strcspn(u.target, "?");
    topic = topicTake(&u, pathLen, &len, &copy, why, whyLen);
    msg.topic = (CorMqttStr){ topic, (size_t)len };
    if (topic == NULL
        || (pathLen < u.targetLen
            && queryTake(&msg, &b, u.target + pathLen + 1,
                         u.targetLen - pathLen - 1, why, whyLen)
                   != 0)
        || headersTake(n, &msg, &b, &props, users, why, whyLen) != 0) {
        rc = -EINVAL;
    } else {
        CorMqttStats* stats = corMqttStatsFor(&b);

        corMqttStatsCount(stats, COR_MQTT_COUNT_START);
        rc = corRestMayPark() ? corMqttPublishOnLoop(&msg, why, whyLen)
                              : corMqttPublishOnThread(&msg, why, whyLen);
        corMqttStatsCount(stats, rc == 0 ? COR_MQTT_COUNT_SENT
                                         : COR_MQTT_COUNT_FAILED);
    }
    free(copy);
    return rc;
}
