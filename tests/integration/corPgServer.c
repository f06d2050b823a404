/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tests' PostgreSQL (corPgServer.h): initdb once, the server started
 * as a child of the test (its PID the postmaster's: no pg_ctl between),
 * bound to the test's life like every server a test starts.
 */
#include "corPgServer.h"

#include "corServer.h"
#include "corTest.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* As root, the postgres user's ids (PostgreSQL refuses root); else ours. */
static const struct passwd*
runAs(void)
{
    const struct passwd* pw = geteuid() == 0 ? getpwnam("postgres") : NULL;

    ck_assert_msg(geteuid() != 0 || pw != NULL,
                  "running as root and there is no postgres user");
    return pw;
}

/* A command line, as the postgres user where we are root. */
static int
shellAs(const char* command, char* out, size_t cap)
{
    char line[1024];

    snprintf(line, sizeof(line), "%s%s",
             runAs() != NULL ? "runuser -u postgres -- " : "", command);
    return corShell(line, out, cap);
}

void
corTestPgMake(CorTestPg* pg)
{
    const struct passwd* pw = runAs();
    char command[512];
    char out[4096];

    memset(pg, 0, sizeof(*pg));
    snprintf(pg->dir, sizeof(pg->dir), "/tmp/cor-pg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(pg->dir));
    if (pw != NULL) {
        ck_assert_int_eq(chown(pg->dir, pw->pw_uid, pw->pw_gid), 0);
    }
    snprintf(command, sizeof(command),
             COR_TEST_PG_BIN "/initdb -D %s/data -U cor -A trust --no-sync "
                             "--no-instructions 2>&1",
             pg->dir);
    ck_assert_msg(shellAs(command, out, sizeof(out)) == 0, "initdb: %s", out);
    pg->port = corFreePort();
    corTestPgStart(pg);
}

/* The postmaster, in the child: as the postgres user when we are root,
 * killed with the test (set again after the change of user, which
 * clears it). */
static void
serverExec(const CorTestPg* pg)
{
    const struct passwd* pw = runAs();
    char data[96];
    char port[16];
    char log[96];

    snprintf(data, sizeof(data), "%s/data", pg->dir);
    snprintf(port, sizeof(port), "%d", pg->port);
    snprintf(log, sizeof(log), "%s/postgres.log", pg->dir);
    if (freopen(log, "a", stderr) == NULL
        || freopen("/dev/null", "r", stdin) == NULL) {
        _exit(126);
    }
    if (pw != NULL
        && (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0
            || setuid(pw->pw_uid) != 0)) {
        _exit(126);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execl(COR_TEST_PG_BIN "/postgres", "postgres", "-D", data, "-p", port, "-k",
          pg->dir, "-c", "listen_addresses=127.0.0.1", "-c",
          "max_connections=400", "-c", "shared_buffers=32MB", "-c", "fsync=off",
          "-c", "synchronous_commit=off", "-c", "log_min_messages=warning",
          (char*)NULL);
    _exit(127);
}

void
corTestPgStart(CorTestPg* pg)
{
    char command[256];
    char out[512];
    long deadline = corNowMs() + 60000;

    pg->pid = corTestFork(SIGKILL);
    ck_assert_int_ge(pg->pid, 0);
    if (pg->pid == 0) {
        serverExec(pg);
    }
    snprintf(command, sizeof(command),
             COR_TEST_PG_BIN
             "/pg_isready -q -h 127.0.0.1 -p %d -U cor -d postgres",
             pg->port);
    while (corShell(command, out, sizeof(out)) != 0) {
        if (corNowMs() > deadline || waitpid(pg->pid, NULL, WNOHANG) != 0) {
            snprintf(command, sizeof(command), "tail -5 %s/postgres.log",
                     pg->dir);
            corShell(command, out, sizeof(out));
            ck_abort_msg("postgres did not start: %s", out);
        }
        usleep(50 * 1000);
    }
}

void
corTestPgStop(CorTestPg* pg, int sig)
{
    int status;

    if (pg->pid <= 0) {
        return;
    }
    kill(pg->pid, sig);
    while (waitpid(pg->pid, &status, 0) < 0 && errno == EINTR) {
    }
    pg->pid = 0;
}

void
corTestPgRemove(CorTestPg* pg)
{
    char command[128];
    char out[64];

    corTestPgStop(pg, SIGINT);
    if (pg->dir[0] != '\0') {
        snprintf(command, sizeof(command), "rm -rf %s", pg->dir);
        corShell(command, out, sizeof(out));
    }
}

int
corTestPgSql(const CorTestPg* pg, const char* sql, char* out, size_t cap)
{
    char command[1024];

    snprintf(
        command, sizeof(command),
        "psql -X -q -At -h 127.0.0.1 -p %d -U cor -d postgres -c \"%s\" 2>&1",
        pg->port, sql);
    return corShell(command, out, cap);
}
