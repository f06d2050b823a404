/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Networks and addresses, for every list of them a configuration holds
 * (the access module's allow and deny, real_ip's from): parsed once at
 * load, matched per request by comparing the prefix's whole bytes and
 * then its last bits. An IPv4 client of a dual-stack listener arrives as
 * ::ffff:a.b.c.d; it is taken as a.b.c.d, so that one IPv4 rule holds it
 * whichever socket it came through.
 */
#include "cor.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char mapped[12] = { 0, 0, 0, 0, 0,    0,
                                          0, 0, 0, 0, 0xff, 0xff };

/* text (no prefix) into addr, v4-mapped as v4; false when not one. */
static bool
addrRead(const char* text, CorNetAddr* addr, bool* wasMapped)
{
    *wasMapped = false;
    if (inet_pton(AF_INET, text, addr->bytes) == 1) {
        addr->len = 4;
        return true;
    }
    if (inet_pton(AF_INET6, text, addr->bytes) != 1) {
        return false;
    }
    addr->len = 16;
    if (memcmp(addr->bytes, mapped, sizeof(mapped)) == 0) {
        memmove(addr->bytes, addr->bytes + 12, 4);
        addr->len = 4;
        *wasMapped = true;
    }
    return true;
}

bool
corNetAddrParse(const char* text, CorNetAddr* addr)
{
    bool wasMapped;

    return text != NULL && addrRead(text, addr, &wasMapped);
}

int
corNetParse(const char* text, CorNet* net)
{
    char host[64];
    const char* slash = strchr(text, '/');
    size_t hostLen = slash != NULL ? (size_t)(slash - text) : strlen(text);
    bool wasMapped;
    char* end;
    long bits;

    memset(net, 0, sizeof(*net));
    if (strcmp(text, "all") == 0) {
        net->all = true;
        return 0;
    }
    if (hostLen == 0 || hostLen >= sizeof(host)) {
        return -1;
    }
    memcpy(host, text, hostLen);
    host[hostLen] = '\0';
    if (!addrRead(host, &net->addr, &wasMapped)) {
        return -1;
    }
    bits = (long)net->addr.len * 8 + (wasMapped ? 96 : 0);
    if (slash != NULL) {
        if (slash[1] < '0' || slash[1] > '9') {
            return -1;
        }
        bits = strtol(slash + 1, &end, 10);
        if (*end != '\0' || bits > (long)(wasMapped ? 128 : net->addr.len * 8)
            || (wasMapped && bits < 96)) {
            return -1;
        }
    }
    net->bits = (unsigned)bits - (wasMapped ? 96 : 0);
    /* Bits past the prefix say the user meant another network. */
    for (unsigned i = net->bits; i < net->addr.len * 8; i++) {
        if (net->addr.bytes[i / 8] & (0x80u >> (i % 8))) {
            return -1;
        }
    }
    return 0;
}

bool
corNetHas(const CorNet* net, const CorNetAddr* addr)
{
    unsigned whole = net->bits / 8;
    unsigned rest = net->bits % 8;

    if (net->all) {
        return true;
    }
    if (net->addr.len != addr->len
        || memcmp(net->addr.bytes, addr->bytes, whole) != 0) {
        return false;
    }
    return rest == 0
           || ((net->addr.bytes[whole] ^ addr->bytes[whole])
               & (0xffu << (8 - rest)) & 0xffu)
                  == 0;
}
