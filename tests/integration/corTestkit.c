/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A module for the integration tests: handlers that echo, send many bytes,
 * block the loop, or never answer.
 */
#include "cor.h"

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
 * file ?log= names. */
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

    corRestWaitFd(-1, 0, ms ? atoi(ms) : 50, &revents);
    f = log ? fopen(log, "a") : NULL;
    if (f != NULL) {
        fprintf(f, "%.*s done\n", (int)r->pathLen, r->path);
        fclose(f);
    }
}

/* Waits ?ms= (a coroutine; a worker with ?worker=1), then answers with
 * every byte of its input: a request must own what it reads, whatever
 * became of its connection meanwhile. */
static bool
waitOnLoop(const CorRequest* r)
{
    return corRequestQuery((CorRequest*)r, "worker") == NULL;
}

static void
waitEchoServe(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");
    size_t len = r->methodLen + r->pathLen + r->bodyLen + 8;
    short revents;
    char* out;
    size_t n;

    corRestWaitFd(-1, 0, ms ? atoi(ms) : 100, &revents);
    for (unsigned i = 0; i < r->headerCount; i++) {
        len += r->headers[i].nameLen + r->headers[i].valueLen + 4;
    }
    out = corRequestAlloc(r, len);
    if (out == NULL) {
        corRespond(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    n = (size_t)sprintf(out, "%.*s %.*s\n", (int)r->methodLen, r->method,
                        (int)r->pathLen, r->path);
    for (unsigned i = 0; i < r->headerCount; i++) {
        n += (size_t)sprintf(out + n, "%.*s: %.*s\n",
                             (int)r->headers[i].nameLen, r->headers[i].name,
                             (int)r->headers[i].valueLen,
                             r->headers[i].value);
    }
    memcpy(out + n, r->body, r->bodyLen);
    corRespondStatic(r, 200, "text/plain", out, n + r->bodyLen);
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
        || corHandlerAdd(m, &(CorHandler){ .name = "waitecho",
                                           .serve = waitEchoServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = waitOnLoop })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "file",
                                           .serve = fileServe }) != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "stream",
                                           .serve = streamServe,
                                           .run = COR_RUN_WORKER }) != 0
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
