/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of modules/compress: an encoder's state, as the module's
 * files share it. The encodings and Accept-Encoding are the core's
 * (corAcceptEncoding.h).
 */
#ifndef COR_COMPRESS_INT_H
#define COR_COMPRESS_INT_H

#include "cor.h"

/* What one encoder has made and not passed on yet is at most this: a
 * piece to the client is this large, or what a flush or the end left. */
#define COMPRESS_OUT_BYTES ((size_t)16 * 1024)

/* One answer's encoder: the request's (its arena), the library's state
 * let go by corCompressEncoderFree. */
typedef struct {
    CorCoding encoding;
    void* state; /* z_stream*, BrotliEncoderState*,
                    ZSTD_CCtx* */
    bool dirty;  /* input came since the last flush */
    /* gzip of a body known whole (corCompressWhole.c), whole true: its
     * bytes kept until its end, at the level; state NULL. */
    bool wholeMode;
    int level;
    unsigned char* whole;
    size_t wholeLen;
    size_t wholeCap;
    size_t outLen;
    unsigned char out[COMPRESS_OUT_BYTES];
} CompressEncoder;

/* A gzip body of a known length up to this is deflated whole (libdeflate)
 * once it is all there: it is held meanwhile, no more than zlib's state
 * for a stream (256 KiB) would take. */
#define COMPRESS_WHOLE_MAX ((uint64_t)256 * 1024)

/* Start e for encoding at level (the encoding's own scale); sizeHint is
 * the body's length when known, else 0. Returns 0 or -ENOMEM. */
int corCompressEncoderInit(CompressEncoder* e, CorCoding encoding, int level,
                           uint64_t sizeHint);
/* Compress len bytes, passing full pieces on to out; flags as a filter's
 * body gets them (a flush or the end passes on all that is made).
 * Returns 0, -EIO (the library failed) or what is after it failed. */
int corCompressEncode(CompressEncoder* e, const void* data, size_t len,
                      unsigned flags, CorFilterOut* out);
void corCompressEncoderFree(CompressEncoder* e);
/* corCompressEncode for a body deflated whole (e->wholeMode). */
int corCompressWholeEncode(CompressEncoder* e, const void* data, size_t len,
                           unsigned flags, CorFilterOut* out);

#endif /* COR_COMPRESS_INT_H */
