/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Several ranges of a file as a multipart/byteranges stream (RFC 9110
 * 14.6): its length said before its first byte (the parts' heads counted
 * first, as nginx does), then each part's head and its bytes read from
 * the file with pread a piece at a time, each write waiting for the
 * client, so that parts of any size pass in bounded memory. The core's,
 * for static (a file of its folder) and the cache (a stored answer's
 * file), which answer the same Range the same way.
 */
#include "cor.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* What one read of a part asks for. */
#define PIECE_BYTES 65536

int
corRangeMultipartStart(CorRequest* r, char* boundary, const char* type,
                       const CorRange* ranges, unsigned count, uint64_t whole)
{
    /* The head may go out after this returns (the HTTP/2 stream's, on
     * the loop): its type lives in r's arena. */
    char* value = corRequestAlloc(r, 80);
    char length[24];

    corRangeBoundary(boundary, COR_RANGE_BOUNDARY_SIZE);
    snprintf(length, sizeof(length), "%llu",
             (unsigned long long)corRangeMultipartLength(boundary, type, ranges,
                                                         count, whole));
    if (value == NULL
        || snprintf(value, 80, "multipart/byteranges; boundary=%s", boundary)
               < 0
        || corResponseHeader(r, "Content-Length", length) != 0) {
        return -1;
    }
    if (corResponseStreamStart(r, 206, value) != 0) {
        corResponseHeaderRemove(r, "Content-Length"); /* not this answer's */
        return -1;
    }
    return 0;
}

/* The bytes of one range, piece by piece: 0, or -1 when the file came
 * short (it shrank meanwhile) or the client left. */
static int
partBody(CorRequest* r, int fd, uint64_t base, const CorRange* range, char* buf)
{
    uint64_t done = 0;

    while (done < range->len) {
        size_t want = range->len - done < PIECE_BYTES
                          ? (size_t)(range->len - done)
                          : PIECE_BYTES;
        ssize_t n = pread(fd, buf, want, (off_t)(base + range->start + done));

        if (n <= 0 || corResponseStreamWrite(r, buf, (size_t)n) < 0) {
            return -1;
        }
        done += (uint64_t)n;
    }
    return 0;
}

void
corRangeMultipartSend(CorRequest* r, int fd, uint64_t base,
                      const char* boundary, const char* type,
                      const CorRange* ranges, unsigned count, uint64_t whole)
{
    char head[COR_RANGE_PART_HEAD_MAX];
    char* buf = malloc(PIECE_BYTES);
    int n;

    for (unsigned i = 0; i < count; i++) {
        n = corRangePartHead(head, boundary, type, &ranges[i], whole);
        if (buf == NULL || corResponseStreamWrite(r, head, (size_t)n) < 0
            || partBody(r, fd, base, &ranges[i], buf) < 0) {
            free(buf);
            corResponseStreamAbort(r);
            return;
        }
    }
    free(buf);
    n = corRangeEnd(head, boundary);
    if (corResponseStreamWrite(r, head, (size_t)n) < 0) {
        corResponseStreamAbort(r);
        return;
    }
    corResponseStreamEnd(r);
}
