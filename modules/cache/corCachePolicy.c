/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RFC 9111's rules for a shared cache, apart from where they are used
 * (and RFC 5861's stale-while-revalidate and stale-if-error):
 * what a request's and an answer's Cache-Control say, whether an answer
 * may be stored (section 3), its freshness lifetime (4.2.1, and the
 * heuristic of 4.2.2) and HTTP dates (RFC 9110 5.6.7).
 */
#include "corCacheInt.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

int64_t
cacheNowMs(void)
{
    struct timespec now;

    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static const char* const months[] = {
    "Jan", "Feb", "Mar", "Apr", "May", "Jun",
    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"
};

int64_t
cacheHttpDate(const char* s, size_t len)
{
    char text[64];
    char month[4] = { 0 };
    struct tm tm = { 0 };
    int year = 0;

    if (len == 0 || len >= sizeof(text)) {
        return -1;
    }
    memcpy(text, s, len);
    text[len] = '\0';
    /* IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850's "Sunday,
     * 06-Nov-94 08:49:37 GMT", asctime's "Sun Nov  6 08:49:37 1994". */
    if (sscanf(text, "%*3s, %2d %3s %4d %2d:%2d:%2d GMT", &tm.tm_mday, month,
               &year, &tm.tm_hour, &tm.tm_min, &tm.tm_sec)
            != 6
        && sscanf(text, "%*[A-Za-z], %2d-%3s-%2d %2d:%2d:%2d GMT", &tm.tm_mday,
                  month, &year, &tm.tm_hour, &tm.tm_min, &tm.tm_sec)
               != 6
        && sscanf(text, "%*3s %3s %2d %2d:%2d:%2d %4d", month, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &year)
               != 6) {
        return -1;
    }
    if (year < 100) {
        year += year < 70 ? 2000 : 1900; /* RFC 9110 5.6.7: 50 years */
    }
    tm.tm_year = year - 1900;
    tm.tm_mon = -1;
    for (int i = 0; i < 12; i++) {
        if (strcasecmp(month, months[i]) == 0) {
            tm.tm_mon = i;
        }
    }
    if (tm.tm_mon < 0 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23
        || tm.tm_min > 59 || tm.tm_sec > 60) {
        return -1;
    }
    return (int64_t)timegm(&tm);
}

/* A delta-seconds (RFC 9111 1.2.2): digits, capped; -1 when none. */
static int64_t
deltaSeconds(const char* s, size_t len)
{
    int64_t n = 0;

    if (len > 0 && *s == '"' && len >= 2 && s[len - 1] == '"') {
        s++;
        len -= 2; /* a quoted one is taken (section 4.2.1) */
    }
    if (len == 0) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) {
            return -1;
        }
        if (n < 2147483648LL) {
            n = n * 10 + (s[i] - '0');
        }
    }
    return n < 2147483648LL ? n : 2147483648LL; /* 1.2.2's cap */
}

/* One directive of a Cache-Control list. */
typedef struct {
    const char* name;
    size_t nameLen;
    const char* value; /* NULL: none */
    size_t valueLen;
} Directive;

/* Call each(directive, arg) for each directive of h's value, a comma
 * list of token[=token|quoted-string]. */
static void
directivesEach(const CorHeader* h, void (*each)(const Directive*, void*),
               void* arg)
{
    const char* at = h->value;
    const char* end = h->value + h->valueLen;

    while (at < end) {
        Directive d = { 0 };

        while (at < end && (*at == ',' || *at == ' ' || *at == '\t')) {
            at++;
        }
        d.name = at;
        while (at < end && *at != '=' && *at != ',' && *at != ' '
               && *at != '\t') {
            at++;
        }
        d.nameLen = (size_t)(at - d.name);
        while (at < end && (*at == ' ' || *at == '\t')) {
            at++;
        }
        if (at < end && *at == '=') {
            at++;
            d.value = at;
            if (at < end && *at == '"') {
                at++;
                while (at < end && *at != '"') {
                    at += *at == '\\' && at + 1 < end ? 2 : 1;
                }
                at += at < end;
            } else {
                while (at < end && *at != ',' && *at != ' ' && *at != '\t') {
                    at++;
                }
            }
            d.valueLen = (size_t)(at - d.value);
        }
        while (at < end && *at != ',') {
            at++; /* what follows a directive, up to the next */
        }
        if (d.nameLen > 0) {
            each(&d, arg);
        }
    }
}

static bool
named(const Directive* d, const char* name)
{
    return d->nameLen == strlen(name)
           && strncasecmp(d->name, name, d->nameLen) == 0;
}

static void
askDirective(const Directive* d, void* arg)
{
    CacheAsk* ask = arg;

    if (named(d, "no-cache")) {
        ask->noCache = true;
    } else if (named(d, "no-store")) {
        ask->noStore = true;
    } else if (named(d, "only-if-cached")) {
        ask->onlyIfCached = true;
    } else if (named(d, "max-age") && d->value != NULL) {
        ask->maxAge = deltaSeconds(d->value, d->valueLen);
        /* Ages are whole seconds: one 0.4 s old is "0", which max-age=0
         * would take; what a reload means by it is "validate". */
        ask->noCache |= ask->maxAge == 0;
    } else if (named(d, "stale-if-error") && d->value != NULL) {
        ask->staleIfError = deltaSeconds(d->value, d->valueLen);
    }
}

void
cachePolicyAsk(const CorRequest* r, CacheAsk* ask)
{
    bool controlled = false;

    *ask = (CacheAsk){ .maxAge = -1, .staleIfError = -1 };
    for (unsigned i = 0; i < r->headerCount; i++) {
        if (corHeaderIs(&r->headers[i], "cache-control")) {
            controlled = true;
            directivesEach(&r->headers[i], askDirective, ask);
        }
    }
    /* Pragma: no-cache counts only where Cache-Control is absent (RFC
     * 9111 5.4, deprecated but still sent by HTTP/1.0 clients). */
    for (unsigned i = 0; !controlled && i < r->headerCount; i++) {
        if (corHeaderIs(&r->headers[i], "pragma")
            && corHeaderListHas(&r->headers[i], "no-cache", 8)) {
            ask->noCache = true;
        }
    }
}

static void
answerDirective(const Directive* d, void* arg)
{
    CacheAnswer* a = arg;

    if (named(d, "no-store")) {
        a->noStore = true;
    } else if (named(d, "private")) {
        /* The qualified form (private="Set-Cookie") is taken whole: a
         * shared cache that stored the rest would still hand out what
         * the origin meant for one user alone, if it misread the list. */
        a->private = true;
    } else if (named(d, "no-cache")) {
        a->noCache = true;
    } else if (named(d, "public")) {
        a->isPublic = true;
    } else if (named(d, "must-revalidate") || named(d, "proxy-revalidate")) {
        a->mustRevalidate = true;
    } else if (named(d, "max-age") && d->value != NULL) {
        a->maxAge = deltaSeconds(d->value, d->valueLen);
    } else if (named(d, "stale-while-revalidate") && d->value != NULL) {
        a->staleWhileRevalidate = deltaSeconds(d->value, d->valueLen);
    } else if (named(d, "stale-if-error") && d->value != NULL) {
        a->staleIfError = deltaSeconds(d->value, d->valueLen);
    } else if (named(d, "s-maxage") && d->value != NULL) {
        a->sMaxAge = deltaSeconds(d->value, d->valueLen);
        /* s-maxage implies proxy-revalidate (5.2.2.10) */
        a->mustRevalidate = a->sMaxAge >= 0 || a->mustRevalidate;
    }
}

void
cachePolicyAnswer(const CorRequest* r, CacheAnswer* a)
{
    *a = (CacheAnswer){ .date = -1,
                        .expires = -1,
                        .maxAge = -1,
                        .sMaxAge = -1,
                        .modified = -1,
                        .staleWhileRevalidate = -1,
                        .staleIfError = -1 };
    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        const CorHeader* h = &r->responseHeaders[i];

        if (corHeaderIs(h, "cache-control")) {
            directivesEach(h, answerDirective, a);
        } else if (corHeaderIs(h, "expires")) {
            int64_t t = cacheHttpDate(h->value, h->valueLen);

            /* An invalid date is one in the past (5.3). */
            a->expires = t < 0 ? 0 : t;
        } else if (corHeaderIs(h, "date")) {
            a->date = cacheHttpDate(h->value, h->valueLen);
        } else if (corHeaderIs(h, "age")) {
            int64_t age = deltaSeconds(h->value, h->valueLen);

            a->age = age > 0 ? age : 0;
        } else if (corHeaderIs(h, "last-modified")) {
            a->modified = cacheHttpDate(h->value, h->valueLen);
        } else if (corHeaderIs(h, "set-cookie")) {
            a->setCookie = true;
        } else if (corHeaderIs(h, "vary")) {
            a->varyAny |= corHeaderListHas(h, "*", 1);
        }
    }
}

/* The statuses whose answers may be given a heuristic freshness and be
 * stored without explicit freshness (RFC 9110 15.1). */
static bool
heuristicStatus(int status)
{
    switch (status) {
    case 200:
    case 203:
    case 204:
    case 206:
    case 300:
    case 301:
    case 308:
    case 404:
    case 405:
    case 410:
    case 414:
    case 501:
        return true;
    default:
        return false;
    }
}

/* The statuses this cache stores at all: final ones it understands;
 * a 206 is not stored until Range is served from a stored whole. */
static bool
statusUnderstood(int status)
{
    return status >= 200 && status < 600 && status != 206 && status != 304;
}

bool
cachePolicyStorable(const CorRequest* r, const CacheAnswer* a,
                    const CacheAsk* ask)
{
    bool explicitFresh = a->maxAge >= 0 || a->sMaxAge >= 0 || a->expires >= 0;

    if (!statusUnderstood(r->status) || a->noStore || ask->noStore || a->private
        || a->varyAny) {
        return false;
    }
    /* A Set-Cookie is one client's: never handed to another (nginx and
     * Varnish keep none either). */
    if (a->setCookie) {
        return false;
    }
    /* 3.5: an answer to a request with credentials only when it says it
     * may be shared. */
    if (corRequestHeader(r, "authorization") != NULL && !a->isPublic
        && a->sMaxAge < 0 && !a->mustRevalidate) {
        return false;
    }
    return explicitFresh || a->isPublic || a->noCache
           || (heuristicStatus(r->status) && a->modified >= 0);
}

int64_t
cachePolicyLifetime(int status, const CacheAnswer* a, int64_t responseTime)
{
    int64_t date = a->date >= 0 ? a->date : responseTime;

    if (a->noCache) {
        return 0;
    }
    if (a->sMaxAge >= 0) {
        return a->sMaxAge;
    }
    if (a->maxAge >= 0) {
        return a->maxAge;
    }
    if (a->expires >= 0) {
        return a->expires > date ? a->expires - date : 0;
    }
    /* 4.2.2: a tenth of the time since it last changed, at most a day. */
    if (heuristicStatus(status) && a->modified >= 0 && a->modified < date) {
        int64_t tenth = (date - a->modified) / 10;

        return tenth < 86400 ? tenth : 86400;
    }
    return 0;
}
