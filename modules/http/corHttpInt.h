/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the HTTP server module: a loop's share of the server, a
 * connection, a request in flight, and the functions the module's files
 * share.
 */
#ifndef COR_HTTP_INT_H
#define COR_HTTP_INT_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "cor.h"
#include "corKit.h"
#include "corList.h"
#include "corHttpParse.h"

typedef struct HttpConn HttpConn;
typedef struct HttpLoop HttpLoop;

/* The size of the I/O buffers a loop lends its connections: a request
 * head or an answer that fits takes one; more grows it past the cache. */
#define HTTP_BUF_BYTES 4096
/* Free buffers a loop keeps for the next connection that reads or
 * writes; more are given back to malloc. */
#define HTTP_BUF_CACHE 64

/* One loop's part of the server; owned by that loop, on lines of its own. */
struct HttpLoop {
    _Alignas(COR_CACHE_LINE) CorEvLoop* loop;
    unsigned index;
    CorList conns;              /* every open connection (HttpConn.link) */
    atomic_uint connCount;      /* read by the generation while draining */
    CorAccept* accept;          /* this loop's accepting, or NULL */
    CorKitSet h2Conns;          /* its HTTP/2 connections (corHttp2Conn.c) */
    bool draining;
    time_t dateSecond;
    char date[40];              /* "Sun, 29 Nov 2026 20:00:00 GMT" */
    /* The head being parsed, whichever connection it is: a request keeps
     * a copy of what it needs, so one header array serves the loop. */
    CorHttpRequestHead head;
    char* bufs[HTTP_BUF_CACHE]; /* free buffers of HTTP_BUF_BYTES */
    unsigned bufCount;
};

typedef enum {
    HTTP_IDLE,                  /* between requests (keep-alive) */
    HTTP_HEAD,                  /* part of a head has come */
    HTTP_BODY,                  /* the head is in, the body is coming */
    HTTP_SERVING,               /* the request is with its handler */
    HTTP_CLOSING,               /* the last bytes go out, then close */
    HTTP_LINGER,                /* an error answer is out: what the client
                                 * still sends is read and dropped, so that
                                 * it reads the answer, not a reset */
    HTTP_OUTPUT,                /* (the timer's) output waits to be sent */
    HTTP_UPGRADED               /* its 101 is set: handed over next */
} HttpState;

/* How a response's body goes out after its head. */
typedef enum {
    HTTP_FRAME_NONE,            /* no body: a HEAD, a 1xx, 204 or 304 */
    HTTP_FRAME_LENGTH,          /* Content-Length: bodyLeft bytes to go */
    HTTP_FRAME_CHUNKED,         /* a stream of unknown length, HTTP/1.1 */
    HTTP_FRAME_CLOSE            /* the same for HTTP/1.0: to the close */
} HttpFraming;

/*
 * A request, from its head to its release. Owned by the core between
 * corRequestServe and ops->release. It owns everything its CorRequest
 * points to: its head is copied behind it when the head is parsed, and its
 * body is a buffer of its own (the connection's input buffer, handed over
 * whole when nothing follows the body in it, else a copy), so a connection
 * that dies under a request in flight frees nothing the request uses.
 */
typedef struct {
    CorRequest r;
    HttpConn* conn;             /* NULL once the connection is gone */
    HttpLoop* hl;               /* the loop that read it */
    int64_t contentLength;      /* -1 when absent */
    bool chunked;
    bool keepAlive;             /* what the head asked for */
    bool expectContinue;
    int versionMinor;
    bool shutBefore;            /* its client had shut its side already */
    HttpFraming framing;        /* the answer's, set with its head */
    uint64_t lengthSaid;        /* its head's Content-Length, or
                                 * UINT64_MAX for none */
    uint64_t bodyLeft;          /* HTTP_FRAME_LENGTH: bytes still owed */
    char remote[48];            /* the client's address, as r.remote */
    char* body;                 /* the body's buffer, or NULL */
    size_t bodyCap;             /* its size: a loop buffer's goes back */
    CorHeader headers[];        /* then the head's bytes */
} HttpRequest;

/* A connection; owned by its loop, freed on close (a request still with
 * its handler then holds none of it). Between requests it holds no buffer:
 * it takes one of its loop's when bytes come, and gives it back once they
 * are consumed, so an idle keep-alive connection costs this struct. */
struct HttpConn {
    CorEvIo io;
    CorEvTimer timer;
    HttpLoop* hl;
    CorList link;               /* in its loop's conns */
    CorTransport t;             /* its bytes go through this */
    HttpState state;
    HttpState timerFor;         /* what the timer was armed for */
    char* in;                   /* what was read and not yet consumed */
    size_t inStart;             /* where the current request (or, once its
                                 * head is parsed, its body) begins */
    size_t inLen;
    size_t inCap;
    size_t headParsed;          /* head bytes at the last parse that
                                 * wanted more */
    size_t headScanned;         /* head bytes searched for its end */
    size_t bodyRaw;             /* chunked: undecoded input starts here */
    size_t bodyLen;             /* the body so far */
    CorHttpChunked chunked;
    uint64_t readStartMs;       /* the request's first byte came then */
    uint64_t lingerEndMs;       /* a lingering close ends then at last */
    size_t lingerBytes;         /* what it dropped so far */

    char* out;
    size_t outLen;
    size_t outSent;
    size_t outCap;
    int fileFd;                 /* a file body being sent, or -1 */
    off_t fileOffset;
    size_t fileLeft;
    HttpRequest* req;           /* from its parsed head to its answer */
    HttpRequest* releasing;     /* being answered: released at once? */
    HttpRequest* upgrading;     /* answered 101: takes the connection */
    bool keepAlive;
    bool linger;                /* an error answer: linger, then close */
    bool readPaused;            /* the buffer is full: read again later */
    bool peerShut;              /* its FIN came: read to the end */
    bool peerClosed;            /* the end was read */
    bool processing;            /* inside httpProcess (re-entry guard) */
    bool tls;                   /* its listener speaks TLS */
    bool h2c;                   /* a plain listener with http2: on: the
                                 * HTTP/2 preface may come first */
    bool served;                /* answered a request: idle now is between
                                 * requests, not before the first */
    struct sockaddr_storage peer;
};

/* ---- corHttpBuf.c -------------------------------------------------------- */

/* A buffer of HTTP_BUF_BYTES from the loop's cache, or malloc; NULL when
 * there is no memory. */
char* corHttpBufTake(HttpLoop* hl);
/* Give a buffer of cap bytes back (kept when it is a cached size and the
 * cache has room, freed otherwise); NULL is ignored. */
void corHttpBufGive(HttpLoop* hl, char* buf, size_t cap);
/* Free the cache and the loop's header array (the loop ended). */
void corHttpLoopBuffersFree(HttpLoop* hl);
/* Size the loop's header array for limits.header_count. Returns 0 or -1. */
int corHttpLoopBuffersInit(HttpLoop* hl);

/* ---- corHttpConn.c ------------------------------------------------------- */

/* Adopt an accepted socket on the calling loop (a CorAcceptFn). */
void corHttpConnOpen(unsigned loopIndex, const CorListener* l, int fd,
                     const struct sockaddr_storage* peer);
void corHttpConnClose(HttpConn* c);
/* Answer what holds a request as failed and close (a stop). */
void corHttpConnStop(HttpConn* c);
/* A drain: c, idle between requests, closes soon. */
void corHttpConnDrain(HttpConn* c);

HttpLoop* corHttpLoopAt(unsigned index);

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

#endif /* COR_HTTP_INT_H */
