/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The htpasswd hashes and users of Basic authentication
 * (modules/access/corAccessHash.c and corAccessUsers.c, included):
 * $apr1$ as htpasswd -m and openssl passwd -apr1 make it (an empty
 * password, one past 16 bytes), {SHA} as htpasswd -s, bcrypt and SHA-512
 * crypt; a file's users found, the first of a name, an unknown one given
 * the costliest hash whatever the order, and a changed file seen.
 */
#include "corTest.h"

#include "corAccessHash.c"
#include "corAccessUsers.c"

#include <unistd.h>

START_TEST(test_each_kind_of_hash)
{
    static const struct {
        const char* password;
        const char* hash;
    } right[] = {
        { "password", "$apr1$abcdefgh$FBwExRW4dCc8aL.OvjpIE1" },
        { "password", "$apr1$t/bxTh1T$5BpbS0/T9HiDdVooVApU71" },
        { "", "$apr1$x$tMwYqBfQwi3FYAr0aJc8M/" },
        { "a password longer than sixteen bytes",
          "$apr1$QuiteLon$m82tUlFSS6az/ST.liinV1" },
        { "password", "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=" },
        { "", "{SHA}2jmj7l5rSw0yVb/vlWAYkK/YBwk=" },
        { "y", "$2y$05$VSYr80pC9cxuPXInWaHXBOIyGx54DwFu/UyWwXMSUdgLEe8QIikvW" },
        { "hunter2", "$6$LGebd0lRVbXfM1CT$tdBkXDm8o0QwFnMhIzj65Td/iwlT1nL9C"
                     "9rcZV6uCFBze6MNJmNYrTraG/2Hzprz8eISFVpiYVkHrPmj1oxfN0" },
    };

    for (size_t i = 0; i < sizeof(right) / sizeof(right[0]); i++) {
        char wrong[64];

        ck_assert_msg(corAccessHashMatches(right[i].password, right[i].hash),
                      "%s", right[i].hash);
        snprintf(wrong, sizeof(wrong), "%s!", right[i].password);
        ck_assert_msg(!corAccessHashMatches(wrong, right[i].hash), "%s",
                      right[i].hash);
    }
    ck_assert_int_eq(corAccessHashKind("$apr1$x$y"), ACCESS_HASH_APR1);
    ck_assert_int_eq(corAccessHashKind("{SHA}short"), ACCESS_HASH_UNKNOWN);
    ck_assert_int_eq(corAccessHashKind("$1$abc$def"), ACCESS_HASH_UNKNOWN);
    ck_assert_int_eq(corAccessHashKind("plain"), ACCESS_HASH_UNKNOWN);
    ck_assert(!corAccessHashMatches("plain", "plain"));
    ck_assert_uint_eq(corAccessHashSetting("$2y$10$abc"), 7);
    ck_assert_uint_eq(corAccessHashSetting("$6$rounds=9000$salt$x"), 14);
    ck_assert_uint_eq(corAccessHashSetting("$6$salt$x"), 3);
}
END_TEST

static char path[64];

static void
fileWrite(const char* text)
{
    FILE* f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* bcrypt of cost 10 (tens of ms) after SHA-512 and {SHA} users (a few ms,
 * a microsecond): an unknown user gets the bcrypt hash. */
#define SHA512_BOB                                                             \
    "bob:$6$LGebd0lRVbXfM1CT$tdBkXDm8o0QwFnMhIzj65Td/iwlT1n"                   \
    "L9C9rcZV6uCFBze6MNJmNYrTraG/2Hzprz8eISFVpiYVkHrPmj1oxfN0\n"
#define BCRYPT_ALICE                                                           \
    "alice:$2y$10$fP2txXOef6Wtqa9wvhCkKOPTEeHeoxhR6J3F2Vt"                     \
    "GRd/tgG5W/ply.\n"

START_TEST(test_users_and_the_costliest_hash)
{
    char why[256];
    unsigned weak;
    AccessUsers* u;
    bool known;

    snprintf(path, sizeof(path), "/tmp/cor-htpasswd-XXXXXX");
    close(mkstemp(path));
    fileWrite("# a comment\n" SHA512_BOB
              "dan:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n" BCRYPT_ALICE
              "bob:{SHA}2jmj7l5rSw0yVb/vlWAYkK/YBwk=\n");
    u = corAccessUsersRead(path, why, sizeof(why), &weak);
    ck_assert_msg(u != NULL, "%s", why);
    ck_assert_uint_eq(corAccessUsersCount(u), 4);
    ck_assert_uint_eq(weak, 2);
    ck_assert(strncmp(corAccessUsersHash(u, "alice", &known), "$2y$10$fP2t", 11)
              == 0);
    ck_assert(known);
    ck_assert(
        corAccessHashMatches("y", corAccessUsersHash(u, "alice", &known)));
    /* The first of a name counts. */
    ck_assert(strncmp(corAccessUsersHash(u, "bob", &known), "$6$", 3) == 0);
    ck_assert(known);
    ck_assert(strncmp(corAccessUsersHash(u, "nobody", &known), "$2y$10$", 7)
              == 0);
    ck_assert(!known);
    ck_assert(strncmp(corAccessUsersHash(u, "", &known), "$2y$10$", 7) == 0);
    ck_assert(!known);
    /* The same file: unchanged; written again: changed. */
    ck_assert(!corAccessUsersChanged(u, path));
    usleep(10 * 1000);
    fileWrite(SHA512_BOB);
    ck_assert(corAccessUsersChanged(u, path));
    corAccessUsersRelease(u);
    /* A line of no known hash names the file and the line. */
    fileWrite(SHA512_BOB "carol:plain\n");
    ck_assert_ptr_null(corAccessUsersRead(path, why, sizeof(why), &weak));
    ck_assert_msg(strstr(why, ":2: expected user:hash") != NULL, "%s", why);
    unlink(path);
    ck_assert_ptr_null(corAccessUsersRead(path, why, sizeof(why), &weak));
    ck_assert_msg(strstr(why, "cannot read") != NULL, "%s", why);
}
END_TEST

COR_TEST_SUITE(corAccessHash)
{
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_each_kind_of_hash);
    tcase_add_test(tc, test_users_and_the_costliest_hash);
}
