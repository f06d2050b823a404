/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Start now, collect later: an HTTP exchange (corHttpClient.c) run beside
 * the code that started it, so that a handler that asks N servers waits as
 * long as the slowest, not the sum.
 *
 * Where it runs. Started in a coroutine of a loop, it is a coroutine of
 * that loop (corCoLoopSpawn): it costs a stack from the loop's cache and
 * its waits are the loop's. Anywhere else (a worker thread, blocking
 * mode, a loop past its coroutine cap) it is a thread of its own, whose
 * waits poll() through the same connection layer: a worker's fan-out then
 * overlaps too (the threads are kept for the next exchanges, see
 * callThread). Rejected: running the exchange lazily at the wait (a
 * fan-out on a worker would take the sum), and the worker pool (an
 * exchange queued behind the very worker that waits for it deadlocks a
 * pool of one); a state machine over one poll() would need a second,
 * callback-driven copy of the exchange.
 *
 * Ending it. The exchange tells its end through an eventfd, which the
 * collector waits on with corRestWaitFd: the same wait in a coroutine and
 * on a thread, and one that the collector's own cancel (its request's, or
 * a stop) ends. Each call has a CorRestCancel of its own, to which its
 * exchange's waits are bound; a call is cancelled (corHttpClientCancel, a
 * wait that was cancelled, its request cancelled or finished) by
 * cancelling that and marking it orphaned, and whichever of the two sides
 * comes last frees it: the collector when the exchange had ended, the
 * exchange when it ends orphaned. callsLock guards done, orphaned and the
 * request's list, and is never held across a wait.
 *
 * A request keeps the calls it started and has not collected in
 * r->clientCalls: corRequest.c cancels them when the request is cancelled
 * (on the loop: a coroutine call is of the same loop, a thread's cancel
 * is an eventfd) and abandons them when its phase ends.
 */
#include "corHttpClient.h"
#include "corCoreInt.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define CALL_THREAD_STACK ((size_t)256 * 1024)
/* The most threads that run exchanges off the loops; more wait in line. */
#define CALL_THREADS_MAX 256

struct CorHttpClientCall {
    CorHttpClientRequest req;   /* a copy: its strings point into copy */
    CorHttpClientResponse res;
    int rc;
    CorRestCancel cancel;
    int doneFd;                 /* eventfd, written when the exchange ends */
    bool done;                  /* under callsLock */
    bool orphaned;              /* under callsLock: nobody collects it */
    CorRequest* owner;          /* the request whose list holds it */
    struct CorHttpClientCall* prev;
    struct CorHttpClientCall* next;
    struct CorHttpClientCall* queued;   /* the line to the threads */
    char copy[];
};

static pthread_mutex_t callsLock = PTHREAD_MUTEX_INITIALIZER;

/* The threads of exchanges off the loops. They are kept for the next
 * exchange rather than ended, since a thread that waited under a cancel
 * keeps an eventfd for good (corRestWait.c): their number is the most
 * exchanges that ran off the loops at once. */
static pthread_mutex_t lineLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lineCond = PTHREAD_COND_INITIALIZER;
static CorHttpClientCall* lineHead;
static CorHttpClientCall* lineTail;
static unsigned lineLength;
static unsigned threadCount;
static unsigned threadsIdle;

static void
callFree(CorHttpClientCall* call)
{
    corHttpClientResponseFree(&call->res);
    close(call->doneFd);
    free(call);
}

/* Copy what req points to into one block. */
static CorHttpClientCall*
callNew(const CorHttpClientRequest* req)
{
    const char* method = req->method ? req->method : "GET";
    size_t urlLen = req->url ? strlen(req->url) : 0;
    size_t size = sizeof(CorHttpClientCall) + strlen(method) + 1 + urlLen + 1
                  + req->bodyLen + req->headerCount * sizeof(CorHeader)
                  + _Alignof(CorHeader);
    CorHttpClientCall* call;
    CorHeader* headers;
    char* p;

    for (unsigned i = 0; i < req->headerCount; i++) {
        size += req->headers[i].nameLen + req->headers[i].valueLen;
    }
    call = calloc(1, size);
    if (call == NULL) {
        return NULL;
    }
    call->doneFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (call->doneFd < 0) {
        free(call);
        return NULL;
    }
    call->req = *req;
    p = call->copy;
    headers = (CorHeader*)(void*)(((uintptr_t)p + _Alignof(CorHeader) - 1)
                                  & ~(uintptr_t)(_Alignof(CorHeader) - 1));
    p = (char*)(headers + req->headerCount);
    for (unsigned i = 0; i < req->headerCount; i++) {
        headers[i] = req->headers[i];
        headers[i].name = memcpy(p, req->headers[i].name,
                                 req->headers[i].nameLen);
        p += req->headers[i].nameLen;
        if (req->headers[i].valueLen > 0) {
            headers[i].value = memcpy(p, req->headers[i].value,
                                      req->headers[i].valueLen);
            p += req->headers[i].valueLen;
        }
    }
    call->req.headers = headers;
    call->req.method = strcpy(p, method);
    p += strlen(method) + 1;
    if (req->url != NULL) {
        call->req.url = memcpy(p, req->url, urlLen + 1);
        p += urlLen + 1;
    }
    if (req->bodyLen > 0) {
        call->req.body = memcpy(p, req->body, req->bodyLen);
    }
    return call;
}

/* Link call into its request's list, or unlink it; under callsLock. */
static void
callLink(CorHttpClientCall* call, CorRequest* r)
{
    call->owner = r;
    call->next = r->clientCalls;
    if (r->clientCalls != NULL) {
        r->clientCalls->prev = call;
    }
    r->clientCalls = call;
}

static void
callUnlink(CorHttpClientCall* call)
{
    if (call->owner == NULL) {
        return;
    }
    if (call->prev != NULL) {
        call->prev->next = call->next;
    } else {
        call->owner->clientCalls = call->next;
    }
    if (call->next != NULL) {
        call->next->prev = call->prev;
    }
    call->owner = NULL;
    call->prev = call->next = NULL;
}

/* The exchange, wherever it runs; then its end is told, or, orphaned, it
 * frees itself. */
static void
callRun(void* arg)
{
    CorHttpClientCall* call = arg;
    uint64_t one = 1;
    bool orphaned;

    corRestCancelBind(&call->cancel);
    call->rc = corHttpClientFetch(&call->req, &call->res);
    corRestCancelBind(NULL);
    pthread_mutex_lock(&callsLock);
    call->done = true;
    orphaned = call->orphaned;
    if (!orphaned && write(call->doneFd, &one, sizeof(one)) < 0) {
        /* An eventfd at its maximum is readable anyway. */
    }
    pthread_mutex_unlock(&callsLock);
    if (orphaned) {
        callFree(call);
    }
}

static void*
callThread(void* arg)
{
    (void)arg;
    pthread_mutex_lock(&lineLock);
    for (;;) {
        CorHttpClientCall* call;

        while (lineHead == NULL) {
            threadsIdle++;
            pthread_cond_wait(&lineCond, &lineLock);
            threadsIdle--;
        }
        call = lineHead;
        lineHead = call->queued;
        if (lineHead == NULL) {
            lineTail = NULL;
        }
        lineLength--;
        pthread_mutex_unlock(&lineLock);
        callRun(call);
        pthread_mutex_lock(&lineLock);
    }
    return NULL;
}

/* Queue call for the threads, starting one when none is free. */
static int
callQueue(CorHttpClientCall* call)
{
    pthread_attr_t attr;
    pthread_t thread;
    int rc = 0;

    pthread_mutex_lock(&lineLock);
    if (lineLength + 1 > threadsIdle && threadCount < CALL_THREADS_MAX) {
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, CALL_THREAD_STACK);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&thread, &attr, callThread, NULL);
        pthread_attr_destroy(&attr);
        if (rc == 0) {
            threadCount++;
        } else if (threadCount > 0) {
            rc = 0;     /* the threads there take it in turn */
        }
    }
    if (rc == 0) {
        call->queued = NULL;
        if (lineTail != NULL) {
            lineTail->queued = call;
        } else {
            lineHead = call;
        }
        lineTail = call;
        lineLength++;
        pthread_cond_signal(&lineCond);
    }
    pthread_mutex_unlock(&lineLock);
    return -rc;
}

/* Give call up; under callsLock. Returns whether the caller frees it (it
 * had ended). */
static bool
callAbandon(CorHttpClientCall* call)
{
    callUnlink(call);
    if (call->done) {
        return true;
    }
    call->orphaned = true;
    corRestCancel(&call->cancel);
    return false;
}

/* Run call beside the caller: a coroutine of this loop, else a thread. */
static int
callLaunch(CorHttpClientCall* call)
{
    /* Not on a coroutine's stack where its waits must poll (an inline
     * handler there): that is not the coroutine's work. */
    bool yield = corRestYieldAllow(true);

    corRestYieldAllow(yield);
    if (yield && corCoCurrent() != NULL && corEvLoopCurrent() != NULL
        && corCoLoopSpawn(corEvLoopCurrent(), callRun, call) == 0) {
        return 0;
    }
    return callQueue(call);
}

CorHttpClientCall*
corHttpClientStart(const CorHttpClientRequest* req, int* errP)
{
    CorRequest* r = corRequestCurrent();
    CorHttpClientCall* call;
    int rc;

    if (r != NULL && corRequestCancelled(r)) {
        rc = -ECANCELED;
        goto failed;
    }
    call = callNew(req);
    if (call == NULL) {
        rc = -ENOMEM;
        goto failed;
    }
    if (r != NULL) {
        pthread_mutex_lock(&callsLock);
        callLink(call, r);
        pthread_mutex_unlock(&callsLock);
    }
    /* A coroutine runs at once, maybe to its end: it is linked first. */
    rc = callLaunch(call);
    if (rc < 0) {
        pthread_mutex_lock(&callsLock);
        callUnlink(call);
        pthread_mutex_unlock(&callsLock);
        callFree(call);
        corLog(COR_LOG_ERROR, "HTTP client: no thread for an exchange: %s",
               strerror(-rc));
        goto failed;
    }
    return call;

failed:
    if (errP != NULL) {
        *errP = rc;
    }
    return NULL;
}

int
corHttpClientWait(CorHttpClientCall* call, CorHttpClientResponse* res)
{
    bool done;
    bool mine;
    short revents;
    int rc;

    for (;;) {
        pthread_mutex_lock(&callsLock);
        done = call->done;
        pthread_mutex_unlock(&callsLock);
        if (done) {
            break;
        }
        rc = corRestWaitFd(call->doneFd, POLLIN, -1, &revents);
        if (rc < 0) {
            pthread_mutex_lock(&callsLock);
            mine = callAbandon(call);
            pthread_mutex_unlock(&callsLock);
            if (mine) {
                callFree(call);
            }
            memset(res, 0, sizeof(*res));
            snprintf(res->error, sizeof(res->error), "cancelled while "
                     "waiting for an exchange");
            return -ECANCELED;
        }
    }
    pthread_mutex_lock(&callsLock);
    callUnlink(call);
    pthread_mutex_unlock(&callsLock);
    *res = call->res;
    memset(&call->res, 0, sizeof(call->res));
    rc = call->rc;
    callFree(call);
    return rc;
}

void
corHttpClientCancel(CorHttpClientCall* call)
{
    bool mine;

    pthread_mutex_lock(&callsLock);
    mine = callAbandon(call);
    pthread_mutex_unlock(&callsLock);
    if (mine) {
        callFree(call);
    }
}

void
corHttpClientRequestCancel(CorRequest* r)
{
    /* Read under the lock: a worker may be starting one now. */
    pthread_mutex_lock(&callsLock);
    for (CorHttpClientCall* call = r->clientCalls; call != NULL;
         call = call->next) {
        corRestCancel(&call->cancel);
    }
    pthread_mutex_unlock(&callsLock);
}

void
corHttpClientRequestEnd(CorRequest* r)
{
    pthread_mutex_lock(&callsLock);
    while (r->clientCalls != NULL) {
        CorHttpClientCall* call = r->clientCalls;

        if (callAbandon(call)) {
            /* Ended, never collected: freed outside the lock below. */
            call->orphaned = true;
            pthread_mutex_unlock(&callsLock);
            callFree(call);
            pthread_mutex_lock(&callsLock);
        }
    }
    pthread_mutex_unlock(&callsLock);
}
