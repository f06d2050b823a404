/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A module for the integration tests: handlers that echo, send many bytes,
 * block the loop, or never answer.
 */
#include "cor.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void
echoServe(CorRequest* r)
{
    corRespond(r, 200, "application/octet-stream", r->body, r->bodyLen);
}

static void
bytesServe(CorRequest* r)
{
    const char* n = corRequestQuery(r, "n");
    size_t len = n ? strtoul(n, NULL, 10) : 1024;
    char* body = corRequestAlloc(r, len ? len : 1);

    if (body == NULL) {
        corRespond(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    memset(body, 'x', len);
    corRespondStatic(r, 200, "application/octet-stream", body, len);
}

/* Blocks its thread: the stall warning's case when it runs inline. */
static void
blockServe(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");

    usleep((useconds_t)(ms ? atoi(ms) : 200) * 1000);
    corRespond(r, 200, "text/plain", "blocked\n", 8);
}

/* Returns without answering: the core must answer for it. */
static void
neverServe(CorRequest* r)
{
    (void)r;
}

/* Takes the generation down: the master must replace it. */
static void
crashServe(CorRequest* r)
{
    (void)r;
    abort();
}

static int
testkitInit(CorModule* m, const CorConf* conf)
{
    (void)conf;
    if (corHandlerAdd(m, &(CorHandler){ .name = "echo", .serve = echoServe,
                                        .run = COR_RUN_INLINE }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "bytes",
                                           .serve = bytesServe }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "block",
                                           .serve = blockServe }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "crash",
                                           .serve = crashServe }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "never",
                                           .serve = neverServe,
                                           .run = COR_RUN_COROUTINE }) != 0) {
        return -1;
    }
    return 0;
}

COR_MODULE(testkit, .init = testkitInit);
