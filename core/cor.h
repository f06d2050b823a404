/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor.h: the whole module API. A module is a shared object that exports one
 * descriptor, made with COR_MODULE(name, .init = ...); the core loads it
 * with dlopen, checks the ABI it was built for, and calls its hooks:
 *
 *     static void
 *     helloServe(CorRequest* r)
 *     {
 *         corRespond(r, 200, "text/plain", greeting, strlen(greeting));
 *     }
 *
 *     static int
 *     helloInit(CorModule* m, const CorConf* conf)
 *     {
 *         greeting = corConfString(conf, "greeting", "hello",
 *                                  corModuleErrors(m));
 *         return corHandlerAdd(m, &(CorHandler){ .name = "hello",
 *                                                .serve = helloServe });
 *     }
 *
 *     COR_MODULE(hello, .init = helloInit);
 *
 * Requests are protocol-neutral: the same handler serves HTTP and cor://.
 * Where a handler runs is said when it is registered (CorRun) and, per
 * request, by a CorRestCoroutineHook; docs/modules.md has the whole story.
 */
#ifndef COR_H
#define COR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "corConf.h"
#include "corEv.h"

/* Bumped whenever a struct or a signature of this header, or of one it
 * includes, changes. */
#define COR_ABI_VERSION 12
#define COR_VERSION "0.1.0"

typedef struct CorModule CorModule;
typedef struct CorRequest CorRequest;

/* ---- Modules ------------------------------------------------------------- */

/* What a module exports (as the symbol corModuleDescriptor). */
typedef struct {
    uint32_t abiVersion;        /* COR_ABI_VERSION when it was built */
    uint32_t descriptorSize;    /* sizeof(CorModuleDescriptor) then */
    uint32_t requestSize;       /* sizeof(CorRequest) then */
    uint32_t pointerSize;
    const char* corVersion;     /* COR_VERSION then */
    const char* compiler;
    const char* name;
    /* Once per generation, with the module's own YAML mapping. Registers
     * handlers and protocols. Returns 0, or -1 after corModuleError(). */
    int (*init)(CorModule* m, const CorConf* conf);
    /* On each loop's thread before it serves, and after it stopped. */
    int (*loopInit)(CorModule* m, CorEvLoop* loop, unsigned index);
    void (*loopExit)(CorModule* m, CorEvLoop* loop, unsigned index);
    /* When the generation ends. */
    void (*exit)(CorModule* m);
} CorModuleDescriptor;

#define COR_MODULE(moduleName, ...)                                        \
    __attribute__((visibility("default")))                                 \
    const CorModuleDescriptor corModuleDescriptor = {                      \
        .abiVersion = COR_ABI_VERSION,                                     \
        .descriptorSize = sizeof(CorModuleDescriptor),                     \
        .requestSize = sizeof(CorRequest),                                 \
        .pointerSize = sizeof(void*),                                      \
        .corVersion = COR_VERSION,                                         \
        .compiler = __VERSION__,                                           \
        .name = #moduleName,                                               \
        __VA_ARGS__                                                        \
    }

/* The module's name, its private data pointer, and where its init reports
 * configuration errors (file:line:column is taken from the node). */
const char* corModuleName(const CorModule* m);
void corModuleSetData(CorModule* m, void* data);
void* corModuleData(const CorModule* m);
CorConfErrors* corModuleErrors(CorModule* m);
void corModuleError(CorModule* m, const CorConf* at, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- Handlers: where a request runs -------------------------------------- */

typedef enum {
    COR_RUN_INLINE,     /* never waits: on the loop that read it */
    COR_RUN_COROUTINE,  /* waits through corRestWaitFd: a coroutine */
    COR_RUN_WORKER      /* blocks in a library that knows nothing of the
                           loop: a worker thread */
} CorRun;

typedef void (*CorHandlerFn)(CorRequest* r);

/* Per request: may it run as a coroutine (true) or must it go to a worker
 * (false)? Given, it decides for COR_RUN_COROUTINE and COR_RUN_WORKER
 * handlers alike. Runs on the loop: it must not wait. */
typedef bool (*CorRestCoroutineHook)(const CorRequest* r);
/* The same for the post-response phase. */
typedef bool (*CorRestFinishCoroutineHook)(const CorRequest* r);

typedef struct {
    const char* name;               /* what routes name */
    CorHandlerFn serve;
    CorRun run;
    CorRestCoroutineHook coroutineHook;
    /* Runs after the response is out (notifications after a write); it
     * runs inline unless finishRun says it may wait. */
    CorHandlerFn finish;
    CorRun finishRun;
    CorRestFinishCoroutineHook finishCoroutineHook;
    /* A deadline for serve, 0 for none (a route's `timeout` overrides
     * it): past it the handler's waits fail with ECANCELED and the
     * client is answered 504, unless the handler answered first. An
     * inline handler has none (it never waits). */
    uint64_t timeoutMs;
} CorHandler;

/* Register a handler (copied). Returns 0, or -1 after a module error
 * (a duplicate name). */
int corHandlerAdd(CorModule* m, const CorHandler* handler);

/* The text of /metrics being written; the core's. */
typedef struct CorMetricsOut CorMetricsOut;

/* Writes a module's lines into out (corMetricsPrintf); arg is the one
 * given at its registration. */
typedef void (*CorMetricsSourceFn)(CorMetricsOut* out, void* arg);

/*
 * Register a source of lines for /metrics, from the module's init (arg
 * stays the module's and must live until its exit). emit runs each time
 * /metrics is served, after the core's own lines, on whatever thread
 * serves it (a loop, a coroutine, a worker), maybe on several at once:
 * it reads what it counts with atomics, or under a lock it never holds
 * across a wait, and does not yield. Returns 0, or -1 after a module
 * error (no memory).
 */
int corMetricsSourceAdd(CorModule* m, CorMetricsSourceFn emit, void* arg);

/* Append to out, as printf: whole lines of the Prometheus text format
 * ("# HELP", "# TYPE", "name{label=\"v\"} 1"), each ending in \n. */
void corMetricsPrintf(CorMetricsOut* out, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- Requests ------------------------------------------------------------ */

typedef struct {
    const char* name;
    size_t nameLen;
    const char* value;
    size_t valueLen;
} CorHeader;

/* Where a request ran, for logs and counters. */
typedef enum {
    COR_RAN_INLINE,
    COR_RAN_COROUTINE,
    COR_RAN_WORKER
} CorRan;

typedef struct CorArenaChunk CorArenaChunk;
typedef struct CorStream CorStream;
typedef struct CorUpgraded CorUpgraded;
typedef struct CorTransport CorTransport;
typedef struct CorProtocolOps CorProtocolOps;
typedef struct CorHandlerEntry CorHandlerEntry;

/*
 * A request. The protocol module that read it owns it (embedded in its own
 * per-request record) and keeps it alive until the core calls its done()
 * and, after the post-response phase, its release(). Everything the request
 * points to stays valid as long.
 */
struct CorRequest {
    /* The input, set by the protocol. */
    const char* method;
    size_t methodLen;
    const char* path;           /* percent-decoded */
    size_t pathLen;
    const char* query;          /* raw, NULL when none */
    size_t queryLen;
    const CorHeader* headers;
    unsigned headerCount;
    const char* body;
    size_t bodyLen;
    bool head;                  /* HEAD: the protocol sends no body */
    const char* remote;         /* the client's address ("192.0.2.7",
                                   "2001:db8::7"), or NULL when unknown */
    bool secure;                /* it came over TLS */
    /* For the access log: the target as the client wrote it (NULL: the
     * path and query say it), and how it came ("HTTP/1.1", "COR/1"). */
    const char* target;
    size_t targetLen;
    const char* version;
    const char* rawPath;        /* the path as the client encoded it, only
                                   its dot segments removed (what a proxy
                                   passes on: "%2F" stays), or NULL */
    size_t rawPathLen;

    /* The response, set by the handler through corRespond*(). */
    int status;
    const char* contentType;
    const void* responseBody;
    size_t responseLen;
    CorHeader* responseHeaders;
    unsigned responseHeaderCount;
    bool responded;
    int fileFd;                 /* a file body (corRespondFile), or -1 */
    int64_t fileOffset;
    CorStream* stream;          /* a streamed body, or NULL */
    /* What went out, set by the protocol by corRequestSent: the bytes of
     * the body (not of the head), and whether the answer was cut (its
     * stream failed, its client left: corRequestCancel sets it). */
    uint64_t bodySent;
    bool cut;

    /* The core's, between dispatch and release. */
    CorRan ran;
    const CorHandlerEntry* handler;
    const CorProtocolOps* ops;
    /* The protocol's own (its connection): the core never reads it, only
     * hands r back through ops. What it points to may be gone once the
     * connection closed: the protocol clears it then, or keeps it alive
     * until release. */
    void* protocolData;
    CorEvLoop* loop;
    CorArenaChunk* arena;
    CorEvTask task;             /* to a worker, and back to the loop */
    uint64_t startMs;
    unsigned responseHeaderCap;
    bool inFinish;
    bool serving;               /* the handler runs: it can be cancelled */
    CorRestCancel cancel;       /* ends the running phase's waits */
    /* What the running phase started beside itself and must not outlive
     * it (a client call not collected): cancelled with it, given up at
     * its end (corRequestCleanupAdd, corCoreInt.h). */
    struct CorRequestCleanup* cleanups;
    CorEvTimer deadline;        /* the handler's timeout, when it has one */
    atomic_uint answer;         /* with a deadline: who answered first */
    CorUpgraded* upgrade;       /* corRequestUpgrade was called */
    /* The notifications r started that have not ended, plus one until
     * its last phase ends: it is released at 0. */
    atomic_uint holds;
};

/* A request header (case-insensitive), NULL when absent. */
const CorHeader* corRequestHeader(const CorRequest* r, const char* name);

/* Whether h's value, a comma list (Connection, Upgrade), holds the token
 * token[0..tokenLen), compared without case. */
bool corHeaderListHas(const CorHeader* h, const char* token,
                      size_t tokenLen);

/* The value of a query parameter, percent-decoded into the request's
 * arena; NULL when absent. */
const char* corRequestQuery(CorRequest* r, const char* key);

/* Memory that lives as long as the request (the arena is freed with it). */
void* corRequestAlloc(CorRequest* r, size_t size);

/* The request the calling code serves: right in a coroutine (it follows
 * the coroutine across waits), on a worker and inline. */
CorRequest* corRequestCurrent(void);

/*
 * The client that sent r is gone (it closed or reset the connection): end
 * the waits of r's handler. Its wait through corRestWaitFd returns -1
 * with errno ECANCELED now, and every later one at once, so the handler
 * runs its failure path and returns early; on a worker thread its poll()
 * ends too. Call it on r's loop, between corRequestServe and ops->release.
 * It does nothing once the handler has returned, in the post-response
 * phase (which is not the client's: its notifications still go out), and
 * for an inline handler (which never waits); calling it twice is calling
 * it once. The core then goes on as for any request: ops->done with what
 * the handler answered (which nobody reads), ops->release after the
 * post-response phase. Counted in /metrics.
 */
void corRequestCancel(CorRequest* r);

/* Whether r's handler was cancelled (its client left, or its deadline
 * passed): a handler that computes for long without waiting can look at
 * it between steps and stop early. From any thread. */
bool corRequestCancelled(const CorRequest* r);

/* The handler and the route name the request was routed to. */
const char* corRequestHandlerName(const CorRequest* r);

/* Respond with a body from memory (copied unless it outlives the request:
 * corRespondStatic). A second response to one request is ignored. */
void corRespond(CorRequest* r, int status, const char* contentType,
                const void* body, size_t len);
void corRespondStatic(CorRequest* r, int status, const char* contentType,
                      const void* body, size_t len);
void corRespondf(CorRequest* r, int status, const char* contentType,
                 const char* fmt, ...) __attribute__((format(printf, 4, 5)));
/* A response header, before corRespond (both strings are copied).
 * Returns 0; -EINVAL, refused and logged, when name is not a token (RFC
 * 9110: letters, digits and !#$%&'*+-.^_`|~) or value holds a control
 * character other than tab (a CR or LF would inject headers); or -ENOMEM. */
int corResponseHeader(CorRequest* r, const char* name, const char* value);

/* Respond with len bytes of an open file from offset, sent with
 * sendfile(). The core owns fd from here and closes it. */
void corRespondFile(CorRequest* r, int status, const char* contentType,
                    int fd, int64_t offset, size_t len);

/*
 * A streamed response, for a body not known in advance (a proxy passing
 * an upstream's answer on): set the response headers, start it in the
 * handler, write pieces from any thread (each is copied; HTTP/1.1 sends
 * it as a chunk), and end it from any thread; the handler may return
 * before the end (the request lives until it). Start returns 0 or -1
 * (already answered, or no memory). The head goes out at once, not when
 * the handler returns, and the pieces follow it as they are written.
 *
 * What a stream holds unsent, in the core and in the protocol, is bounded
 * by COR_STREAM_QUEUE_MAX, so a body of any size passes in that much
 * memory: a writer waits for room while the client reads slowly (a
 * worker or a thread of its own blocks; a coroutine of the request's
 * loop yields until the loop drained enough). Only code that cannot wait
 * (an inline handler, on the loop's own stack) gets -EAGAIN: write from
 * elsewhere. A write returns 0, -EAGAIN as said, -EPIPE once the client
 * is gone or the handler was cancelled (stop producing), -ENOMEM. Always
 * end a stream that was started: the request ends with it. May yield.
 */
#define COR_STREAM_QUEUE_MAX ((size_t)256 * 1024)

int corResponseStreamStart(CorRequest* r, int status,
                           const char* contentType);
int corResponseStreamWrite(CorRequest* r, const void* data, size_t len);
void corResponseStreamEnd(CorRequest* r);
/* End a stream as failed (its producer lost its source mid-body): what
 * was written goes out, then the client is told the body is incomplete
 * (HTTP/1.1 closes the connection without the last chunk), never that
 * it is whole. Instead of corResponseStreamEnd. */
void corResponseStreamAbort(CorRequest* r);

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
ssize_t corUpgradedRead(CorUpgraded* u, void* buf, size_t len,
                        int timeoutMs);

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

/* ---- Protocols: what protocol modules (HTTP, cor://) build on ---------- */

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
void corRequestUpgraded(CorRequest* r, const CorTransport* t,
                        const void* rest, size_t restLen,
                        const void* unsent, size_t unsentLen);

/* A listening socket the master opened for a protocol. */
typedef struct CorListener CorListener;

int corListenerFd(const CorListener* l, unsigned loopIndex);
const char* corListenerAddress(const CorListener* l);
bool corListenerReusePort(const CorListener* l);

/*
 * A transport: how a connection's bytes move. Protocol modules read and
 * write their connections only through one, so that TLS slots in under a
 * protocol without the protocol knowing (the later https listener gives
 * its connections a transport over OpenSSL). Calls never block: -1 with
 * errno EAGAIN means no bytes or no room now; the caller waits for the
 * socket's next edge and calls again. Owned by its connection; fd stays
 * the socket, for the loop and for socket options.
 */
typedef struct CorTransport CorTransport;

typedef struct {
    /* As read(2): bytes read, 0 at the peer's end, or -1 with errno. A
     * short count means nothing more is ready: a transport that decodes
     * in records (TLS) goes on filling buf until its socket says EAGAIN,
     * since no further edge comes for bytes it already took in. */
    ssize_t (*recv)(CorTransport* t, void* buf, size_t len);
    /* As write(2). */
    ssize_t (*send)(CorTransport* t, const void* buf, size_t len);
    /* As sendfile(2): up to len bytes of fileFd from *offset, which moves
     * on; 0 when the file ended early. */
    ssize_t (*sendFile)(CorTransport* t, int fileFd, off_t* offset,
                        size_t len);
    /* Release what the transport holds and close the socket. */
    void (*close)(CorTransport* t);
} CorTransportOps;

struct CorTransport {
    const CorTransportOps* ops;
    int fd;
    void* data;         /* the transport's own per-connection state */
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

/* After a TLS handshake: whether the session was resumed, and the ALPN
 * protocol chosen (NULL if none, or plain). */
bool corTransportTlsResumed(const CorTransport* t);
const char* corTransportTlsAlpn(const CorTransport* t);

/* ---- TLS clients ----------------------------------------------------------
 *
 * A client context holds what connections to servers share: the trust
 * (the system's CA store or a CA file), whether to verify, the ALPN list,
 * and a session cache per peer (serverName:port) for resumption. One
 * context serves every thread (the cache is locked, never across a wait).
 */
typedef struct CorTlsClient CorTlsClient;

typedef struct {
    const char* caFile;     /* NULL: the system's CA store */
    bool insecure;          /* skip verification (tests, explicit opt-in) */
    const char* alpn;       /* comma list, e.g. "http/1.1", or NULL */
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
    const char* name;           /* as `listen: - protocol:` names it */
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
typedef struct {
    unsigned connections;
    size_t headerBytes;
    unsigned headerCount;
    size_t bodyBytes;
    uint64_t requestTimeoutMs;
    uint64_t bodyTimeoutMs;
    uint64_t keepaliveTimeoutMs;
    uint64_t sendTimeoutMs;
} CorLimits;

const CorLimits* corLimits(void);

/*
 * The limits of every protocol's requests, in one place: a protocol asks
 * as a request's head and then its body arrive, and corRequestServe asks
 * again before any handler runs (a request past them is answered with the
 * status, its handler never called). corLimitsHead measures r's method,
 * target and headers as HTTP/1.1 writes them: 0 within
 * limits.header_bytes and header_count, else the status to refuse r with,
 * 414 (the request line alone is longer than header_bytes) or 431.
 * corLimitsBody: 0 when a body of bytes (declared, or come so far) is
 * within limits.body_bytes, else 413. corLimitsRequest: both, for r whole
 * (r->bodyLen). Any thread.
 */
int corLimitsHead(const CorRequest* r);
int corLimitsBody(uint64_t bytes);
int corLimitsRequest(const CorRequest* r);
/*
 * A request refused at a limit (status 408, 413, 414 or 431; another is
 * ignored), however its protocol says no on its wire: logged once
 * ("PROTOCOL: WHO: WHAT is past the limits (LIMIT): refused STATUS") and
 * counted in cor_requests_refused_total{protocol, status}. corLimitsText:
 * the answer's text ("413 Content Too Large\n"), NULL for another status.
 */
void corLimitsRefused(const char* protocol, const char* who,
                      const char* what, int status);
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
typedef void (*CorAcceptFn)(unsigned loopIndex, const CorListener* l,
                            int fd, const struct sockaddr_storage* peer);
typedef struct CorAccept CorAccept;

/* Start accepting on this loop; returns the acceptor, or NULL (logged). */
CorAccept* corAcceptStart(CorEvLoop* loop, unsigned index,
                          CorListener* const* listeners, unsigned count,
                          CorAcceptFn open);
/* Stop accepting and free a (on its loop's thread); NULL is ignored. */
void corAcceptStop(CorAccept* a);
/* A connection that was accepted is closed. */
void corAcceptClosed(void);
/* A peer's address as text ("192.0.2.7", "2001:db8::1"), without its port,
 * into out (size bytes; 46 hold any): what r->remote says. */
void corPeerAddress(const struct sockaddr_storage* peer, char* out,
                    size_t size);

/* ---- URLs ----------------------------------------------------------------- */

/* scheme://[user[:password]@]host[:port][/path][?query] taken apart; the
 * pointers point into the URL parsed. */
typedef struct {
    char scheme[16];            /* lowercased: "http", "cor", "mqtts" */
    const char* user;           /* NULL when none */
    size_t userLen;
    const char* password;       /* NULL when none */
    size_t passwordLen;
    char host[256];             /* a name or an address, no brackets */
    unsigned port;              /* 0 when absent: the scheme's default */
    const char* authority;      /* host[:port] as written */
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
typedef struct CorConn CorConn;
typedef struct CorTlsClient CorTlsClient;

/* Where to connect; the strings are read during corConnOpen only. */
typedef struct {
    const char* host;           /* a name, an IPv4 or an IPv6 address (no
                                   brackets) */
    unsigned port;              /* 1..65535 */
    bool tls;
    const char* serverName;     /* TLS: the name sent (SNI) and verified;
                                   NULL: host */
    int connectTimeoutMs;       /* the name, the connect and the TLS
                                   handshake, all addresses together (each
                                   connect takes an equal share of what is
                                   left, the last all of it); 0:
                                   client.connect_timeout */
    CorTlsClient* tlsClient;    /* TLS settings (CA, verification, ALPN);
                                   NULL: the default, from client.ca_file */
    bool fresh;                 /* a new connection, never a pooled one
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

/* ---- Background tasks ----------------------------------------------------
 *
 * Long-running work of a module (a health check, a subscriber, a cache
 * refresher), the bi-modal seed's SPAWN, schedule_after and schedule; the
 * same source runs in both modes:
 *
 *     static void
 *     healthCheck(void* arg)
 *     {
 *         while (corTaskScheduleAfter(1000) == 0) {
 *             probe(arg);             (waits through corRestWaitFd)
 *         }
 *     }
 *
 *     corTaskSpawn(healthCheck, upstream, "health");   (in loopInit)
 */
typedef void (*CorTaskFn)(void* arg);

/*
 * Start fn(arg) as a background task named name (for logs; copied). With
 * coroutines on and called on a loop's thread (a module's loopInit, an
 * inline or coroutine handler) it is a coroutine of that loop, started at
 * the loop's next iteration; elsewhere (a worker, blocking mode, or
 * past the loop's coroutine cap) a thread of its own, not a pool worker,
 * which it would hold for the generation's life. A stop or a reload (the
 * generation ends) cancels its waits: fn must return when a wait fails
 * with ECANCELED, and the stop waits for it (the coroutine ends with its
 * loop, the thread is joined). arg is the caller's and must outlive the
 * task (the generation, for one spawned in loopInit).
 *
 * Not from a module's init, which runs before the loops exist: spawn in
 * loopInit (one per loop) or from a handler. Returns 0, or -EPERM (no
 * generation is running: module init, or no server), -ECANCELED (the
 * generation is stopping), -EINVAL (fn NULL), -ENOMEM or -EAGAIN (no
 * thread to be had); a refusal is logged, and nothing runs.
 */
int corTaskSpawn(CorTaskFn fn, void* arg, const char* name);

/*
 * The seed's shutdown-aware schedule_after: wait ms (through
 * corRestWaitFd: a coroutine yields, a thread polls). Returns 0 when the
 * time passed, -ECANCELED at once when a stop (or the request's cancel,
 * in a handler) ended the wait, and for every call after. May yield.
 */
int corTaskScheduleAfter(int ms);

/*
 * The seed's schedule(): a cooperative yield. In a coroutine the loop
 * serves its events and its other coroutines first, then this one goes
 * on; call it between the steps of a long computation so that the loop's
 * other requests are not starved. On a thread (a worker, a task's own
 * thread, blocking mode) it is a no-op, since the thread is its own.
 * Returns 0, or -ECANCELED once a stop (or the request's cancel) came:
 * stop computing. May yield.
 */
int corTaskSchedule(void);

/* ---- Shared downloads ----------------------------------------------------
 *
 * A keyed single-flight fetch with a cache (the seed's @context case): the
 * first request that needs a resource fetches it; every other request that
 * needs the same key meanwhile, on any loop, worker or thread, waits for
 * that one fetch and gets its result, and then the cached copy while its
 * TTL lasts:
 *
 *     static int
 *     fetchConfig(const char* key, void* arg, void** dataP, size_t* lenP)
 *     {
 *         return download(arg, key, dataP, lenP);  (waits: corRestWaitFd)
 *     }
 *
 *     CorShared* s;
 *     int rc = corShared("config", fetchConfig, origin, 5000, &s);
 *
 *     if (rc == 0) {
 *         corRespond(r, 200, "application/json", corSharedData(s),
 *                    corSharedLen(s));
 *         corSharedRelease(s);
 *     }
 */
typedef struct CorShared CorShared;

/* Fetch key: on success set *dataP to malloc'ed bytes (corShared owns them
 * from here, and frees them with the last reference) and *lenP, and return
 * 0; else return -errno (every waiter gets it). It runs in the caller that
 * fetches, and may wait through corRestWaitFd like any handler. */
typedef int (*CorSharedFetchFn)(const char* key, void* arg, void** dataP,
                                size_t* lenP);

/*
 * The result for key (a string, copied): the cached copy if one is there
 * and its TTL lasts; the result of the fetch in flight for key, waited
 * for; else fetch(key, arg, ...) is run here, by this caller, for every
 * caller of key until it ends. A success is cached ttlMs (<= 0: not
 * cached, only shared with those who waited); a failure is never cached.
 * The owner of a fetch is the request (corRequestCurrent), else the
 * coroutine, else the thread: two requests of one loop are a fetch and a
 * waiter; the owner asking for the key it is fetching (from inside its
 * fetch) is a cycle. A waiter whose wait is cancelled (a stop, its
 * request's deadline or client) leaves alone; the fetch goes on for the
 * others. A waiter whose fetcher was cancelled asks again (and may fetch
 * itself).
 *
 * Returns 0 with *resultP set to a reference the caller owns (release it
 * with corSharedRelease; the bytes are shared, read-only, and live while a
 * reference does); or -errno with *resultP NULL: the fetch's error,
 * -EDEADLK for a cycle, -ECANCELED (a stop or the caller's cancel ended
 * its wait), -EINVAL, -ENOMEM, -EMFILE. May yield.
 */
int corShared(const char* key, CorSharedFetchFn fetch, void* arg,
              int64_t ttlMs, CorShared** resultP);

/* The bytes and their length; they live while a reference does. */
const void* corSharedData(const CorShared* s);
size_t corSharedLen(const CorShared* s);
/* Another reference to s (for another owner), and the end of one. From
 * any thread; releasing NULL does nothing. */
CorShared* corSharedRef(CorShared* s);
void corSharedRelease(CorShared* s);

/* ---- Notifications ------------------------------------------------------
 *
 * A notification is a message sent to a URL after something happened (a
 * write answered): its scheme picks who sends it (corSchemeAdd). http and
 * https are the HTTP floor's (a request with the body, acknowledged by a
 * 2xx); a module adds others (the MQTT bridge mqtt and mqtts, modules/cor
 * cor), which is what makes a module a bridge:
 *
 *     static void
 *     writeFinish(CorRequest* r)           (the post-response phase)
 *     {
 *         corNotify(r, &(CorNotification){
 *             .url = "https://hooks.example/changed",
 *             .contentType = "application/json",
 *             .body = r->body, .bodyLen = r->bodyLen });
 *     }
 *
 * corNotify starts the send and returns: it runs beside the caller, a
 * coroutine of the caller's loop when the caller runs on one (a
 * coroutine, or inline: the notification then starts at the loop's next
 * iteration), else a kept thread (a worker, blocking mode); so all of a
 * write's notifications are in flight at once, whatever the phase's
 * place. r is released only once every notification it started has
 * ended: a drain (reload, graceful stop) waits for them, up to
 * runtime.stop_timeout; a stop cancels them (each counted failed, one log
 * line with their number) and does not wait. /metrics counts per scheme
 * cor_notify_sent_total, cor_notify_failed_total, cor_notify_in_flight.
 */
typedef struct {
    const char* url;            /* scheme://...: the scheme picks the
                                   sender */
    const char* method;         /* NULL: POST (what a scheme makes of it
                                   is its own: http sends it as is) */
    const CorHeader* headers;   /* sent as they are (http: after Host) */
    unsigned headerCount;       /* at most COR_NOTIFY_HEADERS_MAX */
    const char* contentType;    /* NULL: none */
    const void* body;
    size_t bodyLen;
    int timeoutMs;              /* the whole send; 0: client.notify_timeout */
} CorNotification;

#define COR_NOTIFY_HEADERS_MAX 64

/*
 * Send n (copied, with all it points to) beside the caller, as said
 * above; r (NULL for none: a background task's) is the request whose
 * release waits for it. Returns 0 once it is started (its outcome is
 * counted and a failure logged, with the URL less any password, and
 * why); or -EINVAL (no "scheme://" URL, a scheme nobody registered, a
 * URL its scheme's check refused (logged), too many headers),
 * -ECANCELED (the generation is stopping), -ENOMEM, or -EAGAIN (no
 * thread to be had); nothing is sent then, and nothing counted.
 */
int corNotify(CorRequest* r, const CorNotification* n);

/* ---- URL schemes: one registry for every client ------------------------- */

/* The client's exchange and its answer (corHttpClient.h), whatever the
 * scheme. */
struct CorHttpClientRequest;
struct CorHttpClientResponse;

/*
 * A URL scheme and what takes its URLs: one exchange of the client
 * (fetch: corHttpClientFetch and corHttpClientStart take its URLs, and so
 * the forward module), notifications (send), or both. http and https are
 * the HTTP floor's (http/); modules add cor, cors, mqtt, mqtts.
 *
 * fetch makes one exchange as corHttpClientFetch says (the same request,
 * answer and errors). send is straight-line code that returns 0 when the
 * receiver acknowledged n, or -errno with a sentence in why (the URL is
 * logged beside it: why need not repeat it); n and what it points to live
 * until send returns, n->timeoutMs is set (the default filled in). Both
 * wait through corRestWaitFd (corConnOpen, corConnRead...: they yield in
 * a coroutine and poll on a thread; a stop ends their waits with
 * ECANCELED). May yield.
 */
typedef struct {
    const char* scheme;         /* lowercase: a letter, then letters,
                                   digits, + - .; at most 15 */
    int (*send)(CorModule* m, const CorNotification* n, char* why,
                size_t whyLen);
    /* NULL, or whether url is one send could take: 0, or -EINVAL with
     * why, which corNotify logs and returns before anything starts. */
    int (*check)(const char* url, char* why, size_t whyLen);
    /* NULL, or one exchange: the client takes the scheme's URLs. */
    int (*fetch)(const struct CorHttpClientRequest* req,
                 struct CorHttpClientResponse* res);
} CorScheme;

/* Register a scheme (copied), from a module's init. Returns 0, or -1
 * after a module error (a bad or taken name, neither fetch nor send, too
 * many schemes, called after init). */
int corSchemeAdd(CorModule* m, const CorScheme* s);

/* The scheme registered as name (lowercase), or of url ("scheme://...",
 * any case); NULL when none. */
const CorScheme* corSchemeFind(const char* name);
const CorScheme* corSchemeOf(const char* url);

/* ---- Logging ------------------------------------------------------------- */

typedef enum {
    COR_LOG_DEBUG,
    COR_LOG_INFO,
    COR_LOG_WARN,
    COR_LOG_ERROR
} CorLogLevel;

void corLog(CorLogLevel level, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* COR_H */
