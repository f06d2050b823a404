/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plain transport: a connection's bytes as they are, straight to and
 * from its socket, files kernel to kernel.
 */
#include "cor.h"

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t
plainRecv(CorTransport* t, void* buf, size_t len)
{
    return read(t->fd, buf, len);
}

static ssize_t
plainSend(CorTransport* t, const void* buf, size_t len)
{
    return write(t->fd, buf, len);
}

static ssize_t
plainSendMore(CorTransport* t, const void* buf, size_t len)
{
    return send(t->fd, buf, len, MSG_MORE);
}

static ssize_t
plainSendFile(CorTransport* t, int fileFd, off_t* offset, size_t len)
{
    return sendfile(t->fd, fileFd, offset, len);
}

static void
plainClose(CorTransport* t)
{
    /* A coroutine of this loop may wait on it (a session's reader while
     * another closes): its wait ends now, and on io_uring its poll stops
     * holding the socket open. Elsewhere it is close(). */
    corCoLoopClose(t->fd);
    t->fd = -1;
}

static const CorTransportOps plainOps = {
    .recv = plainRecv,
    .send = plainSend,
    .sendMore = plainSendMore,
    .sendFile = plainSendFile,
    .close = plainClose,
};

void
corTransportPlain(CorTransport* t, int fd)
{
    t->ops = &plainOps;
    t->fd = fd;
    t->data = NULL;
}
