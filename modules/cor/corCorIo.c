/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the cor:// server and client share around their connections' bytes.
 */
#include "corCorClientInt.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int
corCorInputReserve(uint8_t** in, size_t len, size_t* cap, uint32_t maxFrame,
                   size_t room)
{
    size_t need = len + room;
    uint8_t* grown;

    if (len >= COR_COR_HEAD_LEN) {
        uint32_t length;
        size_t frame;

        memcpy(&length, *in + 12, sizeof(length));
        frame = COR_COR_HEAD_LEN + (size_t)le32toh(length);
        /* Toward the frame's size by doubling: a peer that announces a
         * large frame gets room as it sends, not at its word. */
        if (length <= maxFrame && frame > need) {
            need = *cap * 2 > need ? *cap * 2 : need;
            need = need < frame ? need : frame;
        }
    }
    if (need <= *cap) {
        return 0;
    }
    grown = realloc(*in, need);
    if (grown == NULL) {
        return -ENOMEM;
    }
    *in = grown;
    *cap = need;
    return 0;
}
