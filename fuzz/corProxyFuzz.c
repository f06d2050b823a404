/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the PROXY protocol's header parsers
 * (core/corProxyV2.c, core/corProxyV1.c), fed as the reader on the loop
 * feeds them (corProxyAccept.c): v2 with what is kept of a header (its
 * whole length, or COR_PROXY_V2_KEEP of it), v1 with a line up to its
 * first LF. Beyond the sanitizers, it aborts when a property breaks:
 *
 *   - a v2 header is accepted only with a length its address block fits;
 *   - an accepted source is AF_UNSPEC, AF_INET or AF_INET6, and a v1
 *     one prints back as an address its line holds;
 *   - the same bytes parsed again give the same answer (no state).
 *
 * Build: make build/fuzz/corProxyFuzz (Makefile.in's fuzz target).
 */
#include "corProxyHeader.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void
sourceCheck(const struct sockaddr_storage* src)
{
    if (src->ss_family != AF_UNSPEC && src->ss_family != AF_INET
        && src->ss_family != AF_INET6) {
        abort();
    }
}

static void
v2Check(const uint8_t* data, size_t size)
{
    struct sockaddr_storage src;
    struct sockaddr_storage again;
    long total = corProxyV2Length(data);
    size_t kept;
    int rc;

    if (total < 0) {
        return;
    }
    kept = (size_t)total < COR_PROXY_V2_KEEP ? (size_t)total
                                             : COR_PROXY_V2_KEEP;
    if (size < kept) {
        return; /* the reader would wait for the rest */
    }
    rc = corProxyV2Parse(data, kept, &src);
    if (rc == 0) {
        static const size_t block[] = { 0, 12, 36, 216 };

        sourceCheck(&src);
        if ((size_t)total - COR_PROXY_V2_FIXED < block[data[13] >> 4]) {
            abort();
        }
    }
    if (corProxyV2Parse(data, kept, &again) != rc
        || (rc == 0 && memcmp(&src, &again, sizeof(src)) != 0)) {
        abort();
    }
}

static void
v1Check(const uint8_t* data, size_t size)
{
    const uint8_t* lf = memchr(data, '\n',
                               size < COR_PROXY_V1_MAX ? size
                                                       : COR_PROXY_V1_MAX);
    struct sockaddr_storage src;
    char text[INET6_ADDRSTRLEN];
    size_t len;

    if (lf == NULL) {
        return;
    }
    len = (size_t)(lf - data) + 1;
    if (corProxyV1Parse(data, len, &src) != 0) {
        return;
    }
    sourceCheck(&src);
    if (src.ss_family == AF_UNSPEC) {
        return;
    }
    inet_ntop(src.ss_family,
              src.ss_family == AF_INET
                  ? (const void*)&((struct sockaddr_in*)&src)->sin_addr
                  : (const void*)&((struct sockaddr_in6*)&src)->sin6_addr,
              text, sizeof(text));
    if (src.ss_family == AF_INET
        && memmem(data, len, text, strlen(text)) == NULL) {
        abort(); /* IPv6 may be written otherwise: v4 may not */
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size == 0 || !corProxyPrefix(data, size < 12 ? size : 12)) {
        return 0;
    }
    if (size >= COR_PROXY_V2_FIXED && !corProxyIsV1(data)) {
        v2Check(data, size);
    } else if (corProxyIsV1(data)) {
        v1Check(data, size);
    }
    return 0;
}
