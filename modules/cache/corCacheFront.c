/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lookup in front of a cached route's handler, on the request's
 * loop: a fresh stored answer is answered at once (the handler does not
 * run); a stale one with a validator is revalidated (the handler is asked
 * with If-None-Match / If-Modified-Since); a miss runs the handler, or
 * waits for the fetch of the same key already in flight; an unsafe
 * method runs the handler and its success takes the URL out.
 */
#include "corCacheInt.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int
cacheKeyOf(CorRequest* r, char** keyP, size_t* lenP)
{
    const CorHeader* host = corRequestHeader(r, "host");
    size_t hostLen = host != NULL ? host->valueLen : 0;
    size_t len = hostLen + r->pathLen
                 + (r->query != NULL ? 1 + r->queryLen : 0);
    char* key = corRequestAlloc(r, len + 1);
    char* at = key;

    if (key == NULL) {
        return -1;
    }
    /* host path?query: the host's case does not count (RFC 9110 4.2.3);
     * the path is the normalized one every route sees. */
    for (size_t i = 0; i < hostLen; i++) {
        *at++ = (char)tolower((unsigned char)host->value[i]);
    }
    memcpy(at, r->path, r->pathLen);
    at += r->pathLen;
    if (r->query != NULL) {
        *at++ = '?';
        memcpy(at, r->query, r->queryLen);
        at += r->queryLen;
    }
    *at = '\0';
    *keyP = key;
    *lenP = len;
    return 0;
}

void
cacheStatusSay(CorRequest* r, const CacheStore* s, const char* params)
{
    char value[256];

    snprintf(value, sizeof(value), "%s; %s", s->name, params);
    corResponseHeader(r, "Cache-Status", value);
}

/* Whether the entity tag list of If-None-Match holds tag, compared weakly
 * (RFC 9110 13.1.2: W/ does not count). */
static bool
etagListHas(const CorHeader* h, const char* tag)
{
    const char* at = h->value;
    const char* end = h->value + h->valueLen;
    size_t tagLen;

    if (strncmp(tag, "W/", 2) == 0) {
        tag += 2;
    }
    tagLen = strlen(tag);
    while (at < end) {
        const char* one;

        while (at < end && (*at == ',' || *at == ' ' || *at == '\t')) {
            at++;
        }
        if (at < end && *at == '*') {
            return true;
        }
        if (end - at > 2 && at[0] == 'W' && at[1] == '/') {
            at += 2;
        }
        one = at;
        while (at < end && *at != ',') {
            at++;
        }
        while (at > one && (at[-1] == ' ' || at[-1] == '\t')) {
            at--;
        }
        if ((size_t)(at - one) == tagLen && memcmp(one, tag, tagLen) == 0) {
            return true;
        }
        while (at < end && *at != ',') {
            at++;
        }
    }
    return false;
}

bool
cacheConditionMet(const CorRequest* r, const CacheEntry* e)
{
    const CorHeader* inm = corRequestHeader(r, "if-none-match");
    const CorHeader* ims;
    int64_t since;

    if (e->status != 200) {
        return false;
    }
    if (inm != NULL) {
        return e->etagAt != 0 && etagListHas(inm, cacheEntryEtag(e));
    }
    ims = corRequestHeader(r, "if-modified-since");
    if (ims == NULL || e->modifiedAt == 0) {
        return false;
    }
    since = cacheHttpDate(ims->value, ims->valueLen);
    return since >= 0
           && cacheHttpDate(cacheEntryModified(e),
                            strlen(cacheEntryModified(e)))
                  <= since;
}

void
cacheEntryFieldsSay(CorRequest* r, const CacheRun* run, const char* params)
{
    const CacheEntry* e = run->entry;
    int64_t age = cacheEntryAge(e, cacheNowMs());
    char text[160];

    for (unsigned i = 0; i < e->headerCount; i++) {
        CorHeader h = cacheEntryField(e, i);

        corResponseHeader(r, h.name, h.value);
    }
    snprintf(text, sizeof(text), "%lld", (long long)age);
    corResponseHeader(r, "Age", text);
    snprintf(text, sizeof(text), "%s; ttl=%lld", params,
             (long long)(e->lifetime - age));
    cacheStatusSay(r, run->store, text);
}

/* Whether the client's If-Range (RFC 9110 13.1.5) lets its Range apply
 * to e: none, an entity tag that strongly matches e's, or e's very
 * Last-Modified. */
static bool
ifRangeHolds(const CorRequest* client, const CacheEntry* e)
{
    const CorHeader* h = corRequestHeader(client, "if-range");
    const char* stored;

    if (h == NULL) {
        return true;
    }
    stored = h->valueLen > 0 && (h->value[0] == '"' || h->value[0] == 'W')
                 ? cacheEntryEtag(e)
                 : cacheEntryModified(e);
    return stored != NULL && stored[0] != 'W' && strlen(stored) == h->valueLen
           && memcmp(stored, h->value, h->valueLen) == 0;
}

/* r answered status with len bytes of e's body from at: the entry's
 * memory (referenced until r is released), or its file by sendfile (the
 * answer takes e's descriptor: a disk entry is this request's alone). */
static void
bodyAnswer(CorRequest* r, CacheEntry* e, int status, size_t at, size_t len)
{
    if (e->bodyFd >= 0) {
        int fd = e->bodyFd;

        e->bodyFd = -1;
        corRespondFile(r, status, cacheEntryType(e), fd,
                       e->bodyAt + (int64_t)at, len);
        return;
    }
    corRespondStatic(r, status, cacheEntryType(e), cacheEntryBody(e) + at, len);
}

/* Several ranges of a stored file, sent by a task of r's loop (its
 * writes wait for the client; the lookup's, on the loop, may not). */
typedef struct {
    CorRequest* r;
    int fd;
    uint64_t base;
    uint64_t whole;
    const char* type; /* the entry's, referenced until r's release */
    unsigned count;
    char boundary[COR_RANGE_BOUNDARY_SIZE];
    CorRange ranges[COR_RANGES_MAX];
} PartsSend;

static void
partsSend(void* arg)
{
    PartsSend* p = arg;

    corRangeMultipartSend(p->r, p->fd, p->base, p->boundary, p->type, p->ranges,
                          p->count, p->whole);
    close(p->fd);
    free(p);
}

/* Several ranges of a disk entry's body as a multipart/byteranges
 * stream read from its file (the answer takes e's descriptor): what
 * memory holds of it is one piece and the stream's bound, whatever the
 * parts' size; false (nothing answered) without memory for it. */
static bool
multipartStreamed(CorRequest* r, CacheEntry* e, const char* type,
                  const CorRange* ranges, unsigned count)
{
    PartsSend* p = malloc(sizeof(*p));

    if (p == NULL) {
        return false;
    }
    *p = (PartsSend){ .r = r,
                      .fd = e->bodyFd,
                      .base = e->bodyAt,
                      .whole = e->bodyLen,
                      .type = type,
                      .count = count };
    memcpy(p->ranges, ranges, count * sizeof(*ranges));
    if (corRangeMultipartStart(r, p->boundary, type, ranges, count, e->bodyLen)
        != 0) {
        free(p);
        return false;
    }
    e->bodyFd = -1;
    if (corTaskSpawn(partsSend, p, "cache-parts") != 0) {
        close(p->fd);
        free(p);
        corResponseStreamAbort(r);
    }
    return true;
}

/* Several ranges of e's body as one multipart/byteranges body (RFC 9110
 * 14.6) answered 206: made in r's arena, or, of a body on disk past
 * CACHE_DISK_PROMOTE_MOST of parts, streamed from its file; false
 * (nothing answered) when it cannot be made: no memory, or a disk
 * entry's file short. */
static bool
multipartAnswered(CorRequest* r, CacheEntry* e, const CorRange* ranges,
                  unsigned count)
{
    const char* type = e->typeAt != 0 ? cacheEntryType(e)
                                      : "application/octet-stream";
    char boundary[COR_RANGE_BOUNDARY_SIZE];
    char* value = corRequestAlloc(r, 80);
    uint64_t total;
    char* body;
    size_t at = 0;

    corRangeBoundary(boundary, sizeof(boundary));
    total = corRangeMultipartLength(boundary, type, ranges, count, e->bodyLen);
    if (e->bodyFd >= 0 && total > CACHE_DISK_PROMOTE_MOST) {
        return multipartStreamed(r, e, type, ranges, count);
    }
    if (value == NULL
        || (body = corRequestAlloc(r, (size_t)total + 1)) == NULL) {
        return false;
    }
    for (unsigned i = 0; i < count; i++) {
        size_t len = (size_t)ranges[i].len;

        at += (size_t)corRangePartHead(body + at, boundary, type, &ranges[i],
                                       e->bodyLen);
        if (e->bodyFd < 0) {
            memcpy(body + at, cacheEntryBody(e) + ranges[i].start, len);
        } else if (pread(e->bodyFd, body + at, len,
                         (off_t)(e->bodyAt + ranges[i].start))
                   != (ssize_t)len) {
            return false;
        }
        at += len;
    }
    at += (size_t)corRangeEnd(body + at, boundary);
    snprintf(value, 80, "multipart/byteranges; boundary=%s", boundary);
    corRespondStatic(r, 206, value, body, at);
    return true;
}

/* The client's Range on a stored 200: one range answered 206 with those
 * bytes of the stored body, several a multipart/byteranges 206, none
 * inside it 416; one that cannot be read the whole answer (RFC 9110 14.2
 * allows it). */
static bool
rangeAnswered(CorRequest* r, const CorRequest* client, CacheEntry* e)
{
    const CorHeader* range = corRequestHeader(client, "range");
    CorRange ranges[COR_RANGES_MAX];
    unsigned count;
    char text[96];

    if (range == NULL || e->status != 200 || !ifRangeHolds(client, e)) {
        return false;
    }
    switch (corRangeParse(range->value, range->valueLen, e->bodyLen, ranges,
                          &count)) {
    case COR_RANGE_PARTIAL:
        if (count != 1) {
            return multipartAnswered(r, e, ranges, count);
        }
        snprintf(text, sizeof(text), "bytes %llu-%llu/%zu",
                 (unsigned long long)ranges[0].start,
                 (unsigned long long)(ranges[0].start + ranges[0].len - 1),
                 e->bodyLen);
        corResponseHeader(r, "Content-Range", text);
        bodyAnswer(r, e, 206, (size_t)ranges[0].start, (size_t)ranges[0].len);
        return true;
    case COR_RANGE_UNSATISFIABLE:
        snprintf(text, sizeof(text), "bytes */%zu", e->bodyLen);
        corResponseHeader(r, "Content-Range", text);
        corRespondStatic(r, 416, "text/plain", "range not satisfiable\n", 22);
        return true;
    default:
        return false;
    }
}

void
cacheAnswerFromEntry(CorRequest* r, CacheRun* run, const char* params)
{
    CacheEntry* e = run->entry;
    const CorRequest* client = run->client != NULL ? run->client : r;

    cacheEntryFieldsSay(r, run, params);
    if (run->clientConditional && cacheConditionMet(client, e)) {
        corRespondStatic(r, 304, NULL, NULL, 0);
        return;
    }
    if (rangeAnswered(r, client, e)) {
        return;
    }
    bodyAnswer(r, e, e->status, 0, e->bodyLen);
}

/* The handler's request without the client's validators and Range,
 * with e's validators (a revalidation) or none (a miss: the whole answer
 * is wanted, to store; a range of it is answered from the store after),
 * in a copy of the header list in r's arena. */
static int
validatorsSet(CorRequest* r, const CacheEntry* e)
{
    CorHeader* headers = corRequestAlloc(r, (r->headerCount + 2)
                                                * sizeof(*headers));
    unsigned n = 0;

    if (headers == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < r->headerCount; i++) {
        const CorHeader* h = &r->headers[i];

        if (!corHeaderIs(h, "if-none-match")
            && !corHeaderIs(h, "if-modified-since")
            && !corHeaderIs(h, "if-match")
            && !corHeaderIs(h, "if-unmodified-since")
            && !corHeaderIs(h, "if-range") && !corHeaderIs(h, "range")) {
            headers[n++] = *h;
        }
    }
    if (e != NULL && e->etagAt != 0) {
        headers[n++] = (CorHeader){ "If-None-Match", 13, cacheEntryEtag(e),
                                    strlen(cacheEntryEtag(e)) };
    }
    if (e != NULL && e->modifiedAt != 0) {
        headers[n++] = (CorHeader){ "If-Modified-Since", 17,
                                    cacheEntryModified(e),
                                    strlen(cacheEntryModified(e)) };
    }
    r->headers = headers;
    r->headerCount = n;
    return 0;
}

/* What the client asked beside the cache's own: kept before the
 * handler's request is changed, to answer it from the entry. */
static void
clientKeep(CorRequest* r, CacheRun* run)
{
    run->client = corRequestAlloc(r, sizeof(*run->client));
    if (run->client == NULL) {
        return;
    }
    *run->client = *r;
    run->clientConditional = corRequestHeader(r, "if-none-match") != NULL
                             || corRequestHeader(r, "if-modified-since")
                                    != NULL;
}

/* r's handler runs for run: a HEAD as a GET (the whole answer is
 * stored; the protocol still sends no body), with the validators of what
 * is revalidated. */
static int
fetchStart(CorRequest* r, CacheRun* run)
{
    run->requestTime = cacheNowMs();
    if (r->methodLen == 4 && memcmp(r->method, "HEAD", 4) == 0) {
        run->headWanted = true;
        r->method = "GET";
        r->methodLen = 3;
    }
    if (validatorsSet(r, run->kind == RUN_REVALIDATE ? run->entry : NULL)
        != 0) {
        cacheFlightEnd(run, FLIGHT_PASS);
        run->kind = RUN_PASS;
    }
    return COR_CACHE_PASS;
}

/* Whether e may answer r as it is, by freshness and by what r asks. */
static bool
usable(const CacheEntry* e, const CacheAsk* ask, int64_t now)
{
    if ((e->flags & ENTRY_NO_CACHE) != 0 || ask->noCache
        || !cacheEntryFresh(e, now)) {
        return false;
    }
    return ask->maxAge < 0 || cacheEntryAge(e, now) <= ask->maxAge;
}

bool
cacheStreamable(const CacheRun* run, const CacheEntry* head)
{
    const CorRequest* client = run->client != NULL ? run->client : run->r;

    return !run->r->head && !run->clientConditional
           && corRequestHeader(client, "range") == NULL
           && cacheEntryVaryMatch(head, run->r)
           && usable(head, &run->ask, cacheNowMs());
}

/* The store looked at for run's key (the first time, or after a fetch
 * r waited for). */
static int
lookupRun(CorRequest* r, CacheRun* run, const char* hit)
{
    CacheStore* s = run->store;
    int64_t now = cacheNowMs();
    CacheEntry* e = cacheStoreFind(s, run->hash, run->key, run->keyLen, r);
    CacheGrowing* growing;

    if (e == NULL) {
        e = cacheDiskFind(s, run->hash, run->key, run->keyLen, r);
    }
    if (e != NULL && usable(e, &run->ask, now)) {
        run->kind = RUN_HIT;
        run->entry = e;
        r->cacheStatus = "HIT";
        atomic_fetch_add(&s->counters.hits, 1);
        cacheAnswerFromEntry(r, run, hit);
        return COR_CACHE_ANSWERED;
    }
    if (e != NULL && !run->ask.noCache
        && cacheEntryStaleWhileRevalidate(e, now)) {
        /* Answered stale at once; one refresh at a time is asked. */
        run->kind = RUN_HIT;
        run->entry = e;
        r->cacheStatus = "STALE";
        atomic_fetch_add(&s->counters.stale, 1);
        if (!cacheFlightBusy(run)) {
            cacheRefreshStart(r);
        }
        cacheAnswerFromEntry(r, run, "hit; detail=stale-while-revalidate");
        return COR_CACHE_ANSWERED;
    }
    if (run->ask.onlyIfCached) {
        cacheEntryRelease(e);
        r->cacheStatus = "MISS";
        cacheStatusSay(r, s, "fwd=miss; detail=only-if-cached");
        corRespondStatic(r, 504, "text/plain", "not in the cache\n", 17);
        return COR_CACHE_ANSWERED;
    }
    switch (cacheFlightJoin(r, run, &growing)) {
    case JOIN_WAIT:
        cacheEntryRelease(e);
        return COR_CACHE_LATER;
    case JOIN_STREAM:
        cacheEntryRelease(e);
        if (cacheStreamAnswer(r, run, growing) != 0) {
            /* No task to read it: its own handler's answer, unstored. */
            run->kind = RUN_PASS;
            r->cacheStatus = "MISS";
            cacheStatusSay(r, s, "fwd=uri-miss; collapsed");
            return COR_CACHE_PASS;
        }
        run->kind = RUN_HIT;
        r->cacheStatus = "HIT";
        atomic_fetch_add(&s->counters.hits, 1);
        return COR_CACHE_ANSWERED;
    default:
        break;
    }
    run->stale = e != NULL;
    if (e != NULL && e->bodyFd >= 0 && e->bodyLen > CACHE_DISK_REFRESH_MOST) {
        /* A 304's refresh and stale-if-error's answer read the stored
         * body into memory: one on disk past that is fetched whole
         * again instead (streamed to a new file). */
        cacheEntryRelease(e);
        e = NULL;
    }
    /* The stale entry is kept either way: a 304 refreshes it, an error
     * may be answered with it (stale-if-error). */
    run->kind = e != NULL && (e->etagAt != 0 || e->modifiedAt != 0)
                    ? RUN_REVALIDATE
                    : RUN_FETCH;
    run->entry = e;
    r->cacheStatus = run->stale ? "STALE" : "MISS";
    atomic_fetch_add(run->stale ? &s->counters.stale : &s->counters.misses, 1);
    return fetchStart(r, run);
}

int
cacheLookupAgain(CacheRun* run)
{
    if (run->outcome == FLIGHT_PASS) {
        /* What it waited for could not be stored: its own is fetched,
         * beside the others', and stored by none of them either. */
        run->kind = RUN_PASS;
        run->r->cacheStatus = "MISS";
        cacheStatusSay(run->r, run->store, "fwd=uri-miss; collapsed");
        return COR_CACHE_PASS;
    }
    return lookupRun(run->r, run, "hit; collapsed");
}

/* Methods that change what a URL holds (RFC 9111 4.4: not safe). */
static bool
unsafe(const CorRequest* r)
{
    static const char* const safe[] = { "GET", "HEAD", "OPTIONS", "TRACE",
                                        NULL };

    for (unsigned i = 0; safe[i] != NULL; i++) {
        if (r->methodLen == strlen(safe[i])
            && memcmp(r->method, safe[i], r->methodLen) == 0) {
            return false;
        }
    }
    return true;
}

int
cacheLookup(CorRequest* r, void* arg, CorCacheWait* wait)
{
    CacheStore* s = arg;
    CacheRun* run = corRequestAlloc(r, sizeof(*run));
    bool cacheable = (r->methodLen == 3 && memcmp(r->method, "GET", 3) == 0)
                     || (r->methodLen == 4
                         && memcmp(r->method, "HEAD", 4) == 0);

    if (run == NULL) {
        return COR_CACHE_PASS; /* no memory: served as if not cached */
    }
    memset(run, 0, sizeof(*run));
    run->store = s;
    run->wait = wait;
    run->r = r;
    corListInit(&run->waiting);
    if (cacheKeyOf(r, &run->key, &run->keyLen) != 0) {
        return COR_CACHE_PASS;
    }
    run->hash = cacheHash(run->key, run->keyLen);
    run->routeFields = r->responseHeaderCount;
    r->cacheData = run;
    if (!cacheable) {
        run->kind = unsafe(r) ? RUN_INVALIDATE : RUN_PASS;
        cacheStatusSay(r, s, "fwd=method");
        return COR_CACHE_PASS;
    }
    cachePolicyAsk(r, &run->ask);
    /* The cache's own refresh validates what is stored, never takes it. */
    run->refresh = r->ops == &cacheRefreshOps;
    run->ask.noCache |= run->refresh;
    clientKeep(r, run);
    return lookupRun(r, run, "hit");
}

void
cacheRelease(CorRequest* r, void* arg)
{
    CacheRun* run = r->cacheData;
    CacheShard* shard;

    (void)arg;
    /* A fetch that ended without its answer passing the filter's end
     * (its client left before the head, say): its waiters look again. */
    cacheFlightEnd(run, FLIGHT_FAILED);
    corEvTimerStop(r->loop, &run->patience);
    if (corListLinked(&run->waiting)) {
        shard = cacheShardOf(run->store, run->hash);
        pthread_mutex_lock(&shard->lock);
        corListRemove(&run->waiting);
        pthread_mutex_unlock(&shard->lock);
    }
    cacheEntryRelease(run->entry);
    run->entry = NULL;
}
