/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client of every scheme (corClient.h): one exchange handed to the
 * fetch of its URL's scheme (corScheme.c; http and https are the HTTP
 * floor's, cor and cors modules/cor's), so that the core names no
 * protocol; and an exchange started now and collected later, run beside
 * the code that started it, so that a handler that asks N servers waits
 * as long as the slowest, not the sum.
 *
 * Where it runs: beside the caller (corBeside.c), a coroutine of the
 * caller's loop when the caller is one of its coroutines, else a kept
 * thread whose waits poll() through the same connection layer, so that a
 * worker's fan-out overlaps too. Not started at the loop's next iteration
 * from a loop's own stack: an inline caller that waited for it there
 * would wait for the loop it blocks. Rejected: running the exchange
 * lazily at the wait (a fan-out on a worker would take the sum); a state
 * machine over one poll() would need a second, callback-driven copy of
 * the exchange.
 *
 * Ending it. The exchange tells its end through an eventfd, which the
 * collector waits on with corRestWaitFd: the same wait in a coroutine and
 * on a thread, and one that the collector's own cancel (its request's, or
 * a stop) ends. The exchange's waits are bound to the cancel of its
 * CorBeside; a call is cancelled (corClientCancel, a wait that was
 * cancelled, its request cancelled or finished) by cancelling that and
 * marking it orphaned, and whichever of the two sides
 * comes last frees it: the collector when the exchange had ended, the
 * exchange when it ends orphaned. callsLock guards done and orphaned, and
 * is never held across a wait.
 *
 * A call started by a request is one of the request's cleanups (the
 * core's list, corCoreInt.h) until it is collected: the core cancels it
 * when the request is cancelled (on the loop: a coroutine call is of the
 * same loop, a thread's cancel is an eventfd) and ends it, abandoned,
 * when the request's phase is over. Locks: callsLock, then the list's.
 */
#include "corCoreInt.h"
#include "corKit.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

const CorScheme*
corClientScheme(const CorClientRequest* req, CorClientResponse* res)
{
    const char* url = req->url;
    const CorScheme* s = req->target != NULL ? req->target->scheme
                                             : corSchemeOf(url);
    CorUrl u;

    memset(res, 0, sizeof(*res));
    if (s != NULL && s->fetch != NULL) {
        return s;
    }
    if (corUrlParse(url, &u, res->error, sizeof(res->error)) == 0) {
        snprintf(res->error, sizeof(res->error),
                 "URL %.80s: no client "
                 "takes %.20s://",
                 url, u.scheme);
    }
    return NULL;
}

CorClientTarget*
corClientTargetMake(const char* url, char* why, size_t whyLen)
{
    size_t len = strlen(url);
    CorClientTarget* t = malloc(sizeof(*t) + len + 1);

    if (t == NULL) {
        snprintf(why, whyLen, "no memory");
        return NULL;
    }
    memcpy(t->text, url, len + 1);
    t->len = len;
    t->scheme = corSchemeOf(url);
    if (corUrlParse(t->text, &t->url, why, whyLen) != 0) {
        free(t);
        return NULL;
    }
    if (t->url.targetLen != 1 || t->url.target[0] != '/' || url[len - 1] == '/'
        || t->scheme == NULL || t->scheme->fetch == NULL) {
        snprintf(why, whyLen,
                 "URL %.80s: not scheme://host[:port] of a scheme that "
                 "fetches",
                 url);
        free(t);
        return NULL;
    }
    return t;
}

void
corClientTargetFree(CorClientTarget* t)
{
    free(t);
}

int
corClientFetch(const CorClientRequest* req, CorClientResponse* res)
{
    const CorScheme* s = corClientScheme(req, res);

    return s != NULL ? s->fetch(req, res) : -EINVAL;
}

int
corClientNotify(CorModule* m, const CorNotification* n, char* why,
                size_t whyLen)
{
    CorHeader headers[COR_NOTIFY_HEADERS_MAX + 1];
    unsigned count = n->headerCount;
    CorClientResponse res;
    int rc;

    (void)m;
    if (count > 0) {
        memcpy(headers, n->headers, count * sizeof(*headers));
    }
    if (n->contentType != NULL) {
        headers[count++] = (CorHeader){ "Content-Type", 12, n->contentType,
                                        strlen(n->contentType) };
    }
    rc = corClientFetch(&(CorClientRequest){ .method = n->method,
                                             .url = n->url,
                                             .headers = headers,
                                             .headerCount = count,
                                             .body = n->body,
                                             .bodyLen = n->bodyLen,
                                             .totalTimeoutMs = n->timeoutMs },
                        &res);
    if (rc < 0) {
        snprintf(why, whyLen, "%s", res.error);
    } else if (res.status < 200 || res.status > 299) {
        snprintf(why, whyLen, "answered %d", res.status);
        rc = -EPROTO;
    }
    corClientResponseFree(&res);
    return rc;
}

const CorHeader*
corClientHeader(const CorClientResponse* res, const char* name)
{
    return corHeadersFind(res->headers, res->headerCount, name);
}

void
corClientResponseFree(CorClientResponse* res)
{
    if (res->store != NULL) {
        corChunkGive(res->store, res->storeSize);
        res->store = NULL;
    } else {
        free(res->headers);
        free(res->body);
    }
    free(res->head);
    free(res->trailers);
    free(res->trailerHead);
    res->trailers = NULL;
    res->trailerHead = NULL;
    res->trailerCount = 0;
    res->headers = NULL;
    res->body = NULL;
    res->head = NULL;
    res->headerCount = 0;
    res->bodyLen = 0;
}

struct CorClientCall {
    CorClientRequest req; /* a copy: its strings point into copy */
    CorClientResponse res;
    int rc;
    CorBeside beside;          /* where it runs, and its cancel */
    int doneFd;                /* eventfd, written when the exchange ends */
    bool done;                 /* under callsLock */
    bool orphaned;             /* under callsLock: nobody collects it */
    CorRequestCleanup cleanup; /* in the starting request's list */
    char copy[];
};

static pthread_mutex_t callsLock = PTHREAD_MUTEX_INITIALIZER;

static void
callFree(CorClientCall* call)
{
    corClientResponseFree(&call->res);
    close(call->doneFd);
    free(call);
}

/* Copy what req points to into one block. */
static CorClientCall*
callNew(const CorClientRequest* req)
{
    const char* method = req->method ? req->method : "GET";
    size_t urlLen = req->url ? strlen(req->url) : 0;
    size_t size = sizeof(CorClientCall) + strlen(method) + 1 + urlLen + 1
                  + req->bodyLen
                  + corHeadersCopySize(req->headers, req->headerCount);
    CorClientCall* call;
    CorHeader* headers;
    char* p;

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
    headers = corHeadersCopy(req->headers, req->headerCount, call->copy, &p);
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

/* The exchange, wherever it runs. */
static void
callRun(CorBeside* b)
{
    CorClientCall* call = corContainerOf(b, CorClientCall, beside);

    call->rc = corClientFetch(&call->req, &call->res);
}

/* Its end is told, or, orphaned, it frees itself. */
static void
callDone(CorBeside* b)
{
    CorClientCall* call = corContainerOf(b, CorClientCall, beside);
    uint64_t one = 1;
    bool orphaned;

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

/* Give call up; under callsLock. Returns whether the caller frees it (it
 * had ended). */
static bool
callAbandon(CorClientCall* call)
{
    corRequestCleanupRemove(&call->cleanup);
    if (call->done) {
        return true;
    }
    call->orphaned = true;
    corBesideCancel(&call->beside);
    return false;
}

/* Its request was cancelled: under the list's lock, never callsLock. */
static void
callCancelled(CorRequestCleanup* c)
{
    corBesideCancel(&corContainerOf(c, CorClientCall, cleanup)->beside);
}

/* Its request's phase is over and nobody collected it. */
static void
callEnded(CorRequestCleanup* c)
{
    corClientCancel(corContainerOf(c, CorClientCall, cleanup));
}

CorClientCall*
corClientStart(const CorClientRequest* req, int* errP)
{
    CorRequest* r = corRequestCurrent();
    CorClientCall* call;
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
        call->cleanup = (CorRequestCleanup){ .cancel = callCancelled,
                                             .end = callEnded };
        corRequestCleanupAdd(r, &call->cleanup);
    }
    /* A coroutine runs at once, maybe to its end: it is linked first. */
    rc = corBesideStart(&call->beside, callRun, callDone, 0);
    if (rc < 0) {
        corRequestCleanupRemove(&call->cleanup);
        callFree(call);
        corLog(COR_LOG_ERROR, "client: no thread for an exchange: %s",
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
corClientWait(CorClientCall* call, CorClientResponse* res)
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
            snprintf(res->error, sizeof(res->error),
                     "cancelled while "
                     "waiting for an exchange");
            return -ECANCELED;
        }
    }
    corRequestCleanupRemove(&call->cleanup);
    *res = call->res;
    memset(&call->res, 0, sizeof(call->res));
    rc = call->rc;
    callFree(call);
    return rc;
}

void
corClientCancel(CorClientCall* call)
{
    bool mine;

    pthread_mutex_lock(&callsLock);
    mine = callAbandon(call);
    pthread_mutex_unlock(&callsLock);
    if (mine) {
        callFree(call);
    }
}
