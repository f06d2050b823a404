/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How an HTTP/2 stream is refused rather than answered by its handler
 * (docs/http2.md, Limits): at a limit before it is served (a header list
 * past its size, a body past limits.body_bytes, announced by its
 * content-length or come so far), for a bad head (400, 503), or once its
 * handler runs, when a body it streams goes past limits.body_bytes.
 *
 * The answer is this file's own, never built from the request's response
 * fields: a handler still running on a worker writes those. It is the
 * status and its text; for a gRPC call at a limit, trailers-only with
 * grpc-status 8 (RESOURCE_EXHAUSTED) and a grpc-message, which a gRPC
 * client shows as it is (a bare 413 would be "UNKNOWN").
 *
 * Never REFUSED_STREAM: RFC 9113 8.7 says that code means "not processed,
 * safe to retry", and curl and grpcio do retry it, so a body past the
 * limit went to the upstream once per try. Once a handler was handed a
 * byte the request was processed: it is refused with 413 while no answer
 * began, and reset with CANCEL after.
 */
#include "corHttp2Int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* RESOURCE_EXHAUSTED, gRPC's code for "a limit was reached". */
#define GRPC_RESOURCE_EXHAUSTED "8"

/* The field name (lowercase, as HTTP/2 has it) of st's header list, or
 * NULL. */
static const CorHttpField*
fieldFind(const Http2Stream* st, const char* name)
{
    const CorHttpField* fields = (const CorHttpField*)(void*)st->fields.data;
    size_t count = corHttpFieldCount(&st->fields);
    size_t len = strlen(name);

    for (size_t i = 0; i < count; i++) {
        if (fields[i].nameLen == len
            && memcmp(st->raw.data + fields[i].nameOff, name, len) == 0) {
            return &fields[i];
        }
    }
    return NULL;
}

bool
corHttp2Grpc(const Http2Stream* st)
{
    const CorHttpField* f = fieldFind(st, "content-type");

    /* "application/grpc", "application/grpc+proto", ...; the media type
     * is case-insensitive. */
    return f != NULL && f->valueLen >= 16
           && strncasecmp((const char*)st->raw.data + f->valueOff,
                          "application/grpc", 16)
                  == 0;
}

int
corHttp2BodyAnnounced(const Http2Stream* st)
{
    const CorHttpField* f = fieldFind(st, "content-length");
    const char* value;
    uint64_t length = 0;

    if (f == NULL) {
        return 0;
    }
    /* nghttp2 let through only digits (RFC 9113 8.1.1); a length past
     * 2^64 is past any limit. */
    value = (const char*)st->raw.data + f->valueOff;
    for (uint32_t i = 0; i < f->valueLen; i++) {
        if (length > (UINT64_MAX - 9) / 10) {
            return 413;
        }
        length = length * 10 + (uint64_t)(value[i] - '0');
    }
    return corLimitsBody(&st->r, length);
}

/* What a refusal with status says in its body (and gRPC's message). */
static const char*
refusalText(int status)
{
    const char* text = corLimitsText(status);

    if (text != NULL) {
        return text;
    }
    return status == 400 ? "400 Bad Request\n" : "503 Service Unavailable\n";
}

static ssize_t
refusalRead(nghttp2_session* s, int32_t id, uint8_t* buf, size_t len,
            uint32_t* flags, nghttp2_data_source* source, void* arg)
{
    Http2Stream* st = source->ptr;
    const char* text = refusalText((int)st->refuse);
    size_t left = strlen(text) - (size_t)st->sendOff;
    size_t n = left < len ? left : len;

    (void)s;
    (void)id;
    (void)arg;
    memcpy(buf, text + st->sendOff, n);
    st->sendOff += n;
    if (n == left) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

int
corHttp2RefusalSubmit(Http2Conn* c, Http2Stream* st, int status)
{
    const char* text = refusalText(status);
    nghttp2_data_provider dp = { .source.ptr = st,
                                 .read_callback = refusalRead };
    CorHttpNv nv[5];
    CorHttpAnswerText t;
    size_t n = 0;
    int rc;

    st->refuse = (unsigned)status;
    st->answered = true;
    st->sendOff = 0;
    if (corLimitsText(status) != NULL && corHttp2Grpc(st)) {
        /* Trailers-only: one HEADERS that ends the stream. */
        corHttpNvPut(nv, &n, ":status", 7, "200", 3);
        corHttpNvPut(nv, &n, "content-type", 12, "application/grpc", 16);
        corHttpNvPut(nv, &n, "grpc-status", 11, GRPC_RESOURCE_EXHAUSTED, 1);
        corHttpNvPut(nv, &n, "grpc-message", 12, text, strlen(text) - 1);
        rc = nghttp2_submit_response(c->session, st->id, corHttp2Nv(nv), n,
                                     NULL);
    } else {
        n = corHttpRefusalFields(nv, status, text, corHttpDate(c->hl), &t);
        rc = nghttp2_submit_response(c->session, st->id, corHttp2Nv(nv), n,
                                     st->r.head ? NULL : &dp);
    }
    return rc == 0 ? 0 : -1;
}

/* A limit's refusal, said once and counted, as every protocol's. */
static void
refusalSay(const Http2Stream* st, int status)
{
    corHttpRefusalSay(&st->r, "http", st->remote, status);
}

static void
refusalSend(Http2Conn* c, Http2Stream* st, int status)
{
    if (corHttp2RefusalSubmit(c, st, status) != 0) {
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->id,
                                  NGHTTP2_INTERNAL_ERROR);
    }
}

void
corHttp2StreamRefuse(Http2Conn* c, Http2Stream* st, int status)
{
    refusalSay(st, status);
    refusalSend(c, st, status);
}

void
corHttp2RefusalSay(const Http2Stream* st, int status)
{
    refusalSay(st, status);
}

void
corHttp2StreamOverLimit(Http2Conn* c, Http2Stream* st)
{
    refusalSay(st, 413);
    if (st->answered) {
        /* Its answer began: the client must see it cut, not whole. */
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->id,
                                  NGHTTP2_CANCEL);
        return;
    }
    /* The handler's answer goes nowhere; what it left unread of the body
     * opens the connection's window now (nghttp2 counts it there). */
    st->overruled = true;
    corRequestCancel(&st->r);
    nghttp2_session_consume(c->session, st->id, (size_t)st->bodyUnread);
    st->bodyUnread = 0;
    refusalSend(c, st, 413);
}
