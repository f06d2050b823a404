/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corRestWaitFd: the one function every client of cor waits through. In a
 * coroutine on a loop it is the loop's wait (the coroutine yields, the loop
 * goes on); anywhere else, a worker thread or a program without a loop, it
 * is poll(). That is what lets one handler's source run in both modes.
 * The loop's wait is the layer's above the loop (the coroutines): reached
 * through the hooks it gave the loop, as the loop reaches it.
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

/*
 * One piece of work's cancel off the loops: the thread binds it while the
 * work runs, and each poll() also watches an eventfd of the thread, which
 * corRestCancel writes. The flag is the truth, the eventfd only a wake: a
 * wake meant for the work the thread ran before (a cancel that read the
 * fd just before the thread moved on) is drained and the poll goes on.
 * The eventfd is never closed, since a cancel on another thread may still
 * write to it; there is one per thread that ever waited under a cancel.
 */
static __thread CorRestCancel* threadCancel;
static __thread int threadWakeFd = -1;

/* Code on a coroutine's stack that is not the coroutine's polls. */
static __thread bool yieldForbidden;

bool
corRestYieldAllow(bool allow)
{
    bool was = !yieldForbidden;

    yieldForbidden = !allow;
    return was;
}

bool
corRestYieldAllowed(void)
{
    return !yieldForbidden;
}

bool
corRestMayPark(void)
{
    return !yieldForbidden && corCoCurrent() != NULL
           && corEvLoopCurrent() != NULL;
}

/* The calling thread's loop when a wait now is its layer's (a coroutine
 * runs, and may yield), else NULL. */
static CorEvLoop*
layerLoop(void)
{
    CorEvLoop* loop;

    if (!COR_HAVE_COROUTINES || yieldForbidden) {
        return NULL;
    }
    loop = corEvLoopCurrent();
    return loop != NULL && loop->hooks != NULL && loop->hooks->running() ? loop
                                                                         : NULL;
}

bool
corRestOnCoroutine(void)
{
    return layerLoop() != NULL;
}

static int
threadCancelBind(CorRestCancel* c)
{
    if (threadCancel != NULL) {
        atomic_store(&threadCancel->threadFd, 0);
    }
    threadCancel = c;
    if (c == NULL) {
        return 0;
    }
    if (threadWakeFd < 0) {
        threadWakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (threadWakeFd < 0) {
            return -errno; /* the flag still ends the next wait */
        }
    }
    /* Published before the wait reads the flag, and corRestCancel sets
     * the flag before it reads this: one of the two sees the other. */
    atomic_store(&c->threadFd, threadWakeFd + 1);
    return 0;
}

int
corRestCancelBind(CorRestCancel* c)
{
    CorEvLoop* loop = layerLoop();

    if (loop != NULL) {
        return loop->hooks->cancelBind(c);
    }
    return threadCancelBind(c);
}

void
corRestCancel(CorRestCancel* c)
{
    uint64_t one = 1;
    int fd;

    atomic_store(&c->cancelled, true);
    fd = atomic_load(&c->threadFd);
    if (fd > 0 && write(fd - 1, &one, sizeof(one)) < 0) {
        /* Saturated: it is readable anyway. */
    }
    if (c->waiter != NULL) {
        CorEvLoop* loop = corEvLoopCurrent();

        /* Only this thread's loop may settle a wait of its own. */
        if (loop != NULL && loop->hooks != NULL) {
            loop->hooks->cancelWait(loop, c->waiter);
        }
    }
}

static bool
threadCancelled(void)
{
    return atomic_load(&cancelled)
           || (threadCancel != NULL && corRestCancelled(threadCancel));
}

/* Read the thread's wake fd empty: the next round's flag check says
 * whether the wake was a cancel or a stale one. */
static void
threadWakeDrain(void)
{
    uint64_t wakes;

    if (read(threadWakeFd, &wakes, sizeof(wakes)) < 0) {
        /* Empty already. */
    }
}

/* What is left of timeoutMs until deadline (< 0 stays: no timeout). */
static int
remainingMs(int timeoutMs, uint64_t deadline)
{
    uint64_t now;

    if (timeoutMs <= 0) {
        return timeoutMs;
    }
    now = corEvClockMs();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* poll() on one fd, the process's cancel fd and the thread's wake fd,
 * retried on EINTR and on a stale wake until the same deadline. */
static int
pollFd(int fd, short events, int timeoutMs, short* reventsP)
{
    struct pollfd pfds[3];
    nfds_t count = 2;
    uint64_t deadline = corEvClockMs()
                        + (uint64_t)(timeoutMs > 0 ? timeoutMs : 0);
    int rc;

    pthread_once(&cancelOnce, cancelFdOpen);
    pfds[0] = (struct pollfd){ .fd = fd, .events = events };
    pfds[1] = (struct pollfd){ .fd = cancelFd, .events = POLLIN };
    if (threadCancel != NULL && threadWakeFd >= 0) {
        pfds[count++] = (struct pollfd){ .fd = threadWakeFd, .events = POLLIN };
    }
    *reventsP = 0;
    for (;;) {
        bool woken = false;

        if (threadCancelled()) {
            errno = ECANCELED;
            return -1;
        }
        rc = poll(pfds, count, timeoutMs);
        if (rc < 0 && errno != EINTR) {
            return -1;
        }
        if (rc > 0 && pfds[1].revents != 0) {
            errno = ECANCELED;
            return -1;
        }
        if (rc > 0 && count == 3 && pfds[2].revents != 0) {
            threadWakeDrain();
            woken = true;
            rc--;
        }
        if (rc > 0 || (rc == 0 && !woken)) {
            break;
        }
        timeoutMs = remainingMs(timeoutMs, deadline);
    }
    *reventsP = rc > 0 ? pfds[0].revents : 0;
    return rc;
}

int
corRestWaitFd(int fd, short events, int timeoutMs, short* reventsP)
{
    CorEvLoop* loop = layerLoop();

    if (loop != NULL) {
        return loop->hooks->wait(fd, events, timeoutMs, reventsP);
    }
    return pollFd(fd, events, timeoutMs, reventsP);
}
