/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request as whoever holds one reads it: its memory (the arena, freed
 * whole at the request's end), its headers and its query, the handler it
 * went to, and whether it was cancelled. Its handler, the core's
 * responders (corRespond.c, corStream.c), the access log and the limits
 * read it so; where it runs and how it ends is corRequest.c's, which
 * calls them and which none of them calls.
 */
#include "corCoreInt.h"
#include "corKit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A request's arena starts small, since a request that waits holds it
 * for as long as it waits (a query parameter or two is what most take),
 * and each further chunk doubles, up to ARENA_CHUNK_MAX. Sizes are whole
 * chunks, header included, so that each is a block this thread keeps
 * once the request is over (corChunkTake): a request takes its chunks
 * back from the last one's. */
#define ARENA_CHUNK_FIRST 512
#define ARENA_CHUNK_MAX 4096

struct CorArenaChunk {
    CorArenaChunk* next;
    size_t used;
    size_t size; /* of data */
    max_align_t data[];
};

/* ---- Memory -------------------------------------------------------------- */

void*
corRequestAlloc(CorRequest* r, size_t size)
{
    CorArenaChunk* chunk = r->arena;
    size_t aligned;
    void* p;

    /* Past this the rounding, or the chunk's header, would wrap. */
    if (size > SIZE_MAX - sizeof(*chunk) - sizeof(max_align_t)) {
        return NULL;
    }
    aligned = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    if (chunk == NULL || chunk->size - chunk->used < aligned) {
        size_t last = chunk == NULL ? 0 : chunk->size + sizeof(*chunk);
        size_t grow = last == 0                ? ARENA_CHUNK_FIRST
                      : last < ARENA_CHUNK_MAX ? last * 2
                                               : ARENA_CHUNK_MAX;
        size_t block = aligned + sizeof(*chunk) > grow
                           ? aligned + sizeof(*chunk)
                           : grow;

        chunk = corChunkTake(&block);
        if (chunk == NULL) {
            return NULL;
        }
        chunk->next = r->arena;
        chunk->used = 0;
        chunk->size = block - sizeof(*chunk);
        r->arena = chunk;
    }
    p = (char*)chunk->data + chunk->used;
    chunk->used += aligned;
    return p;
}

void
corRequestArenaFree(CorRequest* r)
{
    while (r->arena != NULL) {
        CorArenaChunk* next = r->arena->next;

        corChunkGive(r->arena, r->arena->size + sizeof(*r->arena));
        r->arena = next;
    }
}

/* ---- Reading the request ------------------------------------------------- */

const CorHeader*
corRequestHeader(const CorRequest* r, const char* name)
{
    return corHeadersFind(r->headers, r->headerCount, name);
}

const char*
corRequestHeaderText(CorRequest* r, const char* name)
{
    const CorHeader* h = corRequestHeader(r, name);
    char* text;

    if (h == NULL || (text = corRequestAlloc(r, h->valueLen + 1)) == NULL) {
        return NULL;
    }
    memcpy(text, h->value, h->valueLen);
    text[h->valueLen] = '\0';
    return text;
}

static int
hexValue(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decode (and '+' to space, as forms send) into out. */
static void
queryDecode(const char* in, size_t len, char* out)
{
    for (size_t i = 0; i < len; i++) {
        if (in[i] == '%' && i + 2 < len && hexValue(in[i + 1]) >= 0
            && hexValue(in[i + 2]) >= 0) {
            *out++ = (char)(hexValue(in[i + 1]) * 16 + hexValue(in[i + 2]));
            i += 2;
        } else {
            *out++ = in[i] == '+' ? ' ' : in[i];
        }
    }
    *out = '\0';
}

const char*
corRequestQuery(CorRequest* r, const char* key)
{
    size_t keyLen = strlen(key);
    const char* p = r->query;
    const char* end = r->query + r->queryLen;

    while (p != NULL && p < end) {
        const char* amp = memchr(p, '&', (size_t)(end - p));
        const char* stop = amp ? amp : end;
        const char* eq = memchr(p, '=', (size_t)(stop - p));
        const char* nameEnd = eq ? eq : stop;

        if ((size_t)(nameEnd - p) == keyLen && memcmp(p, key, keyLen) == 0) {
            const char* value = eq ? eq + 1 : stop;
            char* out = corRequestAlloc(r, (size_t)(stop - value) + 1);

            if (out != NULL) {
                queryDecode(value, (size_t)(stop - value), out);
            }
            return out;
        }
        p = stop + 1;
    }
    return NULL;
}

const char*
corRequestHandlerName(const CorRequest* r)
{
    return r->handler != NULL ? r->handler->handler.name : "-";
}

void*
corRequestHandlerArg(const CorRequest* r)
{
    return r->handler != NULL ? r->handler->handler.arg : NULL;
}

bool
corRequestCancelled(const CorRequest* r)
{
    return corRestCancelled(&r->cancel);
}
