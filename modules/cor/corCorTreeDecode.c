/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tree decoder (docs/cor-protocol.md, "Tree codec"): bytes to json_t
 * with the received tables, refusing every form but the one canonical
 * form the encoder (corCorTree.c) writes, and never reading past its
 * buffer. Its parts (a node's head, a string, an int, a container's
 * length) also serve the message decoder, corCorEnvelope.c.
 */
#include "corCorInt.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* A macro, since a function cannot hand its arguments on to another
 * variadic one. */
#define refuse(d, at, ...)                                                     \
    corCorRefuse((d)->why, (d)->whyLen, (long)(at), __VA_ARGS__)

static int
noMemory(CorCorDecoder* d)
{
    corCorWhy(d->why, d->whyLen, "tree byte %zu: no memory", d->pos);
    return -ENOMEM;
}

static int
varintLong(CorCorDecoder* d, size_t end, uint64_t* vp)
{
    size_t at = d->pos;
    uint64_t v = 0;

    for (unsigned i = 0;; i++) {
        uint8_t b;

        if (d->pos >= end) {
            return refuse(d, at, "a varint cut short");
        }
        b = d->buf[d->pos++];
        if (i == COR_COR_VARINT_MAX - 1 && b > 1) {
            return refuse(d, at, "a varint past 64 bits");
        }
        v |= (uint64_t)(b & 0x7F) << 7 * i;
        if ((b & 0x80) == 0) {
            if (b == 0 && i > 0) {
                return refuse(d, at, "a varint not in its shortest form");
            }
            *vp = v;
            return 0;
        }
    }
}

/* Most varints (an index, a short length, a namespace mode) are one
 * byte, read here inline; a byte 0 alone is in its shortest form. */
static inline int
getVarint(CorCorDecoder* d, size_t end, uint64_t* vp)
{
    if (d->pos < end && d->buf[d->pos] < 0x80) {
        *vp = d->buf[d->pos++];
        return 0;
    }
    return varintLong(d, end, vp);
}

/* A length, then that many bytes and nul more (0 or 1) within end: what
 * they are ("a string", "its") names them in a refusal. */
static int
getSpan(CorCorDecoder* d, size_t end, size_t nul, const char* what,
        const char* whose, uint64_t* np)
{
    size_t at = d->pos;
    int rc = getVarint(d, end, np);

    if (rc != 0) {
        return rc;
    }
    if (end - d->pos < nul || *np > end - d->pos - nul) {
        return refuse(d, at, "%s of %llu bytes past %s container", what,
                      (unsigned long long)*np, whose);
    }
    return 0;
}

/* A local part or an inline namespace: length, bytes, NUL. */
static int
getLocal(CorCorDecoder* d, size_t end, CorCorStr* out)
{
    size_t at = d->pos;
    uint64_t n;
    bool plain;
    int rc = getSpan(d, end, 1, "a string", "its", &n);

    if (rc != 0) {
        return rc;
    }
    out->s = (const char*)d->buf + d->pos;
    out->len = (size_t)n;
    if (out->s[n] != '\0') {
        return refuse(d, at, "a string not ended by a NUL");
    }
    /* Printable ASCII, most strings, holds no NUL and is UTF-8. */
    plain = corCorPrintable(out->s, n);
    if (!plain && memchr(out->s, '\0', n) != NULL) {
        return refuse(d, at, "a string that holds a NUL");
    }
    if (!plain && !corCorUtf8((const uint8_t*)out->s, n)) {
        return refuse(d, at, "a string that is not UTF-8");
    }
    d->pos += n + 1;
    return 0;
}

/* The namespace of a string: a new one inline (appended), or an index. */
static int
getNamespace(CorCorDecoder* d, size_t end, uint64_t ns, CorCorStr* out)
{
    CorCorTable* tb = &d->t->namespaces;
    size_t at = d->pos;
    int rc;

    if (ns >= 2) {
        if (ns - 2 >= tb->count) {
            return refuse(d, at, "namespace %llu of a table of %u",
                          (unsigned long long)(ns - 2), tb->count);
        }
        out->s = corCorTableAt(tb, (unsigned)(ns - 2))->s;
        out->len = corCorTableAt(tb, (unsigned)(ns - 2))->len;
        return 0;
    }
    if ((rc = getLocal(d, end, out)) != 0) {
        return rc;
    }
    if ((rc = corCorTableFind(tb, out->s, out->len)) >= 0) {
        return refuse(d, at,
                      "a namespace sent inline that is number %d of "
                      "the table",
                      rc);
    }
    return corCorTableAppend(tb, out->s, out->len) == 0 ? 0 : noMemory(d);
}

/* A string value or a new name: namespace, local part, joined. */
static int
getString(CorCorDecoder* d, size_t end, CorCorStr* out)
{
    size_t at = d->pos;
    uint64_t ns;
    CorCorStr prefix;
    CorCorStr local;
    int rc = getVarint(d, end, &ns);

    if (rc != 0) {
        return rc;
    }
    if (ns == 0) {
        rc = getLocal(d, end, out);
        if (rc == 0 && d->t != NULL && corCorSplit(out->s, out->len) != 0) {
            return refuse(d, at, "a string that splits sent whole");
        }
        return rc;
    }
    if (d->t == NULL) {
        return refuse(d, at, "a namespace in a tree without tables");
    }
    if ((rc = getNamespace(d, end, ns, &prefix)) != 0
        || (rc = getLocal(d, end, &local)) != 0) {
        return rc;
    }
    d->scratch.len = 0;
    if (corBufReserve(&d->scratch, prefix.len + local.len + 1) != 0) {
        return noMemory(d);
    }
    memcpy(d->scratch.data, prefix.s, prefix.len);
    memcpy(d->scratch.data + prefix.len, local.s, local.len);
    d->scratch.data[prefix.len + local.len] = '\0';
    out->s = (const char*)d->scratch.data;
    out->len = prefix.len + local.len;
    if (prefix.len == 0 || corCorSplit(out->s, out->len) != prefix.len) {
        return refuse(d, at,
                      "a string split elsewhere than after its last "
                      "'/', '#' or ':'");
    }
    return 0;
}

int
corCorGetString(CorCorDecoder* d, size_t end, CorCorStr* out)
{
    return getString(d, end, out);
}

/* The name of an object's child, by index or new (then appended). */
static int
getName(CorCorDecoder* d, size_t end, unsigned mode, CorCorStr* out)
{
    CorCorTable* tb = d->t != NULL ? &d->t->names : NULL;
    size_t at = d->pos;
    uint64_t index;
    int rc;

    if (mode == COR_COR_MODE_INDEX) {
        if ((rc = getVarint(d, end, &index)) != 0) {
            return rc;
        }
        if (tb == NULL || index >= tb->count) {
            return refuse(d, at, "name %llu of a table of %u",
                          (unsigned long long)index,
                          tb != NULL ? tb->count : 0);
        }
        const CorCorEntry* e = corCorTableAt(tb, (unsigned)index);

        *out = (CorCorStr){ e->s, e->len, e->token, e->kind };
        return 0;
    }
    out->token = false;
    out->kind = 0;
    if ((rc = getString(d, end, out)) != 0 || tb == NULL) {
        return rc;
    }
    if ((rc = corCorTableFind(tb, out->s, out->len)) >= 0) {
        return refuse(d, at,
                      "a name sent inline that is number %d of the "
                      "table",
                      rc);
    }
    unsigned count = tb->count;

    if (corCorTableAppend(tb, out->s, out->len) != 0) {
        return noMemory(d);
    }
    if (tb->count > count) {
        out->kind = corCorTableAt(tb, count)->kind;
    }
    return 0;
}

int
corCorGetInt(CorCorDecoder* d, size_t end, unsigned flags, int64_t* vp)
{
    size_t at = d->pos;
    uint64_t u;
    int rc;

    if (flags <= COR_COR_INT_INLINE_MAX) {
        *vp = flags;
        return 0;
    }
    if ((rc = getVarint(d, end, &u)) != 0) {
        return rc;
    }
    *vp = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    if (*vp >= 0 && *vp <= COR_COR_INT_INLINE_MAX) {
        return refuse(d, at, "int %lld in a varint, not in the tag",
                      (long long)*vp);
    }
    return 0;
}

static int
getInt(CorCorDecoder* d, size_t end, unsigned flags, json_t** vp)
{
    int64_t v;
    int rc = corCorGetInt(d, end, flags, &v);

    if (rc != 0) {
        return rc;
    }
    *vp = json_integer(v);
    return *vp != NULL ? 0 : noMemory(d);
}

static int
getFloat(CorCorDecoder* d, size_t end, unsigned flags, json_t** vp)
{
    size_t n = flags == COR_COR_FLOAT_SINGLE ? 4 : 8;
    size_t at = d->pos;
    uint64_t bits = 0;
    double v;

    if (end - d->pos < n) {
        return refuse(d, at, "a float cut short");
    }
    for (size_t i = 0; i < n; i++) {
        bits |= (uint64_t)d->buf[d->pos++] << 8 * i;
    }
    if (n == 4) {
        float f;
        uint32_t fbits = (uint32_t)bits;

        memcpy(&f, &fbits, 4);
        v = f;
    } else {
        memcpy(&v, &bits, 8);
    }
    if (!isfinite(v)) {
        return refuse(d, at, "a float that is not finite");
    }
    if (n == 8 && corCorFitsFloat(v)) {
        return refuse(d, at, "a double that fits in 4 bytes");
    }
    *vp = json_real(v);
    return *vp != NULL ? 0 : noMemory(d);
}

static int getNode(CorCorDecoder* d, size_t end, unsigned depth, json_t* parent,
                   json_t** vp);

int
corCorGetLength(CorCorDecoder* d, size_t end, size_t* childEndP)
{
    uint64_t n;
    int rc = getSpan(d, end, 0, "children", "their", &n);

    if (rc != 0) {
        return rc;
    }
    *childEndP = d->pos + (size_t)n;
    return 0;
}

static int
getChildren(CorCorDecoder* d, size_t end, unsigned type, unsigned depth,
            json_t** vp)
{
    size_t childEnd;
    int rc = corCorGetLength(d, end, &childEnd);

    if (rc != 0) {
        return rc;
    }
    *vp = type == COR_COR_NODE_OBJECT ? json_object() : json_array();
    if (*vp == NULL) {
        return noMemory(d);
    }
    while (rc == 0 && d->pos < childEnd) {
        rc = getNode(d, childEnd, depth + 1, *vp, NULL);
    }
    return rc;
}

/* The value after a tag (and its name), whose flags were checked. */
static int
getValue(CorCorDecoder* d, size_t end, unsigned type, unsigned flags,
         unsigned depth, json_t** vp)
{
    CorCorStr s;
    int rc;

    switch (type) {
    case COR_COR_NODE_STRING:
        if ((rc = getString(d, end, &s)) != 0) {
            return rc;
        }
        *vp = json_stringn_nocheck(s.s, s.len);
        return *vp != NULL ? 0 : noMemory(d);
    case COR_COR_NODE_INT:
        return getInt(d, end, flags, vp);
    case COR_COR_NODE_FLOAT:
        return getFloat(d, end, flags, vp);
    case COR_COR_NODE_BOOL:
        *vp = json_boolean(flags);
        return 0;
    case COR_COR_NODE_NULL:
        *vp = json_null();
        return 0;
    default:
        return getChildren(d, end, type, depth, vp);
    }
}

/* A tag is refused for a type 0, a name where none may be (the root, an
 * array's element) or none where one must be (an object's child), a name
 * by term id, and flags its type leaves unused that are not 0 (the term
 * id bit of a string among them). */
static int
tagCheck(CorCorDecoder* d, size_t at, unsigned tag, bool named)
{
    unsigned type = tag & 7;
    unsigned mode = tag >> 3 & 3;
    unsigned flags = tag >> 5;

    if (type == 0) {
        return refuse(d, at, "tag 0x%02x: type 0", tag);
    }
    if (mode == COR_COR_MODE_TERM) {
        return refuse(d, at, "tag 0x%02x: a name by term id (terms: 0)", tag);
    }
    if (named && mode == COR_COR_MODE_NONE) {
        return refuse(d, at,
                      "tag 0x%02x: a child of an object without a "
                      "name",
                      tag);
    }
    if (!named && mode != COR_COR_MODE_NONE) {
        return refuse(d, at, "tag 0x%02x: a name outside an object", tag);
    }
    if ((type == COR_COR_NODE_STRING && flags != 0)
        || ((type == COR_COR_NODE_FLOAT || type == COR_COR_NODE_BOOL)
            && flags > 1)
        || (type >= COR_COR_NODE_NULL && flags != 0)) {
        return refuse(d, at, "tag 0x%02x: type %u with flags %u", tag, type,
                      flags);
    }
    return 0;
}

/* Hold the place of an object's child named name (with a null until its
 * value is read: the name may live in the scratch buffer, which the value
 * may reuse). */
static int
getSlot(CorCorDecoder* d, size_t at, const CorCorStr* name, json_t* parent,
        void** slotP)
{
    if (json_object_getn(parent, name->s, name->len) != NULL) {
        return refuse(d, at, "a second \"%.40s\" in one object", name->s);
    }
    if (json_object_setn_new_nocheck(parent, name->s, name->len, json_null())
        != 0) {
        return noMemory(d);
    }
    *slotP = json_object_iter_at(parent, name->s);
    return 0;
}

int
corCorGetHead(CorCorDecoder* d, size_t end, unsigned depth, bool named,
              unsigned* tagP, CorCorStr* name)
{
    size_t at = d->pos;
    int rc;

    if (depth > COR_COR_DEPTH_MAX || ++d->nodes > COR_COR_NODES_MAX) {
        return refuse(d, at,
                      "a tree deeper than %d or of more than %zu "
                      "nodes",
                      COR_COR_DEPTH_MAX, COR_COR_NODES_MAX);
    }
    if (d->pos >= end) {
        return refuse(d, at, "a node cut short");
    }
    *tagP = d->buf[d->pos++];
    if ((rc = tagCheck(d, at, *tagP, named)) != 0) {
        return rc;
    }
    return named ? getName(d, end, *tagP >> 3 & 3, name) : 0;
}

int
corCorGetValue(CorCorDecoder* d, size_t end, unsigned tag, unsigned depth,
               json_t** vp)
{
    int rc = getValue(d, end, tag & 7, tag >> 5, depth, vp);

    if (rc != 0) {
        json_decref(*vp);
        *vp = NULL;
    }
    return rc;
}

static int
getNode(CorCorDecoder* d, size_t end, unsigned depth, json_t* parent,
        json_t** vp)
{
    size_t at = d->pos + 1;
    json_t* v = NULL;
    void* slot = NULL;
    CorCorStr name;
    unsigned tag;
    int rc = corCorGetHead(d, end, depth, json_is_object(parent), &tag, &name);

    if (rc != 0
        || (json_is_object(parent)
            && (rc = getSlot(d, at, &name, parent, &slot)) != 0)
        || (rc = corCorGetValue(d, end, tag, depth, &v)) != 0) {
        return rc;
    }
    if (parent == NULL) {
        *vp = v;
        return 0;
    }
    if (slot != NULL) {
        return json_object_iter_set_new(parent, slot, v) == 0 ? 0 : noMemory(d);
    }
    return json_array_append_new(parent, v) == 0 ? 0 : noMemory(d);
}

void
corCorDecodeBegin(CorCorDecoder* d, CorCorTables* t, const uint8_t* buf,
                  char* why, size_t whyLen)
{
    *d = (CorCorDecoder){ .t = t, .buf = buf, .why = why, .whyLen = whyLen };
    d->namespaces = t != NULL ? t->namespaces.count : 0;
    d->names = t != NULL ? t->names.count : 0;
}

int
corCorDecodeEnd(CorCorDecoder* d, size_t len, int rc)
{
    if (rc == 0 && d->pos != len) {
        rc = refuse(d, d->pos, "%zu bytes after the tree", len - d->pos);
    }
    corBufFree(&d->scratch);
    if (rc != 0 && d->t != NULL) {
        corCorTableTruncate(&d->t->namespaces, d->namespaces);
        corCorTableTruncate(&d->t->names, d->names);
    }
    return rc;
}

int
corCorTreeDecode(CorCorTables* t, const uint8_t* buf, size_t len,
                 json_t** treeP, char* why, size_t whyLen)
{
    CorCorDecoder d;
    int rc;

    *treeP = NULL;
    corCorDecodeBegin(&d, t, buf, why, whyLen);
    rc = corCorDecodeEnd(&d, len, getNode(&d, len, 1, NULL, treeP));
    if (rc != 0) {
        json_decref(*treeP);
        *treeP = NULL;
    }
    return rc;
}
