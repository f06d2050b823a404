/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The built-in handler `health`: what a load balancer or a readiness probe
 * asks before it sends traffic. It answers 200 only while the generation
 * that reads the request serves: its loops and listeners are up and it
 * reported ready to the master, and no drain or stop has begun. Before
 * that (a request read in the moment between the first accept and the
 * report) and once a reload or a graceful stop drains the generation, it
 * answers 503, so a balancer takes the instance out while its requests
 * in flight still finish. The state is one word the generation's main
 * thread writes and any loop reads.
 */
#include "corCoreInt.h"

#include <string.h>

static atomic_int generationState = COR_GENERATION_STARTING;

void
corHealthSet(CorGenerationState state)
{
    atomic_store(&generationState, (int)state);
}

CorGenerationState
corHealthGet(void)
{
    return (CorGenerationState)atomic_load(&generationState);
}

void
corHealthServe(CorRequest* r)
{
    static const char* const bodies[] = {
        [COR_GENERATION_STARTING] = "starting\n",
        [COR_GENERATION_READY] = "ready\n",
        [COR_GENERATION_DRAINING] = "draining\n",
        [COR_GENERATION_STOPPING] = "stopping\n",
    };
    CorGenerationState state = corHealthGet();
    const char* body = bodies[state];

    /* A stop under way refuses whatever its flag saw first. */
    if (atomic_load(&corRuntime.stopping)) {
        body = bodies[COR_GENERATION_STOPPING];
        state = COR_GENERATION_STOPPING;
    }
    /* A probe's answer is of the moment: no cache may keep it. */
    corResponseHeader(r, "Cache-Control", "no-store");
    corRespondStatic(r, state == COR_GENERATION_READY ? 200 : 503, "text/plain",
                     body, strlen(body));
}
