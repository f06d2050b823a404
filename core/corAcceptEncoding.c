/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Accept-Encoding (RFC 9110 12.5.3), read once for every module: a
 * coding is acceptable when the header names it with a q above 0, or
 * names "*" so and not the coding itself; q=0 refuses. What to do with
 * the weights is the caller's: compress takes its own order among the
 * acceptable (the operator knows what costs the server less), static
 * the client's q (a file compressed ahead costs nothing).
 */
#include "corAcceptEncoding.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

const char* const corCodingNames[COR_CODINGS] = {
    [COR_CODING_ZSTD] = "zstd",
    [COR_CODING_BR] = "br",
    [COR_CODING_GZIP] = "gzip",
};

/* What the header said of a coding: nothing, or 1 + its weight. */
enum { SAID_NOTHING = 0 };

static bool
isSpace(char ch)
{
    return ch == ' ' || ch == '\t';
}

/*
 * A weight's value [p, end) in thousandths: "0", "0.5", "1", "1.000".
 * Digits past the third count only as not zero (0.0001 does not
 * refuse); anything that is no qvalue does not refuse either (1000), as
 * before the weights were read.
 */
static unsigned
weightOf(const char* p, const char* end)
{
    unsigned w = 0;
    unsigned scale = 100;
    bool nonZero = false;

    if (p == end || (*p != '0' && *p != '1')) {
        return 1000;
    }
    w = *p == '1' ? 1000 : 0;
    p++;
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
            nonZero |= *p != '0';
            w += (unsigned)(*p - '0') * scale;
            scale /= 10;
        }
    }
    if ((p < end && !isSpace(*p) && *p != ';') || w > 1000) {
        return 1000;
    }
    return w == 0 && nonZero ? 1 : w;
}

/* The weight in an element's parameters [p, end). */
static unsigned
elementWeight(const char* p, const char* end)
{
    while (p < end) {
        const char* semi = memchr(p, ';', (size_t)(end - p));

        if (semi == NULL) {
            break;
        }
        for (p = semi + 1; p < end && isSpace(*p); p++) {
        }
        if (end - p >= 2 && (*p == 'q' || *p == 'Q') && p[1] == '=') {
            const char* stop = p + 2;

            while (stop < end && *stop != ';') {
                stop++;
            }
            while (stop > p + 2 && isSpace(stop[-1])) {
                stop--;
            }
            return weightOf(p + 2, stop);
        }
    }
    return 1000;
}

/* The coding an element's name [p, n) is, COR_CODINGS for "*", -1 for
 * any other. */
static int
codingOf(const char* p, size_t n)
{
    if (n == 1 && *p == '*') {
        return COR_CODINGS;
    }
    if (n == 6 && strncasecmp(p, "x-gzip", 6) == 0) {
        return COR_CODING_GZIP;
    }
    for (int i = 0; i < COR_CODINGS; i++) {
        if (strlen(corCodingNames[i]) == n
            && strncasecmp(p, corCodingNames[i], n) == 0) {
            return i;
        }
    }
    return -1;
}

void
corAcceptEncodingWeights(const char* value, size_t len,
                         unsigned weights[COR_CODINGS])
{
    unsigned said[COR_CODINGS + 1] = { 0 };
    const char* end;
    const char* p = value;

    memset(weights, 0, COR_CODINGS * sizeof(weights[0]));
    if (value == NULL) {
        return;
    }
    end = value + len; /* NULL + 0 is undefined */
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
            said[coding] = 1 + elementWeight(p, stop);
        }
        p = stop + (comma != NULL);
    }
    for (int i = 0; i < COR_CODINGS; i++) {
        unsigned s = said[i] != SAID_NOTHING ? said[i] : said[COR_CODINGS];

        weights[i] = s != SAID_NOTHING ? s - 1 : 0;
    }
}

int
corAcceptEncodingFirst(const char* value, size_t len, const CorCoding* prefer,
                       unsigned count)
{
    unsigned weights[COR_CODINGS];

    corAcceptEncodingWeights(value, len, weights);
    for (unsigned i = 0; i < count; i++) {
        if (weights[prefer[i]] > 0) {
            return (int)prefer[i];
        }
    }
    return -1;
}
