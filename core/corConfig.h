/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corConfig: the core's part of the configuration file, read into one
 * struct: the runtime (loops, workers, coroutines), the listeners, the
 * limits, the resolver, the modules to load, the routes and the logs.
 * Everything is checked here that can be checked without the modules:
 * kinds, units, ranges, addresses, duplicates, unknown keys. What needs
 * the loaded modules (does a route's handler exist, is a listener's
 * protocol registered, which keys of a module's mapping it read) is the
 * core's to check later; the nodes kept below give those errors a mark.
 *
 * Defaults, for every key the file leaves out:
 *
 *     key                          default     range
 *     runtime.loops                auto        1..1024 (auto: online CPUs)
 *     runtime.workers              8           1..4096
 *     runtime.coroutines.enabled   true
 *     runtime.coroutines.per_loop  1024        1..1048576
 *     runtime.coroutines.stack     256KiB      16KiB..64MiB
 *     runtime.stop_timeout         10s         0ms..1h
 *     runtime.stall_warning        100ms       0ms..1h (0ms: off)
 *     runtime.io                   epoll       epoll | uring (coroutine mode)
 *     listen                       required    at least one entry
 *     listen[].accept              share       share | reuseport
 *     listen[].http2               on with tls on | off (HTTP/2, h2c plain)
 *     listen[].http3               off | on, with tls only (HTTP/3, QUIC)
 *     listen[].tls.min_version     "1.2"       "1.2" | "1.3"
 *     listen[].tls.handshake_timeout 10s       1ms..1h
 *     listen[].tls.protocols       [TLSv1.2, TLSv1.3]  (or min_version)
 *     listen[].tls.ciphers         OpenSSL's   an OpenSSL cipher list
 *     listen[].tls.ciphersuites    OpenSSL's   TLS 1.3 suites, ':'-separated
 *     listen[].tls.groups          OpenSSL's   groups, ':'-separated
 *     listen[].tls.session_tickets true
 *     listen[].tls.session_lifetime 300s       1s..168h (whole seconds)
 *     listen[].tls.ocsp            none        { file } | { fetch: on,
 *                                              issuer }
 *     limits.connections           10000       1..10000000
 *     limits.header_bytes          16KiB       1KiB..1MiB
 *     limits.header_count          100         1..100
 *     limits.body_bytes            1MiB        0..1TiB
 *     limits.request_timeout       30s         1ms..1h
 *     limits.body_timeout          30s         1ms..1h
 *     limits.keepalive_timeout     60s         0ms..1h (0ms: no keep-alive)
 *     limits.send_timeout          30s         1ms..1h
 *     limits.body_memory           1MiB        0..1TiB
 *     limits.body_spool_dir        temp        temp ($TMPDIR, else /tmp) |
 *                                              a path, beside the file
 *     resolver.servers             system      system | "IP[, IP...]"
 *     resolver.timeout             2s          1ms..1m
 *     resolver.min_ttl             0s          0s..1d (in whole seconds)
 *     resolver.max_ttl             1h          0s..1d, >= min_ttl
 *     resolver.negative_ttl        5s          0s..1h (NXDOMAIN, no address)
 *     client.connect_timeout       5s          1ms..10m
 *     client.keepalive_per_peer    auto        auto | 0..100000 (0: no pool)
 *     client.idle_timeout          60s         1ms..1h
 *     client.notify_timeout        10s         1ms..1h
 *     client.ca_file               system      system | a PEM file, beside
 *                                              the file
 *     log.level                    info        debug | info | warn | error
 *     log.error                    stderr      stderr | a path
 *     log.access                   off         off | a path
 *     log.access_format            combined    combined | json
 *     log.pid_file                 cor.pid     a path, beside the file
 *     real_ip                      none        { from, header }
 *     real_ip.header               X-Forwarded-For  | X-Real-IP | Forwarded
 *     listen[].proxy_protocol      false       a boolean
 *
 * Ownership: a CorConfig and everything in it (strings, arrays, the tree
 * under root that the node fields point into) belong to the caller of
 * corConfigLoad and are released by corConfigFree().
 */
#ifndef COR_CONFIG_H
#define COR_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "corConf.h"
#include "corTemplate.h"

#define COR_CONFIG_MAX_LOOPS 1024

/*
 * client.keepalive_per_peer: auto (the default) keeps every connection
 * that comes back, up to COR_CONN_KEEPALIVE_AUTO_MAX a peer and a pool:
 * as many as the load had in use at once, the newest taken first, so
 * that what the load no longer uses sits at the old end until
 * client.idle_timeout closes it. A fixed bound below what is in use
 * closes and opens connections at every burst (64 clients through a
 * pool of 32 cost 1.6x nginx's CPU a request).
 */
#define COR_CONN_KEEPALIVE_AUTO UINT_MAX
#define COR_CONN_KEEPALIVE_AUTO_MAX 1024

/* A certificate's OCSP staple (its ocsp mapping): a response from a file,
 * or one fetched from the responder the certificate names. Paths as
 * read, a relative one taken beside the configuration file. */
typedef struct {
    char* file;          /* a DER OCSP response, stapled as it is; NULL:
                            none */
    bool fetch;          /* fetch: on */
    char* issuer;        /* the issuer's PEM certificate, which verifies a
                            fetched response; NULL: the chain's second */
    const CorConf* node; /* the ocsp mapping; NULL: no stapling */
} CorConfigOcsp;

/* A certificate chain and its private key, PEM files, paths as read (a
 * relative one taken beside the configuration file). */
typedef struct {
    char* name; /* the SNI name it serves ("b.test", "*.b.test");
                   NULL for the listener's default */
    char* certificate;
    char* key;
    CorConfigOcsp ocsp;
    const CorConf* node; /* its mapping, to mark load errors */
} CorConfigCert;

/* tls: { acme }: the listener's certificate obtained and renewed from an
 * ACME directory (RFC 8555) rather than read from files (corAcme.c). */
typedef struct {
    char* directory; /* the directory's https:// URL */
    char* email;     /* the account's contact; NULL: none */
    char** domains;  /* the names the certificate covers, [0] first */
    unsigned domainCount;
    char* storage;   /* the folder of the keys and the certificate */
    char* ca;        /* a CA file to trust the directory by; NULL: the
                        system's store */
    char* challenge; /* "http-01" */
    const CorConf* node;
} CorConfigAcme;

/* A listener's tls mapping: its connections speak TLS. The cipher and
 * group lists are OpenSSL's syntax, checked by the generation's load
 * (OpenSSL says what it takes). */
typedef struct {
    CorConfigCert* certs; /* [0] the default, then the sni entries */
    unsigned certCount;
    unsigned minVersion;       /* 0x0303 (TLS 1.2) or 0x0304 (TLS 1.3) */
    unsigned maxVersion;       /* the same; 0x0304 unless protocols says */
    char* ciphers;             /* TLS 1.2's; NULL: OpenSSL's default */
    char* ciphersuites;        /* TLS 1.3's; NULL: OpenSSL's default */
    char* groups;              /* key exchange; NULL: OpenSSL's default */
    unsigned sessionLifetimeS; /* a session's and its ticket's */
    uint64_t handshakeTimeoutMs;
    bool sessionTickets; /* resumption by tickets (no session cache) */
    char* tickets;       /* their keys' Redis; NULL: this process's own */
    CorConfigAcme* acme; /* the default certificate's issuer; NULL: the
                            certificate and key files */
    const CorConf* node; /* the tls mapping, to mark load errors */
} CorConfigTls;

/* One listen entry: { protocol: http, address: 127.0.0.1:8080 }. */
typedef struct {
    char* protocol; /* a name modules register: http, https, ... */
    char* address;  /* as written: "127.0.0.1:8080", "[::1]:8080",
                       "*:8080", ":8080" (* or empty: any IPv4) */
    struct sockaddr_storage addr;
    socklen_t addrLen;
    CorConfigTls* tls;   /* NULL: plain (a TLS name, https, requires it) */
    bool reusePort;      /* accept: share (false) | reuseport (true) */
    bool http2;          /* http2: on | off (default: on over TLS, off
                            plain); a protocol that speaks HTTP/2 reads it */
    bool http3;          /* http3: on | off (default off; on needs tls):
                            HTTP/3 over QUIC on UDP at the same address */
    bool proxyProtocol;  /* proxy_protocol: a PROXY header (v1 or v2)
                            comes first on each connection */
    const CorConf* node; /* the entry's mapping */
} CorConfigListen;

/* real_ip: a peer in one of the from networks says who its client is in
 * header (corRealIp.c). */
typedef enum {
    COR_REAL_IP_X_FORWARDED_FOR,
    COR_REAL_IP_X_REAL_IP,
    COR_REAL_IP_FORWARDED /* RFC 7239's for= */
} CorRealIpHeader;

typedef struct {
    struct CorNet* from;
    unsigned fromCount;
    CorRealIpHeader header;
    const char* headerName; /* as a request spells it, any case */
} CorConfigRealIp;

/* One modules entry: { load: hello, greeting: "hi" }. */
typedef struct {
    char* load;          /* a name ("hello": modules/hello.so next to
                            the binary) or a path ending in .so */
    const CorConf* node; /* the whole mapping, handed to the module; the
                            core reads only 'load' */
} CorConfigModule;

/*
 * A route's notify: where the request's body goes (corNotify) once its
 * answer is out, for the methods and statuses said. Every string is the
 * configuration tree's; the URLs' schemes are checked once the modules
 * registered theirs (corRouteNotify.c).
 */
typedef struct CorConfigNotify {
    const CorConf** urls; /* each a string node: its text is the URL,
                             its mark an error's */
    unsigned urlCount;
    const char** methods; /* POST, PUT, PATCH, DELETE by default */
    unsigned methodCount;
    uint64_t statuses[10]; /* one bit per status 0..639; 2xx by
                              default */
} CorConfigNotify;

/* An error page: answers of a status in [from, to] get the file's
 * bytes as their body (error_pages: { "404": FILE, "5xx": FILE }). */
typedef struct {
    unsigned from;
    unsigned to;
    char* file;          /* beside the configuration file */
    const CorConf* node; /* its value, to mark errors */
} CorConfigErrorPage;

/* A request header a route sets: its name and its value's template. */
typedef struct {
    char* name;
    CorTemplate value;
} CorConfigHeaderSet;

/* One routes entry: { match: "GET /hello", handler: hello, timeout: 2s }. */
typedef struct {
    char* method; /* NULL: any method */
    char* path;   /* starts with '/'; without the '*' of a prefix; NULL
                     for a regex */
    bool prefix;  /* the match ended in '*' */
    char* regex;  /* match: "~REGEX" (or "~*REGEX", regexCaseless):
                     compiled with the routes; NULL for a path */
    bool regexCaseless;
    char** hosts; /* host: names (lowercased) and "*.suffix"; none: any */
    unsigned hostCount;
    char* handler;                  /* NULL for a redirect or a rewrite */
    CorTemplate* redirect;          /* redirect.to, or NULL */
    unsigned redirectStatus;        /* 301, 302, 303, 307, 308 */
    CorTemplate* rewrite;           /* rewrite: the new target, or NULL */
    CorConfigHeaderSet* requestSet; /* request_headers.set */
    unsigned requestSetCount;
    char** requestRemove; /* request_headers.remove */
    unsigned requestRemoveCount;
    CorConfigErrorPage* errorPages; /* error_pages of the route */
    unsigned errorPageCount;
    uint64_t timeoutMs;     /* the handler's deadline here; 0: its own */
    char* stripPrefix;      /* taken off the path the handler sees; NULL:
                               none */
    const CorConf* guard;   /* guard: a name or a list of names, run in
                               order before the handler; NULL: none */
    const CorConf* headers; /* headers: a mapping of names to values added
                               to every answer of the route; NULL: none */
    char** filtersOff;      /* the filters it turns off (`filters:`), by
                               name; checked once the modules added theirs */
    unsigned filtersOffCount;
    CorConfigNotify* notify; /* notify: NULL when none */
    char* cache;             /* cache: a cache's name, looked up once the
                                modules registered theirs; NULL: none */
    /* limits: the keys of the top level's that apply once the route is
     * known, before the body is read; a key not given is the top
     * level's (has* false). */
    struct {
        bool hasBodyBytes;
        size_t bodyBytes;
        bool hasBodyTimeout;
        uint64_t bodyTimeoutMs;
    } limits;
    const CorConf* node; /* the entry's mapping, to mark handler errors */
} CorConfigRoute;

typedef struct {
    char* file;
    struct {
        unsigned loops;
        unsigned workers;
        struct {
            bool enabled;
            unsigned perLoop;
            size_t stack;
        } coroutines;
        uint64_t stopTimeoutMs;
        uint64_t stallWarningMs;
        bool uring; /* runtime.io: uring */
    } runtime;
    CorConfigListen* listen;
    unsigned listenCount;
    struct {
        unsigned connections;
        size_t headerBytes;
        unsigned headerCount;
        size_t bodyBytes;
        uint64_t requestTimeoutMs; /* the whole header */
        uint64_t bodyTimeoutMs;    /* between two reads of the body */
        uint64_t keepaliveTimeoutMs;
        uint64_t sendTimeoutMs;
        size_t bodyMemory;  /* a buffered body past it is spooled */
        char* bodySpoolDir; /* where, NULL: $TMPDIR or /tmp */
    } limits;
    struct {
        char* servers; /* "system" or "IP[, IP...]" */
        uint64_t timeoutMs;
        unsigned minTtlS;
        unsigned maxTtlS;
        unsigned negativeTtlS;
    } resolver;
    struct {
        uint64_t connectTimeoutMs; /* the name, the connect, TLS */
        unsigned keepalivePerPeer; /* idle connections kept per peer, or
                                    * COR_CONN_KEEPALIVE_AUTO */
        uint64_t idleTimeoutMs;    /* how long one is kept idle */
        uint64_t notifyTimeoutMs;  /* a notification's, by default */
        char* caFile;              /* NULL: the system's store */
    } client;
    CorConfigModule* modules;
    unsigned moduleCount;
    CorConfigRoute* routes;
    unsigned routeCount;
    CorConfigErrorPage* errorPages; /* error_pages at the top */
    unsigned errorPageCount;
    CorConfigRealIp* realIp; /* NULL: none */
    struct {
        char* level;        /* debug, info, warn, error */
        char* error;        /* "stderr" or a path */
        char* access;       /* "off" or a path */
        char* accessFormat; /* combined | json */
        char* pidFile;      /* beside the configuration file */
    } log;
    CorConf* root;
} CorConfig;

/*
 * Read the configuration file at path. Returns NULL when anything is wrong,
 * with every error found appended to errors (all of them, not just the
 * first: a file that loads as YAML is read to the end). The caller frees
 * the result with corConfigFree().
 */
CorConfig* corConfigLoad(const char* path, CorConfErrors* errors);

/* The same for text in memory; name stands for the file in errors. */
CorConfig* corConfigLoadString(const char* name, const char* text, size_t len,
                               CorConfErrors* errors);

/*
 * path as the configuration file at configFile names it: an absolute path
 * as it is, a relative one in the file's folder ("conf/cor.yaml" and
 * "cor.pid" give "conf/cor.pid"; "cor.yaml" gives "./cor.pid", a path
 * with a slash, which dlopen does not look up in its search path; a
 * leading "./" of path is dropped, not doubled: "./x.so" gives "./x.so").
 * Returns a string the caller frees, or NULL when out of memory.
 */
char* corConfigPathBeside(const char* configFile, const char* path);

/*
 * What a start of cf would open for writing (the error and access logs,
 * the pid file), looked at without creating or truncating anything: each
 * that could not be opened is an error at its key. `cor -t` runs it; a
 * load does not, so that reading a file never depends on the machine.
 */
void corConfigFilesCheck(const CorConfig* cf, CorConfErrors* errors);

/* Free a config and its tree. NULL is fine. */
void corConfigFree(CorConfig* cf);

#endif /* COR_CONFIG_H */
