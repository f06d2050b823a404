/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A body gathered whole before a handler that takes it whole, when the
 * protocol served its request at the head (a route's verdict wanted before
 * the body: Expect: 100-continue; a body too large, or of a length not
 * said, to be read into the connection's buffer). The protocol puts the
 * pieces into the request's container as for a streamed body
 * (corRequestBody.c); here each put is taken on at once, so that the
 * protocol reads on, and kept: in memory up to limits.body_memory, and
 * past it in an unlinked temporary file, as nginx spools past
 * client_body_buffer_size. Four 50 MB uploads then cost the page cache,
 * not the generation's memory.
 *
 * The file is made unlinked (O_TMPFILE; where the file system cannot, a
 * mkstemp whose name is unlinked at once), so that it never outlives its
 * request: its one descriptor closes at the request's release, or with
 * the process whatever ends it. Its writes go to the page cache on the
 * loop, as nginx's do.
 *
 * A handler reads such a body as any other: r->body maps the file
 * (read-only, its pages read in as they are touched, and given back to
 * the page cache at the release), and corRequestBodyRead reads it with
 * pread, which costs no more memory than the caller's buffer: the HTTP
 * client passes a spooled body upstream so.
 */
#include "corRequestBodyIn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Where spooled bodies go: the configured folder, else $TMPDIR, /tmp. */
static const char*
spoolDir(void)
{
    const char* dir = corLimits()->bodySpoolDir;

    if (dir == NULL) {
        dir = getenv("TMPDIR");
    }
    return dir != NULL && dir[0] != '\0' ? dir : "/tmp";
}

/* A new unlinked file in dir: O_TMPFILE, else mkstemp and unlink. Returns
 * the fd or -errno, said once here. */
static int
spoolOpen(void)
{
    const char* dir = spoolDir();
    char path[4096];
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

    if (fd >= 0) {
        return fd;
    }
    /* Not every file system has O_TMPFILE (EOPNOTSUPP; EISDIR before
     * Linux 3.11): a named file, unlinked before anything is in it. */
    if (snprintf(path, sizeof(path), "%s/cor-body-XXXXXX", dir)
        >= (int)sizeof(path)) {
        errno = ENAMETOOLONG;
    } else if ((fd = mkostemp(path, O_CLOEXEC)) >= 0) {
        unlink(path);
        return fd;
    }
    fd = -errno;
    corLog(COR_LOG_ERROR,
           "a request body past limits.body_memory cannot "
           "be spooled in %s: %s",
           dir, strerror(-fd));
    return fd;
}

/* Write what in's buffer holds to its file (made now if need be), and
 * drop it from memory. The lock is held. Returns 0 or -errno. */
static int
spoolWrite(CorBodyIn* in)
{
    size_t len = corBufPending(&in->buf);
    const uint8_t* p = corBufHead(&in->buf);

    if (in->spoolFd < 0 && (in->spoolFd = spoolOpen()) < 0) {
        return in->spoolFd;
    }
    while (len > 0) {
        ssize_t n = write(in->spoolFd, p, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int rc = n < 0 ? -errno : -EIO;

            corLog(COR_LOG_ERROR, "a spooled request body: write: %s",
                   strerror(-rc));
            return rc;
        }
        p += n;
        len -= (size_t)n;
    }
    /* The buffer grew to limits.body_memory: a piece at a time is what
     * it holds from here. */
    corBufFree(&in->buf);
    return 0;
}

/* The body came whole: r->body says where it is. Returns 0 or -errno. */
static int
gatherEnd(CorRequest* r)
{
    CorBodyIn* in = r->bodyIn;

    if (in->spoolFd < 0) {
        r->body = corBufPending(&in->buf) > 0
                      ? (const char*)corBufHead(&in->buf)
                      : "";
        in->whole = true;
        return 0;
    }
    in->map = mmap(NULL, r->bodyLen, PROT_READ, MAP_SHARED, in->spoolFd, 0);
    if (in->map == MAP_FAILED) {
        int rc = -errno;

        in->map = NULL;
        corLog(COR_LOG_ERROR, "a spooled request body: mmap: %s",
               strerror(-rc));
        return rc;
    }
    r->body = in->map;
    in->whole = true;
    return 0;
}

/* The gathering ended: its verdict to the gatherer, in a turn of the
 * loop of its own rather than inside the protocol's put or end (whose
 * connection may be closing round it). */
static void
gatherDone(CorEvSoon* soon)
{
    CorBodyIn* in = corContainerOf(soon, CorBodyIn, gatherSoon);
    CorBodyGatheredFn fn = in->gathered;

    in->gathered = NULL;
    fn(in->r, in->gatherRc, in->gatheredArg);
}

/* After each put and at the end, on r's loop: what came is kept (in the
 * file once past the limit) and told taken, so that the client sends
 * more; at the end the gatherer hears. */
static void
gatherNews(void* arg)
{
    CorRequest* r = arg;
    CorBodyIn* in = r->bodyIn;
    size_t fresh;
    int end;
    int rc = 0;

    pthread_mutex_lock(&in->lock);
    end = in->end;
    if (in->spoolFd >= 0 || corBufPending(&in->buf) > corLimits()->bodyMemory) {
        rc = spoolWrite(in);
    }
    fresh = r->bodyLen - in->told;
    in->told = r->bodyLen;
    pthread_mutex_unlock(&in->lock);
    if (rc == 0 && end == 0) {
        if (fresh > 0 && r->ops->bodyConsumed != NULL) {
            r->ops->bodyConsumed(r, fresh);
        }
        return;
    }
    if (rc == 0) {
        rc = end == 1 ? gatherEnd(r) : end;
    }
    in->watch = NULL;
    in->gatherRc = rc;
    corEvSoonStart(r->loop, &in->gatherSoon, gatherDone);
}

bool
corRequestBodyGathers(const CorRequest* r, const CorHandler* handler)
{
    return r->bodyIn != NULL && !r->bodyIn->whole
           && !(handler->streamBody && handler->run != COR_RUN_INLINE);
}

void
corRequestBodyGather(CorRequest* r, CorBodyGatheredFn fn, void* arg)
{
    CorBodyIn* in = r->bodyIn;

    in->gathered = fn;
    in->gatheredArg = arg;
    in->watch = gatherNews;
    in->watchArg = r;
    gatherNews(r); /* what came before */
}

void
corRequestBodySpoolFree(CorBodyIn* in)
{
    corEvSoonStop(&in->gatherSoon);
    if (in->map != NULL) {
        munmap(in->map, in->r->bodyLen);
    }
    if (in->spoolFd >= 0) {
        close(in->spoolFd);
    }
}
