/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 parsers: one forward pass over a request or a response
 * head, driven by a 256-entry table of character classes, and a
 * byte-driven state machine for chunked bodies (corHttpParse.h has the
 * contract).
 *
 * Lines end in CRLF only. RFC 9112 section 2.2 lets a recipient take a bare
 * LF as a line end, and nginx does; we refuse it (400) everywhere: in the
 * head, on chunk-size lines, after chunk data and in trailers. A proxy in
 * front that splits lines differently from us would frame a different
 * request than we do, which is how requests get smuggled, and every client
 * worth serving sends CRLF.
 *
 * The head parser keeps no state between calls and reparses from the
 * start: a head is short, the pass is cheap, and there is no state to get
 * wrong when a read ends anywhere. It writes nothing until the head is
 * complete, so the bytes it reparses are the bytes it saw.
 */
#include "corHttpParse.h"
#include "corPath.h"

#include <assert.h>
#include <limits.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The classes of a byte: bits of charClass[]. */
enum {
    COR_HTTP_CH_TOKEN = 0x01,  /* tchar (RFC 9110 section 5.6.2) */
    COR_HTTP_CH_TARGET = 0x02, /* a request-target byte: VCHAR but '#' */
    COR_HTTP_CH_FIELD = 0x04,  /* field-content: VCHAR, obs-text, SP, HTAB */
    COR_HTTP_CH_HOST = 0x08,   /* uri-host and port: unreserved, sub-delims,
                                * ':', '[', ']' and '%' */
    COR_HTTP_CH_HEX = 0x10,
    COR_HTTP_CH_QDTEXT = 0x20 /* inside a quoted-string (section 5.6.4) */
};

/* Generated from the definitions above; the unit test checks it against
 * them byte by byte. */
static const uint8_t charClass[256] = {
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 0x00 */
    0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 0x08 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 0x10 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 0x18 */
    0x24, 0x2f, 0x06, 0x25, 0x2f, 0x2f, 0x2f, 0x2f, /* 0x20 */
    0x2e, 0x2e, 0x2f, 0x2f, 0x2e, 0x2f, 0x2f, 0x26, /* 0x28 */
    0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, /* 0x30 */
    0x3f, 0x3f, 0x2e, 0x2e, 0x26, 0x2e, 0x26, 0x26, /* 0x38 */
    0x26, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x2f, /* 0x40 */
    0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, /* 0x48 */
    0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, /* 0x50 */
    0x2f, 0x2f, 0x2f, 0x2e, 0x06, 0x2e, 0x27, 0x2f, /* 0x58 */
    0x27, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x2f, /* 0x60 */
    0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, /* 0x68 */
    0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, 0x2f, /* 0x70 */
    0x2f, 0x2f, 0x2f, 0x26, 0x27, 0x26, 0x2f, 0x00, /* 0x78 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0x80 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0x88 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0x90 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0x98 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xa0 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xa8 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xb0 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xb8 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xc0 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xc8 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xd0 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xd8 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xe0 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xe8 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xf0 */
    0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, /* 0xf8 */
};

/* The states of a chunked body, CorHttpChunked.state. The extension states
 * are contiguous, so are the trailer states. */
enum {
    COR_HTTP_CHUNK_SIZE_START,
    COR_HTTP_CHUNK_SIZE,
    COR_HTTP_CHUNK_EXT, /* BWS, then ';' or the line's end */
    COR_HTTP_CHUNK_EXT_NAME_START,
    COR_HTTP_CHUNK_EXT_NAME,
    COR_HTTP_CHUNK_EXT_AFTER_NAME, /* BWS, then '=', ';' or the end */
    COR_HTTP_CHUNK_EXT_VALUE_START,
    COR_HTTP_CHUNK_EXT_TOKEN,
    COR_HTTP_CHUNK_EXT_QUOTED,
    COR_HTTP_CHUNK_EXT_QUOTED_PAIR,
    COR_HTTP_CHUNK_SIZE_LF,
    COR_HTTP_CHUNK_DATA,
    COR_HTTP_CHUNK_DATA_CR,
    COR_HTTP_CHUNK_DATA_LF,
    COR_HTTP_CHUNK_TRAILER_START,
    COR_HTTP_CHUNK_TRAILER_NAME,
    COR_HTTP_CHUNK_TRAILER_VALUE,
    COR_HTTP_CHUNK_TRAILER_LF,
    COR_HTTP_CHUNK_END_LF,
    COR_HTTP_CHUNK_DONE
};

/* What the head's fields said, gathered while they are parsed and judged
 * once the head is complete. */
typedef struct {
    unsigned hosts;
    bool hostFromTarget; /* absolute-form: the Host header is ignored */
    bool contentLength;
    bool transferEncoding;
    bool unknownCoding;
    bool close;
    bool keepAlive;
    bool rewritePath; /* the path holds an escape or a dot segment */
} HeadFacts;

static inline bool
isClass(char ch, unsigned cls)
{
    return (charClass[(unsigned char)ch] & cls) != 0;
}

static inline bool
isOws(char ch)
{
    return ch == ' ' || ch == '\t';
}

static inline unsigned char
lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (unsigned char)(ch - 'A' + 'a')
                                  : (unsigned char)ch;
}

static inline unsigned
hexValue(char ch)
{
    return ch <= '9' ? (unsigned)(ch - '0')
                     : (unsigned)((ch | 0x20) - 'a' + 10);
}

/* Whether s[0..n) is lowerName, ignoring the case of s. */
static bool
equalsNoCase(const char* s, size_t n, const char* lowerName)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (lowerName[i] == '\0'
            || lower(s[i]) != (unsigned char)lowerName[i]) {
            return false;
        }
    }
    return lowerName[i] == '\0';
}

/* The first byte at or after p not of class cls, or end. Four bytes a
 * round: one branch for four table lookups. */
static inline const char*
scanClass(const char* p, const char* end, unsigned cls)
{
    const unsigned char* u = (const unsigned char*)p;

    while (end - (const char*)u >= 4
           && (charClass[u[0]] & charClass[u[1]] & charClass[u[2]]
               & charClass[u[3]] & cls)) {
        u += 4;
    }
    while ((const char*)u < end && (charClass[*u] & cls)) {
        u++;
    }
    return (const char*)u;
}

/*
 * The first byte at or after p that cannot be part of a field value, or
 * end. Sixteen or eight bytes at a time while none of them is a CTL (HTAB
 * included) or DEL, since the usual value is long plain text (cookies,
 * user agents); the bytes left, and a value with a HTAB, go one by one.
 *
 * SSE2 (every x86-64): a signed byte is a CTL when it is above -1 and
 * below 0x20. Elsewhere, on words: (x - 0x20..) & ~x has a high bit set
 * iff some byte of x is below 0x20, exactly (a borrow only starts at such
 * a byte, and bytes of 0x80 and above clear their bit in ~x), and
 * x ^ 0x7F.. turns DEL into a zero byte.
 */
static const char*
scanField(const char* p, const char* end)
{
#if defined(__SSE2__)
    const __m128i minus1 = _mm_set1_epi8(-1);
    const __m128i space = _mm_set1_epi8(0x20);
    const __m128i del = _mm_set1_epi8(0x7f);

    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i*)(const void*)p);
        __m128i bad = _mm_or_si128(_mm_and_si128(_mm_cmpgt_epi8(x, minus1),
                                                 _mm_cmplt_epi8(x, space)),
                                   _mm_cmpeq_epi8(x, del));
        int mask = _mm_movemask_epi8(bad);

        if (mask != 0) {
            p += __builtin_ctz((unsigned)mask);
            break;
        }
        p += 16;
    }
#else
    const uint64_t ones = 0x0101010101010101ull;
    const uint64_t highs = 0x8080808080808080ull;

    while (end - p >= 8) {
        uint64_t x;
        uint64_t xdel;

        memcpy(&x, p, sizeof(x));
        xdel = x ^ (ones * 0x7f);
        if ((((x - ones * 0x20) & ~x) | ((xdel - ones) & ~xdel)) & highs) {
            break;
        }
        p += 8;
    }
#endif
    while (p < end && isClass(*p, COR_HTTP_CH_FIELD)) {
        p++;
    }
    return p;
}

/*
 * What ends a line's content, at p: 1 for its CRLF, 0 when the bytes run
 * out before it is known, -1 for anything else (a bare CR or LF, a CTL).
 */
static inline int
crlfAt(const char* p, const char* end)
{
    if (p == end || (*p == '\r' && end - p < 2)) {
        return 0;
    }
    return *p == '\r' && p[1] == '\n' ? 1 : -1;
}

/*
 * How many bytes at p, up to end, match the n bytes of pattern ('#': a
 * digit): n when all do. Fewer with p + that == end: the bytes ran out;
 * before end: a mismatch there.
 */
static inline size_t
patternMatch(const char* p, const char* end, const char* pattern, size_t n)
{
    size_t i;

    if (n > (size_t)(end - p)) {
        n = (size_t)(end - p);
    }
    for (i = 0; i < n; i++) {
        if (pattern[i] == '#' ? p[i] < '0' || p[i] > '9' : p[i] != pattern[i]) {
            break;
        }
    }
    return i;
}

static inline bool
digitAt(const char* p)
{
    return (unsigned char)(*p - '0') <= 9;
}

/* Whether "HTTP/1.1" or "HTTP/1.0", what nearly every head says, is at p
 * (8 bytes there): a compare or two, where patternMatch takes a branch a
 * byte. */
static inline bool
versionCommonAt(const char* p)
{
    return memcmp(p, "HTTP/1.", 7) == 0 && (p[7] == '1' || p[7] == '0');
}

/* The minor version of "HTTP/d.d" at v: 0 or 1, or -1 for a version other
 * than 1.0 and 1.1. */
static inline int
versionMinor(const char* v)
{
    return v[5] != '1' || v[7] > '1' ? -1 : v[7] - '0';
}

/* A decimal number s[0..n) (n > 0), or -1 when a byte is not a digit or it
 * is above INT64_MAX. */
static int64_t
decimalParse(const char* s, size_t n)
{
    int64_t v = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)((unsigned char)s[i] - '0');

        if (d > 9 || v > (INT64_MAX - d) / 10) {
            return -1;
        }
        v = v * 10 + d;
    }
    return v;
}

/*
 * The next element of a comma-separated list (RFC 9110 section 5.6.1) at
 * *pp, before end: empty elements and the OWS around an element are
 * skipped. Sets *elem and *n and moves *pp to the comma or end after it;
 * false when no element is left.
 */
static inline bool
listNext(const char** pp, const char* end, const char** elem, size_t* n)
{
    const char* p = *pp;
    const char* stop;

    while (p < end && (*p == ',' || isOws(*p))) {
        p++;
    }
    *pp = p;
    if (p == end) {
        return false;
    }
    while (p < end && *p != ',') {
        p++;
    }
    stop = p;
    while (isOws(stop[-1])) {
        stop--;
    }
    *elem = *pp;
    *n = (size_t)(stop - *pp);
    *pp = p;
    return true;
}

/* What fieldLine found. */
typedef enum {
    LINE_FIELD, /* a field line, in *h */
    LINE_END,   /* the empty line that ends the head */
    LINE_MORE,  /* not all of the line is there yet */
    LINE_BAD,   /* a line the grammar refuses */
    LINE_FULL   /* a field line, and no room for it (h is NULL) */
} LineKind;

/*
 * The next line of a head's field section, at *pp: a field line,
 * name ":" OWS value OWS CRLF, taken into h, or the empty line. *pp moves
 * past a whole line. Inline in fieldsParse: it runs for every field of
 * every head.
 */
static inline __attribute__((always_inline)) LineKind
fieldLine(const char** pp, const char* end, CorHttpHeader* h)
{
    const char* p = *pp;
    const char* start = p;
    const char* valueEnd;
    int rc;

    if (p == end) {
        return LINE_MORE;
    }
    if (*p == '\r') {
        rc = crlfAt(p, end);
        *pp = rc > 0 ? p + 2 : p;
        return rc > 0 ? LINE_END : rc == 0 ? LINE_MORE : LINE_BAD;
    }
    if (h == NULL) {
        return LINE_FULL;
    }
    p = scanClass(p, end, COR_HTTP_CH_TOKEN);
    if (p == end) {
        return LINE_MORE;
    }
    /* This also refuses obs-fold (a line that starts with SP or HTAB),
     * whitespace before the colon, and a line without a colon. */
    if (*p != ':' || p == start) {
        return LINE_BAD;
    }
    h->name = start;
    h->nameLen = (size_t)(p - start);
    p++;
    while (p < end && isOws(*p)) {
        p++;
    }
    start = p;
    p = scanField(p, end);
    /* Not a CRLF: a CTL, NUL, DEL or bare LF, or a CR not before LF. */
    rc = crlfAt(p, end);
    if (rc <= 0) {
        return rc == 0 ? LINE_MORE : LINE_BAD;
    }
    valueEnd = p;
    while (valueEnd > start && isOws(valueEnd[-1])) {
        valueEnd--;
    }
    h->value = start;
    h->valueLen = (size_t)(valueEnd - start);
    *pp = p + 2;
    return LINE_FIELD;
}

/* What a head's parser notes of a field line (head and facts are its
 * own): 0, or its refusal (< 0). */
typedef int (*FieldSeenFn)(void* head, const CorHttpHeader* h, void* facts);

/* A head's field section, as its parser reads it. */
typedef struct {
    FieldSeenFn seen;
    int full; /* the result past maxHeaders */
    int bad;  /* for a line the grammar refuses */
} FieldRules;

/*
 * The field section at *pp, up to its empty line: each field line taken
 * into headers, *count of them (past max, rules->full), and told to
 * rules->seen, whose refusal ends it. Returns 1 with *pp past the empty
 * line, 0 when more bytes are needed, or < 0: rules->bad, rules->full,
 * seen's refusal. Inline, rules constant: the seen it calls is inlined
 * into each head's parser.
 */
static inline __attribute__((always_inline)) int
fieldsParse(const char** pp, const char* end, CorHttpHeader* headers,
            unsigned* count, unsigned max, const FieldRules* rules, void* head,
            void* facts)
{
    unsigned n = 0;

    /* The count in a local, told at the end: seen's writes to its head
     * could be to *count as far as the compiler knows, and each would
     * make it load the count again. */
    for (;;) {
        CorHttpHeader* h = &headers[n];
        LineKind line = fieldLine(pp, end, n < max ? h : NULL);
        int rc;

        if (line == LINE_END) {
            *count = n;
            return 1;
        }
        if (line != LINE_FIELD) {
            *count = n;
            return line == LINE_MORE   ? 0
                   : line == LINE_FULL ? rules->full
                                       : rules->bad;
        }
        ++n;
        rc = rules->seen(head, h, facts);
        if (rc < 0) {
            *count = n;
            return rc;
        }
    }
}

/* How much of len bytes a head may take: limits->headerBytes, and what an
 * int result can say. */
static inline size_t
headCap(size_t len, const CorHttpLimits* limits)
{
    size_t cap = len < limits->headerBytes ? len : limits->headerBytes;

    return cap < INT_MAX ? cap : INT_MAX;
}

/* Whether the connection stays open after this message (RFC 9112 section
 * 9.3): HTTP/1.1 unless it says close, 1.0 only when it says keep-alive. */
static inline bool
keepAliveOf(int versionMinor, bool close, bool keepAlive)
{
    return !close && (versionMinor == 1 || keepAlive);
}

/*
 * A Host value or the authority of a URI: host and port as RFC 3986 spells
 * them, without userinfo. ".." is refused as nginx does: a host often ends
 * up in a file name (a virtual host's root, a log).
 */
static bool
validHost(const char* s, size_t n)
{
    const char* end = s + n;
    const char* dot = s;

    if (scanClass(s, end, COR_HTTP_CH_HOST) != end) {
        return false;
    }
    while ((dot = memchr(dot, '.', (size_t)(end - dot))) != NULL) {
        if (++dot < end && *dot == '.') {
            return false;
        }
    }
    return true;
}

/* Check the escapes of a path, which starts with '/', and note whether it
 * needs rewriting: an escape, a '.' that may start a dot segment, or an
 * empty segment. */
static int
checkPath(const char* path, size_t n, HeadFacts* facts)
{
    const char* end = path + n;
    const char* p;

    /* path[0] is '/', so a '.' or a '/' after it always has a byte
     * before it. */
    for (p = path; (p = memchr(p, '.', (size_t)(end - p))) != NULL; p++) {
        if (p[-1] == '/') {
            facts->rewritePath = true;
            break;
        }
    }
    for (p = path + 1;
         !facts->rewritePath && (p = memchr(p, '/', (size_t)(end - p))) != NULL;
         p++) {
        facts->rewritePath = p[-1] == '/';
    }
    for (p = path; (p = memchr(p, '%', (size_t)(end - p))) != NULL; p += 3) {
        if (end - p < 3 || !isClass(p[1], COR_HTTP_CH_HEX)
            || !isClass(p[2], COR_HTTP_CH_HEX)) {
            return -400;
        }
        /* A NUL would cut the path short for whoever takes it as a C
         * string (a file name). */
        if (p[1] == '0' && p[2] == '0') {
            return -400;
        }
        facts->rewritePath = true;
    }
    return 0;
}

/*
 * Split the target into path and query (and, in absolute-form, the
 * authority). query is its first '?', or NULL. Authority-form (CONNECT) is
 * refused: this server is no proxy.
 */
static int
parseTarget(CorHttpRequestHead* head, const char* query, HeadFacts* facts)
{
    const char* t = head->target;
    const char* end = t + head->targetLen;
    const char* pathEnd = query != NULL ? query : end;
    const char* p;
    size_t n = (size_t)(pathEnd - t);

    if (query != NULL) {
        head->query = query + 1;
        head->queryLen = (size_t)(end - query - 1);
    }
    if (t[0] == '/') {
        head->path = t;
        head->pathLen = n;
        return checkPath(t, n, facts);
    }
    if (head->targetLen == 1 && t[0] == '*') {
        if (!(head->methodLen == 7
              && memcmp(head->method, "OPTIONS", 7) == 0)) {
            return -400;
        }
        head->path = t;
        head->pathLen = 1;
        return 0;
    }
    if (n > 7 && equalsNoCase(t, 7, "http://")) {
        p = t + 7;
    } else if (n > 8 && equalsNoCase(t, 8, "https://")) {
        p = t + 8;
    } else {
        return -400;
    }
    head->host = p;
    while (p < pathEnd && *p != '/') {
        p++;
    }
    head->hostLen = (size_t)(p - head->host);
    if (head->hostLen == 0 || !validHost(head->host, head->hostLen)) {
        return -400;
    }
    facts->hostFromTarget = true;
    if (p == pathEnd) {
        head->path = "/";
        head->pathLen = 1;
        return 0;
    }
    head->path = p;
    head->pathLen = (size_t)(pathEnd - p);
    return checkPath(p, head->pathLen, facts);
}

static int
contentLengthSeen(CorHttpRequestHead* head, const CorHttpHeader* h,
                  HeadFacts* facts)
{
    /* Two are refused even when they agree: a proxy may have used
     * either. */
    if (facts->contentLength || h->valueLen == 0) {
        return -400;
    }
    facts->contentLength = true;
    head->contentLength = decimalParse(h->value, h->valueLen);
    return head->contentLength < 0 ? -400 : 0;
}

/*
 * Transfer-Encoding: a list of codings, of which we implement one, chunked,
 * and only as the last and only coding. Chunked twice or not last is a
 * framing we refuse to guess at (400); another coding is one we do not
 * implement (501, decided once the head is complete so that a framing
 * error elsewhere wins). A coding's parameters are skipped to the next
 * comma, which is loose for a quoted comma, but any coding with parameters
 * is refused either way.
 */
static int
transferEncodingSeen(CorHttpRequestHead* head, const CorHttpHeader* h,
                     HeadFacts* facts)
{
    const char* p = h->value;
    const char* end = p + h->valueLen;
    bool chunked = false;
    bool any = false;

    /* HTTP/1.0 has no chunked coding: a 1.0 request with it was framed by
     * something that does not speak 1.1 (RFC 9112 section 6.1; nginx
     * refuses it too). A second field line is refused like a second
     * chunked. */
    if (head->versionMinor == 0 || facts->transferEncoding) {
        return -400;
    }
    facts->transferEncoding = true;
    while (p < end) {
        const char* coding;
        size_t n;
        bool params = false;

        if (*p == ',' || isOws(*p)) {
            p++;
            continue;
        }
        coding = p;
        while (p < end && isClass(*p, COR_HTTP_CH_TOKEN)) {
            p++;
        }
        n = (size_t)(p - coding);
        while (p < end && isOws(*p)) {
            p++;
        }
        if (p < end && *p == ';') {
            params = true;
            while (p < end && *p != ',') {
                p++;
            }
        }
        if (n == 0 || (p < end && *p != ',')) {
            return -400;
        }
        /* Whatever follows chunked, chunked is not last. */
        if (chunked) {
            return -400;
        }
        any = true;
        if (!equalsNoCase(coding, n, "chunked")) {
            facts->unknownCoding = true;
        } else if (params) {
            return -400;
        } else {
            chunked = true;
        }
    }
    if (!any) {
        return -400;
    }
    head->chunked = chunked && !facts->unknownCoding;
    return 0;
}

/* Connection: a list of options; "close" and "keep-alive" are ours, the
 * rest (upgrade, hop-by-hop names) is the caller's to read. */
static void
connectionSeen(const CorHttpHeader* h, HeadFacts* facts)
{
    const char* p = h->value;
    const char* end = p + h->valueLen;
    const char* option;
    size_t n;

    while (listNext(&p, end, &option, &n)) {
        if (equalsNoCase(option, n, "close")) {
            facts->close = true;
        } else if (equalsNoCase(option, n, "keep-alive")) {
            facts->keepAlive = true;
        }
    }
}

/* Note what a header field that the parser cares about says (a
 * FieldSeenFn). */
static int
headerSeen(void* headArg, const CorHttpHeader* h, void* factsArg)
{
    CorHttpRequestHead* head = headArg;
    HeadFacts* facts = factsArg;

    switch (h->nameLen) {
    case 4:
        if (equalsNoCase(h->name, 4, "host")) {
            if (++facts->hosts > 1 || !validHost(h->value, h->valueLen)) {
                return -400;
            }
            if (!facts->hostFromTarget) {
                head->host = h->value;
                head->hostLen = h->valueLen;
            }
        }
        return 0;
    case 6:
        /* RFC 9110 section 10.1.1: a 1.0 client cannot take a 100. */
        if (equalsNoCase(h->name, 6, "expect") && head->versionMinor == 1
            && equalsNoCase(h->value, h->valueLen, "100-continue")) {
            head->expectContinue = true;
        }
        return 0;
    case 10:
        if (equalsNoCase(h->name, 10, "connection")) {
            connectionSeen(h, facts);
        }
        return 0;
    case 14:
        if (equalsNoCase(h->name, 14, "content-length")) {
            return contentLengthSeen(head, h, facts);
        }
        return 0;
    case 17:
        if (equalsNoCase(h->name, 17, "transfer-encoding")) {
            return transferEncodingSeen(head, h, facts);
        }
        return 0;
    default:
        return 0;
    }
}

static const FieldRules requestFields = {
    .seen = headerSeen,
    .full = -431,
    .bad = -400,
};

/* Keep the path as the client sent it, in the caller's room, before
 * normalizing overwrites it: what a proxy passes on. */
static void
pathSentKeep(CorHttpRequestHead* head)
{
    head->rawPath = NULL;
    if (head->rawBuf == NULL || head->rawCap < head->pathLen) {
        return;
    }
    memcpy(head->rawBuf, head->path, head->pathLen);
    head->rawPath = head->rawBuf;
    head->rawPathLen = head->pathLen;
}

/*
 * Normalize the path in place, then close the gap it leaves in the target:
 * the query moves up behind the shorter path, so that the target still
 * reads as one (the normalized path, then the raw "?query") for a log,
 * rather than as the new path followed by stale bytes of the old one.
 */
static int
pathRewrite(CorHttpRequestHead* head)
{
    /* The path points into the caller's buffer, which is writable: only
     * "/" and "*" are constants, and they never need rewriting. */
    char* path = (char*)head->path;
    char* end;
    size_t n;

    pathSentKeep(head);
    if (corPathNormalize(path, head->pathLen, &n) < 0) {
        return -400;
    }
    if (n == head->pathLen) {
        /* Every step shrinks: the same length is the same path ("/.a"),
         * and the copy need not be kept. */
        head->rawPath = path;
        return (int)head->headLen;
    }
    end = path + n;
    if (head->query != NULL) {
        *end++ = '?';
        memmove(end, head->query, head->queryLen);
        head->query = end;
        end += head->queryLen;
    }
    head->pathLen = n;
    head->targetLen = (size_t)(end - head->target);
    head->pathRewritten = true;
    return (int)head->headLen;
}

int
corHttpTargetDecode(char* target, size_t len, CorHttpTarget* t)
{
    const char* end = target + len;
    const char* query;
    HeadFacts facts = { 0 };
    size_t n;

    if (len == 0 || target[0] != '/'
        || scanClass(target, end, COR_HTTP_CH_TARGET) != end) {
        return -400;
    }
    query = memchr(target, '?', len);
    n = query != NULL ? (size_t)(query - target) : len;
    t->query = query != NULL ? query + 1 : NULL;
    t->queryLen = query != NULL ? (size_t)(end - query - 1) : 0;
    if (checkPath(target, n, &facts) < 0
        || (facts.rewritePath && corPathNormalize(target, n, &n) < 0)) {
        return -400;
    }
    t->path = target;
    t->pathLen = n;
    return 0;
}

/* Judge the head as a whole, in a fixed order: framing errors (400) before
 * what we do not implement (501) before what is too large (413). */
static int
headFinish(CorHttpRequestHead* head, const HeadFacts* facts,
           const CorHttpLimits* limits)
{
    if (head->versionMinor == 1 && facts->hosts == 0) {
        return -400;
    }
    if (facts->contentLength && facts->transferEncoding) {
        return -400;
    }
    if (facts->unknownCoding) {
        return -501;
    }
    if (head->contentLength > 0
        && (uint64_t)head->contentLength > limits->bodyBytes) {
        return -413;
    }
    head->keepAlive = keepAliveOf(head->versionMinor, facts->close,
                                  facts->keepAlive);
    head->head = head->methodLen == 4 && memcmp(head->method, "HEAD", 4) == 0;
    head->rawPath = head->path;
    head->rawPathLen = head->pathLen;
    if (facts->rewritePath) {
        return pathRewrite(head);
    }
    return (int)head->headLen;
}

/*
 * One pass: leading empty lines, the request line, the fields. Running out
 * of bytes jumps to moreLine or moreHead: with fewer bytes than the limit
 * that means "call again", at the limit it is a 414 or a 431.
 */
int
corHttpParseHead(char* buf, size_t len, const CorHttpLimits* limits,
                 CorHttpRequestHead* head)
{
    static const char version[] = "HTTP/#.#\r\n"; /* '#': a digit */
    HeadFacts facts = { 0 };
    unsigned maxHeaders;
    size_t cap;
    const char* p = buf;
    const char* end;
    const char* start;
    const char* query;
    size_t n;
    int rc;

    assert(limits != NULL && head != NULL);
    cap = headCap(len, limits);
    end = buf + cap;
    maxHeaders = limits->maxHeaders;
    /* Not a memset: the header array is the caller's, and only
     * headerCount of it is read. */
    head->method = head->target = head->path = head->query = NULL;
    head->host = NULL;
    head->methodLen = head->targetLen = head->pathLen = 0;
    head->queryLen = head->hostLen = 0;
    head->versionMinor = 0;
    head->headerCount = 0;
    head->contentLength = -1;
    head->chunked = head->keepAlive = head->expectContinue = false;
    head->head = head->pathRewritten = false;
    head->headLen = 0;
    head->rawPath = NULL;
    head->rawPathLen = 0;

    while (p < end && *p == '\r') {
        rc = crlfAt(p, end);
        if (rc == 0) {
            goto moreHead;
        }
        if (rc < 0) {
            return -400;
        }
        p += 2;
    }
    if (p == end) {
        goto moreHead;
    }

    /* method SP request-target SP HTTP-version CRLF, one SP each. */
    start = p;
    p = scanClass(p, end, COR_HTTP_CH_TOKEN);
    if (p == end) {
        goto moreLine;
    }
    if (*p != ' ' || p == start) {
        return -400;
    }
    head->method = start;
    head->methodLen = (size_t)(p - start);
    start = ++p;
    p = scanClass(p, end, COR_HTTP_CH_TARGET);
    head->target = start;
    head->targetLen = (size_t)(p - start);
    if (p < end && *p == '#' && p > start) {
        /* A fragment is the client's business (RFC 9110 section 7.1), but
         * some clients send it: its bytes are checked and dropped. */
        p = scanClass(p + 1, end, COR_HTTP_CH_TARGET);
    }
    if (p == end) {
        goto moreLine;
    }
    if (*p != ' ' || head->targetLen == 0) {
        return -400;
    }
    query = memchr(start, '?', head->targetLen);
    start = ++p;
    n = end - p >= 10 && versionCommonAt(p) && p[8] == '\r' && p[9] == '\n'
            ? 10
            : patternMatch(p, end, version, sizeof(version) - 1);
    if (n < sizeof(version) - 1) {
        if (p + n == end) {
            goto moreLine;
        }
        return -400;
    }
    p += n;
    head->versionMinor = versionMinor(start);
    if (head->versionMinor < 0) {
        return -505;
    }
    rc = parseTarget(head, query, &facts);
    if (rc < 0) {
        return rc;
    }

    rc = fieldsParse(&p, end, head->headers, &head->headerCount, maxHeaders,
                     &requestFields, head, &facts);
    if (rc <= 0) {
        if (rc == 0) {
            goto moreHead;
        }
        return rc;
    }
    head->headLen = (size_t)(p - buf);
    return headFinish(head, &facts, limits);

moreLine:
    return len > cap ? -414 : 0;

moreHead:
    return len > cap ? -431 : 0;
}

/* ---- Responses ------------------------------------------------------------
 */

/* What a response head's fields said. */
typedef struct {
    bool contentLength;
    bool transferEncoding;
    bool close;
    bool keepAlive;
} ResponseFacts;

/* Content-Length, alone or as a list of one repeated value ("5, 5"); a
 * second field line must say the same. */
static int
responseLengthSeen(CorHttpResponseHead* head, const CorHttpHeader* h,
                   ResponseFacts* facts)
{
    const char* p = h->value;
    const char* end = p + h->valueLen;
    const char* value;
    size_t len;
    bool any = false;

    while (listNext(&p, end, &value, &len)) {
        int64_t n = decimalParse(value, len);

        if (n < 0
            || ((facts->contentLength || any) && n != head->contentLength)) {
            return COR_HTTP_RESPONSE_BAD_LENGTH;
        }
        head->contentLength = n;
        any = true;
    }
    if (!any) {
        return COR_HTTP_RESPONSE_BAD_LENGTH;
    }
    facts->contentLength = true;
    return 0;
}

/* Transfer-Encoding: exactly chunked, once, in HTTP/1.1. */
static int
responseCodingSeen(CorHttpResponseHead* head, const CorHttpHeader* h,
                   ResponseFacts* facts)
{
    const char* p = h->value;
    const char* end = p + h->valueLen;
    const char* coding;
    size_t n;
    unsigned codings = 0;

    if (head->versionMinor == 0 || facts->transferEncoding) {
        return COR_HTTP_RESPONSE_BAD_FRAMING;
    }
    facts->transferEncoding = true;
    while (listNext(&p, end, &coding, &n)) {
        if (!equalsNoCase(coding, n, "chunked")) {
            return COR_HTTP_RESPONSE_BAD_CODING;
        }
        codings++;
    }
    if (codings != 1) {
        return COR_HTTP_RESPONSE_BAD_FRAMING;
    }
    head->chunked = true;
    return 0;
}

/* A FieldSeenFn. */
static int
responseFieldSeen(void* headArg, const CorHttpHeader* h, void* factsArg)
{
    CorHttpResponseHead* head = headArg;
    ResponseFacts* facts = factsArg;
    HeadFacts connection = { 0 };

    if (h->nameLen == 14 && equalsNoCase(h->name, 14, "content-length")) {
        return responseLengthSeen(head, h, facts);
    }
    if (h->nameLen == 17 && equalsNoCase(h->name, 17, "transfer-encoding")) {
        return responseCodingSeen(head, h, facts);
    }
    if (h->nameLen == 10 && equalsNoCase(h->name, 10, "connection")) {
        connectionSeen(h, &connection);
        facts->close |= connection.close;
        facts->keepAlive |= connection.keepAlive;
    }
    return 0;
}

static const FieldRules responseFields = {
    .seen = responseFieldSeen,
    .full = COR_HTTP_RESPONSE_TOO_MANY_FIELDS,
    .bad = COR_HTTP_RESPONSE_BAD_FIELD,
};

/* "HTTP/1.x NNN reason\r\n": the status line, at p. Sets *lineEnd past its
 * CRLF; returns 0, 1 for more bytes, or an error. */
static int
statusLineParse(const char* p, const char* end, CorHttpResponseHead* head,
                const char** lineEnd)
{
    static const char version[] = "HTTP/#.# ###"; /* '#': a digit */
    const char* start = p;
    const char* reason;
    size_t n = end - p >= 12 && versionCommonAt(p) && p[8] == ' '
                       && digitAt(p + 9) && digitAt(p + 10) && digitAt(p + 11)
                   ? 12
                   : patternMatch(p, end, version, sizeof(version) - 1);
    int rc;

    if (n < sizeof(version) - 1) {
        if (p + n == end) {
            return 1;
        }
        return n >= 5 && n < 8 ? COR_HTTP_RESPONSE_BAD_VERSION
                               : COR_HTTP_RESPONSE_BAD_STATUS_LINE;
    }
    p += n;
    head->versionMinor = versionMinor(start);
    if (head->versionMinor < 0) {
        return COR_HTTP_RESPONSE_BAD_VERSION;
    }
    head->status = (start[9] - '0') * 100 + (start[10] - '0') * 10
                   + (start[11] - '0');
    if (head->status < 100 || head->status > 599) {
        return COR_HTTP_RESPONSE_BAD_STATUS_LINE;
    }
    if (p == end) {
        return 1;
    }
    if (*p == ' ') {
        p++;
    } else if (*p != '\r') {
        return COR_HTTP_RESPONSE_BAD_STATUS_LINE;
    }
    reason = p;
    p = scanField(p, end);
    rc = crlfAt(p, end);
    if (rc <= 0) {
        return rc == 0 ? 1 : COR_HTTP_RESPONSE_BAD_STATUS_LINE;
    }
    head->reason = reason;
    head->reasonLen = (size_t)(p - reason);
    *lineEnd = p + 2;
    return 0;
}

int
corHttpParseResponseHead(const char* buf, size_t len,
                         const CorHttpLimits* limits, CorHttpResponseHead* head)
{
    ResponseFacts facts = { 0 };
    size_t cap;
    const char* p = buf;
    const char* end;
    int rc;

    assert(limits != NULL && head != NULL);
    cap = headCap(len, limits);
    end = buf + cap;
    head->versionMinor = 0;
    head->status = 0;
    head->reason = NULL;
    head->reasonLen = 0;
    head->headerCount = 0;
    head->contentLength = -1;
    head->chunked = head->keepAlive = false;
    head->headLen = 0;

    rc = statusLineParse(p, end, head, &p);
    if (rc == 1) {
        goto more;
    }
    if (rc < 0) {
        return rc;
    }
    rc = fieldsParse(&p, end, head->headers, &head->headerCount,
                     limits->maxHeaders, &responseFields, head, &facts);
    if (rc == 0) {
        goto more;
    }
    if (rc < 0) {
        return rc;
    }
    if (facts.contentLength && facts.transferEncoding) {
        return COR_HTTP_RESPONSE_BAD_FRAMING;
    }
    head->keepAlive = keepAliveOf(head->versionMinor, facts.close,
                                  facts.keepAlive);
    head->headLen = (size_t)(p - buf);
    return (int)head->headLen;

more:
    return len > cap ? COR_HTTP_RESPONSE_TOO_LARGE : 0;
}

const char*
corHttpResponseErrorText(int rc)
{
    switch (rc) {
    case COR_HTTP_RESPONSE_BAD_STATUS_LINE:
        return "a malformed status line";
    case COR_HTTP_RESPONSE_BAD_VERSION:
        return "an HTTP version other than 1.0 and 1.1";
    case COR_HTTP_RESPONSE_BAD_FIELD:
        return "a malformed header field (bad syntax, obs-fold, a bare CR "
               "or LF, a control byte)";
    case COR_HTTP_RESPONSE_BAD_LENGTH:
        return "a malformed or contradictory Content-Length";
    case COR_HTTP_RESPONSE_BAD_FRAMING:
        return "an ambiguous framing (Content-Length with "
               "Transfer-Encoding, chunked twice or in HTTP/1.0)";
    case COR_HTTP_RESPONSE_BAD_CODING:
        return "a transfer coding other than chunked";
    case COR_HTTP_RESPONSE_TOO_LARGE:
        return "a response head over the size limit";
    case COR_HTTP_RESPONSE_TOO_MANY_FIELDS:
        return "too many header fields";
    default:
        return "a malformed response head";
    }
}

bool
corHttpIsToken(const char* s, size_t n)
{
    return n > 0 && scanClass(s, s + n, COR_HTTP_CH_TOKEN) == s + n;
}

bool
corHttpIsFieldValue(const char* s, size_t n)
{
    return scanField(s, s + n) == s + n;
}

const CorHttpHeader*
corHttpHeaderFind(const CorHttpRequestHead* head, const char* name)
{
    size_t n = strlen(name);

    for (unsigned i = 0; i < head->headerCount; i++) {
        const CorHttpHeader* h = &head->headers[i];

        if (h->nameLen == n) {
            size_t j = 0;

            while (j < n && lower(h->name[j]) == lower(name[j])) {
                j++;
            }
            if (j == n) {
                return h;
            }
        }
    }
    return NULL;
}

void
corHttpChunkedInit(CorHttpChunked* c, uint64_t bodyLimit)
{
    memset(c, 0, sizeof(*c));
    c->limit = bodyLimit;
    c->state = COR_HTTP_CHUNK_SIZE_START;
}

/*
 * One byte of chunk extensions (RFC 9112 section 7.1.1):
 *   *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ) CRLF
 * They mean nothing to us, but they are parsed, not skipped to the CR, so
 * that a quoted CR or LF is refused rather than read one way here and
 * another way in front; and their length is bounded.
 */
static int
chunkExtStep(CorHttpChunked* c, char ch)
{
    if (++c->lineBytes > COR_HTTP_CHUNK_EXT_BYTES) {
        return -400;
    }
    switch (c->state) {
    case COR_HTTP_CHUNK_EXT_QUOTED:
        if (ch == '"') {
            c->state = COR_HTTP_CHUNK_EXT;
        } else if (ch == '\\') {
            c->state = COR_HTTP_CHUNK_EXT_QUOTED_PAIR;
        } else if (!isClass(ch, COR_HTTP_CH_QDTEXT)) {
            return -400;
        }
        return 0;
    case COR_HTTP_CHUNK_EXT_QUOTED_PAIR:
        if (!isClass(ch, COR_HTTP_CH_FIELD)) {
            return -400;
        }
        c->state = COR_HTTP_CHUNK_EXT_QUOTED;
        return 0;
    case COR_HTTP_CHUNK_EXT_NAME_START:
    case COR_HTTP_CHUNK_EXT_VALUE_START:
        if (isOws(ch)) {
            return 0;
        }
        if (ch == '"' && c->state == COR_HTTP_CHUNK_EXT_VALUE_START) {
            c->state = COR_HTTP_CHUNK_EXT_QUOTED;
            return 0;
        }
        if (!isClass(ch, COR_HTTP_CH_TOKEN)) {
            return -400;
        }
        c->state = c->state == COR_HTTP_CHUNK_EXT_NAME_START
                       ? COR_HTTP_CHUNK_EXT_NAME
                       : COR_HTTP_CHUNK_EXT_TOKEN;
        return 0;
    case COR_HTTP_CHUNK_EXT_NAME:
    case COR_HTTP_CHUNK_EXT_TOKEN:
        if (isClass(ch, COR_HTTP_CH_TOKEN)) {
            return 0;
        }
        break;
    default:
        break;
    }
    /* After a name, its value or BWS: '=' (after a name only), more BWS,
     * the next ';', or the end of the line. */
    if (ch == '='
        && (c->state == COR_HTTP_CHUNK_EXT_NAME
            || c->state == COR_HTTP_CHUNK_EXT_AFTER_NAME)) {
        c->state = COR_HTTP_CHUNK_EXT_VALUE_START;
    } else if (isOws(ch)) {
        c->state = c->state == COR_HTTP_CHUNK_EXT_NAME
                           || c->state == COR_HTTP_CHUNK_EXT_AFTER_NAME
                       ? COR_HTTP_CHUNK_EXT_AFTER_NAME
                       : COR_HTTP_CHUNK_EXT;
    } else if (ch == ';') {
        c->state = COR_HTTP_CHUNK_EXT_NAME_START;
    } else if (ch == '\r') {
        c->state = COR_HTTP_CHUNK_SIZE_LF;
    } else {
        return -400;
    }
    return 0;
}

/* A framing byte that must be want (a CR or LF), after which the body is
 * in state next. */
static inline int
chunkByte(CorHttpChunked* c, char ch, char want, int next)
{
    if (ch != want) {
        return -400;
    }
    c->state = next;
    return 0;
}

/* A byte of a run of class cls that the byte end closes, after which the
 * body is in state next: a trailer field's name or value. */
static inline int
chunkRun(CorHttpChunked* c, char ch, unsigned cls, char end, int next)
{
    if (ch == end) {
        c->state = next;
        return 0;
    }
    return isClass(ch, cls) ? 0 : -400;
}

/* One byte of the trailer section: field lines as in the head (no
 * obs-fold), checked and dropped, then the empty line. */
static int
chunkTrailerStep(CorHttpChunked* c, char ch)
{
    if (++c->lineBytes > COR_HTTP_TRAILER_BYTES) {
        return -431;
    }
    switch (c->state) {
    case COR_HTTP_CHUNK_TRAILER_START:
        if (ch == '\r') {
            c->state = COR_HTTP_CHUNK_END_LF;
            return 0;
        }
        if (!isClass(ch, COR_HTTP_CH_TOKEN)) {
            return -400;
        }
        c->state = COR_HTTP_CHUNK_TRAILER_NAME;
        return 0;
    case COR_HTTP_CHUNK_TRAILER_NAME:
        return chunkRun(c, ch, COR_HTTP_CH_TOKEN, ':',
                        COR_HTTP_CHUNK_TRAILER_VALUE);
    case COR_HTTP_CHUNK_TRAILER_VALUE:
        return chunkRun(c, ch, COR_HTTP_CH_FIELD, '\r',
                        COR_HTTP_CHUNK_TRAILER_LF);
    case COR_HTTP_CHUNK_TRAILER_LF:
        return chunkByte(c, ch, '\n', COR_HTTP_CHUNK_TRAILER_START);
    default: /* COR_HTTP_CHUNK_END_LF: the body's last byte */
        return chunkByte(c, ch, '\n', COR_HTTP_CHUNK_DONE) < 0 ? -400 : 1;
    }
}

/* One byte of framing, anywhere but inside chunk data. */
static int
chunkStep(CorHttpChunked* c, char ch)
{
    switch (c->state) {
    case COR_HTTP_CHUNK_SIZE_START:
        if (!isClass(ch, COR_HTTP_CH_HEX)) {
            return -400;
        }
        c->size = hexValue(ch);
        c->digits = 1;
        c->state = COR_HTTP_CHUNK_SIZE;
        return 0;
    case COR_HTTP_CHUNK_SIZE:
        if (isClass(ch, COR_HTTP_CH_HEX)) {
            /* Sixteen digits fill 64 bits; leading zeros count too. */
            if (c->digits == 16) {
                return -400;
            }
            c->size = c->size << 4 | hexValue(ch);
            c->digits++;
            return 0;
        }
        if (c->size > c->limit - c->total) {
            return -413;
        }
        c->total += c->size;
        c->lineBytes = 0;
        c->state = COR_HTTP_CHUNK_EXT;
        return chunkExtStep(c, ch);
    case COR_HTTP_CHUNK_SIZE_LF:
        if (ch != '\n') {
            return -400;
        }
        c->lineBytes = 0;
        c->state = c->size == 0 ? COR_HTTP_CHUNK_TRAILER_START
                                : COR_HTTP_CHUNK_DATA;
        return 0;
    case COR_HTTP_CHUNK_DATA_CR:
        return chunkByte(c, ch, '\r', COR_HTTP_CHUNK_DATA_LF);
    case COR_HTTP_CHUNK_DATA_LF:
        return chunkByte(c, ch, '\n', COR_HTTP_CHUNK_SIZE_START);
    default:
        if (c->state >= COR_HTTP_CHUNK_TRAILER_START) {
            return chunkTrailerStep(c, ch);
        }
        return chunkExtStep(c, ch);
    }
}

int
corHttpChunkedDecode(CorHttpChunked* c, char* buf, size_t len, size_t* consumed,
                     size_t* produced)
{
    size_t r = 0;
    size_t w = 0;

    while (c->rc == 0 && r < len) {
        if (c->state == COR_HTTP_CHUNK_DATA) {
            size_t n = len - r;

            if (n > c->size) {
                n = (size_t)c->size;
            }
            if (w != r) {
                memmove(buf + w, buf + r, n);
            }
            w += n;
            r += n;
            c->size -= n;
            if (c->size == 0) {
                c->state = COR_HTTP_CHUNK_DATA_CR;
            }
            continue;
        }
        c->rc = chunkStep(c, buf[r++]);
    }
    *consumed = r;
    *produced = w;
    return c->rc;
}

/* Decode application/x-www-form-urlencoded text: '+' is a space. */
static int
decodeForm(const char* p, const char* end, char** out)
{
    char* w = *out;

    for (; p < end; p++) {
        if (*p == '+') {
            *w++ = ' ';
        } else if (*p != '%') {
            *w++ = *p;
        } else if (end - p >= 3 && isClass(p[1], COR_HTTP_CH_HEX)
                   && isClass(p[2], COR_HTTP_CH_HEX)) {
            *w++ = (char)(hexValue(p[1]) << 4 | hexValue(p[2]));
            p += 2;
        } else {
            return -400;
        }
    }
    *out = w;
    return 0;
}

int
corHttpQueryParse(const char* query, size_t queryLen, char* out,
                  CorHttpQueryParam* params, unsigned maxParams)
{
    const char* p = query;
    const char* end = query + queryLen;
    char* w = out;
    int count = 0;

    while (p < end) {
        const char* pairEnd = memchr(p, '&', (size_t)(end - p));
        const char* eq;
        CorHttpQueryParam param;

        if (pairEnd == NULL) {
            pairEnd = end;
        }
        if (pairEnd == p) {
            p++;
            continue;
        }
        eq = memchr(p, '=', (size_t)(pairEnd - p));
        param.key = w;
        if (decodeForm(p, eq != NULL ? eq : pairEnd, &w) < 0) {
            return -400;
        }
        param.keyLen = (size_t)(w - param.key);
        param.value = w;
        if (eq != NULL && decodeForm(eq + 1, pairEnd, &w) < 0) {
            return -400;
        }
        param.valueLen = (size_t)(w - param.value);
        if ((unsigned)count < maxParams) {
            params[count] = param;
        }
        count++;
        p = pairEnd;
    }
    return count;
}
