/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Responding: what a handler calls to answer (corRespond and its forms, a
 * file, response headers), and the claim that makes one answer win when a
 * handler and its deadline race.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Claim the right to answer r, before a response is set: false when r is
 * answered already, or its deadline passed first (the timeout answers). */
static bool
answerClaim(CorRequest* r)
{
    unsigned open = ANSWER_OPEN;

    if (r->responded) {
        return false;
    }
    /* Only a request with a deadline races its timer (armed before the
     * handler started, never re-armed): the others skip the atomic. */
    if (r->deadline.fn == NULL) {
        return true;
    }
    return atomic_compare_exchange_strong(&r->answer, &open, ANSWER_HANDLER);
}

void
corRespondSet(CorRequest* r, int status, const char* contentType,
              const void* body, size_t len)
{
    r->status = status;
    r->contentType = contentType;
    r->responseBody = body;
    r->responseLen = len;
    r->responded = true;
}

void
corRespondStatic(CorRequest* r, int status, const char* contentType,
                 const void* body, size_t len)
{
    if (answerClaim(r)) {
        corRespondSet(r, status, contentType, body, len);
    }
}

void
corRespond(CorRequest* r, int status, const char* contentType, const void* body,
           size_t len)
{
    void* copy = NULL;

    if (r->responded) {
        return;
    }
    if (len > 0) {
        copy = corRequestAlloc(r, len);
        if (copy == NULL) {
            corRespondStatic(r, 500, "text/plain", "out of memory\n", 14);
            return;
        }
        memcpy(copy, body, len);
    }
    corRespondStatic(r, status, contentType, copy, len);
}

void
corRespondf(CorRequest* r, int status, const char* contentType, const char* fmt,
            ...)
{
    char small[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        n = 0;
    }
    if ((size_t)n < sizeof(small)) {
        corRespond(r, status, contentType, small, (size_t)n);
        return;
    }
    char* big = corRequestAlloc(r, (size_t)n + 1);

    if (big == NULL) {
        corRespondStatic(r, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    corRespondStatic(r, status, contentType, big, (size_t)n);
}

void
corRespondFile(CorRequest* r, int status, const char* contentType, int fd,
               int64_t offset, size_t len)
{
    if (!answerClaim(r)) {
        close(fd);
        return;
    }
    corRespondSet(r, status, contentType, NULL, len);
    r->fileFd = fd;
    r->fileOffset = offset;
}

bool
corHeaderNameOk(const char* name, size_t len)
{
    static const char tchar[] = "!#$%&'*+-.^_`|~";

    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];

        if (!((ch >= '0' && ch <= '9')
              || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z')
              || (ch != '\0' && strchr(tchar, ch) != NULL))) {
            return false;
        }
    }
    return len > 0;
}

bool
corHeaderValueOk(const char* value, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)value[i];

        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            return false;
        }
    }
    return true;
}

bool
corHeaderNameValid(const char* name)
{
    return corHeaderNameOk(name, strlen(name));
}

bool
corHeaderValueValid(const char* value)
{
    return corHeaderValueOk(value, strlen(value));
}

/* Room for n more fields in the list at *listP; -ENOMEM. */
static int
fieldsRoom(CorRequest* r, CorHeader** listP, unsigned count, unsigned* capP,
           unsigned n)
{
    unsigned cap = *capP ? *capP : 8;
    CorHeader* grown;

    if (count + n <= *capP) {
        return 0;
    }
    while (cap < count + n) {
        cap *= 2;
    }
    grown = corRequestAlloc(r, cap * sizeof(*grown));
    if (grown == NULL) {
        return -ENOMEM;
    }
    if (count > 0) {
        memcpy(grown, *listP, count * sizeof(*grown));
    }
    *listP = grown;
    *capP = cap;
    return 0;
}

int
corResponseHeadersAdd(CorRequest* r, const CorHeader* headers, unsigned n)
{
    if (fieldsRoom(r, &r->responseHeaders, r->responseHeaderCount,
                   &r->responseHeaderCap, n)
        != 0) {
        return -ENOMEM;
    }
    memcpy(r->responseHeaders + r->responseHeaderCount, headers,
           n * sizeof(*headers));
    r->responseHeaderCount += n;
    return 0;
}

/* Add h's name: value to the list at *listP (copied, NUL-terminated,
 * into r's arena, in one piece). */
static int
fieldAdd(CorRequest* r, CorHeader** listP, unsigned* countP, unsigned* capP,
         const CorHeader* h)
{
    if (!corHeaderNameOk(h->name, h->nameLen)
        || !corHeaderValueOk(h->value, h->valueLen)) {
        corLog(COR_LOG_WARN,
               "handler %s: response header refused (a name "
               "must be a token, a value must have no CR, LF or other "
               "control character)",
               corRequestHandlerName(r));
        return -EINVAL;
    }
    if (fieldsRoom(r, listP, *countP, capP, 1) != 0) {
        return -ENOMEM;
    }
    char* copy = corRequestAlloc(r, h->nameLen + h->valueLen + 2);

    if (copy == NULL) {
        return -ENOMEM;
    }
    memcpy(copy, h->name, h->nameLen);
    copy[h->nameLen] = '\0';
    memcpy(copy + h->nameLen + 1, h->value, h->valueLen);
    copy[h->nameLen + 1 + h->valueLen] = '\0';
    (*listP)[(*countP)++] = (CorHeader){ copy, h->nameLen,
                                         copy + h->nameLen + 1, h->valueLen };
    return 0;
}

/* name: value as a field, its lengths counted. */
static CorHeader
fieldOf(const char* name, const char* value)
{
    return (CorHeader){ name, strlen(name), value, strlen(value) };
}

int
corResponseHeader(CorRequest* r, const char* name, const char* value)
{
    CorHeader h = fieldOf(name, value);

    return corResponseField(r, &h);
}

int
corResponseField(CorRequest* r, const CorHeader* h)
{
    return fieldAdd(r, &r->responseHeaders, &r->responseHeaderCount,
                    &r->responseHeaderCap, h);
}

int
corResponseTrailer(CorRequest* r, const char* name, const char* value)
{
    CorHeader h = fieldOf(name, value);

    return corResponseTrailerField(r, &h);
}

int
corResponseTrailerField(CorRequest* r, const CorHeader* h)
{
    return fieldAdd(r, &r->responseTrailers, &r->responseTrailerCount,
                    &r->responseTrailerCap, h);
}

const CorHeader*
corResponseHeaderGet(const CorRequest* r, const char* name)
{
    size_t nameLen = strlen(name);

    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        if (corHeaderIsLen(&r->responseHeaders[i], name, nameLen)) {
            return &r->responseHeaders[i];
        }
    }
    return NULL;
}

unsigned
corResponseHeaderRemove(CorRequest* r, const char* name)
{
    size_t nameLen = strlen(name);
    unsigned kept = 0;
    unsigned removed;

    for (unsigned i = 0; i < r->responseHeaderCount; i++) {
        if (!corHeaderIsLen(&r->responseHeaders[i], name, nameLen)) {
            r->responseHeaders[kept++] = r->responseHeaders[i];
        }
    }
    removed = r->responseHeaderCount - kept;
    r->responseHeaderCount = kept;
    return removed;
}
