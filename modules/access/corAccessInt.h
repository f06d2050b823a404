/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The access module's parts: the address guard and the module
 * (corAccess.c, on the core's networks: corNetParse, corNetHas),
 * Basic authentication against an htpasswd file (corAccessBasic.c).
 */
#ifndef COR_ACCESS_INT_H
#define COR_ACCESS_INT_H

#include <cor.h>

#include <stdbool.h>

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
