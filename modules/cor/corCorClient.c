/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cor:// client: one exchange (cor://host[:port]/path, cors:// over
 * TLS) as the http scheme makes one, with the same request and response
 * (corClient.h), so that every place that takes a URL (forwarding,
 * notifications, a handler's own calls, their start-now-collect-later
 * form) takes cor:// too.
 *
 * On a loop, every call of the loop to one peer shares one connection
 * (a peer), any number in flight on it, answered in the order the server
 * finishes them. The spec's "write turn" and "read turn" (one coroutine
 * at a time writes, the first to wait reads for all) are the loop's own
 * here: a call encodes its REQUEST into the peer's output at once (never
 * waiting: the tables follow the order of that buffer) and parks; the
 * loop writes the output as the socket takes it and reads every frame
 * that comes, decoding each into the call it belongs to and waking that
 * call. Nothing waits on anything but its own answer, and no coroutine's
 * cancel can take the connection down with it: the connect and the HELLO
 * run in a coroutine of their own, and calls queue behind the HELLO
 * meanwhile. A call that timed out or was cancelled is forgotten, and its
 * answer, which the tables need, is decoded when it comes and dropped.
 * The server's CLOSE (a drain) makes a peer take no new call; it closes
 * once its calls are answered, and the next call opens a new one.
 *
 * A streamed answer (our HELLO offers it; a server of before sends every
 * answer whole) keeps its call on the peer past its head: each DATA frame
 * is appended to the call's bytes and wakes its reader. A call that holds
 * COR_COR_CALL_HOLD_MAX unread stops the connection's reads until its
 * reader took them (the server then writes no more: TCP's window is the
 * protocol's flow control, for every call on the connection alike).
 *
 * Off the loops (a worker, blocking mode) a thread keeps a connection per
 * peer of its own and makes one exchange at a time on it, waiting with
 * poll() through the same connection layer.
 *
 * A call that failed because a connection that had served before was found
 * closed, before its answer came, is sent once more on a new connection; a
 * call that timed out never is.
 */
#include "corCorClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CLIENT_READ_ROOM 4096
/* Calls in a row that timed out with no frame from the server meanwhile,
 * after which its connection is given up (peerSilence). */
#define SILENT_TIMEOUTS 3

/* A call in flight on a loop's peer: the caller's (CorCorCallState). */
typedef CorCorCallState PeerCall;

/* One loop's connection to one server; the loop's. The server's CLOSE is
 * its drain. References: the loop's list, the connector, each call and
 * each call's link. */
typedef struct Peer {
    CorKitPeer base; /* its server, state, references, bytes */
    bool served;     /* an answer came on it: a call that finds
                      * it closed may go again */
    CorCorTables* sent;
    CorCorTables* received;
    CorList calls; /* in flight */
    uint32_t nextId;
    unsigned silentTimeouts; /* timed-out calls since the last frame */
    unsigned fullCalls;      /* calls past COR_COR_CALL_HOLD_MAX: the
                              * connection is not read */
    bool acked;              /* the HELLO_ACK came */
} Peer;

/* ---- Peers --------------------------------------------------------------- */

static void
peerFree(CorKitPeer* base)
{
    Peer* p = corContainerOf(base, Peer, base);

    corCorTablesFree(p->sent);
    corCorTablesFree(p->received);
    free(p);
}

/* The call's head came, or its answer ended (a streamed one's body), as
 * rc says. */
static void
callFinish(PeerCall* call, int rc)
{
    call->ended = call->done;
    call->done = true;
    call->rc = rc;
    if (call->park != 0) {
        corCoLoopWake(call->park);
    }
}

/* The call holds less than it may: the connection is read again when no
 * other call holds it back. */
static void
callRoom(Peer* p, PeerCall* call)
{
    if (call->full) {
        call->full = false;
        if (--p->fullCalls == 0) {
            corKitConnKick(&p->base.k);
        }
    }
}

static void
callUnlink(Peer* p, PeerCall* call)
{
    if (corListLinked(&call->link)) {
        corListRemove(&call->link);
        callRoom(p, call);
        corKitPeerRelease(&p->base);
    }
}

/* The connection is gone: every call on it fails with its failure. */
static void
peerFailed(CorKitPeer* base)
{
    Peer* p = corContainerOf(base, Peer, base);

    while (!corListEmpty(&p->calls)) {
        PeerCall* call = corContainerOf(corListFirst(&p->calls), PeerCall,
                                        link);

        corListRemove(&call->link);
        callFinish(call, base->failure);
        corKitPeerRelease(&p->base);
    }
}

/* Its CLOSE came: the last call answered, and the CLOSE it answered with
 * written, closes it. */
static bool
peerIdle(const CorKitPeer* base)
{
    return corListEmpty(&corContainerOf(base, const Peer, base)->calls)
           && corBufPending(&base->k.out) == 0;
}

/* ---- Frames from the server ---------------------------------------------- */

static PeerCall*
callFind(Peer* p, uint32_t id)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &p->calls)
    {
        PeerCall* call = corContainerOf(node, PeerCall, link);

        if (call->id == id) {
            return call;
        }
    }
    return NULL;
}

/* A RESPONSE after the HELLO_ACK, decoded straight into a message (the
 * tables need it even when nobody waits for it any more). Returns 0, or
 * -1 after failing the peer. */
static int
responseTake(Peer* p, const uint8_t* frame, size_t len)
{
    char why[COR_COR_WHY_MAX];
    CorCorHead h;
    CorCorMessage m;
    PeerCall* call;
    int rc = corCorMessageDecode(p->received, frame, len, COR_COR_FRAME_MAX, &h,
                                 &m, why, sizeof(why));

    p->served = true;
    call = callFind(p, h.id);
    if (call != NULL && call->done) {
        snprintf(why, sizeof(why), "a second RESPONSE to call %u", h.id);
        rc = -EPROTO;
    }
    if (call != NULL && rc == 0 && (h.flags & COR_COR_FLAG_MORE) != 0) {
        call->streamed = true; /* it stays, for its DATA frames */
        call->answer = m;
        callFinish(call, 0);
    } else if (call != NULL && !call->done) {
        callUnlink(p, call);
        call->answer = m;
        callFinish(call, rc == 0 ? 0 : -EPROTO);
    } else {
        corCorMessageClear(&m);
    }
    if (rc < 0) {
        corKitPeerFail(&p->base, -EPROTO, why);
        return -1;
    }
    return 0;
}

/* A DATA frame: the bytes of a streamed answer, appended to its call's
 * (dropped when nobody reads them any more); the last ends it, whole or
 * CUT. Returns 0, or -1 after failing the peer. */
static int
dataTake(Peer* p, const CorCorHead* h, const uint8_t* frame)
{
    PeerCall* call = callFind(p, h->id);

    if (call != NULL && !call->streamed) {
        corKitPeerFail(&p->base, -EPROTO, "a DATA frame before its RESPONSE");
        return -1;
    }
    if (call == NULL) {
        return 0;
    }
    if (corCorCallPut(call, h, frame) != 0) {
        corKitPeerFail(&p->base, -ENOMEM, "no memory for a body");
        return -1;
    }
    if ((h->flags & COR_COR_FLAG_MORE) == 0) {
        callUnlink(p, call);
        callFinish(call, (h->flags & COR_COR_FLAG_CUT) != 0 ? -ECONNRESET : 0);
        return 0;
    }
    if (!call->full && corBufPending(&call->data) >= COR_COR_CALL_HOLD_MAX) {
        call->full = true;
        p->fullCalls++;
    }
    if (call->park != 0) {
        corCoLoopWake(call->park);
    }
    return 0;
}

/* One whole frame. Returns 0, or -1 after failing the peer. */
static int
frameTake(Peer* p, const uint8_t* frame, size_t len)
{
    char why[COR_COR_WHY_MAX];
    CorCorHead h;
    json_t* tree = NULL;
    int rc;

    p->silentTimeouts = 0;
    if (p->acked
        && corCorHeadRead(frame, len, COR_COR_FRAME_MAX, &h, NULL, 0)
               == COR_COR_HEAD_LEN
        && (h.type == COR_COR_RESPONSE || h.type == COR_COR_DATA)) {
        return h.type == COR_COR_DATA ? dataTake(p, &h, frame)
                                      : responseTake(p, frame, len);
    }
    rc = corCorFrameDecode(p->received, frame, len, COR_COR_FRAME_MAX, &h,
                           &tree, why, sizeof(why));
    if (rc == 0 && (h.type == COR_COR_HELLO_ACK) == p->acked) {
        snprintf(why, sizeof(why),
                 p->acked ? "a second HELLO_ACK"
                          : "a frame of type %d before the HELLO_ACK",
                 (int)h.type);
        rc = -EPROTO;
    } else if (rc == 0 && h.type == COR_COR_HELLO_ACK) {
        rc = corCorHelloCheck(tree, why, sizeof(why));
        p->acked = rc == 0;
    } else if (rc == 0 && h.type == COR_COR_PING) {
        rc = corCorFrameEncode(p->sent, COR_COR_PONG, h.id, NULL,
                               &p->base.k.out, why, sizeof(why));
    } else if (rc == 0 && h.type == COR_COR_CLOSE) {
        if (p->base.state == COR_KIT_PEER_READY) {
            p->base.state = COR_KIT_PEER_CLOSING;
        }
        rc = corCorFrameEncode(p->sent, COR_COR_CLOSE, 0, NULL, &p->base.k.out,
                               why, sizeof(why));
    } else if (rc == 0 && h.type == COR_COR_ERROR) {
        const char* message = json_string_value(
            json_object_get(tree, "message"));

        snprintf(why, sizeof(why), "refused: %s",
                 message != NULL ? message : "(no message)");
        rc = -EPROTO;
    } else if (rc == 0 && h.type != COR_COR_PONG) {
        snprintf(why, sizeof(why), "a frame of type %d from a server",
                 (int)h.type);
        rc = -EPROTO;
    }
    json_decref(tree);
    if (rc < 0) {
        corKitPeerFail(&p->base, -EPROTO, why);
        return -1;
    }
    return 0;
}

/* Take every whole frame read (the kit's take). Returns 0, or -1 after
 * failing the peer. */
static int
framesTake(CorKitConn* k)
{
    Peer* p = corContainerOf(k, Peer, base.k);
    char why[COR_COR_WHY_MAX];
    const uint8_t* in = corBufHead(&k->in);
    size_t len = corBufPending(&k->in);
    size_t off = 0;

    while (len - off >= COR_COR_HEAD_LEN) {
        CorCorHead h;

        if (corCorHeadRead(in + off, len - off, COR_COR_FRAME_MAX, &h, why,
                           sizeof(why))
            < 0) {
            corKitPeerFail(&p->base, -EPROTO, why);
            return -1;
        }
        if (len - off < COR_COR_HEAD_LEN + h.length) {
            break;
        }
        if (frameTake(p, in + off, COR_COR_HEAD_LEN + h.length) != 0) {
            return -1;
        }
        off += COR_COR_HEAD_LEN + h.length;
    }
    corBufConsume(&k->in, off);
    return 0;
}

static int
peerReserve(CorKitConn* k)
{
    return corCorInputReserve(&k->in, COR_COR_FRAME_MAX, CLIENT_READ_ROOM);
}

/* Read on while no call holds too much of a streamed body unread. */
static bool
peerReadMay(CorKitConn* k)
{
    return corContainerOf(k, Peer, base.k)->fullCalls == 0;
}

/* The kit's: the server's end fails its calls (those on a connection that
 * had served may go once more); after each read the PONGs and CLOSEs it
 * answered are written. */
static const CorKitOps kitOps = {
    .ready = corKitPeerReady,
    .take = framesTake,
    .end = corKitPeerEnd,
    .fail = corKitPeerBroken,
    .reserve = peerReserve,
    .readMay = peerReadMay,
};

static const CorKitPeerOps peerOps = {
    .failed = peerFailed,
    .idle = peerIdle,
    .free = peerFree,
};

/* ---- Connecting ---------------------------------------------------------- */

/* A new peer for host:port, its HELLO first in its output. NULL without
 * memory. */
static Peer*
peerNew(const CorUrl* u, bool tls, int connectTimeoutMs, char* why,
        size_t whyLen)
{
    Peer* p = calloc(1, sizeof(*p));
    json_t* hello = corCorHelloTree(true);

    if (p != NULL) {
        corKitPeerInit(&p->base, &peerOps, corEvLoopCurrent(), &kitOps, u->host,
                       u->port);
    }
    if (p == NULL || hello == NULL || (p->sent = corCorTablesNew()) == NULL
        || (p->received = corCorTablesNew()) == NULL
        || corCorFrameEncode(NULL, COR_COR_HELLO, 0, hello, &p->base.k.out, why,
                             whyLen)
               < 0) {
        json_decref(hello);
        if (p != NULL) {
            corKitPeerRelease(&p->base);
        }
        snprintf(why, whyLen, "no memory for a connection");
        return NULL;
    }
    json_decref(hello);
    p->base.tls = tls;
    p->base.connectTimeoutMs = connectTimeoutMs;
    snprintf(p->base.name, sizeof(p->base.name), "cor://%s:%u", u->host,
             u->port);
    return p;
}

/* The loop's peer for host:port, or a new one (connecting in a coroutine
 * of its own). Returns it with a reference for the caller, or NULL with
 * rc and why. */
static Peer*
peerFor(const CorUrl* u, bool tls, int connectTimeoutMs, int* rc, char* why,
        size_t whyLen)
{
    CorKitPeer* found = corKitPeerFind(&peerOps, u->host, u->port, tls, NULL);
    Peer* p;

    if (found != NULL) {
        return corContainerOf(found, Peer, base);
    }
    p = peerNew(u, tls, connectTimeoutMs, why, whyLen);
    if (p == NULL) {
        *rc = -ENOMEM;
        return NULL;
    }
    *rc = corKitPeerStart(&p->base, why, whyLen);
    return *rc == 0 ? p : NULL;
}

/* ---- One call on a loop -------------------------------------------------- */

/* A call timed out. A server that sent no frame at all across
 * SILENT_TIMEOUTS of them in a row may be gone without a reset (its host
 * off the network): the connection is failed, and the next call opens a
 * new one, rather than every call timing out until TCP gives up. */
static void
peerSilence(Peer* p)
{
    if (p->base.state != COR_KIT_PEER_DEAD
        && ++p->silentTimeouts >= SILENT_TIMEOUTS) {
        corKitPeerFail(&p->base, -ETIMEDOUT,
                       "no frame from the server "
                       "across several timed-out calls");
    }
}

/* Wait for call's answer until deadlineMs (0: none). Returns its rc, or
 * -ETIMEDOUT / -ECANCELED (the call is then forgotten). May yield. */
static int
callWait(Peer* p, CorCorCallState* call, uint64_t deadlineMs)
{
    while (!call->done) {
        int rc = corCoLoopParkUntil(&call->park, deadlineMs);

        if (rc < 0 && !call->done) {
            callUnlink(p, call);
            return rc;
        }
    }
    /* A streamed head came whole: what rc says since is its body's end
     * (all of it may have come before this wait woke). */
    return call->streamed ? 0 : call->rc;
}

int
corCorCallOnLoop(const CorCorCall* c, CorCorCallState* call,
                 CorCorMessage* answer, CorCorOutcome* out, char* why,
                 size_t whyLen)
{
    int rc;
    Peer* p = peerFor(c->url, c->tls, c->connectTimeoutMs, &rc, why, whyLen);
    bool served;

    call->onLoop = true;
    if (p == NULL) {
        return rc;
    }
    served = p->served;
    out->reused = p->base.state != COR_KIT_PEER_CONNECTING;
    call->id = ++p->nextId;
    rc = corCorMessageEncode(p->sent, COR_COR_REQUEST, call->id, c->request,
                             &p->base.k.out, why, whyLen);
    if (rc < 0) {
        corKitPeerRelease(&p->base);
        return rc;
    }
    corListInsert(&p->calls, &call->link);
    corKitPeerHold(&p->base); /* the call's link */
    corKitConnFlushSoon(&p->base.k);
    rc = callWait(p, call, c->deadlineMs);
    if (rc == -ETIMEDOUT) {
        peerSilence(p);
    }
    out->retry = rc == -ECONNRESET && served;
    out->sent = p->base.connected;
    if (rc < 0 && p->base.failure != 0 && rc == p->base.failure) {
        snprintf(why, whyLen, "%s", p->base.why);
    } else if (rc == -ETIMEDOUT || rc == -ECANCELED) {
        snprintf(why, whyLen, "%s: %s", p->base.name,
                 rc == -ETIMEDOUT ? "no answer in time" : "cancelled");
    }
    *answer = call->answer;
    call->answer = (CorCorMessage){ 0 };
    if (rc == 0 && call->streamed) {
        call->peer = p; /* its reference, until corCorLoopEnd */
        return 0;
    }
    call->ended = true;
    corKitPeerRetire(&p->base);
    corKitPeerRelease(&p->base);
    return rc;
}

ssize_t
corCorLoopRead(CorCorCallState* call, void* buf, size_t len, int timeoutMs,
               char* why, size_t whyLen)
{
    Peer* p = call->peer;
    uint64_t deadlineMs = corCorReadDeadline(timeoutMs);
    size_t n;

    while (corBufPending(&call->data) == 0 && !call->ended) {
        int rc = corCoLoopParkUntil(&call->park, deadlineMs);

        if (rc < 0 && corBufPending(&call->data) == 0 && !call->ended) {
            /* A failure stays: its frames are dropped from here. */
            callUnlink(p, call);
            call->ended = true;
            call->rc = rc;
        }
    }
    n = corCorCallGive(call, buf, len);
    if (corBufPending(&call->data) < COR_COR_CALL_HOLD_MAX / 2) {
        callRoom(p, call);
    }
    if (n > 0 || call->rc == 0) {
        return (ssize_t)n;
    }
    if (call->rc == p->base.failure) {
        snprintf(why, whyLen, "%s", p->base.why); /* it names the peer */
    } else {
        snprintf(why, whyLen, "%s: %s", p->base.name,
                 call->rc == -ECONNRESET  ? "the answer was cut midway"
                 : call->rc == -ETIMEDOUT ? "no body in time"
                                          : strerror(-call->rc));
    }
    return call->rc;
}

void
corCorLoopEnd(CorCorCallState* call)
{
    Peer* p = call->peer;

    callUnlink(p, call);
    corBufFree(&call->data);
    corKitPeerRetire(&p->base);
    corKitPeerRelease(&p->base);
}

void
corCorClientLoopExit(void)
{
    corKitPeersStop(&peerOps);
}
