/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A buffered non-blocking connection on a loop (corKit.h): the reading,
 * writing and waking that the cor:// server and client connections each
 * did by hand, over their transport (plain or TLS) so that TLS works
 * unchanged. The socket is armed once, edge-triggered for input and
 * output: a read goes on until the socket has no more (a short read), and
 * the output is written as the socket takes it, the rest on EPOLLOUT.
 * Off the loops the same connection reads and writes with the core's
 * deadline waits instead (its last section).
 */
#include "corKit.h"
#include "corCoreInt.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

void
corKitConnInit(CorKitConn* k, CorEvLoop* loop, const CorKitOps* ops)
{
    memset(k, 0, sizeof(*k));
    k->loop = loop;
    k->ops = ops;
    corListInit(&k->link);
}

/* A TLS transport that wants to write to read on is ready to read too;
 * the peer's end and errors are read to. */
static void
onIo(CorEvIo* io, unsigned events)
{
    CorKitConn* k = corContainerOf(io, CorKitConn, io);
    bool wrote;

    if ((events & EPOLLOUT) && corTransportWantsWrite(k->t)) {
        events |= EPOLLIN;
    }
    if (events & (EPOLLRDHUP | EPOLLHUP)) {
        k->peerShut = true;
    }
    k->events = events;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        k->ops->ready(k);
        return;
    }
    wrote = corKitConnOutPending(k) > 0;
    if (wrote && corKitConnFlush(k) != 0) {
        k->ops->fail(k, -ECONNRESET, "the connection failed while writing");
        return;
    }
    /* A read paused for a peer that did not read: what it sent since
     * raised no edge of its own. The output may have drained here or in
     * a flush of the owner's own, which resumes no read. */
    if (k->readPaused && corKitConnReadMay(k)) {
        k->ops->ready(k);
    } else if (wrote && k->ops->wrote != NULL) {
        k->ops->wrote(k);
    }
}

int
corKitConnStart(CorKitConn* k, CorTransport* t, CorKitSet* set)
{
    k->t = t;
    k->peerShut = false;
    k->set = set;
    if (set != NULL) {
        corListInsert(&set->conns, &k->link);
        atomic_fetch_add(&set->count, 1);
    }
    if (corEvIoStart(k->loop, &k->io, t->fd,
                     EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, onIo)
        != 0) {
        return -EIO;
    }
    return 0;
}

void
corKitConnStop(CorKitConn* k)
{
    if (k->t != NULL) {
        corEvIoStop(k->loop, &k->io);
        k->t = NULL;
    }
    corEvTimerStop(k->loop, &k->deadline);
    corEvSoonStop(&k->flushSoon);
    if (k->set != NULL) {
        corListRemove(&k->link);
        atomic_fetch_sub(&k->set->count, 1);
        k->set = NULL;
    }
}

/* The file part is sent, or dropped. */
static void
fileDone(CorKitConn* k)
{
    if (k->fileLeft > 0) {
        close(k->fileFd);
        k->fileLeft = 0;
    }
}

void
corKitConnFree(CorKitConn* k)
{
    corBufFree(&k->in);
    corBufFree(&k->out);
    fileDone(k);
}

bool
corKitConnReadMay(CorKitConn* k)
{
    return !corKitConnOutFull(k)
           && (k->ops->readMay == NULL || k->ops->readMay(k));
}

/* Room for the next read, the taken bytes moved out of the way. */
static int
inputReserve(CorKitConn* k)
{
    corBufCompact(&k->in);
    return k->ops->reserve != NULL ? k->ops->reserve(k)
                                   : corBufReserve(&k->in, k->readRoom);
}

/* One read into k->in. Returns 1 to read on, 0 when done, -1 closed. */
static int
readOnce(CorKitConn* k)
{
    size_t room;
    ssize_t n;

    if (inputReserve(k) != 0) {
        k->ops->fail(k, -ENOMEM, "no memory for a frame");
        return -1;
    }
    room = k->in.cap - k->in.len;
    n = k->t->ops->recv(k->t, k->in.data + k->in.len, room);
    if (n > 0) {
        k->in.len += (size_t)n;
        if (k->ops->take(k) != 0) {
            return -1;
        }
        /* A short read drained the socket (the next bytes raise a new
         * edge), unless the peer shut its side: its end is still to
         * read, and no edge announces it. */
        return (size_t)n < room && !k->peerShut ? 0 : 1;
    }
    if (n == 0) {
        return k->ops->end(k) != 0 ? -1 : 0;
    }
    if (errno == EAGAIN) {
        return 0;
    }
    if (errno == EINTR) {
        return 1;
    }
    k->ops->fail(k, -ECONNRESET, "the connection failed while reading");
    return -1;
}

int
corKitConnRead(CorKitConn* k)
{
    int rc = 1;

    k->readPaused = false;
    /* Frames that came whole while the owner took no more wait in the
     * buffer: they go first. */
    if (corBufPending(&k->in) > 0 && k->ops->take(k) != 0) {
        return -1;
    }
    while (rc > 0) {
        if (!corKitConnReadMay(k) && corKitConnFlush(k) != 0) {
            k->ops->fail(k, -ECONNRESET,
                         "the connection failed while "
                         "writing");
            return -1;
        }
        if (!corKitConnReadMay(k)) {
            k->readPaused = true; /* read on when it drained */
            return 0;
        }
        rc = readOnce(k);
    }
    return rc;
}

void
corKitConnKick(CorKitConn* k)
{
    if (!k->inside) {
        corKitConnFlushSoon(k);
    }
}

/* One write of the output: its bytes, or once they went, its file
 * part, kernel to kernel. Bytes before a file go with the file's first
 * where the transport can (sendMore). */
static ssize_t
sendSome(CorKitConn* k)
{
    const CorTransportOps* ops = k->t->ops;
    size_t len = corBufPending(&k->out);

    if (len > 0 && k->fileLeft > 0 && ops->sendMore != NULL) {
        return ops->sendMore(k->t, corBufHead(&k->out), len);
    }
    if (len > 0) {
        return ops->send(k->t, corBufHead(&k->out), len);
    }
    return ops->sendFile(k->t, k->fileFd, &k->fileOffset, k->fileLeft);
}

int
corKitConnFlush(CorKitConn* k)
{
    if (k->t == NULL) {
        return 0; /* not started: it goes when it is */
    }
    while (corKitConnOutPending(k) > 0) {
        bool bytes = corBufPending(&k->out) > 0;
        ssize_t n = sendSome(k);

        if (n > 0) {
            if (bytes) {
                corBufConsume(&k->out, (size_t)n);
            } else if ((k->fileLeft -= (size_t)n) == 0) {
                close(k->fileFd);
            }
            k->sentBytes += (size_t)n;
            k->sentMs = corEvNow(k->loop);
            k->outStalledMs = 0;
        } else if (n < 0 && errno == EAGAIN) {
            if (k->outStalledMs == 0) {
                k->outStalledMs = corEvNow(k->loop);
            }
            return 0;
        } else if (!(n < 0 && errno == EINTR)) {
            return -1; /* an error, or a file shorter than it said */
        }
    }
    k->out.len = k->out.off = 0;
    k->outStalledMs = 0;
    if (k->outKeep > 0 && k->out.cap > k->outKeep) {
        corBufFree(&k->out);
    }
    return 0;
}

void
corKitConnSendFile(CorKitConn* k, int fd, off_t offset, size_t len)
{
    fileDone(k);
    k->fileFd = fd;
    k->fileOffset = offset;
    k->fileLeft = len;
    if (len == 0) {
        close(fd);
    }
}

static void
flushDue(CorEvSoon* soon)
{
    CorKitConn* k = corContainerOf(soon, CorKitConn, flushSoon);

    if (corKitConnFlush(k) != 0) {
        k->ops->fail(k, -ECONNRESET, "the connection failed while writing");
    } else if (k->readPaused && corKitConnReadMay(k)) {
        k->ops->ready(k); /* it was not read while it could not be */
    } else if (k->ops->wrote != NULL) {
        k->ops->wrote(k);
    }
}

void
corKitConnFlushSoon(CorKitConn* k)
{
    corEvSoonStart(k->loop, &k->flushSoon, flushDue);
}

static void
deadlineDue(CorEvTimer* timer)
{
    CorKitConn* k = corContainerOf(timer, CorKitConn, deadline);

    k->ops->expired(k);
}

void
corKitConnDeadline(CorKitConn* k, uint64_t since, uint64_t ms)
{
    uint64_t now = corEvNow(k->loop);

    corEvTimerStart(k->loop, &k->deadline,
                    since + ms > now ? since + ms - now : 0, deadlineDue);
}

void
corKitConnDeadlineIn(CorKitConn* k, uint64_t ms)
{
    corEvTimerStart(k->loop, &k->deadline, ms, deadlineDue);
}

void
corKitConnDeadlineStop(CorKitConn* k)
{
    corEvTimerStop(k->loop, &k->deadline);
}

/* ---- Off the loops ------------------------------------------------------- */

void
corKitConnAttach(CorKitConn* k, CorTransport* t)
{
    k->t = t;
    k->peerShut = false;
}

ssize_t
corKitConnReadWait(CorKitConn* k, int timeoutMs)
{
    uint64_t deadline = corDeadlineAfter(timeoutMs);

    for (;;) {
        ssize_t n = k->t->ops->recv(k->t, k->in.data + k->in.len,
                                    k->in.cap - k->in.len);
        int rc;

        if (n >= 0) {
            k->in.len += (size_t)n;
            return n;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN || timeoutMs == 0) {
            return -errno;
        }
        /* A TLS handshake step may wait for room rather than bytes. */
        rc = corDeadlineWaitFd(k->t->fd,
                               corTransportWantsWrite(k->t) ? POLLOUT : POLLIN,
                               deadline);
        if (rc < 0) {
            return rc;
        }
    }
}

int
corKitConnFlushWait(CorKitConn* k, int timeoutMs)
{
    size_t sent = 0;
    int rc = corDeadlineSendAll(k->t, corBufHead(&k->out),
                                corBufPending(&k->out),
                                corDeadlineAfter(timeoutMs), &sent);

    corBufConsume(&k->out, sent);
    k->sentBytes += sent;
    return rc;
}
