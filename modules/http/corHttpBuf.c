/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The buffers a loop lends its connections. A connection holds an input
 * or an output buffer only while bytes wait in it (nginx frees its buffers
 * at keep-alive the same way), so ten thousand idle connections hold none;
 * the loop keeps a few free ones, so that a busy connection that takes and
 * gives one back at every request does not go to malloc each time.
 *
 * And the loop's header array, which the parser fills for whichever
 * connection's head it parses: limits.header_count fields once per loop,
 * not per connection.
 */
#include "corHttpInt.h"

#include <stdlib.h>

char*
corHttpBufTake(HttpLoop* hl)
{
    if (hl->bufCount > 0) {
        return hl->bufs[--hl->bufCount];
    }
    return malloc(HTTP_BUF_BYTES);
}

void
corHttpBufGive(HttpLoop* hl, char* buf, size_t cap)
{
    if (buf == NULL) {
        return;
    }
    if (cap == HTTP_BUF_BYTES && hl->bufCount < HTTP_BUF_CACHE) {
        hl->bufs[hl->bufCount++] = buf;
        return;
    }
    free(buf);
}

int
corHttpLoopBuffersInit(HttpLoop* hl)
{
    hl->head.headers = calloc(corLimits()->headerCount,
                              sizeof(*hl->head.headers));
    hl->head.rawCap = corLimits()->headerBytes;
    hl->head.rawBuf = malloc(hl->head.rawCap);
    return hl->head.headers != NULL && hl->head.rawBuf != NULL ? 0 : -1;
}

void
corHttpLoopBuffersFree(HttpLoop* hl)
{
    while (hl->bufCount > 0) {
        free(hl->bufs[--hl->bufCount]);
    }
    free(hl->head.headers);
    hl->head.headers = NULL;
    free(hl->head.rawBuf);
    hl->head.rawBuf = NULL;
}
