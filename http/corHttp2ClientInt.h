/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the HTTP/2 client: the streams that the HTTP client's exchange
 * (corHttpClientOver2.c, which keeps the deadlines and the retry) makes
 * when a request asks for HTTP/2, the connection (the nghttp2 session)
 * they share (corHttp2ClientConn.c), and what goes between the two: a
 * request's header list, the answer's head and trailers, its body
 * (corHttp2ClientStream.c).
 */
#ifndef COR_HTTP2_CLIENT_INT_H
#define COR_HTTP2_CLIENT_INT_H

#include "corHttpClient.h"
#include "corKit.h"

#include <nghttp2/nghttp2.h>

/* A stream's window: what one answer may have in flight unread (the
 * server's sending pauses past it until the reader takes). The
 * connection's is larger, so that a slow reader stalls its stream only. */
#define COR_HTTP2_CLIENT_STREAM_WINDOW (1u << 20)
#define COR_HTTP2_CLIENT_CONN_WINDOW (16u << 20)

typedef struct CorHttp2Peer CorHttp2Peer;

/*
 * One exchange as a stream of a connection. Owned by its exchange (from
 * corHttp2StreamOpen to corHttp2StreamClose); the connection points to it
 * while it is open on the wire (its list, and nghttp2's stream user data),
 * and lets go of it at the stream's close or the connection's end.
 */
typedef struct CorHttp2Stream {
    CorList link;    /* the connection's open streams */
    CorHttp2Peer* p; /* a reference */
    int32_t id;      /* 0 until submitted */
    CorCoPark park;  /* its exchange, parked (on a loop) */
    uint8_t* body;   /* the request's body, a copy */
    size_t bodyLen;
    size_t bodySent;
    CorRequest* bodyFrom; /* or a body passed on as it comes */
    bool deferred;        /* its data provider waits for bytes */
    int status;           /* of the header block being read */
    bool head;            /* the final head came */
    bool headTaken;       /* and went to the exchange */
    bool ended;           /* the answer's END_STREAM came */
    bool closed;          /* no more frames for it */
    bool refused;         /* not processed by the server: may go
                           * again on another connection */
    bool gotByte;         /* a frame of the answer came */
    int failed;           /* -errno: the stream or its connection
                           * failed before its end */
    char why[256];        /* and why */
    CorBuf fields;        /* the head's "name\0value\0"... */
    unsigned fieldCount;
    CorBuf trailers; /* the same, after the body */
    unsigned trailerCount;
    CorBuf data; /* body bytes not read yet */
} CorHttp2Stream;

/*
 * A stream of req to url (http or https, its port filled in): on a loop's
 * coroutine, on the connection the loop keeps to that peer (a new one,
 * connecting in a coroutine of its own, when there is none or it said
 * GOAWAY); elsewhere, on a connection of its own, opened here and closed
 * with the stream, whose session the exchange's waits drive. fresh: never
 * the loop's connection there was (a retry). Returns 0 with *sP, the
 * request submitted (it goes as the connection's writes allow), *reusedP
 * whether the connection was there before; or -errno with why (the
 * errors of corConnOpen, -EPROTO when the server did not choose h2,
 * -ENOMEM). May yield.
 */
int corHttp2StreamOpen(const CorClientRequest* req, const CorUrl* url,
                       int connectTimeoutMs, bool fresh, CorHttp2Stream** sP,
                       bool* reusedP, char* why, size_t whyLen);

/*
 * Wait for news of s (a head, body bytes, its end, a failure) until
 * deadlineMs (corEvClockMs time, 0: none): parked on a loop, driving the
 * session with poll() elsewhere. Returns 0, -ETIMEDOUT or -ECANCELED.
 * May yield.
 */
int corHttp2StreamWait(CorHttp2Stream* s, uint64_t deadlineMs);

/* Whether the answer's final head came; once it did, res's status,
 * headers and head (res->headers point into it) are set from it: 1.
 * 0: not yet; -errno with res->error when s failed first. */
int corHttp2StreamHead(CorHttp2Stream* s, CorClientResponse* res);

/* Take body bytes into buf: the count (> 0); 0 at the body's end (its
 * trailers set in res); -EAGAIN when none came yet; -errno with
 * res->error when s failed first. What is taken opens the window again. */
ssize_t corHttp2StreamRead(CorHttp2Stream* s, void* buf, size_t len,
                           CorClientResponse* res);

/* Whether the answer ended with nothing left to read. */
bool corHttp2StreamDone(const CorHttp2Stream* s);

/* "host:port" of s's server, for messages. */
const char* corHttp2StreamPeer(const CorHttp2Stream* s);

/* Done with s (NULL: nothing): a stream still open is reset (CANCEL), what
 * it held unread given back to the connection's window. s is gone after. */
void corHttp2StreamClose(CorHttp2Stream* s);

/* Close the calling loop's HTTP/2 connections (the schemes' loopExit). */
void corHttp2ClientLoopExit(void);

/* ---- corHttp2ClientStream.c: the stream's two ends, on nghttp2 ---------- */

/* The header list of req for nghttp2 (the pseudo-headers, then req's
 * fields, names lowercased, the connection's own ones dropped, Host as
 * :authority) in one block (malloc, *nvP into it; the caller frees
 * *nvP), its length in *countP. Returns 0 or -ENOMEM. */
int corHttp2RequestFields(const CorClientRequest* req, const CorUrl* url,
                          nghttp2_nv** nvP, size_t* countP);

/* nghttp2's callbacks for a stream's frames: a header field, a header
 * block's end, a body's piece, the stream's close. The session's user data
 * is its peer; a stream's is its CorHttp2Stream, NULL once its exchange
 * let go of it. */
int corHttp2StreamField(nghttp2_session* session, const nghttp2_frame* f,
                        const uint8_t* name, size_t nameLen,
                        const uint8_t* value, size_t valueLen, uint8_t flags,
                        void* user);
void corHttp2StreamFrame(CorHttp2Stream* s, const nghttp2_frame* f);
int corHttp2StreamData(nghttp2_session* session, uint8_t flags, int32_t id,
                       const uint8_t* data, size_t len, void* user);
void corHttp2StreamEnd(CorHttp2Stream* s, uint32_t errorCode);

/* The request body's reads (nghttp2's data provider). */
ssize_t corHttp2StreamBodyRead(nghttp2_session* session, int32_t id,
                               uint8_t* buf, size_t len, uint32_t* flags,
                               nghttp2_data_source* source, void* user);

/* Wake s's exchange (parked on the loop). */
void corHttp2StreamWake(CorHttp2Stream* s);

/* n bytes of stream id were read by its exchange (or dropped with it):
 * the window opens again by as much (a WINDOW_UPDATE, flushed with the
 * connection's next write). */
void corHttp2PeerConsumed(CorHttp2Peer* p, int32_t id, size_t n);

#endif /* COR_HTTP2_CLIENT_INT_H */
