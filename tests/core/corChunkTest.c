/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The blocks a thread keeps (core/corChunk.c, included): sizes round up
 * to their class, a block given back is the next one of its class taken,
 * a size that is no class is malloc's and never kept, and a thread keeps
 * at most its budget of a class. A sanitized build keeps nothing (a use
 * after a release must reach the sanitizer), so there the reuse is not
 * asked for.
 */
#include "corTest.h"

#include "../../core/corChunk.c"

#include <pthread.h>

START_TEST(test_sizes_round_up_to_their_class)
{
    ck_assert_uint_eq(corChunkSize(0), 128);
    ck_assert_uint_eq(corChunkSize(128), 128);
    ck_assert_uint_eq(corChunkSize(129), 256);
    ck_assert_uint_eq(corChunkSize(513), 1024);
    ck_assert_uint_eq(corChunkSize(8192), 8192);
    ck_assert_uint_eq(corChunkSize(8193), 8193);

    size_t size = 700;
    char* block = corChunkTake(&size);

    ck_assert_ptr_nonnull(block);
    ck_assert_uint_eq(size, 1024);
    memset(block, 0xab, size); /* the whole class is the caller's */
    corChunkGive(block, size);
}
END_TEST

START_TEST(test_a_given_block_is_taken_again)
{
    size_t size = 300;
    void* first = corChunkTake(&size);
    void* again;

    corChunkGive(first, size);
    size = 400;
    again = corChunkTake(&size);
    if (CHUNK_CACHE) {
        ck_assert_ptr_eq(again, first);
    }
    corChunkGive(again, size);
    corChunkGive(NULL, 512);
}
END_TEST

START_TEST(test_other_sizes_are_not_kept)
{
    size_t size = 20000;
    void* big = corChunkTake(&size);

    ck_assert_uint_eq(size, 20000);
    corChunkGive(big, size);
    ck_assert_ptr_null(cache.head[CLASS_COUNT - 1]);
    /* A malloc'd block of 1000 bytes is no 1 KiB block: freed. */
    void* odd = malloc(1000);
    unsigned before = cache.count[classOf(1024)];

    corChunkGive(odd, 1000);
    ck_assert_uint_eq(cache.count[classOf(1024)], before);
}
END_TEST

START_TEST(test_a_thread_keeps_its_budget)
{
    enum { MANY = CLASS_KEEP_BYTES / 128 + 50 };
    static void* blocks[MANY];

    for (unsigned i = 0; i < MANY; i++) {
        size_t size = 100;

        blocks[i] = corChunkTake(&size);
        ck_assert_ptr_nonnull(blocks[i]);
    }
    for (unsigned i = 0; i < MANY; i++) {
        corChunkGive(blocks[i], 128);
    }
    ck_assert_uint_le(cache.count[0] * 128, CLASS_KEEP_BYTES);
}
END_TEST

static void*
threadGives(void* arg)
{
    (void)arg;
    for (unsigned i = 0; i < 64; i++) {
        size_t size = 2048;

        corChunkGive(corChunkTake(&size), size);
    }
    return NULL; /* its blocks are freed as it ends (valgrind) */
}

START_TEST(test_a_thread_that_ends_gives_its_blocks_back)
{
    pthread_t t;

    ck_assert_int_eq(pthread_create(&t, NULL, threadGives, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
}
END_TEST

COR_TEST_SUITE(corChunk)
{
    tcase_add_test(tc, test_sizes_round_up_to_their_class);
    tcase_add_test(tc, test_a_given_block_is_taken_again);
    tcase_add_test(tc, test_other_sizes_are_not_kept);
    tcase_add_test(tc, test_a_thread_keeps_its_budget);
    tcase_add_test(tc, test_a_thread_that_ends_gives_its_blocks_back);
}
