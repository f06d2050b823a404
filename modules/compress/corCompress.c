/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/compress: answers compressed as the client accepts them, a
 * response filter (corFilterAdd) on every answer of the generation:
 *
 *     modules:
 *       - load: compress
 *         encodings: [ zstd, br, gzip ]  (the server's order of choice)
 *         min_bytes: 256                 (a shorter known body: as is)
 *         types: [ text/html, application/json ]  (default: below)
 *         level: { gzip: 6, br: 4, zstd: 3 }
 *     routes:
 *       - { match: "POST /account", handler: app, filters: { compress: off } }
 *
 * The head decides: a compressible type (Vary: Accept-Encoding is added
 * then, compressed or not, so that a cache keeps the variants apart), an
 * answer with a body to change (not 1xx, 204, 206, 304; a HEAD's head
 * says what its GET's does, though no body follows),
 * none already encoded, no Cache-Control: no-transform, a length known
 * and under min_bytes (a stream's is unknown: compressed), an encoding
 * the client accepts. Then Content-Length goes (the body is chunked on
 * HTTP/1.1, plain DATA frames on h2, or in memory its new length),
 * Content-Encoding is said, and an ETag made weak (the bytes differ, the
 * content is the same). The body passes through an encoder of the
 * request's: in pieces, in bounded memory, flushed at the end.
 */
#include "corCompressInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The media types compressed when the YAML names none: text, and the
 * text-like application types; images, audio, video and archives are
 * compressed already. */
static const char* const typesDefault[] = { "text/*",
                                            "application/json",
                                            "application/javascript",
                                            "application/xml",
                                            "application/xhtml+xml",
                                            "application/rss+xml",
                                            "application/atom+xml",
                                            "application/ld+json",
                                            "application/manifest+json",
                                            "application/wasm",
                                            "application/x-yaml",
                                            "application/yaml",
                                            "application/graphql-response+json",
                                            "application/problem+json",
                                            "image/svg+xml",
                                            "image/x-icon",
                                            "font/ttf",
                                            "font/otf",
                                            NULL };

/* The settings; the module's, from init to exit. */
typedef struct {
    CorCoding prefer[COR_CODINGS];
    unsigned preferCount;
    uint64_t minBytes;
    int level[COR_CODINGS];
    char** types; /* "type/subtype", or a top type and a
                     star for all of its subtypes */
    unsigned typeCount;
} Compress;

static Compress settings;

/* ---- The filter ---------------------------------------------------------- */

/* Whether the media type (parameters after ';' ignored) is one to
 * compress. */
static bool
typeCompressible(const char* type)
{
    size_t n;

    if (type == NULL) {
        return false;
    }
    n = strcspn(type, "; \t");
    for (unsigned i = 0; i < settings.typeCount; i++) {
        const char* t = settings.types[i];
        size_t tn = strlen(t);

        if (tn >= 2 && t[tn - 1] == '*' && t[tn - 2] == '/') {
            if (n >= tn - 1 && strncasecmp(type, t, tn - 1) == 0) {
                return true;
            }
        } else if (n == tn && strncasecmp(type, t, n) == 0) {
            return true;
        }
    }
    return false;
}

/* Vary lists Accept-Encoding (once, beside what the handler said). */
static void
varyAdd(CorRequest* r)
{
    const CorHeader* vary = corResponseHeaderGet(r, "Vary");
    char* value;

    if (vary == NULL) {
        corResponseHeader(r, "Vary", "Accept-Encoding");
        return;
    }
    if (corHeaderListHas(vary, "accept-encoding", 15)
        || corHeaderListHas(vary, "*", 1)) {
        return;
    }
    if (asprintf(&value, "%.*s, Accept-Encoding", (int)vary->valueLen,
                 vary->value)
        < 0) {
        return;
    }
    corResponseHeaderRemove(r, "Vary");
    corResponseHeader(r, "Vary", value);
    free(value);
}

/* A strong ETag made weak: "x" -> W/"x". */
static void
etagWeaken(CorRequest* r)
{
    const CorHeader* etag = corResponseHeaderGet(r, "ETag");
    char* value;

    if (etag == NULL
        || (etag->valueLen >= 2 && etag->value[0] == 'W'
            && etag->value[1] == '/')) {
        return;
    }
    if (asprintf(&value, "W/%.*s", (int)etag->valueLen, etag->value) < 0) {
        return;
    }
    corResponseHeaderRemove(r, "ETag");
    corResponseHeader(r, "ETag", value);
    free(value);
}

/* The body's length when it is known: a body in memory or a file's, or
 * the Content-Length a handler gave to a stream or to a HEAD it answered
 * without the body (a proxy's); UINT64_MAX when not. */
static uint64_t
lengthKnown(const CorRequest* r)
{
    const CorHeader* h;
    uint64_t n = 0;

    if (r->stream == NULL
        && (!r->head || r->fileFd >= 0 || r->responseLen > 0)) {
        return r->responseLen;
    }
    h = corResponseHeaderGet(r, "Content-Length");
    if (h == NULL || h->valueLen == 0 || h->valueLen > 18) {
        return UINT64_MAX;
    }
    for (size_t k = 0; k < h->valueLen; k++) {
        if (h->value[k] < '0' || h->value[k] > '9') {
            return UINT64_MAX;
        }
        n = n * 10 + (uint64_t)(h->value[k] - '0');
    }
    return n;
}

/* Whether r's body may be changed at all: one there is (or would be, for
 * a HEAD, whose head is its GET's), not a status without one, not a part
 * of a whole, not encoded yet, and its handler does not forbid it. */
static bool
bodyChangeable(const CorRequest* r)
{
    const CorHeader* cc = corResponseHeaderGet(r, "Cache-Control");

    return r->status >= 200 && r->status != 204 && r->status != 206
           && r->status != 304
           && corResponseHeaderGet(r, "Content-Encoding") == NULL
           && (cc == NULL || !corHeaderListHas(cc, "no-transform", 12));
}

static void*
compressHead(CorRequest* r, void* arg)
{
    const CorHeader* accept;
    const char* type = r->contentType;
    CompressEncoder* e;
    uint64_t length;
    int encoding;

    (void)arg;
    if (type == NULL) {
        const CorHeader* h = corResponseHeaderGet(r, "Content-Type");

        type = h != NULL ? h->value : NULL;
    }
    if (r->status < 200 || r->status == 204 || !typeCompressible(type)
        || corResponseHeaderGet(r, "Content-Encoding") != NULL) {
        return NULL;
    }
    varyAdd(r);
    length = lengthKnown(r);
    if (!bodyChangeable(r)
        || (length != UINT64_MAX && length < settings.minBytes)) {
        return NULL;
    }
    accept = corRequestHeader(r, "Accept-Encoding");
    encoding = accept == NULL
                   ? -1
                   : corAcceptEncodingFirst(accept->value, accept->valueLen,
                                            settings.prefer,
                                            settings.preferCount);
    if (encoding < 0) {
        return NULL;
    }
    e = corRequestAlloc(r, sizeof(*e));
    /* Only a length the body is held to is pledged (zstd fails a body
     * that differs from it): a stream's header may be an upstream's, and
     * a HEAD's body is never read. */
    if (e == NULL
        || corCompressEncoderInit(e, (CorCoding)encoding,
                                  settings.level[encoding],
                                  r->stream == NULL && !r->head ? length : 0)
               != 0) {
        corLog(COR_LOG_WARN, "compress: no memory for an encoder: the "
                             "answer goes out as it is");
        return NULL;
    }
    corResponseHeaderRemove(r, "Content-Length");
    corResponseHeader(r, "Content-Encoding", corCodingNames[encoding]);
    etagWeaken(r);
    return e;
}

static int
compressBody(CorRequest* r, void* ctx, const void* data, size_t len,
             unsigned flags, CorFilterOut* out)
{
    (void)r;
    return corCompressEncode(ctx, data, len, flags, out);
}

static void
compressEnd(CorRequest* r, void* ctx)
{
    (void)r;
    corCompressEncoderFree(ctx);
}

/* ---- Configuration ------------------------------------------------------- */

/* encodings: [ zstd, br, gzip ]: each at most once. */
static int
encodingsRead(CorModule* m, const CorConf* conf)
{
    const CorConf* list = corConfSeq(conf, "encodings", corModuleErrors(m));
    size_t count = corConfCount(list);

    if (list == NULL) {
        for (int i = 0; i < COR_CODINGS; i++) {
            settings.prefer[settings.preferCount++] = (CorCoding)i;
        }
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        const char* name = corConfText(corConfAt(list, i));
        int found = -1;

        for (int k = 0; name != NULL && k < COR_CODINGS; k++) {
            if (strcmp(name, corCodingNames[k]) == 0) {
                found = k;
            }
        }
        for (unsigned k = 0; found >= 0 && k < settings.preferCount; k++) {
            if (settings.prefer[k] == (CorCoding)found) {
                found = -2;
            }
        }
        if (found < 0) {
            corModuleError(m, corConfAt(list, i),
                           "encodings: expected "
                           "zstd, br or gzip, each once, got '%s'",
                           name != NULL ? name : "a list or mapping");
            return -1;
        }
        settings.prefer[settings.preferCount++] = (CorCoding)found;
    }
    return 0;
}

/* level: { gzip: 1..9, br: 0..11, zstd: 1..19 }. */
static void
levelsRead(CorModule* m, const CorConf* conf)
{
    static const int range[COR_CODINGS][3] = {
        [COR_CODING_ZSTD] = { 3, 1, 19 },
        [COR_CODING_BR] = { 4, 0, 11 },
        [COR_CODING_GZIP] = { 6, 1, 9 },
    };
    static const char* const keys[] = { "zstd", "br", "gzip", NULL };
    CorConfErrors* e = corModuleErrors(m);
    const CorConf* map = corConfMap(conf, "level", e);

    for (int i = 0; i < COR_CODINGS; i++) {
        settings.level[i] = (int)corConfInt(map, corCodingNames[i], range[i][0],
                                            range[i][1], range[i][2], e);
    }
    if (map != NULL) {
        corConfUnknownKeys(map, "level", keys, e);
    }
}

static int
typeAdd(const char* type)
{
    char* copy = strdup(type);
    char** grown = realloc(settings.types,
                           (settings.typeCount + 1) * sizeof(char*));

    if (copy == NULL || grown == NULL) {
        free(copy);
        if (grown != NULL) {
            settings.types = grown;
        }
        return -1;
    }
    settings.types = grown;
    settings.types[settings.typeCount++] = copy;
    return 0;
}

/* types: media types (application/json), or a top type and a star
 * (text and every subtype); without it, typesDefault. */
static int
typesRead(CorModule* m, const CorConf* conf)
{
    const CorConf* list = corConfSeq(conf, "types", corModuleErrors(m));

    if (list == NULL) {
        for (unsigned i = 0; typesDefault[i] != NULL; i++) {
            if (typeAdd(typesDefault[i]) != 0) {
                corModuleError(m, conf, "no memory");
                return -1;
            }
        }
        return 0;
    }
    for (size_t i = 0; i < corConfCount(list); i++) {
        const char* type = corConfText(corConfAt(list, i));

        if (type == NULL || strchr(type, '/') == NULL
            || strpbrk(type, " \t;") != NULL) {
            corModuleError(m, corConfAt(list, i),
                           "types: expected a media "
                           "type such as application/json or text/*, got "
                           "'%s'",
                           type != NULL ? type : "a list or mapping");
            return -1;
        }
        if (typeAdd(type) != 0) {
            corModuleError(m, conf, "no memory");
            return -1;
        }
    }
    return 0;
}

static void
compressExit(CorModule* m)
{
    (void)m;
    for (unsigned i = 0; i < settings.typeCount; i++) {
        free(settings.types[i]);
    }
    free(settings.types);
    settings = (Compress){ 0 };
}

static int
compressInit(CorModule* m, const CorConf* conf)
{
    CorConfErrors* e = corModuleErrors(m);
    unsigned before = e->count;

    settings = (Compress){ 0 };
    settings.minBytes = corConfSize(conf, "min_bytes", 256, 0,
                                    (uint64_t)1 << 40, e);
    levelsRead(m, conf);
    if (encodingsRead(m, conf) != 0 || typesRead(m, conf) != 0
        || e->count != before) {
        return -1;
    }
    return corFilterAdd(m, &(CorFilter){ .name = "compress",
                                         .head = compressHead,
                                         .body = compressBody,
                                         .end = compressEnd });
}

COR_MODULE(compress, .init = compressInit, .exit = compressExit);
