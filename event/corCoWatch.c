/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Watches: a one-shot arming of an fd that coroutines of a loop wait on,
 * for the time none does (an idle pooled connection's, whose event calls
 * its owner back). Ended, a watch leaves its arming to the coroutine that
 * ended it, whose next wait for the same events takes it over
 * (corCoLoop.c's armFd): a connection taken and waited on costs no more
 * calls than one that was never watched.
 */
#include "corCoLoopInt.h"

#include <errno.h>

int
corCoLoopWatch(CorCoWatch* watch, int fd, short events, CorCoWatchFn fn)
{
    CorEvLoop* loop = corEvLoopCurrent();
    CorCoFdSlot* slot;

    if (loop == NULL || fd < 0) {
        return -EPERM;
    }
    slot = corCoFdClaim(loop, fd);
    if (slot == NULL) {
        return -errno;
    }
    /* Anew: an heir's arming may have fired, unseen yet (io_uring). */
    if (corCoFdArm(loop, fd, slot, events) != 0) {
        return -errno;
    }
    watch->fn = fn;
    watch->fd = fd;
    slot->watch = watch;
    return 0;
}

void
corCoLoopUnwatch(CorCoWatch* watch)
{
    CorEvLoop* loop = corEvLoopCurrent();
    CorCoFdSlot* slot;

    if (loop == NULL || (unsigned)watch->fd >= loop->co->fdCount) {
        return;
    }
    slot = &loop->co->fds[watch->fd];
    if (slot->watch == watch) {
        slot->watch = NULL;
        slot->heir = corCoCurrent();
    }
}
