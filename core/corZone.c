/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Zones: shared memory that outlives a generation. A module that keeps
 * state every process of the instance should find again after a reload
 * (the cache's disk index) opens a zone by name at its init; the
 * generation after a reload gets the very same memory back while the
 * name, the size and the tag are unchanged, and both use it while they
 * overlap (the old one draining, the new one serving). A restart, a
 * changed size or tag (another layout: a binary built otherwise) starts
 * a fresh one, zero-filled. nginx's shared zones (ngx_shared_memory_add,
 * reused at a reload when name and size match) are the model.
 *
 * How a zone goes from one generation to the next: the generation makes
 * it (a memfd, mapped shared) and sends it to the master with
 * SCM_RIGHTS over a socket pair the master made before the fork; the
 * master keeps what the generation sent once it says ready (and drops
 * what a generation that failed to start sent), and the next generation
 * it forks inherits those fds and the table that names them. The master
 * maps nothing and runs no module code: it holds fds. Why not made in
 * the master before the fork: only the module knows its zones and their
 * sizes (the master never loads a module), and a memfd the generation
 * made needs no second configuration reader. A binary upgrade passes
 * the master's zones to the new master across its exec (COR_ZONES),
 * where the header and the tag decide: a build whose layout differs
 * starts fresh ones. docs/architecture.md, "Zones", says more.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define ZONES_MOST 64
#define ZONE_NAME_MOST 64
#define ZONE_MAGIC "CORZONE"
#define ZONE_VERSION 1
/* The zone's own header, a page before what the module is given. */
#define ZONE_HEADER 4096

/* At the start of each zone: what it was made as. */
typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t headerSize;
    uint64_t size; /* the module's part */
    uint64_t tag;
    char name[ZONE_NAME_MOST];
} ZoneHeader;

/* One zone as the master holds it, and as a generation sends it. */
typedef struct {
    char name[ZONE_NAME_MOST];
    uint64_t size;
    uint64_t tag;
    int fd;
} ZoneHeld;

/* In the master: the zones of the generation that last said ready; in a
 * generation: the copy of that table it inherited at its fork. */
static ZoneHeld zonesHeld[ZONES_MOST];
static unsigned zonesHeldCount;
/* The socket pair of a generation's start: the master reads [0], the
 * generation writes [1]; -1 when none (cor -t, a test). */
static int hand[2] = { -1, -1 };

static size_t
mappedSize(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    return ZONE_HEADER + (size + page - 1) / page * page;
}

/* The zone held under name whose header says it is what is asked for. */
static int
zoneFindInherited(const char* name, size_t size, uint64_t tag)
{
    for (unsigned i = 0; i < zonesHeldCount; i++) {
        if (strcmp(zonesHeld[i].name, name) == 0 && zonesHeld[i].size == size
            && zonesHeld[i].tag == tag) {
            return zonesHeld[i].fd;
        }
    }
    return -1;
}

static bool
headerIs(const ZoneHeader* h, const char* name, size_t size, uint64_t tag)
{
    return memcmp(h->magic, ZONE_MAGIC, sizeof(ZONE_MAGIC)) == 0
           && h->version == ZONE_VERSION && h->headerSize == ZONE_HEADER
           && h->size == size && h->tag == tag
           && strncmp(h->name, name, sizeof(h->name)) == 0;
}

/* Tell the master of the zone (it keeps it if this generation starts). */
static void
zoneSend(const char* name, size_t size, uint64_t tag, int fd)
{
    ZoneHeld z = { .size = size, .tag = tag, .fd = -1 };
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { .iov_base = &z, .iov_len = sizeof(z) };
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = control,
                          .msg_controllen = sizeof(control) };
    struct cmsghdr* c;

    if (hand[1] < 0) {
        return;
    }
    snprintf(z.name, sizeof(z.name), "%s", name);
    memset(control, 0, sizeof(control));
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    if (sendmsg(hand[1], &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        corLog(COR_LOG_WARN,
               "zone %s: cannot hand it to the master (%s): the next "
               "generation starts a fresh one",
               name, strerror(errno));
    }
}

/* A new zone of mapped bytes, mapped into *hP: a memfd (its fd
 * returned), or where none can be made (a file size limit counts a
 * memfd's size too) memory of this generation's own, handed to none
 * (-1). *hP is MAP_FAILED when neither. */
static int
zoneMake(const char* name, size_t mapped, ZoneHeader** hP)
{
    int fd = memfd_create(name, MFD_CLOEXEC);

    *hP = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)mapped) == 0) {
        *hP = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (*hP != MAP_FAILED) {
        return fd;
    }
    corLog(COR_LOG_WARN,
           "zone %s: no memfd of %zu bytes (%s): this generation's own, "
           "the next starts a fresh one",
           name, mapped, strerror(errno));
    if (fd >= 0) {
        close(fd);
    }
    *hP = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
               -1, 0);
    return -1;
}

void*
corZoneOpen(const char* name, size_t size, uint64_t tag, bool* reused)
{
    size_t mapped = mappedSize(size);
    int fd = zoneFindInherited(name, size, tag);
    ZoneHeader* h = MAP_FAILED;

    *reused = false;
    if (strlen(name) >= ZONE_NAME_MOST) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    if (fd >= 0) {
        h = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        *reused = h != MAP_FAILED && headerIs(h, name, size, tag);
        if (h != MAP_FAILED && !*reused) {
            munmap(h, mapped);
            h = MAP_FAILED;
        }
    }
    if (!*reused) {
        fd = zoneMake(name, mapped, &h);
        if (h == MAP_FAILED) {
            return NULL;
        }
        memcpy(h->magic, ZONE_MAGIC, sizeof(ZONE_MAGIC));
        h->version = ZONE_VERSION;
        h->headerSize = ZONE_HEADER;
        h->size = size;
        h->tag = tag;
        snprintf(h->name, sizeof(h->name), "%s", name);
    }
    if (fd >= 0) {
        zoneSend(name, size, tag, fd);
    }
    if (fd >= 0 && !*reused) {
        close(fd); /* the mapping (and the master's copy) keep it */
    }
    return (char*)h + ZONE_HEADER;
}

void
corZoneClose(void* zone, size_t size)
{
    if (zone != NULL) {
        munmap((char*)zone - ZONE_HEADER, mappedSize(size));
    }
}

/* ---- The master's side --------------------------------------------------- */

int
corZoneHandBegin(void)
{
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, hand);
}

void
corZoneHandChild(void)
{
    if (hand[0] >= 0) {
        close(hand[0]);
        hand[0] = -1;
    }
}

/* One zone the starting generation sent, into *z; false when none is
 * left. */
static bool
zoneReceive(ZoneHeld* z)
{
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { .iov_base = z, .iov_len = sizeof(*z) };
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = control,
                          .msg_controllen = sizeof(control) };
    struct cmsghdr* c;

    if (recvmsg(hand[0], &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)
        != (ssize_t)sizeof(*z)) {
        return false;
    }
    c = CMSG_FIRSTHDR(&msg);
    z->fd = -1;
    if (c != NULL && c->cmsg_type == SCM_RIGHTS) {
        memcpy(&z->fd, CMSG_DATA(c), sizeof(int));
    }
    z->name[sizeof(z->name) - 1] = '\0';
    return true;
}

void
corZoneHandEnd(bool ready)
{
    ZoneHeld got[ZONES_MOST];
    unsigned count = 0;
    ZoneHeld z;

    if (hand[1] >= 0) {
        close(hand[1]);
        hand[1] = -1;
    }
    if (hand[0] < 0) {
        return;
    }
    while (zoneReceive(&z)) {
        if (z.fd < 0) {
            continue;
        }
        if (!ready || count == ZONES_MOST) {
            close(z.fd);
            continue;
        }
        got[count++] = z;
    }
    close(hand[0]);
    hand[0] = -1;
    if (!ready) {
        return; /* the zones of the generation that serves stay */
    }
    /* The new generation's zones replace the table: a zone it did not
     * open is let go (the old generation keeps its mapping until it
     * exits). */
    for (unsigned i = 0; i < zonesHeldCount; i++) {
        close(zonesHeld[i].fd);
    }
    memcpy(zonesHeld, got, count * sizeof(*got));
    zonesHeldCount = count;
}

/* ---- Across a binary upgrade --------------------------------------------- */

void
corZonePass(int floor)
{
    char env[ZONES_MOST * (ZONE_NAME_MOST + 48)];
    size_t at = 0;

    env[0] = '\0';
    for (unsigned i = 0; i < zonesHeldCount; i++) {
        int fd = fcntl(zonesHeld[i].fd, F_DUPFD, floor); /* inherited */

        if (fd >= 0) {
            at += (size_t)snprintf(env + at, sizeof(env) - at,
                                   "%d %llu %llu %s\n", fd,
                                   (unsigned long long)zonesHeld[i].size,
                                   (unsigned long long)zonesHeld[i].tag,
                                   zonesHeld[i].name);
        }
    }
    setenv("COR_ZONES", env, 1);
}

void
corZoneInherit(bool upgraded)
{
    const char* env = getenv("COR_ZONES");

    for (const char* line = env; upgraded && line != NULL && *line != '\0';) {
        ZoneHeld* z = &zonesHeld[zonesHeldCount];
        unsigned long long size;
        unsigned long long tag;
        const char* end = strchr(line, '\n');
        int used = 0;

        if (end == NULL || zonesHeldCount == ZONES_MOST
            || sscanf(line, "%d %llu %llu %63[^\n]%n", &z->fd, &size, &tag,
                      z->name, &used)
                   != 4
            || line + used != end) {
            break;
        }
        fcntl(z->fd, F_SETFD, FD_CLOEXEC);
        z->size = size;
        z->tag = tag;
        zonesHeldCount++;
        line = end + 1;
    }
    unsetenv("COR_ZONES");
}
