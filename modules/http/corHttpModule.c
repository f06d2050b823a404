/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP server as a module: it registers the listener protocol `http`
 * (`https` over TLS, ALPN h2 then http/1.1), keeps one HttpLoop per loop,
 * and follows the generation's lifecycle: start (accept), drain (stop
 * accepting, close after the next answer; HTTP/2: GOAWAY), stop (answer
 * what is left as failed, close). HTTP/2 connections (corHttp2Conn.c)
 * are the same protocol's, in the loop's h2Conns; HTTP/3 over QUIC
 * (corHttp3Endpoint.c) has UDP sockets of its own beside the listeners.
 */
#include "corHttpInt.h"
#include "corHttp2Int.h"

#include <stdlib.h>

static HttpLoop* httpLoops;
static unsigned httpLoopCount;

static HttpLoop*
corHttpLoopAt(unsigned index)
{
    return &httpLoops[index % httpLoopCount];
}

HttpLoop*
corHttpLoopOf(unsigned index)
{
    return corHttpLoopAt(index);
}

unsigned
corHttpLoopCount(void)
{
    return httpLoopCount;
}

/* An accepted socket, on the loop of loopIndex (a CorAcceptFn). */
static void
httpAccept(unsigned loopIndex, const CorListener* l, int fd,
           const struct sockaddr_storage* peer)
{
    corHttpServeOpen(corHttpLoopAt(loopIndex), l, fd, peer);
}

static int
httpStart(CorModule* m, CorEvLoop* loop, unsigned index,
          CorListener* const* listeners, unsigned count)
{
    (void)m;
    /* HTTP/3's sockets first: the Alt-Svc of the first answers says
     * them. */
    if (corHttp3Start(corHttpLoopAt(index), listeners, count) != 0) {
        return -1;
    }
    corHttpLoopAt(index)->accept = corAcceptStart(loop, index, listeners, count,
                                                  httpAccept);
    return corHttpLoopAt(index)->accept != NULL ? 0 : -1;
}

static void
httpDrain(CorModule* m, CorEvLoop* loop, unsigned index)
{
    HttpLoop* hl = corHttpLoopAt(index);
    CorList* node;
    CorList* next;

    (void)m;
    (void)loop;
    hl->draining = true;
    corAcceptStop(hl->accept);
    hl->accept = NULL;
    /* Every connection's next answer says "Connection: close"; one idle
     * between requests closes soon. */
    corListForEach(node, next, &hl->conns.conns)
    {
        corHttpConnDrain(corContainerOf(node, HttpConn, k.link));
    }
    corListForEach(node, next, &hl->h2Conns.conns)
    {
        corHttp2ConnDrain(corContainerOf(node, Http2Conn, k.link));
    }
    corHttp3Drain(hl);
}

static void
httpStop(CorModule* m, CorEvLoop* loop, unsigned index)
{
    HttpLoop* hl = corHttpLoopAt(index);

    (void)m;
    (void)loop;
    corAcceptStop(hl->accept);
    hl->accept = NULL;
    while (!corListEmpty(&hl->conns.conns)) {
        corHttpConnStop(
            corContainerOf(corListFirst(&hl->conns.conns), HttpConn, k.link));
    }
    while (!corListEmpty(&hl->h2Conns.conns)) {
        corHttp2ConnStop(corContainerOf(corListFirst(&hl->h2Conns.conns),
                                        Http2Conn, k.link));
    }
    corHttp3Stop(hl);
}

static unsigned
httpConnections(CorModule* m, unsigned index)
{
    (void)m;
    HttpLoop* hl = corHttpLoopAt(index);

    return atomic_load(&hl->conns.count) + atomic_load(&hl->h2Conns.count)
           + corHttp3Connections(hl);
}

static int
httpLoopInit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    HttpLoop* hl = corHttpLoopAt(index);

    (void)m;
    hl->loop = loop;
    hl->index = index;
    if (corHttpLoopBuffersInit(hl) != 0) {
        corLog(COR_LOG_ERROR, "http: no memory for loop %u", index);
        return -1;
    }
    return 0;
}

static void
httpLoopExit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    (void)loop;
    corHttp2StreamCacheEnd(corHttpLoopAt(index));
    corHttp3LoopFree(corHttpLoopAt(index));
    corHttpBlocksEnd(corHttpLoopAt(index));
    corHttpLoopBuffersFree(corHttpLoopAt(index));
}

static int
httpInit(CorModule* m, const CorConf* conf)
{
    if (corHttp2ConfRead(m, conf) != 0 || corHttp3ConfRead(m, conf) != 0) {
        return -1;
    }
    corHttp3SecretMake();
    httpLoopCount = corLoopCount();
    httpLoops = corCallocLines(httpLoopCount, sizeof(*httpLoops));
    if (httpLoops == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    return corProtocolAdd(
        m, &(CorProtocol){
               .name = "http",
               .alpn = "h2,http/1.1", /* h2 only where http2 is on */
               .tlsName = "https",
               .start = httpStart,
               .drain = httpDrain,
               .stop = httpStop,
               .connections = httpConnections,
           });
}

static void
httpExit(CorModule* m)
{
    (void)m;
    free(httpLoops);
    httpLoops = NULL;
}

COR_MODULE(http, .init = httpInit, .loopInit = httpLoopInit,
           .loopExit = httpLoopExit, .exit = httpExit);
