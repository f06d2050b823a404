/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP client's request on the wire: the URL checked (taken apart by
 * corUrlParse, the one parser of every client), the method and headers
 * checked (a CR or LF in a value would inject a header), and
 * the head built with the framing the client owns (Content-Length).
 */
#include "corHttpClientInt.h"
#include "corHttpParse.h"
#include "corKit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- The URL ------------------------------------------------------------- */

int
corHttpClientUrlCheck(const CorClientRequest* q, CorUrl* u, char* why,
                      size_t whyLen)
{
    const char* s = q->url;
    int rc = corClientTargetUrl(q, u, why, whyLen);
    bool tls = rc == 0 && strcmp(u->scheme, "https") == 0;

    if (rc != 0) {
        return rc;
    }
    if (!tls && strcmp(u->scheme, "http") != 0) {
        snprintf(why, whyLen, "URL %.80s: not http:// or https://", s);
        return -EINVAL;
    }
    if (u->user != NULL) {
        snprintf(why, whyLen,
                 "URL %.80s: a user or password, which the "
                 "HTTP client does not send",
                 s);
        return -EINVAL;
    }
    if (u->port == 0) {
        u->port = tls ? 443 : 80;
    }
    return 0;
}

int
corHttpClientRequestCheck(const CorClientRequest* q, char* why, size_t whyLen)
{
    const char* method = q->method ? q->method : "GET";

    if (!corHttpIsToken(method, strlen(method))) {
        snprintf(why, whyLen, "method %.40s: not a token", method);
        return -EINVAL;
    }
    for (unsigned i = 0; i < q->headerCount; i++) {
        const CorHeader* h = &q->headers[i];

        if (h->name == NULL || !corHttpIsToken(h->name, h->nameLen)
            || (h->valueLen > 0 && h->value == NULL)
            || !corHttpIsFieldValue(h->value, h->valueLen)) {
            snprintf(why, whyLen, "request header %u: a bad name or value", i);
            return -EINVAL;
        }
        if (corHttpClientNameIs(h->name, h->nameLen, "content-length")
            || corHttpClientNameIs(h->name, h->nameLen, "transfer-encoding")) {
            snprintf(why, whyLen,
                     "request header %.*s: the client frames "
                     "the body",
                     (int)h->nameLen, h->name);
            return -EINVAL;
        }
    }
    return 0;
}

static void
put(char** p, const char* s, size_t n)
{
    memcpy(*p, s, n);
    *p += n;
}

bool
corHttpClientBodyInline(const CorClientRequest* q)
{
    return q->bodyLen <= COR_HTTP_CLIENT_BODY_INLINE_MAX;
}

int64_t
corHttpClientBodyFromLength(const CorClientRequest* q)
{
    return q->bodyFrom != NULL ? corRequestBodySize(q->bodyFrom) : -1;
}

char*
corHttpClientRequestHead(const CorClientRequest* q, const CorUrl* url,
                         size_t* lenP, size_t* sizeP, bool* wantCloseP)
{
    const char* method = q->method ? q->method : "GET";
    bool hasHost = false;
    bool sendLength;
    int64_t fromLength;
    size_t size;
    char* out;
    char* p;
    char number[48];

    size = strlen(method) + url->targetLen + url->authorityLen + 80
           + (q->bodyFrom == NULL && corHttpClientBodyInline(q) ? q->bodyLen
                                                                : 0);
    for (unsigned i = 0; i < q->headerCount; i++) {
        size += q->headers[i].nameLen + q->headers[i].valueLen + 4;
        hasHost |= corHttpClientNameIs(q->headers[i].name,
                                       q->headers[i].nameLen, "host");
    }
    /* A body passed on as it comes goes with the length its client
     * said, as nginx's; with none said, chunked. */
    fromLength = corHttpClientBodyFromLength(q);
    sendLength = q->bodyFrom != NULL
                     ? fromLength >= 0
                     : q->bodyLen > 0 || strcmp(method, "POST") == 0
                           || strcmp(method, "PUT") == 0
                           || strcmp(method, "PATCH") == 0;
    out = corChunkTake(&size);
    if (out == NULL) {
        return NULL;
    }
    *sizeP = size;
    p = out;
    put(&p, method, strlen(method));
    put(&p, " ", 1);
    if (url->target[0] == '?') {
        put(&p, "/", 1);
    }
    put(&p, url->target, url->targetLen);
    put(&p, " HTTP/1.1\r\n", 11);
    if (!hasHost) {
        put(&p, "Host: ", 6);
        put(&p, url->authority, url->authorityLen);
        put(&p, "\r\n", 2);
    }
    for (unsigned i = 0; i < q->headerCount; i++) {
        const CorHeader* h = &q->headers[i];

        put(&p, h->name, h->nameLen);
        put(&p, ": ", 2);
        put(&p, h->value, h->valueLen);
        put(&p, "\r\n", 2);
        if (corHttpClientNameIs(h->name, h->nameLen, "connection")
            && strncasecmp(h->value, "close", h->valueLen) == 0) {
            *wantCloseP = true;
        }
    }
    if (sendLength) {
        put(&p, number,
            (size_t)snprintf(number, sizeof(number), "Content-Length: %zu\r\n",
                             q->bodyFrom != NULL ? (size_t)fromLength
                                                 : q->bodyLen));
    }
    if (q->bodyFrom != NULL && fromLength < 0) {
        put(&p, "Transfer-Encoding: chunked\r\n", 28);
    }
    put(&p, "\r\n", 2);
    /* A body passed on as it comes is never body and bodyLen (the
     * request's, which may be growing as it comes). */
    if (q->bodyFrom == NULL && q->bodyLen > 0 && corHttpClientBodyInline(q)) {
        put(&p, q->body, q->bodyLen);
    }
    *lenP = (size_t)(p - out);
    return out;
}
