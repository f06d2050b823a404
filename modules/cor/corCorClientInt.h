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
 * Make c on the calling coroutine's loop (corCorClient.c) or on the
 * calling thread (corCorClientThread.c). Returns 0 with *answer read (the
 * caller clears it), or -errno with why: -ETIMEDOUT, -ECANCELED, the
 * errors of corConnOpen, -ECONNRESET (the connection closed before the
 * answer; out->retry then says whether it may go once more: the
 * connection had served before), -EPROTO (the server refused, or a frame did
 * not decode), -ENOMEM. May yield.
 */
int corCorCallOnLoop(const CorCorCall* c, CorCorMessage* answer,
                     CorCorOutcome* out, char* why, size_t whyLen);
int corCorCallOnThread(const CorCorCall* c, CorCorMessage* answer,
                       CorCorOutcome* out, char* why, size_t whyLen);

/* Close the calling loop's connections (its loopExit). */
void corCorClientLoopExit(void);

/* One exchange, as corClientFetch makes one (corCorClientFetch.c): the
 * scheme the module registers for cor:// and cors://. May yield. */
int corCorFetch(const CorClientRequest* req, CorClientResponse* res);

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

#endif /* COR_COR_CLIENT_INT_H */
