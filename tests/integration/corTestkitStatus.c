/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's handler "status", which answers what a careless handler
 * or upstream might: any status with any body, whole or streamed, with a
 * Content-Length of its own. The HTTP writer must keep the framing right
 * whatever it is given (no body where the status forbids one, never
 * more or less than a length said).
 *
 *   ?code=N     the status (default 204)
 *   ?len=N      a body of N 'x' (default 0)
 *   ?split=1    the body is a second response instead, with a cookie
 *   ?stream=1   the body goes as a stream
 *   ?cl=N       a Content-Length header of N set by the handler
 */
#include "cor.h"

#include <stdlib.h>
#include <string.h>

void corTestkitStatusAdd(CorModule* m, int* rc);

static const char split[] = "HTTP/1.1 200 OK\r\n"
                            "Set-Cookie: session=attacker\r\n"
                            "Content-Length: 0\r\n\r\n";

static long
queryNumber(CorRequest* r, const char* key, long otherwise)
{
    const char* v = corRequestQuery(r, key);

    return v != NULL ? atol(v) : otherwise;
}

static void
statusServe(CorRequest* r)
{
    int code = (int)queryNumber(r, "code", 204);
    size_t len = (size_t)queryNumber(r, "len", 0);
    char* body = corRequestAlloc(r, len + sizeof(split));

    if (body == NULL) {
        corRespond(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    memset(body, 'x', len);
    if (queryNumber(r, "split", 0) == 1) {
        len = sizeof(split) - 1;
        memcpy(body, split, len);
    }
    if (corRequestQuery(r, "cl") != NULL) {
        corResponseHeader(r, "Content-Length", corRequestQuery(r, "cl"));
    }
    if (queryNumber(r, "stream", 0) != 1) {
        corRespond(r, code, "text/plain", body, len);
        return;
    }
    if (corResponseStreamStart(r, code, "text/plain") != 0) {
        return;
    }
    if (corResponseStreamWrite(r, body, len) < 0) {
        corResponseStreamAbort(r);
        return;
    }
    corResponseStreamEnd(r);
}

void
corTestkitStatusAdd(CorModule* m, int* rc)
{
    if (*rc == 0) {
        *rc = corHandlerAdd(m, &(CorHandler){ .name = "status",
                                              .serve = statusServe,
                                              .run = COR_RUN_COROUTINE });
    }
}
