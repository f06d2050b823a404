/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loop on io_uring (runtime.io: uring): the readiness the epoll loop
 * delivers, CorEvIo callbacks and coroutine waits, from poll requests on a
 * ring of the loop's own. What changes is the count of system calls:
 * arming a wait, arming again, and taking a watch away are entries written
 * to the submission ring, all handed over by the one io_uring_enter that
 * sleeps, where epoll pays an epoll_ctl for each.
 *
 * - A CorEvIo with EPOLLET is one multishot poll, armed once, as its epoll
 *   registration is. Without EPOLLET (listeners, the wake eventfd, the
 *   resolver) it is a one-shot poll armed again after each callback: a
 *   poll checks readiness when it is armed, which makes it level-triggered.
 * - A coroutine wait is a one-shot poll. A wait that ends some other way
 *   (timeout, cancel, close) removes its poll, because a pending poll holds
 *   its file open: a socket closed meanwhile would stay connected until
 *   the poll fired.
 * - user_data never points at memory: it carries the fd and the generation
 *   of the arming (corEvArming), as the epoll loop's waits do, so a
 *   completion that outlives its watch or its wait is dropped.
 * - A multishot poll completes once per wakeup where epoll folds wakeups
 *   into one event: the completions of one CorEvIo in a batch are merged
 *   into one callback, so a busy connection is not read once per packet.
 *
 * - An entry the ring has no room for (a turn that arms more than it
 *   holds, and whose early submit failed; arming before the first turn)
 *   is not dropped: it waits in a list the next turn writes first, so a
 *   watch is never left unarmed and a removal never forgotten (a
 *   forgotten removal would hold its file open).
 *
 * The ring is single-issuer, and the kernel's completion work waits for
 * the loop's next system call instead of interrupting it (cooperative task
 * work; Linux 6.0, which also has the multishot poll this needs: an older
 * kernel is refused, and a server falls back to epoll). Not deferred to
 * the loop's io_uring_enter alone (DEFER_TASKRUN): a kernel runs at most
 * 20 of that work an enter (IO_LOCAL_TW_DEFAULT_MAX), so a busy loop
 * would turn, and enter, once per 20 events where epoll_wait gives it a
 * batch. Such a ring belongs to the thread that enables it, and a server's
 * loops are made by one thread and run on others: so the ring is made disabled
 * and the loop's first turn enables it. A run's end submits what is still
 * written (the removals of the watches its stop took away) and lets the
 * thread's registration of the ring go, so that the loop may be destroyed from
 * another thread.
 */
#include "corEvInt.h"

#if COR_HAVE_URING

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <sys/epoll.h>

/* Arming is batched: a full submission ring is submitted early, so the
 * size bounds only the batch. The completion ring holds a turn's events
 * (the kernel keeps what overflows, in order, at some cost). */
#define URING_ENTRIES 1024
#define URING_COMPLETIONS 8192
#define COMPLETIONS_PER_TURN 256

/* An entry the ring had no room for: the arming of the CorEvIo of fd
 * (data 0), or the removal of the poll of data. */
typedef struct {
    uint64_t data;
    int fd;
} Deferred;

struct CorEvUring {
    struct io_uring ring;
    bool enabled;    /* by the thread that runs the loop */
    bool running;    /* a run's first turn made it ready */
    bool registered; /* the ring's fd, in that thread's table */
    Deferred* deferred;
    unsigned deferredCount;
    unsigned deferredCap;
};

/* A completion kept for dispatch after the batch is read and released:
 * a callback may arm and submit, and a CorEvIo's wakeups are merged. */
typedef struct {
    uint64_t data;
    unsigned events;
} Completion;

int
corEvUringCreate(CorEvLoop* loop)
{
    struct io_uring_params params = {
        .flags = IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE
                 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN
                 | IORING_SETUP_TASKRUN_FLAG,
        .cq_entries = URING_COMPLETIONS,
    };
    struct CorEvUring* u = calloc(1, sizeof(*u));
    int rc;

    if (u == NULL) {
        return -ENOMEM;
    }
    rc = io_uring_queue_init_params(URING_ENTRIES, &u->ring, &params);
    if (rc < 0) {
        free(u);
        /* EINVAL: a kernel before 6.0, without these flags. */
        return rc == -EINVAL ? -ENOSYS : rc;
    }
    loop->uring = u;
    return 0;
}

void
corEvUringDestroy(CorEvLoop* loop)
{
    /* The ring's exit cancels its polls and lets their files go. */
    io_uring_queue_exit(&loop->uring->ring);
    free(loop->uring->deferred);
    free(loop->uring);
    loop->uring = NULL;
}

static struct io_uring_sqe*
sqeGet(struct CorEvUring* u)
{
    struct io_uring_sqe* sqe = io_uring_get_sqe(&u->ring);

    /* A turn armed more than the ring holds: hand it over now (once it
     * is the loop's thread's to submit). */
    if (sqe == NULL && u->enabled && io_uring_submit(&u->ring) >= 0) {
        sqe = io_uring_get_sqe(&u->ring);
    }
    return sqe;
}

/* Keep what found no room for the next turn; false without memory. */
static bool
defer(struct CorEvUring* u, int fd, uint64_t data)
{
    if (u->deferredCount == u->deferredCap) {
        unsigned cap = u->deferredCap ? u->deferredCap * 2 : 64;
        Deferred* d = realloc(u->deferred, cap * sizeof(*d));

        if (d == NULL) {
            return false;
        }
        u->deferred = d;
        u->deferredCap = cap;
    }
    u->deferred[u->deferredCount++] = (Deferred){ data, fd };
    return true;
}

static int
pollAdd(CorEvLoop* loop, int fd, unsigned events, uint64_t data, bool multishot)
{
    struct io_uring_sqe* sqe = sqeGet(loop->uring);
    unsigned mask = events & ~(unsigned)(EPOLLET | EPOLLONESHOT);

    if (sqe == NULL) {
        return -EBUSY;
    }
    if (multishot) {
        io_uring_prep_poll_multishot(sqe, fd, mask);
    } else {
        io_uring_prep_poll_add(sqe, fd, mask);
    }
    io_uring_sqe_set_data64(sqe, data);
    return 0;
}

static void
pollRemove(CorEvLoop* loop, uint64_t data)
{
    struct io_uring_sqe* sqe = sqeGet(loop->uring);

    if (sqe == NULL) {
        /* Its completions are dropped by their generation meanwhile; a
         * removal lost for want of memory would only keep the file open
         * until the poll fires or the ring goes. */
        (void)defer(loop->uring, -1, data);
        return;
    }
    io_uring_prep_poll_remove(sqe, data);
    io_uring_sqe_set_data64(sqe, 0);
}

/* ---- CorEvIo ------------------------------------------------------------- */

static int
ioArm(CorEvLoop* loop, CorEvIo* io)
{
    CorEvFdSlot* slot = &loop->fds[io->fd];
    uint32_t generation = corEvGenerationNext(slot->generation);
    int rc = pollAdd(loop, io->fd, io->events,
                     corEvArming(io->fd, generation, 0), io->events & EPOLLET);

    if (rc == 0) {
        slot->generation = generation;
        slot->ioArmed = true;
    }
    return rc;
}

/* Take the watch's poll away; a completion of it still to come, or read
 * into the batch being dispatched, finds a newer generation. */
static void
ioDisarm(CorEvLoop* loop, CorEvIo* io)
{
    CorEvFdSlot* slot = &loop->fds[io->fd];

    if (slot->ioArmed) {
        pollRemove(loop, corEvArming(io->fd, slot->generation, 0));
        slot->ioArmed = false;
    }
    slot->generation = corEvGenerationNext(slot->generation);
    slot->ioBatchAt = 0;
}

/* Arm io now, or at the next turn when the ring has no room. */
static int
ioArmOrDefer(CorEvLoop* loop, CorEvIo* io)
{
    if (ioArm(loop, io) == 0 || defer(loop->uring, io->fd, 0)) {
        return 0;
    }
    return -ENOMEM;
}

int
corEvUringIoStart(CorEvLoop* loop, CorEvIo* io)
{
    CorEvFdSlot* slot = &loop->fds[io->fd];
    int rc;

    slot->io = io;
    slot->ioBatchAt = 0;
    rc = ioArmOrDefer(loop, io);
    if (rc != 0) {
        slot->io = NULL;
    }
    return rc;
}

int
corEvUringIoSet(CorEvLoop* loop, CorEvIo* io, unsigned events)
{
    if (loop->fds[io->fd].io != io) {
        return -ENOENT; /* not started, or stopped */
    }
    ioDisarm(loop, io);
    io->events = events;
    return ioArmOrDefer(loop, io);
}

void
corEvUringIoStop(CorEvLoop* loop, CorEvIo* io)
{
    ioDisarm(loop, io);
    loop->fds[io->fd].io = NULL;
}

/* ---- One-shot armings (a coroutine's wait) ------------------------------- */

int
corEvUringWaitArm(CorEvLoop* loop, int fd, short events, uint64_t data)
{
    return pollAdd(loop, fd, (unsigned)(unsigned short)events, data, false);
}

void
corEvUringWaitDisarm(CorEvLoop* loop, uint64_t data)
{
    pollRemove(loop, data);
}

/* ---- A turn -------------------------------------------------------------- */

static int
enable(struct CorEvUring* u)
{
    if (!u->enabled) {
        /* io_uring_enable_rings is declared by liburing 2.3 (Debian 12's)
         * but not exported by its library: the registration it wraps. */
        int rc = io_uring_register(u->ring.ring_fd,
                                   IORING_REGISTER_ENABLE_RINGS, NULL, 0);

        if (rc < 0) {
            return rc;
        }
        u->enabled = true;
    }
    /* Saves the kernel a lookup of the ring's fd at every enter; a kernel
     * without it works as well. */
    u->registered = io_uring_register_ring_fd(&u->ring) == 1;
    u->running = true;
    return 0;
}

static int
submitAndWait(struct CorEvUring* u, int timeoutMs)
{
    struct io_uring_cqe* cqe;
    int rc;

    if (timeoutMs == 0) {
        rc = io_uring_submit_and_get_events(&u->ring);
    } else if (timeoutMs < 0) {
        rc = io_uring_submit_and_wait(&u->ring, 1);
    } else {
        struct __kernel_timespec ts = {
            .tv_sec = timeoutMs / 1000,
            .tv_nsec = (long long)(timeoutMs % 1000) * 1000000,
        };

        rc = io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, &ts, NULL);
    }
    /* A timeout, a signal, or completions the kernel holds back until
     * these are read: a turn with what is there. */
    return rc == -ETIME || rc == -EINTR || rc == -EBUSY || rc == -EAGAIN ? 0
                                                                         : rc;
}

/* Keep one completion for dispatch: a coroutine wait's as it is, a
 * CorEvIo's merged into the entry its fd has in this batch. */
static unsigned
keep(CorEvLoop* loop, const struct io_uring_cqe* cqe, Completion* batch,
     unsigned count)
{
    uint64_t data = cqe->user_data;
    unsigned fd = (unsigned)(data >> 32);
    unsigned events = cqe->res >= 0            ? (unsigned)cqe->res
                      : cqe->res == -ECANCELED ? 0
                                               : EPOLLERR;
    CorEvFdSlot* slot;

    if (data == 0 || data == LIBURING_UDATA_TIMEOUT) {
        return count;
    }
    if (data & COR_EV_WAITER_TAG) {
        if (events != 0) {
            batch[count++] = (Completion){ data, events };
        }
        return count;
    }
    if (fd >= loop->fdCount) {
        return count;
    }
    slot = &loop->fds[fd];
    if (slot->io == NULL
        || slot->generation != ((uint32_t)(data >> 1) & 0x7fffffff)) {
        return count;
    }
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        slot->ioArmed = false; /* one-shot, or a multishot ended */
    }
    if (slot->ioBatchAt != 0) {
        batch[slot->ioBatchAt - 1].events |= events;
        return count;
    }
    batch[count++] = (Completion){ data, events };
    slot->ioBatchAt = count;
    return count;
}

static void
deliver(CorEvLoop* loop, const Completion* c)
{
    unsigned fd = (unsigned)(c->data >> 32);
    uint32_t generation = (uint32_t)(c->data >> 1) & 0x7fffffff;
    CorEvFdSlot* slot;
    CorEvIo* io;

    if (c->data & COR_EV_WAITER_TAG) {
        corEvOnceFire(loop, c->data, c->events);
        return;
    }
    slot = &loop->fds[fd];
    io = slot->io;
    if (io == NULL || slot->generation != generation) {
        return; /* stopped by an earlier callback of the batch */
    }
    slot->ioBatchAt = 0;
    if (c->events != 0) {
        io->fn(io, c->events);
    }
    /* The callback may have grown the table: look again. The same watch,
     * with its poll ended, is armed again. */
    slot = &loop->fds[fd];
    if (slot->io == io && slot->generation == generation && !slot->ioArmed
        && ioArmOrDefer(loop, io) != 0) {
        io->fn(io, EPOLLERR);
    }
}

/* What earlier turns could not write, first: the arming of a watch still
 * unarmed, the removal of a poll. */
static void
deferredWrite(CorEvLoop* loop)
{
    struct CorEvUring* u = loop->uring;
    unsigned count = u->deferredCount;
    Deferred* d = u->deferred;

    u->deferred = NULL;
    u->deferredCount = 0;
    u->deferredCap = 0;
    for (unsigned i = 0; i < count; i++) {
        if (d[i].fd < 0) {
            pollRemove(loop, d[i].data);
            continue;
        }
        CorEvFdSlot* slot = &loop->fds[d[i].fd];

        if (slot->io != NULL && !slot->ioArmed
            && ioArmOrDefer(loop, slot->io) != 0) {
            slot->io->fn(slot->io, EPOLLERR);
        }
    }
    free(d);
}

int
corEvUringRun(CorEvLoop* loop, int timeoutMs)
{
    struct CorEvUring* u = loop->uring;
    struct io_uring_cqe* cqes[COMPLETIONS_PER_TURN];
    Completion batch[COMPLETIONS_PER_TURN];
    unsigned n;
    unsigned count = 0;
    int rc;

    if (!u->running && (rc = enable(u)) < 0) {
        return rc;
    }
    if (u->deferredCount > 0) {
        deferredWrite(loop);
    }
    rc = submitAndWait(u, timeoutMs);
    if (rc < 0) {
        return rc;
    }
    loop->now = corEvClockMs();
    /* One batch a turn, as epoll_wait's: what is left is the next turn's,
     * after the timers and the posted tasks had theirs. */
    n = io_uring_peek_batch_cqe(&u->ring, cqes, COMPLETIONS_PER_TURN);
    for (unsigned i = 0; i < n; i++) {
        count = keep(loop, cqes[i], batch, count);
    }
    io_uring_cq_advance(&u->ring, n);
    for (unsigned i = 0; i < count; i++) {
        deliver(loop, &batch[i]);
    }
    return 0;
}

void
corEvUringRunEnd(CorEvLoop* loop)
{
    struct CorEvUring* u = loop->uring;

    if (!u->running) {
        return;
    }
    u->running = false;
    deferredWrite(loop);
    (void)io_uring_submit_and_get_events(&u->ring);
    if (u->registered) {
        (void)io_uring_unregister_ring_fd(&u->ring);
        u->registered = false;
    }
}

#endif /* COR_HAVE_URING */
