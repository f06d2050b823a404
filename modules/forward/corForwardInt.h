/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside modules/forward: the upstream groups the YAML names
 * (corForward.c) and the headers a forward passes on, both ways
 * (corForwardHeaders.c).
 */
#ifndef COR_FORWARD_INT_H
#define COR_FORWARD_INT_H

#include "cor.h"
#include "corHttpClient.h"

#include <stdatomic.h>

/* Which Host the upstream gets. */
typedef enum {
    FORWARD_HOST_UPSTREAM,      /* the server's host[:port] (nginx's
                                   $proxy_host) */
    FORWARD_HOST_KEEP,          /* the client's Host */
    FORWARD_HOST_NAME           /* a name the YAML gives */
} ForwardHostMode;

/* A server of a group; owned by its group, for the generation. */
typedef struct {
    char* url;                  /* "http://host:port", no path */
    atomic_uint_fast64_t downUntil;     /* skipped until then (ms) */
} ForwardServer;

/* An upstream group; the module's, for the generation. Read by every
 * loop and worker at once: only next and the servers' downUntil change,
 * atomically. */
typedef struct {
    char* name;                 /* the handler routes name */
    ForwardServer* servers;
    unsigned serverCount;
    atomic_uint next;           /* round robin */
    int connectTimeoutMs;
    int readTimeoutMs;
    uint64_t failTimeoutMs;
    ForwardHostMode hostMode;
    char* host;                 /* FORWARD_HOST_NAME */
    bool underscores;           /* header names with '_' go on */
    bool http2;                 /* to http(s):// servers over HTTP/2 */
} ForwardGroup;

/*
 * The headers of r to send upstream, in r's arena: the end-to-end ones
 * (hop-by-hop removed: Connection and what it lists, Keep-Alive, TE,
 * Trailer, Transfer-Encoding, Upgrade, Proxy-*; the body's framing and
 * Expect, which this hop settled), Host as g says, X-Forwarded-For with
 * the client appended, X-Forwarded-Proto, and Via with this hop
 * appended. A field whose name has an underscore is dropped unless g
 * allows them (nginx's underscores_in_headers): "Transfer_Encoding" is
 * Transfer-Encoding to a server that maps '_' to '-' (CGI, PHP, many
 * frameworks) and would frame the body its own way. Returns 0 with
 * *headersP and *countP set, or -ENOMEM.
 */
int corForwardRequestHeaders(CorRequest* r, const ForwardGroup* g,
                             CorHeader** headersP, unsigned* countP);

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
