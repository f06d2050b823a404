/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of HTTP/3 in the http module (docs/http3.md): a listener's
 * UDP socket on each loop (an endpoint), the connection IDs that name
 * their loop, a QUIC connection (ngtcp2, its handshake through GnuTLS),
 * and a request stream (nghttp3) served as a CorRequest like HTTP/1's
 * and HTTP/2's. QUIC itself, QPACK and the frame rules are the
 * libraries'; these files are the glue.
 */
#ifndef COR_HTTP3_INT_H
#define COR_HTTP3_INT_H

#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "corHttpInt.h"

typedef struct Http3Endpoint Http3Endpoint;
typedef struct Http3Conn Http3Conn;
typedef struct Http3Stream Http3Stream;
typedef struct Http3Cid Http3Cid;
typedef struct Http3Cert Http3Cert;

/* Our connection IDs: [0] the index of the loop that owns the
 * connection, then random bytes (corHttp3Cid.c). */
#define H3_CID_BYTES 17
/* The largest datagram read, and the largest QUIC packet written. */
#define H3_DATAGRAM_MAX 65536
#define H3_PACKET_MAX 1452
/* Packets sent in one sendmsg (UDP_SEGMENT). */
#define H3_GSO_SEGMENTS 10
/* Buckets of a loop's connection ID table. */
#define H3_CID_BUCKETS 1024

/* A connection ID of ours in its loop's table, and in its connection's
 * list; owned by the connection. */
struct Http3Cid {
    Http3Cid* next; /* in its bucket */
    CorList link;   /* in conn->cids */
    ngtcp2_cid cid;
    Http3Conn* conn;
};

/* One loop's HTTP/3: its endpoints, its connections, its IDs; owned by
 * that loop. */
typedef struct Http3Loop {
    Http3Endpoint* endpoints; /* one per listener with http3: on */
    unsigned endpointCount;
    CorList conns;         /* every Http3Conn */
    atomic_uint connCount; /* read by other threads (connections) */
    unsigned handshakes;   /* of them, still in their handshake */
    Http3Cid* cids[H3_CID_BUCKETS];
    bool draining;
    ngtcp2_mem quicMem; /* the loop's cache of blocks (corHttp3Mem.c) */
    nghttp3_mem h3Mem;
    uint64_t refusedSaidMs;      /* past limits.connections: said then */
    unsigned refusedUnsaid;      /* refused since */
    uint8_t in[H3_DATAGRAM_MAX]; /* a datagram read */
    uint8_t out[H3_GSO_SEGMENTS * H3_PACKET_MAX]; /* packets written */
} Http3Loop;

/* A listener's UDP socket on one loop (SO_REUSEPORT: each loop has its
 * own, the kernel spreads the clients' 4-tuples over them). Owned by the
 * loop's Http3Loop. */
struct Http3Endpoint {
    CorEvIo io;
    HttpLoop* hl;
    unsigned index; /* in every loop's endpoints: the same listener */
    const CorListener* l;
    struct sockaddr_storage local;
    socklen_t localLen;
    Http3Cert** certs; /* the listener's, as GnuTLS serves them (by
                        * corListenerCertPick's index) */
    unsigned certCount;
    char altSvc[48]; /* h3=":443"; ma=86400 */
};

/* A stream's body to send: pieces handed to nghttp3, kept until the
 * peer acknowledged them (ngtcp2 sends again from them after a loss),
 * then freed (corHttp3Out.c). */
typedef struct Http3Piece Http3Piece;
struct Http3Piece {
    Http3Piece* next;
    const uint8_t* data; /* bytes, its own or borrowed */
    size_t len;
    uint8_t own[]; /* a copy, when data points here */
};

typedef struct {
    Http3Piece* head; /* the oldest piece not wholly acknowledged */
    Http3Piece* tail;
    Http3Piece* unsent; /* the first piece not yet handed to nghttp3 */
    size_t ackedOff;    /* of head, acknowledged */
    uint64_t unsentLen; /* bytes queued, not yet handed to nghttp3 */
    uint64_t flying;    /* handed to nghttp3, not yet acknowledged */
} Http3Out;

/*
 * A request stream from its HEADERS to its release. Owned by its
 * connection until it is served, then by the core until ops->release. It
 * owns what its CorRequest points to, so a connection that closes under
 * it frees nothing a handler in flight reads.
 */
struct Http3Stream {
    CorRequest r;
    Http3Conn* conn; /* NULL once the connection is gone */
    CorList link;    /* in conn->streams */
    int64_t id;
    CorBuf raw;      /* "name\0value\0" of each field as it came */
    size_t listSize; /* the field section as RFC 9114 counts it */
    unsigned refuse; /* a status to answer instead of serving */
    CorBuf body;
    Http3Out out;
    uint64_t fileOff;    /* of a file body, read so far */
    uint64_t startMs;    /* its HEADERS began then */
    uint64_t bodyMs;     /* its last piece of body came then, or 0 */
    bool served;         /* with the core */
    bool answered;       /* its response is submitted */
    bool closed;         /* nghttp3 closed it */
    bool sent;           /* corRequestSent was called */
    bool ended;          /* its body is queued whole (or its stream
                          * ended) */
    bool deferred;       /* nghttp3 waits for bytes (WOULDBLOCK) */
    bool drained;        /* bytes were taken: tell the core */
    bool built;          /* its request was built from its fields */
    bool peerEnded;      /* its FIN came: the body is whole */
    bool bodyStopped;    /* a body handed on is read no more (failed, or
                          * answered before it ended) */
    bool overruled;      /* refused 413 while its handler ran: the
                          * handler's answer goes nowhere, and the
                          * stream outlives its release until the
                          * refusal is out */
    bool released;       /* overruled, and the core let it go */
    uint64_t bodyUnread; /* handed on, not yet taken: its window shut */
    char remote[HTTP_REMOTE_BYTES];
    char* target;
    CorHeader* headers;
};

/* Why a connection was ended for abuse (corHttp3Frames.c). */
typedef enum {
    H3_ABUSE_RAPID_RESET, /* streams cancelled past rapid_reset_limit */
    H3_ABUSE_NO_PROGRESS, /* frames that make no progress past
                           * idle_frame_limit */
    H3_ABUSE_COUNT
} Http3Abuse;

/* What a client spent of its second's budget (HTTP/2's limits). */
typedef struct {
    uint64_t windowMs; /* the second began then */
    unsigned resets;   /* streams it cancelled */
    unsigned idle;     /* frames that made no progress */
    unsigned begun;    /* request streams it opened */
    unsigned abuse;    /* Http3Abuse + 1 once past a limit, else 0 */
} Http3Budget;

/* The reader of the frame heads of a stream the client opened, before
 * nghttp3 takes its bytes (corHttp3Frames.c): the ngtcp2 stream's user
 * data; owned by its connection. */
typedef struct {
    CorList link; /* in conn->frames */
    int64_t id;
    uint64_t type; /* the frame's */
    uint64_t left; /* of its payload, not yet read */
    uint64_t acc;  /* a varint being read */
    uint8_t need;  /* its bytes still to come */
    uint8_t phase;
    bool control;   /* the client's control stream */
    bool cancelled; /* counted as a cancel */
    uint8_t heldLen;
    uint8_t held[8]; /* held back from nghttp3 (a PRIORITY_UPDATE's
                      * element ID) until the next read */
} Http3Frames;

/* A QUIC connection; owned by its loop, freed when it closes. */
struct Http3Conn {
    CorList link; /* in the loop's conns */
    Http3Endpoint* ep;
    HttpLoop* hl;
    ngtcp2_conn* quic;
    nghttp3_conn* h3;
    gnutls_session_t tls;
    Http3Cert* cert;            /* the certificate its handshake serves */
    ngtcp2_crypto_conn_ref ref; /* GnuTLS's way back to quic */
    struct sockaddr_storage peer;
    socklen_t peerLen;
    char peerName[64];
    CorList streams; /* every stream not yet released */
    CorList cids;    /* its IDs in the loop's table (Http3Cid) */
    CorList frames;  /* a reader for each stream the client opened */
    Http3Budget budget;
    CorEvTimer timer;
    CorEvSoon soon; /* write before the loop sleeps */
    ngtcp2_connection_close_error error;
    bool handshaken; /* its handshake completed */
};

/* ---- corHttp3Endpoint.c -------------------------------------------------- */

/* Send len bytes of pkt to the peer from ep's socket. A full socket
 * drops it: QUIC takes it as lost and sends again. */
void corHttp3Send(Http3Endpoint* ep, const struct sockaddr* to, socklen_t toLen,
                  const uint8_t* pkt, size_t len);
/* The same for packets of segment bytes each (the last may be shorter),
 * in one sendmsg where the kernel has UDP_SEGMENT (GSO). */
void corHttp3SendSegments(Http3Endpoint* ep, const struct sockaddr* to,
                          socklen_t toLen, const uint8_t* buf, size_t len,
                          size_t segment);
/* The secret the tokens and the stateless resets are made with. */
extern uint8_t corHttp3Secret[32];

/* ---- corHttp3Cid.c ------------------------------------------------------- */

/* A new connection ID of hl's loop into cid. */
void corHttp3CidMake(const HttpLoop* hl, ngtcp2_cid* cid);
/* The loop a connection ID names, or -1 when it names none. */
int corHttp3CidLoop(const uint8_t* id, size_t len);
Http3Conn* corHttp3CidFind(Http3Loop* h, const uint8_t* id, size_t len);
int corHttp3CidAdd(Http3Loop* h, Http3Conn* c, const ngtcp2_cid* cid);
void corHttp3CidRemove(Http3Loop* h, const ngtcp2_cid* cid);
/* Every ID of c out of the table. */
void corHttp3CidRemoveAll(Http3Loop* h, Http3Conn* c);

/* ---- corHttp3Tls.c ------------------------------------------------------- */

/* Load the listener's certificates and keys for ep (credentials of its
 * loop's own). Returns 0 or -1 (logged). */
int corHttp3TlsLoad(Http3Endpoint* ep);
void corHttp3TlsFree(Http3Endpoint* ep);
/* c's GnuTLS session, ALPN h3 only, tied to c->quic; and its end. Returns
 * 0 or -1. */
int corHttp3TlsSession(Http3Conn* c);
void corHttp3TlsSessionFree(Http3Conn* c);

/* ---- corHttp3Conn.c ------------------------------------------------------ */

/* A connection for the Initial packet hd (ngtcp2_accept's), from peer;
 * ocid: the ID the client first chose, when it came back after a Retry.
 * It was admitted against limits.connections (corAcceptAdmit): it gives
 * that back when it closes, or fails. Returns it (in the table, on the
 * loop) or NULL. */
Http3Conn* corHttp3ConnNew(Http3Endpoint* ep, const ngtcp2_pkt_hd* hd,
                           const ngtcp2_cid* ocid, const struct sockaddr* peer,
                           socklen_t peerLen);
/* A datagram of c's came. */
void corHttp3ConnRead(Http3Conn* c, const struct sockaddr* peer,
                      socklen_t peerLen, const uint8_t* pkt, size_t len);
/* Write what c has to send, soon (before the loop sleeps). */
void corHttp3ConnKick(Http3Conn* c);
/* Close c now, with CONNECTION_CLOSE (H3_NO_ERROR). */
void corHttp3ConnStop(Http3Conn* c);
/* Close c for an application error (an nghttp3 failure). */
void corHttp3ConnFail(Http3Conn* c, int h3Error);

/* ---- corHttp3Stream.c ---------------------------------------------------- */

/* nghttp3's callbacks for request streams, c its user data. */
extern const nghttp3_callbacks corHttp3Callbacks;
/* The connection closes: its streams finish into the void. */
void corHttp3StreamsDetach(Http3Conn* c);
/* After a write: tell the core of each stream whose queue drained. */
void corHttp3StreamsDrained(Http3Conn* c);
/* The earliest deadline (ms) of a stream whose request is still coming
 * (limits.request_timeout for the whole of it, limits.body_timeout
 * between two pieces of its body), 0 for none; those past it at now are
 * reset (H3_REQUEST_CANCELLED) and counted as 408 refusals. */
uint64_t corHttp3StreamsDeadline(Http3Conn* c, uint64_t now);

/* ---- corHttp3Frames.c -------------------------------------------------- */

/* The reader of stream id (streamArg: its ngtcp2 user data, NULL the
 * first time: made then). Returns it, or NULL for no memory. */
Http3Frames* corHttp3FramesOf(Http3Conn* c, int64_t id, void* streamArg);
/* Read len bytes of its stream: the frames that make no progress are
 * counted (c->budget.abuse set past the limit). Returns how many bytes
 * at the end of p to hold back from nghttp3 until the next read. */
size_t corHttp3FramesScan(Http3Conn* c, Http3Frames* f, const uint8_t* p,
                          size_t len);
/* The client cancelled f's stream: whether that is past the limit
 * (c->budget.abuse set). */
bool corHttp3FramesCancelled(Http3Conn* c, Http3Frames* f);
/* A new second of the budget, when the last is over. */
void corHttp3BudgetTick(Http3Conn* c);
void corHttp3FramesFree(Http3Frames* f);
void corHttp3FramesFreeAll(Http3Conn* c);

/* ---- corHttp3Out.c ------------------------------------------------------- */

/* Queue len bytes of data: copied, or borrowed (they must outlive the
 * queue: a request's own answer). Returns 0 or -ENOMEM. */
int corHttp3OutAdd(Http3Out* o, const void* data, size_t len, bool copy);
/* Hand what is queued to nghttp3: up to count vectors. Returns their
 * number. */
size_t corHttp3OutTake(Http3Out* o, nghttp3_vec* vec, size_t count);
/* The peer acknowledged n more bytes: what they were goes. */
void corHttp3OutAcked(Http3Out* o, uint64_t n);
void corHttp3OutFree(Http3Out* o);

/* ---- corHttp3Mem.c ------------------------------------------------------- */

/* h's allocators for ngtcp2 and nghttp3, on hl's loop. */
void corHttp3MemInit(Http3Loop* h, HttpLoop* hl);

/* ---- corHttp3Conf.c ------------------------------------------------------ */

/* The http module's http3 mapping, read once per generation. */
typedef struct {
    unsigned retryAbove; /* retry_above: past so many handshakes in
                          * flight on a loop, a new client proves its
                          * address with a Retry first; 0: always */
} Http3Conf;

extern Http3Conf corHttp3Conf;

typedef enum {
    H3_COUNT_CONNECTION, /* a connection began */
    H3_COUNT_STREAM,     /* a request stream began */
    H3_COUNT_HANDOFF,    /* a datagram went to its connection's loop */
    H3_COUNT_RETRY,      /* a Retry went: a loaded loop's address check */
    H3_COUNT_RESET,      /* a stateless reset went */
    H3_COUNT_IDLE,       /* a connection closed at its idle timeout */
    H3_COUNT_KINDS
} Http3CountKind;

void corHttp3Count(Http3CountKind kind);
/* A connection ended for abuse: counted, and what the log says of it. */
void corHttp3CountAbuse(Http3Abuse why);
const char* corHttp3AbuseText(Http3Abuse why);

/* ---- corHttpModule.c ----------------------------------------------------- */

/* The HttpLoop of loop index (for a packet handed to its owner). */
HttpLoop* corHttpLoopOf(unsigned index);
unsigned corHttpLoopCount(void);

#endif /* COR_HTTP3_INT_H */
