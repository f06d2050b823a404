/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The limits of a request whatever brought it (HTTP/1.1, cor://, an MQTT
 * message): limits.header_bytes, header_count and body_bytes, each with
 * the status HTTP refuses a request past it with. A protocol asks as the
 * request's head and then its body come, before any handler runs, so that
 * one configuration bounds every listener alike. HTTP's parser applies
 * the same limits while it reads (corHttpParseHead); the head here is
 * measured as HTTP/1.1 would write it, so that a request refused over one
 * protocol is refused over every other.
 */
#include "cor.h"

/* "METHOD SP target SP HTTP/1.1 CRLF" beside the method and target. */
#define REQUEST_LINE_EXTRA 12
/* ": " and CRLF around a field's name and value. */
#define FIELD_EXTRA 4

int
corLimitsHead(const CorRequest* r)
{
    const CorLimits* limits = corLimits();
    size_t target = r->pathLen + (r->query != NULL ? 1 + r->queryLen : 0);
    size_t bytes = r->methodLen + target + REQUEST_LINE_EXTRA;

    if (bytes > limits->headerBytes) {
        return 414;
    }
    if (r->headerCount > limits->headerCount) {
        return 431;
    }
    for (unsigned i = 0; i < r->headerCount; i++) {
        bytes += r->headers[i].nameLen + r->headers[i].valueLen
                 + FIELD_EXTRA;
    }
    bytes += 2;             /* the empty line */
    return bytes > limits->headerBytes ? 431 : 0;
}

int
corLimitsBody(uint64_t bytes)
{
    return bytes > corLimits()->bodyBytes ? 413 : 0;
}
