/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corResolve without a server: numeric addresses and localhost are
 * answered at once, in the order to try them.
 */
#include "corTest.h"
#include "corEv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

/* The text of out's address i. */
static const char*
addrText(const CorAddrs* out, unsigned i, char* buf, size_t cap)
{
    const struct sockaddr_storage* ss = &out->addrs[i];

    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in* sin = (const struct sockaddr_in*)ss;

        ck_assert_int_eq(sin->sin_port, 0);
        return inet_ntop(AF_INET, &sin->sin_addr, buf, (socklen_t)cap);
    }
    ck_assert_int_eq(ss->ss_family, AF_INET6);
    ck_assert_int_eq(((const struct sockaddr_in6*)ss)->sin6_port, 0);
    return inet_ntop(AF_INET6, &((const struct sockaddr_in6*)ss)->sin6_addr,
                     buf, (socklen_t)cap);
}

START_TEST(test_numeric_addresses_are_answered_here)
{
    static const char* const hosts[][2] = {
        { "192.0.2.7", "192.0.2.7" },
        { "2001:db8::1", "2001:db8::1" },
        { "[2001:db8::2]", "2001:db8::2" },
        { "::ffff:10.0.0.1", "::ffff:10.0.0.1" },
    };
    char buf[INET6_ADDRSTRLEN];
    CorAddrs out;

    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        ck_assert_int_eq(corResolve(hosts[i][0], 1000, &out, NULL, 0), 0);
        ck_assert_uint_eq(out.count, 1);
        ck_assert_str_eq(addrText(&out, 0, buf, sizeof(buf)), hosts[i][1]);
    }
}
END_TEST

START_TEST(test_localhost_is_both_loopbacks_ipv6_first)
{
    char buf[INET6_ADDRSTRLEN];
    CorAddrs out;

    ck_assert_int_eq(corResolve("LocalHost", 1000, &out, NULL, 0), 0);
    ck_assert_uint_eq(out.count, 2);
    ck_assert_str_eq(addrText(&out, 0, buf, sizeof(buf)), "::1");
    ck_assert_str_eq(addrText(&out, 1, buf, sizeof(buf)), "127.0.0.1");
}
END_TEST

COR_TEST_SUITE(corResolve)
{
    tcase_add_test(tc, test_numeric_addresses_are_answered_here);
    tcase_add_test(tc, test_localhost_is_both_loopbacks_ipv6_first);
}
