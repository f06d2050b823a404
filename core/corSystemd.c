/* SPDX-License-Identifier: Apache-2.0 */
/*
 * systemd's notify protocol and watchdog, spoken by the master without
 * libsystemd (sd_notify(3) is a datagram, no more):
 *
 *   READY=1             every listener is open and a generation serves
 *   RELOADING=1         a reload begins (with MONOTONIC_USEC=, which
 *                       Type=notify-reload wants, systemd 253 and later)
 *   READY=1 + STATUS=   the reload is over; STATUS says how it went
 *   STOPPING=1          a stop or a graceful stop begins
 *   WATCHDOG=1          every loop of the serving generation beat within
 *                       half of WatchdogSec (corHeartbeat.c)
 *
 * The master pets the watchdog at half the interval systemd gave
 * (WATCHDOG_USEC), and only while the loops beat: a loop a handler holds
 * stops the petting, and systemd restarts the service when a whole
 * interval goes by. The loops beat at a quarter of the interval, so a
 * healthy loop is never older than the master's bound of a half.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int notifyFd = -1;
static char notifyName[sizeof(((struct sockaddr_un*)0)->sun_path)];
static struct sockaddr_un notifyAddr;
static socklen_t notifyAddrLen;
static bool notifyFailedLogged;
static uint64_t watchdogMs;
/* When the watchdog is looked at next: half the interval after a pet,
 * a beat's period after a look that could not pet. */
static uint64_t nextLookMs;
static bool stalledLogged;

/* NOTIFY_SOCKET into notifyAddr: a path, or '@' for an abstract name
 * (its first byte NUL on the wire). */
static int
notifyAddress(const char* name)
{
    size_t len = strlen(name);

    if (len < 2 || len >= sizeof(notifyAddr.sun_path)
        || (name[0] != '/' && name[0] != '@')) {
        return -EINVAL;
    }
    notifyAddr = (struct sockaddr_un){ .sun_family = AF_UNIX };
    memcpy(notifyAddr.sun_path, name, len);
    if (name[0] == '@') {
        notifyAddr.sun_path[0] = '\0';
        notifyAddrLen = (socklen_t)(offsetof(struct sockaddr_un, sun_path)
                                    + len);
    } else {
        notifyAddrLen = (socklen_t)sizeof(notifyAddr);
    }
    return 0;
}

/* WATCHDOG_USEC, when WATCHDOG_PID is unset or names this process. */
static uint64_t
watchdogFromEnv(void)
{
    const char* usec = getenv("WATCHDOG_USEC");
    const char* pid = getenv("WATCHDOG_PID");
    char* end;
    unsigned long long value;

    if (usec == NULL) {
        return 0;
    }
    if (pid != NULL && strtol(pid, NULL, 10) != (long)getpid()) {
        corLog(COR_LOG_INFO,
               "WATCHDOG_PID %s is not this master (%d): "
               "the watchdog is another process's",
               pid, (int)getpid());
        return 0;
    }
    value = strtoull(usec, &end, 10);
    if (*end != '\0' || value < 1000) {
        corLog(COR_LOG_WARN,
               "WATCHDOG_USEC '%s' is not a number of "
               "microseconds of 1000 or more: no watchdog",
               usec);
        return 0;
    }
    return value / 1000;
}

int
corSystemdInit(void)
{
    const char* name = getenv("NOTIFY_SOCKET");
    int rc = 0;

    watchdogMs = watchdogFromEnv();
    if (name != NULL) {
        snprintf(notifyName, sizeof(notifyName), "%s", name);
        rc = notifyAddress(name);
        if (rc == 0) {
            notifyFd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            rc = notifyFd >= 0 ? 0 : -errno;
        }
        if (rc != 0) {
            corLog(COR_LOG_ERROR,
                   "NOTIFY_SOCKET '%s': %s: systemd will not "
                   "hear from cor",
                   name, strerror(-rc));
        }
    }
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    return rc;
}

int
corSystemdNotify(const char* fmt, ...)
{
    char text[1024];
    va_list ap;
    int len;

    if (notifyFd < 0) {
        return 0;
    }
    va_start(ap, fmt);
    len = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof(text)) {
        len = (int)strlen(text);
    }
    if (sendto(notifyFd, text, (size_t)len, MSG_NOSIGNAL,
               (const struct sockaddr*)&notifyAddr, notifyAddrLen)
        < 0) {
        int err = errno;

        if (!notifyFailedLogged) {
            corLog(COR_LOG_ERROR, "cannot notify systemd: %s", strerror(err));
            notifyFailedLogged = true;
        }
        return -err;
    }
    return 0;
}

void
corSystemdReloading(const char* configFile)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    corSystemdNotify("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading "
                     "%s",
                     (unsigned long long)now.tv_sec * 1000000ULL
                         + (unsigned long long)now.tv_nsec / 1000ULL,
                     configFile);
}

void
corSystemdReloaded(const char* outcome, unsigned number, const char* errorText)
{
    const char* text = errorText != NULL ? errorText : "";
    int lineLen = (int)strcspn(text, "\n");

    corSystemdNotify("READY=1\nSTATUS=reload %s: generation %u serving%s"
                     "%.*s",
                     outcome, number, lineLen > 0 ? "; " : "",
                     lineLen > 200 ? 200 : lineLen, text);
}

void
corSystemdEnvRestore(void)
{
    char text[32];

    if (notifyName[0] != '\0') {
        setenv("NOTIFY_SOCKET", notifyName, 1);
    }
    if (watchdogMs > 0) {
        snprintf(text, sizeof(text), "%llu",
                 (unsigned long long)watchdogMs * 1000ULL);
        setenv("WATCHDOG_USEC", text, 1);
        snprintf(text, sizeof(text), "%d", (int)getpid());
        setenv("WATCHDOG_PID", text, 1);
    }
}

uint64_t
corSystemdWatchdogMs(void)
{
    return watchdogMs;
}

uint64_t
corSystemdBeatMs(void)
{
    return watchdogMs == 0 ? 0 : watchdogMs / 4 > 0 ? watchdogMs / 4 : 1;
}

int
corSystemdWatchdogWaitMs(void)
{
    uint64_t now = corEvClockMs();

    if (watchdogMs == 0) {
        return -1;
    }
    return now >= nextLookMs ? 0 : (int)(nextLookMs - now);
}

/* Log a stalled loop once a stall, and its end. */
static void
stallReport(int loop, uint64_t ageMs, unsigned number)
{
    if (loop >= 0 && !stalledLogged) {
        if (ageMs == UINT64_MAX) {
            corLog(COR_LOG_ERROR,
                   "loop %d of generation %u has not beaten "
                   "yet: the watchdog is not petted",
                   loop, number);
        } else {
            corLog(COR_LOG_ERROR,
                   "loop %d of generation %u has not beaten "
                   "for %llu ms (a handler holds it?): the watchdog is not "
                   "petted",
                   loop, number, (unsigned long long)ageMs);
        }
    } else if (loop < 0 && stalledLogged) {
        corLog(COR_LOG_INFO,
               "the loops of generation %u beat again: the "
               "watchdog is petted",
               number);
    }
    stalledLogged = loop >= 0;
}

void
corSystemdWatchdogTick(const CorHeartbeat* serving, unsigned number)
{
    uint64_t now = corEvClockMs();
    uint64_t ageMs = 0;
    int stale;

    if (watchdogMs == 0 || corSystemdWatchdogWaitMs() > 0) {
        return;
    }
    nextLookMs = now + corSystemdBeatMs();
    if (serving == NULL) {
        return; /* none serves: a start or a replacement */
    }
    stale = corHeartbeatStale(serving, now, watchdogMs / 2, &ageMs);
    stallReport(stale, ageMs, number);
    if (stale < 0) {
        corSystemdNotify("WATCHDOG=1");
        nextLookMs = now + watchdogMs / 2;
    }
}
