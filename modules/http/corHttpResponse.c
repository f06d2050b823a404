/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Responses: the status line, the headers and the body appended to the
 * connection's output buffer, which the connection writes in one go (a
 * pipelined batch of answers is one write). The Date header is formatted
 * once a second per loop.
 */
#include "corHttpInt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char*
httpStatusText(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
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

static int
appendHead(HttpConn* c, int status, const char* contentType, size_t length,
           const CorHeader* headers, unsigned headerCount, bool keepAlive,
           bool http10)
{
    size_t extra = 0;
    char* at;
    int n;

    for (unsigned i = 0; i < headerCount; i++) {
        extra += headers[i].nameLen + headers[i].valueLen + 4;
    }
    at = outputReserve(c, 256 + extra + (contentType ? strlen(contentType)
                                                     : 0));
    if (at == NULL) {
        return -1;
    }
    n = sprintf(at, "HTTP/1.1 %d %s\r\nServer: cor\r\nDate: %s\r\n"
                "Content-Length: %zu\r\n", status, httpStatusText(status),
                httpDate(c->hl), length);
    if (contentType != NULL) {
        n += sprintf(at + n, "Content-Type: %s\r\n", contentType);
    }
    for (unsigned i = 0; i < headerCount; i++) {
        n += sprintf(at + n, "%.*s: %.*s\r\n", (int)headers[i].nameLen,
                     headers[i].name, (int)headers[i].valueLen,
                     headers[i].value);
    }
    if (!keepAlive) {
        n += sprintf(at + n, "Connection: close\r\n");
    } else if (http10) {
        n += sprintf(at + n, "Connection: keep-alive\r\n");
    }
    memcpy(at + n, "\r\n", 2);
    c->outLen += (size_t)n + 2;
    return 0;
}

int
httpResponseAppend(HttpConn* c, const HttpRequest* req, bool keepAlive)
{
    const CorRequest* r = &req->r;

    if (appendHead(c, r->status, r->contentType, r->responseLen,
                   r->responseHeaders, r->responseHeaderCount, keepAlive,
                   req->head.versionMinor == 0) != 0) {
        return -1;
    }
    if (r->head || r->responseLen == 0) {
        return 0;
    }
    return appendBytes(c, r->responseBody, r->responseLen);
}

int
httpErrorAppend(HttpConn* c, int status)
{
    char body[96];
    int len = snprintf(body, sizeof(body), "%d %s\n", status,
                       httpStatusText(status));

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
