/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the cor:// client (modules/cor): one call as the loop and
 * the thread paths make it, and what they share with the server.
 */
#ifndef COR_COR_CLIENT_INT_H
#define COR_COR_CLIENT_INT_H

#include "cor.h"
#include "corCorCodec.h"

/* The default ports of cor:// and cors://. */
#define COR_COR_PORT 7070
#define COR_CORS_PORT 7443

/* One call to make; the caller's, read during the call. */
typedef struct {
    const CorUrl* url; /* port filled in */
    bool tls;
    int connectTimeoutMs;         /* 0: client.connect_timeout */
    uint64_t deadlineMs;          /* corEvClockMs() time, 0: none */
    const CorCorMessage* request; /* the REQUEST, encoded when sent */
} CorCorCall;

/* What a call says beside its answer. */
typedef struct {
    bool reused; /* on a connection that was there before */
    bool retry;  /* it failed so that it may go once more */
    bool sent;   /* the REQUEST went to a server: a
                  * failure after may have been acted on */
} CorCorOutcome;

/*
 * A call from its REQUEST to the end of its answer; the caller's memory
 * (zeroed to begin with), used by one piece of work at a time. The
 * answer's body comes in its RESPONSE, or, from a server that streams
 * (the HELLOs agreed to), in DATA frames after it: then the call stays
 * open past its head, and each read takes what came.
 */
typedef struct {
    bool onLoop;   /* the loop's path, else the thread's */
    bool streamed; /* its body comes in DATA frames */
    bool ended;    /* its body is all in (or it failed) */
    int rc;        /* how the body ended: 0 whole, or -errno */
    CorBuf data;   /* body bytes come and not yet read */
    void* peer;    /* the connection, while the answer comes */
    uint32_t id;
    /* The loop's path: the call on its peer's list until its answer is
     * in, woken by the loop as frames come for it. */
    CorList link;
    CorCoPark park;
    bool done; /* its head came, or it failed */
    bool full; /* data is past COR_COR_CALL_HOLD_MAX */
    CorCorMessage answer;
} CorCorCallState;

/*
 * Make c on the calling coroutine's loop (corCorClient.c) or on the
 * calling thread (corCorClientThread.c), up to its answer's head: returns
 * 0 with *answer read (the caller clears it; its body is all of it unless
 * st->streamed), or -errno with why: -ETIMEDOUT, -ECANCELED, the errors
 * of corConnOpen, -ECONNRESET (the connection closed before the answer;
 * out->retry then says whether it may go once more: the connection had
 * served before), -EPROTO (the server refused, or a frame did not
 * decode), -ENOMEM. The call then is over, or, streamed, is read with
 * the same path's read and ended with its end. May yield.
 */
int corCorCallOnLoop(const CorCorCall* c, CorCorCallState* st,
                     CorCorMessage* answer, CorCorOutcome* out, char* why,
                     size_t whyLen);
int corCorCallOnThread(const CorCorCall* c, CorCorCallState* st,
                       CorCorMessage* answer, CorCorOutcome* out, char* why,
                       size_t whyLen);

/*
 * The next bytes of a streamed body into buf, waiting up to timeoutMs
 * (< 0: none) for them: the count, 0 at its end, or -errno with why:
 * -ETIMEDOUT, -ECANCELED, -ECONNRESET (the server cut the answer, or the
 * connection was lost before its end), -EPROTO. May yield.
 */
ssize_t corCorLoopRead(CorCorCallState* st, void* buf, size_t len,
                       int timeoutMs, char* why, size_t whyLen);
ssize_t corCorThreadRead(CorCorCallState* st, void* buf, size_t len,
                         int timeoutMs, char* why, size_t whyLen);
/* Done with a streamed call, read to its end or not (what is still to
 * come of it is dropped as it comes, or its connection closed). */
void corCorLoopEnd(CorCorCallState* st);
void corCorThreadEnd(CorCorCallState* st);

/* The most of a streamed body a call holds unread before its connection
 * is read no more (its server, then, writes no more: TCP's window is the
 * flow control, as for everything on the connection). */
#define COR_COR_CALL_HOLD_MAX ((size_t)256 * 1024)

/* Close the calling loop's connections (its loopExit). */
void corCorClientLoopExit(void);

/* One exchange, as corClientFetch makes one (corCorClientFetch.c), and
 * the same read as it comes (corClientOpen): the scheme the module
 * registers for cor:// and cors://. May yield. */
int corCorFetch(const CorClientRequest* req, CorClientResponse* res);
extern const CorClientOps corCorStreamOps;

/* ---- corCorIo.c: what the server and the client share -------------------- */

/*
 * Make room in the input buffer in (what is pending moved to its front)
 * for at least room more bytes and, toward the whole frame being read as
 * its header says (when it is there and not over maxFrame), twice what it
 * has: a large frame's buffer grows as its bytes come. Returns 0 or
 * -ENOMEM.
 */
int corCorInputReserve(CorBuf* in, uint32_t maxFrame, size_t room);
/* An idle connection's input buffer (nothing pending) given back to the
 * thread's blocks, for the next connection that reads to take. */
void corCorInputIdle(CorBuf* in);

/* The corEvClockMs() time a read of timeoutMs (< 0: none) ends at; 0:
 * none. */
uint64_t corCorReadDeadline(int timeoutMs);
/* Up to len bytes of what came of st's body into buf: the count. */
size_t corCorCallGive(CorCorCallState* st, void* buf, size_t len);
/* The bytes of st's DATA frame (its head h, at frame) after what came.
 * Returns 0 or -ENOMEM. */
int corCorCallPut(CorCorCallState* st, const CorCorHead* h,
                  const uint8_t* frame);

#endif /* COR_COR_CLIENT_INT_H */
