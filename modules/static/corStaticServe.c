/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The answers of a root: the request's path (what the route left of it:
 * the whole, or the rest past its strip_prefix) names a file under the
 * root, which goes out whole (200), in ranges (206; 416 when none can
 * be), or not at all because the client has it (304); a directory's
 * index is served for its path with a slash, and the path without one is
 * sent there (301). A path that would leave the root is 403; one that
 * names nothing, 404.
 *
 * The file goes out by corRespondFile: sendfile on a plain listener,
 * pread and a TLS write on a TLS one, the flow-controlled DATA frames of
 * an HTTP/2 stream; so does each single range, from its offset. Several
 * ranges are a multipart body (corStaticMultipart.c). HEAD gets GET's
 * head, Range aside (RFC 9110 14.2 defines ranges for GET only).
 */
#include "corStaticInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* ---- The path ------------------------------------------------------------ */

/* Whether s[0..n) holds an escaped '/' or NUL ("%2F", "%00"). */
static bool
escapeRefused(const char* s, size_t n)
{
    for (const char* p = s;
         (p = memchr(p, '%', (size_t)(s + n - p))) != NULL && s + n - p >= 3;
         p++) {
        if ((p[1] == '2' && (p[2] == 'f' || p[2] == 'F'))
            || (p[1] == '0' && p[2] == '0')) {
            return true;
        }
    }
    return false;
}

/* Whether a segment of path is "." or "..", or, with dotfiles, any name
 * that starts with a '.' (.git, .env, .htpasswd). */
static bool
dotSegmentHas(const char* path, size_t n, bool dotfiles)
{
    for (size_t i = 0; i < n;) {
        size_t e = i;

        while (e < n && path[e] != '/') {
            e++;
        }
        if ((e - i == 1 && path[i] == '.')
            || (e - i == 2 && path[i] == '.' && path[i + 1] == '.')
            || (dotfiles && e > i && path[i] == '.')) {
            return true;
        }
        i = e + 1;
    }
    return false;
}

/*
 * The path under the root, in r's arena ("." for the root): NULL when it
 * can name no file. The parser has removed the dot segments and a path
 * that climbs above "/", and the route matched what is left; refused
 * here too, whatever a protocol gave: a dot segment, a NUL, and an
 * escaped '/' (a file name has none; Apache's AllowEncodedSlashes off);
 * and a name starting with '.' unless the root allows them.
 */
static char*
relPath(CorRequest* r, const StaticRoot* root)
{
    const char* path = r->path;
    size_t n = r->pathLen;
    char* rel;

    if (n == 0 || path[0] != '/' || memchr(path, '\0', n) != NULL
        || dotSegmentHas(path, n, !root->dotfiles)
        || (r->rawPath != NULL && escapeRefused(r->rawPath, r->rawPathLen))) {
        return NULL;
    }
    while (n > 0 && path[0] == '/') {
        path++;
        n--;
    }
    rel = corRequestAlloc(r, n + 2);
    if (rel == NULL) {
        return NULL;
    }
    if (n == 0) {
        return strcpy(rel, ".");
    }
    memcpy(rel, path, n);
    rel[n] = '\0';
    return rel;
}

/* ---- Validators ---------------------------------------------------------- */

/* Whether the If-None-Match list holds etag or "*", compared weakly (a
 * W/ before a tag does not matter, RFC 9110 8.8.3.2). */
static bool
noneMatchHolds(const char* list, const char* etag)
{
    size_t etagLen = strlen(etag);

    for (const char* p = list; *p != '\0';) {
        size_t n;

        p += strspn(p, " \t,");
        if (strncmp(p, "W/", 2) == 0) {
            p += 2;
        }
        n = strcspn(p, " \t,");
        if ((n == 1 && *p == '*')
            || (n == etagLen && memcmp(p, etag, n) == 0)) {
            return true;
        }
        p += n;
    }
    return false;
}

/* An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), or -1. */
static time_t
dateParse(const char* text)
{
    struct tm tm;
    const char* end;

    memset(&tm, 0, sizeof(tm));
    end = strptime(text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (end == NULL || *end != '\0') {
        return -1;
    }
    return timegm(&tm);
}

/* RFC 9110 13.2.2: If-None-Match decides when present, else
 * If-Modified-Since. */
static bool
notModified(CorRequest* r, const StaticFile* f)
{
    const char* list = corRequestHeaderText(r, "if-none-match");
    const char* since;
    time_t t;

    if (list != NULL) {
        return noneMatchHolds(list, f->etag);
    }
    since = corRequestHeaderText(r, "if-modified-since");
    t = since != NULL ? dateParse(since) : -1;
    return t >= 0 && f->mtime <= t;
}

/* Whether Range applies: no If-Range, or one that names this version
 * (its ETag, compared strongly; or its Last-Modified, exactly). */
static bool
ifRangeHolds(CorRequest* r, const StaticFile* f)
{
    const char* v = corRequestHeaderText(r, "if-range");

    if (v == NULL) {
        return true;
    }
    if (v[0] == '"') {
        return strcmp(v, f->etag) == 0;
    }
    return dateParse(v) == f->mtime; /* a W/ tag parses as no date */
}

/* ---- Answers ------------------------------------------------------------- */

static void
errorAnswer(CorRequest* r, int rc)
{
    switch (rc) {
    case -ENOENT:
    case -ENOTDIR:
    case -ENAMETOOLONG:
        corRespondStatic(r, 404, "text/plain", "not found\n", 10);
        break;
    case -EXDEV:
    case -ELOOP:
    case -EACCES:
    case -EPERM:
        corRespondStatic(r, 403, "text/plain", "forbidden\n", 10);
        break;
    default:
        corLog(COR_LOG_ERROR, "static %s: %s", corRequestHandlerName(r),
               strerror(-rc));
        corRespondStatic(r, 500, "text/plain", "cannot open\n", 12);
        break;
    }
}

/* A directory asked for without its slash: 301 to the path with it,
 * relative to the request's ("name/", its query kept), so that it holds
 * whatever prefix the route stripped. */
static void
slashRedirect(CorRequest* r)
{
    static const char hex[] = "0123456789ABCDEF";
    const char* last = r->path + r->pathLen;
    size_t n = 0;
    char* location;
    char* at;

    while (last > r->path && last[-1] != '/') {
        last--;
        n++;
    }
    location = corRequestAlloc(r, 3 * n + 3 + r->queryLen + 1);
    if (location == NULL) {
        corRespondStatic(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    at = location;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)last[i];

        if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') {
            *at++ = (char)ch;
        } else if ((ch >= '0' && ch <= '9') || strchr("-._~", ch) != NULL) {
            *at++ = (char)ch;
        } else {
            *at++ = '%';
            *at++ = hex[ch >> 4];
            *at++ = hex[ch & 15];
        }
    }
    *at++ = '/';
    if (r->query != NULL) {
        *at++ = '?';
        memcpy(at, r->query, r->queryLen);
        at += r->queryLen;
    }
    *at = '\0';
    corResponseHeader(r, "Location", location);
    corRespondStatic(r, 301, "text/plain", "moved\n", 6);
}

static void
rangeAnswer(CorRequest* r, const StaticFile* f, const CorRange* ranges,
            unsigned count)
{
    char value[80];

    if (count > 1) {
        corStaticMultipartSend(r, f, f->fd, ranges, count);
        return;
    }
    snprintf(value, sizeof(value), "bytes %llu-%llu/%llu",
             (unsigned long long)ranges[0].start,
             (unsigned long long)(ranges[0].start + ranges[0].len - 1),
             (unsigned long long)f->size);
    corResponseHeader(r, "Content-Range", value);
    corRespondFile(r, 206, f->type, f->fd, (int64_t)ranges[0].start,
                   (size_t)ranges[0].len);
}

/* A regular file, rel under root (or its variant compressed ahead): its
 * validators, then the answer they and Range make. Owns f->fd. */
static void
fileAnswer(CorRequest* r, const StaticRoot* root, const char* rel,
           StaticFile* f)
{
    CorRange ranges[COR_RANGES_MAX];
    const CorHeader* range = r->head ? NULL : corRequestHeader(r, "range");
    CorRangeResult result = COR_RANGE_WHOLE;
    unsigned count = 0;
    char value[80];

    if (root->precompressed) {
        corStaticVariantTake(r, root, rel, f);
    }
    corResponseHeader(r, "ETag", f->etag);
    corResponseHeader(r, "Last-Modified", f->lastModified);
    corResponseHeader(r, "Accept-Ranges", "bytes");
    if (root->cacheControl != NULL) {
        corResponseHeader(r, "Cache-Control", root->cacheControl);
    }
    if (notModified(r, f)) {
        close(f->fd);
        corRespondStatic(r, 304, NULL, NULL, 0);
        return;
    }
    if (range != NULL && ifRangeHolds(r, f)) {
        result = corRangeParse(range->value, range->valueLen, f->size, ranges,
                               &count);
    }
    switch (result) {
    case COR_RANGE_PARTIAL:
        rangeAnswer(r, f, ranges, count);
        return;
    case COR_RANGE_UNSATISFIABLE:
        close(f->fd);
        snprintf(value, sizeof(value), "bytes */%llu",
                 (unsigned long long)f->size);
        corResponseHeader(r, "Content-Range", value);
        corRespondStatic(r, 416, "text/plain", "range not satisfiable\n", 22);
        return;
    case COR_RANGE_WHOLE:
        break;
    }
    corRespondFile(r, 200, f->type, f->fd, 0, (size_t)f->size);
}

/* A directory: its index, when the path says it is one. */
static void
indexAnswer(CorRequest* r, const StaticRoot* root, const char* rel)
{
    size_t relLen = strcmp(rel, ".") == 0 ? 0 : strlen(rel);
    char* path;
    StaticFile f;
    int rc;

    if (r->path[r->pathLen - 1] != '/') {
        slashRedirect(r);
        return;
    }
    if (root->index == NULL) {
        if (root->autoindex) {
            corStaticListAnswer(r, root, rel);
        } else {
            corRespondStatic(r, 403, "text/plain", "forbidden\n", 10);
        }
        return;
    }
    path = corRequestAlloc(r, relLen + strlen(root->index) + 1);
    if (path == NULL) {
        corRespondStatic(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    memcpy(path, rel, relLen);
    strcpy(path + relLen, root->index);
    rc = corStaticCacheOpen(root, path, &f);
    if (rc == 0 && f.dir) {
        rc = -EACCES;
    }
    if (rc == -ENOENT && root->autoindex) {
        corStaticListAnswer(r, root, rel);
        return;
    }
    if (rc < 0) {
        /* A directory without its index is not listed: forbidden, as
         * nginx's without autoindex. */
        errorAnswer(r, rc == -ENOENT ? -EACCES : rc);
        return;
    }
    fileAnswer(r, root, path, &f);
}

/* A path that names nothing: the root's fallback, as try_files' last
 * word (a single-page app's index.html for every route it draws). */
static void
fallbackAnswer(CorRequest* r, const StaticRoot* root, int rc)
{
    StaticFile f;

    if (root->fallback == NULL || (rc != -ENOENT && rc != -ENOTDIR)) {
        errorAnswer(r, rc);
        return;
    }
    rc = corStaticCacheOpen(root, root->fallback, &f);
    if (rc == 0 && f.dir) {
        rc = -EACCES;
    }
    if (rc < 0) {
        errorAnswer(r, rc);
        return;
    }
    fileAnswer(r, root, root->fallback, &f);
}

void
corStaticServe(CorRequest* r, const StaticRoot* root)
{
    StaticFile f;
    char* rel;
    int rc;

    if (!r->head && (r->methodLen != 3 || memcmp(r->method, "GET", 3) != 0)) {
        corResponseHeader(r, "Allow", "GET, HEAD");
        corRespondStatic(r, 405, "text/plain", "method not allowed\n", 19);
        return;
    }
    rel = relPath(r, root);
    if (rel == NULL) {
        corRespondStatic(r, 404, "text/plain", "not found\n", 10);
        return;
    }
    rc = corStaticCacheOpen(root, rel, &f);
    if (rc < 0) {
        fallbackAnswer(r, root, rc);
    } else if (f.dir) {
        indexAnswer(r, root, rel);
    } else {
        fileAnswer(r, root, rel, &f);
    }
}
