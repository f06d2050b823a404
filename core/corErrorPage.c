/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error pages (`error_pages: { "404": FILE, "5xx": FILE }`, at the top
 * and on a route): the files read once per generation, and an answer of
 * their status given the page as its body, whoever made it (a handler,
 * a guard, the core's 404, 405, 413, 504). A route's pages come before
 * the top level's.
 */
#include "corCoreInt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CorErrorPages topPages;

/* A file of an error page, read whole; a file that cannot be read keeps
 * its page without a body (its answers their built-in text), said once
 * in the log. */
static void
errorPageLoad(const CorConfigErrorPage* in, CorErrorPage* out)
{
    FILE* f = fopen(in->file, "rb");
    long len = -1;

    *out = (CorErrorPage){ .from = in->from, .to = in->to };
    if (f != NULL && fseek(f, 0, SEEK_END) == 0) {
        len = ftell(f);
    }
    if (len >= 0 && len <= 1 << 20 && fseek(f, 0, SEEK_SET) == 0) {
        out->body = malloc((size_t)len + 1);
    }
    if (out->body == NULL
        || fread(out->body, 1, (size_t)len, f) != (size_t)len) {
        corLog(COR_LOG_WARN,
               "error_pages: cannot read %s (%s): answers of "
               "%u-%u keep their built-in text",
               in->file,
               f == NULL ? "no such file, or not readable"
                         : "too large, or a read failed",
               in->from, in->to);
        free(out->body);
        out->body = NULL;
    } else {
        const char* dot = strrchr(in->file, '.');

        out->len = (size_t)len;
        out->contentType = dot != NULL
                                   && (strcmp(dot, ".html") == 0
                                       || strcmp(dot, ".htm") == 0)
                               ? "text/html; charset=utf-8"
                           : dot != NULL && strcmp(dot, ".json") == 0
                               ? "application/json"
                               : "text/plain; charset=utf-8";
    }
    if (f != NULL) {
        fclose(f);
    }
}

/* The pages of a list, before next's. */
int
corErrorPagesBuild(const CorConfigErrorPage* in, unsigned count,
                   const CorErrorPages* next, CorErrorPages* out)
{
    *out = (CorErrorPages){ .next = next };
    out->pages = count > 0 ? calloc(count, sizeof(*out->pages)) : NULL;
    if (count > 0 && out->pages == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < count; i++) {
        errorPageLoad(&in[i], &out->pages[out->count++]);
    }
    return 0;
}

int
corErrorPagesTopBuild(const CorConfig* config)
{
    return corErrorPagesBuild(config->errorPages, config->errorPageCount, NULL,
                              &topPages);
}

const CorErrorPages*
corRouteErrorPages(void)
{
    return topPages.count > 0 ? &topPages : NULL;
}

void
corRouteErrorPageApply(CorRequest* r)
{
    const CorErrorPages* list = r->errorPages != NULL ? r->errorPages
                                                      : corRouteErrorPages();
    unsigned status = (unsigned)r->status;

    if (status < 300 || r->stream != NULL || r->fileFd >= 0
        || r->upgrade != NULL) {
        return;
    }
    for (; list != NULL; list = list->next) {
        for (unsigned i = 0; i < list->count; i++) {
            const CorErrorPage* p = &list->pages[i];

            if (status >= p->from && status <= p->to) {
                if (p->body == NULL) {
                    return; /* unreadable: the built-in text */
                }
                r->contentType = p->contentType;
                r->responseBody = p->body;
                r->responseLen = p->len;
                return;
            }
        }
    }
}
