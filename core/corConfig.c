/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core's schema: the configuration tree read into a CorConfig, with
 * every section checked and every error collected. Each section is read
 * from its mapping with the corConf getters, which fall back to the
 * default when a key (or the whole section) is absent; then the keys that
 * nothing read are reported as unknown. An error in one place never stops
 * the reading of the others, so one run lists every mistake in the file.
 *
 * The defaults and ranges are the table in corConfig.h.
 */
#include "corConfig.h"
#include "corConfigRead.h"

#include "corAutoConfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint64_t kib = 1024;
static const uint64_t mib = 1024 * 1024;
static const uint64_t gib = 1024 * 1024 * 1024;
static const uint64_t second = 1000;
static const uint64_t minute = 60 * 1000;
static const uint64_t hour = 60 * 60 * 1000;
static const uint64_t day = 24 * 60 * 60 * 1000;

/* A where name for messages: "listen[2]". */
typedef struct {
    char text[48];
} Where;

static const char* const topKeys[] = {
    "runtime", "listen", "limits",      "resolver", "client",  "modules",
    "routes",  "log",    "error_pages", "include",  "real_ip", NULL,
};

/* What an included file adds to (docs/configuration.md "include"). */
static const char* const includedLists[] = { "listen", "modules", "routes",
                                             NULL };

/* ---- Helpers ------------------------------------------------------------- */

static Where
whereAt(const char* list, size_t i)
{
    Where w;

    snprintf(w.text, sizeof(w.text), "%s[%zu]", list, i);
    return w;
}

/* How a node of the wrong kind is named in "got ...": a list, '8080'. */
static Where
kindName(const CorConf* node)
{
    Where w;
    const char* text = corConfText(node);

    if (corConfKind(node) == COR_CONF_MAP) {
        snprintf(w.text, sizeof(w.text), "a mapping");
    } else if (corConfKind(node) == COR_CONF_SEQ) {
        snprintf(w.text, sizeof(w.text), "a list");
    } else if (text[0] == '\0') {
        snprintf(w.text, sizeof(w.text), "nothing");
    } else if (strlen(text) < sizeof(w.text) - 2) {
        snprintf(w.text, sizeof(w.text), "'%s'", text);
    } else {
        snprintf(w.text, sizeof(w.text), "'%.*s...'", (int)sizeof(w.text) - 6,
                 text);
    }
    return w;
}

/* Whether a list's entry is a mapping; reports it at where when not. */
static bool
isMapping(const CorConf* entry, const char* where, const char* example,
          CorConfErrors* e)
{
    if (corConfKind(entry) == COR_CONF_MAP) {
        return true;
    }
    corConfErrorf(e, entry, "%s: expected a mapping such as %s, got %s", where,
                  example, kindName(entry).text);
    return false;
}

/*
 * The zeroed entries of a list (NULL: absent), size bytes each, one per
 * item, and their count in *count; NULL and 0 for an empty list or out
 * of memory (reported).
 */
static void*
entriesAlloc(const CorConf* list, size_t size, unsigned* count,
             CorConfErrors* e)
{
    size_t n = list != NULL ? corConfCount(list) : 0;
    void* entries = n > 0 ? calloc(n, size) : NULL;

    if (n > 0 && entries == NULL) {
        corConfErrorf(e, list, "out of memory reading the configuration");
    }
    *count = entries != NULL ? (unsigned)n : 0;
    return entries;
}

static bool
isToken(const char* s, const char* extra)
{
    if (*s == '\0') {
        return false;
    }
    for (; *s; s++) {
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= '0' && *s <= '9')
            && strchr(extra, *s) == NULL) {
            return false;
        }
    }
    return true;
}

static bool
endsWith(const char* s, const char* tail)
{
    size_t ls = strlen(s);
    size_t lt = strlen(tail);

    return ls >= lt && strcmp(s + ls - lt, tail) == 0;
}

/* ---- runtime ------------------------------------------------------------- */

static unsigned
onlineCpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (n < 1) {
        return 1;
    }
    return n > COR_CONFIG_MAX_LOOPS ? COR_CONFIG_MAX_LOOPS : (unsigned)n;
}

/* loops: auto or a number; "auto" is not an integer, so it is read here
 * before corConfInt would refuse it. */
static unsigned
readLoops(const CorConf* runtime, CorConfErrors* e)
{
    const CorConf* node = corConfGet(runtime, "loops");
    const char* text = node ? corConfText(node) : NULL;

    if (node == NULL || (text != NULL && strcmp(text, "auto") == 0)) {
        return onlineCpus();
    }
    if (text != NULL && text[0] != '\0'
        && strspn(text, "+-0123456789") != strlen(text)) {
        corConfErrorf(e, node,
                      "loops: expected auto or a number of loops, got '%s'",
                      text);
        return onlineCpus();
    }
    return (unsigned)corConfInt(runtime, "loops", onlineCpus(), 1,
                                COR_CONFIG_MAX_LOOPS, e);
}

/* The loops' backend. io_uring serves coroutine mode only (blocking mode
 * never uses it), so asking for it where it cannot run is an error at
 * `cor -t`, not a silent epoll; a kernel that refuses it at start is
 * logged and served on epoll (corGeneration.c), since that is the
 * machine's doing, not the file's. */
static void
readIo(CorConfig* cf, const CorConf* runtime, CorConfErrors* e)
{
    const CorConf* node = corConfGet(runtime, "io");
    const char* io = corConfString(runtime, "io", "epoll", e);

    if (strcmp(io, "epoll") == 0) {
        return;
    }
    if (strcmp(io, "uring") != 0) {
        corConfErrorf(e, node, "io: expected epoll or uring, got '%s'", io);
    } else if (!COR_HAVE_URING) {
        corConfErrorf(e, node,
                      "io: uring: this build has no io_uring "
                      "backend (configured without liburing, or with "
                      "--disable-coroutines or --disable-uring)");
    } else if (!cf->runtime.coroutines.enabled) {
        corConfErrorf(e, node,
                      "io: uring serves coroutine mode only, and "
                      "runtime.coroutines.enabled is false");
    } else {
        cf->runtime.uring = true;
    }
}

static void
readRuntime(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    static const char* const keys[] = {
        "loops",         "workers", "coroutines", "stop_timeout",
        "stall_warning", "io",      NULL,
    };
    static const char* const coKeys[] = { "enabled", "per_loop", "stack",
                                          NULL };
    const CorConf* runtime = corConfMap(root, "runtime", e);
    const CorConf* co = corConfMap(runtime, "coroutines", e);

    cf->runtime.loops = readLoops(runtime, e);
    cf->runtime.workers = (unsigned)corConfInt(runtime, "workers", 8, 1, 4096,
                                               e);
    cf->runtime.coroutines.enabled = corConfBool(co, "enabled", true, e);
    cf->runtime.coroutines.perLoop = (unsigned)corConfInt(co, "per_loop", 1024,
                                                          1, 1048576, e);
    cf->runtime.coroutines.stack = (size_t)corConfSize(co, "stack", 256 * kib,
                                                       16 * kib, 64 * mib, e);
    cf->runtime.stopTimeoutMs = corConfDurationMs(runtime, "stop_timeout",
                                                  10 * second, 0, hour, e);
    cf->runtime.stallWarningMs = corConfDurationMs(runtime, "stall_warning",
                                                   100, 0, hour, e);
    readIo(cf, runtime, e);
    corConfUnknownKeys(co, "runtime.coroutines", coKeys, e);
    corConfUnknownKeys(runtime, "runtime", keys, e);
}

/* ---- listen -------------------------------------------------------------- */

static bool
parsePort(const char* s, in_port_t* port, const CorConf* node, CorConfErrors* e)
{
    unsigned long v = 0;
    size_t n = strspn(s, "0123456789");

    if (n == 0 || s[n] != '\0') {
        corConfErrorf(e, node,
                      "address: expected a port number after ':', got '%s'",
                      corConfText(node));
        return false;
    }
    for (size_t i = 0; i < n && v <= 65535; i++) {
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v < 1 || v > 65535) {
        corConfErrorf(e, node, "address: port %s is out of range (1..65535)",
                      s);
        return false;
    }
    *port = htons((in_port_t)v);
    return true;
}

static bool
parseIpv6(const CorConf* node, const char* text, struct sockaddr_in6* sin6,
          const char** port, CorConfErrors* e)
{
    const char* end = strchr(text, ']');
    char host[INET6_ADDRSTRLEN + 1];
    size_t len;

    if (end == NULL || end[1] != ':') {
        corConfErrorf(e, node,
                      "address: expected [IPv6]:PORT such as [::1]:8080, "
                      "got '%s'",
                      text);
        return false;
    }
    len = (size_t)(end - text - 1);
    if (len >= sizeof(host)) {
        len = sizeof(host) - 1;
    }
    memcpy(host, text + 1, len);
    host[len] = '\0';
    if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1) {
        corConfErrorf(e, node, "address: '%s' is not an IPv6 address", host);
        return false;
    }
    sin6->sin6_family = AF_INET6;
    *port = end + 2;
    return true;
}

static bool
parseIpv4(const CorConf* node, const char* text, struct sockaddr_in* sin,
          const char** port, CorConfErrors* e)
{
    const char* colon = strrchr(text, ':');
    char host[INET_ADDRSTRLEN + 1];
    size_t len;

    if (colon == NULL) {
        corConfErrorf(e, node,
                      "address: expected HOST:PORT such as 127.0.0.1:8080, "
                      "[::1]:8080 or *:8080, got '%s'",
                      text);
        return false;
    }
    len = (size_t)(colon - text);
    if (memchr(text, ':', len) != NULL) {
        corConfErrorf(e, node,
                      "address: an IPv6 address goes in brackets, such as "
                      "[::1]:8080, got '%s'",
                      text);
        return false;
    }
    sin->sin_family = AF_INET;
    *port = colon + 1;
    if (len == 0 || (len == 1 && text[0] == '*')) {
        sin->sin_addr.s_addr = htonl(INADDR_ANY);
        return true;
    }
    if (len >= sizeof(host)) {
        len = sizeof(host) - 1;
    }
    memcpy(host, text, len);
    host[len] = '\0';
    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        return true;
    }
    if (strspn(host, "0123456789.") != strlen(host)) {
        corConfErrorf(e, node,
                      "address: '%.*s' is not an IP address (host names "
                      "are not resolved here: use 127.0.0.1, [::1] or *)",
                      (int)(colon - text), text);
    } else {
        corConfErrorf(e, node, "address: '%s' is not an IPv4 address", host);
    }
    return false;
}

/* "127.0.0.1:8080", "[::1]:8080", "*:8080", ":8080" into l->addr. */
static bool
parseAddress(CorConfigListen* l, const CorConf* node, CorConfErrors* e)
{
    const char* text = corConfText(node);
    const char* port = NULL;
    in_port_t p = 0;

    memset(&l->addr, 0, sizeof(l->addr));
    if (text[0] == '[') {
        struct sockaddr_in6* sin6 = (struct sockaddr_in6*)&l->addr;

        if (!parseIpv6(node, text, sin6, &port, e)
            || !parsePort(port, &p, node, e)) {
            return false;
        }
        sin6->sin6_port = p;
        l->addrLen = sizeof(*sin6);
    } else {
        struct sockaddr_in* sin = (struct sockaddr_in*)&l->addr;

        if (!parseIpv4(node, text, sin, &port, e)
            || !parsePort(port, &p, node, e)) {
            return false;
        }
        sin->sin_port = p;
        l->addrLen = sizeof(*sin);
    }
    return true;
}

static bool
isAnyAddress(const struct sockaddr_storage* ss)
{
    if (ss->ss_family == AF_INET) {
        return ((const struct sockaddr_in*)ss)->sin_addr.s_addr
               == htonl(INADDR_ANY);
    }
    return IN6_IS_ADDR_UNSPECIFIED(
        &((const struct sockaddr_in6*)ss)->sin6_addr);
}

static in_port_t
portOf(const struct sockaddr_storage* ss)
{
    if (ss->ss_family == AF_INET) {
        return ((const struct sockaddr_in*)ss)->sin_port;
    }
    return ((const struct sockaddr_in6*)ss)->sin6_port;
}

static bool
sameHost(const struct sockaddr_storage* a, const struct sockaddr_storage* b)
{
    if (a->ss_family == AF_INET) {
        return ((const struct sockaddr_in*)a)->sin_addr.s_addr
               == ((const struct sockaddr_in*)b)->sin_addr.s_addr;
    }
    return memcmp(&((const struct sockaddr_in6*)a)->sin6_addr,
                  &((const struct sockaddr_in6*)b)->sin6_addr,
                  sizeof(struct in6_addr))
           == 0;
}

/* Refuse an address listened on before, and one that a wildcard on the
 * same port already covers: bind() would fail on either, later and
 * without a line number. Different families never clash here; whether
 * [::] also takes IPv4 is the listener's IPV6_V6ONLY choice. */
static void
checkDuplicate(const CorConfig* cf, unsigned i, const CorConf* node,
               CorConfErrors* e)
{
    const CorConfigListen* l = &cf->listen[i];

    for (unsigned j = 0; j < i; j++) {
        const CorConfigListen* o = &cf->listen[j];
        const CorConf* first;
        char at[PATH_MAX];

        if (o->addrLen == 0 || o->addr.ss_family != l->addr.ss_family
            || portOf(&o->addr) != portOf(&l->addr)) {
            continue;
        }
        first = corConfGet(o->node, "address");
        if (sameHost(&o->addr, &l->addr)) {
            bool same = strcmp(l->address, o->address) == 0;

            corConfErrorf(e, node,
                          "address: '%s' is already listened on%s%s%s "
                          "(first at %s)",
                          l->address, same ? "" : " as '",
                          same ? "" : o->address, same ? "" : "'",
                          corConfigFirstAt(first, node, at, sizeof(at)));
            return;
        }
        if (isAnyAddress(&o->addr) || isAnyAddress(&l->addr)) {
            corConfErrorf(e, node,
                          "address: '%s' overlaps '%s' (first at %s): a "
                          "wildcard takes its port on every address",
                          l->address, o->address,
                          corConfigFirstAt(first, node, at, sizeof(at)));
            return;
        }
    }
}

static void
readProtocol(CorConfigListen* l, const char* where, CorConfErrors* e)
{
    const char* protocol;

    if (!corConfigRequired(l->node, "protocol", where, "such as http", e)) {
        return;
    }
    protocol = corConfString(l->node, "protocol", NULL, e);
    if (protocol != NULL && !isToken(protocol, "_-")) {
        corConfErrorf(e, corConfGet(l->node, "protocol"),
                      "protocol: expected a protocol name such as http "
                      "(a-z, 0-9, _ and -), got '%s'",
                      protocol);
        return;
    }
    corConfigSetString(&l->protocol, protocol, e);
}

/* Whether a listener needs tls is its protocol's to say (https, named by
 * CorProtocol.tlsName): the generation checks it once the modules are
 * loaded (checkListeners); the master knows no protocol. */
static void
readListenEntry(CorConfig* cf, unsigned i, CorConfErrors* e)
{
    static const char* const keys[] = {
        "protocol", "address",        "tls", "accept", "http2",
        "http3",    "proxy_protocol", NULL,
    };
    static const char* const accepts[] = { "share", "reuseport", NULL };
    CorConfigListen* l = &cf->listen[i];
    Where w = whereAt("listen", i);
    const CorConf* tls;
    const CorConf* address;

    if (!isMapping(l->node, w.text,
                   "{ protocol: http, address: 127.0.0.1:8080 }", e)) {
        return;
    }
    readProtocol(l, w.text, e);
    address = corConfigRequired(l->node, "address", w.text,
                                "such as 127.0.0.1:8080", e);
    if (address != NULL && corConfString(l->node, "address", NULL, e) != NULL
        && parseAddress(l, address, e)) {
        corConfigSetString(&l->address, corConfText(address), e);
        checkDuplicate(cf, i, address, e);
    }
    tls = corConfMap(l->node, "tls", e);
    if (tls != NULL) {
        corConfigTlsRead(l, tls, w.text, e);
    }
    l->reusePort = strcmp(corConfigOneOf(l->node, "accept", "share", accepts,
                                         e),
                          "reuseport")
                   == 0;
    l->http2 = corConfBool(l->node, "http2", l->tls != NULL, e);
    l->http3 = corConfBool(l->node, "http3", false, e);
    if (l->http3 && l->tls == NULL) {
        /* QUIC has no plain form: its handshake is TLS 1.3's. */
        corConfErrorf(e, corConfGet(l->node, "http3"),
                      "http3: on needs tls (QUIC is always encrypted), such "
                      "as { protocol: https, http3: on, tls: { certificate: "
                      "c.pem, key: k.pem } }");
    }
    l->proxyProtocol = corConfBool(l->node, "proxy_protocol", false, e);
    corConfUnknownKeys(l->node, w.text, keys, e);
}

static void
readListen(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    const CorConf* list;

    if (corConfGet(root, "listen") == NULL) {
        corConfErrorf(e, root,
                      "missing 'listen' (at least one listener is required, "
                      "such as listen: [{ protocol: http, address: "
                      "127.0.0.1:8080 }])");
        return;
    }
    list = corConfGet(root, "listen");
    if (corConfKind(list) != COR_CONF_SEQ) {
        corConfErrorf(e, list,
                      "listen: expected a list of listeners such as "
                      "[{ protocol: http, address: 127.0.0.1:8080 }], got %s",
                      kindName(list).text);
        return;
    }
    if (corConfCount(list) == 0) {
        corConfErrorf(e, list,
                      "listen: at least one listener is required, such as "
                      "{ protocol: http, address: 127.0.0.1:8080 }");
        return;
    }
    cf->listen = entriesAlloc(list, sizeof(*cf->listen), &cf->listenCount, e);
    for (unsigned i = 0; i < cf->listenCount; i++) {
        cf->listen[i].node = corConfAt(list, i);
        readListenEntry(cf, i, e);
    }
}

/* ---- limits, resolver ---------------------------------------------------- */

static void
readLimits(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    static const char* const keys[] = {
        "connections",
        "header_bytes",
        "header_count",
        "body_bytes",
        "request_timeout",
        "body_timeout",
        "keepalive_timeout",
        "send_timeout",
        "body_memory",
        "body_spool_dir",
        NULL,
    };
    const char* spoolDir;
    const CorConf* m = corConfMap(root, "limits", e);

    cf->limits.connections = (unsigned)corConfInt(m, "connections", 10000, 1,
                                                  10000000, e);
    cf->limits.headerBytes = (size_t)corConfSize(m, "header_bytes", 16 * kib,
                                                 kib, mib, e);
    cf->limits.headerCount = (unsigned)corConfInt(m, "header_count", 100, 1,
                                                  10000, e);
    cf->limits.bodyBytes = (size_t)corConfSize(m, "body_bytes", mib, 0,
                                               1024 * gib, e);
    cf->limits.requestTimeoutMs = corConfDurationMs(m, "request_timeout",
                                                    30 * second, 1, hour, e);
    cf->limits.bodyTimeoutMs = corConfDurationMs(m, "body_timeout", 30 * second,
                                                 1, hour, e);
    cf->limits.keepaliveTimeoutMs = corConfDurationMs(m, "keepalive_timeout",
                                                      60 * second, 0, hour, e);
    cf->limits.sendTimeoutMs = corConfDurationMs(m, "send_timeout", 30 * second,
                                                 1, hour, e);
    cf->limits.bodyMemory = (size_t)corConfSize(m, "body_memory", mib, 0,
                                                1024 * gib, e);
    spoolDir = corConfigNonEmpty(m, "body_spool_dir", "temp",
                                 "a path or "
                                 "temp",
                                 e);
    free(cf->limits.bodySpoolDir);
    cf->limits.bodySpoolDir = NULL;
    if (spoolDir != NULL && strcmp(spoolDir, "temp") != 0) {
        cf->limits.bodySpoolDir = corConfigPathBeside(cf->file, spoolDir);
        if (cf->limits.bodySpoolDir == NULL) {
            corConfErrorf(e, NULL, "out of memory reading the configuration");
        }
    }
    corConfUnknownKeys(m, "limits", keys, e);
}

static bool
isPort(const char* s)
{
    size_t n = strlen(s);

    return n > 0 && n <= 5 && strspn(s, "0123456789") == n && atoi(s) >= 1
           && atoi(s) <= 65535;
}

/* One resolver server: an IP address with an optional port, an IPv6 one
 * in brackets when it has a port. */
static bool
isServer(const char* s, size_t len)
{
    char buf[INET6_ADDRSTRLEN + 8];
    unsigned char addr[sizeof(struct in6_addr)];
    char* colon;

    if (len == 0 || len >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET6, buf, addr) == 1) {
        return true;
    }
    if (buf[0] == '[') {
        char* end = strchr(buf, ']');

        if (end == NULL || (end[1] != '\0' && end[1] != ':')) {
            return false;
        }
        if (end[1] == ':' && !isPort(end + 2)) {
            return false;
        }
        *end = '\0';
        return inet_pton(AF_INET6, buf + 1, addr) == 1;
    }
    colon = strchr(buf, ':');
    if (colon != NULL) {
        if (!isPort(colon + 1)) {
            return false;
        }
        *colon = '\0';
    }
    return inet_pton(AF_INET, buf, addr) == 1;
}

static bool
isServerList(const char* s)
{
    for (;;) {
        size_t len;

        s += strspn(s, " ");
        len = strcspn(s, ",");
        while (len > 0 && s[len - 1] == ' ') {
            len--;
        }
        if (!isServer(s, len)) {
            return false;
        }
        s += strcspn(s, ",");
        if (*s == '\0') {
            return true;
        }
        s++;
    }
}

static unsigned
serverCount(const char* s)
{
    unsigned count = 1;

    for (; *s != '\0'; s++) {
        count += *s == ',';
    }
    return count;
}

static void
readResolver(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    static const char* const keys[] = {
        "servers", "timeout", "min_ttl", "max_ttl", "negative_ttl", NULL,
    };
    const CorConf* m = corConfMap(root, "resolver", e);
    const char* servers = corConfString(m, "servers", "system", e);

    if (isServerList(servers) && serverCount(servers) > 8) {
        corConfErrorf(e, corConfGet(m, "servers"),
                      "servers: at most 8 servers, got %u",
                      serverCount(servers));
    } else if (strcmp(servers, "system") == 0 || isServerList(servers)) {
        corConfigSetString(&cf->resolver.servers, servers, e);
    } else {
        corConfErrorf(e, corConfGet(m, "servers"),
                      "servers: expected system or IP addresses separated "
                      "by commas, such as \"1.1.1.1, [2606:4700::1111]:53\", "
                      "got '%s'",
                      servers);
    }
    cf->resolver.timeoutMs = corConfDurationMs(m, "timeout", 2 * second, 1,
                                               minute, e);
    /* TTLs count in seconds, as DNS does: a duration rounded down. */
    cf->resolver.minTtlS = (unsigned)(corConfDurationMs(m, "min_ttl", 0, 0, day,
                                                        e)
                                      / second);
    cf->resolver.maxTtlS = (unsigned)(corConfDurationMs(m, "max_ttl", hour, 0,
                                                        day, e)
                                      / second);
    cf->resolver.negativeTtlS = (unsigned)(corConfDurationMs(m, "negative_ttl",
                                                             5 * second, 0,
                                                             hour, e)
                                           / second);
    if (cf->resolver.minTtlS > cf->resolver.maxTtlS) {
        corConfErrorf(e, corConfGet(m, "min_ttl"),
                      "min_ttl: %us is longer "
                      "than max_ttl (%us)",
                      cf->resolver.minTtlS, cf->resolver.maxTtlS);
    }
    corConfUnknownKeys(m, "resolver", keys, e);
}

/* ---- client -------------------------------------------------------------- */

/* client.keepalive_per_peer: auto (the default), or a fixed bound. */
static unsigned
keepaliveRead(const CorConf* m, CorConfErrors* e)
{
    const CorConf* value = corConfGet(m, "keepalive_per_peer");
    const char* text = corConfText(value);

    if (value == NULL || (text != NULL && strcmp(text, "auto") == 0)) {
        return COR_CONN_KEEPALIVE_AUTO;
    }
    return (unsigned)corConfInt(m, "keepalive_per_peer", 0, 0, 100000, e);
}

/* Connections out: their deadline and keep-alive pool, a notification's
 * deadline, and the CA file that verifies TLS peers by default (checked
 * readable here, so that `cor -t` names it; the TLS client loads it). */
static void
readClient(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    static const char* const keys[] = {
        "connect_timeout", "keepalive_per_peer",
        "idle_timeout",    "notify_timeout",
        "ca_file",         NULL,
    };
    const CorConf* m = corConfMap(root, "client", e);
    const char* ca = corConfigNonEmpty(m, "ca_file", "system",
                                       "a path or system", e);

    cf->client.connectTimeoutMs = corConfDurationMs(m, "connect_timeout",
                                                    5 * second, 1, 10 * minute,
                                                    e);
    cf->client.keepalivePerPeer = keepaliveRead(m, e);
    cf->client.idleTimeoutMs = corConfDurationMs(m, "idle_timeout", minute, 1,
                                                 hour, e);
    cf->client.notifyTimeoutMs = corConfDurationMs(m, "notify_timeout",
                                                   10 * second, 1, hour, e);
    free(cf->client.caFile);
    cf->client.caFile = NULL;
    if (ca != NULL && strcmp(ca, "system") != 0) {
        cf->client.caFile = corConfigPathBeside(cf->file, ca);
        if (cf->client.caFile == NULL) {
            corConfErrorf(e, NULL, "out of memory reading the configuration");
        } else if (access(cf->client.caFile, R_OK) != 0) {
            corConfErrorf(e, corConfGet(m, "ca_file"),
                          "ca_file: cannot read '%s': %s", cf->client.caFile,
                          strerror(errno));
        }
    }
    corConfUnknownKeys(m, "client", keys, e);
}

/* ---- modules, routes ----------------------------------------------------- */

/* One modules entry; the core reads its load key and nothing else. */
static void
readModule(CorConfig* cf, unsigned i, CorConfErrors* e)
{
    const CorConf* entry = cf->modules[i].node;
    Where w = whereAt("modules", i);
    const char* load;

    if (!isMapping(entry, w.text, "{ load: hello }", e)) {
        return;
    }
    if (!corConfigRequired(
            entry, "load", w.text,
            "the module to load: a name such as hello, or a path "
            "ending in .so",
            e)
        || (load = corConfString(entry, "load", NULL, e)) == NULL) {
        return;
    }
    if (!isToken(load, "_-ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        && !(endsWith(load, ".so") && strlen(load) > 3)) {
        corConfErrorf(e, corConfGet(entry, "load"),
                      "load: expected a module name such as hello or a path "
                      "ending in .so, got '%s'",
                      load);
        return;
    }
    for (unsigned j = 0; j < i; j++) {
        const CorConf* first = corConfGet(cf->modules[j].node, "load");
        char at[PATH_MAX];

        if (cf->modules[j].load && strcmp(cf->modules[j].load, load) == 0) {
            corConfErrorf(e, corConfGet(entry, "load"),
                          "load: module '%s' is already loaded (first at "
                          "%s)",
                          load, corConfigFirstAt(first, entry, at, sizeof(at)));
            return;
        }
    }
    corConfigSetString(&cf->modules[i].load, load, e);
}

static void
readModules(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    const CorConf* list = corConfSeq(root, "modules", e);

    cf->modules = entriesAlloc(list, sizeof(*cf->modules), &cf->moduleCount, e);
    for (unsigned i = 0; i < cf->moduleCount; i++) {
        cf->modules[i].node = corConfAt(list, i);
        readModule(cf, i, e);
    }
}

/*
 * strip_prefix: a start of the route's path that the handler does not
 * see (with "/s" on the prefix "/s/", "/s/a.txt" reaches it as
 * "/a.txt"). It must end
 * where a segment does, right before a '/' of the route's path, so that
 * what is left of every path the route matches starts with '/'.
 */
static void
parseStrip(CorConfigRoute* r, const CorConf* entry, CorConfErrors* e)
{
    const CorConf* node = corConfGet(entry, "strip_prefix");
    const char* strip = corConfString(entry, "strip_prefix", NULL, e);
    size_t n = strip != NULL ? strlen(strip) : 0;

    if (strip != NULL
        && (r->regex != NULL || r->redirect != NULL || r->rewrite != NULL)) {
        corConfErrorf(e, node,
                      "strip_prefix: only a path route with a "
                      "handler has a prefix to cut, not a regex, a redirect "
                      "or a rewrite (a rewrite's template says the path)");
        return;
    }
    if (strip == NULL || r->path == NULL) {
        return;
    }
    if (strip[0] != '/' || strncmp(r->path, strip, n) != 0
        || r->path[n] != '/') {
        corConfErrorf(e, node,
                      "strip_prefix: expected a start of the "
                      "route's path that ends before one of its '/' (\"/s\" "
                      "for \"/s/*\"), got '%s'",
                      strip);
        return;
    }
    corConfigSetString(&r->stripPrefix, strip, e);
}

/*
 * guard: a guard's name or a list of them, looked up once the modules
 * registered theirs (corRoutesBuild): here only the shape is checked.
 */
static void
parseGuard(CorConfigRoute* r, const CorConf* entry, CorConfErrors* e)
{
    const CorConf* node = corConfGet(entry, "guard");
    bool names = node != NULL;

    for (size_t i = 0; node != NULL && corConfKind(node) == COR_CONF_SEQ
                       && i < corConfCount(node);
         i++) {
        const CorConf* name = corConfAt(node, i);

        names &= corConfKind(name) == COR_CONF_SCALAR
                 && corConfText(name)[0] != '\0';
    }
    if (node != NULL && corConfKind(node) == COR_CONF_SCALAR) {
        names = corConfText(node)[0] != '\0';
    }
    if (node != NULL && !names) {
        corConfErrorf(e, node,
                      "guard: expected a guard's name or a list of "
                      "them, such as [ lan, staff ]");
        return;
    }
    r->guard = node;
}

/*
 * headers: { Name: value, ... }, added to every answer of the route.
 * Here the shape; the names and values are checked where answers are
 * made (corRoutesBuild, with corRespond's own rules).
 */
static void
parseHeaders(CorConfigRoute* r, const CorConf* entry, CorConfErrors* e)
{
    const CorConf* map = corConfMap(entry, "headers", e);
    bool good = true;

    for (size_t i = 0; i < corConfCount(map); i++) {
        if (corConfKind(corConfAt(map, i)) != COR_CONF_SCALAR) {
            corConfErrorf(e, corConfAt(map, i),
                          "headers: %s: expected a "
                          "string",
                          corConfKeyAt(map, i));
            good = false;
        }
    }
    r->headers = good && corConfCount(map) > 0 ? map : NULL;
}

/*
 * filters: { compress: off }: the response filters (by name) that do not
 * see this route's answers (a page that reflects input beside a secret
 * must not be compressed: BREACH). The names are the modules', checked
 * when the routes are built.
 */
static void
parseFilters(CorConfigRoute* r, const CorConf* entry, CorConfErrors* e)
{
    const CorConf* map = corConfMap(entry, "filters", e);
    size_t n = corConfCount(map);

    if (n == 0) {
        return;
    }
    r->filtersOff = calloc(n, sizeof(*r->filtersOff));
    if (r->filtersOff == NULL) {
        corConfErrorf(e, map, "out of memory reading the configuration");
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const char* name = corConfKeyAt(map, k);

        if (!corConfBool(map, name, true, e)) {
            corConfigSetString(&r->filtersOff[r->filtersOffCount++], name, e);
        }
    }
}

static void
readRoute(CorConfig* cf, unsigned i, CorConfErrors* e)
{
    static const char* const keys[] = {
        "match",       "handler",  "timeout", "strip_prefix",
        "guard",       "headers",  "filters", "notify",
        "host",        "redirect", "rewrite", "request_headers",
        "error_pages", "limits",   "cache",   NULL
    };
    CorConfigRoute* r = &cf->routes[i];
    const CorConf* entry = r->node;
    Where w = whereAt("routes", i);
    const CorConf* match;

    if (!isMapping(entry, w.text, "{ match: \"GET /hello\", handler: hello }",
                   e)) {
        return;
    }
    match = corConfigRequired(entry, "match", w.text,
                              "such as \"GET /hello\" or \"/static/*\"", e);
    if (corConfGet(entry, "handler") != NULL) {
        corConfigSetString(&r->handler,
                           corConfigNonEmpty(entry, "handler", NULL,
                                             "a handler name", e),
                           e);
    }
    corConfigRouteRead(r, entry, w.text, e);
    r->timeoutMs = corConfDurationMs(entry, "timeout", 0, 1, hour, e);
    if (match != NULL && corConfString(entry, "match", NULL, e) != NULL
        && corConfigMatchRead(r, match, e)) {
        for (unsigned j = 0; j < i; j++) {
            const CorConf* first = corConfGet(cf->routes[j].node, "match");
            char at[PATH_MAX];

            if (corConfigSameRoute(&cf->routes[j], r)) {
                corConfErrorf(e, match,
                              "match: '%s' is already routed (first at %s)",
                              corConfText(match),
                              corConfigFirstAt(first, match, at, sizeof(at)));
                break;
            }
        }
    }
    parseStrip(r, entry, e);
    parseGuard(r, entry, e);
    parseHeaders(r, entry, e);
    parseFilters(r, entry, e);
    if (corConfGet(entry, "cache") != NULL) {
        corConfigSetString(&r->cache,
                           corConfigNonEmpty(entry, "cache", NULL,
                                             "a cache's name", e),
                           e);
    }
    corConfigNotifyRead(r, entry, w.text, e);
    corConfUnknownKeys(entry, w.text, keys, e);
}

static void
readRoutes(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    const CorConf* list = corConfSeq(root, "routes", e);

    cf->routes = entriesAlloc(list, sizeof(*cf->routes), &cf->routeCount, e);
    for (unsigned i = 0; i < cf->routeCount; i++) {
        cf->routes[i].node = corConfAt(list, i);
        readRoute(cf, i, e);
    }
}

/* ---- log ----------------------------------------------------------------- */

/* access: off (false and no too, as every off) or a file; on names no
 * file (it was a file called "on"). */
static void
readAccessLog(CorConfig* cf, const CorConf* m, CorConfErrors* e)
{
    const char* access = corConfigNonEmpty(m, "access", "off", "off or a path",
                                           e);
    bool on;

    if (access != NULL && corConfBoolWord(access, &on)) {
        if (on) {
            corConfErrorf(e, corConfGet(m, "access"),
                          "access: expected off "
                          "or a path, got '%s' (name the file)",
                          access);
        }
        access = "off";
    }
    corConfigSetString(&cf->log.access, access, e);
}

static void
readLog(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    static const char* const keys[] = {
        "level", "error", "access", "access_format", "pid_file", NULL,
    };
    static const char* const levels[] = {
        "debug", "info", "warn", "error", NULL,
    };
    static const char* const formats[] = { "combined", "json", NULL };
    const CorConf* m = corConfMap(root, "log", e);
    const char* pidFile;

    corConfigSetString(&cf->log.level,
                       corConfigOneOf(m, "level", "info", levels, e), e);
    corConfigSetString(&cf->log.error,
                       corConfigNonEmpty(m, "error", "stderr",
                                         "stderr or a path", e),
                       e);
    readAccessLog(cf, m, e);
    corConfigSetString(&cf->log.accessFormat,
                       corConfigOneOf(m, "access_format", "combined", formats,
                                      e),
                       e);
    pidFile = corConfigNonEmpty(m, "pid_file", "cor.pid", "a path", e);
    /* Beside the configuration file, not the current folder: `cor -s`
     * run from anywhere with the same -c finds the same file. */
    free(cf->log.pidFile);
    cf->log.pidFile = pidFile != NULL ? corConfigPathBeside(cf->file, pidFile)
                                      : NULL;
    if (pidFile != NULL && cf->log.pidFile == NULL) {
        corConfErrorf(e, NULL, "out of memory reading the configuration");
    }
    corConfUnknownKeys(m, "log", keys, e);
}

/* ---- Loading ------------------------------------------------------------- */

/* Read root (which the result owns from here on) into a new config. */
static CorConfig*
fromTree(const char* name, CorConf* root, CorConfErrors* e)
{
    unsigned before = e->count;
    CorConfig* cf = calloc(1, sizeof(*cf));

    if (cf == NULL) {
        corConfFree(root);
        corConfErrorf(e, NULL, "%s: out of memory reading it", name);
        return NULL;
    }
    cf->root = root;
    corConfigSetString(&cf->file, name, e);
    if (corConfKind(root) != COR_CONF_MAP) {
        corConfErrorf(e, root,
                      "expected a mapping of settings at the top level, "
                      "such as listen: ..., got %s",
                      kindName(root).text);
        goto failed;
    }
    readRuntime(cf, root, e);
    readListen(cf, root, e);
    readLimits(cf, root, e);
    readResolver(cf, root, e);
    readClient(cf, root, e);
    readModules(cf, root, e);
    readRoutes(cf, root, e);
    corConfigErrorPagesRead(&cf->errorPages, &cf->errorPageCount,
                            corConfMap(root, "error_pages", e), "error_pages",
                            e);
    readLog(cf, root, e);
    corConfigRealIpRead(cf, root, e);
    corConfUnknownKeys(root, NULL, topKeys, e);
    if (e->count == before) {
        return cf;
    }

failed:
    corConfigFree(cf);
    return NULL;
}

/* The configuration of a tree read whole, checked through even when the
 * reading found errors (an anchor, a key given twice) so that one run
 * reports them all; NULL when anything was wrong. A tree that stops
 * short (a syntax error) is not checked: what is missing would be
 * reported as missing. */
static CorConfig*
fromLoaded(const char* name, CorConf* root, bool whole, unsigned before,
           CorConfErrors* errors)
{
    CorConfig* cf;

    if (root != NULL && whole) {
        whole = corConfInclude(root, includedLists, errors);
    }
    if (root == NULL || !whole) {
        corConfFree(root);
        return NULL;
    }
    cf = fromTree(name, root, errors);
    if (cf != NULL && errors->count != before) {
        corConfigFree(cf);
        return NULL;
    }
    return cf;
}

CorConfig*
corConfigLoad(const char* path, CorConfErrors* errors)
{
    unsigned before = errors->count;
    bool whole;
    CorConf* root = corConfLoadFilePartial(path, errors, &whole);

    return fromLoaded(path, root, whole, before, errors);
}

CorConfig*
corConfigLoadString(const char* name, const char* text, size_t len,
                    CorConfErrors* errors)
{
    unsigned before = errors->count;
    bool whole;
    CorConf* root = corConfLoadStringPartial(name, text, len, errors, &whole);

    return fromLoaded(name, root, whole, before, errors);
}

/* ---- What a start opens ----------------------------------------------------
 */

/*
 * Whether a start could open path for writing, as the log or the pid file
 * it is: an existing file must be writable, a new one needs a writable
 * folder. Looked at, never created or truncated, so that `cor -t` and a
 * reload refuse what the start would fail on, at the key's line.
 */
static void
writablePath(const CorConf* map, const char* key, const char* path,
             CorConfErrors* e)
{
    char folder[PATH_MAX];
    const char* slash = strrchr(path, '/');
    struct stat st;

    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            corConfErrorf(e, corConfGet(map, key),
                          "log.%s: %s is a folder, not "
                          "a file",
                          key, path);
        } else if (access(path, W_OK) != 0) {
            corConfErrorf(e, corConfGet(map, key),
                          "log.%s: cannot write %s: %s", key, path,
                          strerror(errno));
        }
        return;
    }
    snprintf(folder, sizeof(folder), "%.*s",
             slash == NULL   ? 1
             : slash == path ? 1
                             : (int)(slash - path),
             slash == NULL ? "." : path);
    if (stat(folder, &st) != 0 || !S_ISDIR(st.st_mode)) {
        corConfErrorf(e, corConfGet(map, key),
                      "log.%s: cannot create %s: the "
                      "folder %s does not exist",
                      key, path, folder);
    } else if (access(folder, W_OK | X_OK) != 0) {
        corConfErrorf(e, corConfGet(map, key),
                      "log.%s: cannot create %s in %s: "
                      "%s",
                      key, path, folder, strerror(errno));
    }
}

void
corConfigFilesCheck(const CorConfig* cf, CorConfErrors* e)
{
    const CorConf* log = corConfGet(cf->root, "log");

    if (strcmp(cf->log.error, "stderr") != 0) {
        writablePath(log, "error", cf->log.error, e);
    }
    if (strcmp(cf->log.access, "off") != 0) {
        writablePath(log, "access", cf->log.access, e);
    }
    writablePath(log, "pid_file", cf->log.pidFile, e);
}

void
corConfigFree(CorConfig* cf)
{
    if (cf == NULL) {
        return;
    }
    for (unsigned i = 0; i < cf->listenCount; i++) {
        free(cf->listen[i].protocol);
        free(cf->listen[i].address);
        corConfigTlsFree(cf->listen[i].tls);
    }
    for (unsigned i = 0; i < cf->moduleCount; i++) {
        free(cf->modules[i].load);
    }
    for (unsigned i = 0; i < cf->routeCount; i++) {
        corConfigRouteFree(&cf->routes[i]);
    }
    corConfigErrorPagesFree(cf->errorPages, cf->errorPageCount);
    free(cf->listen);
    free(cf->modules);
    free(cf->routes);
    corConfigRealIpFree(cf->realIp);
    free(cf->resolver.servers);
    free(cf->limits.bodySpoolDir);
    free(cf->client.caFile);
    free(cf->log.level);
    free(cf->log.error);
    free(cf->log.access);
    free(cf->log.accessFormat);
    free(cf->log.pidFile);
    free(cf->file);
    corConfFree(cf->root);
    free(cf);
}
