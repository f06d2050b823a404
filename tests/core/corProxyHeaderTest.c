/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PROXY protocol's parsers (core/corProxyV1.c, core/corProxyV2.c):
 * v1 lines of both families and UNKNOWN, and what the specification
 * refuses (double spaces, a family's address in the other's line, ports
 * past 65535 or of six digits, a line without its CRLF or with a bare LF);
 * v2's length from its fixed part, its families and LOCAL, and a length
 * shorter than the family's block. What a reader may take before it
 * knows the version: prefixes of either signature only.
 */
#include "corTest.h"

#include "corProxyHeader.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static const uint8_t sig[12] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };

/* The source v1 reads from line, "" for AF_UNSPEC, NULL when refused. */
static const char*
v1(const char* line)
{
    static char text[INET6_ADDRSTRLEN + 8];
    struct sockaddr_storage src;
    const void* addr;
    in_port_t port;

    if (corProxyV1Parse((const uint8_t*)line, strlen(line), &src) != 0) {
        return NULL;
    }
    if (src.ss_family == AF_UNSPEC) {
        return "";
    }
    addr = src.ss_family == AF_INET
               ? (const void*)&((struct sockaddr_in*)&src)->sin_addr
               : (const void*)&((struct sockaddr_in6*)&src)->sin6_addr;
    port = src.ss_family == AF_INET ? ((struct sockaddr_in*)&src)->sin_port
                                    : ((struct sockaddr_in6*)&src)->sin6_port;
    inet_ntop(src.ss_family, addr, text, INET6_ADDRSTRLEN);
    snprintf(text + strlen(text), 8, " %u", (unsigned)ntohs(port));
    return text;
}

START_TEST(test_v1)
{
    ck_assert_str_eq(v1("PROXY TCP4 192.0.2.7 198.51.100.1 4711 443\r\n"),
                     "192.0.2.7 4711");
    ck_assert_str_eq(v1("PROXY TCP6 2001:db8::7 ::1 0 65535\r\n"),
                     "2001:db8::7 0");
    ck_assert_str_eq(v1("PROXY UNKNOWN\r\n"), "");
    ck_assert_str_eq(v1("PROXY UNKNOWN 1 2 3 4\r\n"), "");
    ck_assert_ptr_null(v1("PROXY TCP4 192.0.2.7  198.51.100.1 1 2\r\n"));
    ck_assert_ptr_null(v1("PROXY TCP4 2001:db8::7 ::1 1 2\r\n"));
    ck_assert_ptr_null(v1("PROXY TCP6 192.0.2.7 198.51.100.1 1 2\r\n"));
    ck_assert_ptr_null(v1("PROXY TCP4 192.0.2.7 198.51.100.1 65536 2\r\n"));
    ck_assert_ptr_null(v1("PROXY TCP4 192.0.2.7 198.51.100.1 1 000002\r\n"));
    ck_assert_ptr_null(v1("PROXY TCP4 192.0.2.7 198.51.100.1 1 2 3\r\n"));
    ck_assert_ptr_null(v1("PROXY TCP4 192.0.2.7 198.51.100.1 1\r\n"));
    ck_assert_ptr_null(v1("PROXY UDP4 192.0.2.7 198.51.100.1 1 2\r\n"));
    ck_assert_ptr_null(v1("PROXY TCP4 192.0.2.7 198.51.100.1 1 2\n"));
    ck_assert_ptr_null(v1("PROXY TCP4 192.0.2.7\n198.51.100.1 1 2\r\n"));
    ck_assert_ptr_null(v1("PROXY UNKNOWNX\r\n"));
}
END_TEST

/* A v2 header of command, family byte and a block of n bytes (its length
 * field says len), into h. */
static size_t
v2(uint8_t* h, int command, uint8_t family, size_t n, size_t len)
{
    memcpy(h, sig, sizeof(sig));
    h[12] = (uint8_t)(0x20 | command);
    h[13] = family;
    h[14] = (uint8_t)(len >> 8);
    h[15] = (uint8_t)len;
    memset(h + 16, 0x11, n);
    return 16 + n;
}

START_TEST(test_v2)
{
    uint8_t h[COR_PROXY_V2_KEEP];
    struct sockaddr_storage src;
    struct sockaddr_in* in = (struct sockaddr_in*)&src;

    /* INET: 17.17.17.17 port 0x1111, and 100 bytes of TLVs after. */
    v2(h, 1, 0x11, 12, 112);
    ck_assert_int_eq(corProxyV2Length(h), 128);
    ck_assert_int_eq(corProxyV2Parse(h, 128, &src), 0);
    ck_assert_int_eq(src.ss_family, AF_INET);
    ck_assert_uint_eq(ntohl(in->sin_addr.s_addr), 0x11111111);
    ck_assert_uint_eq(ntohs(in->sin_port), 0x1111);
    v2(h, 1, 0x21, 36, 36);
    ck_assert_int_eq(corProxyV2Parse(h, 52, &src), 0);
    ck_assert_int_eq(src.ss_family, AF_INET6);
    /* The connection's own address stands: LOCAL, UNSPEC, UNIX. */
    v2(h, 0, 0x11, 12, 12);
    ck_assert_int_eq(corProxyV2Parse(h, 28, &src), 0);
    ck_assert_int_eq(src.ss_family, AF_UNSPEC);
    v2(h, 1, 0x00, 0, 0);
    ck_assert_int_eq(corProxyV2Parse(h, 16, &src), 0);
    ck_assert_int_eq(src.ss_family, AF_UNSPEC);
    v2(h, 1, 0x31, 216, 216);
    ck_assert_int_eq(corProxyV2Parse(h, 232, &src), 0);
    ck_assert_int_eq(src.ss_family, AF_UNSPEC);
    /* A block longer than the header says, LOCAL's too. */
    v2(h, 1, 0x21, 36, 35);
    ck_assert_int_eq(corProxyV2Parse(h, 51, &src), -1);
    v2(h, 0, 0x11, 12, 11);
    ck_assert_int_eq(corProxyV2Parse(h, 27, &src), -1);
    /* Version 1 in v2's signature, command 2, family 4, transport 3. */
    v2(h, 1, 0x11, 12, 12);
    h[12] = 0x11;
    ck_assert_int_eq(corProxyV2Length(h), -1);
    h[12] = 0x22;
    ck_assert_int_eq(corProxyV2Length(h), -1);
    h[12] = 0x21;
    h[13] = 0x41;
    ck_assert_int_eq(corProxyV2Length(h), -1);
    h[13] = 0x13;
    ck_assert_int_eq(corProxyV2Length(h), -1);
}
END_TEST

START_TEST(test_prefixes)
{
    ck_assert(corProxyPrefix((const uint8_t*)"P", 1));
    ck_assert(corProxyPrefix((const uint8_t*)"PROXY TCP4", 10));
    ck_assert(!corProxyPrefix((const uint8_t*)"PROXY\t", 6));
    ck_assert(!corProxyPrefix((const uint8_t*)"GET / HTTP/1.1", 14));
    ck_assert(!corProxyPrefix((const uint8_t*)"\x16\x03\x01", 3));
    ck_assert(corProxyPrefix(sig, 12));
    ck_assert(!corProxyPrefix((const uint8_t*)"\r\n\r\n\r", 5));
    ck_assert(corProxyIsV1((const uint8_t*)"PROXY UNKNOWN\r\n"));
    ck_assert(!corProxyIsV1(sig));
}
END_TEST

COR_TEST_SUITE(corProxyHeader)
{
    tcase_add_test(tc, test_v1);
    tcase_add_test(tc, test_v2);
    tcase_add_test(tc, test_prefixes);
}
