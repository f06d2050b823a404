/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A streamed request body's insides, shared by its two sides:
 * corRequestBody.c (the protocol puts, the HTTP client watches, the
 * request's release frees), corRequestBodyTake.c (the handler takes) and
 * corRequestBodySpool.c (the core gathers it whole for a handler that
 * takes it so, in a file past limits.body_memory). Never included from
 * outside them.
 */
#ifndef COR_REQUEST_BODY_IN_H
#define COR_REQUEST_BODY_IN_H

#include "corCoreInt.h"
#include "corKit.h"

#include <pthread.h>

/* Owned by its request, from corRequestBodyBegin to the request's end. */
struct CorBodyIn {
    pthread_mutex_t lock;
    CorRequest* r;
    CorBuf buf;          /* what came and was not taken */
    int end;             /* 0: coming; 1: whole; -errno: failed */
    int wakeFd;          /* an eventfd once a reader waited, or -1 */
    size_t consumed;     /* taken, not told to the protocol yet */
    bool consumedPosted; /* the task that tells it is due */
    CorEvTask task;
    CorBodyWatchFn watch; /* on the loop, after each put */
    void* watchArg;
    int64_t lengthSaid; /* what the protocol said it brings, or -1 */
    /* Gathered whole before a handler that does not stream it
     * (corRequestBodySpool.c): */
    bool whole;                 /* r->body holds all of it */
    size_t told;                /* told to the protocol as taken */
    int spoolFd;                /* its file past limits.body_memory, or -1 */
    void* map;                  /* r->body, the file mapped, or NULL */
    CorBodyGatheredFn gathered; /* called once it came (or failed) */
    void* gatheredArg;
    int gatherRc; /* what it is told */
    CorEvSoon gatherSoon;
};

/* Free what corRequestBodySpool.c holds of in: the mapping, the file. */
void corRequestBodySpoolFree(CorBodyIn* in);

#endif
