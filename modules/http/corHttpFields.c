/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What HTTP/2 and HTTP/3 share of a request's and an answer's fields:
 * both get a request's fields one by one with their lengths (kept as
 * they came, the request built from them once whole), both carry the
 * target in a :path pseudo-header, decoded as HTTP/1
 * decodes a request line's (the same routes match the same paths), both
 * send field names in lowercase and forbid HTTP/1's connection-specific
 * fields (RFC 9113 8.2.2, RFC 9114 4.2), and both send no body where
 * the status or a HEAD allows none; both say a stream's refusal at a
 * limit the same way.
 */
#include "corHttpInt.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int
corHttpTargetSet(CorRequest* r, char* room, const char* path, size_t len)
{
    CorHttpTarget t;
    char* decoded;

    memcpy(room, path, len + 1);
    decoded = memcpy(room + len + 1, path, len + 1);
    if (len == 0 || path[0] != '/'
        || corHttpTargetDecode(decoded, len, &t) != 0) {
        return -1;
    }
    r->path = t.path;
    r->pathLen = t.pathLen;
    r->query = t.query;
    r->queryLen = t.queryLen;
    r->target = room;
    r->targetLen = len;
    r->rawPath = room;
    r->rawPathLen = strcspn(room, "?");
    return 0;
}

/* Whether the field named name (its bytes in raw) is the one named want
 * (a literal: its strlen folds). */
static inline bool
fieldIs(const CorHttpField* field, const char* name, const char* want)
{
    size_t len = strlen(want);

    return field->nameLen == len && memcmp(name, want, len) == 0;
}

int
corHttpRequestFields(CorRequest* r, CorHeader* headers, const CorBuf* raw,
                     const CorBuf* places, const char** path, size_t* pathLen)
{
    const CorHttpField* fields = (const CorHttpField*)(void*)places->data;
    size_t count = corHttpFieldCount(places);
    const char* bytes = (const char*)raw->data;
    const char* authority = NULL;
    size_t authorityLen = 0;
    bool host = false;

    *path = NULL;
    for (size_t i = 0; i < count; i++) {
        const char* name = bytes + fields[i].nameOff;
        const char* value = bytes + fields[i].valueOff;

        /* By length first: a request's fields are told apart without a
         * strcmp of each against every name (11 a request were 250
         * instructions of it). */
        if (name[0] != ':') {
            host |= fieldIs(&fields[i], name, "host");
            headers[r->headerCount++] = (CorHeader){
                .name = name,
                .nameLen = fields[i].nameLen,
                .value = value,
                .valueLen = fields[i].valueLen,
            };
        } else if (fieldIs(&fields[i], name, ":method")) {
            r->method = value;
            r->methodLen = fields[i].valueLen;
        } else if (fieldIs(&fields[i], name, ":path")) {
            *path = value;
            *pathLen = fields[i].valueLen;
        } else if (fieldIs(&fields[i], name, ":authority")) {
            authority = value;
            authorityLen = fields[i].valueLen;
        }
    }
    if (!host && authority != NULL) {
        headers[r->headerCount++] = (CorHeader){ .name = "host",
                                                 .nameLen = 4,
                                                 .value = authority,
                                                 .valueLen = authorityLen };
    }
    r->headers = headers;
    r->head = r->methodLen == 4 && memcmp(r->method, "HEAD", 4) == 0;
    if (r->method == NULL || *path == NULL) {
        if (r->method == NULL) {
            r->method = "-";
            r->methodLen = 1;
        }
        return 400;
    }
    return 0;
}

uint64_t
corHttpStreamDue(const CorRequest* r, uint64_t startMs, uint64_t bodyMs,
                 uint64_t now, const char* protocol, const char* peer)
{
    const CorLimits* l = r->limits != NULL ? r->limits : corLimits();
    uint64_t at = startMs + l->requestTimeoutMs;

    if (bodyMs != 0 && bodyMs + l->bodyTimeoutMs < at) {
        at = bodyMs + l->bodyTimeoutMs;
    }
    if (at > now) {
        return at;
    }
    corLimitsRefused(protocol, peer,
                     startMs + l->requestTimeoutMs <= now
                         ? "a request that did not come whole in time"
                         : "a request body that stalled",
                     408);
    return 0;
}

static bool
fieldDropped(const CorHeader* h)
{
    static const char* const dropped[] = {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "content-length",
        NULL,
    };

    for (unsigned i = 0; dropped[i] != NULL; i++) {
        if (h->nameLen == strlen(dropped[i])
            && strncasecmp(h->name, dropped[i], h->nameLen) == 0) {
            return true;
        }
    }
    return false;
}

size_t
corHttpFieldLower(char* to, const CorHeader* h)
{
    if (fieldDropped(h)) {
        return 0;
    }
    for (size_t k = 0; k < h->nameLen; k++) {
        to[k] = (char)(h->name[k] >= 'A' && h->name[k] <= 'Z'
                           ? h->name[k] | 0x20
                           : h->name[k]);
    }
    return h->nameLen;
}

/* The fields of list into nv at *n, their names lowercased into lower
 * (room for all of them), less those HTTP/2 and HTTP/3 forbid. Returns
 * what lower used. */
static size_t
fieldsPut(CorHttpNv* nv, size_t* n, char* lower, const CorHeader* list,
          unsigned count)
{
    size_t used = 0;

    for (unsigned i = 0; i < count; i++) {
        const CorHeader* h = &list[i];
        size_t len = corHttpFieldLower(lower + used, h);

        if (len > 0) {
            corHttpNvPut(nv, n, lower + used, len, h->value, h->valueLen);
            used += len;
        }
    }
    return used;
}

/* How many fields r's answer may have, its own among them. */
static size_t
answerCount(const CorRequest* r)
{
    return r->responseHeaderCount + r->responseTrailerCount + HTTP_ANSWER_OWN;
}

int
corHttpAnswerMake(CorHttpAnswer* a, const CorRequest* r, int status, bool body,
                  const char* date, const char* altSvc)
{
    size_t need = answerCount(r) * sizeof(CorHttpNv)
                  + corHttpNamesLen(r->responseHeaders, r->responseHeaderCount)
                  + corHttpNamesLen(r->responseTrailers,
                                    r->responseTrailerCount)
                  + 1;
    CorHttpNv* nv = need <= sizeof(a->small) ? (CorHttpNv*)(void*)a->small
                                             : malloc(need);
    char* lower = (char*)(nv + answerCount(r));
    size_t n = 0;

    a->nv = nv;
    if (nv == NULL) {
        return -1;
    }
    corHttpPutDecimal(a->text.status, (size_t)status);
    corHttpNvPut(nv, &n, ":status", 7, a->text.status, 3);
    corHttpNvPut(nv, &n, "server", 6, "cor", 3);
    corHttpNvPut(nv, &n, "date", 4, date, 29);
    if (altSvc != NULL) {
        corHttpNvPut(nv, &n, "alt-svc", 7, altSvc, strlen(altSvc));
    }
    if (r->contentType != NULL) {
        corHttpNvPut(nv, &n, "content-type", 12, r->contentType,
                     strlen(r->contentType));
    }
    if (r->stream == NULL && (corHttpBodyAllowed(r, status) || r->head)) {
        corHttpNvPut(nv, &n, "content-length", 14, a->text.length,
                     (size_t)(corHttpPutDecimal(a->text.length, r->responseLen)
                              - a->text.length));
    }
    lower += fieldsPut(nv, &n, lower, r->responseHeaders,
                       r->responseHeaderCount);
    if (!body) {
        fieldsPut(nv, &n, lower, r->responseTrailers, r->responseTrailerCount);
    }
    a->n = n;
    return 0;
}

void
corHttpAnswerEnd(CorHttpAnswer* a)
{
    if (a->nv != (CorHttpNv*)(void*)a->small) {
        free(a->nv);
    }
}

CorHttpNv*
corHttpTrailersMake(const CorRequest* r, size_t* n)
{
    unsigned count = r->responseTrailerCount;
    CorHttpNv* nv = malloc(count * sizeof(*nv)
                           + corHttpNamesLen(r->responseTrailers, count) + 1);

    *n = 0;
    if (nv != NULL) {
        fieldsPut(nv, n, (char*)(nv + count), r->responseTrailers, count);
    }
    return nv;
}

size_t
corHttpRefusalFields(CorHttpNv* nv, int status, const char* text,
                     const char* date, CorHttpAnswerText* t)
{
    size_t n = 0;

    corHttpPutDecimal(t->status, (size_t)status);
    corHttpNvPut(nv, &n, ":status", 7, t->status, 3);
    corHttpNvPut(nv, &n, "server", 6, "cor", 3);
    corHttpNvPut(nv, &n, "date", 4, date, 29);
    corHttpNvPut(nv, &n, "content-type", 12, "text/plain", 10);
    corHttpNvPut(nv, &n, "content-length", 14, t->length,
                 (size_t)(corHttpPutDecimal(t->length, strlen(text))
                          - t->length));
    return n;
}

size_t
corHttpNamesLen(const CorHeader* list, unsigned count)
{
    size_t len = 0;

    for (unsigned i = 0; i < count; i++) {
        len += list[i].nameLen;
    }
    return len;
}

bool
corHttpBodyAllowed(const CorRequest* r, int status)
{
    return !r->head && status >= 200 && status != 204 && status != 304;
}

/* Whether r's body, to come, is one the core gathers for a handler that
 * takes it whole (corRequestBodySpool.c) rather than the stream's
 * buffer: past limits.body_memory, or of a length not said, so that it
 * goes to a file past that. */
bool
corHttpBodyLarge(const CorRequest* r)
{
    for (unsigned i = 0; i < r->headerCount; i++) {
        const CorHeader* h = &r->headers[i];
        uint64_t len = 0;

        if (!corHeaderIs(h, "content-length")) {
            continue;
        }
        for (size_t k = 0; k < h->valueLen; k++) {
            if (h->value[k] < '0' || h->value[k] > '9'
                || len > (UINT64_MAX - 9) / 10) {
                return true; /* the protocol refuses it: no matter */
            }
            len = len * 10 + (uint64_t)(h->value[k] - '0');
        }
        return len > corLimits()->bodyMemory;
    }
    return true;
}

void
corHttpRefusalSay(const CorRequest* r, const char* protocol, const char* remote,
                  int status)
{
    char what[128];

    if (corLimitsText(status) == NULL) {
        return;
    }
    snprintf(what, sizeof(what), "%.*s %.*s%s (%llu body bytes)",
             (int)(r->methodLen < 16 ? r->methodLen : 16),
             r->method != NULL ? r->method : "-",
             (int)(r->pathLen < 64 ? r->pathLen : 64),
             r->path != NULL ? r->path : "-", r->pathLen > 64 ? "..." : "",
             (unsigned long long)r->bodyLen);
    corLimitsRefusedFor(r, protocol,
                        remote != NULL && remote[0] != '\0' ? remote : NULL,
                        what, status);
}
