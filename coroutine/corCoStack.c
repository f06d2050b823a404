/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Coroutine stacks: one mapping each, a PROT_NONE guard page at the bottom,
 * the CorCo record at the top, and a free list per thread so that creating
 * a coroutine is usually a pointer pop, not two system calls. The pop and
 * the push are inline in corCoInt.h; what is here is what they fall back on.
 *
 * MAP_NORESERVE means a 256 KiB stack costs only the pages it touches; a
 * stack that comes back to the pool keeps what it touched, which is what a
 * hot pool wants. The pool is bounded (corCoPoolMaxSet; corCoPoolFit sizes
 * it to an event loop's cap) and a stack beyond the bound is unmapped.
 *
 * Stacks are registered with valgrind so it follows the switches.
 */
#include "corCoInt.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#if COR_HAVE_VALGRIND
#include <valgrind/valgrind.h>
#endif

_Atomic size_t corCoStackBytes = COR_CO_STACK_DEFAULT;
/*
 * Sanitizer and debug builds keep no stacks, so that a coroutine used after
 * corCoDestroy() faults instead of running on a recycled stack.
 */
#if COR_HAVE_ASAN || defined(COR_POOL_BYPASS)
#define POOL_MAX_DEFAULT 0
#else
#define POOL_MAX_DEFAULT 1024
#endif

_Atomic unsigned corCoPoolMax = POOL_MAX_DEFAULT;
static _Atomic uint64_t threadsSeen;

/* Ids are a thread number in the high bits and a count in the low ones
 * (corCoPool.lastId): an atomic counter shared by all threads would cost
 * more than the create. */
__thread CorCoPool corCoPool __attribute__((tls_model("initial-exec")));

static size_t
pageSize(void)
{
    static size_t size;

    if (size == 0) {
        size = (size_t)sysconf(_SC_PAGESIZE);
    }
    return size;
}

static size_t
mappingSize(const CorCo* co)
{
    return co->stackSize + COR_CO_GUARD_BYTES;
}

void
corCoStackUnmap(CorCo* co)
{
    char* base = co->stackLow - COR_CO_GUARD_BYTES;

#if COR_HAVE_VALGRIND
    VALGRIND_STACK_DEREGISTER(co->valgrindId);
#endif
    munmap(base, mappingSize(co));
}

static CorCo*
stackMap(size_t size)
{
    size_t page = COR_CO_GUARD_BYTES;
    char* base;
    CorCo* co;

    /*
     * Mapped PROT_NONE first, then the usable part opened up: the guard
     * page is never readable, not even for an instant.
     */
    base = mmap(NULL, size + page, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        return NULL;
    }
    if (mprotect(base + page, size, PROT_READ | PROT_WRITE) != 0) {
        int err = errno;

        munmap(base, size + page);
        errno = err;
        return NULL;
    }
    co = (CorCo*)(base + page + size) - 1;
    co->stackLow = base + page;
    co->stackSize = size;
    co->nextFree = NULL;
#if COR_HAVE_VALGRIND
    co->valgrindId = VALGRIND_STACK_REGISTER(co->stackLow, base + page + size);
#endif
    return co;
}

/*
 * Arms the thread's crash report (again after corCoThreadExit) and numbers
 * the thread at its first stack: a thread whose pool was filled by
 * another's gives (a misuse, but one that must not lose the report) comes
 * here too, as its lastId is still 0.
 */
CorCo*
corCoStackTake(void)
{
    size_t size = atomic_load_explicit(&corCoStackBytes, memory_order_relaxed);
    CorCo* co;

    if (corCoCrashArm() != 0) {
        return NULL;
    }
    if (corCoPool.lastId == 0) {
        corCoPool.lastId = (atomic_fetch_add(&threadsSeen, 1) + 1) << 40;
    }
    while ((co = corCoPool.head) != NULL) {
        corCoPool.head = co->nextFree;
        corCoPool.count--;
        if (co->stackSize == size) {
            break;
        }
        corCoStackUnmap(co); /* left over from an older size */
    }
    if (co == NULL) {
        co = stackMap(size);
        if (co == NULL) {
            return NULL;
        }
    }
    co->id = ++corCoPool.lastId;
    return co;
}

int
corCoStackSizeSet(size_t bytes)
{
    size_t page = pageSize();

    if (bytes < COR_CO_STACK_MIN) {
        return -EINVAL;
    }
    bytes = (bytes + page - 1) / page * page;
    atomic_store(&corCoStackBytes, bytes);
    return 0;
}

/* What stays below the caller's frame: this function's frame and the
 * system call's, which must not be given back under them. */
#define TRIM_MARGIN 512

int
corCoStackTrim(void)
{
    CorCo* co = corCoCurrent();
    uintptr_t page = pageSize();
    uintptr_t low;
    uintptr_t keep;

    if (co == NULL) {
        return 0;
    }
    low = ((uintptr_t)co->stackLow + page - 1) & ~(page - 1);
    keep = ((uintptr_t)__builtin_frame_address(0) - TRIM_MARGIN) & ~(page - 1);
    if (keep <= low) {
        return 0;
    }
    return madvise((void*)low, keep - low, MADV_DONTNEED) == 0 ? 0 : -errno;
}

size_t
corCoStackSize(void)
{
    return atomic_load(&corCoStackBytes);
}

void
corCoPoolMaxSet(unsigned count)
{
    atomic_store(&corCoPoolMax, count);
}

void
corCoPoolFit(unsigned live)
{
    if (POOL_MAX_DEFAULT > 0) {
        corCoPoolMaxSet(live > POOL_MAX_DEFAULT ? live : POOL_MAX_DEFAULT);
    }
}

void
corCoThreadExit(void)
{
    CorCo* co;

    while ((co = corCoPool.head) != NULL) {
        corCoPool.head = co->nextFree;
        corCoStackUnmap(co);
    }
    corCoPool.count = 0;
    corCoGuardThreadExit();
}
