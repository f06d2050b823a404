/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for HTTP/3's datagram path (modules/http/corHttp3*.c,
 * with the real ngtcp2, nghttp3 and GnuTLS): the input is one UDP
 * datagram from a client, read by a loop's endpoint as a real socket
 * gives it. What names no connection is parsed and answered (Version
 * Negotiation, Retry tokens, stateless resets, a hand-off to the loop an
 * ID names), an Initial opens a connection (its GnuTLS session, its IDs
 * in the table) that the packet then feeds; each input's connections are
 * then closed, which frees everything. The sanitizers find the rest.
 *
 * Build: see `make fuzz` (clang -fsanitize=fuzzer,address,undefined, the
 * HTTP/3 files, the parser for :path, -lngtcp2 -lnghttp3 -lgnutls).
 */
#include "corHttp3Int.h"
#include "corHttp2Int.h" /* max_concurrent_streams, h3's too */

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* A self-signed P-256 certificate and its key, for the handshakes. */
static const char certPem[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBdTCCARugAwIBAgIUbuZ57Wq/F2QG1IsOXU6GEiDCqoAwCgYIKoZIzj0EAwIw\n"
    "DzENMAsGA1UEAwwEZnV6ejAgFw0yNjEyMDYxMTMzNDFaGA8yMTI2MTExMjExMzM0\n"
    "MVowDzENMAsGA1UEAwwEZnV6ejBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABABe\n"
    "eZ+wVQP20hW1ja9CTvQ/+xlSXJYWroz+PFdd01QC4MMrzaeCVB8bGkue0TTwKkxu\n"
    "y2Jtd140RooYSsydQESjUzBRMB0GA1UdDgQWBBRbf7j5OHDvPiv313MjQ1m4ExOS\n"
    "fjAfBgNVHSMEGDAWgBRbf7j5OHDvPiv313MjQ1m4ExOSfjAPBgNVHRMBAf8EBTAD\n"
    "AQH/MAoGCCqGSM49BAMCA0gAMEUCIBKhGcpsS0U0zfVHeuWl7kstPIHXAUNxEJtL\n"
    "FTibyd0VAiEAm48N9NEIdNqAfY3Q9Qc54PkQhZiuf+O6vqolS/10tUg=\n"
    "-----END CERTIFICATE-----\n";
static const char keyPem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg4xeGOJpj3gQDpv2v\n"
    "smr83iIGnL0h646dEYx74y9c/L6hRANCAAQAXnmfsFUD9tIVtY2vQk70P/sZUlyW\n"
    "Fq6M/jxXXdNUAuDDK82nglQfGxpLntE08CpMbstibXdeNEaKGErMnUBE\n"
    "-----END PRIVATE KEY-----\n";

Http2Conf corHttp2Conf = { .maxConcurrentStreams = 16,
                           .resetsPerSecond = 200,
                           .idlePerSecond = 1000 };
/* Set for each input: a Retry always (an odd size) or never. */
Http3Conf corHttp3Conf;

static HttpLoop loops[2];
static int tcpFd = -1;
static CorEvIo* endpointIo;

/* ---- The stand-in core and loop ------------------------------------------ */

const CorLimits*
corLimits(void)
{
    static const CorLimits limits = {
        .headerBytes = 2048,
        .headerCount = 16,
        .bodyBytes = 4096,
        .bodyBytesMost = 4096,
        .keepaliveTimeoutMs = 1000,
    };

    return &limits;
}

const char*
corLimitsText(int status)
{
    return status == 413 || status == 431 ? "a limit" : NULL;
}

/* Answered at once, in memory; sent at the stream's end. */
void
corRequestServe(CorRequest* r, const CorProtocolOps* ops, void* data)
{
    (void)data;
    r->ops = ops;
    r->status = 200;
    r->responseBody = "ok\n";
    r->responseLen = 3;
    r->responded = true;
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
    r->cut = true;
}

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
corPeerName(const struct sockaddr_storage* peer, char* out, size_t size)
{
    (void)peer;
    snprintf(out, size, "127.0.0.1:1");
}

const char*
corHttpDate(HttpLoop* hl)
{
    (void)hl;
    return "Sun, 06 Dec 2026 12:00:00 GMT";
}

const char*
corHttpStatusText(int status)
{
    (void)status;
    return "Status";
}

HttpLoop*
corHttpLoopOf(unsigned index)
{
    return &loops[index % 2];
}

unsigned
corHttpLoopCount(void)
{
    return 2;
}

int
corListenerFd(const CorListener* l, unsigned loopIndex)
{
    (void)l;
    (void)loopIndex;
    return tcpFd;
}

bool
corListenerHttp3(const CorListener* l)
{
    (void)l;
    return true;
}

unsigned
corListenerCertCount(const CorListener* l)
{
    (void)l;
    return 1;
}

unsigned
corListenerCertPick(const CorListener* l, const char* host)
{
    (void)l;
    (void)host;
    return 0;
}

uint64_t
corListenerCertSerial(const CorListener* l, unsigned index)
{
    (void)l;
    (void)index;
    return 0;
}

int
corListenerCertPem(const CorListener* l, unsigned index, char** chainP,
                   char** keyP, uint64_t* serialP)
{
    (void)l;
    (void)index;
    *chainP = strdup(certPem);
    *keyP = strdup(keyPem);
    *serialP = 0;
    return 0;
}

void
corListenerCertPemFree(char* chain, char* key)
{
    free(chain);
    free(key);
}

int
corListenerCertStaple(const CorListener* l, unsigned index, uint64_t serial,
                      void* (*alloc)(size_t), unsigned char** derP)
{
    (void)l;
    (void)index;
    (void)serial;
    (void)alloc;
    *derP = NULL;
    return -1;
}

unsigned
corListenerTicketLifetimeS(const CorListener* l)
{
    (void)l;
    return 0;
}

const char*
corListenerAddress(const CorListener* l)
{
    (void)l;
    return "127.0.0.1";
}

int
corEvIoStart(CorEvLoop* loop, CorEvIo* io, int fd, unsigned events,
             CorEvIoFn fn)
{
    (void)loop;
    (void)events;
    io->fd = fd;
    io->fn = fn;
    endpointIo = io;
    return 0;
}

void
corEvIoStop(CorEvLoop* loop, CorEvIo* io)
{
    (void)loop;
    (void)io;
}

/* The clock stands still: no timer is due within an input. */
uint64_t
corEvNow(const CorEvLoop* loop)
{
    (void)loop;
    return 1000000;
}

void
corEvTimerStart(CorEvLoop* loop, CorEvTimer* timer, uint64_t timeoutMs,
                CorEvTimerFn fn)
{
    (void)loop;
    (void)timeoutMs;
    timer->fn = fn;
    timer->active = true;
}

void
corEvTimerStop(CorEvLoop* loop, CorEvTimer* timer)
{
    (void)loop;
    timer->active = false;
}

/* Run before the input's end: what a turn queued goes out. */
static CorEvSoon* soonDue[64];
static unsigned soonCount;

void
corEvSoonStart(CorEvLoop* loop, CorEvSoon* soon, CorEvSoonFn fn)
{
    (void)loop;
    soon->fn = fn;
    if (!corListLinked(&soon->link) && soonCount < 64) {
        soon->link.next = soon->link.prev = &soon->link;
        soonDue[soonCount++] = soon;
    }
}

void
corEvSoonStop(CorEvSoon* soon)
{
    for (unsigned i = 0; i < soonCount; i++) {
        if (soonDue[i] == soon) {
            soonDue[i] = soonDue[--soonCount];
            soon->link = (CorList){ 0 };
            return;
        }
    }
}

/* Another loop's task runs now: the hand-off's copy is read and freed. */
void
corEvLoopPost(CorEvLoop* loop, CorEvTask* task, CorEvTaskFn fn)
{
    (void)loop;
    fn(task);
}

void
corHttp3Count(Http3CountKind kind)
{
    (void)kind;
}

void
corHttp3CountAbuse(Http3Abuse why)
{
    (void)why;
}

const char*
corHttp3AbuseText(Http3Abuse why)
{
    (void)why;
    return "abuse";
}

uint64_t
corEvClockNs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- The input ------------------------------------------------------------
 */

/* Once: the endpoint of loop 0 on a loopback port, and the client's
 * socket connected to it. */
static int
endpointMake(void)
{
    static CorListener* listener = (CorListener*)1; /* never read */
    struct sockaddr_in at = { .sin_family = AF_INET };
    socklen_t atLen = sizeof(at);
    int client;

    inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
    tcpFd = socket(AF_INET, SOCK_STREAM, 0);
    client = socket(AF_INET, SOCK_DGRAM, 0);
    if (tcpFd < 0 || client < 0
        || bind(tcpFd, (struct sockaddr*)&at, sizeof(at)) != 0
        || getsockname(tcpFd, (struct sockaddr*)&at, &atLen) != 0) {
        abort();
    }
    corHttp3SecretMake();
    loops[1].index = 1;
    if (corHttp3Start(&loops[0], &listener, 1) != 0
        || connect(client, (struct sockaddr*)&at, sizeof(at)) != 0) {
        abort();
    }
    return client;
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static int client = -1;
    uint8_t drain[65536];
    Http3Loop* h;

    if (client < 0) {
        client = endpointMake();
    }
    h = loops[0].h3;
    corHttp3Conf.retryAbove = size % 2 == 1 ? 0 : 128;
    if (size == 0 || send(client, data, size, 0) < 0) {
        return 0;
    }
    endpointIo->fn(endpointIo, 0);
    while (soonCount > 0) {
        CorEvSoon* soon = soonDue[--soonCount];

        soon->link = (CorList){ 0 };
        soon->fn(soon);
    }
    while (!corListEmpty(&h->conns)) {
        corHttp3ConnStop(
            corContainerOf(corListFirst(&h->conns), Http3Conn, link));
    }
    while (recv(client, drain, sizeof(drain), MSG_DONTWAIT) > 0) {
    }
    return 0;
}
