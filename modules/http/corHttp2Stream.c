/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/2 stream as a request (docs/http2.md): its header block,
 * decoded by nghttp2, is copied into the stream as it comes, its body
 * gathered, and once its END_STREAM came it is served by the core like
 * any request (the same routes, hooks, handlers and limits as HTTP/1's).
 * A request whose handler streams its body (CorHandler.streamBody: a
 * proxy of gRPC) is served at its head instead, and its DATA handed on
 * as it comes (corRequestBodyPut), the window opened as the handler
 * reads; either way the body's bytes are consumed by hand, so what the
 * client may send unread is the stream's window.
 * Its answer goes out through an nghttp2 data provider that reads the
 * body where it is (the handler's bytes, a file, the stream queue) only
 * as the peer's window and the socket allow: a large answer is never
 * copied whole, and a streamed one takes from the core's queue, which
 * is handed more as it drains (streamBacklog).
 *
 * A stream owns what its request reads, so a connection that closes
 * under a handler frees nothing the handler still uses: the stream
 * finishes into the void and is freed at its release.
 *
 * Limits: the header list past max_header_list_size (limits.header_bytes
 * by default) or limits.header_count is answered 431, past four times
 * that the connection ends (an HPACK bomb: a few bytes that decode to a
 * flood); a body past limits.body_bytes, announced by its content-length
 * or come so far, is refused (corHttp2Refuse.c: 413, or a gRPC status,
 * never REFUSED_STREAM once a byte was handed on); a request
 * that does not come whole within limits.request_timeout, or whose body
 * stalls longer than limits.body_timeout between two frames (as HTTP/1's
 * between two reads), is counted a 408 and reset.
 */
#include "corHttp2Int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Past this many times the header list limit, the connection ends. */
#define HEADER_BOMB_FACTOR 4
/* A freed stream whose header buffers grew past this goes back to malloc
 * rather than to its loop's cache (a request's usual head fits the
 * buffers' first 256 bytes). */
#define CACHED_BUF_MAX 1024
/* Under a sanitizer every stream is malloc's, so that a use after its
 * free is seen. */
#if defined(__SANITIZE_ADDRESS__)
#define STREAM_CACHED false
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STREAM_CACHED false
#endif
#endif
#ifndef STREAM_CACHED
#define STREAM_CACHED true
#endif

static void requestDone(CorRequest* r);
static void requestRelease(CorRequest* r);
static void streamData(CorRequest* r, const void* data, size_t len);
static void streamEnd(CorRequest* r);
static bool streamAlive(const CorRequest* r);
static size_t streamBacklog(const CorRequest* r);
static void streamAbort(CorRequest* r);
static void bodyConsumed(CorRequest* r, size_t n);

static const CorProtocolOps http2Ops = {
    .done = requestDone,
    .release = requestRelease,
    .streamData = streamData,
    .streamEnd = streamEnd,
    .streamAlive = streamAlive,
    .streamBacklog = streamBacklog,
    .streamAbort = streamAbort,
    .bodyConsumed = bodyConsumed,
    .kind = COR_PROTOCOL_HTTP2,
};

static size_t
listMax(void)
{
    return corHttp2Conf.maxHeaderListSize != 0 ? corHttp2Conf.maxHeaderListSize
                                               : corLimits()->headerBytes;
}

static Http2Stream*
streamOf(nghttp2_session* s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s, id);
}

static void
streamFree(Http2Stream* st)
{
    HttpLoop* hl = st->hl;

    corBufFree(&st->body);
    corBufFree(&st->streamed);
    if (STREAM_CACHED && hl->h2StreamCount < HTTP_H2_STREAM_CACHE
        && !hl->h2StreamsClosed && st->raw.cap <= CACHED_BUF_MAX
        && st->fields.cap <= CACHED_BUF_MAX
        && st->request.cap <= CACHED_BUF_MAX) {
        hl->h2Streams[hl->h2StreamCount++] = st;
        return;
    }
    corBufFree(&st->raw);
    corBufFree(&st->fields);
    corBufFree(&st->request);
    free(st);
}

/* A stream, zeroed but for its header buffers' memory, from hl's cache
 * (with the buffers it had: two reallocs less) or malloc; NULL. */
static Http2Stream*
streamNew(HttpLoop* hl)
{
    Http2Stream* st;
    CorBuf raw;
    CorBuf fields;
    CorBuf request;

    if (hl->h2StreamCount == 0) {
        st = calloc(1, sizeof(*st));
    } else {
        st = hl->h2Streams[--hl->h2StreamCount];
        raw = (CorBuf){ .data = st->raw.data, .cap = st->raw.cap };
        fields = (CorBuf){ .data = st->fields.data, .cap = st->fields.cap };
        request = (CorBuf){ .data = st->request.data, .cap = st->request.cap };
        memset(st, 0, sizeof(*st));
        st->raw = raw;
        st->fields = fields;
        st->request = request;
    }
    if (st != NULL) {
        st->hl = hl;
    }
    return st;
}

void
corHttp2StreamCacheEnd(HttpLoop* hl)
{
    hl->h2StreamsClosed = true;
    while (hl->h2StreamCount > 0) {
        Http2Stream* st = hl->h2Streams[--hl->h2StreamCount];

        corBufFree(&st->raw);
        corBufFree(&st->fields);
        corBufFree(&st->request);
        free(st);
    }
}

/* Take st off its connection. */
static void
streamUnlink(Http2Stream* st)
{
    Http2Conn* c = st->conn;

    if (c == NULL) {
        return;
    }
    corListRemove(&st->link);
    st->conn = NULL;
    if (c->decoding == st) {
        c->decoding = NULL;
    }
    if (--c->streamCount == 0) {
        c->activeMs = corEvNow(c->k.loop);
    }
}

/* ---- The request --------------------------------------------------------- */

int
corHttp2StreamBegin(nghttp2_session* s, const nghttp2_frame* f, void* arg)
{
    Http2Conn* c = arg;
    Http2Stream* st;

    if (f->hd.type != NGHTTP2_HEADERS
        || f->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    st = streamNew(c->hl);
    if (st == NULL) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets it */
    }
    st->id = f->hd.stream_id;
    st->conn = c;
    st->startMs = corEvNow(c->k.loop);
    st->r.fileFd = -1;
    corListInsert(&c->streams, &st->link);
    c->streamCount++;
    corHttp2CountStream();
    nghttp2_session_set_stream_user_data(s, st->id, st);
    c->decoding = st;
    corHttp2ConnStreamBegun(c);
    return 0;
}

int
corHttp2StreamHeader(nghttp2_session* s, const nghttp2_frame* f,
                     const uint8_t* name, size_t nameLen, const uint8_t* value,
                     size_t valueLen, uint8_t flags, void* arg)
{
    Http2Conn* c = arg;
    /* The stream whose HEADERS began last, as a header block's frames
     * come together (RFC 9113 6.10): no lookup of its id a field. */
    Http2Stream* st = c->decoding != NULL && c->decoding->id == f->hd.stream_id
                          ? c->decoding
                          : streamOf(s, f->hd.stream_id);
    size_t max = listMax();

    (void)flags;
    if (st == NULL || f->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0; /* trailers: not part of the request */
    }
    st->listSize += nameLen + valueLen + 32;
    if (st->listSize > HEADER_BOMB_FACTOR * max) {
        c->abuse = 1 + H2_ABUSE_HEADER_LIST;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (st->listSize > max
        || corHttpFieldCount(&st->fields) >= corLimits()->headerCount + 4) {
        st->refuse = 431; /* the rest is decoded, not kept */
        return 0;
    }
    if (st->refuse != 0) {
        return 0;
    }
    if (corHttpFieldKeep(&st->raw, &st->fields, name, nameLen, value, valueLen)
        != 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

/* The peer's address, as the connection's name has it before its port:
 * formatted once per connection (inet_ntop's sprintf was 1 700 of a
 * request's 23 000 instructions when each stream formatted it). */
static void
remoteSet(const Http2Conn* c, Http2Stream* st)
{
    const char* port = strrchr(c->peerName, ':');
    size_t len = port != NULL ? (size_t)(port - c->peerName) : 0;

    len = len < sizeof(st->remote) ? len : sizeof(st->remote) - 1;
    memcpy(st->remote, c->peerName, len);
    st->remote[len] = '\0';
}

/* The request of a whole header block: its pseudo-headers say the method
 * and the target, :authority is its Host (when it has none). Returns 0,
 * or a status to answer instead (400, 503). */
static int
requestBuild(Http2Conn* c, Http2Stream* st)
{
    size_t count = corHttpFieldCount(&st->fields);
    const char* path;
    size_t pathLen;
    CorRequest* r = &st->r;
    int status;

    /* The headers, then the target twice (targetSet): as much as the
     * raw bytes hold twice is room for it. */
    if (corBufReserve(&st->request,
                      (count + 1) * sizeof(CorHeader) + 2 * st->raw.len + 2)
        != 0) {
        return 503;
    }
    st->headers = memset(st->request.data, 0, (count + 1) * sizeof(CorHeader));
    st->request.len = (count + 1) * sizeof(CorHeader);
    r->remote = st->remote;
    r->secure = c->tls;
    r->version = "HTTP/2.0";
    remoteSet(c, st);
    status = corHttpRequestFields(r, st->headers, &st->raw, &st->fields, &path,
                                  &pathLen);
    if (status != 0) {
        return status;
    }
    /* After the headers, in the room reserved above. */
    st->target = (char*)st->request.data + st->request.len;
    return corHttpTargetSet(r, st->target, path, pathLen) == 0 ? 0 : 400;
}

/* ---- The answer ---------------------------------------------------------- */

/* The body's end: with trailers, a HEADERS frame ends the stream instead
 * of the last DATA (nghttp2 sends it after). */
static void
bodyEnd(nghttp2_session* s, Http2Stream* st, uint32_t* flags)
{
    CorHttpNv* nv;
    size_t n;

    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (st->r.responseTrailerCount == 0) {
        return;
    }
    nv = corHttpTrailersMake(&st->r, &n);
    if (nv == NULL) {
        return; /* ends without them: the peer sees no status */
    }
    if (nghttp2_submit_trailer(s, st->id, corHttp2Nv(nv), n) == 0) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    free(nv);
}

static ssize_t
bodyRead(nghttp2_session* s, int32_t id, uint8_t* buf, size_t len,
         uint32_t* flags, nghttp2_data_source* source, void* arg)
{
    Http2Stream* st = source->ptr;
    CorRequest* r = &st->r;
    size_t n;

    (void)id;
    (void)arg;
    if (r->stream != NULL) {
        n = corBufPending(&st->streamed);
        if (n == 0 && !st->ended) {
            st->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
        n = n < len ? n : len;
        if (n > 0) {
            /* An empty buffer has no head: a stream that ends with no
             * byte (a HEAD's) passes none. */
            memcpy(buf, corBufHead(&st->streamed), n);
            corBufConsume(&st->streamed, n);
        }
        st->drained = true;
        if (st->ended && corBufPending(&st->streamed) == 0) {
            bodyEnd(s, st, flags);
        }
    } else {
        n = r->responseLen - st->sendOff < len
                ? (size_t)(r->responseLen - st->sendOff)
                : len;
        if (r->fileFd >= 0) {
            ssize_t got = pread(r->fileFd, buf, n,
                                (off_t)(r->fileOffset + (int64_t)st->sendOff));

            if (got <= 0 && n > 0) {
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            }
            n = (size_t)got;
        } else {
            memcpy(buf, (const char*)r->responseBody + st->sendOff, n);
        }
        st->sendOff += n;
        if (st->sendOff == r->responseLen) {
            bodyEnd(s, st, flags);
        }
    }
    r->bodySent += n;
    return (ssize_t)n;
}

/* Submit the response r holds: its head, and its body through bodyRead.
 * Returns 0 or -1 (the stream is reset). */
static int
responseSubmit(Http2Conn* c, Http2Stream* st)
{
    CorRequest* r = &st->r;
    int status = r->status >= 200 && r->status <= 599 ? r->status : 500;
    CorHttpAnswer a;
    /* A stream has a provider even with no body to send: its end, not
     * its head, closes it (corRequestSent follows the end). */
    bool body = r->stream != NULL
                || (corHttpBodyAllowed(r, status) && r->responseLen > 0);
    nghttp2_data_provider dp = { .source.ptr = st, .read_callback = bodyRead };
    int rc;

    /* No DATA to follow: the trailers ride in the one HEADERS frame
     * (gRPC's trailers-only answer). */
    if (corHttpAnswerMake(&a, r, status, body, corHttpDate(c->hl), c->altSvc)
        != 0) {
        return -1;
    }
    r->status = status;
    rc = nghttp2_submit_response(c->session, st->id, corHttp2Nv(a.nv), a.n,
                                 body ? &dp : NULL);
    corHttpAnswerEnd(&a);
    st->answered = true;
    return rc == 0 ? 0 : -1;
}

/* The request from its head, once: 0, or the status to refuse it with. */
static int
requestBuildOnce(Http2Conn* c, Http2Stream* st)
{
    if (!st->built) {
        st->built = true;
        if (st->refuse == 0) {
            st->refuse = (unsigned)requestBuild(c, st);
        }
    }
    return (int)st->refuse;
}

/* The head came (no END_STREAM with it): a content-length past the limit
 * is refused now, before any handler sees it (as HTTP/1.1 refuses it);
 * a handler that streams its body is served now, its body handed on as
 * it comes; so is one whose large body the core gathers. */
static void
requestHead(Http2Conn* c, Http2Stream* st)
{
    bool streams;

    if (st->answered || requestBuildOnce(c, st) != 0) {
        return; /* served, or refused, at its END_STREAM */
    }
    /* Its body is judged by its route's limits from its first byte. */
    corRequestLimits(&st->r);
    if (corHttp2BodyAnnounced(st) != 0) {
        corHttp2StreamRefuse(c, st, 413);
        return;
    }
    streams = corRequestBodyStreams(&st->r);
    if (!(streams || corHttpBodyLarge(&st->r))
        || corRequestBodyBegin(&st->r) != 0) {
        return;
    }
    st->gathered = !streams;
    st->served = true;
    corRequestServe(&st->r, &http2Ops, st);
}

/* The request came whole (its END_STREAM): serve it. */
static void
requestReady(Http2Conn* c, Http2Stream* st)
{
    int status;

    if (st->r.bodyIn != NULL) {
        corRequestBodyEnd(&st->r, 0); /* answered or not: it is served */
        return;
    }
    if (st->answered) {
        return; /* refused already (a body past the limit) */
    }
    status = requestBuildOnce(c, st);
    if (status != 0) {
        corHttp2StreamRefuse(c, st, status);
        return;
    }
    /* No body is "", as HTTP/1's: a handler may copy it, length 0. */
    st->r.body = st->body.data != NULL ? (const char*)st->body.data : "";
    st->r.bodyLen = st->body.len;
    st->served = true;
    corRequestServe(&st->r, &http2Ops, st);
}

/* A piece of a streamed body, to its handler; its window opens as the
 * handler takes it (bodyConsumed). Past limits.body_bytes the body fails
 * and the stream is refused (corHttp2StreamOverLimit). */
static int
bodyPass(Http2Conn* c, Http2Stream* st, const uint8_t* data, size_t len)
{
    CorRequest* r = &st->r;

    if (corLimitsBody(r, r->bodyLen + len) != 0 || st->bodyFailed) {
        nghttp2_session_consume(c->session, st->id, len);
        if (!st->bodyFailed) {
            st->bodyFailed = true;
            corRequestBodyEnd(r, -EMSGSIZE);
            /* One the core gathers no handler saw: the core answers it
             * 413, as one read here, said here as every refusal is. */
            if (!st->gathered) {
                corHttp2StreamOverLimit(c, st);
            } else {
                corHttp2RefusalSay(st, 413);
            }
        }
        return 0;
    }
    st->bodyUnread += len;
    if (corRequestBodyPut(r, data, len) != 0) {
        st->bodyFailed = true;
        corRequestBodyEnd(r, -ENOMEM);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

int
corHttp2StreamData(nghttp2_session* s, uint8_t flags, int32_t id,
                   const uint8_t* data, size_t len, void* arg)
{
    Http2Conn* c = arg;
    Http2Stream* st = streamOf(s, id);

    (void)flags;
    if (st != NULL && st->r.bodyIn != NULL) {
        return bodyPass(c, st, data, len);
    }
    /* Gathered whole (or dropped): the window opens at once. */
    nghttp2_session_consume(s, id, len);
    if (st == NULL || st->answered) {
        return 0;
    }
    if (corLimitsBody(&st->r, st->body.len + len) != 0) {
        /* Answered now, not once all of it came. */
        int status = requestBuildOnce(c, st);

        st->r.bodyLen = st->body.len + len;
        corHttp2StreamRefuse(c, st, status != 0 ? status : 413);
        return 0;
    }
    if (corBufAppend(&st->body, data, len) != 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

int
corHttp2StreamFrame(Http2Conn* c, const nghttp2_frame* f)
{
    Http2Stream* st;

    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) {
        return 0;
    }
    st = streamOf(c->session, f->hd.stream_id);
    if (st == NULL) {
        return 0;
    }
    /* After the head, each frame of the body restarts its timer. */
    st->bodyMs = corEvNow(c->k.loop);
    if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        st->peerEnded = true;
        requestReady(c, st);
    } else if (f->hd.type == NGHTTP2_HEADERS
               && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
        requestHead(c, st);
    }
    return 0;
}

void
corHttp2StreamSent(Http2Conn* c, const nghttp2_frame* f)
{
    Http2Stream* st;

    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
        || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        return;
    }
    st = streamOf(c->session, f->hd.stream_id);
    if (st != NULL && (st->refuse != 0 || st->r.bodyIn != NULL)
        && !st->peerEnded) {
        /* Refused mid-body, or answered before the body a handler
         * streams came whole: the rest need not come (RFC 9113 8.1). */
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->id,
                                  NGHTTP2_NO_ERROR);
    }
}

/* The stream is off the wire (closed, or its connection gone): one not
 * served is freed; the core hears of a served one once its answer is
 * whole on this side: now, or when its handler (or its stream's
 * producer, cancelled) is done. cut: it did not end as it should. */
static void
streamGone(Http2Stream* st, bool cut)
{
    st->closed = true;
    if (st->r.bodyIn != NULL && !st->peerEnded) {
        corRequestBodyEnd(&st->r, -ECONNRESET);
    }
    if (st->conn != NULL && st->bodyUnread > 0) {
        /* What its handler will not take still opens the connection's
         * window (nghttp2 counts it there with no stream). */
        nghttp2_session_consume(st->conn->session, st->id,
                                (size_t)st->bodyUnread);
        st->bodyUnread = 0;
    }
    if (!st->served || (st->overruled && st->released)) {
        streamUnlink(st);
        streamFree(st);
        return;
    }
    if (st->sent || st->overruled) {
        return; /* an overruled one: its release frees it */
    }
    if (!st->answered || (st->r.stream != NULL && !st->ended)) {
        corRequestCancel(&st->r); /* done or streamEnd sends it */
        return;
    }
    st->sent = true;
    st->r.cut |= cut;
    corRequestSent(&st->r); /* st may be gone after */
}

int
corHttp2StreamClose(nghttp2_session* s, int32_t id, uint32_t code, void* arg)
{
    Http2Conn* c = arg;
    Http2Stream* st = streamOf(s, id);

    if (c->decoding == st) {
        c->decoding = NULL;
    }
    if (st != NULL) {
        nghttp2_session_set_stream_user_data(s, id, NULL);
        streamGone(st, code != NGHTTP2_NO_ERROR);
    }
    return 0;
}

/* ---- The core's side ----------------------------------------------------- */

/* Whether the core's answer to st is its refusal at a limit (no handler
 * ran) of a gRPC call, which goes in gRPC's form. */
static bool
grpcRefused(const Http2Stream* st)
{
    return st->r.handler == NULL && corLimitsText(st->r.status) != NULL
           && corHttp2Grpc(st);
}

static void
requestDone(CorRequest* r)
{
    Http2Stream* st = corContainerOf(r, Http2Stream, r);
    Http2Conn* c = st->conn;
    int rc;

    if (c == NULL || st->closed || st->overruled) {
        if (r->stream == NULL) { /* else its end sends it */
            st->sent = true;
            r->cut = true;
            corRequestSent(r);
        }
        return;
    }
    rc = grpcRefused(st) ? corHttp2RefusalSubmit(c, st, r->status)
                         : responseSubmit(c, st);
    if (rc != 0) {
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->id,
                                  NGHTTP2_INTERNAL_ERROR);
    }
    corKitConnKick(&c->k);
}

static void
streamResume(Http2Stream* st)
{
    Http2Conn* c = st->conn;

    if (c == NULL || st->closed) {
        return;
    }
    if (st->deferred) {
        st->deferred = false;
        nghttp2_session_resume_data(c->session, st->id);
    }
    corKitConnKick(&c->k);
}

static void
streamData(CorRequest* r, const void* data, size_t len)
{
    Http2Stream* st = corContainerOf(r, Http2Stream, r);

    if (st->conn == NULL || st->closed || st->overruled
        || !corHttpBodyAllowed(r, r->status)) {
        return;
    }
    if (corBufAppend(&st->streamed, data, len) != 0) {
        streamAbort(r);
        return;
    }
    streamResume(st);
}

static void
streamEnd(CorRequest* r)
{
    Http2Stream* st = corContainerOf(r, Http2Stream, r);

    st->ended = true;
    if (st->conn == NULL || st->closed || st->overruled) {
        if (!st->sent) {
            st->sent = true;
            r->cut = true;
            corRequestSent(r);
        }
        return;
    }
    streamResume(st);
}

/* The stream failed midway: RST_STREAM says so (the peer sees it cut). */
static void
streamAbort(CorRequest* r)
{
    Http2Stream* st = corContainerOf(r, Http2Stream, r);

    r->cut = true;
    if (st->conn == NULL || st->closed || st->overruled) {
        streamEnd(r);
        return;
    }
    nghttp2_submit_rst_stream(st->conn->session, NGHTTP2_FLAG_NONE, st->id,
                              NGHTTP2_INTERNAL_ERROR);
    corKitConnKick(&st->conn->k);
}

static void
bodyConsumed(CorRequest* r, size_t n)
{
    Http2Stream* st = corContainerOf(r, Http2Stream, r);

    if (st->conn == NULL || st->closed || st->overruled) {
        return; /* given back at the close, or the refusal */
    }
    st->bodyUnread -= n;
    nghttp2_session_consume(st->conn->session, st->id, n);
    corKitConnKick(&st->conn->k);
}

static bool
streamAlive(const CorRequest* r)
{
    const Http2Stream* st = corContainerOf(r, Http2Stream, r);

    return st->conn != NULL && !st->closed && !st->overruled;
}

static size_t
streamBacklog(const CorRequest* r)
{
    return corBufPending(&corContainerOf(r, Http2Stream, r)->streamed);
}

static void
requestRelease(CorRequest* r)
{
    Http2Stream* st = corContainerOf(r, Http2Stream, r);

    if (st->overruled && !st->closed && st->conn != NULL) {
        st->released = true; /* its refusal still goes: freed at the
                              * stream's close */
        return;
    }
    streamUnlink(st);
    streamFree(st);
}

/* ---- The connection's walks ---------------------------------------------- */

void
corHttp2StreamsDetach(Http2Conn* c)
{
    while (!corListEmpty(&c->streams)) {
        Http2Stream* st = corContainerOf(corListFirst(&c->streams), Http2Stream,
                                         link);

        streamUnlink(st);
        streamGone(st, true); /* finishes into the void */
    }
}

void
corHttp2StreamsDrained(Http2Conn* c)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &c->streams)
    {
        Http2Stream* st = corContainerOf(node, Http2Stream, link);

        if (st->drained) {
            st->drained = false;
            corResponseStreamDrained(&st->r);
        }
    }
}

bool
corHttp2StreamsStalled(Http2Conn* c)
{
    bool connShut = nghttp2_session_get_remote_window_size(c->session) <= 0;
    CorList* node;
    CorList* next;

    corListForEach(node, next, &c->streams)
    {
        Http2Stream* st = corContainerOf(node, Http2Stream, link);
        const CorRequest* r = &st->r;
        bool waiting;

        if (!st->answered || st->closed || st->overruled) {
            continue; /* an overruled one's r is its handler's still */
        }
        waiting = r->stream != NULL ? corBufPending(&st->streamed) > 0
                                    : st->sendOff < r->responseLen && !r->head;
        if (waiting
            && (connShut
                || nghttp2_session_get_stream_remote_window_size(c->session,
                                                                 st->id)
                       <= 0)) {
            return true;
        }
    }
    return false;
}

uint64_t
corHttp2StreamsDeadline(Http2Conn* c, uint64_t now)
{
    uint64_t next = 0;
    CorList* node;
    CorList* next2;

    corListForEach(node, next2, &c->streams)
    {
        Http2Stream* st = corContainerOf(node, Http2Stream, link);
        uint64_t at;

        /* A body the core gathers is timed as one read here is. */
        if ((st->served && !(st->gathered && !st->peerEnded && !st->bodyFailed))
            || st->answered || st->closed) {
            continue;
        }
        at = corHttpStreamDue(&st->r, st->startMs, st->bodyMs, now, "http",
                              c->peerName);
        if (at == 0) {
            nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, st->id,
                                      NGHTTP2_CANCEL);
            if (st->served) {
                st->bodyFailed = true; /* the core ends it: nothing more */
                corRequestBodyEnd(&st->r, -ETIMEDOUT);
                continue;
            }
            st->answered = true; /* reset: nothing more to time */
        } else if (next == 0 || at < next) {
            next = at;
        }
    }
    return next;
}
