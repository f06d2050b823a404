/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/3's UDP side (docs/http3.md): each loop opens its own socket on
 * the address and port of each TLS listener with http3: on, all of them
 * with SO_REUSEPORT, so that the kernel spreads the clients over the
 * loops by their address and port, as it does TCP connections under
 * accept: reuseport. Every loop serves QUIC, none holds a lock.
 *
 * A datagram goes to the connection its destination ID names. Ours name
 * their loop (corHttp3Cid.c): one that landed on another loop's socket
 * (the client's port changed, a NAT rebound it, a socket of the set
 * came or went) is handed to its owner through the owner's task queue,
 * copied. No BPF program steers them; the hand-off is the rare path.
 *
 * What names no connection: an Initial packet opens one (after a Retry,
 * when the loop has many handshakes in flight: address validation under
 * load, http3.retry_above) unless limits.connections (all protocols
 * together) are open (then an Initial CONNECTION_CLOSE refuses it), an
 * unknown version is answered with Version
 * Negotiation, and a short-header packet for one of our IDs that is gone
 * gets a stateless reset, so that its peer stops at once rather than at
 * its idle timeout.
 */
#include "corHttp3Int.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/* Datagrams read in one readable event before the loop's other work. */
#define READS_A_TURN 64
/* Refusals past limits.connections are said at most once in so long. */
#define REFUSED_SAY_MS 1000
/* How long a Retry token stays good. */
#define RETRY_TOKEN_NS (10ULL * NGTCP2_SECONDS)

uint8_t corHttp3Secret[32];

void
corHttp3SecretMake(void)
{
    gnutls_rnd(GNUTLS_RND_KEY, corHttp3Secret, sizeof(corHttp3Secret));
}

/* ---- Sending ------------------------------------------------------------- */

void
corHttp3SendSegments(Http3Endpoint* ep, const struct sockaddr* to,
                     socklen_t toLen, const uint8_t* buf, size_t len,
                     size_t segment)
{
    static bool noGso; /* the kernel refused UDP_SEGMENT once */
    char control[CMSG_SPACE(sizeof(uint16_t))] = { 0 };
    struct iovec iov = { .iov_base = (void*)(uintptr_t)buf, .iov_len = len };
    struct msghdr msg = {
        .msg_name = (void*)(uintptr_t)to,
        .msg_namelen = toLen,
        .msg_iov = &iov,
        .msg_iovlen = 1,
    };

    if (segment < len && !noGso) {
        struct cmsghdr* cm;

        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        *(uint16_t*)(void*)CMSG_DATA(cm) = (uint16_t)segment;
    }
    if (segment >= len || !noGso) {
        if (sendmsg(ep->io.fd, &msg, MSG_DONTWAIT) >= 0
            || (errno != EIO && errno != EINVAL) || segment >= len) {
            return; /* sent, or dropped: QUIC sends it again */
        }
        noGso = true;
    }
    for (size_t off = 0; off < len; off += segment) {
        corHttp3Send(ep, to, toLen, buf + off,
                     len - off < segment ? len - off : segment);
    }
}

void
corHttp3Send(Http3Endpoint* ep, const struct sockaddr* to, socklen_t toLen,
             const uint8_t* pkt, size_t len)
{
    (void)sendto(ep->io.fd, pkt, len, MSG_DONTWAIT, to, toLen);
}

/* ---- What names no connection -------------------------------------------- */

static void
versionNegotiate(Http3Endpoint* ep, const ngtcp2_version_cid* vc,
                 const struct sockaddr* peer, socklen_t peerLen)
{
    uint8_t pkt[256];
    uint32_t versions[] = { NGTCP2_PROTO_VER_V1 };
    uint8_t unused;
    ngtcp2_ssize n;

    gnutls_rnd(GNUTLS_RND_NONCE, &unused, 1);
    n = ngtcp2_pkt_write_version_negotiation(pkt, sizeof(pkt), unused, vc->scid,
                                             vc->scidlen, vc->dcid, vc->dcidlen,
                                             versions, 1);
    if (n > 0) {
        corHttp3Send(ep, peer, peerLen, pkt, (size_t)n);
    }
}

/* A short-header packet of len bytes for our ID that names no
 * connection: a stateless reset, shorter than it (so that two servers
 * never reset each other forever), never under the 21 bytes one needs
 * to look like a packet. */
static void
statelessReset(Http3Endpoint* ep, const uint8_t* id,
               const struct sockaddr* peer, socklen_t peerLen, size_t len)
{
    uint8_t pkt[64];
    uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
    uint8_t random[64];
    ngtcp2_cid cid;
    size_t randLen = len - 1 < sizeof(pkt) ? len - 1 : sizeof(pkt);
    ngtcp2_ssize n;

    randLen -= NGTCP2_STATELESS_RESET_TOKENLEN + 1;
    if (len < 1 + NGTCP2_STATELESS_RESET_TOKENLEN + 1
                  + NGTCP2_MIN_STATELESS_RESET_RANDLEN + 1) {
        return;
    }
    ngtcp2_cid_init(&cid, id, H3_CID_BYTES);
    gnutls_rnd(GNUTLS_RND_NONCE, random, randLen);
    if (ngtcp2_crypto_generate_stateless_reset_token(token, corHttp3Secret,
                                                     sizeof(corHttp3Secret),
                                                     &cid)
        != 0) {
        return;
    }
    n = ngtcp2_pkt_write_stateless_reset(pkt, sizeof(pkt), token, random,
                                         randLen);
    if (n > 0) {
        corHttp3Send(ep, peer, peerLen, pkt, (size_t)n);
        corHttp3Count(H3_COUNT_RESET);
    }
}

/* Address validation: a Retry whose token the client brings back in its
 * next Initial (RFC 9000 8.1.2). */
static void
retrySend(Http3Endpoint* ep, const ngtcp2_pkt_hd* hd,
          const struct sockaddr* peer, socklen_t peerLen)
{
    uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
    uint8_t pkt[H3_PACKET_MAX];
    ngtcp2_cid scid;
    ngtcp2_ssize tokenLen;
    ngtcp2_ssize n;

    corHttp3CidMake(ep->hl, &scid);
    tokenLen = ngtcp2_crypto_generate_retry_token(token, corHttp3Secret,
                                                  sizeof(corHttp3Secret),
                                                  hd->version, peer, peerLen,
                                                  &scid, &hd->dcid,
                                                  corEvClockNs());
    if (tokenLen < 0) {
        return;
    }
    n = ngtcp2_crypto_write_retry(pkt, sizeof(pkt), hd->version, &hd->scid,
                                  &scid, &hd->dcid, token, (size_t)tokenLen);
    if (n > 0) {
        corHttp3Send(ep, peer, peerLen, pkt, (size_t)n);
        corHttp3Count(H3_COUNT_RETRY);
    }
}

/* Past limits.connections: an Initial CONNECTION_CLOSE with
 * CONNECTION_REFUSED tells the client at once, rather than at the end of
 * its handshake timeout (and costs no state); counted with the accepts'
 * refusals, and said at most once a second a loop, with how many. */
static void
connectionRefuse(Http3Endpoint* ep, const ngtcp2_pkt_hd* hd,
                 const struct sockaddr* peer, socklen_t peerLen)
{
    Http3Loop* h = ep->hl->h3;
    uint64_t now = corEvNow(ep->hl->loop);
    uint8_t pkt[H3_PACKET_MAX];
    ngtcp2_ssize n;

    n = ngtcp2_crypto_write_connection_close(pkt, sizeof(pkt), hd->version,
                                             &hd->scid, &hd->dcid,
                                             NGTCP2_CONNECTION_REFUSED, NULL,
                                             0);
    if (n > 0) {
        corHttp3Send(ep, peer, peerLen, pkt, (size_t)n);
    }
    h->refusedUnsaid++;
    if (h->refusedSaidMs == 0 || now - h->refusedSaidMs >= REFUSED_SAY_MS) {
        char name[64];

        corPeerName((const struct sockaddr_storage*)peer, name, sizeof(name));
        corLog(COR_LOG_WARN,
               "http3: %s: refused past limits.connections (%u), %u "
               "connection%s refused since last said",
               name, corLimits()->connections, h->refusedUnsaid,
               h->refusedUnsaid == 1 ? "" : "s");
        h->refusedSaidMs = now;
        h->refusedUnsaid = 0;
    }
}

/* An Initial packet for no connection: a new one, once its address is
 * proven where the loop is loaded and while limits.connections allow. */
static void
initialTake(Http3Endpoint* ep, const struct sockaddr* peer, socklen_t peerLen,
            const uint8_t* pkt, size_t len)
{
    Http3Loop* h = ep->hl->h3;
    ngtcp2_cid ocid;
    const ngtcp2_cid* retried = NULL;
    ngtcp2_pkt_hd hd;
    Http3Conn* c;

    if (h->draining || ngtcp2_accept(&hd, pkt, len) != 0) {
        return; /* not an Initial we take: dropped */
    }
    if (hd.token.len > 0
        && hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
        if (ngtcp2_crypto_verify_retry_token(&ocid, hd.token.base, hd.token.len,
                                             corHttp3Secret,
                                             sizeof(corHttp3Secret), hd.version,
                                             peer, peerLen, &hd.dcid,
                                             RETRY_TOKEN_NS, corEvClockNs())
            != 0) {
            return; /* forged or stale: dropped, the client times out */
        }
        retried = &ocid;
    } else if (h->handshakes >= corHttp3Conf.retryAbove) {
        retrySend(ep, &hd, peer, peerLen);
        return;
    }
    if (retried == NULL) {
        /* A token we did not make (NEW_TOKEN is not sent) is ignored. */
        hd.token.base = NULL;
        hd.token.len = 0;
    }
    if (!corAcceptAdmit()) {
        connectionRefuse(ep, &hd, peer, peerLen);
        return;
    }
    c = corHttp3ConnNew(ep, &hd, retried, peer, peerLen);
    if (c != NULL) {
        corHttp3ConnRead(c, peer, peerLen, pkt, len);
    }
}

/* ---- Reading ------------------------------------------------------------- */

/* A datagram that another loop's socket read, on its way to its owner. */
typedef struct {
    CorEvTask task;
    unsigned loop;
    unsigned endpoint;
    struct sockaddr_storage peer;
    socklen_t peerLen;
    size_t len;
    uint8_t pkt[];
} HandOff;

static void datagram(Http3Endpoint* ep, const struct sockaddr* peer,
                     socklen_t peerLen, const uint8_t* pkt, size_t len);

static void
handedOver(CorEvTask* task)
{
    HandOff* o = corContainerOf(task, HandOff, task);
    HttpLoop* hl = corHttpLoopOf(o->loop);

    if (hl->h3 != NULL && o->endpoint < hl->h3->endpointCount) {
        datagram(&hl->h3->endpoints[o->endpoint],
                 (const struct sockaddr*)&o->peer, o->peerLen, o->pkt, o->len);
    }
    free(o);
}

/* Hand a short-header packet to the loop its ID names. */
static void
handOff(Http3Endpoint* ep, unsigned loop, const struct sockaddr* peer,
        socklen_t peerLen, const uint8_t* pkt, size_t len)
{
    HandOff* o = malloc(sizeof(*o) + len);

    if (o == NULL) {
        return; /* dropped: QUIC sends it again */
    }
    o->loop = loop;
    o->endpoint = ep->index;
    memcpy(&o->peer, peer, peerLen);
    o->peerLen = peerLen;
    o->len = len;
    memcpy(o->pkt, pkt, len);
    corHttp3Count(H3_COUNT_HANDOFF);
    corEvLoopPost(corHttpLoopOf(loop)->loop, &o->task, handedOver);
}

static void
datagram(Http3Endpoint* ep, const struct sockaddr* peer, socklen_t peerLen,
         const uint8_t* pkt, size_t len)
{
    Http3Loop* h = ep->hl->h3;
    ngtcp2_version_cid vc;
    Http3Conn* c;
    int owner;
    int rc = ngtcp2_pkt_decode_version_cid(&vc, pkt, len, H3_CID_BYTES);

    if (rc == NGTCP2_ERR_VERSION_NEGOTIATION) {
        versionNegotiate(ep, &vc, peer, peerLen);
        return;
    }
    if (rc != 0) {
        return;
    }
    c = corHttp3CidFind(h, vc.dcid, vc.dcidlen);
    if (c != NULL) {
        corHttp3ConnRead(c, peer, peerLen, pkt, len);
        return;
    }
    if (pkt[0] & 0x80) {
        initialTake(ep, peer, peerLen, pkt, len); /* a long header */
        return;
    }
    owner = corHttp3CidLoop(vc.dcid, vc.dcidlen);
    if (owner >= 0 && (unsigned)owner != ep->hl->index) {
        handOff(ep, (unsigned)owner, peer, peerLen, pkt, len);
    } else if (owner >= 0) {
        statelessReset(ep, vc.dcid, peer, peerLen, len);
    }
}

/* The size of each datagram the kernel coalesced into what one recvmsg
 * read (UDP_GRO: segments of one size, the last may be shorter), or n
 * when it coalesced none. */
static size_t
segmentOf(struct msghdr* msg, size_t n)
{
    for (struct cmsghdr* cm = CMSG_FIRSTHDR(msg); cm != NULL;
         cm = CMSG_NXTHDR(msg, cm)) {
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
            int size;

            memcpy(&size, CMSG_DATA(cm), sizeof(size));
            return size > 0 ? (size_t)size : n;
        }
    }
    return n;
}

static void
readable(CorEvIo* io, unsigned events)
{
    Http3Endpoint* ep = corContainerOf(io, Http3Endpoint, io);
    uint8_t* buf = ep->hl->h3->in;

    (void)events;
    for (unsigned i = 0; i < READS_A_TURN && io->fd >= 0; i++) {
        struct sockaddr_storage peer;
        _Alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
        struct iovec iov = { .iov_base = buf, .iov_len = H3_DATAGRAM_MAX };
        struct msghdr msg = {
            .msg_name = &peer,
            .msg_namelen = sizeof(peer),
            .msg_iov = &iov,
            .msg_iovlen = 1,
            .msg_control = control,
            .msg_controllen = sizeof(control),
        };
        ssize_t n = recvmsg(io->fd, &msg, MSG_DONTWAIT);
        size_t segment;

        if (n < 0) {
            return; /* EAGAIN: all read */
        }
        segment = segmentOf(&msg, (size_t)n);
        for (size_t off = 0; off < (size_t)n && io->fd >= 0; off += segment) {
            datagram(ep, (struct sockaddr*)&peer, msg.msg_namelen, buf + off,
                     (size_t)n - off < segment ? (size_t)n - off : segment);
        }
    }
}

/* ---- The endpoints ------------------------------------------------------- */

/* The UDP socket beside l's TCP one on this loop: the same address and
 * port, the same IPv6-only setting. */
static int
endpointOpen(Http3Endpoint* ep)
{
    int tcp = corListenerFd(ep->l, ep->hl->index);
    int one = 1;
    int v6only = 0;
    socklen_t optLen = sizeof(v6only);
    int fd;

    ep->localLen = sizeof(ep->local);
    if (getsockname(tcp, (struct sockaddr*)&ep->local, &ep->localLen) != 0) {
        return -errno;
    }
    fd = socket(ep->local.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0) {
        return -errno;
    }
    if (ep->local.ss_family == AF_INET6) {
        getsockopt(tcp, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &optLen);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0
        || bind(fd, (struct sockaddr*)&ep->local, ep->localLen) != 0
        || corEvIoStart(ep->hl->loop, &ep->io, fd, EPOLLIN, readable) != 0) {
        int rc = -errno;

        close(fd);
        return rc;
    }
    /* GRO: a client's burst read at once, split here (segmentOf); a
     * kernel without it (before 5.0) reads one datagram a call. */
    (void)setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
    return 0;
}

static unsigned
portOf(const struct sockaddr_storage* a)
{
    return ntohs(a->ss_family == AF_INET6
                     ? ((const struct sockaddr_in6*)(const void*)a)->sin6_port
                     : ((const struct sockaddr_in*)(const void*)a)->sin_port);
}

int
corHttp3Start(HttpLoop* hl, CorListener* const* listeners, unsigned count)
{
    Http3Loop* h;
    unsigned want = 0;

    for (unsigned i = 0; i < count; i++) {
        want += corListenerHttp3(listeners[i]);
    }
    if (want == 0) {
        return 0;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL
        || (h->endpoints = calloc(want, sizeof(Http3Endpoint))) == NULL) {
        free(h);
        corLog(COR_LOG_ERROR, "http3: no memory for loop %u", hl->index);
        return -1;
    }
    hl->h3 = h;
    corListInit(&h->conns);
    corHttp3MemInit(h, hl);
    for (unsigned i = 0; i < count; i++) {
        Http3Endpoint* ep = &h->endpoints[h->endpointCount];
        int rc;

        if (!corListenerHttp3(listeners[i])) {
            continue;
        }
        *ep = (Http3Endpoint){ .hl = hl,
                               .index = h->endpointCount,
                               .l = listeners[i] };
        ep->io.fd = -1;
        rc = endpointOpen(ep);
        if (rc != 0) {
            corLog(COR_LOG_ERROR, "http3: %s: cannot open UDP: %s",
                   corListenerAddress(ep->l), strerror(-rc));
            return -1;
        }
        h->endpointCount++;
        if (corHttp3TlsLoad(ep) != 0) {
            return -1;
        }
        snprintf(ep->altSvc, sizeof(ep->altSvc), "h3=\":%u\"; ma=86400",
                 portOf(&ep->local));
    }
    return 0;
}

const char*
corHttp3AltSvc(HttpLoop* hl, const CorListener* l)
{
    if (hl->h3 == NULL) {
        return NULL;
    }
    for (unsigned i = 0; i < hl->h3->endpointCount; i++) {
        if (hl->h3->endpoints[i].l == l) {
            return hl->h3->endpoints[i].altSvc;
        }
    }
    return NULL;
}

/* The sockets off the loop, closed: the kernel's SO_REUSEPORT group is
 * left to the next generation's. */
static void
endpointsClose(HttpLoop* hl)
{
    Http3Loop* h = hl->h3;

    for (unsigned i = 0; i < h->endpointCount; i++) {
        if (h->endpoints[i].io.fd >= 0) {
            corEvIoStop(hl->loop, &h->endpoints[i].io);
            close(h->endpoints[i].io.fd);
            h->endpoints[i].io.fd = -1;
        }
        corHttp3TlsFree(&h->endpoints[i]);
    }
}

/*
 * A drain closes every connection at once with CONNECTION_CLOSE
 * (H3_NO_ERROR), and the sockets. Not GOAWAY and a wait, as HTTP/2
 * does: the next generation's sockets join the same SO_REUSEPORT group,
 * which changes the kernel's hash, so that half the packets of a
 * connection kept here would reach the next generation (which resets
 * it), and half the new clients' Initial packets would reach this one,
 * which takes no new connection: they would wait out their handshake
 * timeout. A request in flight on HTTP/3 is cut by a reload (its client
 * may try it again on a new connection); docs/http3.md.
 */
void
corHttp3Drain(HttpLoop* hl)
{
    if (hl->h3 == NULL) {
        return;
    }
    corHttp3Stop(hl);
}

void
corHttp3Stop(HttpLoop* hl)
{
    Http3Loop* h = hl->h3;

    if (h == NULL) {
        return;
    }
    h->draining = true; /* a datagram handed over now opens nothing */
    while (!corListEmpty(&h->conns)) {
        corHttp3ConnStop(
            corContainerOf(corListFirst(&h->conns), Http3Conn, link));
    }
    endpointsClose(hl);
}

void
corHttp3LoopFree(HttpLoop* hl)
{
    if (hl->h3 != NULL) {
        free(hl->h3->endpoints);
        free(hl->h3);
        hl->h3 = NULL;
    }
}

unsigned
corHttp3Connections(HttpLoop* hl)
{
    return hl->h3 != NULL ? atomic_load(&hl->h3->connCount) : 0;
}
