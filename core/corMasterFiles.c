/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The master's files: the pid file (`cor -s` finds the master through it,
 * and a second master on the same file is refused), and beside it the
 * status file (the pid file + ".reload": "SEQ ok|failed\nERRORS") that
 * `cor -s reload` and `cor -s upgrade` wait on for their outcome: a new
 * SEQ is a new outcome. After an upgrade both belong to the new master,
 * which goes on counting past the old one's numbers, so that a waiting
 * `cor -s` always sees a change.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned statusSeq;

pid_t
corMasterPidFileAlive(const char* path)
{
    FILE* f = fopen(path, "r");
    int pid = 0;

    if (f == NULL) {
        return 0;
    }
    if (fscanf(f, "%d", &pid) != 1 || pid <= 0 || kill(pid, 0) != 0) {
        pid = 0;
    }
    fclose(f);
    return pid;
}

int
corMasterPidFileWrite(const char* path)
{
    char text[32];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int len = snprintf(text, sizeof(text), "%d\n", (int)getpid());

    if (fd < 0 || write(fd, text, (size_t)len) != len) {
        fprintf(stderr, "cor: cannot write the pid file %s: %s\n", path,
                strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    return 0;
}

char*
corMasterStatusPath(const CorConfig* config)
{
    size_t len = strlen(config->log.pidFile) + 8;
    char* path = malloc(len);

    if (path != NULL) {
        snprintf(path, len, "%s.reload", config->log.pidFile);
    }
    return path;
}

void
corMasterStatusWrite(const CorConfig* config, const char* outcome,
                     const char* detail)
{
    char* path = corMasterStatusPath(config);
    char tmp[4096];
    FILE* f;

    if (path == NULL) {
        return;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f != NULL) {
        fprintf(f, "%u %s\n%s", ++statusSeq, outcome, detail ? detail : "");
        fclose(f);
        rename(tmp, path);
    }
    free(path);
}

void
corMasterStatusContinue(const CorConfig* config)
{
    char* path = corMasterStatusPath(config);
    FILE* f = path != NULL ? fopen(path, "r") : NULL;

    if (f != NULL) {
        if (fscanf(f, "%u", &statusSeq) != 1) {
            statusSeq = 0;
        }
        fclose(f);
    }
    /* The old master writes one more, the upgrade's outcome, after this
     * one read the file: that number is the old one's. */
    statusSeq++;
    free(path);
}

void
corMasterStatusReset(const CorConfig* config)
{
    char* path = corMasterStatusPath(config);

    /* A master killed after a reload leaves its last outcome; this one
     * counts from 1 again, so `cor -s reload` would wait for a number
     * that is already there. */
    if (path != NULL && unlink(path) != 0 && errno != ENOENT) {
        corLog(COR_LOG_WARN, "cannot remove the old reload outcome %s: %s",
               path, strerror(errno));
    }
    free(path);
}
