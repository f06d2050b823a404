/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the cor:// codec share and nothing outside
 * modules/cor reads: one table (its entries in the order they came, and
 * a hash from an entry to its index), the splitting rule, the output
 * buffer's growth, and the why messages.
 */
#ifndef COR_COR_INT_H
#define COR_COR_INT_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "corCorCodec.h"

/* The envelope's own names (docs/cor-protocol.md, "Bodies"), which every
 * REQUEST and RESPONSE carries: a names table keeps their indices, so
 * that an encoder puts them with no lookup (corCorPutHeadKnown). */
typedef enum {
    COR_COR_KNOWN_VERB,
    COR_COR_KNOWN_PATH,
    COR_COR_KNOWN_STATUS,
    COR_COR_KNOWN_HEADERS,
    COR_COR_KNOWN_TEXT,
    COR_COR_KNOWN_BYTES,
    COR_COR_KNOWN_BODY,
    COR_COR_KNOWN_COUNT
} CorCorKnown;

/* What a name is to the envelope (corCorNameKind), worked out once, when
 * its entry is appended: one of the known names (COR_COR_NAME_KNOWN's
 * bits: a CorCorKnown + 1, 0 for none), Content-Type, or a header that
 * does not travel; COR_COR_NAME_SET says the rest is set. */
#define COR_COR_NAME_SET 0x80
#define COR_COR_NAME_CONTENT_TYPE 0x40
#define COR_COR_NAME_DROPPED 0x20
#define COR_COR_NAME_KNOWN 0x1f

/* An entry of a table: a NUL-terminated copy, malloc'ed, and its length;
 * whether it is a token and what it is to the envelope, worked out once
 * when it is appended, since a header's name comes by index in every
 * message after its first. */
typedef struct {
    char* s;
    uint32_t len;
    bool token;
    uint8_t kind; /* corCorNameKind's */
} CorCorEntry;

/* One table: append-only, except that a failed frame truncates it back. */
typedef struct {
    CorBuf entries; /* count CorCorEntry, grown as a buffer */
    unsigned count;
    unsigned max;       /* COR_COR_NAMES_MAX or _NAMESPACES_MAX */
    uint32_t* slots;    /* index + 1 of an entry, 0 when empty */
    unsigned slotCount; /* a power of two, or 0 */
    uint64_t seed;      /* of the hash */
    uint32_t known[COR_COR_KNOWN_COUNT]; /* index + 1 of each known
                                          * name, 0 while it is not in */
} CorCorTable;

struct CorCorTables {
    CorCorTable namespaces;
    CorCorTable names;
};

/* Entry index (< tb->count) of tb. */
static inline const CorCorEntry*
corCorTableAt(const CorCorTable* tb, unsigned index)
{
    return (const CorCorEntry*)(const void*)tb->entries.data + index;
}

/* The index of the entry s (len bytes), or -1 when absent. */
int corCorTableFind(const CorCorTable* tb, const char* s, size_t len);

/* Whether an entry of len bytes would be appended (the table has room,
 * the entry is not too long): both sides ask the same question. */
bool corCorTableTakes(const CorCorTable* tb, size_t len);

/* Append s when corCorTableTakes says so. Returns 0, or -ENOMEM. */
int corCorTableAppend(CorCorTable* tb, const char* s, size_t len);

/* Drop the entries from count on: a frame that failed is undone. */
void corCorTableTruncate(CorCorTable* tb, unsigned count);

/* The length of the namespace of the string s: 0 when it is not split
 * (neither "://" in it nor "urn:" at its start), else up to and with its
 * last '/', '#' or ':'. */
size_t corCorSplit(const char* s, size_t len);

/* Whether the len bytes at s are UTF-8 (RFC 3629: shortest forms, no
 * surrogates, nothing past U+10FFFF). */
bool corCorUtf8(const uint8_t* s, size_t len);

/* Whether the len bytes at s are all printable ASCII (0x20..0x7E): UTF-8
 * with no NUL, which a string's checks then need not look for one by
 * one. Most strings are (names, header values, paths). */
bool corCorPrintable(const char* s, size_t len);

/* The 8 bytes at s as a word, in the machine's order. */
static inline uint64_t corCorWordAt(const void* s);

/* The len (at most 8) bytes at s in one word, some of them twice, the bytes
 * left over fill: what a check that looks for a byte in a word (fill
 * passing it) or a hash (with len beside) needs of a tail, without a
 * loop. */
static inline uint64_t corCorTailAt(const void* s, size_t len, uint8_t fill);

/* Whether one of the 8 bytes of w is under 0x20 or is 0x7F (bytes past
 * 0x7F are not). */
static inline bool corCorWordControl(uint64_t w);

/* Write a message into why (when not NULL), as snprintf. */
void corCorWhy(char* why, size_t whyLen, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Refuse input: the message into why, after "tree byte N: " when at >= 0
 * (where in the tree it went wrong). Returns -EPROTO. */
int corCorRefuse(char* why, size_t whyLen, long at, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- The tree encoder's parts, for the message encoder ------------------ */

/* Name modes: a tag's bits 3-4. */
enum {
    COR_COR_MODE_NONE = 0,
    COR_COR_MODE_TERM = 1,
    COR_COR_MODE_NEW = 2,
    COR_COR_MODE_INDEX = 3
};

/* A float's flags when it travels in 4 bytes; the longest varint. */
#define COR_COR_FLOAT_SINGLE 1
#define COR_COR_VARINT_MAX 10

/* Whether the double d comes back exactly from a 4-byte float. The range
 * check comes first: converting a double out of float's range is
 * undefined. */
static inline bool
corCorFitsFloat(double d)
{
    return fabs(d) <= FLT_MAX && (double)(float)d == d;
}

/* Node types: a tag's bits 0-2. */
enum {
    COR_COR_NODE_STRING = 1,
    COR_COR_NODE_INT = 2,
    COR_COR_NODE_FLOAT = 3,
    COR_COR_NODE_BOOL = 4,
    COR_COR_NODE_NULL = 5,
    COR_COR_NODE_OBJECT = 6,
    COR_COR_NODE_ARRAY = 7
};

/* Ints 0..6 travel in the tag's flags; 7 says a zigzag varint follows. */
#define COR_COR_INT_INLINE_MAX 6
#define COR_COR_INT_VARINT 7

/* One tree being encoded: where it started and the tables' counts then,
 * which a failure goes back to. The caller's, on its stack. */
typedef struct {
    CorCorTables* t;
    CorBuf* out;
    bool nameToken; /* the last name put: a token, known from
                       its entry (false: not known) */
    size_t nodes;
    char* why;
    size_t whyLen;
    size_t start;
    unsigned namespaces;
    unsigned names;
} CorCorEncoder;

/* Begin a tree at the end of out, with the tables t (NULL: none). */
void corCorEncodeBegin(CorCorEncoder* e, CorCorTables* t, CorBuf* out,
                       char* why, size_t whyLen);

/* End it: rc is how the writing went. Returns the tree's bytes, or an
 * error (rc, or -E2BIG past COR_COR_FRAME_MAX), out and t then back as
 * they were at corCorEncodeBegin. */
int corCorEncodeEnd(CorCorEncoder* e, int rc);

/* A node's tag and, with name not NULL (an object's child), its name; it
 * counts against the tree's limits at depth. Its value follows. */
int corCorPutHead(CorCorEncoder* e, unsigned type, unsigned flags,
                  const char* name, size_t nameLen, unsigned depth);
/* The same with one of the known names: by the index its table keeps. */
int corCorPutHeadKnown(CorCorEncoder* e, unsigned type, unsigned flags,
                       CorCorKnown name, unsigned depth);

/* Values: a string (split by the tables' rule), an int's varint (nothing
 * for what corCorIntFlags puts in the tag), a whole json_t node. */
int corCorPutString(CorCorEncoder* e, const char* s, size_t len);
int corCorPutInt(CorCorEncoder* e, int64_t v);
int corCorPutNode(CorCorEncoder* e, const json_t* node, const char* name,
                  size_t nameLen, unsigned depth);

/* An object's or an array's children go between these: *startP is for
 * corCorPutClose, which writes their byte length before them. */
int corCorPutOpen(CorCorEncoder* e, size_t* startP);
int corCorPutClose(CorCorEncoder* e, size_t start);

static inline unsigned
corCorIntFlags(int64_t v)
{
    return v >= 0 && v <= COR_COR_INT_INLINE_MAX ? (unsigned)v
                                                 : COR_COR_INT_VARINT;
}

/* ---- The tree decoder's parts, for the message decoder ------------------ */

/* A string as read: into the input, a table or the decoder's scratch
 * buffer (until the next string), and NUL-terminated wherever it is; a
 * name read by index says whether its entry is a token. */
typedef struct {
    const char* s;
    size_t len;
    bool token;   /* a token, known (false: not known) */
    uint8_t kind; /* corCorNameKind's, 0: not worked out */
} CorCorStr;

/* One tree being decoded, and the tables' counts before it, which a
 * failure goes back to. The caller's, on its stack. */
typedef struct {
    CorCorTables* t;
    const uint8_t* buf;
    size_t pos;
    size_t nodes;
    CorBuf scratch; /* a string joined to its namespace */
    char* why;
    size_t whyLen;
    unsigned namespaces;
    unsigned names;
} CorCorDecoder;

void corCorDecodeBegin(CorCorDecoder* d, CorCorTables* t, const uint8_t* buf,
                       char* why, size_t whyLen);

/* End a tree of len bytes: rc is how the reading went. Returns 0, or rc
 * (or -EPROTO for bytes after the tree), the tables then back as they
 * were at corCorDecodeBegin. */
int corCorDecodeEnd(CorCorDecoder* d, size_t len, int rc);

/* A node's tag, checked, counted against the limits at depth, and with
 * named (an object's child) its name. Its value follows. */
int corCorGetHead(CorCorDecoder* d, size_t end, unsigned depth, bool named,
                  unsigned* tagP, CorCorStr* name);

/* Values: a string, an int (of its tag's flags), a container's byte
 * length (*childEndP: where its children end), any node as a json_t. */
int corCorGetString(CorCorDecoder* d, size_t end, CorCorStr* out);
int corCorGetInt(CorCorDecoder* d, size_t end, unsigned flags, int64_t* vp);
int corCorGetLength(CorCorDecoder* d, size_t end, size_t* childEndP);
int corCorGetValue(CorCorDecoder* d, size_t end, unsigned tag, unsigned depth,
                   json_t** vp);

/* ---- What messages share, both ways and both paths ---------------------- */

/* RFC 9110 tchar: a method, a header name. */
bool corCorToken(const char* s, size_t len);

/* A header value HTTP can carry: no control character but a tab. */
bool corCorFieldValue(const char* s, size_t len);

/* Whether name is what, whatever the case. */
static inline bool corCorNamed(const char* name, size_t len, const char* what);

/* Date and Content-Length, which do not travel. */
bool corCorDropped(const char* name, size_t len);
/* What the name s is to the envelope: COR_COR_NAME_SET with its bits. */
uint8_t corCorNameKind(const char* s, size_t len);
/* The known names, in CorCorKnown's order. */
extern const struct CorCorKnownName {
    const char* s;
    size_t len;
} corCorKnownNames[COR_COR_KNOWN_COUNT];
/* Whether status may be a RESPONSE's: a final HTTP status, 200..599 (a
 * 1xx is no answer, 101 an upgrade cor:// has not). */
bool corCorStatusFinal(long long status);

/* The content type of m as a header (the field, else the first
 * Content-Type among its headers); false when there is none. */
bool corCorContentType(const CorCorMessage* m, CorHeader* ct);

/* The body's tree when it travels as one (JSON that prints back the same
 * bytes), which the caller owns; else NULL. */
json_t* corCorBodyTree(const void* body, size_t len);

/* Write the base64 of the len bytes at p into out, which has room for
 * (len + 2) / 3 * 4 characters. */
void corCorBase64(const uint8_t* p, size_t len, char* out);

/* The bytes the base64 text s of len characters decodes to, or -1 when
 * it is not canonical base64 (RFC 4648 section 4, padded). */
ssize_t corCorUnbase64Len(const char* s, size_t len);

/* Decode s (checked by corCorUnbase64Len) into out. Returns 0, or -1 for
 * a character out of the alphabet, or pad bits not 0. */
int corCorUnbase64(const char* s, size_t len, uint8_t* out);

/* Print a body's tree as the receiver hands it on (jansson's compact
 * form) into out of size bytes, as json_dumpb: its length. */
size_t corCorBodyPrint(const json_t* tree, char* out, size_t size);

/* ---- Inline definitions ------------------------------------------------- */

static inline uint64_t
corCorWordAt(const void* s)
{
    uint64_t w;

    memcpy(&w, s, 8);
    return w;
}

static inline uint64_t
corCorTailAt(const void* s, size_t len, uint8_t fill)
{
    const uint8_t* p = s;
    uint32_t lo;
    uint32_t hi;

    if (len >= 4) {
        /* Two halves that overlap when len < 8. */
        memcpy(&lo, p, 4);
        memcpy(&hi, p + len - 4, 4);
        return lo | (uint64_t)hi << 32;
    }
    if (len == 0) {
        return fill * 0x0101010101010101u;
    }
    /* The first, middle and last byte are every byte of 1 to 3. */
    return (fill * 0x0101010101010101u & ~(uint64_t)0xFFFFFF) | p[0]
           | (uint64_t)p[len / 2] << 8 | (uint64_t)p[len - 1] << 16;
}

/* A byte under 0x20 borrows in w - 0x20.. where its own top bit was 0;
 * 0x7F is a zero byte of w ^ 0x7F... Exact as a yes or no (a borrow
 * starts only at such a byte), not as to which byte. */
static inline bool
corCorWordControl(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101u;
    const uint64_t tops = 0x8080808080808080u;
    uint64_t del = w ^ 0x7F * ones;

    return ((((w - 0x20 * ones) & ~w) | ((del - ones) & ~del)) & tops) != 0;
}

/* Inline, as corHeaderIs (whose compare it is): the length of a literal
 * what is known where it is called. */
static inline bool
corCorNamed(const char* name, size_t len, const char* what)
{
    const CorHeader h = { .name = name, .nameLen = len };

    return corHeaderIs(&h, what);
}

#endif /* COR_COR_INT_H */
