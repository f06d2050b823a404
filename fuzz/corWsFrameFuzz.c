/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the WebSocket frame codec. Each input is read as a
 * frame head, a close payload and UTF-8. Beyond the sanitizers, it aborts
 * when a property breaks:
 *
 *   - a head that reads writes back to the very same bytes (lengths are
 *     in their shortest form, so there is one way to write each head);
 *   - every prefix of a head that reads asks for more (0);
 *   - masking twice gives the input back.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined
 *        -Imodules/websocket modules/websocket/corWsFrame.c
 *        fuzz/corWsFrameFuzz.c
 */
#include "corWsFrame.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CorWsFrameHead h;
    uint8_t out[COR_WS_HEAD_MAX];
    uint8_t copy[256];
    unsigned code;
    int rc = corWsFrameHeadRead(data, size, &h);

    if (rc > 0) {
        size_t n = corWsFrameHeadWrite(out, h.fin, h.opcode, h.payloadLen,
                                       h.masked ? h.mask : NULL);

        if (n != (size_t)rc || memcmp(out, data, n) != 0) {
            abort();
        }
        for (size_t k = 0; k < n; k++) {
            if (corWsFrameHeadRead(data, k, &h) != 0) {
                abort();
            }
        }
    }
    (void)corWsCloseRead(data, size, &code);
    (void)corWsUtf8Valid(data, size);
    if (size >= 4) {
        size_t len = size - 4 < sizeof(copy) ? size - 4 : sizeof(copy);

        memcpy(copy, data + 4, len);
        corWsMask(copy, len, data, 3);
        corWsMask(copy, len, data, 3);
        if (memcmp(copy, data + 4, len) != 0) {
            abort();
        }
    }
    return 0;
}
