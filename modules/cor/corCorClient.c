/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cor:// client: one exchange (cor://host[:port]/path, cors:// over
 * TLS) as the HTTP client makes one, with the same request and response
 * (corHttpClient.h), so that every place that takes a URL (forwarding,
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
#include <sys/epoll.h>

#define CLIENT_READ_ROOM 4096
/* Calls in a row that timed out with no frame from the server meanwhile,
 * after which its connection is given up (peerSilence). */
#define SILENT_TIMEOUTS 3

/* A call in flight on a loop's peer; on its coroutine's stack. */
typedef struct PeerCall {
    struct PeerCall* next;
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
    struct Peer* next;          /* the loop's peers */
    CorEvLoop* loop;
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
    CorEvIo io;
    CorEvTimer flushTimer;      /* the output, at the next iteration */
    bool peerShut;              /* its FIN came: read to its end */
    CorCorTables* sent;
    CorCorTables* received;
    CorCorBuf out;
    size_t outSent;
    uint8_t* in;
    size_t inLen;
    size_t inCap;
    PeerCall* calls;
    uint32_t nextId;
    unsigned silentTimeouts;    /* timed-out calls since the last frame */
    bool acked;                 /* the HELLO_ACK came */
    int failure;                /* why it died, -errno */
    char why[448];
} Peer;

static __thread Peer* loopPeers;

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
    corCorBufFree(&p->out);
    free(p->in);
    free(p);
}

/* Off the loop's list: no call finds it any more. */
static void
peerForget(Peer* p)
{
    for (Peer** at = &loopPeers; *at != NULL; at = &(*at)->next) {
        if (*at == p) {
            *at = p->next;
            peerRelease(p);
            return;
        }
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
    for (PeerCall** at = &p->calls; *at != NULL; at = &(*at)->next) {
        if (*at == call) {
            *at = call->next;
            peerRelease(p);
            return;
        }
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
    corEvTimerStop(p->loop, &p->flushTimer);
    snprintf(p->why, sizeof(p->why), "cor://%s:%u: %s", p->host, p->port,
             why);
    if (p->conn != NULL) {
        corEvIoStop(p->loop, &p->io);
        corConnClose(p->conn);
        p->conn = NULL;
    }
    while (p->calls != NULL) {
        PeerCall* call = p->calls;

        p->calls = call->next;
        callFinish(call, rc);
        peerRelease(p);
    }
    peerForget(p);
}

/* Write what the socket takes; EPOLLOUT brings the rest. */
static void
peerFlush(Peer* p)
{
    CorTransport* t;

    if (p->state == PEER_CONNECTING || p->state == PEER_DEAD) {
        return;
    }
    t = corConnTransport(p->conn);
    while (p->outSent < p->out.len) {
        ssize_t n = t->ops->send(t, p->out.data + p->outSent,
                                 p->out.len - p->outSent);

        if (n > 0) {
            p->outSent += (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            return;
        } else if (!(n < 0 && errno == EINTR)) {
            peerFail(p, -ECONNRESET, "the connection failed while writing");
            return;
        }
    }
    p->out.len = p->outSent = 0;
}

/* The output at the loop's next iteration: the REQUESTs of every call of
 * this iteration (coroutines woken by the same events) go in one write. */
static void
peerFlushDue(CorEvTimer* timer)
{
    peerFlush(corContainerOf(timer, Peer, flushTimer));
}

static void
peerFlushSoon(Peer* p)
{
    if (!p->flushTimer.active) {
        corEvTimerStart(p->loop, &p->flushTimer, 0, peerFlushDue);
    }
}

/* Its CLOSE came: the last call answered closes it. */
static void
peerRetire(Peer* p)
{
    if (p->state == PEER_CLOSING && p->calls == NULL && p->outSent
        == p->out.len) {
        peerFail(p, -ECONNRESET, "closed after its CLOSE");
    }
}

/* ---- Frames from the server ---------------------------------------------- */

static PeerCall*
callFind(Peer* p, uint32_t id)
{
    for (PeerCall* call = p->calls; call != NULL; call = call->next) {
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
        rc = corCorFrameEncode(p->sent, COR_COR_PONG, h.id, NULL, &p->out,
                               why, sizeof(why));
    } else if (rc == 0 && h.type == COR_COR_CLOSE) {
        p->state = p->state == PEER_READY ? PEER_CLOSING : p->state;
        rc = corCorFrameEncode(p->sent, COR_COR_CLOSE, 0, NULL, &p->out,
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

/* Take every whole frame read. Returns 0, or -1 after failing the peer. */
static int
framesTake(Peer* p)
{
    char why[COR_COR_WHY_MAX];
    size_t off = 0;

    while (p->inLen - off >= COR_COR_HEAD_LEN) {
        CorCorHead h;

        if (corCorHeadRead(p->in + off, p->inLen - off, COR_COR_FRAME_MAX, &h,
                           why, sizeof(why)) < 0) {
            peerFail(p, -EPROTO, why);
            return -1;
        }
        if (p->inLen - off < COR_COR_HEAD_LEN + h.length) {
            break;
        }
        if (frameTake(p, p->in + off, COR_COR_HEAD_LEN + h.length) != 0) {
            return -1;
        }
        off += COR_COR_HEAD_LEN + h.length;
    }
    memmove(p->in, p->in + off, p->inLen - off);
    p->inLen -= off;
    return 0;
}

static void
peerRead(Peer* p)
{
    CorTransport* t = corConnTransport(p->conn);

    p->refs++;      /* a frame may fail it: it stays readable here */
    while (p->state != PEER_DEAD) {
        ssize_t n;

        if (corCorInputReserve(&p->in, p->inLen, &p->inCap,
                               COR_COR_FRAME_MAX, CLIENT_READ_ROOM) != 0) {
            peerFail(p, -ENOMEM, "no memory for a frame");
            break;
        }
        size_t room = p->inCap - p->inLen;

        n = t->ops->recv(t, p->in + p->inLen, room);
        if (n > 0) {
            p->inLen += (size_t)n;
            /* A short read drained the socket, unless the server shut its
             * side: its end is still to read, and no edge announces it. */
            if (framesTake(p) != 0 || ((size_t)n < room && !p->peerShut)) {
                break;
            }
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            peerFail(p, -ECONNRESET, n == 0 ? "the server closed the "
                     "connection" : "the connection failed while reading");
        } else if (errno == EAGAIN) {
            break;
        }
    }
    if (p->state != PEER_DEAD) {
        peerFlush(p);       /* the PONGs and CLOSEs it answered */
        peerRetire(p);
    }
    peerRelease(p);
}

static void
peerIo(CorEvIo* io, unsigned events)
{
    Peer* p = corContainerOf(io, Peer, io);

    if ((events & EPOLLOUT)
        && corTransportWantsWrite(corConnTransport(p->conn))) {
        events |= EPOLLIN;
    }
    if (events & (EPOLLRDHUP | EPOLLHUP)) {
        p->peerShut = true;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        peerRead(p);
        return;
    }
    peerFlush(p);
}

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
        if (corEvIoStart(p->loop, &p->io, corConnTransport(conn)->fd,
                         EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, peerIo)
            != 0) {
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

    for (p = loopPeers; p != NULL; p = p->next) {
        if (p->port == u->port && p->tls == tls && strcmp(p->host, u->host)
            == 0 && (p->state == PEER_READY || p->state == PEER_CONNECTING)) {
            p->refs++;          /* the caller's */
            return p;
        }
    }
    p = calloc(1, sizeof(*p));
    hello = corCorHelloTree();
    if (p == NULL || hello == NULL || (p->sent = corCorTablesNew()) == NULL
        || (p->received = corCorTablesNew()) == NULL
        || corCorFrameEncode(NULL, COR_COR_HELLO, 0, hello, &p->out, why,
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
    p->loop = corEvLoopCurrent();
    p->refs = 3;                /* the list, the connector, the caller */
    p->next = loopPeers;
    loopPeers = p;
    /* The connector runs at once, up to its first wait: a connect that
     * fails without waiting (a name known not to exist, no fd) has failed
     * the peer when the spawn returns. */
    *rc = corCoLoopSpawn(p->loop, peerConnect, p);
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
                             &p->out, why, whyLen);
    if (rc < 0) {
        peerRelease(p);
        return rc;
    }
    call.next = p->calls;
    p->calls = &call;
    p->refs++;                  /* the call's link */
    peerFlushSoon(p);
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
    while (loopPeers != NULL) {
        peerFail(loopPeers, -ECANCELED, "the loop stopped");
    }
}
