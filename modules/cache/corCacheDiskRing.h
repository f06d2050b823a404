/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk store's writers' file work through an io_uring of each
 * writer thread's own, where the build has liburing and the kernel
 * lets a ring be made: a turn's writes and its rename go in one
 * submission (one syscall, linked: the first that fails cancels the
 * rest). Apart from corCacheDiskWrite.c, which says what to write; this
 * says how the syscalls are made, and falls back to plain ones.
 */
#ifndef COR_CACHE_DISK_RING_H
#define COR_CACHE_DISK_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A batch of file work, queued, then run at once. */
typedef struct CacheRingBatch CacheRingBatch;

/* The calling thread's batch: on its ring, or on plain syscalls where
 * there is none (the build or the kernel has none, or refuses it: said
 * once in the log, as the ring's use is). Never NULL. */
CacheRingBatch* cacheRingBatch(void);

/* path opened, created (O_EXCL), now: an fd or -errno. */
int cacheRingOpen(CacheRingBatch* b, const char* path);
/* len bytes of data at `at` in fd, queued; data must live until run. */
void cacheRingWrite(CacheRingBatch* b, int fd, const void* data, size_t len,
                    off_t at);
/* from renamed to to, queued after the writes. */
void cacheRingRename(CacheRingBatch* b, const char* from, const char* to);
/* What was queued, done in order: true when all of it was, whole;
 * after a failure the rest is not done. The batch is empty after. */
bool cacheRingRun(CacheRingBatch* b);

#endif
