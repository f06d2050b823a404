/* SPDX-License-Identifier: Apache-2.0 */
/*
 * real_ip's reading of its header (core/corRealIp.c, included): X-Forwarded-For
 * from its right end past trusted addresses, several fields as one list,
 * empty entries and ports, IPv4-mapped addresses, what ends the walk;
 * X-Real-IP; RFC 7239's Forwarded with its for= quoted, bracketed, ported,
 * unknown or obfuscated; nothing taken from a peer not trusted.
 */
#include "corTest.h"

#include "corRealIp.c"

#include <stdlib.h>

CorRuntime corRuntime;

static CorConfig config;
static CorConfigRealIp realIp;
static CorNet nets[2];
static char pool[4096];
static size_t used;

void*
corRequestAlloc(CorRequest* r, size_t size)
{
    (void)r;
    used += size;
    return used <= sizeof(pool) ? pool + used - size : NULL;
}

static void
trust(CorRealIpHeader header, const char* name)
{
    ck_assert_int_eq(corNetParse("10.0.0.0/8", &nets[0]), 0);
    ck_assert_int_eq(corNetParse("2001:db8:ff::/48", &nets[1]), 0);
    realIp = (CorConfigRealIp){
        .from = nets, .fromCount = 2, .header = header, .headerName = name
    };
    config.realIp = &realIp;
    corRuntime.config = &config;
}

/* The client real_ip gives from peer with the fields values (one each,
 * named as trusted). */
static const char*
client(const char* peer, const char* first, const char* second)
{
    static CorRequest r;
    static CorHeader h[3];
    unsigned n = 0;

    h[n++] = (CorHeader){ "Host", 4, "t", 1 };
    if (first != NULL) {
        h[n++] = (CorHeader){ realIp.headerName, strlen(realIp.headerName),
                              first, strlen(first) };
    }
    if (second != NULL) {
        h[n++] = (CorHeader){ realIp.headerName, strlen(realIp.headerName),
                              second, strlen(second) };
    }
    r = (CorRequest){ .remote = peer, .headers = h, .headerCount = n };
    corRealIpApply(&r);
    ck_assert_str_eq(r.peer, peer);
    return r.remote;
}

START_TEST(test_x_forwarded_for)
{
    trust(COR_REAL_IP_X_FORWARDED_FOR, "X-Forwarded-For");
    ck_assert_str_eq(client("10.0.0.1", "192.0.2.1", NULL), "192.0.2.1");
    ck_assert_str_eq(client("10.0.0.1", "6.6.6.6, 192.0.2.1, 10.0.0.2", NULL),
                     "192.0.2.1");
    /* All trusted: the leftmost. */
    ck_assert_str_eq(client("10.0.0.1", "10.0.0.3,10.0.0.2", NULL), "10.0.0.3");
    /* Junk at the left is never reached; at the right it ends the walk
     * with nothing, in the middle with the last address read. */
    ck_assert_str_eq(client("10.0.0.1", "junk, 192.0.2.1", NULL), "192.0.2.1");
    ck_assert_str_eq(client("10.0.0.1", "192.0.2.1, junk", NULL), "10.0.0.1");
    ck_assert_str_eq(client("10.0.0.1", "192.0.2.1, junk, 10.0.0.2", NULL),
                     "10.0.0.2");
    /* Empty entries are skipped; two fields read as one list. */
    ck_assert_str_eq(client("10.0.0.1", " , 192.0.2.1 ,, ", NULL), "192.0.2.1");
    ck_assert_str_eq(client("10.0.0.1", "192.0.2.1", "10.0.0.9"), "192.0.2.1");
    ck_assert_str_eq(client("10.0.0.1", "10.0.0.9", "192.0.2.1"), "192.0.2.1");
    /* Ports, brackets, IPv6, v4-mapped. */
    ck_assert_str_eq(client("10.0.0.1", "192.0.2.1:4711", NULL), "192.0.2.1");
    ck_assert_str_eq(client("10.0.0.1", "[2001:db8::1]:80", NULL),
                     "2001:db8::1");
    ck_assert_str_eq(client("2001:db8:ff::1", "2001:DB8::0001", NULL),
                     "2001:db8::1");
    ck_assert_str_eq(client("::ffff:10.0.0.1", "::ffff:192.0.2.1", NULL),
                     "192.0.2.1");
    ck_assert_str_eq(client("10.0.0.1", "[2001:db8::1", NULL), "10.0.0.1");
    /* Not trusted, no header, no address: unchanged. */
    ck_assert_str_eq(client("192.0.2.9", "192.0.2.1", NULL), "192.0.2.9");
    ck_assert_str_eq(client("10.0.0.1", NULL, NULL), "10.0.0.1");
    ck_assert_str_eq(client("unix", "192.0.2.1", NULL), "unix");
}
END_TEST

START_TEST(test_x_real_ip)
{
    trust(COR_REAL_IP_X_REAL_IP, "X-Real-IP");
    ck_assert_str_eq(client("10.0.0.1", "192.0.2.5", NULL), "192.0.2.5");
    ck_assert_str_eq(client("10.0.0.1", "localhost", NULL), "10.0.0.1");
}
END_TEST

START_TEST(test_forwarded)
{
    trust(COR_REAL_IP_FORWARDED, "Forwarded");
    ck_assert_str_eq(client("10.0.0.1",
                            "for=192.0.2.60;proto=http;"
                            "by=203.0.113.43",
                            NULL),
                     "192.0.2.60");
    ck_assert_str_eq(client("10.0.0.1",
                            "for=192.0.2.60, "
                            "for=\"[2001:db8:cafe::17]:4711\"",
                            NULL),
                     "2001:db8:cafe::17");
    ck_assert_str_eq(client("10.0.0.1",
                            "proto=https; For=\"192.0.2.61:80\""
                            " ;by=x, for=10.1.1.1",
                            NULL),
                     "192.0.2.61");
    /* What is no address: unknown, an obfuscated name, no for=. */
    ck_assert_str_eq(client("10.0.0.1", "for=unknown", NULL), "10.0.0.1");
    ck_assert_str_eq(client("10.0.0.1", "for=\"_gazonk\"", NULL), "10.0.0.1");
    ck_assert_str_eq(client("10.0.0.1", "proto=https", NULL), "10.0.0.1");
    ck_assert_str_eq(client("10.0.0.1", "for=192.0.2.1, by=10.0.0.2", NULL),
                     "10.0.0.1");
}
END_TEST

COR_TEST_SUITE(corRealIpHeader)
{
    tcase_add_test(tc, test_x_forwarded_for);
    tcase_add_test(tc, test_x_real_ip);
    tcase_add_test(tc, test_forwarded);
}
