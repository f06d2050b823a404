/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the limit table keeps of a key: its SipHash-2-4 with the 128-bit
 * output (Aumasson and Bernstein, 2012; the reference's vectors_sip128
 * are in corLimitBucketTest), under the table's random key. A key then
 * costs the same whatever its length (a header of 8 KB as an address),
 * and two keys share a bucket only by a chance of 2^-128 a pair that a
 * client cannot aim at without the table's key, as it cannot aim keys at
 * one hash chain. Its own code, not OpenSSL's EVP_MAC "SIPHASH": that
 * one allocates a context for each request; this is a few rounds on the
 * stack, in the guard's path.
 */
#include "corLimitInt.h"

#include <string.h>

static uint64_t
rotl(uint64_t x, unsigned b)
{
    return x << b | x >> (64 - b);
}

/* Little-endian, whatever the host's order, as SipHash defines it. */
static uint64_t
load64(const uint8_t* p)
{
    uint64_t x = 0;

    for (unsigned i = 8; i-- > 0;) {
        x = x << 8 | p[i];
    }
    return x;
}

static void
sipRounds(uint64_t v[4], unsigned rounds)
{
    while (rounds-- > 0) {
        v[0] += v[1];
        v[1] = rotl(v[1], 13) ^ v[0];
        v[0] = rotl(v[0], 32);
        v[2] += v[3];
        v[3] = rotl(v[3], 16) ^ v[2];
        v[0] += v[3];
        v[3] = rotl(v[3], 21) ^ v[0];
        v[2] += v[1];
        v[1] = rotl(v[1], 17) ^ v[2];
        v[2] = rotl(v[2], 32);
    }
}

static void
sipAbsorb(uint64_t v[4], uint64_t m)
{
    v[3] ^= m;
    sipRounds(v, 2);
    v[0] ^= m;
}

void
corLimitKeyHash(const uint8_t secret[16], const void* data, size_t len,
                LimitKeyId* id)
{
    const uint8_t* p = data;
    uint64_t k0 = load64(secret);
    uint64_t k1 = load64(secret + 8);
    uint64_t v[4] = { k0 ^ 0x736f6d6570736575u, k1 ^ 0x646f72616e646f6du,
                      k0 ^ 0x6c7967656e657261u, k1 ^ 0x7465646279746573u };
    uint8_t tail[8] = { 0 };
    size_t whole = len - len % 8;

    v[1] ^= 0xee; /* the 128-bit output's variant */
    for (size_t i = 0; i < whole; i += 8) {
        sipAbsorb(v, load64(p + i));
    }
    memcpy(tail, p + whole, len % 8);
    tail[7] = (uint8_t)len;
    sipAbsorb(v, load64(tail));
    v[2] ^= 0xee;
    sipRounds(v, 4);
    id->word[0] = v[0] ^ v[1] ^ v[2] ^ v[3];
    v[1] ^= 0xdd;
    sipRounds(v, 4);
    id->word[1] = v[0] ^ v[1] ^ v[2] ^ v[3];
}
