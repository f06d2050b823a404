/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Coroutines on the loop: spawn, waits on fds and timers, park/wake, close
 * and cancel (the whole loop's, or one coroutine's through the cancel its
 * waits are bound to).
 *
 * A waiting coroutine keeps a CorCoWaiter on its own stack. The loop finds
 * it three ways: through epoll (the waiter's address, low bit set, as
 * epoll_data), through its timer, and through the loop's list of waits
 * (which is what cancel walks). Whichever comes first settles the outcome,
 * undoes the other two, and resumes the coroutine.
 *
 * One epoll_ctl per wait: fds are armed EPOLLONESHOT, so an event disarms
 * the fd without a call, and the loop remembers which fds it has in the
 * epoll set so that the next wait is a MOD, not a DEL and an ADD. Only a
 * wait that ends without its event (timeout, cancel) pays a second call to
 * take the fd out, since an armed fd would later deliver an event for a
 * waiter that no longer exists.
 *
 * A watch (corCoLoopWatch) is such an arming with nobody waiting: an idle
 * pooled connection's, whose event calls its owner back. Ended, it leaves
 * its arming to the coroutine that ended it, whose next wait for the same
 * events takes it over: a connection taken and waited on costs no more
 * calls than one that was never watched.
 *
 * Only the loop resumes a waiting coroutine, and only between event
 * batches (wakes and cancels go through the ready queue): so a waiter whose
 * event is still further down the current batch is alive when it is
 * reached, and is skipped because it is settled.
 */
#include "corEvInt.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define COR_CO_LOOP_CAP_DEFAULT 1024

void
corCoLoopInit(CorEvLoop* loop)
{
    loop->cap = COR_CO_LOOP_CAP_DEFAULT;
}

void
corCoLoopFree(CorEvLoop* loop)
{
    free(loop->fds);
    free(loop->parks);
}

void
corCoLoopCapSet(CorEvLoop* loop, unsigned cap)
{
    loop->cap = cap;
}

void
corCoLoopStatsGet(const CorEvLoop* loop, CorCoLoopStats* stats)
{
    *stats = loop->stats;
}

/* ---- Running coroutines -------------------------------------------------- */

void
corCoLoopStallSet(CorEvLoop* loop, uint64_t thresholdMs, CorCoStallFn fn)
{
    loop->stallMs = thresholdMs;
    loop->stallFn = fn;
}

static uint64_t
coarseMs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Resume co; when it finishes, and the loop started it, release it. */
static void
resume(CorEvLoop* loop, CorCo* co)
{
    uint64_t stallMs = loop->stallFn != NULL ? loop->stallMs : 0;
    uint64_t start = stallMs > 0 ? coarseMs() : 0;
    bool finished = corCoResume(co);

    if (stallMs > 0) {
        uint64_t held = coarseMs() - start;

        if (held > stallMs && loop->stallFn != NULL) {
            loop->stallFn(co, held);
        }
    }
    if (finished && corCoSched(co) == loop) {
        corCoDestroy(co);
        loop->stats.live--;
    }
}

/*
 * What the loop keeps of a coroutine it spawned, on that coroutine's own
 * stack: corCoSched points to it while the coroutine runs and to the loop
 * once it finished, which is how resume() tells a coroutine it must
 * destroy from one that somebody else created and resumes.
 */
typedef struct {
    CorEvLoop* loop;
    CorCoFn fn;
    void* arg;
    CorRestCancel* cancel;      /* what its waits are bound to */
} Spawned;

static void
spawnedMain(void* arg)
{
    Spawned spawned = *(const Spawned*)arg;
    CorCo* co = corCoCurrent();

    corCoSetSched(co, &spawned);
    spawned.fn(spawned.arg);
    corCoSetSched(co, spawned.loop);
}

/* The record of the running coroutine, NULL when no loop spawned it. */
static Spawned*
spawnedCurrent(void)
{
    CorCo* co = corCoCurrent();

    return co != NULL ? corCoSched(co) : NULL;
}

int
corCoLoopSpawn(CorEvLoop* loop, CorCoFn fn, void* arg)
{
    Spawned spawned = { .loop = loop, .fn = fn, .arg = arg };
    CorCo* co;

    if (loop != corEvLoopCurrent()) {
        return -EPERM;
    }
    if (loop->cancelled || loop->stopping) {
        loop->stats.refused++;
        return -ECANCELED;
    }
    if (loop->stats.live >= loop->cap) {
        loop->stats.refused++;
        return -EAGAIN;
    }
    co = corCoCreate(spawnedMain, &spawned);
    if (co == NULL) {
        loop->stats.refused++;
        return -errno;
    }
    loop->stats.spawned++;
    if (++loop->stats.live > loop->stats.peak) {
        loop->stats.peak = loop->stats.live;
    }
    resume(loop, co);
    return 0;
}

static void
readyPush(CorEvLoop* loop, CorCoWaiter* waiter)
{
    waiter->readyNext = NULL;
    if (loop->readyTail != NULL) {
        loop->readyTail->readyNext = waiter;
    } else {
        loop->readyHead = waiter;
    }
    loop->readyTail = waiter;
}

/*
 * Resume the coroutines that were ready when it was called; those they make
 * ready wait for the next call, so a wake chain cannot hold the loop.
 * Returns whether it resumed any: then the loop must not sleep before its
 * owner looks again (what ran may have been all it waited for).
 */
bool
corCoLoopRunReady(CorEvLoop* loop)
{
    CorCoWaiter* waiter = loop->readyHead;
    CorCoWaiter* last = loop->readyTail;

    if (waiter == NULL) {
        return false;
    }
    for (;;) {
        CorCoWaiter* next = waiter->readyNext;
        bool wasLast = waiter == last;

        loop->readyHead = next;
        if (next == NULL) {
            loop->readyTail = NULL;
        }
        resume(loop, waiter->co);
        if (wasLast) {
            break;
        }
        waiter = next;
    }
    return true;
}

/* ---- Settling a wait ----------------------------------------------------- */

static CorCoFdSlot*
fdSlot(CorEvLoop* loop, int fd)
{
    if ((unsigned)fd >= loop->fdCount) {
        unsigned count = loop->fdCount ? loop->fdCount : 64;
        CorCoFdSlot* fds;

        while (count <= (unsigned)fd) {
            count *= 2;
        }
        fds = realloc(loop->fds, count * sizeof(*fds));
        if (fds == NULL) {
            return NULL;
        }
        for (unsigned i = loop->fdCount; i < count; i++) {
            fds[i] = (CorCoFdSlot){ 0 };
        }
        loop->fds = fds;
        loop->fdCount = count;
    }
    return &loop->fds[fd];
}

static void
parkSlotRelease(CorEvLoop* loop, uint32_t slot)
{
    CorCoParkSlot* park = &loop->parks[slot - 1];

    park->waiter = NULL;
    park->generation++;
    park->nextFree = loop->parkFree;
    loop->parkFree = slot;
}

/*
 * Settle a wait: record the outcome, undo its registrations (the timer,
 * the list of waits, the fd or the park slot). An fd still armed in epoll
 * (the wait ended some other way than its event) is taken out.
 */
static void
settle(CorEvLoop* loop, CorCoWaiter* waiter, CorCoWaitOutcome outcome)
{
    waiter->outcome = (uint8_t)outcome;
    corEvTimerStop(loop, &waiter->timer);
    if (waiter->prev != NULL) {
        waiter->prev->next = waiter->next;
    } else {
        loop->waits = waiter->next;
    }
    if (waiter->next != NULL) {
        waiter->next->prev = waiter->prev;
    }
    if (waiter->fd >= 0) {
        CorCoFdSlot* slot = &loop->fds[waiter->fd];

        slot->waiter = NULL;
        slot->armed = 0;
        if (loop->uring != NULL && outcome != COR_WAIT_READY) {
            corEvUringWaitDisarm(loop, corEvArming(waiter->fd,
                                                   slot->generation,
                                                   COR_EV_WAITER_TAG));
        }
        /* A CorEvIo that took the fd over (a closed fd's number reused)
         * keeps its registration. */
        if (outcome != COR_WAIT_READY && slot->registered && !slot->ioOwned) {
            epoll_ctl(loop->epfd, EPOLL_CTL_DEL, waiter->fd, NULL);
            slot->registered = false;
        }
    }
    if (waiter->parkSlot != 0) {
        parkSlotRelease(loop, waiter->parkSlot);
    }
}

void
corCoLoopEvent(CorEvLoop* loop, uint64_t data, unsigned events)
{
    unsigned fd = (unsigned)(data >> 32);
    uint32_t generation = (uint32_t)(data >> 1) & 0x7fffffff;
    CorCoWaiter* waiter;
    CorCoFdSlot* slot;

    if (fd >= loop->fdCount || loop->fds[fd].generation != generation) {
        return;     /* an older arming's event */
    }
    slot = &loop->fds[fd];
    slot->armed = 0;            /* one-shot: it fired */
    waiter = slot->waiter;
    if (waiter == NULL) {
        /* Settled already, or a watch's (its owner is told), or an heir's
         * that did not wait yet (it arms again when it does). */
        CorCoWatch* watch = slot->watch;

        slot->watch = NULL;
        slot->heir = NULL;
        if (watch != NULL) {
            watch->fn(watch, events);
        }
        return;
    }
    waiter->revents = (short)events;
    settle(loop, waiter, COR_WAIT_READY);
    resume(loop, waiter->co);
}

static void
waiterTimeout(CorEvTimer* timer)
{
    CorCoWaiter* waiter = corContainerOf(timer, CorCoWaiter, timer);
    CorEvLoop* loop = corEvLoopCurrent();

    settle(loop, waiter, COR_WAIT_TIMEOUT);
    resume(loop, waiter->co);
}

/* ---- Waiting ------------------------------------------------------------- */

/* The calling coroutine's loop, or NULL (errno EPERM) when there is none,
 * the coroutine is not one of the loop's, or what runs on its stack must
 * not suspend it. */
static CorEvLoop*
waitingLoop(void)
{
    CorEvLoop* loop = corEvLoopCurrent();

    if (loop == NULL || corCoCurrent() == NULL || !corRestYieldAllowed()) {
        errno = EPERM;
        return NULL;
    }
    return loop;
}

/* Forget an arming no coroutine waits on (replaced, its fd closed or a
 * CorEvIo's): io_uring's poll is removed (it would hold the file open);
 * epoll forgets it with the fd, or a MOD replaces it. */
static void
armingDrop(CorEvLoop* loop, int fd, CorCoFdSlot* slot)
{
    if (loop->uring != NULL && slot->armed != 0) {
        corEvUringWaitDisarm(loop, corEvArming(fd, slot->generation,
                                               COR_EV_WAITER_TAG));
    }
    slot->armed = 0;
    slot->watch = NULL;
    slot->heir = NULL;
}

/*
 * Arm fd one-shot for events, under a new generation: an arming still
 * pending is replaced (epoll's MOD does it; on io_uring its poll is
 * removed). Returns 0, or -1 with errno.
 */
static int
armSlot(CorEvLoop* loop, int fd, CorCoFdSlot* slot, short events)
{
    struct epoll_event ev;
    int op;

    armingDrop(loop, fd, slot);
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
        op = errno == ENOENT ? EPOLL_CTL_ADD
             : errno == EEXIST ? EPOLL_CTL_MOD : -1;
        if (op < 0 || epoll_ctl(loop->epfd, op, fd, &ev) != 0) {
            return -1;
        }
    }
    slot->registered = true;
    slot->armed = events;
    return 0;
}

/* Arm the waiter's fd, or take over the arming its watch left to this
 * coroutine (corCoLoopUnwatch): no system call then. */
static int
armFd(CorEvLoop* loop, CorCoWaiter* waiter, short events)
{
    CorCoFdSlot* slot = fdSlot(loop, waiter->fd);

    if (slot == NULL) {
        return -1;
    }
    if (slot->waiter != NULL || slot->ioOwned || slot->watch != NULL) {
        errno = EBUSY;
        return -1;
    }
    if ((slot->armed != events || slot->heir != corCoCurrent())
        && armSlot(loop, waiter->fd, slot, events) != 0) {
        return -1;
    }
    slot->heir = NULL;
    slot->waiter = waiter;
    return 0;
}

/* Link the waiter, arm its timer, and yield until the loop settles it. */
void
corCoLoopSuspend(CorEvLoop* loop, CorCoWaiter* waiter, int timeoutMs)
{
    waiter->co = corCoCurrent();
    waiter->outcome = COR_WAIT_PENDING;
    waiter->prev = NULL;
    waiter->next = loop->waits;
    if (loop->waits != NULL) {
        loop->waits->prev = waiter;
    }
    loop->waits = waiter;
    if (timeoutMs >= 0) {
        corEvTimerStart(loop, &waiter->timer, (uint64_t)timeoutMs,
                        waiterTimeout);
    }
    corCoYield();
}

/* The cancel the running coroutine's waits are bound to, or NULL. */
static CorRestCancel*
boundCancel(void)
{
    Spawned* spawned = spawnedCurrent();

    return spawned != NULL ? spawned->cancel : NULL;
}

/* Whether a cancel (the loop's, or the coroutine's own) ended every later
 * wait: such a wait fails at once, so a loop around it cannot spin. */
static bool
waitRefused(const CorEvLoop* loop, const CorRestCancel* cancel)
{
    return loop->cancelled || (cancel != NULL && corRestCancelled(cancel));
}

/* Suspend as corCoLoopSuspend does, where the coroutine's cancel can find
 * the wait. May yield. */
static void
suspendBound(CorEvLoop* loop, CorCoWaiter* waiter, int timeoutMs,
             CorRestCancel* cancel)
{
    if (cancel != NULL) {
        cancel->waiter = waiter;
    }
    corCoLoopSuspend(loop, waiter, timeoutMs);
    if (cancel != NULL) {
        cancel->waiter = NULL;
    }
}

/* A wait that may not wait: no yield, no epoll_ctl. */
static int
pollNow(int fd, short events, short* reventsP)
{
    struct pollfd pfd = { .fd = fd, .events = events };
    int rc = poll(&pfd, 1, 0);

    *reventsP = rc > 0 ? pfd.revents : 0;
    return rc;
}

int
corCoLoopWait(int fd, short events, int timeoutMs, short* reventsP)
{
    CorEvLoop* loop = waitingLoop();
    CorCoWaiter waiter = { .fd = fd, .cancellable = true };
    CorRestCancel* cancel = boundCancel();

    if (loop == NULL) {
        return -1;
    }
    if (waitRefused(loop, cancel)) {
        errno = ECANCELED;
        return -1;
    }
    if (fd >= 0 && timeoutMs == 0) {
        return pollNow(fd, events, reventsP);
    }
    if (fd >= 0 && armFd(loop, &waiter, events) != 0) {
        return -1;
    }
    suspendBound(loop, &waiter, timeoutMs, cancel);
    switch (waiter.outcome) {
    case COR_WAIT_READY:
        *reventsP = waiter.revents;
        return 1;
    case COR_WAIT_CLOSED:
        *reventsP = POLLNVAL;
        return 1;
    case COR_WAIT_CANCELLED:
        errno = ECANCELED;
        return -1;
    default:
        *reventsP = 0;
        return 0;
    }
}

/* ---- Park and wake ------------------------------------------------------- */

static uint32_t
parkSlotTake(CorEvLoop* loop)
{
    if (loop->parkFree == 0) {
        unsigned count = loop->parkCount ? loop->parkCount * 2 : 64;
        CorCoParkSlot* parks = realloc(loop->parks, count * sizeof(*parks));

        if (parks == NULL) {
            return 0;
        }
        for (unsigned i = loop->parkCount; i < count; i++) {
            parks[i] = (CorCoParkSlot){ NULL, 1, i + 2 };
        }
        parks[count - 1].nextFree = 0;
        loop->parkFree = loop->parkCount + 1;
        loop->parks = parks;
        loop->parkCount = count;
    }
    uint32_t slot = loop->parkFree;

    loop->parkFree = loop->parks[slot - 1].nextFree;
    return slot;
}

/* A park's name: the loop (12 bits), the slot's generation (20 bits) and
 * the slot (32 bits), so a stale handle, or one of another loop, names
 * nobody. */
static CorCoPark
parkHandle(const CorEvLoop* loop, uint32_t slot)
{
    return (uint64_t)(loop->id & 0xfff) << 52
           | (uint64_t)(loop->parks[slot - 1].generation & 0xfffff) << 32
           | slot;
}

int
corCoLoopPark(CorCoPark* handle, int timeoutMs)
{
    CorEvLoop* loop = waitingLoop();
    CorCoWaiter waiter = { .fd = -1, .cancellable = true };
    CorRestCancel* cancel = boundCancel();

    __atomic_store_n(handle, 0, __ATOMIC_RELEASE);
    if (loop == NULL) {
        return -1;
    }
    if (waitRefused(loop, cancel)) {
        errno = ECANCELED;
        return -1;
    }
    waiter.parkSlot = parkSlotTake(loop);
    if (waiter.parkSlot == 0) {
        errno = ENOMEM;
        return -1;
    }
    loop->parks[waiter.parkSlot - 1].waiter = &waiter;
    /* Release stores: a thread that reads the handle with an acquire
     * load may wake it from there (corCoLoopWakeOn). */
    __atomic_store_n(handle, parkHandle(loop, waiter.parkSlot),
                     __ATOMIC_RELEASE);
    suspendBound(loop, &waiter, timeoutMs, cancel);
    __atomic_store_n(handle, 0, __ATOMIC_RELEASE);
    return waiter.outcome == COR_WAIT_READY;
}

void
corCoLoopReady(CorEvLoop* loop, CorCoWaiter* waiter)
{
    settle(loop, waiter, COR_WAIT_READY);
    readyPush(loop, waiter);
}

int
corCoLoopWake(CorCoPark handle)
{
    CorEvLoop* loop = corEvLoopCurrent();
    uint32_t slot = (uint32_t)handle;
    CorCoParkSlot* park;

    if (loop == NULL || slot == 0 || slot > loop->parkCount) {
        return 0;
    }
    park = &loop->parks[slot - 1];
    if (park->waiter == NULL || parkHandle(loop, slot) != handle) {
        return 0;
    }
    corCoLoopReady(loop, park->waiter);
    return 1;
}

/* A wake on its way to another loop: the waker cannot touch that loop's
 * park slots, which only their loop reads and moves, so the wake is
 * carried to it (one small allocation a cross-loop wake). */
typedef struct {
    CorEvTask task;
    CorCoPark handle;
} RemoteWake;

static void
remoteWake(CorEvTask* task)
{
    RemoteWake* wake = corContainerOf(task, RemoteWake, task);

    corCoLoopWake(wake->handle);
    free(wake);
}

int
corCoLoopWakeOn(CorEvLoop* loop, CorCoPark handle)
{
    RemoteWake* wake;

    if (loop == corEvLoopCurrent()) {
        return corCoLoopWake(handle);
    }
    if (handle == 0 || handle >> 52 != (loop->id & 0xfff)) {
        return 0;
    }
    wake = malloc(sizeof(*wake));
    if (wake == NULL) {
        return -ENOMEM;
    }
    wake->handle = handle;
    corEvLoopPost(loop, &wake->task, remoteWake);
    return 1;
}

/* ---- Watches ------------------------------------------------------------- */

int
corCoLoopWatch(CorCoWatch* watch, int fd, short events, CorCoWatchFn fn)
{
    CorEvLoop* loop = corEvLoopCurrent();
    CorCoFdSlot* slot;

    if (loop == NULL || fd < 0) {
        return -EPERM;
    }
    slot = fdSlot(loop, fd);
    if (slot == NULL) {
        return -ENOMEM;
    }
    if (slot->waiter != NULL || slot->ioOwned || slot->watch != NULL) {
        return -EBUSY;
    }
    /* Anew: an heir's arming may have fired, unseen yet (io_uring). */
    if (armSlot(loop, fd, slot, events) != 0) {
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

    if (loop == NULL || (unsigned)watch->fd >= loop->fdCount) {
        return;
    }
    slot = &loop->fds[watch->fd];
    if (slot->watch == watch) {
        slot->watch = NULL;
        slot->heir = corCoCurrent();
    }
}

int
corCoLoopFdOwned(CorEvLoop* loop, int fd, bool owned)
{
    CorCoFdSlot* slot = fd >= 0 ? fdSlot(loop, fd) : NULL;

    if (slot == NULL) {
        return fd >= 0 ? -1 : 0;
    }
    if (owned && slot->waiter != NULL) {
        /* The fd a coroutine waits on was closed with close() and its
         * number reused: that wait is over, as for corCoLoopClose. */
        CorCoWaiter* waiter = slot->waiter;

        settle(loop, waiter, COR_WAIT_CLOSED);
        readyPush(loop, waiter);
    }
    if (owned) {
        armingDrop(loop, fd, slot);
    }
    bool registered = slot->registered;

    slot->ioOwned = owned;
    slot->registered = false;
    return registered ? 1 : 0;
}

/* ---- Close and cancel ---------------------------------------------------- */

int
corCoLoopClose(int fd)
{
    CorEvLoop* loop = corEvLoopCurrent();

    if (loop != NULL && fd >= 0 && (unsigned)fd < loop->fdCount) {
        CorCoFdSlot* slot = &loop->fds[fd];

        if (slot->waiter != NULL) {
            CorCoWaiter* waiter = slot->waiter;

            settle(loop, waiter, COR_WAIT_CLOSED);
            readyPush(loop, waiter);
        }
        armingDrop(loop, fd, slot);
        /* close() takes the fd out of the epoll set by itself. */
        slot->registered = false;
    }
    return close(fd);
}

int
corCoLoopCancelBind(CorRestCancel* cancel)
{
    Spawned* spawned = spawnedCurrent();

    if (spawned == NULL) {
        return -EPERM;
    }
    spawned->cancel = cancel;
    return 0;
}

/* End one wait as cancelled; the caller has checked it is this loop's. */
static void
cancelWait(CorEvLoop* loop, CorCoWaiter* waiter)
{
    settle(loop, waiter, COR_WAIT_CANCELLED);
    readyPush(loop, waiter);
    loop->stats.cancelledWaits++;
}

void
corCoLoopCancelWait(CorCoWaiter* waiter)
{
    CorEvLoop* loop = corEvLoopCurrent();
    Spawned* spawned = corCoSched(waiter->co);

    /* Only a pending wait of this loop's: one already settled is about
     * to resume with its outcome, and another loop's list is not ours to
     * touch. */
    if (loop == NULL || spawned == NULL || spawned->loop != loop
        || waiter->outcome != COR_WAIT_PENDING || !waiter->cancellable) {
        return;
    }
    cancelWait(loop, waiter);
}

void
corCoLoopCancel(void)
{
    CorEvLoop* loop = corEvLoopCurrent();
    CorCoWaiter* waiter;
    CorCoWaiter* next;

    if (loop == NULL) {
        return;
    }
    loop->cancelled = true;
    for (waiter = loop->waits; waiter != NULL; waiter = next) {
        next = waiter->next;
        if (waiter->cancellable) {
            cancelWait(loop, waiter);
        }
    }
}
