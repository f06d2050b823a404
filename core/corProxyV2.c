/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PROXY protocol's v2 header, binary: a 12-byte signature, a version
 * and command, a family and transport, a length, the address block, then
 * TLVs (skipped). Apart from the reading and from v1 because it is what
 * a stranger's bytes reach first on such a listener: fuzzed alone
 * (fuzz/corProxyFuzz.c).
 */
#include "corProxyHeader.h"

#include <netinet/in.h>
#include <string.h>

static const uint8_t signature[12] = {
    0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
};

enum { CMD_LOCAL = 0, CMD_PROXY = 1 };
enum { FAM_UNSPEC = 0, FAM_INET = 1, FAM_INET6 = 2, FAM_UNIX = 3 };

/* The address block's size for each family. */
static const size_t blockSize[] = { 0, 12, 36, 216 };

bool
corProxyPrefix(const uint8_t* buf, size_t len)
{
    return memcmp(buf, "PROXY ", len < 6 ? len : 6) == 0
           || memcmp(buf, signature, len < 12 ? len : 12) == 0;
}

bool
corProxyIsV1(const uint8_t* buf)
{
    return buf[0] == 'P';
}

long
corProxyV2Length(const uint8_t* fixed)
{
    if (memcmp(fixed, signature, sizeof(signature)) != 0 || fixed[12] >> 4 != 2
        || (fixed[12] & 0x0f) > CMD_PROXY || fixed[13] >> 4 > FAM_UNIX
        || (fixed[13] & 0x0f) > 2) {
        return -1;
    }
    return COR_PROXY_V2_FIXED + ((long)fixed[14] << 8 | fixed[15]);
}

int
corProxyV2Parse(const uint8_t* buf, size_t len, struct sockaddr_storage* src)
{
    long total = len >= COR_PROXY_V2_FIXED ? corProxyV2Length(buf) : -1;
    unsigned family;
    size_t block;

    memset(src, 0, sizeof(*src));
    src->ss_family = AF_UNSPEC;
    if (total < 0) {
        return -1;
    }
    family = buf[13] >> 4;
    block = blockSize[family];
    /* The block must fit the header, LOCAL's too: a length that says
     * less than its own family is a lie about what follows. */
    if ((size_t)total - COR_PROXY_V2_FIXED < block
        || len < COR_PROXY_V2_FIXED + block) {
        return -1;
    }
    if ((buf[12] & 0x0f) == CMD_LOCAL) {
        return 0;
    }
    if (family == FAM_INET) {
        struct sockaddr_in* in = (struct sockaddr_in*)src;

        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, buf + 16, 4);
        memcpy(&in->sin_port, buf + 24, 2);
    } else if (family == FAM_INET6) {
        struct sockaddr_in6* in6 = (struct sockaddr_in6*)src;

        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, buf + 16, 16);
        memcpy(&in6->sin6_port, buf + 48, 2);
    }
    return 0;
}
