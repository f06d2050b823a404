/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of core/: the module registry, the routes, the generation's
 * runtime, counters and logs, as the core's files share them. Never
 * included by modules.
 */
#ifndef COR_CORE_INT_H
#define COR_CORE_INT_H

#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cor.h"
#include "corConfig.h"
#include "corList.h"

/* ---- Modules (corModule.c) ----------------------------------------------- */

struct CorModule {
    const CorModuleDescriptor* descriptor;
    void* dl;
    char* path;
    const CorConf* conf;
    void* data;
    CorConfErrors* errors;
    /* Its list of records (corModuleRecordsRead), freed after its exit. */
    void* records;
    unsigned recordCount;
    size_t recordSize;
    CorRecordFreeFn recordFree;
};

struct CorHandlerEntry {
    CorHandler handler;
    CorModule* module;
};

typedef struct {
    CorProtocol protocol;
    CorModule* module;
} CorProtocolEntry;

/* Register the core's own handlers (builtins, builtinCount of them: the
 * generation's, which serve from above the requests), then load every
 * module of the configuration and run its init; errors go to errors with
 * the module entry's file:line:column. Returns 0 or -1. */
int corModulesLoad(const CorConfig* config, const CorHandler* builtins,
                   unsigned builtinCount, CorConfErrors* errors);
void corModulesExit(void);
/* Call each module's loopInit / loopExit on the calling loop thread. */
int corModulesLoopInit(CorEvLoop* loop, unsigned index);
void corModulesLoopExit(CorEvLoop* loop, unsigned index);

const CorHandlerEntry* corHandlerFind(const char* name);
const CorProtocolEntry* corProtocolFind(const char* name);
/* The names of the registered handlers, NULL-terminated, in the order they
 * were added: an array the caller frees (not the names), or NULL. */
const char** corHandlerNames(void);
unsigned corProtocolCount(void);
const CorProtocolEntry* corProtocolAt(unsigned index);

/* Where a module name resolves ("hello" -> modules/hello.so beside the
 * binary, then the installed modules folder; a path, one with a slash or
 * ending in .so, is relative to the configuration file's folder). Returns
 * a malloc'ed path. */
char* corModulePath(const char* load, const char* configFile);

/* `cor --module-info MODULE`: a name or a path, as `load:` takes it. */
int corModuleInfo(const char* load);

/* ---- Guards (corGuard.c) ------------------------------------------------- */

typedef struct {
    char* name;
    CorGuardFn fn;
    void* arg;
    CorModule* module;
} CorGuardEntry;

const CorGuardEntry* corGuardFind(const char* name);
/* The names of the registered guards, NULL-terminated, in the order they
 * were added: an array the caller frees (not the names), or NULL. */
const char** corGuardNames(void);

/* A cache routes name (corRouteCache.c). */
typedef struct CorCacheFront {
    CorCache cache;
    CorModule* module;
} CorCacheFront;

const CorCacheFront* corCacheFind(const char* name);
/* The names of the registered caches, as corGuardNames. */
const char** corCacheNames(void);

/* ---- Routes (corRoute.c) ------------------------------------------------- */

/* Resolve every route's handler; unknown names are errors at the route. */
int corRoutesBuild(const CorConfig* config, CorConfErrors* errors);

typedef enum {
    COR_ROUTE_FOUND,
    COR_ROUTE_NO_PATH,   /* 404 */
    COR_ROUTE_NO_METHOD, /* 405 */
    COR_ROUTE_FAILED     /* a regex could not be run: 500 */
} CorRouteResult;

#define COR_ROUTE_ALLOW_MAX 128

/* An error page loaded: answers of a status in [from, to] get its body. */
typedef struct {
    unsigned from;
    unsigned to;
    char* body;
    size_t len;
    const char* contentType;
} CorErrorPage;

/* A list of them: a route's, then the top level's (next). */
typedef struct CorErrorPages {
    CorErrorPage* pages;
    unsigned count;
    const struct CorErrorPages* next;
} CorErrorPages;

/* What a route does to the requests it takes beside running its handler;
 * the route table's (the strings are the configuration's). */
typedef struct {
    size_t stripLen;              /* what strip_prefix takes off the path */
    const CorGuardEntry** guards; /* run in order before it */
    unsigned guardCount;
    CorHeader* headers; /* on whatever answers it */
    unsigned headerCount;
    uint32_t filtersOff;             /* the filters it turns off, by index */
    const CorConfigNotify* notify;   /* its notify, or NULL */
    const CorConfigRoute* route;     /* its entry: redirect, rewrite,
                                        request headers, its name */
    unsigned index;                  /* its place in the file: routes[index] */
    const CorErrorPages* errorPages; /* its own, then the top level's;
                                        NULL: none */
    const CorLimits* limits;         /* its limits: over the top level's */
    const CorCacheFront* cache;      /* in front of its handler, or NULL */
} CorRouteRules;

/* What a lookup found: the handler (NULL for a redirect or a rewrite),
 * its deadline, its route's rules and its regex's captures (offsets
 * into the path looked up, unset ones (size_t)-1); or for a 405 the
 * methods the path has (for Allow) and the headers of the first of its
 * routes that has some. */
typedef struct {
    const CorHandlerEntry* handler;
    uint64_t timeoutMs; /* the route's, else the handler's; 0: none */
    CorRouteRules rules;
    bool captured; /* a regex matched: captures are set */
    size_t captures[2 * 10];
    char allow[COR_ROUTE_ALLOW_MAX]; /* "GET, HEAD, POST": a 405's */
} CorRouteMatch;

/* The first route, in file order, that takes r (its method, its
 * normalized path, its Host). */
CorRouteResult corRouteFind(const CorRequest* r, CorRouteMatch* match);
/* The route r ends on, its rewrites followed (corRouteFinal.c), for what
 * a protocol decides before r's body and before the core routes it: how
 * much body to take, and whether to hand it on as it comes. r is left
 * as it is; COR_ROUTE_FAILED also for a rewrite that fails or loops. */
CorRouteResult corRouteFindFinal(const CorRequest* r, CorRouteMatch* match);
/* Whether some route has limits of its own (else every request has the
 * top level's, and no lookup is needed to know them). */
bool corRoutesLimited(void);

/* Error pages (corErrorPage.c): the top level's read (a file that cannot
 * be read is logged and left out), those of a list before next's, and
 * the top level's (NULL: none). */
int corErrorPagesTopBuild(const CorConfig* config);
int corErrorPagesBuild(const CorConfigErrorPage* in, unsigned count,
                       const CorErrorPages* next, CorErrorPages* out);
const CorErrorPages* corRouteErrorPages(void);

/* What a route does in place of a handler, and to the request before it
 * (corRouteAction.c): the captures kept in r, the request headers set
 * and removed; a redirect answered; a rewrite's new target set. Each
 * returns 0, or -1 when out of memory (r answered 500). */
int corRouteCapturesKeep(CorRequest* r, const CorRouteMatch* match);
int corRouteRequestHeaders(CorRequest* r, const CorConfigRoute* route);
void corRouteRedirect(CorRequest* r, const CorConfigRoute* route);
int corRouteRewrite(CorRequest* r, const CorConfigRoute* route);
/* r's answer, when its status has an error page (and its body is no
 * stream or file), takes the page as its body (corErrorPage.c). */
void corRouteErrorPageApply(CorRequest* r);

/* A route's notify (corRouteNotify.c): its URLs checked against the
 * registered schemes, errors at their lines; and, once r's answer is out,
 * r's body sent to each when r's method and status are listed. On r's
 * loop; the sends run beside it (corNotify). */
int corRouteNotifyCheck(const CorConfigRoute* in,
                        const CorHandlerEntry* handler, CorConfErrors* errors);
void corRouteNotifySend(CorRequest* r);

/* Take strip_prefix's n bytes off r's path, and what they were off its
 * raw path (NULL when what is left of it starts with an escaped '/'). */
void corRoutePathStrip(CorRequest* r, size_t n);

/* Where a guard chain goes on (given by corRequest.c, which runs the
 * chain: the guards call nothing of the request's lifecycle). */
typedef struct {
    /* r passed its route's guards: on to the handler. */
    void (*routed)(CorRequest* r, const CorRouteMatch* match);
    /* r is refused with status (>= 400), answered so unless its guard
     * did. */
    void (*refused)(CorRequest* r, int status);
} CorGuardNext;

/* Run match's guards on r (corGuard.c): a refusal goes to next->refused,
 * a pass to next->routed, now or when a late guard resumes (next is
 * kept: it must outlive the request). */
void corGuardsRun(CorRequest* r, const CorRouteMatch* match,
                  const CorGuardNext* next);

/* Where a cache's lookup goes on (given by corRequest.c). */
typedef struct {
    /* The handler runs. */
    void (*pass)(CorRequest* r, const CorRouteMatch* match);
    /* r was answered (by the cache, or with a 500). */
    void (*answered)(CorRequest* r);
} CorCacheNext;

/* Run the lookup of match's cache on r (corRouteCache.c); next must
 * outlive the request. And r's cache's release, as r ends. */
void corCacheLookup(CorRequest* r, const CorRouteMatch* match,
                    const CorCacheNext* next);
void corCacheRelease(CorRequest* r);

/* r->peer becomes what the protocol set in r->remote, and r->remote the
 * client's address that real_ip's header gives when the peer is one it
 * trusts (corRealIp.c). Inline, at the start of corRequestServe. */
void corRealIpApply(CorRequest* r);

/* ---- The generation's runtime (corRuntime.c) ---------------------------- */

typedef struct {
    const CorConfig* config;
    CorLimits limits;
    CorEvLoop** loops;
    unsigned loopCount;
    CorEvPool* workers;
    bool coroutines;      /* runtime.coroutines.enabled, and built so */
    atomic_bool stopping; /* a stop is under way: refuse, cancel */
} CorRuntime;

extern CorRuntime corRuntime;

/* The binary's path, from /proc/self/exe (main sets it); "cor" until
 * then. */
extern const char* corSelfPath;

/* A listener as the master opened it: one fd, or one per loop with
 * reuseport. */
struct CorListener {
    char* protocol;
    char* address;
    int* fds;
    unsigned fdCount;
    bool reusePort;
    bool passed;              /* systemd passed its socket (one fd) */
    bool http2;               /* its http2: on */
    bool proxyProtocol;       /* a PROXY header first (corProxyAccept.c) */
    struct CorTlsServer* tls; /* the generation's, NULL: plain */
    bool http3;               /* its http3: on */
};

/* Read the PROXY header fd's peer sends first, on loop (index's), then
 * call open with its source as the peer (or peer itself where the header
 * says the connection is the balancer's own); a connection without a
 * valid one is closed and counted (corProxyAccept.c). */
void corProxyAcceptStart(CorEvLoop* loop, CorAcceptFn open, unsigned index,
                         const CorListener* l, int fd,
                         const struct sockaddr_storage* peer);
/* Close the connections of this loop whose header has not come, those
 * that would go to open (one protocol's acceptor stops). */
void corProxyAcceptStop(CorAcceptFn open);

/* ---- Deadlines (corDeadline.c) ------------------------------------------- */

/* The absolute deadline timeoutMs from now, in corEvClockMs time; 0 (none)
 * for a negative timeout. */
uint64_t corDeadlineAfter(int timeoutMs);
/* What is left until deadline, for a wait: -1 for none (deadline 0). */
int corDeadlineLeftMs(uint64_t deadline);
/* corDeadlineWaitFd is public: corClient.h. */
/* Send all len bytes of buf through t, waiting for room until deadline;
 * *sentP (NULL: not counted) grows by what went out, whatever the result.
 * May yield. Returns 0, or -errno (-EPIPE, -ETIMEDOUT, -ECANCELED...). */
int corDeadlineSendAll(CorTransport* t, const void* buf, size_t len,
                       uint64_t deadline, size_t* sentP);

/* ---- TLS (corTls.c, corTlsServer.c, corTlsClient.c) ---------------------- */

typedef struct CorTlsServer CorTlsServer;

/* A TLS connection's state behind its transport (t->data); owned by the
 * transport, freed by its close. */
typedef struct {
    struct ssl_st* ssl;
    CorTlsClient* client; /* a client's context (held by ssl's
                           * SSL_CTX), else NULL */
    char* peer;           /* a client's "serverName:port" */
    bool wantsWrite;      /* the last recv wants the socket writable */
    bool drained;         /* the last socket read came back short */
    bool failed;          /* a fatal error: no close_notify */
    bool opened;          /* a server's first byte starts a record */
    bool plain;           /* a server's first byte starts none */
} CorTlsConn;

/* Make t a TLS transport over fd with ssl (which it owns from here).
 * Returns 0 or -ENOMEM (ssl freed, fd the caller's). */
int corTlsTransportInit(CorTransport* t, int fd, struct ssl_st* ssl);
/* Never the same for two contexts of a process, unlike an address that
 * malloc hands out again: what a pool keys connections by. */
uint64_t corTlsClientId(const CorTlsClient* ctx);

/* A comma list ("h2,http/1.1") in ALPN's wire format into out. Returns
 * its length, or -EINVAL (an empty or too long name, no room). */
int corTlsAlpnWire(const char* list, unsigned char* out, size_t cap);

/* OpenSSL's reason for the last failure of this thread, into why. */
void corTlsWhy(char* why, size_t whyLen, const char* fallback);

/* Load every TLS listener's certificates and keys (contexts, SNI, ALPN
 * from the listener's protocol, tickets); errors go to errors at the
 * certificate's file:line. Runs where the modules are loaded (the
 * generation, and cor -t). Returns 0 or -1. */
int corTlsServersLoad(const CorConfig* config, CorConfErrors* errors);
/* The context of the config's listen[index], NULL for a plain one. */
CorTlsServer* corTlsServerAt(unsigned index);
/* Start what the loaded listeners run beside the loops (the OCSP fetch
 * tasks), once the generation's loops run. */
void corTlsServersStart(void);

struct ssl_ctx_st;
/* A certificate's OCSP stapling (corTlsOcsp.c), owned by its listener's
 * server. */
typedef struct CorTlsOcsp CorTlsOcsp;
struct ssl_ctx_st;

/* Staple on ctx (its certificate loaded) as c->ocsp says: the file's
 * response loaded, or the responder's URL and the issuer found; errors
 * at c's marks. Returns the state, or NULL after an error. */
CorTlsOcsp* corTlsOcspNew(struct ssl_ctx_st* ctx, const CorConfigCert* c,
                          CorConfErrors* e);
void corTlsOcspFree(CorTlsOcsp* o);
/* Start o's fetch task (nothing for a file's staple). Returns 0 or
 * corTaskSpawn's -errno. */
int corTlsOcspStart(CorTlsOcsp* o);
struct x509_st;
/* A stapling that its owner drives (an ACME certificate, which changes
 * at run time): fetched from the responder cert names (label in the log),
 * verified against issuer; no task, no callback. NULL with why said
 * (the certificate names no responder). */
CorTlsOcsp* corTlsOcspFor(struct x509_st* cert, struct x509_st* issuer,
                          const char* label, char* why, size_t whyLen);
/* One fetch, logged: the wait before the next (a good answer's half-life,
 * else *retryMs, which doubles; 0 at first), or -1 once the generation
 * stops. May yield. */
int corTlsOcspRound(CorTlsOcsp* o, int* retryMs);
/* o's staple on ssl when it has one still valid: a status callback's
 * answer (SSL_TLSEXT_ERR_OK or _NOACK). */
int corTlsOcspStaple(CorTlsOcsp* o, struct ssl_st* ssl);
/* o's staple when it has one still valid, copied into alloc's memory
 * (*derP): its length, or -1. */
int corTlsOcspCopy(CorTlsOcsp* o, void* (*alloc)(size_t), unsigned char** derP);

/* A listener's session ticket keys shared through Redis (tls.tickets,
 * corTlsTickets.c), owned by its listener's server. */
typedef struct CorTlsTickets CorTlsTickets;

/* The keys of tls->tickets' Redis (keys of this process until it
 * answers); errors (no redis module, a bad URL) at its mark. Returns the
 * state, or NULL after an error. */
CorTlsTickets* corTlsTicketsNew(const CorConfigTls* tls, CorConfErrors* e);
/* Make ctx encrypt and decrypt its tickets with t's keys. */
void corTlsTicketsUse(CorTlsTickets* t, struct ssl_ctx_st* ctx);
void corTlsTicketsFree(CorTlsTickets* t);
/* Start t's refresh task. Returns 0 or corTaskSpawn's -errno. */
int corTlsTicketsStart(CorTlsTickets* t);
/* Its lines of /metrics (all listeners' together). */
void corTlsTicketsEmit(CorMetricsOut* out);

/* ---- Requests (corRequest.c, corRequestRead.c) --------------------------- */

/* Free r's arena, every chunk (corRequestRead.c). */
void corRequestArenaFree(CorRequest* r);

/* Called by the loop when a coroutine ran longer than the stall limit. */
void corRequestStallInit(CorEvLoop* loop);

/* Requests of the generation between corRequestServe and their release,
 * and those of them in the post-response phase: what a drain waits for,
 * and what a stop cuts short. */
unsigned corRequestsInFlight(void);
unsigned corRequestsFinishing(void);
/* Of them, those whose phase a worker thread has (queued or running). */
unsigned corRequestsOnWorkers(void);
/* Hold r's release for work it started that runs beside it (a
 * notification), and let it go (corRequestHold.c): the last let-go after r's
 * last phase ended releases r, on r's loop (posted there from another thread).
 * From any thread, between corRequestServe and the release. */
void corRequestHold(CorRequest* r);
void corRequestLetGo(CorRequest* r);
/* Call the protocol's op that answers r (done, streamEnd, streamAbort)
 * holding r: a release its corRequestSent leads to comes after the op
 * returns, never inside it, so that the protocol reads its own record
 * of r to the end of the call and keeps no marker for a release under
 * its feet. On r's loop; inline, as it runs once a request. */
static inline void
corRequestAnswer(CorRequest* r, void (*op)(CorRequest* r))
{
    atomic_fetch_add(&r->holds, 1); /* corRequestHold */
    op(r);
    corRequestLetGo(r);
}

/* The end of a streamed request body (corRequestBody.c): at the request's
 * end. Taking one as it comes is public (corClient.h). */
void corRequestBodyFree(CorRequest* r);

/*
 * A body that comes into r->bodyIn (served at its head: the handler
 * streams it, or the protocol wants its route's verdict before the body,
 * as for Expect: 100-continue) is gathered whole before a handler that
 * takes it whole (corRequestBodySpool.c): in memory up to
 * limits.body_memory, past it in an unlinked temporary file that r->body
 * maps and corRequestBodyRead reads. fn(r, rc, arg) runs on r's loop
 * once it came (0: r->body and r->bodyLen hold it) or failed (-errno: as
 * corRequestBodyRead would say, or the file's failure); it may run before
 * Gather returns. corRequestBodyGathers: whether r's body is to be
 * gathered for handler (its body comes, and the handler does not take it
 * as it comes).
 */
typedef void (*CorBodyGatheredFn)(CorRequest* r, int rc, void* arg);

bool corRequestBodyGathers(const CorRequest* r, const CorHandler* handler);
void corRequestBodyGather(CorRequest* r, CorBodyGatheredFn fn, void* arg);

/* Streams (corStream.c): the handler returned (the head goes out if it
 * has not, and the end may follow); and the stream's memory, at the
 * request's end. */
void corStreamServed(CorRequest* r);
/* Whether r's stream goes on after its client left
 * (corResponseStreamKeep): its handler is not cancelled then. */
bool corStreamKept(const CorRequest* r);
void corStreamFree(CorRequest* r);
/* r's file body (fileFd, fileOffset, responseLen) made a stream that the
 * loop reads in pieces and passes through r's filters; the stream owns
 * the file from here. A HEAD's (a file, or none) is a stream that ends at
 * once, nothing read: its head says no length, as its GET's. Returns 0
 * or -ENOMEM (r as it was). */
int corStreamFile(CorRequest* r);

/* ---- Response filters (corFilter.c) -------------------------------------- */

/* How many filters the modules added: 0 keeps the output path as it is
 * without them. */
extern unsigned corFilterCount;
/* A filter's index by name, -1 when none has it; and the names, as
 * corHandlerNames gives the handlers'. */
int corFilterIndex(const char* name);
const char** corFilterNames(void);
/* Run r's head through the filters (r->filterRun is set after it). */
void corFilterHead(CorRequest* r);
/* A whole answer (not a stream) before its head goes out: the head
 * through the filters, and a body they take filtered now (in memory) or
 * made a stream by fileStream (a file, or a HEAD's with no body:
 * corStreamFile, given by the caller, since the stream passes its pieces
 * through the filters). */
void corFilterResponse(CorRequest* r, int (*fileStream)(CorRequest* r));
/* A piece of r's streamed body through the filters that took it, to
 * the protocol's streamData; flags as a body function gets them. Returns
 * 0 or a filter's -errno. */
int corFilterData(CorRequest* r, const void* data, size_t len, unsigned flags);
/* The filters' end, once: after the last piece, else at r's end. */
void corFilterEnd(CorRequest* r);

/* ---- Upgrades (corUpgrade.c) --------------------------------------------- */

/*
 * A connection a handler took (corRequestUpgrade). Owned by its request,
 * from corRequestUpgrade to the session's end; used by the session alone
 * (one thread at a time).
 */
struct CorUpgraded {
    CorRequest* r;
    CorUpgradeFn fn;
    void* arg;
    CorTransport t;
    bool open;    /* t is the session's to read and write */
    bool closed;  /* corUpgradedClose: -EBADF from now on */
    bool running; /* the session phase has begun */
    char* in;     /* bytes that came past the request */
    size_t inLen;
    size_t inPos;
    char* out; /* output the protocol left unsent */
    size_t outLen;
    size_t outSent;
};

/* Take t (u owns it from here) and copies of rest and unsent. Returns 0,
 * or -ENOMEM (t closed: the session finds it gone). */
int corUpgradedAdopt(CorUpgraded* u, const CorTransport* t, const void* rest,
                     size_t restLen, const void* unsent, size_t unsentLen);
/* Close u's connection if open and free u. */
void corUpgradedFree(CorUpgraded* u);

/* ---- Background tasks (corTask.c) ---------------------------------------- */

/* Tasks may start from here (before the loops start, so that a module's
 * loopInit may spawn them). */
void corTasksOpen(void);
/* Refuse new tasks, cancel the threads' waits and join them; the
 * coroutines end with their loops. After corRestCancelAll. */
void corTasksStop(void);

/* ---- Connections out (corConn.c, corConnPool.c) ------------------------- */

/* What client: in the configuration sets (corConnSetup). */
/* What client: in the configuration sets (corConnSetup). */
typedef struct {
    uint64_t connectTimeoutMs;
    unsigned keepalivePerPeer; /* 0: no pool; COR_CONN_KEEPALIVE_AUTO */
    uint64_t idleTimeoutMs;
    /* auto: a connection on an fd at or past this is not kept (fds are
     * handed out lowest first: a high one says most are open), so that
     * idle connections never crowd out accepts (3/4 of RLIMIT_NOFILE). */
    int keepFdMax;
} CorConnSettings;

typedef struct CorConnPool CorConnPool;

/*
 * A connection out. Owned by the code that opened it, or, while idle, by
 * the pool it sits in (the pool of the thread that opened it). One
 * allocation: key is the peer's identity ("host port tls serverName
 * client"), peer the "host:port" of messages, both in the same block.
 */
struct CorConn {
    CorTransport transport;
    CorConnPool* pool;            /* where it goes back: its thread's */
    CorList peerLink;             /* its peer's idle list, newest last; then
                                     the list of those to close */
    CorList ageLink;              /* the pool's idle list, oldest first */
    struct CorConnPeer* idlePeer; /* the peer list it idles in */
    CorCoWatch watch;             /* idle in a loop's pool: its loop's */
    uint64_t idleSince;           /* corEvClockMs() when it was released */
    bool tls;
    bool reused;
    size_t written; /* bytes out since it was opened or taken */
    bool broken;    /* a failure or the peer's end: not
                       reusable */
    const char* peer;
    char key[];
};

/* Take the settings of config (NULL: the defaults), and make the default
 * TLS client from client.ca_file. Returns 0, or -1 with the error at
 * ca_file in errors (a file that is not PEM). */
int corConnSetup(const CorConfig* config, CorConfErrors* errors);

/* The settings of connections out (corConnPool.c): set (NULL: the
 * defaults) by corConnSetup, read by the opener and the pool. */
void corConnSettingsSet(const CorConnSettings* s);
const CorConnSettings* corConnSettings(void);

/* Close c's transport and free it (corConnPool.c). */
void corConnFree(CorConn* c);

/* This thread's pool: the loop's when the thread runs one, else the one
 * the other threads share. NULL once the loop's pool has been closed. */
CorConnPool* corConnPoolCurrent(void);
/* An idle connection for key, checked alive, or NULL. */
CorConn* corConnPoolTake(CorConnPool* pool, const char* key);
/* Keep c idle in its pool; false when it cannot (the caller frees it). */
bool corConnPoolPut(CorConn* c);
/* Close every idle connection of the calling loop's pool, for good (at
 * the loop's end), and those of the shared pool (at the generation's). */
void corConnPoolLoopExit(void);
/* The scheme that fetches req's url (any case; its target's when it
 * names one), with res cleared; NULL with res->error said when none takes
 * it, or url is no URL (corClientCall.c: corClientFetch's and
 * corClientOpen's). */
const CorScheme* corClientScheme(const CorClientRequest* req,
                                 CorClientResponse* res);

/* Each scheme's loopExit, on the calling loop's thread (corScheme.c). */
void corSchemesLoopExit(void);
void corConnPoolShutdown(void);

/* ---- Work beside the caller (corBeside.c) ------------------------------- */

typedef struct CorBeside CorBeside;
typedef void (*CorBesideFn)(CorBeside* b);

/*
 * A piece of work run beside the code that started it. Embedded in its
 * owner's record (found back with corContainerOf), zeroed (its cancel may
 * be cancelled before it starts), and alive until done is called; the
 * fields are corBeside.c's.
 */
struct CorBeside {
    CorBesideFn run;      /* the work: may wait (corRestWaitFd) */
    CorBesideFn done;     /* after run, unbound: may free b */
    CorRestCancel cancel; /* run's waits are bound to it */
    CorEvTask start;      /* a start at the loop's next iteration */
    CorBeside* queued;    /* the line to the threads */
};

/* Started on a loop's own stack (not in a coroutine), the work may be a
 * coroutine of that loop from its next iteration: for work nobody waits
 * for on that stack (the stack cannot yield to let it run). */
#define COR_BESIDE_LOOP_NEXT 1u

/*
 * Run run(b) and then done(b) beside the caller, exactly once: a
 * coroutine of the caller's loop when the caller is one of its coroutines
 * (or, with COR_BESIDE_LOOP_NEXT, the loop's own stack and coroutines
 * are on), else a kept thread. run's waits are bound to b->cancel.
 * Returns 0, or -errno (no thread to be had: nothing runs).
 */
int corBesideStart(CorBeside* b, CorBesideFn run, CorBesideFn done,
                   unsigned flags);
/* End b's waits (ECANCELED), from any thread for work on a thread, on
 * its loop for a coroutine. */
void corBesideCancel(CorBeside* b);

/* ---- Headers (corHeaders.c) ---------------------------------------------- */

/* The first of count headers named name (any case), or NULL. */
/* corResponseHeader's rules (RFC 9110 5.1, 5.5): a name is a token, a
 * value has no control character but tab (a CR or LF would write
 * headers, or a body, of its own). */
bool corHeaderNameValid(const char* name);
bool corHeaderValueValid(const char* value);
/* Add n headers whose strings outlive r, not copied; -ENOMEM. */
int corResponseHeadersAdd(CorRequest* r, const CorHeader* headers, unsigned n);

const CorHeader* corHeadersFind(const CorHeader* headers, unsigned count,
                                const char* name);
/* The length of the name in a Host value ("example.com:8080",
 * "[::1]:8080"): without its port. */
size_t corHostNameLen(const char* value, size_t len);
/* What work beside its caller keeps of the caller's headers: the bytes a
 * copy of count headers takes (the array, aligned, then their names and
 * values), and the copy into p, which has that many; the array is
 * returned (in p) and *endP set past the last byte used. */
size_t corHeadersCopySize(const CorHeader* headers, unsigned count);
CorHeader* corHeadersCopy(const CorHeader* headers, unsigned count, char* p,
                          char** endP);

/* ---- Responding (corRespond.c) ------------------------------------------ */

/* Who answered a request that has a deadline: r->answer. */
enum { ANSWER_OPEN, ANSWER_HANDLER, ANSWER_TIMEOUT };

/* Set r's response, whoever answers (the handler, its deadline, the core
 * for a refusal). */
void corRespondSet(CorRequest* r, int status, const char* contentType,
                   const void* body, size_t len);

/* ---- Notifications (corNotify.c) ----------------------------------------- */

typedef struct {
    uint64_t sent;   /* acknowledged */
    uint64_t failed; /* refused, timed out, or cut by a stop */
    unsigned inFlight;
} CorNotifyStats;

/* ---- URL schemes (corScheme.c) ------------------------------------------- */

#define COR_SCHEME_NAME_MAX 15

/* A registered scheme: what corSchemeFind gives is its s. */
typedef struct {
    CorScheme s; /* s.scheme is name */
    char name[COR_SCHEME_NAME_MAX + 1];
    CorModule* module; /* NULL: the HTTP floor's */
    atomic_ulong sent; /* its notifications' counters */
    atomic_ulong failed;
    atomic_uint inFlight;
} CorSchemeEntry;

/* The registered schemes (the HTTP floor's http and https first), and the
 * notification counters of one: its name is returned. */
unsigned corNotifySchemeCount(void);
const char* corNotifySchemeStats(unsigned index, CorNotifyStats* stats);
/* The notifications in flight, every scheme's. */
unsigned corNotifyInFlight(void);
/* A notification to url was due and corNotify refused it (a stop, no
 * memory, no thread): counted failed for url's scheme. */
void corNotifyFailedCount(const char* url);
/* A stop begins: log the number of notifications it cancels, once. And
 * the loops have ended: let those on threads, cancelled, leave their
 * senders before the modules' exit (a bound of 100 ms, not a wait for
 * their receivers). */
void corNotifyStopping(void);
void corNotifyStopped(void);

/* ---- Per-request cleanups (corRequest.c) --------------------------------- */

/*
 * Work that a request's running phase started beside itself (a client
 * call, which any protocol's client makes) and that must not outlive it.
 * The entry is its owner's memory, in r's list from corRequestCleanupAdd
 * until corRequestCleanupRemove or its end. cancel runs when r is
 * cancelled (its client left, its deadline passed), on r's loop, under
 * the list's lock: it must neither wait nor touch the list. end runs when
 * the phase that added it is over and it is still listed, unlinked
 * first and outside the lock: the owner gives its work up there.
 */
typedef struct CorRequestCleanup {
    void (*cancel)(struct CorRequestCleanup* c);
    void (*end)(struct CorRequestCleanup* c);
    CorRequest* owner; /* under the lock; NULL: not listed */
    CorList link;      /* in owner->cleanups */
} CorRequestCleanup;

/* Any thread. r must be in its running phase. */
void corRequestCleanupAdd(CorRequest* r, CorRequestCleanup* c);
/* c leaves its request's list (nothing when it is in none); once this
 * returns, its cancel no longer runs. Any thread. */
void corRequestCleanupRemove(CorRequestCleanup* c);
/* For corRequest.c: r was cancelled (on its loop), r's phase is over. */
void corRequestCleanupsCancel(CorRequest* r);
void corRequestCleanupsEnd(CorRequest* r);

/* ---- Counters (corMetricsCount.c, corMetricsOut.c, corMetrics.c) --------- */

/* Counted by the loop that owns them (no atomics), summed when read; each
 * loop's on lines of their own, or the loops would bounce them between
 * their cores at every request. */
typedef struct {
    _Alignas(COR_CACHE_LINE) uint64_t ranInline;
    uint64_t ranCoroutine;
    uint64_t ranWorker;
    uint64_t capFallbacks;
    uint64_t stalls;
    uint64_t responses[6]; /* by status class: 1xx..5xx, other */
    uint64_t timedOut;     /* handlers past their deadline */
    uint64_t cancelled;    /* handlers whose client left */
    uint64_t finishFailed; /* post-response phases a stop cut short */
    uint64_t client[4];    /* connections out: CorClientCount */
    uint64_t protocols[COR_PROTOCOL_KINDS]; /* requests read, by kind */
    /* Read by the generation's main thread during a drain. */
    atomic_uint inFlight;
    atomic_uint finishing;
    atomic_uint onWorkers; /* phases handed to a worker, not back */
} CorLoopCounters;

/* A gauge the loop alone writes and the main thread reads: a plain
 * read-modify-write is enough, the atomics only make the read safe. */
static inline void
corMetricsGaugeAdd(atomic_uint* gauge, int delta)
{
    atomic_store_explicit(gauge,
                          atomic_load_explicit(gauge, memory_order_relaxed)
                              + (unsigned)delta,
                          memory_order_relaxed);
}

/* The master's, in a shared page every generation sees. */
typedef struct {
    atomic_ulong generations;
    atomic_ulong reloadsOk;
    atomic_ulong reloadsFailed;
    atomic_ulong generationCrashes;
    atomic_ulong reloadRollbacks;
} CorMasterCounters;

extern CorMasterCounters* corMasterCounters;

/* What connections out count (corConn.c). */
typedef enum {
    COR_CLIENT_REUSED, /* handed out from a pool */
    COR_CLIENT_NEW,    /* connected (and TLS done) */
    COR_CLIENT_FAILED, /* no connection: name, connect, TLS */
    COR_CLIENT_STALE   /* idle ones the peer had closed */
} CorClientCount;

/* Count one: on a loop in its own counters, elsewhere in shared ones. */
void corMetricsClient(CorClientCount which);
/* Count a connection refused past limits.connections (corAccept.c). */
void corMetricsConnectionRefused(void);
/* Count an accept that failed at the fd limit (EMFILE, ENFILE). */
void corMetricsAcceptFdLimit(void);
/* The refusals at the limits, by protocol and status (corLimits.c). */
void corLimitsEmit(CorMetricsOut* out);

/* Why a connection on a proxy_protocol listener was closed before its
 * header came whole (corProxyAccept.c). */
typedef enum {
    COR_PROXY_INVALID, /* no PROXY header, or a malformed one */
    COR_PROXY_TIMEOUT, /* none within limits.request_timeout */
    COR_PROXY_CLOSED,  /* the peer closed first, or its loop's
                          acceptor stopped */
    COR_PROXY_REFUSALS
} CorProxyRefusal;

void corMetricsProxyRefused(CorProxyRefusal why);

/* What is counted off the loops, as corMetricsSum read it. */
typedef struct {
    uint64_t connectionsRefused;
    uint64_t acceptFdLimit;
    uint64_t proxyRefused[COR_PROXY_REFUSALS];
} CorOffLoopCounts;

/* The counters of loops loops (corMetricsCount.c), each loop's block,
 * their number, and the sum of them all with what was counted off the
 * loops (sum's client[] includes the connections out off the loops). */
int corMetricsInit(unsigned loops);
void corMetricsFree(void);
CorLoopCounters* corMetricsLoop(unsigned index);
/* The calling loop's counters (loop 0's off the loops). */
CorLoopCounters* corMetricsLoopCurrent(void);
unsigned corMetricsLoopCount(void);
void corMetricsSum(CorLoopCounters* sum, CorOffLoopCounts* off);
/* The loop index of the calling thread, or -1 off the loops. */
int corLoopIndexCurrent(void);
void corLoopIndexSet(int index);

/* The text of /metrics being written (corMetricsOut.c): corMetricsPrintf
 * appends to it; text is NULL once a growth failed. */
struct CorMetricsOut {
    char* text;
    size_t len;
    size_t cap;
};

/* An empty text with room for cap bytes. Returns 0, or -1 (no memory). */
int corMetricsOutInit(CorMetricsOut* out, size_t cap);

/* Prometheus text into a malloc'ed buffer; NULL when out of memory
 * (corMetrics.c). */
char* corMetricsText(size_t* lenP);
/* The built-in handler `metrics`: that text. */
void corMetricsServe(CorRequest* r);

/* ---- Readiness (corHealth.c) --------------------------------------------- */

/* Where the generation is in its life, as `health` answers it. */
typedef enum {
    COR_GENERATION_STARTING, /* 503: not yet reported ready */
    COR_GENERATION_READY,    /* 200 */
    COR_GENERATION_DRAINING, /* 503: a reload or a graceful stop */
    COR_GENERATION_STOPPING  /* 503 */
} CorGenerationState;

/* Set by the generation's main thread; read from any thread. */
void corHealthSet(CorGenerationState state);
CorGenerationState corHealthGet(void);
/* The built-in handler `health`: 200 "ready" or 503 with the state. */
void corHealthServe(CorRequest* r);

/* ---- Zones, the master's side (corZone.c) -------------------------------- */

/* The socket pair a starting generation hands its zones over (0, or -1
 * with errno: it starts fresh ones); the child's end of it, in the child;
 * the master's take once the generation said ready or failed: a ready
 * one's zones replace those held, a failed one's are dropped. */
int corZoneHandBegin(void);
void corZoneHandChild(void);
void corZoneHandEnd(bool ready);
/* A binary upgrade's: the zones held, inheritable from floor on and named
 * in the environment, in the child before its exec; and the new master's
 * take of them (only when an upgrade started it). */
void corZonePass(int floor);
void corZoneInherit(bool upgraded);

/* ---- Heartbeats (corHeartbeat.c) ----------------------------------------- */

/*
 * The loops' heartbeats, as the master sees them: a page the master maps
 * shared before it forks a generation, one per generation. Each loop of
 * that generation writes the loop's clock (corEvClockMs: CLOCK_MONOTONIC,
 * the same in every process) into its slot every periodMs from a timer
 * of its own, so a loop held by a handler that blocks stops writing; the
 * master reads the slots to decide whether to pet systemd's watchdog.
 * Slots are a cache line each: the loops never share a line.
 */
typedef struct {
    _Alignas(COR_CACHE_LINE) _Atomic uint64_t ms; /* 0: not yet */
} CorHeartbeatSlot;

typedef struct {
    uint64_t periodMs; /* how often a loop beats; 0: never */
    unsigned loops;
    _Atomic unsigned drained; /* loops that stopped accepting */
    CorHeartbeatSlot beat[];
} CorHeartbeat;

/* The page of the generation this process runs, NULL in the master. */
extern CorHeartbeat* corHeartbeat;

/* A shared page for a generation of loops loops, beating every periodMs
 * (0: none), or NULL (mmap failed); and its unmapping (NULL is nothing).
 * A generation keeps its own mapping after the master lets go of it. */
CorHeartbeat* corHeartbeatCreate(unsigned loops, uint64_t periodMs);
void corHeartbeatFree(CorHeartbeat* hb);
/* Start beating on the calling loop (its slot is index), from a timer in
 * timer, which the loop's thread owns. Nothing when there is no page or
 * no period. */
void corHeartbeatStart(CorEvLoop* loop, unsigned index, CorEvTimer* timer);
/* Said by a loop of this generation once it stopped accepting (a drain);
 * nothing when there is no page. */
void corHeartbeatDrained(void);
/* Wait, up to waitMs, until every loop of hb's generation stopped
 * accepting; whether they did (true when there is no page to tell). */
bool corHeartbeatDrainedWait(const CorHeartbeat* hb, uint64_t waitMs);
/* The loop that beat longest ago, and how long ago (ms, at now): -1 when
 * every loop beat within maxAgeMs. A loop that never beat is infinitely
 * old (*ageMsP is UINT64_MAX). */
int corHeartbeatStale(const CorHeartbeat* hb, uint64_t now, uint64_t maxAgeMs,
                      uint64_t* ageMsP);

/* ---- systemd (corSystemd.c, corSystemdListen.c) -------------------------- */

/*
 * The service manager's protocol, without libsystemd: a state is a
 * datagram of "KEY=value" lines sent to the AF_UNIX socket NOTIFY_SOCKET
 * names ('@' first: an abstract name). The master alone speaks it.
 */

/* Read NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID (the watchdog is
 * ours when the pid is unset or this process's) and take them out of the
 * environment, so that a generation's children never speak for us.
 * Returns 0, or -errno when the socket cannot be made (logged; cor runs
 * on without notifying). */
int corSystemdInit(void);
/* Send a state, formatted; nothing when NOTIFY_SOCKET was not set.
 * Returns 0, or -errno (logged once). */
int corSystemdNotify(const char* fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* A reload begins: RELOADING=1, with MONOTONIC_USEC (now, as systemd's
 * Type=notify-reload wants it). */
void corSystemdReloading(const char* configFile);
/* A reload is over: READY=1 again, whichever way it went, and in STATUS
 * the outcome ("ok", "failed"), the generation serving, and the first
 * line of errorText (NULL: none). */
void corSystemdReloaded(const char* outcome, unsigned number,
                        const char* errorText);
/* In the child of an upgrade, before its exec: NOTIFY_SOCKET and the
 * watchdog (for the child's pid) as systemd gave them to this master. */
void corSystemdEnvRestore(void);
/* The watchdog's interval in ms (WATCHDOG_USEC), 0 when there is none. */
uint64_t corSystemdWatchdogMs(void);
/* How often the loops must beat for the watchdog: 0 when there is none. */
uint64_t corSystemdBeatMs(void);
/* Ms until the next WATCHDOG=1 is due, for the master's poll (-1: none). */
int corSystemdWatchdogWaitMs(void);
/* Pet the watchdog when it is due and every loop of serving (the serving
 * generation's page; NULL: none serves) beat recently; a stalled loop is
 * logged once, when it is first seen. */
void corSystemdWatchdogTick(const CorHeartbeat* serving, unsigned number);

/* Take the sockets systemd passed (LISTEN_FDS from fd 3, for LISTEN_PID)
 * and clear those variables. Returns how many, or 0. */
unsigned corSystemdListenInit(void);
/* The passed socket bound to addr, made non-blocking and close-on-exec,
 * and given up by the set (the caller owns it); -1 when none is. */
int corSystemdListenTake(const struct sockaddr_storage* addr,
                         socklen_t addrLen);
/* As many as max of them bound to addr (a reuseport listener's, passed
 * by an upgrade), into fds. Returns how many. */
unsigned corSystemdListenTakeAll(const struct sockaddr_storage* addr,
                                 socklen_t addrLen, int* fds, unsigned max);
/* Close the passed sockets no listener took, each logged. */
void corSystemdListenCloseRest(void);

/* ---- Logs (corLog.c) ----------------------------------------------------- */

int corLogOpen(const char* errorPath, const char* level);
/* The error log's fd: a reopen keeps its number (a crash report writes to
 * it from a signal handler). */
int corLogFd(void);
/* Reopens the error log and the access log (SIGUSR1). */
int corLogReopen(void);
/* A thread that crashes says which, with the handler, its module and the
 * request it served (corCrash.c): armed on the calling thread and set up
 * for every thread that arms it (corCoCrashArm) from now on. */
void corCrashReportInit(void);
/* The access log (log.access): whether it is on, its format ("combined"
 * or "json"), and a write of one whole line (reopened on SIGUSR1). */
bool corAccessLogEnabled(void);
const char* corAccessLogFormat(void);
void corAccessLogWrite(const char* line, size_t len);
/* r's line in the access log (corAccessLine.c), when it was sent. */
void corAccessLogRequest(const CorRequest* r);
int corAccessLogOpen(const char* path, const char* format,
                     CorConfErrors* errors);

/* ---- The master (corMaster.c) and the processes -------------------------- */

/* The instance (corInstance.c): made by the master before its first
 * generation, or taken up from the old master's environment after an
 * upgrade. */
void corInstanceInit(bool upgraded);

/* What the master sends with the SIGQUIT (sigqueue) that tells a
 * generation another takes its place (corGenerationReplaced). */
#define COR_SIGNAL_REPLACED 0x7265706c

typedef struct {
    const char* configFile;
} CorOptions;

int corMasterRun(const CorOptions* options);

/* The master's files (corMasterFiles.c). The pid of a master alive on
 * the pid file path, else 0; this process's pid into it (0, or -1 said
 * on stderr). */
pid_t corMasterPidFileAlive(const char* path);
int corMasterPidFileWrite(const char* path);
/* The status file beside the pid file (malloc'ed path, NULL: no
 * memory); an outcome written into it with the next sequence number; the
 * sequence taken up from the file (a new master after an upgrade); and
 * the file removed (a master started afresh: a dead one's outcome is not
 * its own). */
char* corMasterStatusPath(const CorConfig* config);
void corMasterStatusWrite(const CorConfig* config, const char* outcome,
                          const char* detail);
void corMasterStatusContinue(const CorConfig* config);
void corMasterStatusReset(const CorConfig* config);

/* The rollback of a reload (corMasterRollback.c). The configuration a
 * reload replaced, kept (the callee owns it) while the new one is young;
 * and, each time a generation of the new one dies or cannot start, the
 * kept one when it is time to go back to it (the caller owns it then,
 * why says why), else NULL. */
void corMasterRollbackKeep(CorConfig* replaced);
CorConfig* corMasterRollbackDue(char* why, size_t cap);

/* The binary upgrade (corMasterUpgrade.c). The old master's side: start
 * the binary at corSelfPath on configFile with these listeners passed
 * (LISTEN_FDS), and the pipe it says "R" on once it serves (*readFdP, the
 * caller's to close). Returns its pid, or -1. */
pid_t corUpgradeSpawn(const CorListener* listeners, unsigned count,
                      const char* configFile, int* readFdP);
/* The new master's: the old master's pid when this one was started by an
 * upgrade, else 0 (and the variables leave the environment); the report
 * that it serves, once; and, in a generation, the pipe let go unsaid. */
pid_t corUpgradeInit(void);
void corUpgradeReport(void);
void corUpgradeForget(void);
/* A new master that did not start: SIGTERM (it stops the generation it
 * may have started), SIGKILL past 5 s; reaped. */
void corUpgradeAbandon(pid_t pid);
int corConfigCheck(const CorOptions* options);
int corSignalSend(const CorOptions* options, const char* command);

/* Load the modules, resolve the routes, check the listeners' protocols:
 * what a generation does before it serves, and all that `cor -t` does. */
int corGenerationPrepare(const CorConfig* config, CorConfErrors* errors);

/* Run a generation in this (forked) process; reports readiness on readyFd
 * and never returns. master: the pid of the master that forked it, whose
 * death makes the generation drain and exit. */
void corGenerationRun(const CorConfig* config, CorListener* listeners,
                      unsigned listenerCount, int readyFd, unsigned generation,
                      pid_t master) __attribute__((noreturn));

#endif /* COR_CORE_INT_H */
