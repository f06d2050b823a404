/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 client's answer coming in: the head read with the floor's
 * response parser (1xx skipped), how the body is framed learnt from it,
 * and the body's bytes given out decoded (chunked framing removed), read
 * with the server's own code (corHttpParse.c).
 *
 * Memory: the head is read into a buffer that becomes res->head (the
 * headers point into it), taken only once the answer's first byte is
 * there; the body is read into the caller's buffer.
 */
#include "corHttpClientInt.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CorHttpClientExchange Exchange;

/* Say why a read failed (n <= 0: the peer's end, or -errno); returns
 * the errno to pass up, -ECONNRESET for the peer's end. */
static int
readFailSay(Exchange* ex, ssize_t n, const char* what)
{
    if (n == 0) {
        corHttpClientFail(ex, "%s: the peer closed the connection %s",
                          corConnPeer(ex->c), what);
        return -ECONNRESET;
    }
    if (n == -ETIMEDOUT) {
        corHttpClientTimeoutSay(ex);
    } else if (n == -ECANCELED) {
        corHttpClientFail(ex, "%s: cancelled", corConnPeer(ex->c));
    } else {
        corHttpClientFail(ex, "%s: read %s: %s", corConnPeer(ex->c), what,
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
    int ms = corHttpClientWaitMs(ex);
    ssize_t n;

    if (ms == -ETIMEDOUT) {
        corHttpClientTimeoutSay(ex);
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
int
corHttpClientAnswerWait(Exchange* ex)
{
    CorTransport* t = corConnTransport(ex->c);
    short revents;
    int ms;
    int rc = 0;

    if (corTransportPending(t)) {
        return 0;
    }
    ms = corHttpClientWaitMs(ex);
    if (ms != -ETIMEDOUT && corCoCurrent() != NULL
        && (ms < 0 || ms > TRIM_AFTER_MS)) {
        rc = corRestWaitFd(t->fd, POLLIN, TRIM_AFTER_MS, &revents);
        if (rc == 0) {
            corCoStackTrim();
            ms = corHttpClientWaitMs(ex);
        }
    }
    if (rc == 0) {
        rc = ms == -ETIMEDOUT ? 0 : corRestWaitFd(t->fd, POLLIN, ms, &revents);
    }
    if (rc < 0) {
        return readFailSay(ex, -errno, "before the answer's head");
    }
    if (rc == 0) {
        corHttpClientTimeoutSay(ex);
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
        corHttpClientFail(ex, "no memory for an answer's head");
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
        ex->readDeadline = corHttpClientDeadline(ex->betweenMs, corEvClockMs());
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
        rc = ex->len == 0
                 ? 0
                 : corHttpParseResponseHead(ex->buf, ex->len, &limits, head);
        if (rc < 0) {
            corHttpClientFail(ex, "%s: a malformed answer: %s",
                              corConnPeer(ex->c), corHttpResponseErrorText(rc));
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
            corHttpClientFail(ex,
                              "%s: 101 Switching Protocols, which was "
                              "not asked for",
                              corConnPeer(ex->c));
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
        corHttpClientFail(ex, "no memory for an answer's headers");
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
__attribute__((noinline)) int
corHttpClientAnswerOpen(Exchange* ex)
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
            corHttpClientFail(ex, "%s: a malformed chunked body",
                              corConnPeer(ex->c));
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
ssize_t
corHttpClientBodyNext(Exchange* ex, char* buf, size_t len)
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
void
corHttpClientResponseReset(CorClientResponse* res)
{
    free(res->headers);
    res->headers = NULL;
    res->headerCount = 0;
    res->status = 0;
}
