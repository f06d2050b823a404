/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mechanics of shared downloads (core/corShared.c, included): two
 * coroutines of one loop needing one key (one fetch, both answered, no
 * cycle), threads waiting on a fetch, the fetcher asking for its own key
 * (EDEADLK), a waiter cancelled (it leaves, the fetch goes on), a failure
 * (everyone gets it, nothing kept), the cache and references. No timing is
 * asserted: only who fetched and what each got.
 */
#include "corTest.h"

#include "../../core/corShared.c"

#include <pthread.h>
#include <stdarg.h>

CorRuntime corRuntime;

/* The core's, as the test needs them: no request (the owner is then the
 * coroutine or the thread), and no log. */
CorRequest*
corRequestCurrent(void)
{
    return NULL;
}

void
corLog(CorLogLevel level, const char* fmt, ...)
{
    (void)level;
    (void)fmt;
}

static atomic_int fetchCount;
static int gate[2];

/* Waits until the gate opens (a byte in the pipe), then answers key. */
static int
gatedFetch(const char* key, void* arg, void** dataP, size_t* lenP)
{
    short revents;

    atomic_fetch_add(&fetchCount, 1);
    if (corRestWaitFd(gate[0], POLLIN, -1, &revents) < 0) {
        return -errno;
    }
    if (arg != NULL) {
        return -EIO;
    }
    *dataP = strdup(key);
    *lenP = strlen(key);
    return 0;
}

static void
setUp(void)
{
    atomic_store(&fetchCount, 0);
    ck_assert_int_eq(pipe(gate), 0);
}

static void
tearDown(void)
{
    close(gate[0]);
    close(gate[1]);
}

static void
gateOpen(void)
{
    ck_assert_int_eq(write(gate[1], "x", 1), 1);
}

static void
fetchStarted(int count)
{
    while (atomic_load(&fetchCount) < count) {
        usleep(1000);
    }
}

/* ---- Two coroutines of one loop ------------------------------------------ */

#if COR_HAVE_COROUTINES
typedef struct {
    int rc;
    CorShared* s;
    bool done;
} CoAsk;

static void
coAsk(void* arg)
{
    CoAsk* a = arg;

    a->rc = corShared("co", gatedFetch, NULL, 0, &a->s);
    a->done = true;
}
#endif

START_TEST(test_two_coroutines_of_one_loop_share_one_fetch)
{
#if COR_HAVE_COROUTINES
    CorEvLoop* loop = corEvLoopCreate();
    CoAsk a = { 0 };
    CoAsk b = { 0 };

    corEvLoopBind(loop);
    ck_assert_int_eq(corCoLoopSpawn(loop, coAsk, &a), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, coAsk, &b), 0);
    ck_assert_int_eq(atomic_load(&fetchCount), 1);
    gateOpen();
    while (!a.done || !b.done) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 100), 0);
    }
    ck_assert_int_eq(a.rc, 0);
    ck_assert_int_eq(b.rc, 0);
    ck_assert_ptr_eq(a.s, b.s);
    ck_assert_int_eq(corSharedLen(a.s), 2);
    ck_assert_int_eq(memcmp(corSharedData(a.s), "co", 2), 0);
    ck_assert_int_eq(atomic_load(&fetchCount), 1);
    corSharedRelease(a.s);
    corSharedRelease(b.s);
    corEvLoopBind(NULL);
    corEvLoopDestroy(loop);
#endif
}
END_TEST

/* ---- Threads ------------------------------------------------------------- */

typedef struct {
    const char* key;
    void* arg;
    int64_t ttlMs;
    CorRestCancel* cancel;
    int rc;
    CorShared* s;
} ThreadAsk;

static void*
threadAsk(void* arg)
{
    ThreadAsk* a = arg;

    if (a->cancel != NULL) {
        corRestCancelBind(a->cancel);
    }
    a->rc = corShared(a->key, gatedFetch, a->arg, a->ttlMs, &a->s);
    corRestCancelBind(NULL);
    return NULL;
}

/* Four threads, one fetch; then the cached copy, no fetch. */
START_TEST(test_threads_share_one_fetch_and_the_cache)
{
    ThreadAsk asks[4];
    pthread_t threads[4];
    CorShared* s;

    for (int i = 0; i < 4; i++) {
        asks[i] = (ThreadAsk){ .key = "t", .ttlMs = 60000 };
        ck_assert_int_eq(pthread_create(&threads[i], NULL, threadAsk, &asks[i]),
                         0);
    }
    fetchStarted(1);
    usleep(20 * 1000);
    gateOpen();
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_int_eq(asks[i].rc, 0);
        ck_assert_ptr_eq(asks[i].s, asks[0].s);
    }
    ck_assert_int_eq(atomic_load(&fetchCount), 1);
    ck_assert_int_eq(corShared("t", gatedFetch, NULL, 60000, &s), 0);
    ck_assert_ptr_eq(s, asks[0].s);
    ck_assert_int_eq(atomic_load(&fetchCount), 1);
    corSharedRelease(s);
    for (int i = 0; i < 4; i++) {
        corSharedRelease(asks[i].s);
    }
}
END_TEST

/* A failure reaches every waiter and is not kept. */
START_TEST(test_a_failure_reaches_everyone_and_is_not_kept)
{
    ThreadAsk asks[2];
    pthread_t threads[2];

    for (int i = 0; i < 2; i++) {
        asks[i] = (ThreadAsk){ .key = "f", .arg = "fail", .ttlMs = 60000 };
        ck_assert_int_eq(pthread_create(&threads[i], NULL, threadAsk, &asks[i]),
                         0);
    }
    fetchStarted(1);
    usleep(20 * 1000);
    gateOpen();
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_int_eq(asks[i].rc, -EIO);
        ck_assert_ptr_null(asks[i].s);
    }
    ck_assert_int_eq(atomic_load(&fetchCount), 1);
    /* The gate is still open: the next ask fetches again. */
    asks[0] = (ThreadAsk){ .key = "f", .ttlMs = 60000 };
    threadAsk(&asks[0]);
    ck_assert_int_eq(asks[0].rc, 0);
    ck_assert_int_eq(atomic_load(&fetchCount), 2);
    corSharedRelease(asks[0].s);
}
END_TEST

/* A waiter whose cancel comes leaves with ECANCELED; the fetch goes on. */
START_TEST(test_a_cancelled_waiter_leaves_the_fetch_alone)
{
    CorRestCancel cancel = { 0 };
    ThreadAsk fetcher = { .key = "c" };
    ThreadAsk waiter = { .key = "c", .cancel = &cancel };
    pthread_t threads[2];

    ck_assert_int_eq(pthread_create(&threads[0], NULL, threadAsk, &fetcher), 0);
    fetchStarted(1);
    ck_assert_int_eq(pthread_create(&threads[1], NULL, threadAsk, &waiter), 0);
    usleep(20 * 1000);
    corRestCancel(&cancel);
    pthread_join(threads[1], NULL);
    ck_assert_int_eq(waiter.rc, -ECANCELED);
    gateOpen();
    pthread_join(threads[0], NULL);
    ck_assert_int_eq(fetcher.rc, 0);
    ck_assert_int_eq(atomic_load(&fetchCount), 1);
    corSharedRelease(fetcher.s);
}
END_TEST

/* ---- A cycle ------------------------------------------------------------- */

static int cycleRc;

static int
cycleFetch(const char* key, void* arg, void** dataP, size_t* lenP)
{
    CorShared* inner = NULL;

    (void)arg;
    cycleRc = corShared(key, cycleFetch, NULL, 0, &inner);
    ck_assert_ptr_null(inner);
    *dataP = strdup("ok");
    *lenP = 2;
    return 0;
}

START_TEST(test_the_fetcher_asking_for_its_own_key_is_a_cycle)
{
    CorShared* s;

    ck_assert_int_eq(corShared("self", cycleFetch, NULL, 0, &s), 0);
    ck_assert_int_eq(cycleRc, -EDEADLK);
    ck_assert_int_eq(corSharedLen(s), 2);
    corSharedRelease(s);
}
END_TEST

COR_TEST_SUITE(corShared)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_two_coroutines_of_one_loop_share_one_fetch);
    tcase_add_test(tc, test_threads_share_one_fetch_and_the_cache);
    tcase_add_test(tc, test_a_failure_reaches_everyone_and_is_not_kept);
    tcase_add_test(tc, test_a_cancelled_waiter_leaves_the_fetch_alone);
    tcase_add_test(tc, test_the_fetcher_asking_for_its_own_key_is_a_cycle);
}
