/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A REQUEST whose frame is longer than any request within the limits
 * (limits.header_bytes, header_count, body_bytes) can take is refused as
 * it comes, never buffered whole. Once the bytes before its body's have
 * come, its head is decoded with the body cut short, it is answered (413,
 * or 431 for a head past its limits too) on its own stream, and the rest
 * of its frame is dropped as it arrives; the connection goes on.
 *
 * The tables follow the stream, so the cut frame must append to them
 * exactly what the whole one would: a string value appends at most its
 * namespace, which comes before its bytes, and the cut keeps everything
 * up to those bytes. So only a body that is a "text" or "bytes" string,
 * the tree's last member, is cut; any other (a JSON "body", whose names
 * the tables need) is read whole, up to max_frame, and refused once
 * decoded.
 */
#include "corCorServerInt.h"
#include "corCorInt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What a tree spends, beyond the strings' own bytes, on each string of a
 * head (a tag, a name, namespace and length varints, two 00s: at most 30
 * bytes), and on its root and fixed members. */
#define HEAD_FIELD_EXTRA 32
#define HEAD_EXTRA 256

/* The bytes of the body's string, where they start in the tree. */
typedef struct {
    size_t kidsAt;  /* the root's first child */
    size_t lenAt;   /* the string's length varint */
    size_t bytesAt; /* its bytes */
    uint64_t len;
    bool base64; /* "bytes", not "text" */
} Cut;

/* The part of a tree that came, read until it runs out. */
typedef struct {
    const uint8_t* p;
    size_t pos;
    size_t len;
    bool out; /* it ran out */
} Cursor;

/* The most a head within the limits takes in a tree: after it, a body
 * must have begun. */
static uint64_t
headMax(void)
{
    const CorLimits* limits = corLimits();

    return limits->headerBytes
           + (uint64_t)HEAD_FIELD_EXTRA * (limits->headerCount + 3)
           + HEAD_EXTRA;
}

/* The most a request within the limits takes: its head, and its body as
 * base64 (the longest form: a JSON tree takes at most 4 bytes for every 3
 * it prints, too). Its route is not known yet: the most any route takes
 * (the core then judges it by its own route's, corLimitsRequest). */
static uint64_t
requestMax(void)
{
    return headMax() + corLimits()->bodyBytesMost / 3 * 4 + 4 + HEAD_EXTRA;
}

static uint64_t
varint(Cursor* k)
{
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 64 && k->pos < k->len; shift += 7) {
        uint8_t b = k->p[k->pos++];

        v |= (uint64_t)(b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
            return v;
        }
    }
    k->out = true;
    return 0;
}

static void
skip(Cursor* k, uint64_t n)
{
    if (n > k->len - k->pos) {
        k->out = true;
        k->pos = k->len;
        return;
    }
    k->pos += (size_t)n;
}

/* A string's local part: its length, its bytes, a 00. */
static void
localSkip(Cursor* k)
{
    uint64_t n = varint(k);

    skip(k, n < UINT64_MAX ? n + 1 : n);
}

/* The name of an object's child (its tag's mode): 1 for "text", 2 for
 * "bytes", 0 for another. */
static int
nameRead(Cursor* k, unsigned mode, const CorCorTable* names)
{
    const char* s = NULL;
    size_t len = 0;

    if (mode == COR_COR_MODE_INDEX) {
        uint64_t i = varint(k);

        if (!k->out && i < names->count) {
            s = corCorTableAt(names, (unsigned)i)->s;
            len = corCorTableAt(names, (unsigned)i)->len;
        }
    } else if (varint(k) == 0 && !k->out) { /* no namespace */
        len = (size_t)varint(k);
        s = (const char*)k->p + k->pos;
        skip(k, (uint64_t)len + 1);
    } else {
        localSkip(k); /* a namespace: not "text" nor "bytes" */
        localSkip(k);
    }
    if (k->out || s == NULL) {
        return 0;
    }
    return len == 4 && memcmp(s, "text", 4) == 0    ? 1
           : len == 5 && memcmp(s, "bytes", 5) == 0 ? 2
                                                    : 0;
}

static void
valueSkip(Cursor* k, uint8_t tag)
{
    unsigned flags = tag >> 5;

    switch (tag & 7) {
    case COR_COR_NODE_STRING:
        if (varint(k) == 1) {
            localSkip(k); /* a new namespace */
        }
        localSkip(k);
        break;
    case COR_COR_NODE_INT:
        if (flags == COR_COR_INT_VARINT) {
            varint(k);
        }
        break;
    case COR_COR_NODE_FLOAT:
        skip(k, flags == COR_COR_FLOAT_SINGLE ? 4 : 8);
        break;
    case COR_COR_NODE_OBJECT:
    case COR_COR_NODE_ARRAY:
        skip(k, varint(k));
        break;
    default:
        break;
    }
}

/* Find, in the avail bytes of a tree of treeLen that came, a body string
 * that ends the tree. False when they do not show one (yet). */
static bool
bodyFind(const uint8_t* tree, size_t avail, size_t treeLen,
         const CorCorTable* names, Cut* cut)
{
    Cursor k = { tree, 1, avail, avail < 1 };
    uint64_t rootLen = varint(&k);

    cut->kidsAt = k.pos;
    if (k.out || tree[0] != COR_COR_NODE_OBJECT || rootLen != treeLen - k.pos) {
        return false;
    }
    while (!k.out && k.pos < k.len) {
        uint8_t tag = k.p[k.pos++];
        int kind = nameRead(&k, (tag >> 3) & 3, names);

        if (kind != 0 && (tag & 7) == COR_COR_NODE_STRING) {
            if (varint(&k) == 1) {
                localSkip(&k);
            }
            cut->lenAt = k.pos;
            cut->len = varint(&k);
            cut->bytesAt = k.pos;
            cut->base64 = kind == 2;
            return !k.out && cut->len < treeLen
                   && cut->bytesAt + cut->len + 1 == treeLen;
        }
        valueSkip(&k, tag);
    }
    return false;
}

static size_t
varintPut(uint8_t* out, uint64_t v)
{
    size_t n = 0;

    do {
        out[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    return n;
}

/* Decode the frame at frame with its body's bytes replaced by a short
 * stand-in of the same kind ("a", or "AAAA" as base64), which leaves the
 * tables as the whole frame would. Returns 0, or -errno with why. */
static int
cutDecode(CorServerConn* c, const CorCorHead* h, const uint8_t* frame,
          const Cut* cut, CorCorMessage* m, char* why, size_t whyLen)
{
    const char* fill = cut->base64 ? "AAAA" : "a";
    size_t fillLen = strlen(fill);
    const uint8_t* tree = frame + COR_COR_HEAD_LEN;
    size_t kept = cut->lenAt - cut->kidsAt;
    size_t kids = kept + 1 + fillLen + 1;
    uint8_t* out = malloc(COR_COR_HEAD_LEN + 1 + COR_COR_VARINT_MAX + kids);
    size_t n = COR_COR_HEAD_LEN;
    CorCorHead decoded;
    int rc;

    if (out == NULL) {
        corCorWhy(why, whyLen, "no memory for a REQUEST's head");
        return -ENOMEM;
    }
    out[n++] = tree[0];
    n += varintPut(out + n, kids);
    memcpy(out + n, tree + cut->kidsAt, kept);
    n += kept;
    out[n++] = (uint8_t)fillLen;
    memcpy(out + n, fill, fillLen + 1); /* and its 00 */
    n += fillLen + 1;
    corCorHeadWrite(out, h->type, h->id, (uint32_t)(n - COR_COR_HEAD_LEN));
    rc = corCorMessageDecode(c->received, out, n, corCorServerConf.maxFrame,
                             &decoded, m, why, whyLen);
    free(out);
    return rc;
}

int
corCorServerRequestCut(CorServerConn* c, const CorCorHead* h,
                       const uint8_t* frame, size_t n, char* why, size_t whyLen)
{
    size_t whole = COR_COR_HEAD_LEN + (size_t)h->length;
    size_t avail = (n < whole ? n : whole) - COR_COR_HEAD_LEN;
    CorCorMessage m;
    Cut cut;
    int rc;

    if (h->type != COR_COR_REQUEST || h->length <= requestMax()) {
        return 0;
    }
    if (!bodyFind(frame + COR_COR_HEAD_LEN, avail, h->length,
                  &c->received->names, &cut)) {
        return avail < headMax() && avail < h->length ? -EAGAIN : 0;
    }
    rc = cutDecode(c, h, frame, &cut, &m, why, whyLen);
    if (rc != 0) {
        return rc;
    }
    rc = corCorServerRequestRefuse(c, h->id, &m,
                                   cut.base64 ? cut.len / 4 * 3 : cut.len);
    if (rc != 0) {
        corCorWhy(why, whyLen, "no memory for an answer");
        return rc;
    }
    c->skipLeft = whole - COR_COR_HEAD_LEN - avail;
    return (int)(COR_COR_HEAD_LEN + avail);
}
