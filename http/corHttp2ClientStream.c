/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/2 client stream's two ends on nghttp2: the request as a header
 * list (the pseudo-headers, then the caller's fields lowercased, less
 * what belongs to an HTTP/1 connection: RFC 9113 section 8.2.2) with its
 * body, and the answer as it comes: the head (1xx ones skipped), the body
 * held until its exchange reads it (the window opens as it does, so an
 * answer of any size passes in bounded memory), the trailers, and the
 * stream's end, which a reset or the connection's end makes a failure.
 * nghttp2 has checked every field it hands over (RFC 9113 section 8.2.1:
 * no NUL, CR or LF; lowercase names), so "name\0value\0" keeps them.
 */
#include "corHttp2ClientInt.h"
#include "corHttpClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- The request --------------------------------------------------------- */

/* Whether the field name[0..len) belongs to the HTTP/1 connection (RFC
 * 9113 section 8.2.2), or is Host, which :authority carries. TE goes
 * through when it says only "trailers". */
static bool
fieldDropped(const CorHeader* h)
{
    static const char* const names[] = { "connection",
                                         "keep-alive",
                                         "proxy-connection",
                                         "transfer-encoding",
                                         "upgrade",
                                         "host",
                                         NULL };

    for (unsigned i = 0; names[i] != NULL; i++) {
        if (corHttpClientNameIs(h->name, h->nameLen, names[i])) {
            return true;
        }
    }
    return corHttpClientNameIs(h->name, h->nameLen, "te")
           && !(h->valueLen == 8 && strncasecmp(h->value, "trailers", 8) == 0);
}

static const CorHeader*
hostOf(const CorClientRequest* req)
{
    for (unsigned i = 0; i < req->headerCount; i++) {
        if (corHttpClientNameIs(req->headers[i].name, req->headers[i].nameLen,
                                "host")) {
            return &req->headers[i];
        }
    }
    return NULL;
}

static nghttp2_nv
nvOf(const char* name, size_t nameLen, const char* value, size_t valueLen)
{
    return (nghttp2_nv){ .name = (uint8_t*)name,
                         .namelen = nameLen,
                         .value = (uint8_t*)value,
                         .valuelen = valueLen,
                         .flags = NGHTTP2_NV_FLAG_NONE };
}

int
corHttp2RequestFields(const CorClientRequest* req, const CorUrl* url,
                      nghttp2_nv** nvP, size_t* countP)
{
    const char* method = req->method != NULL ? req->method : "GET";
    const CorHeader* host = hostOf(req);
    size_t names = 0;
    nghttp2_nv* nv;
    char* lower;
    size_t n = 0;

    for (unsigned i = 0; i < req->headerCount; i++) {
        names += req->headers[i].nameLen;
    }
    /* The list, then the lowercased names, then the length's digits. */
    nv = malloc((req->headerCount + 5) * sizeof(*nv) + names + 24);
    if (nv == NULL) {
        return -ENOMEM;
    }
    lower = (char*)(nv + req->headerCount + 5);
    nv[n++] = nvOf(":method", 7, method, strlen(method));
    nv[n++] = nvOf(":scheme", 7, url->scheme, strlen(url->scheme));
    nv[n++] = host != NULL
                  ? nvOf(":authority", 10, host->value, host->valueLen)
                  : nvOf(":authority", 10, url->authority, url->authorityLen);
    nv[n++] = nvOf(":path", 5, url->target, url->targetLen);
    for (unsigned i = 0; i < req->headerCount; i++) {
        const CorHeader* h = &req->headers[i];

        if (fieldDropped(h)) {
            continue;
        }
        for (size_t j = 0; j < h->nameLen; j++) {
            char ch = h->name[j];

            lower[j] = ch >= 'A' && ch <= 'Z' ? (char)(ch | 0x20) : ch;
        }
        nv[n++] = nvOf(lower, h->nameLen, h->value, h->valueLen);
        lower += h->nameLen;
    }
    if (req->bodyFrom == NULL && (req->body != NULL || req->bodyLen > 0)) {
        int len = snprintf(lower, 24, "%zu", req->bodyLen);

        nv[n++] = nvOf("content-length", 14, lower, (size_t)len);
    }
    *nvP = nv;
    *countP = n;
    return 0;
}

/* A body passed on as it comes: what its request has now; none yet
 * defers the provider until the request's news resumes it. A body that
 * failed (its client reset it) resets the stream. */
static ssize_t
bodyPass(CorHttp2Stream* s, uint8_t* buf, size_t len, uint32_t* flags)
{
    ssize_t n = corRequestBodyTake(s->bodyFrom, buf, len);

    if (n == -EAGAIN) {
        s->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (n < 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (n == 0) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return n;
}

ssize_t
corHttp2StreamBodyRead(nghttp2_session* session, int32_t id, uint8_t* buf,
                       size_t len, uint32_t* flags, nghttp2_data_source* source,
                       void* user)
{
    CorHttp2Stream* s = source->ptr;
    size_t n = s->bodyLen - s->bodySent;

    (void)session;
    (void)id;
    (void)user;
    if (s->bodyFrom != NULL) {
        return bodyPass(s, buf, len, flags);
    }
    n = n < len ? n : len;
    if (n > 0) {
        memcpy(buf, s->body + s->bodySent, n);
    }
    s->bodySent += n;
    if (s->bodySent == s->bodyLen) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

/* ---- The answer, as it comes --------------------------------------------- */

static int
fieldKeep(CorBuf* b, unsigned* count, const uint8_t* name, size_t nameLen,
          const uint8_t* value, size_t valueLen)
{
    if (corBufAppendField(b, name, nameLen, value, valueLen) != 0) {
        return -ENOMEM;
    }
    (*count)++;
    return 0;
}

int
corHttp2StreamField(nghttp2_session* session, const nghttp2_frame* f,
                    const uint8_t* name, size_t nameLen, const uint8_t* value,
                    size_t valueLen, uint8_t flags, void* user)
{
    CorHttp2Stream* s = nghttp2_session_get_stream_user_data(session,
                                                             f->hd.stream_id);
    int rc;

    (void)flags;
    (void)user;
    if (s == NULL || f->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    s->gotByte = true;
    if (nameLen == 7 && memcmp(name, ":status", 7) == 0) {
        s->status = 0;
        for (size_t i = 0; i < valueLen && i < 3; i++) {
            s->status = s->status * 10 + (value[i] - '0');
        }
        return 0;
    }
    if (nameLen > 0 && name[0] == ':') {
        return 0; /* nghttp2 allows no other in an answer */
    }
    rc = s->head ? fieldKeep(&s->trailers, &s->trailerCount, name, nameLen,
                             value, valueLen)
                 : fieldKeep(&s->fields, &s->fieldCount, name, nameLen, value,
                             valueLen);
    return rc == 0 ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

void
corHttp2StreamFrame(CorHttp2Stream* s, const nghttp2_frame* f)
{
    if (f->hd.type == NGHTTP2_HEADERS && !s->head) {
        if (s->status >= 100 && s->status < 200) {
            s->fields.len = s->fields.off = 0; /* an interim head */
            s->fieldCount = 0;
        } else {
            s->head = true;
        }
    }
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA)
        && (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
        s->ended = true;
    }
    corHttp2StreamWake(s);
}

int
corHttp2StreamData(nghttp2_session* session, uint8_t flags, int32_t id,
                   const uint8_t* data, size_t len, void* user)
{
    CorHttp2Stream* s = nghttp2_session_get_stream_user_data(session, id);

    (void)flags;
    if (s == NULL) {
        /* Its exchange left: what came opens the window at once. */
        corHttp2PeerConsumed(user, id, len);
        return 0;
    }
    s->gotByte = true;
    if (corBufAppend(&s->data, data, len) != 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    corHttp2StreamWake(s);
    return 0;
}

void
corHttp2StreamEnd(CorHttp2Stream* s, uint32_t code)
{
    s->closed = true;
    if (!s->ended && s->failed == 0) {
        s->refused = code == NGHTTP2_REFUSED_STREAM;
        s->failed = -ECONNRESET;
        snprintf(s->why, sizeof(s->why), "%s: the stream was %s (%s)",
                 corHttp2StreamPeer(s), s->refused ? "refused" : "reset",
                 nghttp2_http2_strerror(code));
    }
    corHttp2StreamWake(s);
}

/* ---- What the exchange takes --------------------------------------------- */

/* "name\0value\0"... of b as count headers, into a copy of its bytes:
 * *headersP and *storeP (malloc, the caller's). Returns 0 or -ENOMEM. */
static int
fieldsOut(const CorBuf* b, unsigned count, CorHeader** headersP, char** storeP)
{
    CorHeader* headers = calloc(count > 0 ? count : 1, sizeof(*headers));
    char* store = malloc(b->len > 0 ? b->len : 1);
    const char* at = store;

    if (headers == NULL || store == NULL) {
        free(headers);
        free(store);
        return -ENOMEM;
    }
    if (b->len > 0) {
        memcpy(store, b->data, b->len);
    }
    for (unsigned i = 0; i < count; i++) {
        headers[i].name = at;
        headers[i].nameLen = strlen(at);
        at += headers[i].nameLen + 1;
        headers[i].value = at;
        headers[i].valueLen = strlen(at);
        at += headers[i].valueLen + 1;
    }
    *headersP = headers;
    *storeP = store;
    return 0;
}

static int
failSay(CorHttp2Stream* s, CorClientResponse* res)
{
    snprintf(res->error, sizeof(res->error), "%.255s", s->why);
    return s->failed;
}

int
corHttp2StreamHead(CorHttp2Stream* s, CorClientResponse* res)
{
    if (!s->head) {
        return s->failed < 0 ? failSay(s, res) : 0;
    }
    if (fieldsOut(&s->fields, s->fieldCount, &res->headers, &res->head) != 0) {
        snprintf(res->error, sizeof(res->error), "no memory for a head");
        return -ENOMEM;
    }
    res->headerCount = s->fieldCount;
    res->status = s->status;
    s->headTaken = true;
    corBufFree(&s->fields);
    return 1;
}

/* The trailers into res, once the answer ended with none of its body left
 * (the last read takes them with it). Returns 0 or -ENOMEM (said). */
static int
trailersTake(CorHttp2Stream* s, CorClientResponse* res)
{
    if (s->trailerCount == 0 || res->trailers != NULL) {
        return 0;
    }
    if (fieldsOut(&s->trailers, s->trailerCount, &res->trailers,
                  &res->trailerHead)
        != 0) {
        snprintf(res->error, sizeof(res->error), "no memory for trailers");
        return -ENOMEM;
    }
    res->trailerCount = s->trailerCount;
    return 0;
}

ssize_t
corHttp2StreamRead(CorHttp2Stream* s, void* buf, size_t len,
                   CorClientResponse* res)
{
    size_t n = corBufPending(&s->data);

    if (n > 0) {
        n = n < len ? n : len;
        memcpy(buf, corBufHead(&s->data), n);
        corBufConsume(&s->data, n);
        corHttp2PeerConsumed(s->p, s->id, n);
        if (corHttp2StreamDone(s) && trailersTake(s, res) != 0) {
            return -ENOMEM;
        }
        return (ssize_t)n;
    }
    if (s->failed < 0) {
        return failSay(s, res);
    }
    if (!s->ended) {
        return -EAGAIN;
    }
    return trailersTake(s, res);
}

bool
corHttp2StreamDone(const CorHttp2Stream* s)
{
    return s->ended && corBufPending(&s->data) == 0;
}
