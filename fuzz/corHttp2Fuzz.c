/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the HTTP/2 glue (modules/http/corHttp2Conn.c and
 * corHttp2Stream.c, with the real nghttp2): the input is what a client
 * sends after the preface, frames in, requests out. Each request is
 * answered at once by a stand-in core (a body in memory, or streamed for
 * a path under /stream), so every path of the glue runs: headers into a
 * request, bodies, limits, answers through the data provider, resets,
 * GOAWAY, the floods; the connection then stops, which frees everything.
 * The sanitizers find the rest (a stream touched after its release, a
 * read past a header's bytes, a leak).
 *
 * Build: see `make fuzz` (clang -fsanitize=fuzzer,address,undefined, the
 * glue's two files, the parser, core/corBuf.c, -lnghttp2).
 */
#include "corHttp2Int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

Http2Conf corHttp2Conf = {
    .maxConcurrentStreams = 16,
    .initialWindowSize = 65535,
    .connectionWindowSize = 1 << 20,
    .resetsPerSecond = 50,
    .controlPerSecond = 50,
    .idlePerSecond = 50,
};

/* ---- The stand-in core --------------------------------------------------- */

const CorLimits*
corLimits(void)
{
    static const CorLimits limits = {
        .headerBytes = 2048,
        .headerCount = 16,
        .bodyBytes = 4096,
        .requestTimeoutMs = 1000,
        .keepaliveTimeoutMs = 1000,
        .sendTimeoutMs = 1000,
    };

    return &limits;
}

const CorLimits*
corLimitsOf(const CorRequest* r)
{
    (void)r;
    return corLimits();
}

const char*
corLimitsText(int status)
{
    return status == 413 || status == 431 || status == 408 ? "refused\n" : NULL;
}

/* Answer at once, as an inline handler does: the body back (streamed,
 * in two pieces, under /stream). */
void
corRequestServe(CorRequest* r, const CorProtocolOps* ops, void* data)
{
    static CorHeader extra = { "X-Case", 6, "Mixed", 5 };

    r->ops = ops;
    r->protocolData = data;
    r->status = r->bodyLen > 0 ? 200 : 204;
    r->contentType = "application/octet-stream";
    r->responseHeaders = &extra;
    r->responseHeaderCount = 1;
    if (r->pathLen >= 7 && memcmp(r->path, "/stream", 7) == 0) {
        r->status = 200;
        r->stream = (CorStream*)(void*)r; /* set: it is never read */
        ops->done(r);
        ops->streamData(r, r->body != NULL ? r->body : "x",
                        r->body != NULL ? r->bodyLen : 1);
        ops->streamData(r, "end\n", 4);
        ops->streamEnd(r);
        return;
    }
    r->responseBody = r->body;
    r->responseLen = r->bodyLen;
    ops->done(r);
}

void
corRequestSent(CorRequest* r)
{
    r->ops->release(r);
}

void
corRequestCancel(CorRequest* r)
{
    (void)r;
}

/* The stood-in routes stream no body: each comes whole, as it did before
 * handlers could take one as it comes. */

void
corResponseStreamDrained(CorRequest* r)
{
    (void)r;
}

void
corLog(CorLogLevel level, const char* fmt, ...)
{
    (void)level;
    (void)fmt;
}

void
corPeerAddress(const struct sockaddr_storage* peer, char* out, size_t cap)
{
    (void)peer;
    snprintf(out, cap, "127.0.0.1");
}

void
corPeerName(const struct sockaddr_storage* peer, char* out, size_t cap)
{
    (void)peer;
    snprintf(out, cap, "127.0.0.1:1");
}

const char*
corHttpDate(HttpLoop* hl)
{
    (void)hl;
    return "Wed, 02 Dec 2026 07:00:00 GMT";
}

void
corHttp2Count(Http2Abuse why)
{
    (void)why;
}

const char*
corHttp2AbuseText(Http2Abuse why)
{
    (void)why;
    return "abuse";
}

void
corHttp2CountConnection(void)
{
}

void
corHttp2CountStream(void)
{
}

/* ---- The stand-in kit: no socket, the clock stands still --------------- */

uint64_t
corEvNow(const CorEvLoop* loop)
{
    (void)loop;
    return 1000000;
}

uint64_t
corEvClockMs(void)
{
    return 1000000;
}

void
corKitConnInit(CorKitConn* k, CorEvLoop* loop, const CorKitOps* ops)
{
    memset(k, 0, sizeof(*k));
    k->loop = loop;
    k->ops = ops;
    corListInit(&k->link);
}

int
corKitConnStart(CorKitConn* k, CorTransport* t, CorKitSet* set)
{
    k->t = t;
    corListInsert(&set->conns, &k->link);
    return 0;
}

void
corKitConnStop(CorKitConn* k)
{
    if (corListLinked(&k->link)) {
        corListRemove(&k->link);
    }
}

void
corKitConnFree(CorKitConn* k)
{
    corBufFree(&k->in);
    corBufFree(&k->out);
}

/* What came is taken whole; the output goes nowhere. */
int
corKitConnRead(CorKitConn* k)
{
    return corBufPending(&k->in) > 0 ? k->ops->take(k) : 0;
}

int
corKitConnFlush(CorKitConn* k)
{
    corBufConsume(&k->out, corBufPending(&k->out));
    return 0;
}

void
corKitConnFlushSoon(CorKitConn* k)
{
    (void)k;
}

void
corKitConnKick(CorKitConn* k)
{
    (void)k;
}

void
corTransportTlsKeepBuffers(CorTransport* t, bool keep)
{
    (void)t;
    (void)keep;
}

void
corKitConnDeadline(CorKitConn* k, uint64_t since, uint64_t ms)
{
    (void)k;
    (void)since;
    (void)ms;
}

void
corKitConnDeadlineStop(CorKitConn* k)
{
    (void)k;
}

static void
transportClose(CorTransport* t)
{
    (void)t;
}

static const CorTransportOps transportOps = { .close = transportClose };

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    static HttpLoop hl;
    CorTransport t = { .ops = &transportOps, .fd = -1 };
    struct sockaddr_storage peer = { .ss_family = AF_INET };
    uint8_t* in = malloc(sizeof(preface) - 1 + size);

    if (in == NULL) {
        return 0;
    }
    memcpy(in, preface, sizeof(preface) - 1);
    memcpy(in + sizeof(preface) - 1, data, size);
    corHttp2ConnOpen(&hl, &t, &peer, false, NULL, in,
                     sizeof(preface) - 1 + size);
    free(in);
    /* Still open (no abuse ended it): the loop's stop closes it. */
    while (!corListEmpty(&hl.h2Conns.conns)) {
        corHttp2ConnStop(
            corContainerOf(corListFirst(&hl.h2Conns.conns), Http2Conn, k.link));
    }
    return 0;
}
