/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Responses: the status line, the headers and the body appended to the
 * connection's output buffer, which the connection writes in one go (a
 * pipelined batch of answers is one write). The Date header is formatted
 * once a second per loop.
 */
#include "corHttpInt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The reason phrase of every status in IANA's HTTP Status Code Registry
 * (RFC 9110 and the RFCs it names); 306 and 418 are registered unused. */
static const char* const reasons[512] = {
    [100] = "Continue",
    [101] = "Switching Protocols",
    [102] = "Processing",
    [103] = "Early Hints",
    [200] = "OK",
    [201] = "Created",
    [202] = "Accepted",
    [203] = "Non-Authoritative Information",
    [204] = "No Content",
    [205] = "Reset Content",
    [206] = "Partial Content",
    [207] = "Multi-Status",
    [208] = "Already Reported",
    [226] = "IM Used",
    [300] = "Multiple Choices",
    [301] = "Moved Permanently",
    [302] = "Found",
    [303] = "See Other",
    [304] = "Not Modified",
    [305] = "Use Proxy",
    [306] = "Unused",
    [307] = "Temporary Redirect",
    [308] = "Permanent Redirect",
    [400] = "Bad Request",
    [401] = "Unauthorized",
    [402] = "Payment Required",
    [403] = "Forbidden",
    [404] = "Not Found",
    [405] = "Method Not Allowed",
    [406] = "Not Acceptable",
    [407] = "Proxy Authentication Required",
    [408] = "Request Timeout",
    [409] = "Conflict",
    [410] = "Gone",
    [411] = "Length Required",
    [412] = "Precondition Failed",
    [413] = "Content Too Large",
    [414] = "URI Too Long",
    [415] = "Unsupported Media Type",
    [416] = "Range Not Satisfiable",
    [417] = "Expectation Failed",
    [418] = "I'm a teapot",
    [421] = "Misdirected Request",
    [422] = "Unprocessable Content",
    [423] = "Locked",
    [424] = "Failed Dependency",
    [425] = "Too Early",
    [426] = "Upgrade Required",
    [428] = "Precondition Required",
    [429] = "Too Many Requests",
    [431] = "Request Header Fields Too Large",
    [451] = "Unavailable For Legal Reasons",
    [500] = "Internal Server Error",
    [501] = "Not Implemented",
    [502] = "Bad Gateway",
    [503] = "Service Unavailable",
    [504] = "Gateway Timeout",
    [505] = "HTTP Version Not Supported",
    [506] = "Variant Also Negotiates",
    [507] = "Insufficient Storage",
    [508] = "Loop Detected",
    [510] = "Not Extended",
    [511] = "Network Authentication Required",
};

const char*
corHttpStatusText(int status)
{
    const char* reason = status >= 0 && status < 512 ? reasons[status] : NULL;

    return reason != NULL ? reason : "Unknown";
}

const char*
corHttpDate(HttpLoop* hl)
{
    time_t now = time(NULL);

    if (now != hl->dateSecond) {
        struct tm tm;

        gmtime_r(&now, &tm);
        strftime(hl->date, sizeof(hl->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        hl->dateSecond = now;
    }
    return hl->date;
}

/* Room for more bytes at the end of the output: a loop's buffer for the
 * first that fit one, grown by the kit's buffer past it. */
static char*
outputReserve(HttpConn* c, size_t more)
{
    CorBuf* out = &c->k.out;

    if (out->data == NULL && more <= HTTP_BUF_BYTES
        && corHttpBufLend(c->hl, out) != 0) {
        return NULL;
    }
    if (out->cap - out->len < more && corBufReserve(out, more) != 0) {
        return NULL;
    }
    return (char*)out->data + out->len;
}

static int
appendBytes(HttpConn* c, const void* bytes, size_t len)
{
    char* at = outputReserve(c, len);

    if (at == NULL) {
        return -1;
    }
    memcpy(at, bytes, len);
    c->k.out.len += len;
    return 0;
}

/* Append bytes known to fit (reserved before). */
static inline char*
put(char* at, const char* bytes, size_t len)
{
    memcpy(at, bytes, len);
    return at + len;
}

#define PUT_LITERAL(at, s) put(at, s, sizeof(s) - 1)

/* A status that allows no body: nothing follows its head, whatever the
 * handler gave (RFC 9110 6.4.1, 15.3.5, 15.4.5). */
static bool
statusBodiless(int status)
{
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

/* The fields that frame a body: the writer's alone, never a handler's. */
static bool
headerFraming(const CorHeader* h)
{
    return corHeaderIs(h, "content-length")
           || corHeaderIs(h, "transfer-encoding");
}

/*
 * The head of a response, put together with copies rather than printf:
 * this runs once per request, and formatting was a good part of its cost.
 * The framing field is the one req->framing says, and the handler's
 * framing fields are left out.
 */
static int
appendHead(HttpConn* c, const HttpRequest* req, int status, bool keepAlive)
{
    const CorRequest* r = &req->r;
    const char* reason = corHttpStatusText(status);
    size_t typeLen = r->contentType ? strlen(r->contentType) : 0;
    size_t altLen = c->altSvc != NULL ? strlen(c->altSvc) : 0;
    size_t extra = strlen(reason) + typeLen + altLen + 160;
    char* start;
    char* at;

    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        extra += r->responseHeaders[i].nameLen + r->responseHeaders[i].valueLen
                 + 4;
    }
    start = at = outputReserve(c, extra);
    if (at == NULL) {
        return -1;
    }
    at = PUT_LITERAL(at, "HTTP/1.1 ");
    at = corHttpPutDecimal(at, (size_t)status);
    *at++ = ' ';
    at = put(at, reason, strlen(reason));
    at = PUT_LITERAL(at, "\r\nServer: cor\r\nDate: ");
    at = put(at, corHttpDate(c->hl), 29);
    if (c->altSvc != NULL) {
        /* The listener serves HTTP/3 too (RFC 7838): a client may move. */
        at = PUT_LITERAL(at, "\r\nAlt-Svc: ");
        at = put(at, c->altSvc, altLen);
    }
    if (req->lengthSaid != UINT64_MAX) {
        at = PUT_LITERAL(at, "\r\nContent-Length: ");
        at = corHttpPutDecimal(at, req->lengthSaid);
    } else if (req->framing == HTTP_FRAME_CHUNKED) {
        at = PUT_LITERAL(at, "\r\nTransfer-Encoding: chunked");
    }
    if (r->contentType != NULL) {
        at = PUT_LITERAL(at, "\r\nContent-Type: ");
        at = put(at, r->contentType, typeLen);
    }
    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        const CorHeader* h = &r->responseHeaders[i];

        if (!headerFraming(h)) {
            at = PUT_LITERAL(at, "\r\n");
            at = put(at, h->name, h->nameLen);
            at = PUT_LITERAL(at, ": ");
            at = put(at, h->value, h->valueLen);
        }
    }
    if (!keepAlive) {
        at = PUT_LITERAL(at, "\r\nConnection: close");
    } else if (req->versionMinor == 0) {
        at = PUT_LITERAL(at, "\r\nConnection: keep-alive");
    }
    at = PUT_LITERAL(at, "\r\n\r\n");
    c->k.out.len += (size_t)(at - start);
    return 0;
}

/* The Content-Length the handler set (a proxy passing its upstream's
 * on), when it is one number; UINT64_MAX when none is. */
static uint64_t
lengthGiven(const CorRequest* r)
{
    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        const CorHeader* h = &r->responseHeaders[i];
        uint64_t n = 0;
        size_t k;

        if (!headerFraming(h) || h->name[0] == 't' || h->name[0] == 'T'
            || h->valueLen == 0 || h->valueLen > 18) {
            continue;
        }
        for (k = 0; k < h->valueLen && h->value[k] >= '0' && h->value[k] <= '9';
             k++) {
            n = n * 10 + (uint64_t)(h->value[k] - '0');
        }
        if (k == h->valueLen) {
            return n;
        }
    }
    return UINT64_MAX;
}

/*
 * How the body of req goes out, and the length its head says. A body the
 * status forbids, or a HEAD's, is never sent. A length is said only when
 * it is known: the body's, or the handler's for a stream (a proxy passing
 * on its upstream's; the stream is then held to it) and for a HEAD (what
 * a GET would get). Never one made up: a stream of unknown length is
 * chunked (HTTP/1.1) or ends with the close (HTTP/1.0), and a HEAD of one
 * says no length.
 */
static void
framingChoose(HttpRequest* req, int status)
{
    const CorRequest* r = &req->r;
    uint64_t given = lengthGiven(r);

    req->lengthSaid = UINT64_MAX;
    req->bodyLeft = 0;
    if (statusBodiless(status)) {
        req->framing = HTTP_FRAME_NONE;
        return;
    }
    if (r->stream == NULL) {
        req->lengthSaid = r->head && given != UINT64_MAX ? given
                                                         : r->responseLen;
    } else {
        req->lengthSaid = given;
    }
    if (r->head) {
        req->framing = HTTP_FRAME_NONE;
    } else if (req->lengthSaid != UINT64_MAX) {
        req->framing = HTTP_FRAME_LENGTH;
        req->bodyLeft = req->lengthSaid;
    } else {
        req->framing = req->versionMinor == 0 ? HTTP_FRAME_CLOSE
                                              : HTTP_FRAME_CHUNKED;
    }
}

/* The status that goes out: a final one (200..599), or 101 for the
 * upgrade hand-off. Any other is a handler's mistake (or an upstream's
 * that reached it): a 1xx would be read as interim, the answer after it
 * as this one's. */
static int
statusSent(const HttpRequest* req)
{
    const CorRequest* r = &req->r;

    if ((r->status >= 200 && r->status <= 599)
        || (r->status == 101 && r->upgrade != NULL)) {
        return r->status;
    }
    corLog(COR_LOG_ERROR,
           "handler %s: status %d is not a final answer "
           "(200..599; 101 only through corRequestUpgrade): 500 sent",
           corRequestHandlerName(r), r->status);
    return 500;
}

int
corHttpResponseAppend(HttpConn* c, HttpRequest* req, bool keepAlive)
{
    const CorRequest* r = &req->r;
    int status = statusSent(req);

    framingChoose(req, status);
    if (appendHead(c, req, status, keepAlive) != 0) {
        return -1;
    }
    if (req->framing != HTTP_FRAME_LENGTH || r->responseLen == 0
        || r->fileFd >= 0 || r->stream != NULL) {
        return 0;
    }
    req->bodyLeft = 0;
    return appendBytes(c, r->responseBody, r->responseLen);
}

int
corHttpChunkAppend(HttpConn* c, HttpRequest* req, const void* data, size_t len)
{
    char size[24];
    int n;

    switch (req->framing) {
    case HTTP_FRAME_NONE:
        return 0;
    case HTTP_FRAME_CLOSE:
        req->r.bodySent += len;
        return appendBytes(c, data, len); /* delimited by the close */
    case HTTP_FRAME_LENGTH:
        /* More than the length said would be read as the next answer:
         * what is past it is dropped, and the close tells the client. */
        if (len > req->bodyLeft) {
            len = (size_t)req->bodyLeft;
            c->keepAlive = false;
        }
        req->bodyLeft -= len;
        req->r.bodySent += len;
        return appendBytes(c, data, len);
    case HTTP_FRAME_CHUNKED:
        break;
    }
    req->r.bodySent += len;
    n = snprintf(size, sizeof(size), "%zx\r\n", len);
    if (appendBytes(c, size, (size_t)n) != 0
        || appendBytes(c, data, len) != 0) {
        return -1;
    }
    return appendBytes(c, "\r\n", 2);
}

int
corHttpChunkEnd(HttpConn* c, const HttpRequest* req)
{
    if (req->framing == HTTP_FRAME_LENGTH) {
        /* Short of its length: only the close can tell the client that
         * the answer was cut (never padded). */
        return req->bodyLeft == 0 ? 0 : -1;
    }
    if (req->framing != HTTP_FRAME_CHUNKED) {
        return 0;
    }
    if (appendBytes(c, "0\r\n", 3) != 0) {
        return -1;
    }
    /* The trailer section (RFC 9112 7.1.2): the handler's fields, checked
     * as its headers are (tokens, no CR or LF) when it added them. */
    for (unsigned i = 0; i < req->r.responseTrailerCount; i++) {
        const CorHeader* h = &req->r.responseTrailers[i];

        if (appendBytes(c, h->name, h->nameLen) != 0
            || appendBytes(c, ": ", 2) != 0
            || appendBytes(c, h->value, h->valueLen) != 0
            || appendBytes(c, "\r\n", 2) != 0) {
            return -1;
        }
    }
    return appendBytes(c, "\r\n", 2);
}

int
corHttpErrorAppend(HttpConn* c, int status)
{
    return corHttpErrorAppendWhy(c, status, corHttpStatusText(status));
}

int
corHttpErrorAppendWhy(HttpConn* c, int status, const char* why)
{
    char body[128];
    int len = snprintf(body, sizeof(body), "%d %s\n", status, why);
    HttpRequest req;

    if (len >= (int)sizeof(body)) {
        len = (int)sizeof(body) - 1;
    }
    req = (HttpRequest){ .r.contentType = "text/plain",
                         .versionMinor = 1,
                         .framing = HTTP_FRAME_LENGTH,
                         .lengthSaid = (uint64_t)len };

    if (appendHead(c, &req, status, false) != 0) {
        return -1;
    }
    return appendBytes(c, body, (size_t)len);
}

int
corHttpContinueAppend(HttpConn* c)
{
    static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";

    return appendBytes(c, line, sizeof(line) - 1);
}
