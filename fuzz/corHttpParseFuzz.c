/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the HTTP/1.1 request parser. Each input is parsed
 * as a request head; the rest, when the head says chunked (or the whole
 * input when no head parses), is decoded as a chunked body. Beyond the
 * sanitizers, it aborts when a property of the parser breaks:
 *
 *   - a prefix of the first 64 bytes waits (0) or gets the very answer the
 *     whole input gets, so a head split across reads parses the same;
 *   - a parsed head lies within the input, writes nothing past its target,
 *     and its path is decoded (no NUL, no dot segment) and followed by the
 *     query in the target;
 *   - a body decoded in two pieces, cut at any of its first 64 bytes, gives
 *     the same bytes, consumption and result as in one piece.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Icore -Ihttp
 *        http/corHttpParse.c fuzz/corHttpParseFuzz.c
 * Seeds: fuzz/corpus/http/.
 */
#include "corHttpParse.h"
#include "corPath.h"

#include <stdlib.h>
#include <string.h>

enum { COR_FUZZ_SPLITS = 64 };

static const CorHttpLimits limits = {
    .headerBytes = 2048,
    .maxHeaders = 24,
    .bodyBytes = 1 << 16,
};

static void
require(int condition)
{
    if (!condition) {
        abort();
    }
}

static char*
copyOf(const uint8_t* data, size_t size)
{
    char* p = malloc(size + 1);

    require(p != NULL);
    memcpy(p, data, size);
    return p;
}

static int
parseCopy(const uint8_t* data, size_t size, CorHttpRequestHead* head)
{
    char* buf = copyOf(data, size);
    int rc = corHttpParseHead(buf, size, &limits, head);

    free(buf);
    return rc;
}

static int
knownStatus(int rc)
{
    return rc == -400 || rc == -413 || rc == -414 || rc == -431 || rc == -501
           || rc == -505;
}

static int
within(const char* p, size_t n, const char* buf, size_t len)
{
    return p >= buf && p + n <= buf + len;
}

static void
checkHead(const uint8_t* data, const char* buf, size_t size,
          const CorHttpRequestHead* head, int rc)
{
    size_t len = (size_t)rc;
    const char* path = head->path;

    require(len <= size && len <= limits.headerBytes && head->headLen == len);
    /* Nothing after the head was touched. */
    require(memcmp(buf + len, data + len, size - len) == 0);
    require(within(head->method, head->methodLen, buf, len));
    require(within(head->target, head->targetLen, buf, len));
    require(head->headerCount <= limits.maxHeaders);
    for (unsigned i = 0; i < head->headerCount; i++) {
        require(
            within(head->headers[i].name, head->headers[i].nameLen, buf, len));
        require(within(head->headers[i].value, head->headers[i].valueLen, buf,
                       len));
    }
    if (head->query != NULL) {
        /* The query ends the target, even after the path was rewritten. */
        require(
            within(head->query, head->queryLen, head->target, head->targetLen));
        require(head->query[-1] == '?');
        require(head->query + head->queryLen == head->target + head->targetLen);
    }
    require(head->versionMinor == 0 || head->versionMinor == 1);
    require(head->versionMinor == 0 || head->host != NULL);
    require(!(head->chunked && head->contentLength >= 0));
    require(head->contentLength <= (int64_t)limits.bodyBytes);
    require(head->pathLen >= 1);
    if (path[0] == '*') {
        require(head->pathLen == 1);
        return;
    }
    require(path[0] == '/');
    require(head->pathLen == 1
            || within(path, head->pathLen, head->target, head->targetLen));
    require(memchr(path, '\0', head->pathLen) == NULL);
    for (size_t i = 0; i < head->pathLen; i++) {
        size_t e = i + 1;

        if (path[i] != '/') {
            continue;
        }
        while (e < head->pathLen && path[e] != '/') {
            e++;
        }
        require(!(e - i == 2 && path[i + 1] == '.'));
        require(!(e - i == 3 && path[i + 1] == '.' && path[i + 2] == '.'));
        require(!(e - i == 1 && e < head->pathLen)); /* no "//" */
    }
}

/* The raw path (the path as sent) decodes to the path the parser gives,
 * and so does its escaped normal form (what a strip_prefix cuts): a
 * proxy passing either on sends what the routes saw. */
static void
checkRawPath(const CorHttpRequestHead* head)
{
    char target[4096 + 16];
    CorHttpTarget t;
    int n;

    require(head->rawPath != NULL && head->rawPathLen >= 1);
    if (head->path[0] == '*') {
        return;
    }
    require(head->rawPath[0] == '/');
    require(head->rawPathLen < sizeof(target));
    memcpy(target, head->rawPath, head->rawPathLen);
    require(corHttpTargetDecode(target, head->rawPathLen, &t) == 0);
    require(t.pathLen == head->pathLen
            && memcmp(t.path, head->path, t.pathLen) == 0);
    n = corPathEscapedNormal(head->rawPath, head->rawPathLen, target);
    require(n > 0);
    require(corHttpTargetDecode(target, (size_t)n, &t) == 0);
    require(t.pathLen == head->pathLen
            && memcmp(t.path, head->path, t.pathLen) == 0);
}

static void
checkQuery(const CorHttpRequestHead* head)
{
    CorHttpQueryParam params[8];
    char* out;
    int n;

    if (head->query == NULL) {
        return;
    }
    out = malloc(head->queryLen + 1);
    require(out != NULL);
    n = corHttpQueryParse(head->query, head->queryLen, out, params, 8);
    require(n >= 0 || n == -400);
    for (int i = 0; i < n && i < 8; i++) {
        require(within(params[i].key, params[i].keyLen, out, head->queryLen));
        require(
            within(params[i].value, params[i].valueLen, out, head->queryLen));
    }
    free(out);
}

/* Decode body[0..size) in pieces cut at `at` (size: one piece). Returns
 * the result; out gets the body bytes, *consumed the input used. */
static int
decode(const uint8_t* body, size_t size, size_t at, char* out, size_t* outLen,
       size_t* consumed)
{
    char* buf = copyOf(body, size);
    CorHttpChunked c;
    size_t cuts[2] = { at, size };
    size_t from = 0;
    int rc = 0;

    *outLen = 0;
    *consumed = 0;
    corHttpChunkedInit(&c, limits.bodyBytes);
    for (int i = 0; i < 2 && rc == 0; i++) {
        size_t used;
        size_t produced;

        rc = corHttpChunkedDecode(&c, buf + from, cuts[i] - from, &used,
                                  &produced);
        require(used <= cuts[i] - from && produced <= used);
        require(rc != 0 || used == cuts[i] - from);
        memcpy(out + *outLen, buf + from, produced);
        *outLen += produced;
        *consumed += used;
        if (rc == 1) {
            /* The next request is where it was. */
            require(memcmp(buf + *consumed, body + *consumed, size - *consumed)
                    == 0);
        }
        from = cuts[i];
    }
    free(buf);
    require(rc == 0 || rc == 1 || rc == -400 || rc == -413 || rc == -431);
    require(*outLen <= limits.bodyBytes);
    return rc;
}

static void
checkChunked(const uint8_t* body, size_t size)
{
    char* once = malloc(size + 1);
    char* split = malloc(size + 1);
    size_t onceLen;
    size_t onceUsed;
    int rc;

    require(once != NULL && split != NULL);
    rc = decode(body, size, size, once, &onceLen, &onceUsed);
    for (size_t at = 0; at < size && at <= COR_FUZZ_SPLITS; at++) {
        size_t splitLen;
        size_t splitUsed;

        require(decode(body, size, at, split, &splitLen, &splitUsed) == rc);
        require(splitLen == onceLen && memcmp(split, once, onceLen) == 0);
        require(rc < 0 || splitUsed == onceUsed);
    }
    free(split);
    free(once);
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static CorHttpHeader headers[24]; /* limits.maxHeaders */
    CorHttpRequestHead* head = malloc(sizeof(*head));
    char* buf = copyOf(data, size);
    int rc;

    static char raw[4096]; /* past limits.headerBytes */

    require(head != NULL);
    head->headers = headers;
    head->rawBuf = raw;
    head->rawCap = sizeof(raw);
    rc = corHttpParseHead(buf, size, &limits, head);
    require(rc >= 0 || knownStatus(rc));
    if (rc > 0) {
        checkHead(data, buf, size, head, rc);
        checkQuery(head);
        checkRawPath(head);
        (void)corHttpHeaderFind(head, "content-type");
    }
    for (size_t i = 0; i < size && i <= COR_FUZZ_SPLITS; i++) {
        int prefix = parseCopy(data, i, head);

        require(prefix == 0 || prefix == rc);
        require(prefix <= (int)i);
    }
    if (rc > 0 && head->chunked) {
        checkChunked(data + rc, size - (size_t)rc);
    } else if (rc <= 0) {
        checkChunked(data, size);
    }
    free(buf);
    free(head);
    return 0;
}
