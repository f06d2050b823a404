/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tree codec (docs/cor-protocol.md, "Tree codec"): json_t to bytes and
 * back, with the tables of one direction. The encoder writes the one
 * canonical form of a tree (shortest varints, ints 0..6 in the tag, a
 * float in 4 bytes when it fits, a name or namespace by index when its
 * table has it); the decoder (corCorTreeDecode.c) refuses every other
 * form. Being strict costs nothing here and buys a property the fuzzer
 * checks: bytes that decode encode back to the same bytes, with the
 * tables in step.
 */
#include "corCorInt.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static uint8_t
tagOf(unsigned type, unsigned mode, unsigned flags)
{
    return (uint8_t)(type | mode << 3 | flags << 5);
}

/* ---- Encoder ----------------------------------------------------------- */

/* Room for n more bytes at the end of the output. The room is looked at
 * here, inline, since a tree is written a few bytes at a time (a tag, a
 * varint, a NUL): growing is the call. */
static inline int
room(CorCorEncoder* e, size_t n)
{
    if (e->out->cap - e->out->len >= n) {
        return 0;
    }
    if (corBufReserve(e->out, n) != 0) {
        corCorWhy(e->why, e->whyLen, "no memory for %zu bytes of tree",
                  e->out->len + n);
        return -ENOMEM;
    }
    return 0;
}

static inline int
putBytes(CorCorEncoder* e, const void* p, size_t n)
{
    int rc = room(e, n);

    if (rc == 0) {
        memcpy(e->out->data + e->out->len, p, n);
        e->out->len += n;
    }
    return rc;
}

static size_t
varintWrite(uint8_t* p, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static int
putVarint(CorCorEncoder* e, uint64_t v)
{
    int rc = room(e, COR_COR_VARINT_MAX);

    if (rc == 0) {
        e->out->len += varintWrite(e->out->data + e->out->len, v);
    }
    return rc;
}

/* A local part (or an inline namespace): its length, its bytes, a NUL,
 * in the room made once. */
static int
putLocal(CorCorEncoder* e, const char* s, size_t len)
{
    int rc = room(e, COR_COR_VARINT_MAX + len + 1);
    uint8_t* p;

    if (rc != 0) {
        return rc;
    }
    p = e->out->data + e->out->len;
    p += varintWrite(p, len);
    memcpy(p, s, len);
    p[len] = '\0';
    e->out->len = (size_t)(p + len + 1 - e->out->data);
    return 0;
}

/* A string value or a new name: its namespace (none, new, or an index),
 * then its local part; a new namespace is appended. */
static int
putString(CorCorEncoder* e, const char* s, size_t len)
{
    size_t nsLen = e->t != NULL ? corCorSplit(s, len) : 0;
    CorCorTable* ns = e->t != NULL ? &e->t->namespaces : NULL;
    int index;
    int rc;

    /* What the peer would refuse is not sent: the connection stays. */
    if (!corCorPrintable(s, len)
        && (memchr(s, '\0', len) != NULL
            || !corCorUtf8((const uint8_t*)s, len))) {
        corCorWhy(e->why, e->whyLen,
                  "a string or a name that holds a NUL "
                  "or is not UTF-8");
        return -EINVAL;
    }
    if (nsLen == 0) {
        rc = putVarint(e, 0);
    } else if ((index = corCorTableFind(ns, s, nsLen)) >= 0) {
        rc = putVarint(e, (uint64_t)index + 2);
    } else if ((rc = putVarint(e, 1)) == 0 && (rc = putLocal(e, s, nsLen)) == 0
               && (rc = corCorTableAppend(ns, s, nsLen)) != 0) {
        corCorWhy(e->why, e->whyLen, "no memory for a namespace");
    }
    return rc == 0 ? putLocal(e, s + nsLen, len - nsLen) : rc;
}

/* The type of node and its tag's flags: a small int, the size of a
 * float, a boolean's value. */
static int
kindOf(CorCorEncoder* e, const json_t* node, unsigned* type, unsigned* flags)
{
    json_int_t v;

    *flags = 0;
    switch (json_typeof(node)) {
    case JSON_STRING:
        *type = COR_COR_NODE_STRING;
        return 0;
    case JSON_INTEGER:
        v = json_integer_value(node);
        *type = COR_COR_NODE_INT;
        *flags = corCorIntFlags(v);
        return 0;
    case JSON_REAL:
        if (!isfinite(json_real_value(node))) {
            corCorWhy(e->why, e->whyLen, "a real that is not finite");
            return -EINVAL;
        }
        *type = COR_COR_NODE_FLOAT;
        *flags = corCorFitsFloat(json_real_value(node)) ? COR_COR_FLOAT_SINGLE
                                                        : 0;
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        *type = COR_COR_NODE_BOOL;
        *flags = json_is_true(node);
        return 0;
    case JSON_NULL:
        *type = COR_COR_NODE_NULL;
        return 0;
    case JSON_OBJECT:
        *type = COR_COR_NODE_OBJECT;
        return 0;
    default:
        *type = COR_COR_NODE_ARRAY;
        return 0;
    }
}

static int
putFloat(CorCorEncoder* e, double d)
{
    uint8_t b[8];
    uint64_t bits;

    if (corCorFitsFloat(d)) {
        float f = (float)d;
        uint32_t fbits;

        memcpy(&fbits, &f, 4);
        for (int i = 0; i < 4; i++) {
            b[i] = (uint8_t)(fbits >> 8 * i);
        }
        return putBytes(e, b, 4);
    }
    memcpy(&bits, &d, 8);
    for (int i = 0; i < 8; i++) {
        b[i] = (uint8_t)(bits >> 8 * i);
    }
    return putBytes(e, b, 8);
}

/* An object's or an array's children, behind their byte length. */
static int
putChildren(CorCorEncoder* e, const json_t* node, unsigned depth)
{
    size_t start;
    size_t i;
    const char* key;
    size_t keyLen;
    json_t* child;
    int rc = corCorPutOpen(e, &start);

    if (rc != 0) {
        return rc;
    }
    if (json_is_object(node)) {
        json_object_keylen_foreach((json_t*)node, key, keyLen, child)
        {
            if ((rc = corCorPutNode(e, child, key, keyLen, depth + 1)) != 0) {
                return rc;
            }
        }
    } else {
        json_array_foreach(node, i, child)
        {
            if ((rc = corCorPutNode(e, child, NULL, 0, depth + 1)) != 0) {
                return rc;
            }
        }
    }
    return corCorPutClose(e, start);
}

/* The name of an object's child: by index when the names table has it,
 * else inline, then appended. */
static int
putName(CorCorEncoder* e, uint8_t tag, const char* name, size_t len)
{
    int index = e->t != NULL ? corCorTableFind(&e->t->names, name, len) : -1;
    int rc;

    tag |= (uint8_t)((index >= 0 ? COR_COR_MODE_INDEX : COR_COR_MODE_NEW) << 3);
    if ((rc = putBytes(e, &tag, 1)) != 0) {
        return rc;
    }
    if (index >= 0) {
        e->nameToken = corCorTableAt(&e->t->names, (unsigned)index)->token;
        return putVarint(e, (uint64_t)index);
    }
    rc = putString(e, name, len);
    if (rc == 0 && e->t != NULL
        && (rc = corCorTableAppend(&e->t->names, name, len)) != 0) {
        corCorWhy(e->why, e->whyLen, "no memory for a name");
    }
    return rc;
}

static int
putValue(CorCorEncoder* e, const json_t* node, unsigned depth)
{
    json_int_t v;

    switch (json_typeof(node)) {
    case JSON_STRING:
        return putString(e, json_string_value(node), json_string_length(node));
    case JSON_INTEGER:
        v = json_integer_value(node);
        return corCorPutInt(e, v);
    case JSON_REAL:
        return putFloat(e, json_real_value(node));
    case JSON_OBJECT:
    case JSON_ARRAY:
        return putChildren(e, node, depth);
    default:
        return 0;
    }
}

void
corCorEncodeBegin(CorCorEncoder* e, CorCorTables* t, CorBuf* out, char* why,
                  size_t whyLen)
{
    *e = (CorCorEncoder){
        .t = t, .out = out, .why = why, .whyLen = whyLen, .start = out->len
    };
    e->namespaces = t != NULL ? t->namespaces.count : 0;
    e->names = t != NULL ? t->names.count : 0;
}

int
corCorEncodeEnd(CorCorEncoder* e, int rc)
{
    size_t n = e->out->len - e->start;

    if (rc == 0 && n > COR_COR_FRAME_MAX) {
        corCorWhy(e->why, e->whyLen, "a tree of %zu bytes, over %u", n,
                  (unsigned)COR_COR_FRAME_MAX);
        rc = -E2BIG;
    }
    if (rc != 0) {
        goto failed;
    }
    return (int)n;

failed:
    e->out->len = e->start;
    if (e->t != NULL) {
        corCorTableTruncate(&e->t->namespaces, e->namespaces);
        corCorTableTruncate(&e->t->names, e->names);
    }
    return rc;
}

/* One more node at depth, within the tree's limits. */
static int
nodeCounted(CorCorEncoder* e, unsigned depth)
{
    if (depth > COR_COR_DEPTH_MAX || ++e->nodes > COR_COR_NODES_MAX) {
        corCorWhy(e->why, e->whyLen,
                  "a tree deeper than %d or of more "
                  "than %zu nodes",
                  COR_COR_DEPTH_MAX, COR_COR_NODES_MAX);
        return -E2BIG;
    }
    return 0;
}

int
corCorPutHead(CorCorEncoder* e, unsigned type, unsigned flags, const char* name,
              size_t nameLen, unsigned depth)
{
    uint8_t tag = tagOf(type, COR_COR_MODE_NONE, flags);
    int rc = nodeCounted(e, depth);

    e->nameToken = false;
    if (rc != 0) {
        return rc;
    }
    return name != NULL ? putName(e, tag, name, nameLen) : putBytes(e, &tag, 1);
}

/* The bytes are putName's for a name its table has (the one canonical
 * form); only the lookup is saved. */
int
corCorPutHeadKnown(CorCorEncoder* e, unsigned type, unsigned flags,
                   CorCorKnown name, unsigned depth)
{
    uint32_t known = e->t != NULL ? e->t->names.known[name] : 0;
    uint8_t tag = tagOf(type, COR_COR_MODE_INDEX, flags);
    int rc;

    if (known == 0) {
        return corCorPutHead(e, type, flags, corCorKnownNames[name].s,
                             corCorKnownNames[name].len, depth);
    }
    e->nameToken = corCorTableAt(&e->t->names, known - 1)->token;
    if ((rc = nodeCounted(e, depth)) != 0 || (rc = putBytes(e, &tag, 1)) != 0) {
        return rc;
    }
    return putVarint(e, known - 1);
}

int
corCorPutString(CorCorEncoder* e, const char* s, size_t len)
{
    return putString(e, s, len);
}

int
corCorPutInt(CorCorEncoder* e, int64_t v)
{
    if (v >= 0 && v <= COR_COR_INT_INLINE_MAX) {
        return 0;
    }
    /* Zigzag, in unsigned arithmetic: INT64_MIN has no negation. */
    return putVarint(e, (uint64_t)v << 1 ^ (uint64_t)(v >> 63));
}

/* One byte is kept for the length, which fits it for small containers;
 * a longer length moves the children up when the container closes. */
int
corCorPutOpen(CorCorEncoder* e, size_t* startP)
{
    *startP = e->out->len + 1;
    return putBytes(e, "", 1);
}

int
corCorPutClose(CorCorEncoder* e, size_t start)
{
    uint8_t b[COR_COR_VARINT_MAX];
    size_t n = varintWrite(b, e->out->len - start);
    int rc;

    if (n > 1) {
        if ((rc = putBytes(e, b, n - 1)) != 0) {
            return rc;
        }
        memmove(e->out->data + start + n - 1, e->out->data + start,
                e->out->len - (n - 1) - start);
    }
    memcpy(e->out->data + start - 1, b, n);
    return 0;
}

int
corCorPutNode(CorCorEncoder* e, const json_t* node, const char* name,
              size_t nameLen, unsigned depth)
{
    unsigned type;
    unsigned flags;
    int rc = kindOf(e, node, &type, &flags);

    if (rc == 0) {
        rc = corCorPutHead(e, type, flags, name, nameLen, depth);
    }
    return rc == 0 ? putValue(e, node, depth) : rc;
}

int
corCorTreeEncode(CorCorTables* t, const json_t* tree, CorBuf* out, char* why,
                 size_t whyLen)
{
    CorCorEncoder e;

    corCorEncodeBegin(&e, t, out, why, whyLen);
    return corCorEncodeEnd(&e, corCorPutNode(&e, tree, NULL, 0, 1));
}
