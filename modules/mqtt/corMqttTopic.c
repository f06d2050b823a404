/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MQTT strings and topics: the UTF-8 rule every string field follows, the
 * topic names a PUBLISH carries, the topic filters a SUBSCRIBE carries (and
 * `cor -t` checks in a configuration), and the matching of one against the
 * other. A level is what lies between two '/' (possibly nothing).
 */
#include "corMqttInt.h"

#define SHARE_PREFIX "$share/"
#define SHARE_PREFIX_LEN (sizeof(SHARE_PREFIX) - 1)

/*
 * The length of the well-formed UTF-8 sequence at s[0..len) (len > 0),
 * or 0 when it is not one. The second byte's range does the work that
 * catches overlongs, surrogates and code points past U+10FFFF
 * (RFC 3629 section 4), so no code point is assembled.
 */
static size_t
utf8Sequence(const uint8_t* s, size_t len)
{
    uint8_t c = s[0];
    size_t n;
    uint8_t lo = 0x80;
    uint8_t hi = 0xBF;

    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (len < n || s[1] < lo || s[1] > hi) {
        return 0;
    }
    for (size_t k = 2; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            return 0;
        }
    }
    return n;
}

bool
corMqttUtf8Valid(const char* s, size_t len)
{
    const uint8_t* u = (const uint8_t*)s;
    size_t i = 0;

    while (i < len) {
        size_t n;

        /* MQTT-1.5.4-2: U+0000 is refused, though UTF-8 allows it. */
        if (u[i] == 0) {
            return false;
        }
        n = utf8Sequence(u + i, len - i);
        if (n == 0) {
            return false;
        }
        i += n;
    }
    return true;
}

const char*
corMqttTopicNameCheck(const char* s, size_t len)
{
    if (len == 0) {
        return "empty topic name";
    }
    if (len > COR_MQTT_STR_MAX) {
        return "topic name longer than 65535 bytes";
    }
    if (memchr(s, '+', len) != NULL || memchr(s, '#', len) != NULL) {
        return "wildcard in a topic name";
    }
    if (!corMqttUtf8Valid(s, len)) {
        return "topic name not UTF-8";
    }
    return NULL;
}

/* The filter's rules on wildcards, its UTF-8 aside. */
static const char*
filterWildcards(const char* s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        bool levelStart = i == 0 || s[i - 1] == '/';
        bool levelEnd = i + 1 == len || s[i + 1] == '/';

        if (s[i] == '+' && (!levelStart || !levelEnd)) {
            return "'+' not a whole level of the topic filter";
        }
        if (s[i] == '#' && (!levelStart || i + 1 != len)) {
            return "'#' not the whole last level of the topic filter";
        }
    }
    return NULL;
}

const char*
corMqttTopicFilterCheck(const char* s, size_t len)
{
    const char* slash;
    size_t nameLen;

    if (len == 0) {
        return "empty topic filter";
    }
    if (len > COR_MQTT_STR_MAX) {
        return "topic filter longer than 65535 bytes";
    }
    if (!corMqttUtf8Valid(s, len)) {
        return "topic filter not UTF-8";
    }
    if (len < SHARE_PREFIX_LEN
        || memcmp(s, SHARE_PREFIX, SHARE_PREFIX_LEN) != 0) {
        return filterWildcards(s, len);
    }
    /* A shared subscription (5.0 section 4.8.2). */
    s += SHARE_PREFIX_LEN;
    len -= SHARE_PREFIX_LEN;
    slash = memchr(s, '/', len);
    nameLen = slash != NULL ? (size_t)(slash - s) : len;
    if (nameLen == 0 || memchr(s, '+', nameLen) != NULL
        || memchr(s, '#', nameLen) != NULL) {
        return "shared subscription's name empty or with a wildcard";
    }
    if (slash == NULL || nameLen + 1 == len) {
        return "shared subscription without a topic filter";
    }
    return filterWildcards(slash + 1, len - nameLen - 1);
}

/* The length of the level at s[0..len): up to the next '/' or the end. */
static size_t
levelLen(const char* s, size_t len)
{
    const char* slash = memchr(s, '/', len);

    return slash != NULL ? (size_t)(slash - s) : len;
}

/* A shared subscription's filter, "$share/NAME/FILTER", as its FILTER;
 * false when there is none. */
static bool
shareStrip(const char** filter, size_t* filterLen)
{
    size_t name;

    if (*filterLen < SHARE_PREFIX_LEN
        || memcmp(*filter, SHARE_PREFIX, SHARE_PREFIX_LEN) != 0) {
        return true;
    }
    name = SHARE_PREFIX_LEN
           + levelLen(*filter + SHARE_PREFIX_LEN,
                      *filterLen - SHARE_PREFIX_LEN);
    if (name >= *filterLen) {
        return false;
    }
    *filter += name + 1;
    *filterLen -= name + 1;
    return true;
}

bool
corMqttTopicMatch(const char* filter, size_t filterLen, const char* topic,
                  size_t topicLen)
{
    size_t f = 0;
    size_t t = 0;

    if (!shareStrip(&filter, &filterLen)) {
        return false;
    }
    /* MQTT-4.7.2-1: "$SYS/..." is not what "#" or "+/..." asks for. */
    if (topicLen > 0 && topic[0] == '$' && filterLen > 0
        && (filter[0] == '#' || filter[0] == '+')) {
        return false;
    }
    for (;;) {
        size_t fl = levelLen(filter + f, filterLen - f);
        size_t tl = levelLen(topic + t, topicLen - t);

        if (fl == 1 && filter[f] == '#') {
            return true;
        }
        if (!(fl == 1 && filter[f] == '+')
            && (fl != tl || memcmp(filter + f, topic + t, fl) != 0)) {
            return false;
        }
        f += fl;
        t += tl;
        if (f == filterLen || t == topicLen) {
            break;
        }
        f++;
        t++;
    }
    if (f == filterLen && t == topicLen) {
        return true;
    }
    /* "sport/#" matches "sport": the topic ends where "/#" remains. */
    return t == topicLen && filterLen - f == 2 && filter[f + 1] == '#';
}
