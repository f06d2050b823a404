/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The WebSocket frame codec: see corWsFrame.h. Every check of a frame that
 * RFC 6455 makes a failure of the connection is here, so that the session
 * (corWebsocket.c) only moves bytes and answers.
 */
#include "corWsFrame.h"

#include <string.h>

static bool
opcodeKnown(unsigned opcode)
{
    return opcode <= COR_WS_BINARY
           || (opcode >= COR_WS_CLOSE && opcode <= COR_WS_PONG);
}

int
corWsFrameHeadRead(const uint8_t* buf, size_t len, CorWsFrameHead* h)
{
    size_t need = 2;
    uint64_t payloadLen;

    if (len < 2) {
        return 0;
    }
    h->fin = (buf[0] & 0x80) != 0;
    h->opcode = buf[0] & 0x0F;
    h->masked = (buf[1] & 0x80) != 0;
    payloadLen = buf[1] & 0x7F;
    if ((buf[0] & 0x70) != 0 || !opcodeKnown(h->opcode)) {
        return -COR_WS_CLOSE_PROTOCOL;
    }
    if (h->opcode >= COR_WS_CLOSE
        && (!h->fin || payloadLen > COR_WS_CONTROL_MAX)) {
        return -COR_WS_CLOSE_PROTOCOL;
    }
    need += payloadLen == 126 ? 2 : payloadLen == 127 ? 8 : 0;
    need += h->masked ? 4 : 0;
    if (len < need) {
        return 0;
    }
    if (payloadLen == 126) {
        payloadLen = (uint64_t)buf[2] << 8 | buf[3];
        if (payloadLen < 126) {
            return -COR_WS_CLOSE_PROTOCOL;
        }
    } else if (payloadLen == 127) {
        payloadLen = 0;
        for (int i = 0; i < 8; i++) {
            payloadLen = payloadLen << 8 | buf[2 + i];
        }
        if (payloadLen >> 63 != 0 || payloadLen <= 0xFFFF) {
            return -COR_WS_CLOSE_PROTOCOL;
        }
    }
    h->payloadLen = payloadLen;
    if (h->masked) {
        memcpy(h->mask, buf + need - 4, 4);
    } else {
        memset(h->mask, 0, 4);
    }
    h->headLen = need;
    return (int)need;
}

size_t
corWsFrameHeadWrite(uint8_t* out, bool fin, unsigned opcode,
                    uint64_t payloadLen, const uint8_t* mask)
{
    size_t n = 2;

    out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0F));
    if (payloadLen < 126) {
        out[1] = (uint8_t)payloadLen;
    } else if (payloadLen <= 0xFFFF) {
        out[1] = 126;
        out[2] = (uint8_t)(payloadLen >> 8);
        out[3] = (uint8_t)payloadLen;
        n = 4;
    } else {
        out[1] = 127;
        for (int i = 0; i < 8; i++) {
            out[2 + i] = (uint8_t)(payloadLen >> (56 - 8 * i));
        }
        n = 10;
    }
    if (mask != NULL) {
        out[1] |= 0x80;
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

void
corWsMask(uint8_t* data, size_t len, const uint8_t mask[4], uint64_t offset)
{
    for (size_t i = 0; i < len; i++) {
        data[i] ^= mask[(offset + i) & 3];
    }
}

/* Whether an endpoint may send code in a close frame (RFC 6455 7.4). */
static bool
closeCodeValid(unsigned code)
{
    if (code >= 3000 && code <= 4999) {
        return true; /* libraries' and applications' */
    }
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014);
}

int
corWsCloseRead(const uint8_t* payload, size_t len, unsigned* code)
{
    if (len == 0) {
        *code = COR_WS_CLOSE_NO_STATUS;
        return 0;
    }
    if (len == 1) {
        return -COR_WS_CLOSE_PROTOCOL;
    }
    *code = (unsigned)payload[0] << 8 | payload[1];
    if (!closeCodeValid(*code) || !corWsUtf8Valid(payload + 2, len - 2)) {
        return -COR_WS_CLOSE_PROTOCOL;
    }
    return 0;
}

bool
corWsUtf8Valid(const uint8_t* s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        uint8_t c = s[i];
        size_t more;
        uint32_t cp;
        uint32_t min;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (len - i <= more) {
            return false;
        }
        for (size_t k = 1; k <= more; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return false;
            }
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += more + 1;
    }
    return true;
}
