/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corClient.h: what a module that talks to other servers uses: URLs (one
 * parser), connections out (plain or TLS, pooled per loop), TLS client
 * contexts, the client (one exchange, whatever the scheme; started and
 * collected later), and the registry of URL schemes that fetch and
 * notify.
 */
#ifndef COR_CLIENT_H
#define COR_CLIENT_H

#include "corModule.h"

/* ---- TLS clients ----------------------------------------------------------
 *
 * A client context holds what connections to servers share: the trust
 * (the system's CA store or a CA file), whether to verify, the ALPN list,
 * and a session cache per peer (serverName:port) for resumption. One
 * context serves every thread (the cache is locked, never across a wait).
 */

typedef struct {
    const char* caFile; /* NULL: the system's CA store */
    bool insecure;      /* skip verification (tests, explicit opt-in) */
    const char* alpn;   /* comma list, e.g. "http/1.1", or NULL */
} CorTlsClientOptions;

/* A client context (verification on unless o->insecure). Returns NULL
 * with the reason in why (a CA file that does not load, a bad ALPN list,
 * no memory). The caller frees it with corTlsClientFree, after every
 * transport made with it is closed. */
CorTlsClient* corTlsClientNew(const CorTlsClientOptions* o, char* why,
                              size_t whyLen);
void corTlsClientFree(CorTlsClient* ctx);

/*
 * Make t a TLS client transport over the connected non-blocking socket
 * fd, for serverName (sent as SNI unless it is an IP address; the
 * certificate is checked against it, name or IP); the session of an
 * earlier connection to the same serverName:port is offered for
 * resumption. No byte moves yet: corTransportTlsHandshake runs the
 * handshake. Returns 0 (t owns fd; close it with t->ops->close), or
 * -errno (fd stays the caller's).
 */
int corTransportTlsClient(CorTransport* t, int fd, CorTlsClient* ctx,
                          const char* serverName, unsigned port);

/*
 * Run the handshake of a client transport to its end, waiting through
 * corRestWaitFd (it yields in a coroutine and polls elsewhere; a stop
 * cancels it: -ECANCELED). Returns 0, or -errno with OpenSSL's reason in
 * why ("certificate has expired", "hostname mismatch", "self-signed
 * certificate"...): -ETIMEDOUT past timeoutMs (< 0: none), -EPROTO for a
 * verification or handshake failure, -ECONNRESET when the peer closed.
 * May yield.
 */
int corTransportTlsHandshake(CorTransport* t, int timeoutMs, char* why,
                             size_t whyLen);

typedef struct {
    const char* name; /* as `listen: - protocol:` names it */
    /* What it speaks, as TLS ALPN names it, a comma list ("http/1.1"), or
     * NULL: a TLS listener of this protocol offers it. */
    const char* alpn;
    /* Its name over TLS ("https"), or NULL: a listener so named is served
     * by this protocol, and must have tls. */
    const char* tlsName;
    /* On each loop's thread, with the generation's listeners of this
     * protocol: start serving. Returns 0 or -1 (logged). */
    int (*start)(CorModule* m, CorEvLoop* loop, unsigned loopIndex,
                 CorListener* const* listeners, unsigned count);
    /* On each loop's thread: stop accepting, let what is in flight finish,
     * answer the next request on each connection with a close. */
    void (*drain)(CorModule* m, CorEvLoop* loop, unsigned loopIndex);
    /* After the loop stopped (its waits cancelled, its coroutines ended):
     * answer what still holds a request as failed, close everything. */
    void (*stop)(CorModule* m, CorEvLoop* loop, unsigned loopIndex);
    /* Connections still open on this loop (a drain is over at 0). */
    unsigned (*connections)(CorModule* m, unsigned loopIndex);
} CorProtocol;

int corProtocolAdd(CorModule* m, const CorProtocol* protocol);

/* The generation's loops. */
unsigned corLoopCount(void);
CorEvLoop* corLoopAt(unsigned index);

/* The limits of the running configuration. */
typedef struct CorLimits {
    unsigned connections;
    size_t headerBytes;
    unsigned headerCount;
    size_t bodyBytes;
    uint64_t requestTimeoutMs;
    uint64_t bodyTimeoutMs;
    uint64_t keepaliveTimeoutMs;
    uint64_t sendTimeoutMs;
    /* A body read whole before its handler runs is held in memory up to
     * this, and spooled to an unlinked file past it (limits.body_memory),
     * in bodySpoolDir (NULL: $TMPDIR, else /tmp). */
    size_t bodyMemory;
    const char* bodySpoolDir;
    /* The most body any route takes (body_bytes, or a route's own larger
     * limits.body_bytes): what a protocol may read of a request before it
     * knows its route, and no more. */
    size_t bodyBytesMost;
} CorLimits;

const CorLimits* corLimits(void);
/* The limits of r: its route's (a route's `limits:` over the top level's)
 * once corRequestLimits found them, else the top level's; r NULL: the top
 * level's. Any thread. */
const CorLimits* corLimitsOf(const CorRequest* r);

/*
 * The limits of every protocol's requests, in one place: a protocol asks
 * as a request's head and then its body arrive, and corRequestServe asks
 * again before any handler runs (a request past them is answered with the
 * status, its handler never called). corLimitsHead measures r's method,
 * target and headers as HTTP/1.1 writes them: 0 within
 * limits.header_bytes and header_count, else the status to refuse r with,
 * 414 (the request line alone is longer than header_bytes) or 431.
 * corLimitsBody: 0 when a body of bytes (declared, or come so far) is
 * within r's limits.body_bytes (corLimitsOf: its route's, once a protocol
 * asked corRequestLimits; r NULL: the top level's), else 413.
 * corLimitsRequest: both, for r whole (r->bodyLen). Any thread.
 */
int corLimitsHead(const CorRequest* r);
int corLimitsBody(const CorRequest* r, uint64_t bytes);
int corLimitsRequest(const CorRequest* r);
/*
 * A request refused at a limit (status 408, 413, 414 or 431; another is
 * ignored), however its protocol says no on its wire: logged once
 * ("PROTOCOL: WHO: WHAT is past the limits (LIMIT): refused STATUS") and
 * counted in cor_requests_refused_total{protocol, status}. corLimitsText:
 * the answer's text ("413 Content Too Large\n"), NULL for another status.
 */
void corLimitsRefused(const char* protocol, const char* who, const char* what,
                      int status);
/* The same for request r, whose limits are its route's (corLimitsOf):
 * the log names them so. */
void corLimitsRefusedFor(const CorRequest* r, const char* protocol,
                         const char* who, const char* what, int status);
const char* corLimitsText(int status);
/*
 * Refuse r at a limit, status (0: none, r is within them): said and
 * counted as above, under the protocol r->version names ("COR/1": cor),
 * and r's answer set to the status and its text, for the protocol to send
 * as it sends any. Returns status. corRequestServe calls it with
 * corLimitsRequest(r); a protocol that refuses before then calls it too.
 */
int corLimitsAnswer(CorRequest* r, int status);

/*
 * Accepting, for a protocol module: from its start, on each loop's
 * thread, with the generation's listeners of the protocol. Loop 0 accepts
 * on a shared listener and deals its connections out to the loops in
 * turn; a `reuseport` listener is accepted on by every loop. open(index,
 * l, fd, peer) runs on the thread of loop index, which owns the
 * non-blocking socket fd from then on: it makes the connection's
 * transport (corListenerTransport) and serves it, and calls
 * corAcceptClosed() when it closes it, even at once (a connection counts
 * against limits.connections, all protocols together, from its accept to
 * then). Past limits.connections a connection is closed at accept and
 * counted; at the fd limit accepting pauses 100 ms, and is logged once a
 * second at most.
 */
typedef void (*CorAcceptFn)(unsigned loopIndex, const CorListener* l, int fd,
                            const struct sockaddr_storage* peer);
typedef struct CorAccept CorAccept;

/* Start accepting on this loop; returns the acceptor, or NULL (logged). */
CorAccept* corAcceptStart(CorEvLoop* loop, unsigned index,
                          CorListener* const* listeners, unsigned count,
                          CorAcceptFn open);
/* Stop accepting and free a (on its loop's thread); NULL is ignored. */
void corAcceptStop(CorAccept* a);
/* A connection that was accepted is closed. */
void corAcceptClosed(void);
/* A connection that no accept made (HTTP/3's, on UDP) counts against
 * limits.connections too: true when it may open (corAcceptClosed at its
 * close), false past the limit, the refusal counted in /metrics
 * (connections_refused_total) as an accept's is. Any thread. */
bool corAcceptAdmit(void);
/* A peer's address as text ("192.0.2.7", "2001:db8::1"), without its port,
 * into out (size bytes; 46 hold any): what r->remote says. */
void corPeerAddress(const struct sockaddr_storage* peer, char* out,
                    size_t size);
/* The same with its port, "192.0.2.7:5000" (54 bytes hold any), for
 * logs. */
void corPeerName(const struct sockaddr_storage* peer, char* out, size_t size);

/* ---- URLs -----------------------------------------------------------------
 */

/* scheme://[user[:password]@]host[:port][/path][?query] taken apart; the
 * pointers point into the URL parsed. */
typedef struct {
    char scheme[16];  /* lowercased: "http", "cor", "mqtts" */
    const char* user; /* NULL when none */
    size_t userLen;
    const char* password; /* NULL when none */
    size_t passwordLen;
    char host[256];        /* a name or an address, no brackets */
    unsigned port;         /* 0 when absent: the scheme's default */
    const char* authority; /* host[:port] as written */
    size_t authorityLen;
    /* path and query as written ("/p?q"); "/" when both are absent; a
     * query without a path is "?q" (its path is "/": RFC 3986 6.2.3). */
    const char* target;
    size_t targetLen;
} CorUrl;

/*
 * Take the URL s apart into u, the one way every client of cor does. A
 * "#fragment" is dropped; a host is a name, an IPv4 address or [an IPv6
 * one]. Returns 0, or -EINVAL with the reason in why: no "scheme://", a
 * bad host or port, a space, a control or a non-ASCII byte in the path or
 * query. Whether the scheme, a user or a password is right for it is the
 * client's to say.
 */
int corUrlParse(const char* s, CorUrl* u, char* why, size_t whyLen);
/* The part of corUrlParse that reads the path and query of s, which
 * start at end (past the authority), into u->target: for a caller that
 * has the rest of u already (CorClientTarget). */
int corUrlTargetParse(const char* s, const char* end, CorUrl* u, char* why,
                      size_t whyLen);

/* ---- Connections out: the one layer every client stands on ------------- */

/*
 * A connection to another server, plain or TLS, that the HTTP client, the
 * cor:// and MQTT clients and the notifications all read and write: no
 * protocol knows how it was opened or where it came from. Every wait on it
 * (the connect, a TLS handshake, a read, a write) is a corRestWaitFd, so
 * the same code yields in a coroutine and polls on a worker, and a stop or
 * the request's cancel ends it with ECANCELED.
 *
 * Ownership: a connection belongs to the code that opened it until it
 * gives it back with corConnRelease (reusable: it goes to the keep-alive
 * pool of the calling thread) or corConnClose; it is used by one piece of
 * work at a time and released on the thread that opened it. Each loop
 * keeps a pool of its own; the workers and every other thread share one,
 * under a lock that is never held across a wait. Idle connections are
 * kept per peer (host, port and TLS identity: TLS or not, the server name
 * and the CorTlsClient, which carries the CA and verification policy) up
 * to client.keepalive_per_peer, each for client.idle_timeout.
 */

/* Where to connect; the strings are read during corConnOpen only. */
typedef struct {
    const char* host; /* a name, an IPv4 or an IPv6 address (no
                         brackets) */
    unsigned port;    /* 1..65535 */
    bool tls;
    const char* serverName;  /* TLS: the name sent (SNI) and verified;
                                NULL: host */
    int connectTimeoutMs;    /* the name, the connect and the TLS
                                handshake, all addresses together (each
                                connect takes an equal share of what is
                                left, the last all of it); 0:
                                client.connect_timeout */
    CorTlsClient* tlsClient; /* TLS settings (CA, verification, ALPN);
                                NULL: the default, from client.ca_file */
    bool fresh;              /* a new connection, never a pooled one
                                (the retry of a request that a pooled
                                connection lost) */
} CorConnTarget;

/*
 * A connection to target: an idle one of this thread's pool for the same
 * peer, checked first that the peer has not closed it, or a new one. A
 * new one resolves the host (corResolve; numeric addresses and localhost
 * ask nobody), connects to each address in turn until one answers,
 * without blocking, and with TLS does the handshake, all within the
 * connect deadline. Returns the connection, which the caller owns; or
 * NULL with *errP set to -errno (-ECONNREFUSED, -ETIMEDOUT, -ECANCELED,
 * -EHOSTUNREACH, -ENOENT for an unknown name, -EPROTO for a TLS failure,
 * -EINVAL for a bad target) and why (when not NULL) set to a sentence that
 * names the peer and the reason ("connect to 127.0.0.1:1: Connection
 * refused", "TLS to a.test:443: certificate has expired"). errP may be
 * NULL. May yield.
 */
CorConn* corConnOpen(const CorConnTarget* target, int* errP, char* why,
                     size_t whyLen);

/*
 * Read up to len (> 0) bytes into buf (the caller's), waiting for them at
 * most timeoutMs (< 0: no deadline; 0: not at all). Returns the bytes
 * read (> 0), 0 when the peer closed, or -errno: -ETIMEDOUT, -ECANCELED,
 * -EAGAIN (timeoutMs 0 and nothing there), -ECONNRESET, -EPROTO (TLS),
 * -EINVAL (len 0). Bytes a TLS record already brought in are returned
 * without waiting on the socket. May yield.
 */
ssize_t corConnRead(CorConn* c, void* buf, size_t len, int timeoutMs);

/*
 * Write all len bytes of buf (the caller's, read during the call only),
 * waiting for room (a full send buffer) as needed, all within timeoutMs
 * (< 0: no deadline; 0: what the socket takes at once). Returns 0, or
 * -errno: -ETIMEDOUT, -ECANCELED, -EPIPE or -ECONNRESET (the peer is
 * gone). After a failure part of buf may have gone out. May yield.
 */
int corConnWriteAll(CorConn* c, const void* buf, size_t len, int timeoutMs);

/* The TLS client of the default trust (client.ca_file's, or the
 * system's store) that offers the ALPN list alpn ("h2"): a protocol that
 * must know what the server chose (corTransportTlsAlpn) connects with it.
 * NULL alpn: the one a target without a tlsClient gets. One context per
 * list (at most four lists), made at its first use and kept until the
 * next setup; NULL with why when it cannot be made. Any thread. */
CorTlsClient* corConnTlsDefault(const char* alpn, char* why, size_t whyLen);

/* Whether c came from the pool rather than a new connect: a request that
 * failed on it before any byte of the answer came may be sent once more
 * on a new connection (the peer may have closed it meanwhile) when
 * nothing of it was written, or when repeating it is harmless (an
 * idempotent method). */
bool corConnReused(const CorConn* c);

/* The bytes written on c since it was opened or taken from the pool
 * (whatever a failed write got out too): 0 proves the peer saw nothing of
 * what this user sent, so a request may go again on another connection. */
size_t corConnWritten(const CorConn* c);

/* The connection's transport and socket, for a protocol client that
 * waits itself (corRestWaitFd on the fd); owned by c. */
CorTransport* corConnTransport(CorConn* c);

/* "host:port", for messages; owned by c. */
const char* corConnPeer(const CorConn* c);

/*
 * Done with c, which is fit to carry another exchange (its last answer
 * was read to the end): it goes back to the calling thread's pool. It is
 * closed instead when a read or write on it failed, timed out or saw the
 * peer's end, when the pool of that peer is full (the oldest goes), when
 * pooling is off, or when it is released on another thread than the one
 * that opened it. c is gone after the call.
 */
void corConnRelease(CorConn* c);

/* Done with c, not reusable (an answer not read to its end, a protocol
 * error): closed at once. c is gone after the call. */
void corConnClose(CorConn* c);

/* ---- The client: one exchange, whatever the scheme -----------------------
 *
 * A request (a method, a URL of any registered scheme, headers and a
 * body) and its answer (a status, headers and a body), made in a
 * coroutine and on a worker alike. The core knows no protocol: it hands
 * the URL to the fetch of its scheme (corSchemeAdd below); http and https
 * are the HTTP floor's (http/), cor and cors modules/cor's. An answer
 * too large to hold is read as it comes with corClientOpen (below).
 *
 *     CorClientRequest q = { .url = "http://10.0.0.7:8080/price",
 *                            .totalTimeoutMs = 2000 };
 *     CorClientResponse res;
 *
 *     if (corClientFetch(&q, &res) == 0 && res.status == 200) {
 *         corRespond(r, 200, "application/json", res.body, res.bodyLen);
 *     } else {
 *         corRespondf(r, 502, "text/plain", "%s\n", res.error);
 *     }
 *     corClientResponseFree(&res);
 *
 * Several at once: corClientStart each, then corClientWait each; they run
 * meanwhile, so a fan-out takes as long as its slowest answer.
 */

/* The default limit of a response body. */
#define COR_CLIENT_BODY_MAX ((size_t)8 << 20)

/* A server's URL taken apart once (corClientTargetMake, below). */
typedef struct CorClientTarget CorClientTarget;

/* An exchange to make. The caller's; read during corClientFetch, and
 * copied by corClientStart. */
typedef struct CorClientRequest {
    const char* method; /* NULL: GET */
    /* scheme://host[:port][/path][?query] of a scheme that fetches; host
     * may be a name, an IPv4 address or [an IPv6 one]. */
    const char* url;
    /* Sent after Host, as they are; a Host here replaces the URL's.
     * Content-Length and Transfer-Encoding are the client's (refused). */
    const CorHeader* headers;
    unsigned headerCount;
    const void* body; /* sent with a Content-Length */
    size_t bodyLen;
    /* Deadlines, 0 for the default: connect (the name, the connect and a
     * TLS handshake; default client.connect_timeout), first byte (from
     * the request sent to the first byte of the answer; default none),
     * total (the whole exchange, retry included; default none), read
     * (every wait for the next byte once the first came: in the head, a
     * 1xx's included, and in corClientFetch's body; a streamed read
     * takes its own; default the first byte's). */
    int connectTimeoutMs;
    int firstByteTimeoutMs;
    int totalTimeoutMs;
    int readTimeoutMs;
    size_t maxBodyBytes;     /* 0: COR_CLIENT_BODY_MAX */
    CorTlsClient* tlsClient; /* NULL: the default (client.ca_file) */
    /* http:// and https:// only: over HTTP/2 (h2 chosen by ALPN on
     * https, prior knowledge on http), each exchange a stream on the one
     * connection its loop keeps to the peer (docs/http2.md). */
    bool http2;
    /* Not NULL: the body is this request's (the one the calling handler
     * serves), passed on as it comes (a proxy of a stream: gRPC;
     * CorHandler.streamBody), and body and bodyLen are unused. Over
     * HTTP/2 each piece goes up as the handler's request gets it, with no
     * Content-Length, while the answer is read; over HTTP/1.1 each piece
     * goes as a chunk (Transfer-Encoding: chunked) as it is got, within
     * readTimeoutMs between pieces, and the answer is read after the last
     * one; a module's scheme (cor://) gets it whole, read first. A
     * request is not sent again once a byte of it was taken (a refused
     * stream, a pooled connection lost). From r's handler only. */
    CorRequest* bodyFrom;
    /* NULL, or the server url starts with, taken apart already: its
     * scheme is not looked up again, nor (http, https) its host and port
     * parsed again; a url that does not start with it is read whole. */
    const CorClientTarget* target;
} CorClientRequest;

/*
 * A body passed on as it comes (bodyFrom), as a scheme's client takes it
 * from a request that is still reading it (corRequestBody.c,
 * corRequestBodyTake.c). Public on purpose: the HTTP/2 client (http/,
 * above the core) feeds a stream's DATA from it without waiting, and a
 * module's scheme may do the same. Take: what came, without waiting: a
 * count, 0 at the end, -EAGAIN for nothing yet, or the failure
 * corRequestBodyRead would say (a body that came whole is taken out of
 * r->body). Watch: fn(arg) runs on r's loop after each piece and at the
 * end (NULL fn: no more), set and cleared on r's loop only. WakeFd: an
 * eventfd (r's) that turns readable at such news, for a taker on another
 * thread (it drains it); -EINVAL for a body that came whole, or -errno.
 */
typedef void (*CorBodyWatchFn)(void* arg);

ssize_t corRequestBodyTake(CorRequest* r, void* buf, size_t len);
void corRequestBodyWatch(CorRequest* r, CorBodyWatchFn fn, void* arg);
int corRequestBodyWakeFd(CorRequest* r);

/* Wait for events on fd until deadline (corEvClockMs time, 0: none), as
 * corRestWaitFd waits for a timeout: public for a client that keeps one
 * absolute deadline across many waits (the HTTP/2 client's connection).
 * Returns 0 when fd is ready (or failed: the next call on it says how),
 * -ETIMEDOUT, or the wait's -errno (-ECANCELED). May yield. */
int corDeadlineWaitFd(int fd, short events, uint64_t deadline);

/* What came back. Owned by the caller, who frees it with
 * corClientResponseFree whatever the result of the call that set it. */
typedef struct CorClientResponse {
    int status;         /* the final status, 0 on failure */
    CorHeader* headers; /* of the final answer (not of a 1xx) */
    unsigned headerCount;
    char* body; /* NUL-terminated (not counted) */
    size_t bodyLen;
    bool reused;     /* answered on a pooled connection */
    bool retried;    /* sent again on a new connection */
    bool sent;       /* the request went to a peer (whole or in
                        part): a failure after it may have
                        been acted on */
    char error[256]; /* on failure: what and where */
    char* head;      /* the client's: what headers point to */
    /* The fields after the body (HTTP/2 trailers: gRPC's grpc-status),
     * set once the body was read to its end; they point into trailerHead,
     * the client's. */
    CorHeader* trailers;
    unsigned trailerCount;
    char* trailerHead;
    /* The client's: one block that headers and body are in when not NULL
     * (a cor:// answer's, handed on as it was decoded), given back whole
     * (corChunkGive, of storeSize bytes). */
    void* store;
    size_t storeSize;
} CorClientResponse;

/*
 * Make one exchange through the fetch of the URL's scheme (what http and
 * https do is in the HTTP floor's corHttpClient.h, cor:// in docs/cor.md):
 * a connection to the URL's peer from the pool or a new one, the request
 * sent, the answer read whole; whether a request is sent once more on a
 * new connection (res->retried) is the scheme's rule.
 *
 * Returns 0 with res set (any status is an answer), or -errno with
 * res->error saying why: -EINVAL (a bad URL, a scheme no client takes, a
 * bad method or header), -ETIMEDOUT (a deadline; the error names which),
 * -ECANCELED (the request was cancelled, or a stop), -ECONNREFUSED and
 * the other errors of corConnOpen, -ECONNRESET (the peer closed or reset
 * before the end of the answer), -EPROTO (a malformed answer, or TLS),
 * -EFBIG (a body over maxBodyBytes), -ENOMEM. May yield.
 */
int corClientFetch(const CorClientRequest* req, CorClientResponse* res);

/* The first response header named name (case-insensitive), or NULL; it
 * lives as long as res. */
const CorHeader* corClientHeader(const CorClientResponse* res,
                                 const char* name);

void corClientResponseFree(CorClientResponse* res);

/*
 * An exchange started and collected later. Owned by the code that started
 * it until it is collected (corClientWait) or cancelled (corClientCancel),
 * exactly once; one that the serving request left behind is cancelled
 * when the request's handler returns, and a request cancelled (its client
 * left, its deadline passed) cancels every exchange it started.
 *
 * Where it runs: started in a coroutine of a loop, as a coroutine of its
 * own on that loop; anywhere else (a worker, blocking mode, past the
 * coroutine cap), on a thread of its own, which waits in poll() through
 * the same connection layer. Either way it runs at once, beside the code
 * that started it.
 */
typedef struct CorClientCall CorClientCall;

/* Start an exchange (req and all it points to are copied). Returns the
 * call, or NULL with *errP (may be NULL) set to -errno: -EINVAL (a bad
 * URL, method or header), -ECANCELED (the calling request is cancelled),
 * -ENOMEM. */
CorClientCall* corClientStart(const CorClientRequest* req, int* errP);

/* Wait for call's end and collect it: as corClientFetch, whose result
 * and res it gives. A wait cancelled (the calling request's cancel, a
 * stop) cancels the exchange and returns -ECANCELED. call is gone after.
 * May yield. */
int corClientWait(CorClientCall* call, CorClientResponse* res);

/* Give up call: its waits end with ECANCELED and it frees itself once it
 * has stopped. call is gone after. Does not wait. */
void corClientCancel(CorClientCall* call);

/* ---- The client, streamed: the answer's head first, its body as it comes
 *
 * For an answer too large to hold, or one passed on as it comes (forward,
 * a cache): corClientOpen sends the request and reads the answer's head
 * (res's status and headers), corClientRead gives its body a piece at a
 * time, corClientClose ends it. One call for every scheme, as H2O's
 * httpclient is one front over its HTTP/1, 2 and 3 clients: a scheme
 * that registers stream operations (CorClientOps: http and https, over
 * HTTP/1.1 and HTTP/2; cor and cors, as a streamed answer's DATA frames)
 * is read off its connection as the bytes come; one with a fetch only is
 * made whole at the open, and its reads give res->body out.
 *
 *     CorClientStream* x;
 *     char buf[16384];
 *     ssize_t n;
 *
 *     if (corClientOpen(&q, &res, &x) == 0) {       status, headers
 *         while ((n = corClientRead(x, buf, sizeof(buf), 30000)) > 0) {
 *             pass(buf, n);
 *         }
 *         corClientClose(x);      (its connection pooled only when n was 0)
 *     }
 *     corClientResponseFree(&res);
 *
 * Owned by the caller from corClientOpen to corClientClose, used by one
 * piece of work at a time on the thread that opened it. While it is open
 * it writes its errors into the res it was opened with, which must
 * outlive it.
 */
typedef struct CorClientStream CorClientStream;

/*
 * Send req and read the head of its answer, as corClientFetch does (the
 * same retry rule: a retry happens before any byte came), but not its
 * body. Returns 0 with res's status and headers set (res->body NULL, but
 * where the whole body came with the head: a scheme without stream
 * operations, or a cor:// answer sent in one frame, whose reads then give
 * res->body out) and *xP the open exchange; or -errno with res->error
 * said and *xP NULL (the errors of corClientFetch). req is read during
 * the call only. May yield.
 */
int corClientOpen(const CorClientRequest* req, CorClientResponse* res,
                  CorClientStream** xP);

/*
 * Read the next bytes of x's body (decoded: a transfer framing removed)
 * into buf, waiting at most timeoutMs (< 0: no deadline) for a byte,
 * within the request's total deadline. Returns the bytes read (> 0), 0 at
 * the body's end (a HEAD, 204 and 304 have none; trailers, when any, are
 * in res then), or -errno with res->error said: -ETIMEDOUT, -ECANCELED,
 * -ECONNRESET (the peer closed or reset before the body's end), -EPROTO
 * (bad framing, TLS), -EINVAL (len 0). A failure stays: every later read
 * returns it. May yield.
 */
ssize_t corClientRead(CorClientStream* x, void* buf, size_t len, int timeoutMs);

/* Whether x's body was read to its end. */
bool corClientDone(const CorClientStream* x);

/*
 * A request whose headers ask to switch protocols (Connection: upgrade,
 * with an Upgrade field; HTTP/1.1 only) takes a 101 as its answer, with
 * no body, and its connection is then the new protocol's: take it with
 * corClientUpgraded. Returns the connection (the caller's from here:
 * corConnClose it), with the bytes that came past the 101's head in
 * *restP and *restLenP (res's, which must outlive their use); NULL when
 * x's answer is not such a 101, or its scheme switches nothing. x must
 * still be closed.
 */
CorConn* corClientUpgraded(CorClientStream* x, const void** restP,
                           size_t* restLenP);

/* Done with x (NULL: nothing): its connection goes back to the pool when
 * the body was read to its end and the scheme allows reuse, and is closed
 * otherwise (an answer left half read cannot carry another exchange). x
 * is gone after; res stays the caller's. */
void corClientClose(CorClientStream* x);

/* Whether method (NULL: GET) is idempotent (RFC 9110 section 9.2.2: GET,
 * HEAD, OPTIONS, TRACE, PUT, DELETE): sent twice, it does what it does
 * once, so a request the peer may have seen can be sent again. Every
 * scheme's retry and forward's next server ask it. */
bool corClientIdempotent(const char* method);

/*
 * What a scheme registers to be read as it comes (CorScheme.stream): the
 * core allocates size bytes of state for each exchange (aligned for any
 * type, uninitialised) and hands them to every call. open, read, done,
 * upgraded and close do what corClientOpen, corClientRead,
 * corClientDone, corClientUpgraded (NULL: the scheme switches nothing)
 * and corClientClose say; close is called once for each open that
 * returned 0, never after one that failed.
 */
typedef struct {
    size_t size;
    int (*open)(void* x, const CorClientRequest* req, CorClientResponse* res);
    ssize_t (*read)(void* x, void* buf, size_t len, int timeoutMs);
    bool (*done)(const void* x);
    CorConn* (*upgraded)(void* x, const void** restP, size_t* restLenP);
    void (*close)(void* x);
} CorClientOps;

/* The seed's names for the same calls, as its cor:// code reads:
 * corRestCorStart(&(CorClientRequest){ .url = "cor://b:7070/x" }, &err)
 * starts a call now, corRestCorWait collects it. One client takes every
 * scheme, so they are the calls above. */
static inline CorClientCall*
corRestCorStart(const CorClientRequest* req, int* errP)
{
    return corClientStart(req, errP);
}

static inline int
corRestCorWait(CorClientCall* call, CorClientResponse* res)
{
    return corClientWait(call, res);
}

/* ---- URL schemes: one registry for every client ------------------------- */

/*
 * A URL scheme and what takes its URLs: one exchange of the client
 * (fetch: corClientFetch and corClientStart take its URLs, and so
 * the forward module), notifications (send), or both. http and https are
 * the HTTP floor's (http/); modules add cor, cors, mqtt, mqtts.
 *
 * fetch makes one exchange as corClientFetch says (the same request,
 * answer and errors). send is straight-line code that returns 0 when the
 * receiver acknowledged n, or -errno with a sentence in why (the URL is
 * logged beside it: why need not repeat it); n and what it points to live
 * until send returns, n->timeoutMs is set (the default filled in). Both
 * wait through corRestWaitFd (corConnOpen, corConnRead...: they yield in
 * a coroutine and poll on a thread; a stop ends their waits with
 * ECANCELED). May yield.
 */
typedef struct {
    const char* scheme; /* lowercase: a letter, then letters,
                           digits, + - .; at most 15 */
    int (*send)(CorModule* m, const CorNotification* n, char* why,
                size_t whyLen);
    /* NULL, or whether url is one send could take: 0, or -EINVAL with
     * why, which corNotify logs and returns before anything starts. */
    int (*check)(const char* url, char* why, size_t whyLen);
    /* NULL, or one exchange: the client takes the scheme's URLs. */
    int (*fetch)(const CorClientRequest* req, CorClientResponse* res);
    /* NULL, or on each loop's thread after the loop stopped (its
     * coroutines ended): close what the scheme's client keeps on that
     * loop (connections shared by its exchanges). */
    void (*loopExit)(void);
    /* NULL, or its exchanges read as they come (corClientOpen): without
     * them an exchange is fetched whole and read out of memory. */
    const CorClientOps* stream;
} CorScheme;

/* A send for a scheme that fetches: the notification n as one exchange
 * (corClientFetch) with its method, headers (Content-Type among them)
 * and body, acknowledged by a 2xx. http, https, cor and cors send so. */
int corClientNotify(CorModule* m, const CorNotification* n, char* why,
                    size_t whyLen);

/* Register a scheme (copied), from a module's init. Returns 0, or -1
 * after a module error (a bad or taken name, neither fetch nor send, too
 * many schemes, called after init). */
int corSchemeAdd(CorModule* m, const CorScheme* s);

/* The scheme registered as name (lowercase), or of url ("scheme://...",
 * any case); NULL when none. */
const CorScheme* corSchemeFind(const char* name);
const CorScheme* corSchemeOf(const char* url);

/*
 * A server's URL (scheme://host[:port], no path) taken apart once, for a
 * caller that sends it request after request (forward: one a server, at
 * configuration): a request that names it (CorClientRequest.target) skips
 * the parse and the scheme's lookup that its url would cost each time.
 */
struct CorClientTarget {
    const CorScheme* scheme; /* one that fetches */
    CorUrl url;              /* its parts, pointing into text */
    size_t len;              /* of text: what a request's url starts with */
    char text[];
};

/* The target of url, or NULL with why said (no URL, a path, or no scheme
 * that fetches: register it first). corClientTargetFree frees it. */
CorClientTarget* corClientTargetMake(const char* url, char* why, size_t whyLen);
void corClientTargetFree(CorClientTarget* t);
/* q's url taken apart as corUrlParse does: from its target's parts when
 * it starts with them and its authority ends there ("http://a:8" is no
 * start of "http://a:80/"), only the path and query that follow read;
 * else whole. What a scheme's client calls instead of corUrlParse. */
int corClientTargetUrl(const CorClientRequest* q, CorUrl* u, char* why,
                       size_t whyLen);

#endif /* COR_CLIENT_H */
