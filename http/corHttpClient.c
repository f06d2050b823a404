/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 client: one exchange on a connection of the connection
 * layer (corConn.c), read with the floor's response head parser and chunked
 * decoder (corHttpParse.c), so that the client never sees a socket or
 * OpenSSL and reads HTTP with the server's code. Every wait is a read or a
 * write of the CorConn, hence a corRestWaitFd: the same code yields in a
 * coroutine and polls on a worker, and a cancel ends it.
 *
 * Deadlines are absolute, from the monotonic clock: the total one from the
 * call, the first-byte one from the request's last byte, and once a byte
 * came, the read one from each read (a head that stalls halfway, or after
 * a 100 Continue, is as bounded as one that never starts). A wait gets
 * the nearer of those that apply, and a timeout is told by the one that
 * passed.
 *
 * The retry rule: a connection from the pool may have been closed by the
 * peer as our request crossed its keep-alive timeout. When such a
 * connection fails before any byte of the answer came, the request is
 * sent once more on a new connection if the peer cannot have acted on it
 * (no byte of it was written), or if acting twice is acting once (an
 * idempotent method, RFC 9110 section 9.2.2, which RFC 9112 section 9.3.1
 * lets a client retry). A POST that was written
 * fails instead: the peer may have read it whole before it closed, and
 * only the caller knows whether a second one is harmless (nginx and
 * HAProxy answer 502 there too). Never after a byte of the answer came,
 * never on a new connection, never twice.
 *
 * Memory: the head is read into a buffer that becomes res->head (the
 * headers point into it); the body grows in a buffer of its own up to its
 * limit. Both are the caller's once the call returns.
 */
#include "corHttpClientInt.h"
#include "corHttp2ClientInt.h"
#include "corHttpParse.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BODY_READ_MIN 16384
/* A piece of a body passed on as it comes, at most. */
#define BODY_CHUNK_BYTES 16384

static int exchangeOpenAs(CorHttpClientExchange* ex,
                          const CorClientRequest* req,
                          CorClientResponse* res);

typedef CorHttpClientExchange Exchange;

static void
failf(Exchange* ex, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

static void
failf(Exchange* ex, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(ex->res->error, sizeof(ex->res->error), fmt, ap);
    va_end(ap);
}

/* "host:port" of the exchange's server, for messages. */
static const char*
peerOf(const Exchange* ex)
{
    return ex->h2 != NULL ? corHttp2StreamPeer(ex->h2) : corConnPeer(ex->c);
}

/* ---- Deadlines ----------------------------------------------------------- */

static uint64_t
deadlineOf(int ms, uint64_t now)
{
    return ms > 0 ? now + (uint64_t)ms : 0;
}

/* The nearest deadline that applies now, 0 for none. */
static uint64_t
deadlineNext(const Exchange* ex)
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
static int
waitMs(const Exchange* ex)
{
    uint64_t now = corEvClockMs();
    uint64_t deadline = deadlineNext(ex);

    if (deadline == 0) {
        return -1;
    }
    if (now >= deadline) {
        return -ETIMEDOUT;
    }
    return deadline - now > INT32_MAX ? INT32_MAX : (int)(deadline - now);
}

/* Say which deadline passed: the nearest one. */
static void
timeoutSay(Exchange* ex)
{
    uint64_t deadline = deadlineNext(ex);
    const char* peer = peerOf(ex);

    if (deadline == ex->totalDeadline) {
        failf(ex, "%s: the exchange exceeded its total timeout (%d ms)",
              peer, ex->totalTimeoutMs);
    } else if (deadline == ex->readDeadline) {
        failf(ex, "%s: no byte of the %s within the read timeout (%d ms)",
              peer, ex->res->status == 0 ? "answer's head" : "body",
              ex->readTimeoutMs);
    } else {
        failf(ex, "%s: no answer within the read timeout (%d ms)",
              peer, ex->firstByteTimeoutMs);
    }
}

/* ---- The request --------------------------------------------------------- */

/* A body passed on as it comes (bodyFrom), as chunks: each piece the
 * handler's request gets goes at once, within the request's read timeout
 * between pieces; the last chunk at its end. Returns 0 or -errno (said
 * when the body failed; a send's failure is the caller's to say). */
static int
bodyChunksSend(Exchange* ex)
{
    const CorClientRequest* q = ex->req;
    int between = q->readTimeoutMs > 0 ? q->readTimeoutMs
                  : q->firstByteTimeoutMs > 0 ? q->firstByteTimeoutMs : -1;
    /* Room for the size line before, and the CRLF after. */
    char* piece = malloc(16 + BODY_CHUNK_BYTES + 2);
    ssize_t n;
    int rc = 0;

    if (piece == NULL) {
        failf(ex, "no memory for the request's body");
        return -ENOMEM;
    }
    do {
        /* The chunk's size line goes before the piece, in one write. */
        n = corRequestBodyRead(q->bodyFrom, piece + 16, BODY_CHUNK_BYTES,
                               between);
        if (n < 0) {
            failf(ex, "the request's body: %s", strerror((int)-n));
            rc = (int)n;
        } else {
            int head = snprintf(piece, 16, "%zx\r\n", (size_t)n);
            int ms = waitMs(ex);

            /* "5\r\npart1\r\n", and at the end "0\r\n\r\n". */
            memmove(piece + 16 - head, piece, (size_t)head);
            memcpy(piece + 16 + n, "\r\n", 2);
            rc = ms == -ETIMEDOUT ? -ETIMEDOUT
                 : corConnWriteAll(ex->c, piece + 16 - head,
                                   (size_t)head + (size_t)n + 2, ms);
        }
    } while (rc == 0 && n > 0);
    free(piece);
    return rc;
}

/* A body passed on as it comes whose length its client said: sent as it
 * comes, unframed, within the head's Content-Length (as nginx passes an
 * upload on with request buffering off); a body that ends short of it
 * fails the exchange, whose connection then closes. Returns as
 * bodyChunksSend. */
static int
bodyLengthSend(Exchange* ex, uint64_t length)
{
    const CorClientRequest* q = ex->req;
    int between = q->readTimeoutMs > 0 ? q->readTimeoutMs
                  : q->firstByteTimeoutMs > 0 ? q->firstByteTimeoutMs : -1;
    char* piece = malloc(BODY_CHUNK_BYTES);
    uint64_t sent = 0;
    int rc = 0;

    if (piece == NULL) {
        failf(ex, "no memory for the request's body");
        return -ENOMEM;
    }
    while (rc == 0 && sent < length) {
        ssize_t n = corRequestBodyRead(q->bodyFrom, piece, BODY_CHUNK_BYTES,
                                       between);
        int ms = waitMs(ex);

        if (n <= 0) {
            rc = n < 0 ? (int)n : -ECONNRESET;
            failf(ex, "the request's body: %s", n < 0 ? strerror((int)-n)
                                                       : "ended short");
            break;
        }
        sent += (uint64_t)n;
        rc = ms == -ETIMEDOUT ? -ETIMEDOUT
             : corConnWriteAll(ex->c, piece, (size_t)n, ms);
    }
    free(piece);
    return rc;
}

/* Send the request: its head, then a large body from where it is, or the
 * body as it comes. */
static int
requestSend(Exchange* ex, const char* request, size_t requestLen)
{
    const CorClientRequest* q = ex->req;
    int ms = waitMs(ex);
    int rc;

    rc = ms == -ETIMEDOUT ? -ETIMEDOUT
                          : corConnWriteAll(ex->c, request, requestLen, ms);
    if (rc == 0 && q->bodyFrom != NULL) {
        int64_t length = corHttpClientBodyFromLength(q);

        rc = length >= 0 ? bodyLengthSend(ex, (uint64_t)length)
                         : bodyChunksSend(ex);
        if (rc < 0 && ex->res->error[0] != '\0') {
            return rc;          /* the body's failure, said */
        }
    } else if (rc == 0 && !corHttpClientBodyInline(q)) {
        ms = waitMs(ex);
        rc = ms == -ETIMEDOUT ? -ETIMEDOUT
                              : corConnWriteAll(ex->c, q->body, q->bodyLen,
                                                ms);
    }
    ex->sendFailed = rc < 0 && rc != -ETIMEDOUT;
    if (rc == -ETIMEDOUT) {
        timeoutSay(ex);
    } else if (rc < 0) {
        failf(ex, "%s: send: %s", corConnPeer(ex->c), strerror(-rc));
    }
    return rc;
}

/* ---- The answer ---------------------------------------------------------- */

/* Say why a read failed (n <= 0: the peer's end, or -errno); returns
 * the errno to pass up, -ECONNRESET for the peer's end. */
static int
readFailSay(Exchange* ex, ssize_t n, const char* what)
{
    if (n == 0) {
        failf(ex, "%s: the peer closed the connection %s",
              corConnPeer(ex->c), what);
        return -ECONNRESET;
    }
    if (n == -ETIMEDOUT) {
        timeoutSay(ex);
    } else if (n == -ECANCELED) {
        failf(ex, "%s: cancelled", corConnPeer(ex->c));
    } else {
        failf(ex, "%s: read %s: %s", corConnPeer(ex->c), what,
              strerror((int)-n));
    }
    return (int)n;
}

/* Read once into buf from the connection: > 0 bytes, 0 at the peer's end
 * (when endOk; else it is -ECONNRESET, said as what), or -errno with the
 * error set. */
static ssize_t
readSome(Exchange* ex, void* buf, size_t len, bool endOk, const char* what)
{
    int ms = waitMs(ex);
    ssize_t n;

    if (ms == -ETIMEDOUT) {
        timeoutSay(ex);
        return -ETIMEDOUT;
    }
    n = corConnRead(ex->c, buf, len, ms);
    if (n > 0) {
        ex->gotByte = true;
        return n;
    }
    if (n == 0 && endOk) {
        return 0;
    }
    return readFailSay(ex, n, what);
}

/* A coroutine whose answer takes longer than this gives back the stack
 * pages below its frame (corCoStackTrim): a quick answer pays nothing. */
#define TRIM_AFTER_MS 20

/*
 * Wait for the answer's first byte, holding no buffer and not yet the
 * parser's array of fields: an exchange that waits is mostly this wait.
 * Every stack page that the connect and the request touched (printf
 * alone takes some 2 KB) would stay resident while it waits, so a
 * coroutine that waits long gives those back. It also spares the read
 * that would only say EAGAIN. Returns 0 or -errno.
 */
static int
answerWait(Exchange* ex)
{
    CorTransport* t = corConnTransport(ex->c);
    short revents;
    int ms;
    int rc = 0;

    if (corTransportPending(t)) {
        return 0;
    }
    ms = waitMs(ex);
    if (ms != -ETIMEDOUT && corCoCurrent() != NULL
        && (ms < 0 || ms > TRIM_AFTER_MS)) {
        rc = corRestWaitFd(t->fd, POLLIN, TRIM_AFTER_MS, &revents);
        if (rc == 0) {
            corCoStackTrim();
            ms = waitMs(ex);
        }
    }
    if (rc == 0) {
        rc = ms == -ETIMEDOUT ? 0
                              : corRestWaitFd(t->fd, POLLIN, ms, &revents);
    }
    if (rc < 0) {
        return readFailSay(ex, -errno, "before the answer's head");
    }
    if (rc == 0) {
        timeoutSay(ex);
        return -ETIMEDOUT;
    }
    return 0;
}

/* Room in the head's buffer for more bytes: it starts small and grows to
 * the limit. */
static int
headRoom(Exchange* ex)
{
    size_t cap = ex->cap == 0 ? 2048 : ex->cap * 2;
    char* buf;

    if (ex->len < ex->cap) {
        return 0;
    }
    if (cap > COR_HTTP_CLIENT_HEAD_MAX + 1) {
        cap = COR_HTTP_CLIENT_HEAD_MAX + 1;
    }
    buf = realloc(ex->buf, cap);
    if (buf == NULL) {
        failf(ex, "no memory for an answer's head");
        return -ENOMEM;
    }
    ex->buf = buf;
    ex->cap = cap;
    return 0;
}

/* More of the head into ex->buf: once a byte came, within the read
 * timeout. Returns > 0, or -errno. */
static ssize_t
headMore(Exchange* ex)
{
    ssize_t n;

    if (ex->gotByte) {
        ex->readTimeoutMs = ex->betweenMs;
        ex->readDeadline = deadlineOf(ex->betweenMs, corEvClockMs());
    }
    n = readSome(ex, ex->buf + ex->len, ex->cap - ex->len, false,
                 "before the answer's head");
    ex->readDeadline = 0;
    return n;
}

/* The final head (1xx skipped) parsed at the start of ex->buf; its length,
 * or -errno. */
static int
headRead(Exchange* ex, CorHttpResponseHead* head)
{
    static const CorHttpLimits limits = {
        .headerBytes = COR_HTTP_CLIENT_HEAD_MAX,
        .maxHeaders = COR_HTTP_CLIENT_FIELDS_MAX,
    };
    int rc;

    for (;;) {
        rc = ex->len == 0 ? 0 : corHttpParseResponseHead(ex->buf, ex->len,
                                                         &limits, head);
        if (rc < 0) {
            failf(ex, "%s: a malformed answer: %s", corConnPeer(ex->c),
                  corHttpResponseErrorText(rc));
            return -EPROTO;
        }
        if (rc == 0) {
            ssize_t n = headRoom(ex);

            if (n == 0) {
                n = headMore(ex);
            }
            if (n < 0) {
                return (int)n;
            }
            ex->len += (size_t)n;
            continue;
        }
        if (head->status == 101 && !ex->upgrade) {
            failf(ex, "%s: 101 Switching Protocols, which was not asked "
                  "for", corConnPeer(ex->c));
            return -EPROTO;
        }
        if (head->status >= 200 || head->status == 101) {
            return rc;
        }
        /* 100 Continue, 103 Early Hints...: the answer follows. */
        memmove(ex->buf, ex->buf + rc, ex->len - (size_t)rc);
        ex->len -= (size_t)rc;
    }
}

/* The headers of the final answer, as CorHeader, into res. */
static int
headersKeep(Exchange* ex, const CorHttpResponseHead* head)
{
    CorClientResponse* res = ex->res;

    res->headers = calloc(head->headerCount + 1, sizeof(CorHeader));
    if (res->headers == NULL) {
        failf(ex, "no memory for an answer's headers");
        return -ENOMEM;
    }
    for (unsigned i = 0; i < head->headerCount; i++) {
        res->headers[i] = (CorHeader){
            .name = head->headers[i].name,
            .nameLen = head->headers[i].nameLen,
            .value = head->headers[i].value,
            .valueLen = head->headers[i].valueLen,
        };
    }
    res->headerCount = head->headerCount;
    res->status = head->status;
    return 0;
}

/* Read the answer's head and learn how its body is framed. Returns 0 or
 * -errno. Never inlined: its array of fields must not be on the stack
 * while the exchange waits for the answer (answerWait). */
static __attribute__((noinline)) int
answerOpen(Exchange* ex)
{
    CorHttpHeader fields[COR_HTTP_CLIENT_FIELDS_MAX];
    CorHttpResponseHead head = { .headers = fields };
    const CorClientRequest* q = ex->req;
    int rc;

    rc = headRead(ex, &head);
    if (rc < 0) {
        return rc;
    }
    if (headersKeep(ex, &head) < 0) {
        return -ENOMEM;
    }
    ex->rest = ex->buf + rc;
    ex->restLen = ex->len - (size_t)rc;
    ex->keepAlive = head.keepAlive;
    if (head.status == 101) {
        /* What follows is the new protocol's (corHttpClientUpgraded). */
        ex->framing = FRAME_NONE;
        ex->done = true;
        ex->keepAlive = false;
    } else if ((q->method != NULL && strcmp(q->method, "HEAD") == 0)
        || head.status == 204 || head.status == 304) {
        ex->framing = FRAME_NONE;
        ex->done = true;
        ex->extra = ex->restLen > 0;
    } else if (head.chunked) {
        ex->framing = FRAME_CHUNKED;
        corHttpChunkedInit(&ex->chunked, UINT64_MAX);
    } else if (head.contentLength >= 0) {
        ex->framing = FRAME_LENGTH;
        ex->left = (uint64_t)head.contentLength;
        ex->done = ex->left == 0;
        ex->extra = ex->restLen > ex->left;
    } else {
        ex->framing = FRAME_TO_END;
        ex->keepAlive = false;
    }
    return 0;
}

/* Raw bytes of the body: those that came with the head first, then the
 * connection's. Returns > 0, 0 at the peer's end (when endOk), -errno. */
static ssize_t
bodyRaw(Exchange* ex, char* buf, size_t len, bool endOk)
{
    if (ex->restLen > 0) {
        size_t n = ex->restLen < len ? ex->restLen : len;

        memcpy(buf, ex->rest, n);
        ex->rest += n;
        ex->restLen -= n;
        return (ssize_t)n;
    }
    return readSome(ex, buf, len, endOk, "in the middle of the body");
}

/* A chunked body's next decoded bytes, in place in buf; 0 at its end. */
static ssize_t
bodyChunked(Exchange* ex, char* buf, size_t len)
{
    for (;;) {
        size_t consumed = 0;
        size_t produced = 0;
        ssize_t n = bodyRaw(ex, buf, len, false);
        int rc;

        if (n < 0) {
            return n;
        }
        rc = corHttpChunkedDecode(&ex->chunked, buf, (size_t)n, &consumed,
                                  &produced);
        if (rc < 0) {
            failf(ex, "%s: a malformed chunked body", corConnPeer(ex->c));
            return -EPROTO;
        }
        if (rc == 1) {
            ex->done = true;
            ex->extra = consumed < (size_t)n || ex->restLen > 0;
        }
        if (produced > 0 || ex->done) {
            return (ssize_t)produced;
        }
    }
}

/* The next body bytes by the framing; 0 at the end. */
static ssize_t
bodyNext(Exchange* ex, char* buf, size_t len)
{
    ssize_t n;

    switch (ex->framing) {
    case FRAME_LENGTH:
        n = bodyRaw(ex, buf, ex->left < len ? (size_t)ex->left : len, false);
        if (n > 0) {
            ex->left -= (uint64_t)n;
            ex->done = ex->left == 0;
        }
        return n;
    case FRAME_CHUNKED:
        return bodyChunked(ex, buf, len);
    case FRAME_TO_END:
        n = bodyRaw(ex, buf, len, true);
        ex->done = n == 0;
        return n;
    default:
        return 0;
    }
}

/* What a failed or finished attempt left in res, cleared for the next. */
static void
responseReset(CorClientResponse* res)
{
    free(res->headers);
    res->headers = NULL;
    res->headerCount = 0;
    res->status = 0;
}

/* ---- Over HTTP/2 ---------------------------------------------------------- */

/* Wait for news of the stream within the deadlines that apply. Returns 0
 * or -errno (said). May yield. */
static int
h2Wait(Exchange* ex)
{
    int rc = waitMs(ex) == -ETIMEDOUT
             ? -ETIMEDOUT : corHttp2StreamWait(ex->h2, deadlineNext(ex));

    if (rc == -ETIMEDOUT) {
        timeoutSay(ex);
    } else if (rc == -ECANCELED) {
        failf(ex, "%s: cancelled", peerOf(ex));
    }
    return rc;
}

/* The next body bytes of the stream; 0 at its end (its trailers in res). */
static ssize_t
h2Read(Exchange* ex, char* buf, size_t len)
{
    ssize_t n;

    while ((n = corHttp2StreamRead(ex->h2, buf, len, ex->res)) == -EAGAIN) {
        int rc = h2Wait(ex);

        if (rc < 0) {
            return rc;
        }
    }
    ex->done = corHttp2StreamDone(ex->h2);
    return n;
}

/* One attempt over HTTP/2: the stream submitted, its head waited for.
 * Returns 0 (ex->h2 open, res's head set), 1 when the server refused the
 * stream unprocessed (a GOAWAY's or its own REFUSED_STREAM: send again on
 * a new connection), or -errno (said; ex->h2 closed). May yield. */
static int
h2Attempt(Exchange* ex, const CorUrl* url)
{
    int ms = waitMs(ex);
    int rc;

    if (ms == -ETIMEDOUT) {
        failf(ex, "%s:%u: the exchange exceeded its total timeout (%d ms)",
              url->host, url->port, ex->totalTimeoutMs);
        return -ETIMEDOUT;
    }
    rc = corHttp2StreamOpen(ex->req, url, ex->req->connectTimeoutMs,
                            ex->res->retried, &ex->h2, &ex->res->reused,
                            ex->res->error, sizeof(ex->res->error));
    if (rc < 0) {
        return rc;
    }
    ex->res->sent = true;
    ex->firstByteDeadline = deadlineOf(ex->firstByteTimeoutMs,
                                       corEvClockMs());
    while ((rc = corHttp2StreamHead(ex->h2, ex->res)) == 0) {
        rc = h2Wait(ex);
        if (rc < 0) {
            break;
        }
    }
    if (rc < 0) {
        /* A body passed on as it comes cannot go twice once a byte of
         * it was taken. */
        bool again = ex->h2->refused
                     && (ex->req->bodyFrom == NULL
                         || ex->req->bodyFrom->bodyTaken == 0);

        corHttp2StreamClose(ex->h2);
        ex->h2 = NULL;
        return again ? 1 : rc;
    }
    ex->gotByte = true;
    ex->keepAlive = true;
    ex->done = corHttp2StreamDone(ex->h2);
    return 0;
}

/* The attempt, and the one retry of a refused stream. */
static int
h2Open(Exchange* ex, const CorUrl* url)
{
    int rc = h2Attempt(ex, url);

    if (rc == 1) {
        ex->res->retried = true;
        responseReset(ex->res);
        ex->res->error[0] = '\0';
        rc = h2Attempt(ex, url);
        if (rc == 1) {
            rc = -ECONNRESET;
        }
    }
    return rc;
}

ssize_t
corHttpClientBodyRead(void* stream, void* buf, size_t len, int timeoutMs)
{
    Exchange* x = stream;
    ssize_t n;

    if (x->failed < 0) {
        return x->failed;
    }
    if (x->done) {
        return 0;
    }
    if (len == 0) {
        return -EINVAL;
    }
    x->readTimeoutMs = timeoutMs;
    x->readDeadline = deadlineOf(timeoutMs, corEvClockMs());
    n = x->h2 != NULL ? h2Read(x, buf, len) : bodyNext(x, buf, len);
    x->readDeadline = 0;
    if (n < 0) {
        x->failed = (int)n;
    }
    return n;
}

bool
corHttpClientBodyDone(const void* stream)
{
    return ((const Exchange*)stream)->done;
}

/* ---- One attempt, and the exchange --------------------------------------- */

/* A connection for the exchange: pooled or new, within the deadlines.
 * Returns 0 (ex->c set) or -errno (res->error said). */
static int
connOpen(Exchange* ex, const CorUrl* url)
{
    const CorClientRequest* q = ex->req;
    CorConnTarget target = {
        .host = url->host,
        .port = url->port,
        .tls = strcmp(url->scheme, "https") == 0,
        .connectTimeoutMs = q->connectTimeoutMs,
        .tlsClient = q->tlsClient,
        .fresh = ex->res->retried,
    };
    int ms;
    int rc;

    ms = waitMs(ex);
    if (ms == -ETIMEDOUT) {
        failf(ex, "%s:%u: the exchange exceeded its total timeout (%d ms)",
              url->host, url->port, q->totalTimeoutMs);
        return -ETIMEDOUT;
    }
    if (ms > 0 && (target.connectTimeoutMs == 0
                   || target.connectTimeoutMs > ms)) {
        target.connectTimeoutMs = ms;
    }
    ex->c = corConnOpen(&target, &rc, ex->res->error,
                        sizeof(ex->res->error));
    return ex->c != NULL ? 0 : rc;
}

/*
 * The peer stopped reading the request and closed the connection: it may
 * have answered first, as a server that refuses a body does before
 * reading it (413, 401, 403), and that answer is the exchange's, passed
 * on as nginx passes it (a reset leaves what came before it readable).
 * The connection is not used again. Returns 0 with the answer's head
 * read, or rc, said as before, when no whole answer came.
 */
static int
earlyAnswer(Exchange* ex, int rc)
{
    char error[sizeof(ex->res->error)];

    memcpy(error, ex->res->error, sizeof(error));
    if (answerOpen(ex) == 0) {
        ex->keepAlive = false;
        ex->res->error[0] = '\0';
        return 0;
    }
    memcpy(ex->res->error, error, sizeof(error));
    return rc;
}

/* Whether a failed attempt goes again on a new connection: a pooled one
 * lost before any byte of the answer, with the request not written at
 * all, or idempotent, and no piece of a body passed on as it comes taken
 * (it cannot be read twice). */
static bool
resendable(const Exchange* ex, int rc)
{
    return !ex->gotByte && ex->res->reused
           && (rc == -ECONNRESET || rc == -EPIPE)
           && (corConnWritten(ex->c) == 0
               || corClientIdempotent(ex->req->method))
           && (ex->req->bodyFrom == NULL
               || ex->req->bodyFrom->bodyTaken == 0);
}

/* Send the request and read the answer's head on a connection. Returns 0
 * (ex->c open), 1 when a pooled connection failed before the answer's
 * first byte (send again on a new one), or -errno (ex->c closed). */
static int
attempt(Exchange* ex, const CorUrl* url, const char* request,
        size_t requestLen)
{
    int rc = connOpen(ex, url);

    if (rc < 0) {
        return rc;
    }
    ex->res->reused = corConnReused(ex->c);
    ex->res->sent = true;
    ex->gotByte = false;
    ex->len = 0;
    rc = requestSend(ex, request, requestLen);
    ex->firstByteDeadline = deadlineOf(ex->firstByteTimeoutMs,
                                       corEvClockMs());
    if (rc == 0) {
        rc = answerWait(ex);
        if (rc == 0) {
            rc = answerOpen(ex);
        }
    } else if (ex->sendFailed && (rc == -EPIPE || rc == -ECONNRESET)) {
        rc = earlyAnswer(ex, rc);
    }
    if (rc < 0) {
        bool again = resendable(ex, rc);

        corConnClose(ex->c);
        ex->c = NULL;
        return again ? 1 : rc;
    }
    return 0;
}

/* An attempt, and the one retry when the peer closed the pooled
 * connection under the request. Returns 0 or -errno. */
static int
attemptTwice(Exchange* ex, const CorUrl* url, const char* request,
             size_t requestLen)
{
    int rc = attempt(ex, url, request, requestLen);

    if (rc == 1) {
        ex->res->retried = true;
        responseReset(ex->res);
        ex->res->error[0] = '\0';
        rc = attempt(ex, url, request, requestLen);
        if (rc == 1) {
            rc = -ECONNRESET;   /* a new connection is never "pooled" */
        }
    }
    return rc;
}

/* Open ex (on the caller's memory): send and read the head, with the one
 * retry. Returns 0 or -errno, res->error said. */
static int
exchangeOpen(Exchange* ex, const CorClientRequest* req,
             CorClientResponse* res)
{
    memset(res, 0, sizeof(*res));
    return exchangeOpenAs(ex, req, res);
}

/* Whether q asks to switch protocols: a Connection field that lists
 * upgrade (RFC 9110 section 7.8). */
static bool
upgradeAsked(const CorClientRequest* q)
{
    for (unsigned i = 0; i < q->headerCount; i++) {
        const CorHeader* h = &q->headers[i];

        if (corHttpClientNameIs(h->name, h->nameLen, "connection")
            && corHeaderListHas(h, "upgrade", 7)) {
            return true;
        }
    }
    return false;
}

/* exchangeOpen, of a request whose body is in memory (or comes as it is
 * read over HTTP/2). */
static int
exchangeOpenAs(Exchange* ex, const CorClientRequest* req,
               CorClientResponse* res)
{
    char* request = NULL;
    size_t requestLen = 0;
    size_t requestSize = 0;
    CorUrl url;
    int rc;

    *ex = (Exchange){ .req = req, .res = res, .c = NULL,
                      .firstByteTimeoutMs = req->firstByteTimeoutMs,
                      .totalTimeoutMs = req->totalTimeoutMs,
                      .betweenMs = req->readTimeoutMs > 0
                                   ? req->readTimeoutMs
                                   : req->firstByteTimeoutMs,
                      .upgrade = !req->http2 && upgradeAsked(req) };
    rc = corHttpClientUrlCheck(req->url, &url, res->error,
                               sizeof(res->error));
    if (rc == 0) {
        rc = corHttpClientRequestCheck(req, res->error, sizeof(res->error));
    }
    if (rc < 0) {
        goto failed;
    }
    ex->totalDeadline = deadlineOf(req->totalTimeoutMs, corEvClockMs());
    if (req->http2) {
        rc = h2Open(ex, &url);
        if (rc < 0) {
            goto failed;
        }
        ex->req = NULL;
        return 0;
    }
    request = corHttpClientRequestHead(req, &url, &requestLen, &requestSize,
                                       &ex->wantClose);
    if (request == NULL) {
        rc = -ENOMEM;
        goto failed;
    }
    rc = attemptTwice(ex, &url, request, requestLen);
    if (rc < 0) {
        goto failed;
    }
    corChunkGive(request, requestSize);
    ex->req = NULL;
    res->head = ex->buf;        /* the headers point into it */
    return 0;

failed:
    corChunkGive(request, requestSize);
    ex->req = NULL;
    free(ex->buf);
    ex->buf = NULL;
    responseReset(res);
    if (res->error[0] == '\0') {
        snprintf(res->error, sizeof(res->error), "%s", strerror(-rc));
    }
    return rc;
}

/* Done with an opened ex: its connection back to the pool when the
 * answer was read to its end and nothing forbids reuse, else closed. */
static void
exchangeClose(Exchange* ex)
{
    corHttp2StreamClose(ex->h2);
    ex->h2 = NULL;
    if (ex->c == NULL) {
        return;
    }
    if (ex->done && ex->failed == 0 && ex->keepAlive && !ex->extra
        && !ex->wantClose) {
        corConnRelease(ex->c);
    } else {
        corConnClose(ex->c);
    }
    ex->c = NULL;
}

int
corHttpClientOpen(void* stream, const CorClientRequest* req,
                  CorClientResponse* res)
{
    return exchangeOpenAs(stream, req, res);
}

CorConn*
corHttpClientUpgraded(void* stream, const void** restP, size_t* restLenP)
{
    Exchange* x = stream;
    CorConn* c = x->c;

    if (c == NULL || x->res->status != 101) {
        return NULL;
    }
    x->c = NULL;
    *restP = x->rest;
    *restLenP = x->restLen;
    x->restLen = 0;
    return c;
}

void
corHttpClientClose(void* stream)
{
    exchangeClose(stream);
}

/* Fetch: the whole body into one buffer (malloc) within limit. */
static int
bodyCollect(Exchange* ex, size_t limit)
{
    CorClientResponse* res = ex->res;
    size_t cap = BODY_READ_MIN;

    if (ex->framing == FRAME_LENGTH) {
        if (ex->left > limit) {
            goto tooLarge;
        }
        cap = (size_t)ex->left + 1;
    }
    res->body = malloc(cap);
    while (res->body != NULL && !ex->done) {
        ssize_t n;

        if (cap - res->bodyLen < 2) {
            char* body = realloc(res->body, cap * 2);

            if (body == NULL) {
                break;
            }
            res->body = body;
            cap *= 2;
        }
        n = corHttpClientBodyRead(ex, res->body + res->bodyLen,
                                  cap - res->bodyLen - 1,
                                  ex->betweenMs > 0 ? ex->betweenMs : -1);
        if (n < 0) {
            return (int)n;
        }
        res->bodyLen += (size_t)n;
        if (res->bodyLen > limit) {
            goto tooLarge;
        }
    }
    if (res->body == NULL || !ex->done) {
        failf(ex, "no memory for an answer's body");
        return -ENOMEM;
    }
    res->body[res->bodyLen] = '\0';
    return 0;

tooLarge:
    failf(ex, "%s: the answer's body is over the limit of %zu bytes",
          peerOf(ex), limit);
    return -EFBIG;
}

int
corHttpClientExchange(const CorClientRequest* req, CorClientResponse* res)
{
    size_t limit = req->maxBodyBytes > 0 ? req->maxBodyBytes
                                         : COR_CLIENT_BODY_MAX;
    Exchange ex;
    int rc;

    rc = exchangeOpen(&ex, req, res);
    if (rc < 0) {
        return rc;
    }
    rc = bodyCollect(&ex, limit);
    if (rc < 0) {
        ex.failed = rc;
    }
    exchangeClose(&ex);
    if (rc < 0) {
        corClientResponseFree(res);
        res->status = 0;
        return rc;
    }
    res->error[0] = '\0';
    return 0;
}
