/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket activation (sd_listen_fds(3), without libsystemd): systemd opens
 * the listening sockets of a .socket unit and passes them from fd 3 on,
 * LISTEN_FDS of them, to the process LISTEN_PID names. The master takes
 * each as the YAML listener bound to the same address (getsockname), in
 * place of binding it; a listener no socket matches is bound as usual,
 * and a socket that matches no listener is logged and closed (nothing
 * would accept on it: its clients would wait in a backlog for nothing).
 *
 * The match is by address, not by order or by LISTEN_FDNAMES: the YAML
 * stays the one description of what cor serves, and a unit that passes
 * a socket the YAML does not know is a mistake worth a line in the log.
 * Sockets are taken once, at the start; a reload keeps a passed socket
 * as long as a listener has its address, as it keeps any other.
 */
#include "corCoreInt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LISTEN_FDS_START 3
#define PASSED_MAX 256

static int passed[PASSED_MAX];
static unsigned passedCount;

unsigned
corSystemdListenInit(void)
{
    const char* fds = getenv("LISTEN_FDS");
    const char* pid = getenv("LISTEN_PID");
    long count = fds != NULL ? strtol(fds, NULL, 10) : 0;

    if (fds != NULL
        && (pid == NULL || strtol(pid, NULL, 10) != (long)getpid())) {
        corLog(COR_LOG_INFO,
               "LISTEN_FDS is set for pid %s, not this "
               "master (%d): its sockets are not taken",
               pid ? pid : "(none)", (int)getpid());
        count = 0;
    }
    if (count < 0 || count > PASSED_MAX) {
        corLog(COR_LOG_ERROR,
               "LISTEN_FDS %ld: out of range (0..%d): no "
               "socket is taken",
               count, PASSED_MAX);
        count = 0;
    }
    for (long i = 0; i < count; i++) {
        passed[passedCount++] = LISTEN_FDS_START + (int)i;
    }
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDNAMES");
    return passedCount;
}

/* Whether the socket fd is a listening stream socket bound to addr. */
static bool
boundTo(int fd, const struct sockaddr_storage* addr, socklen_t addrLen)
{
    struct sockaddr_storage got;
    socklen_t len = sizeof(got);
    int type = 0;
    int listening = 0;
    socklen_t optLen = sizeof(int);

    if (getsockname(fd, (struct sockaddr*)&got, &len) != 0
        || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &optLen) != 0
        || type != SOCK_STREAM
        || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optLen) != 0
        || !listening || got.ss_family != addr->ss_family || len != addrLen) {
        return false;
    }
    if (got.ss_family == AF_INET) {
        const struct sockaddr_in* a = (const struct sockaddr_in*)&got;
        const struct sockaddr_in* b = (const struct sockaddr_in*)addr;

        return a->sin_port == b->sin_port
               && a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    if (got.ss_family == AF_INET6) {
        const struct sockaddr_in6* a = (const struct sockaddr_in6*)&got;
        const struct sockaddr_in6* b = (const struct sockaddr_in6*)addr;

        return a->sin6_port == b->sin6_port
               && memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr))
                      == 0;
    }
    return false;
}

int
corSystemdListenTake(const struct sockaddr_storage* addr, socklen_t addrLen)
{
    for (unsigned i = 0; i < passedCount; i++) {
        int fd = passed[i];

        if (!boundTo(fd, addr, addrLen)) {
            continue;
        }
        /* systemd passes them blocking and inheritable: a generation's
         * accept must not block, and a module's child must not hold the
         * socket after cor exits. */
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0
            || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
            return -1;
        }
        passed[i] = passed[--passedCount];
        return fd;
    }
    return -1;
}

unsigned
corSystemdListenTakeAll(const struct sockaddr_storage* addr, socklen_t addrLen,
                        int* fds, unsigned max)
{
    unsigned n = 0;

    while (n < max) {
        int fd = corSystemdListenTake(addr, addrLen);

        if (fd < 0) {
            break;
        }
        fds[n++] = fd;
    }
    return n;
}

/* What fd is bound to, for the log. */
static void
describe(int fd, char* out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (getsockname(fd, (struct sockaddr*)&ss, &len) != 0) {
        snprintf(out, cap, "not a socket (%s)", strerror(errno));
        return;
    }
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in* sin = (const struct sockaddr_in*)&ss;

        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        port = ntohs(sin->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6* sin6 = (const struct sockaddr_in6*)&ss;

        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
        port = ntohs(sin6->sin6_port);
    } else {
        snprintf(out, cap, "a socket of family %d", (int)ss.ss_family);
        return;
    }
    snprintf(out, cap, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
             port);
}

void
corSystemdListenCloseRest(void)
{
    for (unsigned i = 0; i < passedCount; i++) {
        char what[INET6_ADDRSTRLEN + 64];

        describe(passed[i], what, sizeof(what));
        corLog(COR_LOG_WARN,
               "the socket systemd passed as fd %d (%s) "
               "matches no listener of the configuration: closed",
               passed[i], what);
        close(passed[i]);
    }
    passedCount = 0;
}
