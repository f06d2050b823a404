/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A route's "~REGEX" match: PCRE2, compiled once with its JIT, matched
 * against the normalized path; the captures go to the request
 * ({1}..{9} in templates, corRequestCapture in handlers).
 */
#ifndef COR_ROUTE_REGEX_H
#define COR_ROUTE_REGEX_H

#include <stdbool.h>
#include <stddef.h>

#define COR_ROUTE_CAPTURES 10 /* {0} the whole match, {1}..{9} */

typedef struct CorRouteRegex CorRouteRegex;

/*
 * Compile pattern (caseless: without ASCII case). NULL on an error: its
 * message and the offset in pattern it names into why and *offsetP.
 * *prefixP gets the literal text every match must start with ("/u/" for
 * "^/u/([0-9]+)$"; "" when none), a copy to free: a path that does not
 * start with it needs no match run.
 */
CorRouteRegex* corRouteRegexCompile(const char* pattern, bool caseless,
                                    char** prefixP, char* why, size_t whyCap,
                                    size_t* offsetP);
void corRouteRegexFree(CorRouteRegex* re);
/* How many capturing groups re has: {1}..{N} are its. */
unsigned corRouteRegexGroups(const CorRouteRegex* re);

/* 1 when re matches s[0..n), its captures' offsets then in ov (pairs,
 * COR_ROUTE_CAPTURES of them, unset ones (size_t)-1); 0 when it does not;
 * -1 when it could not tell (past its match or depth limit, no memory). */
int corRouteRegexMatch(const CorRouteRegex* re, const char* s, size_t n,
                       size_t ov[2 * COR_ROUTE_CAPTURES]);

#endif
