/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Response filters (corModule.h): the registry modules fill at init, and
 * the chain an answer's head and body run through on the request's loop.
 *
 * The chain is decided once per answer, at its head: each filter's head
 * says whether it takes the body, and those that do are kept in the
 * request's run, in order. A piece of body then goes through them one
 * after the other (a filter's corFilterPass is the next one's input) and
 * ends at the sink: the protocol's streamData for a stream, a buffer for
 * a body in memory, which becomes the new body once the last filter let
 * go of its last byte. With no filter added, the core's output path
 * tests one counter and runs as before.
 */
#include "corCoreInt.h"
#include "corKit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define FILTERS_MAX 32

typedef struct {
    CorFilter filter;
    CorModule* module;
} FilterEntry;

struct CorFilterRun {
    unsigned count;
    bool ended;     /* the filters' end ran */
    CorBuf* memory; /* a body in memory: the sink, else NULL */
    struct {
        const FilterEntry* entry;
        void* ctx;
    } active[];
};

struct CorFilterOut {
    CorRequest* r;
    unsigned next; /* the index in the run that comes next */
};

unsigned corFilterCount;
static FilterEntry filters[FILTERS_MAX];

/* An answer whose head ran through the filters and none took the body. */
static CorFilterRun untouched;

int
corFilterAdd(CorModule* m, const CorFilter* filter)
{
    if (filter->name == NULL || filter->head == NULL || filter->body == NULL) {
        corModuleError(m, NULL,
                       "a filter needs a name, a head and a body "
                       "function");
        return -1;
    }
    if (corFilterIndex(filter->name) >= 0) {
        corModuleError(m, NULL, "filter '%s' is already registered",
                       filter->name);
        return -1;
    }
    if (corFilterCount == FILTERS_MAX) {
        corModuleError(m, NULL,
                       "filter '%s': %d filters are already "
                       "registered, the most there may be",
                       filter->name, FILTERS_MAX);
        return -1;
    }
    filters[corFilterCount].filter = *filter;
    filters[corFilterCount].filter.name = strdup(filter->name);
    filters[corFilterCount].module = m;
    if (filters[corFilterCount].filter.name == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    corFilterCount++;
    return 0;
}

int
corFilterIndex(const char* name)
{
    for (unsigned i = 0; i < corFilterCount; i++) {
        if (strcmp(filters[i].filter.name, name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

const char**
corFilterNames(void)
{
    const char** names = calloc(corFilterCount + 1, sizeof(*names));

    for (unsigned i = 0; names != NULL && i < corFilterCount; i++) {
        names[i] = filters[i].filter.name;
    }
    return names;
}

/* The piece leaves the chain: to the client, or into the new body. */
static int
sink(CorRequest* r, const void* data, size_t len)
{
    CorFilterRun* run = r->filterRun;

    if (len == 0) {
        return 0;
    }
    if (run->memory != NULL) {
        return corBufAppend(run->memory, data, len);
    }
    r->ops->streamData(r, data, len);
    return 0;
}

/* Run the piece through the filters from index i on; after a flush or
 * the last piece, the ones after i are told the same, once i has passed
 * on what it held. */
static int
step(CorRequest* r, unsigned i, const void* data, size_t len, unsigned flags)
{
    CorFilterRun* run = r->filterRun;
    CorFilterOut out = { r, i + 1 };
    int rc;

    if (i == run->count) {
        return sink(r, data, len);
    }
    rc = run->active[i].entry->filter.body(r, run->active[i].ctx, data, len,
                                           flags, &out);
    if (rc < 0 || flags == 0) {
        return rc;
    }
    return step(r, i + 1, NULL, 0, flags);
}

int
corFilterPass(CorFilterOut* out, const void* data, size_t len)
{
    return len == 0 ? 0 : step(out->r, out->next, data, len, 0);
}

void
corFilterEnd(CorRequest* r)
{
    CorFilterRun* run = r->filterRun;

    if (run == NULL || run == &untouched || run->ended) {
        return;
    }
    run->ended = true;
    for (unsigned i = 0; i < run->count; i++) {
        const CorFilter* f = &run->active[i].entry->filter;

        if (f->end != NULL) {
            f->end(r, run->active[i].ctx);
        }
    }
}

int
corFilterData(CorRequest* r, const void* data, size_t len, unsigned flags)
{
    int rc = step(r, 0, data, len, flags);

    if ((flags & COR_FILTER_LAST) != 0) {
        corFilterEnd(r);
    }
    return rc;
}

void
corFilterHead(CorRequest* r)
{
    CorFilterRun* run;
    unsigned n = 0;

    r->filterRun = &untouched;
    if (r->status == 101) {
        return; /* an upgrade's bytes are not a body */
    }
    run = corRequestAlloc(r, sizeof(*run)
                                 + corFilterCount * sizeof(run->active[0]));
    if (run == NULL) {
        return; /* the answer goes out unfiltered */
    }
    memset(run, 0, sizeof(*run));
    for (unsigned i = 0; i < corFilterCount; i++) {
        const FilterEntry* e = &filters[i];
        void* ctx;

        if ((r->filtersOff & (1u << i)) != 0) {
            continue;
        }
        ctx = e->filter.head(r, e->filter.arg);
        if (ctx != NULL) {
            run->active[n].entry = e;
            run->active[n].ctx = ctx;
            n++;
        }
    }
    run->count = n;
    if (n > 0) {
        r->filterRun = run;
    }
}

/* The filters could not make r's body: r is answered 500 instead, with
 * none of the headers they (or the handler) set for the body it was. */
static void
filterFailed(CorRequest* r, int rc)
{
    corLog(COR_LOG_ERROR,
           "handler %s: a response filter failed (%s): "
           "500 sent",
           corRequestHandlerName(r), strerror(-rc));
    corFilterEnd(r);
    r->filterRun = &untouched;
    r->responseHeaderCount = 0;
    if (r->fileFd >= 0) {
        close(r->fileFd);
        r->fileFd = -1;
    }
    corRespondSet(r, 500, "text/plain", "a response filter failed\n", 25);
}

/* A body in memory through the chain, whole: the new body is what came
 * out, copied into the request's arena. */
static int
memoryFilter(CorRequest* r)
{
    CorBuf out = { 0 };
    void* body = NULL;
    int rc;

    r->filterRun->memory = &out;
    rc = corFilterData(r, r->responseBody, r->responseLen, COR_FILTER_LAST);
    r->filterRun->memory = NULL;
    if (rc == 0) {
        body = corRequestAlloc(r, out.len + 1);
        rc = body != NULL ? 0 : -ENOMEM;
    }
    if (rc == 0) {
        memcpy(body, out.data, out.len);
        r->responseBody = body;
        r->responseLen = out.len;
    }
    corBufFree(&out);
    return rc;
}

void
corFilterResponse(CorRequest* r, int (*fileStream)(CorRequest* r))
{
    int rc;

    corFilterHead(r);
    if (r->filterRun->count == 0) {
        return;
    }
    /* A HEAD's head is its GET's (RFC 9110 9.3.2): a body in memory goes
     * through the filters for its new length (sent to no one); a file, or
     * a HEAD answered with no body but its GET's length (a proxy's),
     * becomes a stream as that GET's would, which says no length. */
    rc = r->fileFd >= 0 || (r->head && r->responseLen == 0) ? fileStream(r)
                                                            : memoryFilter(r);
    if (rc < 0) {
        filterFailed(r, rc);
    }
}
