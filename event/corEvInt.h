/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of event/: the loop record, the heap, and the hooks between the
 * loop (corEvLoop.c) and its coroutine layer (corCoLoop.c). Never included
 * from outside event/.
 */
#ifndef COR_EV_INT_H
#define COR_EV_INT_H

#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/epoll.h>

#include "corAutoConfig.h"
#include "corEv.h"

/* ---- Intrusive binary min-heap ------------------------------------------- */

typedef bool (*CorEvHeapLessFn)(const CorEvHeapNode* a,
                                const CorEvHeapNode* b);

typedef struct {
    CorEvHeapNode* min;
    unsigned count;
} CorEvHeap;

void corEvHeapInsert(CorEvHeap* heap, CorEvHeapNode* node,
                     CorEvHeapLessFn less);
void corEvHeapRemove(CorEvHeap* heap, CorEvHeapNode* node,
                     CorEvHeapLessFn less);

/* ---- Coroutine waits ----------------------------------------------------- */

typedef enum {
    COR_WAIT_PENDING,
    COR_WAIT_READY,      /* the fd has events, or a park was woken */
    COR_WAIT_TIMEOUT,
    COR_WAIT_CANCELLED,
    COR_WAIT_CLOSED      /* corCoLoopClose() took the fd away */
} CorCoWaitOutcome;

/*
 * One suspended coroutine. Lives on that coroutine's stack for the length
 * of the wait; the loop links it while it waits and tags its address with
 * the low bit in epoll_data so events for it are told from CorEvIo ones.
 */
typedef struct CorCoWaiter {
    CorCo* co;
    CorEvTimer timer;
    struct CorCoWaiter* prev;        /* the loop's waits, for cancel */
    struct CorCoWaiter* next;
    struct CorCoWaiter* readyNext;   /* the loop's ready queue */
    int fd;                          /* < 0: a timer or a park */
    uint32_t parkSlot;               /* 1-based; 0: not a park */
    short revents;
    uint8_t outcome;
    bool cancellable;
} CorCoWaiter;

/*
 * What the loop knows of an fd. epoll_data of a coroutine wait carries the
 * fd and the generation of its arming, never a pointer into a coroutine's
 * stack: an event that outlived its wait (an fd closed while armed, shared
 * with another process) finds a newer generation and is dropped.
 */
typedef struct {
    CorCoWaiter* waiter;             /* waiting now, or NULL */
    uint32_t generation;             /* of the last arming, 31 bits */
    bool registered;                 /* in the epoll set (maybe disarmed) */
    /* The events of a one-shot arming that has neither fired nor been
     * taken away (0: none); while no coroutine waits, the watch it serves
     * (corCoLoopWatch), or the coroutine whose next wait for the same
     * events may take it over (corCoLoopUnwatch). */
    short armed;
    CorCoWatch* watch;
    CorCo* heir;
    bool ioOwned;                    /* a CorEvIo watches it: no waits */
    /* On io_uring (corEvUring.c): the CorEvIo that watches the fd, whether
     * its poll is armed, and where its completions of the batch being
     * read are merged (1-based; 0: none yet). */
    bool ioArmed;
    unsigned ioBatchAt;
    CorEvIo* io;
} CorCoFdSlot;

/* A park's name: the generation tells a live park from a stale handle. */
typedef struct {
    CorCoWaiter* waiter;
    uint32_t generation;
    uint32_t nextFree;               /* 1-based free list */
} CorCoParkSlot;

/* ---- The loop ------------------------------------------------------------ */

/* Owned by the thread that runs it. */
struct CorEvLoop {
    /* Each loop on lines of its own: other threads post to it. */
    _Alignas(COR_CACHE_LINE) int epfd;  /* -1 on io_uring */
    struct CorEvUring* uring;        /* the ring, or NULL on epoll */
    int wakeFd;                      /* eventfd: posts and stops */
    CorEvIo wakeIo;
    uint64_t now;
    CorEvHeap timers;
    uint64_t timerSeq;
    _Atomic(CorEvTask*) posted;      /* pushed by any thread, LIFO */
    atomic_uint posters;             /* posts between push and wake */
    atomic_bool stopRequested;
    bool stopping;
    unsigned id;                     /* names the loop in park handles */
    /* The batch being dispatched: a CorEvIo stopped meanwhile is struck
     * out of it, so a later entry never reaches a freed owner. */
    struct epoll_event* batch;
    int batchCount;
    int batchIndex;

    /* The coroutine layer (corCoLoop.c). */
    CorCoWaiter* waits;
    CorCoWaiter* readyHead;
    CorCoWaiter* readyTail;
    bool cancelled;
    unsigned cap;
    CorCoLoopStats stats;
    CorCoFdSlot* fds;
    unsigned fdCount;
    CorCoParkSlot* parks;
    unsigned parkCount;
    uint32_t parkFree;
    uint64_t stallMs;
    CorCoStallFn stallFn;

    /* The resolver's channel and cache (corResolve.c), made at the loop's
     * first lookup and freed when its run ends or it is destroyed; the
     * loop calls it through a pointer, so it links c-ares only where the
     * resolver is used. */
    struct CorResolver* resolver;
    void (*resolverFree)(struct CorResolver* resolver);
};

/* The low bit that marks a coroutine wait in epoll_data (a CorEvIo
 * pointer has it clear). */
#define COR_EV_WAITER_TAG ((uint64_t)1)

/* Hooks of the coroutine layer, called by the loop. */
void corCoLoopInit(CorEvLoop* loop);
void corCoLoopFree(CorEvLoop* loop);
void corCoLoopEvent(CorEvLoop* loop, uint64_t data, unsigned events);
/* A CorEvIo takes fd, or lets it go: coroutine waits on it are refused
 * meanwhile, and a stale wait is ended. Returns 1 when coroutine waits had
 * left fd in the epoll set (one-shot, disarmed), 0 when they had not, -1
 * for an fd past the loop's table. */
int corCoLoopFdOwned(CorEvLoop* loop, int fd, bool owned);
bool corCoLoopRunReady(CorEvLoop* loop);

/* Suspend the running coroutine on waiter (linked into the loop's waits)
 * until it is settled; timeoutMs < 0 arms no timer. May yield. */
void corCoLoopSuspend(CorEvLoop* loop, CorCoWaiter* waiter, int timeoutMs);

/* Whether the calling thread may yield a coroutine to wait now
 * (corRestYieldAllow). */
bool corRestYieldAllowed(void);

/* Bind the running coroutine's waits to cancel: 0, or -EPERM when no
 * loop spawned it. */
int corCoLoopCancelBind(CorRestCancel* cancel);

/* End a coroutine's pending wait as cancelled, when it is a wait of the
 * calling thread's loop; nothing otherwise. */
void corCoLoopCancelWait(CorCoWaiter* waiter);

/* Settle a waiter as ready and queue its coroutine to be resumed. */
void corCoLoopReady(CorEvLoop* loop, CorCoWaiter* waiter);

/* Run posted tasks and expire timers: one iteration's chores. */
void corEvTimersExpire(CorEvLoop* loop);
int corEvTimersNextMs(const CorEvLoop* loop);

/* Whether a wait now is the running coroutine's, on its loop (and may
 * yield it); elsewhere waits poll. */
bool corRestOnCoroutine(void);

/* ---- The io_uring backend (corEvUring.c) --------------------------------- */

/* Packs an fd and its arming's generation into epoll_data or user_data;
 * tag: COR_EV_WAITER_TAG for a coroutine wait, 0 for a CorEvIo's poll. */
static inline uint64_t
corEvArming(int fd, uint32_t generation, uint64_t tag)
{
    return (uint64_t)(unsigned)fd << 32 | (uint64_t)generation << 1 | tag;
}

/* The next generation of an arming: 31 bits, never 0, so an arming's
 * user_data is never 0 (the mark of a completion nobody reads). */
static inline uint32_t
corEvGenerationNext(uint32_t generation)
{
    generation = (generation + 1) & 0x7fffffff;
    return generation != 0 ? generation : 1;
}

#if COR_HAVE_URING
/* Make the loop's ring (disabled until the loop first runs, on the thread
 * that runs it); 0 or -errno. */
int corEvUringCreate(CorEvLoop* loop);
void corEvUringDestroy(CorEvLoop* loop);
/* A CorEvIo on the ring; the fd's slot is the loop's already. */
int corEvUringIoStart(CorEvLoop* loop, CorEvIo* io);
int corEvUringIoSet(CorEvLoop* loop, CorEvIo* io, unsigned events);
void corEvUringIoStop(CorEvLoop* loop, CorEvIo* io);
/* A coroutine wait's one-shot poll, and its removal when the wait ended
 * another way; data as corEvArming. */
int corEvUringWaitArm(CorEvLoop* loop, int fd, short events, uint64_t data);
void corEvUringWaitDisarm(CorEvLoop* loop, uint64_t data);
/* Submit what was armed, sleep up to timeoutMs (-1: until an event), and
 * dispatch a batch of completions; 0 or -errno. */
int corEvUringRun(CorEvLoop* loop, int timeoutMs);
/* A run's end, on its thread: what is still written goes to the kernel,
 * and the thread lets the ring go. */
void corEvUringRunEnd(CorEvLoop* loop);
#else
/* A build without it: no loop is ever made on a ring (loop->uring stays
 * NULL), so only the create is called, and it says so. */
static inline int
corEvUringCreate(CorEvLoop* loop)
{
    (void)loop;
    return -ENOSYS;
}

static inline void
corEvUringDestroy(CorEvLoop* loop)
{
    (void)loop;
}

static inline int
corEvUringIoStart(CorEvLoop* loop, CorEvIo* io)
{
    (void)loop; (void)io;
    return -ENOSYS;
}

static inline int
corEvUringIoSet(CorEvLoop* loop, CorEvIo* io, unsigned events)
{
    (void)loop; (void)io; (void)events;
    return -ENOSYS;
}

static inline void
corEvUringIoStop(CorEvLoop* loop, CorEvIo* io)
{
    (void)loop; (void)io;
}

static inline int
corEvUringWaitArm(CorEvLoop* loop, int fd, short events, uint64_t data)
{
    (void)loop; (void)fd; (void)events; (void)data;
    return -ENOSYS;
}

static inline void
corEvUringWaitDisarm(CorEvLoop* loop, uint64_t data)
{
    (void)loop; (void)data;
}

static inline int
corEvUringRun(CorEvLoop* loop, int timeoutMs)
{
    (void)loop; (void)timeoutMs;
    return -ENOSYS;
}

static inline void
corEvUringRunEnd(CorEvLoop* loop)
{
    (void)loop;
}
#endif

/* ---- The resolver's channels (corResolveChannel.c) ----------------------- */

struct ares_channeldata;

/* One loop's or one thread's c-ares channel and cache; the loop's is
 * freed when its run ends, a thread's when the thread exits. */
typedef struct CorResolver {
    struct ares_channeldata* channel;
    int epfd;                   /* the channel's sockets */
    CorEvLoop* loop;            /* the loop it serves, or NULL */
    CorEvIo io;                 /* epfd, on the loop */
    CorEvTimer timer;           /* c-ares' next timeout, on the loop */
    struct CorResolveCache* cache;
    unsigned generation;        /* of the configuration it was made from */
    unsigned pending;           /* queries in flight */
    int timeoutMs;
    unsigned minTtlS;
    unsigned maxTtlS;
    unsigned negativeTtlS;
} CorResolver;

/* The calling loop's resolver, or the calling thread's; made at the first
 * lookup, and made again when the configuration changed and nothing is in
 * flight. NULL with errno set on failure. */
CorResolver* corResolverGet(void);

/* Read what the channel's sockets have and expire what timed out; the
 * callbacks of the queries that end run from here. */
void corResolverProcess(CorResolver* r);

/* Arm the loop's timer for c-ares' next timeout, or disarm it (nothing
 * off the loops). */
void corResolverTimerArm(CorResolver* r);

/* ---- The resolver's cache (corResolveCache.c) ---------------------------- */

typedef struct CorResolveWaiter CorResolveWaiter;
typedef struct CorResolveCache CorResolveCache;

/*
 * A name's answer, or its query in flight with the lookups that wait for
 * it. Owned by its cache; while pending, the query's callback holds it,
 * so it is not dropped.
 */
typedef struct CorResolveEntry {
    struct CorResolveEntry* next;    /* the hash chain */
    struct CorResolver* resolver;
    CorResolveWaiter* waiters;       /* while pending */
    uint64_t expires;                /* ms of the clock; an answer */
    int status;                      /* c-ares' status of the answer */
    bool pending;
    unsigned count;
    union {
        struct sockaddr_in v4;
        struct sockaddr_in6 v6;
    } addrs[COR_RESOLVE_MAX];
    char name[];                     /* lower case */
} CorResolveEntry;

CorResolveCache* corResolveCacheCreate(void);
void corResolveCacheDestroy(CorResolveCache* cache);
/* The entry of name (lower case), fresh, expired or pending; or NULL. */
CorResolveEntry* corResolveCacheFind(CorResolveCache* cache,
                                     const char* name);
/* A new zeroed entry for name, or NULL (no memory, or the table is full
 * of queries in flight). now: what has expired may make room. */
CorResolveEntry* corResolveCacheAdd(CorResolveCache* cache, const char* name,
                                    uint64_t now);

#endif /* COR_EV_INT_H */
