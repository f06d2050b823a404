/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor:// frames (docs/cor-protocol.md, "Frame" and "Handshake"): the
 * 16-byte header, one whole frame encoded and decoded around the tree
 * codec, and the HELLO triple. The handshake frames never touch the
 * tables, whatever the caller passes: the spec encodes them with none,
 * and taking that choice from the connection code means it cannot err.
 */
#include "corCorInt.h"

#include <errno.h>
#include <string.h>

static const uint8_t magic[4] = { 0xC0, 0x4F, 0x52, 0x01 };

static void
put32(uint8_t* p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> 8 * i);
    }
}

static uint32_t
get32(const uint8_t* p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
           | (uint32_t)p[3] << 24;
}

static bool
handshake(CorCorType type)
{
    return type == COR_COR_HELLO || type == COR_COR_HELLO_ACK;
}

void
corCorHeadWrite(uint8_t* out, CorCorType type, uint32_t id, uint32_t length)
{
    memcpy(out, magic, 4);
    out[4] = (uint8_t)type;
    out[5] = 0;
    out[6] = 0;
    out[7] = 0;
    put32(out + 8, id);
    put32(out + 12, length);
}

void
corCorHeadFlagsSet(uint8_t* frame, unsigned flags)
{
    frame[5] = (uint8_t)flags;
}

/* The flags a frame of type may carry. */
static unsigned
flagsAllowed(unsigned type)
{
    return type == COR_COR_RESPONSE ? COR_COR_FLAG_MORE
           : type == COR_COR_DATA   ? COR_COR_FLAG_MORE | COR_COR_FLAG_CUT
                                    : 0;
}

int
corCorHeadRead(const uint8_t* buf, size_t len, uint32_t maxLength,
               CorCorHead* h, char* why, size_t whyLen)
{
    if (len < COR_COR_HEAD_LEN) {
        corCorWhy(why, whyLen, "a frame header cut short at %zu bytes", len);
        return -EAGAIN;
    }
    if (memcmp(buf, "HTTP", 4) == 0) {
        /* An answer to our HELLO from an HTTP server: the URL's port is
         * an http:// one. */
        corCorWhy(why, whyLen,
                  "the peer speaks HTTP, not cor:// (an "
                  "http:// port?)");
        return -EPROTO;
    }
    if (memcmp(buf, magic, 4) != 0) {
        corCorWhy(why, whyLen,
                  "frame byte 0: magic %02x %02x %02x %02x, "
                  "not c0 4f 52 01",
                  buf[0], buf[1], buf[2], buf[3]);
        return -EPROTO;
    }
    if (buf[4] < COR_COR_HELLO || buf[4] > COR_COR_DATA) {
        corCorWhy(why, whyLen, "frame byte 4: unknown type %u", buf[4]);
        return -EPROTO;
    }
    if ((buf[5] & ~flagsAllowed(buf[4])) != 0
        || buf[5] == (COR_COR_FLAG_MORE | COR_COR_FLAG_CUT)) {
        corCorWhy(why, whyLen, "frame byte 5: flags %#x on a frame of type %u",
                  buf[5], buf[4]);
        return -EPROTO;
    }
    if (buf[6] != 0 || buf[7] != 0) {
        corCorWhy(why, whyLen, "frame byte %d: reserved not 0",
                  buf[6] != 0 ? 6 : 7);
        return -EPROTO;
    }
    h->type = (CorCorType)buf[4];
    h->flags = buf[5];
    h->id = get32(buf + 8);
    h->length = get32(buf + 12);
    if (h->length > maxLength) {
        corCorWhy(why, whyLen,
                  "frame byte 12: a tree of %u bytes, over the "
                  "limit of %u",
                  h->length, maxLength);
        return -EMSGSIZE;
    }
    return COR_COR_HEAD_LEN;
}

int
corCorFrameEncode(CorCorTables* t, CorCorType type, uint32_t id,
                  const json_t* tree, CorBuf* out, char* why, size_t whyLen)
{
    size_t start = out->len;
    int n = 0;

    if (corBufReserve(out, COR_COR_HEAD_LEN) != 0) {
        corCorWhy(why, whyLen, "no memory for a frame");
        return -ENOMEM;
    }
    out->len += COR_COR_HEAD_LEN;
    if (tree != NULL) {
        n = corCorTreeEncode(handshake(type) ? NULL : t, tree, out, why,
                             whyLen);
        if (n < 0) {
            out->len = start;
            return n;
        }
    }
    corCorHeadWrite(out->data + start, type, id, (uint32_t)n);
    return COR_COR_HEAD_LEN + n;
}

int
corCorFrameDecode(CorCorTables* t, const uint8_t* buf, size_t len,
                  uint32_t maxLength, CorCorHead* h, json_t** treeP, char* why,
                  size_t whyLen)
{
    int rc = corCorHeadRead(buf, len, maxLength, h, why, whyLen);

    *treeP = NULL;
    if (rc < 0) {
        return rc == -EAGAIN ? -EPROTO : rc;
    }
    if (len - COR_COR_HEAD_LEN != h->length) {
        corCorWhy(why, whyLen,
                  "a frame of %zu bytes whose header says %u "
                  "after it",
                  len, h->length);
        return -EPROTO;
    }
    if (h->length == 0 || h->type == COR_COR_DATA) {
        return 0;
    }
    return corCorTreeDecode(handshake(h->type) ? NULL : t,
                            buf + COR_COR_HEAD_LEN, h->length, treeP, why,
                            whyLen);
}

int
corCorDataEncode(CorBuf* out, uint32_t id, unsigned flags, const void* data,
                 size_t len)
{
    if (len > COR_COR_FRAME_MAX
        || corBufReserve(out, COR_COR_HEAD_LEN + len) != 0) {
        return -ENOMEM;
    }
    corCorHeadWrite(out->data + out->len, COR_COR_DATA, id, (uint32_t)len);
    corCorHeadFlagsSet(out->data + out->len, flags);
    if (len > 0) {
        memcpy(out->data + out->len + COR_COR_HEAD_LEN, data, len);
    }
    out->len += COR_COR_HEAD_LEN + len;
    return (int)(COR_COR_HEAD_LEN + len);
}

json_t*
corCorHelloTree(bool stream)
{
    return stream
               ? json_pack("{s:i, s:i, s:i, s:b}", "version", COR_COR_VERSION,
                           "terms", COR_COR_TERMS, "namespaces", 0, "stream", 1)
               : json_pack("{s:i, s:i, s:i}", "version", COR_COR_VERSION,
                           "terms", COR_COR_TERMS, "namespaces", 0);
}

bool
corCorHelloStream(const json_t* tree)
{
    return json_is_true(json_object_get(tree, "stream"));
}

int
corCorHelloCheck(const json_t* tree, char* why, size_t whyLen)
{
    json_t* version = json_object_get(tree, "version");
    json_t* terms = json_object_get(tree, "terms");
    json_t* namespaces = json_object_get(tree, "namespaces");

    if (!json_is_integer(version) || !json_is_integer(terms)
        || !json_is_integer(namespaces)) {
        corCorWhy(why, whyLen,
                  "a HELLO without an int version, terms and "
                  "namespaces");
        return -EPROTO;
    }
    if (json_integer_value(version) != COR_COR_VERSION) {
        corCorWhy(why, whyLen, "a HELLO of version %lld, not %d",
                  (long long)json_integer_value(version), COR_COR_VERSION);
        return -EPROTO;
    }
    if (json_integer_value(terms) != COR_COR_TERMS) {
        corCorWhy(why, whyLen,
                  "a HELLO with %lld terms, not %d: a peer "
                  "with another vocabulary (the seed's has 228)",
                  (long long)json_integer_value(terms), COR_COR_TERMS);
        return -EPROTO;
    }
    /* Fixed namespaces would sit in the tables before the first frame:
     * a peer with some would index entries we do not have. */
    if (json_integer_value(namespaces) != 0) {
        corCorWhy(why, whyLen, "a HELLO with %lld fixed namespaces, not 0",
                  (long long)json_integer_value(namespaces));
        return -EPROTO;
    }
    return 0;
}
