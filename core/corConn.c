/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connections out: open one (the name, a non-blocking connect to each
 * address in turn, the TLS handshake), read and write it with deadlines,
 * give it back. The one layer under every client of cor (DESIGN.md,
 * "Connections out"): it knows sockets and transports, never a protocol.
 *
 * Every wait is a corRestWaitFd on the connection's socket, so a coroutine
 * yields and a worker polls in the same code, and a stop or the request's
 * cancel ends the wait with ECANCELED, which is passed up as it is: a
 * cancelled open tries no further address. Deadlines are absolute, read
 * from the monotonic clock (a wait may be resumed late, a retry after
 * EAGAIN must not start the clock again).
 *
 * A connection that failed once (an error, a timeout, the peer's end) is
 * marked broken and never goes back to the pool: what the peer saw of the
 * exchange is unknown.
 */
#include "corCoreInt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONN_HOST_MAX 253 /* a DNS name; an IPv6 address is shorter */

/* The TLS client of targets that name none: client.ca_file's trust, made
 * by corConnSetup (or at the first use, where nothing set it up: a
 * program of its own). */
static CorTlsClient* defaultTls;
static pthread_mutex_t defaultTlsLock = PTHREAD_MUTEX_INITIALIZER;

/* The same trust offering an ALPN list ("h2"): a client that must know
 * which protocol the server chose asks for one (corConnTlsDefault). Made
 * at the first use of each list, under defaultTlsLock, from the CA file
 * corConnSetup was given. */
#define TLS_ALPN_LISTS 4
static struct {
    char alpn[32];
    CorTlsClient* tls;
} defaultAlpnTls[TLS_ALPN_LISTS];
static char* defaultCaFile;

/* ---- Addresses ----------------------------------------------------------- */

/* "1.2.3.4:80", "[::1]:80". */
static void
addrText(const struct sockaddr_storage* ss, char* out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";

    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6* a = (const struct sockaddr_in6*)ss;

        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        snprintf(out, cap, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in* a = (const struct sockaddr_in*)ss;

        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        snprintf(out, cap, "%s:%u", ip, ntohs(a->sin_port));
    }
}

/* ---- Connecting ---------------------------------------------------------- */

/* The address with its port set, and its length. */
static socklen_t
addrWithPort(struct sockaddr_storage* addr, unsigned port)
{
    if (addr->ss_family == AF_INET6) {
        ((struct sockaddr_in6*)addr)->sin6_port = htons((uint16_t)port);
        return sizeof(struct sockaddr_in6);
    }
    ((struct sockaddr_in*)addr)->sin_port = htons((uint16_t)port);
    return sizeof(struct sockaddr_in);
}

/*
 * A connected socket to one address by deadline, or -errno: the connect's
 * own error (SO_ERROR), -ETIMEDOUT, -ECANCELED. May yield.
 */
static int
connectOne(const struct sockaddr_storage* addr, socklen_t len,
           uint64_t deadline)
{
    int one = 1;
    int err = 0;
    socklen_t errLen = sizeof(err);
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    int rc;

    if (fd < 0) {
        return -errno;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr*)addr, len) == 0) {
        return fd;
    }
    if (errno != EINPROGRESS) {
        rc = -errno;
        goto failed;
    }
    rc = corDeadlineWaitFd(fd, POLLOUT, deadline);
    if (rc < 0) {
        goto failed;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errLen) != 0) {
        rc = -errno;
        goto failed;
    }
    if (err != 0) {
        rc = -err;
        goto failed;
    }
    return fd;

failed:
    close(fd);
    return rc;
}

/*
 * The deadline of one connect of several: an address that swallows its
 * SYNs (a dead IPv6 route) must leave time for the next, so each takes
 * an equal share of what is left, the last all of it.
 */
static uint64_t
attemptDeadline(uint64_t deadline, unsigned left)
{
    int remaining = corDeadlineLeftMs(deadline);

    if (left <= 1 || remaining <= 0) {
        return deadline;
    }
    return corEvClockMs() + (uint64_t)remaining / left + 1;
}

/* Say why the last of tried addresses failed. */
static void
connectWhy(const char* peer, const CorAddrs* addrs, unsigned tried, int rc,
           int timeoutMs, char* why, size_t whyLen)
{
    char at[INET6_ADDRSTRLEN + 8];
    char more[48] = "";

    addrText(&addrs->addrs[tried - 1], at, sizeof(at));
    if (tried > 1) {
        snprintf(more, sizeof(more), " (the last of %u addresses)", tried);
    }
    if (rc == -ETIMEDOUT) {
        corEvWhy(why, whyLen, "connect to %s (%s)%s: timed out after %d ms",
                 peer, at, more, timeoutMs);
    } else if (rc == -ECANCELED) {
        corEvWhy(why, whyLen, "connect to %s (%s): cancelled", peer, at);
    } else {
        corEvWhy(why, whyLen, "connect to %s (%s)%s: %s", peer, at, more,
                 strerror(-rc));
    }
}

static char*
keyNumber(char* p, unsigned long long v)
{
    char digits[20];
    size_t n = 0;

    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0) {
        *p++ = digits[--n];
    }
    return p;
}

/*
 * The key of a peer in the pool: "host port tls|tcp serverName client",
 * the host in lower case (names are not case-sensitive). Written by hand:
 * it is made for every request a client sends, and snprintf was a tenth
 * of a forwarded request's instructions. The host and the name passed
 * targetCheck, so the key fits in 2 * CONN_HOST_MAX + 64.
 */
static void
targetKey(const CorConnTarget* target, const CorTlsClient* tls, char* key)
{
    const char* name = target->serverName ? target->serverName : target->host;
    char* p = key;

    for (const char* h = target->host; *h != '\0'; h++) {
        *p++ = (char)(*h >= 'A' && *h <= 'Z' ? *h - 'A' + 'a' : *h);
    }
    *p++ = ' ';
    p = keyNumber(p, target->port);
    memcpy(p, target->tls ? " tls " : " tcp ", 5);
    p += 5;
    if (target->tls) {
        size_t len = strlen(name);

        memcpy(p, name, len);
        p += len;
    }
    *p++ = ' ';
    p = keyNumber(p, tls != NULL ? corTlsClientId(tls) : 0);
    *p = '\0';
}

static CorConn*
connNew(const CorConnTarget* target, const char* key, int fd)
{
    size_t keyLen = strlen(key) + 1;
    size_t peerLen = strlen(target->host) + 16;
    CorConn* c = calloc(1, sizeof(*c) + keyLen + peerLen);
    char* peer;

    if (c == NULL) {
        return NULL;
    }
    memcpy(c->key, key, keyLen);
    peer = c->key + keyLen;
    snprintf(peer, peerLen, strchr(target->host, ':') ? "[%s]:%u" : "%s:%u",
             target->host, target->port);
    c->peer = peer;
    c->tls = target->tls;
    corTransportPlain(&c->transport, fd);
    return c;
}

/* A name or an address as a host is written: letters, digits, '.', '-',
 * '_', and ':' and '%' for IPv6 (a zone). Nothing else may reach a key, a
 * message or a Host header that a protocol makes of it. */
static bool
hostValid(const char* host)
{
    static const bool allowed[256] = {
        ['a' ... 'z'] = true, ['A' ... 'Z'] = true, ['0' ... '9'] = true,
        ['.'] = true,         ['-'] = true,         ['_'] = true,
        [':'] = true,         ['%'] = true,
    };
    size_t len = 0;

    while (allowed[(unsigned char)host[len]]) {
        len++;
    }
    return host[len] == '\0' && len > 0 && len <= CONN_HOST_MAX;
}

static int
targetCheck(const CorConnTarget* target, char* why, size_t whyLen)
{
    if (target == NULL || target->host == NULL || !hostValid(target->host)) {
        corEvWhy(why, whyLen,
                 "connect: no host, one longer than %d bytes, or "
                 "one with characters no name or address has",
                 CONN_HOST_MAX);
        return -EINVAL;
    }
    if (target->port == 0 || target->port > 65535) {
        corEvWhy(why, whyLen,
                 "connect to %s: port %u is out of range "
                 "(1..65535)",
                 target->host, target->port);
        return -EINVAL;
    }
    if (target->serverName != NULL && !hostValid(target->serverName)) {
        corEvWhy(why, whyLen,
                 "connect to %s: a bad server name (empty, longer "
                 "than %d bytes, or with characters no name has)",
                 target->host, CONN_HOST_MAX);
        return -EINVAL;
    }
    return 0;
}

/*
 * Make c's transport TLS (with tls) and run the handshake by deadline.
 * Returns 0, or -errno with why set; c's socket is c's either way.
 * May yield.
 */
static int
connTls(CorConn* c, const CorConnTarget* target, CorTlsClient* tls,
        uint64_t deadline, int timeoutMs, char* why, size_t whyLen)
{
    const char* name = target->serverName ? target->serverName : target->host;
    char reason[256] = "";
    int fd = c->transport.fd;
    int rc;

    rc = corTransportTlsClient(&c->transport, fd, tls, name, target->port);
    if (rc < 0) {
        corEvWhy(why, whyLen, "TLS to %s: %s", c->peer, strerror(-rc));
        return rc;
    }
    rc = corDeadlineLeftMs(deadline);
    rc = rc == 0 ? -ETIMEDOUT
                 : corTransportTlsHandshake(&c->transport, rc, reason,
                                            sizeof(reason));
    if (rc == -ETIMEDOUT) {
        corEvWhy(why, whyLen, "TLS to %s: no handshake within %d ms", c->peer,
                 timeoutMs);
    } else if (rc == -ECANCELED) {
        corEvWhy(why, whyLen, "TLS to %s: cancelled", c->peer);
    } else if (rc < 0) {
        corEvWhy(why, whyLen, "TLS to %s: %s", c->peer, reason);
    }
    return rc;
}

/* A new connection: the name, its addresses one connect after the other,
 * then TLS. May yield. */
static CorConn*
connOpenNew(const CorConnTarget* target, CorTlsClient* tls, const char* key,
            int* errP, char* why, size_t whyLen)
{
    int timeoutMs = target->connectTimeoutMs > 0
                        ? target->connectTimeoutMs
                        : (int)corConnSettings()->connectTimeoutMs;
    uint64_t deadline = corDeadlineAfter(timeoutMs);
    char peer[CONN_HOST_MAX + 16];
    char resolveWhy[256] = "";
    CorAddrs addrs;
    unsigned tried = 0;
    CorConn* c;
    int rc;
    int fd = -1;

    snprintf(peer, sizeof(peer),
             strchr(target->host, ':') ? "[%s]:%u" : "%s:%u", target->host,
             target->port);
    rc = corResolve(target->host, corDeadlineLeftMs(deadline), &addrs,
                    resolveWhy, sizeof(resolveWhy));
    if (rc == 0 && addrs.count == 0) {
        rc = -ENOENT;
        snprintf(resolveWhy, sizeof(resolveWhy), "name '%s': no address",
                 target->host);
    }
    if (rc < 0) {
        corEvWhy(why, whyLen, "connect to %s: %s", peer, resolveWhy);
        goto failed;
    }
    while (tried < addrs.count) {
        socklen_t len = addrWithPort(&addrs.addrs[tried], target->port);

        fd = connectOne(&addrs.addrs[tried], len,
                        attemptDeadline(deadline, addrs.count - tried));
        tried++;
        if (fd >= 0 || fd == -ECANCELED
            || (fd == -ETIMEDOUT && corDeadlineLeftMs(deadline) == 0)) {
            break;
        }
    }
    if (fd < 0) {
        rc = fd;
        connectWhy(peer, &addrs, tried, rc, timeoutMs, why, whyLen);
        goto failed;
    }
    c = connNew(target, key, fd);
    if (c == NULL) {
        close(fd);
        rc = -ENOMEM;
        corEvWhy(why, whyLen, "connect to %s: out of memory", peer);
        goto failed;
    }
    if (target->tls) {
        rc = connTls(c, target, tls, deadline, timeoutMs, why, whyLen);
        if (rc < 0) {
            corConnFree(c);
            goto failed;
        }
    }
    return c;

failed:
    if (errP != NULL) {
        *errP = rc;
    }
    return NULL;
}

/* The default TLS client, made at the first use where no setup made it.
 * NULL with why set when it cannot be made. */
static CorTlsClient*
defaultTlsGet(char* why, size_t whyLen)
{
    CorTlsClient* tls;

    pthread_mutex_lock(&defaultTlsLock);
    if (defaultTls == NULL) {
        defaultTls = corTlsClientNew(&(CorTlsClientOptions){ 0 }, why, whyLen);
    }
    tls = defaultTls;
    pthread_mutex_unlock(&defaultTlsLock);
    return tls;
}

/* ---- The API ------------------------------------------------------------- */

int
corConnSetup(const CorConfig* config, CorConfErrors* errors)
{
    const char* caFile = config != NULL ? config->client.caFile : NULL;
    CorTlsClient* tls = NULL;
    char why[256] = "";

    corConnSettingsSet(
        config == NULL ? NULL
                       : &(CorConnSettings){
                           .connectTimeoutMs = config->client.connectTimeoutMs,
                           .keepalivePerPeer = config->client.keepalivePerPeer,
                           .idleTimeoutMs = config->client.idleTimeoutMs,
                       });
    /* The system's store is found at the first handshake; a CA file is
     * read now, so that `cor -t` says when it is not PEM. */
    if (caFile != NULL) {
        tls = corTlsClientNew(&(CorTlsClientOptions){ .caFile = caFile }, why,
                              sizeof(why));
        if (tls == NULL) {
            if (errors != NULL) {
                corConfErrorf(errors,
                              corConfGet(corConfGet(config->root, "client"),
                                         "ca_file"),
                              "ca_file: %s", why);
            }
            return -1;
        }
    }
    pthread_mutex_lock(&defaultTlsLock);
    corTlsClientFree(defaultTls);
    defaultTls = tls;
    for (unsigned i = 0; i < TLS_ALPN_LISTS; i++) {
        corTlsClientFree(defaultAlpnTls[i].tls);
        defaultAlpnTls[i].tls = NULL;
        defaultAlpnTls[i].alpn[0] = '\0';
    }
    free(defaultCaFile);
    defaultCaFile = caFile != NULL ? strdup(caFile) : NULL;
    pthread_mutex_unlock(&defaultTlsLock);
    return 0;
}

CorTlsClient*
corConnTlsDefault(const char* alpn, char* why, size_t whyLen)
{
    CorTlsClient* tls = NULL;
    unsigned i;

    if (alpn == NULL) {
        return defaultTlsGet(why, whyLen);
    }
    if (strlen(alpn) >= sizeof(defaultAlpnTls[0].alpn)) {
        snprintf(why, whyLen, "the ALPN list '%s' is too long", alpn);
        return NULL;
    }
    pthread_mutex_lock(&defaultTlsLock);
    for (i = 0; i < TLS_ALPN_LISTS && defaultAlpnTls[i].tls != NULL; i++) {
        if (strcmp(defaultAlpnTls[i].alpn, alpn) == 0) {
            tls = defaultAlpnTls[i].tls;
            break;
        }
    }
    if (tls == NULL && i == TLS_ALPN_LISTS) {
        snprintf(why, whyLen, "more than %d ALPN lists", TLS_ALPN_LISTS);
    } else if (tls == NULL) {
        tls = corTlsClientNew(&(CorTlsClientOptions){ .caFile = defaultCaFile,
                                                      .alpn = alpn },
                              why, whyLen);
        if (tls != NULL) {
            snprintf(defaultAlpnTls[i].alpn, sizeof(defaultAlpnTls[i].alpn),
                     "%s", alpn);
            defaultAlpnTls[i].tls = tls;
        }
    }
    pthread_mutex_unlock(&defaultTlsLock);
    return tls;
}

CorConn*
corConnOpen(const CorConnTarget* target, int* errP, char* why, size_t whyLen)
{
    char key[2 * CONN_HOST_MAX + 64];
    CorTlsClient* tls = NULL;
    CorConnPool* pool;
    CorConn* c;
    int rc = targetCheck(target, why, whyLen);

    if (rc == 0 && target->tls) {
        tls = target->tlsClient;
        if (tls == NULL && (tls = defaultTlsGet(why, whyLen)) == NULL) {
            rc = -ENOMEM;
        }
    }
    if (rc < 0) {
        if (errP != NULL) {
            *errP = rc;
        }
        corMetricsClient(COR_CLIENT_FAILED);
        return NULL;
    }
    targetKey(target, tls, key);
    pool = corConnPoolCurrent();
    c = pool != NULL && !target->fresh ? corConnPoolTake(pool, key) : NULL;
    if (c != NULL) {
        c->reused = true;
        c->written = 0;
        corMetricsClient(COR_CLIENT_REUSED);
        return c;
    }
    c = connOpenNew(target, tls, key, errP, why, whyLen);
    if (c != NULL) {
        c->pool = pool;
    }
    corMetricsClient(c != NULL ? COR_CLIENT_NEW : COR_CLIENT_FAILED);
    return c;
}

ssize_t
corConnRead(CorConn* c, void* buf, size_t len, int timeoutMs)
{
    /* Taken at the first wait (0 until then, and for no timeout, which
     * costs no clock): a read that finds bytes reads no clock. */
    uint64_t deadline = 0;
    ssize_t n;
    int rc;

    if (len == 0) {
        return -EINVAL; /* 0 would read as the peer's end */
    }
    for (;;) {
        n = c->transport.ops->recv(&c->transport, buf, len);
        if (n > 0) {
            return n;
        }
        if (n == 0) {
            c->broken = true;
            return 0;
        }
        rc = -errno;
        if (rc == -EINTR) {
            continue;
        }
        if (rc != -EAGAIN && rc != -EWOULDBLOCK) {
            break;
        }
        if (timeoutMs == 0) {
            return -EAGAIN;
        }
        if (deadline == 0) {
            deadline = corDeadlineAfter(timeoutMs);
        }
        rc = corDeadlineWaitFd(c->transport.fd,
                               corTransportWantsWrite(&c->transport) ? POLLOUT
                                                                     : POLLIN,
                               deadline);
        if (rc < 0) {
            break;
        }
    }
    c->broken = true;
    return rc;
}

int
corConnWriteAll(CorConn* c, const void* buf, size_t len, int timeoutMs)
{
    int rc = corDeadlineSendAll(&c->transport, buf, len,
                                corDeadlineAfter(timeoutMs), &c->written);

    if (rc < 0) {
        c->broken = true;
    }
    return rc;
}

bool
corConnReused(const CorConn* c)
{
    return c->reused;
}

size_t
corConnWritten(const CorConn* c)
{
    return c->written;
}

CorTransport*
corConnTransport(CorConn* c)
{
    return &c->transport;
}

const char*
corConnPeer(const CorConn* c)
{
    return c->peer;
}

void
corConnRelease(CorConn* c)
{
    if (c == NULL) {
        return;
    }
    if (c->broken || c->pool == NULL || c->pool != corConnPoolCurrent()
        || !corConnPoolPut(c)) {
        corConnFree(c);
    }
}

void
corConnClose(CorConn* c)
{
    if (c != NULL) {
        corConnFree(c);
    }
}
