/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the cor:// server and client share around their connections' bytes,
 * and what the client's two paths (the loop's, the thread's) share about a
 * streamed body's bytes.
 */
#include "corCorClientInt.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

int
corCorInputReserve(CorBuf* in, uint32_t maxFrame, size_t room)
{
    size_t need;

    corBufCompact(in);
    need = in->len + room;
    if (in->len >= COR_COR_HEAD_LEN) {
        uint32_t length;
        size_t frame;

        memcpy(&length, in->data + 12, sizeof(length));
        frame = COR_COR_HEAD_LEN + (size_t)le32toh(length);
        /* Toward the frame's size by doubling: a peer that announces a
         * large frame gets room as it sends, not at its word. */
        if (length <= maxFrame && frame > need) {
            need = in->cap * 2 > need ? in->cap * 2 : need;
            need = need < frame ? need : frame;
        }
    }
    if (in->data == NULL) {
        /* A connection that went idle gave its buffer back: the block
         * its last turn gave is this one's (corCorInputIdle). */
        in->cap = need;
        in->data = corChunkTake(&in->cap);
        in->len = in->off = 0;
        return in->data != NULL ? 0 : -ENOMEM;
    }
    return corBufGrowTo(in, need);
}

void
corCorInputIdle(CorBuf* in)
{
    corChunkGive(in->data, in->cap);
    *in = (CorBuf){ 0 };
}

uint64_t
corCorReadDeadline(int timeoutMs)
{
    return timeoutMs >= 0 ? corEvClockMs() + (uint64_t)timeoutMs : 0;
}

size_t
corCorCallGive(CorCorCallState* st, void* buf, size_t len)
{
    size_t n = corBufPending(&st->data) < len ? corBufPending(&st->data) : len;

    memcpy(buf, corBufHead(&st->data), n);
    corBufConsume(&st->data, n);
    return n;
}

int
corCorCallPut(CorCorCallState* st, const CorCorHead* h, const uint8_t* frame)
{
    /* What was read is dropped first: the body comes through it. */
    corBufCompact(&st->data);
    if (corBufReserve(&st->data, h->length) != 0) {
        return -ENOMEM;
    }
    memcpy(st->data.data + st->data.len, frame + COR_COR_HEAD_LEN, h->length);
    st->data.len += h->length;
    return 0;
}
