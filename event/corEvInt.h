/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of event/: the loop record, the heap, and the hooks between the
 * loop (corEvLoop.c) and its coroutine layer (corCoLoop.c). Never included
 * from outside event/.
 */
#ifndef COR_EV_INT_H
#define COR_EV_INT_H

#include <stdatomic.h>

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

/* What the loop knows of an fd a coroutine waits on. */
typedef struct {
    CorCoWaiter* waiter;             /* waiting now, or NULL */
    bool registered;                 /* in the epoll set (maybe disarmed) */
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
    int epfd;
    int wakeFd;                      /* eventfd: posts and stops */
    CorEvIo wakeIo;
    uint64_t now;
    CorEvHeap timers;
    uint64_t timerSeq;
    _Atomic(CorEvTask*) posted;      /* pushed by any thread, LIFO */
    atomic_bool stopRequested;
    bool stopping;

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
};

/* The low bit that marks a coroutine waiter in epoll_data. */
#define COR_EV_WAITER_TAG ((uintptr_t)1)

/* Hooks of the coroutine layer, called by the loop. */
void corCoLoopInit(CorEvLoop* loop);
void corCoLoopFree(CorEvLoop* loop);
void corCoLoopEvent(CorEvLoop* loop, CorCoWaiter* waiter, unsigned events);
bool corCoLoopRunReady(CorEvLoop* loop);

/* Suspend the running coroutine on waiter (linked into the loop's waits)
 * until it is settled; timeoutMs < 0 arms no timer. May yield. */
void corCoLoopSuspend(CorEvLoop* loop, CorCoWaiter* waiter, int timeoutMs);

/* Settle a waiter as ready and queue its coroutine to be resumed. */
void corCoLoopReady(CorEvLoop* loop, CorCoWaiter* waiter);

/* Run posted tasks and expire timers: one iteration's chores. */
void corEvTimersExpire(CorEvLoop* loop);
int corEvTimersNextMs(const CorEvLoop* loop);

#endif /* COR_EV_INT_H */
