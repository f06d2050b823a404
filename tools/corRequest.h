/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor-request: one request printed as curl -i prints it, several over one
 * connection at once, or a load (closed or open loop) with latency
 * percentiles, to http(s):// and cor(s):// URLs alike, so that the two
 * protocols are measured with one tool. The tool has its own small epoll
 * engine rather than the server's client: a load generator must cost less
 * than what it measures, and measure from when a request was due, not
 * from when a busy client got round to it.
 *
 * A protocol is a CorReqProtocol: how a request is written and how the
 * bytes that come back are cut into answers. The engine
 * (corRequestLoad.c) does the rest.
 */
#ifndef COR_REQUEST_H
#define COR_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "corKit.h" /* CorBuf: what a connection sends and reads */

/* A request to send; the caller's, read for every send. */
typedef struct {
    const char* method;
    const char* target;         /* path and query */
    const char* host;           /* HTTP's Host: host[:port] */
    const char* const* headers; /* "Name: value" each */
    unsigned headerCount;
    const char* body;
    size_t bodyLen;
    bool head; /* HEAD: no body comes back */
} CorReqMessage;

/* An answer, pointing into the engine's input buffer until the next read. */
typedef struct {
    int status;
    uint32_t id; /* multiplexed protocols: the request's */
    /* The server takes no new requests here (a drain): the connection
     * serves what it has, then closes; new ones go to a new one. */
    bool goAway;
    /* What to print before the body: the head as curl -i shows it. */
    const char* head;
    size_t headLen;
    const char* body;
    size_t bodyLen;
} CorReqAnswer;

typedef struct {
    const char* alpn; /* its name in TLS's ALPN */
    /* Answers come in any order, matched by id (else in request order). */
    bool multiplexed;
    /* Per-connection state, or NULL when the protocol needs none. */
    void* (*stateNew)(void);
    void (*stateFree)(void* state);
    /* Bytes sent first on a new connection (a handshake); may be NULL. */
    int (*greet)(void* state, CorBuf* out);
    /* Append the request with id to out. Returns 0 or -errno. */
    int (*encode)(void* state, const CorReqMessage* m, uint32_t id,
                  CorBuf* out);
    /* Cut one answer from in[0..len): returns the bytes it took (> 0),
     * with a->status 0 for a frame that is not an answer (a handshake's,
     * or a CLOSE, which sets a->goAway; an answer that says the
     * server closes after it sets a->goAway too);
     * 0 when more bytes are needed; or -1 with why. oldest is the
     * request the next answer is for when the protocol is not
     * multiplexed (its body depends on it: HEAD). */
    ssize_t (*decode)(void* state, char* in, size_t len,
                      const CorReqMessage* oldest, CorReqAnswer* a, char* why,
                      size_t whyLen);
} CorReqProtocol;

extern const CorReqProtocol corReqHttp;
extern const CorReqProtocol corReqCor;

/* Latencies, in nanoseconds (corRequestHist.c). */
#define COR_REQ_HIST_BUCKETS 3840

typedef struct {
    uint64_t counts[COR_REQ_HIST_BUCKETS];
    uint64_t total;
    uint64_t max;
} CorReqHist;

void corReqHistAdd(CorReqHist* h, uint64_t ns);
/* The latency under which percent (0..100) of them fall. */
uint64_t corReqHistPercentile(const CorReqHist* h, double percent);

/* TLS (corRequestTls.c), on the engine's non-blocking sockets. A client
 * context verifying peers against caFile, or the system's store (none
 * with insecure), offering alpn; NULL with why. */
struct ssl_ctx_st* corReqTlsContext(const char* caFile, bool insecure,
                                    const char* alpn, char* why, size_t whyLen);
/* A connection's TLS on fd, with host as SNI and as the name checked. */
struct ssl_st* corReqTlsNew(struct ssl_ctx_st* ctx, int fd, const char* host);
/* A step of the handshake: 1 done; -EAGAIN, wanting to read, or to write
 * when *wantWrite; -EPROTO with why. */
int corReqTlsHandshake(struct ssl_st* ssl, bool* wantWrite, char* why,
                       size_t whyLen);
/* As recv and send: the bytes moved, 0 for the peer's end (reads),
 * -EAGAIN (with *wantWrite as above), or -EPROTO / -EPIPE with why. */
ssize_t corReqTlsRead(struct ssl_st* ssl, void* buf, size_t cap,
                      bool* wantWrite, char* why, size_t whyLen);
ssize_t corReqTlsWrite(struct ssl_st* ssl, const void* buf, size_t len,
                       bool* wantWrite, char* why, size_t whyLen);

/* What to do. */
typedef struct {
    const CorReqProtocol* protocol;
    const char* scheme;     /* as the URL wrote it */
    struct ssl_ctx_st* tls; /* https, cors: else NULL */
    const char* host;
    unsigned port;
    const CorReqMessage* messages; /* sent in turn */
    unsigned messageCount;
    unsigned connections;
    unsigned depth; /* requests in flight per connection */
    double seconds; /* load: how long; 0: each message
                       once, printed */
    double rate;    /* load: requests a second in all,
                       open loop; 0: closed loop */
    int timeoutMs;  /* an answer's, and the connect's */
} CorReqPlan;

/* Run plan: print its answers, or its load's summary. Returns 0 when
 * every request was answered, 1 otherwise. */
int corReqRun(const CorReqPlan* plan);

#endif /* COR_REQUEST_H */
