/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's client handlers (corClient.h), for
 * corHttpClientTest:
 *
 *   /client?url=U&method=M&connect_ms=&first_ms=&read_ms=&total_ms=&max=
 *          &body=
 *       one exchange: "status=S reused=R retried=T len=N body=LINE
 *       x-test=V", LINE the body's first line (64 bytes at most), V the
 *       upstream's X-Test header; or on failure 502 (504 timed out, 503
 *       cancelled) "rc=-ERRNO error=WHY".
 *   /fanout?n=N&url=U[&total_ms=]
 *       starts N exchanges, then collects each: "n=N ok=K ms=ELAPSED
 *       statuses=S,S,...".
 *   /fanleave?n=N&url=U
 *       starts N exchanges and answers without collecting them: the
 *       request's end must cancel them.
 *   /pieces?url=U&piece=N[&http2=1]
 *       one exchange read through the core's streamed call, whatever
 *       the scheme (corClientOpen, then corClientRead of N bytes at most,
 *       default 4, then corClientClose): "status=S pieces=P len=L
 *       done=D body=BODY", P the reads that gave bytes; or 502 "rc=-ERRNO
 *       error=WHY" for a failed open or read.
 *
 * Each is a coroutine, a worker with ?worker=1 (and in blocking mode).
 */
#include "cor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void corTestkitClientAdd(CorModule* m, int* rc);

static int
queryNum(CorRequest* r, const char* key, int def)
{
    const char* v = corRequestQuery(r, key);

    return v != NULL ? atoi(v) : def;
}

static bool
clientOnLoop(const CorRequest* r)
{
    return corRequestQuery((CorRequest*)r, "worker") == NULL;
}

static void
requestFrom(CorRequest* r, CorClientRequest* q)
{
    const char* body = corRequestQuery(r, "body");

    *q = (CorClientRequest){
        .method = corRequestQuery(r, "method"),
        .url = corRequestQuery(r, "url"),
        .connectTimeoutMs = queryNum(r, "connect_ms", 0),
        .firstByteTimeoutMs = queryNum(r, "first_ms", 0),
        .readTimeoutMs = queryNum(r, "read_ms", 0),
        .totalTimeoutMs = queryNum(r, "total_ms", 0),
        .maxBodyBytes = (size_t)queryNum(r, "max", 0),
        .body = body,
        .bodyLen = body ? strlen(body) : 0,
    };
}

static int
failStatus(int rc)
{
    return rc == -ETIMEDOUT ? 504 : rc == -ECANCELED ? 503 : 502;
}

static void
clientServe(CorRequest* r)
{
    CorHeader extra = { "X-Client", 8, "cor", 3 };
    CorClientRequest q;
    CorClientResponse res;
    const CorHeader* test;
    size_t line;
    int rc;

    requestFrom(r, &q);
    q.headers = &extra;
    q.headerCount = 1;
    rc = corClientFetch(&q, &res);
    if (rc < 0) {
        corRespondf(r, failStatus(rc), "text/plain", "rc=%d error=%s\n", rc,
                    res.error);
        corClientResponseFree(&res);
        return;
    }
    test = corClientHeader(&res, "x-test");
    line = strcspn(res.body, "\r\n");
    corRespondf(r, 200, "text/plain",
                "status=%d reused=%d retried=%d "
                "len=%zu body=%.*s x-test=%.*s\n",
                res.status, res.reused, res.retried, res.bodyLen,
                (int)(line < 64 ? line : 64), res.body,
                test ? (int)test->valueLen : 0, test ? test->value : "");
    corClientResponseFree(&res);
}

#define FAN_MAX 64

static void
fanoutServe(CorRequest* r)
{
    CorClientCall* calls[FAN_MAX];
    CorClientRequest q;
    uint64_t start = corEvClockMs();
    char statuses[FAN_MAX * 5 + 1] = "";
    char firstError[256] = "";
    int n = queryNum(r, "n", 1);
    int ok = 0;
    int started = 0;
    int err = 0;

    if (n < 1 || n > FAN_MAX) {
        corRespondf(r, 400, "text/plain", "n: 1..%d\n", FAN_MAX);
        return;
    }
    requestFrom(r, &q);
    for (int i = 0; i < n; i++) {
        calls[i] = corClientStart(&q, &err);
        started += calls[i] != NULL;
    }
    for (int i = 0; i < n; i++) {
        CorClientResponse res;
        size_t len = strlen(statuses);
        int rc;

        if (calls[i] == NULL) {
            snprintf(statuses + len, sizeof(statuses) - len, "%s%d",
                     i ? "," : "", err);
            continue;
        }
        rc = corClientWait(calls[i], &res);
        ok += rc == 0 && res.status == 200;
        snprintf(statuses + len, sizeof(statuses) - len, "%s%d", i ? "," : "",
                 rc == 0 ? res.status : rc);
        if (rc < 0 && firstError[0] == '\0') {
            snprintf(firstError, sizeof(firstError), "%s", res.error);
        }
        corClientResponseFree(&res);
    }
    corRespondf(r, 200, "text/plain",
                "n=%d started=%d ok=%d ms=%llu "
                "statuses=%s error=%s\n",
                n, started, ok, (unsigned long long)(corEvClockMs() - start),
                statuses, firstError);
}

static void
fanleaveServe(CorRequest* r)
{
    CorClientRequest q;
    int n = queryNum(r, "n", 1);
    int started = 0;

    requestFrom(r, &q);
    for (int i = 0; i < n && i < FAN_MAX; i++) {
        started += corClientStart(&q, NULL) != NULL;
    }
    corRespondf(r, 200, "text/plain", "started=%d\n", started);
}

/* The body gathered from reads of at most piece bytes. */
#define PIECES_BODY_MAX 4096

static void
piecesServe(CorRequest* r)
{
    CorClientRequest q;
    CorClientResponse res;
    CorClientStream* x;
    char body[PIECES_BODY_MAX];
    size_t piece = (size_t)queryNum(r, "piece", 4);
    size_t len = 0;
    int pieces = 0;
    ssize_t n = 0;
    int rc;

    requestFrom(r, &q);
    q.http2 = corRequestQuery(r, "http2") != NULL;
    if (piece < 1 || piece > sizeof(body)) {
        corRespondf(r, 400, "text/plain", "piece: 1..%zu\n", sizeof(body));
        return;
    }
    rc = corClientOpen(&q, &res, &x);
    while (
        rc == 0
        && (n = corClientRead(x, body + len,
                              len + piece <= sizeof(body) ? piece
                                                          : sizeof(body) - len,
                              5000))
               > 0) {
        len += (size_t)n;
        pieces++;
    }
    if (rc < 0 || n < 0) {
        corRespondf(r, failStatus(rc < 0 ? rc : (int)n), "text/plain",
                    "rc=%d error=%s\n", rc < 0 ? rc : (int)n, res.error);
    } else {
        corRespondf(r, 200, "text/plain",
                    "status=%d pieces=%d len=%zu "
                    "done=%d body=%.*s\n",
                    res.status, pieces, len, corClientDone(x), (int)len, body);
    }
    corClientClose(x);
    corClientResponseFree(&res);
}

void
corTestkitClientAdd(CorModule* m, int* rc)
{
    if (*rc != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "client",
                                           .serve = clientServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = clientOnLoop })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "fanout",
                                           .serve = fanoutServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = clientOnLoop })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "fanleave",
                                           .serve = fanleaveServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = clientOnLoop })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "pieces",
                                           .serve = piecesServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = clientOnLoop })
               != 0) {
        *rc = -1;
    }
}
