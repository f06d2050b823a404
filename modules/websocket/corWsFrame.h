/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The WebSocket frame codec (RFC 6455 section 5): frame heads read and
 * written, payloads unmasked, close payloads and UTF-8 checked. Pure: no
 * I/O, no allocation, no state between calls, so that it is unit tested
 * and fuzzed on its own.
 */
#ifndef COR_WS_FRAME_H
#define COR_WS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    COR_WS_CONTINUATION = 0x0,
    COR_WS_TEXT = 0x1,
    COR_WS_BINARY = 0x2,
    COR_WS_CLOSE = 0x8,
    COR_WS_PING = 0x9,
    COR_WS_PONG = 0xA
} CorWsOpcode;

/* Close status codes (RFC 6455 section 7.4.1). */
typedef enum {
    COR_WS_CLOSE_NORMAL = 1000,
    COR_WS_CLOSE_GOING_AWAY = 1001,
    COR_WS_CLOSE_PROTOCOL = 1002,
    COR_WS_CLOSE_NO_STATUS = 1005, /* never sent: none was given */
    COR_WS_CLOSE_BAD_DATA = 1007,  /* text that is not UTF-8 */
    COR_WS_CLOSE_TOO_BIG = 1009
} CorWsCloseCode;

/* The longest frame head: 2 bytes, 8 of length, 4 of mask. */
#define COR_WS_HEAD_MAX 14
/* A control frame's payload is at most this long. */
#define COR_WS_CONTROL_MAX 125

/* A frame's head, as read. */
typedef struct {
    bool fin;
    unsigned opcode; /* CorWsOpcode */
    bool masked;
    uint8_t mask[4];
    uint64_t payloadLen;
    size_t headLen; /* bytes of the head */
} CorWsFrameHead;

/*
 * Read a frame head from the len bytes at buf. Returns its length (> 0)
 * with *h set, 0 when more bytes are needed, or -COR_WS_CLOSE_PROTOCOL
 * for a head no endpoint may send: reserved bits set (no extension is
 * negotiated), an unknown opcode, a control frame that is fragmented or
 * longer than 125 bytes, a length not in its shortest form or with its
 * top bit set. Whether it is masked is the caller's to check (a server
 * requires it).
 */
int corWsFrameHeadRead(const uint8_t* buf, size_t len, CorWsFrameHead* h);

/*
 * Write the head of a frame with payloadLen bytes into out (at least
 * COR_WS_HEAD_MAX bytes), masked with mask when it is not NULL (a
 * client's). Returns the head's length.
 */
size_t corWsFrameHeadWrite(uint8_t* out, bool fin, unsigned opcode,
                           uint64_t payloadLen, const uint8_t* mask);

/* Unmask (or mask) len bytes of a payload in place; offset is where they
 * start in the payload, for a payload that comes in pieces. */
void corWsMask(uint8_t* data, size_t len, const uint8_t mask[4],
               uint64_t offset);

/*
 * Read a close frame's payload: *code is its status (COR_WS_CLOSE_NO_STATUS
 * when it has none). Returns 0, or -COR_WS_CLOSE_PROTOCOL for a payload of
 * one byte or a status an endpoint may not send (below 1000, 1004-1006,
 * 1015, 1016-2999 unassigned, 5000 and above); its reason must be UTF-8.
 */
int corWsCloseRead(const uint8_t* payload, size_t len, unsigned* code);

/* Whether len bytes at s are well-formed UTF-8 (no overlongs, no
 * surrogates, nothing past U+10FFFF). */
bool corWsUtf8Valid(const uint8_t* s, size_t len);

#endif /* COR_WS_FRAME_H */
