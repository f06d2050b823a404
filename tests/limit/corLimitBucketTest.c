/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The limit module's arithmetic and table (modules/limit/corLimitBucket.c,
 * corLimitKey.c and corLimitTable.c, included): rates read, a burst then
 * the rate, the wait told, a full bucket, the wait in whole seconds, keys
 * apart, the table's bound (a full bucket let go first), SipHash-128 as
 * its reference computes it, and a key's cost whatever its length.
 */
#include "corTest.h"

#include "corLimitBucket.c"
#include "corLimitKey.c"
#include "corLimitTable.c"

#include <malloc.h>
#include <stdio.h>

#define MS UINT64_C(1000000)
#define S UINT64_C(1000000000)

START_TEST(test_rates)
{
    LimitRate r;

    ck_assert_int_eq(corLimitRateParse("10/s", &r), 0);
    ck_assert_uint_eq(r.intervalNs, 100 * MS);
    ck_assert_int_eq(corLimitRateParse("600/m", &r), 0);
    ck_assert_uint_eq(r.intervalNs, 100 * MS);
    ck_assert_int_eq(corLimitRateParse("1/m", &r), 0);
    ck_assert_uint_eq(r.intervalNs, 60 * S);
    ck_assert_int_eq(corLimitRateParse("1000000/s", &r), 0);
    ck_assert_uint_eq(r.intervalNs, 1000);
    ck_assert_int_eq(corLimitRateParse("0/s", &r), -1);
    ck_assert_int_eq(corLimitRateParse("10", &r), -1);
    ck_assert_int_eq(corLimitRateParse("10/h", &r), -1);
    ck_assert_int_eq(corLimitRateParse("-1/s", &r), -1);
    ck_assert_int_eq(corLimitRateParse("1000001/s", &r), -1);
    ck_assert_int_eq(corLimitRateParse("10/ss", &r), -1);
}
END_TEST

/* 10/s, burst 20: 20 at once, then one each 100 ms, the wait told. */
START_TEST(test_a_burst_then_the_rate)
{
    LimitRate rate = { .intervalNs = 100 * MS, .burst = 20 };
    uint64_t tat = 0;
    uint64_t now = 1000 * S;
    uint64_t wait = 0;

    ck_assert(corLimitFull(tat, now));
    for (int i = 0; i < 20; i++) {
        ck_assert_msg(corLimitTake(&tat, now, &rate, &wait), "%d", i);
    }
    ck_assert(!corLimitFull(tat, now));
    ck_assert(!corLimitTake(&tat, now, &rate, &wait));
    ck_assert_uint_eq(wait, 100 * MS);
    ck_assert_uint_eq(corLimitRetrySeconds(wait), 1);
    ck_assert(!corLimitTake(&tat, now + 99 * MS, &rate, &wait));
    ck_assert_uint_eq(wait, 1 * MS);
    ck_assert(corLimitTake(&tat, now + 100 * MS, &rate, &wait));
    ck_assert(!corLimitTake(&tat, now + 100 * MS, &rate, &wait));
    /* Two seconds later the bucket is full again: 20 more. */
    now += 100 * MS + 2 * S;
    ck_assert(corLimitFull(tat, now));
    for (int i = 0; i < 20; i++) {
        ck_assert(corLimitTake(&tat, now, &rate, &wait));
    }
    ck_assert(!corLimitTake(&tat, now, &rate, &wait));
}
END_TEST

START_TEST(test_the_wait_in_seconds)
{
    LimitRate rate = { .intervalNs = 60 * S, .burst = 1 }; /* 1/m */
    uint64_t tat = 0;
    uint64_t wait;

    ck_assert(corLimitTake(&tat, 5 * S, &rate, &wait));
    ck_assert(!corLimitTake(&tat, 5 * S, &rate, &wait));
    ck_assert_uint_eq(corLimitRetrySeconds(wait), 60);
    ck_assert(!corLimitTake(&tat, 64 * S + 1, &rate, &wait));
    ck_assert_uint_eq(corLimitRetrySeconds(wait), 1);
    ck_assert_uint_eq(corLimitRetrySeconds(0), 1);
    ck_assert_uint_eq(corLimitRetrySeconds(S + 1), 2);
}
END_TEST

START_TEST(test_keys_apart_and_the_bound)
{
    LimitRate rate = { .intervalNs = S, .burst = 2 };
    LimitTable* t = corLimitTableCreate(100);
    uint64_t wait;
    char key[32];

    ck_assert_ptr_nonnull(t);
    ck_assert(corLimitTableTake(t, "a", 1, S, &rate, &wait));
    ck_assert(corLimitTableTake(t, "a", 1, S, &rate, &wait));
    ck_assert(!corLimitTableTake(t, "a", 1, S, &rate, &wait));
    ck_assert(corLimitTableTake(t, "b", 1, S, &rate, &wait));
    ck_assert(corLimitTableTake(t, "ab", 2, S, &rate, &wait));
    ck_assert_uint_eq(corLimitTableKeys(t), 3);
    /* A thousand keys into a table of 100: never more than 100 held. */
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(key, sizeof(key), "k%d", i);

        ck_assert(corLimitTableTake(t, key, (size_t)n, S, &rate, &wait));
        ck_assert_uint_le(corLimitTableKeys(t), 100);
    }
    ck_assert_uint_eq(corLimitTableKeys(t), 100);
    ck_assert_uint_ge(corLimitTableEvictions(t), 900);
    corLimitTableFree(t);
}
END_TEST

/* A table of two keys, an emptied bucket and a full one: the full one
 * goes first, though it was used last. */
START_TEST(test_a_full_bucket_goes_first)
{
    LimitRate rate = { .intervalNs = S, .burst = 1 };
    LimitTable* t = corLimitTableCreate(2);
    uint64_t wait;
    char key[32];
    int n;

    ck_assert_ptr_nonnull(t);
    ck_assert(corLimitTableTake(t, "busy", 4, 10 * S, &rate, &wait));
    ck_assert(corLimitTableTake(t, "idle", 4, 1 * S, &rate, &wait));
    /* At 10 s "idle" is full again (its token came back at 2 s), "busy"
     * is empty; a third key evicts "idle", though it was used last. */
    n = snprintf(key, sizeof(key), "new");
    ck_assert(corLimitTableTake(t, key, (size_t)n, 10 * S, &rate, &wait));
    ck_assert(!corLimitTableTake(t, "busy", 4, 10 * S, &rate, &wait));
    ck_assert_uint_eq(corLimitTableEvictions(t), 1);
    ck_assert_uint_eq(corLimitTableKeys(t), 2);
    corLimitTableFree(t);
}
END_TEST

/* The reference's vectors_sip128 (key 00..0f, message 00..len-1), the
 * same as OpenSSL 3.0's `openssl mac -macopt size:16 SIPHASH` gives. */
START_TEST(test_siphash128_vectors)
{
    static const struct {
        size_t len;
        const char* hex;
    } vectors[] = {
        { 0, "a3817f04ba25a8e66df67214c7550293" },
        { 1, "da87c1d86b99af44347659119b22fc45" },
        { 7, "a1f1ebbed8dbc153c0b84aa61ff08239" },
        { 8, "3b62a9ba6258f5610f83e264f31497b4" },
        { 15, "5493e99933b0a8117e08ec0f97cfc3d9" },
        { 63, "5150d1772f50834a503e069a973fbd7c" },
    };
    uint8_t secret[16];
    uint8_t message[64];

    for (unsigned i = 0; i < sizeof(secret); i++) {
        secret[i] = (uint8_t)i;
    }
    for (unsigned i = 0; i < sizeof(message); i++) {
        message[i] = (uint8_t)i;
    }
    for (size_t v = 0; v < sizeof(vectors) / sizeof(vectors[0]); v++) {
        LimitKeyId id;
        char hex[33];

        corLimitKeyHash(secret, message, vectors[v].len, &id);
        for (unsigned b = 0; b < 16; b++) {
            snprintf(hex + 2 * b, 3, "%02x",
                     (unsigned)(id.word[b / 8] >> (8 * (b % 8))) & 0xff);
        }
        ck_assert_str_eq(hex, vectors[v].hex);
    }
}
END_TEST

/*
 * 100 000 keys of 8 KB each, all different (a client's header:X-Api-Key
 * values), in a table of max_keys 100 000: the heap grows by under
 * 16 MB, about what as many addresses cost. It used to keep each key
 * whole, 800 MB for these (stopped at the first 16 MB here).
 */
START_TEST(test_a_long_key_costs_what_a_short_one_does)
{
    enum { KEYS = 100000, KEY_BYTES = 8192 };
    LimitRate rate = { .intervalNs = S, .burst = 2 };
    LimitTable* t = corLimitTableCreate(KEYS);
    static char key[KEY_BYTES];
    size_t before = mallinfo2().uordblks;
    size_t grown = 0;
    uint64_t wait;

    ck_assert_ptr_nonnull(t);
    memset(key, 'k', sizeof(key));
    for (unsigned i = 0; i < KEYS && grown < 16u << 20; i++) {
        memcpy(key, &i, sizeof(i));
        ck_assert(corLimitTableTake(t, key, sizeof(key), S, &rate, &wait));
        grown = mallinfo2().uordblks - before;
    }
    ck_assert_msg(grown < 16u << 20, "%zu bytes for %u keys", grown,
                  corLimitTableKeys(t));
    /* Each shard holds its part of max_keys: a few went from the
     * fuller ones. */
    ck_assert_uint_eq(corLimitTableKeys(t) + corLimitTableEvictions(t), KEYS);
    ck_assert_uint_gt(corLimitTableKeys(t), KEYS * 95 / 100);
    /* Still told apart: the last key's bucket has one token left. */
    ck_assert(corLimitTableTake(t, key, sizeof(key), S, &rate, &wait));
    ck_assert(!corLimitTableTake(t, key, sizeof(key), S, &rate, &wait));
    corLimitTableFree(t);
}
END_TEST

COR_TEST_SUITE(corLimitBucket)
{
    tcase_add_test(tc, test_rates);
    tcase_add_test(tc, test_a_burst_then_the_rate);
    tcase_add_test(tc, test_the_wait_in_seconds);
    tcase_add_test(tc, test_keys_apart_and_the_bound);
    tcase_add_test(tc, test_a_full_bucket_goes_first);
    tcase_add_test(tc, test_siphash128_vectors);
    tcase_add_test(tc, test_a_long_key_costs_what_a_short_one_does);
}
