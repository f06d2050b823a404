/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A loop's connection to a server that its exchanges share (corKit.h,
 * CorKitPeer): what the HTTP/2 client and the cor:// client each kept by
 * hand, the same fields and the same life. A peer is found on its loop's
 * list (one for every client, each peer's ops telling whose it is) by
 * its server, connects in a coroutine of its own (an exchange's
 * cancel must not take the connection that others wait on with it),
 * counts its references (the list, the connector, each exchange), and
 * fails every exchange on it when it dies. The client keeps its framing:
 * what it sends before a flush, who waits on it, when it is idle.
 */
#include "corKit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static __thread CorList loopPeers;

void
corKitPeerInit(CorKitPeer* p, const CorKitPeerOps* ops, CorEvLoop* loop,
               const CorKitOps* kitOps, const char* host, unsigned port)
{
    p->ops = ops;
    corKitConnInit(&p->k, loop, kitOps);
    snprintf(p->host, sizeof(p->host), "%s", host);
    p->port = port;
    p->refs = 1;
    snprintf(p->name, sizeof(p->name), "%s:%u", p->host, p->port);
}

void
corKitPeerRelease(CorKitPeer* p)
{
    if (--p->refs > 0) {
        return;
    }
    corKitConnFree(&p->k);
    p->ops->free(p);
}

CorKitPeer*
corKitPeerFind(const CorKitPeerOps* ops, const char* host, unsigned port,
               bool tls, const CorTlsClient* named)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &loopPeers)
    {
        CorKitPeer* p = corContainerOf(node, CorKitPeer, link);

        if (p->ops == ops && p->port == port && p->tls == tls
            && p->named == named && strcmp(p->host, host) == 0
            && (p->state == COR_KIT_PEER_READY
                || p->state == COR_KIT_PEER_CONNECTING)) {
            corKitPeerHold(p);
            return p;
        }
    }
    return NULL;
}

CorConn*
corKitPeerOpen(CorKitPeer* p, int* rc, char* why, size_t whyLen)
{
    CorConnTarget target = { .host = p->host,
                             .port = p->port,
                             .tls = p->tls,
                             .connectTimeoutMs = p->connectTimeoutMs,
                             .tlsClient = p->tlsClient,
                             .fresh = true };
    CorConn* conn = corConnOpen(&target, rc, why, whyLen);
    const char* alpn;

    if (conn == NULL || !p->tls || p->alpn == NULL) {
        return conn;
    }
    alpn = corTransportTlsAlpn(corConnTransport(conn));
    if (alpn == NULL || strcmp(alpn, p->alpn) != 0) {
        snprintf(why, whyLen, "%s: the server did not choose %s (ALPN: %s)",
                 p->name, p->alpn, alpn != NULL ? alpn : "none");
        *rc = -EPROTO;
        corConnClose(conn);
        return NULL;
    }
    return conn;
}

/* The peer's own coroutine: the connect (and TLS), then the loop reads. */
static void
peerConnect(void* arg)
{
    CorKitPeer* p = arg;
    char why[600];
    int rc = 0;
    CorConn* conn = corKitPeerOpen(p, &rc, why, sizeof(why));

    if (p->state == COR_KIT_PEER_DEAD) {
        corConnClose(conn); /* NULL-safe: the loop stopped meanwhile */
    } else if (conn == NULL) {
        corKitPeerFail(p, rc, why);
    } else {
        p->conn = conn;
        p->connected = true;
        if (p->state == COR_KIT_PEER_CONNECTING) {
            p->state = COR_KIT_PEER_READY;
        }
        if (corKitConnStart(&p->k, corConnTransport(conn), NULL) != 0) {
            corKitPeerFail(p, -EIO, "the loop cannot watch the connection");
        } else {
            corKitPeerFlush(p);
        }
    }
    corKitPeerRelease(p);
}

int
corKitPeerStart(CorKitPeer* p, char* why, size_t whyLen)
{
    int rc;

    p->refs += 2; /* the list, the connector */
    corListInsert(&loopPeers, &p->link);
    /* The connector runs at once, up to its first wait: a connect that
     * fails without waiting (a name known not to exist, no fd) has failed
     * the peer when the spawn returns. */
    rc = corCoLoopSpawn(p->k.loop, peerConnect, p);
    if (rc != 0) {
        p->refs--;
        corKitPeerFail(p, rc, "no coroutine to connect");
    }
    if (p->state == COR_KIT_PEER_DEAD) {
        rc = p->failure;
        snprintf(why, whyLen, "%s", p->why);
        corKitPeerRelease(p);
        return rc;
    }
    return 0;
}

void
corKitPeerForget(CorKitPeer* p)
{
    if (corListLinked(&p->link)) {
        corListRemove(&p->link);
        corKitPeerRelease(p);
    }
}

void
corKitPeerFail(CorKitPeer* p, int rc, const char* why)
{
    if (p->state == COR_KIT_PEER_DEAD) {
        return;
    }
    p->state = COR_KIT_PEER_DEAD;
    p->failure = rc;
    snprintf(p->why, sizeof(p->why), "%s: %s", p->name, why);
    if (p->k.loop != NULL) {
        corKitConnStop(&p->k);
    }
    corConnClose(p->conn); /* NULL-safe: still connecting */
    p->conn = NULL;
    p->ops->failed(p);
    corKitPeerForget(p);
}

void
corKitPeerFlush(CorKitPeer* p)
{
    if (p->state != COR_KIT_PEER_DEAD
        && (p->ops->send == NULL || p->ops->send(p) == 0)
        && corKitConnFlush(&p->k) != 0) {
        corKitPeerFail(p, -ECONNRESET, "the connection failed while writing");
    }
}

void
corKitPeerRetire(CorKitPeer* p)
{
    if (p->state == COR_KIT_PEER_CLOSING && p->ops->idle(p)) {
        corKitPeerFail(p, -ECONNRESET, "closed after the server's drain");
    }
}

void
corKitPeersStop(const CorKitPeerOps* ops)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &loopPeers)
    {
        CorKitPeer* p = corContainerOf(node, CorKitPeer, link);

        if (p->ops == ops) {
            corKitPeerFail(p, -ECANCELED, "the loop stopped");
        }
    }
}

void
corKitPeerReady(CorKitConn* k)
{
    CorKitPeer* p = corContainerOf(k, CorKitPeer, k);

    corKitPeerHold(p); /* a frame may fail it: it stays readable here */
    if (corKitConnRead(k) == 0) {
        corKitPeerFlush(p);
        corKitPeerRetire(p);
    }
    corKitPeerRelease(p);
}

int
corKitPeerEnd(CorKitConn* k)
{
    corKitPeerFail(corContainerOf(k, CorKitPeer, k), -ECONNRESET,
                   "the server closed the connection");
    return -1;
}

void
corKitPeerBroken(CorKitConn* k, int rc, const char* why)
{
    corKitPeerFail(corContainerOf(k, CorKitPeer, k), rc, why);
}
