/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corHttp3Client: an HTTP/3 client of the tests' own, on ngtcp2 (client
 * side, its handshake through GnuTLS) and nghttp3, that behaves or
 * misbehaves on purpose. gtlsclient, ngtcp2's example, only behaves: the
 * flood defences of docs/http3.md need a peer that opens streams and
 * resets them at once, or sends frames that make no progress.
 *
 *   corHttp3Client [options] HOST PORT PATH
 *     -m METHOD        the request's method (GET)
 *     -d FILE          its body, sent whole, with no content-length
 *     --protocol=P     an extended CONNECT (RFC 9220): :protocol P
 *     --flood=KIND     misbehave instead: reset (HEADERS of a GET, then
 *                      RESET_STREAM and STOP_SENDING at once, CVE-2023-
 *                      44487's way), empty-data (empty DATA frames on one
 *                      request), unknown (frames of a reserved type on
 *                      one request), priority (PRIORITY_UPDATE frames on
 *                      the control stream), uni (unidirectional streams
 *                      of a reserved type, as many as the server lets)
 *     --count=N        how many of them (1000)
 *     --seconds=S      give up after S seconds (10)
 *
 * It prints the server's SETTINGS ("settings 0x1 0x6 0x7"), then for a
 * request its fields ("h :status: 200"), its body as it came, its
 * trailers ("t name: value") and how it ended ("end fin", "end reset
 * 0x10e"); for a flood, what went and what came back ("flood reset:
 * sent 1000 ...", "peer closed: app 0x107"). Exit 0 when the request
 * ended with its FIN (a flood: always), 1 otherwise, 2 when it could not
 * begin. A flood speaks raw HTTP/3 (its own control stream, fields from
 * QPACK's static table), so that it can send what nghttp3 would not.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netdb.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PACKET_MAX 1452
#define H3_REQUEST_CANCELLED 0x10c
/* Frames of a flood queued in one piece. */
#define FLOOD_BATCH 500
/* Streams whose HEADERS are in the packet being written, to reset. */
#define RESETS_HELD 1024
/* The server's control stream: its first unidirectional one. */
#define SERVER_CONTROL 3

/* Bytes to write raw on a stream; a reset after them, when reset. */
typedef struct Chunk Chunk;
struct Chunk {
    Chunk* next;
    int64_t id;
    size_t len;
    size_t off;
    bool fin;
    bool reset;
    bool alone; /* the last bytes of their packet */
    uint8_t data[];
};

static struct {
    /* What to do. */
    const char* host;
    const char* port;
    const char* path;
    const char* method;
    const char* bodyFile;
    const char* protocol;
    const char* flood;
    unsigned count;
    unsigned seconds;
    /* The connection. */
    int fd;
    struct sockaddr_storage local;
    struct sockaddr_storage remote;
    socklen_t localLen;
    socklen_t remoteLen;
    ngtcp2_conn* quic;
    nghttp3_conn* h3; /* NULL for a flood */
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
    ngtcp2_crypto_conn_ref ref;
    bool handshaken;
    bool done;
    bool peerClosed; /* its CONNECTION_CLOSE came */
    /* A request. */
    int64_t request;
    uint8_t* body;
    size_t bodyLen;
    bool fin;
    /* A flood. */
    Chunk* head;
    Chunk* tail;
    int64_t control;
    int64_t floodStream;
    int64_t resets[RESETS_HELD]; /* to reset once their HEADERS went */
    unsigned resetCount;
    bool started;
    unsigned sent;
    unsigned streams;
    unsigned answered;
    unsigned peerResets;
    uint64_t startMs;
    /* The first bytes of the server's control stream: its SETTINGS. */
    uint8_t settings[256];
    size_t settingsLen;
} cl = { .method = "GET",
         .count = 1000,
         .seconds = 10,
         .request = -1,
         .control = -1,
         .floodStream = -1 };

static uint64_t
nowNs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
nowMs(void)
{
    return nowNs() / 1000000u;
}

static void
die(const char* what)
{
    fprintf(stderr, "corHttp3Client: %s\n", what);
    exit(2);
}

/* ---- Raw HTTP/3 ---------------------------------------------------------- */

/* A QUIC variable-length integer (RFC 9000 16) at p: its length. */
static size_t
varintPut(uint8_t* p, uint64_t v)
{
    if (v < 64) {
        p[0] = (uint8_t)v;
        return 1;
    }
    if (v < 16384) {
        p[0] = (uint8_t)(0x40 | v >> 8);
        p[1] = (uint8_t)v;
        return 2;
    }
    p[0] = (uint8_t)(0x80 | v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return 4;
}

static size_t
varintGet(const uint8_t* p, size_t len, uint64_t* v)
{
    size_t n = len > 0 ? (size_t)1 << (p[0] >> 6) : 1;

    if (n > len) {
        return 0;
    }
    *v = p[0] & 0x3f;
    for (size_t i = 1; i < n; i++) {
        *v = *v << 8 | p[i];
    }
    return n;
}

static void
chunkQueue(int64_t id, const uint8_t* data, size_t len, bool fin, bool reset)
{
    Chunk* c = calloc(1, sizeof(*c) + len);

    if (c == NULL) {
        die("no memory");
    }
    *c = (Chunk){ .id = id, .len = len, .fin = fin, .reset = reset };
    memcpy(c->data, data, len);
    if (cl.tail != NULL) {
        cl.tail->next = c;
    } else {
        cl.head = c;
    }
    cl.tail = c;
}

static void
chunkDone(void)
{
    Chunk* c = cl.head;

    cl.head = c->next;
    if (cl.head == NULL) {
        cl.tail = NULL;
    }
    if (c->reset && cl.resetCount < RESETS_HELD) {
        cl.resets[cl.resetCount++] = c->id; /* once its packet went */
    }
    free(c);
}

/* A QPACK string literal of a field line (no Huffman), 7-bit prefix. */
static size_t
qpackString(uint8_t* p, const char* s)
{
    size_t len = strlen(s);
    size_t n = 0;

    if (len < 127) {
        p[n++] = (uint8_t)len;
    } else {
        p[n++] = 127;
        for (len -= 127; len >= 128; len >>= 7) {
            p[n++] = (uint8_t)(0x80 | (len & 0x7f));
        }
        p[n++] = (uint8_t)len;
        len = strlen(s);
    }
    memcpy(p + n, s, len);
    return n + len;
}

/* A HEADERS frame of method, https, the authority and the path, from
 * QPACK's static table (no dynamic table, none announced). */
static size_t
headersFrame(uint8_t* out, const char* method)
{
    uint8_t fields[1024];
    char authority[300];
    size_t n = 0;
    size_t at;

    fields[n++] = 0; /* Required Insert Count */
    fields[n++] = 0; /* Base */
    /* :method GET (17) or POST (20); :scheme https (23). */
    fields[n++] = (uint8_t)(0xc0 | (strcmp(method, "POST") == 0 ? 20 : 17));
    fields[n++] = 0xc0 | 23;
    /* :authority (0) and :path (1), literal values. */
    snprintf(authority, sizeof(authority), "%s:%s", cl.host, cl.port);
    fields[n++] = 0x50 | 0;
    n += qpackString(fields + n, authority);
    fields[n++] = 0x50 | 1;
    n += qpackString(fields + n, cl.path);
    at = varintPut(out, 0x01);
    at += varintPut(out + at, n);
    memcpy(out + at, fields, n);
    return at + n;
}

/* ---- A flood ------------------------------------------------------------- */

static void
floodBegin(void)
{
    static const uint8_t settings[] = { 0x00, 0x04, 0x00 }; /* control,
                                                             * SETTINGS */
    uint8_t frame[1200];

    if (ngtcp2_conn_open_uni_stream(cl.quic, &cl.control, NULL) != 0) {
        die("no control stream");
    }
    chunkQueue(cl.control, settings, sizeof(settings), false, false);
    cl.startMs = nowMs();
    cl.started = true;
    if (strcmp(cl.flood, "empty-data") == 0
        || strcmp(cl.flood, "unknown") == 0) {
        if (ngtcp2_conn_open_bidi_stream(cl.quic, &cl.floodStream, NULL) != 0) {
            die("no request stream");
        }
        chunkQueue(cl.floodStream, frame, headersFrame(frame, "POST"), false,
                   false);
        cl.streams++;
    }
}

/* Frames of kind, n of them, each two bytes but PRIORITY_UPDATE's. */
static void
floodFrames(int64_t id, const uint8_t* one, size_t len, unsigned n)
{
    uint8_t batch[FLOOD_BATCH * 16];

    for (unsigned i = 0; i < n; i++) {
        memcpy(batch + i * len, one, len);
    }
    chunkQueue(id, batch, n * len, false, false);
    cl.sent += n;
}

/* More of the flood, as the connection takes it. */
static void
floodStep(void)
{
    /* DATA, empty; a reserved type (0x1f * N + 0x21), empty;
     * PRIORITY_UPDATE (0xf0700) of request stream 0, "u=3". */
    static const uint8_t emptyData[] = { 0x00, 0x00 };
    static const uint8_t unknown[] = { 0x21, 0x00 };
    static const uint8_t priority[] = { 0x80, 0x0f, 0x07, 0x00, 0x04,
                                        0x00, 'u',  '=',  '3' };
    unsigned left = cl.count - cl.sent;
    unsigned n = left < FLOOD_BATCH ? left : FLOOD_BATCH;
    uint8_t frame[1200];
    int64_t id;

    if (!cl.started) {
        floodBegin();
    }
    if (left == 0 || (cl.head != NULL && cl.head->next != NULL)) {
        return; /* done, or the queue is full enough */
    }
    if (strcmp(cl.flood, "reset") == 0) {
        while (cl.sent < cl.count
               && ngtcp2_conn_get_streams_bidi_left(cl.quic) > 0
               && ngtcp2_conn_open_bidi_stream(cl.quic, &id, NULL) == 0) {
            chunkQueue(id, frame, headersFrame(frame, "GET"), true, true);
            cl.sent++;
            cl.streams++;
        }
    } else if (strcmp(cl.flood, "empty-data") == 0) {
        floodFrames(cl.floodStream, emptyData, sizeof(emptyData), n);
    } else if (strcmp(cl.flood, "unknown") == 0) {
        floodFrames(cl.floodStream, unknown, sizeof(unknown), n);
    } else if (strcmp(cl.flood, "priority") == 0 && cl.sent == 0) {
        /* The first split after its element ID, in two STREAM frames:
         * what nghttp3 0.8 aborts on. */
        chunkQueue(cl.control, priority, 6, false, false);
        cl.tail->alone = true;
        chunkQueue(cl.control, priority + 6, sizeof(priority) - 6, false,
                   false);
        cl.sent++;
    } else if (strcmp(cl.flood, "priority") == 0) {
        floodFrames(cl.control, priority, sizeof(priority), n);
    } else if (strcmp(cl.flood, "uni") == 0) {
        while (cl.sent < cl.count
               && ngtcp2_conn_open_uni_stream(cl.quic, &id, NULL) == 0) {
            chunkQueue(id, unknown, sizeof(unknown), false, false);
            cl.sent++;
            cl.streams++;
        }
    } else {
        die("unknown --flood");
    }
}

/* ---- A request over nghttp3 ---------------------------------------------- */

static void
fieldPrint(char kind, nghttp3_rcbuf* name, nghttp3_rcbuf* value)
{
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name);
    nghttp3_vec v = nghttp3_rcbuf_get_buf(value);

    printf("%c %.*s: %.*s\n", kind, (int)n.len, n.base, (int)v.len, v.base);
}

static int
recvHeader(nghttp3_conn* h3, int64_t id, int32_t token, nghttp3_rcbuf* name,
           nghttp3_rcbuf* value, uint8_t flags, void* arg, void* streamArg)
{
    (void)h3, (void)id, (void)token, (void)flags, (void)arg, (void)streamArg;
    fieldPrint('h', name, value);
    return 0;
}

static int
recvTrailer(nghttp3_conn* h3, int64_t id, int32_t token, nghttp3_rcbuf* name,
            nghttp3_rcbuf* value, uint8_t flags, void* arg, void* streamArg)
{
    (void)h3, (void)id, (void)token, (void)flags, (void)arg, (void)streamArg;
    fieldPrint('t', name, value);
    return 0;
}

static void
consumed(int64_t id, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(cl.quic, id, n);
    ngtcp2_conn_extend_max_offset(cl.quic, n);
}

static int
recvData(nghttp3_conn* h3, int64_t id, const uint8_t* data, size_t len,
         void* arg, void* streamArg)
{
    (void)h3, (void)arg, (void)streamArg;
    fwrite(data, 1, len, stdout);
    consumed(id, len);
    return 0;
}

static int
deferredConsume(nghttp3_conn* h3, int64_t id, size_t n, void* arg,
                void* streamArg)
{
    (void)h3, (void)arg, (void)streamArg;
    consumed(id, n);
    return 0;
}

static int
endStream(nghttp3_conn* h3, int64_t id, void* arg, void* streamArg)
{
    (void)h3, (void)arg, (void)streamArg;
    if (id == cl.request) {
        cl.fin = true;
    }
    return 0;
}

static int
stopSending(nghttp3_conn* h3, int64_t id, uint64_t code, void* arg,
            void* streamArg)
{
    (void)h3, (void)arg, (void)streamArg;
    ngtcp2_conn_shutdown_stream_read(cl.quic, id, code);
    return 0;
}

static int
resetStream(nghttp3_conn* h3, int64_t id, uint64_t code, void* arg,
            void* streamArg)
{
    (void)h3, (void)arg, (void)streamArg;
    ngtcp2_conn_shutdown_stream_write(cl.quic, id, code);
    return 0;
}

static nghttp3_ssize
bodyRead(nghttp3_conn* h3, int64_t id, nghttp3_vec* vec, size_t count,
         uint32_t* flags, void* arg, void* streamArg)
{
    (void)h3, (void)id, (void)count, (void)arg, (void)streamArg;
    vec[0] = (nghttp3_vec){ cl.body, cl.bodyLen };
    *flags |= NGHTTP3_DATA_FLAG_EOF;
    return 1;
}

static void
nvPut(nghttp3_nv* nv, size_t* n, const char* name, const char* value)
{
    nv[(*n)++] = (nghttp3_nv){ (uint8_t*)(uintptr_t)name,
                               (uint8_t*)(uintptr_t)value, strlen(name),
                               strlen(value), NGHTTP3_NV_FLAG_NONE };
}

static void
requestBegin(void)
{
    static const nghttp3_callbacks callbacks = {
        .recv_data = recvData,
        .deferred_consume = deferredConsume,
        .recv_header = recvHeader,
        .recv_trailer = recvTrailer,
        .stop_sending = stopSending,
        .end_stream = endStream,
        .reset_stream = resetStream,
    };
    nghttp3_data_reader dr = { .read_data = bodyRead };
    nghttp3_settings settings;
    char authority[300];
    int64_t control;
    int64_t encoder;
    int64_t decoder;
    nghttp3_nv nv[6];
    size_t n = 0;

    nghttp3_settings_default(&settings);
    if (nghttp3_conn_client_new(&cl.h3, &callbacks, &settings,
                                nghttp3_mem_default(), NULL)
            != 0
        || ngtcp2_conn_open_uni_stream(cl.quic, &control, NULL) != 0
        || nghttp3_conn_bind_control_stream(cl.h3, control) != 0
        || ngtcp2_conn_open_uni_stream(cl.quic, &encoder, NULL) != 0
        || ngtcp2_conn_open_uni_stream(cl.quic, &decoder, NULL) != 0
        || nghttp3_conn_bind_qpack_streams(cl.h3, encoder, decoder) != 0
        || ngtcp2_conn_open_bidi_stream(cl.quic, &cl.request, NULL) != 0) {
        die("cannot open the HTTP/3 session");
    }
    snprintf(authority, sizeof(authority), "%s:%s", cl.host, cl.port);
    nvPut(nv, &n, ":method", cl.protocol != NULL ? "CONNECT" : cl.method);
    nvPut(nv, &n, ":scheme", "https");
    nvPut(nv, &n, ":authority", authority);
    nvPut(nv, &n, ":path", cl.path);
    if (cl.protocol != NULL) {
        nvPut(nv, &n, ":protocol", cl.protocol);
    }
    nvPut(nv, &n, "user-agent", "corHttp3Client");
    if (nghttp3_conn_submit_request(cl.h3, cl.request, nv, n,
                                    cl.body != NULL ? &dr : NULL, NULL)
        != 0) {
        die("cannot submit the request");
    }
}

/* ---- QUIC ---------------------------------------------------------------- */

static int
handshakeCompleted(ngtcp2_conn* quic, void* arg)
{
    (void)quic, (void)arg;
    cl.handshaken = true;
    if (cl.flood == NULL) {
        requestBegin();
    }
    return 0;
}

/* The server's SETTINGS, from the first bytes of its control stream:
 * the identifiers it sent. */
static void
settingsPrint(void)
{
    const uint8_t* p = cl.settings;
    size_t len = cl.settingsLen;
    uint64_t type;
    uint64_t length;
    uint64_t v;
    size_t n;

    printf("settings");
    /* The stream's type, the frame's type (SETTINGS, 4) and length. */
    if ((n = varintGet(p, len, &type)) == 0 || type != 0) {
        goto end;
    }
    p += n, len -= n;
    if ((n = varintGet(p, len, &type)) == 0 || type != 4) {
        goto end;
    }
    p += n, len -= n;
    if ((n = varintGet(p, len, &length)) == 0 || length > len - n) {
        goto end;
    }
    p += n, len = length;
    while (len > 0 && (n = varintGet(p, len, &v)) > 0) {
        printf(" 0x%llx", (unsigned long long)v);
        p += n, len -= n;
        if ((n = varintGet(p, len, &v)) == 0) {
            break;
        }
        p += n, len -= n;
    }
end:
    printf("\n");
}

static int
recvStreamData(ngtcp2_conn* quic, uint32_t flags, int64_t id, uint64_t offset,
               const uint8_t* data, size_t len, void* arg, void* streamArg)
{
    nghttp3_ssize n;

    (void)quic, (void)arg, (void)streamArg;
    if (id == SERVER_CONTROL && offset < sizeof(cl.settings)) {
        size_t take = sizeof(cl.settings) - offset < len
                          ? sizeof(cl.settings) - offset
                          : len;

        memcpy(cl.settings + offset, data, take);
        cl.settingsLen = offset + take;
    }
    if (cl.h3 == NULL) {
        /* A flood reads nothing: an answer is counted, dropped. */
        if ((id & 0x2) == 0 && offset == 0 && len > 0) {
            cl.answered++;
        }
        consumed(id, len);
        return 0;
    }
    n = nghttp3_conn_read_stream(cl.h3, id, data, len,
                                 flags & NGTCP2_STREAM_DATA_FLAG_FIN);
    if (n < 0) {
        fprintf(stderr, "corHttp3Client: nghttp3: %s\n",
                nghttp3_strerror((int)n));
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    consumed(id, (size_t)n);
    return 0;
}

static int
ackedStreamData(ngtcp2_conn* quic, int64_t id, uint64_t offset, uint64_t len,
                void* arg, void* streamArg)
{
    (void)quic, (void)offset, (void)arg, (void)streamArg;
    if (cl.h3 != NULL && nghttp3_conn_add_ack_offset(cl.h3, id, len) != 0) {
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int
streamClose(ngtcp2_conn* quic, uint32_t flags, int64_t id, uint64_t code,
            void* arg, void* streamArg)
{
    (void)quic, (void)arg, (void)streamArg;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) {
        code = NGHTTP3_H3_NO_ERROR;
    }
    if (cl.h3 != NULL) {
        nghttp3_conn_close_stream(cl.h3, id, code);
    }
    if (id == cl.request) {
        if (cl.fin) {
            printf("end fin\n");
        } else {
            printf("end reset 0x%llx\n", (unsigned long long)code);
        }
        cl.done = true;
    }
    return 0;
}

static int
streamReset(ngtcp2_conn* quic, int64_t id, uint64_t finalSize, uint64_t code,
            void* arg, void* streamArg)
{
    (void)quic, (void)finalSize, (void)code, (void)arg, (void)streamArg;
    cl.peerResets++;
    if (cl.h3 != NULL) {
        nghttp3_conn_shutdown_stream_read(cl.h3, id);
    }
    return 0;
}

static int
streamStop(ngtcp2_conn* quic, int64_t id, uint64_t code, void* arg,
           void* streamArg)
{
    (void)quic, (void)code, (void)arg, (void)streamArg;
    if (cl.h3 != NULL) {
        nghttp3_conn_shutdown_stream_read(cl.h3, id);
    }
    return 0;
}

static int
extendMaxStreamData(ngtcp2_conn* quic, int64_t id, uint64_t max, void* arg,
                    void* streamArg)
{
    (void)quic, (void)max, (void)arg, (void)streamArg;
    if (cl.h3 != NULL) {
        nghttp3_conn_unblock_stream(cl.h3, id);
    }
    return 0;
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
    (void)quic, (void)arg;
    cid->datalen = len;
    gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, len);
    gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN);
    return 0;
}

static const ngtcp2_callbacks quicCallbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .handshake_completed = handshakeCompleted,
    .recv_stream_data = recvStreamData,
    .acked_stream_data_offset = ackedStreamData,
    .stream_close = streamClose,
    .stream_reset = streamReset,
    .stream_stop_sending = streamStop,
    .extend_max_stream_data = extendMaxStreamData,
    .rand = randomBytes,
    .get_new_connection_id = newConnectionId,
    .update_key = ngtcp2_crypto_update_key_cb,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

static ngtcp2_conn*
quicOf(ngtcp2_crypto_conn_ref* ref)
{
    (void)ref;
    return cl.quic;
}

static void
tlsOpen(void)
{
    static const gnutls_datum_t alpn = { .data = (unsigned char*)"h3",
                                         .size = 2 };

    cl.ref = (ngtcp2_crypto_conn_ref){ .get_conn = quicOf };
    if (gnutls_certificate_allocate_credentials(&cl.cred) != 0
        || gnutls_init(&cl.tls, GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA)
               != 0
        || gnutls_priority_set_direct(cl.tls,
                                      "%DISABLE_TLS13_COMPAT_MODE:NORMAL:"
                                      "-VERS-ALL:+VERS-TLS1.3",
                                      NULL)
               != 0
        || ngtcp2_crypto_gnutls_configure_client_session(cl.tls) != 0
        || gnutls_credentials_set(cl.tls, GNUTLS_CRD_CERTIFICATE, cl.cred) != 0
        || gnutls_alpn_set_protocols(cl.tls, &alpn, 1, GNUTLS_ALPN_MANDATORY)
               != 0) {
        die("GnuTLS refused its setup");
    }
    /* The test's certificate is its own: it is not verified. */
    gnutls_session_set_ptr(cl.tls, &cl.ref);
    ngtcp2_conn_set_tls_native_handle(cl.quic, cl.tls);
}

static void
quicOpen(void)
{
    struct addrinfo hints = { .ai_socktype = SOCK_DGRAM };
    struct addrinfo* ai;
    ngtcp2_transport_params params;
    ngtcp2_settings settings;
    ngtcp2_cid dcid = { .datalen = 18 };
    ngtcp2_cid scid = { .datalen = 17 };
    ngtcp2_path path;

    if (getaddrinfo(cl.host, cl.port, &hints, &ai) != 0) {
        die("cannot resolve the host");
    }
    cl.fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (cl.fd < 0 || connect(cl.fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        die("cannot open a UDP socket to the server");
    }
    memcpy(&cl.remote, ai->ai_addr, ai->ai_addrlen);
    cl.remoteLen = ai->ai_addrlen;
    freeaddrinfo(ai);
    cl.localLen = sizeof(cl.local);
    getsockname(cl.fd, (struct sockaddr*)&cl.local, &cl.localLen);
    gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen);
    gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen);
    ngtcp2_settings_default(&settings);
    settings.initial_ts = nowNs();
    ngtcp2_transport_params_default(&params);
    params.initial_max_streams_uni = 3;
    params.initial_max_stream_data_bidi_local = 1 << 20;
    params.initial_max_stream_data_uni = 1 << 20;
    params.initial_max_data = 16 << 20;
    path = (ngtcp2_path){
        .local = { (ngtcp2_sockaddr*)&cl.local, cl.localLen },
        .remote = { (ngtcp2_sockaddr*)&cl.remote, cl.remoteLen },
    };
    if (ngtcp2_conn_client_new(&cl.quic, &dcid, &scid, &path,
                               NGTCP2_PROTO_VER_V1, &quicCallbacks, &settings,
                               &params, NULL, NULL)
        != 0) {
        die("ngtcp2 refused the connection");
    }
    tlsOpen();
}

/* What a stream source offers next: nghttp3's, or the raw queue's. */
static int
sourceNext(int64_t* id, int* fin, ngtcp2_vec* vec, size_t* count)
{
    *id = -1;
    *fin = 0;
    *count = 0;
    if (cl.h3 != NULL) {
        nghttp3_ssize n = nghttp3_conn_writev_stream(cl.h3, id, fin,
                                                     (nghttp3_vec*)vec, 16);

        if (n < 0) {
            return -1;
        }
        *count = (size_t)n;
    } else if (cl.head != NULL) {
        *id = cl.head->id;
        *fin = cl.head->fin;
        vec[0] = (ngtcp2_vec){ cl.head->data + cl.head->off,
                               cl.head->len - cl.head->off };
        *count = 1;
    }
    return 0;
}

/* RESET_STREAM and STOP_SENDING for the streams whose HEADERS just
 * went: in the next packet (not in the one being written, which ngtcp2
 * would empty of them). */
static void
resetsSend(void)
{
    for (unsigned i = 0; i < cl.resetCount; i++) {
        ngtcp2_conn_shutdown_stream(cl.quic, cl.resets[i],
                                    H3_REQUEST_CANCELLED);
    }
    cl.resetCount = 0;
}

/* ngtcp2 took taken bytes of stream id. */
static void
sourceTaken(int64_t id, ngtcp2_ssize taken)
{
    if (id < 0 || taken < 0) {
        return;
    }
    if (cl.h3 != NULL) {
        nghttp3_conn_add_write_offset(cl.h3, id, (size_t)taken);
        return;
    }
    cl.head->off += (size_t)taken;
    if (cl.head->off == cl.head->len) {
        chunkDone();
    }
}

/* Write what ngtcp2 and the source have, as far as the congestion
 * window lets. */
static void
flush(void)
{
    uint64_t ts = nowNs();
    ngtcp2_path_storage ps;
    ngtcp2_pkt_info pi;
    bool hold = false; /* the raw queue waits for a window */

    ngtcp2_path_storage_zero(&ps);
    for (;;) {
        uint8_t pkt[PACKET_MAX];
        ngtcp2_vec vec[16];
        size_t count = 0;
        int64_t id = -1;
        int fin = 0;
        ngtcp2_ssize taken = -1;
        ngtcp2_ssize n;
        bool alone;

        if (!hold && sourceNext(&id, &fin, vec, &count) != 0) {
            die("nghttp3 failed to write");
        }
        alone = id >= 0 && cl.h3 == NULL && cl.head->alone;
        n = ngtcp2_conn_writev_stream(cl.quic, &ps.path, &pi, pkt, sizeof(pkt),
                                      &taken,
                                      (alone ? 0
                                             : NGTCP2_WRITE_STREAM_FLAG_MORE)
                                          | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN
                                                 : 0),
                                      id, vec, count, ts);
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED
            || n == NGTCP2_ERR_STREAM_SHUT_WR) {
            if (cl.h3 != NULL) {
                nghttp3_conn_block_stream(cl.h3, id);
            } else if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
                chunkDone();
            } else {
                hold = true;
            }
            continue;
        }
        if (n == NGTCP2_ERR_WRITE_MORE) {
            sourceTaken(id, taken);
            continue;
        }
        if (n < 0) {
            fprintf(stderr, "corHttp3Client: write: %s\n",
                    ngtcp2_strerror((int)n));
            cl.done = true;
            return;
        }
        sourceTaken(id, taken);
        if (n == 0) {
            break;
        }
        send(cl.fd, pkt, (size_t)n, 0);
        resetsSend();
    }
    ngtcp2_conn_update_pkt_tx_time(cl.quic, ts);
}

/* The peer's CONNECTION_CLOSE, as it said it. */
static void
peerClosed(void)
{
    ngtcp2_connection_close_error e;

    ngtcp2_conn_get_connection_close_error(cl.quic, &e);
    printf("peer closed: %s 0x%llx\n",
           e.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION
               ? "app"
               : "transport",
           (unsigned long long)e.error_code);
    cl.peerClosed = true;
    cl.done = true;
}

static void
readAll(void)
{
    uint8_t buf[65536];
    ngtcp2_path path = {
        .local = { (ngtcp2_sockaddr*)&cl.local, cl.localLen },
        .remote = { (ngtcp2_sockaddr*)&cl.remote, cl.remoteLen },
    };
    ngtcp2_pkt_info pi = { 0 };
    ssize_t n;

    while (!cl.done && (n = recv(cl.fd, buf, sizeof(buf), 0)) > 0) {
        int rc = ngtcp2_conn_read_pkt(cl.quic, &path, &pi, buf, (size_t)n,
                                      nowNs());

        if (rc == NGTCP2_ERR_DRAINING) {
            peerClosed();
        } else if (rc != 0) {
            fprintf(stderr, "corHttp3Client: read: %s\n", ngtcp2_strerror(rc));
            cl.done = true;
        }
    }
}

/* A flood is over once all of it went and the server had a moment to
 * answer it. */
static bool
floodOver(uint64_t* quietSince)
{
    /* Unidirectional streams: as many as the server let open. */
    bool all = cl.sent == cl.count
               || (strcmp(cl.flood, "uni") == 0
                   && ngtcp2_conn_get_streams_uni_left(cl.quic) == 0);

    if (!cl.started || !all || cl.head != NULL) {
        return false;
    }
    if (*quietSince == 0) {
        *quietSince = nowMs();
    }
    return nowMs() >= *quietSince + 500;
}

/* Close with H3_NO_ERROR, as a client done with its connection does. */
static void
closeSend(void)
{
    ngtcp2_connection_close_error e;
    ngtcp2_path_storage ps;
    ngtcp2_pkt_info pi;
    uint8_t pkt[PACKET_MAX];
    ngtcp2_ssize n;

    if (ngtcp2_conn_is_in_draining_period(cl.quic)
        || ngtcp2_conn_is_in_closing_period(cl.quic)) {
        return;
    }
    ngtcp2_connection_close_error_set_application_error(&e, NGHTTP3_H3_NO_ERROR,
                                                        NULL, 0);
    ngtcp2_path_storage_zero(&ps);
    n = ngtcp2_conn_write_connection_close(cl.quic, &ps.path, &pi, pkt,
                                           sizeof(pkt), &e, nowNs());
    if (n > 0) {
        send(cl.fd, pkt, (size_t)n, 0);
    }
}

static void
bodyLoad(void)
{
    int fd = open(cl.bodyFile, O_RDONLY);
    struct stat st;

    if (fd < 0 || fstat(fd, &st) != 0) {
        die("cannot read the body's file");
    }
    cl.bodyLen = (size_t)st.st_size;
    cl.body = malloc(cl.bodyLen + 1);
    if (cl.body == NULL
        || read(fd, cl.body, cl.bodyLen) != (ssize_t)cl.bodyLen) {
        die("cannot read the body's file");
    }
    close(fd);
}

static void
optionsRead(int argc, char** argv)
{
    int at = 1;

    for (; at < argc && argv[at][0] == '-'; at++) {
        const char* a = argv[at];

        if (strcmp(a, "-m") == 0 && at + 1 < argc) {
            cl.method = argv[++at];
        } else if (strcmp(a, "-d") == 0 && at + 1 < argc) {
            cl.bodyFile = argv[++at];
        } else if (strncmp(a, "--protocol=", 11) == 0) {
            cl.protocol = a + 11;
        } else if (strncmp(a, "--flood=", 8) == 0) {
            cl.flood = a + 8;
        } else if (strncmp(a, "--count=", 8) == 0) {
            cl.count = (unsigned)atoi(a + 8);
        } else if (strncmp(a, "--seconds=", 10) == 0) {
            cl.seconds = (unsigned)atoi(a + 10);
        } else {
            die("usage: corHttp3Client [-m METHOD] [-d FILE] [--protocol=P] "
                "[--flood=KIND --count=N] [--seconds=S] HOST PORT PATH");
        }
    }
    if (argc - at != 3) {
        die("usage: corHttp3Client [options] HOST PORT PATH");
    }
    cl.host = argv[at];
    cl.port = argv[at + 1];
    cl.path = argv[at + 2];
}

int
main(int argc, char** argv)
{
    uint64_t quietSince = 0;
    uint64_t deadline;

    optionsRead(argc, argv);
    if (cl.bodyFile != NULL) {
        bodyLoad();
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    quicOpen();
    deadline = nowMs() + cl.seconds * 1000u;
    while (!cl.done && nowMs() < deadline) {
        struct pollfd p = { .fd = cl.fd, .events = POLLIN };
        uint64_t expiry = ngtcp2_conn_get_expiry(cl.quic);
        uint64_t now = nowNs();
        int ms = expiry <= now ? 0
                 : expiry - now > 10000000u
                     ? 10
                     : (int)((expiry - now + 999999) / 1000000);

        if (poll(&p, 1, ms) > 0) {
            readAll();
        }
        if (!cl.done && ngtcp2_conn_get_expiry(cl.quic) <= nowNs()
            && ngtcp2_conn_handle_expiry(cl.quic, nowNs()) != 0) {
            fprintf(stderr, "corHttp3Client: the connection timed out\n");
            break;
        }
        if (cl.done) {
            break;
        }
        if (cl.handshaken && cl.flood != NULL) {
            floodStep();
        }
        flush();
        if (cl.flood != NULL && floodOver(&quietSince)) {
            break;
        }
    }
    settingsPrint();
    if (cl.flood != NULL) {
        printf("flood %s: sent %u in %llu ms; streams %u, answered %u, reset "
               "by the server %u\n",
               cl.flood, cl.sent,
               (unsigned long long)(cl.started ? nowMs() - cl.startMs : 0),
               cl.streams, cl.answered, cl.peerResets);
        if (!cl.peerClosed) {
            printf("peer kept the connection\n");
        }
    }
    closeSend();
    ngtcp2_conn_del(cl.quic);
    nghttp3_conn_del(cl.h3);
    gnutls_deinit(cl.tls);
    gnutls_certificate_free_credentials(cl.cred);
    free(cl.body);
    return cl.flood != NULL || cl.fin ? 0 : 1;
}
