/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stale-while-revalidate's refresh (RFC 5861): the client was answered
 * from the stale entry at once, and the route's handler is asked again
 * by a request of the cache's own, a copy of the client's (method GET,
 * target, fields, address) served on the same loop as if a protocol had
 * read it: through the route, its guards and the lookup (which knows it
 * by its ops and validates rather than answer stale), to the handler,
 * whose answer the cache's filter stores. Its answer goes to no one.
 */
#include "corCacheInt.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    CorRequest r;
    CorEvTask task;
    CorHeader headers[];
} Refresh;

static void
refreshSent(CorRequest* r)
{
    corRequestSent(r);
}

/* A streamed answer's end comes through streamEnd; any other is whole. */
static void
refreshDone(CorRequest* r)
{
    if (r->stream == NULL) {
        corRequestSent(r);
    }
}

static void
refreshData(CorRequest* r, const void* data, size_t len)
{
    (void)r;
    (void)data;
    (void)len;
}

static bool
refreshAlive(const CorRequest* r)
{
    (void)r;
    return true;
}

static void
refreshRelease(CorRequest* r)
{
    free(corContainerOf(r, Refresh, r));
}

const CorProtocolOps cacheRefreshOps = { .done = refreshDone,
                                         .release = refreshRelease,
                                         .streamData = refreshData,
                                         .streamEnd = refreshSent,
                                         .streamAlive = refreshAlive,
                                         .kind = COR_PROTOCOL_OTHER };

static void
refreshServe(CorEvTask* task)
{
    Refresh* f = corContainerOf(task, Refresh, task);

    corRequestServe(&f->r, &cacheRefreshOps, f);
}

/* A copy of s[0..len) at *at, NUL-terminated; *at moves past it. */
static const char*
copy(char** at, const char* s, size_t len)
{
    char* start = *at;

    if (s == NULL) {
        return NULL;
    }
    memcpy(start, s, len);
    start[len] = '\0';
    *at += len + 1;
    return start;
}

static size_t
textLen(const char* s, size_t len)
{
    return s != NULL ? len + 1 : 0;
}

void
cacheRefreshStart(const CorRequest* from)
{
    size_t text = textLen(from->path, from->pathLen)
                  + textLen(from->query, from->queryLen)
                  + textLen(from->rawPath, from->rawPathLen)
                  + textLen(from->remote,
                            from->remote ? strlen(from->remote) : 0)
                  + textLen(from->peer, from->peer ? strlen(from->peer) : 0);
    Refresh* f;
    CorRequest* r;
    char* at;
    unsigned n = 0;

    for (unsigned i = 0; i < from->headerCount; i++) {
        text += from->headers[i].nameLen + from->headers[i].valueLen + 2;
    }
    f = calloc(1, sizeof(*f) + from->headerCount * sizeof(CorHeader) + text);
    if (f == NULL) {
        return; /* no refresh: the next stale hit tries again */
    }
    r = &f->r;
    at = (char*)(f->headers + from->headerCount);
    r->method = "GET";
    r->methodLen = 3;
    r->path = copy(&at, from->path, from->pathLen);
    r->pathLen = from->pathLen;
    r->query = copy(&at, from->query, from->queryLen);
    r->queryLen = from->queryLen;
    r->rawPath = copy(&at, from->rawPath, from->rawPathLen);
    r->rawPathLen = from->rawPathLen;
    r->remote = copy(&at, from->remote,
                     from->remote ? strlen(from->remote) : 0);
    r->peer = copy(&at, from->peer, from->peer ? strlen(from->peer) : 0);
    r->secure = from->secure;
    r->version = "refresh";
    for (unsigned i = 0; i < from->headerCount; i++) {
        const CorHeader* h = &from->headers[i];

        f->headers[n].name = copy(&at, h->name, h->nameLen);
        f->headers[n].nameLen = h->nameLen;
        f->headers[n].value = copy(&at, h->value, h->valueLen);
        f->headers[n].valueLen = h->valueLen;
        n++;
    }
    r->headers = f->headers;
    r->headerCount = n;
    /* At the loop's next turn: not inside the lookup that asked for it. */
    corEvLoopPost(from->loop, &f->task, refreshServe);
}
