/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What each thread keeps of each server: on a loop's thread its one
 * connection (the loop's peer), off the loops a connection of the
 * thread's own, and on both the back-off after a failed connect. A
 * server down makes each command fail at once until its next try is
 * due, rather than each paying a connect timeout (requests answer 503
 * fast, and the server coming back is not met by a stampede); the tries
 * are 100 ms apart at first, doubling up to 5 s.
 */
#include "corRedisInt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread RedisSlot** slots;
static __thread unsigned slotCount;

RedisSlot*
corRedisSlot(const CorRedis* s)
{
    if (s->index >= slotCount) {
        unsigned count = s->index + 8;
        RedisSlot** grown = realloc(slots, count * sizeof(*slots));

        if (grown == NULL) {
            return NULL;
        }
        memset(grown + slotCount, 0, (count - slotCount) * sizeof(*slots));
        slots = grown;
        slotCount = count;
    }
    if (slots[s->index] == NULL) {
        slots[s->index] = calloc(1, sizeof(RedisSlot));
    }
    return slots[s->index];
}

void
corRedisSlotDown(RedisSlot* slot, int rc, const char* why)
{
    if (slot->backoffMs == 0) {
        slot->backoffMs = COR_REDIS_BACKOFF_FIRST_MS;
    }
    slot->retryAtMs = corEvClockMs() + slot->backoffMs;
    slot->backoffMs = slot->backoffMs * 2 < COR_REDIS_BACKOFF_MOST_MS
                          ? slot->backoffMs * 2
                          : COR_REDIS_BACKOFF_MOST_MS;
    slot->downRc = rc;
    snprintf(slot->downWhy, sizeof(slot->downWhy), "%s", why);
}

void
corRedisSlotUp(RedisSlot* slot)
{
    slot->backoffMs = 0;
    slot->retryAtMs = 0;
}

int
corRedisSlotWaiting(const RedisSlot* slot, const CorRedis* s, char* why,
                    size_t whyLen)
{
    uint64_t now;

    if (slot->retryAtMs == 0 || (now = corEvClockMs()) >= slot->retryAtMs) {
        return 0;
    }
    snprintf(why, whyLen, "Redis %s is down (%s); next try in %llu ms", s->name,
             slot->downWhy, (unsigned long long)(slot->retryAtMs - now));
    return slot->downRc != 0 ? slot->downRc : -ECONNREFUSED;
}
