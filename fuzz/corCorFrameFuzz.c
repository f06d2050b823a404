/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for cor:// frames and the tree codec, with state: the
 * input is a stream of frames that one receiver's tables decode in turn,
 * as a connection does; the first frame refused ends it, as it closes a
 * connection. Beyond the sanitizers, it aborts when a property breaks:
 *
 *   - a refused frame leaves the tables as they were;
 *   - a frame that decodes encodes back to the very same bytes through a
 *     sender's tables, which stay in step with the receiver's (one
 *     canonical form, and both sides append alike);
 *   - a REQUEST or RESPONSE that reads as a message is sent again through
 *     a second pair of tables and reads back as the same message, its
 *     body byte for byte (the chain's condition);
 *   - the direct decoder (corCorEnvelopeRead, through tables of its own
 *     kept in step) takes exactly the frames that corCorFrameDecode and
 *     corCorMessageRead take, as the same message with the same tables
 *     after, and leaves its tables as they were when it refuses; and the
 *     direct encoder writes the very bytes of the json_t path.
 *
 * An input that does not start with the magic is a body instead, and a
 * JSON text: the body goes out and back the same, byte for byte, whatever
 * member the body rule picks; the JSON text's tree (strings with a NUL
 * allowed, which the encoder refuses) goes out and back the same, and a
 * refused encoding leaves the two sides' tables in step.
 *
 * Build: see `make fuzz` (clang -fsanitize=fuzzer,address,undefined, the
 * codec's files, -ljansson).
 */
#include "corCorCodec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* Keep each run small: the limit is the receiver's to choose. */
#define FUZZ_FRAME_MAX ((uint32_t)1 << 20)

typedef struct {
    CorCorTables* received;  /* what the input's frames go through */
    CorCorTables* mirror;    /* the sender those frames came from */
    CorCorTables* out;       /* a second hop: sent, */
    CorCorTables* in;        /* and received */
    CorCorTables* direct;    /* the input's frames, decoded directly */
    CorCorTables* directOut; /* the second hop's sender, encoding
                                directly */
} Tables;

static bool
sameBytes(const void* a, size_t alen, const void* b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static bool
sameString(const char* a, const char* b)
{
    return (a == NULL && b == NULL)
           || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool
sameMessage(const CorCorMessage* a, const CorCorMessage* b)
{
    if (!sameString(a->verb, b->verb) || !sameString(a->path, b->path)
        || a->status != b->status || !sameString(a->contentType, b->contentType)
        || a->headerCount != b->headerCount
        || !sameBytes(a->body, a->bodyLen, b->body, b->bodyLen)) {
        return false;
    }
    for (unsigned i = 0; i < a->headerCount; i++) {
        const CorHeader* x = &a->headers[i];
        const CorHeader* y = &b->headers[i];

        if (!sameBytes(x->name, x->nameLen, y->name, y->nameLen)
            || !sameBytes(x->value, x->valueLen, y->value, y->valueLen)) {
            return false;
        }
    }
    return true;
}

/* Send m through t->out and t->in; abort unless it reads back. */
static void
messageSend(Tables* t, CorCorType type, const CorCorMessage* m,
            CorCorMessage* back)
{
    CorBuf b = { 0 };
    CorCorHead h;
    json_t* sent = corCorMessageTree(type, m, NULL, 0);
    json_t* got;

    CorBuf direct = { 0 };

    if (sent == NULL
        || corCorFrameEncode(t->out, type, 1, sent, &b, NULL, 0) <= 0
        || corCorMessageEncode(t->directOut, type, 1, m, &direct, NULL, 0) <= 0
        || !sameBytes(b.data, b.len, direct.data, direct.len)
        || corCorFrameDecode(t->in, b.data, b.len, COR_COR_FRAME_MAX, &h, &got,
                             NULL, 0)
               != 0
        || corCorMessageRead(type, got, back, NULL, 0) != 0) {
        abort();
    }
    json_decref(sent);
    corBufFree(&b);
    corBufFree(&direct);
}

/* Send m, read from the input, again through t->out and t->in. */
static void
messageHop(Tables* t, CorCorType type, const CorCorMessage* m)
{
    CorCorMessage again;

    /* What was read, the sender can carry. */
    messageSend(t, type, m, &again);
    if (!sameMessage(m, &again)) {
        abort();
    }
    corCorMessageClear(&again);
}

static bool
tablesAt(const CorCorTables* t, unsigned names, unsigned namespaces)
{
    return corCorTablesNames(t) == names
           && corCorTablesNamespaces(t) == namespaces;
}

/* The frame at data through the direct decoder, which must take it when
 * the reference read it into *ref (ok), as the same message with the
 * same tables, and refuse it otherwise, its tables as they were; then
 * brought back in step with the reference's (the stream goes on after a
 * tree that is not a message). */
static void
directCheck(Tables* t, const uint8_t* data, size_t len, bool ok,
            const CorCorMessage* ref)
{
    unsigned names = corCorTablesNames(t->direct);
    unsigned namespaces = corCorTablesNamespaces(t->direct);
    CorCorMessage m;
    CorCorHead h;
    json_t* tree;
    int rc = corCorEnvelopeRead(t->direct, data, len, FUZZ_FRAME_MAX, &h, &m,
                                NULL, 0);

    if ((rc == 0) != ok || (ok && !sameMessage(ref, &m))
        || (!ok && !tablesAt(t->direct, names, namespaces))) {
        abort();
    }
    corCorMessageClear(&m);
    if (!ok
        && corCorFrameDecode(t->direct, data, len, FUZZ_FRAME_MAX, &h, &tree,
                             NULL, 0)
               == 0) {
        json_decref(tree);
    }
    if (!tablesAt(t->direct, corCorTablesNames(t->received),
                  corCorTablesNamespaces(t->received))) {
        abort();
    }
}

/* A frame whose tree decoded: as a message, through both decoders, and
 * (when it is one) on to a second hop. */
static void
messageCheck(Tables* t, CorCorType type, json_t* tree, const uint8_t* data,
             size_t len)
{
    CorCorMessage m = { 0 };
    bool ok = tree != NULL
              && (type == COR_COR_REQUEST || type == COR_COR_RESPONSE)
              && corCorMessageRead(type, json_incref(tree), &m, NULL, 0) == 0;

    directCheck(t, data, len, ok, &m);
    if (ok) {
        messageHop(t, type, &m);
        corCorMessageClear(&m);
    }
}

/* Write the frame decoded (its head h, its tree) again into b, flags
 * and all: a DATA frame's bytes as they came. */
static int
frameAgain(Tables* t, const CorCorHead* h, const json_t* tree,
           const uint8_t* data, size_t len, CorBuf* b)
{
    int rc;

    if (h->type == COR_COR_DATA) {
        return corCorDataEncode(b, h->id, h->flags, data + COR_COR_HEAD_LEN,
                                len - COR_COR_HEAD_LEN);
    }
    rc = corCorFrameEncode(t->mirror, h->type, h->id, tree, b, NULL, 0);
    if (rc >= 0) {
        corCorHeadFlagsSet(b->data, h->flags);
    }
    return rc;
}

/* Decode one frame; returns its length, or 0 when it was refused. */
static size_t
frame(Tables* t, const uint8_t* data, size_t size)
{
    unsigned names = corCorTablesNames(t->received);
    unsigned namespaces = corCorTablesNamespaces(t->received);
    CorBuf b = { 0 };
    CorCorHead h;
    json_t* tree;
    size_t len;

    if (corCorHeadRead(data, size, FUZZ_FRAME_MAX, &h, NULL, 0) < 0) {
        return 0;
    }
    /* A length past the input makes a frame cut short: refused below. */
    len = COR_COR_HEAD_LEN
          + (h.length < size - COR_COR_HEAD_LEN ? h.length
                                                : size - COR_COR_HEAD_LEN);
    if (corCorFrameDecode(t->received, data, len, FUZZ_FRAME_MAX, &h, &tree,
                          NULL, 0)
        != 0) {
        if (!tablesAt(t->received, names, namespaces)) {
            abort();
        }
        directCheck(t, data, len, false, NULL);
        return 0;
    }
    if (frameAgain(t, &h, tree, data, len, &b) < 0
        || !sameBytes(b.data, b.len, data, len)
        || corCorTablesNames(t->mirror) != corCorTablesNames(t->received)
        || corCorTablesNamespaces(t->mirror)
               != corCorTablesNamespaces(t->received)) {
        abort();
    }
    messageCheck(t, h.type, tree, data, len);
    json_decref(tree);
    corBufFree(&b);
    return len;
}

/* The input as a body, then as a JSON text. */
static void
textHop(Tables* t, const uint8_t* data, size_t size)
{
    CorCorMessage m = { .status = 200, .body = data, .bodyLen = size };
    CorCorMessage back;
    CorBuf b = { 0 };
    json_t* tree;
    json_t* got;
    int rc;

    messageSend(t, COR_COR_RESPONSE, &m, &back);
    if (!sameMessage(&m, &back)) {
        abort();
    }
    corCorMessageClear(&back);
    tree = json_loadb((const char*)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL,
                      NULL);
    if (tree == NULL) {
        return;
    }
    rc = corCorTreeEncode(t->out, tree, &b, NULL, 0);
    /* The direct encoder's sender makes the same appends. */
    if (corCorTreeEncode(t->directOut, tree, &b, NULL, 0) != rc) {
        abort();
    }
    b.len = rc > 0 ? (size_t)rc : 0;
    if ((rc < 0 && rc != -EINVAL && rc != -E2BIG)
        || (rc > 0
            && (corCorTreeDecode(t->in, b.data, b.len, &got, NULL, 0) != 0
                || !json_equal(tree, got)))
        || corCorTablesNames(t->out) != corCorTablesNames(t->in)
        || corCorTablesNamespaces(t->out) != corCorTablesNamespaces(t->in)) {
        abort();
    }
    if (rc > 0) {
        json_decref(got);
    }
    json_decref(tree);
    corBufFree(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    Tables t = { corCorTablesNew(), corCorTablesNew(), corCorTablesNew(),
                 corCorTablesNew(), corCorTablesNew(), corCorTablesNew() };
    size_t pos = 0;
    size_t n;

    if (t.received == NULL || t.mirror == NULL || t.out == NULL || t.in == NULL
        || t.direct == NULL || t.directOut == NULL) {
        abort();
    }
    if (size < 4 || memcmp(data, "\xc0\x4f\x52\x01", 4) != 0) {
        textHop(&t, data, size);
    }
    while (pos < size && (n = frame(&t, data + pos, size - pos)) > 0) {
        pos += n;
    }
    corCorTablesFree(t.received);
    corCorTablesFree(t.mirror);
    corCorTablesFree(t.out);
    corCorTablesFree(t.in);
    corCorTablesFree(t.direct);
    corCorTablesFree(t.directOut);
    return 0;
}
