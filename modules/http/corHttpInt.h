/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the HTTP server module: a loop's share of the server, a
 * connection, a request in flight, and the functions the module's files
 * share.
 */
#ifndef COR_HTTP_INT_H
#define COR_HTTP_INT_H

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "cor.h"
#include "corKit.h"
#include "corHttpParse.h"

typedef struct HttpConn HttpConn;
typedef struct HttpLoop HttpLoop;

/* The size of the I/O buffers a loop lends its connections: a request
 * head or an answer that fits takes one; more grows it past the cache. */
#define HTTP_BUF_BYTES 4096
/* Free buffers a loop keeps for the next connection that reads or
 * writes; more are given back to malloc. */
#define HTTP_BUF_CACHE 64
/* Freed HTTP/2 streams a loop keeps for its next ones (corHttp2Stream.c):
 * a connection's 16 streams of a turn come and go together, past what
 * malloc's per-thread cache holds. */
#define HTTP_H2_STREAM_CACHE 32
/* Freed blocks of nghttp2's, ngtcp2's and nghttp3's a loop keeps for
 * their next ones (corHttpBlocks.c): by glibc's chunk size, 32 to 512
 * bytes in steps of 16, at most so many of each (2.1 MB a loop were
 * every size full). An HTTP/3 connection's 100 streams come and go in a
 * turn with a few blocks of a size each: at 64 kept, half missed. */
#define HTTP_BLOCK_CLASSES 31
#define HTTP_BLOCKS_KEPT 255
/* An address as text (INET6_ADDRSTRLEN, with room). */
#define HTTP_REMOTE_BYTES 48

/* One loop's part of the server; owned by that loop, on lines of its own. */
struct HttpLoop {
    _Alignas(COR_CACHE_LINE) CorEvLoop* loop;
    unsigned index;
    CorKitSet conns;   /* every open connection (HttpConn.k) */
    CorAccept* accept; /* this loop's accepting, or NULL */
    CorKitSet h2Conns; /* its HTTP/2 connections (corHttp2Conn.c) */
    bool draining;
    time_t dateSecond;
    char date[40]; /* "Sun, 29 Nov 2026 20:00:00 GMT" */
    /* The head being parsed, whichever connection it is: a request keeps
     * a copy of what it needs, so one header array serves the loop. */
    CorHttpRequestHead head;
    char* bufs[HTTP_BUF_CACHE]; /* free buffers of HTTP_BUF_BYTES */
    unsigned bufCount;
    void* h2Streams[HTTP_H2_STREAM_CACHE]; /* free Http2Streams */
    unsigned h2StreamCount;
    bool h2StreamsClosed;             /* the loop ended: none is kept */
    void* blocks[HTTP_BLOCK_CLASSES]; /* freed small blocks, each class a
                                       * list through the blocks' first
                                       * word (corHttpBlocks.c) */
    uint8_t blockCount[HTTP_BLOCK_CLASSES];
    struct Http3Loop* h3; /* its HTTP/3 (corHttp3Endpoint.c), or NULL */
};

/*
 * Where a connection is in its life, and the one deadline each state
 * arms (corHttpConnStateSet, the only place one is armed): output that
 * waits on a client that does not read arms limits.send_timeout instead,
 * in any state.
 */
typedef enum {
    HTTP_IDLE,    /* between requests: keep-alive (before the
                   * first over TLS: the handshake's) */
    HTTP_HEAD,    /* part of a head has come: the head and
                   * its body within request_timeout of the
                   * first byte */
    HTTP_BODY,    /* the head is in, the body is coming:
                   * body_timeout between pieces, within
                   * request_timeout */
    HTTP_SERVING, /* the request is with its handler: none,
                   * but body_timeout between pieces of a
                   * body it takes as it comes */
    HTTP_CLOSING, /* the last bytes go out, then close */
    HTTP_LINGER,  /* an error answer is out: what the client
                   * still sends is read and dropped, so that
                   * it reads the answer, not a reset; 5 s
                   * between pieces, 30 s in all */
    HTTP_UPGRADED /* its 101 is set: handed over next */
} HttpState;

/* A request body that its handler takes as it comes (CorHandler.streamBody,
 * corHttpBodyStream.c), from the connection's side. */
typedef enum {
    HTTP_BODY_WHOLE,     /* none streams: the body was read whole
                          * before its handler ran, or was streamed
                          * to its end */
    HTTP_BODY_STREAMING, /* handed on as it is read */
    HTTP_BODY_CUT        /* streamed, and failed midway: the rest is
                          * never read, and the connection closes
                          * after the answer */
} HttpBodyStream;

/* How a response's body goes out after its head. */
typedef enum {
    HTTP_FRAME_NONE,    /* no body: a HEAD, a 1xx, 204 or 304 */
    HTTP_FRAME_LENGTH,  /* Content-Length: bodyLeft bytes to go */
    HTTP_FRAME_CHUNKED, /* a stream of unknown length, HTTP/1.1 */
    HTTP_FRAME_CLOSE    /* the same for HTTP/1.0: to the close */
} HttpFraming;

/*
 * A request, from its head to its release. Owned by the core between
 * corRequestServe and ops->release. It owns everything its CorRequest
 * points to: its head is copied behind it when the head is parsed, and its
 * body is a buffer of its own (the connection's input buffer, handed over
 * whole when nothing follows the body in it, else a copy; a body handed
 * on as it comes is copied into the core's container), so a connection
 * that dies under a request in flight frees nothing the request uses.
 */
typedef struct {
    CorRequest r;
    HttpConn* conn;        /* NULL once the connection is gone */
    HttpLoop* hl;          /* the loop that read it */
    int64_t contentLength; /* -1 when absent */
    bool chunked;
    bool keepAlive; /* what the head asked for */
    bool expectContinue;
    int versionMinor;
    bool shutBefore;                /* its client had shut its side already */
    bool answered;                  /* its answer's head is in the output (a
                                     * streamed body's failure then closes,
                                     * rather than answer) */
    HttpFraming framing;            /* the answer's, set with its head */
    uint64_t lengthSaid;            /* its head's Content-Length, or
                                     * UINT64_MAX for none */
    uint64_t bodyLeft;              /* HTTP_FRAME_LENGTH: bytes still owed */
    char remote[HTTP_REMOTE_BYTES]; /* the client's address, as r.remote */
    char* body;                     /* the body's buffer, or NULL */
    size_t bodyCap;                 /* its size: a loop buffer's goes back */
    size_t size;                    /* of the block it is (corChunkTake) */
    CorHeader headers[];            /* then the head's bytes */
} HttpRequest;

/*
 * A connection; owned by its loop, freed on close (a request still with
 * its handler then holds none of it). It stands on the kit (corKit.h):
 * its socket's events, its buffers (k.in: what was read and not yet
 * consumed, from k.in.off; k.out and a file part: what is to send), its
 * one deadline and its loop's set. Between requests it holds no buffer:
 * it takes one of its loop's when bytes come, and gives it back once they
 * are consumed, so an idle keep-alive connection costs this struct.
 */
struct HttpConn {
    CorKitConn k;
    HttpLoop* hl;
    CorTransport t;       /* its bytes go through this */
    HttpState state;      /* set by corHttpConnStateSet only */
    uint64_t waitMs;      /* the state's wait began, or its client
                           * last made progress (a piece of body) */
    uint32_t handshakeMs; /* TLS: the first request's bytes must
                           * come within it; 0: plain */
    size_t headParsed;    /* head bytes at the last parse that
                           * wanted more */
    size_t headScanned;   /* head bytes searched for its end */
    size_t bodyRaw;       /* chunked: undecoded input starts here */
    size_t bodyLen;       /* the body so far */
    CorHttpChunked chunked;
    HttpBodyStream bodyStream; /* the body of the request served */
    size_t bodyUnread;         /* streamed: handed on, not yet taken */
    bool bodyHeld;             /* streamed: so much is unread that the
                                * socket waits until the handler takes */
    CorEvSoon bodySoon;        /* the handler took: read on */
    uint64_t readStartMs;      /* the request's first byte came then */
    uint64_t lingerEndMs;      /* a lingering close ends then at last */
    size_t lingerBytes;        /* what it dropped so far */
    HttpRequest* req;          /* from its parsed head to its answer
                                * (HTTP_UPGRADED: to its hand-over) */
    bool keepAlive;
    bool linger;        /* an error answer: linger, then close */
    bool readPaused;    /* input waits in the socket (the buffer
                         * was full, or a request was being
                         * served): read again later */
    bool peerClosed;    /* the end was read */
    bool tls;           /* its listener speaks TLS */
    bool h2c;           /* a plain listener with http2: on: the
                         * HTTP/2 preface may come first */
    bool served;        /* answered a request: idle now is between
                         * requests, not before the first */
    const char* altSvc; /* its listener's Alt-Svc (HTTP/3), or NULL */
    struct sockaddr_storage peer;
    /* The peer's address as text, made once: each request copies it
     * (formatting it costs a third of a small request). */
    char remote[HTTP_REMOTE_BYTES];
};

/* ---- corHttpBuf.c -------------------------------------------------------- */

/* Lend b (which holds no memory) a buffer of HTTP_BUF_BYTES from the
 * loop's cache, or malloc. Returns 0 or -ENOMEM. Inline: twice a
 * request. */
static inline int corHttpBufLend(HttpLoop* hl, CorBuf* b);
/* Give a buffer of cap bytes back (kept when it is a cached size and the
 * cache has room, freed otherwise); NULL is ignored. */
static inline void corHttpBufGive(HttpLoop* hl, char* buf, size_t cap);
/* b's memory back to the loop (corHttpBufGive); b is empty after. */
static inline void corHttpBufReturn(HttpLoop* hl, CorBuf* b);
/* Free the cache and the loop's header array (the loop ended). */
void corHttpLoopBuffersFree(HttpLoop* hl);
/* Size the loop's header array for limits.header_count. Returns 0 or -1. */
int corHttpLoopBuffersInit(HttpLoop* hl);

/* ---- corHttpBlocks.c ----------------------------------------------------- */

/* A block of n bytes from hl's cache of freed small blocks, or malloc's;
 * on hl's loop only. */
void* corHttpBlockTake(HttpLoop* hl, size_t n);
/* A block of malloc's (not NULL) back to hl's cache, or to malloc. */
void corHttpBlockGive(HttpLoop* hl, void* p);
/* The loop ends: the blocks its cache kept go back to malloc, and what
 * is freed after goes there too. */
void corHttpBlocksEnd(HttpLoop* hl);

/* ---- corHttpRequest.c ---------------------------------------------------- */

/* What a step of reading a request came to. */
typedef enum {
    HTTP_STEP_WAIT,    /* more bytes must come */
    HTTP_STEP_HEAD,    /* a head's first bytes came (HTTP_HEAD):
                        * its deadline runs */
    HTTP_STEP_BODY,    /* a head is in, its body comes */
    HTTP_STEP_REQUEST, /* c->req is whole (HTTP_SERVING): serve */
    HTTP_STEP_REFUSED  /* refused (HTTP_CLOSING): the answer is
                        * queued, the connection ends after it */
} HttpStep;

/* Read what the socket has into c->k.in (c->readPaused when the buffer is
 * full, c->peerClosed at its end). Returns -1 on an error (close). */
int corHttpRead(HttpConn* c);
/* Parse or gather what the input holds of the request being read, one
 * step. */
HttpStep corHttpRequestStep(HttpConn* c);
/* Every byte read was consumed and no request is being read: the input's
 * buffer goes back to the loop (an idle connection holds none). */
void corHttpInputRelease(HttpConn* c);
/* Say a refusal at a limit (413, 414, 431, 408) as every protocol does;
 * another status is HTTP's own and not said. */
void corHttpLimitsSay(const HttpConn* c, int status);
/* Refuse the request being read with status (said, answered): the
 * connection ends once the answer is out, lingering (HTTP_CLOSING). */
void corHttpRefuse(HttpConn* c, int status);
void corHttpRequestFree(HttpRequest* req);

/* ---- corHttpBodyStream.c ------------------------------------------------- */

/* c's request, its head just read (HTTP_STEP_BODY), has a handler that
 * takes its body as it comes: the body begins (corRequestBodyBegin) and
 * the request is to be served now (HTTP_SERVING, HTTP_BODY_STREAMING).
 * False when it does not stream (or no memory): it is read whole. */
bool corHttpBodyStreamBegin(HttpConn* c);
/* A body still coming fails with rc (-errno), and is read no more. */
void corHttpBodyFail(HttpConn* c, int rc);
/* The answer is done before the body was read whole (c->bodyStream is
 * not HTTP_BODY_WHOLE): a body still coming fails, and the rest is read
 * no more. */
void corHttpBodyDrop(HttpConn* c);
/* The handler took n bytes (ops->bodyConsumed, r still c's): whether the
 * socket is to be read again (it was held, and is below the mark). */
bool corHttpBodyTaken(HttpConn* c, size_t n);
/* Hand on the body that the input holds and the socket has (while
 * c->readPaused says it may have more), until the socket is drained, the
 * handler has BODY_HELD_BYTES unread (c->bodyHeld), or the body ends: at
 * its end, whole, or failed (past limits.body_bytes, bad framing, the
 * client's end), answered with the refusal when nothing was answered yet.
 * Returns 1 when body bytes came, 0 when none did, -1 when c must close
 * (a read error, or a refusal after the answer's head went). */
int corHttpBodyFeed(HttpConn* c);
/* The client owes the handler body bytes (its timer runs). */
static inline bool corHttpBodyWaits(const HttpConn* c);

/* ---- corHttpConn.c ------------------------------------------------------- */

/* Hands a connection's bytes over (corHttpConnHandOff): t (copied: the
 * taker's to close from here), the input read past what the server
 * consumed and the output not yet written, both to copy. The taker holds
 * the connection's accept slot too: corAcceptClosed once it is done with
 * it (an HTTP/2 connection at its close; an upgrade at once, the core's
 * session being counted apart). */
typedef void (*HttpHandOffFn)(void* arg, const CorTransport* t, const void* in,
                              size_t inLen, const void* out, size_t outLen);

/* c enters state s (or again: a drain's shorter idle wait), and its
 * deadline is armed for it (corHttpConnWaitArm, unless it waits on
 * nobody). Inline: twice a request. */
static inline void corHttpConnStateSet(HttpConn* c, HttpState s);
/* c's state's wait begins now: its deadline armed (corHttpConnStateSet's
 * part out of line). */
void corHttpConnWaitArm(HttpConn* c);
/* The client made progress in the state's wait (a piece of body came,
 * the handler took what held the reading): the wait restarts. Checked
 * when the deadline comes, not re-armed. */
static inline void corHttpConnProgress(HttpConn* c);
/* The kit's deadline passed (CorKitOps.expired). */
void corHttpConnExpired(CorKitConn* k);
/* Write the pending output, then corHttpConnFlushed. Returns -1 on an
 * error (close). */
int corHttpConnFlush(HttpConn* c);
/* After a flush: the send timer runs while output waits on the client,
 * and the state's deadline is back once a wait (wasStalled) ended; once
 * all went, the buffer goes back to the loop. */
void corHttpConnFlushed(HttpConn* c, bool wasStalled);
/* The last answer is out: close, or linger first after a refusal. */
void corHttpConnEnd(HttpConn* c);
/* Lingering: drop what the client sends. Returns -1 when c closed. */
int corHttpConnLinger(HttpConn* c);
/* Take c off its loop and hand its bytes to fn, then free c. */
void corHttpConnHandOff(HttpConn* c, HttpHandOffFn fn, void* arg);
void corHttpConnClose(HttpConn* c);
/* Answer what holds a request as failed and close (a stop). */
void corHttpConnStop(HttpConn* c);
/* A drain: c, idle between requests, closes soon. */
void corHttpConnDrain(HttpConn* c);

/* ---- corHttpFields.c ----------------------------------------------------- */

/* r's target from a :path of len bytes (NUL-terminated), decoded as an
 * HTTP/1 request line's, kept as it came in room (2 * len + 2 bytes of
 * the caller's, which outlive r). Returns 0 or -1 (a 400). */
int corHttpTargetSet(CorRequest* r, char* room, const char* path, size_t len);
/* h's name in lowercase into to (room for h->nameLen): its length, or 0
 * for a field HTTP/2 and HTTP/3 answers drop (HTTP/1's
 * connection-specific ones, and the framing, which is ours). */
size_t corHttpFieldLower(char* to, const CorHeader* h);
/* The names' bytes of the count fields of list. */
size_t corHttpNamesLen(const CorHeader* list, unsigned count);
/* A stream's refusal at a limit (status 413, 431...: corLimitsText's),
 * logged once and counted as every protocol's, with its method, path
 * and body bytes so far; remote: the client's address, or NULL. */
void corHttpRefusalSay(const CorRequest* r, const char* protocol,
                       const char* remote, int status);
/* Whether r's answer with status has a body to send: none for a HEAD,
 * nor for a status that allows none. */
bool corHttpBodyAllowed(const CorRequest* r, int status);
/* Whether r's body, to come, is one the core gathers for a handler that
 * takes it whole (corRequestBodySpool.c) rather than the stream's
 * buffer: past limits.body_memory, or of a length not said (HTTP/2's
 * and HTTP/3's, whose framing says none). */
bool corHttpBodyLarge(const CorRequest* r);

/* ---- corHttp3Endpoint.c (HTTP/3: corHttp3Int.h) -------------------------- */

/* Make the secret of tokens and resets (once, as the module starts). */
void corHttp3SecretMake(void);
/* Read the http3 mapping of the module's conf; register its metrics
 * (corHttp3Conf.c). Returns 0 or -1. */
int corHttp3ConfRead(CorModule* m, const CorConf* conf);
/* Open hl's endpoints for the listeners with http3 (a UDP socket each,
 * on the loop). Returns 0 or -1 (logged). */
int corHttp3Start(HttpLoop* hl, CorListener* const* listeners, unsigned count);
/* The loop drains, or stops: every connection closes now with
 * CONNECTION_CLOSE, the sockets too (a drain cannot keep them: the next
 * generation's join their SO_REUSEPORT group; corHttp3Endpoint.c). */
void corHttp3Drain(HttpLoop* hl);
void corHttp3Stop(HttpLoop* hl);
/* The loop ended: what corHttp3Start made is freed. */
void corHttp3LoopFree(HttpLoop* hl);
/* hl's HTTP/3 connections (from any thread). */
unsigned corHttp3Connections(HttpLoop* hl);
/* The Alt-Svc value for answers on listener l (its endpoint's), or
 * NULL where l has no HTTP/3. */
const char* corHttp3AltSvc(HttpLoop* hl, const CorListener* l);

/* ---- corHttpServe.c ------------------------------------------------------ */

/* Adopt an accepted socket on hl's loop (the calling one). */
void corHttpServeOpen(HttpLoop* hl, const CorListener* l, int fd,
                      const struct sockaddr_storage* peer);

/* ---- corHttpResponse.c --------------------------------------------------- */

/* Append the response of r to the connection's output (the head only for
 * a file or a stream), and choose how its body goes (req->framing): none
 * where the status or a HEAD forbids one, whoever produced it. */
int corHttpResponseAppend(HttpConn* c, HttpRequest* req, bool keepAlive);
/* A piece of a streamed body: a chunk (HTTP/1.1, length unknown), raw
 * (a length said, or HTTP/1.0), nothing (no body allowed). What passes a
 * length said is dropped and the connection set to close. */
int corHttpChunkAppend(HttpConn* c, HttpRequest* req, const void* data,
                       size_t len);
/* The end of a streamed body; -1 when it fell short of its length (the
 * connection must close). */
int corHttpChunkEnd(HttpConn* c, const HttpRequest* req);
/* Append a bare error response (a refused request) that closes. */
int corHttpErrorAppend(HttpConn* c, int status);
/* The same, with why in the body instead of the status's reason (cut at
 * about 120 bytes). */
int corHttpErrorAppendWhy(HttpConn* c, int status, const char* why);
/* Append "HTTP/1.1 100 Continue". */
int corHttpContinueAppend(HttpConn* c);
const char* corHttpStatusText(int status);
/* The Date header's value, cached per second. */
const char* corHttpDate(HttpLoop* hl);

/* ---- inline definitions -------------------------------------------------- */

/* value in decimal at at (no NUL; room for 20 digits): returns past
 * them. printf's cost was a good part of a response head's. */
static inline char*
corHttpPutDecimal(char* at, size_t value)
{
    char digits[24];
    int n = 0;

    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (n > 0) {
        *at++ = digits[--n];
    }
    return at;
}

static inline int
corHttpBufLend(HttpLoop* hl, CorBuf* b)
{
    uint8_t* data = hl->bufCount > 0 ? (uint8_t*)hl->bufs[--hl->bufCount]
                                     : malloc(HTTP_BUF_BYTES);

    if (data == NULL) {
        return -ENOMEM;
    }
    *b = (CorBuf){ .data = data, .cap = HTTP_BUF_BYTES };
    return 0;
}

static inline void
corHttpBufGive(HttpLoop* hl, char* buf, size_t cap)
{
    if (cap == HTTP_BUF_BYTES && hl->bufCount < HTTP_BUF_CACHE) {
        hl->bufs[hl->bufCount++] = buf;
        return;
    }
    free(buf);
}

static inline void
corHttpBufReturn(HttpLoop* hl, CorBuf* b)
{
    if (b->data != NULL) {
        corHttpBufGive(hl, (char*)b->data, b->cap);
        *b = (CorBuf){ 0 };
    }
}

static inline void
corHttpConnStateSet(HttpConn* c, HttpState s)
{
    c->state = s;
    /* A request with its handler waits on nobody, but for a body it
     * takes as it comes; nor does the last answer, nor a hand-over. */
    if ((s != HTTP_SERVING || c->bodyStream == HTTP_BODY_STREAMING)
        && s != HTTP_CLOSING && s != HTTP_UPGRADED) {
        corHttpConnWaitArm(c);
    }
}

static inline void
corHttpConnProgress(HttpConn* c)
{
    c->waitMs = corEvNow(c->hl->loop);
}

static inline bool
corHttpBodyWaits(const HttpConn* c)
{
    return c->state == HTTP_SERVING && c->bodyStream == HTTP_BODY_STREAMING
           && !c->bodyHeld;
}

#endif /* COR_HTTP_INT_H */
