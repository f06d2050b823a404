/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the HTTP/1.1 response head parser, which reads what
 * other servers send the client. Each input is parsed as a response head;
 * the rest, when the head says chunked, is decoded as a chunked body.
 * Beyond the sanitizers, it aborts when a property breaks:
 *
 *   - a prefix of the first 64 bytes waits (0) or gets the very answer the
 *     whole input gets, so a head split across reads parses the same;
 *   - the input is never written to;
 *   - a parsed head lies within the input, its fields within the head,
 *     its status in 100..599, its version 1.0 or 1.1, and never both a
 *     Content-Length and chunked;
 *   - a refusal has a sentence.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Icore -Ihttp
 *        http/corHttpParse.c fuzz/corHttpResponseFuzz.c
 * Seeds: fuzz/corpus/response/.
 */
#include "corHttpParse.h"

#include <stdlib.h>
#include <string.h>

enum { COR_FUZZ_SPLITS = 64 };

static const CorHttpLimits limits = {
    .headerBytes = 2048,
    .maxHeaders = 24,
};

static void
require(int condition)
{
    if (!condition) {
        abort();
    }
}

static void
checkHead(const char* buf, size_t size, const CorHttpResponseHead* head, int rc)
{
    require((size_t)rc == head->headLen && head->headLen <= size);
    require(head->status >= 100 && head->status <= 599);
    require(head->versionMinor == 0 || head->versionMinor == 1);
    require(!(head->chunked && head->contentLength >= 0));
    require(head->headerCount <= limits.maxHeaders);
    for (unsigned i = 0; i < head->headerCount; i++) {
        const CorHttpHeader* h = &head->headers[i];

        require(h->name >= buf && h->name + h->nameLen <= buf + rc);
        require(h->value >= buf && h->value + h->valueLen <= buf + rc);
        require(h->nameLen > 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CorHttpHeader fields[24];
    CorHttpResponseHead head = { .headers = fields };
    char* buf = malloc(size + 1);
    char* copy = malloc(size + 1);
    int rc;

    require(buf != NULL && copy != NULL);
    memcpy(buf, data, size);
    memcpy(copy, data, size);
    rc = corHttpParseResponseHead(buf, size, &limits, &head);
    require(memcmp(buf, copy, size) == 0);
    if (rc > 0) {
        checkHead(buf, size, &head, rc);
    } else if (rc < 0) {
        require(corHttpResponseErrorText(rc) != NULL);
    }
    for (size_t cut = 0; cut < size && cut < COR_FUZZ_SPLITS; cut++) {
        CorHttpHeader partFields[24];
        CorHttpResponseHead part = { .headers = partFields };
        int partRc = corHttpParseResponseHead(buf, cut, &limits, &part);

        require(partRc == 0 || partRc == rc);
    }
    if (rc > 0 && head.chunked) {
        CorHttpChunked c;
        size_t consumed = 0;
        size_t produced = 0;

        corHttpChunkedInit(&c, 1 << 16);
        corHttpChunkedDecode(&c, buf + rc, size - (size_t)rc, &consumed,
                             &produced);
        require(consumed <= size - (size_t)rc && produced <= consumed);
    }
    free(copy);
    free(buf);
    return 0;
}
