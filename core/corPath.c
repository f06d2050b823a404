/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request path's two normal forms (corPath.h): the decoded one, which
 * every protocol's parser gives routes and guards, and the encoded one,
 * which a strip_prefix cuts; both walk the same segments, so that they
 * agree on what "//", "/./", "/../", "%2F" and "%2e%2e" mean (corPathTest
 * holds them to it).
 */
#include "corPath.h"

#include <assert.h>
#include <string.h>

static char
lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch + 'a' - 'A') : ch;
}

static unsigned
hexValue(char ch)
{
    return ch <= '9' ? (unsigned)(ch - '0')
                     : (unsigned)((ch | 0x20) - 'a' + 10);
}

/*
 * Decode the escapes of a path in place, then merge its empty segments
 * (nginx's merge_slashes) and remove its dot segments (RFC 3986 section
 * 5.2.4), so that "//b", "/./b", "/a/%2e%2e/b" and "/b" are the same path
 * to every route, guard and module that reads it: a guard on "/b/" prefix
 * meets them all. Escapes go first, as nginx does: "%2F" is then a '/',
 * and ".." made of escapes is a dot segment too. A path that climbs
 * above the root is refused. Every step only shrinks, so the output
 * never overtakes the input. corPathEscapedNormal walks the same
 * segments of the encoded path.
 */
int
corPathNormalize(char* path, size_t n, size_t* outLen)
{
    size_t r;
    size_t w = 0;

    for (r = 0; r < n; r++) {
        if (path[r] == '%') {
            path[w++] = (char)(hexValue(path[r + 1]) << 4
                               | hexValue(path[r + 2]));
            r += 2;
        } else {
            path[w++] = path[r];
        }
    }
    n = w;
    /* Segments "/seg": drop an empty one but the last ("/a/" names a
     * folder), copy, drop ".", pop the last copied one for "..". A path
     * ending in "/." or "/.." keeps its trailing '/'. */
    w = 0;
    for (r = 0; r < n;) {
        size_t e = r + 1;

        while (e < n && path[e] != '/') {
            e++;
        }
        if (e - r == 1 && e < n) {
            /* "//": nothing to copy */
        } else if (e - r == 2 && path[r + 1] == '.') {
            if (e == n) {
                path[w++] = '/';
            }
        } else if (e - r == 3 && path[r + 1] == '.' && path[r + 2] == '.') {
            if (w == 0) {
                return -1;
            }
            while (path[--w] != '/') {
            }
            if (e == n) {
                path[w++] = '/';
            }
        } else {
            memmove(path + w, path + r, e - r);
            w += e - r;
        }
        r = e;
    }
    /* The last segment always leaves something: itself, or a '/'. */
    assert(w > 0);
    *outLen = w;
    return 0;
}

/* The length of the separator at p[0..n): '/', "%2F" or "%2f"; 0 for
 * none. */
static size_t
separatorAt(const char* p, size_t n)
{
    if (p[0] == '/') {
        return 1;
    }
    return n >= 3 && p[0] == '%' && p[1] == '2' && lower(p[2]) == 'f' ? 3 : 0;
}

/* 1 when the raw segment s[0..n) decodes to ".", 2 to "..", else 0. */
static int
dotSegment(const char* s, size_t n)
{
    int dots = 0;

    for (size_t i = 0; i < n && dots <= 2; dots++) {
        if (s[i] == '.') {
            i++;
        } else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2'
                   && lower(s[i + 2]) == 'e') {
            i += 3;
        } else {
            return 0;
        }
    }
    return dots <= 2 ? dots : 0;
}

/* Where the last separator in out[0..w) starts (w > 0, out[0] is one).
 * An escape in out is whole, so a '%' before w has its two bytes. */
static size_t
separatorLast(const char* out, size_t w)
{
    while (--w > 0 && separatorAt(out + w, 3) == 0) {
    }
    return w;
}

int
corPathEscapedNormal(const char* path, size_t n, char* out)
{
    size_t w = 0;

    /* Segments "<separator>seg": an empty one merged with the next (the
     * last is kept: "/a/" names a folder), "." dropped, ".." pops the
     * last kept; the separator that starts a kept one stays as it came,
     * but at the very start, where only a '/' makes a path. */
    for (size_t r = 0; r < n;) {
        size_t sep = separatorAt(path + r, n - r);
        size_t e = r + sep;
        int dots;

        while (e < n && separatorAt(path + e, n - e) == 0) {
            e++;
        }
        if (e == r + sep && e < n) {
            r = e;
            continue;
        }
        dots = dotSegment(path + r + sep, e - r - sep);
        if (dots == 2) {
            if (w == 0) {
                return -1;
            }
            w = separatorLast(out, w);
        }
        if (dots > 0) {
            if (e == n) {
                out[w++] = '/';
            }
        } else if (w == 0 && sep == 3) {
            out[w++] = '/';
            memmove(out + w, path + r + 3, e - r - 3);
            w += e - r - 3;
        } else {
            memmove(out + w, path + r, e - r);
            w += e - r;
        }
        r = e;
    }
    return (int)w;
}
