/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request's holds and its release. A request starts with one hold, its
 * phases' (corRequest.c lets it go once the last phase ended); what runs
 * beside it and may outlive them (a notification, a body's take told back
 * from a worker) holds it too. The last let-go frees what the request
 * owns and hands it back to its protocol, on its loop.
 *
 * Apart from the lifecycle, so that what holds a request calls down into
 * this file and nothing of the phases that started it.
 */
#include "corCoreInt.h"

#include <unistd.h>

static void
arenaFree(CorRequest* r)
{
    if (r->fileFd >= 0) {
        close(r->fileFd); /* the protocol did not take it */
        r->fileFd = -1;
    }
    corFilterEnd(r); /* a body its filters never saw end */
    corStreamFree(r);
    corRequestBodyFree(r);
    corRequestArenaFree(r);
}

/* The request is over and nothing holds it: its memory goes, the
 * protocol releases it. On its loop. */
static void
requestRelease(CorRequest* r)
{
    CorLoopCounters* c = corMetricsLoopCurrent();

    if (r->inFinish) {
        corMetricsGaugeAdd(&c->finishing, -1);
        /* A stop cancelled its waits: it may not have done its work. */
        c->finishFailed += atomic_load(&corRuntime.stopping);
    }
    corMetricsGaugeAdd(&c->inFlight, -1);
    corCacheRelease(r);
    arenaFree(r);
    r->ops->release(r);
}

static void
releaseOnLoop(CorEvTask* task)
{
    requestRelease(corContainerOf(task, CorRequest, task));
}

void
corRequestHold(CorRequest* r)
{
    atomic_fetch_add(&r->holds, 1);
}

/* The last hold goes after the phases ended, wherever it goes: r's task
 * is free then (its phases are over), and carries the release to r's
 * loop. */
void
corRequestLetGo(CorRequest* r)
{
    if (atomic_fetch_sub(&r->holds, 1) != 1) {
        return;
    }
    if (corEvLoopCurrent() == r->loop) {
        requestRelease(r);
    } else {
        corEvLoopPost(r->loop, &r->task, releaseOnLoop);
    }
}
