/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An HTTP/2 connection on its loop (docs/http2.md): an nghttp2 server
 * session over the connection kit (corKit.h: the socket armed once,
 * edge-triggered, through the listener's transport, plain or TLS). What
 * comes is fed to nghttp2_session_mem_recv as it is read; what nghttp2
 * has to send is taken with nghttp2_session_mem_send into the kit's
 * output buffer, at most OUT_PUMP ahead of the socket, so a large answer
 * is never held whole: its data provider is asked for more as the socket
 * takes it (corHttp2Stream.c), and the peer's window bounds it too.
 *
 * The HTTP/1 connection hands a connection over here once it knows it
 * speaks HTTP/2: ALPN chose h2, or a plain listener with http2: on read
 * the client preface. The bytes read so far come with it.
 *
 * Defences. nghttp2 refuses the frame-level abuse it knows: a peer that
 * queues ACKs it never reads (SETTINGS and PING floods: NGHTTP2_ERR_
 * FLOODED), CONTINUATION floods (max_continuations), bad frames (GOAWAY
 * PROTOCOL_ERROR). Beside it, per connection and per second: RST_STREAMs
 * from the peer past rapid_reset_limit (CVE-2023-44487), PINGs or
 * SETTINGS past control_frame_limit, frames that make no progress past
 * idle_frame_limit (CVE-2019-9518: corHttp2Frames.c, which reads every
 * frame's head before nghttp2 takes it); a header list decoded past four
 * times the limit (an HPACK bomb: corHttp2Stream.c); and a stream whose
 * answer waits on a window the peer never opens, past
 * limits.send_timeout. Each ends that connection alone, with GOAWAY
 * (ENHANCE_YOUR_CALM), and is counted in /metrics; a violation of the
 * protocol (a bad preface, a HEADERS on a stream id the client skipped)
 * ends it with GOAWAY(PROTOCOL_ERROR).
 *
 * Ending. A drain sends GOAWAY in two steps, as RFC 9113 6.8 advises: a
 * notice (last stream 2^31-1) and a PING; once the PING's ACK says the
 * peer saw it (or after DRAIN_GRACE_MS), the GOAWAY with the last stream
 * taken. Every stream up to it is served, and the connection closes when
 * the last is answered. A stop resets what is left and closes.
 */
#include "corHttp2Int.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>

/* What one read asks for: a full DATA frame and its header. */
#define READ_ROOM (16384 + 9)
/* nghttp2's output is taken until this much waits for the socket. */
#define OUT_PUMP (128 * 1024)
/* Past this much unsent output, nothing more is read (the peer must
 * read first); above OUT_PUMP, which only control frames pass. */
#define OUT_HIGH_WATER (1024 * 1024)
/* An output buffer this large, once empty, goes back to malloc. */
#define OUT_KEEP (64 * 1024)
/* A drain's final GOAWAY follows its notice after the PING's ACK, or
 * this long at the latest. */
#define DRAIN_GRACE_MS 1000
/* A stop flushes what is queued for this long at most. */
#define STOP_FLUSH_MS 100
/* Rounds of output that a stream's producer may add in one go. */
#define OUTPUT_ROUNDS 8
/* A connection with no stream that wrote no frame for this long gives
 * its frame buffer's pages back (corHttp2Mem.c): after a quiet spell
 * rather than at each stream's end, so that a client's next request a
 * moment later costs no madvise and no page faults. A busy connection
 * (a stream began within this long of the one before) keeps its input,
 * output and TLS buffers, empty or not, until as long passed with no
 * frame written and nothing in them (a lull), open streams or not: under
 * h2load, whose streams all end at each turn, a connection took and
 * freed a 32 KiB input buffer, its output buffer grown by reallocs and
 * OpenSSL's two of 17 KiB at every turn. One that is not busy gives
 * each back as soon as it is empty, as before: a crowd of connections
 * that each ask once would otherwise hold them all at once, and leave
 * the heap's holes behind when they go. */
#define QUIET_MS 200

static void connClose(Http2Conn* c);
static void timerUpdate(Http2Conn* c);

/* ---- Output -------------------------------------------------------------- */

/* Take what nghttp2 has to send into the kit's buffer, up to OUT_PUMP.
 * Returns 0, or -1 (a fatal session error: close). */
static int
sendPump(Http2Conn* c)
{
    while (corBufPending(&c->k.out) < OUT_PUMP) {
        const uint8_t* data;
        ssize_t n = nghttp2_session_mem_send(c->session, &data);

        if (n < 0) {
            corLog(COR_LOG_DEBUG, "http2: %s: %s", c->peerName,
                   nghttp2_strerror((int)n));
            return -1;
        }
        if (n == 0) {
            break;
        }
        c->framedMs = corEvNow(c->k.loop);
        if (corBufAppend(&c->k.out, data, (size_t)n) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Whether c is done: nghttp2 wants nothing more (GOAWAY both ways, or
 * sent and its streams over) and nothing waits for the socket. Closes it
 * then. */
static bool
connDoneWith(Http2Conn* c)
{
    if (corBufPending(&c->k.out) == 0 && !nghttp2_session_want_read(c->session)
        && !nghttp2_session_want_write(c->session)) {
        connClose(c);
        return true;
    }
    return false;
}

/* nghttp2's frames into the output, under the kit's guard: a stream's
 * producer told of room (corHttp2StreamsDrained) may add more at once,
 * taken in the same go, a few rounds at most. Returns 0, or -1 after
 * closing c. */
static int
outputPump(CorKitConn* k)
{
    Http2Conn* c = corContainerOf(k, Http2Conn, k);
    unsigned rounds = 0;
    int rc;

    do {
        rc = sendPump(c);
        if (rc == 0) {
            corHttp2StreamsDrained(c);
        }
    } while (rc == 0 && nghttp2_session_want_write(c->session)
             && corBufPending(&k->out) < OUT_PUMP && ++rounds < OUTPUT_ROUNDS);
    if (rc != 0) {
        connClose(c);
        return -1;
    }
    return 0;
}

/* The output went: more to pump soon, the end, or the next deadline. */
static void
outputWent(Http2Conn* c)
{
    if (nghttp2_session_want_write(c->session)
        && corBufPending(&c->k.out) < OUT_PUMP) {
        corKitConnFlushSoon(&c->k); /* more came meanwhile */
    }
    if (connDoneWith(c)) {
        return;
    }
    if (!c->held && corBufPending(&c->k.out) == 0
        && corListEmpty(&c->streams)) {
        corBufFree(&c->k.out); /* idle: nothing kept for it */
    }
    timerUpdate(c);
}

/* Send what is due: nghttp2's frames, then the socket. Inside a serve
 * (called back from a read) the frames only queue: that serve writes. */
static void
connOutput(Http2Conn* c)
{
    if (corKitConnServe(&c->k, outputPump) == 0 && !corKitConnInside(&c->k)) {
        outputWent(c);
    }
}

void
corHttp2ConnAbuse(Http2Conn* c, Http2Abuse why, uint32_t code)
{
    corLog(COR_LOG_WARN, "http2: %s: %s; closing the connection", c->peerName,
           corHttp2AbuseText(why));
    corHttp2Count(why);
    c->ending = true; /* its GOAWAY is not counted again */
    nghttp2_session_terminate_session(c->session, code);
    if (sendPump(c) == 0) {
        corKitConnFlush(&c->k); /* the GOAWAY, best effort */
    }
    /* The end now: on io_uring a close waits for the socket's read still
     * in flight, and the peer saw no FIN for seconds (ASan, h2edge). */
    shutdown(c->t.fd, SHUT_RDWR);
    connClose(c);
}

/* ---- The timer ----------------------------------------------------------- */

void
corHttp2ConnStreamBegun(Http2Conn* c)
{
    uint64_t now = corEvNow(c->k.loop);

    if (!c->held && c->begunMs != 0 && now < c->begunMs + QUIET_MS) {
        c->held = true;
        corTransportTlsKeepBuffers(&c->t, true);
    }
    c->begunMs = now;
}

/* Whether c is quiet: its frame buffer holds pages, no stream is open,
 * nothing waits to be sent and no frame has come in part (nghttp2 takes
 * every byte given, so it is between frames when the scan is). */
static bool
quiet(Http2Conn* c)
{
    return c->framedMs != 0 && c->streamCount == 0
           && corBufPending(&c->k.out) == 0 && corBufPending(&c->k.in) == 0
           && c->frames.headLen == 0 && c->frames.left == 0
           && c->frames.prefaceLeft == 0
           && !nghttp2_session_want_write(c->session);
}

/* Whether c is in a lull: it holds its buffers, all of them empty (a
 * stream may be open, waiting on its handler). */
static bool
lull(Http2Conn* c)
{
    return c->held && corBufPending(&c->k.out) == 0
           && corBufPending(&c->k.in) == 0;
}

/* The earlier of next (0: none yet) and t. */
static inline uint64_t
earlier(uint64_t next, uint64_t t)
{
    return next == 0 || t < next ? t : next;
}

/* The next deadline that applies: unsent output that makes no progress
 * and a stream held by the peer's window (both limits.send_timeout), a
 * drain's final GOAWAY, a request still coming (limits.request_timeout),
 * an idle connection (limits.keepalive_timeout). */
static uint64_t
deadlineNext(Http2Conn* c, uint64_t now)
{
    const CorLimits* limits = corLimits();
    uint64_t next = 0;
    uint64_t at;

    if (c->k.outStalledMs != 0) {
        next = earlier(next, c->k.outStalledMs + limits->sendTimeoutMs);
    }
    if (corHttp2StreamsStalled(c)) {
        if (c->stallMs == 0) {
            c->stallMs = now;
        }
        next = earlier(next, c->stallMs + limits->sendTimeoutMs);
    } else {
        c->stallMs = 0;
    }
    if (c->draining && !c->goaway) {
        next = earlier(next, c->drainMs + DRAIN_GRACE_MS);
    }
    at = corHttp2StreamsDeadline(c, now);
    if (at != 0) {
        next = earlier(next, at);
    }
    if (c->streamCount == 0) {
        next = earlier(next, c->activeMs + limits->keepaliveTimeoutMs);
    }
    if (quiet(c) || lull(c)) {
        next = earlier(next, c->framedMs + QUIET_MS);
    }
    return next;
}

static void
timerUpdate(Http2Conn* c)
{
    uint64_t now = corEvNow(c->k.loop);
    uint64_t next = deadlineNext(c, now);

    if (next == 0) {
        corKitConnDeadlineStop(&c->k);
    } else {
        corKitConnDeadline(&c->k, now, next > now ? next - now : 0);
    }
    if (nghttp2_session_want_write(c->session)) {
        corKitConnFlushSoon(&c->k); /* a reset the walk above queued */
    }
}

static void
finalGoaway(Http2Conn* c)
{
    c->goaway = true;
    nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(c->session),
                          NGHTTP2_NO_ERROR, NULL, 0);
}

static void
expired(CorKitConn* k)
{
    Http2Conn* c = corContainerOf(k, Http2Conn, k);
    const CorLimits* limits = corLimits();
    uint64_t now = corEvNow(k->loop);

    if (k->outStalledMs != 0
        && now >= k->outStalledMs + limits->sendTimeoutMs) {
        corLog(COR_LOG_DEBUG, "http2: %s: the peer reads nothing", c->peerName);
        connClose(c);
        return;
    }
    if (c->stallMs != 0 && now >= c->stallMs + limits->sendTimeoutMs
        && corHttp2StreamsStalled(c)) {
        corHttp2ConnAbuse(c, H2_ABUSE_ZERO_WINDOW, NGHTTP2_ENHANCE_YOUR_CALM);
        return;
    }
    if (c->draining && !c->goaway && now >= c->drainMs + DRAIN_GRACE_MS) {
        finalGoaway(c);
    }
    corHttp2StreamsDeadline(c, now); /* resets what is past it */
    if (lull(c) && now >= c->framedMs + QUIET_MS) {
        c->held = false;
        corTransportTlsKeepBuffers(&c->t, false);
        corBufFree(&c->k.in);
        corBufFree(&c->k.out);
    }
    if (quiet(c) && now >= c->framedMs + QUIET_MS) {
        corHttp2MemRelease(&c->mem);
        c->framedMs = 0;
    }
    if (c->streamCount == 0
        && now >= c->activeMs + limits->keepaliveTimeoutMs) {
        /* Idle: say so, then close. */
        nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR);
    }
    connOutput(c);
}

/* ---- Input --------------------------------------------------------------- */

/* One more of a counted frame in this second: past limit, abuse. */
static bool
counted(Http2Conn* c, unsigned* n, unsigned limit)
{
    uint64_t now = corEvNow(c->k.loop);

    if (now >= c->windowMs + 1000) {
        c->windowMs = now;
        c->resets = c->pings = c->settings = 0;
    }
    return ++*n > limit;
}

/* Why a session failed in mem_recv, for the count. */
static Http2Abuse
recvAbuse(Http2Conn* c, ssize_t rc)
{
    switch (rc) {
    case NGHTTP2_ERR_FLOODED:
        return c->pings >= c->settings ? H2_ABUSE_PING : H2_ABUSE_SETTINGS;
    case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
        return H2_ABUSE_CONTINUATION;
    default:
        return H2_ABUSE_PROTOCOL;
    }
}

/* The GOAWAY an abuse ends a connection with: a flood calms the peer
 * down (ENHANCE_YOUR_CALM), a violation of the protocol says so (a bad
 * preface, RFC 9113 3.4; a stream id out of order, 5.1.1). */
static uint32_t
abuseCode(Http2Abuse why)
{
    return why == H2_ABUSE_PROTOCOL ? NGHTTP2_PROTOCOL_ERROR
                                    : NGHTTP2_ENHANCE_YOUR_CALM;
}

/* The kit's take: every byte that came goes to nghttp2, whose callbacks
 * make and serve the streams, once corHttp2FramesScan saw its frames: the
 * frames before one that breaks its rules are taken, then the connection
 * ends. nghttp2 takes every byte it is given (it keeps a frame's part
 * itself), so none is scanned twice. */
static int
take(CorKitConn* k)
{
    Http2Conn* c = corContainerOf(k, Http2Conn, k);
    size_t ok;
    Http2FramesVerdict v = corHttp2FramesScan(c, corBufHead(&k->in),
                                              corBufPending(&k->in), &ok);
    ssize_t n = nghttp2_session_mem_recv(c->session, corBufHead(&k->in), ok);
    Http2Abuse why;

    if (n >= 0 && v == H2_FRAMES_OK) {
        corBufConsume(&k->in, (size_t)n);
        return 0;
    }
    if (n < 0) {
        why = c->abuse > 0 ? (Http2Abuse)(c->abuse - 1) : recvAbuse(c, n);
    } else {
        why = v == H2_FRAMES_FLOOD ? H2_ABUSE_NO_PROGRESS : H2_ABUSE_PROTOCOL;
    }
    corHttp2ConnAbuse(c, why, abuseCode(why));
    return -1;
}

static int
peerEnd(CorKitConn* k)
{
    connClose(corContainerOf(k, Http2Conn, k));
    return -1;
}

static void
broken(CorKitConn* k, int rc, const char* why)
{
    Http2Conn* c = corContainerOf(k, Http2Conn, k);

    corLog(COR_LOG_DEBUG, "http2: %s: %s (%s)", c->peerName, why,
           strerror(-rc));
    connClose(c);
}

/* Read every frame, then take nghttp2's answers into the output (the
 * kit's serve writes them). Returns 0, or -1 when c closed. */
static int
readStep(CorKitConn* k)
{
    if (corKitConnRead(k) != 0) {
        return -1;
    }
    if (corBufPending(&k->in) == 0 && !corContainerOf(k, Http2Conn, k)->held) {
        corBufFree(&k->in); /* not busy: no buffer held */
    }
    return outputPump(k);
}

static void
ready(CorKitConn* k)
{
    if (corKitConnServe(k, readStep) == 0) {
        outputWent(corContainerOf(k, Http2Conn, k));
    }
}

static void
wrote(CorKitConn* k)
{
    connOutput(corContainerOf(k, Http2Conn, k));
}

static const CorKitOps connOps = {
    .ready = ready,
    .take = take,
    .end = peerEnd,
    .fail = broken,
    .wrote = wrote,
    .expired = expired,
};

/* ---- Session callbacks --------------------------------------------------- */

/* Frames that are the connection's (the streams' go to
 * corHttp2Stream.c); a flood is refused from here, the session ended by
 * take. */
static int
onFrameRecv(nghttp2_session* s, const nghttp2_frame* f, void* arg)
{
    Http2Conn* c = arg;
    bool ack = (f->hd.flags & NGHTTP2_FLAG_ACK) != 0;

    (void)s;
    switch (f->hd.type) {
    case NGHTTP2_RST_STREAM:
        if (counted(c, &c->resets, corHttp2Conf.resetsPerSecond)) {
            c->abuse = H2_ABUSE_RAPID_RESET + 1;
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
    case NGHTTP2_PING:
    case NGHTTP2_SETTINGS:
        if (ack) {
            if (f->hd.type == NGHTTP2_PING && c->draining && !c->goaway) {
                finalGoaway(c);
            }
            break;
        }
        if (counted(c, f->hd.type == NGHTTP2_PING ? &c->pings : &c->settings,
                    corHttp2Conf.controlPerSecond)) {
            c->abuse = 1
                       + (f->hd.type == NGHTTP2_PING ? H2_ABUSE_PING
                                                     : H2_ABUSE_SETTINGS);
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
    default:
        return corHttp2StreamFrame(c, f);
    }
    return 0;
}

/* A violation nghttp2 answered with GOAWAY on its own is counted too. */
static int
onFrameSend(nghttp2_session* s, const nghttp2_frame* f, void* arg)
{
    Http2Conn* c = arg;

    (void)s;
    corHttp2StreamSent(c, f);
    if (f->hd.type == NGHTTP2_DATA) {
        c->stallMs = 0; /* progress */
        corHttp2FramesDataSent(c);
    } else if (f->hd.type == NGHTTP2_GOAWAY && !c->ending
               && f->goaway.error_code == NGHTTP2_PROTOCOL_ERROR) {
        corHttp2Count(H2_ABUSE_PROTOCOL);
    }
    return 0;
}

static nghttp2_session_callbacks*
callbacksNew(void)
{
    nghttp2_session_callbacks* cb;

    if (nghttp2_session_callbacks_new(&cb) != 0) {
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(
        cb, corHttp2StreamBegin);
    nghttp2_session_callbacks_set_on_header_callback(cb, corHttp2StreamHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cb, corHttp2StreamData);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, onFrameRecv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, onFrameSend);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb,
                                                           corHttp2StreamClose);
    return cb;
}

/* The session and its SETTINGS: the configured limits, and nghttp2's
 * own defences set to match. Returns 0 or -1. */
static int
sessionNew(Http2Conn* c)
{
    size_t listMax = corHttp2Conf.maxHeaderListSize != 0
                         ? corHttp2Conf.maxHeaderListSize
                         : corLimits()->headerBytes;
    nghttp2_settings_entry settings[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
          corHttp2Conf.maxConcurrentStreams },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
          corHttp2Conf.initialWindowSize },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)listMax },
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
    };
    nghttp2_session_callbacks* cb = callbacksNew();
    nghttp2_option* opt = NULL;
    int rc = -1;

    corHttp2MemInit(&c->mem, c->hl);
    if (cb == NULL || nghttp2_option_new(&opt) != 0) {
        goto failed;
    }
    nghttp2_option_set_max_continuations(opt, 8);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    /* Ours cuts first (counted); nghttp2's is the backstop. */
    nghttp2_option_set_stream_reset_rate_limit(
        opt, 2 * (uint64_t)corHttp2Conf.resetsPerSecond,
        corHttp2Conf.resetsPerSecond);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
    /* A body is consumed as its reader takes it (corHttp2Stream.c: at
     * once when it is gathered whole, as its handler reads when it is
     * streamed), so a handler that reads slowly holds the client back. */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    /* A closed stream goes at once: nghttp2 would keep it for RFC
     * 7540's priority tree, which cor does not follow, and its map
     * (corHttp2Mem.c) would not be empty, nor go back, when quiet. */
    nghttp2_option_set_no_closed_streams(opt, 1);
    if (nghttp2_session_server_new3(&c->session, cb, c, opt, &c->mem.mem)
        != 0) {
        goto failed;
    }
    rc = nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings,
                                 sizeof(settings) / sizeof(settings[0]));
    if (rc == 0 && corHttp2Conf.connectionWindowSize > 65535) {
        rc = nghttp2_session_set_local_window_size(c->session,
                                                   NGHTTP2_FLAG_NONE, 0,
                                                   (int32_t)corHttp2Conf
                                                       .connectionWindowSize);
    }
    rc = rc == 0 ? 0 : -1;
failed:
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    return rc;
}

/* ---- The connection ------------------------------------------------------ */

void
corHttp2ConnOpen(HttpLoop* hl, const CorTransport* t,
                 const struct sockaddr_storage* peer, bool tls,
                 const char* altSvc, const void* in, size_t len)
{
    Http2Conn* c = calloc(1, sizeof(*c));
    CorTransport own = *t;

    if (c == NULL) {
        own.ops->close(&own);
        corAcceptClosed();
        return;
    }
    c->t = own;
    c->hl = hl;
    c->peer = *peer;
    c->tls = tls;
    c->altSvc = altSvc;
    corPeerName(&c->peer, c->peerName, sizeof(c->peerName));
    corKitConnInit(&c->k, hl->loop, &connOps);
    c->k.readRoom = READ_ROOM;
    c->k.highWater = OUT_HIGH_WATER;
    c->k.outKeep = OUT_KEEP;
    c->activeMs = c->windowMs = corEvNow(hl->loop);
    corHttp2FramesInit(&c->frames, c->activeMs);
    corHttp2CountConnection();
    if (sessionNew(c) != 0 || (len > 0 && corBufAppend(&c->k.in, in, len) != 0)
        || corKitConnStart(&c->k, &c->t, &hl->h2Conns) != 0) {
        corLog(COR_LOG_ERROR, "http2: %s: no memory for the session",
               c->peerName);
        connClose(c);
        return;
    }
    if (hl->draining) {
        corHttp2ConnDrain(c);
    }
    /* The bytes that came with it raise no edge of their own: taken now,
     * and our SETTINGS sent. */
    ready(&c->k);
}

static void
connClose(Http2Conn* c)
{
    corKitConnStop(&c->k);
    corAcceptClosed();
    c->t.ops->close(&c->t);
    corHttp2StreamsDetach(c);
    nghttp2_session_del(c->session);
    corKitConnFree(&c->k);
    free(c);
}

void
corHttp2ConnDrain(Http2Conn* c)
{
    if (c->draining) {
        return;
    }
    c->draining = true;
    c->drainMs = corEvNow(c->k.loop);
    nghttp2_submit_shutdown_notice(c->session);
    nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, NULL);
    connOutput(c);
}

void
corHttp2ConnStop(Http2Conn* c)
{
    uint64_t deadline = corEvClockMs() + STOP_FLUSH_MS;

    nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR);
    if (sendPump(c) != 0) {
        connClose(c);
        return;
    }
    while (corBufPending(&c->k.out) > 0 && corEvClockMs() < deadline) {
        struct pollfd pfd = { .fd = c->t.fd, .events = POLLOUT };

        if (corKitConnFlush(&c->k) != 0 || corBufPending(&c->k.out) == 0
            || poll(&pfd, 1, STOP_FLUSH_MS) <= 0) {
            break;
        }
    }
    connClose(c);
}
