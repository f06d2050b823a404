/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A cor:// connection on its loop (docs/cor-protocol.md): the HELLO, then
 * every frame read as it comes, each REQUEST decoded at once and handed to
 * the core like any request (inline, a coroutine or a worker: the same
 * routes, hooks and handlers as HTTP), each RESPONSE encoded and queued the
 * moment its handler is done, so answers go out in the order they finish.
 *
 * The tables follow the stream: frames are decoded in the order they
 * arrive and encoded in the order they are queued, both on the loop, so a
 * response finished on a worker is encoded only once it is back here.
 *
 * The bytes are the connection kit's (corKit.h: armed once,
 * edge-triggered, through the listener's transport, plain or TLS); this
 * file is the framing and the policy. The kit's input buffer grows to the
 * frame being read (at most max_frame beside its header); its output
 * buffer holds the queued frames.
 *
 * Limits: max_frame (a longer frame closes the connection), max_in_flight
 * (a REQUEST past it is answered 503 at once, not queued: a peer must not
 * pile up work without end), max_in_flight_bytes (past what the requests
 * in flight hold, the connection is not read until their handlers are
 * done: a peer that floods large requests holds bounded memory), the
 * limits of every request (the core's: corRequestServe answers one past
 * them 414, 431 or 413 on its own stream; a REQUEST longer than any within
 * them is refused from its head as it comes, its body dropped unread:
 * corCorServerCut.c), the HELLO within hello_timeout, output that
 * makes no progress within limits.send_timeout, and idle_timeout for a
 * connection with nothing due (PING keeps one alive). A frame that does
 * not decode closes its connection and fails only what was on it.
 *
 * Ending. A drain (reload, graceful stop) sends CLOSE: no new work here.
 * The peer answers CLOSE once it has stopped sending requests, and the
 * connection closes when that came and every request is answered: a
 * request already on the wire when the drain began is served, never
 * dropped. A stop answers what is still with its handler 503 and closes.
 */
#include "corCorServerInt.h"
#include "corCorClientInt.h"
#include "corCorInt.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

/* The room a read asks for beyond what the frame being read needs. */
#define READ_ROOM 4096
/* And while the rest of a REQUEST cut short is dropped. */
#define SKIP_ROOM (64 * 1024)
/* The most a first frame (the HELLO) may hold: nothing is read into a
 * large buffer for a peer that has not said who it is. */
#define HELLO_FRAME_MAX 4096
/* Past this much unsent output, nothing more is read from the peer (and
 * so no more of its requests are served) until it reads: a peer that
 * sends requests for large answers and reads none cannot make the server
 * queue without end. */
#define OUT_HIGH_WATER ((size_t)1 << 20)
/* An output buffer this large, once empty, goes back to malloc. */
#define OUT_KEEP (64 * 1024)

static CorServerLoop* serverLoops;
static unsigned serverLoopCount;

static void connClose(CorServerConn* c);

/* Whether more may be read from the peer, beside the kit's high-water
 * mark on its unread answers: its requests in flight hold less than
 * max_in_flight_bytes (a request larger than that alone is taken when
 * nothing else is held, so it is served, alone). */
static bool
readMay(CorKitConn* k)
{
    return corContainerOf(k, CorServerConn, k)->heldBytes
           < corCorServerConf.maxHeldBytes;
}

/* ---- Output -------------------------------------------------------------- */

static bool
outputPending(const CorServerConn* c)
{
    return corBufPending(&c->k.out) > 0;
}

/* Queue one frame, encoded now with the tables of what we sent. Returns 0,
 * or -errno (nothing was queued, the tables did not move). */
static int
frameQueue(CorServerConn* c, CorCorType type, uint32_t id, const json_t* tree)
{
    char why[COR_COR_WHY_MAX];
    int rc = corCorFrameEncode(c->sent, type, id, tree, &c->k.out, why,
                               sizeof(why));

    if (rc < 0) {
        corLog(COR_LOG_ERROR, "cor: a frame to %s not encoded: %s", c->peerName,
               why);
        return rc;
    }
    return 0;
}

/* A protocol failure: say why in an ERROR frame (best effort), close. */
static void
connRefuse(CorServerConn* c, const char* why)
{
    json_t* tree = json_pack("{s:s}", "message", why);

    corLog(COR_LOG_WARN, "cor: %s: %s; closing the connection", c->peerName,
           why);
    if (tree != NULL && frameQueue(c, COR_COR_ERROR, 0, tree) == 0) {
        corKitConnFlush(&c->k);
    }
    json_decref(tree);
    connClose(c);
}

/* ---- The timer ----------------------------------------------------------- */

static void
onTimer(CorKitConn* k)
{
    CorServerConn* c = corContainerOf(k, CorServerConn, k);

    if (c->greeted && !outputPending(c) && corBufPending(&c->k.in) > 0) {
        /* A request too slow to come, HTTP's 408: its stream is not
         * known, so the connection ends. */
        corLimitsRefused("cor", c->peerName,
                         "a frame that did not come "
                         "whole",
                         408);
    }
    corLog(COR_LOG_DEBUG, "cor: %s: %s", c->peerName,
           !c->greeted                   ? "no HELLO in time"
           : outputPending(c)            ? "the peer reads nothing"
           : corBufPending(&c->k.in) > 0 ? "a frame did not come whole in "
                                           "time"
                                         : "idle");
    connClose(c);
}

/* Arm the one deadline that applies now: the HELLO's, the output's, a
 * frame that came in part (whole within limits.request_timeout of its
 * first byte, however slowly its bytes trickle), or the idle one (none
 * while requests are with their handlers: those have deadlines of their
 * own). */
static void
timerUpdate(CorServerConn* c)
{
    CorKitConn* k = &c->k;

    if (!c->greeted) {
        return; /* armed once, at the open */
    }
    if (outputPending(c) && k->outStalledMs != 0) {
        corKitConnDeadline(k, k->outStalledMs, corLimits()->sendTimeoutMs);
    } else if ((corBufPending(&k->in) > 0 || c->skipLeft > 0)
               && !k->readPaused) {
        /* (A frame held back by its requests in flight waits for them,
         * which have deadlines of their own.) */
        corKitConnDeadline(k, c->frameStartMs, corLimits()->requestTimeoutMs);
    } else if (c->inFlight == 0) {
        corKitConnDeadline(k, corEvNow(k->loop),
                           corCorServerConf.idleTimeoutMs);
    } else {
        corKitConnDeadlineStop(k);
    }
}

/* Close when nothing more can come and nothing is due. */
static bool
connDoneWith(CorServerConn* c)
{
    if (c->peerDone && c->inFlight == 0 && !outputPending(c)) {
        connClose(c);
        return true;
    }
    return false;
}

/* The output went on its own (EPOLLOUT, or the flush of the loop's next
 * iteration, which gathers every answer that finishes in this one:
 * coroutines woken by the same events, workers' answers posted back
 * together, which is what a multiplexed connection saves over one answer
 * a write). */
static void
wrote(CorKitConn* k)
{
    CorServerConn* c = corContainerOf(k, CorServerConn, k);

    if (c->streaming > 0) {
        corCorServerStreamsDrained(c);
    }
    if (!connDoneWith(c)) {
        timerUpdate(c);
    }
}

/* ---- Frames -------------------------------------------------------------- */

/* The first frame: the peer's HELLO, answered with ours. */
static int
helloTake(CorServerConn* c, const CorCorHead* h, const uint8_t* frame,
          char* why, size_t whyLen)
{
    json_t* tree = NULL;
    json_t* ours;
    CorCorHead decoded;
    int rc;

    if (h->type != COR_COR_HELLO) {
        snprintf(why, whyLen, "the first frame is not a HELLO (type %d)",
                 (int)h->type);
        return -EPROTO;
    }
    rc = corCorFrameDecode(NULL, frame, COR_COR_HEAD_LEN + h->length,
                           corCorServerConf.maxFrame, &decoded, &tree, why,
                           whyLen);
    if (rc == 0) {
        rc = corCorHelloCheck(tree, why, whyLen);
    }
    c->streams = rc == 0 && corCorHelloStream(tree);
    json_decref(tree);
    if (rc != 0) {
        return rc;
    }
    c->received = corCorTablesNew();
    c->sent = corCorTablesNew();
    ours = corCorHelloTree(c->streams);
    rc = c->received == NULL || c->sent == NULL || ours == NULL
             ? -ENOMEM
             : frameQueue(c, COR_COR_HELLO_ACK, 0, ours);
    json_decref(ours);
    if (rc != 0) {
        snprintf(why, whyLen, "no memory for the handshake");
        return rc;
    }
    c->greeted = true;
    if (c->sl->draining) {
        corCorServerConnDrain(c); /* served, but nothing new after */
    }
    return 0;
}

/* A REQUEST: decoded now (the tables need it) straight into a message,
 * then served. */
static int
requestTake(CorServerConn* c, const CorCorHead* h, const uint8_t* frame,
            char* why, size_t whyLen)
{
    CorCorMessage m;
    CorCorHead decoded;
    int rc = corCorMessageDecode(c->received, frame,
                                 COR_COR_HEAD_LEN + h->length,
                                 corCorServerConf.maxFrame, &decoded, &m, why,
                                 whyLen);

    if (rc != 0) {
        return rc;
    }
    if (c->peerDone) {
        corCorMessageClear(&m);
        snprintf(why, whyLen, "a REQUEST after its CLOSE");
        return -EPROTO;
    }
    if (c->inFlight >= corCorServerConf.maxInFlight) {
        corCorMessageClear(&m);
        return corCorServerAnswerBare(c, h->id, 503,
                                      "too many requests in "
                                      "flight on this connection\n");
    }
    return corCorServerRequestServe(c, h->id, &m);
}

/* One whole frame after the HELLO. Returns 0, or -errno with why (the
 * connection closes). */
static int
frameTake(CorServerConn* c, const CorCorHead* h, const uint8_t* frame,
          char* why, size_t whyLen)
{
    json_t* tree = NULL;
    CorCorHead decoded;
    int rc;

    if (h->type == COR_COR_REQUEST) {
        return requestTake(c, h, frame, why, whyLen);
    }
    rc = corCorFrameDecode(c->received, frame, COR_COR_HEAD_LEN + h->length,
                           corCorServerConf.maxFrame, &decoded, &tree, why,
                           whyLen);
    if (rc != 0) {
        return rc;
    }
    switch (h->type) {
    case COR_COR_PING:
        rc = frameQueue(c, COR_COR_PONG, h->id, NULL);
        break;
    case COR_COR_PONG:
        break;
    case COR_COR_CLOSE:
        c->peerDone = true;
        if (!c->closeSent && frameQueue(c, COR_COR_CLOSE, 0, NULL) == 0) {
            c->closeSent = true;
        }
        break;
    default:
        snprintf(why, whyLen, "a frame of type %d from a client", (int)h->type);
        rc = -EPROTO;
        break;
    }
    json_decref(tree);
    return rc;
}

/* The largest frame the peer may send now: small until its HELLO. */
static uint32_t
frameMax(const CorServerConn* c)
{
    return c->greeted ? corCorServerConf.maxFrame : HELLO_FRAME_MAX;
}

/* Take every whole frame that came (the kit's take). Returns 0, or -1
 * after closing. */
static int
framesTake(CorKitConn* k)
{
    CorServerConn* c = corContainerOf(k, CorServerConn, k);
    const uint8_t* in = corBufHead(&k->in);
    size_t len = corBufPending(&k->in);
    size_t off = 0;
    char why[COR_COR_WHY_MAX] = "";
    int rc = 0;

    if (c->skipLeft > 0) {
        off = len < c->skipLeft ? len : (size_t)c->skipLeft;
        c->skipLeft -= off;
    }
    while (rc == 0 && len - off >= COR_COR_HEAD_LEN
           && c->heldBytes < corCorServerConf.maxHeldBytes) {
        CorCorHead h;

        rc = corCorHeadRead(in + off, len - off, frameMax(c), &h, why,
                            sizeof(why));
        if (rc < 0) {
            break;
        }
        rc = c->greeted ? corCorServerRequestCut(c, &h, in + off, len - off,
                                                 why, sizeof(why))
                        : 0;
        if (rc > 0) {
            /* Its rest is dropped as it comes, within request_timeout. */
            off += (size_t)rc;
            c->frameStartMs = corEvNow(c->sl->loop);
            rc = 0;
            continue;
        }
        if (rc == -EAGAIN) {
            rc = 0; /* its head is not all there yet */
            break;
        }
        if (rc < 0 || len - off < COR_COR_HEAD_LEN + h.length) {
            break;
        }
        rc = c->greeted ? frameTake(c, &h, in + off, why, sizeof(why))
                        : helloTake(c, &h, in + off, why, sizeof(why));
        off += COR_COR_HEAD_LEN + h.length;
    }
    if (rc < 0) {
        connRefuse(c, why);
        return -1;
    }
    if ((off > 0 || len == 0) && c->skipLeft == 0) {
        c->frameStartMs = corEvNow(c->sl->loop); /* the next frame's */
    }
    corBufConsume(&k->in, off);
    return 0;
}

static int
inputReserve(CorKitConn* k)
{
    CorServerConn* c = corContainerOf(k, CorServerConn, k);

    return corCorInputReserve(&k->in, frameMax(c),
                              c->skipLeft > 0 ? SKIP_ROOM : READ_ROOM);
}

/* Its end: nothing more comes (it closes once everything is answered). */
static int
peerEnd(CorKitConn* k)
{
    corContainerOf(k, CorServerConn, k)->peerDone = true;
    return 0;
}

static void
connBroken(CorKitConn* k, int rc, const char* why)
{
    CorServerConn* c = corContainerOf(k, CorServerConn, k);

    if (rc == -ENOMEM) {
        connRefuse(c, why);
    } else {
        connClose(c);
    }
}

/* Read, serve what came, write what is due. Frames are taken under the
 * kit's guard: an inline handler's answer only queues, and is written
 * with the rest. */
static void
frameLoop(CorKitConn* k)
{
    CorServerConn* c = corContainerOf(k, CorServerConn, k);

    if (corKitConnServe(k, NULL) != 0) {
        return; /* closed */
    }
    if (corBufPending(&k->in) == 0 && c->inFlight == 0) {
        corCorInputIdle(&k->in); /* an idle connection holds none */
    }
    if (!connDoneWith(c)) {
        timerUpdate(c);
    }
}

static const CorKitOps connOps = {
    .ready = frameLoop,
    .take = framesTake,
    .end = peerEnd,
    .fail = connBroken,
    .reserve = inputReserve,
    .readMay = readMay,
    .wrote = wrote,
    .expired = onTimer,
};

/* ---- The loops ----------------------------------------------------------- */

int
corCorServerLoopsNew(unsigned count)
{
    serverLoopCount = count;
    serverLoops = corCallocLines(count, sizeof(*serverLoops));
    return serverLoops != NULL ? 0 : -ENOMEM;
}

void
corCorServerLoopsFree(void)
{
    free(serverLoops);
    serverLoops = NULL;
}

CorServerLoop*
corCorServerLoopAt(unsigned index)
{
    return &serverLoops[index % serverLoopCount];
}

/* ---- The connection ------------------------------------------------------ */

void
corCorServerConnOpen(unsigned loopIndex, const CorListener* l, int fd,
                     const struct sockaddr_storage* peer)
{
    CorServerLoop* sl = corCorServerLoopAt(loopIndex);
    CorServerConn* c = calloc(1, sizeof(*c));
    uint64_t helloMs = corListenerHandshakeTimeoutMs(l);

    if (corAcceptTransport(l, c != NULL ? &c->t : NULL, fd) != 0) {
        free(c);
        return;
    }
    corKitConnInit(&c->k, sl->loop, &connOps);
    c->k.highWater = OUT_HIGH_WATER;
    c->k.outKeep = OUT_KEEP;
    c->sl = sl;
    c->peer = *peer;
    c->tls = helloMs > 0; /* a plain listener has no handshake */
    corPeerAddress(&c->peer, c->remote, sizeof(c->remote));
    corPeerName(&c->peer, c->peerName, sizeof(c->peerName));
    if (corKitConnStart(&c->k, &c->t, &sl->conns) != 0) {
        connClose(c);
        return;
    }
    /* Over TLS the handshake comes first: the listener's timeout, if
     * longer, covers both. */
    corKitConnDeadline(&c->k, corEvNow(sl->loop),
                       helloMs > corCorServerConf.helloTimeoutMs
                           ? helloMs
                           : corCorServerConf.helloTimeoutMs);
    if (sl->draining) {
        corCorServerConnDrain(c);
    }
}

/* Close c: what it has in flight is cancelled (its handlers stop waiting
 * and finish into the void); what they read stays theirs. */
static void
connClose(CorServerConn* c)
{
    corKitConnStop(&c->k);
    corAcceptClosed();
    c->t.ops->close(&c->t);
    while (!corListEmpty(&c->requests)) {
        CorServerRequest* req = corContainerOf(corListFirst(&c->requests),
                                               CorServerRequest, link);

        corCorServerRequestUnlink(req);
        corRequestCancel(&req->r);
    }
    corCorTablesFree(c->received);
    corCorTablesFree(c->sent);
    corKitConnFree(&c->k);
    free(c);
}

void
corCorServerConnDrain(CorServerConn* c)
{
    /* Before the HELLO, its answer carries the CLOSE (helloTake). */
    if (!c->greeted || c->closeSent
        || frameQueue(c, COR_COR_CLOSE, 0, NULL) != 0) {
        return;
    }
    c->closeSent = true;
    corKitConnKick(&c->k);
}

void
corCorServerConnStop(CorServerConn* c, uint64_t deadline)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, &c->requests)
    {
        CorServerRequest* req = corContainerOf(node, CorServerRequest, link);

        if (!req->answered) {
            corCorServerRequestStop(c, req);
        }
    }
    while (outputPending(c) && corEvClockMs() < deadline) {
        struct pollfd pfd = { .fd = c->t.fd, .events = POLLOUT };

        int left = (int)(deadline > corEvClockMs() ? deadline - corEvClockMs()
                                                   : 0);

        if (corKitConnFlush(&c->k) != 0 || poll(&pfd, 1, left) <= 0) {
            break;
        }
    }
    connClose(c);
}
