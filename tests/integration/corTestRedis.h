/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A real redis-server for the tests (corTestRedis.c): corRedisTest and
 * corTlsTicketsTest each had their own code to start one, wait for it
 * and kill it. On a loopback port, no persistence, started and killed by
 * its PID, killed with the test however it ends (corTestFork).
 */
#ifndef COR_TEST_REDIS_H
#define COR_TEST_REDIS_H

#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port; /* 0 before a start: a free one is taken and kept */
} CorTestRedis;

/* Start redis-server on r->port with requirepass password (NULL: none),
 * over TLS only with the certificates of certs (NULL: plain;
 * corTestCertsMake's server.pem), and return once it accepts; the test
 * fails where it does not within 10 s. */
void corTestRedisStart(CorTestRedis* r, const char* password,
                       const char* certs);
/* Kill it (SIGKILL: it keeps nothing) and wait for it; nothing where it
 * does not run. The port stays in r for a start again. */
void corTestRedisStop(CorTestRedis* r);

#endif /* COR_TEST_REDIS_H */
