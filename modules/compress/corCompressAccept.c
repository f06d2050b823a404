/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Accept-Encoding (RFC 9110 12.5.3): which of the encodings the client
 * takes. A coding is acceptable when the header names it with a q above
 * 0, or names "*" so and not the coding itself; q=0 refuses. Among the
 * acceptable, the server's order (the module's encodings:) picks, not
 * the client's q: every client that takes br takes it about as well, and
 * the operator knows what costs the server less.
 */
#include "corCompressInt.h"

#include <string.h>
#include <strings.h>

/* The names Accept-Encoding and Content-Encoding give them. */
const char* const corCompressNames[COMPRESS_ENCODINGS] = {
    [COMPRESS_ZSTD] = "zstd",
    [COMPRESS_BR] = "br",
    [COMPRESS_GZIP] = "gzip",
};

/* What the header said of a coding: nothing, refused, accepted. */
enum { SAID_NOTHING, SAID_NO, SAID_YES };

static bool
isSpace(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Whether a weight's value is 0 (q=0, 0.0, 0.000): anything else, even
 * malformed, does not refuse. */
static bool
weightZero(const char* p, const char* end)
{
    if (p == end || *p != '0') {
        return false;
    }
    p++;
    if (p < end && *p == '.') {
        for (p++; p < end && *p == '0'; p++) {
        }
    }
    return p == end || isSpace(*p) || *p == ';';
}

/* The weight in an element's parameters [p, end): refused (q=0) or not. */
static int
elementSaid(const char* p, const char* end)
{
    while (p < end) {
        const char* semi = memchr(p, ';', (size_t)(end - p));

        if (semi == NULL) {
            break;
        }
        for (p = semi + 1; p < end && isSpace(*p); p++) {
        }
        if (end - p >= 2 && (*p == 'q' || *p == 'Q') && p[1] == '=') {
            return weightZero(p + 2, end) ? SAID_NO : SAID_YES;
        }
    }
    return SAID_YES;
}

/* The coding an element's name [p, n) is, COMPRESS_ENCODINGS for "*",
 * -1 for any other. */
static int
codingOf(const char* p, size_t n)
{
    if (n == 1 && *p == '*') {
        return COMPRESS_ENCODINGS;
    }
    if (n == 6 && strncasecmp(p, "x-gzip", 6) == 0) {
        return COMPRESS_GZIP;
    }
    for (int i = 0; i < COMPRESS_ENCODINGS; i++) {
        if (strlen(corCompressNames[i]) == n
            && strncasecmp(p, corCompressNames[i], n) == 0) {
            return i;
        }
    }
    return -1;
}

int
corCompressNegotiate(const char* value, size_t valueLen,
                     const CompressEncoding* prefer, unsigned count)
{
    int said[COMPRESS_ENCODINGS + 1] = {0};
    const char* end;
    const char* p = value;

    if (value == NULL) {
        return -1;
    }
    end = value + valueLen;     /* NULL + 0 is undefined */
    while (p < end) {
        const char* comma = memchr(p, ',', (size_t)(end - p));
        const char* stop = comma != NULL ? comma : end;
        const char* name;
        int coding;

        for (; p < stop && isSpace(*p); p++) {
        }
        name = p;
        for (; p < stop && !isSpace(*p) && *p != ';'; p++) {
        }
        coding = codingOf(name, (size_t)(p - name));
        if (coding >= 0) {
            said[coding] = elementSaid(p, stop);
        }
        p = stop + (comma != NULL);
    }
    for (unsigned i = 0; i < count; i++) {
        int s = said[prefer[i]];

        if (s == SAID_YES
            || (s == SAID_NOTHING && said[COMPRESS_ENCODINGS] == SAID_YES)) {
            return (int)prefer[i];
        }
    }
    return -1;
}
