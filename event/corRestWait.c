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
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

/*
 * Off the loops, a stop cannot reach into a poll() another thread sleeps
 * in; so every such poll also watches one eventfd of the process, which a
 * stop makes readable for good (it is written once and never read).
 */
static pthread_once_t cancelOnce = PTHREAD_ONCE_INIT;
static int cancelFd = -1;
static atomic_bool cancelled;

static void
cancelFdOpen(void)
{
    cancelFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

void
corRestCancelAll(void)
{
    uint64_t one = 1;

    pthread_once(&cancelOnce, cancelFdOpen);
    atomic_store(&cancelled, true);
    if (cancelFd >= 0 && write(cancelFd, &one, sizeof(one)) < 0) {
        /* Saturated: it is readable anyway. */
    }
}

/* poll() on one fd (and the cancel fd), retried on EINTR until the same
 * deadline. */
static int
pollFd(int fd, short events, int timeoutMs, short* reventsP)
{
    struct pollfd pfds[2];
    uint64_t deadline = corEvClockMs() + (uint64_t)(timeoutMs > 0 ? timeoutMs
                                                                   : 0);
    int rc;

    pthread_once(&cancelOnce, cancelFdOpen);
    pfds[0] = (struct pollfd){ .fd = fd, .events = events };
    pfds[1] = (struct pollfd){ .fd = cancelFd, .events = POLLIN };
    *reventsP = 0;
    for (;;) {
        if (atomic_load(&cancelled)) {
            errno = ECANCELED;
            return -1;
        }
        rc = poll(pfds, 2, timeoutMs);
        if (rc > 0 && pfds[1].revents != 0) {
            errno = ECANCELED;
            return -1;
        }
        if (rc >= 0 || errno != EINTR) {
            break;
        }
        if (timeoutMs > 0) {
            uint64_t now = corEvClockMs();

            timeoutMs = now >= deadline ? 0 : (int)(deadline - now);
        }
    }
    *reventsP = rc > 0 ? pfds[0].revents : 0;
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
