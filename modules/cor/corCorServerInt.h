/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the cor:// server (modules/cor): a loop's share of it, a
 * connection, a request in flight, and what the module's files share.
 */
#ifndef COR_COR_SERVER_INT_H
#define COR_COR_SERVER_INT_H

#include <sys/socket.h>

#include "cor.h"
#include "corCorCodec.h"
#include "corKit.h"

/* An address as text (INET6_ADDRSTRLEN, with room). */
#define COR_SERVER_REMOTE_BYTES 48

typedef struct CorServerConn CorServerConn;
typedef struct CorServerRequest CorServerRequest;

/* The module's settings (its YAML mapping), read once per generation. */
typedef struct {
    uint32_t maxFrame;       /* max_frame: the largest tree taken */
    unsigned maxInFlight;    /* max_in_flight: per connection */
    uint64_t maxHeldBytes;   /* max_in_flight_bytes: what the requests
                              * of a connection hold, past which it is
                              * not read */
    uint64_t idleTimeoutMs;  /* idle_timeout: no frame, nothing due */
    uint64_t helloTimeoutMs; /* hello_timeout: the HELLO must come */
} CorServerConf;

/* Set by corCorServerConfRead (corCorServerConf.c), read by every file of
 * the server. */
extern CorServerConf corCorServerConf;

/* One loop's part of the server; owned by that loop, on lines of its own. */
typedef struct {
    _Alignas(COR_CACHE_LINE) CorEvLoop* loop;
    unsigned index;
    CorKitSet conns; /* every open connection of the loop */
    CorAccept* accept;
    bool draining;
} CorServerLoop;

/*
 * A request from its REQUEST frame to its release. Owned by the core
 * between corRequestServe and ops->release; it owns what its CorRequest
 * points to (the decoded message, and its target copied for decoding), so
 * a connection that closes frees nothing a request in flight reads.
 */
struct CorServerRequest {
    CorRequest r;
    CorServerConn* conn; /* NULL once the connection is gone */
    CorList link;        /* the connection's requests */
    uint32_t id;         /* the REQUEST's correlation id */
    size_t held;         /* its bytes, in conn->heldBytes */
    size_t block;        /* the size of its memory (corChunkTake) */
    bool answered;       /* its RESPONSE is queued (or failed) */
    bool streamFailed;   /* its streamed body outgrew a frame, or
                          * its stream was aborted */
    bool streaming;      /* its answer goes as it is written: a
                          * RESPONSE head, then DATA frames */
    /* The peer's address, as r.remote. */
    char remote[COR_SERVER_REMOTE_BYTES];
    CorCorMessage message; /* what came: verb, headers, body */
    CorBuf streamed;       /* a streamed body, gathered whole */
    CorHeader headers[];   /* the message's and its Content-Type,
                            * then the target's decoded copy */
};

/* A connection; owned by its loop, freed when it closes. */
struct CorServerConn {
    CorKitConn k; /* its bytes: what came and is not yet a
                   * frame, the frames to send; its
                   * deadline; in its loop's set */
    CorServerLoop* sl;
    CorTransport t;
    uint64_t skipLeft;      /* bytes of a REQUEST cut short still to
                             * come, dropped (corCorServerRequestCut) */
    CorCorTables* received; /* the tables of each direction, after */
    CorCorTables* sent;     /* the HELLO */
    CorList requests;       /* in flight, not yet answered or
                             * released */
    unsigned inFlight;      /* of them, not yet answered */
    size_t heldBytes;       /* what they hold, until their release */
    uint64_t frameStartMs;  /* the frame being read began then */
    bool tls;               /* over its listener's TLS (cors) */
    bool greeted;           /* the HELLO came and was answered */
    bool closeSent;         /* our CLOSE: no new work (a drain) */
    bool peerDone;          /* its CLOSE, or its end: nothing more
                             * comes */
    bool streams;           /* its HELLO took streamed answers */
    unsigned streaming;     /* requests of it whose answer streams */
    struct sockaddr_storage peer;
    /* The peer's address as text, made once: each request copies it. */
    char remote[COR_SERVER_REMOTE_BYTES];
    char peerName[64]; /* for logs */
};

/* ---- corCorServer.c ------------------------------------------------------ */

/* Adopt an accepted socket on loop loopIndex (a CorAcceptFn). */
void corCorServerConnOpen(unsigned loopIndex, const CorListener* l, int fd,
                          const struct sockaddr_storage* peer);
/* A drain reached this connection: CLOSE is sent, and it closes once the
 * peer said it sends nothing more and everything is answered. */
void corCorServerConnDrain(CorServerConn* c);
/* Answer what is still with its handler as failed (503), flush what
 * goes out until deadline (corEvClockMs time), close (a stop). */
void corCorServerConnStop(CorServerConn* c, uint64_t deadline);

/* The loops' shares of the server, count of them (the module's init and
 * exit). Returns 0 or -ENOMEM. */
int corCorServerLoopsNew(unsigned count);
void corCorServerLoopsFree(void);
/* The share of loop index. */
CorServerLoop* corCorServerLoopAt(unsigned index);

/* ---- corCorServerRequest.c ----------------------------------------------- */

/* Serve the request of a REQUEST message m (taken over, cleared): made,
 * linked to c and handed to the core; a target HTTP would refuse, or no
 * memory, is answered at once. Returns 0, or -errno when even that
 * answer could not be queued. */
int corCorServerRequestServe(CorServerConn* c, uint32_t id, CorCorMessage* m);
/* The request of a REQUEST whose body (bodyLen bytes) was cut short as it
 * came, past the limits: m (its head, taken over, cleared) is refused as
 * the core refuses a request past them (corLimitsAnswer: 413, or 431 for
 * a head past them too), never served. Returns 0, or -errno when that
 * answer could not be queued. */
int corCorServerRequestRefuse(CorServerConn* c, uint32_t id, CorCorMessage* m,
                              uint64_t bodyLen);
/* A RESPONSE that no handler made (a bad target, past max_in_flight, a
 * stop). Returns 0 or -errno. */
int corCorServerAnswerBare(CorServerConn* c, uint32_t id, int status,
                           const char* text);
/* Take req off its connection (which closes): it finishes into the void. */
void corCorServerRequestUnlink(CorServerRequest* req);
/* c's output drained below what a stream may hold: its streaming
 * requests are handed their next pieces now. */
void corCorServerStreamsDrained(CorServerConn* c);
/* A stop: req, not yet answered, ends as failed (503, or its streamed
 * answer cut). Returns 0 or -errno. */
int corCorServerRequestStop(CorServerConn* c, CorServerRequest* req);

/* ---- corCorServerCut.c --------------------------------------------------- */

/*
 * A frame whose head h is read at frame (n bytes of it came): when it is
 * a REQUEST longer than any request within the limits takes, and its body
 * a string at its end, refuse it now (corCorServerRequestRefuse) with its
 * head decoded and its body cut short, and leave the rest of its bytes in
 * c->skipLeft, to drop as they come. Returns the bytes of the frame
 * taken; 0 when it is not one to cut (read it whole); -EAGAIN when more
 * of it must come to tell; or -errno with why (close).
 */
int corCorServerRequestCut(CorServerConn* c, const CorCorHead* h,
                           const uint8_t* frame, size_t n, char* why,
                           size_t whyLen);

/* ---- corCorServerConf.c -------------------------------------------------- */

/* Read the module's settings from conf into corCorServerConf (an error
 * goes to errors). */
void corCorServerConfRead(const CorConf* conf, CorConfErrors* errors);

#endif /* COR_COR_SERVER_INT_H */
