/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory a loop lends its connections' kit buffers (CorBuf, which
 * grows it past HTTP_BUF_BYTES on its own; a grown one goes back to
 * malloc). A connection holds an input or an output buffer only while
 * bytes wait in it (nginx frees its buffers at keep-alive the same way),
 * so ten thousand idle connections hold none; the loop keeps a few free
 * ones, so that a busy connection that takes and gives one back at every
 * request does not go to malloc each time. The lending itself is inline
 * (corHttpInt.h): it runs twice a request.
 *
 * And the loop's header array, which the parser fills for whichever
 * connection's head it parses: limits.header_count fields once per loop,
 * not per connection.
 */
#include "corHttpInt.h"

#include <stdlib.h>

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
