/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One cor:// exchange as corClientFetch makes one, and as corClientOpen
 * reads one (corCorStreamOps), over the same call: the request turned
 * into a REQUEST tree once, made on the loop (a coroutine's) or on the
 * thread, sent once more on a new connection when one that had served was
 * found closed, and the RESPONSE turned into the client's response (its
 * Content-Type among the headers again), which the caller frees with
 * corClientResponseFree. A streamed answer's body (DATA frames) is read
 * as it comes by an open exchange, and gathered whole by a fetch; an
 * answer that came whole in its RESPONSE is read out of memory.
 */
#include "corCorClientInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A REQUEST of req, and what it points to that req does not hold: its
 * headers but Content-Type and its target, in one block, and
 * Content-Type. The caller's, on its stack, until requestFree. */
typedef struct {
    CorCorMessage m;
    CorHeader* headers; /* the block */
    size_t blockSize;
    char* contentType;
} Request;

static void
requestFree(Request* r)
{
    corChunkGive(r->headers, r->blockSize);
    free(r->contentType);
}

/* The REQUEST of req to u in *r: its headers (Content-Type apart), and a
 * Host of u's authority when req gave none, as the HTTP client sends one.
 * A query without a path ("cor://h?x") asks for "/?x", as over HTTP.
 * Returns 0, or -ENOMEM with why (and nothing held); what it holds the
 * encoder checks when it is sent. */
static int
requestMake(const CorClientRequest* req, const CorUrl* u, Request* r, char* why,
            size_t whyLen)
{
    bool slash = u->target[0] == '?';
    size_t room = req->headerCount + 1;
    size_t size = room * sizeof(CorHeader) + slash + u->targetLen + 1;
    bool hasHost = false;
    bool typed = false;
    char* target;

    *r = (Request){ .headers = corChunkTake(&size) };
    if (r->headers == NULL) {
        snprintf(why, whyLen, "no memory for a request");
        return -ENOMEM;
    }
    r->blockSize = size;
    target = (char*)(r->headers + room);
    target[0] = '/';
    memcpy(target + slash, u->target, u->targetLen);
    target[slash + u->targetLen] = '\0';
    r->m = (CorCorMessage){ .verb = req->method != NULL ? req->method : "GET",
                            .path = target,
                            .headers = r->headers,
                            .body = req->body,
                            .bodyLen = req->bodyLen };
    for (unsigned i = 0; i < req->headerCount; i++) {
        const CorHeader* h = &req->headers[i];

        if (corHeaderIs(h, "Content-Type")) {
            free(r->contentType);
            r->contentType = strndup(h->value, h->valueLen);
            r->m.contentType = r->contentType;
            typed = true;
        } else {
            hasHost |= corHeaderIs(h, "Host");
            r->headers[r->m.headerCount++] = *h;
        }
    }
    if (typed && r->contentType == NULL) {
        snprintf(why, whyLen, "no memory for a request");
        requestFree(r);
        return -ENOMEM;
    }
    if (!hasHost) {
        r->headers[r->m.headerCount++] = (CorHeader){ "Host", 4, u->authority,
                                                      u->authorityLen };
    }
    return 0;
}

/* answer's store as res's: its headers, Content-Type in the room left
 * after them, and its body, NUL-terminated, are in it already. */
static void
storeTake(CorCorMessage* answer, CorClientResponse* res)
{
    CorHeader* headers = (CorHeader*)answer->headers;

    if (answer->contentType != NULL) {
        headers[answer->headerCount] = (CorHeader){
            .name = "Content-Type",
            .nameLen = 12,
            .value = answer->contentType,
            .valueLen = strlen(answer->contentType)
        };
    }
    res->headers = headers;
    res->headerCount = answer->headerCount + (answer->contentType != NULL);
    res->body = (char*)answer->body;
    res->bodyLen = answer->bodyLen;
    res->status = answer->status;
    res->store = answer->store;
    res->storeSize = answer->storeSize;
    answer->store = NULL;
}

/* answer into res: its store when it has room for Content-Type, else
 * its headers and Content-Type in one block and its body a NUL-terminated
 * copy. Returns 0, -EFBIG, -ENOMEM. */
static int
answerTake(CorCorMessage* answer, size_t maxBody, CorClientResponse* res)
{
    unsigned count = answer->headerCount + (answer->contentType != NULL);
    size_t size = 0;
    char* p;

    if (answer->bodyLen > maxBody) {
        snprintf(res->error, sizeof(res->error),
                 "a body of %zu bytes, over "
                 "the limit of %zu",
                 answer->bodyLen, maxBody);
        return -EFBIG;
    }
    if (answer->spare && answer->store != NULL) {
        storeTake(answer, res);
        return 0;
    }
    for (unsigned i = 0; i < answer->headerCount; i++) {
        size += answer->headers[i].nameLen + answer->headers[i].valueLen + 2;
    }
    size += answer->contentType != NULL ? strlen(answer->contentType) + 14 : 0;
    res->headers = calloc(count + 1, sizeof(CorHeader));
    res->head = p = malloc(size + 1);
    res->body = malloc(answer->bodyLen + 1);
    if (res->headers == NULL || res->head == NULL || res->body == NULL) {
        return -ENOMEM;
    }
    for (unsigned i = 0; i < count; i++) {
        CorHeader h = i < answer->headerCount
                          ? answer->headers[i]
                          : (CorHeader){ .name = "Content-Type",
                                         .nameLen = 12,
                                         .value = answer->contentType,
                                         .valueLen = strlen(
                                             answer->contentType) };

        res->headers[i] = (CorHeader){ .name = p,
                                       .nameLen = h.nameLen,
                                       .value = p + h.nameLen + 1,
                                       .valueLen = h.valueLen };
        memcpy(p, h.name, h.nameLen);
        p[h.nameLen] = '\0';
        memcpy(p + h.nameLen + 1, h.value, h.valueLen);
        p[h.nameLen + 1 + h.valueLen] = '\0';
        p += h.nameLen + h.valueLen + 2;
    }
    res->headerCount = count;
    if (answer->bodyLen > 0) {
        memcpy(res->body, answer->body, answer->bodyLen);
    }
    res->body[answer->bodyLen] = '\0';
    res->bodyLen = answer->bodyLen;
    res->status = answer->status;
    return 0;
}

/* The deadline of req: its total, or its first byte (an answer comes in
 * one frame: its first byte is nearly its last), whichever is sooner. */
static uint64_t
deadlineOf(const CorClientRequest* req)
{
    int ms = req->totalTimeoutMs;

    if (req->firstByteTimeoutMs > 0
        && (ms == 0 || req->firstByteTimeoutMs < ms)) {
        ms = req->firstByteTimeoutMs;
    }
    return ms > 0 ? corEvClockMs() + (uint64_t)ms : 0;
}

/* Make req's call up to its answer's head, into st and *answer (the
 * caller clears it; streamed, it ends st). Returns 0, or -errno with
 * res->error. May yield. */
static int
callMake(const CorClientRequest* req, CorClientResponse* res,
         CorCorCallState* st, CorCorMessage* answer)
{
    CorUrl u;
    CorCorCall c = { .url = &u,
                     .connectTimeoutMs = req->connectTimeoutMs,
                     .deadlineMs = deadlineOf(req) };
    CorCorOutcome out = { 0 };
    Request request;
    int rc;

    memset(res, 0, sizeof(*res));
    rc = corUrlParse(req->url, &u, res->error, sizeof(res->error));
    if (rc != 0) {
        return rc;
    }
    c.tls = strcmp(u.scheme, "cors") == 0;
    if (u.port == 0) {
        u.port = c.tls ? COR_CORS_PORT : COR_COR_PORT;
    }
    if ((rc = requestMake(req, &u, &request, res->error, sizeof(res->error)))
        != 0) {
        return rc;
    }
    c.request = &request.m;
    do {
        res->retried = out.retry;
        out = (CorCorOutcome){ 0 };
        *st = (CorCorCallState){ 0 };
        rc = corRestMayPark()
                 ? corCorCallOnLoop(&c, st, answer, &out, res->error,
                                    sizeof(res->error))
                 : corCorCallOnThread(&c, st, answer, &out, res->error,
                                      sizeof(res->error));
    } while (rc == -ECONNRESET && out.retry && !res->retried);
    res->reused = out.reused;
    res->sent = out.sent;
    requestFree(&request);
    return rc;
}

static ssize_t
callRead(CorCorCallState* st, void* buf, size_t len, int timeoutMs,
         CorClientResponse* res)
{
    return st->onLoop ? corCorLoopRead(st, buf, len, timeoutMs, res->error,
                                       sizeof(res->error))
                      : corCorThreadRead(st, buf, len, timeoutMs, res->error,
                                         sizeof(res->error));
}

static void
callEnd(CorCorCallState* st)
{
    if (st->onLoop) {
        corCorLoopEnd(st);
    } else {
        corCorThreadEnd(st);
    }
}

/* A streamed body read whole into *b, up to maxBody bytes (-EFBIG past
 * them), within req's deadline; st ends. Returns 0 or -errno. */
static int
bodyGather(const CorClientRequest* req, CorCorCallState* st, size_t maxBody,
           CorBuf* b, CorClientResponse* res)
{
    uint64_t deadlineMs = deadlineOf(req);
    ssize_t n;

    do {
        uint64_t now = corEvClockMs();

        if (corBufReserve(b, 16384) != 0) {
            n = -ENOMEM;
            break;
        }
        n = callRead(st, b->data + b->len, b->cap - b->len,
                     deadlineMs == 0    ? -1
                     : deadlineMs > now ? (int)(deadlineMs - now)
                                        : 0,
                     res);
        b->len += n > 0 ? (size_t)n : 0;
        if (b->len > maxBody) {
            snprintf(res->error, sizeof(res->error),
                     "a body over the limit of %zu bytes", maxBody);
            n = -EFBIG;
        }
    } while (n > 0);
    callEnd(st);
    return (int)n;
}

int
corCorFetch(const CorClientRequest* req, CorClientResponse* res)
{
    size_t maxBody = req->maxBodyBytes > 0 ? req->maxBodyBytes
                                           : COR_CLIENT_BODY_MAX;
    CorCorMessage answer = { 0 };
    CorCorCallState st;
    CorBuf body = { 0 };
    int rc = callMake(req, res, &st, &answer);

    if (rc == 0 && st.streamed) {
        rc = bodyGather(req, &st, maxBody, &body, res);
        /* Copied out with the head (answerTake), not kept in its store. */
        answer.body = body.data;
        answer.bodyLen = body.len;
        answer.spare = false;
    }
    if (rc == 0) {
        rc = answerTake(&answer, maxBody, res);
    }
    corCorMessageClear(&answer);
    corBufFree(&body);
    if (rc != 0) {
        corClientResponseFree(res);
        res->status = 0;
    }
    return rc;
}

/* ---- Read as it comes (corClientOpen) ------------------------------------ */

typedef struct {
    CorCorCallState st;
    CorClientResponse* res; /* its errors go there */
    size_t given;           /* of a whole body, res's */
} Exchange;

static int
exchangeOpen(void* x, const CorClientRequest* req, CorClientResponse* res)
{
    Exchange* e = x;
    CorCorMessage answer = { 0 };
    int rc = callMake(req, res, &e->st, &answer);

    e->res = res;
    e->given = 0;
    if (rc == 0) {
        /* A streamed read has no limit of its own, as over HTTP. */
        rc = answerTake(&answer,
                        req->maxBodyBytes > 0 ? req->maxBodyBytes : SIZE_MAX,
                        res);
    }
    corCorMessageClear(&answer);
    if (rc == 0 && e->st.streamed) {
        /* No body in memory: it comes. */
        if (res->store == NULL) {
            free(res->body);
        }
        res->body = NULL;
    }
    if (rc != 0) {
        if (e->st.streamed) {
            callEnd(&e->st);
        }
        corClientResponseFree(res);
        res->status = 0;
    }
    return rc;
}

static ssize_t
exchangeRead(void* x, void* buf, size_t len, int timeoutMs)
{
    Exchange* e = x;
    size_t n;

    if (len == 0) {
        return -EINVAL;
    }
    if (e->st.streamed) {
        return callRead(&e->st, buf, len, timeoutMs, e->res);
    }
    n = e->res->bodyLen - e->given < len ? e->res->bodyLen - e->given : len;
    memcpy(buf, e->res->body + e->given, n);
    e->given += n;
    return (ssize_t)n;
}

static bool
exchangeDone(const void* x)
{
    const Exchange* e = x;

    return e->st.streamed
               ? e->st.ended && e->st.rc == 0 && corBufPending(&e->st.data) == 0
               : e->given == e->res->bodyLen;
}

static void
exchangeClose(void* x)
{
    Exchange* e = x;

    if (e->st.streamed) {
        callEnd(&e->st);
    }
}

const CorClientOps corCorStreamOps = {
    .size = sizeof(Exchange),
    .open = exchangeOpen,
    .read = exchangeRead,
    .done = exchangeDone,
    .close = exchangeClose,
};
