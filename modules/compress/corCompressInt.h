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
    void* state;                /* z_stream*, BrotliEncoderState*,
                                   ZSTD_CCtx* */
    bool dirty;                 /* input came since the last flush */
    size_t outLen;
    unsigned char out[COMPRESS_OUT_BYTES];
} CompressEncoder;

/* Start e for encoding at level (the encoding's own scale); sizeHint is
 * the body's length when known, else 0. Returns 0 or -ENOMEM. */
int corCompressEncoderInit(CompressEncoder* e, CorCoding encoding,
                           int level, uint64_t sizeHint);
/* Compress len bytes, passing full pieces on to out; flags as a filter's
 * body gets them (a flush or the end passes on all that is made).
 * Returns 0, -EIO (the library failed) or what is after it failed. */
int corCompressEncode(CompressEncoder* e, const void* data, size_t len,
                      unsigned flags, CorFilterOut* out);
void corCompressEncoderFree(CompressEncoder* e);

#endif /* COR_COMPRESS_INT_H */
