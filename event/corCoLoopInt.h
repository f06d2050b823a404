/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the coroutine layer on the loop (corCoLoop.c, corCoWatch.c,
 * corCoBlocking.c): its waits, its state of a loop, which the loop holds
 * behind one opaque pointer (CorEvLoop.co), and the calls between its
 * files. The loop knows none of it: it calls the hooks the layer gave it
 * (CorEvHooks, corEvInt.h). Never included from outside event/ (and its
 * tests).
 */
#ifndef COR_CO_LOOP_INT_H
#define COR_CO_LOOP_INT_H

#include <errno.h>

#include "corEvInt.h"

typedef enum {
    COR_WAIT_PENDING,
    COR_WAIT_READY, /* the fd has events, or a park was woken */
    COR_WAIT_TIMEOUT,
    COR_WAIT_CANCELLED,
    COR_WAIT_CLOSED /* corCoLoopClose() took the fd away */
} CorCoWaitOutcome;

/*
 * One suspended coroutine. Lives on that coroutine's stack for the length
 * of the wait; the layer links it while it waits.
 */
typedef struct CorCoWaiter {
    CorCo* co;
    CorEvTimer timer;
    CorList link;                  /* in the loop's waits, for cancel */
    struct CorCoWaiter* readyNext; /* the loop's ready queue */
    int fd;                        /* < 0: a timer or a park */
    uint32_t parkSlot;             /* 1-based; 0: not a park */
    short revents;
    uint8_t outcome;
    bool cancellable;
} CorCoWaiter;

/*
 * What the layer knows of an fd of the loop, beside what the loop knows
 * (CorEvFdSlot: its arming): who waits on it; while no coroutine waits,
 * the watch its arming serves (corCoLoopWatch), or the coroutine whose next
 * wait for the same events may take that arming over (corCoLoopUnwatch).
 */
typedef struct {
    CorCoWaiter* waiter;
    CorCoWatch* watch;
    CorCo* heir;
} CorCoFdSlot;

/* A park's name: the generation tells a live park from a stale handle. */
typedef struct {
    CorCoWaiter* waiter;
    uint32_t generation;
    uint32_t nextFree; /* 1-based free list */
} CorCoParkSlot;

/* The layer's state of one loop (CorEvLoop.co); the loop's thread's. */
typedef struct CorCoLoop {
    CorList waits; /* CorCoWaiter.link */
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
} CorCoLoop;

/* Suspend the running coroutine on waiter (linked into the loop's waits)
 * until it is settled; timeoutMs < 0 arms no timer. May yield. */
void corCoLoopSuspend(CorEvLoop* loop, CorCoWaiter* waiter, int timeoutMs);

/* Settle a waiter as ready and queue its coroutine to be resumed. */
void corCoLoopReady(CorEvLoop* loop, CorCoWaiter* waiter);

/* fd's slot of the layer (fd >= 0), for a new wait or watch: NULL with
 * errno ENOMEM, or EBUSY when a coroutine waits on fd, a watch or a
 * CorEvIo has it. */
static inline CorCoFdSlot* corCoFdClaim(CorEvLoop* loop, int fd);
/* The table grown to hold fd, its slot zeroed; NULL without memory. */
CorCoFdSlot* corCoFdGrow(CorCoLoop* co, int fd);

/* Arm fd one-shot for events for a wait or a watch: what watched it, or
 * was to inherit its arming, is forgotten. Returns 0, or -1 with errno. */
int corCoFdArm(CorEvLoop* loop, int fd, CorCoFdSlot* slot, short events);

/* ---- Inline definitions ------------------------------------------------ */

static inline CorCoFdSlot*
corCoFdClaim(CorEvLoop* loop, int fd)
{
    CorCoLoop* co = loop->co;
    CorCoFdSlot* slot = (unsigned)fd < co->fdCount ? &co->fds[fd]
                                                   : corCoFdGrow(co, fd);
    CorEvFdSlot* evSlot = corEvFdSlot(loop, fd);

    if (slot == NULL || evSlot == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (slot->waiter != NULL || evSlot->ioOwned || slot->watch != NULL) {
        errno = EBUSY;
        return NULL;
    }
    return slot;
}

#endif /* COR_CO_LOOP_INT_H */
