/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The testkit's handler "seen", which answers what a handler sees of its
 * request once its route had its say (a rewrite, request_headers, a
 * regex's captures): one "name: value" line each for the method, path,
 * query, captures 0 to 3 (corRequestCapture) and every request header.
 */
#include "cor.h"

#include <stdio.h>
#include <string.h>

void corTestkitSeenAdd(CorModule* m, int* rc);

static void
seenServe(CorRequest* r)
{
    char out[8192];
    size_t n = 0;

#define LINE(...)                                                              \
    n += (size_t)snprintf(out + n, n < sizeof(out) ? sizeof(out) - n : 0,      \
                          __VA_ARGS__)
    LINE("method: %.*s\n", (int)r->methodLen, r->method);
    LINE("path: %.*s\n", (int)r->pathLen, r->path);
    LINE("query: %.*s\n", (int)r->queryLen, r->query ? r->query : "");
    for (unsigned i = 0; i < 4; i++) {
        size_t len;
        const char* capture = corRequestCapture(r, i, &len);

        if (capture != NULL) {
            LINE("capture %u: %.*s\n", i, (int)len, capture);
        }
    }
    for (unsigned i = 0; i < r->headerCount; i++) {
        const CorHeader* h = &r->headers[i];

        LINE("%.*s: %.*s\n", (int)h->nameLen, h->name, (int)h->valueLen,
             h->value);
    }
#undef LINE
    corRespond(r, 200, "text/plain", out, n < sizeof(out) ? n : sizeof(out));
}

void
corTestkitSeenAdd(CorModule* m, int* rc)
{
    if (*rc == 0) {
        *rc = corHandlerAdd(m, &(CorHandler){ .name = "seen",
                                              .serve = seenServe,
                                              .run = COR_RUN_INLINE });
    }
}
