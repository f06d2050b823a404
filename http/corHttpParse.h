/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 wire format, both sides: the request head (RFC 9112
 * sections 2 to 7) that the HTTP server module reads, the response head
 * that the HTTP client (corHttpClient.c) reads, chunked bodies (either way),
 * and two helpers around them (header lookup, query splitting). Pure code: no
 * allocation, no I/O and nothing from the rest of cor, so that it can be
 * tested and fuzzed alone.
 *
 * One copy: it is compiled into the cor binary (the HTTP floor, above the
 * core), which exports its symbols (-rdynamic) to the modules, so the
 * server module and the client read HTTP with the same code.
 *
 * It is strict on purpose. Whatever two parsers could read differently
 * (the framing headers, bare CR or LF, obs-fold, odd bytes) is refused,
 * since a request that a proxy in front frames one way and this server
 * another is a smuggled request. A refusal is an HTTP status, given as a
 * negative number; the caller answers it and closes the connection.
 *
 * Ownership: the caller's. Every pointer in a CorHttpRequestHead points
 * into the buffer it was parsed from (or at a constant "/"), and is valid
 * for as long as those bytes are.
 */
#ifndef COR_HTTP_PARSE_H
#define COR_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes of chunk extensions on one chunk-size line. */
#define COR_HTTP_CHUNK_EXT_BYTES 4096

/* The most bytes of the trailer section of a chunked body. */
#define COR_HTTP_TRAILER_BYTES 8192

typedef struct {
    const char* name;
    size_t nameLen;
    const char* value; /* optional whitespace around it trimmed */
    size_t valueLen;
} CorHttpHeader;

typedef struct {
    /* The whole head (request line, fields and the empty line) may not
     * exceed it: 431; a request line longer than it: 414. */
    size_t headerBytes;
    /* More header fields than this: 431. The caller's header array holds
     * this many. */
    unsigned maxHeaders;
    /* A Content-Length above it: 413, decided before any body byte. */
    uint64_t bodyBytes;
} CorHttpLimits;

/* A parsed request head. Owned by the caller; see the top comment. */
typedef struct {
    const char* method;
    size_t methodLen;
    /* The request-target as sent, without a "#fragment" (accepted and
     * dropped, as llhttp and nginx do); or, when pathRewritten, the same
     * with the decoded path in place of the raw one (then "?query",
     * raw). */
    const char* target;
    size_t targetLen;
    /* The path, percent-decoded, its empty segments merged and its dot
     * segments removed (normalizePath), in
     * place inside the target's bytes. Origin-form: the target's path;
     * absolute-form: the path of the URI ("/" when it has none);
     * asterisk-form (OPTIONS only): "*". */
    const char* path;
    size_t pathLen;
    /* Raw, after the '?'; NULL when there is no '?'. */
    const char* query;
    size_t queryLen;
    /* The authority of an absolute-form target, else the Host header as
     * sent (port included, case not folded); NULL when neither. */
    const char* host;
    size_t hostLen;
    int versionMinor; /* 0 or 1: HTTP/1.0 or HTTP/1.1 */
    /* The caller's array of limits->maxHeaders fields, set before the
     * call: a head takes only what it has, and a server keeps one array
     * per loop rather than one per connection. */
    CorHttpHeader* headers;
    unsigned headerCount;
    int64_t contentLength; /* -1 when absent */
    bool chunked;          /* Transfer-Encoding: chunked */
    bool keepAlive;        /* after Connection and the version default */
    bool expectContinue;   /* Expect: 100-continue, HTTP/1.1 only */
    bool head;             /* the method is HEAD */
    bool pathRewritten;    /* decoding changed the path and target */
    /* The caller's room for a raw path of up to rawCap bytes, set before
     * the call like headers (NULL: none is kept). */
    char* rawBuf;
    size_t rawCap;
    /* The path as the client sent it: what a proxy passes on, as nginx's
     * proxy_pass without a URI does. path itself when normalizing left
     * it as it was; else in rawBuf, or NULL when rawBuf is NULL or too
     * small. */
    const char* rawPath;
    size_t rawPathLen;
    size_t headLen; /* bytes of the head, the empty line included */
} CorHttpRequestHead;

/*
 * Parse a request head at the start of buf. Empty lines before the request
 * line are skipped (RFC 9112 section 2.2) and counted in headLen. Lines
 * must end in CRLF.
 *
 * buf is written to only once the whole head is there: the path is decoded
 * in place, never past the target's own bytes, so what follows the head (a
 * body, pipelined requests) is untouched. Parse a complete head once; a
 * second pass would decode the path again.
 *
 * The parser keeps no state between calls: call it again from the start
 * of the buffer when more bytes have come.
 *
 * Returns headLen (> 0) when the head is complete; 0 when more bytes are
 * needed and nothing so far breaks the grammar or a limit; or minus the
 * status to refuse the request with: -400, -413 (Content-Length above
 * bodyBytes), -414, -431, -501 (a transfer coding other than chunked),
 * -505 (a version other than HTTP/1.0 and HTTP/1.1).
 */
int corHttpParseHead(char* buf, size_t len, const CorHttpLimits* limits,
                     CorHttpRequestHead* head);

/* An origin-form target decoded as a request's is: the path and the raw
 * query (NULL when there is no '?'), pointing into the target. */
typedef struct {
    const char* path;
    size_t pathLen;
    const char* query;
    size_t queryLen;
} CorHttpTarget;

/*
 * Decode target (len bytes, "/a/%62?x=1") in place as corHttpParseHead
 * decodes a request line's: its bytes checked, its path percent-decoded
 * and its dot segments removed, its query left raw. For a protocol other
 * than HTTP/1.1 (cor://) whose requests must reach the routes exactly as
 * HTTP's do. Returns 0, or -400 for a target HTTP would refuse (not
 * starting with '/', a byte not allowed, a bad escape, %00, a path above
 * the root).
 */
int corHttpTargetDecode(char* target, size_t len, CorHttpTarget* t);

/* Whether s[0..n) is a token (RFC 9110 section 5.6.2): one tchar or more,
 * as a method or a field name must be. */
bool corHttpIsToken(const char* s, size_t n);
/* Whether s[0..n) may be a field's value: no CTL but HTAB, no DEL (a CR or
 * LF would end the field, and inject another). */
bool corHttpIsFieldValue(const char* s, size_t n);

/* The first header field named name (case-insensitive), or NULL. */
const CorHttpHeader* corHttpHeaderFind(const CorHttpRequestHead* head,
                                       const char* name);

/* The state of a chunked body's decoding. Owned by the request. */
typedef struct {
    uint64_t limit;     /* body bytes allowed in all */
    uint64_t total;     /* body bytes decoded so far */
    uint64_t size;      /* the chunk size being read, then what is left */
    uint32_t lineBytes; /* bytes of this size line's extensions, or of
                         * the trailer section */
    uint8_t digits;     /* hex digits of the size read so far */
    uint8_t state;
    int rc; /* 1 once done, -status once refused, else 0 */
} CorHttpChunked;

/* Start decoding a body that may hold at most bodyLimit bytes. */
void corHttpChunkedInit(CorHttpChunked* c, uint64_t bodyLimit);

/*
 * Decode from buf[0..len), in place: the body bytes are moved to the front
 * of buf (they never overtake the input). Sets *consumed to the input bytes
 * used and *produced to the body bytes now at buf[0..produced). The input
 * may be split anywhere between calls. Chunk extensions are checked against
 * the grammar and COR_HTTP_CHUNK_EXT_BYTES, then ignored; trailer fields
 * are checked and dropped.
 *
 * Returns 1 when the last chunk and the trailer section are complete (the
 * bytes after *consumed belong to the next request), 0 when more input is
 * needed (all of it was consumed), -400 on bad framing (a bad or overlong
 * chunk size, a missing CRLF, a bare CR or LF), -413 when the body would
 * exceed bodyLimit (decided from the chunk size, before its data), -431
 * when the trailer section exceeds COR_HTTP_TRAILER_BYTES. A refusal
 * sticks: later calls return it again.
 */
int corHttpChunkedDecode(CorHttpChunked* c, char* buf, size_t len,
                         size_t* consumed, size_t* produced);

/* One key=value pair of a query string, decoded. */
typedef struct {
    const char* key;
    size_t keyLen;
    const char* value; /* empty, not NULL, for a key without '=' */
    size_t valueLen;
} CorHttpQueryParam;

/*
 * Split a raw query string (head->query) at '&' into key=value pairs, and
 * decode each key and value ('+' is a space, %XX a byte) into out, which
 * must hold queryLen bytes; the pairs point into out. Empty pairs ("&&")
 * are skipped. Only the first maxParams pairs are stored.
 *
 * Returns the number of pairs in the query (which may be more than
 * maxParams), or -400 when a '%' is not followed by two hex digits.
 */
int corHttpQueryParse(const char* query, size_t queryLen, char* out,
                      CorHttpQueryParam* params, unsigned maxParams);

/* ---- Responses ------------------------------------------------------------
 */

/* Why a response head was refused: corHttpParseResponseHead's negative
 * results. */
typedef enum {
    COR_HTTP_RESPONSE_BAD_STATUS_LINE = -1, /* not "HTTP/1.x NNN reason" */
    COR_HTTP_RESPONSE_BAD_VERSION = -2,     /* not HTTP/1.0 or HTTP/1.1 */
    COR_HTTP_RESPONSE_BAD_FIELD = -3,       /* field syntax, obs-fold, a bare
                                               CR or LF, a control byte */
    COR_HTTP_RESPONSE_BAD_LENGTH = -4,      /* a Content-Length not a number,
                                               or two that differ */
    COR_HTTP_RESPONSE_BAD_FRAMING = -5,     /* both Content-Length and
                                               Transfer-Encoding, chunked not
                                               alone, chunked in HTTP/1.0 */
    COR_HTTP_RESPONSE_BAD_CODING = -6,      /* a transfer coding other than
                                               chunked */
    COR_HTTP_RESPONSE_TOO_LARGE = -7,       /* past headerBytes */
    COR_HTTP_RESPONSE_TOO_MANY_FIELDS = -8  /* past maxHeaders */
} CorHttpResponseError;

/* A parsed response head. Owned by the caller; pointers point into the
 * parsed buffer. */
typedef struct {
    int versionMinor;   /* 0 or 1 */
    int status;         /* 100..599 */
    const char* reason; /* possibly empty */
    size_t reasonLen;
    CorHttpHeader* headers; /* the caller's array, as for a request */
    unsigned headerCount;
    int64_t contentLength; /* -1 when absent */
    bool chunked;          /* Transfer-Encoding: chunked */
    bool keepAlive;        /* after Connection and the version default */
    size_t headLen;        /* bytes of the head, the empty line included */
} CorHttpResponseHead;

/*
 * Parse a response head at the start of buf (read only): the status line
 * "HTTP/1.1 200 OK" (the reason may be empty, and its space missing), then
 * the fields, with the same strict grammar as a request's (CRLF only, no
 * obs-fold, no whitespace before a colon). Content-Length may repeat only
 * with the same value (RFC 9110 section 8.6), also as a list "5, 5";
 * Transfer-Encoding must be exactly chunked, in HTTP/1.1, and never beside
 * a Content-Length (a response framed two ways is refused, not guessed).
 * Which body follows (none for HEAD, 1xx, 204 and 304) is the caller's to
 * decide, since only it knows the request. Keeps no state: call it again
 * from the start when more bytes have come.
 *
 * limits: headerBytes and maxHeaders (bodyBytes is not used).
 *
 * Returns headLen (> 0) when the head is complete, 0 when more bytes are
 * needed, or a CorHttpResponseError (< 0).
 */
int corHttpParseResponseHead(const char* buf, size_t len,
                             const CorHttpLimits* limits,
                             CorHttpResponseHead* head);

/* A sentence for a CorHttpResponseError ("both Content-Length and
 * Transfer-Encoding"), static. */
const char* corHttpResponseErrorText(int rc);

#endif /* COR_HTTP_PARSE_H */
