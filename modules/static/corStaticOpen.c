/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening a path under a root without leaving it. The path the handler
 * gives has no dot segment (the HTTP parser removed them and the handler
 * refuses any left), so only a symlink can lead out: the kernel checks
 * each step of the walk with openat2's RESOLVE_BENEATH (Linux 5.6), which
 * no rename racing the walk can fool. Where openat2 is missing (an older
 * kernel, a seccomp filter that refuses it) the file is opened and what
 * it turned out to be is checked instead: its real path, read back from
 * /proc/self/fd, must be the root's or under it.
 */
#include "corStaticInt.h"

#include "corAutoConfig.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if COR_HAVE_OPENAT2
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

/* Never blocks on a FIFO (it is refused after the fstat), and a tty never
 * becomes the process's. */
#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)

static int
openFollowing(const StaticRoot* root, const char* rel)
{
    char path[PATH_MAX];
    int fd;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", root->path, rel)
        >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    fd = open(path, OPEN_FLAGS);
    return fd >= 0 ? fd : -errno;
}

/* Whether the file open at fd is root's real folder or under it. */
static bool
fdBeneath(int fd, const char* rootReal)
{
    char link[64];
    char real[PATH_MAX];
    size_t rootLen = strlen(rootReal);
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, real, sizeof(real) - 1);
    if (n < 0) {
        return false;
    }
    real[n] = '\0';
    if (strcmp(rootReal, "/") == 0) {
        return true;
    }
    return strncmp(real, rootReal, rootLen) == 0
           && (real[rootLen] == '\0' || real[rootLen] == '/');
}

/* The check after the open, for a kernel without openat2. The root's
 * real path is read each time: a root that is a symlink swapped for a
 * new release stays served. */
static int
openChecked(const StaticRoot* root, const char* rel)
{
    char rootReal[PATH_MAX];
    int fd;

    if (realpath(root->path, rootReal) == NULL) {
        return -errno;
    }
    fd = openFollowing(root, rel);
    if (fd >= 0 && !fdBeneath(fd, rootReal)) {
        close(fd);
        return -EXDEV;
    }
    return fd;
}

#if COR_HAVE_OPENAT2
/* -ENOSYS where the kernel (or its filter) has no openat2. */
static int
openBeneath(const StaticRoot* root, const char* rel)
{
    struct open_how how = {
        .flags = OPEN_FLAGS,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    int dir = open(root->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    long fd;
    int err;

    if (dir < 0) {
        return -errno;
    }
    fd = syscall(SYS_openat2, dir, rel, &how, sizeof(how));
    err = errno;
    close(dir);
    if (fd < 0) {
        return -err;
    }
    return (int)fd;
}
#endif

int
corStaticOpen(const StaticRoot* root, const char* rel)
{
#if COR_HAVE_OPENAT2
    static _Atomic bool noOpenat2;
    int fd;
#endif

    if (root->follow) {
        return openFollowing(root, rel);
    }
#if COR_HAVE_OPENAT2
    if (!noOpenat2) {
        fd = openBeneath(root, rel);
        if (fd != -ENOSYS) {
            return fd;
        }
        noOpenat2 = true;
    }
#endif
    return openChecked(root, rel);
}
