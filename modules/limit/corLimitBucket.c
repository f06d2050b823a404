/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Token buckets as GCRA does them: a bucket of `burst` tokens refilled
 * one each interval is one 64-bit time, so a key costs a word and a take
 * is a compare and an add. A request at now conforms when the bucket's
 * time, moved one interval on, is at most burst intervals ahead of now.
 */
#include "corLimitInt.h"

#include <stdlib.h>
#include <string.h>

#define NS_PER_S UINT64_C(1000000000)

int
corLimitRateParse(const char* text, LimitRate* rate)
{
    char* end;
    unsigned long n;
    uint64_t per;

    if (text[0] < '1' || text[0] > '9') {
        return -1;
    }
    n = strtoul(text, &end, 10);
    if (n == 0 || n > 1000000) {
        return -1;
    }
    if (strcmp(end, "/s") == 0) {
        per = NS_PER_S;
    } else if (strcmp(end, "/m") == 0) {
        per = 60 * NS_PER_S;
    } else {
        return -1;
    }
    rate->intervalNs = per / n;
    return 0;
}

bool
corLimitTake(uint64_t* tat, uint64_t nowNs, const LimitRate* rate,
             uint64_t* waitNs)
{
    uint64_t start = *tat > nowNs ? *tat : nowNs;
    uint64_t next = start + rate->intervalNs;
    uint64_t room = (uint64_t)rate->burst * rate->intervalNs;

    if (next - nowNs <= room) {
        *tat = next;
        return true;
    }
    *waitNs = next - nowNs - room;
    return false;
}

bool
corLimitFull(uint64_t tat, uint64_t nowNs)
{
    return tat <= nowNs;
}

unsigned
corLimitRetrySeconds(uint64_t waitNs)
{
    uint64_t s = (waitNs + NS_PER_S - 1) / NS_PER_S;

    return s > 0 ? (unsigned)s : 1;
}
