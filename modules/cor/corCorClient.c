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

/* A call in flight on a loop's peer; on its coroutine's stack. */
typedef struct PeerCall {
    CorList link;               /* the peer's calls */
    uint32_t id;
    CorCoPark park;
    bool done;
    int rc;
    CorCorMessage answer;
} PeerCall;

typedef enum {
    PEER_CONNECTING,
    PEER_READY,
    PEER_CLOSING,               /* the server said CLOSE: no new calls */
    PEER_DEAD
} PeerState;

/* One loop's connection to one server; the loop's. */
typedef struct Peer {
    CorList link;               /* the loop's peers */
    char host[256];
    unsigned port;
    bool tls;
    int connectTimeoutMs;
    PeerState state;
    bool connected;             /* the connect succeeded: queued frames
                                 * went (or go) out */
    bool served;                /* an answer came on it: a call that finds
                                 * it closed may go again */
    unsigned refs;              /* the loop's list, the connector, calls */
    CorConn* conn;
    CorKitConn k;               /* its bytes, on the loop */
    CorCorTables* sent;
    CorCorTables* received;
    CorList calls;              /* in flight */
    uint32_t nextId;
    unsigned silentTimeouts;    /* timed-out calls since the last frame */
    bool acked;                 /* the HELLO_ACK came */
    int failure;                /* why it died, -errno */
    char why[448];
} Peer;

static __thread CorList loopPeers;

static void peerFail(Peer* p, int rc, const char* why);

/* ---- Peers --------------------------------------------------------------- */

static void
peerRelease(Peer* p)
{
    if (--p->refs > 0) {
        return;
    }
    corCorTablesFree(p->sent);
    corCorTablesFree(p->received);
    corKitConnFree(&p->k);
    free(p);
}

/* Off the loop's list: no call finds it any more. */
static void
peerForget(Peer* p)
{
    if (corListLinked(&p->link)) {
        corListRemove(&p->link);
        peerRelease(p);
    }
}

static void
callFinish(PeerCall* call, int rc)
{
    call->done = true;
    call->rc = rc;
    if (call->park != 0) {
        corCoLoopWake(call->park);
    }
}

static void
callUnlink(Peer* p, PeerCall* call)
{
    if (corListLinked(&call->link)) {
        corListRemove(&call->link);
        peerRelease(p);
    }
}

/* The connection is gone: every call on it fails with rc. */
static void
peerFail(Peer* p, int rc, const char* why)
{
    if (p->state == PEER_DEAD) {
        return;
    }
    p->state = PEER_DEAD;
    p->failure = rc;
    corKitConnStop(&p->k);
    snprintf(p->why, sizeof(p->why), "cor://%s:%u: %s", p->host, p->port,
             why);
    corConnClose(p->conn);      /* NULL-safe: still connecting */
    p->conn = NULL;
    while (!corListEmpty(&p->calls)) {
        PeerCall* call = corContainerOf(corListFirst(&p->calls), PeerCall,
                                        link);

        corListRemove(&call->link);
        callFinish(call, rc);
        peerRelease(p);
    }
    peerForget(p);
}

/* Write what the socket takes (nothing before the connect); EPOLLOUT
 * brings the rest. */
static void
peerFlush(Peer* p)
{
    if (corKitConnFlush(&p->k) != 0) {
        peerFail(p, -ECONNRESET, "the connection failed while writing");
    }
}

/* Its CLOSE came: the last call answered closes it. */
static void
peerRetire(Peer* p)
{
    if (p->state == PEER_CLOSING && corListEmpty(&p->calls)
        && corBufPending(&p->k.out) == 0) {
        peerFail(p, -ECONNRESET, "closed after its CLOSE");
    }
}

/* ---- Frames from the server ---------------------------------------------- */

static PeerCall*
callFind(Peer* p, uint32_t id)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &p->calls) {
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
    int rc = corCorMessageDecode(p->received, frame, len, COR_COR_FRAME_MAX,
                                 &h, &m, why, sizeof(why));

    p->served = true;
    call = callFind(p, h.id);
    if (call != NULL) {
        callUnlink(p, call);
        call->answer = m;
        callFinish(call, rc == 0 ? 0 : -EPROTO);
    } else {
        corCorMessageClear(&m);
    }
    if (rc < 0) {
        peerFail(p, -EPROTO, why);
        return -1;
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
    if (p->acked && corCorHeadRead(frame, len, COR_COR_FRAME_MAX, &h, NULL,
                                   0) == COR_COR_HEAD_LEN
        && h.type == COR_COR_RESPONSE) {
        return responseTake(p, frame, len);
    }
    rc = corCorFrameDecode(p->received, frame, len, COR_COR_FRAME_MAX, &h,
                           &tree, why, sizeof(why));
    if (rc == 0 && (h.type == COR_COR_HELLO_ACK) == p->acked) {
        snprintf(why, sizeof(why), p->acked ? "a second HELLO_ACK"
                 : "a frame of type %d before the HELLO_ACK", (int)h.type);
        rc = -EPROTO;
    } else if (rc == 0 && h.type == COR_COR_HELLO_ACK) {
        rc = corCorHelloCheck(tree, why, sizeof(why));
        p->acked = rc == 0;
    } else if (rc == 0 && h.type == COR_COR_PING) {
        rc = corCorFrameEncode(p->sent, COR_COR_PONG, h.id, NULL, &p->k.out,
                               why, sizeof(why));
    } else if (rc == 0 && h.type == COR_COR_CLOSE) {
        p->state = p->state == PEER_READY ? PEER_CLOSING : p->state;
        rc = corCorFrameEncode(p->sent, COR_COR_CLOSE, 0, NULL, &p->k.out,
                               why, sizeof(why));
    } else if (rc == 0 && h.type == COR_COR_ERROR) {
        const char* message = json_string_value(json_object_get(tree,
                                                                "message"));

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
        peerFail(p, -EPROTO, why);
        return -1;
    }
    return 0;
}

/* Take every whole frame read (the kit's take). Returns 0, or -1 after
 * failing the peer. */
static int
framesTake(CorKitConn* k)
{
    Peer* p = corContainerOf(k, Peer, k);
    char why[COR_COR_WHY_MAX];
    const uint8_t* in = corBufHead(&k->in);
    size_t len = corBufPending(&k->in);
    size_t off = 0;

    while (len - off >= COR_COR_HEAD_LEN) {
        CorCorHead h;

        if (corCorHeadRead(in + off, len - off, COR_COR_FRAME_MAX, &h, why,
                           sizeof(why)) < 0) {
            peerFail(p, -EPROTO, why);
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

/* The server's end: its calls fail (those on a connection that had
 * served may go once more). */
static int
peerEnd(CorKitConn* k)
{
    peerFail(corContainerOf(k, Peer, k), -ECONNRESET,
             "the server closed the connection");
    return -1;
}

static void
peerBroken(CorKitConn* k, int rc, const char* why)
{
    peerFail(corContainerOf(k, Peer, k), rc, why);
}

/* The socket has something: read every frame, then write the PONGs and
 * CLOSEs it answered. */
static void
peerReady(CorKitConn* k)
{
    Peer* p = corContainerOf(k, Peer, k);

    p->refs++;      /* a frame may fail it: it stays readable here */
    if (corKitConnRead(k) == 0 && p->state != PEER_DEAD) {
        peerFlush(p);
        if (p->state != PEER_DEAD) {
            peerRetire(p);
        }
    }
    peerRelease(p);
}

static const CorKitOps peerOps = {
    .ready = peerReady,
    .take = framesTake,
    .end = peerEnd,
    .fail = peerBroken,
    .reserve = peerReserve,
};

/* ---- Connecting ---------------------------------------------------------- */

/* The peer's own coroutine: the connect (and TLS), then the loop reads. */
static void
peerConnect(void* arg)
{
    Peer* p = arg;
    CorConnTarget target = { .host = p->host, .port = p->port, .tls = p->tls,
                             .connectTimeoutMs = p->connectTimeoutMs,
                             .fresh = true };
    char why[160];
    int err = 0;
    CorConn* conn = corConnOpen(&target, &err, why, sizeof(why));

    if (p->state == PEER_DEAD) {
        corConnClose(conn);     /* NULL-safe: the loop stopped meanwhile */
    } else if (conn == NULL) {
        peerFail(p, err, why);
    } else {
        p->conn = conn;
        p->state = PEER_READY;
        p->connected = true;
        if (corKitConnStart(&p->k, corConnTransport(conn), NULL) != 0) {
            peerFail(p, -EIO, "the loop cannot watch the connection");
        } else {
            peerFlush(p);
        }
    }
    peerRelease(p);
}

/* The loop's peer for host:port, or a new one (connecting in a coroutine
 * of its own, its HELLO first in its output). NULL with rc and why. */
static Peer*
peerFor(const CorUrl* u, bool tls, int connectTimeoutMs, int* rc, char* why,
        size_t whyLen)
{
    Peer* p;
    json_t* hello;

    CorList* node;
    CorList* next;

    corListForEach(node, next, &loopPeers) {
        p = corContainerOf(node, Peer, link);
        if (p->port == u->port && p->tls == tls && strcmp(p->host, u->host)
            == 0 && (p->state == PEER_READY || p->state == PEER_CONNECTING)) {
            p->refs++;          /* the caller's */
            return p;
        }
    }
    p = calloc(1, sizeof(*p));
    if (p != NULL) {
        corKitConnInit(&p->k, corEvLoopCurrent(), &peerOps);
    }
    hello = corCorHelloTree();
    if (p == NULL || hello == NULL || (p->sent = corCorTablesNew()) == NULL
        || (p->received = corCorTablesNew()) == NULL
        || corCorFrameEncode(NULL, COR_COR_HELLO, 0, hello, &p->k.out, why,
                             whyLen) < 0) {
        json_decref(hello);
        if (p != NULL) {
            p->refs = 1;
            peerRelease(p);
        }
        *rc = -ENOMEM;
        snprintf(why, whyLen, "no memory for a connection");
        return NULL;
    }
    json_decref(hello);
    snprintf(p->host, sizeof(p->host), "%s", u->host);
    p->port = u->port;
    p->tls = tls;
    p->connectTimeoutMs = connectTimeoutMs;
    p->refs = 3;                /* the list, the connector, the caller */
    corListInsert(&loopPeers, &p->link);
    /* The connector runs at once, up to its first wait: a connect that
     * fails without waiting (a name known not to exist, no fd) has failed
     * the peer when the spawn returns. */
    *rc = corCoLoopSpawn(p->k.loop, peerConnect, p);
    if (*rc != 0) {
        snprintf(why, whyLen, "no coroutine to connect to cor://%s:%u",
                 p->host, p->port);
        p->refs--;
        peerFail(p, *rc, why);
    }
    if (p->state == PEER_DEAD) {
        *rc = p->failure;
        snprintf(why, whyLen, "%s", p->why);
        peerRelease(p);
        return NULL;
    }
    return p;
}

/* ---- One call on a loop -------------------------------------------------- */

/* A call timed out. A server that sent no frame at all across
 * SILENT_TIMEOUTS of them in a row may be gone without a reset (its host
 * off the network): the connection is failed, and the next call opens a
 * new one, rather than every call timing out until TCP gives up. */
static void
peerSilence(Peer* p)
{
    if (p->state != PEER_DEAD && ++p->silentTimeouts >= SILENT_TIMEOUTS) {
        peerFail(p, -ETIMEDOUT, "no frame from the server across "
                 "several timed-out calls");
    }
}

/* Wait for call's answer until deadlineMs (0: none). Returns its rc, or
 * -ETIMEDOUT / -ECANCELED (the call is then forgotten). May yield. */
static int
callWait(Peer* p, PeerCall* call, uint64_t deadlineMs)
{
    while (!call->done) {
        uint64_t now = corEvClockMs();
        int left = deadlineMs == 0 ? -1
                   : deadlineMs > now ? (int)(deadlineMs - now) : 0;
        int rc = left == 0 ? 0 : corCoLoopPark(&call->park, left);

        if (rc <= 0 && !call->done) {
            short revents;

            callUnlink(p, call);
            /* A park says 0 for its timeout and for a cancel alike; after
             * a cancel every wait fails at once, which tells them apart. */
            return rc < 0 || corRestWaitFd(-1, 0, 0, &revents) < 0
                   ? -ECANCELED : -ETIMEDOUT;
        }
    }
    return call->rc;
}

int
corCorCallOnLoop(const CorCorCall* c, CorCorMessage* answer,
                 CorCorOutcome* out, char* why, size_t whyLen)
{
    PeerCall call = { 0 };
    int rc;
    Peer* p = peerFor(c->url, c->tls, c->connectTimeoutMs, &rc, why, whyLen);
    bool served;

    if (p == NULL) {
        return rc;
    }
    served = p->served;
    out->reused = p->state != PEER_CONNECTING;
    call.id = ++p->nextId;
    rc = corCorMessageEncode(p->sent, COR_COR_REQUEST, call.id, c->request,
                             &p->k.out, why, whyLen);
    if (rc < 0) {
        peerRelease(p);
        return rc;
    }
    corListInsert(&p->calls, &call.link);
    p->refs++;                  /* the call's link */
    corKitConnFlushSoon(&p->k);
    rc = callWait(p, &call, c->deadlineMs);
    if (rc == -ETIMEDOUT) {
        peerSilence(p);
    }
    out->retry = rc == -ECONNRESET && served;
    out->sent = p->connected;
    if (rc < 0 && p->failure != 0 && rc == p->failure) {
        snprintf(why, whyLen, "%s", p->why);
    } else if (rc == -ETIMEDOUT || rc == -ECANCELED) {
        snprintf(why, whyLen, "cor://%s:%u: %s", p->host, p->port,
                 rc == -ETIMEDOUT ? "no answer in time" : "cancelled");
    }
    *answer = call.answer;
    if (p->state != PEER_DEAD) {
        peerRetire(p);
    }
    peerRelease(p);
    return rc;
}

void
corCorClientLoopExit(void)
{
    while (!corListEmpty(&loopPeers)) {
        peerFail(corContainerOf(corListFirst(&loopPeers), Peer, link),
                 -ECANCELED, "the loop stopped");
    }
}
