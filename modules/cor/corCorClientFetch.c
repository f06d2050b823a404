/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One cor:// exchange as corClientFetch makes one: the request turned
 * into a REQUEST tree once, made on the loop (a coroutine's) or on the
 * thread, sent once more on a new connection when one that had served was
 * found closed, and the RESPONSE turned into the client's response (its
 * Content-Type among the headers again), which the caller frees with
 * corClientResponseFree.
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
    memcpy(res->body, answer->body, answer->bodyLen);
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

int
corCorFetch(const CorClientRequest* req, CorClientResponse* res)
{
    CorUrl u;
    CorCorMessage answer = { 0 };
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
        rc = corRestMayPark()
                 ? corCorCallOnLoop(&c, &answer, &out, res->error,
                                    sizeof(res->error))
                 : corCorCallOnThread(&c, &answer, &out, res->error,
                                      sizeof(res->error));
    } while (rc == -ECONNRESET && out.retry && !res->retried);
    res->reused = out.reused;
    res->sent = out.sent;
    requestFree(&request);
    if (rc == 0) {
        rc = answerTake(&answer,
                        req->maxBodyBytes > 0 ? req->maxBodyBytes
                                              : COR_CLIENT_BODY_MAX,
                        res);
    }
    corCorMessageClear(&answer);
    if (rc != 0) {
        corClientResponseFree(res);
        res->status = 0;
    }
    return rc;
}
