/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's handler "gated": a streamed answer whose end a test holds
 * back, so that it can tell by events (not by sleeps) that a proxy passed
 * the first bytes on before its upstream finished. ?pieces= pieces of
 * ?bytes= each (piece i all of the letter 'a' + i % 26) are written from
 * a thread of its own; after the first it waits (30 s at most) for the
 * file ?gate= to exist; the answer then ends whole, or cut (?cut=1).
 */
#include "cor.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void corTestkitGatedAdd(CorModule* m, int* rc);

typedef struct {
    CorRequest* r;
    int pieces;
    size_t bytes;
    bool cut;
    char gate[256];
} GatedJob;

/* Until the gate's file exists: what the test makes once it saw the
 * first piece. */
static void
gateWait(const char* gate)
{
    for (int i = 0; gate[0] != '\0' && i < 3000 && access(gate, F_OK) != 0;
         i++) {
        usleep(10000);
    }
}

static void*
gatedPieces(void* arg)
{
    GatedJob* job = arg;
    char* piece = malloc(job->bytes);
    int i = 0;

    for (; piece != NULL && i < job->pieces; i++) {
        memset(piece, 'a' + i % 26, job->bytes);
        if (corResponseStreamWrite(job->r, piece, job->bytes) != 0) {
            break;
        }
        if (i == 0) {
            gateWait(job->gate);
        }
    }
    if (i < job->pieces || job->cut) {
        corResponseStreamAbort(job->r);
    } else {
        corResponseStreamEnd(job->r);
    }
    free(piece);
    free(job);
    return NULL;
}

static void
gatedServe(CorRequest* r)
{
    const char* pieces = corRequestQuery(r, "pieces");
    const char* bytes = corRequestQuery(r, "bytes");
    const char* gate = corRequestQuery(r, "gate");
    GatedJob* job = calloc(1, sizeof(*job));
    pthread_t thread;

    if (job == NULL || corResponseStreamStart(r, 200, "text/plain") != 0) {
        free(job);
        return;
    }
    job->r = r;
    job->pieces = pieces != NULL ? atoi(pieces) : 3;
    job->bytes = bytes != NULL ? (size_t)atol(bytes) : 1000;
    job->cut = corRequestQuery(r, "cut") != NULL;
    snprintf(job->gate, sizeof(job->gate), "%s", gate != NULL ? gate : "");
    if (pthread_create(&thread, NULL, gatedPieces, job) == 0) {
        pthread_detach(thread);
        return;
    }
    free(job);
    corResponseStreamAbort(r);
}

void
corTestkitGatedAdd(CorModule* m, int* rc)
{
    if (*rc == 0) {
        *rc = corHandlerAdd(m, &(CorHandler){ .name = "gated",
                                              .serve = gatedServe });
    }
}
