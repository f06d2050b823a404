/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A real PostgreSQL for the tests (corPgServer.c): a cluster made by
 * initdb in a scratch folder, listening on a free loopback port and on a
 * socket in that folder, started and stopped by its PID. PostgreSQL
 * refuses to run as root: as root, it runs as the `postgres` user. The
 * cluster's superuser is "cor", trusted without a password.
 */
#ifndef COR_PG_SERVER_H
#define COR_PG_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char dir[64]; /* the cluster (dir/data), its socket, its log */
} CorTestPg;

/* Where the server's binaries are (Debian's PostgreSQL 15). */
#define COR_TEST_PG_BIN "/usr/lib/postgresql/15/bin"

/* Make the cluster on a free port and start it. */
void corTestPgMake(CorTestPg* pg);
/* Start it (again, on the same port); returns once it takes queries. */
void corTestPgStart(CorTestPg* pg);
/* Stop it with sig (SIGINT: a fast shutdown, which ends every session;
 * SIGKILL: a crash) and wait for it. */
void corTestPgStop(CorTestPg* pg, int sig);
/* Stop it and remove its folder. */
void corTestPgRemove(CorTestPg* pg);
/* Run sql with psql (one row a line, columns split by '|') into out.
 * Returns psql's exit status. */
int corTestPgSql(const CorTestPg* pg, const char* sql, char* out, size_t cap);

#endif /* COR_PG_SERVER_H */
