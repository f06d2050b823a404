/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's handler "bodyread", which takes its request body as it
 * comes (CorHandler.streamBody): what a protocol that streams bodies must
 * hand it, in order, at the pace it reads, with each failure said.
 *
 *   ?wait=MS    sleep before the first read (the body waits meanwhile)
 *   ?gap=MS     sleep between two reads
 *   ?echo=1     answer at once with a stream, each piece read written
 *               back as it came (both ways at once, as a gRPC stream)
 *   ?early=1    answer "early" before reading any of it
 *
 * It answers "length N sum S" (S the sum corHttpUpstream's /echo gives).
 * "bodysum" answers the same for a body that came whole before it ran.
 * A read that fails is logged, "bodyread: WHY after N bytes", since its
 * answer may go nowhere (a client that left, a refusal said for it).
 */
#include "cor.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void corTestkitBodyAdd(CorModule* m, int* rc);

/* One read's room: what the HTTP client's chunks take. */
#define PIECE_BYTES 16384
#define READ_TIMEOUT_MS 10000

static int
queryMs(CorRequest* r, const char* key)
{
    const char* v = corRequestQuery(r, key);

    return v != NULL ? atoi(v) : 0;
}

static void
sleepMs(int ms)
{
    short revents;

    if (ms > 0) {
        corRestWaitFd(-1, 0, ms, &revents);
    }
}

/* Read the whole body (each piece echoed when echo): its length, or the
 * failure, logged. */
static ssize_t
bodyTake(CorRequest* r, bool echo, uint32_t* sumP)
{
    char* piece = malloc(PIECE_BYTES);
    int gap = queryMs(r, "gap");
    size_t len = 0;
    ssize_t n;

    if (piece == NULL) {
        return -ENOMEM;
    }
    while ((n = corRequestBodyRead(r, piece, PIECE_BYTES, READ_TIMEOUT_MS))
           > 0) {
        for (ssize_t i = 0; i < n; i++) {
            *sumP = *sumP * 31 + (unsigned char)piece[i];
        }
        len += (size_t)n;
        if (echo && corResponseStreamWrite(r, piece, (size_t)n) < 0) {
            n = -EPIPE;
            break;
        }
        sleepMs(gap);
    }
    free(piece);
    if (n < 0) {
        corLog(COR_LOG_INFO, "bodyread: %s after %zu bytes", strerror((int)-n),
               len);
        return n;
    }
    return (ssize_t)len;
}

static void
bodyReadServe(CorRequest* r)
{
    bool echo = queryMs(r, "echo") == 1;
    uint32_t sum = 0;
    ssize_t n;

    if (queryMs(r, "early") == 1) {
        corRespond(r, 200, "text/plain", "early\n", 6);
        return;
    }
    if (echo
        && corResponseStreamStart(r, 200, "application/octet-stream") != 0) {
        return;
    }
    sleepMs(queryMs(r, "wait"));
    n = bodyTake(r, echo, &sum);
    if (echo) {
        if (n < 0) {
            corResponseStreamAbort(r);
        } else {
            corResponseStreamEnd(r);
        }
    } else if (n < 0) {
        corRespondf(r, 500, "text/plain", "bodyread: %s\n", strerror((int)-n));
    } else {
        corRespondf(r, 200, "text/plain", "length %zd sum %u\n", n,
                    (unsigned)sum);
    }
}

/* "bodysum": the same answer for a body that came whole before it ran
 * (its handler takes it so, as most do): read with corRequestBodyRead,
 * or, with ?map=1, straight out of r->body (a mapping of its file once it
 * was spooled past limits.body_memory). */
static void
bodySumServe(CorRequest* r)
{
    uint32_t sum = 0;
    ssize_t n = (ssize_t)r->bodyLen;

    if (queryMs(r, "map") == 1) {
        for (size_t i = 0; i < r->bodyLen; i++) {
            sum = sum * 31 + (unsigned char)r->body[i];
        }
    } else {
        n = bodyTake(r, false, &sum);
    }
    if (n < 0) {
        corRespondf(r, 500, "text/plain", "bodysum: %s\n", strerror((int)-n));
        return;
    }
    corRespondf(r, 200, "text/plain", "length %zd sum %u\n", n, (unsigned)sum);
}

void
corTestkitBodyAdd(CorModule* m, int* rc)
{
    if (*rc == 0) {
        *rc = corHandlerAdd(m, &(CorHandler){ .name = "bodysum",
                                              .serve = bodySumServe,
                                              .run = COR_RUN_COROUTINE });
    }
    if (*rc == 0) {
        *rc = corHandlerAdd(m, &(CorHandler){ .name = "bodyread",
                                              .serve = bodyReadServe,
                                              .run = COR_RUN_COROUTINE,
                                              .streamBody = true });
    }
}
