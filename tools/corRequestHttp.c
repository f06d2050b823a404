/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/1.1 for cor-request: requests written with a Content-Length, and
 * answers cut by the core's strict response parser (http/corHttpParse.c),
 * framed by Content-Length or chunked. An answer framed by the
 * connection's end is refused: a load generator cannot tell it from a
 * server that died, and cor never sends one.
 */
#include "corRequest.h"
#include "corHttpParse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HTTP_FIELDS_MAX 100
#define HTTP_HEAD_MAX 65536

/* The answer being read on one connection. */
typedef struct {
    bool inBody;
    int status;
    size_t headLen;
    bool chunked;
    int64_t length; /* Content-Length, or -1 */
    bool close;     /* the server closes after this answer */
    CorHttpChunked chunks;
    size_t consumed; /* chunked input taken, after the head */
    size_t produced; /* chunked body bytes, after the head */
    CorHttpHeader fields[HTTP_FIELDS_MAX];
} HttpState;

static void*
httpStateNew(void)
{
    return calloc(1, sizeof(HttpState));
}

/* Whether -H gave a Host of its own, which replaces the URL's. */
static bool
hostGiven(const CorReqMessage* m)
{
    for (unsigned i = 0; i < m->headerCount; i++) {
        if (strncasecmp(m->headers[i], "host:", 5) == 0) {
            return true;
        }
    }
    return false;
}

static int
httpEncode(void* state, const CorReqMessage* m, uint32_t id, CorBuf* out)
{
    char line[512];
    int n;

    (void)state;
    (void)id;
    n = snprintf(line, sizeof(line), "%s %s HTTP/1.1\r\n", m->method,
                 m->target);
    if (n > 0 && (size_t)n < sizeof(line) && !hostGiven(m)) {
        n += snprintf(line + n, sizeof(line) - (size_t)n, "Host: %s\r\n",
                      m->host);
    }
    if (n < 0 || (size_t)n >= sizeof(line)
        || corBufAppend(out, line, (size_t)n) != 0) {
        return -ENOMEM;
    }
    for (unsigned i = 0; i < m->headerCount; i++) {
        if (corBufAppend(out, m->headers[i], strlen(m->headers[i])) != 0
            || corBufAppend(out, "\r\n", 2) != 0) {
            return -ENOMEM;
        }
    }
    if (m->bodyLen > 0 || strcmp(m->method, "POST") == 0
        || strcmp(m->method, "PUT") == 0) {
        n = snprintf(line, sizeof(line), "Content-Length: %zu\r\n", m->bodyLen);
        if (corBufAppend(out, line, (size_t)n) != 0) {
            return -ENOMEM;
        }
    }
    if (corBufAppend(out, "\r\n", 2) != 0
        || corBufAppend(out, m->body, m->bodyLen) != 0) {
        return -ENOMEM;
    }
    return 0;
}

/* Read the head; returns its length, 0 for more, -1 refused. */
static ssize_t
httpHead(HttpState* s, const char* in, size_t len, const CorReqMessage* oldest,
         char* why, size_t whyLen)
{
    CorHttpLimits limits = { .headerBytes = HTTP_HEAD_MAX,
                             .maxHeaders = HTTP_FIELDS_MAX };
    CorHttpResponseHead head = { .headers = s->fields };
    int rc = corHttpParseResponseHead(in, len, &limits, &head);

    if (rc <= 0) {
        if (rc < 0) {
            snprintf(why, whyLen, "a malformed answer: %s",
                     corHttpResponseErrorText(rc));
        }
        return rc < 0 ? -1 : 0;
    }
    s->status = head.status;
    s->headLen = head.headLen;
    s->chunked = head.chunked;
    s->length = head.contentLength;
    /* "Connection: close" (or HTTP/1.0 without keep-alive): the server
     * closes once this answer is out, so a request sent on the
     * connection after it would be lost, not answered. */
    s->close = !head.keepAlive;
    if (oldest->head || head.status == 204 || head.status == 304
        || head.status < 200) {
        s->chunked = false;
        s->length = 0;
    } else if (!head.chunked && head.contentLength < 0) {
        snprintf(why, whyLen, "an answer framed by the connection's end");
        return -1;
    }
    if (s->chunked) {
        corHttpChunkedInit(&s->chunks, UINT64_MAX);
        s->consumed = s->produced = 0;
    }
    s->inBody = true;
    return (ssize_t)head.headLen;
}

/* Decode what came of a chunked body, joining its pieces after the head.
 * Returns the answer's whole length once done, 0 for more, -1. */
static ssize_t
httpChunks(HttpState* s, char* in, size_t len, char* why, size_t whyLen)
{
    char* from = in + s->headLen + s->consumed;
    size_t consumed = 0;
    size_t produced = 0;
    int rc = corHttpChunkedDecode(&s->chunks, from,
                                  len - s->headLen - s->consumed, &consumed,
                                  &produced);

    memmove(in + s->headLen + s->produced, from, produced);
    s->consumed += consumed;
    s->produced += produced;
    if (rc < 0) {
        snprintf(why, whyLen, "a malformed chunked body (%d)", -rc);
        return -1;
    }
    return rc == 1 ? (ssize_t)(s->headLen + s->consumed) : 0;
}

static ssize_t
httpDecode(void* state, char* in, size_t len, const CorReqMessage* oldest,
           CorReqAnswer* a, char* why, size_t whyLen)
{
    HttpState* s = state;
    ssize_t took;

    if (!s->inBody && (took = httpHead(s, in, len, oldest, why, whyLen)) <= 0) {
        return took;
    }
    if (s->chunked) {
        took = httpChunks(s, in, len, why, whyLen);
        if (took <= 0) {
            return took;
        }
        a->bodyLen = s->produced;
    } else if (len - s->headLen < (size_t)s->length) {
        return 0;
    } else {
        took = (ssize_t)(s->headLen + (size_t)s->length);
        a->bodyLen = (size_t)s->length;
    }
    s->inBody = false;
    /* A 1xx is not the answer: the caller drops it and reads on. */
    a->status = s->status >= 200 ? s->status : 0;
    a->goAway = a->status != 0 && s->close;
    a->head = in;
    a->headLen = s->headLen;
    a->body = in + s->headLen;
    return took;
}

const CorReqProtocol corReqHttp = {
    .alpn = "http/1.1",
    .stateNew = httpStateNew,
    .stateFree = free,
    .encode = httpEncode,
    .decode = httpDecode,
};
