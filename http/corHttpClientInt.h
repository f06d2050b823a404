/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the HTTP client: the exchange (corHttpClient.c) and what it takes
 * from the request's wire form (corHttpClientWire.c), the URL taken apart
 * and the request's head built, so that each file holds one concept.
 */
#ifndef COR_HTTP_CLIENT_INT_H
#define COR_HTTP_CLIENT_INT_H

#include "corHttpClient.h"
#include "corHttpParse.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* A body this small goes out in the head's buffer (one write); a larger
 * one is written from the caller's memory, never copied. */
#define COR_HTTP_CLIENT_BODY_INLINE_MAX 4096

/* How the answer's body is framed. */
typedef enum {
    FRAME_NONE,   /* HEAD, 204, 304: no body */
    FRAME_LENGTH, /* Content-Length */
    FRAME_CHUNKED,
    FRAME_TO_END /* until the peer closes */
} Framing;

/*
 * One exchange: while it is opened (the request sent, the head read), then
 * while its body is read. In the block of the client's stream
 * (corClientOpen, core/corClientStream.c) from corHttpClientOpen to
 * corHttpClientClose; Fetch keeps one on its stack. It holds no
 * buffer of its own: the head is read into a buffer that becomes
 * res->head, taken only once the first byte of the answer is there.
 */
typedef struct CorHttpClientExchange {
    const CorClientRequest* req; /* while it is opened only */
    CorClientResponse* res;
    uint64_t totalDeadline;     /* 0: none */
    uint64_t firstByteDeadline; /* 0: none, or not yet armed */
    uint64_t readDeadline;      /* the next byte's (0: none) */
    int firstByteTimeoutMs;
    int totalTimeoutMs;
    int readTimeoutMs; /* readDeadline's */
    int betweenMs;     /* the request's read timeout, 0: none */
    bool gotByte;
    bool wantClose;  /* the caller sent Connection: close */
    bool upgrade;    /* it asked to switch protocols
                        (Connection: upgrade): a 101 answers */
    bool keepAlive;  /* the answer allows another exchange */
    bool done;       /* the body was read to its end */
    bool extra;      /* bytes came past the answer's end */
    bool sendFailed; /* a write of the request failed */
    int failed;      /* -errno once a body read failed */
    Framing framing;
    CorConn* c;
    char* buf; /* the head, then res->head */
    size_t len;
    size_t cap;
    const char* rest; /* body bytes that came with the head */
    size_t restLen;
    uint64_t left; /* FRAME_LENGTH: bytes still to come */
    CorHttpChunked chunked;
    struct CorHttp2Stream* h2; /* over HTTP/2: its stream (c stays NULL) */
} CorHttpClientExchange;

/* ---- Between the exchange's files ----------------------------------------
 *
 * Deadlines are absolute, from the monotonic clock: the total one from the
 * call, the first-byte one from the request's last byte, and once a byte
 * came, the read one from each read (a head that stalls halfway, or after
 * a 100 Continue, is as bounded as one that never starts). A wait gets
 * the nearer of those that apply, and a timeout is told by the one that
 * passed. Each failure is said once, where it is decided, into
 * ex->res->error.
 */

/* ex's error, said (corHttpClientSay.c). */
void corHttpClientFail(CorHttpClientExchange* ex, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "host:port" of the exchange's server, for messages. */
const char* corHttpClientPeer(const CorHttpClientExchange* ex);
/* Say which deadline passed: the nearest one. */
void corHttpClientTimeoutSay(CorHttpClientExchange* ex);

/* Send the request (corHttpClientSend.c): its head, then a large body
 * from where it is, or the body as it comes. Returns 0 or -errno (said).
 * May yield. */
int corHttpClientRequestSend(CorHttpClientExchange* ex, const char* request,
                             size_t requestLen);

/* The answer (corHttpClientAnswer.c). Wait for its first byte, holding no
 * buffer; read its head and learn how its body is framed; give its body's
 * next bytes (0 at the end). Each returns as its comment there says, -errno
 * said. May yield. */
int corHttpClientAnswerWait(CorHttpClientExchange* ex);
int corHttpClientAnswerOpen(CorHttpClientExchange* ex);
ssize_t corHttpClientBodyNext(CorHttpClientExchange* ex, char* buf, size_t len);
/* What a failed or finished attempt left in res, cleared for the next. */
void corHttpClientResponseReset(CorClientResponse* res);

/* An HTTP/1.1 attempt on a pooled or new connection, and the one retry
 * (corHttpClientConn.c). Returns 0 (ex->c open, res's head set) or -errno
 * (said). May yield. */
int corHttpClientAttemptTwice(CorHttpClientExchange* ex, const CorUrl* url,
                              const char* request, size_t requestLen);

/* Over HTTP/2 (corHttpClientOver2.c): the stream opened and its head
 * read, with the one retry of a refused stream; its next body bytes, 0 at
 * its end (its trailers in res). Return 0 / bytes or -errno (said). May
 * yield. */
int corHttpClientH2Open(CorHttpClientExchange* ex, const CorUrl* url);
ssize_t corHttpClientH2Read(CorHttpClientExchange* ex, char* buf, size_t len);

/* The deadlines, inline: each wait of the exchange asks. */
static inline uint64_t corHttpClientDeadline(int ms, uint64_t now);
static inline uint64_t
corHttpClientDeadlineNext(const CorHttpClientExchange* ex);
static inline int corHttpClientWaitMs(const CorHttpClientExchange* ex);

/* The stream operations of http and https (CorClientOps, corClient.h),
 * on a CorHttpClientExchange: corClientOpen hands them the block. */
int corHttpClientOpen(void* x, const CorClientRequest* req,
                      CorClientResponse* res);
ssize_t corHttpClientBodyRead(void* x, void* buf, size_t len, int timeoutMs);
bool corHttpClientBodyDone(const void* x);
CorConn* corHttpClientUpgraded(void* x, const void** restP, size_t* restLenP);
void corHttpClientClose(void* x);

/* Take q's http:// or https:// URL apart into u (corUrlParse: u points
 * into it; a URL that starts with q's target takes its parts from there,
 * parsing only what follows), with the HTTP client's rules: no user or
 * password (it would not send them), the port 80 or 443 when absent.
 * Returns 0, or -EINVAL with the reason in why. */
int corHttpClientUrlCheck(const CorClientRequest* q, CorUrl* u, char* why,
                          size_t whyLen);

/* One exchange to an http:// or https:// URL (corClientFetch, less
 * the other schemes): their fetch (corHttpScheme.c). */
int corHttpClientExchange(const CorClientRequest* req, CorClientResponse* res);

/* Check q's method and headers. Returns 0, or -EINVAL with why. */
int corHttpClientRequestCheck(const CorClientRequest* q, char* why,
                              size_t whyLen);

/* Whether q's body goes out in the head's buffer. */
bool corHttpClientBodyInline(const CorClientRequest* q);
/* The length of a body passed on from a request (q->bodyFrom) when it is
 * known (its client said it, or it came whole): sent with that
 * Content-Length, as it came; -1: sent chunked. */
int64_t corHttpClientBodyFromLength(const CorClientRequest* q);

/* q's head (and its body when inline) in one block (corChunkTake, of
 * *sizeP bytes; NULL with no memory), its length in *lenP; *wantCloseP
 * set when q asks for Connection: close. */
char* corHttpClientRequestHead(const CorClientRequest* q, const CorUrl* url,
                               size_t* lenP, size_t* sizeP, bool* wantCloseP);

/* Whether the field name s[0..n) is name, case-insensitive. Inline: the
 * length of a literal name is known where it is called. */
static inline bool corHttpClientNameIs(const char* s, size_t n,
                                       const char* name);

/* ---- inline definitions -------------------------------------------------- */

static inline uint64_t
corHttpClientDeadline(int ms, uint64_t now)
{
    return ms > 0 ? now + (uint64_t)ms : 0;
}

/* The nearest deadline that applies now, 0 for none. */
static inline uint64_t
corHttpClientDeadlineNext(const CorHttpClientExchange* ex)
{
    uint64_t deadline = ex->totalDeadline;

    if (!ex->gotByte && ex->firstByteDeadline != 0
        && (deadline == 0 || ex->firstByteDeadline < deadline)) {
        deadline = ex->firstByteDeadline;
    }
    if (ex->readDeadline != 0
        && (deadline == 0 || ex->readDeadline < deadline)) {
        deadline = ex->readDeadline;
    }
    return deadline;
}

/* The wait a read may take now: -1 for none; -ETIMEDOUT once the nearest
 * deadline passed. */
static inline int
corHttpClientWaitMs(const CorHttpClientExchange* ex)
{
    uint64_t now = corEvClockMs();
    uint64_t deadline = corHttpClientDeadlineNext(ex);

    if (deadline == 0) {
        return -1;
    }
    if (now >= deadline) {
        return -ETIMEDOUT;
    }
    return deadline - now > INT32_MAX ? INT32_MAX : (int)(deadline - now);
}

static inline bool
corHttpClientNameIs(const char* s, size_t n, const char* name)
{
    return strlen(name) == n && strncasecmp(s, name, n) == 0;
}

#endif /* COR_HTTP_CLIENT_INT_H */
