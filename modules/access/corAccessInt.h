/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The access module's parts: the address guard and the module
 * (corAccess.c, on the core's networks: corNetParse, corNetHas),
 * Basic authentication against an htpasswd file (corAccessBasic.c), the
 * file's users (corAccessUsers.c) and their hashes (corAccessHash.c).
 */
#ifndef COR_ACCESS_INT_H
#define COR_ACCESS_INT_H

#include <cor.h>

#include <stdbool.h>
#include <stddef.h>

/* The hashes an htpasswd file may hold (corAccessHash.c). */
typedef enum {
    ACCESS_HASH_UNKNOWN,
    ACCESS_HASH_CRYPT, /* bcrypt, SHA-512 crypt: libxcrypt's */
    ACCESS_HASH_APR1,  /* Apache's MD5: weak */
    ACCESS_HASH_SHA    /* {SHA}, unsalted SHA-1: weak */
} AccessHashKind;

AccessHashKind corAccessHashKind(const char* hash);
/* How many leading bytes of hash say what a check against it costs (the
 * scheme and its cost factor or rounds: "$2y$10$", "$6$rounds=9000"):
 * hashes that share them cost the same. */
size_t corAccessHashSetting(const char* hash);
/* Whether password's hash is hash, compared whole in constant time; false
 * for a hash of no known kind, or without memory. On a thread: a bcrypt
 * check takes milliseconds or more. */
bool corAccessHashMatches(const char* password, const char* hash);

/* An htpasswd file as read (corAccessUsers.c): its users, and the hash an
 * unknown user is checked against, the costliest of the file's (so that
 * the time does not tell whether a user exists). Immutable once read;
 * held by the guard and by each check that uses it. */
typedef struct AccessUsers AccessUsers;

/* Read path: NULL with the reason in why (cap bytes) when it cannot be
 * read or a line is not user:hash of a known kind. A hash checked once
 * for each cost the file holds, to find the costliest: the file is read
 * off the loops. *weakP gets how many users have a weak hash. */
AccessUsers* corAccessUsersRead(const char* path, char* why, size_t cap,
                                unsigned* weakP);
/* Whether path is no longer the file u was read from (another inode,
 * size, or time of change). False when it cannot be looked at: the
 * users read stay. */
bool corAccessUsersChanged(const AccessUsers* u, const char* path);
unsigned corAccessUsersCount(const AccessUsers* u);
/* The hash name's password is checked against, found without telling by
 * the time whether it exists: the costliest of the file's when it does
 * not (*knownP false). */
const char* corAccessUsersHash(const AccessUsers* u, const char* name,
                               bool* knownP);
AccessUsers* corAccessUsersHold(AccessUsers* u);
void corAccessUsersRelease(AccessUsers* u);

/* Basic authentication of one guard (corAccessBasic.c). */
typedef struct AccessBasic AccessBasic;

/* basic_auth: { realm, users }: the file read now (an error at its line
 * when it cannot be). NULL after a module error. */
AccessBasic* corAccessBasicRead(CorModule* m, const CorConf* conf);
/* The guard's verdict: pass, 401 (with WWW-Authenticate), or later when
 * the password's hash is computed on the module's threads. */
int corAccessBasicCheck(AccessBasic* b, CorRequest* r, CorGuardWait* wait);
void corAccessBasicFree(AccessBasic* b);
/* The threads that hash passwords (started at the first guard read,
 * stopped at the module's exit). */
void corAccessBasicThreadsStop(void);

#endif /* COR_ACCESS_INT_H */
