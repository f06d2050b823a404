/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Networks and addresses (core/corNet.c: the access lists' and
 * real_ip's):
 * v4 and v6 prefixes of every length, the bits just inside and outside
 * them, all, IPv4-mapped addresses and networks taken as IPv4, and what
 * is refused.
 */
#include "corTest.h"

#include "cor.h"

#include <stdio.h>

static bool
has(const char* net, const char* addr)
{
    CorNet n;
    CorNetAddr a;

    ck_assert_msg(corNetParse(net, &n) == 0, "%s", net);
    ck_assert_msg(corNetAddrParse(addr, &a), "%s", addr);
    return corNetHas(&n, &a);
}

START_TEST(test_v4_prefixes)
{
    ck_assert(has("10.0.0.0/8", "10.255.3.4"));
    ck_assert(!has("10.0.0.0/8", "11.0.0.0"));
    ck_assert(!has("10.0.0.0/8", "9.255.255.255"));
    ck_assert(has("192.168.4.0/22", "192.168.7.255"));
    ck_assert(!has("192.168.4.0/22", "192.168.8.0"));
    ck_assert(!has("192.168.4.0/22", "192.168.3.255"));
    ck_assert(has("127.0.0.1", "127.0.0.1"));
    ck_assert(!has("127.0.0.1", "127.0.0.2"));
    ck_assert(has("0.0.0.0/0", "203.0.113.9"));
    ck_assert(has("1.2.3.4/31", "1.2.3.5"));
    ck_assert(!has("1.2.3.4/31", "1.2.3.6"));
}
END_TEST

START_TEST(test_v6_prefixes_and_families_apart)
{
    ck_assert(has("::1", "::1"));
    ck_assert(!has("::1", "::2"));
    ck_assert(has("2001:db8::/32", "2001:db8:ffff::1"));
    ck_assert(!has("2001:db8::/32", "2001:db9::1"));
    ck_assert(has("fe80::/10", "febf::1"));
    ck_assert(!has("fe80::/10", "fec0::1"));
    ck_assert(has("::/0", "2001:db8::7"));
    /* Each family holds its own only. */
    ck_assert(!has("::/0", "10.0.0.1"));
    ck_assert(!has("0.0.0.0/0", "::1"));
    /* Every length, at the bit just inside and just past it. */
    for (unsigned bits = 1; bits < 128; bits++) {
        char net[64];
        CorNet n;
        CorNetAddr a;

        snprintf(net, sizeof(net), "2001:db8::/%u", bits);
        if (corNetParse(net, &n) != 0) {
            continue; /* 2001:db8:: has bits past short ones */
        }
        ck_assert(corNetAddrParse("2001:db8::", &a));
        ck_assert(corNetHas(&n, &a));
        a.bytes[(bits - 1) / 8] ^= (unsigned char)(0x80u >> ((bits - 1) % 8));
        ck_assert_msg(!corNetHas(&n, &a), "/%u", bits);
        ck_assert(corNetAddrParse("2001:db8::", &a));
        a.bytes[bits / 8] ^= (unsigned char)(0x80u >> (bits % 8));
        ck_assert_msg(corNetHas(&n, &a), "/%u", bits);
    }
}
END_TEST

START_TEST(test_mapped_is_v4_and_all_is_everything)
{
    ck_assert(has("127.0.0.0/8", "::ffff:127.0.0.1"));
    ck_assert(!has("::1", "::ffff:127.0.0.1"));
    ck_assert(has("::ffff:10.0.0.0/104", "10.9.8.7"));
    ck_assert(!has("::ffff:10.0.0.0/104", "11.0.0.1"));
    ck_assert(has("all", "10.0.0.1"));
    ck_assert(has("all", "2001:db8::1"));
    ck_assert(has("all", "::ffff:1.2.3.4"));
}
END_TEST

START_TEST(test_what_is_refused)
{
    static const char* const bad[] = {
        "",          "10.0.0.1/8",  "10.0.0.0/33",        "::1/129",
        "10.0.0.0/", "10.0.0.0/x",  "10.0.0.0/8x",        "10.0.0",
        "all/8",     "/8",          "::ffff:10.0.0.0/95", "2001:db8::1/32",
        "localhost", "10.0.0.0/-1", "1.2.3.4 ",
    };
    CorNet n;
    CorNetAddr a;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(corNetParse(bad[i], &n) != 0, "%s", bad[i]);
    }
    ck_assert(!corNetAddrParse(NULL, &a));
    ck_assert(!corNetAddrParse("unix:/run/x", &a));
    ck_assert(!corNetAddrParse("10.0.0.1:80", &a));
}
END_TEST

COR_TEST_SUITE(corNet)
{
    tcase_add_test(tc, test_v4_prefixes);
    tcase_add_test(tc, test_v6_prefixes_and_families_apart);
    tcase_add_test(tc, test_mapped_is_v4_and_all_is_everything);
    tcase_add_test(tc, test_what_is_refused);
}
