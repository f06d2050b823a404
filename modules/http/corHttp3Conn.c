/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A QUIC connection serving HTTP/3 (docs/http3.md): ngtcp2's connection
 * with its handshake through GnuTLS (corHttp3Tls.c), nghttp3's session on
 * it once the 1-RTT keys are there, the packets in and out, and its one
 * timer (ngtcp2's expiry: losses, acknowledgements, the idle timeout).
 *
 * Output is written before the loop sleeps (a CorEvSoon), so that what
 * a turn's packets and handlers queued goes out together, as
 * consecutive packets of one size through one sendmsg with UDP_SEGMENT
 * (corHttp3Send). The connection closes with one CONNECTION_CLOSE and is
 * freed at once: what the peer still sends after it finds no connection
 * and is answered with a stateless reset, which ends it as well (we do
 * not wait out the closing period, RFC 9000 10.2.1 allows either).
 */
#include "corHttp3Int.h"
#include "corHttp2Int.h" /* max_concurrent_streams, shared with h2 */

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdlib.h>
#include <string.h>

/* Packets written in one go (one GSO send each ten); more wait for the
 * next turn, so that a large answer does not hold the loop. */
#define H3_PACKETS_A_TURN 64
/* A stream's and the connection's receive windows to begin with;
 * ngtcp2 widens them as the peer fills them, up to the max. */
#define H3_STREAM_WINDOW (256 * 1024)
#define H3_CONN_WINDOW (1024 * 1024)
#define H3_MAX_STREAM_WINDOW (6 * 1024 * 1024)
#define H3_MAX_WINDOW (16 * 1024 * 1024)

static void connFree(Http3Conn* c);
static void connClose(Http3Conn* c);

static uint64_t
nowNs(void)
{
    return corEvClockNs();
}

static Http3Loop*
loopOf(const Http3Conn* c)
{
    return c->hl->h3;
}

/* ---- ngtcp2's callbacks -------------------------------------------------- */

static int
handshakeCompleted(ngtcp2_conn* quic, void* arg)
{
    Http3Conn* c = arg;

    (void)quic;
    c->handshaken = true;
    loopOf(c)->handshakes--;
    return 0;
}

/* A connection past one of its budgets (corHttp3Frames.c): said once,
 * counted, and closed with H3_EXCESSIVE_LOAD. For ngtcp2's callback to
 * return, which makes ngtcp2_conn_read_pkt fail and the read close. */
static int
abuseEnd(Http3Conn* c)
{
    Http3Abuse why = (Http3Abuse)(c->budget.abuse - 1);

    corLog(COR_LOG_WARN, "http3: %s: %s; closing the connection", c->peerName,
           corHttp3AbuseText(why));
    corHttp3CountAbuse(why);
    ngtcp2_connection_close_error_set_application_error(
        &c->error, NGHTTP3_H3_EXCESSIVE_LOAD, NULL, 0);
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

/* len bytes of stream id to nghttp3: what it took as framing opens the
 * windows now; a body's bytes open them as they are taken
 * (corHttp3Stream.c). Returns 0 or -1 (c->error set). */
static int
feed(Http3Conn* c, int64_t id, const uint8_t* data, size_t len, int fin)
{
    nghttp3_ssize n;

    if (len == 0 && !fin) {
        return 0;
    }
    n = nghttp3_conn_read_stream(c->h3, id, data, len, fin);
    if (n < 0) {
        ngtcp2_connection_close_error_set_application_error(
            &c->error, nghttp3_err_infer_quic_app_error_code((int)n), NULL, 0);
        return -1;
    }
    ngtcp2_conn_extend_max_stream_offset(c->quic, id, (uint64_t)n);
    ngtcp2_conn_extend_max_offset(c->quic, (uint64_t)n);
    return 0;
}

/* What came on a stream: its frames read (corHttp3Frames.c), then handed
 * to nghttp3, but for the bytes the reader holds back, which go with the
 * first byte of the next read. */
static int
recvStreamData(ngtcp2_conn* quic, uint32_t flags, int64_t id, uint64_t offset,
               const uint8_t* data, size_t len, void* arg, void* streamArg)
{
    Http3Conn* c = arg;
    int fin = (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0;
    Http3Frames* f;
    size_t hold;

    (void)quic;
    (void)offset;
    if (c->h3 == NULL) {
        return 0;
    }
    f = corHttp3FramesOf(c, id, streamArg);
    if (f == NULL) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    hold = corHttp3FramesScan(c, f, data, len);
    if (c->budget.abuse != 0) {
        return abuseEnd(c);
    }
    if (f->heldLen > 0 && len > 0) {
        uint8_t joined[sizeof(f->held) + 1];

        memcpy(joined, f->held, f->heldLen);
        joined[f->heldLen] = data[0];
        if (feed(c, id, joined, f->heldLen + 1u, fin && len == 1) != 0) {
            return NGTCP2_ERR_CALLBACK_FAILURE;
        }
        fin = fin && len > 1; /* else it went with them */
        f->heldLen = 0;
        data++;
        len--;
    }
    if ((hold > 0 || f->heldLen > 0) && fin) {
        /* The control stream ended midway (RFC 9114 6.2.1). */
        ngtcp2_connection_close_error_set_application_error(
            &c->error, NGHTTP3_H3_CLOSED_CRITICAL_STREAM, NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    if (feed(c, id, data, len - hold, fin) != 0) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    memcpy(f->held, data + len - hold, hold);
    f->heldLen = (uint8_t)(f->heldLen + hold);
    return 0;
}

static int
ackedStreamData(ngtcp2_conn* quic, int64_t id, uint64_t offset, uint64_t len,
                void* arg, void* streamArg)
{
    Http3Conn* c = arg;

    (void)quic;
    (void)offset;
    (void)streamArg;
    if (c->h3 != NULL && nghttp3_conn_add_ack_offset(c->h3, id, len) != 0) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int
streamClose(ngtcp2_conn* quic, uint32_t flags, int64_t id, uint64_t code,
            void* arg, void* streamArg)
{
    Http3Conn* c = arg;
    int rc;

    corHttp3FramesFree(streamArg);
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) {
        code = NGHTTP3_H3_NO_ERROR;
    }
    if (c->h3 == NULL) {
        return 0;
    }
    rc = nghttp3_conn_close_stream(c->h3, id, code);
    if (rc != 0 && rc != NGHTTP3_ERR_STREAM_NOT_FOUND) {
        ngtcp2_connection_close_error_set_application_error(
            &c->error, nghttp3_err_infer_quic_app_error_code(rc), NULL, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    if (!ngtcp2_conn_is_local_stream(quic, id) && (id & 0x2) == 0) {
        ngtcp2_conn_extend_max_streams_bidi(quic, 1); /* one more may open */
    }
    return 0;
}

/* The client cancelled a stream of its own: counted once a request
 * stream (HTTP/2's rapid reset), past the limit the connection ends. */
static int
cancelled(Http3Conn* c, int64_t id, void* streamArg)
{
    Http3Frames* f;

    if ((id & 0x3) != 0) {
        return 0; /* not a request stream */
    }
    f = corHttp3FramesOf(c, id, streamArg);
    if (f == NULL) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return corHttp3FramesCancelled(c, f) ? abuseEnd(c) : 0;
}

static int
streamReset(ngtcp2_conn* quic, int64_t id, uint64_t finalSize, uint64_t code,
            void* arg, void* streamArg)
{
    Http3Conn* c = arg;

    (void)quic;
    (void)finalSize;
    (void)code;
    if (c->h3 != NULL && nghttp3_conn_shutdown_stream_read(c->h3, id) != 0) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return cancelled(c, id, streamArg);
}

static int
stopSending(ngtcp2_conn* quic, int64_t id, uint64_t code, void* arg,
            void* streamArg)
{
    Http3Conn* c = arg;

    (void)quic;
    (void)code;
    if (c->h3 != NULL && nghttp3_conn_shutdown_stream_read(c->h3, id) != 0) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return cancelled(c, id, streamArg);
}

static void
randomBytes(uint8_t* dest, size_t len, const ngtcp2_rand_ctx* ctx)
{
    (void)ctx;
    gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int
newConnectionId(ngtcp2_conn* quic, ngtcp2_cid* cid, uint8_t* token, size_t len,
                void* arg)
{
    Http3Conn* c = arg;

    (void)quic;
    (void)len; /* ours are H3_CID_BYTES, as the first */
    corHttp3CidMake(c->hl, cid);
    if (ngtcp2_crypto_generate_stateless_reset_token(token, corHttp3Secret,
                                                     sizeof(corHttp3Secret),
                                                     cid)
            != 0
        || corHttp3CidAdd(loopOf(c), c, cid) != 0) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int
removeConnectionId(ngtcp2_conn* quic, const ngtcp2_cid* cid, void* arg)
{
    Http3Conn* c = arg;

    (void)quic;
    corHttp3CidRemove(loopOf(c), cid);
    return 0;
}

static int
extendMaxRemoteStreams(ngtcp2_conn* quic, uint64_t max, void* arg)
{
    Http3Conn* c = arg;

    (void)quic;
    if (c->h3 != NULL) {
        nghttp3_conn_set_max_client_streams_bidi(c->h3, max);
    }
    return 0;
}

static int
extendMaxStreamData(ngtcp2_conn* quic, int64_t id, uint64_t max, void* arg,
                    void* streamArg)
{
    Http3Conn* c = arg;

    (void)quic;
    (void)max;
    (void)streamArg;
    if (c->h3 != NULL && nghttp3_conn_unblock_stream(c->h3, id) != 0) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

/* The session over the 1-RTT keys: its control stream and QPACK's two. */
static int
sessionOpen(Http3Conn* c)
{
    const ngtcp2_transport_params* params =
        ngtcp2_conn_get_local_transport_params(c->quic);
    nghttp3_settings settings;
    int64_t control;
    int64_t encoder;
    int64_t decoder;

    nghttp3_settings_default(&settings);
    settings.max_field_section_size = corLimits()->headerBytes;
    settings.qpack_max_dtable_capacity = 4096;
    settings.qpack_blocked_streams = 100;
    if (nghttp3_conn_server_new(&c->h3, &corHttp3Callbacks, &settings,
                                &loopOf(c)->h3Mem, c)
        != 0) {
        c->h3 = NULL;
        return -1;
    }
    nghttp3_conn_set_max_client_streams_bidi(c->h3,
                                             params->initial_max_streams_bidi);
    if (ngtcp2_conn_open_uni_stream(c->quic, &control, NULL) != 0
        || nghttp3_conn_bind_control_stream(c->h3, control) != 0
        || ngtcp2_conn_open_uni_stream(c->quic, &encoder, NULL) != 0
        || ngtcp2_conn_open_uni_stream(c->quic, &decoder, NULL) != 0
        || nghttp3_conn_bind_qpack_streams(c->h3, encoder, decoder) != 0) {
        return -1;
    }
    return 0;
}

static int
recvTxKey(ngtcp2_conn* quic, ngtcp2_crypto_level level, void* arg)
{
    (void)quic;
    if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION) {
        return 0;
    }
    return sessionOpen(arg) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static const ngtcp2_callbacks quicCallbacks = {
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = handshakeCompleted,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = recvStreamData,
    .acked_stream_data_offset = ackedStreamData,
    .stream_close = streamClose,
    .rand = randomBytes,
    .get_new_connection_id = newConnectionId,
    .remove_connection_id = removeConnectionId,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = streamReset,
    .extend_max_remote_streams_bidi = extendMaxRemoteStreams,
    .extend_max_stream_data = extendMaxStreamData,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = stopSending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    .recv_tx_key = recvTxKey,
};

/* ---- Output -------------------------------------------------------------- */

static void connTimer(CorEvTimer* timer);

/* The earlier of ngtcp2's next deadline and the streams' on the loop's
 * timer. */
static void
timerArm(Http3Conn* c)
{
    uint64_t expiry = ngtcp2_conn_get_expiry(c->quic);
    uint64_t now = nowNs();
    uint64_t nowMs = corEvNow(c->hl->loop);
    uint64_t streams = corHttp3StreamsDeadline(c, nowMs);
    uint64_t ms = UINT64_MAX;

    if (expiry != UINT64_MAX) {
        ms = expiry <= now ? 0 : (expiry - now + 999999) / 1000000;
    }
    if (streams != 0 && streams - nowMs < ms) {
        ms = streams - nowMs;
    }
    if (ms == UINT64_MAX) {
        corEvTimerStop(c->hl->loop, &c->timer);
        return;
    }
    corEvTimerStart(c->hl->loop, &c->timer, ms, connTimer);
}

/* Packets gathered for one GSO send: to one address, of one size, the
 * last may be shorter. */
typedef struct {
    uint8_t* buf;
    size_t len;
    size_t segment;
    unsigned count;
    struct sockaddr_storage to;
    socklen_t toLen;
} Batch;

static void
batchFlush(Http3Conn* c, Batch* b)
{
    if (b->len > 0) {
        corHttp3SendSegments(c->ep, (const struct sockaddr*)&b->to, b->toLen,
                             b->buf, b->len, b->segment);
    }
    b->len = 0;
    b->segment = 0;
    b->count = 0;
}

/* A packet of n bytes for to (ngtcp2's path: while a client moves, its
 * new address is probed and the old one may still be answered) was
 * written at b->buf + b->len. */
static void
batchAdd(Http3Conn* c, Batch* b, size_t n, const ngtcp2_addr* to)
{
    bool elsewhere = to->addrlen != b->toLen
                     || memcmp(to->addr, &b->to, b->toLen) != 0;

    if (b->count > 0 && (n > b->segment || elsewhere)) {
        /* Larger than the batch's, or for another address: it begins
         * the next one. */
        uint8_t* at = b->buf + b->len;

        batchFlush(c, b);
        memmove(b->buf, at, n);
    }
    if (elsewhere) {
        memcpy(&b->to, to->addr, to->addrlen);
        b->toLen = to->addrlen;
    }
    if (b->segment == 0) {
        b->segment = n;
    }
    b->len += n;
    b->count++;
    if (n < b->segment || b->count == H3_GSO_SEGMENTS) {
        batchFlush(c, b);
    }
}

/* A stream's bytes nghttp3 offers, and what ngtcp2 took of them. */
static int
streamWritten(Http3Conn* c, int64_t id, ngtcp2_ssize taken)
{
    int rc;

    if (id < 0 || taken < 0) {
        return 0;
    }
    rc = nghttp3_conn_add_write_offset(c->h3, id, (size_t)taken);
    if (rc != 0) {
        corHttp3ConnFail(c, rc);
        return -1;
    }
    return 0;
}

/* Write what ngtcp2 and nghttp3 have, up to H3_PACKETS_A_TURN packets.
 * Returns 0, 1 when more waits, or -1 when c was closed. */
static int
connWrite(Http3Conn* c)
{
    size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(c->quic);
    Batch b = { .buf = loopOf(c)->out };
    uint64_t ts = nowNs();
    ngtcp2_path_storage ps;
    ngtcp2_pkt_info pi;
    unsigned packets = 0;

    max = max < H3_PACKET_MAX ? max : H3_PACKET_MAX;
    ngtcp2_path_storage_zero(&ps);
    while (packets < H3_PACKETS_A_TURN) {
        nghttp3_vec vec[16];
        nghttp3_ssize count = 0;
        int64_t id = -1;
        int fin = 0;
        ngtcp2_ssize taken = -1;
        ngtcp2_ssize n;

        if (c->h3 != NULL && ngtcp2_conn_get_max_data_left(c->quic) > 0) {
            count = nghttp3_conn_writev_stream(c->h3, &id, &fin, vec, 16);
            if (count < 0) {
                corHttp3ConnFail(c, (int)count);
                return -1;
            }
        }
        n = ngtcp2_conn_writev_stream(c->quic, &ps.path, &pi, b.buf + b.len,
                                      max, &taken,
                                      NGTCP2_WRITE_STREAM_FLAG_MORE
                                          | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN
                                                 : 0),
                                      id, (const ngtcp2_vec*)vec, (size_t)count,
                                      ts);
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
            nghttp3_conn_block_stream(c->h3, id);
            continue;
        }
        if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
            nghttp3_conn_shutdown_stream_write(c->h3, id);
            continue;
        }
        if (n == NGTCP2_ERR_WRITE_MORE) {
            if (streamWritten(c, id, taken) != 0) {
                return -1;
            }
            continue;
        }
        if (n < 0) {
            ngtcp2_connection_close_error_set_transport_error_liberr(&c->error,
                                                                     (int)n,
                                                                     NULL, 0);
            connClose(c);
            return -1;
        }
        if (streamWritten(c, id, taken) != 0) {
            return -1;
        }
        if (n == 0) {
            break;
        }
        batchAdd(c, &b, (size_t)n, &ps.path.remote);
        packets++;
    }
    batchFlush(c, &b);
    ngtcp2_conn_update_pkt_tx_time(c->quic, ts);
    timerArm(c);
    return packets == H3_PACKETS_A_TURN;
}

/* Before the loop sleeps: write, and tell the core of streams that
 * drained (it hands them more). */
static void
connSoon(CorEvSoon* soon)
{
    Http3Conn* c = corContainerOf(soon, Http3Conn, soon);
    int rc = connWrite(c);

    if (rc < 0) {
        return;
    }
    corHttp3StreamsDrained(c);
    if (rc > 0) {
        corEvSoonStart(c->hl->loop, &c->soon, connSoon);
    }
}

void
corHttp3ConnKick(Http3Conn* c)
{
    corEvSoonStart(c->hl->loop, &c->soon, connSoon);
}

/* ngtcp2's deadline (losses, acknowledgements, the idle timeout), or a
 * stream's: the write after it arms the next. */
static void
connTimer(CorEvTimer* timer)
{
    Http3Conn* c = corContainerOf(timer, Http3Conn, timer);
    int rc = ngtcp2_conn_handle_expiry(c->quic, nowNs());

    if (rc == NGTCP2_ERR_IDLE_CLOSE) {
        corHttp3Count(H3_COUNT_IDLE);
        connFree(c); /* idle: closed silently, as RFC 9000 10.1 says */
        return;
    }
    if (rc != 0) {
        ngtcp2_connection_close_error_set_transport_error_liberr(&c->error, rc,
                                                                 NULL, 0);
        connClose(c);
        return;
    }
    connSoon(&c->soon);
}

/* ---- The connection ------------------------------------------------------ */

static void
paramsSet(ngtcp2_transport_params* params, const ngtcp2_pkt_hd* hd,
          const ngtcp2_cid* ocid, const ngtcp2_cid* scid)
{
    ngtcp2_transport_params_default(params);
    params->initial_max_stream_data_bidi_remote = H3_STREAM_WINDOW;
    params->initial_max_stream_data_uni = H3_STREAM_WINDOW;
    params->initial_max_data = H3_CONN_WINDOW;
    params->initial_max_streams_bidi = corHttp2Conf.maxConcurrentStreams;
    params->initial_max_streams_uni = 3; /* control and QPACK's two */
    /* Idle as a keep-alive connection may be. */
    params->max_idle_timeout = corLimits()->keepaliveTimeoutMs
                               * NGTCP2_MILLISECONDS;
    params->active_connection_id_limit = 4;
    params->stateless_reset_token_present = 1;
    ngtcp2_crypto_generate_stateless_reset_token(params->stateless_reset_token,
                                                 corHttp3Secret,
                                                 sizeof(corHttp3Secret), scid);
    if (ocid != NULL) {
        /* It came back after our Retry, to the ID the Retry gave. */
        params->original_dcid = *ocid;
        params->retry_scid = hd->dcid;
        params->retry_scid_present = 1;
    } else {
        params->original_dcid = hd->dcid;
    }
}

Http3Conn*
corHttp3ConnNew(Http3Endpoint* ep, const ngtcp2_pkt_hd* hd,
                const ngtcp2_cid* ocid, const struct sockaddr* peer,
                socklen_t peerLen)
{
    Http3Conn* c = calloc(1, sizeof(*c));
    ngtcp2_transport_params params;
    ngtcp2_settings settings;
    ngtcp2_cid scid;
    ngtcp2_path path;

    if (c == NULL) {
        corAcceptClosed();
        return NULL;
    }
    c->ep = ep;
    c->hl = ep->hl;
    memcpy(&c->peer, peer, peerLen);
    c->peerLen = peerLen;
    corPeerName(&c->peer, c->peerName, sizeof(c->peerName));
    corListInit(&c->streams);
    corListInit(&c->cids);
    corListInit(&c->frames);
    ngtcp2_connection_close_error_default(&c->error);
    corListAppend(&loopOf(c)->conns, &c->link);
    atomic_fetch_add(&loopOf(c)->connCount, 1);
    loopOf(c)->handshakes++;
    corHttp3CidMake(c->hl, &scid);
    paramsSet(&params, hd, ocid, &scid);
    ngtcp2_settings_default(&settings);
    settings.initial_ts = nowNs();
    settings.max_window = H3_MAX_WINDOW;
    settings.max_stream_window = H3_MAX_STREAM_WINDOW;
    settings.max_tx_udp_payload_size = H3_PACKET_MAX;
    settings.token = hd->token;
    path = (ngtcp2_path){
        .local = { (ngtcp2_sockaddr*)&ep->local, ep->localLen },
        .remote = { (ngtcp2_sockaddr*)&c->peer, c->peerLen },
    };
    if (ngtcp2_conn_server_new(&c->quic, &hd->scid, &scid, &path, hd->version,
                               &quicCallbacks, &settings, &params,
                               &loopOf(c)->quicMem, c)
        != 0) {
        c->quic = NULL;
        goto failed;
    }
    if (corHttp3TlsSession(c) != 0 || corHttp3CidAdd(loopOf(c), c, &scid) != 0
        || corHttp3CidAdd(loopOf(c), c, &hd->dcid) != 0) {
        goto failed;
    }
    corHttp3Count(H3_COUNT_CONNECTION);
    return c;
failed:
    corLog(COR_LOG_ERROR, "http3: %s: no memory for a connection", c->peerName);
    connFree(c);
    return NULL;
}

void
corHttp3ConnRead(Http3Conn* c, const struct sockaddr* peer, socklen_t peerLen,
                 const uint8_t* pkt, size_t len)
{
    ngtcp2_path path = {
        .local = { (ngtcp2_sockaddr*)&c->ep->local, c->ep->localLen },
        .remote = { (ngtcp2_sockaddr*)(uintptr_t)peer, peerLen },
    };
    ngtcp2_pkt_info pi = { 0 };
    int rc = ngtcp2_conn_read_pkt(c->quic, &path, &pi, pkt, len, nowNs());

    if (rc == 0) {
        corHttp3ConnKick(c); /* where to: ngtcp2's path says */
        return;
    }
    if (rc == NGTCP2_ERR_DRAINING || rc == NGTCP2_ERR_DROP_CONN) {
        connFree(c); /* the peer closed it, or it is hopeless */
        return;
    }
    if (rc == NGTCP2_ERR_CRYPTO) {
        ngtcp2_connection_close_error_set_transport_error_tls_alert(
            &c->error, ngtcp2_conn_get_tls_alert(c->quic), NULL, 0);
    } else if (rc != NGTCP2_ERR_CALLBACK_FAILURE) {
        ngtcp2_connection_close_error_set_transport_error_liberr(&c->error, rc,
                                                                 NULL, 0);
    }
    connClose(c);
}

/* CONNECTION_CLOSE with c->error, once, then the connection goes. */
static void
connClose(Http3Conn* c)
{
    uint8_t pkt[H3_PACKET_MAX];
    ngtcp2_path_storage ps;
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n;

    if (!ngtcp2_conn_is_in_closing_period(c->quic)
        && !ngtcp2_conn_is_in_draining_period(c->quic)) {
        ngtcp2_path_storage_zero(&ps);
        n = ngtcp2_conn_write_connection_close(c->quic, &ps.path, &pi, pkt,
                                               sizeof(pkt), &c->error, nowNs());
        if (n > 0) {
            corHttp3Send(c->ep, (const struct sockaddr*)ps.path.remote.addr,
                         ps.path.remote.addrlen, pkt, (size_t)n);
        }
    }
    connFree(c);
}

static void
connFree(Http3Conn* c)
{
    Http3Loop* h = loopOf(c);

    corHttp3StreamsDetach(c);
    corEvTimerStop(c->hl->loop, &c->timer);
    corEvSoonStop(&c->soon);
    corHttp3CidRemoveAll(h, c);
    if (!c->handshaken) {
        h->handshakes--;
    }
    nghttp3_conn_del(c->h3);
    ngtcp2_conn_del(c->quic);
    corHttp3FramesFreeAll(c);
    corHttp3TlsSessionFree(c);
    corListRemove(&c->link);
    atomic_fetch_sub(&h->connCount, 1);
    corAcceptClosed();
    free(c);
}

void
corHttp3ConnStop(Http3Conn* c)
{
    ngtcp2_connection_close_error_set_application_error(&c->error,
                                                        NGHTTP3_H3_NO_ERROR,
                                                        NULL, 0);
    connClose(c);
}

void
corHttp3ConnFail(Http3Conn* c, int h3Error)
{
    ngtcp2_connection_close_error_set_application_error(
        &c->error, nghttp3_err_infer_quic_app_error_code(h3Error), NULL, 0);
    connClose(c);
}
