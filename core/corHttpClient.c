/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 client: one exchange on a connection of the connection
 * layer (corConn.c), read with the core's response head parser and chunked
 * decoder (corHttpParse.c), so that the client never sees a socket or
 * OpenSSL and reads HTTP with the server's code. Every wait is a read or a
 * write of the CorConn, hence a corRestWaitFd: the same code yields in a
 * coroutine and polls on a worker, and a cancel ends it.
 *
 * Deadlines are absolute, from the monotonic clock: the total one from the
 * call, the first-byte one from the request's last byte. A wait gets the
 * nearer of those that apply, and a timeout is told by the one that
 * passed.
 *
 * The retry rule: a connection from the pool may have been closed by the
 * peer after the pool checked it (a keep-alive timeout that crossed our
 * request). When such a connection fails before any byte of the answer
 * came, the peer has not acted on the request (RFC 9112 section 9.3.1
 * lets a client retry then), so it is sent once more on a new connection.
 * Never after a byte came, never on a new connection, never twice.
 *
 * Memory: the head is read into a buffer that becomes res->head (the
 * headers point into it); the body grows in a buffer of its own up to its
 * limit. Both are the caller's once the call returns.
 */
#include "corHttpClient.h"
#include "corCoreInt.h"
#include "corHttpParse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define URL_HOST_MAX 256
#define BODY_READ_MIN 16384

/* An http:// or https:// URL taken apart. */
typedef struct {
    bool tls;
    unsigned port;
    char host[URL_HOST_MAX];    /* without brackets */
    const char* authority;      /* host[:port] as written: Host */
    size_t authorityLen;
    const char* target;         /* path and query as written, or "/" */
    size_t targetLen;
} Url;

/* One exchange in flight. */
typedef struct {
    const CorHttpClientRequest* req;
    CorHttpClientResponse* res;
    Url url;
    uint64_t totalDeadline;     /* 0: none */
    uint64_t firstByteDeadline; /* 0: none, or not yet armed */
    bool gotByte;
    bool wantClose;             /* the caller sent Connection: close */
    CorConn* c;
    char* buf;                  /* the head, then res->head */
    size_t len;
    char* body;
    size_t bodyLen;
    size_t bodyCap;
} Exchange;

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

static bool
isTchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
           || (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static bool
isToken(const char* s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\0' || !isTchar(s[i])) {
            return false;
        }
    }
    return true;
}

/* A field value without CR, LF, NUL or another control byte but HTAB. */
static bool
isFieldValue(const char* s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            return false;
        }
    }
    return true;
}

static bool
nameIs(const char* s, size_t n, const char* name)
{
    return strlen(name) == n && strncasecmp(s, name, n) == 0;
}

/* ---- The URL ------------------------------------------------------------- */

static int
urlParse(const char* s, Url* u, char* why, size_t whyLen)
{
    const char* p;
    const char* host;
    const char* hostEnd;
    const char* end;
    unsigned long port;

    if (s == NULL) {
        goto bad;
    }
    if (strncasecmp(s, "http://", 7) == 0) {
        u->tls = false;
        p = s + 7;
    } else if (strncasecmp(s, "https://", 8) == 0) {
        u->tls = true;
        p = s + 8;
    } else {
        snprintf(why, whyLen, "URL %.80s: not http:// or https://", s);
        return -EINVAL;
    }
    u->authority = p;
    end = p + strcspn(p, "/?#");
    u->authorityLen = (size_t)(end - p);
    if (*p == '[') {
        host = p + 1;
        hostEnd = memchr(host, ']', (size_t)(end - host));
        if (hostEnd == NULL) {
            goto bad;
        }
        p = hostEnd + 1;
    } else {
        host = p;
        while (p < end && *p != ':') {
            p++;
        }
        hostEnd = p;
    }
    if (hostEnd == host || (size_t)(hostEnd - host) >= sizeof(u->host)
        || memchr(host, '@', (size_t)(hostEnd - host)) != NULL) {
        goto bad;
    }
    for (const char* h = host; h < hostEnd; h++) {
        if (!isTchar(*h) && *h != ':') {
            goto bad;
        }
    }
    memcpy(u->host, host, (size_t)(hostEnd - host));
    u->host[hostEnd - host] = '\0';
    u->port = u->tls ? 443 : 80;
    if (p < end) {
        char* stop;

        if (*p != ':' || p + 1 == end) {
            goto bad;
        }
        port = strtoul(p + 1, &stop, 10);
        if (stop != end || port == 0 || port > 65535 || p[1] < '0'
            || p[1] > '9') {
            goto bad;
        }
        u->port = (unsigned)port;
    }
    p = end;
    u->target = p;
    u->targetLen = strcspn(p, "#");
    for (size_t i = 0; i < u->targetLen; i++) {
        if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f) {
            goto bad;
        }
    }
    /* "http://a?x" asks for "/?x": requestBuild adds the '/'. */
    if (u->targetLen == 0) {
        u->target = "/";
        u->targetLen = 1;
    }
    return 0;

bad:
    snprintf(why, whyLen, "URL %.80s: malformed", s ? s : "(null)");
    return -EINVAL;
}

/* ---- Deadlines ----------------------------------------------------------- */

static uint64_t
deadlineOf(int ms, uint64_t now)
{
    return ms > 0 ? now + (uint64_t)ms : 0;
}

/* The wait a read may take now: the nearer deadline that applies; -1 for
 * none; -ETIMEDOUT (with the error set) once one passed. */
static int
waitMs(Exchange* ex)
{
    uint64_t now = corEvClockMs();
    uint64_t deadline = ex->totalDeadline;

    if (!ex->gotByte && ex->firstByteDeadline != 0
        && (deadline == 0 || ex->firstByteDeadline < deadline)) {
        deadline = ex->firstByteDeadline;
    }
    if (deadline == 0) {
        return -1;
    }
    if (now >= deadline) {
        return -ETIMEDOUT;
    }
    return deadline - now > INT32_MAX ? INT32_MAX : (int)(deadline - now);
}

static void
timeoutSay(Exchange* ex)
{
    const CorHttpClientRequest* q = ex->req;

    if (!ex->gotByte && ex->firstByteDeadline != 0
        && (ex->totalDeadline == 0
            || ex->firstByteDeadline <= ex->totalDeadline)
        && corEvClockMs() >= ex->firstByteDeadline) {
        failf(ex, "%s: no answer within the first-byte timeout (%d ms)",
              corConnPeer(ex->c), q->firstByteTimeoutMs);
    } else {
        failf(ex, "%s: the exchange exceeded its total timeout (%d ms)",
              corConnPeer(ex->c), q->totalTimeoutMs);
    }
}

/* ---- The request --------------------------------------------------------- */

static int
requestCheck(const CorHttpClientRequest* q, char* why, size_t whyLen)
{
    const char* method = q->method ? q->method : "GET";

    if (!isToken(method, strlen(method))) {
        snprintf(why, whyLen, "method %.40s: not a token", method);
        return -EINVAL;
    }
    for (unsigned i = 0; i < q->headerCount; i++) {
        const CorHeader* h = &q->headers[i];

        if (h->name == NULL || !isToken(h->name, h->nameLen)
            || (h->valueLen > 0 && h->value == NULL)
            || !isFieldValue(h->value, h->valueLen)) {
            snprintf(why, whyLen, "request header %u: a bad name or value",
                     i);
            return -EINVAL;
        }
        if (nameIs(h->name, h->nameLen, "content-length")
            || nameIs(h->name, h->nameLen, "transfer-encoding")) {
            snprintf(why, whyLen, "request header %.*s: the client frames "
                     "the body", (int)h->nameLen, h->name);
            return -EINVAL;
        }
    }
    return 0;
}

static void
put(char** p, const char* s, size_t n)
{
    memcpy(*p, s, n);
    *p += n;
}

/* The request's head and body in one buffer (malloc), its length in
 * *lenP. */
static char*
requestBuild(Exchange* ex, size_t* lenP)
{
    const CorHttpClientRequest* q = ex->req;
    const char* method = q->method ? q->method : "GET";
    bool hasHost = false;
    bool sendLength;
    size_t size;
    char* out;
    char* p;
    char number[32];
    int numberLen;

    size = strlen(method) + ex->url.targetLen + ex->url.authorityLen + 64
           + q->bodyLen;
    for (unsigned i = 0; i < q->headerCount; i++) {
        size += q->headers[i].nameLen + q->headers[i].valueLen + 4;
        hasHost |= nameIs(q->headers[i].name, q->headers[i].nameLen, "host");
    }
    sendLength = q->bodyLen > 0 || strcmp(method, "POST") == 0
                 || strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
    out = malloc(size);
    if (out == NULL) {
        return NULL;
    }
    p = out;
    put(&p, method, strlen(method));
    put(&p, " ", 1);
    if (ex->url.target[0] == '?') {
        put(&p, "/", 1);
    }
    put(&p, ex->url.target, ex->url.targetLen);
    put(&p, " HTTP/1.1\r\n", 11);
    if (!hasHost) {
        put(&p, "Host: ", 6);
        put(&p, ex->url.authority, ex->url.authorityLen);
        put(&p, "\r\n", 2);
    }
    for (unsigned i = 0; i < q->headerCount; i++) {
        const CorHeader* h = &q->headers[i];

        put(&p, h->name, h->nameLen);
        put(&p, ": ", 2);
        put(&p, h->value, h->valueLen);
        put(&p, "\r\n", 2);
        if (nameIs(h->name, h->nameLen, "connection")
            && strncasecmp(h->value, "close", h->valueLen) == 0) {
            ex->wantClose = true;
        }
    }
    if (sendLength) {
        numberLen = snprintf(number, sizeof(number), "Content-Length: %zu\r\n",
                             q->bodyLen);
        put(&p, number, (size_t)numberLen);
    }
    put(&p, "\r\n", 2);
    if (q->bodyLen > 0) {
        put(&p, q->body, q->bodyLen);
    }
    *lenP = (size_t)(p - out);
    return out;
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

/* Read once into buf; > 0 bytes, or -errno with the error set (a peer's
 * end is -ECONNRESET, said as what). */
static ssize_t
readSome(Exchange* ex, void* buf, size_t len, const char* what)
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
    return readFailSay(ex, n, what);
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
        rc = corHttpParseResponseHead(ex->buf, ex->len, &limits, head);
        if (rc < 0) {
            failf(ex, "%s: a malformed answer: %s", corConnPeer(ex->c),
                  corHttpResponseErrorText(rc));
            return -EPROTO;
        }
        if (rc == 0) {
            ssize_t n = readSome(ex, ex->buf + ex->len,
                                 COR_HTTP_CLIENT_HEAD_MAX + 1 - ex->len,
                                 "before the answer's head");

            if (n < 0) {
                return (int)n;
            }
            ex->len += (size_t)n;
            continue;
        }
        if (head->status == 101) {
            failf(ex, "%s: 101 Switching Protocols, which was not asked "
                  "for", corConnPeer(ex->c));
            return -EPROTO;
        }
        if (head->status >= 200) {
            return rc;
        }
        /* 100 Continue, 103 Early Hints...: the answer follows. */
        memmove(ex->buf, ex->buf + rc, ex->len - (size_t)rc);
        ex->len -= (size_t)rc;
    }
}

/* Room for at least want more body bytes, within limit plus framing. */
static int
bodyRoom(Exchange* ex, size_t want)
{
    size_t cap = ex->bodyCap;
    char* body;

    if (ex->bodyCap - ex->bodyLen >= want + 1) {
        return 0;
    }
    if (cap == 0) {
        cap = BODY_READ_MIN;
    }
    while (cap - ex->bodyLen < want + 1) {
        cap *= 2;
    }
    body = realloc(ex->body, cap);
    if (body == NULL) {
        failf(ex, "no memory for an answer's body");
        return -ENOMEM;
    }
    ex->body = body;
    ex->bodyCap = cap;
    return 0;
}

static int
tooLarge(Exchange* ex, size_t limit)
{
    failf(ex, "%s: the answer's body is over the limit of %zu bytes",
          corConnPeer(ex->c), limit);
    return -EFBIG;
}

/* A Content-Length body; rest: the bytes after the head. */
static int
bodyByLength(Exchange* ex, size_t want, const char* rest, size_t restLen,
             size_t limit, bool* extra)
{
    if (want > limit) {
        return tooLarge(ex, limit);
    }
    if (bodyRoom(ex, want) < 0) {
        return -ENOMEM;
    }
    if (restLen > want) {
        *extra = true;
        restLen = want;
    }
    memcpy(ex->body, rest, restLen);
    ex->bodyLen = restLen;
    while (ex->bodyLen < want) {
        ssize_t n = readSome(ex, ex->body + ex->bodyLen, want - ex->bodyLen,
                             "in the middle of the body");

        if (n < 0) {
            return (int)n;
        }
        ex->bodyLen += (size_t)n;
    }
    return 0;
}

/* A chunked body: raw bytes go after what is decoded, and are decoded in
 * place. */
static int
bodyChunked(Exchange* ex, const char* rest, size_t restLen, size_t limit,
            bool* extra)
{
    CorHttpChunked chunked;
    size_t raw = restLen;
    int rc;

    corHttpChunkedInit(&chunked, limit);
    if (bodyRoom(ex, raw) < 0) {
        return -ENOMEM;
    }
    memcpy(ex->body, rest, raw);
    for (;;) {
        size_t consumed = 0;
        size_t produced = 0;
        ssize_t n;

        rc = corHttpChunkedDecode(&chunked, ex->body + ex->bodyLen, raw,
                                  &consumed, &produced);
        ex->bodyLen += produced;
        if (rc == 1) {
            *extra = consumed < raw;
            return 0;
        }
        if (rc == -413) {
            return tooLarge(ex, limit);
        }
        if (rc < 0) {
            failf(ex, "%s: a malformed chunked body", corConnPeer(ex->c));
            return -EPROTO;
        }
        if (bodyRoom(ex, BODY_READ_MIN) < 0) {
            return -ENOMEM;
        }
        n = readSome(ex, ex->body + ex->bodyLen,
                     ex->bodyCap - ex->bodyLen - 1,
                     "in the middle of the body");
        if (n < 0) {
            return (int)n;
        }
        raw = (size_t)n;
    }
}

/* A body that ends with the connection. */
static int
bodyToEnd(Exchange* ex, const char* rest, size_t restLen, size_t limit)
{
    if (restLen > limit) {
        return tooLarge(ex, limit);
    }
    if (bodyRoom(ex, restLen) < 0) {
        return -ENOMEM;
    }
    memcpy(ex->body, rest, restLen);
    ex->bodyLen = restLen;
    for (;;) {
        int ms = waitMs(ex);
        ssize_t n;

        if (ms == -ETIMEDOUT) {
            timeoutSay(ex);
            return -ETIMEDOUT;
        }
        if (bodyRoom(ex, BODY_READ_MIN) < 0) {
            return -ENOMEM;
        }
        n = corConnRead(ex->c, ex->body + ex->bodyLen,
                        ex->bodyCap - ex->bodyLen - 1, ms);
        if (n == 0) {
            return 0;
        }
        if (n < 0) {
            return readFailSay(ex, n, "in the middle of the body");
        }
        ex->gotByte = true;
        ex->bodyLen += (size_t)n;
        if (ex->bodyLen > limit) {
            return tooLarge(ex, limit);
        }
    }
}

/* The headers of the final answer, as CorHeader, into res. */
static int
headersKeep(Exchange* ex, const CorHttpResponseHead* head)
{
    CorHttpClientResponse* res = ex->res;

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

/*
 * Read the answer to a request sent on ex->c. Returns 0 with *reusable
 * saying whether the connection may carry another exchange, or -errno.
 */
static int
answerRead(Exchange* ex, bool* reusable)
{
    CorHttpHeader fields[COR_HTTP_CLIENT_FIELDS_MAX];
    CorHttpResponseHead head = { .headers = fields };
    const CorHttpClientRequest* q = ex->req;
    size_t limit = q->maxBodyBytes > 0 ? q->maxBodyBytes
                                       : COR_HTTP_CLIENT_BODY_MAX;
    bool extra = false;
    bool noBody;
    int rc;

    rc = headRead(ex, &head);
    if (rc < 0) {
        return rc;
    }
    if (headersKeep(ex, &head) < 0) {
        return -ENOMEM;
    }
    noBody = (q->method != NULL && strcmp(q->method, "HEAD") == 0)
             || head.status == 204 || head.status == 304;
    if (noBody) {
        extra = ex->len > (size_t)rc;
        rc = bodyRoom(ex, 0);
    } else if (head.chunked) {
        rc = bodyChunked(ex, ex->buf + rc, ex->len - (size_t)rc, limit,
                         &extra);
    } else if (head.contentLength >= 0) {
        rc = bodyByLength(ex, (size_t)head.contentLength, ex->buf + rc,
                          ex->len - (size_t)rc, limit, &extra);
    } else {
        rc = bodyToEnd(ex, ex->buf + rc, ex->len - (size_t)rc, limit);
        head.keepAlive = false;
    }
    if (rc < 0) {
        return rc;
    }
    ex->body[ex->bodyLen] = '\0';
    *reusable = head.keepAlive && !extra && !ex->wantClose;
    return 0;
}

/* ---- One attempt, and the exchange --------------------------------------- */

/* Send the request and read its answer on a connection. Returns 0, 1 when
 * a pooled connection failed before the answer's first byte (send again
 * on a new one), or -errno. */
static int
attempt(Exchange* ex, const char* request, size_t requestLen)
{
    const CorHttpClientRequest* q = ex->req;
    CorConnTarget target = {
        .host = ex->url.host,
        .port = ex->url.port,
        .tls = ex->url.tls,
        .connectTimeoutMs = q->connectTimeoutMs,
        .tlsClient = q->tlsClient,
        .fresh = ex->res->retried,
    };
    bool reusable = false;
    int ms;
    int rc;

    ms = waitMs(ex);
    if (ms == -ETIMEDOUT) {
        failf(ex, "%s:%u: the exchange exceeded its total timeout (%d ms)",
              ex->url.host, ex->url.port, q->totalTimeoutMs);
        return -ETIMEDOUT;
    }
    if (ms > 0 && (target.connectTimeoutMs == 0
                   || target.connectTimeoutMs > ms)) {
        target.connectTimeoutMs = ms;
    }
    ex->c = corConnOpen(&target, &rc, ex->res->error,
                        sizeof(ex->res->error));
    if (ex->c == NULL) {
        return rc;
    }
    ex->res->reused = corConnReused(ex->c);
    ex->gotByte = false;
    ex->len = 0;
    ms = waitMs(ex);
    rc = ms == -ETIMEDOUT ? -ETIMEDOUT
                          : corConnWriteAll(ex->c, request, requestLen, ms);
    if (rc < 0) {
        if (rc == -ETIMEDOUT) {
            timeoutSay(ex);
        } else {
            failf(ex, "%s: send: %s", corConnPeer(ex->c), strerror(-rc));
        }
    } else {
        ex->firstByteDeadline = deadlineOf(q->firstByteTimeoutMs,
                                           corEvClockMs());
        rc = answerRead(ex, &reusable);
    }
    if (rc < 0 && !ex->gotByte && ex->res->reused
        && (rc == -ECONNRESET || rc == -EPIPE)) {
        corConnClose(ex->c);
        ex->c = NULL;
        return 1;
    }
    if (rc == 0 && reusable) {
        corConnRelease(ex->c);
    } else {
        corConnClose(ex->c);
    }
    ex->c = NULL;
    return rc;
}

static void
responseClear(CorHttpClientResponse* res)
{
    memset(res, 0, sizeof(*res));
}

int
corHttpClientFetch(const CorHttpClientRequest* req,
                   CorHttpClientResponse* res)
{
    Exchange ex = { .req = req, .res = res };
    CorClientFetchFn other = corClientSchemeOf(req->url);
    char* request = NULL;
    size_t requestLen = 0;
    int rc;

    if (other != NULL) {
        return other(req, res);     /* a module's scheme: cor:// */
    }
    responseClear(res);
    rc = urlParse(req->url, &ex.url, res->error, sizeof(res->error));
    if (rc < 0) {
        return rc;
    }
    rc = requestCheck(req, res->error, sizeof(res->error));
    if (rc < 0) {
        return rc;
    }
    ex.totalDeadline = deadlineOf(req->totalTimeoutMs, corEvClockMs());
    request = requestBuild(&ex, &requestLen);
    ex.buf = malloc(COR_HTTP_CLIENT_HEAD_MAX + 1);
    if (request == NULL || ex.buf == NULL) {
        snprintf(res->error, sizeof(res->error), "no memory");
        rc = -ENOMEM;
        goto failed;
    }
    rc = attempt(&ex, request, requestLen);
    if (rc == 1) {
        /* The peer closed the pooled connection under the request. */
        res->retried = true;
        free(res->headers);
        res->headers = NULL;
        res->headerCount = 0;
        res->status = 0;
        free(ex.body);
        ex.body = NULL;
        ex.bodyLen = ex.bodyCap = 0;
        res->error[0] = '\0';
        rc = attempt(&ex, request, requestLen);
        if (rc == 1) {
            rc = -ECONNRESET;   /* a new connection is never "pooled" */
        }
    }
    if (rc < 0) {
        goto failed;
    }
    free(request);
    res->head = ex.buf;
    res->body = ex.body;
    res->bodyLen = ex.bodyLen;
    res->error[0] = '\0';
    return 0;

failed:
    free(request);
    free(ex.buf);
    free(ex.body);
    free(res->headers);
    res->headers = NULL;
    res->headerCount = 0;
    res->status = 0;
    if (res->error[0] == '\0') {
        snprintf(res->error, sizeof(res->error), "%s", strerror(-rc));
    }
    return rc;
}

const CorHeader*
corHttpClientHeader(const CorHttpClientResponse* res, const char* name)
{
    for (unsigned i = 0; i < res->headerCount; i++) {
        if (nameIs(res->headers[i].name, res->headers[i].nameLen, name)) {
            return &res->headers[i];
        }
    }
    return NULL;
}

void
corHttpClientResponseFree(CorHttpClientResponse* res)
{
    free(res->headers);
    free(res->body);
    free(res->head);
    res->headers = NULL;
    res->body = NULL;
    res->head = NULL;
    res->headerCount = 0;
    res->bodyLen = 0;
}
