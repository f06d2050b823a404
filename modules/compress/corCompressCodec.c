/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The encoders: gzip (zlib's deflate with the gzip wrapper; a short body
 * known whole goes to corCompressWhole.c instead), br
 * (libbrotlienc), zstd (libzstd), each driven the same way: a step takes
 * what it can of the input into the encoder's output buffer and says
 * whether it must be called again (the buffer filled, or a flush or the
 * end is not through); a full buffer is passed on as one piece. So a
 * body of any length passes in the encoder's window and one buffer, and
 * what the library holds back between pieces comes out at a flush.
 */
#include "corCompressInt.h"

#include <brotli/encode.h>
#include <errno.h>
#include <stdlib.h>
#include <zlib.h>
#include <zstd.h>

/* What a step is asked: go on, give up what is held, end. */
typedef enum { STEP_GO, STEP_FLUSH, STEP_END } StepMode;

/* Brotli's window: 2^18 bytes, a quarter of its default, since every
 * answer in flight has its own (the ratio lost on text is small). */
#define BROTLI_WINDOW_BITS 18

/* One call of the library: takes from *inP and *lenP, adds at e->outLen.
 * Returns 1 to be called again, 0 when through, -1 on failure. */
static int
gzipStep(CompressEncoder* e, const unsigned char** inP, size_t* lenP,
         StepMode mode)
{
    static const int flush[] = { Z_NO_FLUSH, Z_SYNC_FLUSH, Z_FINISH };
    z_stream* z = e->state;
    int rc;

    z->next_in = (unsigned char*)*inP;
    z->avail_in = (uInt)*lenP;
    z->next_out = e->out + e->outLen;
    z->avail_out = (uInt)(COMPRESS_OUT_BYTES - e->outLen);
    rc = deflate(z, flush[mode]);
    *inP = z->next_in;
    *lenP = z->avail_in;
    e->outLen = COMPRESS_OUT_BYTES - z->avail_out;
    if (rc == Z_STREAM_ERROR) {
        return -1;
    }
    if (mode == STEP_END) {
        return rc != Z_STREAM_END;
    }
    return *lenP > 0 || z->avail_out == 0;
}

static int
brotliStep(CompressEncoder* e, const unsigned char** inP, size_t* lenP,
           StepMode mode)
{
    static const BrotliEncoderOperation op[] = { BROTLI_OPERATION_PROCESS,
                                                 BROTLI_OPERATION_FLUSH,
                                                 BROTLI_OPERATION_FINISH };
    size_t availOut = COMPRESS_OUT_BYTES - e->outLen;
    unsigned char* nextOut = e->out + e->outLen;

    if (!BrotliEncoderCompressStream(e->state, op[mode], lenP, inP, &availOut,
                                     &nextOut, NULL)) {
        return -1;
    }
    e->outLen = COMPRESS_OUT_BYTES - availOut;
    if (mode == STEP_END) {
        return !BrotliEncoderIsFinished(e->state);
    }
    return *lenP > 0 || BrotliEncoderHasMoreOutput(e->state);
}

static int
zstdStep(CompressEncoder* e, const unsigned char** inP, size_t* lenP,
         StepMode mode)
{
    static const ZSTD_EndDirective directive[] = { ZSTD_e_continue,
                                                   ZSTD_e_flush, ZSTD_e_end };
    ZSTD_inBuffer in = { *inP, *lenP, 0 };
    ZSTD_outBuffer out = { e->out, COMPRESS_OUT_BYTES, e->outLen };
    size_t left = ZSTD_compressStream2(e->state, &out, &in, directive[mode]);

    if (ZSTD_isError(left)) {
        return -1;
    }
    *inP += in.pos;
    *lenP -= in.pos;
    e->outLen = out.pos;
    if (mode == STEP_GO) {
        return *lenP > 0;
    }
    return left != 0;
}

typedef int (*StepFn)(CompressEncoder* e, const unsigned char** inP,
                      size_t* lenP, StepMode mode);

static const StepFn steps[COR_CODINGS] = {
    [COR_CODING_ZSTD] = zstdStep,
    [COR_CODING_BR] = brotliStep,
    [COR_CODING_GZIP] = gzipStep,
};

static int
gzipInit(CompressEncoder* e, int level)
{
    z_stream* z = calloc(1, sizeof(*z));

    /* 15 bits of window, +16: the gzip wrapper (RFC 1952), not zlib's. */
    if (z == NULL
        || deflateInit2(z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY)
               != Z_OK) {
        free(z);
        return -ENOMEM;
    }
    e->state = z;
    return 0;
}

static int
brotliInit(CompressEncoder* e, int level, uint64_t sizeHint)
{
    BrotliEncoderState* s = BrotliEncoderCreateInstance(NULL, NULL, NULL);

    if (s == NULL) {
        return -ENOMEM;
    }
    BrotliEncoderSetParameter(s, BROTLI_PARAM_QUALITY, (uint32_t)level);
    BrotliEncoderSetParameter(s, BROTLI_PARAM_LGWIN, BROTLI_WINDOW_BITS);
    BrotliEncoderSetParameter(s, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT);
    if (sizeHint > 0 && sizeHint < UINT32_MAX) {
        BrotliEncoderSetParameter(s, BROTLI_PARAM_SIZE_HINT,
                                  (uint32_t)sizeHint);
    }
    e->state = s;
    return 0;
}

static int
zstdInit(CompressEncoder* e, int level, uint64_t sizeHint)
{
    ZSTD_CCtx* cctx = ZSTD_createCCtx();

    if (cctx == NULL) {
        return -ENOMEM;
    }
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    /* A known length is said in the frame and sizes the window to it. */
    if (sizeHint > 0) {
        ZSTD_CCtx_setPledgedSrcSize(cctx, sizeHint);
    }
    e->state = cctx;
    return 0;
}

int
corCompressEncoderInit(CompressEncoder* e, CorCoding encoding, int level,
                       uint64_t sizeHint)
{
    e->encoding = encoding;
    e->dirty = false;
    e->outLen = 0;
    e->state = NULL;
    e->wholeMode = encoding == COR_CODING_GZIP && sizeHint > 0
                   && sizeHint <= COMPRESS_WHOLE_MAX;
    e->level = level;
    e->whole = NULL;
    e->wholeLen = 0;
    e->wholeCap = (size_t)sizeHint;
    if (e->wholeMode) {
        return 0; /* its memory comes with its bytes */
    }
    switch (encoding) {
    case COR_CODING_ZSTD:
        return zstdInit(e, level, sizeHint);
    case COR_CODING_BR:
        return brotliInit(e, level, sizeHint);
    case COR_CODING_GZIP:
        return gzipInit(e, level);
    case COR_CODINGS:
        break;
    }
    return -EINVAL;
}

int
corCompressEncode(CompressEncoder* e, const void* data, size_t len,
                  unsigned flags, CorFilterOut* out)
{
    const unsigned char* in = data;
    StepMode mode = STEP_GO;
    int again;
    int rc;

    if (e->wholeMode) {
        return corCompressWholeEncode(e, data, len, flags, out);
    }
    if ((flags & COR_FILTER_LAST) != 0) {
        mode = STEP_END;
    } else if ((flags & COR_FILTER_FLUSH) != 0) {
        /* Nothing came since the last flush: a flush would only add an
         * empty block. */
        mode = e->dirty || len > 0 ? STEP_FLUSH : STEP_GO;
    }
    e->dirty = (e->dirty || len > 0) && mode == STEP_GO;
    if (len == 0 && mode == STEP_GO) {
        return 0;
    }
    do {
        again = steps[e->encoding](e, &in, &len, mode);
        if (again < 0) {
            return -EIO;
        }
        if (e->outLen == COMPRESS_OUT_BYTES
            || (again == 0 && mode != STEP_GO && e->outLen > 0)) {
            rc = corFilterPass(out, e->out, e->outLen);
            e->outLen = 0;
            if (rc < 0) {
                return rc;
            }
        }
    } while (again);
    return 0;
}

void
corCompressEncoderFree(CompressEncoder* e)
{
    free(e->whole);
    e->whole = NULL;
    if (e->state == NULL) {
        return;
    }
    switch (e->encoding) {
    case COR_CODING_ZSTD:
        ZSTD_freeCCtx(e->state);
        break;
    case COR_CODING_BR:
        BrotliEncoderDestroyInstance(e->state);
        break;
    case COR_CODING_GZIP:
        deflateEnd(e->state);
        free(e->state);
        break;
    case COR_CODINGS:
        break;
    }
    e->state = NULL;
}
