/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's notifications (cor.h), for corNotifyTest and the
 * notify.write benchmark:
 *
 *   POST /write?url=U[&n=N][&type=T][&timeout_ms=MS][&worker=1]
 *       answers "written" at once (inline); its finish phase sends N (1)
 *       notifications of the request's body to U (an X-Write: K header
 *       each, K from 0). The finish runs as a coroutine, or with ?worker=1
 *       (and in blocking mode) on a worker.
 *   GET /notifynow?url=U
 *       calls corNotify from the handler and answers "rc=RC".
 *   GET /testscheme
 *       what the scheme "test" received: "count=N" and a line a
 *       notification, "METHOD URL TYPE HEADERS BODY".
 *
 * The scheme "test": test://anything[?ms=MS][&fail=1] records the
 * notification, then waits MS ms (through corRestWaitFd: a stop cancels
 * it) and acknowledges it, or fails it with ?fail=1.
 */
#include "cor.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void corTestkitNotifyAdd(CorModule* m, int* rc);

#define RECORDS_MAX 64
#define RECORD_LEN 256

static pthread_mutex_t recordsLock = PTHREAD_MUTEX_INITIALIZER;
static char records[RECORDS_MAX][RECORD_LEN];
static unsigned recordCount;

static bool
writeOnLoop(const CorRequest* r)
{
    return corRequestQuery((CorRequest*)r, "worker") == NULL;
}

static void
writeServe(CorRequest* r)
{
    corRespond(r, 200, "text/plain", "written\n", 8);
}

static void
writeFinish(CorRequest* r)
{
    const char* url = corRequestQuery(r, "url");
    const char* count = corRequestQuery(r, "n");
    const char* timeout = corRequestQuery(r, "timeout_ms");
    int n = count != NULL ? atoi(count) : 1;

    for (int k = 0; k < n; k++) {
        char value[16];
        int len = snprintf(value, sizeof(value), "%d", k);
        CorHeader header = { "X-Write", 7, value, (size_t)len };
        int rc = corNotify(r, &(CorNotification){
                                  .url = url,
                                  .headers = &header,
                                  .headerCount = 1,
                                  .contentType = corRequestQuery(r, "type"),
                                  .body = r->body,
                                  .bodyLen = r->bodyLen,
                                  .timeoutMs = timeout != NULL ? atoi(timeout)
                                                               : 0 });

        if (rc != 0) {
            corLog(COR_LOG_WARN, "testkit: corNotify refused: %s",
                   strerror(-rc));
        }
    }
}

static void
notifyNowServe(CorRequest* r)
{
    int rc = corNotify(r, &(CorNotification){ .url = corRequestQuery(r, "url"),
                                              .body = "now",
                                              .bodyLen = 3 });

    corRespondf(r, 200, "text/plain", "rc=%d\n", rc);
}

static void
testSchemeServe(CorRequest* r)
{
    char out[RECORDS_MAX * RECORD_LEN + 32];
    size_t len;

    pthread_mutex_lock(&recordsLock);
    len = (size_t)snprintf(out, sizeof(out), "count=%u\n", recordCount);
    for (unsigned i = 0; i < recordCount && i < RECORDS_MAX; i++) {
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%s\n",
                                records[i]);
    }
    pthread_mutex_unlock(&recordsLock);
    corRespond(r, 200, "text/plain", out, len);
}

/* A number after key= in url, or def. */
static int
urlNum(const char* url, const char* key, int def)
{
    const char* at = strstr(url, key);

    return at != NULL ? atoi(at + strlen(key)) : def;
}

static int
testSend(CorModule* m, const CorNotification* n, char* why, size_t whyLen)
{
    short revents;
    int ms = urlNum(n->url, "ms=", 0);

    (void)m;
    pthread_mutex_lock(&recordsLock);
    if (recordCount < RECORDS_MAX) {
        snprintf(records[recordCount], RECORD_LEN, "%s %s %s %u %.*s",
                 n->method, n->url, n->contentType ? n->contentType : "-",
                 n->headerCount, (int)n->bodyLen, (const char*)n->body);
    }
    recordCount++;
    pthread_mutex_unlock(&recordsLock);
    if (ms > 0 && corRestWaitFd(-1, 0, ms, &revents) < 0) {
        snprintf(why, whyLen, "cancelled");
        return -ECANCELED;
    }
    if (urlNum(n->url, "fail=", 0) == 1) {
        snprintf(why, whyLen, "told to fail");
        return -EIO;
    }
    return 0;
}

void
corTestkitNotifyAdd(CorModule* m, int* rc)
{
    if (*rc != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "write",
                                           .serve = writeServe,
                                           .run = COR_RUN_INLINE,
                                           .finish = writeFinish,
                                           .finishRun = COR_RUN_COROUTINE,
                                           .finishCoroutineHook = writeOnLoop })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "notifynow",
                                           .serve = notifyNowServe,
                                           .run = COR_RUN_INLINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "testscheme",
                                           .serve = testSchemeServe,
                                           .run = COR_RUN_INLINE })
               != 0
        || corSchemeAdd(m, &(CorScheme){ .scheme = "test", .send = testSend })
               != 0) {
        *rc = -1;
    }
}
