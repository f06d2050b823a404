/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside modules/forward: the upstream groups the YAML names
 * (corForward.c), how a request's server is chosen among a group's
 * (corForwardBalance.c) and the headers a forward passes on, both ways
 * (corForwardHeaders.c).
 */
#ifndef COR_FORWARD_INT_H
#define COR_FORWARD_INT_H

#include "cor.h"

#include <stdatomic.h>
#include <stdbool.h>

/* Which Host the upstream gets. */
typedef enum {
    FORWARD_HOST_UPSTREAM, /* the server's host[:port] (nginx's
                              $proxy_host) */
    FORWARD_HOST_KEEP,     /* the client's Host */
    FORWARD_HOST_NAME      /* a name the YAML gives */
} ForwardHostMode;

/* How a group chooses a request's server. */
typedef enum {
    FORWARD_BALANCE_ROUND_ROBIN,
    FORWARD_BALANCE_LEAST_CONN, /* the fewest requests in flight */
    FORWARD_BALANCE_HASH        /* a consistent hash of a key */
} ForwardBalance;

/* What a hashing group hashes. */
typedef enum {
    FORWARD_HASH_IP,    /* the client's address */
    FORWARD_HASH_PATH,  /* the path, as the client encoded it */
    FORWARD_HASH_HEADER /* a request field's value */
} ForwardHashKey;

typedef struct ForwardGroup ForwardGroup;

/* A server of a group; owned by its group, for the generation. */
typedef struct {
    char* url; /* "http://host:port", no path */
    /* url taken apart once: what each request's client call starts from
     * (no parse, no scheme lookup a request) */
    CorClientTarget* target;
    ForwardGroup* group;
    atomic_uint_fast64_t downUntil; /* skipped until then (ms) */
    atomic_uint inFlight;           /* requests on it now, every loop's */
    atomic_bool unhealthy;          /* its health checks say down */
    /* Its prober's alone: the checks that failed, or passed, in a row. */
    unsigned failRun;
    unsigned passRun;
} ForwardServer;

/* A group's active health check (health:); off when path is NULL. */
typedef struct {
    char* path; /* "/health", GET on each server */
    int intervalMs;
    int timeoutMs;
    unsigned fails;  /* failures in a row that take it out */
    unsigned passes; /* passes in a row that bring it back */
    int statusMin;   /* a pass: a status in [min, max] */
    int statusMax;
} ForwardHealth;

/* A point of a hashing group's ring: a virtual node of a server. */
typedef struct {
    uint64_t hash;
    unsigned server; /* its index in the group */
} ForwardRingPoint;

/* An upstream group; the module's, for the generation. Read by every
 * loop and worker at once: only next and the servers' downUntil change,
 * atomically. */
struct ForwardGroup {
    char* name; /* the handler routes name */
    ForwardServer* servers;
    unsigned serverCount;
    atomic_uint next; /* round robin, and least_conn's ties */
    ForwardBalance balance;
    ForwardHashKey hashKey;
    char* hashHeader;       /* FORWARD_HASH_HEADER: the field's name */
    ForwardRingPoint* ring; /* FORWARD_BALANCE_HASH: sorted by hash */
    unsigned ringCount;
    int connectTimeoutMs;
    int readTimeoutMs;
    uint64_t failTimeoutMs;
    ForwardHostMode hostMode;
    char* host;       /* FORWARD_HOST_NAME */
    bool underscores; /* header names with '_' go on */
    bool http2;       /* to http(s):// servers over HTTP/2 */
    bool buffering;   /* request_buffering: the body whole first */
    ForwardHealth health;
};

/*
 * Read a group's balance and hash keys from its YAML mapping entry, and
 * build the ring of a hashing group (its servers read already). Returns
 * 0, or -1 after a module error.
 */
int corForwardBalanceRead(CorModule* m, const CorConf* entry, ForwardGroup* g);

/*
 * The server of g for r by g's balance, skipping those in tried (one flag
 * a server, set here for the one returned) and those resting after a
 * failure; when every untried one rests, an untried one anyway (better a
 * try than a sure 502). NULL when every server was tried. Counted in
 * flight (corForwardServerDone ends it).
 */
ForwardServer* corForwardPick(ForwardGroup* g, const CorRequest* r,
                              bool* tried);

/* The end of a request on s, counted in flight by corForwardPick. */
void corForwardServerDone(ForwardServer* s);

/* Whether the balancer takes s now: its health checks pass, and it does
 * not rest after a failed connect (now: corEvClockMs()). */
bool corForwardServerUsable(ForwardServer* s, uint64_t now);

/* Read a group's health: mapping (none: no checks). Returns 0, or -1
 * after a module error. */
int corForwardHealthRead(CorModule* m, const CorConf* entry, ForwardGroup* g);

/* Start g's probers: a background task a server (corTaskSpawn), for the
 * generation, off the request path. Called on loop 0 (loopInit). Returns
 * 0 or -errno (logged). */
int corForwardHealthStart(ForwardGroup* g);

/*
 * The Upgrade field of r when r asks to switch protocols in a way this
 * hop passes on (a GET whose Connection lists upgrade, with an Upgrade
 * that is not h2c, which is the hop's own; g not over HTTP/2), else NULL.
 */
const CorHeader* corForwardUpgradeAsked(const CorRequest* r,
                                        const ForwardGroup* g);

/*
 * The upstream said 101 to r's upgrade (x, res open on s): answer r with
 * 101 and the upstream's end-to-end fields (Sec-WebSocket-Accept...), and
 * once it went out splice the client's connection and the upstream's.
 * Returns true when the splice took s (it ends s's count in flight when
 * it ends); false after r was answered otherwise (502).
 */
bool corForwardUpgradePass(CorRequest* r, ForwardGroup* g, CorClientStream* x,
                           CorClientResponse* res, ForwardServer* s);

/*
 * The headers of r to send upstream, in r's arena: the end-to-end ones
 * (hop-by-hop removed: Connection and what it lists, Keep-Alive, TE,
 * Trailer, Transfer-Encoding, Upgrade, Proxy-*; the body's framing and
 * Expect, which this hop settled), Host as g says, X-Forwarded-For with
 * the client appended, X-Forwarded-Proto, and Via with this hop
 * appended, and an upgrade asked again (corForwardUpgradeAsked). A field
 * whose name has an underscore is dropped unless g
 * allows them (nginx's underscores_in_headers): "Transfer_Encoding" is
 * Transfer-Encoding to a server that maps '_' to '-' (CGI, PHP, many
 * frameworks) and would frame the body its own way. A subscription's
 * message (MQTT) has no client's head: its own fields (MQTT-QoS,
 * MQTT-Retain, Content-Type) go as they are, each of its user properties
 * as MQTT-User-NAME, then Host as g says and Via. Returns 0 with
 * *headersP and *countP set, or -ENOMEM.
 */
int corForwardRequestHeaders(CorRequest* r, const ForwardGroup* g,
                             CorHeader** headersP, unsigned* countP);

/*
 * The method r goes upstream with, NUL-terminated (in r's arena, or
 * static): its own; for a subscription's message (MQTT), which no HTTP
 * application knows by its method MQTT, POST or what its subscription's
 * method: says (its MQTT-Method field). NULL without memory.
 */
const char* corForwardMethod(CorRequest* r);

/*
 * Set the end-to-end headers of an upstream's answer on r (hop-by-hop
 * ones, Transfer-Encoding, Server and Date, which this hop writes, are
 * left out; its Content-Length stays, for the HTTP module to frame the
 * answer with), and return its
 * Content-Type as a string in r's arena (NULL when it has none). Returns
 * 0 or -ENOMEM.
 */
int corForwardResponseHeaders(CorRequest* r, const CorClientResponse* res,
                              const char** contentTypeP);

/* The trailers of an upstream's answer (res's, read to its end) set on r
 * as its own (corResponseTrailer), less the hop-by-hop ones. Returns 0
 * or -ENOMEM. */
int corForwardResponseTrailers(CorRequest* r, const CorClientResponse* res);

/* The URL of r on server s (its path as the client encoded it, dot
 * segments removed, or else percent-encoded again; its query as it came),
 * in r's arena; NULL without memory. */
char* corForwardUrl(CorRequest* r, const ForwardServer* s);

#endif /* COR_FORWARD_INT_H */
