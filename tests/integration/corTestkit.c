/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A module for the integration tests: handlers that echo, send many bytes,
 * block the loop, never answer, outlive their deadline, or report what
 * the core told them.
 */
#include "cor.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
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

/* Sends the file ?path= names (a test's own file), with sendfile. */
static void
fileServe(CorRequest* r)
{
    const char* path = corRequestQuery(r, "path");
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;

    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        corRespond(r, 404, "text/plain", "no file\n", 8);
        return;
    }
    corRespondFile(r, 200, "application/octet-stream", fd, 0,
                   (size_t)st.st_size);
}

/* Streams ?n= pieces "piece K\n", 5 ms apart, from the thread it runs on
 * (a worker) or, with ?later=1, from a thread of its own after it
 * returned. */
typedef struct {
    CorRequest* r;
    int pieces;
} StreamJob;

static void*
streamPieces(void* arg)
{
    StreamJob* job = arg;
    char piece[32];

    for (int i = 0; i < job->pieces; i++) {
        int n = snprintf(piece, sizeof(piece), "piece %d\n", i);

        if (corResponseStreamWrite(job->r, piece, (size_t)n) != 0) {
            break;
        }
        usleep(5000);
    }
    corResponseStreamEnd(job->r);
    free(job);
    return NULL;
}

static void
streamServe(CorRequest* r)
{
    const char* n = corRequestQuery(r, "n");
    const char* later = corRequestQuery(r, "later");
    StreamJob* job = malloc(sizeof(*job));
    pthread_t thread;

    if (job == NULL || corResponseStreamStart(r, 200, "text/plain") != 0) {
        free(job);
        return;
    }
    job->r = r;
    job->pieces = n ? atoi(n) : 5;
    if (later != NULL && pthread_create(&thread, NULL, streamPieces, job)
                             == 0) {
        pthread_detach(thread);
        return;
    }
    streamPieces(job);
}

/* The post-response phase: after the answer is out, waits ?ms= (as a
 * notification to a slow endpoint would) and appends "PATH done" to the
 * file ?log= names, or "PATH cancelled" when its wait was cancelled. */
static void
notifyServe(CorRequest* r)
{
    corRespond(r, 200, "text/plain", "accepted\n", 9);
}

static void
notifyFinish(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");
    const char* log = corRequestQuery(r, "log");
    short revents;
    FILE* f;

    int rc = corRestWaitFd(-1, 0, ms ? atoi(ms) : 50, &revents);

    f = log ? fopen(log, "a") : NULL;
    if (f != NULL) {
        fprintf(f, "%.*s %s\n", (int)r->pathLen, r->path,
                rc == 0 ? "done" : "cancelled");
        fclose(f);
    }
}

/* Waits ?ms= (10 s by default) past its own deadline of 300 ms. */
static void
deadlineServe(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");
    short revents;

    if (corRestWaitFd(-1, 0, ms ? atoi(ms) : 10000, &revents) < 0) {
        corRespondf(r, 503, "text/plain", "wait failed: %s\n",
                    strerror(errno));
        return;
    }
    corRespond(r, 200, "text/plain", "waited\n", 7);
}

/* Inline: whether corRequestCurrent() is this request, and with ?wait=1
 * what a short wait returns (an inline handler that waits polls: 0). */
static void
currentServe(CorRequest* r)
{
    const char* wait = corRequestQuery(r, "wait");
    short revents;
    int rc = 0;

    if (wait != NULL) {
        rc = corRestWaitFd(-1, 0, 10, &revents);
    }
    corRespondf(r, 200, "text/plain", "current %s wait %d\n",
                corRequestCurrent() == r ? "yes" : "no", rc);
}

/* What corResponseHeader makes of a good header, a value that would
 * inject one, and a name that is not a token. */
static void
headerServe(CorRequest* r)
{
    int ok = corResponseHeader(r, "X-Ok", "fine");
    int injected = corResponseHeader(r, "X-Bad", "a\r\nSet-Cookie: evil=1");
    int badName = corResponseHeader(r, "Bad Name", "v");

    corRespondf(r, 200, "text/plain", "%d %d %d\n", ok, injected, badName);
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
    /* A slow start, for what the master does while a generation starts. */
    uint64_t delayMs = corConfDurationMs(conf, "init_delay", 0, 0, 60000,
                                         corModuleErrors(m));

    usleep((useconds_t)delayMs * 1000);
    if (corHandlerAdd(m, &(CorHandler){ .name = "echo", .serve = echoServe,
                                        .run = COR_RUN_INLINE }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "bytes",
                                           .serve = bytesServe }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "block",
                                           .serve = blockServe }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "notify",
                                           .serve = notifyServe,
                                           .finish = notifyFinish,
                                           .finishRun = COR_RUN_COROUTINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "file",
                                           .serve = fileServe }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "stream",
                                           .serve = streamServe,
                                           .run = COR_RUN_WORKER }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "deadline",
                                           .serve = deadlineServe,
                                           .run = COR_RUN_COROUTINE,
                                           .timeoutMs = 300 }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "current",
                                           .serve = currentServe,
                                           .run = COR_RUN_INLINE }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "header",
                                           .serve = headerServe,
                                           .run = COR_RUN_INLINE }) != 0
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
