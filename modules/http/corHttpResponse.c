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
#include <strings.h>
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
httpStatusText(int status)
{
    const char* reason = status >= 0 && status < 512 ? reasons[status]
                                                     : NULL;

    return reason != NULL ? reason : "Unknown";
}

const char*
httpDate(HttpLoop* hl)
{
    time_t now = time(NULL);

    if (now != hl->dateSecond) {
        struct tm tm;

        gmtime_r(&now, &tm);
        strftime(hl->date, sizeof(hl->date), "%a, %d %b %Y %H:%M:%S GMT",
                 &tm);
        hl->dateSecond = now;
    }
    return hl->date;
}

/* Room for more bytes at the end of the output. */
static char*
outputReserve(HttpConn* c, size_t more)
{
    if (c->out == NULL && more <= HTTP_BUF_BYTES) {
        c->out = httpBufTake(c->hl);
        if (c->out == NULL) {
            return NULL;
        }
        c->outCap = HTTP_BUF_BYTES;
    }
    if (c->outCap - c->outLen < more) {
        size_t cap = c->outCap ? c->outCap : 4096;
        char* grown;

        while (cap - c->outLen < more) {
            cap *= 2;
        }
        grown = realloc(c->out, cap);
        if (grown == NULL) {
            return NULL;
        }
        c->out = grown;
        c->outCap = cap;
    }
    return c->out + c->outLen;
}

static int
appendBytes(HttpConn* c, const void* bytes, size_t len)
{
    char* at = outputReserve(c, len);

    if (at == NULL) {
        return -1;
    }
    memcpy(at, bytes, len);
    c->outLen += len;
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

static char*
putDecimal(char* at, size_t value)
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

/*
 * The head of a response, put together with copies rather than printf:
 * this runs once per request, and formatting was a good part of its cost.
 */
/* length: SIZE_MAX for a streamed body (chunked, or to the close);
 * LENGTH_GIVEN for a HEAD whose handler set the Content-Length (a proxy
 * passing on the length of what a GET would get). */
#define LENGTH_GIVEN (SIZE_MAX - 1)

static int
appendHead(HttpConn* c, int status, const char* contentType, size_t length,
           const CorHeader* headers, unsigned headerCount, bool keepAlive,
           bool http10)
{
    const char* reason = httpStatusText(status);
    size_t typeLen = contentType ? strlen(contentType) : 0;
    size_t extra = strlen(reason) + typeLen + 160;
    char* start;
    char* at;

    for (unsigned i = 0; i < headerCount; i++) {
        extra += headers[i].nameLen + headers[i].valueLen + 4;
    }
    start = at = outputReserve(c, extra);
    if (at == NULL) {
        return -1;
    }
    at = PUT_LITERAL(at, "HTTP/1.1 ");
    at = putDecimal(at, (size_t)(status >= 100 && status <= 999 ? status
                                                                 : 500));
    *at++ = ' ';
    at = put(at, reason, strlen(reason));
    at = PUT_LITERAL(at, "\r\nServer: cor\r\nDate: ");
    at = put(at, httpDate(c->hl), 29);
    if ((status >= 100 && status < 200) || status == 204 || status == 304) {
        /* These have no body and say nothing of one (RFC 9110 8.6). */
    } else if (length == LENGTH_GIVEN) {
        /* Among the handler's headers. */
    } else if (length != SIZE_MAX) {
        at = PUT_LITERAL(at, "\r\nContent-Length: ");
        at = putDecimal(at, length);
    } else if (!http10) {
        at = PUT_LITERAL(at, "\r\nTransfer-Encoding: chunked");
    }
    if (contentType != NULL) {
        at = PUT_LITERAL(at, "\r\nContent-Type: ");
        at = put(at, contentType, typeLen);
    }
    for (unsigned i = 0; i < headerCount; i++) {
        at = PUT_LITERAL(at, "\r\n");
        at = put(at, headers[i].name, headers[i].nameLen);
        at = PUT_LITERAL(at, ": ");
        at = put(at, headers[i].value, headers[i].valueLen);
    }
    if (!keepAlive) {
        at = PUT_LITERAL(at, "\r\nConnection: close");
    } else if (http10) {
        at = PUT_LITERAL(at, "\r\nConnection: keep-alive");
    }
    at = PUT_LITERAL(at, "\r\n\r\n");
    c->outLen += (size_t)(at - start);
    return 0;
}

/* Whether the handler set a header named name. */
static bool
headerGiven(const CorRequest* r, const char* name)
{
    size_t len = strlen(name);

    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        const CorHeader* h = &r->responseHeaders[i];

        if (h->nameLen == len && strncasecmp(h->name, name, len) == 0) {
            return true;
        }
    }
    return false;
}

int
httpResponseAppend(HttpConn* c, const HttpRequest* req, bool keepAlive)
{
    const CorRequest* r = &req->r;
    size_t length = r->stream != NULL ? SIZE_MAX : r->responseLen;

    if (r->head && headerGiven(r, "content-length")) {
        length = LENGTH_GIVEN;
    }
    if (appendHead(c, r->status, r->contentType, length,
                   r->responseHeaders, r->responseHeaderCount, keepAlive,
                   req->versionMinor == 0) != 0) {
        return -1;
    }
    if (r->head || r->responseLen == 0 || r->fileFd >= 0
        || r->stream != NULL) {
        return 0;
    }
    return appendBytes(c, r->responseBody, r->responseLen);
}

int
httpChunkAppend(HttpConn* c, const HttpRequest* req, const void* data,
                size_t len)
{
    char size[24];
    int n;

    if (req->r.head) {
        return 0;
    }
    if (req->versionMinor == 0) {
        return appendBytes(c, data, len);   /* delimited by the close */
    }
    n = snprintf(size, sizeof(size), "%zx\r\n", len);
    if (appendBytes(c, size, (size_t)n) != 0
        || appendBytes(c, data, len) != 0) {
        return -1;
    }
    return appendBytes(c, "\r\n", 2);
}

int
httpChunkEnd(HttpConn* c, const HttpRequest* req)
{
    if (req->r.head || req->versionMinor == 0) {
        return 0;
    }
    return appendBytes(c, "0\r\n\r\n", 5);
}

int
httpErrorAppend(HttpConn* c, int status)
{
    return httpErrorAppendWhy(c, status, httpStatusText(status));
}

int
httpErrorAppendWhy(HttpConn* c, int status, const char* why)
{
    char body[128];
    int len = snprintf(body, sizeof(body), "%d %s\n", status, why);

    if (len >= (int)sizeof(body)) {
        len = (int)sizeof(body) - 1;
    }

    if (appendHead(c, status, "text/plain", (size_t)len, NULL, 0, false,
                   false) != 0) {
        return -1;
    }
    return appendBytes(c, body, (size_t)len);
}

int
httpContinueAppend(HttpConn* c)
{
    static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";

    return appendBytes(c, line, sizeof(line) - 1);
}
