/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Coroutines on the loop: spawn, waits on fds and timers, park/wake, close
 * and cancel (the whole loop's, or one coroutine's through the cancel its
 * waits are bound to).
 *
 * This is the layer above the loop: it makes the loop (corEvLoopCreate)
 * and gives it its hooks (CorEvHooks: before the loop sleeps, the ready
 * coroutines run; a one-shot arming's event resumes its waiter; a stop
 * cancels the waits), and keeps its state of the loop (CorCoLoop) behind
 * the one pointer the loop holds for it. The loop names none of it.
 *
 * A waiting coroutine keeps a CorCoWaiter on its own stack. The layer finds
 * it three ways: through the one-shot arming of its fd (the loop's
 * corEvOnceArm, whose event comes back through the hooks), through its
 * timer, and through the loop's list of waits (which is what cancel walks).
 * Whichever comes first settles the outcome, undoes the other two, and
 * resumes the coroutine.
 *
 * One epoll_ctl per wait: fds are armed EPOLLONESHOT, so an event disarms
 * the fd without a call, and the loop remembers which fds it has in the
 * epoll set so that the next wait is a MOD, not a DEL and an ADD. Only a
 * wait that ends without its event (timeout, cancel) pays a second call to
 * take the fd out, since an armed fd would later deliver an event for a
 * waiter that no longer exists.
 *
 * A watch (corCoLoopWatch, corCoWatch.c) is such an arming with nobody
 * waiting: an idle pooled connection's, whose event calls its owner back.
 *
 * Only the loop resumes a waiting coroutine, and only between event
 * batches (wakes and cancels go through the ready queue): so a waiter whose
 * event is still further down the current batch is alive when it is
 * reached, and is skipped because it is settled.
 */
#include "corCoLoopInt.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define COR_CO_LOOP_CAP_DEFAULT 1024

static const CorEvHooks hooks;

CorEvLoop*
corEvLoopCreate(void)
{
    return corEvLoopCreateWith(COR_EV_EPOLL);
}

CorEvLoop*
corEvLoopCreateWith(CorEvBackend backend)
{
    CorEvLoop* loop = corEvLoopMake(backend);

    if (loop == NULL) {
        return NULL;
    }
    loop->co = calloc(1, sizeof(*loop->co));
    if (loop->co == NULL) {
        corEvLoopDestroy(loop);
        errno = ENOMEM;
        return NULL;
    }
    loop->co->cap = COR_CO_LOOP_CAP_DEFAULT;
    loop->hooks = &hooks;
    return loop;
}

static void
coDestroy(CorEvLoop* loop)
{
    free(loop->co->fds);
    free(loop->co->parks);
    free(loop->co);
    loop->co = NULL;
}

void
corCoLoopCapSet(CorEvLoop* loop, unsigned cap)
{
    loop->co->cap = cap;
    corCoPoolFit(cap);
}

void
corCoLoopStatsGet(const CorEvLoop* loop, CorCoLoopStats* stats)
{
    *stats = loop->co->stats;
}

/* ---- Running coroutines -------------------------------------------------- */

void
corCoLoopStallSet(CorEvLoop* loop, uint64_t thresholdMs, CorCoStallFn fn)
{
    loop->co->stallMs = thresholdMs;
    loop->co->stallFn = fn;
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
    CorCoLoop* state = loop->co;
    uint64_t stallMs = state->stallFn != NULL ? state->stallMs : 0;
    uint64_t start = stallMs > 0 ? coarseMs() : 0;
    bool finished = corCoResume(co);

    if (stallMs > 0) {
        uint64_t held = coarseMs() - start;

        if (held > stallMs && state->stallFn != NULL) {
            state->stallFn(co, held);
        }
    }
    if (finished && corCoSched(co) == loop) {
        corCoDestroy(co);
        state->stats.live--;
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
    CorRestCancel* cancel; /* what its waits are bound to */
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
    CorCoLoopStats* stats = &loop->co->stats;
    CorCo* co;

    if (loop != corEvLoopCurrent()) {
        return -EPERM;
    }
    if (loop->co->cancelled || loop->stopping) {
        stats->refused++;
        return -ECANCELED;
    }
    if (stats->live >= loop->co->cap) {
        stats->refused++;
        return -EAGAIN;
    }
    co = corCoCreate(spawnedMain, &spawned);
    if (co == NULL) {
        stats->refused++;
        return -errno;
    }
    stats->spawned++;
    if (++stats->live > stats->peak) {
        stats->peak = stats->live;
    }
    resume(loop, co);
    return 0;
}

static void
readyPush(CorEvLoop* loop, CorCoWaiter* waiter)
{
    CorCoLoop* co = loop->co;

    waiter->readyNext = NULL;
    if (co->readyTail != NULL) {
        co->readyTail->readyNext = waiter;
    } else {
        co->readyHead = waiter;
    }
    co->readyTail = waiter;
}

/*
 * The hook before the loop sleeps: resume the coroutines that were ready
 * when it was called; those they make ready wait for the next call, so a
 * wake chain cannot hold the loop. True when it resumed any, or more are
 * ready: then the loop must not sleep before its owner looks again (what
 * ran may have been all it waited for).
 */
static bool
runReady(CorEvLoop* loop)
{
    CorCoLoop* co = loop->co;
    CorCoWaiter* waiter = co->readyHead;
    CorCoWaiter* last = co->readyTail;

    if (waiter == NULL) {
        return false;
    }
    for (;;) {
        CorCoWaiter* next = waiter->readyNext;
        bool wasLast = waiter == last;

        co->readyHead = next;
        if (next == NULL) {
            co->readyTail = NULL;
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

CorCoFdSlot*
corCoFdGrow(CorCoLoop* co, int fd)
{
    CorCoFdSlot* fds = corEvTableGrow(co->fds, &co->fdCount, sizeof(*fds), fd);

    if (fds == NULL) {
        return NULL;
    }
    co->fds = fds;
    return &fds[fd];
}

static void
parkSlotRelease(CorCoLoop* co, uint32_t slot)
{
    CorCoParkSlot* park = &co->parks[slot - 1];

    park->waiter = NULL;
    park->generation++;
    park->nextFree = co->parkFree;
    co->parkFree = slot;
}

/*
 * Settle a wait: record the outcome, undo its registrations (the timer,
 * the list of waits, the fd or the park slot). An fd still armed (the wait
 * ended some other way than its event) is taken out.
 */
static void
settle(CorEvLoop* loop, CorCoWaiter* waiter, CorCoWaitOutcome outcome)
{
    CorCoLoop* co = loop->co;

    waiter->outcome = (uint8_t)outcome;
    corEvTimerStop(loop, &waiter->timer);
    corListRemove(&waiter->link);
    if (waiter->fd >= 0) {
        co->fds[waiter->fd].waiter = NULL;
        /* Its event disarmed it; any other end leaves it armed. */
        if (outcome != COR_WAIT_READY) {
            corEvOnceEnd(loop, waiter->fd);
        }
    }
    if (waiter->parkSlot != 0) {
        parkSlotRelease(co, waiter->parkSlot);
    }
}

/* The hook of a one-shot arming's event: its waiter resumes, or the watch
 * it serves is told. */
static void
fired(CorEvLoop* loop, int fd, unsigned events)
{
    CorCoFdSlot* slot;
    CorCoWaiter* waiter;

    if ((unsigned)fd >= loop->co->fdCount) {
        return;
    }
    slot = &loop->co->fds[fd];
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

int
corCoFdArm(CorEvLoop* loop, int fd, CorCoFdSlot* slot, short events)
{
    slot->watch = NULL;
    slot->heir = NULL;
    return corEvOnceArm(loop, fd, events);
}

/* Arm the waiter's fd, or take over the arming its watch left to this
 * coroutine (corCoLoopUnwatch): no system call then. */
static int
armFd(CorEvLoop* loop, CorCoWaiter* waiter, short events)
{
    CorCoFdSlot* slot = corCoFdClaim(loop, waiter->fd);

    if (slot == NULL) {
        return -1;
    }
    if ((loop->fds[waiter->fd].armed != events || slot->heir != corCoCurrent())
        && corCoFdArm(loop, waiter->fd, slot, events) != 0) {
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
    CorCoLoop* co = loop->co;

    waiter->co = corCoCurrent();
    waiter->outcome = COR_WAIT_PENDING;
    corListInsert(&co->waits, &waiter->link);
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
    return loop->co->cancelled || (cancel != NULL && corRestCancelled(cancel));
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
parkSlotTake(CorCoLoop* co)
{
    if (co->parkFree == 0) {
        unsigned count = co->parkCount ? co->parkCount * 2 : 64;
        CorCoParkSlot* parks = realloc(co->parks, count * sizeof(*parks));

        if (parks == NULL) {
            return 0;
        }
        for (unsigned i = co->parkCount; i < count; i++) {
            parks[i] = (CorCoParkSlot){ NULL, 1, i + 2 };
        }
        parks[count - 1].nextFree = 0;
        co->parkFree = co->parkCount + 1;
        co->parks = parks;
        co->parkCount = count;
    }
    uint32_t slot = co->parkFree;

    co->parkFree = co->parks[slot - 1].nextFree;
    return slot;
}

/* A park's name: the loop (12 bits), the slot's generation (20 bits) and
 * the slot (32 bits), so a stale handle, or one of another loop, names
 * nobody. */
static CorCoPark
parkHandle(const CorEvLoop* loop, uint32_t slot)
{
    return (uint64_t)(loop->id & 0xfff) << 52
           | (uint64_t)(loop->co->parks[slot - 1].generation & 0xfffff) << 32
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
    waiter.parkSlot = parkSlotTake(loop->co);
    if (waiter.parkSlot == 0) {
        errno = ENOMEM;
        return -1;
    }
    loop->co->parks[waiter.parkSlot - 1].waiter = &waiter;
    /* Release stores: a thread that reads the handle with an acquire
     * load may wake it from there (corCoLoopWakeOn). */
    __atomic_store_n(handle, parkHandle(loop, waiter.parkSlot),
                     __ATOMIC_RELEASE);
    suspendBound(loop, &waiter, timeoutMs, cancel);
    __atomic_store_n(handle, 0, __ATOMIC_RELEASE);
    return waiter.outcome == COR_WAIT_READY;
}

int
corCoLoopParkUntil(CorCoPark* handle, uint64_t deadlineMs)
{
    uint64_t now = corEvClockMs();
    int left = deadlineMs == 0    ? -1
               : deadlineMs > now ? (int)(deadlineMs - now)
                                  : 0;
    int rc = left == 0 ? 0 : corCoLoopPark(handle, left);
    CorEvLoop* loop;

    if (rc > 0) {
        return 0;
    }
    loop = waitingLoop();
    return rc < 0 || loop == NULL || waitRefused(loop, boundCancel())
               ? -ECANCELED
               : -ETIMEDOUT;
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

    if (loop == NULL || slot == 0 || slot > loop->co->parkCount) {
        return 0;
    }
    park = &loop->co->parks[slot - 1];
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

/* The hook of a CorEvIo that takes fd (its number reused after a plain
 * close()): the wait on it is over, as for corCoLoopClose, and what
 * watched it is forgotten. */
static void
fdTaken(CorEvLoop* loop, int fd)
{
    CorCoFdSlot* slot;

    if ((unsigned)fd >= loop->co->fdCount) {
        return;
    }
    slot = &loop->co->fds[fd];
    if (slot->waiter != NULL) {
        CorCoWaiter* waiter = slot->waiter;

        settle(loop, waiter, COR_WAIT_CLOSED);
        readyPush(loop, waiter);
    }
    slot->watch = NULL;
    slot->heir = NULL;
}

/* ---- Close and cancel ---------------------------------------------------- */

int
corCoLoopClose(int fd)
{
    CorEvLoop* loop = corEvLoopCurrent();

    if (loop != NULL && fd >= 0 && (unsigned)fd < loop->fdCount) {
        fdTaken(loop, fd);
        /* close() takes the fd out of the epoll set by itself. */
        corEvOnceClosed(loop, fd);
    }
    return close(fd);
}

static int
cancelBind(CorRestCancel* cancel)
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
    loop->co->stats.cancelledWaits++;
}

/* The hook of a cancel (corRestCancel) on loop's thread: end the wait
 * bound to it, when it is a pending wait of this loop's. */
static void
cancelWaitOn(CorEvLoop* loop, CorCoWaiter* waiter)
{
    Spawned* spawned = corCoSched(waiter->co);

    /* Only a pending wait of this loop's: one already settled is about
     * to resume with its outcome, and another loop's list is not ours to
     * touch. */
    if (spawned == NULL || spawned->loop != loop
        || waiter->outcome != COR_WAIT_PENDING || !waiter->cancellable) {
        return;
    }
    cancelWait(loop, waiter);
}

/* The hook of a stop, and corCoLoopCancel: every wait of loop ends, and
 * every later one fails at once, until the run ends. */
static void
cancelAll(CorEvLoop* loop)
{
    CorList* node;
    CorList* next;

    loop->co->cancelled = true;
    corListForEach(node, next, &loop->co->waits)
    {
        CorCoWaiter* waiter = corContainerOf(node, CorCoWaiter, link);

        if (waiter->cancellable) {
            cancelWait(loop, waiter);
        }
    }
}

void
corCoLoopCancel(void)
{
    CorEvLoop* loop = corEvLoopCurrent();

    if (loop != NULL) {
        cancelAll(loop);
    }
}

/* ---- The hooks the loop calls -------------------------------------------- */

static bool
live(const CorEvLoop* loop)
{
    return loop->co->stats.live > 0;
}

static void
runEnd(CorEvLoop* loop)
{
    loop->co->cancelled = false;
}

static bool
running(void)
{
    return corCoCurrent() != NULL;
}

static const CorEvHooks hooks = {
    .beforePoll = runReady,
    .fired = fired,
    .fdTaken = fdTaken,
    .stop = cancelAll,
    .live = live,
    .runEnd = runEnd,
    .destroy = coDestroy,
    .running = running,
    .wait = corCoLoopWait,
    .cancelBind = cancelBind,
    .cancelWait = cancelWaitOn,
};
