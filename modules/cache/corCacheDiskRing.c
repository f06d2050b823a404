/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The writers' syscalls, batched on a ring of each writer thread's own
 * where there is one (corCacheDiskRing.h): what a turn of a writer
 * queues goes to the kernel in one io_uring_enter, not one syscall an
 * operation; where the ring cannot be had, the same operations one by
 * one, so the files and the faults are the same either way.
 */
#include "corCacheDiskRing.h"

#include "corAutoConfig.h"
#include "corModule.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#if COR_HAVE_URING
#include <liburing.h>
#endif

/* A turn queues at most a piece, the head and the rename; past this the
 * batch is run early. */
#define BATCH_MOST 8

typedef struct {
    const void* data; /* a write's, or the rename's from */
    const char* to;   /* NULL: a write */
    size_t len;
    off_t at;
    int fd;
} RingOp;

struct CacheRingBatch {
#if COR_HAVE_URING
    struct io_uring ring;
#endif
    bool onRing;
    unsigned count;
    bool failed; /* an early run failed: the rest is not done */
    RingOp ops[BATCH_MOST];
};

static pthread_key_t batchKey;
static pthread_once_t batchKeyOnce = PTHREAD_ONCE_INIT;
static atomic_bool said;

static void
batchFree(void* arg)
{
    CacheRingBatch* b = arg;

#if COR_HAVE_URING
    if (b->onRing) {
        io_uring_queue_exit(&b->ring);
    }
#endif
    free(b);
}

static void
batchKeyMake(void)
{
    pthread_key_create(&batchKey, batchFree);
}

/* b on a ring of its own, or why not (said once per process: a
 * container's seccomp refuses every thread alike). */
static void
ringMake(CacheRingBatch* b)
{
    int err = ENOSYS; /* the build has no liburing */

#if COR_HAVE_URING
    err = -io_uring_queue_init(BATCH_MOST, &b->ring, 0);
#endif
    b->onRing = err == 0;
    if (atomic_exchange(&said, true)) {
        return;
    }
    if (b->onRing) {
        corLog(COR_LOG_INFO, "cache: disk writes through io_uring");
    } else {
        corLog(COR_LOG_INFO,
               "cache: disk writes through plain syscalls (no io_uring: %s)",
               strerror(err));
    }
}

CacheRingBatch*
cacheRingBatch(void)
{
    CacheRingBatch* b;

    pthread_once(&batchKeyOnce, batchKeyMake);
    b = pthread_getspecific(batchKey);
    if (b == NULL) {
        b = calloc(1, sizeof(*b));
        if (b == NULL) {
            abort(); /* a few hundred bytes a writer thread, once */
        }
        ringMake(b);
        pthread_setspecific(batchKey, b);
        /* Only the store's writers write: named so in top and /proc. */
        prctl(PR_SET_NAME, "cor-cachewrite");
    }
    return b;
}

int
cacheRingOpen(CacheRingBatch* b, const char* path)
{
    /* Not on the ring: an open that creates is always handed to the
     * ring's worker threads, a wake-up more than open(2) costs. */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

    (void)b;
    return fd >= 0 ? fd : -errno;
}

void
cacheRingWrite(CacheRingBatch* b, int fd, const void* data, size_t len,
               off_t at)
{
    if (b->count == BATCH_MOST && !cacheRingRun(b)) {
        b->failed = true;
    }
    b->ops[b->count++] = (RingOp){
        .data = data, .len = len, .at = at, .fd = fd
    };
}

void
cacheRingRename(CacheRingBatch* b, const char* from, const char* to)
{
    if (b->count == BATCH_MOST && !cacheRingRun(b)) {
        b->failed = true;
    }
    b->ops[b->count++] = (RingOp){ .data = from, .to = to, .fd = -1 };
}

static bool
plainWrite(const RingOp* op)
{
    const char* data = op->data;
    size_t len = op->len;
    off_t at = op->at;

    while (len > 0) {
        ssize_t n = pwrite(op->fd, data, len, at);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        data += n;
        len -= (size_t)n;
        at += n;
    }
    return true;
}

#if COR_HAVE_URING
/* b's ops linked in one submission: a write short or failed cancels
 * what follows it (the rename above all). */
static bool
ringRun(CacheRingBatch* b)
{
    bool ok = true;

    for (unsigned i = 0; i < b->count; i++) {
        const RingOp* op = &b->ops[i];
        struct io_uring_sqe* sqe = io_uring_get_sqe(&b->ring);

        if (op->to != NULL) {
            io_uring_prep_rename(sqe, op->data, op->to);
        } else {
            io_uring_prep_write(sqe, op->fd, op->data, (unsigned)op->len,
                                (uint64_t)op->at);
        }
        sqe->user_data = i;
        if (i + 1 < b->count) {
            sqe->flags |= IOSQE_IO_LINK;
        }
    }
    io_uring_submit_and_wait(&b->ring, b->count);
    for (unsigned done = 0; done < b->count; done++) {
        struct io_uring_cqe* cqe;
        const RingOp* op;

        if (io_uring_wait_cqe(&b->ring, &cqe) != 0) {
            return false; /* not seen: the ring is broken anyway */
        }
        op = &b->ops[cqe->user_data];
        ok = ok
             && (op->to != NULL ? cqe->res == 0
                                : cqe->res >= 0 && (size_t)cqe->res == op->len);
        io_uring_cqe_seen(&b->ring, cqe);
    }
    return ok;
}
#endif

bool
cacheRingRun(CacheRingBatch* b)
{
    bool ok = !b->failed;

    if (ok && b->count > 0) {
#if COR_HAVE_URING
        if (b->onRing) {
            ok = ringRun(b);
        }
#endif
        for (unsigned i = 0; !b->onRing && ok && i < b->count; i++) {
            const RingOp* op = &b->ops[i];

            ok = op->to != NULL ? rename(op->data, op->to) == 0
                                : plainWrite(op);
        }
    }
    b->count = 0;
    b->failed = false;
    return ok;
}
