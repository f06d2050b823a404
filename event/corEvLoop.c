/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event loop: one per thread, on epoll (or io_uring, corEvUring.c,
 * through the same calls). An iteration lets the layer above it resume the
 * coroutines made ready since the last one, runs what the last one left
 * to do before the sleep (CorEvSoon: the writes its handlers queued, one
 * write a connection, and no turn of its own), sleeps in epoll_wait until the
 * earliest timer, dispatches the events (a tagged one is a one-shot
 * arming's, given to that layer; any other a CorEvIo's), fires the timers
 * that are due, and runs the tasks other threads posted.
 *
 * The loop knows no coroutine: the layer above it (corCoLoop.c) gives it
 * hooks when it makes a loop (CorEvHooks, as Redis's
 * aeSetBeforeSleepProc), and keeps its state behind one pointer.
 *
 * Other threads reach a loop only through corEvLoopPost and corEvLoopStop:
 * a lock-free stack of tasks and an eventfd that is written only when the
 * stack goes from empty to not empty, so a burst of posts costs one wake.
 */
#include "corEvInt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define EVENTS_PER_WAIT 256
/* Runs of the before-sleep work in one turn before the loop polls without
 * sleeping instead (work that keeps arming itself must not starve I/O). */
#define SOON_PASSES 4

static __thread CorEvLoop* currentLoop;
static atomic_uint loopsCreated;

static void
wakeRead(CorEvIo* io, unsigned events)
{
    CorEvLoop* loop = corContainerOf(io, CorEvLoop, wakeIo);
    uint64_t count;

    (void)events;
    /* Read before draining: a post that lands after the drain sees an
     * empty stack and writes again, so it is never lost. */
    if (read(loop->wakeFd, &count, sizeof(count)) < 0) {
        return;
    }
}

static void
wakeWrite(CorEvLoop* loop)
{
    uint64_t one = 1;

    if (write(loop->wakeFd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is saturated, a wake is pending anyway. */
    }
}

void*
corCallocLines(size_t count, size_t size)
{
    size_t bytes;
    void* p;

    if (__builtin_mul_overflow(count, size, &bytes)) {
        return NULL;
    }
    /* aligned_alloc wants a multiple of the alignment. */
    bytes = (bytes + COR_CACHE_LINE - 1) / COR_CACHE_LINE * COR_CACHE_LINE;
    p = aligned_alloc(COR_CACHE_LINE, bytes);
    if (p != NULL) {
        memset(p, 0, bytes);
    }
    return p;
}

/* The backend's own part of a new loop: 0, or -1 with errno. */
static int
backendCreate(CorEvLoop* loop, CorEvBackend backend)
{
    if (backend == COR_EV_EPOLL) {
        loop->epfd = epoll_create1(EPOLL_CLOEXEC);
        return loop->epfd < 0 ? -1 : 0;
    }
    int rc = corEvUringCreate(loop);

    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
}

static void
backendDestroy(CorEvLoop* loop)
{
    if (loop->uring != NULL) {
        corEvUringDestroy(loop);
    }
    if (loop->epfd >= 0) {
        close(loop->epfd);
    }
}

CorEvLoop*
corEvLoopMake(CorEvBackend backend)
{
    CorEvLoop* loop = corCallocLines(1, sizeof(*loop));
    int err;

    if (loop == NULL) {
        return NULL;
    }
    loop->wakeFd = -1;
    loop->epfd = -1;
    loop->id = atomic_fetch_add(&loopsCreated, 1) + 1;
    if (backendCreate(loop, backend) != 0) {
        goto failed;
    }
    loop->wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop->wakeFd < 0) {
        goto failed;
    }
    loop->now = corEvClockMs();
    if (corEvIoStart(loop, &loop->wakeIo, loop->wakeFd, EPOLLIN, wakeRead)
        != 0) {
        goto failed;
    }
    return loop;

failed:
    err = errno;
    if (loop->wakeFd >= 0) {
        close(loop->wakeFd);
    }
    backendDestroy(loop);
    free(loop->fds);
    free(loop);
    errno = err;
    return NULL;
}

CorEvBackend
corEvLoopBackend(const CorEvLoop* loop)
{
    return loop->uring != NULL ? COR_EV_URING : COR_EV_EPOLL;
}

/* The resolver's channel and cache go with the loop's run: a stopped loop
 * has no lookup in flight, and a later run makes them again. */
static void
resolverRelease(CorEvLoop* loop)
{
    if (loop->resolver != NULL) {
        loop->resolverFree(loop->resolver);
        loop->resolver = NULL;
    }
}

void
corEvLoopDestroy(CorEvLoop* loop)
{
    if (loop == NULL) {
        return;
    }
    if (currentLoop == loop) {
        currentLoop = NULL;
    }
    /* A post may still be between its push and its wake. */
    while (atomic_load(&loop->posters) > 0) {
        sched_yield();
    }
    resolverRelease(loop);
    if (loop->hooks != NULL) {
        loop->hooks->destroy(loop);
    }
    close(loop->wakeFd);
    backendDestroy(loop);
    free(loop->fds);
    free(loop);
}

void
corEvLoopBind(CorEvLoop* loop)
{
    currentLoop = loop;
}

CorEvLoop*
corEvLoopCurrent(void)
{
    return currentLoop;
}

uint64_t
corEvNow(const CorEvLoop* loop)
{
    return loop->now;
}

/* ---- The fd table and one-shot armings ----------------------------------- */

void*
corEvTableGrow(void* table, unsigned* countP, size_t size, int fd)
{
    unsigned count = *countP ? *countP : 64;
    char* grown;

    while (count <= (unsigned)fd) {
        count *= 2;
    }
    grown = realloc(table, count * size);
    if (grown == NULL) {
        return NULL;
    }
    memset(grown + *countP * size, 0, (count - *countP) * size);
    *countP = count;
    return grown;
}

CorEvFdSlot*
corEvFdGrow(CorEvLoop* loop, int fd)
{
    CorEvFdSlot* fds = corEvTableGrow(loop->fds, &loop->fdCount, sizeof(*fds),
                                      fd);

    if (fds == NULL) {
        return NULL;
    }
    loop->fds = fds;
    return &fds[fd];
}

static inline void
onceDrop(CorEvLoop* loop, int fd, CorEvFdSlot* slot)
{
    if (loop->uring != NULL && slot->armed != 0) {
        corEvUringWaitDisarm(loop, corEvArming(fd, slot->generation,
                                               COR_EV_WAITER_TAG));
    }
    slot->armed = 0;
}

void
corEvOnceDrop(CorEvLoop* loop, int fd)
{
    onceDrop(loop, fd, &loop->fds[fd]);
}

int
corEvOnceArm(CorEvLoop* loop, int fd, short events)
{
    CorEvFdSlot* slot = &loop->fds[fd];
    struct epoll_event ev;
    int op;

    onceDrop(loop, fd, slot);
    slot->generation = corEvGenerationNext(slot->generation);
    ev.events = (unsigned)events | EPOLLONESHOT;
    ev.data.u64 = corEvArming(fd, slot->generation, COR_EV_WAITER_TAG);
    if (loop->uring != NULL) {
        int rc = corEvUringWaitArm(loop, fd, events, ev.data.u64);

        if (rc != 0) {
            errno = -rc;
            return -1;
        }
        slot->armed = events;
        return 0;
    }
    /* The slot is a hint: a closed and reopened fd is no longer in the
     * set, a dup'ed one may be. Either way one retry settles it. */
    op = slot->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(loop->epfd, op, fd, &ev) != 0) {
        op = errno == ENOENT   ? EPOLL_CTL_ADD
             : errno == EEXIST ? EPOLL_CTL_MOD
                               : -1;
        if (op < 0 || epoll_ctl(loop->epfd, op, fd, &ev) != 0) {
            return -1;
        }
    }
    slot->registered = true;
    slot->armed = events;
    return 0;
}

void
corEvOnceEnd(CorEvLoop* loop, int fd)
{
    CorEvFdSlot* slot = &loop->fds[fd];

    slot->armed = 0;
    if (loop->uring != NULL) {
        corEvUringWaitDisarm(loop, corEvArming(fd, slot->generation,
                                               COR_EV_WAITER_TAG));
    }
    /* A CorEvIo that took the fd over (a closed fd's number reused) keeps
     * its registration. */
    if (slot->registered && !slot->ioOwned) {
        epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
        slot->registered = false;
    }
}

void
corEvOnceClosed(CorEvLoop* loop, int fd)
{
    corEvOnceDrop(loop, fd);
    loop->fds[fd].registered = false;
}

/*
 * A CorEvIo takes fd, or lets it go: one-shot armings of it are refused
 * meanwhile (the layer above checks ioOwned), and what waited on it is
 * ended (the hooks' fdTaken). Returns 1 when one-shot armings had left fd
 * in the epoll set (disarmed), 0 when they had not, -1 without memory.
 */
static int
fdOwned(CorEvLoop* loop, int fd, bool owned)
{
    CorEvFdSlot* slot = fd >= 0 ? corEvFdSlot(loop, fd) : NULL;

    if (slot == NULL) {
        return fd >= 0 ? -1 : 0;
    }
    if (owned && loop->hooks != NULL) {
        loop->hooks->fdTaken(loop, fd);
    }
    if (owned) {
        corEvOnceDrop(loop, fd);
    }
    bool registered = slot->registered;

    slot->ioOwned = owned;
    slot->registered = false;
    return registered ? 1 : 0;
}

/* ---- File events --------------------------------------------------------- */

int
corEvIoStart(CorEvLoop* loop, CorEvIo* io, int fd, unsigned events,
             CorEvIoFn fn)
{
    struct epoll_event ev = { .events = events, .data.ptr = io };

    /* Another CorEvIo's fd: refused before its ownership is touched. */
    if (fd >= 0 && (unsigned)fd < loop->fdCount && loop->fds[fd].ioOwned) {
        return -EEXIST;
    }
    io->fn = fn;
    io->fd = fd;
    io->events = 0;
    /* A socket that coroutines waited on (a client's connect) stays in
     * the set after its one-shot waits: it is taken over as it is. That is
     * a hint (a closed and reopened fd left the set): one retry settles
     * it. Any other fd already in the set is another CorEvIo's: EEXIST. */
    int inSet = fdOwned(loop, fd, true);

    if (loop->uring != NULL && inSet >= 0) {
        int rc;

        io->events = events;
        rc = corEvUringIoStart(loop, io);
        if (rc != 0) {
            io->events = 0;
            fdOwned(loop, fd, false);
        }
        return rc;
    }
    if (inSet < 0
        || (epoll_ctl(loop->epfd, inSet ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd,
                      &ev)
                != 0
            && !(inSet && errno == ENOENT
                 && epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) == 0))) {
        int err = errno;

        fdOwned(loop, fd, false);
        return -err;
    }
    io->events = events;
    return 0;
}

int
corEvIoSet(CorEvLoop* loop, CorEvIo* io, unsigned events)
{
    struct epoll_event ev = { .events = events, .data.ptr = io };

    if (events == io->events) {
        return 0;
    }
    if (loop->uring != NULL) {
        return corEvUringIoSet(loop, io, events);
    }
    if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, io->fd, &ev) != 0) {
        return -errno;
    }
    io->events = events;
    return 0;
}

void
corEvIoStop(CorEvLoop* loop, CorEvIo* io)
{
    if (loop->uring != NULL) {
        corEvUringIoStop(loop, io);
        fdOwned(loop, io->fd, false);
        io->events = 0;
        return;
    }
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    fdOwned(loop, io->fd, false);
    io->events = 0;
    for (int i = loop->batchIndex + 1; i < loop->batchCount; i++) {
        if (loop->batch[i].data.ptr == io) {
            loop->batch[i].data.ptr = NULL;
        }
    }
}

/* ---- Tasks from other threads -------------------------------------------- */

void
corEvLoopPost(CorEvLoop* loop, CorEvTask* task, CorEvTaskFn fn)
{
    CorEvTask* head = atomic_load_explicit(&loop->posted, memory_order_relaxed);

    task->fn = fn;
    /* Counted until the wake is written: once the task is pushed, the loop
     * may run it, finish, and be destroyed before this thread writes. */
    atomic_fetch_add(&loop->posters, 1);
    do {
        task->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&loop->posted, &head, task,
                                                    memory_order_release,
                                                    memory_order_relaxed));
    if (head == NULL) {
        wakeWrite(loop);
    }
    atomic_fetch_sub(&loop->posters, 1);
}

/* Run what was posted, oldest first (the stack is LIFO, so reverse it). */
static void
runPosted(CorEvLoop* loop)
{
    CorEvTask* task = atomic_exchange_explicit(&loop->posted, NULL,
                                               memory_order_acquire);
    CorEvTask* fifo = NULL;

    while (task != NULL) {
        CorEvTask* next = task->next;

        task->next = fifo;
        fifo = task;
        task = next;
    }
    while (fifo != NULL) {
        CorEvTask* next = fifo->next;

        fifo->fn(fifo);
        fifo = next;
    }
}

/* ---- Before the loop sleeps ---------------------------------------------- */

void
corEvSoonStart(CorEvLoop* loop, CorEvSoon* soon, CorEvSoonFn fn)
{
    if (!corEvSoonDue(soon)) {
        soon->fn = fn;
        corListAppend(&loop->soon, &soon->link);
    }
}

void
corEvSoonStop(CorEvSoon* soon)
{
    corListRemove(&soon->link);
}

/* Run what is due now, in the order it was armed; what a run arms again
 * waits for the next pass. Whether anything ran. */
static bool
runSoon(CorEvLoop* loop)
{
    CorList due;
    CorList* node;

    if (corListEmpty(&loop->soon)) {
        return false;
    }
    corListMove(&due, &loop->soon);
    while ((node = corListFirst(&due)) != NULL) {
        CorEvSoon* soon = corContainerOf(node, CorEvSoon, link);

        corListRemove(node);
        soon->fn(soon);
    }
    return true;
}

/* ---- Running ------------------------------------------------------------- */

void
corEvLoopStop(CorEvLoop* loop)
{
    atomic_store(&loop->stopRequested, true);
    wakeWrite(loop);
}

static void
dispatch(CorEvLoop* loop, const struct epoll_event* ev)
{
    if (ev->data.u64 & COR_EV_WAITER_TAG) {
        corEvOnceFire(loop, ev->data.u64, ev->events);
    } else if (ev->data.ptr != NULL) {
        CorEvIo* io = ev->data.ptr;

        io->fn(io, ev->events);
    }
}

/*
 * A stop cancels the coroutine waits once (the hooks' stop), then the loop
 * keeps turning until its coroutines have run their failure paths to the
 * end (a blocking call still finishing on another thread brings its
 * coroutine back through a posted task) and what other threads posted has
 * run.
 */
static bool
keepRunning(CorEvLoop* loop)
{
    if (!loop->stopping && atomic_load(&loop->stopRequested)) {
        loop->stopping = true;
        if (loop->hooks != NULL) {
            loop->hooks->stop(loop);
        }
    }
    return !loop->stopping || (loop->hooks != NULL && loop->hooks->live(loop));
}

/* Sleep in epoll_wait up to timeoutMs and dispatch what it found. */
static int
epollTurn(CorEvLoop* loop, int timeoutMs)
{
    struct epoll_event events[EVENTS_PER_WAIT];
    int n = epoll_wait(loop->epfd, events, EVENTS_PER_WAIT, timeoutMs);

    if (n < 0 && errno != EINTR) {
        return -errno;
    }
    loop->now = corEvClockMs();
    loop->batch = events;
    loop->batchCount = n;
    for (loop->batchIndex = 0; loop->batchIndex < n; loop->batchIndex++) {
        dispatch(loop, &events[loop->batchIndex]);
    }
    loop->batchCount = 0;
    loop->batch = NULL;
    return 0;
}

int
corEvLoopRunOnce(CorEvLoop* loop, int timeoutMs)
{
    int nextTimer;
    int rc;

    corEvLoopBind(loop);
    /* The ready coroutines first: they may arm the earliest timer. Then
     * what this turn left to do before the sleep (its writes), which may
     * make coroutines ready again (a writer that waited for room): a few
     * passes, and no sleep while anything is left. */
    bool awake = loop->hooks != NULL && loop->hooks->beforePoll(loop);

    for (int pass = 0; pass < SOON_PASSES && runSoon(loop); pass++) {
        awake = loop->hooks != NULL && loop->hooks->beforePoll(loop);
    }
    nextTimer = corEvTimersNextMs(loop);
    if (awake || !corListEmpty(&loop->soon)
        || atomic_load_explicit(&loop->posted, memory_order_relaxed) != NULL
        || (loop->stopping
            && (loop->hooks == NULL || !loop->hooks->live(loop)))) {
        /* A stopping loop whose last coroutine just ended has nothing more
         * to wait for: a sleep here would last until some unrelated event
         * (seconds), and the stop with it. */
        timeoutMs = 0;
    } else if (nextTimer >= 0 && (timeoutMs < 0 || nextTimer < timeoutMs)) {
        timeoutMs = nextTimer;
    }
    rc = loop->uring != NULL ? corEvUringRun(loop, timeoutMs)
                             : epollTurn(loop, timeoutMs);
    if (rc != 0) {
        return rc;
    }
    corEvTimersExpire(loop);
    runPosted(loop);
    return 0;
}

int
corEvLoopRun(CorEvLoop* loop)
{
    int rc = 0;

    corEvLoopBind(loop);
    loop->now = corEvClockMs();
    while (rc == 0 && keepRunning(loop)) {
        rc = corEvLoopRunOnce(loop, -1);
    }
    /* What other threads posted before the stop (a worker's finished
     * request) still runs: it carries an answer. */
    runPosted(loop);
    runSoon(loop);
    resolverRelease(loop);
    if (loop->uring != NULL) {
        corEvUringRunEnd(loop);
    }
    atomic_store(&loop->stopRequested, false);
    loop->stopping = false;
    if (loop->hooks != NULL) {
        loop->hooks->runEnd(loop);
    }
    return rc;
}
