/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Several ranges at once: a multipart/byteranges body (RFC 9110 14.6),
 * each part its own Content-Type and Content-Range before its bytes. Its
 * length is known before the first byte (the parts' heads are computed
 * twice, once to count), so it is said, as nginx does, and the body goes
 * as a stream that the core holds to it: read from the file with pread,
 * a piece at a time, each write waiting for the client, so a large file
 * passes in bounded memory.
 */
#include "corStaticInt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What one read of a part asks for. */
#define PIECE_BYTES 65536

/* The bytes of one range, piece by piece. Returns 0, or -1 when the file
 * came short (it shrank meanwhile) or the client left. */
static int
partBody(CorRequest* r, int fd, const CorRange* range, char* buf)
{
    uint64_t done = 0;

    while (done < range->len) {
        size_t want = range->len - done < PIECE_BYTES
                          ? (size_t)(range->len - done)
                          : PIECE_BYTES;
        ssize_t n = pread(fd, buf, want, (off_t)(range->start + done));

        if (n <= 0 || corResponseStreamWrite(r, buf, (size_t)n) < 0) {
            return -1;
        }
        done += (uint64_t)n;
    }
    return 0;
}

void
corStaticMultipartSend(CorRequest* r, const StaticFile* f, int fd,
                       const CorRange* ranges, unsigned count)
{
    char boundary[40];
    char head[COR_RANGE_PART_HEAD_MAX];
    /* The head may go out after this returns (the HTTP/2 stream's, on
     * the loop): its type lives in r's arena. */
    char* type = corRequestAlloc(r, 80);
    char length[24];
    uint64_t total;
    char* buf = NULL;
    int n;

    corRangeBoundary(boundary, sizeof(boundary));
    total = corRangeMultipartLength(boundary, f->type, ranges, count, f->size);
    snprintf(length, sizeof(length), "%llu", (unsigned long long)total);
    if (type == NULL
        || snprintf(type, 80, "multipart/byteranges; boundary=%s", boundary) < 0
        || corResponseHeader(r, "Content-Length", length) != 0
        || corResponseStreamStart(r, 206, type) != 0) {
        close(fd);
        corRespondStatic(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    buf = malloc(PIECE_BYTES);
    for (unsigned i = 0; i < count; i++) {
        n = corRangePartHead(head, boundary, f->type, &ranges[i], f->size);
        if (buf == NULL || corResponseStreamWrite(r, head, (size_t)n) < 0
            || partBody(r, fd, &ranges[i], buf) < 0) {
            goto failed;
        }
    }
    n = corRangeEnd(head, boundary);
    if (corResponseStreamWrite(r, head, (size_t)n) < 0) {
        goto failed;
    }
    corResponseStreamEnd(r);
    free(buf);
    close(fd);
    return;

failed:
    corResponseStreamAbort(r);
    free(buf);
    close(fd);
}
