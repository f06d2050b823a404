/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An htpasswd file as read, for Basic authentication: its users and their
 * hashes, what identifies the file's version (so that a changed file is
 * read again without a reload), and the hash an unknown user is checked
 * against. That one is the costliest of the file's, found by checking
 * one hash of each cost the file holds (thread CPU time, so that a loaded
 * machine does not mislead): a file of bcrypt and SHA-512 users used to
 * check an unknown user against its first user's hash, so that with a
 * bcrypt first an unknown user took 114 ms and a wrong SHA-512 password
 * 5 ms, which told who exists. A name is found by comparing its digest
 * with every user's, in constant time, never stopping at the match.
 */
#include "corAccessInt.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define COSTS_SEEN 64

typedef struct {
    char* name;
    char* hash;
    unsigned char nameDigest[SHA256_DIGEST_LENGTH];
} User;

struct AccessUsers {
    atomic_uint refs;
    User* users;
    unsigned count;
    const char* costliest; /* one of the users' hashes */
    struct stat version;   /* the file's, when it was read */
};

static void
usersFree(AccessUsers* u)
{
    for (unsigned i = 0; i < u->count; i++) {
        free(u->users[i].name);
        OPENSSL_clear_free(u->users[i].hash, strlen(u->users[i].hash));
    }
    free(u->users);
    free(u);
}

/* One "user:hash" line into u; -1 with why set. */
static int
lineRead(AccessUsers* u, char* line, const char* path, unsigned number,
         char* why, size_t cap)
{
    char* colon = strchr(line, ':');
    User* grown;
    User* user;

    if (colon == NULL || colon == line
        || corAccessHashKind(colon + 1) == ACCESS_HASH_UNKNOWN) {
        snprintf(why, cap,
                 "%s:%u: expected user:hash with a bcrypt ($2y$, "
                 "htpasswd -B), SHA-512 ($6$), $apr1$ or {SHA} hash",
                 path, number);
        return -1;
    }
    grown = realloc(u->users, (u->count + 1) * sizeof(*grown));
    if (grown == NULL) {
        snprintf(why, cap, "no memory");
        return -1;
    }
    u->users = grown;
    user = &u->users[u->count++];
    *colon = '\0';
    user->name = strdup(line);
    user->hash = strdup(colon + 1);
    SHA256((const unsigned char*)line, strlen(line), user->nameDigest);
    if (user->name == NULL || user->hash == NULL) {
        snprintf(why, cap, "no memory");
        return -1;
    }
    return 0;
}

static double
cpuSeconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether hashes a and b cost the same. */
static bool
costSame(const char* a, const char* b)
{
    size_t n = corAccessHashSetting(a);

    return corAccessHashSetting(b) == n && strncmp(a, b, n) == 0;
}

/* The costliest hash: one check of each cost the file holds, timed
 * (none when there is one cost only). The costs are few (bcrypt's
 * factor, SHA-512's rounds): those seen are kept, up to COSTS_SEEN. */
static const char*
costliestFind(const AccessUsers* u)
{
    const char* seen[COSTS_SEEN];
    unsigned seenCount = 0;
    const char* costliest = u->users[0].hash;
    double most = -1;
    unsigned same = 1;

    while (same < u->count && costSame(u->users[same].hash, costliest)) {
        same++;
    }
    for (unsigned i = 0; i < u->count && same < u->count; i++) {
        const char* hash = u->users[i].hash;
        bool known = false;
        double start;
        double spent;

        for (unsigned k = 0; k < seenCount && !known; k++) {
            known = costSame(seen[k], hash);
        }
        if (known) {
            continue;
        }
        if (seenCount < COSTS_SEEN) {
            seen[seenCount++] = hash;
        }
        start = cpuSeconds();
        corAccessHashMatches("", hash);
        spent = cpuSeconds() - start;
        if (spent > most) {
            most = spent;
            costliest = hash;
        }
    }
    return costliest;
}

AccessUsers*
corAccessUsersRead(const char* path, char* why, size_t cap, unsigned* weakP)
{
    AccessUsers* u = calloc(1, sizeof(*u));
    FILE* f = fopen(path, "r");
    char line[1024];
    unsigned number = 0;
    int rc = 0;

    *weakP = 0;
    if (u == NULL || f == NULL || fstat(fileno(f), &u->version) != 0) {
        snprintf(why, cap, "cannot read %s: %s", path,
                 u == NULL ? "no memory" : strerror(errno));
        goto failed;
    }
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        number++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '\0' && line[0] != '#') {
            rc = lineRead(u, line, path, number, why, cap);
        }
    }
    OPENSSL_cleanse(line, sizeof(line));
    if (rc != 0) {
        goto failed;
    }
    if (u->count == 0) {
        snprintf(why, cap, "%s holds no user", path);
        goto failed;
    }
    for (unsigned i = 0; i < u->count; i++) {
        *weakP += corAccessHashKind(u->users[i].hash) != ACCESS_HASH_CRYPT;
    }
    u->costliest = costliestFind(u);
    atomic_init(&u->refs, 1);
    fclose(f);
    return u;

failed:
    if (f != NULL) {
        fclose(f);
    }
    if (u != NULL) {
        usersFree(u);
    }
    return NULL;
}

bool
corAccessUsersChanged(const AccessUsers* u, const char* path)
{
    struct stat st;

    if (stat(path, &st) != 0) {
        return false;
    }
    return st.st_ino != u->version.st_ino || st.st_dev != u->version.st_dev
           || st.st_size != u->version.st_size
           || st.st_mtim.tv_sec != u->version.st_mtim.tv_sec
           || st.st_mtim.tv_nsec != u->version.st_mtim.tv_nsec
           || st.st_ctim.tv_sec != u->version.st_ctim.tv_sec
           || st.st_ctim.tv_nsec != u->version.st_ctim.tv_nsec;
}

unsigned
corAccessUsersCount(const AccessUsers* u)
{
    return u->count;
}

const char*
corAccessUsersHash(const AccessUsers* u, const char* name, bool* knownP)
{
    unsigned char digest[SHA256_DIGEST_LENGTH];
    const char* hash = u->costliest;
    bool known = false;

    SHA256((const unsigned char*)name, strlen(name), digest);
    for (unsigned i = 0; i < u->count; i++) {
        bool same = CRYPTO_memcmp(digest, u->users[i].nameDigest,
                                  sizeof(digest))
                    == 0;

        /* Every user is looked at, the match or not; the first of a
         * name counts, as in nginx. */
        hash = same && !known ? u->users[i].hash : hash;
        known |= same;
    }
    *knownP = known;
    return hash;
}

AccessUsers*
corAccessUsersHold(AccessUsers* u)
{
    atomic_fetch_add(&u->refs, 1);
    return u;
}

void
corAccessUsersRelease(AccessUsers* u)
{
    if (u != NULL && atomic_fetch_sub(&u->refs, 1) == 1) {
        usersFree(u);
    }
}
