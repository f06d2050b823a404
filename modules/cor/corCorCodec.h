/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cor:// codec (docs/cor-protocol.md): the 16-byte frame header, the
 * tree codec with the name and namespace tables that follow the stream,
 * the handshake, and the REQUEST / RESPONSE mapping with its body rule.
 * No I/O: the connection code reads and writes the bytes, and keeps one
 * CorCorTables per direction per connection (what it sent, what it
 * received). Trees are jansson's json_t.
 *
 * Errors: every function returns >= 0 or -errno (NULL for pointers) and,
 * when why is not NULL, writes a sentence into why that says what was
 * wrong and where ("tree byte 17: a varint longer than 10 bytes"). Offsets
 * in a tree are counted from its first byte; in a frame the tree starts at
 * byte COR_COR_HEAD_LEN. A buffer of COR_COR_WHY_MAX bytes holds any of
 * them whole.
 *
 * The tables after a failure:
 *   - an encoder that fails (-EINVAL, -E2BIG, -ENOMEM) leaves its tables
 *     and its output buffer as they were before the call: nothing was
 *     sent, the peer's tables did not move, the connection goes on;
 *   - a decoder that fails puts its tables back as they were before the
 *     frame too, but the peer's encoder appended what the frame held, so
 *     the two sides no longer agree: the connection must be closed (the
 *     spec says so for any frame that does not decode).
 *
 * Stack: the codec (and jansson under it) recurses once per level of a
 * tree, and no tree is deeper than COR_COR_DEPTH_MAX: about 48 KiB at -O2
 * for the deepest, which a coroutine's default stack holds. A body that
 * nests deeper is never parsed as JSON (it travels as text).
 */
#ifndef COR_COR_CODEC_H
#define COR_COR_CODEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cor.h"
#include "corKit.h"

/* The frame header, and the largest tree a receiver takes by default. */
#define COR_COR_HEAD_LEN 16
#define COR_COR_FRAME_MAX ((uint32_t)64 << 20)
/* Trees: nesting (the root is at depth 1) and nodes per tree. */
#define COR_COR_DEPTH_MAX 256
#define COR_COR_NODES_MAX ((size_t)1 << 20)
/* Tables: entries per table, and the longest entry a table keeps; a
 * longer name or namespace is written inline and never appended. */
#define COR_COR_NAMESPACES_MAX 1024
#define COR_COR_NAMES_MAX 8192
#define COR_COR_ENTRY_MAX 256
/* The handshake: the protocol version, and our vocabulary of terms. */
#define COR_COR_VERSION 1
#define COR_COR_TERMS 0
/* Enough for any message in why. */
#define COR_COR_WHY_MAX 192

typedef enum {
    COR_COR_HELLO = 1,
    COR_COR_HELLO_ACK = 2,
    COR_COR_REQUEST = 3,
    COR_COR_RESPONSE = 4,
    COR_COR_PUSH = 5,
    COR_COR_CLOSE = 6,
    COR_COR_ERROR = 7,
    COR_COR_PING = 8,
    COR_COR_PONG = 9,
    COR_COR_DATA = 10
} CorCorType;

/* A frame's flags (byte 5), only where a stream was agreed at the
 * handshake (docs/cor-protocol.md, "Streamed answers"): on a RESPONSE,
 * MORE says its body follows in DATA frames; on a DATA frame, MORE says
 * more DATA follows, none says this one is the last, and CUT says the
 * answer ends here broken (never read as whole). */
#define COR_COR_FLAG_MORE 0x02
#define COR_COR_FLAG_CUT 0x04

/* ---- Output buffers ---------------------------------------------------- */

/* An encoder appends to a CorBuf (corKit.h) at its len: the caller's,
 * zeroed to begin with; it grows as needed, and the caller frees it with
 * corBufFree. */

/* ---- Tables ------------------------------------------------------------ */

/* One direction's pair of tables (namespaces, names). The connection's:
 * it makes two after the handshake and frees them when it closes. No
 * lock: one coder at a time (the sent pair is the write turn's, the
 * received pair the read turn's), in stream order. */
typedef struct CorCorTables CorCorTables;

/* Empty tables, or NULL (no memory). */
CorCorTables* corCorTablesNew(void);
void corCorTablesFree(CorCorTables* t);

/* Entries appended so far, for tests and metrics. */
unsigned corCorTablesNamespaces(const CorCorTables* t);
unsigned corCorTablesNames(const CorCorTables* t);

/* ---- Trees ------------------------------------------------------------- */

/*
 * Append tree encoded with the tables t (NULL: none, as HELLO is; nothing
 * is split or appended) to out. tree is the caller's and is only read.
 * Returns the bytes appended, or -EINVAL (a string or a name that holds a
 * NUL or is not UTF-8, which jansson's unchecked constructors allow),
 * -E2BIG (deeper than COR_COR_DEPTH_MAX, more than COR_COR_NODES_MAX
 * nodes, longer than COR_COR_FRAME_MAX), -ENOMEM; t and out are then as
 * they were. What it writes, corCorTreeDecode reads.
 */
int corCorTreeEncode(CorCorTables* t, const json_t* tree, CorBuf* out,
                     char* why, size_t whyLen);

/*
 * Decode the len bytes at buf, exactly one tree, with the tables t (NULL:
 * none). Never reads past buf + len. Sets *treeP to the tree, which the
 * caller owns (json_decref). Returns 0, -EPROTO for bytes that are not
 * one canonical tree (see docs/cor-protocol.md: truncated, trailing
 * bytes, a child past its container, a bad tag, a name mode 1, a bad
 * varint, a value not in its shortest form, a table index out of range,
 * not UTF-8, a NUL in a string, a duplicate name, deeper than
 * COR_COR_DEPTH_MAX, more than COR_COR_NODES_MAX nodes), or -ENOMEM. On
 * failure *treeP is NULL and the connection must be closed.
 */
int corCorTreeDecode(CorCorTables* t, const uint8_t* buf, size_t len,
                     json_t** treeP, char* why, size_t whyLen);

/* ---- Frames ------------------------------------------------------------ */

typedef struct {
    CorCorType type;
    uint8_t flags;   /* COR_COR_FLAG_*: 0 but on RESPONSE and DATA */
    uint32_t id;     /* correlation id */
    uint32_t length; /* bytes of the tree (of a DATA frame: of its body
                      * bytes, as they are) that follows */
} CorCorHead;

/* Write a frame header into the COR_COR_HEAD_LEN bytes at out. */
void corCorHeadWrite(uint8_t* out, CorCorType type, uint32_t id,
                     uint32_t length);

/* Set the flags (COR_COR_FLAG_*) of the frame written at frame. */
void corCorHeadFlagsSet(uint8_t* frame, unsigned flags);

/*
 * Read a frame header from the len bytes at buf into *h. Returns
 * COR_COR_HEAD_LEN; -EAGAIN when len is shorter (read more); -EPROTO for
 * a bad magic, an unknown type, flags a frame of its type may not have
 * (any on a frame but RESPONSE and DATA; CUT with MORE), reserved bytes
 * not 0; -EMSGSIZE for a length over maxLength. The last two close the
 * connection.
 */
int corCorHeadRead(const uint8_t* buf, size_t len, uint32_t maxLength,
                   CorCorHead* h, char* why, size_t whyLen);

/*
 * Append one frame (header and tree, to be sent with one write) to out:
 * tree (NULL: none, length 0) encoded with the sent tables t, except
 * HELLO and HELLO_ACK, which are always encoded with no tables. Returns
 * the bytes appended, or an error of corCorTreeEncode (t and out are then
 * as they were).
 */
int corCorFrameEncode(CorCorTables* t, CorCorType type, uint32_t id,
                      const json_t* tree, CorBuf* out, char* why,
                      size_t whyLen);

/*
 * Append a DATA frame of id with flags and the len body bytes at data to
 * out. Returns the bytes appended, or -ENOMEM (out as it was). DATA
 * carries bytes as they are: no tree, the tables untouched.
 */
int corCorDataEncode(CorBuf* out, uint32_t id, unsigned flags, const void* data,
                     size_t len);

/*
 * Decode exactly one whole frame, the len bytes at buf, with the received
 * tables t (not for HELLO and HELLO_ACK, as above). Sets *h, and *treeP to
 * the tree the caller owns, or NULL for a frame of length 0 or a DATA
 * frame (whose bytes after the header are its body's, as they are). Returns 0,
 * or an error of corCorHeadRead (-EAGAIN is -EPROTO here: a frame is whole) or
 * of corCorTreeDecode; the connection must then be closed.
 */
int corCorFrameDecode(CorCorTables* t, const uint8_t* buf, size_t len,
                      uint32_t maxLength, CorCorHead* h, json_t** treeP,
                      char* why, size_t whyLen);

/* ---- The handshake ----------------------------------------------------- */

/* Our HELLO and HELLO_ACK tree, { "version": 1, "terms": 0,
 * "namespaces": 0 }, with "stream": true after them when stream (the
 * sender takes, or the server will send, answers in DATA frames), which
 * the caller owns; NULL (no memory). */
json_t* corCorHelloTree(bool stream);
/* Whether a peer's HELLO or HELLO_ACK tree says "stream": true (a peer
 * of before streams says nothing, and is sent whole answers). */
bool corCorHelloStream(const json_t* tree);

/* Check a peer's HELLO or HELLO_ACK tree: an object whose "version" is 1,
 * whose "terms" is ours (0), and whose "namespaces" (fixed ones, which
 * would fill the tables before the first frame) is 0. Returns 0, or
 * -EPROTO (refuse, close). */
int corCorHelloCheck(const json_t* tree, char* why, size_t whyLen);

/* ---- Requests and responses -------------------------------------------- */

/*
 * A REQUEST or a RESPONSE. One the caller fills in is the caller's, and is
 * read during corCorMessageTree (or corCorMessageEncode) only. One that
 * corCorMessageRead or corCorMessageDecode filled in points into what it
 * holds (tree, store) until corCorMessageClear: its
 * strings are NUL-terminated, its body too (not counted in bodyLen).
 */
typedef struct {
    const char* verb;         /* REQUEST: the method, "GET" */
    const char* path;         /* REQUEST: the target, query included */
    int status;               /* RESPONSE: 100..999 */
    const CorHeader* headers; /* in order, each name in its case; no
                                 Content-Type (contentType is it) */
    unsigned headerCount;
    const char* contentType; /* NULL: none */
    const void* body;
    size_t bodyLen;   /* 0: no body */
    json_t* tree;     /* corCorMessageRead's */
    void* store;      /* corCorMessageRead's */
    size_t storeSize; /* its size, when a kept block (corChunk) */
    bool spare;       /* headers has room for one more, in the
                         store (corCorEnvelopeRead's) */
} CorCorMessage;

/*
 * The tree of m as a frame of type (COR_COR_REQUEST or COR_COR_RESPONSE)
 * carries it, which the caller owns; Date and Content-Length are left
 * out, and so is a Content-Type among headers (contentType is sent). The
 * body travels as its tree when it is JSON that comes back byte for byte
 * (docs/cor-protocol.md, "Bodies"), else as "text" when it is UTF-8
 * without a NUL, else as "bytes" (base64). Returns NULL with why set: a
 * verb that is not a token, an empty path, a status out of range, a header
 * name that is not a token, a value with a control character or not
 * UTF-8, no memory.
 */
json_t* corCorMessageTree(CorCorType type, const CorCorMessage* m, char* why,
                          size_t whyLen);

/*
 * Read the tree of a frame of type (COR_COR_REQUEST or COR_COR_RESPONSE)
 * into *m, taking over the caller's reference to tree (released by
 * corCorMessageClear, or here on failure). Returns 0; -EPROTO for a tree
 * that is not such a message (a member missing, unknown or of the wrong
 * type; a header that HTTP could not carry; more than one body; bad
 * base64), which closes the connection; -ENOMEM. On failure *m is clear.
 */
int corCorMessageRead(CorCorType type, json_t* tree, CorCorMessage* m,
                      char* why, size_t whyLen);

/*
 * Append the whole frame (header and tree) of m as a frame of type
 * (COR_COR_REQUEST or COR_COR_RESPONSE) with id, encoded with the sent
 * tables t, to out: the very bytes corCorMessageTree and
 * corCorFrameEncode write, with no tree but a JSON body's. m is the
 * caller's and is only read. Returns the bytes appended, or -EINVAL (what
 * corCorMessageTree refuses, or a string that is not UTF-8), -E2BIG,
 * -ENOMEM; t and out are then as they were.
 */
int corCorMessageEncode(CorCorTables* t, CorCorType type, uint32_t id,
                        const CorCorMessage* m, CorBuf* out, char* why,
                        size_t whyLen);

/*
 * Decode exactly one whole REQUEST or RESPONSE frame, the len bytes at
 * frame, with the received tables t, into *h and *m: what
 * corCorFrameDecode and corCorMessageRead take, with the same tables
 * after, and what they refuse, with their errors. *m holds its strings
 * (NUL-terminated) in m->store and no tree, until corCorMessageClear.
 * Returns 0, or an error of corCorFrameDecode or corCorMessageRead (the
 * connection must then be closed); *m is then clear.
 */
int corCorMessageDecode(CorCorTables* t, const uint8_t* frame, size_t len,
                        uint32_t maxLength, CorCorHead* h, CorCorMessage* m,
                        char* why, size_t whyLen);

/* Release what a message read by corCorMessageRead or corCorMessageDecode
 * holds, and zero it. */
void corCorMessageClear(CorCorMessage* m);

/*
 * The direct decoder alone, the path corCorMessageDecode tries first: it
 * refuses what corCorMessageDecode would hand to the reference path
 * (corCorFrameDecode and corCorMessageRead), and where it takes a frame
 * the two must agree (the tests and the fuzzer hold them to it). Same
 * arguments and results as corCorMessageDecode.
 */
int corCorEnvelopeRead(CorCorTables* t, const uint8_t* frame, size_t len,
                       uint32_t maxLength, CorCorHead* h, CorCorMessage* m,
                       char* why, size_t whyLen);

#endif /* COR_COR_CODEC_H */
