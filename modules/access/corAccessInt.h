/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The access module's parts: networks and addresses (corAccessNet.c,
 * pure, unit-tested), the address guard and the module (corAccess.c),
 * Basic authentication against an htpasswd file (corAccessBasic.c).
 */
#ifndef COR_ACCESS_INT_H
#define COR_ACCESS_INT_H

#include <cor.h>

#include <stdbool.h>

/* An address: 4 bytes (IPv4, and an IPv4-mapped IPv6 one) or 16. */
typedef struct {
    unsigned char bytes[16];
    unsigned len;               /* 4 or 16 */
} AccessAddr;

/* A network: an address and how many of its leading bits count; `all`
 * holds every address of both families. */
typedef struct {
    AccessAddr addr;
    unsigned bits;
    bool all;
} AccessNet;

/* "10.0.0.0/8", "::1", "2001:db8::/32", "all" (an address alone is its
 * whole length); an IPv4-mapped network is taken as the IPv4 one. Bits
 * set past the prefix are an error, as in "10.0.0.1/8". Returns 0 or
 * -1. */
int corAccessNetParse(const char* text, AccessNet* net);

/* A request's remote ("192.0.2.7", "2001:db8::7", "::ffff:10.1.2.3"
 * read as 10.1.2.3); false when it is none of them. */
bool corAccessAddrParse(const char* text, AccessAddr* addr);

bool corAccessNetHas(const AccessNet* net, const AccessAddr* addr);

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
