/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small DNS server for the resolver's tests: UDP and TCP on one loopback
 * port, answering what the labels of the name ask for, so a test steers it
 * by the names it looks up:
 *
 *   nx        NXDOMAIN             servfail  SERVFAIL
 *   refused   REFUSED              drop      no answer at all
 *   delayN    answer after N ms    ttlN      answers live N s (default 300)
 *   tc        over UDP a truncated answer (TC set), over TCP the whole one
 *   v4only    no AAAA record (NOERROR, empty)
 *
 * Any other name has A 192.0.2.1 and AAAA 2001:db8::1. Each query is
 * appended to the log as "udp|tcp A|AAAA name". Usage: corDnsServer
 * PORTFILE LOGFILE; it writes its port to PORTFILE once it serves, and runs
 * until it is killed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNS_MAX 16
#define DELAYED_MAX 4096

typedef struct {
    uint64_t due;
    struct sockaddr_in peer;
    size_t len;
    unsigned char msg[512];
} Delayed;

typedef struct {
    int fd;
    size_t len;
    unsigned char buf[4096];
} Conn;

static FILE* logFile;
static Delayed delayed[DELAYED_MAX];
static unsigned delayedCount;

static uint64_t
nowMs(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The question's name in dotted form, lower case; its end in *end. */
static bool
questionName(const unsigned char* q, size_t len, char* name, size_t* end)
{
    size_t i = 12;
    size_t n = 0;

    while (i < len && q[i] != 0) {
        unsigned l = q[i++];

        if (l > 63 || i + l > len || n + l + 2 > 256) {
            return false;
        }
        if (n > 0) {
            name[n++] = '.';
        }
        for (unsigned k = 0; k < l; k++) {
            unsigned char c = q[i + k];

            name[n++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        i += l;
    }
    name[n] = '\0';
    *end = i + 1;
    return i + 5 <= len;
}

/* The number after a label's prefix ("delay250" -> 250), or -1. */
static long
labelNumber(const char* name, const char* prefix)
{
    size_t plen = strlen(prefix);

    for (const char* p = name; p != NULL; p = strchr(p, '.')) {
        p += *p == '.';
        if (strncmp(p, prefix, plen) == 0 && p[plen] >= '0' && p[plen] <= '9') {
            return strtol(p + plen, NULL, 10);
        }
    }
    return -1;
}

static bool
hasLabel(const char* name, const char* label)
{
    size_t llen = strlen(label);

    for (const char* p = name; p != NULL; p = strchr(p, '.')) {
        p += *p == '.';
        if (strncmp(p, label, llen) == 0
            && (p[llen] == '.' || p[llen] == '\0')) {
            return true;
        }
    }
    return false;
}

static size_t
put16(unsigned char* p, size_t at, unsigned v)
{
    p[at] = (unsigned char)(v >> 8);
    p[at + 1] = (unsigned char)v;
    return at + 2;
}

/* The answer to query q into out; its length, or 0 to drop it. */
static size_t
answer(const unsigned char* q, size_t len, bool tcp, unsigned char* out,
       long* delayMs)
{
    static const unsigned char a[4] = { 192, 0, 2, 1 };
    unsigned char aaaa[16] = { 0x20, 0x01, 0x0d, 0xb8 };
    char name[256];
    size_t end;
    unsigned qtype;
    unsigned rcode = 0;
    long ttl;
    size_t n;
    bool data;

    if (len < 12 || !questionName(q, len, name, &end)) {
        return 0;
    }
    qtype = (unsigned)q[end] << 8 | q[end + 1];
    fprintf(logFile, "%s %s %s\n", tcp ? "tcp" : "udp",
            qtype == 1    ? "A"
            : qtype == 28 ? "AAAA"
                          : "other",
            name);
    fflush(logFile);
    if (hasLabel(name, "drop")) {
        return 0;
    }
    *delayMs = labelNumber(name, "delay");
    ttl = labelNumber(name, "ttl");
    ttl = ttl < 0 ? 300 : ttl;
    rcode = hasLabel(name, "nx")         ? 3
            : hasLabel(name, "servfail") ? 2
            : hasLabel(name, "refused")  ? 5
                                         : 0;
    aaaa[15] = 1;
    data = rcode == 0
           && (qtype == 1 || (qtype == 28 && !hasLabel(name, "v4only")));
    memcpy(out, q, end + 4);
    out[2] = (unsigned char)(0x84 | (q[2] & 0x01)); /* QR, AA, RD */
    out[3] = (unsigned char)(0x80 | rcode);         /* RA */
    put16(out, 4, 1);
    put16(out, 6, 0);
    put16(out, 8, 0);
    put16(out, 10, 0);
    n = end + 4;
    if (data && hasLabel(name, "tc") && !tcp) {
        out[2] |= 0x02; /* TC */
        return n;
    }
    if (data) {
        put16(out, 6, 1);
        n = put16(out, n, 0xc00c);
        n = put16(out, n, qtype);
        n = put16(out, n, 1);
        n = put16(out, n, (unsigned)(ttl >> 16));
        n = put16(out, n, (unsigned)ttl & 0xffff);
        n = put16(out, n, qtype == 1 ? 4 : 16);
        memcpy(out + n, qtype == 1 ? a : aaaa, qtype == 1 ? 4 : 16);
        n += qtype == 1 ? 4 : 16;
    }
    return n;
}

static void
udpQuery(int fd)
{
    unsigned char q[512];
    unsigned char out[512];
    struct sockaddr_in peer;
    socklen_t peerLen = sizeof(peer);
    ssize_t len = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr*)&peer,
                           &peerLen);
    long delayMs = -1;
    size_t n;

    if (len <= 0) {
        return;
    }
    n = answer(q, (size_t)len, false, out, &delayMs);
    if (n == 0) {
        return;
    }
    if (delayMs > 0 && delayedCount < DELAYED_MAX) {
        Delayed* d = &delayed[delayedCount++];

        d->due = nowMs() + (uint64_t)delayMs;
        d->peer = peer;
        d->len = n;
        memcpy(d->msg, out, n);
        return;
    }
    sendto(fd, out, n, 0, (struct sockaddr*)&peer, sizeof(peer));
}

/* Send what is due; the time to the next one, or -1. */
static int
delayedSend(int fd)
{
    uint64_t now = nowMs();
    int next = -1;

    for (unsigned i = 0; i < delayedCount;) {
        Delayed* d = &delayed[i];

        if (d->due <= now) {
            sendto(fd, d->msg, d->len, 0, (struct sockaddr*)&d->peer,
                   sizeof(d->peer));
            *d = delayed[--delayedCount];
            continue;
        }
        if (next < 0 || (int)(d->due - now) < next) {
            next = (int)(d->due - now);
        }
        i++;
    }
    return next;
}

/* Read from a TCP client; answer each whole query. False when it is
 * gone. */
static bool
tcpRead(Conn* c)
{
    ssize_t got = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);

    if (got <= 0) {
        return false;
    }
    c->len += (size_t)got;
    while (c->len >= 2) {
        size_t qlen = (size_t)c->buf[0] << 8 | c->buf[1];
        unsigned char out[514];
        long delayMs = -1;
        size_t n;

        if (c->len < qlen + 2) {
            break;
        }
        n = qlen <= 512 ? answer(c->buf + 2, qlen, true, out + 2, &delayMs) : 0;
        if (n > 0) {
            put16(out, 0, (unsigned)n);
            if (write(c->fd, out, n + 2) < 0) {
                return false;
            }
        }
        memmove(c->buf, c->buf + qlen + 2, c->len - qlen - 2);
        c->len -= qlen + 2;
    }
    return true;
}

/* A UDP socket and a TCP listener on one free loopback port. */
static int
bindBoth(int* udp, int* tcp)
{
    for (int attempt = 0; attempt < 50; attempt++) {
        struct sockaddr_in sin = { .sin_family = AF_INET };
        socklen_t len = sizeof(sin);
        int one = 1;

        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *udp = socket(AF_INET, SOCK_DGRAM, 0);
        *tcp = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(*tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(*udp, (struct sockaddr*)&sin, sizeof(sin)) == 0
            && getsockname(*udp, (struct sockaddr*)&sin, &len) == 0
            && bind(*tcp, (struct sockaddr*)&sin, sizeof(sin)) == 0
            && listen(*tcp, 64) == 0) {
            return ntohs(sin.sin_port);
        }
        close(*udp);
        close(*tcp);
    }
    return -1;
}

int
main(int argc, char** argv)
{
    Conn conns[CONNS_MAX];
    unsigned connCount = 0;
    char tmp[512];
    FILE* portFile;
    int udp;
    int tcp;
    int port;

    if (argc != 3) {
        fprintf(stderr, "usage: corDnsServer PORTFILE LOGFILE\n");
        return 2;
    }
    logFile = fopen(argv[2], "a");
    port = bindBoth(&udp, &tcp);
    if (logFile == NULL || port < 0) {
        perror("corDnsServer");
        return 1;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
    portFile = fopen(tmp, "w");
    if (portFile == NULL || fprintf(portFile, "%d\n", port) < 0
        || fclose(portFile) != 0 || rename(tmp, argv[1]) != 0) {
        perror("corDnsServer");
        return 1;
    }
    for (;;) {
        struct pollfd pfds[2 + CONNS_MAX];
        int timeout = delayedSend(udp);

        pfds[0] = (struct pollfd){ .fd = udp, .events = POLLIN };
        pfds[1] = (struct pollfd){ .fd = tcp, .events = POLLIN };
        for (unsigned i = 0; i < connCount; i++) {
            pfds[2 + i] = (struct pollfd){ .fd = conns[i].fd,
                                           .events = POLLIN };
        }
        if (poll(pfds, 2 + connCount, timeout) <= 0) {
            continue;
        }
        if (pfds[0].revents & POLLIN) {
            udpQuery(udp);
        }
        for (unsigned i = connCount; i-- > 0;) {
            if (pfds[2 + i].revents != 0 && !tcpRead(&conns[i])) {
                close(conns[i].fd);
                conns[i] = conns[--connCount];
            }
        }
        if ((pfds[1].revents & POLLIN) && connCount < CONNS_MAX) {
            conns[connCount].fd = accept(tcp, NULL, NULL);
            conns[connCount].len = 0;
            connCount += conns[connCount].fd >= 0;
        }
    }
}
