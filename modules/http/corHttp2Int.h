/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of HTTP/2 in the http module (docs/http2.md): the settings of
 * its `http2:` mapping, a connection (an nghttp2 server session on the
 * connection kit), a stream (a CorRequest like HTTP/1's), the defences
 * it counts, and what the three files share. HPACK, flow control and
 * the frame rules are nghttp2's; these files are the glue.
 */
#ifndef COR_HTTP2_INT_H
#define COR_HTTP2_INT_H

#include <nghttp2/nghttp2.h>

#include "corHttpInt.h"
#include "corKit.h"

typedef struct Http2Conn Http2Conn;
typedef struct Http2Stream Http2Stream;

/* A header's place in its stream's raw bytes (Http2Stream.raw). */
typedef struct {
    uint32_t nameOff;
    uint32_t nameLen;
    uint32_t valueOff;
    uint32_t valueLen;
} Http2Field;

/* The http module's http2 mapping, read once per generation. */
typedef struct {
    unsigned maxConcurrentStreams; /* max_concurrent_streams */
    uint32_t initialWindowSize;    /* initial_window_size: each stream's
                                    * receive window */
    uint32_t connectionWindowSize; /* connection_window_size */
    size_t maxHeaderListSize;      /* max_header_list_size; 0:
                                    * limits.header_bytes */
    unsigned resetsPerSecond;      /* rapid_reset_limit */
    unsigned controlPerSecond;     /* control_frame_limit: PING and
                                    * SETTINGS a second */
    unsigned idlePerSecond;        /* idle_frame_limit: frames that make
                                    * no progress a second */
} Http2Conf;

extern Http2Conf corHttp2Conf;

/* What ends a connection as abuse, each counted in /metrics. */
typedef enum {
    H2_ABUSE_RAPID_RESET,
    H2_ABUSE_CONTINUATION,
    H2_ABUSE_HEADER_LIST, /* an HPACK bomb */
    H2_ABUSE_SETTINGS,
    H2_ABUSE_PING,
    H2_ABUSE_ZERO_WINDOW,
    H2_ABUSE_PROTOCOL,    /* any other violation */
    H2_ABUSE_NO_PROGRESS, /* frames that move nothing */
    H2_ABUSE_COUNT
} Http2Abuse;

/* Runs of client stream ids a peer skipped, remembered: so many. */
#define GAPS_KEPT 8

/* Odd stream ids first..last, never opened. */
typedef struct {
    uint32_t first;
    uint32_t last;
} Http2Gap;

/* What corHttp2FramesScan saw of a connection's input so far: where it
 * is in a frame, and the two rules' counts (corHttp2Frames.c). */
typedef struct {
    uint8_t head[9]; /* the frame head being read */
    uint8_t headLen;
    uint8_t prefaceLeft; /* of the client's preface, to skip */
    bool padNext;        /* the next byte is a pad length */
    uint8_t type;        /* the last head's */
    uint8_t flags;
    uint32_t length;
    uint32_t left;            /* of its payload, still to come */
    uint32_t nextId;          /* the client's next new stream id */
    Http2Gap gaps[GAPS_KEPT]; /* a ring: the last ones */
    unsigned gapCount;
    uint64_t windowMs; /* the budget's second began */
    unsigned idle;     /* frames that moved nothing in it */
    unsigned dataSent; /* DATA frames sent in it */
} Http2Frames;

typedef enum {
    H2_FRAMES_OK,
    H2_FRAMES_FLOOD,      /* past the budget of idle frames */
    H2_FRAMES_BAD_STREAM, /* HEADERS on an id that was skipped */
} Http2FramesVerdict;

/*
 * A stream from its HEADERS to its release. Owned by its connection until
 * it is served, then by the core until ops->release. It owns what its
 * CorRequest points to (its header bytes, its body), so a connection that
 * closes under it frees nothing a handler in flight reads.
 */
struct Http2Stream {
    CorRequest r;
    Http2Conn* conn; /* NULL once the connection is gone */
    HttpLoop* hl;    /* whose cache takes it back when freed */
    CorList link;    /* in conn->streams */
    int32_t id;
    uint64_t startMs; /* its HEADERS came then */
    uint64_t bodyMs;  /* its head or its last DATA frame ended
                         then, while its body comes; 0 before */
    CorBuf raw;       /* the header bytes as they came */
    CorBuf fields;    /* their places in raw (Http2Field) */
    size_t listSize;  /* the header list as RFC 9113 counts it */
    unsigned refuse;  /* a status to answer instead of serving */
    CorBuf body;
    bool served;         /* with the core */
    bool built;          /* requestBuild ran (its status in refuse
                          * when it refused) */
    bool answered;       /* its response is submitted */
    bool closed;         /* nghttp2 closed it */
    bool sent;           /* corRequestSent was called */
    bool peerEnded;      /* its END_STREAM came */
    bool bodyFailed;     /* a streamed body ended as failed */
    bool overruled;      /* refused at a limit while its handler
                          * ran: the handler's answer goes nowhere,
                          * and the stream outlives its release
                          * until the refusal is out */
    bool released;       /* overruled, and the core let it go */
    bool gathered;       /* served at its head, its body gathered
                          * whole by the core: timed as it comes */
    uint64_t bodyUnread; /* of a streamed body, put and not yet
                          * taken by its handler */
    bool ended;          /* a streamed body: its end came */
    bool deferred;       /* its data provider waits for bytes */
    bool drained;        /* bytes were taken: tell the core */
    uint64_t sendOff;    /* of the body, in memory or a file */
    CorBuf streamed;     /* a streamed body's pieces, unsent */
    char remote[48];
    char* target;       /* the :path as it came, in request */
    CorHeader* headers; /* built once the head is whole, in request */
    CorBuf request;     /* headers and target: kept with the stream
                         * in its loop's cache, as raw and fields */
};

/* nghttp2's memory for one connection (corHttp2Mem.c): its frame
 * buffers in pages of their own, given back while it is quiet. */
typedef struct {
    nghttp2_mem mem; /* the session's allocator; its user
                      * data is this */
    CorList blocks;  /* the frame buffers' pages */
    HttpLoop* hl;    /* whose cache keeps its small blocks */
} Http2Mem;

/* A connection; owned by its loop, freed when it closes. */
struct Http2Conn {
    CorKitConn k;
    CorTransport t;
    HttpLoop* hl;
    nghttp2_session* session;
    CorList streams; /* every stream not yet released */
    unsigned streamCount;
    struct sockaddr_storage peer;
    char peerName[64];
    bool tls;
    const char* altSvc; /* the listener's HTTP/3, or NULL */
    bool goaway;        /* the final GOAWAY is queued */
    bool draining;      /* the notice went out */
    int abuse;          /* 1 + the Http2Abuse a callback found */
    uint64_t windowMs;  /* the abuse counters' second began */
    uint64_t drainMs;   /* the drain's notice went then */
    unsigned resets;    /* RST_STREAMs from the peer in it */
    unsigned pings;
    unsigned settings;
    uint64_t stallMs;      /* a stream waits on the peer's window
                            * since then, or 0 */
    uint64_t activeMs;     /* its last stream ended then */
    Http2Frames frames;    /* what came, as corHttp2Frames.c sees it */
    Http2Mem mem;          /* outlives the session */
    uint64_t framedMs;     /* nghttp2 last wrote a frame then; 0:
                            * its frame buffer's pages went back */
    bool ending;           /* corHttp2ConnAbuse ends it (counted) */
    Http2Stream* decoding; /* whose header block came last, or NULL */
    uint64_t begunMs;      /* its last stream began then */
    bool held;             /* busy: its input, output and TLS buffers
                            * stay when empty, until a lull of QUIET_MS
                            * with no frame written */
};

/* ---- corHttp2Conn.c ------------------------------------------------------ */

/*
 * Take over an HTTP/1 connection that turned out to speak HTTP/2 (its
 * preface, or ALPN h2): its transport t (copied; its socket no longer on
 * the loop's epoll) and the bytes read so far (copied). Counts as the
 * same accepted connection (corAcceptClosed when it closes). altSvc: the
 * listener's Alt-Svc for its answers (HTTP/3), or NULL.
 */
void corHttp2ConnOpen(HttpLoop* hl, const CorTransport* t,
                      const struct sockaddr_storage* peer, bool tls,
                      const char* altSvc, const void* in, size_t len);
/* A stream began: one soon after the last makes c busy (its buffers
 * kept until a lull). */
void corHttp2ConnStreamBegun(Http2Conn* c);
/* A drain: GOAWAY, every stream in flight finished, then the close. */
void corHttp2ConnDrain(Http2Conn* c);
/* A stop: the streams still with a handler are cancelled, what is queued
 * goes out briefly, the connection closes. */
void corHttp2ConnStop(Http2Conn* c);
/* The connection is abusive: GOAWAY(code), counted, closed. */
void corHttp2ConnAbuse(Http2Conn* c, Http2Abuse why, uint32_t code);

/* ---- corHttp2Stream.c ---------------------------------------------------- */

/* The session callbacks for streams (c is the session's user data). */
int corHttp2StreamBegin(nghttp2_session* s, const nghttp2_frame* f, void* c);
int corHttp2StreamHeader(nghttp2_session* s, const nghttp2_frame* f,
                         const uint8_t* name, size_t nameLen,
                         const uint8_t* value, size_t valueLen, uint8_t flags,
                         void* c);
int corHttp2StreamData(nghttp2_session* s, uint8_t flags, int32_t id,
                       const uint8_t* data, size_t len, void* c);
/* A frame came whole: a request's end serves it. */
int corHttp2StreamFrame(Http2Conn* c, const nghttp2_frame* f);
/* A frame went: a refused stream's end resets the rest of its body. */
void corHttp2StreamSent(Http2Conn* c, const nghttp2_frame* f);
int corHttp2StreamClose(nghttp2_session* s, int32_t id, uint32_t code, void* c);
/* The loop ends: the streams its cache kept go back to malloc, and what
 * is freed after goes there too. */
void corHttp2StreamCacheEnd(HttpLoop* hl);
/* The connection closes: its streams finish into the void. */
void corHttp2StreamsDetach(Http2Conn* c);
/* After a send: tell the core of each stream whose queue drained. */
void corHttp2StreamsDrained(Http2Conn* c);
/* Whether a stream has bytes to send that the peer's window holds. */
bool corHttp2StreamsStalled(Http2Conn* c);
/* The earliest deadline of a stream whose request is still coming
 * (limits.request_timeout for the whole of it, limits.body_timeout
 * between two frames of its body), 0 for none; those past it at now are
 * reset. */
uint64_t corHttp2StreamsDeadline(Http2Conn* c, uint64_t now);

/* ---- corHttp2Frames.c ---------------------------------------------------- */

/* Before any input, at now. */
void corHttp2FramesInit(Http2Frames* f, uint64_t now);
/* The len bytes at p, as they come, before nghttp2 takes them: OK, or
 * the rule a frame broke, with *ok the bytes before that frame (nghttp2
 * may take those). */
Http2FramesVerdict corHttp2FramesScan(Http2Conn* c, const uint8_t* p,
                                      size_t len, size_t* ok);
/* A DATA frame went to the peer: it earns two idle frames. */
void corHttp2FramesDataSent(Http2Conn* c);

/* ---- corHttp2Refuse.c ---------------------------------------------------- */

/* Refuse st, never served, with status (a limit's, 400, 503): a limit's
 * refusal is said and counted; the answer is status and its text, or for
 * a gRPC call at a limit trailers-only with grpc-status 8. */
void corHttp2StreamRefuse(Http2Conn* c, Http2Stream* st, int status);
/* Submit that answer alone (the refusal was said): 0, or -1 (reset). */
int corHttp2RefusalSubmit(Http2Conn* c, Http2Stream* st, int status);
/* A served stream's body went past limits.body_bytes: its handler is
 * cancelled; 413 when no answer began, else RST_STREAM(CANCEL). */
void corHttp2StreamOverLimit(Http2Conn* c, Http2Stream* st);
/* A limit's refusal said (logged, counted) for st, which the core
 * answers itself (a body it gathers). */
void corHttp2RefusalSay(const Http2Stream* st, int status);
/* 413 when st's head announces a content-length past limits.body_bytes,
 * else 0. */
int corHttp2BodyAnnounced(const Http2Stream* st);
/* Whether st's request is a gRPC call (content-type application/grpc). */
bool corHttp2Grpc(const Http2Stream* st);

/* ---- corHttp2Mem.c ------------------------------------------------------ */

/* Before the session is made with m->mem, on hl's loop. */
void corHttp2MemInit(Http2Mem* m, HttpLoop* hl);
/* The frame buffers' pages back to the kernel: only while nghttp2 has
 * no frame in them (nothing to send, none half written); and a large
 * calloc's (the stream map) while all its bytes are zero. */
void corHttp2MemRelease(Http2Mem* m);

/* ---- corHttp2Conf.c ------------------------------------------------------ */

/* Read the http2 mapping of the module's conf; register its metrics. */
int corHttp2ConfRead(CorModule* m, const CorConf* conf);
void corHttp2Count(Http2Abuse why);
/* What the log says of an abuse ("PING flood"). */
const char* corHttp2AbuseText(Http2Abuse why);
/* A connection or a stream began (for /metrics). */
void corHttp2CountConnection(void);
void corHttp2CountStream(void);

/* One field into nv at *n: name and value as they are, not copied. */
static inline void corHttp2Nv(nghttp2_nv* nv, size_t* n, const char* name,
                              size_t nameLen, const char* value,
                              size_t valueLen);

/* ---- inline definitions -------------------------------------------------- */

static inline void
corHttp2Nv(nghttp2_nv* nv, size_t* n, const char* name, size_t nameLen,
           const char* value, size_t valueLen)
{
    nv[(*n)++] = (nghttp2_nv){ (uint8_t*)(uintptr_t)name,
                               (uint8_t*)(uintptr_t)value, nameLen, valueLen,
                               NGHTTP2_NV_FLAG_NONE };
}

#endif /* COR_HTTP2_INT_H */
