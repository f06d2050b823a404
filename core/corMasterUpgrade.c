/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binary upgrade on the fly (nginx's USR2 + QUIT, in one step): on
 * SIGUSR2 (`cor -s upgrade`) the master starts the cor binary at its own
 * path again, which is the new one once it has been replaced, and hands
 * it the listening sockets as systemd's socket activation does (from fd
 * 3, LISTEN_FDS, LISTEN_PID), so the new master takes them by address
 * and no connection waiting in a backlog is lost (and the master's
 * zones, corZone.c, in COR_ZONES). The new master starts
 * its generation and, once it serves and has written the pid file, says
 * so on a pipe (COR_UPGRADE_FD). The old master then drains and exits as
 * at SIGQUIT. A new binary that fails (it does not exec, exits, hangs
 * past the ready timeout, or cannot take the sockets) closes the pipe
 * without a word: it is killed, and the old master keeps serving.
 *
 * This file is both sides: the old master's spawn, and the new master's
 * report and its "the master on the pid file is my parent" exception.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LISTEN_FDS_START 3

/* The new master's pipe to the old one: its write end, -1 when none. */
static int reportFd = -1;

static void
setenvf(const char* name, const char* fmt, long value)
{
    char text[32];

    snprintf(text, sizeof(text), fmt, value);
    setenv(name, text, 1);
}

/* In the child: every listener's fds from 3 on, in order, inheritable,
 * and the pipe after them. Each goes first to a copy past that range,
 * so that moving one down never overwrites another still to move.
 * Returns how many sockets were passed, or -1. */
static int
fdsPass(const CorListener* listeners, unsigned count, int pipeFd)
{
    unsigned n = 0;

    for (unsigned i = 0; i < count; i++) {
        n += listeners[i].fdCount;
    }
    int moved[n + 1];
    int floor = LISTEN_FDS_START + (int)n + 1;
    unsigned j = 0;

    for (unsigned i = 0; i < count; i++) {
        for (unsigned k = 0; k < listeners[i].fdCount; k++) {
            moved[j++] = fcntl(listeners[i].fds[k], F_DUPFD_CLOEXEC, floor);
        }
    }
    moved[n] = fcntl(pipeFd, F_DUPFD_CLOEXEC, floor);
    for (j = 0; j <= n; j++) {
        if (moved[j] < 0 || dup2(moved[j], LISTEN_FDS_START + (int)j) < 0) {
            return -1;
        }
    }
    setenvf("COR_UPGRADE_FD", "%ld", LISTEN_FDS_START + (long)n);
    return (int)n;
}

static void
childExec(const CorListener* listeners, unsigned count, int pipeFd,
          const char* configFile)
{
    int total = 0;
    int n;

    for (unsigned i = 0; i < count; i++) {
        total += (int)listeners[i].fdCount;
    }
    /* The zones first, above the range the sockets are moved into. */
    corZonePass(LISTEN_FDS_START + total + 1);
    n = fdsPass(listeners, count, pipeFd);

    if (n < 0) {
        corLog(COR_LOG_ERROR, "upgrade: cannot pass the sockets: %s",
               strerror(errno));
        _exit(127);
    }
    setenvf("LISTEN_FDS", "%ld", n);
    setenvf("LISTEN_PID", "%ld", (long)getpid());
    setenvf("COR_UPGRADE_FROM", "%ld", (long)getppid());
    corSystemdEnvRestore();
    /* The signals this master blocks for its signalfd would stay blocked
     * across exec: the new master starts, as any process does, with none
     * blocked (it blocks them itself once its signalfd is made). */
    sigset_t none;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execl(corSelfPath, "cor", "-c", configFile, (char*)NULL);
    corLog(COR_LOG_ERROR, "upgrade: cannot run %s: %s", corSelfPath,
           strerror(errno));
    _exit(127);
}

pid_t
corUpgradeSpawn(const CorListener* listeners, unsigned count,
                const char* configFile, int* readFdP)
{
    int pipeFds[2];
    pid_t pid;

    if (pipe2(pipeFds, O_CLOEXEC) != 0) {
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        close(pipeFds[0]);
        childExec(listeners, count, pipeFds[1], configFile);
    }
    close(pipeFds[1]);
    if (pid < 0) {
        close(pipeFds[0]);
        return -1;
    }
    *readFdP = pipeFds[0];
    return pid;
}

/* A new master that did not start: asked to stop (it stops its
 * generation if it started one), killed if it does not within 5 s. */
void
corUpgradeAbandon(pid_t pid)
{
    kill(pid, SIGTERM);
    for (int waited = 0; waited < 5000; waited += 10) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            return;
        }
        usleep(10 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

pid_t
corUpgradeInit(void)
{
    const char* from = getenv("COR_UPGRADE_FROM");
    const char* fd = getenv("COR_UPGRADE_FD");
    pid_t parent = 0;

    if (from != NULL && fd != NULL
        && strtol(from, NULL, 10) == (long)getppid()) {
        parent = getppid();
        reportFd = (int)strtol(fd, NULL, 10);
        /* Not the generation's, nor a module child's, to hold open: the
         * old master reads its end's close as a failed start. */
        fcntl(reportFd, F_SETFD, FD_CLOEXEC);
    }
    unsetenv("COR_UPGRADE_FROM");
    unsetenv("COR_UPGRADE_FD");
    return parent;
}

void
corUpgradeReport(void)
{
    if (reportFd < 0) {
        return;
    }
    if (write(reportFd, "R", 1) != 1) {
        corLog(COR_LOG_WARN, "upgrade: cannot tell the old master: %s",
               strerror(errno));
    }
    corUpgradeForget();
}

void
corUpgradeForget(void)
{
    if (reportFd >= 0) {
        close(reportFd);
        reportFd = -1;
    }
}
