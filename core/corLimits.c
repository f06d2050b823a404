/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The limits of a request whatever brought it (HTTP/1.1, cor://, an MQTT
 * message), in one place: limits.header_bytes, header_count, body_bytes
 * and request_timeout, each with the status HTTP refuses a request past it
 * with (414, 431, 413, 408); a route's own `limits:` (body_bytes,
 * body_timeout) replace the top level's for the requests it takes, once a
 * protocol asked for them before the body (corRequestLimits). A protocol asks
 * as the request's head and then its body come (corLimitsHead, corLimitsBody),
 * and corRequestServe asks again before any handler runs, so one configuration
 * bounds every listener alike. The head is measured as HTTP/1.1 would write it,
 * so that a request refused over one protocol is refused over every other.
 *
 * A refusal is said once, the same way for every protocol (a log line
 * "PROTOCOL: WHO: WHAT is past the limits (LIMIT): refused STATUS"), and
 * counted once, in cor_requests_refused_total{protocol, status}; each
 * protocol keeps only how it says "no" on its wire.
 */
#include "corCoreInt.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* "METHOD SP target SP HTTP/1.1 CRLF" beside the method and target. */
#define REQUEST_LINE_EXTRA 12
/* ": " and CRLF around a field's name and value. */
#define FIELD_EXTRA 4
/* The protocols counted apart; a further one is counted as the last. */
#define PROTOCOLS_MAX 8
#define PROTOCOL_NAME_MAX 16

/* The statuses of the limits, in the metric's order, with the answer a
 * refusal carries. */
static const struct {
    int status;
    const char* text;
} statuses[] = {
    { 408, "408 Request Timeout\n" },
    { 413, "413 Content Too Large\n" },
    { 414, "414 URI Too Long\n" },
    { 431, "431 Request Header Fields Too Large\n" },
};

#define STATUS_COUNT (sizeof(statuses) / sizeof(statuses[0]))

/* The refusals, by protocol (slots taken under the lock, never given
 * back: a generation serves a handful of protocols). */
static struct {
    char name[PROTOCOL_NAME_MAX];
    atomic_ulong refused[STATUS_COUNT];
} protocols[PROTOCOLS_MAX];
static atomic_uint protocolCount;
static pthread_mutex_t protocolLock = PTHREAD_MUTEX_INITIALIZER;

/* The head's verdict under limits (one corLimits() for a whole check).
 * Inline: corRequestServe asks it of every request. */
static inline int
headStatus(const CorRequest* r, const CorLimits* limits)
{
    size_t target = r->pathLen + (r->query != NULL ? 1 + r->queryLen : 0);
    size_t bytes = r->methodLen + target + REQUEST_LINE_EXTRA;

    if (bytes > limits->headerBytes) {
        return 414;
    }
    if (r->headerCount > limits->headerCount) {
        return 431;
    }
    for (unsigned i = 0; i < r->headerCount; i++) {
        bytes += r->headers[i].nameLen + r->headers[i].valueLen + FIELD_EXTRA;
    }
    bytes += 2; /* the empty line */
    return bytes > limits->headerBytes ? 431 : 0;
}

int
corLimitsHead(const CorRequest* r)
{
    return headStatus(r, corLimits());
}

const CorLimits*
corLimitsOf(const CorRequest* r)
{
    return r != NULL && r->limits != NULL ? r->limits : corLimits();
}

int
corLimitsBody(const CorRequest* r, uint64_t bytes)
{
    return bytes > corLimitsOf(r)->bodyBytes ? 413 : 0;
}

int
corLimitsRequest(const CorRequest* r)
{
    int status = headStatus(r, corLimits());

    return status != 0 || r->bodyLen <= corLimitsOf(r)->bodyBytes ? status
                                                                  : 413;
}

static int
statusIndex(int status)
{
    for (unsigned k = 0; k < STATUS_COUNT; k++) {
        if (statuses[k].status == status) {
            return (int)k;
        }
    }
    return -1;
}

const char*
corLimitsText(int status)
{
    int k = statusIndex(status);

    return k >= 0 ? statuses[k].text : NULL;
}

/* The slot of protocol, taken when it has none. */
static unsigned
protocolSlot(const char* protocol)
{
    unsigned n = atomic_load(&protocolCount);
    unsigned i;

    for (i = 0; i < n; i++) {
        if (strcmp(protocols[i].name, protocol) == 0) {
            return i;
        }
    }
    pthread_mutex_lock(&protocolLock);
    n = atomic_load(&protocolCount);
    for (i = 0; i < n && strcmp(protocols[i].name, protocol) != 0; i++) {
    }
    if (i == n && n < PROTOCOLS_MAX) {
        snprintf(protocols[i].name, sizeof(protocols[i].name), "%s", protocol);
        atomic_store(&protocolCount, n + 1);
    }
    pthread_mutex_unlock(&protocolLock);
    return i < PROTOCOLS_MAX ? i : PROTOCOLS_MAX - 1;
}

/* The limit a status stands for, with its value, for the log: a route's
 * own said so. */
static void
limitSay(const CorLimits* l, int status, char* out, size_t size)
{
    const char* whose = l != corLimits() ? "its route's " : "";

    switch (status) {
    case 408:
        snprintf(out, size,
                 "%slimits.request_timeout %llu ms, body_timeout "
                 "%llu ms",
                 whose, (unsigned long long)l->requestTimeoutMs,
                 (unsigned long long)l->bodyTimeoutMs);
        break;
    case 413:
        snprintf(out, size, "%slimits.body_bytes %zu", whose, l->bodyBytes);
        break;
    case 414:
        snprintf(out, size, "limits.header_bytes %zu", l->headerBytes);
        break;
    default:
        snprintf(out, size, "limits.header_bytes %zu, header_count %u",
                 l->headerBytes, l->headerCount);
        break;
    }
}

void
corLimitsRefusedFor(const CorRequest* r, const char* protocol, const char* who,
                    const char* what, int status)
{
    int k = statusIndex(status);
    char limit[112];

    if (k < 0) {
        return; /* not a limit's status: the caller's to say */
    }
    atomic_fetch_add(&protocols[protocolSlot(protocol)].refused[k], 1);
    limitSay(corLimitsOf(r), status, limit, sizeof(limit));
    corLog(COR_LOG_INFO, "%s: %s: %s is past the limits (%s): refused %d",
           protocol, who != NULL ? who : "-", what, limit, status);
}

void
corLimitsRefused(const char* protocol, const char* who, const char* what,
                 int status)
{
    corLimitsRefusedFor(NULL, protocol, who, what, status);
}

void
corLimitsEmit(CorMetricsOut* out)
{
    unsigned n = atomic_load(&protocolCount);

    corMetricsPrintf(out, "# HELP cor_requests_refused_total Requests "
                          "refused past the limits before a handler ran, by "
                          "protocol and status.\n# TYPE "
                          "cor_requests_refused_total counter\n");
    for (unsigned i = 0; i < n; i++) {
        for (unsigned k = 0; k < STATUS_COUNT; k++) {
            corMetricsPrintf(out,
                             "cor_requests_refused_total{protocol="
                             "\"%s\",status=\"%d\"} %lu\n",
                             protocols[i].name, statuses[k].status,
                             atomic_load(&protocols[i].refused[k]));
        }
    }
}

/* The protocol's name as its version says it: "HTTP/1.1" is http. */
static void
protocolOf(const char* version, char* out, size_t size)
{
    size_t n = 0;

    for (; version != NULL && version[n] != '\0' && version[n] != '/'
           && n + 1 < size;
         n++) {
        out[n] = (char)(version[n] | 0x20);
    }
    out[n] = '\0';
    if (n == 0) {
        snprintf(out, size, "unknown");
    }
}

int
corLimitsAnswer(CorRequest* r, int status)
{
    char protocol[PROTOCOL_NAME_MAX];
    char what[160];
    const char* text = corLimitsText(status);

    if (text == NULL) {
        return 0;
    }
    protocolOf(r->version, protocol, sizeof(protocol));
    /* A path past header_bytes is shown in part: the line says why. */
    snprintf(what, sizeof(what),
             "%.*s %.*s%s (%u headers, %zu body "
             "bytes)",
             (int)(r->methodLen < 16 ? r->methodLen : 16), r->method,
             (int)(r->pathLen < 64 ? r->pathLen : 64), r->path,
             r->pathLen > 64 ? "..." : "", r->headerCount, r->bodyLen);
    corLimitsRefusedFor(r, protocol, r->remote, what, status);
    corRespondSet(r, status, "text/plain", text, strlen(text));
    return status;
}
