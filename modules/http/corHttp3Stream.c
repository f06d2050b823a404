/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/3 request stream as a request (docs/http3.md): its fields,
 * decoded by nghttp3 (QPACK), are copied into the stream as they come,
 * its body gathered, and once the stream ended it is served by the core
 * like any request (the same routes, hooks, handlers and limits as
 * HTTP/1's and HTTP/2's); a handler sees r->version "HTTP/3".
 *
 * A request whose handler streams its body (CorHandler.streamBody), or
 * whose body may pass limits.body_memory (the core gathers it then, to a
 * file past that: corRequestBodySpool.c), is served at its head instead,
 * as HTTP/2's is, and its DATA handed on as it comes (corRequestBodyPut).
 * The QUIC stream's window then opens only as the handler takes the bytes
 * (bodyConsumed), so what waits unread is bounded by the window, not by
 * the body's size.
 *
 * The answer goes out through an nghttp3 data reader over the stream's
 * out queue (corHttp3Out.c): the handler's bytes borrowed, a file read a
 * piece at a time as the peer acknowledges the last ones, a streamed
 * body's pieces copied as they come (streamBacklog holds the producer
 * back). The core hears the answer was sent (corRequestSent) once the
 * stream closed: acknowledged whole, or reset.
 *
 * A stream owns what its request reads, so a connection that closes
 * under a handler frees nothing the handler still uses: the stream
 * finishes into the void and is freed at its release.
 */
#include "corHttp3Int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Past this many times limits.header_bytes a field section is no longer
 * kept (it is answered 431): a few QPACK bytes may decode to a flood. */
#define HEADER_BOMB_FACTOR 4
/* A file body is read ahead of the peer's acknowledgements so far. */
#define FILE_AHEAD (1024 * 1024)
#define FILE_PIECE (64 * 1024)
/* Response fields beside the handler's: :status, server, date,
 * content-type, content-length. */
#define OWN_FIELDS 5

static void requestDone(CorRequest* r);
static void requestRelease(CorRequest* r);
static void streamData(CorRequest* r, const void* data, size_t len);
static void streamEnd(CorRequest* r);
static bool streamAlive(const CorRequest* r);
static size_t streamBacklog(const CorRequest* r);
static void streamAbort(CorRequest* r);
static void bodyConsumed(CorRequest* r, size_t n);

static const CorProtocolOps http3Ops = {
    .done = requestDone,
    .release = requestRelease,
    .streamData = streamData,
    .streamEnd = streamEnd,
    .streamAlive = streamAlive,
    .streamBacklog = streamBacklog,
    .streamAbort = streamAbort,
    .bodyConsumed = bodyConsumed,
    .kind = COR_PROTOCOL_HTTP3,
};

/* ---- A stream's life ----------------------------------------------------- */

/* A block from the loop's cache (corHttpBlocks.c: one of malloc's) back
 * to it; to malloc once the connection is gone. */
static void
blockFree(const Http3Stream* st, void* p)
{
    if (p != NULL && st->conn != NULL) {
        corHttpBlockGive(st->conn->hl, p);
    } else {
        free(p);
    }
}

static void
streamFree(Http3Stream* st)
{
    if (corListLinked(&st->link)) {
        corListRemove(&st->link);
    }
    corHttp3OutFree(&st->out);
    free(st->raw.data);
    free(st->body.data);
    blockFree(st, st->headers);
    blockFree(st, st->target);
    free(st);
}

/* The stream is off the wire (closed, or its connection gone): one not
 * served is freed; the core hears of a served one once its answer is
 * whole on this side: now, or when its handler (or its stream's
 * producer, cancelled) is done. cut: it did not end as it should. */
static void
streamGone(Http3Stream* st, bool cut)
{
    CorRequest* r = &st->r;

    st->closed = true;
    if (r->bodyIn != NULL && !st->peerEnded && !st->bodyStopped) {
        st->bodyStopped = true;
        corRequestBodyEnd(r, -ECONNRESET);
    }
    if (!st->served || (st->overruled && st->released)) {
        streamFree(st);
        return;
    }
    if (st->sent || st->overruled) {
        return; /* an overruled one: its release frees it */
    }
    if (!st->answered || (r->stream != NULL && !st->ended)) {
        corRequestCancel(r); /* done or streamEnd sends it */
        return;
    }
    st->sent = true;
    r->cut |= cut;
    corRequestSent(r); /* st may be gone after */
}

void
corHttp3StreamsDetach(Http3Conn* c)
{
    while (!corListEmpty(&c->streams)) {
        Http3Stream* st = corContainerOf(corListFirst(&c->streams), Http3Stream,
                                         link);

        corListRemove(&st->link);
        st->conn = NULL;
        streamGone(st, true);
    }
}

void
corHttp3StreamsDrained(Http3Conn* c)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &c->streams)
    {
        Http3Stream* st = corContainerOf(node, Http3Stream, link);

        if (st->drained) {
            st->drained = false;
            corResponseStreamDrained(&st->r);
        }
    }
}

/* Whether st, served at its head, still has its body coming. */
static bool
bodyComing(const Http3Stream* st)
{
    return st->r.bodyIn != NULL && !st->peerEnded && !st->bodyStopped;
}

/* When st's request must have come whole, or its body's next piece. */
static uint64_t
streamDeadline(const Http3Stream* st, const CorLimits* l)
{
    uint64_t at = st->startMs + l->requestTimeoutMs;

    if (st->bodyMs != 0 && st->bodyMs + l->bodyTimeoutMs < at) {
        at = st->bodyMs + l->bodyTimeoutMs;
    }
    return at;
}

uint64_t
corHttp3StreamsDeadline(Http3Conn* c, uint64_t now)
{
    const CorLimits* l = corLimits();
    uint64_t next = 0;
    CorList* node;
    CorList* after;

    corListForEach(node, after, &c->streams)
    {
        Http3Stream* st = corContainerOf(node, Http3Stream, link);
        uint64_t at;

        /* A body handed on as it comes is timed as one gathered here. */
        if ((st->served && !bodyComing(st)) || st->answered) {
            continue; /* whole, or answered already */
        }
        at = streamDeadline(st, st->r.limits != NULL ? st->r.limits : l);
        if (at <= now) {
            corLimitsRefused("http3", c->peerName,
                             st->startMs + l->requestTimeoutMs <= now
                                 ? "a request that did not come whole in time"
                                 : "a request body that stalled",
                             408);
            ngtcp2_conn_shutdown_stream(c->quic, st->id,
                                        NGHTTP3_H3_REQUEST_CANCELLED);
            corHttp3ConnKick(c); /* the reset goes out */
            if (st->served) {
                st->bodyStopped = true; /* the core ends it */
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

/* ---- The request --------------------------------------------------------- */

/* The request of a whole field section ("name\0value\0" each in raw): its
 * pseudo-headers say the method and the target, :authority is its Host
 * (when it has none). Returns 0, or a status to answer instead. */
static int
requestBuild(Http3Conn* c, Http3Stream* st)
{
    const char* raw = (const char*)st->raw.data;
    const char* end = raw + st->raw.len;
    const char* path = NULL;
    const char* authority = NULL;
    bool host = false;
    size_t count = 0;
    size_t pathLen;
    CorRequest* r = &st->r;

    for (const char* p = raw; p < end; p += strlen(p) + 1) {
        count++;
    }
    st->headers = corHttpBlockTake(c->hl, (count / 2 + 1) * sizeof(CorHeader));
    if (st->headers == NULL) {
        return 503;
    }
    for (const char* name = raw; name < end;) {
        const char* value = name + strlen(name) + 1;
        size_t valueLen = strlen(value);

        if (name[0] != ':') {
            host |= strcmp(name, "host") == 0;
            st->headers[r->headerCount++] = (CorHeader){
                .name = name,
                .nameLen = strlen(name),
                .value = value,
                .valueLen = valueLen,
            };
        } else if (strcmp(name, ":method") == 0) {
            r->method = value;
            r->methodLen = valueLen;
        } else if (strcmp(name, ":path") == 0) {
            path = value;
        } else if (strcmp(name, ":authority") == 0) {
            authority = value;
        }
        name = value + valueLen + 1;
    }
    if (!host && authority != NULL) {
        st->headers[r->headerCount++] = (CorHeader){
            .name = "host",
            .nameLen = 4,
            .value = authority,
            .valueLen = strlen(authority),
        };
    }
    r->headers = st->headers;
    r->head = r->method != NULL && strcmp(r->method, "HEAD") == 0;
    r->remote = st->remote;
    r->secure = true;
    r->version = "HTTP/3";
    if (r->method == NULL || path == NULL) {
        /* CONNECT has no :path: not served here (nor RFC 9220's
         * extended CONNECT, which SETTINGS does not offer). */
        r->method = r->method != NULL ? r->method : "-";
        r->methodLen = strlen(r->method);
        return 400;
    }
    pathLen = strlen(path);
    st->target = corHttpBlockTake(c->hl, 2 * pathLen + 2);
    if (st->target == NULL) {
        return 503;
    }
    return corHttpTargetSet(r, st->target, path, pathLen) == 0 ? 0 : 400;
}

static void
nvPut(nghttp3_nv* nv, size_t* n, const char* name, size_t nameLen,
      const char* value, size_t valueLen)
{
    nv[(*n)++] = (nghttp3_nv){ (uint8_t*)(uintptr_t)name,
                               (uint8_t*)(uintptr_t)value, nameLen, valueLen,
                               NGHTTP3_NV_FLAG_NONE };
}

/* The fields of list into nv, their names lowercased into lower (room
 * for all of them), less those HTTP/3 forbids. Returns what lower used. */
static size_t
fieldsPut(nghttp3_nv* nv, size_t* n, char* lower, const CorHeader* list,
          unsigned count)
{
    size_t used = 0;

    for (unsigned i = 0; i < count; i++) {
        const CorHeader* h = &list[i];
        size_t len = corHttpFieldLower(lower + used, h);

        if (len > 0) {
            nvPut(nv, n, lower + used, len, h->value, h->valueLen);
            used += len;
        }
    }
    return used;
}

/* The body's end: its trailers, when it has some, end the stream. */
static void
bodyEnd(nghttp3_conn* h3, Http3Stream* st, uint32_t* flags)
{
    const CorRequest* r = &st->r;
    nghttp3_nv* nv;
    size_t n = 0;

    *flags |= NGHTTP3_DATA_FLAG_EOF;
    if (r->responseTrailerCount == 0) {
        return;
    }
    nv = malloc(r->responseTrailerCount * sizeof(*nv)
                + corHttpNamesLen(r->responseTrailers, r->responseTrailerCount)
                + 1);
    if (nv == NULL) {
        return; /* ends without them */
    }
    fieldsPut(nv, &n, (char*)(nv + r->responseTrailerCount),
              r->responseTrailers, r->responseTrailerCount);
    if (nghttp3_conn_submit_trailers(h3, st->id, nv, n) == 0) {
        *flags |= NGHTTP3_DATA_FLAG_NO_END_STREAM;
    }
    free(nv);
}

/* A file body: read ahead of the acknowledgements, up to FILE_AHEAD. */
static void
fileRead(Http3Stream* st)
{
    const CorRequest* r = &st->r;

    while (!st->ended && st->out.unsentLen + st->out.flying < FILE_AHEAD) {
        size_t n = r->responseLen - st->fileOff < FILE_PIECE
                       ? (size_t)(r->responseLen - st->fileOff)
                       : FILE_PIECE;
        uint8_t buf[FILE_PIECE];
        ssize_t got = n > 0
                          ? pread(r->fileFd, buf, n,
                                  (off_t)(r->fileOffset + (int64_t)st->fileOff))
                          : 0;

        if (got < (ssize_t)n || corHttp3OutAdd(&st->out, buf, n, true) != 0) {
            st->ended = true; /* cut short: the client sees it so */
            st->r.cut = true;
            return;
        }
        st->fileOff += n;
        st->ended = st->fileOff == r->responseLen;
    }
}

static nghttp3_ssize
bodyRead(nghttp3_conn* h3, int64_t id, nghttp3_vec* vec, size_t count,
         uint32_t* flags, void* arg, void* streamArg)
{
    Http3Stream* st = streamArg;
    CorRequest* r = &st->r;
    size_t n;

    (void)id;
    (void)arg;
    if (r->fileFd >= 0 && r->stream == NULL) {
        fileRead(st);
    }
    n = corHttp3OutTake(&st->out, vec, count);
    if (n == 0 && !st->ended) {
        st->deferred = true;
        return NGHTTP3_ERR_WOULDBLOCK;
    }
    for (size_t i = 0; i < n; i++) {
        r->bodySent += vec[i].len;
    }
    st->drained = r->stream != NULL;
    if (st->ended && st->out.unsent == NULL) {
        bodyEnd(h3, st, flags);
    }
    return (nghttp3_ssize)n;
}

/* Submit the answer: its head, and its body through bodyRead. Returns 0
 * or -1. */
static int
responseSubmit(Http3Conn* c, Http3Stream* st, int status, bool body)
{
    CorRequest* r = &st->r;
    size_t nvCount = r->responseHeaderCount + r->responseTrailerCount
                     + OWN_FIELDS;
    size_t lowerLen = corHttpNamesLen(r->responseHeaders,
                                      r->responseHeaderCount)
                      + corHttpNamesLen(r->responseTrailers,
                                        r->responseTrailerCount);
    nghttp3_nv* nv = malloc(nvCount * sizeof(*nv) + lowerLen + 1);
    char* lower = (char*)(nv + nvCount);
    nghttp3_data_reader dr = { .read_data = bodyRead };
    char statusText[4];
    char length[24];
    size_t n = 0;
    int rc;

    if (nv == NULL) {
        return -1;
    }
    corHttpPutDecimal(statusText, (size_t)status);
    nvPut(nv, &n, ":status", 7, statusText, 3);
    nvPut(nv, &n, "server", 6, "cor", 3);
    nvPut(nv, &n, "date", 4, corHttpDate(c->hl), 29);
    if (r->contentType != NULL) {
        nvPut(nv, &n, "content-type", 12, r->contentType,
              strlen(r->contentType));
    }
    if (r->stream == NULL && (corHttpBodyAllowed(r, status) || r->head)) {
        nvPut(nv, &n, "content-length", 14, length,
              (size_t)(corHttpPutDecimal(length, r->responseLen) - length));
    }
    lowerLen = fieldsPut(nv, &n, lower, r->responseHeaders,
                         r->responseHeaderCount);
    if (!body) {
        /* No DATA follows: the trailers ride in the one HEADERS. */
        fieldsPut(nv, &n, lower + lowerLen, r->responseTrailers,
                  r->responseTrailerCount);
    }
    r->status = status;
    rc = nghttp3_conn_submit_response(c->h3, st->id, nv, n, body ? &dr : NULL);
    free(nv);
    st->answered = true;
    return rc == 0 ? 0 : -1;
}

/* The answer r holds: its body queued (borrowed when in memory). */
static int
answerSubmit(Http3Conn* c, Http3Stream* st)
{
    CorRequest* r = &st->r;
    int status = r->status >= 200 && r->status <= 599 ? r->status : 500;
    bool body = r->stream != NULL
                || (corHttpBodyAllowed(r, status) && r->responseLen > 0);

    if (body && r->stream == NULL && r->fileFd < 0) {
        if (corHttp3OutAdd(&st->out, r->responseBody, r->responseLen, false)
            != 0) {
            return -1;
        }
        st->ended = true;
    }
    st->ended |= r->stream == NULL && r->fileFd >= 0 && r->responseLen == 0;
    return responseSubmit(c, st, status, body);
}

/* Reset st's sending side (the client sees its answer cut). */
static void
streamReset(Http3Conn* c, Http3Stream* st, uint64_t code)
{
    ngtcp2_conn_shutdown_stream(c->quic, st->id, code);
    corHttp3ConnKick(c);
}

/* An overruled stream's 413: its text, then the stream's end. */
static nghttp3_ssize
refusalRead(nghttp3_conn* h3, int64_t id, nghttp3_vec* vec, size_t count,
            uint32_t* flags, void* arg, void* streamArg)
{
    Http3Stream* st = streamArg;
    size_t n = corHttp3OutTake(&st->out, vec, count);

    (void)h3;
    (void)id;
    (void)arg;
    if (st->out.unsent == NULL) {
        *flags |= NGHTTP3_DATA_FLAG_EOF;
    }
    return (nghttp3_ssize)n;
}

/* 413 for st, served, in its handler's stead: built of its own, as its
 * handler, still running, writes its request's answer fields. Returns 0
 * or -1. */
static int
refusalSubmit(Http3Conn* c, Http3Stream* st)
{
    const char* text = corLimitsText(413);
    nghttp3_data_reader dr = { .read_data = refusalRead };
    nghttp3_nv nv[5];
    char length[24];
    size_t n = 0;

    if (corHttp3OutAdd(&st->out, text, strlen(text), false) != 0) {
        return -1;
    }
    st->answered = true;
    nvPut(nv, &n, ":status", 7, "413", 3);
    nvPut(nv, &n, "server", 6, "cor", 3);
    nvPut(nv, &n, "date", 4, corHttpDate(c->hl), 29);
    nvPut(nv, &n, "content-type", 12, "text/plain", 10);
    nvPut(nv, &n, "content-length", 14, length,
          (size_t)(corHttpPutDecimal(length, strlen(text)) - length));
    return nghttp3_conn_submit_response(c->h3, st->id, nv, n, &dr) == 0 ? 0
                                                                        : -1;
}

/* Refuse st, never served, with status and its text (a limit's is said
 * and counted); what it still sends is not read. */
static void
streamRefuse(Http3Conn* c, Http3Stream* st, int status)
{
    const char* text = corHttpStatusText(status);

    if (corLimitsText(status) != NULL) {
        corLimitsRefused("http3", c->peerName, corLimitsText(status), status);
    }
    st->r.contentType = "text/plain";
    st->r.responseBody = text;
    st->r.responseLen = strlen(text);
    st->r.fileFd = -1;
    st->r.status = status;
    ngtcp2_conn_shutdown_stream_read(c->quic, st->id, NGHTTP3_H3_NO_ERROR);
    if (answerSubmit(c, st) != 0) {
        streamReset(c, st, NGHTTP3_H3_INTERNAL_ERROR);
    }
    corHttp3ConnKick(c);
}

/* The request from its fields, once: 0, or the status to refuse it
 * with. */
static int
requestBuildOnce(Http3Conn* c, Http3Stream* st)
{
    if (!st->built) {
        st->built = true;
        if (st->refuse == 0) {
            st->refuse = (unsigned)requestBuild(c, st);
        }
    }
    return (int)st->refuse;
}

/* The head came, its body to follow: a handler that streams its body is
 * served now, its body handed on as it comes; so is one whose large body
 * the core gathers. Any other is served at the stream's end. */
static void
requestHead(Http3Conn* c, Http3Stream* st)
{
    bool streams;

    if (st->answered || requestBuildOnce(c, st) != 0) {
        return; /* refused at its end */
    }
    /* Its body is judged by its route's limits from its first byte. */
    corRequestLimits(&st->r);
    streams = corRequestBodyStreams(&st->r);
    if (!(streams || corHttpBodyLarge(&st->r))
        || corRequestBodyBegin(&st->r) != 0) {
        return;
    }
    st->served = true;
    corRequestServe(&st->r, &http3Ops, st);
}

/* The request came whole: serve it, once (nghttp3 says so at the end of
 * its HEADERS when the FIN came with them, and at the stream's end). */
static void
requestReady(Http3Conn* c, Http3Stream* st)
{
    bool coming = bodyComing(st);
    int status;

    st->peerEnded = true;
    if (coming) {
        corRequestBodyEnd(&st->r, 0); /* served at its head */
        return;
    }
    if (st->served || st->answered) {
        return; /* served at its fin already, or refused */
    }
    status = requestBuildOnce(c, st);
    if (status != 0) {
        streamRefuse(c, st, status);
        return;
    }
    /* No body is "", as HTTP/1's: a handler may copy it, length 0. */
    st->r.body = st->body.data != NULL ? (const char*)st->body.data : "";
    st->r.bodyLen = st->body.len;
    st->served = true;
    corRequestServe(&st->r, &http3Ops, st);
}

/* ---- nghttp3's callbacks ------------------------------------------------- */

static int
beginHeaders(nghttp3_conn* h3, int64_t id, void* arg, void* streamArg)
{
    Http3Conn* c = arg;
    Http3Stream* st;

    (void)streamArg;
    st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    }
    st->conn = c;
    st->id = id;
    st->r.fileFd = -1;
    st->startMs = corEvNow(c->hl->loop);
    memcpy(st->remote, c->peerName, sizeof(st->remote) - 1);
    if (strrchr(st->remote, ':') != NULL) {
        *strrchr(st->remote, ':') = '\0'; /* "addr:port", "[v6]:port" */
    }
    corListAppend(&c->streams, &st->link);
    nghttp3_conn_set_stream_user_data(h3, id, st);
    corHttp3Count(H3_COUNT_STREAM);
    return 0;
}

static int
recvHeader(nghttp3_conn* h3, int64_t id, int32_t token, nghttp3_rcbuf* name,
           nghttp3_rcbuf* value, uint8_t flags, void* arg, void* streamArg)
{
    Http3Stream* st = streamArg;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name);
    nghttp3_vec v = nghttp3_rcbuf_get_buf(value);

    (void)h3;
    (void)id;
    (void)token;
    (void)flags;
    (void)arg;
    st->listSize += n.len + v.len + 32;
    if (st->listSize > corLimits()->headerBytes * HEADER_BOMB_FACTOR) {
        st->refuse = 431;
        return 0; /* no longer kept */
    }
    if (corBufAppendField(&st->raw, n.base, n.len, v.base, v.len) != 0) {
        st->refuse = 503;
    }
    return 0;
}

static int
endHeaders(nghttp3_conn* h3, int64_t id, int fin, void* arg, void* streamArg)
{
    (void)h3;
    (void)id;
    if (fin) {
        requestReady(arg, streamArg);
    } else {
        requestHead(arg, streamArg);
    }
    return 0;
}

static int
endStream(nghttp3_conn* h3, int64_t id, void* arg, void* streamArg)
{
    (void)h3;
    (void)id;
    if (streamArg != NULL) {
        requestReady(arg, streamArg);
    }
    return 0;
}

/* The windows of st's stream and of its connection open by n bytes. */
static void
windowOpen(Http3Conn* c, const Http3Stream* st, uint64_t n)
{
    ngtcp2_conn_extend_max_stream_offset(c->quic, st->id, n);
    ngtcp2_conn_extend_max_offset(c->quic, n);
}

/* A body handed on is read no more: what its handler left unread opens
 * the connection's window, and the client is asked to stop sending
 * (H3_NO_ERROR once answered, RFC 9114 4.1). */
static void
bodyStop(Http3Conn* c, Http3Stream* st, uint64_t code)
{
    st->bodyStopped = true;
    ngtcp2_conn_extend_max_offset(c->quic, st->bodyUnread);
    st->bodyUnread = 0;
    if (!st->peerEnded) {
        ngtcp2_conn_shutdown_stream_read(c->quic, st->id, code);
    }
    corHttp3ConnKick(c);
}

/* A body served at its head passed its route's body_bytes. One the core
 * gathers no handler saw: the core answers it 413. A handler that
 * streams it reads -EMSGSIZE; while its answer has not begun the stream
 * is refused 413 in its stead, as HTTP/2's (corHttp2StreamOverLimit):
 * the handler cancelled, its answer going nowhere; once begun, the
 * stream is reset (the client must see it cut). The rest of the body is
 * not read. */
static void
bodyOverLimit(Http3Conn* c, Http3Stream* st)
{
    CorRequest* r = &st->r;
    bool refuse = corRequestBodyStreams(r) && !st->answered;

    corHttpRefusalSay(r, "http3", st->remote, 413);
    bodyStop(c, st,
             refuse ? NGHTTP3_H3_NO_ERROR : NGHTTP3_H3_REQUEST_CANCELLED);
    corRequestBodyEnd(r, -EMSGSIZE);
    if (st->answered) {
        streamReset(c, st, NGHTTP3_H3_REQUEST_CANCELLED);
    }
    if (!refuse) {
        return;
    }
    st->overruled = true;
    corRequestCancel(r);
    if (refusalSubmit(c, st) != 0) {
        streamReset(c, st, NGHTTP3_H3_INTERNAL_ERROR);
    }
}

/* A piece of a body served at its head, to its handler (or the core's
 * gathering); the window opens as it is taken (bodyConsumed), and past
 * the route's limits.body_bytes it is refused (bodyOverLimit). */
static void
bodyPass(Http3Conn* c, Http3Stream* st, const uint8_t* data, size_t len)
{
    CorRequest* r = &st->r;

    if (st->bodyStopped) {
        ngtcp2_conn_extend_max_offset(c->quic, len);
        return;
    }
    st->bodyMs = corEvNow(c->hl->loop);
    if (corLimitsBody(r, r->bodyLen + len) != 0) {
        ngtcp2_conn_extend_max_offset(c->quic, len);
        bodyOverLimit(c, st);
        return;
    }
    st->bodyUnread += len;
    if (corRequestBodyPut(r, data, len) != 0) {
        bodyStop(c, st, NGHTTP3_H3_INTERNAL_ERROR);
        corRequestBodyEnd(r, -ENOMEM);
    }
}

/* A piece of body: handed on when it was served at its head, else
 * gathered (its windows open at once, as it is copied), up to the most
 * body any route takes; past that the stream is refused 413 (the core
 * judges the route's own limit when it serves). */
static int
recvData(nghttp3_conn* h3, int64_t id, const uint8_t* data, size_t len,
         void* arg, void* streamArg)
{
    Http3Conn* c = arg;
    Http3Stream* st = streamArg;

    (void)h3;
    if (st->r.bodyIn != NULL) {
        bodyPass(c, st, data, len);
        return 0;
    }
    ngtcp2_conn_extend_max_stream_offset(c->quic, id, len);
    ngtcp2_conn_extend_max_offset(c->quic, len);
    if (st->answered) {
        return 0;
    }
    st->bodyMs = corEvNow(c->hl->loop);
    if (st->body.len + len > corLimits()->bodyBytesMost) {
        streamRefuse(c, st, 413);
        return 0;
    }
    if (corBufAppend(&st->body, data, len) != 0) {
        streamRefuse(c, st, 503);
    }
    return 0;
}

static int
deferredConsume(nghttp3_conn* h3, int64_t id, size_t consumed, void* arg,
                void* streamArg)
{
    Http3Conn* c = arg;

    (void)h3;
    (void)streamArg;
    ngtcp2_conn_extend_max_stream_offset(c->quic, id, consumed);
    ngtcp2_conn_extend_max_offset(c->quic, consumed);
    return 0;
}

static int
ackedData(nghttp3_conn* h3, int64_t id, uint64_t len, void* arg,
          void* streamArg)
{
    Http3Stream* st = streamArg;

    (void)arg;
    if (st == NULL) {
        return 0;
    }
    corHttp3OutAcked(&st->out, len);
    if (st->deferred && st->r.fileFd >= 0 && st->r.stream == NULL) {
        /* Room to read the file further. */
        st->deferred = false;
        nghttp3_conn_resume_stream(h3, id);
    }
    return 0;
}

static int
streamClose(nghttp3_conn* h3, int64_t id, uint64_t code, void* arg,
            void* streamArg)
{
    Http3Stream* st = streamArg;

    (void)h3;
    (void)id;
    if (st != NULL) {
        /* What its handler will not take opens the connection's window. */
        ngtcp2_conn_extend_max_offset(((Http3Conn*)arg)->quic, st->bodyUnread);
        st->bodyUnread = 0;
        corListRemove(&st->link);
        st->conn = NULL;
        streamGone(st, code != NGHTTP3_H3_NO_ERROR);
    }
    return 0;
}

static int
stopSending(nghttp3_conn* h3, int64_t id, uint64_t code, void* arg,
            void* streamArg)
{
    Http3Conn* c = arg;

    (void)h3;
    (void)streamArg;
    return ngtcp2_conn_shutdown_stream_read(c->quic, id, code) == 0
               ? 0
               : NGHTTP3_ERR_CALLBACK_FAILURE;
}

static int
resetStream(nghttp3_conn* h3, int64_t id, uint64_t code, void* arg,
            void* streamArg)
{
    Http3Conn* c = arg;

    (void)h3;
    (void)streamArg;
    return ngtcp2_conn_shutdown_stream_write(c->quic, id, code) == 0
               ? 0
               : NGHTTP3_ERR_CALLBACK_FAILURE;
}

const nghttp3_callbacks corHttp3Callbacks = {
    .acked_stream_data = ackedData,
    .stream_close = streamClose,
    .recv_data = recvData,
    .deferred_consume = deferredConsume,
    .begin_headers = beginHeaders,
    .recv_header = recvHeader,
    .end_headers = endHeaders,
    .stop_sending = stopSending,
    .end_stream = endStream,
    .reset_stream = resetStream,
};

/* ---- The core's side ----------------------------------------------------- */

static bool
gone(const Http3Stream* st)
{
    return st->conn == NULL || st->closed;
}

/* Whether what r's handler answers goes nowhere: its stream is gone, or
 * it was refused in its stead. */
static bool
answerVoid(const Http3Stream* st)
{
    return gone(st) || st->overruled;
}

static void
requestDone(CorRequest* r)
{
    Http3Stream* st = corContainerOf(r, Http3Stream, r);

    if (answerVoid(st)) {
        if (r->stream == NULL) { /* else its end sends it */
            st->sent = true;
            r->cut = true;
            corRequestSent(r);
        }
        return;
    }
    if (answerSubmit(st->conn, st) != 0) {
        streamReset(st->conn, st, NGHTTP3_H3_INTERNAL_ERROR);
    }
    if (bodyComing(st)) {
        /* Answered before the body its handler streams came whole: the
         * rest need not come. */
        bodyStop(st->conn, st, NGHTTP3_H3_NO_ERROR);
        corRequestBodyEnd(r, -ECONNRESET);
    }
    corHttp3ConnKick(st->conn);
}

/* More body to send: nghttp3 asks for it again. */
static void
streamResume(Http3Stream* st)
{
    if (gone(st)) {
        return;
    }
    if (st->deferred) {
        st->deferred = false;
        nghttp3_conn_resume_stream(st->conn->h3, st->id);
    }
    corHttp3ConnKick(st->conn);
}

static void
streamData(CorRequest* r, const void* data, size_t len)
{
    Http3Stream* st = corContainerOf(r, Http3Stream, r);

    if (answerVoid(st) || !corHttpBodyAllowed(r, r->status)) {
        return;
    }
    if (corHttp3OutAdd(&st->out, data, len, true) != 0) {
        streamAbort(r);
        return;
    }
    streamResume(st);
}

static void
streamEnd(CorRequest* r)
{
    Http3Stream* st = corContainerOf(r, Http3Stream, r);

    st->ended = true;
    if (answerVoid(st)) {
        if (!st->sent) {
            st->sent = true;
            r->cut = true;
            corRequestSent(r);
        }
        return;
    }
    streamResume(st);
}

/* The stream failed midway: a reset says so (the peer sees it cut). */
static void
streamAbort(CorRequest* r)
{
    Http3Stream* st = corContainerOf(r, Http3Stream, r);

    r->cut = true;
    if (answerVoid(st)) {
        streamEnd(r);
        return;
    }
    streamReset(st->conn, st, NGHTTP3_H3_INTERNAL_ERROR);
}

static void
bodyConsumed(CorRequest* r, size_t n)
{
    Http3Stream* st = corContainerOf(r, Http3Stream, r);

    if (gone(st) || st->bodyStopped) {
        return; /* given back at the close, or the stop */
    }
    st->bodyUnread -= n;
    windowOpen(st->conn, st, n);
    corHttp3ConnKick(st->conn);
}

static bool
streamAlive(const CorRequest* r)
{
    return !answerVoid(corContainerOf(r, Http3Stream, r));
}

static size_t
streamBacklog(const CorRequest* r)
{
    return (size_t)corContainerOf(r, Http3Stream, r)->out.unsentLen;
}

static void
requestRelease(CorRequest* r)
{
    Http3Stream* st = corContainerOf(r, Http3Stream, r);

    if (st->overruled && !gone(st)) {
        st->released = true; /* its refusal still goes: freed at the
                              * stream's close */
        return;
    }
    streamFree(st);
}
