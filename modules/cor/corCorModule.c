/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor:// as a module: it registers the listener protocol `cor` (`cors`
 * over TLS, ALPN cor/1), keeps one CorServerLoop per loop, and follows the
 * generation's lifecycle as the HTTP server does: start (accept), drain
 * (stop accepting, CLOSE to every connection), stop (answer what is left
 * as failed, close).
 *
 *     modules:
 *       - load: cor
 *         max_frame: 64MiB       # the largest frame taken (its tree)
 *         max_in_flight: 256     # requests in flight per connection
 *         max_in_flight_bytes: 16MiB  # what they hold, past which the
 *                                #   connection is not read
 *         idle_timeout: 60s      # a connection with nothing due
 *         hello_timeout: 10s     # the HELLO after the connect
 */
#include "corCorServerInt.h"
#include "corCorClientInt.h"

/* How long a stop gives the answers it makes to go out, all connections
 * of a loop together. */
#define STOP_FLUSH_MS 100

static int
corStart(CorModule* m, CorEvLoop* loop, unsigned index,
         CorListener* const* listeners, unsigned count)
{
    CorServerLoop* sl = corCorServerLoopAt(index);

    (void)m;
    sl->accept = corAcceptStart(loop, index, listeners, count,
                                corCorServerConnOpen);
    return sl->accept != NULL ? 0 : -1;
}

static void
corDrain(CorModule* m, CorEvLoop* loop, unsigned index)
{
    CorServerLoop* sl = corCorServerLoopAt(index);
    CorList* node;
    CorList* next;

    (void)m;
    (void)loop;
    sl->draining = true;
    corAcceptStop(sl->accept);
    sl->accept = NULL;
    corListForEach(node, next, &sl->conns.conns)
    {
        /* (A failed flush closes it: the next was read before.) */
        corCorServerConnDrain(corContainerOf(node, CorServerConn, k.link));
    }
}

static void
corStop(CorModule* m, CorEvLoop* loop, unsigned index)
{
    CorServerLoop* sl = corCorServerLoopAt(index);
    /* The answers a stop makes get STOP_FLUSH_MS in all to go out. */
    uint64_t deadline = corEvClockMs() + STOP_FLUSH_MS;

    (void)m;
    (void)loop;
    corAcceptStop(sl->accept);
    sl->accept = NULL;
    while (!corListEmpty(&sl->conns.conns)) {
        corCorServerConnStop(corContainerOf(corListFirst(&sl->conns.conns),
                                            CorServerConn, k.link),
                             deadline);
    }
}

static unsigned
corConnections(CorModule* m, unsigned index)
{
    (void)m;
    return atomic_load(&corCorServerLoopAt(index)->conns.count);
}

static int
corLoopInit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    CorServerLoop* sl = corCorServerLoopAt(index);

    (void)m;
    sl->loop = loop;
    sl->index = index;
    return 0;
}

static void
corLoopExit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    (void)loop;
    (void)index;
    corCorClientLoopExit();
}

static int
corInit(CorModule* m, const CorConf* conf)
{
    CorConfErrors* errors = corModuleErrors(m);

    corCorServerConfRead(conf, errors);
    if (corCorServerLoopsNew(corLoopCount()) != 0) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    /* Its notifications go as exchanges, as http's do; its answers are
     * read as they come (corClientOpen). */
    for (unsigned i = 0; i < 2; i++) {
        if (corSchemeAdd(m, &(CorScheme){ .scheme = i == 0 ? "cor" : "cors",
                                          .fetch = corCorFetch,
                                          .send = corClientNotify,
                                          .stream = &corCorStreamOps })
            != 0) {
            return -1;
        }
    }
    return corProtocolAdd(m, &(CorProtocol){
                                 .name = "cor",
                                 .alpn = "cor/1",
                                 .tlsName = "cors",
                                 .start = corStart,
                                 .drain = corDrain,
                                 .stop = corStop,
                                 .connections = corConnections,
                             });
}

static void
corExit(CorModule* m)
{
    (void)m;
    corCorServerLoopsFree();
}

COR_MODULE(cor, .init = corInit, .loopInit = corLoopInit,
           .loopExit = corLoopExit, .exit = corExit);
