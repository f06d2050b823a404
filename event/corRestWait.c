/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corRestWaitFd: the one function every client of cor waits through. In a
 * coroutine on a loop it is the loop's wait (the coroutine yields, the loop
 * goes on); anywhere else, a worker thread or a program without a loop, it
 * is poll(). That is what lets one handler's source run in both modes.
 */
#include "corEvInt.h"

#include <errno.h>
#include <poll.h>

/* poll() on one fd, retried on EINTR until the same deadline. */
static int
pollFd(int fd, short events, int timeoutMs, short* reventsP)
{
    struct pollfd pfd = { .fd = fd, .events = events };
    uint64_t deadline = corEvClockMs() + (uint64_t)(timeoutMs > 0 ? timeoutMs
                                                                   : 0);
    int rc;

    for (;;) {
        rc = poll(&pfd, fd >= 0 ? 1 : 0, timeoutMs);
        if (rc >= 0 || errno != EINTR) {
            break;
        }
        if (timeoutMs > 0) {
            uint64_t now = corEvClockMs();

            timeoutMs = now >= deadline ? 0 : (int)(deadline - now);
        }
    }
    *reventsP = rc > 0 ? pfd.revents : 0;
    return rc;
}

int
corRestWaitFd(int fd, short events, int timeoutMs, short* reventsP)
{
    if (COR_HAVE_COROUTINES && corCoCurrent() != NULL
        && corEvLoopCurrent() != NULL) {
        return corCoLoopWait(fd, events, timeoutMs, reventsP);
    }
    return pollFd(fd, events, timeoutMs, reventsP);
}
