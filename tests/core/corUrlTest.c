/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one URL parser of cor's clients (core/corUrl.c, included): http,
 * https, cor, mqtt and the rest take URLs apart the same way, so what one
 * client accepts another does too. The cases where the HTTP client's own
 * parser and this one used to disagree are here: a query with no path
 * (RFC 3986 6.2.3: its path is empty, which a request names "/"), and its
 * neighbours, a fragment, a port, an IPv6 literal.
 */
#include "corTest.h"

#include "../../core/corUrl.c"

/* s parses, with this host, port and target (as written). */
static void
parses(const char* s, const char* host, unsigned port, const char* target)
{
    CorUrl u;
    char why[256] = "";

    ck_assert_msg(corUrlParse(s, &u, why, sizeof(why)) == 0, "%s: %s", s, why);
    ck_assert_str_eq(u.host, host);
    ck_assert_uint_eq(u.port, port);
    ck_assert_uint_eq(u.targetLen, strlen(target));
    ck_assert_msg(strncmp(u.target, target, u.targetLen) == 0,
                  "%s: target %.*s", s, (int)u.targetLen, u.target);
}

static void
refused(const char* s, const char* reason)
{
    CorUrl u;
    char why[256] = "";

    ck_assert_int_eq(corUrlParse(s, &u, why, sizeof(why)), -EINVAL);
    ck_assert_msg(strstr(why, reason) != NULL, "%s: %s", s, why);
}

START_TEST(test_a_query_without_a_path)
{
    parses("http://a?x", "a", 0, "?x");
    parses("http://a:80?x", "a", 80, "?x");
    parses("https://a?x=1&y=2#frag", "a", 0, "?x=1&y=2");
    parses("cor://[::1]?x", "::1", 0, "?x");
}
END_TEST

START_TEST(test_its_neighbours)
{
    CorUrl u;
    char why[256];

    parses("http://a", "a", 0, "/");
    parses("http://a#x", "a", 0, "/");
    parses("http://a/#x", "a", 0, "/");
    parses("http://a:80", "a", 80, "/");
    parses("http://a:65535/", "a", 65535, "/");
    parses("http://a:0080/", "a", 80, "/");
    parses("http://a:80/p?q#f", "a", 80, "/p?q");
    parses("http://[::1]", "::1", 0, "/");
    parses("http://[2001:db8::7]:8080/p?q", "2001:db8::7", 8080, "/p?q");
    parses("HTTP://A.example/x", "A.example", 0, "/x");
    ck_assert_int_eq(corUrlParse("HTTPS://u:pw@h:1/x", &u, why, sizeof(why)),
                     0);
    ck_assert_str_eq(u.scheme, "https");
    ck_assert_uint_eq(u.userLen, 1);
    ck_assert_uint_eq(u.passwordLen, 2);
    ck_assert_uint_eq(u.authorityLen, 3);
}
END_TEST

START_TEST(test_bad_urls_say_why)
{
    refused(NULL, "not scheme://host");
    refused("http:/a", "not scheme://host");
    refused("http://", "a bad host or port");
    refused("http://?x", "a bad host or port");
    refused("http://a:0/", "a bad host or port");
    refused("http://a:65536/", "a bad host or port");
    refused("http://a:99999999999999999999/", "a bad host or port");
    refused("http://a:8x/", "a bad host or port");
    refused("http://a:+80/", "a bad host or port");
    refused("http://a:-1/", "a bad host or port");
    refused("http://a:/", "a bad host or port");
    refused("http://[::1/", "a bad host or port");
    refused("http://::1/", "a bad host or port");
    refused("http://a b/", "a bad host or port");
    refused("http://a/b c", "a space");
    refused("http://a?b c", "a space");
}
END_TEST

/* A server's target as corClientTargetMake makes one (no scheme needed
 * here: only its parts are read). */
static CorClientTarget*
targetOf(const char* url)
{
    char why[256];
    CorClientTarget* t = malloc(sizeof(*t) + strlen(url) + 1);

    ck_assert_ptr_nonnull(t);
    strcpy(t->text, url);
    t->len = strlen(url);
    t->scheme = NULL;
    ck_assert_int_eq(corUrlParse(t->text, &t->url, why, sizeof(why)), 0);
    return t;
}

/* q's URL taken apart through t gives what a parse of it whole gives. */
static void
sameAsWhole(const CorClientTarget* t, const char* url)
{
    CorClientRequest q = { .url = url, .target = t };
    CorUrl whole;
    CorUrl u;
    char why[256] = "";
    char whyWhole[256] = "";
    int rc = corClientTargetUrl(&q, &u, why, sizeof(why));

    ck_assert_int_eq(rc, corUrlParse(url, &whole, whyWhole, sizeof(whyWhole)));
    ck_assert_str_eq(why, whyWhole);
    if (rc != 0) {
        return;
    }
    ck_assert_str_eq(u.scheme, whole.scheme);
    ck_assert_str_eq(u.host, whole.host);
    ck_assert_uint_eq(u.port, whole.port);
    ck_assert_uint_eq(u.authorityLen, whole.authorityLen);
    ck_assert_uint_eq(u.targetLen, whole.targetLen);
    ck_assert_msg(strncmp(u.target, whole.target, u.targetLen) == 0,
                  "%s: target %.*s", url, (int)u.targetLen, u.target);
}

/* forward's requests: the server's URL then the path, not parsed again,
 * and the same parts as a whole parse in every case; a URL that only
 * looks like it starts with the target (a longer port, another host) is
 * read whole. */
START_TEST(test_a_target_gives_what_a_parse_gives)
{
    CorClientTarget* t = targetOf("http://127.0.0.1:8");

    sameAsWhole(t, "http://127.0.0.1:8/p?q");
    sameAsWhole(t, "http://127.0.0.1:8");
    sameAsWhole(t, "http://127.0.0.1:8?q");
    sameAsWhole(t, "http://127.0.0.1:8/p#f");
    sameAsWhole(t, "http://127.0.0.1:80/p");
    sameAsWhole(t, "http://127.0.0.1:8080/");
    sameAsWhole(t, "http://10.0.0.1:8/p");
    sameAsWhole(t, "http://127.0.0.1:8/a b");
    sameAsWhole(t, "http://127.0.0.1:8/\x7f");
    free(t);
}
END_TEST

COR_TEST_SUITE(corUrl)
{
    tcase_add_test(tc, test_a_target_gives_what_a_parse_gives);
    tcase_add_test(tc, test_a_query_without_a_path);
    tcase_add_test(tc, test_its_neighbours);
    tcase_add_test(tc, test_bad_urls_say_why);
}
