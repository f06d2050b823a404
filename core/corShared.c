/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared downloads (the seed's @context case): a keyed single-flight fetch
 * with a cache. The first caller of a key runs the fetch; every other
 * caller of that key, on any loop, worker or thread, waits for that one
 * fetch and gets its result, then the cached copy until its TTL passes.
 *
 * The owner of a fetch is the request that runs it (corRequestCurrent),
 * else the coroutine, else the thread: two coroutines of one loop that need
 * one key are a fetch and a waiter like any other, and only the owner
 * asking again for the key it is fetching is a cycle (-EDEADLK), which
 * would otherwise wait for itself for ever.
 *
 * Every waiter waits on an eventfd of its own through corRestWaitFd: a
 * coroutine yields and its loop's epoll wakes it when the fetch ends,
 * whichever loop or thread ran the fetch (the wake goes through the
 * waiter's loop); a worker polls it. So a stop or the waiter's request's
 * cancel ends the wait like any other, and the waiter leaves the entry
 * without touching the fetch. One lock guards the table and is never held
 * across a wait or a fetch; a waiter is linked and unlinked under it, so
 * the fetch never writes to the eventfd of a waiter that left.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct CorShared {
    atomic_uint refs;
    size_t len;
    void* data; /* the fetch's, freed with the last ref */
};

typedef struct SharedWaiter {
    CorList link; /* in its entry's waiters */
    int fd;       /* its eventfd */
    bool done;    /* the fetch ended: err and result set */
    int err;
    CorShared* result; /* a reference of the waiter's own */
} SharedWaiter;

/* A key's entry: owned by the table. A fetch in flight has an owner and
 * waiters; a cached one has a result and an expiry. */
typedef struct SharedEntry {
    struct SharedEntry* next;
    const void* owner; /* the fetching request (or coroutine,
                          thread); NULL once done */
    CorList waiters;   /* SharedWaiter.link */
    CorShared* result; /* the table's reference, when cached */
    uint64_t expires;
    char key[];
} SharedEntry;

#define SHARED_BUCKETS 256

static pthread_mutex_t sharedLock = PTHREAD_MUTEX_INITIALIZER;
static SharedEntry* buckets[SHARED_BUCKETS];
static __thread char threadMark;

static unsigned
keyHash(const char* key)
{
    unsigned h = 2166136261u;

    for (; *key != '\0'; key++) {
        h = (h ^ (unsigned char)*key) * 16777619u;
    }
    return h % SHARED_BUCKETS;
}

/* Who is asking: the request, else the coroutine, else the thread. */
static const void*
ownerCurrent(void)
{
    CorRequest* r = corRequestCurrent();
    CorCo* co = corCoCurrent();

    return r != NULL    ? (const void*)r
           : co != NULL ? (const void*)co
                        : (const void*)&threadMark;
}

const void*
corSharedData(const CorShared* s)
{
    return s->data;
}

size_t
corSharedLen(const CorShared* s)
{
    return s->len;
}

CorShared*
corSharedRef(CorShared* s)
{
    atomic_fetch_add(&s->refs, 1);
    return s;
}

void
corSharedRelease(CorShared* s)
{
    if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1) {
        free(s->data);
        free(s);
    }
}

/* Find key's entry, dropping expired cached entries of its bucket on the
 * way. Under sharedLock. */
static SharedEntry*
entryFind(const char* key, SharedEntry*** slotP)
{
    uint64_t now = corEvClockMs();
    SharedEntry** slot = &buckets[keyHash(key)];

    *slotP = slot;
    while (*slot != NULL) {
        SharedEntry* e = *slot;

        if (e->owner == NULL && e->expires <= now) {
            *slot = e->next;
            corSharedRelease(e->result);
            free(e);
            continue;
        }
        if (strcmp(e->key, key) == 0) {
            return e;
        }
        slot = &e->next;
    }
    return NULL;
}

/* Wait for its entry's fetch as w (linked, under sharedLock, which is released
 * for the wait and held again on return). Returns 0 with w->done, or
 * -ECANCELED (a stop or the caller's cancel: w unlinked). May yield. */
static int
waitFetch(SharedWaiter* w)
{
    int rc = 0;

    while (!w->done) {
        short revents;

        pthread_mutex_unlock(&sharedLock);
        rc = corRestWaitFd(w->fd, POLLIN, -1, &revents) < 0 ? -errno : 0;
        pthread_mutex_lock(&sharedLock);
        if (rc != 0 && !w->done) {
            /* The entry is alive: w is still linked in it. */
            corListRemove(&w->link);
            return rc;
        }
    }
    return 0;
}

/* Run the fetch as key's owner (e is linked, its owner set), then hand
 * the outcome to every waiter and cache it. */
static int
runFetch(SharedEntry* e, CorSharedFetchFn fetch, void* arg, int64_t ttlMs,
         CorShared** resultP)
{
    CorShared* s = calloc(1, sizeof(*s));
    void* data = NULL;
    size_t len = 0;
    int rc = s != NULL ? fetch(e->key, arg, &data, &len) : -ENOMEM;
    CorList* node;
    CorList* next;

    if (rc > 0) {
        rc = 0;
    }
    if (rc == 0) {
        atomic_store(&s->refs, 1);
        s->data = data;
        s->len = len;
    } else {
        free(data);
        free(s);
        s = NULL;
    }
    pthread_mutex_lock(&sharedLock);
    corListForEach(node, next, &e->waiters)
    {
        SharedWaiter* w = corContainerOf(node, SharedWaiter, link);
        uint64_t one = 1;

        w->done = true;
        w->err = rc;
        w->result = s != NULL ? corSharedRef(s) : NULL;
        if (write(w->fd, &one, sizeof(one)) < 0) {
            /* An eventfd's counter cannot overflow from one write. */
        }
    }
    corListInit(&e->waiters);
    e->owner = NULL;
    if (s != NULL && ttlMs > 0) {
        e->result = corSharedRef(s);
        e->expires = corEvClockMs() + (uint64_t)ttlMs;
    } else {
        /* A failure and a ttl of 0 are not kept. The entry is found
         * again from its bucket's head, since the entries before it may
         * have been dropped meanwhile. */
        SharedEntry** at = &buckets[keyHash(e->key)];

        while (*at != e) {
            at = &(*at)->next;
        }
        *at = e->next;
        free(e);
    }
    pthread_mutex_unlock(&sharedLock);
    *resultP = s;
    return rc;
}

int
corShared(const char* key, CorSharedFetchFn fetch, void* arg, int64_t ttlMs,
          CorShared** resultP)
{
    const void* owner = ownerCurrent();
    SharedEntry** slot;
    SharedEntry* e;
    size_t keyLen;

    *resultP = NULL;
    if (key == NULL || fetch == NULL) {
        return -EINVAL;
    }
    keyLen = strlen(key);
    for (;;) {
        SharedWaiter w = { .fd = -1 };
        int rc;

        pthread_mutex_lock(&sharedLock);
        e = entryFind(key, &slot);
        if (e == NULL) {
            break;
        }
        if (e->owner == NULL) {
            *resultP = corSharedRef(e->result);
            pthread_mutex_unlock(&sharedLock);
            return 0;
        }
        if (e->owner == owner) {
            pthread_mutex_unlock(&sharedLock);
            corLog(COR_LOG_WARN,
                   "shared '%s': asked for by the request "
                   "that is fetching it",
                   key);
            return -EDEADLK;
        }
        w.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w.fd < 0) {
            rc = -errno;
            pthread_mutex_unlock(&sharedLock);
            return rc;
        }
        corListInsert(&e->waiters, &w.link);
        rc = waitFetch(&w);
        pthread_mutex_unlock(&sharedLock);
        close(w.fd);
        if (rc != 0) {
            return rc;
        }
        /* The fetcher's own request was cancelled: its cancel is not
         * ours, so this caller asks again (and may fetch itself). */
        if (w.err == -ECANCELED && !atomic_load(&corRuntime.stopping)) {
            continue;
        }
        *resultP = w.result;
        return w.err;
    }
    e = calloc(1, sizeof(*e) + keyLen + 1);
    if (e == NULL) {
        pthread_mutex_unlock(&sharedLock);
        return -ENOMEM;
    }
    memcpy(e->key, key, keyLen + 1);
    e->owner = owner;
    e->next = *slot;
    *slot = e;
    pthread_mutex_unlock(&sharedLock);
    return runFetch(e, fetch, arg, ttlMs, resultP);
}
