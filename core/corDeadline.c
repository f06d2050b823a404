/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Waits with absolute deadlines, as the core's connections use them (a
 * client's, an upgraded one's): one deadline for a whole exchange, each
 * wait given what is left of it, and a send of a whole buffer that waits
 * for room. Every wait is a corRestWaitFd, so it yields in a coroutine,
 * polls elsewhere, and a stop or a request's cancel ends it.
 */
#include "corCoreInt.h"

#include <errno.h>

uint64_t
corDeadlineAfter(int timeoutMs)
{
    return timeoutMs < 0 ? 0 : corEvClockMs() + (uint64_t)timeoutMs;
}

int
corDeadlineLeftMs(uint64_t deadline)
{
    uint64_t now;

    if (deadline == 0) {
        return -1;
    }
    now = corEvClockMs();
    return now >= deadline ? 0 : (int)(deadline - now);
}

int
corDeadlineWaitFd(int fd, short events, uint64_t deadline)
{
    int timeoutMs = corDeadlineLeftMs(deadline);
    short revents;
    int rc;

    if (timeoutMs == 0) {
        return -ETIMEDOUT;
    }
    rc = corRestWaitFd(fd, events, timeoutMs, &revents);
    if (rc < 0) {
        return -errno; /* read at once: errno is the thread's */
    }
    return rc == 0 ? -ETIMEDOUT : 0;
}

int
corDeadlineSendAll(CorTransport* t, const void* buf, size_t len,
                   uint64_t deadline, size_t* sentP)
{
    const char* p = buf;
    int rc;

    while (len > 0) {
        ssize_t n = t->ops->send(t, p, len);

        if (n > 0) {
            p += n;
            len -= (size_t)n;
            if (sentP != NULL) {
                *sentP += (size_t)n;
            }
            continue;
        }
        rc = n == 0 ? -EPIPE : -errno;
        if (rc == -EINTR) {
            continue;
        }
        if (rc != -EAGAIN && rc != -EWOULDBLOCK) {
            return rc;
        }
        rc = corDeadlineWaitFd(t->fd, POLLOUT, deadline);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}
