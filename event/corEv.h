/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event engine: one epoll loop per thread with file events, timers and
 * a cross-thread wake; the coroutine layer on it (waits, park/wake, cancel,
 * blocking calls moved to a pool thread); corRestWaitFd, the one function
 * every client waits through; and the worker pool for requests that block.
 *
 * Ownership: a loop belongs to the thread that runs it. Everything that is
 * armed on a loop (CorEvIo, CorEvTimer, CorEvTask) is embedded in its
 * owner's struct and must stay alive until it is stopped or has run; the
 * loop never allocates to arm one.
 */
#ifndef COR_EV_H
#define COR_EV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "corCo.h"
#include "corList.h"

typedef struct CorEvLoop CorEvLoop;
typedef struct CorEvPool CorEvPool;

/* A node of the intrusive binary heap that orders timers and delayed
 * tasks. */
typedef struct CorEvHeapNode {
    struct CorEvHeapNode* left;
    struct CorEvHeapNode* right;
    struct CorEvHeapNode* parent;
} CorEvHeapNode;

/* ---- The loop ------------------------------------------------------------ */

/* Create a loop (its epoll and eventfd), with its coroutine layer (the
 * loop calls it through hooks, and names none of it). NULL with errno set
 * on failure. */
CorEvLoop* corEvLoopCreate(void);

/*
 * How a loop learns that its fds are ready. epoll, the default, pays a
 * system call for each change of what it watches (a coroutine's wait is
 * one); io_uring writes those changes to a ring and hands them all to the
 * kernel in the call that sleeps. The same CorEvIo and wait semantics on
 * both; docs/engine.md says what each costs. An io_uring loop must be run
 * by one thread, the one that first runs it.
 */
typedef enum { COR_EV_EPOLL, COR_EV_URING } CorEvBackend;

/* Create a loop on backend. NULL with errno set: ENOSYS for io_uring in a
 * build without it (liburing, coroutines), or what the kernel refused
 * (EPERM where a seccomp filter or io_uring_disabled forbids it). */
CorEvLoop* corEvLoopCreateWith(CorEvBackend backend);

/* The backend loop runs on. */
CorEvBackend corEvLoopBackend(const CorEvLoop* loop);

/*
 * Run the loop on the calling thread until corEvLoopStop(). A stop cancels
 * every coroutine wait of the loop (corCoLoopCancel), then runs until its
 * coroutines have finished. Returns 0, or -errno if epoll failed.
 */
int corEvLoopRun(CorEvLoop* loop);

/*
 * One iteration: resume the coroutines that are ready, wait for events up
 * to timeoutMs (< 0: until the next timer or event), dispatch them, fire
 * the timers that are due and run the posted tasks. For a program that
 * turns the loop itself. Returns 0, or -errno if epoll failed.
 */
int corEvLoopRunOnce(CorEvLoop* loop, int timeoutMs);

/* Ask the loop to stop. Safe from any thread and from a signal-free
 * context; the loop notices at its next iteration. */
void corEvLoopStop(CorEvLoop* loop);

/* Free a loop that is not running. Whatever is still armed is forgotten. */
void corEvLoopDestroy(CorEvLoop* loop);

/* Make loop the calling thread's loop before it runs, so coroutines can be
 * spawned on it first; corEvLoopRun does it too. */
void corEvLoopBind(CorEvLoop* loop);

/* The loop running on the calling thread, or NULL. */
CorEvLoop* corEvLoopCurrent(void);

/* The loop's clock: milliseconds of CLOCK_MONOTONIC, read once per
 * iteration. */
uint64_t corEvNow(const CorEvLoop* loop);

/* CLOCK_MONOTONIC in milliseconds, read now (a system call's worth). */
uint64_t corEvClockMs(void);
/* The same in nanoseconds (a rate's tokens, a latency). */
uint64_t corEvClockNs(void);

/* ---- File events --------------------------------------------------------- */

typedef struct CorEvIo CorEvIo;
/* events: the EPOLLIN/EPOLLOUT/EPOLLERR/EPOLLHUP/EPOLLRDHUP bits that
 * fired. */
typedef void (*CorEvIoFn)(CorEvIo* io, unsigned events);

/* A file descriptor watched by a loop; embedded in its owner (recovered
 * with corContainerOf). */
struct CorEvIo {
    CorEvIoFn fn;
    int fd;
    unsigned events; /* the mask epoll has now */
};

/* Watch fd for events (EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLET...) and call
 * fn on the loop's thread. Returns 0 or -errno. */
int corEvIoStart(CorEvLoop* loop, CorEvIo* io, int fd, unsigned events,
                 CorEvIoFn fn);

/* Change what is watched; a system call only when the mask changes. */
int corEvIoSet(CorEvLoop* loop, CorEvIo* io, unsigned events);

/* Stop watching (before the fd is closed). */
void corEvIoStop(CorEvLoop* loop, CorEvIo* io);

/* ---- Timers -------------------------------------------------------------- */

typedef struct CorEvTimer CorEvTimer;
typedef void (*CorEvTimerFn)(CorEvTimer* timer);

/* A deadline on a loop; embedded in its owner. Zero-initialise it. */
struct CorEvTimer {
    CorEvHeapNode node;
    uint64_t deadline; /* its place in the heap: corEvNow() value */
    uint64_t due;      /* when it fires: deadline, or later if pushed */
    uint64_t seq;      /* equal deadlines: first armed, first fired (a
                        * push back keeps its turn) */
    CorEvTimerFn fn;
    bool active;
};

/* Fire fn once, timeoutMs from now (re-arms an active timer). O(log n);
 * O(1) when it pushes an armed timer later. */
void corEvTimerStart(CorEvLoop* loop, CorEvTimer* timer, uint64_t timeoutMs,
                     CorEvTimerFn fn);

/* Disarm; nothing happens if it is not armed. O(log n). */
void corEvTimerStop(CorEvLoop* loop, CorEvTimer* timer);

/* ---- Before the loop sleeps --------------------------------------------- */

/*
 * Work the loop runs once, on its thread, after this turn's events,
 * timers and ready coroutines and before it next sleeps: what they queued
 * to write goes in one write (several requests' frames together), in
 * this turn rather than the next (Redis's beforeSleep, H2O's pending
 * writes). Embedded in its owner; zero-initialise it.
 */
typedef struct CorEvSoon CorEvSoon;
typedef void (*CorEvSoonFn)(CorEvSoon* soon);

struct CorEvSoon {
    CorList link; /* in the loop's list while due */
    CorEvSoonFn fn;
};

/* Run fn before the loop sleeps; nothing when soon is already due. On the
 * loop's thread. fn may arm it again (it then runs before the sleep after
 * the next turn's, or in the same pass when the loop must go on). */
void corEvSoonStart(CorEvLoop* loop, CorEvSoon* soon, CorEvSoonFn fn);
/* Not to run; nothing when it is not due. */
void corEvSoonStop(CorEvSoon* soon);
static inline bool corEvSoonDue(const CorEvSoon* soon);

/* ---- Tasks: work handed to a loop or a pool, from any thread ------------- */

typedef struct CorEvTask CorEvTask;
typedef void (*CorEvTaskFn)(CorEvTask* task);

/* A unit of work; embedded in its owner, which keeps it alive until fn has
 * run. */
struct CorEvTask {
    CorEvHeapNode node; /* a pool's delayed tasks */
    CorEvTask* next;
    CorEvTaskFn fn;
    uint64_t deadline;
    uint64_t seq;
};

/* Run task->fn on the loop's thread at its next iteration. Safe from any
 * thread: the loop is woken through its eventfd. */
void corEvLoopPost(CorEvLoop* loop, CorEvTask* task, CorEvTaskFn fn);

/* ---- Coroutines on the loop ---------------------------------------------- */

/* What the loop counts of its coroutines. */
typedef struct {
    uint64_t spawned;        /* coroutines started */
    uint64_t refused;        /* spawns refused: cap, no stack, stopping */
    uint64_t cancelledWaits; /* waits ended by a cancel */
    unsigned live;           /* running or waiting now */
    unsigned peak;           /* the most live at once */
} CorCoLoopStats;

/*
 * Start fn(arg) as a coroutine of the calling thread's loop, at once: it
 * runs until its first wait or its end. The loop destroys it when it
 * finishes. Returns 0, or -EAGAIN past the cap, -ENOMEM (or -ENOTSUP when
 * built without coroutines) when no stack can be had, -ECANCELED when the
 * loop is stopping, -EPERM off the loop's thread. Whatever is refused is the
 * caller's to run elsewhere (a worker).
 */
int corCoLoopSpawn(CorEvLoop* loop, CorCoFn fn, void* arg);

/* The most coroutines the loop runs at once (default 1024). */
void corCoLoopCapSet(CorEvLoop* loop, unsigned cap);

void corCoLoopStatsGet(const CorEvLoop* loop, CorCoLoopStats* stats);

/*
 * Report a coroutine that held the loop longer than thresholdMs between two
 * waits (it blocks, and should have run on a worker): fn is called on the
 * loop after that slice, with the slice's length. 0 turns it off. The
 * clock read is the coarse one (a few ns), so it costs little on.
 */
typedef void (*CorCoStallFn)(CorCo* co, uint64_t heldMs);
void corCoLoopStallSet(CorEvLoop* loop, uint64_t thresholdMs, CorCoStallFn fn);

/*
 * Wait, as poll() on one fd, for events (POLLIN, POLLOUT...) on fd or
 * timeoutMs (< 0: no timeout). fd < 0 is a pure timer. Must run in a
 * coroutine on a loop. Returns 1 with *reventsP set (POLLNVAL when the fd
 * was closed with corCoLoopClose meanwhile), 0 on timeout, -1 with errno:
 * ECANCELED after corCoLoopCancel or once the cancel the coroutine's waits
 * are bound to (corRestCancelBind) is cancelled, EBUSY when another
 * coroutine waits on fd or a CorEvIo watches it, EPERM outside a coroutine
 * on a loop or where corRestYieldAllow(false) forbids yielding. One
 * epoll_ctl per wait. May yield.
 */
int corCoLoopWait(int fd, short events, int timeoutMs, short* reventsP);

/* A parked coroutine's name, for corCoLoopWake; 0 names nobody. */
typedef uint64_t CorCoPark;

/*
 * Park the running coroutine until another coroutine of its loop wakes it
 * or timeoutMs passes (< 0: no timeout). *handle is set before it parks and
 * cleared to 0 when it resumes. Returns 1 when woken, 0 on timeout or when
 * a cancel ended the park, -1 with errno ECANCELED when the loop or the
 * coroutine's bound cancel was cancelled before (so a loop around it does
 * not spin), EPERM as for corCoLoopWait. May yield.
 */
int corCoLoopPark(CorCoPark* handle, int timeoutMs);

/*
 * Park as corCoLoopPark does until deadlineMs (corEvClockMs time; 0: none).
 * Returns 0 when woken, -ETIMEDOUT when the deadline passed (at once when
 * it had), -ECANCELED when a cancel ended the park or every wait (a park
 * says 0 for both; the cancel's refusal of later waits tells them apart).
 * A caller parks again until what it waits for is there. May yield.
 */
int corCoLoopParkUntil(CorCoPark* handle, uint64_t deadlineMs);

/* Wake a parked coroutine of the calling thread's loop; it runs at the
 * loop's next iteration. Returns 1, or 0 when nobody is parked under that
 * name any more (woken already, timed out, finished) or the handle is of
 * another loop (corCoLoopWakeOn wakes it there): waking twice is waking
 * once. */
int corCoLoopWake(CorCoPark handle);

/*
 * Wake a parked coroutine of loop from any thread: a coroutine or a worker,
 * on loop or not. On loop's own thread it is corCoLoopWake; from anywhere
 * else the wake is posted to loop (corEvLoopPost), which wakes the park at
 * its next iteration if it is still parked then (a stale handle names
 * nobody there). The handle may be read from another thread while its
 * coroutine parks: corCoLoopPark writes it with a release store, so read
 * it with __atomic_load_n(&handle, __ATOMIC_ACQUIRE). loop must outlive
 * the call. Returns 1 when woken or posted, 0 when nobody is parked under
 * the handle (as far as the calling thread can tell) or the handle is
 * another loop's, -ENOMEM.
 */
int corCoLoopWakeOn(CorEvLoop* loop, CorCoPark handle);

/*
 * A watch on an fd that coroutines of a loop wait on, for the time none
 * does: a pooled connection, idle between two exchanges, whose peer may
 * close it or send what nobody asked for. Embedded in its owner (recovered
 * with corContainerOf); the fields are the loop's.
 */
typedef struct CorCoWatch CorCoWatch;
typedef void (*CorCoWatchFn)(CorCoWatch* watch, unsigned events);

struct CorCoWatch {
    CorCoWatchFn fn;
    int fd;
};

/*
 * Watch fd on the calling thread's loop for events (POLLIN...): fn runs
 * once, on the loop, when they come (the peer's end and errors always
 * come), and the watch is over then. Costs what a wait's arming does (one
 * epoll_ctl; an entry of the ring on io_uring). Returns 0, or -errno:
 * -EBUSY (a coroutine waits on fd, or a CorEvIo watches it), -EPERM off a
 * loop's thread, -ENOMEM.
 */
int corCoLoopWatch(CorCoWatch* watch, int fd, short events, CorCoWatchFn fn);

/*
 * End the watch, at no cost: its arming is left to the next wait of the
 * calling coroutine on the fd for the same events, which takes it over
 * instead of arming again (a connection taken from the pool is waited on
 * for its answer at once: the take and the wait cost no system call). An
 * event that comes before that wait is not lost: the wait arms again, and
 * finds it.
 */
void corCoLoopUnwatch(CorCoWatch* watch);

/*
 * Close fd, first ending a coroutine wait on it (which returns 1 with
 * POLLNVAL, as poll() does for a closed fd). Use it for any fd a coroutine
 * may be waiting on: after a plain close() that wait lasts to its timeout
 * (or until the fd number is taken by a CorEvIo). Returns close()'s
 * result.
 */
int corCoLoopClose(int fd);

/*
 * Cancel every wait of the calling thread's loop: a wait on an fd or a
 * timer returns -1 with ECANCELED, a park returns 0, and every later wait
 * on this loop fails at once, so each coroutine runs its failure path to its
 * end without waiting out a timeout. A blocking call (corCoBlocking) is not
 * cancelled: it runs on another thread and its coroutine waits it out.
 */
void corCoLoopCancel(void);

/*
 * Run fn(arg), which blocks inside a library that knows nothing of the loop,
 * on a thread of the blocking pool while the calling coroutine waits; the
 * loop serves everything else meanwhile. Outside a coroutine it is a plain
 * call. May yield.
 */
void corCoBlocking(CorCoFn fn, void* arg);

/* The threads of the blocking pool, started at the first corCoBlocking
 * (default 4). */
void corCoBlockingThreadsSet(unsigned threads);

/* Finish the blocking pool's work and join its threads (at exit). */
void corCoBlockingShutdown(void);

/*
 * Cancel every wait of the process that is not on a loop: from now on
 * corRestWaitFd off the loops (worker threads, blocking mode) returns -1
 * with ECANCELED at once, and a poll() already waiting wakes up. With
 * corCoLoopCancel on each loop, that is a stop that waits out nothing.
 */
void corRestCancelAll(void);

/*
 * What ends the waits of one piece of work (a request) wherever it waits:
 * a coroutine's wait on its loop, or poll() on another thread. Embedded in
 * its owner, zeroed before use, and alive as long as a wait is bound to
 * it. The fields are the event layer's.
 */
typedef struct CorRestCancel {
    atomic_bool cancelled;
    atomic_int threadFd;        /* a waiting thread's eventfd, plus 1 */
    struct CorCoWaiter* waiter; /* a coroutine's wait, on its loop */
} CorRestCancel;

/*
 * Bind the calling code's waits (corRestWaitFd, corCoLoopWait,
 * corCoLoopPark) to c, or to nothing (NULL). In a coroutine a loop spawned
 * the binding is the coroutine's and follows it across its waits; anywhere
 * else it is the thread's. Returns 0, or -EPERM in a coroutine that no
 * loop spawned (its waits are only cancelled loop-wide).
 */
int corRestCancelBind(CorRestCancel* c);

/*
 * Cancel c: the wait bound to it returns -1 with ECANCELED now, and every
 * later one at once, so the code that waits runs its failure path without
 * waiting out a timeout. A thread's poll() is ended through an eventfd of
 * that thread, so this is safe from any thread for work off the loops; a
 * coroutine's wait is settled on the spot, so for a coroutine call it on
 * that coroutine's loop. Cancelling twice is cancelling once.
 */
void corRestCancel(CorRestCancel* c);

/* Whether c was cancelled. */
static inline bool corRestCancelled(const CorRestCancel* c);

/*
 * Whether corRestWaitFd may yield the running coroutine (the default).
 * Code that runs on a coroutine's stack without being that coroutine's
 * work (a handler that must not wait, served at the end of a coroutine's
 * request) turns it off: its waits then poll() the thread, as they would
 * on the loop's own stack, instead of suspending a coroutine whose owner
 * does not know it waits. Per thread; returns the previous setting.
 */
bool corRestYieldAllow(bool allow);

/* Whether the calling code runs in a coroutine of a loop that may wait
 * there, parking rather than polling (not code on a coroutine's stack
 * that corRestYieldAllow(false) marks as not the coroutine's work, such
 * as an inline handler). */
bool corRestMayPark(void);

/*
 * Wait, as poll() on one fd, for events or timeoutMs (< 0: none): in a
 * coroutine on a loop, corCoLoopWait; anywhere else (or where yielding is
 * not allowed: corRestYieldAllow) poll(), retried on EINTR against the
 * same deadline. Returns 1 with *reventsP set, 0 on timeout, -1 with
 * errno: ECANCELED once a stop (corCoLoopCancel, corRestCancelAll) or the
 * cancel the calling code is bound to (corRestCancel) ended it, and at
 * once for every wait after. Every client of cor waits through it, so the
 * same code runs on a loop and on a worker thread. May yield.
 */
int corRestWaitFd(int fd, short events, int timeoutMs, short* reventsP);

/* ---- Name resolution ----------------------------------------------------- */

/* The most addresses a lookup returns. */
#define COR_RESOLVE_MAX 16

/* What a lookup found; owned by the caller. */
typedef struct {
    unsigned count;
    /* Port 0, in the order to try them: as the system orders them (IPv6
     * and IPv4, RFC 6724). */
    struct sockaddr_storage addrs[COR_RESOLVE_MAX];
} CorAddrs;

/* How names are resolved; the strings are the caller's and are copied. */
typedef struct {
    /* NULL or "system": resolv.conf and the hosts file; else the servers
     * to ask, "IP[:port], ..." (an IPv6 address with a port in brackets),
     * and only they (no hosts file). */
    const char* servers;
    int timeoutMs;         /* per lookup; <= 0: 2 s */
    unsigned minTtlS;      /* an answer is kept at least this long */
    unsigned maxTtlS;      /* and at most this long */
    unsigned negativeTtlS; /* an NXDOMAIN is kept this long */
} CorResolverConfig;

/*
 * Set how names are resolved: once per generation, before the loops serve
 * (and in tests). Each loop and each thread that resolves has a channel and
 * a cache of its own, made at its first lookup; a channel made under an
 * older configuration is replaced at its next lookup with nothing in
 * flight. Returns 0, or -EINVAL (a bad server list), -ENOMEM.
 */
int corResolverConfigure(const CorResolverConfig* config);

/*
 * Resolve host (a name, a numeric IPv4 or IPv6 address, or "localhost")
 * into out. Numeric addresses and localhost (::1, then 127.0.0.1) never
 * reach a server. A name is answered from the cache of the calling loop or
 * thread while its TTL lasts; otherwise it is asked, once however many
 * lookups of it are in flight there. In a coroutine on a loop it waits on
 * the loop's channel (its sockets and timers are the loop's) and the loop
 * serves everything else meanwhile; elsewhere it polls. timeoutMs <= 0
 * takes the configured timeout. Returns 0, or -ENOENT (no such name, or
 * no address), -ETIMEDOUT, -ECONNREFUSED (the server refused), -EIO
 * (SERVFAIL or a bad answer), -ECANCELED (a stop or the request's cancel:
 * corCoLoopCancel, corRestCancelAll, corRestCancel), -ENOMEM. why (may be
 * NULL) gets why, "name 'x': NXDOMAIN" and the like. May yield.
 */
int corResolve(const char* host, int timeoutMs, CorAddrs* out, char* why,
               size_t whyLen);

/*
 * Write why a call failed into why, printf-style, cut to whyLen bytes;
 * nothing when why is NULL or whyLen 0 (the caller did not ask). For the
 * calls that take a why buffer, as corResolve does.
 */
void corEvWhy(char* why, size_t whyLen, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- The worker pool ----------------------------------------------------- */

/*
 * A pool of threads for work that blocks: one queue per worker, an idle
 * worker steals from the others. NULL with errno set on failure.
 */
CorEvPool* corEvPoolCreate(unsigned threads);

/* Queue a task. From a worker of this pool it goes to that worker's own
 * queue, else the queues take turns. Returns 0, or -ESHUTDOWN once the pool
 * is shutting down. */
int corEvPoolPost(CorEvPool* pool, CorEvTask* task, CorEvTaskFn fn);

/* Queue a task to run delayMs from now. Same results as corEvPoolPost. */
int corEvPoolPostAfter(CorEvPool* pool, CorEvTask* task, CorEvTaskFn fn,
                       unsigned delayMs);

/* The worker running on the calling thread (0..threads-1), or -1. */
int corEvPoolWorkerIndex(const CorEvPool* pool);

/*
 * Refuse new work, run everything already queued (delayed tasks at once),
 * and join the threads. Then corEvPoolDestroy frees the pool.
 */
void corEvPoolShutdown(CorEvPool* pool);
void corEvPoolDestroy(CorEvPool* pool);

/* ---- Helpers ------------------------------------------------------------- */

/* The struct that embeds member, from a pointer to that member. */
#define corContainerOf(ptr, type, member)                                      \
    ((type*)(void*)((char*)(ptr)-offsetof(type, member)))

/* What state written by one thread is aligned to, so that two threads
 * never write into one cache line (two lines: parts that fetch lines in
 * pairs bounce the pair). A struct that starts with a member aligned so
 * has a size that is a multiple of it. */
#define COR_CACHE_LINE 128

/* Zeroed room for count such structs, each on lines of its own; free()
 * it. NULL on failure. */
void* corCallocLines(size_t count, size_t size);

/* ---- Inline definitions ------------------------------------------------ */

static inline bool
corRestCancelled(const CorRestCancel* c)
{
    return atomic_load(&c->cancelled);
}

/* ---- inline definitions -------------------------------------------------- */

static inline bool
corEvSoonDue(const CorEvSoon* soon)
{
    return corListLinked(&soon->link);
}

#endif /* COR_EV_H */
