/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Several ranges at once: a multipart/byteranges body (RFC 9110 14.6),
 * each part its own Content-Type and Content-Range before its bytes,
 * streamed from the file by the core's corRangeMultipartSend (the
 * cache's stored files go the same way), in the handler's own run, where
 * writes may wait for the client.
 */
#include "corStaticInt.h"

#include <unistd.h>

void
corStaticMultipartSend(CorRequest* r, const StaticFile* f, int fd,
                       const CorRange* ranges, unsigned count)
{
    char boundary[COR_RANGE_BOUNDARY_SIZE];

    if (corRangeMultipartStart(r, boundary, f->type, ranges, count, f->size)
        != 0) {
        close(fd);
        corRespondStatic(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    corRangeMultipartSend(r, fd, 0, boundary, f->type, ranges, count, f->size);
    close(fd);
}
