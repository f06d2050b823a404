/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stored answer: made of an answer at its end, or of a stored one and
 * the 304 that refreshed it; in one allocation (its index part, key,
 * Vary values, header fields, body), immutable, and freed by its last
 * reference. Its age and freshness are RFC 9111 4.2's.
 */
#include "corCacheInt.h"

#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <strings.h>
#include <unistd.h>

/* A request header's value absent, as stored among the Vary values
 * (an empty one is a value). */
#define VARY_ABSENT "\xff"

void
cacheEntryRef(CacheEntry* e)
{
    if (e->zoned) {
        cacheMemRef(e);
        return;
    }
    atomic_fetch_add(&e->refs, 1);
}

void
cacheEntryRelease(CacheEntry* e)
{
    if (e != NULL && e->zoned) {
        cacheMemRelease(e);
        return;
    }
    if (e != NULL && atomic_fetch_sub(&e->refs, 1) == 1) {
        if (e->bodyFd >= 0) {
            close(e->bodyFd);
        }
        free(e);
    }
}

int64_t
cacheEntryAge(const CacheEntry* e, int64_t nowMs)
{
    int64_t resident = nowMs - e->responseTime;

    return e->initialAge + (resident > 0 ? resident / 1000 : 0);
}

bool
cacheEntryFresh(const CacheEntry* e, int64_t nowMs)
{
    return e->lifetime > cacheEntryAge(e, nowMs);
}

/* Whether stale e is within extra seconds past its lifetime, and no
 * directive bars a stale use (RFC 9111 4.2.4). */
static bool
staleWithin(const CacheEntry* e, int64_t extra, int64_t nowMs)
{
    return extra >= 0
           && (e->flags & (ENTRY_NO_CACHE | ENTRY_MUST_REVALIDATE)) == 0
           && cacheEntryAge(e, nowMs) < e->lifetime + extra;
}

bool
cacheEntryStaleWhileRevalidate(const CacheEntry* e, int64_t nowMs)
{
    return staleWithin(e, e->staleWhileRevalidate, nowMs);
}

bool
cacheEntryStaleIfError(const CacheEntry* e, int64_t askIfError, int64_t nowMs)
{
    int64_t extra = askIfError > e->staleIfError ? askIfError : e->staleIfError;

    return staleWithin(e, extra, nowMs);
}

/* Fields that are the hop's or the cache's own, never stored: the
 * hop-by-hop ones, the framing (a stored answer has its own length),
 * Age and Date (said anew on each answer), Cache-Status (each answer's),
 * and a Set-Cookie (one client's). */
static bool
fieldKept(const CorHeader* h)
{
    static const char* const dropped[] = { "connection",
                                           "keep-alive",
                                           "te",
                                           "trailer",
                                           "transfer-encoding",
                                           "upgrade",
                                           "proxy-connection",
                                           "content-length",
                                           "age",
                                           "date",
                                           "cache-status",
                                           "set-cookie",
                                           NULL };

    for (unsigned i = 0; dropped[i] != NULL; i++) {
        if (corHeaderIs(h, dropped[i])) {
            return false;
        }
    }
    return true;
}

/* The request's value of a header name[0..len), its first field's,
 * spaces trimmed; NULL when absent. */
static const CorHeader*
requestField(const CorRequest* r, const char* name, size_t len)
{
    for (unsigned i = 0; i < r->headerCount; i++) {
        if (corHeaderIsLen(&r->headers[i], name, len)) {
            return &r->headers[i];
        }
    }
    return NULL;
}

/* Each name of the answer's Vary fields: fn(name, len, arg). */
static void
varyNamesEach(const CorHeader* headers, unsigned count,
              void (*fn)(const char* name, size_t len, void* arg), void* arg)
{
    for (unsigned i = 0; i < count; i++) {
        const char* at;
        const char* end;

        if (!corHeaderIs(&headers[i], "vary")) {
            continue;
        }
        at = headers[i].value;
        end = at + headers[i].valueLen;
        while (at < end) {
            const char* name;

            while (at < end && (*at == ',' || *at == ' ' || *at == '\t')) {
                at++;
            }
            name = at;
            while (at < end && *at != ',' && *at != ' ' && *at != '\t') {
                at++;
            }
            if (at > name) {
                fn(name, (size_t)(at - name), arg);
            }
        }
    }
}

/* The Vary block: "name\0value\0" for each name, lowercased names; its
 * length counted first (out NULL), then written. */
typedef struct {
    const CorRequest* r;
    char* out;
    size_t len;
    unsigned count;
} VaryWrite;

static void
varyOne(const char* name, size_t len, void* arg)
{
    VaryWrite* w = arg;
    const CorHeader* h = requestField(w->r, name, len);
    const char* value = h != NULL ? h->value : VARY_ABSENT;
    size_t valueLen = h != NULL ? h->valueLen : 1;

    if (w->out != NULL) {
        for (size_t i = 0; i < len; i++) {
            w->out[w->len + i] = (char)tolower((unsigned char)name[i]);
        }
        w->out[w->len + len] = '\0';
        memcpy(w->out + w->len + len + 1, value, valueLen);
        w->out[w->len + len + 1 + valueLen] = '\0';
    }
    w->len += len + valueLen + 2;
    w->count++;
}

const char*
cacheEntryKey(const CacheEntry* e)
{
    return e->data + e->headerCount * sizeof(CacheField);
}

/* The Vary block, after the key's NUL. */
const char*
cacheEntryVary(const CacheEntry* e)
{
    return cacheEntryKey(e) + e->keyLen + 1;
}

bool
cacheEntryVaryMatch(const CacheEntry* e, const CorRequest* r)
{
    const char* at = cacheEntryVary(e);

    if ((e->flags & ENTRY_VARY_ANY) != 0) {
        return false;
    }
    for (unsigned i = 0; i < e->varyCount; i++) {
        size_t nameLen = strlen(at);
        const char* stored = at + nameLen + 1;
        size_t storedLen = strlen(stored);
        const CorHeader* h = requestField(r, at, nameLen);

        if (h == NULL ? strcmp(stored, VARY_ABSENT) != 0
                      : h->valueLen != storedLen
                            || memcmp(h->value, stored, storedLen) != 0) {
            return false;
        }
        at = stored + storedLen + 1;
    }
    return true;
}

/* What an entry is made of. */
typedef struct {
    int status;
    const char* type;
    const CorHeader* headers; /* those kept are stored */
    unsigned headerCount;
    const char* key;
    size_t keyLen;
    const char* vary; /* the Vary block, or NULL: made of r */
    size_t varyLen;
    unsigned varyCount;
    const CorRequest* r; /* for a block made of it */
    const void* body;
    size_t bodyLen;
} EntryParts;

/* s[0..len) and a NUL at *at, moved past them; where it went in e. */
static uint32_t
put(const CacheEntry* e, char** at, const char* s, size_t len)
{
    char* start = *at;

    memcpy(start, s, len);
    start[len] = '\0';
    *at += len + 1;
    return (uint32_t)(start - (const char*)e);
}

static CacheEntry*
entryBuild(const EntryParts* p)
{
    VaryWrite vary = { .r = p->r };
    size_t fields = 0;
    size_t text = 0;
    size_t total;
    CacheEntry* e;
    CacheField* list;
    char* at;
    unsigned n = 0;

    if (p->vary == NULL) {
        varyNamesEach(p->headers, p->headerCount, varyOne, &vary);
    } else {
        vary.len = p->varyLen;
        vary.count = p->varyCount;
    }
    for (unsigned i = 0; i < p->headerCount; i++) {
        if (fieldKept(&p->headers[i])) {
            fields++;
            text += p->headers[i].nameLen + p->headers[i].valueLen + 2;
        }
    }
    text += p->type != NULL ? strlen(p->type) + 1 : 0;
    total = sizeof(*e) + fields * sizeof(CacheField) + p->keyLen + 1 + vary.len
            + text + p->bodyLen + 1;
    if (vary.count > 255 || total > UINT32_MAX) {
        return NULL;
    }
    e = malloc(total);
    if (e == NULL) {
        return NULL;
    }
    memset(e, 0, sizeof(*e));
    atomic_init(&e->refs, 1);
    e->bodyFd = -1;
    e->status = (uint16_t)p->status;
    e->size = (uint32_t)total;
    /* The fields, then the key and the Vary block (what a lookup reads),
     * then the fields' text, the type and the body. */
    list = (CacheField*)(void*)e->data;
    e->headerCount = (uint32_t)fields;
    at = e->data + fields * sizeof(CacheField);
    put(e, &at, p->key, p->keyLen);
    e->keyLen = (uint32_t)p->keyLen;
    if (p->vary == NULL) {
        vary.out = at;
        vary.len = 0;
        vary.count = 0;
        varyNamesEach(p->headers, p->headerCount, varyOne, &vary);
    } else {
        memcpy(at, p->vary, p->varyLen);
    }
    at += vary.len;
    e->varyLen = (uint32_t)vary.len;
    e->varyCount = (uint8_t)vary.count;
    for (unsigned i = 0; i < p->headerCount; i++) {
        const CorHeader* h = &p->headers[i];

        if (!fieldKept(h)) {
            continue;
        }
        list[n].nameAt = put(e, &at, h->name, h->nameLen);
        list[n].nameLen = (uint32_t)h->nameLen;
        list[n].valueAt = put(e, &at, h->value, h->valueLen);
        list[n].valueLen = (uint32_t)h->valueLen;
        if (corHeaderIs(h, "etag")) {
            e->etagAt = list[n].valueAt;
        } else if (corHeaderIs(h, "last-modified")) {
            e->modifiedAt = list[n].valueAt;
        }
        n++;
    }
    e->typeAt = p->type != NULL ? put(e, &at, p->type, strlen(p->type)) : 0;
    e->bodyIn = (uint32_t)(at - (const char*)e);
    if (p->bodyLen > 0) {
        memcpy(at, p->body, p->bodyLen);
    }
    e->bodyLen = p->bodyLen;
    return e;
}

/* The freshness and age of e (4.2.3), from what its answer said; the
 * times in ms, the ages in seconds. */
static void
entryTimes(CacheEntry* e, const CacheAnswer* a, int64_t requestMs,
           int64_t responseMs)
{
    int64_t response = responseMs / 1000;
    int64_t apparent = a->date >= 0 && response > a->date ? response - a->date
                                                          : 0;
    int64_t corrected = a->age + (responseMs - requestMs) / 1000;

    e->responseTime = responseMs;
    e->initialAge = apparent > corrected ? apparent : corrected;
    e->lifetime = cachePolicyLifetime(e->status, a, response);
    e->staleWhileRevalidate = (int32_t)a->staleWhileRevalidate;
    e->staleIfError = (int32_t)a->staleIfError;
    e->flags = (uint8_t)((a->noCache ? ENTRY_NO_CACHE : 0)
                         | (a->mustRevalidate ? ENTRY_MUST_REVALIDATE : 0)
                         | (a->varyAny ? ENTRY_VARY_ANY : 0));
}

CacheEntry*
cacheEntryMake(const CorRequest* r, const CacheAnswer* a, const char* key,
               size_t keyLen, int64_t requestTime, int64_t responseTime,
               const void* body, size_t bodyLen)
{
    EntryParts p = { .status = r->status,
                     .type = r->contentType,
                     .headers = r->responseHeaders,
                     .headerCount = r->responseHeaderCount,
                     .key = key,
                     .keyLen = keyLen,
                     .r = r,
                     .body = body,
                     .bodyLen = bodyLen };
    CacheEntry* e = entryBuild(&p);

    if (e != NULL) {
        entryTimes(e, a, requestTime, responseTime);
    }
    return e;
}

/* Copy from's times and directives to e. */
static void
timesCopy(CacheEntry* e, const CacheEntry* from)
{
    e->responseTime = from->responseTime;
    e->initialAge = from->initialAge;
    e->lifetime = from->lifetime;
    e->staleWhileRevalidate = from->staleWhileRevalidate;
    e->staleIfError = from->staleIfError;
    e->flags = from->flags;
    e->hash = from->hash;
}

CacheEntry*
cacheEntryFromDisk(const CacheDiskHead* d, int fd)
{
    const CacheDiskHeader* h = &d->h;
    CorHeader* fields = malloc((h->fieldCount + 1) * sizeof(*fields));
    const char* at = d->fields;
    CacheEntry* e;
    EntryParts p;

    if (fields == NULL) {
        close(fd);
        return NULL;
    }
    for (uint32_t i = 0; i < h->fieldCount; i++) {
        fields[i].name = at;
        fields[i].nameLen = strlen(at);
        at += fields[i].nameLen + 1;
        fields[i].value = at;
        fields[i].valueLen = strlen(at);
        at += fields[i].valueLen + 1;
    }
    p = (EntryParts){ .status = h->status,
                      .type = d->type,
                      .headers = fields,
                      .headerCount = h->fieldCount,
                      .key = d->key,
                      .keyLen = h->keyLen,
                      .vary = d->vary,
                      .varyLen = h->varyLen,
                      .varyCount = h->varyCount };
    e = entryBuild(&p);
    free(fields);
    if (e == NULL) {
        close(fd);
        return NULL;
    }
    e->hash = h->keyHash;
    e->responseTime = h->responseTime;
    e->initialAge = h->initialAge;
    e->lifetime = h->lifetime;
    e->staleWhileRevalidate = h->staleWhileRevalidate;
    e->staleIfError = h->staleIfError;
    e->flags = h->flags;
    e->bodyLen = (size_t)h->bodyLen;
    e->bodyFd = fd;
    e->bodyAt = (uint32_t)(sizeof(*h) + h->headLen);
    return e;
}

/* e's fields as the core's headers, malloc'ed (NULL: out of memory). */
static CorHeader*
fieldsCopy(const CacheEntry* e)
{
    CorHeader* fields = malloc((e->headerCount + 1) * sizeof(*fields));

    for (unsigned i = 0; fields != NULL && i < e->headerCount; i++) {
        fields[i] = cacheEntryField(e, i);
    }
    return fields;
}

CacheEntry*
cacheEntryInMemory(const CacheEntry* from)
{
    char* read = NULL;
    CorHeader* fields = fieldsCopy(from);
    EntryParts p = { .status = from->status,
                     .type = cacheEntryType(from),
                     .headers = fields,
                     .headerCount = from->headerCount,
                     .key = cacheEntryKey(from),
                     .keyLen = from->keyLen,
                     .vary = cacheEntryVary(from),
                     .varyLen = from->varyLen,
                     .varyCount = from->varyCount,
                     .body = cacheEntryBody(from),
                     .bodyLen = from->bodyLen };
    CacheEntry* e;

    if (fields == NULL) {
        return NULL;
    }
    if (from->bodyFd >= 0) {
        read = malloc(from->bodyLen + 1);
        if (read == NULL
            || pread(from->bodyFd, read, from->bodyLen, from->bodyAt)
                   != (ssize_t)from->bodyLen) {
            free(read);
            free(fields);
            return NULL;
        }
        p.body = read;
    }
    e = entryBuild(&p);
    free(read);
    free(fields);
    if (e != NULL) {
        timesCopy(e, from);
    }
    return e;
}

CacheEntry*
cacheEntryRefreshed(const CacheEntry* old, const CorRequest* r,
                    int64_t requestTime, int64_t responseTime)
{
    /* A disk entry's body is read for the new one (which is written to
     * a file of its own). */
    CacheEntry* loaded = old->bodyFd >= 0 ? cacheEntryInMemory(old) : NULL;
    unsigned most = old->headerCount + r->responseHeaderCount;
    CorHeader* merged = malloc((most + 1) * sizeof(*merged));
    CacheAnswer a;
    CorRequest view;
    EntryParts p;
    unsigned n = 0;
    CacheEntry* e;

    if (old->bodyFd >= 0) {
        old = loaded;
    }
    if (merged == NULL || old == NULL) {
        free(merged);
        cacheEntryRelease(loaded);
        return NULL;
    }
    /* 4.3.4: each field of the 304 replaces the stored ones so named;
     * the others stay. */
    for (unsigned i = 0; i < old->headerCount; i++) {
        CorHeader h = cacheEntryField(old, i);

        if (corResponseHeaderGet(r, h.name) == NULL) {
            merged[n++] = h;
        }
    }
    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        if (!corHeaderIs(&r->responseHeaders[i], "content-type")) {
            merged[n++] = r->responseHeaders[i];
        }
    }
    p = (EntryParts){ .status = old->status,
                      .type = cacheEntryType(old),
                      .headers = merged,
                      .headerCount = n,
                      .key = cacheEntryKey(old),
                      .keyLen = old->keyLen,
                      .vary = cacheEntryVary(old),
                      .varyLen = old->varyLen,
                      .varyCount = old->varyCount,
                      .body = cacheEntryBody(old),
                      .bodyLen = old->bodyLen };
    e = entryBuild(&p);
    if (e != NULL) {
        /* What the merged fields say of its freshness. */
        view = *r;
        view.responseHeaders = merged;
        view.responseHeaderCount = n;
        cachePolicyAnswer(&view, &a);
        entryTimes(e, &a, requestTime, responseTime);
    }
    free(merged);
    cacheEntryRelease(loaded);
    return e;
}
