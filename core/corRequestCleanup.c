/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request's cleanups (corCoreInt.h): the work its running phase started
 * beside itself and must not outlive it, whatever that work is (a client
 * call of any scheme). The core knows only the list: corRequest.c cancels
 * it when the request is cancelled and ends it when the phase is over;
 * the owner of an entry says what cancel and end mean for its work.
 */
#include "corCoreInt.h"

#include <pthread.h>

/* Every request's list: a worker adds and removes while the loop cancels;
 * held only for the links and the cancels, which never wait. */
static pthread_mutex_t cleanupLock = PTHREAD_MUTEX_INITIALIZER;

static void
cleanupUnlink(CorRequestCleanup* c)
{
    corListRemove(&c->link);
    c->owner = NULL;
}

void
corRequestCleanupAdd(CorRequest* r, CorRequestCleanup* c)
{
    pthread_mutex_lock(&cleanupLock);
    c->owner = r;
    corListInsert(&r->cleanups, &c->link);
    pthread_mutex_unlock(&cleanupLock);
}

void
corRequestCleanupRemove(CorRequestCleanup* c)
{
    pthread_mutex_lock(&cleanupLock);
    if (c->owner != NULL) {
        cleanupUnlink(c);
    }
    pthread_mutex_unlock(&cleanupLock);
}

void
corRequestCleanupsCancel(CorRequest* r)
{
    CorList* node;
    CorList* next;

    pthread_mutex_lock(&cleanupLock);
    corListForEach(node, next, &r->cleanups)
    {
        CorRequestCleanup* c = corContainerOf(node, CorRequestCleanup, link);

        c->cancel(c);
    }
    pthread_mutex_unlock(&cleanupLock);
}

/* One at a time outside the lock: an end may take its owner's. */
void
corRequestCleanupsEnd(CorRequest* r)
{
    for (;;) {
        CorList* node;
        CorRequestCleanup* c = NULL;

        pthread_mutex_lock(&cleanupLock);
        node = corListFirst(&r->cleanups);
        if (node != NULL) {
            c = corContainerOf(node, CorRequestCleanup, link);
            cleanupUnlink(c);
        }
        pthread_mutex_unlock(&cleanupLock);
        if (c == NULL) {
            return;
        }
        c->end(c);
    }
}
