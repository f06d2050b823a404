/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection kit: what every protocol's connection needs and each
 * wrote by hand before. Small blocks first (a growable byte buffer with a
 * consume offset; the intrusive lists are corList.h's), then a buffered
 * non-blocking connection on a loop: an input and an output buffer over a
 * CorTransport (plain or TLS), flushed as the socket takes it and on
 * EPOLLOUT (armed once, edge-triggered), a high-water mark past which the
 * owner reads nothing more (its peer must read first), one deadline timer,
 * a flush before the loop sleeps, a file part of the output sent
 * kernel to kernel after its bytes, and a set of live connections per
 * loop that a drain and a stop walk. Off the loops (a worker, a client's
 * thread twin) the same connection is driven by poll(): one exchange at a
 * time, each wait bounded. Last, a loop's connection to a server that its
 * exchanges share (a peer: found by its server, connected in a coroutine
 * of its own, counted, drained, failed). A module keeps only its framing
 * and its policy: what a frame is, when a deadline applies, what a drain
 * says.
 */
#ifndef COR_KIT_H
#define COR_KIT_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "cor.h"
#include "corList.h"

/* ---- Byte buffers -------------------------------------------------------- */

/*
 * Bytes appended at len and taken from off: data[off, len) is what is
 * still to take (unread input, unsent output). The owner's, zeroed to
 * begin with; corBufFree gives its memory back.
 */
typedef struct {
    uint8_t* data;
    size_t len;
    size_t cap;
    size_t off;
} CorBuf;

/* Room for n more bytes past len, the size doubling from 256. Returns 0
 * or -ENOMEM (the buffer as it was). */
int corBufReserve(CorBuf* b, size_t n);
/* A size of exactly cap when it is less (no doubling: an input buffer
 * sized to the frame it reads). Returns 0 or -ENOMEM. */
int corBufGrowTo(CorBuf* b, size_t cap);
/* Append the n bytes at p. Returns 0 or -ENOMEM. */
int corBufAppend(CorBuf* b, const void* p, size_t n);
/* Append a header field as "name\0value\0" (a list of fields that its
 * reader walks as C strings). Returns 0 or -ENOMEM (nothing appended).
 * Inline: HTTP/2 and HTTP/3 keep each field of a request with it. */
static inline int corBufAppendField(CorBuf* b, const void* name, size_t nameLen,
                                    const void* value, size_t valueLen);
/* n bytes taken (n <= what is pending); all taken empties it. */
static inline void corBufConsume(CorBuf* b, size_t n);
/* Move what is pending to the front (off 0), making room at the end. */
void corBufCompact(CorBuf* b);
void corBufFree(CorBuf* b);
static inline size_t corBufPending(const CorBuf* b);
static inline uint8_t* corBufHead(const CorBuf* b);

/* ---- Blocks a thread keeps (corChunk.c) ---------------------------------- */

/* A block of at least *sizeP bytes, from what this thread gave back when it
 * can: *sizeP becomes the block's size (its class, 128 bytes to 8 KiB;
 * larger sizes are malloc's as asked). Uninitialised; NULL without memory. */
void* corChunkTake(size_t* sizeP);
/* The size of the block corChunkTake gives for size bytes. */
size_t corChunkSize(size_t size);
/* Give back a block of size bytes (the size corChunkTake said), on any
 * thread; NULL is ignored. */
void corChunkGive(void* block, size_t size);

/* ---- A buffered connection on a loop ------------------------------------- */

typedef struct CorKitConn CorKitConn;

/*
 * The owner's side of a connection. Each function that returns int
 * returns 0, or -1 when it closed the connection (the kit then touches it
 * no more).
 */
typedef struct {
    /* The socket has something (bytes, its end, an error): read
     * (corKitConnRead), take, flush. */
    void (*ready)(CorKitConn* k);
    /* Bytes came (corBufHead(&k->in)): take the whole frames and
     * corBufConsume them. */
    int (*take)(CorKitConn* k);
    /* The peer's end came (a read of 0). */
    int (*end)(CorKitConn* k);
    /* Reading or writing failed (rc -errno, why): close. */
    void (*fail)(CorKitConn* k, int rc, const char* why);
    /* Room in k->in for the next read. NULL: k->readRoom more bytes. */
    int (*reserve)(CorKitConn* k);
    /* Whether more input is taken now, beside the high-water mark.
     * NULL: always. */
    bool (*readMay)(CorKitConn* k);
    /* The output was written on its own (EPOLLOUT, a flush due) and
     * nothing was to read: arm the deadline that applies. May be NULL. */
    void (*wrote)(CorKitConn* k);
    /* The deadline (corKitConnDeadline) passed: close. */
    void (*expired)(CorKitConn* k);
} CorKitOps;

/* A connection; embedded in its owner's, on one loop. */
struct CorKitConn {
    const CorKitOps* ops;
    CorEvLoop* loop;
    CorTransport* t; /* NULL until started */
    CorEvIo io;
    CorEvTimer deadline;
    CorEvSoon flushSoon;   /* the output, before the loop sleeps */
    struct CorKitSet* set; /* NULL: in none */
    CorList link;          /* in its set */
    CorBuf in;
    CorBuf out;
    int fileFd; /* the output's file part, the kit's to
                 * close: valid while fileLeft > 0 */
    off_t fileOffset;
    size_t fileLeft;
    size_t readRoom;       /* a read's room when ops->reserve is NULL */
    size_t highWater;      /* unsent output past which nothing is
                            * read; 0: no mark */
    size_t outKeep;        /* an empty output buffer larger than
                            * this goes back to malloc; 0: kept */
    uint64_t outStalledMs; /* the output waits since then, or 0 */
    uint64_t sentBytes;    /* written in all: a writer waits for its
                            * last byte's count to be passed */
    uint64_t sentMs;       /* when bytes last went (keepalives) */
    unsigned events;       /* the socket's last wake (EPOLL*): a
                            * reset told from a shut */
    bool peerShut;         /* its FIN came: read to its end */
    bool readPaused;       /* past the mark or ops->readMay: not
                            * read until the output drains */
    bool inside;           /* in corKitConnServe's step: output
                            * queued now goes with its flush (the
                            * owner's re-entry guard) */
};

/* The connections of one loop that a drain and a stop reach; the loop
 * owner's, zeroed to begin with. */
typedef struct CorKitSet {
    CorList conns;
    atomic_uint count; /* read by other threads (a drain's wait) */
} CorKitSet;

/* Buffers empty, nothing watched yet: output may be queued before the
 * transport is there (it goes when it is started). */
void corKitConnInit(CorKitConn* k, CorEvLoop* loop, const CorKitOps* ops);
/* Watch t (its fd, edge-triggered, in and out: the first writable edge
 * writes what was queued before); again after a stop, for a new
 * connection (a reconnect), with the buffers as they are. Joins set when
 * not NULL. Returns 0, or -EIO (not watched: the caller closes). */
int corKitConnStart(CorKitConn* k, CorTransport* t, CorKitSet* set);
/* Stop watching: the io, the timers, the set. The transport stays the
 * owner's to close; the buffers stay until corKitConnFree. */
void corKitConnStop(CorKitConn* k);
void corKitConnFree(CorKitConn* k);

/* Read what came, ops->take after each read, until the socket has no
 * more, the peer's end, or a pause (readMay, the mark: the output is
 * flushed first). Frames still pending in k->in are taken first. Returns
 * 0, or -1 when an op closed it. */
int corKitConnRead(CorKitConn* k);
/*
 * Serve what came, under the connection's re-entry guard, then write what
 * that queued. step (corKitConnRead when NULL: ops->take per frame) reads
 * and takes; an answer given inside it (an inline handler) only queues
 * (corKitConnInside), and goes in the one write that follows. step
 * returns -1 when it closed k, 0 when done, 1 when it stopped at the
 * high-water mark: it runs again while each flush empties the output.
 * Called inside a step (a drain's notice, a handler's answer), step runs
 * and the outer serve writes. Every protocol's server reads this way, so
 * that none keeps a guard of its own. Returns 0, or -1 when k was closed
 * (by step, or by ops->fail after a failed write): not touched after.
 * Inline: once a request, and the step a direct call then.
 */
static inline int corKitConnServe(CorKitConn* k, int (*step)(CorKitConn* k));
/* Whether k is inside corKitConnServe's step (what is queued now goes
 * with its flush). */
static inline bool corKitConnInside(const CorKitConn* k);
/* Output was queued outside of the socket's events (a handler's answer
 * from a coroutine or a worker, a stream's piece): it goes before the loop
 * sleeps, with whatever else this turn queues; inside a serve, with its
 * flush. */
void corKitConnKick(CorKitConn* k);
/* Write what the socket takes of k->out, then of its file part. Returns
 * 0 (the rest waits for EPOLLOUT), or -1 on an error or a file shorter
 * than it said (the caller closes). */
int corKitConnFlush(CorKitConn* k);
/* The output's file part: len bytes of fd from offset, sent (the
 * transport's sendFile) once k->out is empty; nothing is queued behind
 * it until it went. The kit owns fd from here and closes it when the
 * part is sent (at once for len 0) or at corKitConnFree. */
void corKitConnSendFile(CorKitConn* k, int fd, off_t offset, size_t len);
/* Unsent output: k->out's bytes and the file part's. */
static inline size_t corKitConnOutPending(const CorKitConn* k);
/* Past the high-water mark: more unsent bytes than it, or a file part
 * (which holds what would follow). False without a mark. */
static inline bool corKitConnOutFull(const CorKitConn* k);
/* Flush before the loop sleeps: what this turn's handlers, coroutines and
 * workers' answers queue goes in one write, in this turn. */
void corKitConnFlushSoon(CorKitConn* k);
/* Whether more may be read: below the mark, and ops->readMay. */
bool corKitConnReadMay(CorKitConn* k);
/* ops->expired at since + ms (at once when that is past), replacing the
 * deadline armed before; corKitConnDeadlineStop disarms it. */
void corKitConnDeadline(CorKitConn* k, uint64_t since, uint64_t ms);
/* The same from now: ops->expired ms from the loop's clock. */
void corKitConnDeadlineIn(CorKitConn* k, uint64_t ms);
void corKitConnDeadlineStop(CorKitConn* k);

/* ---- The same connection off the loops ---------------------------------- */

/* Bytes go through t, waited for with poll() (corRestWaitFd: a coroutine
 * yields, a thread polls; a stop or the request's cancel ends a wait);
 * k was made with corKitConnInit(k, NULL, NULL): no loop, no ops. */
void corKitConnAttach(CorKitConn* k, CorTransport* t);
/* Read once into the room k->in has (the caller reserved it), waiting up
 * to timeoutMs (-1: no limit; 0: not at all) for bytes. Returns the bytes
 * read, 0 at the peer's end, or -errno (-EAGAIN for 0 ms and nothing
 * there, -ETIMEDOUT, -ECANCELED, the transport's). May yield. */
ssize_t corKitConnReadWait(CorKitConn* k, int timeoutMs);
/* Write all of k->out within timeoutMs (-1: no limit). Returns 0, or
 * -errno (what went is consumed; the connection is in doubt). May yield. */
int corKitConnFlushWait(CorKitConn* k, int timeoutMs);

/*
 * A connection a thread keeps for its next call to the same peer (a
 * client off the loops: a worker, blocking mode, a thread of its own),
 * on the thread's list (a CorList the caller keeps per thread): the peer's
 * key, its CorConn (NULL between connections) and the kit over it, driven
 * by poll(). Embedded in the caller's record, which outlives it.
 */
typedef struct {
    CorList link; /* the thread's kept connections */
    char* key;    /* the peer as the caller tells peers
                   * apart ("cor://host:port", ...) */
    CorConn* conn;
    CorKitConn k;
} CorKitKept;

/* The connection of the list kept to the peer key, or NULL. */
CorKitKept* corKitKeptFind(CorList* kept, const char* key);
/* Put kk on kept as the connection to key (a copy), not connected yet.
 * Returns 0 or -ENOMEM (kk not on it). */
int corKitKeptAdd(CorList* kept, CorKitKept* kk, const char* key);
/* kk's bytes go through conn (connected; kk's from here). */
void corKitKeptAttach(CorKitKept* kk, CorConn* conn);
/* Close kk's connection and empty its buffers (what they hold stays
 * allocated): kk stays on its list for the next connection to its peer. */
void corKitKeptClose(CorKitKept* kk);
/* Take kk off its list, close it, free its buffers and its key (kk itself
 * is the caller's). */
void corKitKeptFree(CorKitKept* kk);

/* ---- A loop's connection to a server, shared by its exchanges ------------ */

/*
 * A peer: the one connection a loop keeps to a server (host, port, TLS and
 * the TLS client its exchanges named) for a client whose exchanges share
 * one (the HTTP/2 client's streams, the cor:// client's calls), on the
 * loop's list of peers (the kit's, one per thread). Its connect runs in a
 * coroutine of its own, so that no exchange's cancel takes the connection
 * with it; output queues in k.out meanwhile. A drain (the server's
 * GOAWAY, CLOSE) makes it take no new exchange, and it closes once none
 * is in flight. It is embedded in the client's record and freed with its
 * last reference (the list, the connector, each exchange on it). Off the
 * loops (k.loop NULL) a peer is one exchange's, connected by
 * corKitPeerOpen, its kit attached by the owner.
 */
typedef struct CorKitPeer CorKitPeer;

typedef enum {
    COR_KIT_PEER_CONNECTING,
    COR_KIT_PEER_READY,
    COR_KIT_PEER_CLOSING, /* the server drains: no new exchange */
    COR_KIT_PEER_DEAD
} CorKitPeerState;

/* What the client adds to a peer. */
typedef struct {
    /* What the client has to say, into k.out, before each flush. Returns
     * 0, or -1 after failing the peer. NULL: nothing. */
    int (*send)(CorKitPeer* p);
    /* The peer died (p->failure, p->why): every exchange on it fails. */
    void (*failed)(CorKitPeer* p);
    /* Whether no exchange is in flight: a draining peer then closes. */
    bool (*idle)(const CorKitPeer* p);
    /* The last reference went: free the record p is embedded in (the kit's
     * buffers are freed already). */
    void (*free)(CorKitPeer* p);
} CorKitPeerOps;

struct CorKitPeer {
    const CorKitPeerOps* ops;
    CorList link; /* the loop's peers */
    char host[256];
    unsigned port;
    bool tls;
    CorTlsClient* tlsClient;   /* to connect with; NULL: the default */
    const CorTlsClient* named; /* the one its exchanges named, or NULL */
    const char* alpn;          /* what TLS must choose; NULL: anything */
    int connectTimeoutMs;
    CorKitPeerState state;
    bool connected; /* the connect succeeded: what was queued
                     * went (or goes) out */
    unsigned refs;
    CorConn* conn; /* NULL while connecting, and once dead */
    CorKitConn k;
    int failure;    /* why it died, -errno */
    char name[272]; /* for messages: "host:port", ... */
    char why[600];  /* "name: why it died" */
};

/* Set up p (zeroed by the caller's calloc) for host:port on loop (NULL:
 * off the loops), its kit's ops kitOps (with corKitPeerReady, End and
 * Broken); one reference, the caller's. The client fills in tls, the TLS
 * clients, alpn, the timeout and its name. */
void corKitPeerInit(CorKitPeer* p, const CorKitPeerOps* ops, CorEvLoop* loop,
                    const CorKitOps* kitOps, const char* host, unsigned port);
static inline void corKitPeerHold(CorKitPeer* p);
/* Drop a reference; the last frees p. */
void corKitPeerRelease(CorKitPeer* p);
/* The calling loop's peer of the client whose ops are ops, for host, port,
 * tls and named, that takes new exchanges, with a reference for the
 * caller; or NULL. */
CorKitPeer* corKitPeerFind(const CorKitPeerOps* ops, const char* host,
                           unsigned port, bool tls, const CorTlsClient* named);
/* A connection to p's server (TLS checked to have chosen p->alpn). Returns
 * it, or NULL with *rc and why. May yield. */
CorConn* corKitPeerOpen(CorKitPeer* p, int* rc, char* why, size_t whyLen);
/* Put p (new, its first output queued) on its loop's list and start its
 * connect in a coroutine of its own, which runs at once up to its first
 * wait. Returns 0, p holding the caller's reference; or -errno with why
 * (p failed at once: a name known not to exist, no coroutine), the
 * caller's reference released. */
int corKitPeerStart(CorKitPeer* p, char* why, size_t whyLen);
/* Off its loop's list: no exchange finds it any more (a drain). */
void corKitPeerForget(CorKitPeer* p);
/* The connection is gone: closed, its exchanges failed with rc and why. */
void corKitPeerFail(CorKitPeer* p, int rc, const char* why);
/* What the client and the output have, written as the socket takes it
 * (nothing before the connect: it goes with it). */
void corKitPeerFlush(CorKitPeer* p);
/* Closed when it drains and no exchange is in flight. */
void corKitPeerRetire(CorKitPeer* p);
/* Fail every peer of the calling loop whose ops are ops (the client's
 * part of the loop's exit). */
void corKitPeersStop(const CorKitPeerOps* ops);

/* The kit's ops a peer gives (CorKitOps .ready, .end, .fail): read every
 * frame then flush and retire; the server's end and a broken connection
 * fail it. */
void corKitPeerReady(CorKitConn* k);
int corKitPeerEnd(CorKitConn* k);
void corKitPeerBroken(CorKitConn* k, int rc, const char* why);

/* ---- inline definitions -------------------------------------------------- */

static inline int
corBufAppendField(CorBuf* b, const void* name, size_t nameLen,
                  const void* value, size_t valueLen)
{
    size_t n = nameLen + valueLen + 2;
    uint8_t* at;

    if (b->cap - b->len < n && corBufReserve(b, n) != 0) {
        return -ENOMEM;
    }
    at = b->data + b->len;
    memcpy(at, name, nameLen);
    at[nameLen] = '\0';
    memcpy(at + nameLen + 1, value, valueLen);
    at[nameLen + 1 + valueLen] = '\0';
    b->len += n;
    return 0;
}

static inline size_t
corBufPending(const CorBuf* b)
{
    return b->len - b->off;
}

static inline uint8_t*
corBufHead(const CorBuf* b)
{
    return b->data + b->off;
}

static inline void
corBufConsume(CorBuf* b, size_t n)
{
    b->off += n;
    if (b->off == b->len) {
        b->off = b->len = 0;
    }
}

static inline size_t
corKitConnOutPending(const CorKitConn* k)
{
    return corBufPending(&k->out) + k->fileLeft;
}

static inline int
corKitConnServe(CorKitConn* k, int (*step)(CorKitConn* k))
{
    bool outer = !k->inside;
    int rc;

    do {
        k->inside = true;
        rc = step != NULL ? step(k) : corKitConnRead(k);
        if (rc < 0) {
            return -1; /* closed: k is gone */
        }
        if (!outer) {
            return 0; /* the outer serve writes */
        }
        k->inside = false;
        if (corKitConnFlush(k) != 0) {
            /* (fail) in parentheses: a test that includes this header
             * with check.h has a function-like macro of that name. */
            (k->ops->fail)(k, -ECONNRESET,
                           "the connection failed while writing");
            return -1;
        }
        /* Held back by output that has all gone out now: go on. */
    } while (rc > 0 && corKitConnOutPending(k) == 0);
    return 0;
}

static inline bool
corKitConnInside(const CorKitConn* k)
{
    return k->inside;
}

static inline bool
corKitConnOutFull(const CorKitConn* k)
{
    return k->highWater > 0
           && (k->fileLeft > 0 || corBufPending(&k->out) > k->highWater);
}

static inline void
corKitPeerHold(CorKitPeer* p)
{
    p->refs++;
}

#endif /* COR_KIT_H */
