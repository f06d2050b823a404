/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Routes' regular expressions on PCRE2 (corRouteRegex.h). A path is
 * bytes, not necessarily UTF-8 (an escape decodes to any byte), so
 * patterns are compiled in byte mode. A match needs a match block:
 * one per thread, made on the first match, freed with the thread.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "corRouteRegex.h"

#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct CorRouteRegex {
    pcre2_code* code;
};

/* What one match may cost: PCRE2's defaults (10 million steps) would let
 * a path that makes a careless pattern backtrack hold a loop for
 * seconds; past these the match fails (the request is answered 500). */
#define MATCH_LIMIT 100000
#define DEPTH_LIMIT 10000

static pthread_key_t matchKey;
static pthread_once_t matchKeyOnce = PTHREAD_ONCE_INIT;
static int matchKeyMade = -1;
static pcre2_match_context* matchLimits;

static void
matchDataFree(void* data)
{
    pcre2_match_data_free(data);
}

static void
matchKeyMake(void)
{
    matchKeyMade = pthread_key_create(&matchKey, matchDataFree);
    matchLimits = pcre2_match_context_create(NULL);
    if (matchLimits != NULL) {
        pcre2_set_match_limit(matchLimits, MATCH_LIMIT);
        pcre2_set_depth_limit(matchLimits, DEPTH_LIMIT);
    }
}

/* The literal start of an anchored pattern: its bytes up to the first
 * that means more than itself; one less when a quantifier follows (it
 * may repeat or drop that byte); none with an alternation anywhere. */
static char*
literalPrefix(const char* pattern, bool caseless)
{
    size_t n = 0;

    if (caseless || pattern[0] != '^' || strchr(pattern, '|') != NULL) {
        return strdup("");
    }
    pattern++;
    n = strcspn(pattern, ".[]()*+?{}|\\^$");
    if (n > 0 && strchr("*+?{", pattern[n]) != NULL && pattern[n] != '\0') {
        n--;
    }
    return strndup(pattern, n);
}

CorRouteRegex*
corRouteRegexCompile(const char* pattern, bool caseless, char** prefixP,
                     char* why, size_t whyCap, size_t* offsetP)
{
    CorRouteRegex* re = calloc(1, sizeof(*re));
    int error;
    PCRE2_SIZE offset;

    *prefixP = NULL;
    pthread_once(&matchKeyOnce, matchKeyMake);
    if (re == NULL || matchKeyMade != 0 || matchLimits == NULL) {
        snprintf(why, whyCap, "out of memory");
        free(re);
        return NULL;
    }
    re->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                             caseless ? PCRE2_CASELESS : 0, &error, &offset,
                             NULL);
    if (re->code == NULL) {
        pcre2_get_error_message(error, (PCRE2_UCHAR*)why, whyCap);
        *offsetP = offset;
        free(re);
        return NULL;
    }
    /* Without the JIT (a platform without one) PCRE2 interprets. */
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    *prefixP = literalPrefix(pattern, caseless);
    if (*prefixP == NULL) {
        corRouteRegexFree(re);
        snprintf(why, whyCap, "out of memory");
        return NULL;
    }
    return re;
}

unsigned
corRouteRegexGroups(const CorRouteRegex* re)
{
    uint32_t groups = 0;

    pcre2_pattern_info(re->code, PCRE2_INFO_CAPTURECOUNT, &groups);
    return groups;
}

void
corRouteRegexFree(CorRouteRegex* re)
{
    if (re != NULL) {
        pcre2_code_free(re->code);
        free(re);
    }
}

int
corRouteRegexMatch(const CorRouteRegex* re, const char* s, size_t n,
                   size_t ov[2 * COR_ROUTE_CAPTURES])
{
    pcre2_match_data* data = pthread_getspecific(matchKey);
    const PCRE2_SIZE* found;
    uint32_t pairs;
    int rc;

    if (data == NULL) {
        data = pcre2_match_data_create(COR_ROUTE_CAPTURES, NULL);
        if (data == NULL || pthread_setspecific(matchKey, data) != 0) {
            pcre2_match_data_free(data);
            return -1;
        }
    }
    /* rc 0: more groups than the block holds; the first ten are set. */
    rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, 0, 0, data, matchLimits);
    if (rc == PCRE2_ERROR_NOMATCH) {
        return 0;
    }
    if (rc < 0) {
        return -1;
    }
    found = pcre2_get_ovector_pointer(data);
    pairs = pcre2_get_ovector_count(data);
    for (uint32_t i = 0; i < COR_ROUTE_CAPTURES; i++) {
        ov[2 * i] = i < pairs ? found[2 * i] : (size_t)-1;
        ov[2 * i + 1] = i < pairs ? found[2 * i + 1] : (size_t)-1;
    }
    return 1;
}
