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

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What one read of a part asks for. */
#define PIECE_BYTES 65536

/* Part heads are short: a boundary, a type, three numbers. */
#define PART_HEAD_MAX 512

/* A boundary no file is likely to hold: a counter and the clock, in hex
 * (RFC 2046 5.1.1: at most 70 characters). */
static void
boundaryMake(char* out, size_t size)
{
    static atomic_ulong next;
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, size, "cor%016llx%08lx",
             (unsigned long long)ts.tv_sec * 1000000000ULL
                 + (unsigned long long)ts.tv_nsec,
             (unsigned long)atomic_fetch_add(&next, 1) & 0xffffffffUL);
}

static int
partHead(char* out, const char* boundary, const StaticFile* f,
         const CorRange* range)
{
    return snprintf(out, PART_HEAD_MAX,
                    "\r\n--%s\r\nContent-Type: %s\r\n"
                    "Content-Range: bytes %llu-%llu/%llu\r\n\r\n",
                    boundary, f->type, (unsigned long long)range->start,
                    (unsigned long long)(range->start + range->len - 1),
                    (unsigned long long)f->size);
}

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
    char head[PART_HEAD_MAX];
    /* The head may go out after this returns (the HTTP/2 stream's, on
     * the loop): its type lives in r's arena. */
    char* type = corRequestAlloc(r, 80);
    char length[24];
    uint64_t total;
    char* buf = NULL;
    int n;

    boundaryMake(boundary, sizeof(boundary));
    total = strlen(boundary) + 8; /* "\r\n--" BOUNDARY "--\r\n" */
    for (unsigned i = 0; i < count; i++) {
        total += (uint64_t)partHead(head, boundary, f, &ranges[i])
                 + ranges[i].len;
    }
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
        n = partHead(head, boundary, f, &ranges[i]);
        if (buf == NULL || corResponseStreamWrite(r, head, (size_t)n) < 0
            || partBody(r, fd, &ranges[i], buf) < 0) {
            goto failed;
        }
    }
    n = snprintf(head, sizeof(head), "\r\n--%s--\r\n", boundary);
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
