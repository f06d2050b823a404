/* SPDX-License-Identifier: Apache-2.0 */
/*
 * precompressed: on: a file's variants compressed ahead, NAME.zst,
 * NAME.br and NAME.gz beside it, served in its place to a client that
 * takes their coding, as nginx's gzip_static and Caddy's precompressed
 * do. Apart from the module that compresses on the fly (the core reads
 * Accept-Encoding for both): a variant costs nothing to send, so the
 * client's q chooses, the smaller coding on a tie (zstd, br, gzip).
 *
 * The variant is its own representation: its length, its ranges, its
 * validators (its own size and time, its ETag marked with its coding so
 * that it never equals the plain file's even when gzip -k kept the
 * time); only the media type is the file's. Vary: Accept-Encoding goes
 * on every answer of a file that has a variant, the plain one too, so
 * that a cache keeps them apart.
 */
#include "corStaticInt.h"

#include <string.h>
#include <unistd.h>

/* The extension of each coding's variant. */
static const char* const extensions[COR_CODINGS] = {
    [COR_CODING_ZSTD] = ".zst",
    [COR_CODING_BR] = ".br",
    [COR_CODING_GZIP] = ".gz",
};

/* The codings in the order to look for them: the client's weight, the
 * higher first, then the smaller coding (the enum's order); those the
 * client refuses last, looked for only to say Vary. */
static void
orderByWeight(const unsigned weights[COR_CODINGS], CorCoding order[COR_CODINGS])
{
    for (int i = 0; i < COR_CODINGS; i++) {
        int at = i;

        while (at > 0 && weights[order[at - 1]] < weights[i]) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = (CorCoding)i;
    }
}

/* The ETag of a variant: the file's own, its coding before the closing
 * quote ("1f-2a" to "1f-2a-br"). */
static void
etagMark(StaticFile* v, CorCoding coding)
{
    const char* name = corCodingNames[coding];
    size_t nameLen = strlen(name);
    size_t n = strlen(v->etag);

    if (n >= 2 && n + 1 + nameLen < sizeof(v->etag)) {
        char* at = v->etag + n - 1;

        *at++ = '-';
        memcpy(at, name, nameLen);
        at += nameLen;
        *at++ = '"';
        *at = '\0';
    }
}

/* Vary lists Accept-Encoding, once. */
static void
varySay(CorRequest* r)
{
    const CorHeader* vary = corResponseHeaderGet(r, "Vary");

    if (vary == NULL || !corHeaderListHas(vary, "accept-encoding", 15)) {
        corResponseHeader(r, "Vary", "Accept-Encoding");
    }
}

void
corStaticVariantTake(CorRequest* r, const StaticRoot* root, const char* rel,
                     StaticFile* f)
{
    const CorHeader* accept = corRequestHeader(r, "accept-encoding");
    size_t relLen = strlen(rel);
    unsigned weights[COR_CODINGS];
    CorCoding order[COR_CODINGS];
    char* name = corRequestAlloc(r, relLen + 5);

    if (name == NULL) {
        return; /* the plain file does */
    }
    corAcceptEncodingWeights(accept != NULL ? accept->value : NULL,
                             accept != NULL ? accept->valueLen : 0, weights);
    orderByWeight(weights, order);
    for (int i = 0; i < COR_CODINGS; i++) {
        CorCoding coding = order[i];
        StaticFile v;

        memcpy(name, rel, relLen);
        strcpy(name + relLen, extensions[coding]);
        if (corStaticCacheOpen(root, name, &v) != 0) {
            continue; /* none, or one that may not be served */
        }
        if (v.dir) {
            continue;
        }
        varySay(r);
        if (weights[coding] == 0) {
            close(v.fd); /* the client takes none that is here */
            return;
        }
        close(f->fd);
        v.type = f->type;
        etagMark(&v, coding);
        *f = v;
        corResponseHeader(r, "Content-Encoding", corCodingNames[coding]);
        return;
    }
}
