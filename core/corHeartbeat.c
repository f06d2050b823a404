/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loops' heartbeats (corCoreInt.h): how the master, which runs no
 * loop and no module code, learns that every loop of the serving
 * generation still turns. A loop that a handler holds (a blocking call
 * run inline, an endless loop) cannot run its timers, so its slot stops
 * moving; the generation's process, its other loops and its main thread
 * may all look well meanwhile, which is why neither the process being
 * alive nor a probe through one connection would do.
 *
 * Rejected: a pipe or a datagram per beat (a system call per loop per
 * period, and a master that must read them all), and stamping each loop
 * iteration (a loop that sleeps in epoll_wait for minutes is idle, not
 * stalled: it must still beat). A timer does both right at the cost of
 * one heap entry per loop.
 *
 * The page also says when a draining generation's loops have all stopped
 * accepting: until then a connection to a shared listening socket may
 * still be taken by the old generation, so the master waits for it
 * before it tells `cor -s reload` that the new configuration serves.
 */
#include "corCoreInt.h"

#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

CorHeartbeat* corHeartbeat;

static size_t
pageSize(unsigned loops)
{
    return sizeof(CorHeartbeat) + (size_t)loops * sizeof(CorHeartbeatSlot);
}

CorHeartbeat*
corHeartbeatCreate(unsigned loops, uint64_t periodMs)
{
    CorHeartbeat* hb = mmap(NULL, pageSize(loops), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (hb == MAP_FAILED) {
        return NULL;
    }
    /* A fresh anonymous mapping is zero: every slot says "not yet". */
    hb->loops = loops;
    hb->periodMs = periodMs;
    return hb;
}

void
corHeartbeatFree(CorHeartbeat* hb)
{
    if (hb != NULL) {
        munmap(hb, pageSize(hb->loops));
    }
}

static void
beat(CorEvTimer* timer)
{
    /* The slot is the loop's index, which its thread keeps
     * (corLoopIndexSet, before the loop runs). */
    CorEvLoop* loop = corEvLoopCurrent();
    int index = corLoopIndexCurrent();

    atomic_store_explicit(&corHeartbeat->beat[index].ms, corEvNow(loop),
                          memory_order_relaxed);
    corEvTimerStart(loop, timer, corHeartbeat->periodMs, beat);
}

void
corHeartbeatStart(CorEvLoop* loop, unsigned index, CorEvTimer* timer)
{
    if (corHeartbeat == NULL || corHeartbeat->periodMs == 0
        || index >= corHeartbeat->loops) {
        return;
    }
    atomic_store(&corHeartbeat->beat[index].ms, corEvClockMs());
    corEvTimerStart(loop, timer, corHeartbeat->periodMs, beat);
}

int
corHeartbeatStale(const CorHeartbeat* hb, uint64_t now, uint64_t maxAgeMs,
                  uint64_t* ageMsP)
{
    int stalest = -1;
    uint64_t oldest = 0;

    for (unsigned i = 0; i < hb->loops; i++) {
        uint64_t ms = atomic_load_explicit(&hb->beat[i].ms,
                                           memory_order_relaxed);
        uint64_t age = ms == 0 ? UINT64_MAX : now > ms ? now - ms : 0;

        if (age > maxAgeMs && (stalest < 0 || age > oldest)) {
            stalest = (int)i;
            oldest = age;
        }
    }
    *ageMsP = oldest;
    return stalest;
}

void
corHeartbeatDrained(void)
{
    if (corHeartbeat != NULL) {
        atomic_fetch_add(&corHeartbeat->drained, 1);
    }
}

bool
corHeartbeatDrainedWait(const CorHeartbeat* hb, uint64_t waitMs)
{
    uint64_t deadline = corEvClockMs() + waitMs;
    struct timespec tick = { 0, 1000 * 1000 };

    while (hb != NULL && atomic_load(&hb->drained) < hb->loops) {
        if (corEvClockMs() >= deadline) {
            return false;
        }
        nanosleep(&tick, NULL);
    }
    return true;
}
