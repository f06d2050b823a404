/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corModule.h: what an application module uses. A module exports one
 * descriptor (COR_MODULE), registers handlers, serves requests (answers,
 * streams), runs background tasks, shares downloads, sends notifications
 * and logs. cor.h includes it with corProtocol.h (what a protocol module
 * adds: listeners, transports, accept, upgrades) and corClient.h (URLs,
 * connections out, TLS clients, URL schemes).
 */
#ifndef COR_MODULE_H
#define COR_MODULE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "corAcceptEncoding.h"
#include "corRange.h"
#include "corConf.h"
#include "corEv.h"
#include "corList.h"

/* Bumped whenever a struct or a signature of cor.h's headers, or of one
 * they include, changes. */
#define COR_ABI_VERSION 23
#define COR_VERSION "0.1.0"

/* The types the three headers share, declared once. */
typedef struct CorModule CorModule;
typedef struct CorRequest CorRequest;
typedef struct CorTransport CorTransport;
typedef struct CorTlsClient CorTlsClient;
typedef struct CorListener CorListener;
typedef struct CorConn CorConn;

/* ---- Modules ------------------------------------------------------------- */

/* What a module exports (as the symbol corModuleDescriptor). */
typedef struct {
    uint32_t abiVersion;     /* COR_ABI_VERSION when it was built */
    uint32_t descriptorSize; /* sizeof(CorModuleDescriptor) then */
    uint32_t requestSize;    /* sizeof(CorRequest) then */
    uint32_t pointerSize;
    const char* corVersion; /* COR_VERSION then */
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

#define COR_MODULE(moduleName, ...)                                            \
    __attribute__((visibility("default")))                                     \
    const CorModuleDescriptor corModuleDescriptor = {                          \
        .abiVersion = COR_ABI_VERSION,                                         \
        .descriptorSize = sizeof(CorModuleDescriptor),                         \
        .requestSize = sizeof(CorRequest),                                     \
        .pointerSize = sizeof(void*),                                          \
        .corVersion = COR_VERSION,                                             \
        .compiler = __VERSION__,                                               \
        .name = #moduleName,                                                   \
        __VA_ARGS__                                                            \
    }

/* The module's name, its private data pointer, and where its init reports
 * configuration errors (file:line:column is taken from the node). */
const char* corModuleName(const CorModule* m);
void corModuleSetData(CorModule* m, void* data);
void* corModuleData(const CorModule* m);
CorConfErrors* corModuleErrors(CorModule* m);
void corModuleError(CorModule* m, const CorConf* at, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Read one entry of a list into its record (zeroed); its errors its own.
 * Returns 0, or -1 after a module error. */
typedef int (*CorRecordReadFn)(CorModule* m, const CorConf* entry, void* record,
                               unsigned index);
/* Free what one record holds (not the record itself). */
typedef void (*CorRecordFreeFn)(void* record);

/*
 * A module's list of named records (the guards of access and limit, the
 * roots of static): the sequence at key of its conf, at least one entry,
 * each a mapping (shape says what one holds, in the errors), read into a
 * new zeroed array of size-byte records, read(m, entry, record, i) each;
 * every entry is read, so that all its errors are said. The array is the
 * core's, one a module: at the module's exit, after its exit hook,
 * freeRecord (NULL: none) runs on each record and the array is freed,
 * whatever the reads said. Returns the array with *countP, or NULL with
 * *countP 0 after a module error.
 */
void* corModuleRecordsRead(CorModule* m, const CorConf* conf, const char* key,
                           const char* shape, size_t size, CorRecordReadFn read,
                           CorRecordFreeFn freeRecord, unsigned* countP);

/* ---- Handlers: where a request runs -------------------------------------- */

typedef enum {
    COR_RUN_INLINE,    /* never waits: on the loop that read it */
    COR_RUN_COROUTINE, /* waits through corRestWaitFd: a coroutine */
    COR_RUN_WORKER     /* blocks in a library that knows nothing of the
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
    const char* name; /* what routes name */
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
    /* Serve a request as soon as its head is in, and let the handler read
     * its body as it comes (corRequestBodyRead), instead of once it came
     * whole into r->body: a proxy of a stream both ways (gRPC), or of an
     * upload. Where the protocol cannot (cor://), the body still comes
     * whole and corRequestBodyRead hands it out. */
    bool streamBody;
    /* The handler's own state, given back by corRequestHandlerArg: one
     * serve function for many instances (a static root, an upstream
     * group) finds its own without a lookup by name per request. It
     * stays the module's, from registration until its exit. */
    void* arg;
} CorHandler;

/* Register a handler (copied). Returns 0, or -1 after a module error
 * (a duplicate name). */
int corHandlerAdd(CorModule* m, const CorHandler* handler);

/* ---- Guards: the access phase -------------------------------------------
 *
 * A guard decides whether a request reaches its route's handler (an
 * address list, a password, a rate): a route's `guard: [ lan, staff ]`
 * runs the named guards in order, on the loop that read the request,
 * before the handler. Each returns COR_GUARD_PASS (the next guard, then
 * the handler), a status >= 400 (refused: the client gets that answer,
 * the handler never runs), or COR_GUARD_LATER: it keeps `wait` and calls
 * corGuardResume(wait, verdict) later on the request's loop, after work
 * that must not hold the loop (a password hash on a thread of its own).
 *
 * A guard runs inline: it must not wait. A refusing guard may answer
 * itself (corRespond, with its headers: WWW-Authenticate, Retry-After);
 * one that does not gets a short text answer of its status from the
 * core. The route's `headers` are on either.
 */
#define COR_GUARD_PASS 0
#define COR_GUARD_LATER (-1)

typedef struct CorGuardWait CorGuardWait;
typedef int (*CorGuardFn)(CorRequest* r, void* arg, CorGuardWait* wait);

/* Register a guard routes name, from the module's init (arg stays the
 * module's until its exit). Returns 0, or -1 after a module error (a
 * duplicate name, no memory). */
int corGuardAdd(CorModule* m, const char* name, CorGuardFn fn, void* arg);

/* The verdict of a guard that answered COR_GUARD_LATER (COR_GUARD_PASS
 * or a status >= 400), on the request's loop (post it there from a
 * thread: corEvLoopPost(r->loop, ...)); once per wait. */
void corGuardResume(CorGuardWait* wait, int verdict);

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
typedef enum { COR_RAN_INLINE, COR_RAN_COROUTINE, COR_RAN_WORKER } CorRan;

typedef struct CorArenaChunk CorArenaChunk;
typedef struct CorStream CorStream;
typedef struct CorUpgraded CorUpgraded;
typedef struct CorProtocolOps CorProtocolOps;
typedef struct CorHandlerEntry CorHandlerEntry;
typedef struct CorBodyIn CorBodyIn;
typedef struct CorFilterRun CorFilterRun;

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
    const char* path; /* percent-decoded, "//" merged, dot
                         segments removed: what routes and
                         guards match; less the route's
                         strip_prefix, if it has one */
    size_t pathLen;
    const char* query; /* raw, NULL when none */
    size_t queryLen;
    const CorHeader* headers;
    unsigned headerCount;
    const char* body;
    size_t bodyLen;
    bool head;          /* HEAD: the protocol sends no body */
    const char* remote; /* the client's address ("192.0.2.7",
                           "2001:db8::7"), or NULL when unknown:
                           the connection's, or what a proxy in
                           real_ip.from says (the core sets it
                           so before routing) */
    const char* peer;   /* the connection's address (the last
                           hop's: a proxy's under real_ip),
                           set by the core from what the
                           protocol put in remote */
    bool secure;        /* it came over TLS */
    /* For the access log: the target as the client wrote it (NULL: the
     * path and query say it), and how it came ("HTTP/1.1", "COR/1"). */
    const char* target;
    size_t targetLen;
    const char* version;
    const char* rawPath; /* the path as the client sent it (what a
                            proxy passes on: "%2F", "//" stay); or,
                            after a route's strip_prefix, the rest
                            of its normal form, escapes as sent;
                            or NULL */
    size_t rawPathLen;

    /* The response, set by the handler through corRespond*(). */
    int status;
    const char* contentType;
    const void* responseBody;
    size_t responseLen;
    CorHeader* responseHeaders;
    unsigned responseHeaderCount;
    bool responded;
    int fileFd; /* a file body (corRespondFile), or -1 */
    int64_t fileOffset;
    CorStream* stream; /* a streamed body, or NULL */
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
    CorEvTask task; /* to a worker, and back to the loop */
    uint64_t startMs;
    unsigned responseHeaderCap;
    bool inFinish;
    bool serving;         /* the handler runs: it can be cancelled */
    CorRestCancel cancel; /* ends the running phase's waits */
    /* What the running phase started beside itself and must not outlive
     * it (a client call not collected): cancelled with it, given up at
     * its end (corRequestCleanupAdd, corCoreInt.h); a zeroed head is an
     * empty list. */
    CorList cleanups;
    CorEvTimer deadline;  /* the handler's timeout, when it has one */
    atomic_uint answer;   /* with a deadline: who answered first */
    CorUpgraded* upgrade; /* corRequestUpgrade was called */
    /* The notifications r started that have not ended, plus one until
     * its last phase ends: it is released at 0. */
    atomic_uint holds;

    /* Trailers of the response (corResponseTrailer), sent after its body. */
    CorHeader* responseTrailers;
    unsigned responseTrailerCount;
    unsigned responseTrailerCap;
    /* A body that comes while the handler runs (CorHandler.streamBody, on
     * a protocol that can): the core's, NULL when the body is whole. */
    CorBodyIn* bodyIn;
    size_t bodyTaken; /* of r->body, by corRequestBodyRead */
    /* The response filters that took r's body (corFilterAdd), once its
     * head went through them; NULL before. */
    CorFilterRun* filterRun;
    /* The filters r's route turned off (`filters: { NAME: off }`), one
     * bit per filter in the order they were added. */
    uint32_t filtersOff;
    /* What r's route sends its body to once answered (`notify:`): the
     * core's, NULL when the route has none. */
    const struct CorConfigNotify* notify;
    /* Its route's regex captures, copies in r's arena (read them with
     * corRequestCapture); NULL: none. */
    const struct CorCaptures* captures;
    /* The error pages its answer may take (its route's, then the top
     * level's); NULL: the top level's. */
    const struct CorErrorPages* errorPages;
    unsigned rewrites; /* how often a route rewrote its target */
    /* The limits of the route it ends on (corRequestLimits, asked by its
     * protocol before its body is read); NULL: not asked yet, the top
     * level's. The protocol leaves it zeroed. */
    const struct CorLimits* limits;
    /* The cache in front of r's handler (its route's `cache:`), the
     * core's; what that cache keeps of r (its own, let go by its
     * release); and what it made of r, for the access log ("HIT",
     * "MISS", "STALE"...: static text). NULL: none. */
    const struct CorCacheFront* cacheFront;
    void* cacheData;
    const char* cacheStatus;
};

/* A request header (case-insensitive), NULL when absent. */
const CorHeader* corRequestHeader(const CorRequest* r, const char* name);
/* Capture n of the regex of r's route (`match: "~^/u/([0-9]+)$"`: 1 is
 * the number; 0 the whole match), its length to *lenP; NULL when the
 * route has no regex or the group took no part in the match. The text
 * is the normalized path's, not NUL-terminated, valid as long as r. */
const char* corRequestCapture(const CorRequest* r, unsigned n, size_t* lenP);
/* The same header's value NUL-terminated, a copy in r's arena; NULL when
 * absent (or no memory). */
const char* corRequestHeaderText(CorRequest* r, const char* name);

/* Whether h's value, a comma list (Connection, Upgrade), holds the token
 * token[0..tokenLen), compared without case. */
bool corHeaderListHas(const CorHeader* h, const char* token, size_t tokenLen);
/* Whether h is named name, compared without ASCII case. Inline, with no
 * call: given a literal, the length is known where it is called, and
 * most names are told apart by it alone. */
static inline bool corHeaderIs(const CorHeader* h, const char* name);
/* The same with name's length given: a name that is no literal. */
static inline bool corHeaderIsLen(const CorHeader* h, const char* name,
                                  size_t len);
/* Whether name[0..len) is a token (RFC 9110 5.6.2), as a method or a
 * header's name must be, and whether value[0..len) may be a header's
 * value (no control character but tab, no DEL: a CR or LF would add
 * headers of its own): corResponseHeader's checks, for a module that
 * passes headers on from elsewhere. */
bool corHeaderNameOk(const char* name, size_t len);
bool corHeaderValueOk(const char* value, size_t len);

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
/* The arg that handler was registered with (NULL when none). */
void* corRequestHandlerArg(const CorRequest* r);

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
/* The same for a field of lengths (a client's answer's, not
 * NUL-terminated): checked and copied once. */
int corResponseField(CorRequest* r, const CorHeader* h);
/* The response header name (case-insensitive) set so far, NULL when
 * none is; and the removal of every one so named (returns how many). */
const CorHeader* corResponseHeaderGet(const CorRequest* r, const char* name);
unsigned corResponseHeaderRemove(CorRequest* r, const char* name);

/*
 * Read the request's body as it comes: up to len bytes into buf. For a
 * handler of streamBody on a protocol that streams it (HTTP/2, HTTP/1.1)
 * the bytes are handed on as the client sends them (what was read lets
 * the client send more, so a body of any size passes in bounded memory);
 * otherwise the body came whole before the handler ran and the reads
 * take it out of r->body (or, for a body past limits.body_memory, which
 * r->body maps from an unlinked file, out of that file: a large body is
 * read in the caller's buffer, never all in memory). From the handler
 * (any thread it runs on), one
 * reader at a time. Waits up to timeoutMs for a byte (< 0: no limit, 0:
 * not at all). Returns the count (> 0), 0 at the body's end, -EAGAIN
 * (timeoutMs 0, nothing yet), -ETIMEDOUT (this wait, or the client's
 * pieces past limits.body_timeout apart), -ECANCELED (the handler was
 * cancelled), -ECONNRESET (the client reset the body, or left, midway),
 * -EMSGSIZE (the body went past limits.body_bytes), -EPROTO (its framing
 * was bad). May yield.
 */
ssize_t corRequestBodyRead(CorRequest* r, void* buf, size_t len, int timeoutMs);
/* The request body's length in bytes when it is known: one that came
 * whole (r->bodyLen), or one that comes whose client said its length
 * (Content-Length); -1 while one of a length not said comes. */
int64_t corRequestBodySize(const CorRequest* r);

/* A response trailer, sent after the body (both strings copied; the same
 * checks as corResponseHeader's): before corRespond, or before
 * corResponseStreamEnd for a streamed body. HTTP/2 sends them as a HEADERS
 * frame that ends the stream; HTTP/1.1 in the last chunk of a chunked body
 * (a body of known length has no place for them: they are dropped). A
 * response with trailers and no body is one HEADERS frame over HTTP/2 (a
 * gRPC "trailers-only" answer says its status in its head). Returns 0,
 * -EINVAL or -ENOMEM. */
int corResponseTrailer(CorRequest* r, const char* name, const char* value);
/* The same for a field of lengths, as corResponseField. */
int corResponseTrailerField(CorRequest* r, const CorHeader* h);

/* Respond with len bytes of an open file from offset, sent with
 * sendfile(). The core owns fd from here and closes it. */
void corRespondFile(CorRequest* r, int status, const char* contentType, int fd,
                    int64_t offset, size_t len);

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

int corResponseStreamStart(CorRequest* r, int status, const char* contentType);
int corResponseStreamWrite(CorRequest* r, const void* data, size_t len);
void corResponseStreamEnd(CorRequest* r);
/* End a stream as failed (its producer lost its source mid-body): what
 * was written goes out, then the client is told the body is incomplete
 * (HTTP/1.1 closes the connection without the last chunk), never that
 * it is whole. Instead of corResponseStreamEnd. */
void corResponseStreamAbort(CorRequest* r);
/* Keep r's stream (started) going after its client left: the handler is
 * not cancelled, its writes do not fail, and its pieces go on through
 * the response filters, to nobody after them. For a filter that keeps
 * the body for others (the cache, whose waiters read it), from its
 * functions; keep false undoes it (the writes fail from then on if the
 * client left meanwhile). */
void corResponseStreamKeep(CorRequest* r, bool keep);

/* Several ranges of a whole of whole bytes, as a multipart/byteranges
 * stream (corRangeStream.c): started 206 with its length said (boundary,
 * COR_RANGE_BOUNDARY_SIZE bytes, made here; type the whole's), 0 or -1
 * (nothing answered); then its parts read from fd (the whole's first
 * byte at base), where writes may wait (a handler, a task), and the
 * stream ended, or cut when the file came short or the client left. */
#define COR_RANGE_BOUNDARY_SIZE 40
int corRangeMultipartStart(CorRequest* r, char* boundary, const char* type,
                           const CorRange* ranges, unsigned count,
                           uint64_t whole);
void corRangeMultipartSend(CorRequest* r, int fd, uint64_t base,
                           const char* boundary, const char* type,
                           const CorRange* ranges, unsigned count,
                           uint64_t whole);

/* ---- Response filters --------------------------------------------------
 *
 * A filter sees every answer on its way out, as nginx's header and body
 * filters do: its head function once, before the head goes out, where it
 * may change the status line's headers (corResponseHeader,
 * corResponseHeaderRemove) and say whether it takes the body; then, if
 * it did, its body function for each piece of the body, whatever the
 * handler answered with: a body in memory (one piece, the last), a
 * stream (its pieces as they are written), a file (read in pieces; such
 * an answer goes out as a stream, of no said length). What a body
 * function makes it passes on with corFilterPass, to the next filter or
 * to the client; it may keep bytes back between pieces (a compressor's
 * window) but gives them all up when told COR_FILTER_FLUSH (the writer
 * has nothing more for now: a stream's client must see what was written)
 * or COR_FILTER_LAST (the body ends; len may be 0).
 *
 * Filters run in the order they were added (the first sees the
 * handler's bytes), on the request's loop, and never wait. A route may
 * turn one off by name (`filters: { compress: off }`). Upgrades (101)
 * never pass through filters. With none added, answers go out as they
 * would without this API, at no cost.
 */
typedef struct CorFilterOut CorFilterOut;

enum {
    COR_FILTER_FLUSH = 1, /* pass on all that is held */
    COR_FILTER_LAST = 2   /* the body ends here (a flush too) */
};

typedef struct {
    const char* name; /* what routes' filters: keys name */
    /* Before r's head goes out (r's status, type and headers are set,
     * r->head says a HEAD). Returns what its body function gets as ctx,
     * non-NULL to take the body, NULL to let it pass untouched; memory
     * it needs lives in r (corRequestAlloc) or is let go in end. */
    void* (*head)(CorRequest* r, void* arg);
    /* A piece of r's body (data NULL when len is 0). Returns 0, or
     * -errno: the answer is cut (a stream's client told it is
     * incomplete, a body in memory answered 500). */
    int (*body)(CorRequest* r, void* ctx, const void* data, size_t len,
                unsigned flags, CorFilterOut* out);
    /* Once, after the last piece or when r ends without one (its client
     * left); may be NULL. */
    void (*end)(CorRequest* r, void* ctx);
    void* arg; /* the module's, for head */
} CorFilter;

/* Add a filter (copied), from a module's init; at most 32. Returns 0, or
 * -1 after a module error (no name, a name taken, too many). */
int corFilterAdd(CorModule* m, const CorFilter* filter);

/* Pass len bytes on from a body function (its out). Returns 0 or the
 * -errno of what is after it. */
int corFilterPass(CorFilterOut* out, const void* data, size_t len);

/* ---- Route caches -------------------------------------------------------
 *
 * A cache a module puts in front of any route's handler (`cache: NAME`
 * on the route): after the route's guards and body, its lookup runs on
 * the request's loop, before the handler, and says COR_CACHE_ANSWERED (it
 * answered r itself, corRespond*, from what it stored: the handler does
 * not run), COR_CACHE_PASS (the handler runs; the module sees its answer
 * through a response filter of its own, and keeps what it likes), or
 * COR_CACHE_LATER: it keeps wait and calls corCacheResume(wait, verdict)
 * later on r's loop (another request fetches the same answer: r waits
 * for it holding no thread and no coroutine). Its release runs when r
 * ends, on r's loop, for each r whose r->cacheData it set: what an
 * answer from the store holds (a reference to the stored bytes) is let
 * go there, once they were sent.
 */
#define COR_CACHE_PASS 0
#define COR_CACHE_ANSWERED 1
#define COR_CACHE_LATER 2

typedef struct CorCacheWait CorCacheWait;

typedef struct {
    const char* name; /* what routes' cache: keys name */
    int (*lookup)(CorRequest* r, void* arg, CorCacheWait* wait);
    void (*release)(CorRequest* r, void* arg);
    void* arg; /* the module's, until its exit */
} CorCache;

/* Register a cache routes name (copied), from a module's init. Returns 0,
 * or -1 after a module error (no name or lookup, a name taken, no
 * memory). */
int corCacheAdd(CorModule* m, const CorCache* cache);

/* The verdict of a lookup that said COR_CACHE_LATER (COR_CACHE_PASS or
 * COR_CACHE_ANSWERED), on r's loop; once per wait. */
void corCacheResume(CorCacheWait* wait, int verdict);

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
int corShared(const char* key, CorSharedFetchFn fetch, void* arg, int64_t ttlMs,
              CorShared** resultP);

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
    const char* url;          /* scheme://...: the scheme picks the
                                 sender */
    const char* method;       /* NULL: POST (what a scheme makes of it
                                 is its own: http sends it as is) */
    const CorHeader* headers; /* sent as they are (http: after Host) */
    unsigned headerCount;     /* at most COR_NOTIFY_HEADERS_MAX */
    const char* contentType;  /* NULL: none */
    const void* body;
    size_t bodyLen;
    int timeoutMs; /* the whole send; 0: client.notify_timeout */
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

/* ---- The instance -------------------------------------------------------- */

/*
 * This instance of cor, "HOST-PID-RANDOM" (12 bytes of the host name, the
 * master's PID, 24 random bits): the same in every generation of one
 * master (reloads) and after a binary upgrade, and never the same in two
 * instances of one configuration. For what a module names to the world
 * and must take up again after a reload (a broker's client id). Static
 * text; any thread.
 */
const char* corInstance(void);

/*
 * Whether this generation stops because another of the same instance
 * takes its place (a reload, a binary upgrade), not because the instance
 * stops: what a module keeps for its successor (a broker's session) is
 * kept then, and let go otherwise. False until the generation is told to
 * stop; any thread.
 */
bool corGenerationReplaced(void);

/* ---- Zones: shared memory that outlives a generation (corZone.c) -------- */

/*
 * The zone named name, size bytes mapped shared by every process of the
 * instance that opens it: zero-filled and new (*reused false), or, after
 * a reload or a generation that died, the very memory the last
 * generation that started had (*reused true) while name, size and tag
 * are the same (tag: the layout of what the module keeps in it, and what
 * else its contents depend on); a binary upgrade hands it to the new
 * binary, where a changed tag (or zone header) starts a fresh one. A
 * restart starts fresh. Open at the module's init (a zone opened after the
 * generation is ready is not handed on). Its locks are the module's to make
 * process-shared and robust (docs/architecture.md, "Zones"). NULL
 * (errno) when none can be made.
 */
void* corZoneOpen(const char* name, size_t size, uint64_t tag, bool* reused);
void corZoneClose(void* zone, size_t size);

/* ---- Networks (corNet.c) ------------------------------------------------ */

/* An address: 4 bytes (IPv4, and an IPv4-mapped IPv6 one) or 16. */
typedef struct CorNetAddr {
    unsigned char bytes[16];
    unsigned len; /* 4 or 16 */
} CorNetAddr;

/* A network: an address and how many of its leading bits count; `all`
 * holds every address of both families. */
typedef struct CorNet {
    CorNetAddr addr;
    unsigned bits;
    bool all;
} CorNet;

/* "10.0.0.0/8", "::1", "2001:db8::/32", "all" (an address alone is its
 * whole length); an IPv4-mapped network is taken as the IPv4 one. Bits
 * set past the prefix are an error, as in "10.0.0.1/8". Returns 0 or
 * -1. */
int corNetParse(const char* text, CorNet* net);

/* An address as r->remote holds it ("192.0.2.7", "2001:db8::7",
 * "::ffff:10.1.2.3" read as 10.1.2.3); false when it is none of them
 * (NULL included). */
bool corNetAddrParse(const char* text, CorNetAddr* addr);

bool corNetHas(const CorNet* net, const CorNetAddr* addr);

/* ---- Logging ------------------------------------------------------------- */

typedef enum {
    COR_LOG_DEBUG,
    COR_LOG_INFO,
    COR_LOG_WARN,
    COR_LOG_ERROR
} CorLogLevel;

void corLog(CorLogLevel level, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- inline definitions -------------------------------------------------- */

static inline bool
corHeaderIs(const CorHeader* h, const char* name)
{
    return corHeaderIsLen(h, name, strlen(name));
}

/* The bytes of w with ASCII's capitals made small, eight at a time; the
 * other bytes, those past 0x7F among them, as they were. */
static inline uint64_t
corAsciiLower8(uint64_t w)
{
    const uint64_t heptets = w & 0x7f7f7f7f7f7f7f7fu;
    const uint64_t fromA = heptets + 0x3f3f3f3f3f3f3f3fu; /* >= 'A' */
    const uint64_t pastZ = heptets + 0x2525252525252525u; /* > 'Z' */
    const uint64_t capital = fromA & ~pastZ & ~w & 0x8080808080808080u;

    return w | capital >> 2;
}

static inline bool
corHeaderIsLen(const CorHeader* h, const char* name, size_t len)
{
    uint64_t a;
    uint64_t b;

    if (h->nameLen != len) {
        return false;
    }
    if (len < 8) {
        /* Both padded with zeros to a word: no byte past either. */
        a = b = 0;
        for (size_t i = 0; i < len; i++) {
            a |= (uint64_t)(unsigned char)h->name[i] << 8 * i;
            b |= (uint64_t)(unsigned char)name[i] << 8 * i;
        }
        return corAsciiLower8(a) == corAsciiLower8(b);
    }
    /* Word by word, the last one ending at the end (it may overlap). */
    for (size_t i = 0;; i += 8) {
        size_t at = i + 8 < len ? i : len - 8;

        memcpy(&a, h->name + at, 8);
        memcpy(&b, name + at, 8);
        if (corAsciiLower8(a) != corAsciiLower8(b)) {
            return false;
        }
        if (at == len - 8) {
            return true;
        }
    }
}

#endif /* COR_MODULE_H */
