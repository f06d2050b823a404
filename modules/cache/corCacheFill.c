/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The answers of a cached route's handler, seen as a response filter
 * (whatever the handler answered with: a body in memory, a file, a
 * stream): a miss's answer is stored once its last byte passed, if RFC
 * 9111 lets it; a 304 to a revalidation refreshes the stored answer and
 * becomes it for the client; an unsafe method's success takes its URL
 * out. What is stored is what reached this filter: the handler's bytes
 * when cache is loaded before compress, the compressed ones (each
 * encoding a variant, by Vary: Accept-Encoding) when after.
 */
#include "corCacheInt.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What a fetch's answer is, from its head to its last byte. */
typedef struct {
    CacheRun* run;
    CorRequest view; /* r's answer as its head was: status, type, fields */
    CacheAnswer answer;
    CacheGrowing* body;       /* what came of it, which its waiters read */
    CacheDiskStream* disk;    /* its file as it comes, a disk store's */
    size_t most;              /* what of it may be stored */
    bool complete;            /* its last byte passed */
    bool tooBig;              /* past what a shard holds: not stored */
    const CacheEntry* replay; /* a refreshed entry that replaces the body */
} Fill;

/* Take the URL of target (a path, or an absolute URL of r's host) out,
 * as r's success said it changed (RFC 9111 4.4). */
static void
invalidateTarget(CorRequest* r, CacheRun* run, const CorHeader* h)
{
    const CorHeader* host = corRequestHeader(r, "host");
    const char* at = h->value;
    size_t len = h->valueLen;
    size_t hostLen = host != NULL ? host->valueLen : 0;
    char key[2048];
    int n;

    static const char* const schemes[] = { "http://", "https://" };

    for (unsigned i = 0; host != NULL && i < 2; i++) {
        size_t sl = strlen(schemes[i]);

        if (len > sl + hostLen && strncasecmp(at, schemes[i], sl) == 0
            && strncasecmp(at + sl, host->value, hostLen) == 0
            && at[sl + hostLen] == '/') {
            at += sl + hostLen;
            len -= sl + hostLen;
            break;
        }
    }
    if (len == 0 || at[0] != '/') {
        return; /* another host's, or not a URL: not this cache's */
    }
    n = snprintf(key, sizeof(key), "%.*s%.*s", (int)hostLen,
                 host != NULL ? host->value : "", (int)len, at);
    if (n > 0 && (size_t)n < sizeof(key)) {
        for (size_t i = 0; i < hostLen; i++) {
            key[i] = (char)tolower((unsigned char)key[i]);
        }
        cacheStoreRemove(run->store, key, (size_t)n);
    }
}

static void
invalidate(CorRequest* r, CacheRun* run)
{
    if (r->status < 200 || r->status >= 400) {
        return; /* only a success changed what the URL holds */
    }
    cacheStoreRemove(run->store, run->key, run->keyLen);
    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        const CorHeader* h = &r->responseHeaders[i];

        if (corHeaderIs(h, "location") || corHeaderIs(h, "content-location")) {
            invalidateTarget(r, run, h);
        }
    }
}

/* r's answer becomes e's (a 304 that refreshed it): the status, the
 * fields, the body; or a 304 to a client whose own conditions hold. A
 * stream's body is replaced by the entry's as it passes (the ctx). */
static void*
becomeEntry(CorRequest* r, CacheRun* run, const CacheEntry* e,
            const char* params)
{
    Fill* fill;

    /* Only the route's fields stay: the handler's answer is replaced (r
     * is answered already: its fields are set here as the entry's). */
    r->responseHeaderCount = run->routeFields;
    cacheEntryFieldsSay(r, run, params);
    if (run->clientConditional && cacheConditionMet(run->client, e)) {
        r->status = 304;
        r->responseBody = NULL;
        r->responseLen = 0;
        return NULL;
    }
    r->status = e->status;
    r->contentType = cacheEntryType(e);
    if (r->stream == NULL) {
        r->responseBody = cacheEntryBody(e);
        r->responseLen = e->bodyLen;
        return NULL;
    }
    fill = corRequestAlloc(r, sizeof(*fill));
    if (fill != NULL) {
        memset(fill, 0, sizeof(*fill));
        fill->run = run;
        fill->replay = e;
    }
    return fill;
}

/* A 304 to run's revalidation: the stored answer refreshed with its
 * fields (RFC 9111 4.3.4), and r answered with it. */
static void*
refreshed(CorRequest* r, CacheRun* run)
{
    CacheEntry* e = cacheEntryRefreshed(run->entry, r, run->requestTime,
                                        cacheNowMs());

    if (e == NULL) {
        cacheFlightEnd(run, FLIGHT_FAILED);
        return becomeEntry(r, run, run->entry, "fwd=stale; fwd-status=304");
    }
    e->hash = run->hash;
    cacheEntryRef(e); /* for r's answer, beside the store's */
    if (run->store->path != NULL) {
        cacheEntryRef(e); /* the refreshed head to its file too */
        cacheDiskWrite(run->store, e);
    }
    cacheStoreInsert(run->store, e);
    cacheEntryRelease(run->entry);
    run->entry = e;
    atomic_fetch_add(&run->store->counters.revalidated, 1);
    r->cacheStatus = "REVALIDATED";
    cacheFlightEnd(run, FLIGHT_STORED);
    return becomeEntry(r, run, e, "fwd=stale; fwd-status=304");
}

/* The growing body of fill's answer, which its waiters are woken to
 * read as it comes where the store says stream_waiters (its head, with
 * no body, is what they are answered with); else, or without memory for
 * it, they wait for the end as before. */
static void
bodyStart(CorRequest* r, Fill* fill)
{
    CacheRun* run = fill->run;
    CacheEntry* head = cacheEntryMake(&fill->view, &fill->answer, run->key,
                                      run->keyLen, run->requestTime,
                                      cacheNowMs(), NULL, 0);

    if (head != NULL) {
        head->hash = run->hash; /* its file's header says it */
    }
    fill->body = head != NULL ? cacheGrowingNew(head) : NULL;
    if (fill->body == NULL) {
        cacheEntryRelease(head);
        fill->tooBig = true; /* nowhere to keep it */
        return;
    }
    /* A disk store's answer goes to its file as it comes: up to the
     * disk's part for a shard, memory holding what the file lacks yet;
     * without the file (no writers yet), up to what memory keeps. */
    fill->disk = run->store->path != NULL
                     ? cacheDiskStreamOpen(run->store, fill->body, run->hash)
                     : NULL;
    fill->most = fill->disk != NULL ? cacheStoreEntryMost(run->store)
                                    : run->store->shardMost;
    if (run->store->streamWaiters) {
        /* The waiters read what r's handler answers, not r's client:
         * the answer goes on into the store if that client leaves. */
        corResponseStreamKeep(r, true);
        cacheFlightStream(run, fill->body);
    }
}

/* A fetch's answer at its head: kept as it is now to be stored at its
 * end, or passed on unstored (and those waiting for it fetch their
 * own). */
static void*
fetchHead(CorRequest* r, CacheRun* run)
{
    Fill* fill;
    CorHeader* fields;

    fill = corRequestAlloc(r, sizeof(*fill));
    fields = corRequestAlloc(r, (r->responseHeaderCount + 1) * sizeof(*fields));
    if (fill == NULL || fields == NULL) {
        cacheFlightEnd(run, FLIGHT_PASS);
        return NULL;
    }
    memset(fill, 0, sizeof(*fill));
    fill->run = run;
    cachePolicyAnswer(r, &fill->answer);
    if (!cachePolicyStorable(r, &fill->answer, &run->ask)) {
        cacheStatusSay(r, run->store,
                       run->stale ? "fwd=stale" : "fwd=uri-miss");
        cacheFlightEnd(run, FLIGHT_PASS);
        return NULL;
    }
    /* The fields as they are here: a filter after this one may change
     * them for the bytes it makes, which are not what is stored; less
     * the route's, which the core adds to every answer, hits too. */
    memcpy(fields, r->responseHeaders + run->routeFields,
           (r->responseHeaderCount - run->routeFields) * sizeof(*fields));
    fill->view = *r;
    fill->view.responseHeaders = fields;
    fill->view.responseHeaderCount = r->responseHeaderCount - run->routeFields;
    cacheStatusSay(r, run->store,
                   run->stale ? "fwd=stale; stored" : "fwd=uri-miss; stored");
    bodyStart(r, fill);
    return fill;
}

static void*
fillHead(CorRequest* r, void* arg)
{
    CacheRun* run = r->cacheData;

    (void)arg;
    if (run == NULL || r->cacheFront == NULL) {
        return NULL;
    }
    if ((run->kind == RUN_REVALIDATE || run->kind == RUN_FETCH)
        && run->entry != NULL && r->status >= 500
        && cacheEntryStaleIfError(run->entry, run->ask.staleIfError,
                                  cacheNowMs())) {
        /* RFC 5861: the error is not passed on; the stale answer is
         * (a disk entry's body read, to replace the error's as it
         * passes). */
        cacheFlightEnd(run, FLIGHT_PASS);
        if (run->entry->bodyFd >= 0) {
            CacheEntry* m = cacheEntryInMemory(run->entry);

            if (m == NULL) {
                return NULL;
            }
            cacheEntryRelease(run->entry);
            run->entry = m;
        }
        r->cacheStatus = "STALE";
        return becomeEntry(r, run, run->entry,
                           "fwd=stale; detail=stale-if-error");
    }
    switch (run->kind) {
    case RUN_INVALIDATE:
        invalidate(r, run);
        return NULL;
    case RUN_REVALIDATE:
        if (r->status == 304) {
            return refreshed(r, run);
        }
        return fetchHead(r, run); /* a whole new answer */
    case RUN_FETCH:
        return fetchHead(r, run);
    default:
        return NULL;
    }
}

static int
fillBody(CorRequest* r, void* ctx, const void* data, size_t len, unsigned flags,
         CorFilterOut* out)
{
    Fill* fill = ctx;
    int rc;

    if (fill->replay != NULL) {
        /* The 304's (empty) body is dropped for the stored one. */
        return (flags & COR_FILTER_LAST) != 0
                   ? corFilterPass(out, cacheEntryBody(fill->replay),
                                   fill->replay->bodyLen)
                   : 0;
    }
    if (!fill->tooBig && len > 0) {
        int grew = fill->body->len + len > fill->most
                       ? -EFBIG
                       : cacheGrowingAppend(fill->body, data, len);

        if (grew == 0 && fill->disk != NULL
            && cacheDiskStreamMore(fill->disk, len) != 0) {
            grew = -ENOBUFS;
        }
        if (grew == -ENOBUFS) {
            /* Its file's writes that far behind: not stored, counted. */
            atomic_fetch_add(&fill->run->store->counters.diskErrors, 1);
        }
        if (grew != 0) {
            fill->tooBig = true; /* its waiters' answers are cut */
            cacheGrowingEnd(fill->body, false);
            corResponseStreamKeep(r, false); /* kept for nobody now */
        }
    }
    rc = corFilterPass(out, data, len);
    if ((flags & COR_FILTER_LAST) != 0) {
        fill->complete = true;
    }
    return rc;
}

static void
fillEnd(CorRequest* r, void* ctx)
{
    Fill* fill = ctx;
    CacheRun* run = fill->run;
    CacheEntry* e = NULL;
    int outcome = FLIGHT_FAILED;
    bool whole;
    bool inMemory = false;

    if (fill->replay != NULL) {
        return;
    }
    whole = fill->complete && !fill->tooBig;
    if (whole && cacheGrowingInMemory(fill->body)) {
        /* Nothing is appended any more: its bytes are read unlocked. */
        e = cacheEntryMake(&fill->view, &fill->answer, run->key, run->keyLen,
                           run->requestTime, cacheNowMs(), fill->body->body,
                           fill->body->len);
    }
    if (fill->body != NULL) {
        cacheGrowingEnd(fill->body, whole);
        cacheGrowingRelease(fill->body);
        fill->body = NULL;
    }
    if (e != NULL) {
        e->hash = run->hash;
        inMemory = cacheStoreInsert(run->store, e);
    }
    if (fill->disk != NULL) {
        /* One not kept in memory is found in its file once it is
         * written: those waiting for it wait for that. */
        cacheDiskStreamEnd(fill->disk,
                           whole && !inMemory ? cacheFlightTake(run) : NULL,
                           !inMemory);
        fill->disk = NULL;
    }
    if (inMemory || (whole && run->flight == NULL)) {
        outcome = FLIGHT_STORED;
    } else if (whole || fill->tooBig) {
        outcome = FLIGHT_PASS;
    }
    if (run->headWanted) {
        r->method = "HEAD"; /* for the access log: what the client sent */
        r->methodLen = 4;
    }
    cacheFlightEnd(run, outcome);
}

const CorFilter cacheFilter = {
    .name = "cache", .head = fillHead, .body = fillBody, .end = fillEnd
};
