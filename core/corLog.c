/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The error log: stderr or a file, one line per message with a time, the
 * level and the process, written with one write() so lines of concurrent
 * threads and processes do not interleave. SIGUSR1 reopens it (log
 * rotation): the new file is dup2()ed over the old descriptor, so a
 * thread writing at that moment writes to one or the other, never to a
 * closed fd.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int logFd = STDERR_FILENO;
static char* logPath;
static CorLogLevel minLevel = COR_LOG_INFO;

static const char* const levelNames[] = { "debug", "info", "warn", "error" };

static int accessFd = -1;
static char* accessPath;
static const char* accessFormat = "combined";

static int
openPath(const char* path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

int
corLogOpen(const char* errorPath, const char* level)
{
    for (int i = 0; i < 4; i++) {
        if (level != NULL && strcmp(level, levelNames[i]) == 0) {
            minLevel = (CorLogLevel)i;
        }
    }
    if (errorPath == NULL || strcmp(errorPath, "stderr") == 0) {
        return 0;
    }
    int fd = openPath(errorPath);

    if (fd < 0) {
        fprintf(stderr, "cor: cannot open the error log %s: %s\n", errorPath,
                strerror(errno));
        return -1;
    }
    free(logPath);
    logPath = strdup(errorPath);
    logFd = fd;
    return 0;
}

/* Reopen path over fd: a writer at that moment writes to one file or the
 * other, never to a closed descriptor. */
static int
reopenOver(const char* path, int fd)
{
    int fresh;

    if (path == NULL || fd < 0) {
        return 0;
    }
    fresh = openPath(path);
    if (fresh < 0) {
        corLog(COR_LOG_ERROR, "cannot reopen %s: %s", path, strerror(errno));
        return -1;
    }
    dup2(fresh, fd);
    close(fresh);
    return 0;
}

int
corLogFd(void)
{
    return logFd;
}

int
corLogReopen(void)
{
    int rc = reopenOver(logPath, logFd);

    return reopenOver(accessPath, accessFd) | rc;
}

int
corAccessLogOpen(const char* path, const char* format, CorConfErrors* errors)
{
    if (path == NULL || strcmp(path, "off") == 0) {
        return 0;
    }
    accessFd = openPath(path);
    if (accessFd < 0) {
        corConfErrorf(errors, NULL, "log.access: cannot open %s: %s", path,
                      strerror(errno));
        return -1;
    }
    accessPath = strdup(path);
    accessFormat = format != NULL ? format : "combined";
    return 0;
}

bool
corAccessLogEnabled(void)
{
    return accessFd >= 0;
}

const char*
corAccessLogFormat(void)
{
    return accessFormat;
}

void
corAccessLogWrite(const char* line, size_t len)
{
    if (accessFd >= 0 && write(accessFd, line, len) < 0) {
        /* A full disk loses access lines, never requests. */
    }
}

void
corLog(CorLogLevel level, const char* fmt, ...)
{
    char line[2048];
    struct timeval tv;
    struct tm tm;
    size_t n;
    va_list ap;

    if (level < minLevel) {
        return;
    }
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n,
                          ".%03d [%s] %d: ", (int)(tv.tv_usec / 1000),
                          levelNames[level], (int)getpid());
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);

    va_end(ap);
    n += m < 0                              ? 0
         : (size_t)m < sizeof(line) - n - 1 ? (size_t)m
                                            : sizeof(line) - n - 2;
    line[n++] = '\n';
    if (write(logFd, line, n) < 0) {
        /* Nowhere left to say it. */
    }
}
