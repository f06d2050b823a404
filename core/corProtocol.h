/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corProtocol.h: what a protocol module (HTTP, cor://) builds on: the
 * listeners the master opened, the transports a connection's bytes move
 * through (plain or TLS), the accept of a loop, and the upgrade that hands
 * a connection to a handler (WebSocket). Requests it reads go to the core
 * with corRequestServe (corModule.h).
 */
#ifndef COR_PROTOCOL_H
#define COR_PROTOCOL_H

#include "corModule.h"

/* ---- Upgrades: a handler takes the connection ---------------------------
 *
 * A handler answers 101 (Switching Protocols) and takes the connection for
 * another protocol (WebSocket): once the 101 is set and the handler has
 * returned, the protocol sends it and hands its connection over (its
 * transport, so TLS too, and the bytes it read past the request, which
 * belong to the new protocol, pipelined or not); nothing on it is HTTP
 * any more. The core then calls fn(u, arg), the session, which reads and
 * writes u until it returns:
 *
 *     static void
 *     echo(CorUpgraded* u, void* arg)
 *     {
 *         char buf[4096];
 *         ssize_t n;
 *
 *         while ((n = corUpgradedRead(u, buf, sizeof(buf), 60000)) > 0
 *                && corUpgradedWriteAll(u, buf, (size_t)n, 10000) == 0) {
 *         }
 *     }
 *
 *     static void
 *     serve(CorRequest* r)
 *     {
 *         if (corRequestUpgrade(r, "echo", echo, NULL) != 0) {
 *             corRespond(r, 400, "text/plain", "no upgrade\n", 11);
 *         }
 *     }
 *
 * The session runs as a coroutine of the connection's loop when
 * coroutines are on and the handler's run (and hook) allow one (an inline
 * handler's session is a coroutine), else on a worker, where its waits
 * poll(): the same source. A stop cancels its waits (-ECANCELED), as a
 * request's; a drain (reload, graceful stop) waits for it as for any
 * request in flight, up to runtime.stop_timeout. The request (its method,
 * path, headers) stays readable through the session, from
 * corUpgradedRequest; the session is its last phase (no finish follows).
 */
typedef void (*CorUpgradeFn)(CorUpgraded* u, void* arg);

/*
 * Answer r with 101 and take its connection for protocol (a token, sent
 * as Upgrade: protocol) once the handler returns; fn(u, arg) then runs as
 * said above, exactly once (with a u whose reads and writes fail when the
 * client left before the 101 went out). Call it from r's handler, instead
 * of a response. Checks that r may be upgraded: a GET, whose Connection
 * header lists "upgrade" and whose Upgrade header lists protocol
 * (case-insensitive; "protocol/version" matches too), over a protocol
 * that can hand its connection over (HTTP/1.1; not HTTP/1.0). Returns 0;
 * -EINVAL when r is not such a request (answer it yourself: 400, or 426),
 * -ENOTSUP when its protocol cannot upgrade, -EALREADY when r was
 * answered, -ENOMEM. On failure fn is never called.
 */
int corRequestUpgrade(CorRequest* r, const char* protocol, CorUpgradeFn fn,
                      void* arg);

/* The request that was upgraded; valid through the session. */
CorRequest* corUpgradedRequest(CorUpgraded* u);

/*
 * Read up to len (> 0) bytes into buf, within timeoutMs (< 0: no
 * deadline; 0: not at all): first the bytes that came with the request,
 * then the connection's (through its transport). Returns the bytes read
 * (> 0), 0 when the peer closed, or -errno: -ETIMEDOUT, -ECANCELED (a
 * stop), -EAGAIN (timeoutMs 0, nothing there), -ECONNRESET, -EPROTO
 * (TLS), -EBADF (closed), -EINVAL (len 0). May yield.
 */
ssize_t corUpgradedRead(CorUpgraded* u, void* buf, size_t len, int timeoutMs);

/*
 * Write all len bytes of buf (read during the call only), waiting for
 * room as needed, all within timeoutMs (< 0: no deadline). Returns 0, or
 * -errno: -ETIMEDOUT, -ECANCELED, -EPIPE or -ECONNRESET (the peer is
 * gone), -EBADF (closed). After a failure part of buf may have gone out.
 * May yield.
 */
int corUpgradedWriteAll(CorUpgraded* u, const void* buf, size_t len,
                        int timeoutMs);

/* Close the connection (TLS: with its close_notify), at once; later reads
 * and writes fail with -EBADF. The session's end closes it otherwise. */
void corUpgradedClose(CorUpgraded* u);

/*
 * The connection's transport, for a session that drives the socket itself
 * beside another one (a proxy's splice of two connections, modules/
 * forward): the 101 goes out first, within timeoutMs, and the bytes that
 * came with the request are given in *restP and *restLenP (u's, valid
 * through the session; *restLenP 0 when none): they are no longer read
 * by corUpgradedRead. The transport stays u's (closed at the session's
 * end, or by corUpgradedClose). Returns it, or NULL with *errP set to
 * -errno: those of corUpgradedWriteAll. May yield.
 */
CorTransport* corUpgradedTransport(CorUpgraded* u, int timeoutMs,
                                   const void** restP, size_t* restLenP,
                                   int* errP);

/* ---- Protocols: what protocol modules (HTTP, cor://) build on ---------- */

/*
 * The protocols /metrics counts requests of apart
 * (cor_protocol_requests_total{protocol}): a protocol's ops say which it
 * is, so the count is one increment of the loop's, with no name looked
 * up. A protocol none of these names is OTHER (the zero an ops that says
 * nothing has).
 */
typedef enum {
    COR_PROTOCOL_OTHER,
    COR_PROTOCOL_HTTP1,
    COR_PROTOCOL_HTTP2,
    COR_PROTOCOL_COR,
    COR_PROTOCOL_MQTT,
    COR_PROTOCOL_HTTP3,
    COR_PROTOCOL_KINDS
} CorProtocolKind;

/*
 * What the core calls back on the protocol that read a request. Both run
 * on the loop that read it.
 */
struct CorProtocolOps {
    /* The response is set (by the handler, or a failure status): send it,
     * then call corRequestSent() once it is out (or failed). A streamed
     * response gets its head here (as soon as the stream starts: its
     * handler may still run), its pieces through streamData and its end
     * through streamEnd, once the handler returned; corRequestSent
     * follows the end. */
    void (*done)(CorRequest* r);
    /* The post-response phase is over: the request may be freed. */
    void (*release)(CorRequest* r);
    void (*streamData)(CorRequest* r, const void* data, size_t len);
    void (*streamEnd)(CorRequest* r);
    /* Whether the client is still there to stream to. */
    bool (*streamAlive)(const CorRequest* r);
    /* Bytes of the stream the protocol holds, unsent; the core hands it
     * more only while that is under COR_STREAM_QUEUE_MAX. NULL: it sends
     * everything at once (then only the core's queue is bounded). */
    size_t (*streamBacklog)(const CorRequest* r);
    /* Whether r's connection can be handed over (corRequestUpgrade); NULL:
     * never. From any thread: it reads r only. A protocol that can hands
     * it over in done, when r->upgrade is set and r->status is 101: it
     * sends the 101 (or passes it on unsent) and calls
     * corRequestUpgraded instead of corRequestSent. */
    bool (*upgradable)(const CorRequest* r);
    /* A stream ended as failed (corResponseStreamAbort): end the response
     * so that the client sees it incomplete, then corRequestSent as after
     * streamEnd. NULL: streamEnd. */
    void (*streamAbort)(CorRequest* r);
    /* The handler took n bytes of a streamed request body
     * (corRequestBodyPut): the client may send as much more (HTTP/2
     * opens its window, HTTP/1.1 reads on). On r's loop. NULL: the
     * protocol does not stream request bodies. */
    void (*bodyConsumed)(CorRequest* r, size_t n);
    /* Which protocol counts r in /metrics. */
    CorProtocolKind kind;
    /* r, served at its head with its body still to come, passed its
     * limits, its route and its guards: its handler will read the body.
     * A client that waits to be told to send it (Expect: 100-continue) is
     * told now; one refused got its answer instead, the body unread. On
     * r's loop; NULL: nothing to tell. */
    void (*bodyWanted)(CorRequest* r);
};

/*
 * Serve a request the protocol has read whole, on the loop that read it:
 * find its route, run its handler where it must run (inline, a coroutine of
 * this loop, a worker), and call ops->done when the response is set, then
 * ops->release after the post-response phase. A request past the limits
 * (corLimitsRequest) is answered with their status, its handler never
 * called; one with no route is answered 404 (405 when only the method
 * differs). Must be called on a loop of the generation.
 */
void corRequestServe(CorRequest* r, const CorProtocolOps* ops,
                     void* protocolData);

/*
 * A request body that comes while its handler runs. A protocol that can
 * stream one asks, once r's method and path are set, whether r's route
 * wants it so (corRequestBodyStreams: its handler has streamBody); if
 * yes it calls corRequestBodyBegin, then corRequestServe at once, and
 * hands the body on with corRequestBodyPut as it comes and
 * corRequestBodyEnd at its end (0), or when it failed (-ECONNRESET: the
 * client reset it or left; -EMSGSIZE: past limits.body_bytes;
 * -ETIMEDOUT: past limits.body_timeout between two pieces; -EPROTO: bad
 * framing). What a put gives is copied; ops->bodyConsumed says what the
 * handler took, and the protocol lets the client send as much more
 * (HTTP/2 opens its window, HTTP/1.1 reads its socket again). All on r's
 * loop. Begin returns 0 or -ENOMEM (then serve it whole as usual); put
 * returns 0 or -ENOMEM (then end it as failed).
 */
bool corRequestBodyStreams(const CorRequest* r);
/*
 * The limits of r's route (its `limits:` over the top level's), its
 * rewrites followed, kept in r->limits: a protocol asks once r's method,
 * path and headers are set and before it takes any body byte, then
 * judges the body by them (corLimitsBody(r, ...), corLimitsOf(r)), so
 * that a route may take more body than the top level allows, or less;
 * corRequestServe judges r by them too. A request with no body need not
 * ask. Costs a route lookup only when some route has limits. r's loop.
 */
const struct CorLimits* corRequestLimits(CorRequest* r);
int corRequestBodyBegin(CorRequest* r);
/* The body, begun, brings len bytes (Content-Length): its handler and the
 * HTTP client know its length before its end (corRequestBodySize). */
void corRequestBodyLengthSay(CorRequest* r, uint64_t len);
int corRequestBodyPut(CorRequest* r, const void* data, size_t len);
void corRequestBodyEnd(CorRequest* r, int rc);

/* The protocol sent (most of) what it held of r's streamed body: the core
 * hands it more now instead of at its next look. On r's loop; nothing
 * when r has no stream. */
void corResponseStreamDrained(CorRequest* r);

/* The protocol has sent the response (or gave up on the connection): run
 * the post-response phase, free the arena, then ops->release. On the
 * request's loop. */
void corRequestSent(CorRequest* r);

/*
 * The protocol hands r's connection over (in its done, for an upgrade):
 * its transport t (copied: the core owns it from here, and the socket
 * must no longer be on the loop's epoll), rest, the bytes read past the
 * request, and unsent, output not yet written (the 101 itself, perhaps),
 * both copied. Then the session runs, and ops->release follows its end.
 * On r's loop.
 */
void corRequestUpgraded(CorRequest* r, const CorTransport* t, const void* rest,
                        size_t restLen, const void* unsent, size_t unsentLen);

/* A listening socket the master opened for a protocol. */

int corListenerFd(const CorListener* l, unsigned loopIndex);
const char* corListenerAddress(const CorListener* l);
bool corListenerReusePort(const CorListener* l);
/* The listener's http2 (on | off; by default on over TLS, off plain): a
 * protocol that speaks HTTP/2 takes it there (h2 by ALPN, h2c by its
 * preface); over TLS, off also drops "h2" from the ALPN offered. */
bool corListenerHttp2(const CorListener* l);
/* The listener's http3 (off by default; on only with tls): HTTP/3 over
 * QUIC on UDP at the same address (docs/http3.md). */
bool corListenerHttp3(const CorListener* l);
/*
 * A TLS listener's certificates for a TLS stack beside cor's own
 * (HTTP/3's GnuTLS): what OpenSSL's handshakes serve, as they serve it.
 * Index 0 is the default certificate, then the sni entries. Any thread.
 */
/* How many (0 for a plain listener). */
unsigned corListenerCertCount(const CorListener* l);
/* The index a handshake naming host (NULL: no SNI) gets: OpenSSL's own
 * choice (an sni entry by name or wildcard, else the default). */
unsigned corListenerCertPick(const CorListener* l, const char* host);
/* index's certificate now: a number that changes each time another is
 * swapped in (ACME's issue and renewals), without a reload. */
uint64_t corListenerCertSerial(const CorListener* l, unsigned index);
/* index's certificate and chain (PEM, leaf first) and its key (PKCS#8
 * PEM), malloc'd, and the serial they are of. Returns 0 or -1. */
int corListenerCertPem(const CorListener* l, unsigned index, char** chainP,
                       char** keyP, uint64_t* serialP);
/* Free what corListenerCertPem gave (the key's bytes wiped first). */
void corListenerCertPemFree(char* chain, char* key);
/* The OCSP staple OpenSSL's handshakes serve with index's certificate of
 * serial (a DER response, in alloc's memory, into *derP): its length, or
 * -1 when there is none still valid or that certificate is served no
 * more. */
int corListenerCertStaple(const CorListener* l, unsigned index, uint64_t serial,
                          void* (*alloc)(size_t), unsigned char** derP);
/* The listener's session_lifetime in seconds, 0 with session_tickets:
 * false. */
unsigned corListenerTicketLifetimeS(const CorListener* l);

/*
 * A transport: how a connection's bytes move. Protocol modules read and
 * write their connections only through one, so that TLS slots in under a
 * protocol without the protocol knowing (the later https listener gives
 * its connections a transport over OpenSSL). Calls never block: -1 with
 * errno EAGAIN means no bytes or no room now; the caller waits for the
 * socket's next edge and calls again. Owned by its connection; fd stays
 * the socket, for the loop and for socket options.
 */

typedef struct {
    /* As read(2): bytes read, 0 at the peer's end, or -1 with errno. A
     * short count means nothing more is ready: a transport that decodes
     * in records (TLS) goes on filling buf until its socket says EAGAIN,
     * since no further edge comes for bytes it already took in. */
    ssize_t (*recv)(CorTransport* t, void* buf, size_t len);
    /* As write(2). */
    ssize_t (*send)(CorTransport* t, const void* buf, size_t len);
    /* As send, for bytes that sendFile follows at once (an answer's
     * head): they may wait in the kernel for the file (MSG_MORE), so
     * that both leave in full packets. A head sent alone is a small
     * segment that the client's receive-buffer autotuning takes its
     * round trip from: at microseconds its buffer never grows past
     * 128 KiB, and a large file crawls in window-sized steps that the
     * client's own ACKs send (docs/performance.md). NULL: send. */
    ssize_t (*sendMore)(CorTransport* t, const void* buf, size_t len);
    /* As sendfile(2): up to len bytes of fileFd from *offset, which moves
     * on; 0 when the file ended early. */
    ssize_t (*sendFile)(CorTransport* t, int fileFd, off_t* offset, size_t len);
    /* Release what the transport holds and close the socket. */
    void (*close)(CorTransport* t);
} CorTransportOps;

struct CorTransport {
    const CorTransportOps* ops;
    int fd;
    void* data; /* the transport's own per-connection state */
};

/* Bytes as they are, over the socket fd (which the transport now owns). */
void corTransportPlain(CorTransport* t, int fd);

/*
 * The transport a listener gives the connections it accepts: plain, or
 * TLS (server side) when the listener has tls in the configuration. The
 * TLS handshake runs inside the transport's recv and send, on the loop
 * that owns the connection. Returns 0 (t owns fd), or -errno (fd stays
 * the caller's).
 */
int corListenerTransport(const CorListener* l, CorTransport* t, int fd);

/* A server's accepted fd, into its connection's transport t (NULL: no
 * memory for the connection), the socket set TCP_NODELAY. Returns 0, or
 * -1 after closing fd and counting the connection closed
 * (corAcceptClosed): the caller frees its record. */
int corAcceptTransport(const CorListener* l, CorTransport* t, int fd);

/* The listener's tls.handshake_timeout, 0 for a plain listener: a
 * protocol cuts a TLS connection whose handshake (and first request) has
 * not come by then. */
uint64_t corListenerHandshakeTimeoutMs(const CorListener* l);

/*
 * Whether the last recv stopped because the transport must write before
 * it can read on (a TLS handshake's answer met a full socket): the caller
 * calls recv again when the socket turns writable, not only readable. A
 * protocol that arms its socket edge-triggered for both needs this.
 */
bool corTransportWantsWrite(const CorTransport* t);

/* Whether the transport holds decrypted bytes not yet read (SSL_pending):
 * a reader must not wait on the socket then. False for plain. */
bool corTransportPending(const CorTransport* t);

/*
 * Shut the sending side of t, as shutdown(SHUT_WR) does, after a TLS
 * close_notify (the peer reads a clean end, not a truncation); reading goes
 * on (a lingering close drains what the peer still sends). Returns 0, or
 * -errno (-EAGAIN: no room for the close_notify): the caller closes.
 */
int corTransportShutWrite(CorTransport* t);

/*
 * Whether the peer of a TLS listener's connection speaks plain text: its
 * first byte starts no TLS record (recv failed with EPROTO, reading
 * nothing). If so, t becomes a plain transport over the same socket, for
 * the protocol to say in plain text that this port speaks TLS (HTTP: 400,
 * as nginx) before it closes, never to serve the peer. False otherwise,
 * and t is unchanged.
 */
bool corTransportTlsPlainPeer(CorTransport* t);

/*
 * Whether a TLS connection keeps OpenSSL's read and write buffers (about
 * 17 KiB each) between its reads and writes. By default it gives each
 * back as soon as it is empty (SSL_MODE_RELEASE_BUFFERS), which an idle
 * connection wants; a busy one then pays a malloc, a free and their page
 * faults at every read and write. A protocol that knows when a
 * connection is busy keeps them (true) and gives them back once it is
 * quiet (false: the empty ones go at once). Nothing for plain.
 */
void corTransportTlsKeepBuffers(CorTransport* t, bool keep);

/* After a TLS handshake: whether the session was resumed, and the ALPN
 * protocol chosen (NULL if none, or plain; valid until the thread's next
 * call). */
bool corTransportTlsResumed(const CorTransport* t);
const char* corTransportTlsAlpn(const CorTransport* t);

/*
 * cor's command line (core/corMain.c): run, check, signal. The binary's
 * main (http/corHttpMain.c, on the floor that links the core) calls it
 * once the floors above the core registered what they bring, by explicit
 * calls rather than constructors (STYLE.md), since the core may not call
 * up into them. Returns the process's exit status.
 */
int corMain(int argc, char** argv);

#endif /* COR_PROTOCOL_H */
