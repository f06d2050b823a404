/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of event/: the loop record, its fd table and one-shot armings,
 * the heap, and the hooks the layer above the loop (the coroutines,
 * corCoLoopInt.h) gives it. Never included from outside event/ (and its
 * tests).
 */
#ifndef COR_EV_INT_H
#define COR_EV_INT_H

#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/epoll.h>

#include "corAutoConfig.h"
#include "corEv.h"
#include "corList.h"

/* ---- Intrusive binary min-heap ------------------------------------------- */

typedef bool (*CorEvHeapLessFn)(const CorEvHeapNode* a, const CorEvHeapNode* b);

typedef struct {
    CorEvHeapNode* min;
    unsigned count;
} CorEvHeap;

void corEvHeapInsert(CorEvHeap* heap, CorEvHeapNode* node,
                     CorEvHeapLessFn less);
void corEvHeapRemove(CorEvHeap* heap, CorEvHeapNode* node,
                     CorEvHeapLessFn less);

/* The order of both heaps, the timers and the delayed tasks: whether what
 * is due at deadline, queued as seq, comes before what is due at
 * otherDeadline, queued as otherSeq. Equal deadlines go in the order they
 * were queued. */
static inline bool corEvDueBefore(uint64_t deadline, uint64_t seq,
                                  uint64_t otherDeadline, uint64_t otherSeq);

/* ---- The fds the loop knows ---------------------------------------------- */

/*
 * What the loop knows of an fd. epoll_data of a one-shot arming carries the
 * fd and the generation of its arming, never a pointer into a coroutine's
 * stack: an event that outlived its arming (an fd closed while armed, shared
 * with another process) finds a newer generation and is dropped.
 */
typedef struct {
    uint32_t generation; /* of the last arming, 31 bits */
    bool registered;     /* in the epoll set (maybe disarmed) */
    /* The events of a one-shot arming (corEvOnceArm) that has neither
     * fired nor been taken away; 0: none. */
    short armed;
    bool ioOwned; /* a CorEvIo watches it */
    /* On io_uring (corEvUring.c): the CorEvIo that watches the fd, whether
     * its poll is armed, and where its completions of the batch being
     * read are merged (1-based; 0: none yet). */
    bool ioArmed;
    unsigned ioBatchAt;
    CorEvIo* io;
} CorEvFdSlot;

/* ---- The layer above the loop -------------------------------------------- */

struct CorCoLoop;

/*
 * What the layer above the loop (the coroutines, corCoLoop.c) gives a loop
 * when it makes one, as Redis's aeSetBeforeSleepProc: the loop calls these
 * at the points of its turn they name, and names nothing of that layer.
 */
typedef struct CorEvHooks {
    /* Before the loop sleeps: resume what was made ready. True when the
     * loop must not sleep (what ran may have been all it waited for). */
    bool (*beforePoll)(CorEvLoop* loop);
    /* A one-shot arming of fd (corEvOnceArm) fired, and is disarmed. */
    void (*fired)(CorEvLoop* loop, int fd, unsigned events);
    /* A CorEvIo takes fd (a closed fd's number reused): what waits on it
     * is over, what watches it forgotten. */
    void (*fdTaken)(CorEvLoop* loop, int fd);
    /* The loop's first turn of a stop: end every wait. */
    void (*stop)(CorEvLoop* loop);
    /* Whether work is still live: a stopping loop turns until it is not. */
    bool (*live)(const CorEvLoop* loop);
    /* A run ended; the loop may run again. */
    void (*runEnd)(CorEvLoop* loop);
    /* The loop is destroyed: the layer lets its state go. */
    void (*destroy)(CorEvLoop* loop);
    /* corRestWait.c's: whether code of the layer runs now (a coroutine),
     * its wait, and a cancel's binding and its end of one wait. */
    bool (*running)(void);
    int (*wait)(int fd, short events, int timeoutMs, short* reventsP);
    int (*cancelBind)(CorRestCancel* cancel);
    void (*cancelWait)(CorEvLoop* loop, struct CorCoWaiter* waiter);
} CorEvHooks;

/* ---- The loop ------------------------------------------------------------ */

/* Owned by the thread that runs it. */
struct CorEvLoop {
    /* Each loop on lines of its own: other threads post to it. */
    _Alignas(COR_CACHE_LINE) int epfd; /* -1 on io_uring */
    struct CorEvUring* uring;          /* the ring, or NULL on epoll */
    int wakeFd;                        /* eventfd: posts and stops */
    CorEvIo wakeIo;
    uint64_t now;
    CorEvHeap timers;
    uint64_t timerSeq;
    _Atomic(CorEvTask*) posted; /* pushed by any thread, LIFO */
    CorList soon;               /* CorEvSoon.link: due before sleep */
    atomic_uint posters;        /* posts between push and wake */
    atomic_bool stopRequested;
    bool stopping;
    unsigned id; /* names the loop in park handles */
    /* The batch being dispatched: a CorEvIo stopped meanwhile is struck
     * out of it, so a later entry never reaches a freed owner. */
    struct epoll_event* batch;
    int batchCount;
    int batchIndex;
    CorEvFdSlot* fds;
    unsigned fdCount;

    /* The layer above (corCoLoop.c): its hooks, and its state, opaque
     * here; NULL on a loop made bare (corEvLoopMake). */
    const CorEvHooks* hooks;
    struct CorCoLoop* co;

    /* The resolver's channel and cache (corResolve.c), made at the loop's
     * first lookup and freed when its run ends or it is destroyed; the
     * loop calls it through a pointer, so it links c-ares only where the
     * resolver is used. */
    struct CorResolver* resolver;
    void (*resolverFree)(struct CorResolver* resolver);
};

/* The low bit that marks a one-shot arming in epoll_data (a CorEvIo
 * pointer has it clear). */
#define COR_EV_WAITER_TAG ((uint64_t)1)

/* A loop with no layer above it (no hooks): corEvLoopCreateWith (the
 * coroutine layer's) makes one and gives it its hooks. NULL with errno. */
CorEvLoop* corEvLoopMake(CorEvBackend backend);

/* fd's slot (fd >= 0), made zeroed when the table must grow; NULL without
 * memory. */
static inline CorEvFdSlot* corEvFdSlot(CorEvLoop* loop, int fd);
CorEvFdSlot* corEvFdGrow(CorEvLoop* loop, int fd);

/* A table of *countP entries of size bytes, indexed by fd, grown (by
 * doubling, the new entries zeroed) to hold fd: its new address, with
 * *countP updated; NULL without memory (the table is as it was). */
void* corEvTableGrow(void* table, unsigned* countP, size_t size, int fd);

/*
 * Arm fd one-shot for events (POLLIN...) under a new generation; an arming
 * still pending is replaced. Its event goes to the hooks' fired, once.
 * Returns 0, or -1 with errno. One epoll_ctl; an entry of the ring on
 * io_uring.
 */
int corEvOnceArm(CorEvLoop* loop, int fd, short events);

/* Forget fd's pending arming, if any: io_uring's poll is removed (it would
 * hold the file open); epoll forgets it with the fd, or a MOD replaces it. */
void corEvOnceDrop(CorEvLoop* loop, int fd);

/* fd's arming ended without its event (a timeout, a cancel, a close): it
 * is taken away, and fd out of the epoll set unless a CorEvIo has it. */
void corEvOnceEnd(CorEvLoop* loop, int fd);

/* fd is being closed (close() takes it out of the epoll set): its arming
 * is forgotten. */
void corEvOnceClosed(CorEvLoop* loop, int fd);

/* An event of a one-shot arming (data as corEvArming): dropped when a newer
 * arming replaced it, else given to the hooks. */
static inline void corEvOnceFire(CorEvLoop* loop, uint64_t data,
                                 unsigned events);

/* Whether the calling thread may yield a coroutine to wait now
 * (corRestYieldAllow). */
bool corRestYieldAllowed(void);

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
/* A one-shot arming's poll (corEvOnceArm), and its removal when it ended
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
    (void)loop;
    (void)io;
    return -ENOSYS;
}

static inline int
corEvUringIoSet(CorEvLoop* loop, CorEvIo* io, unsigned events)
{
    (void)loop;
    (void)io;
    (void)events;
    return -ENOSYS;
}

static inline void
corEvUringIoStop(CorEvLoop* loop, CorEvIo* io)
{
    (void)loop;
    (void)io;
}

static inline int
corEvUringWaitArm(CorEvLoop* loop, int fd, short events, uint64_t data)
{
    (void)loop;
    (void)fd;
    (void)events;
    (void)data;
    return -ENOSYS;
}

static inline void
corEvUringWaitDisarm(CorEvLoop* loop, uint64_t data)
{
    (void)loop;
    (void)data;
}

static inline int
corEvUringRun(CorEvLoop* loop, int timeoutMs)
{
    (void)loop;
    (void)timeoutMs;
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
    int epfd;         /* the channel's sockets */
    CorEvLoop* loop;  /* the loop it serves, or NULL */
    CorEvIo io;       /* epfd, on the loop */
    CorEvTimer timer; /* c-ares' next timeout, on the loop */
    struct CorResolveCache* cache;
    unsigned generation; /* of the configuration it was made from */
    unsigned pending;    /* queries in flight */
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
    struct CorResolveEntry* next; /* the hash chain */
    struct CorResolver* resolver;
    CorList waiters;  /* CorResolveWaiter.link; pending */
    uint64_t expires; /* ms of the clock; an answer */
    int status;       /* c-ares' status of the answer */
    bool pending;
    unsigned count;
    union {
        struct sockaddr_in v4;
        struct sockaddr_in6 v6;
    } addrs[COR_RESOLVE_MAX];
    char name[]; /* lower case */
} CorResolveEntry;

CorResolveCache* corResolveCacheCreate(void);
void corResolveCacheDestroy(CorResolveCache* cache);
/* The entry of name (lower case), fresh, expired or pending; or NULL. */
CorResolveEntry* corResolveCacheFind(CorResolveCache* cache, const char* name);
/* A new zeroed entry for name, or NULL (no memory, or the table is full
 * of queries in flight). now: what has expired may make room. */
CorResolveEntry* corResolveCacheAdd(CorResolveCache* cache, const char* name,
                                    uint64_t now);

/* ---- Inline definitions ------------------------------------------------ */

static inline bool
corEvDueBefore(uint64_t deadline, uint64_t seq, uint64_t otherDeadline,
               uint64_t otherSeq)
{
    if (deadline != otherDeadline) {
        return deadline < otherDeadline;
    }
    return seq < otherSeq;
}

static inline CorEvFdSlot*
corEvFdSlot(CorEvLoop* loop, int fd)
{
    return (unsigned)fd < loop->fdCount ? &loop->fds[fd]
                                        : corEvFdGrow(loop, fd);
}

static inline void
corEvOnceFire(CorEvLoop* loop, uint64_t data, unsigned events)
{
    unsigned fd = (unsigned)(data >> 32);
    uint32_t generation = (uint32_t)(data >> 1) & 0x7fffffff;

    if (fd >= loop->fdCount || loop->fds[fd].generation != generation) {
        return; /* an older arming's event */
    }
    loop->fds[fd].armed = 0; /* one-shot: it fired */
    if (loop->hooks != NULL) {
        loop->hooks->fired(loop, (int)fd, events);
    }
}

#endif /* COR_EV_INT_H */
