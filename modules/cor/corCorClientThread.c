/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor:// calls off the loops (a worker, blocking mode, a thread of the
 * client's own): each thread keeps one connection per peer, with its
 * tables, and makes one exchange at a time on it: the connection kit
 * driven by poll() (corKitConnReadWait, corKitConnFlushWait), whose waits
 * a stop or the request's cancel ends. An answer of an earlier call that
 * timed out may still come first: it is decoded (the tables need it) and
 * dropped.
 */
#include "corCorClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREAD_READ_ROOM 4096
/* Calls in a row that timed out with no frame meanwhile, after which the
 * connection is given up (as corCorClient.c's peerSilence). */
#define SILENT_TIMEOUTS 3

typedef struct ThreadPeer {
    CorKitKept kept; /* on the thread's peers: its connection,
                      * its bytes (what came and is not yet a
                      * frame, what goes) */
    char host[256];
    unsigned port;
    bool served;             /* an answer came on it */
    bool closing;            /* its CLOSE came: closed after this call */
    bool streaming;          /* a streamed answer's body comes on it */
    unsigned silentTimeouts; /* timed-out calls since the last frame */
    CorCorTables* sent;
    CorCorTables* received;
    uint32_t nextId;
} ThreadPeer;

static __thread CorList threadPeers;

static void
peerDrop(ThreadPeer* p)
{
    corKitKeptFree(&p->kept);
    corCorTablesFree(p->sent);
    corCorTablesFree(p->received);
    free(p);
}

static int
leftMs(uint64_t deadlineMs)
{
    uint64_t now = corEvClockMs();

    return deadlineMs == 0    ? -1
           : deadlineMs > now ? (int)(deadlineMs - now)
                              : 0;
}

/* Write one frame of type with tree, or with the message m (a REQUEST,
 * encoded with no tree between). */
static int
frameSend(ThreadPeer* p, CorCorType type, uint32_t id, const json_t* tree,
          const CorCorMessage* m, uint64_t deadlineMs, char* why, size_t whyLen)
{
    CorBuf* out = &p->kept.k.out;
    int rc = m != NULL
                 ? corCorMessageEncode(p->sent, type, id, m, out, why, whyLen)
                 : corCorFrameEncode(type == COR_COR_HELLO ? NULL : p->sent,
                                     type, id, tree, out, why, whyLen);

    if (rc >= 0) {
        rc = corKitConnFlushWait(&p->kept.k, leftMs(deadlineMs));
        if (rc < 0) {
            snprintf(why, whyLen, "cor://%s:%u: %s", p->host, p->port,
                     strerror(-rc));
        }
    }
    return rc < 0 ? rc : 0;
}

/* The key of c's peer among the thread's kept connections. */
static void
peerKey(const CorCorCall* c, char* key, size_t cap)
{
    snprintf(key, cap, "%s://%s:%u", c->tls ? "cors" : "cor", c->url->host,
             c->url->port);
}

static ThreadPeer*
threadPeerFind(const CorCorCall* c)
{
    char key[300];
    CorKitKept* kk;

    peerKey(c, key, sizeof(key));
    kk = corKitKeptFind(&threadPeers, key);
    return kk != NULL ? corContainerOf(kk, ThreadPeer, kept) : NULL;
}

/* This thread's connection to c's peer, or a new one with its HELLO sent
 * (its answer is read with the first answer). */
static ThreadPeer*
peerFor(const CorCorCall* c, int* rc, char* why, size_t whyLen)
{
    CorConnTarget target = { .host = c->url->host,
                             .port = c->url->port,
                             .tls = c->tls,
                             .connectTimeoutMs = c->connectTimeoutMs,
                             .fresh = true };
    char key[300];
    ThreadPeer* p;
    CorConn* conn;
    json_t* hello;

    if ((p = threadPeerFind(c)) != NULL) {
        return p;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL || (p->sent = corCorTablesNew()) == NULL
        || (p->received = corCorTablesNew()) == NULL) {
        *rc = -ENOMEM;
        snprintf(why, whyLen, "no memory for a connection");
        goto failed;
    }
    conn = corConnOpen(&target, rc, why, whyLen);
    if (conn == NULL) {
        goto failed;
    }
    peerKey(c, key, sizeof(key));
    if (corKitKeptAdd(&threadPeers, &p->kept, key) != 0) {
        corConnClose(conn);
        *rc = -ENOMEM;
        snprintf(why, whyLen, "no memory for a connection");
        goto failed;
    }
    corKitKeptAttach(&p->kept, conn);
    snprintf(p->host, sizeof(p->host), "%s", c->url->host);
    p->port = c->url->port;
    hello = corCorHelloTree(true);
    *rc = hello != NULL ? frameSend(p, COR_COR_HELLO, 0, hello, NULL,
                                    c->deadlineMs, why, whyLen)
                        : -ENOMEM;
    json_decref(hello);
    if (*rc != 0) {
        peerDrop(p);
        return NULL;
    }
    return p;

failed:
    if (p != NULL) {
        corCorTablesFree(p->sent);
        corCorTablesFree(p->received);
        free(p);
    }
    return NULL;
}

/* A DATA frame: 1 when it is st's (its bytes appended; the last ends
 * it, whole or CUT), 0 for another's (dropped), -errno. */
static int
dataTake(ThreadPeer* p, CorCorCallState* st, const CorCorHead* h,
         const uint8_t* frame, char* why, size_t whyLen)
{
    if (st == NULL || h->id != st->id) {
        return 0;
    }
    if (!st->streamed) {
        snprintf(why, whyLen, "cor://%s:%u: a DATA frame before its RESPONSE",
                 p->host, p->port);
        return -EPROTO;
    }
    if (corCorCallPut(st, h, frame) != 0) {
        return -ENOMEM;
    }
    if ((h->flags & COR_COR_FLAG_MORE) == 0) {
        st->ended = true;
        st->rc = (h->flags & COR_COR_FLAG_CUT) != 0 ? -ECONNRESET : 0;
    }
    return 1;
}

/* One whole frame: 1 when it is st's answer (its head read into *answer)
 * or a DATA frame of it, 0 for another frame, -errno. */
static int
frameTake(ThreadPeer* p, CorCorCallState* st, size_t len, CorCorMessage* answer,
          uint64_t deadlineMs, char* why, size_t whyLen)
{
    const uint8_t* frame = corBufHead(&p->kept.k.in);
    CorCorHead h;
    CorCorMessage other;
    json_t* tree = NULL;
    bool mine;
    int rc;

    p->silentTimeouts = 0;
    if (corCorHeadRead(frame, len, COR_COR_FRAME_MAX, &h, NULL, 0) > 0
        && h.type == COR_COR_DATA) {
        return dataTake(p, st, &h, frame, why, whyLen);
    }
    if (corCorHeadRead(frame, len, COR_COR_FRAME_MAX, &h, NULL, 0) > 0
        && h.type == COR_COR_RESPONSE) {
        /* Straight into a message; one nobody waits for any more (a
         * timed-out call's, or any while catching up, with no call)
         * is decoded all the same, for the tables. */
        mine = st != NULL && h.id == st->id && !st->done;
        p->served = true;
        rc = corCorMessageDecode(p->received, frame, len, COR_COR_FRAME_MAX, &h,
                                 mine ? answer : &other, why, whyLen);
        if (rc == 0 && !mine) {
            corCorMessageClear(&other);
        }
        if (rc == 0 && mine) {
            st->done = true;
            st->streamed = (h.flags & COR_COR_FLAG_MORE) != 0;
        }
        return rc == 0 && mine ? 1 : rc;
    }
    rc = corCorFrameDecode(p->received, frame, len, COR_COR_FRAME_MAX, &h,
                           &tree, why, whyLen);
    if (rc == 0 && h.type == COR_COR_HELLO_ACK) {
        rc = corCorHelloCheck(tree, why, whyLen);
    } else if (rc == 0 && h.type == COR_COR_PING) {
        rc = frameSend(p, COR_COR_PONG, h.id, NULL, NULL, deadlineMs, why,
                       whyLen);
    } else if (rc == 0 && h.type == COR_COR_CLOSE) {
        p->closing = true;
        rc = frameSend(p, COR_COR_CLOSE, 0, NULL, NULL, deadlineMs, why,
                       whyLen);
    } else if (rc == 0 && h.type != COR_COR_PONG) {
        snprintf(why, whyLen, "cor://%s:%u: %s", p->host, p->port,
                 h.type == COR_COR_ERROR ? "refused" : "an unexpected frame");
        rc = -EPROTO;
    }
    json_decref(tree);
    return rc;
}

/* Read frames until st's answer, or the next DATA frame of its streamed
 * body; with no st, only what came already, without waiting (what
 * arrived between two calls: a forgotten call's answer, a PING, a
 * drain's CLOSE). Returns 0, or -errno. */
static int
answerRead(ThreadPeer* p, CorCorCallState* st, CorCorMessage* answer,
           uint64_t deadlineMs, char* why, size_t whyLen)
{
    uint32_t id = st != NULL ? st->id : 0;

    for (;;) {
        CorCorHead h;
        ssize_t n;
        size_t have = corBufPending(&p->kept.k.in);
        int rc = have >= COR_COR_HEAD_LEN
                     ? corCorHeadRead(corBufHead(&p->kept.k.in), have,
                                      COR_COR_FRAME_MAX, &h, why, whyLen)
                     : -EAGAIN;

        if (rc >= 0 && have >= COR_COR_HEAD_LEN + h.length) {
            size_t len = COR_COR_HEAD_LEN + h.length;

            rc = frameTake(p, st, len, answer, deadlineMs, why, whyLen);
            corBufConsume(&p->kept.k.in, len);
            if (rc != 0) {
                return rc > 0 ? 0 : rc;
            }
            continue;
        }
        if (rc < 0 && rc != -EAGAIN) {
            return rc;
        }
        if (corCorInputReserve(&p->kept.k.in, COR_COR_FRAME_MAX,
                               THREAD_READ_ROOM)
            != 0) {
            return -ENOMEM;
        }
        if (id != 0 && leftMs(deadlineMs) == 0) {
            snprintf(why, whyLen, "cor://%s:%u: no answer in time", p->host,
                     p->port);
            return -ETIMEDOUT;
        }
        n = corKitConnReadWait(&p->kept.k, id != 0 ? leftMs(deadlineMs) : 0);
        if (id == 0 && n == -EAGAIN) {
            return 0;
        }
        if (n <= 0) {
            snprintf(why, whyLen, "cor://%s:%u: %s", p->host, p->port,
                     n == 0            ? "the server closed the connection"
                     : n == -ETIMEDOUT ? "no answer in time"
                                       : strerror((int)-n));
            return n == 0 ? -ECONNRESET : (int)n;
        }
    }
}

/* This thread's connection to c's peer, caught up with what came since
 * its last call, or NULL when it closed meanwhile or was asked to (a
 * drain's CLOSE): then it is dropped, and the call opens a new one. */
static ThreadPeer*
peerKept(const CorCorCall* c)
{
    ThreadPeer* p = threadPeerFind(c);
    char why[COR_COR_WHY_MAX];

    if (p != NULL
        && (answerRead(p, NULL, NULL, 0, why, sizeof(why)) != 0
            || p->closing)) {
        peerDrop(p);
        p = NULL;
    }
    return p;
}

int
corCorCallOnThread(const CorCorCall* c, CorCorCallState* st,
                   CorCorMessage* answer, CorCorOutcome* out, char* why,
                   size_t whyLen)
{
    int rc;
    ThreadPeer* p;
    bool keep = false;

    st->onLoop = false;
    p = threadPeerFind(c);
    if (p != NULL && p->streaming) {
        /* Its frames are that answer's until it ends: a call read on it
         * meanwhile would drop them. */
        snprintf(why, whyLen,
                 "cor://%s:%u: a streamed answer of it is still read on this "
                 "thread",
                 c->url->host, c->url->port);
        return -EBUSY;
    }
    p = peerKept(c);
    out->reused = p != NULL;
    if (p == NULL && (p = peerFor(c, &rc, why, whyLen)) == NULL) {
        return rc;
    }
    st->id = ++p->nextId;
    out->sent = true;
    rc = frameSend(p, COR_COR_REQUEST, st->id, NULL, c->request, c->deadlineMs,
                   why, whyLen);
    if (rc == 0) {
        rc = answerRead(p, st, answer, c->deadlineMs, why, whyLen);
        /* A timed-out answer is still to come, which the next call reads
         * past; a server silent across several is given up (as on the
         * loops). */
        keep = rc == -ETIMEDOUT && ++p->silentTimeouts < SILENT_TIMEOUTS;
    }
    if (rc == 0 && st->streamed) {
        st->peer = p; /* its body comes on it, until corCorThreadEnd */
        p->streaming = true;
        return 0;
    }
    st->ended = true;
    /* Anything else, a write cut short by its deadline included, leaves
     * the connection in doubt. */
    if (!keep && (rc != 0 || p->closing)) {
        out->retry = (rc == -ECONNRESET || rc == -EPIPE) && p->served;
        peerDrop(p);
    }
    return rc == -EPIPE ? -ECONNRESET : rc;
}

ssize_t
corCorThreadRead(CorCorCallState* st, void* buf, size_t len, int timeoutMs,
                 char* why, size_t whyLen)
{
    ThreadPeer* p = st->peer;
    uint64_t deadlineMs = corCorReadDeadline(timeoutMs);
    size_t n;

    while (corBufPending(&st->data) == 0 && !st->ended) {
        int rc = answerRead(p, st, NULL, deadlineMs, why, whyLen);

        if (rc < 0) {
            st->ended = true; /* a failure stays */
            st->rc = rc == -EPIPE ? -ECONNRESET : rc;
            return st->rc;
        }
    }
    n = corCorCallGive(st, buf, len);
    if (n > 0 || st->rc == 0) {
        return (ssize_t)n;
    }
    snprintf(why, whyLen, "cor://%s:%u: the answer was cut midway", p->host,
             p->port);
    return st->rc;
}

void
corCorThreadEnd(CorCorCallState* st)
{
    ThreadPeer* p = st->peer;

    /* An answer not read to its end would still come on it. */
    p->streaming = false;
    if (!st->ended || st->rc != 0 || p->closing) {
        peerDrop(p);
    }
    corBufFree(&st->data);
}
