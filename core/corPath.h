/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request path's escaped normal form: what a proxy sends on when a
 * route's strip_prefix cut the path its routes saw. Every protocol's
 * parser gives the core two paths: the decoded one, normalized (escapes
 * decoded, empty segments merged, dot segments removed: what routes,
 * guards and files see), and the one the client sent. Cutting a prefix
 * of the first out of the second needs a form of the second that runs
 * beside the first byte for byte but for its escapes: this one.
 */
#ifndef COR_PATH_H
#define COR_PATH_H

#include <stddef.h>

/*
 * Normalize path[0..n) (starting with '/', its escapes well formed: two
 * hex digits, never %00) in place: escapes decoded, empty segments merged
 * but the last, dot segments removed. Its length to *outLen; -1 for a
 * path that climbs above the root.
 */
int corPathNormalize(char* path, size_t n, size_t* outLen);

/*
 * The path path[0..n) (starting with '/', its escapes well formed) with
 * its empty segments merged and its dot segments removed, its escapes
 * kept as they are, into out (n bytes at most; out may be path). The
 * segments are those of the decoded path: "%2F" separates too, and
 * "%2e" is a '.', so that decoding the result gives exactly the decoded
 * path corPathNormalize gives. Returns the length
 * written, or -1 for a path above the root.
 */
int corPathEscapedNormal(const char* path, size_t n, char* out);

#endif
