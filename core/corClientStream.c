/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client, streamed (corClient.h): one open, read and close for every
 * URL scheme, so that forward, a cache and any module pass an answer on
 * as it comes without knowing which protocol brought it. As H2O's
 * lib/common/httpclient.c fronts its HTTP/1, 2 and 3 clients, the core
 * holds no protocol: each scheme registers a table of operations
 * (CorClientOps) and the core hands the exchange to it, in one block
 * that holds the front's fields and the scheme's state (one allocation,
 * as the HTTP client took before the front).
 *
 * A scheme with a fetch and no operations (a module's that answers in one
 * piece) is still read here: its exchange is made whole at the open and
 * the reads give res->body out, so that a caller never asks which kind
 * it has. A body passed on as it comes (bodyFrom) is gathered for it
 * first, since its fetch takes a body whole.
 *
 * Rejected: a front that parses the URL before the scheme does (every
 * scheme parses it with its own rules; the front only needs the scheme's
 * name, corSchemeOf, and parses only to say why none took it).
 */
#include "corCoreInt.h"
#include "corKit.h"

#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A piece of a body gathered for a scheme that takes it whole. */
#define GATHER_PIECE 16384

struct CorClientStream {
    const CorClientOps* ops;
    size_t size; /* of the block (corChunkTake) */
    alignas(max_align_t) unsigned char state[];
};

/* ---- A scheme that answers whole ----------------------------------------- */

/* Its state: the answer fetched at the open, given out by the reads. */
typedef struct {
    CorClientResponse* res;
    size_t given;
} Whole;

/* A body passed on as it comes, read whole into *bodyP (malloc, the
 * caller's) within the request's read timeout between pieces. Returns its
 * length or -errno, why said. */
static ssize_t
bodyGather(const CorClientRequest* req, char** bodyP, char* why, size_t whyLen)
{
    CorBuf b = { 0 };
    ssize_t n;
    int ms = req->readTimeoutMs > 0        ? req->readTimeoutMs
             : req->firstByteTimeoutMs > 0 ? req->firstByteTimeoutMs
                                           : -1;

    do {
        if (corBufReserve(&b, GATHER_PIECE) != 0) {
            n = -ENOMEM;
            break;
        }
        n = corRequestBodyRead(req->bodyFrom, b.data + b.len, b.cap - b.len,
                               ms);
        b.len += n > 0 ? (size_t)n : 0;
    } while (n > 0);
    if (n < 0) {
        snprintf(why, whyLen, "the request's body: %s", strerror((int)-n));
        corBufFree(&b);
        return n;
    }
    *bodyP = (char*)b.data;
    return (ssize_t)b.len;
}

/* The open of a scheme without operations: s's fetch, made now. Not in
 * wholeOps: it needs the scheme, which corClientOpen has found already. */
static int
wholeOpen(Whole* w, const CorScheme* s, const CorClientRequest* req,
          CorClientResponse* res)
{
    /* A streamed read has no limit of its own over HTTP: none here
     * either, past what the scheme's frames carry. */
    CorClientRequest whole = *req;
    char* body = NULL;
    ssize_t n;
    int rc;

    if (whole.maxBodyBytes == 0) {
        whole.maxBodyBytes = SIZE_MAX;
    }
    if (req->bodyFrom != NULL) {
        n = bodyGather(req, &body, res->error, sizeof(res->error));
        if (n < 0) {
            return (int)n;
        }
        whole.bodyFrom = NULL;
        whole.body = body;
        whole.bodyLen = (size_t)n;
    }
    rc = s->fetch(&whole, res);
    free(body);
    *w = (Whole){ .res = res };
    return rc;
}

static ssize_t
wholeRead(void* x, void* buf, size_t len, int timeoutMs)
{
    Whole* w = x;
    size_t n = w->res->bodyLen - w->given;

    (void)timeoutMs;
    if (n > 0 && len == 0) {
        return -EINVAL;
    }
    n = n < len ? n : len;
    memcpy(buf, w->res->body + w->given, n);
    w->given += n;
    return (ssize_t)n;
}

static bool
wholeDone(const void* x)
{
    const Whole* w = x;

    return w->given == w->res->bodyLen;
}

static void
wholeClose(void* x)
{
    (void)x;
}

static const CorClientOps wholeOps = {
    .size = sizeof(Whole),
    .read = wholeRead,
    .done = wholeDone,
    .close = wholeClose,
};

/* ---- The front ------------------------------------------------------------
 */

int
corClientOpen(const CorClientRequest* req, CorClientResponse* res,
              CorClientStream** xP)
{
    const CorScheme* s = corClientScheme(req, res);
    const CorClientOps* ops;
    CorClientStream* x;
    size_t size;
    int rc;

    *xP = NULL;
    if (s == NULL) {
        return -EINVAL;
    }
    ops = s->stream != NULL ? s->stream : &wholeOps;
    size = sizeof(*x) + ops->size;
    x = corChunkTake(&size);
    if (x == NULL) {
        snprintf(res->error, sizeof(res->error), "no memory");
        return -ENOMEM;
    }
    x->ops = ops;
    x->size = size;
    rc = s->stream != NULL ? ops->open(x->state, req, res)
                           : wholeOpen((Whole*)x->state, s, req, res);
    if (rc < 0) {
        corChunkGive(x, size);
        return rc;
    }
    *xP = x;
    return 0;
}

ssize_t
corClientRead(CorClientStream* x, void* buf, size_t len, int timeoutMs)
{
    return x->ops->read(x->state, buf, len, timeoutMs);
}

bool
corClientDone(const CorClientStream* x)
{
    return x->ops->done(x->state);
}

CorConn*
corClientUpgraded(CorClientStream* x, const void** restP, size_t* restLenP)
{
    return x->ops->upgraded != NULL
               ? x->ops->upgraded(x->state, restP, restLenP)
               : NULL;
}

void
corClientClose(CorClientStream* x)
{
    if (x != NULL) {
        x->ops->close(x->state);
        corChunkGive(x, x->size);
    }
}

bool
corClientIdempotent(const char* method)
{
    static const char* const idempotent[] = { "GET",   "HEAD", "OPTIONS",
                                              "TRACE", "PUT",  "DELETE" };

    if (method == NULL) {
        return true;
    }
    for (size_t i = 0; i < sizeof(idempotent) / sizeof(idempotent[0]); i++) {
        if (strcmp(method, idempotent[i]) == 0) {
            return true;
        }
    }
    return false;
}
