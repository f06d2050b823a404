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
 *     body byte for byte (the chain's condition).
 *
 * Build: see `make fuzz` (clang -fsanitize=fuzzer,address,undefined, the
 * codec's files, -ljansson).
 */
#include "corCorCodec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* Keep each run small: the limit is the receiver's to choose. */
#define FUZZ_FRAME_MAX ((uint32_t)1 << 20)

typedef struct {
    CorCorTables* received;     /* what the input's frames go through */
    CorCorTables* mirror;       /* the sender those frames came from */
    CorCorTables* out;          /* a second hop: sent, */
    CorCorTables* in;           /* and received */
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
        || a->status != b->status
        || !sameString(a->contentType, b->contentType)
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

/* Send the message in tree again, through t->out and t->in. */
static void
messageHop(Tables* t, CorCorType type, json_t* tree)
{
    CorCorMessage m;
    CorCorMessage again;
    CorCorBuf b = { 0 };
    CorCorHead h;
    json_t* sent;
    json_t* got;

    if (corCorMessageRead(type, json_incref(tree), &m, NULL, 0) != 0) {
        return;
    }
    /* What was read, the sender can carry. */
    sent = corCorMessageTree(type, &m, NULL, 0);
    if (sent == NULL
        || corCorFrameEncode(t->out, type, 1, sent, &b, NULL, 0) <= 0
        || corCorFrameDecode(t->in, b.data, b.len, COR_COR_FRAME_MAX, &h,
                             &got, NULL, 0) != 0
        || corCorMessageRead(type, got, &again, NULL, 0) != 0) {
        abort();
    }
    if (!sameMessage(&m, &again)) {
        abort();
    }
    corCorMessageClear(&again);
    corCorMessageClear(&m);
    json_decref(sent);
    corCorBufFree(&b);
}

/* Decode one frame; returns its length, or 0 when it was refused. */
static size_t
frame(Tables* t, const uint8_t* data, size_t size)
{
    unsigned names = corCorTablesNames(t->received);
    unsigned namespaces = corCorTablesNamespaces(t->received);
    CorCorBuf b = { 0 };
    CorCorHead h;
    json_t* tree;
    size_t len;

    if (corCorHeadRead(data, size, FUZZ_FRAME_MAX, &h, NULL, 0) < 0) {
        return 0;
    }
    /* A length past the input makes a frame cut short: refused below. */
    len = COR_COR_HEAD_LEN + (h.length < size - COR_COR_HEAD_LEN
                                  ? h.length
                                  : size - COR_COR_HEAD_LEN);
    if (corCorFrameDecode(t->received, data, len, FUZZ_FRAME_MAX, &h, &tree,
                          NULL, 0) != 0) {
        if (corCorTablesNames(t->received) != names
            || corCorTablesNamespaces(t->received) != namespaces) {
            abort();
        }
        return 0;
    }
    if (corCorFrameEncode(t->mirror, h.type, h.id, tree, &b, NULL, 0) < 0
        || !sameBytes(b.data, b.len, data, len)
        || corCorTablesNames(t->mirror) != corCorTablesNames(t->received)
        || corCorTablesNamespaces(t->mirror)
               != corCorTablesNamespaces(t->received)) {
        abort();
    }
    if (tree != NULL
        && (h.type == COR_COR_REQUEST || h.type == COR_COR_RESPONSE)) {
        messageHop(t, h.type, tree);
    }
    json_decref(tree);
    corCorBufFree(&b);
    return len;
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    Tables t = { corCorTablesNew(), corCorTablesNew(), corCorTablesNew(),
                 corCorTablesNew() };
    size_t pos = 0;
    size_t n;

    if (t.received == NULL || t.mirror == NULL || t.out == NULL
        || t.in == NULL) {
        abort();
    }
    while (pos < size && (n = frame(&t, data + pos, size - pos)) > 0) {
        pos += n;
    }
    corCorTablesFree(t.received);
    corCorTablesFree(t.mirror);
    corCorTablesFree(t.out);
    corCorTablesFree(t.in);
    return 0;
}
