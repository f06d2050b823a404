/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core's schema: the defaults, a complete config read field by field,
 * the example of docs/DESIGN.md, addresses, route matches, resolver
 * servers, that every error in a file is reported, and the corpus of bad
 * configs in conf/bad/, each checked against conf/bad/expected.txt:
 *
 *     FILE<TAB>LINE:COLUMN<TAB>a substring of the message
 *
 * naming the first error the file must produce. Run from the repository
 * root.
 */
#include "corTest.h"
#include "corConfig.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CORPUS "conf/bad/"
#define LISTEN "listen: [{ protocol: http, address: \"127.0.0.1:8080\" }]\n"

static CorConfig*
load(const char* text, CorConfErrors* e)
{
    return corConfigLoadString("t.yaml", text, strlen(text), e);
}

/* Load text, which must fail, and return its errors (freed by the next
 * call). */
static const char*
refused(const char* text)
{
    static CorConfErrors e;
    CorConfig* cf;

    corConfErrorsFree(&e);
    cf = load(text, &e);
    ck_assert_msg(cf == NULL, "loaded: %s", text);
    ck_assert_ptr_nonnull(e.text);
    return e.text;
}

static unsigned
expectedLoops(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    return n < 1                      ? 1
           : n > COR_CONFIG_MAX_LOOPS ? COR_CONFIG_MAX_LOOPS
                                      : (unsigned)n;
}

START_TEST(test_defaults)
{
    CorConfErrors e = { 0 };
    CorConfig* cf = load(LISTEN, &e);

    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_str_eq(cf->file, "t.yaml");
    ck_assert_uint_eq(cf->runtime.loops, expectedLoops());
    ck_assert_uint_eq(cf->runtime.workers, 8);
    ck_assert(cf->runtime.coroutines.enabled);
    ck_assert_uint_eq(cf->runtime.coroutines.perLoop, 1024);
    ck_assert_uint_eq(cf->runtime.coroutines.stack, 256 * 1024);
    ck_assert_uint_eq(cf->runtime.stopTimeoutMs, 10000);
    ck_assert_uint_eq(cf->runtime.stallWarningMs, 100);
    ck_assert_uint_eq(cf->listenCount, 1);
    ck_assert(!cf->listen[0].reusePort);
    ck_assert_ptr_null(cf->listen[0].tls);
    ck_assert_uint_eq(cf->limits.connections, 10000);
    ck_assert_uint_eq(cf->limits.headerBytes, 16 * 1024);
    ck_assert_uint_eq(cf->limits.headerCount, 100);
    ck_assert_uint_eq(cf->limits.bodyBytes, 1024 * 1024);
    ck_assert_uint_eq(cf->limits.requestTimeoutMs, 30000);
    ck_assert_uint_eq(cf->limits.bodyTimeoutMs, 30000);
    ck_assert_uint_eq(cf->limits.keepaliveTimeoutMs, 60000);
    ck_assert_uint_eq(cf->limits.sendTimeoutMs, 30000);
    ck_assert_str_eq(cf->resolver.servers, "system");
    ck_assert_uint_eq(cf->resolver.timeoutMs, 2000);
    ck_assert_uint_eq(cf->resolver.minTtlS, 0);
    ck_assert_uint_eq(cf->resolver.maxTtlS, 3600);
    ck_assert_uint_eq(cf->resolver.negativeTtlS, 5);
    ck_assert_uint_eq(cf->moduleCount, 0);
    ck_assert_ptr_null(cf->modules);
    ck_assert_uint_eq(cf->routeCount, 0);
    ck_assert_ptr_null(cf->routes);
    ck_assert_str_eq(cf->log.level, "info");
    ck_assert_str_eq(cf->log.error, "stderr");
    ck_assert_str_eq(cf->log.access, "off");
    ck_assert_str_eq(cf->log.accessFormat, "combined");
    ck_assert_str_eq(cf->log.pidFile, "./cor.pid");
    ck_assert_ptr_nonnull(cf->root);
    ck_assert_uint_eq(e.count, 0);
    corConfigFree(cf);
    corConfigFree(NULL);
}
END_TEST

static const char complete[] =
    "runtime:\n"
    "  loops: 3\n"
    "  workers: 2\n"
    "  coroutines:\n"
    "    enabled: false\n"
    "    per_loop: 64\n"
    "    stack: 64KiB\n"
    "  stop_timeout: 2s\n"
    "  stall_warning: 0ms\n"
    "listen:\n"
    "  - protocol: http\n"
    "    address: 127.0.0.1:8080\n"
    "  - protocol: https\n"
    "    address: \"[::1]:8443\"\n"
    "    tls: { certificate: /etc/cor/cert.pem, key: /etc/cor/key.pem }\n"
    "    accept: reuseport\n"
    "  - { protocol: cor, address: \"*:7070\", accept: share }\n"
    "  - { protocol: mqtt, address: \":1883\" }\n"
    "limits:\n"
    "  connections: 500\n"
    "  header_bytes: 8KiB\n"
    "  header_count: 50\n"
    "  body_bytes: 10MB\n"
    "  request_timeout: 5s\n"
    "  body_timeout: 1.5s\n"
    "  keepalive_timeout: 2m\n"
    "  send_timeout: 250ms\n"
    "resolver: { servers: \"1.1.1.1, 8.8.8.8:53\", timeout: 500ms, "
    "min_ttl: 10s, max_ttl: 10m, negative_ttl: 1s }\n"
    "modules:\n"
    "  - { load: hello, greeting: \"hello, world\" }\n"
    "  - { load: /opt/cor/forward.so, upstream: \"http://127.0.0.1:9000\" }\n"
    "routes:\n"
    "  - { match: \"GET /hello\", handler: hello }\n"
    "  - { match: \"/forward/*\", handler: forward, timeout: 2s }\n"
    "  - { match: \"/\", handler: hello }\n"
    "log:\n"
    "  level: debug\n"
    "  error: /var/log/cor/error.log\n"
    "  access: /var/log/cor/access.log\n"
    "  access_format: json\n"
    "  pid_file: /run/cor.pid\n";

START_TEST(test_complete_config)
{
    CorConfErrors e = { 0 };
    CorConfig* cf = load(complete, &e);
    const struct sockaddr_in* sin;
    const struct sockaddr_in6* sin6;

    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->runtime.loops, 3);
    ck_assert_uint_eq(cf->runtime.workers, 2);
    ck_assert(!cf->runtime.coroutines.enabled);
    ck_assert_uint_eq(cf->runtime.coroutines.perLoop, 64);
    ck_assert_uint_eq(cf->runtime.coroutines.stack, 65536);
    ck_assert_uint_eq(cf->runtime.stopTimeoutMs, 2000);
    ck_assert_uint_eq(cf->runtime.stallWarningMs, 0);

    ck_assert_uint_eq(cf->listenCount, 4);
    ck_assert_str_eq(cf->listen[0].protocol, "http");
    ck_assert_str_eq(cf->listen[0].address, "127.0.0.1:8080");
    sin = (const struct sockaddr_in*)&cf->listen[0].addr;
    ck_assert_int_eq(sin->sin_family, AF_INET);
    ck_assert_uint_eq(ntohl(sin->sin_addr.s_addr), 0x7f000001);
    ck_assert_uint_eq(ntohs(sin->sin_port), 8080);
    ck_assert_uint_eq(cf->listen[0].addrLen, sizeof(*sin));
    ck_assert_uint_eq(corConfLine(cf->listen[0].node), 11);

    ck_assert_str_eq(cf->listen[1].protocol, "https");
    sin6 = (const struct sockaddr_in6*)&cf->listen[1].addr;
    ck_assert_int_eq(sin6->sin6_family, AF_INET6);
    ck_assert(IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr));
    ck_assert_uint_eq(ntohs(sin6->sin6_port), 8443);
    ck_assert_uint_eq(cf->listen[1].addrLen, sizeof(*sin6));
    ck_assert_uint_eq(cf->listen[1].tls->certCount, 1);
    ck_assert_str_eq(cf->listen[1].tls->certs[0].certificate,
                     "/etc/cor/cert.pem");
    ck_assert_str_eq(cf->listen[1].tls->certs[0].key, "/etc/cor/key.pem");
    ck_assert_uint_eq(cf->listen[1].tls->minVersion, 0x0303);
    ck_assert_uint_eq(cf->listen[1].tls->handshakeTimeoutMs, 10000);
    ck_assert(cf->listen[1].reusePort);

    ck_assert_str_eq(cf->listen[2].protocol, "cor");
    sin = (const struct sockaddr_in*)&cf->listen[2].addr;
    ck_assert_uint_eq(sin->sin_addr.s_addr, htonl(INADDR_ANY));
    ck_assert_uint_eq(ntohs(sin->sin_port), 7070);
    ck_assert(!cf->listen[2].reusePort);
    sin = (const struct sockaddr_in*)&cf->listen[3].addr;
    ck_assert_uint_eq(sin->sin_addr.s_addr, htonl(INADDR_ANY));
    ck_assert_uint_eq(ntohs(sin->sin_port), 1883);

    ck_assert_uint_eq(cf->limits.connections, 500);
    ck_assert_uint_eq(cf->limits.headerBytes, 8192);
    ck_assert_uint_eq(cf->limits.headerCount, 50);
    ck_assert_uint_eq(cf->limits.bodyBytes, 10000000);
    ck_assert_uint_eq(cf->limits.requestTimeoutMs, 5000);
    ck_assert_uint_eq(cf->limits.bodyTimeoutMs, 1500);
    ck_assert_uint_eq(cf->limits.keepaliveTimeoutMs, 120000);
    ck_assert_uint_eq(cf->limits.sendTimeoutMs, 250);
    ck_assert_str_eq(cf->resolver.servers, "1.1.1.1, 8.8.8.8:53");
    ck_assert_uint_eq(cf->resolver.timeoutMs, 500);
    ck_assert_uint_eq(cf->resolver.minTtlS, 10);
    ck_assert_uint_eq(cf->resolver.maxTtlS, 600);
    ck_assert_uint_eq(cf->resolver.negativeTtlS, 1);

    ck_assert_uint_eq(cf->moduleCount, 2);
    ck_assert_str_eq(cf->modules[0].load, "hello");
    ck_assert_str_eq(cf->modules[1].load, "/opt/cor/forward.so");
    /* The module's own keys stay in its node for it to read. */
    ck_assert_str_eq(corConfString(cf->modules[0].node, "greeting", NULL, &e),
                     "hello, world");
    ck_assert_str_eq(corConfString(cf->modules[1].node, "upstream", NULL, &e),
                     "http://127.0.0.1:9000");

    ck_assert_uint_eq(cf->routeCount, 3);
    ck_assert_str_eq(cf->routes[0].method, "GET");
    ck_assert_str_eq(cf->routes[0].path, "/hello");
    ck_assert(!cf->routes[0].prefix);
    ck_assert_str_eq(cf->routes[0].handler, "hello");
    ck_assert_ptr_null(cf->routes[1].method);
    ck_assert_str_eq(cf->routes[1].path, "/forward/");
    ck_assert(cf->routes[1].prefix);
    ck_assert_str_eq(cf->routes[1].handler, "forward");
    ck_assert_uint_eq(cf->routes[0].timeoutMs, 0);
    ck_assert_uint_eq(cf->routes[1].timeoutMs, 2000);
    ck_assert_str_eq(cf->routes[2].path, "/");
    ck_assert(!cf->routes[2].prefix);
    /* The handler's mark, for the core's "no such handler" error. */
    ck_assert_uint_eq(corConfLine(corConfGet(cf->routes[1].node, "handler")),
                      34);

    ck_assert_str_eq(cf->log.level, "debug");
    ck_assert_str_eq(cf->log.error, "/var/log/cor/error.log");
    ck_assert_str_eq(cf->log.access, "/var/log/cor/access.log");
    ck_assert_str_eq(cf->log.accessFormat, "json");
    ck_assert_str_eq(cf->log.pidFile, "/run/cor.pid");
    ck_assert_uint_eq(e.count, 0);
    corConfigFree(cf);
}
END_TEST

/* The example of docs/DESIGN.md, section "Configuration", with the TLS
 * files filled in. */
START_TEST(test_design_example)
{
    static const char text[] =
        "runtime:\n"
        "  loops: auto                 # event loops, one per core\n"
        "  workers: 8                  # threads for requests that block\n"
        "  coroutines: { enabled: true, per_loop: 1024, stack: 256KiB }\n"
        "  stop_timeout: 10s\n"
        "listen:\n"
        "  - { protocol: http,  address: 127.0.0.1:8080 }\n"
        "  - { protocol: https, address: 127.0.0.1:8443, tls: "
        "{ certificate: cert.pem, key: key.pem } }\n"
        "  - { protocol: cor,   address: 127.0.0.1:7070 }\n"
        "limits: { connections: 10000, header_bytes: 16KiB, body_bytes: "
        "1MiB, request_timeout: 30s, keepalive_timeout: 60s }\n"
        "resolver: { servers: system, timeout: 2s }\n"
        "modules:\n"
        "  - { load: hello, greeting: \"hello, world\" }\n"
        "  - { load: forward, upstream: \"http://127.0.0.1:9000\" }\n"
        "routes:\n"
        "  - { match: \"GET /hello\",  handler: hello }\n"
        "  - { match: \"/forward/*\",  handler: forward }\n"
        "log: { level: info, error: stderr, access: off }\n";
    CorConfErrors e = { 0 };
    CorConfig* cf = load(text, &e);

    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->runtime.loops, expectedLoops());
    ck_assert_uint_eq(cf->listenCount, 3);
    ck_assert_uint_eq(cf->moduleCount, 2);
    ck_assert_uint_eq(cf->routeCount, 2);
    /* Nothing read the modules' own keys yet: that is the core's check,
     * after each module's init. */
    ck_assert_uint_eq(corConfUnusedKeys(cf->modules[0].node, "modules[0]", &e),
                      1);
    ck_assert_str_eq(e.text, "t.yaml:13:20: unknown key 'greeting' in "
                             "modules[0] (expected one of: load)\n");
    corConfErrorsFree(&e);
    corConfigFree(cf);
}
END_TEST

START_TEST(test_all_errors_collected)
{
    static const char text[] =
        "runtime: { loops: 0, workers: many }\n"
        "listen:\n"
        "  - { protocol: https, address: \"127.0.0.1:99999\" }\n"
        "limits: { header_bytes: 10, request_timeout: 30 }\n"
        "resolver: { servers: nowhere }\n"
        "modules: [{ greeting: hi }]\n"
        "routes: [{ match: \"get /\", handler: h }, { match: \"/x\" }]\n"
        "log: { level: loud }\n"
        "extra: 1\n";
    static const char* const want[] = {
        "t.yaml:1:19: loops: 0 is out of range (1..1024)",
        "t.yaml:1:31: workers: expected an integer, got 'many'",
        "t.yaml:3:33: address: port 99999 is out of range (1..65535)",
        "t.yaml:4:25: header_bytes: 10 is out of range (1KiB..1MiB)",
        "t.yaml:4:46: request_timeout: expected a duration, got '30' (add a "
        "unit: ms, s, m, h)",
        "t.yaml:5:22: servers: expected system or IP addresses separated by "
        "commas, such as \"1.1.1.1, [2606:4700::1111]:53\", got 'nowhere'",
        "t.yaml:6:11: modules[0]: missing 'load' (the module to load: a name "
        "such as hello, or a path ending in .so)",
        "t.yaml:7:19: match: expected 'METHOD /path' or '/path' with the "
        "method in capitals (such as GET), got 'get /'",
        "t.yaml:7:42: routes[1]: missing 'handler' (the name of a handler; "
        "or redirect: or rewrite: in its place)",
        "t.yaml:8:15: level: expected one of debug, info, warn, error, got "
        "'loud'",
        "t.yaml:9:1: unknown key 'extra' at the top level (expected one of: "
        "runtime, listen, limits, resolver, client, modules, routes, log, "
        "error_pages, include, real_ip)",
    };
    CorConfErrors e = { 0 };
    CorConfig* cf = load(text, &e);
    const char* line;

    ck_assert_ptr_null(cf);
    ck_assert_uint_eq(e.count, sizeof(want) / sizeof(want[0]));
    line = e.text;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        size_t n = strcspn(line, "\n");

        ck_assert_msg(n == strlen(want[i]) && strncmp(line, want[i], n) == 0,
                      "error %zu: %.*s", i, (int)n, line);
        line += n + 1;
    }
    ck_assert_str_eq(line, "");
    corConfErrorsFree(&e);
}
END_TEST

/* What the reader refuses in one node (an anchor, a tag, a key given
 * twice) does not hide the file's other errors; a syntax error stops the
 * reading, and is then the one error. */
START_TEST(test_errors_beside_an_anchor_are_collected)
{
    static const char text[] =
        "runtime: { loops: &n 0, workers: !!int 8 }\n" LISTEN
        "limits: { header_count: 0, header_count: 5 }\n"
        "extra: 1\n";
    static const char* const want[] = {
        "t.yaml:1:19: anchor '&n' is not supported",
        "t.yaml:1:34: tag 'tag:yaml.org,2002:int' is not supported",
        "t.yaml:3:28: duplicate key 'header_count' (first at 3:11)",
        "t.yaml:1:19: loops: 0 is out of range (1..1024)",
        "t.yaml:3:25: header_count: 0 is out of range (1..10000)",
        "t.yaml:4:1: unknown key 'extra' at the top level",
    };
    CorConfErrors e = { 0 };
    const char* line;

    ck_assert_ptr_null(load(text, &e));
    ck_assert_msg(e.count == sizeof(want) / sizeof(want[0]), "%s", e.text);
    line = e.text;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ck_assert_msg(strncmp(line, want[i], strlen(want[i])) == 0,
                      "error %zu: %s", i, line);
        line += strcspn(line, "\n") + 1;
    }
    corConfErrorsFree(&e);
    ck_assert_str_eq(refused("runtime: { loops: 0 }\n" LISTEN "log: [\n"),
                     "t.yaml:4:1: did not find expected node content\n");
}
END_TEST

START_TEST(test_sections_of_the_wrong_kind)
{
    ck_assert_str_eq(refused(LISTEN "runtime: 4\n"),
                     "t.yaml:2:10: runtime: expected a mapping, got '4'\n");
    ck_assert_str_eq(refused(LISTEN "limits:\n"),
                     "t.yaml:2:8: limits: expected a mapping, got nothing\n");
    ck_assert_str_eq(refused(LISTEN "modules: { load: hello }\n"),
                     "t.yaml:2:10: modules: expected a list, got a mapping\n");
    ck_assert_str_eq(refused(LISTEN "routes: \"GET /\"\n"),
                     "t.yaml:2:9: routes: expected a list, got 'GET /'\n");
    ck_assert_str_eq(refused(LISTEN "log: [info]\n"),
                     "t.yaml:2:6: log: expected a mapping, got a list\n");
    ck_assert_str_eq(refused(LISTEN "runtime: { coroutines: on }\n"),
                     "t.yaml:2:24: coroutines: expected a mapping, got "
                     "'on'\n");
    ck_assert_str_eq(refused("listen: [{ protocol: https, address: "
                             "\"*:443\", tls: cert.pem }]\n"),
                     "t.yaml:1:52: tls: expected a mapping, got "
                     "'cert.pem'\n");
}
END_TEST

START_TEST(test_listen_addresses)
{
    static const struct {
        const char* address;
        int family;
        const char* host;
        unsigned port;
    } good[] = {
        { "127.0.0.1:8080", AF_INET, "127.0.0.1", 8080 },
        { "*:80", AF_INET, "0.0.0.0", 80 },
        { ":1", AF_INET, "0.0.0.0", 1 },
        { "0.0.0.0:65535", AF_INET, "0.0.0.0", 65535 },
        { "10.1.2.3:443", AF_INET, "10.1.2.3", 443 },
        { "[::1]:8080", AF_INET6, "::1", 8080 },
        { "[::]:8080", AF_INET6, "::", 8080 },
        { "[2001:db8::7]:9", AF_INET6, "2001:db8::7", 9 },
        { "[::ffff:1.2.3.4]:9", AF_INET6, "::ffff:1.2.3.4", 9 },
    };
    static const struct {
        const char* address;
        const char* message;
    } bad[] = {
        { "8080", "expected HOST:PORT such as" },
        { "127.0.0.1", "expected HOST:PORT such as" },
        { "127.0.0.1:", "expected a port number after ':'" },
        { "127.0.0.1:0", "port 0 is out of range (1..65535)" },
        { "127.0.0.1:65536", "port 65536 is out of range (1..65535)" },
        { "127.0.0.1:99999999999999999999", "is out of range (1..65535)" },
        { "127.0.0.1:-1", "expected a port number after ':'" },
        { "127.0.0.1:80x", "expected a port number after ':'" },
        { "1.2.3:80", "'1.2.3' is not an IPv4 address" },
        { "256.1.1.1:80", "'256.1.1.1' is not an IPv4 address" },
        { "example.com:80", "'example.com' is not an IP address (host names" },
        { "::1:80", "an IPv6 address goes in brackets" },
        { "[::1]", "expected [IPv6]:PORT" },
        { "[::1]8080", "expected [IPv6]:PORT" },
        { "[::1:8080", "expected [IPv6]:PORT" },
        { "[1.2.3.4]:80", "'1.2.3.4' is not an IPv6 address" },
        { "[fe80::1%eth0]:80", "is not an IPv6 address" },
        { "**:80", "'**' is not an IP address" },
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char text[256];
        char host[INET6_ADDRSTRLEN];
        CorConfErrors e = { 0 };
        CorConfig* cf;
        const void* addr;
        unsigned port;

        snprintf(text, sizeof(text),
                 "listen: [{ protocol: http, address: \"%s\" }]\n",
                 good[i].address);
        cf = load(text, &e);
        ck_assert_msg(cf != NULL, "%s: %s", good[i].address, e.text);
        ck_assert_int_eq(cf->listen[0].addr.ss_family, good[i].family);
        if (good[i].family == AF_INET) {
            const struct sockaddr_in* sin = (const void*)&cf->listen[0].addr;

            addr = &sin->sin_addr;
            port = ntohs(sin->sin_port);
            ck_assert_uint_eq(cf->listen[0].addrLen, sizeof(*sin));
        } else {
            const struct sockaddr_in6* sin6 = (const void*)&cf->listen[0].addr;

            addr = &sin6->sin6_addr;
            port = ntohs(sin6->sin6_port);
            ck_assert_uint_eq(cf->listen[0].addrLen, sizeof(*sin6));
        }
        inet_ntop(good[i].family, addr, host, sizeof(host));
        ck_assert_str_eq(host, good[i].host);
        ck_assert_uint_eq(port, good[i].port);
        ck_assert_str_eq(cf->listen[0].address, good[i].address);
        corConfigFree(cf);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        const char* errors;

        snprintf(text, sizeof(text),
                 "listen: [{ protocol: http, address: \"%s\" }]\n",
                 bad[i].address);
        errors = refused(text);
        ck_assert_msg(strncmp(errors, "t.yaml:1:37: address: ", 22) == 0
                          && strstr(errors, bad[i].message) != NULL
                          && strchr(errors, '\n')[1] == '\0',
                      "%s: %s", bad[i].address, errors);
    }
}
END_TEST

START_TEST(test_listen_duplicates)
{
    /* Different ports, families or hosts do not clash. */
    {
        CorConfErrors e = { 0 };
        CorConfig* cf = load("listen:\n"
                             "  - { protocol: http, address: \"*:80\" }\n"
                             "  - { protocol: http, address: \"*:81\" }\n"
                             "  - { protocol: http, address: \"[::]:80\" }\n"
                             "  - { protocol: cor, address: \"10.0.0.1:9\" }\n"
                             "  - { protocol: cor, address: \"10.0.0.2:9\" }\n",
                             &e);

        ck_assert_msg(cf != NULL, "%s", e.text);
        corConfigFree(cf);
    }
    ck_assert_str_eq(refused("listen:\n"
                             "  - { protocol: http, address: \"*:80\" }\n"
                             "  - { protocol: http, address: \"0.0.0.0:80\" "
                             "}\n"),
                     "t.yaml:3:32: address: '0.0.0.0:80' is already "
                     "listened on as '*:80' (first at 2:32)\n");
    ck_assert_str_eq(refused("listen:\n"
                             "  - { protocol: http, address: \"[::1]:80\" }\n"
                             "  - { protocol: http, address: \"[::]:80\" }\n"),
                     "t.yaml:3:32: address: '[::]:80' overlaps '[::1]:80' "
                     "(first at 2:32): a wildcard takes its port on every "
                     "address\n");
}
END_TEST

/* http2: on by default over TLS, off plain; on | off, nothing else. */
START_TEST(test_listen_http2)
{
    CorConfErrors e = { 0 };
    CorConfig* cf = load("listen:\n"
                         "  - { protocol: http, address: \"*:80\" }\n"
                         "  - { protocol: http, address: \"*:81\", "
                         "http2: on }\n"
                         "  - protocol: https\n"
                         "    address: \"*:443\"\n"
                         "    tls: { certificate: c.pem, key: k.pem }\n"
                         "  - protocol: https\n"
                         "    address: \"*:444\"\n"
                         "    http2: off\n"
                         "    tls: { certificate: c.pem, key: k.pem }\n",
                         &e);

    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert(!cf->listen[0].http2);
    ck_assert(cf->listen[1].http2);
    ck_assert(cf->listen[2].http2);
    ck_assert(!cf->listen[3].http2);
    corConfigFree(cf);
    ck_assert_msg(strstr(refused("listen:\n"
                                 "  - { protocol: http, address: \"*:80\", "
                                 "http2: maybe }\n"),
                         "http2: expected on, "
                         "off, true, false, yes or no, got 'maybe'")
                      != NULL,
                  "not refused");
}
END_TEST

/*
 * Every on/off key of the core's schema reads the six words alike: the
 * listener's http2 took only on and off (http2: true refused), the
 * others only true and false (session_tickets: off, "write false").
 */
START_TEST(test_on_off_keys_take_every_word)
{
    static const struct {
        const char* word;
        bool on;
    } words[] = {
        { "on", true },     { "off", false }, { "true", true },
        { "false", false }, { "yes", true },  { "no", false },
    };

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        const char* w = words[i].word;
        bool on = words[i].on;
        char text[1024];
        CorConfErrors e = { 0 };
        CorConfig* cf;
        const CorConfigTls* t;

        snprintf(text, sizeof(text),
                 "runtime: { coroutines: { enabled: %s } }\n"
                 "listen:\n"
                 "  - protocol: https\n"
                 "    address: \"*:443\"\n"
                 "    http2: %s\n"
                 "    tls:\n"
                 "      certificate: c.pem\n"
                 "      key: k.pem\n"
                 "      session_tickets: %s\n"
                 "      ocsp: { fetch: %s, %s }\n"
                 "routes:\n"
                 "  - { match: /, handler: h, filters: { compress: %s } }\n",
                 w, w, w, w,
                 /* fetch: off with nothing to staple is refused */
                 on ? "issuer: ca.pem" : "file: a.der", w);
        cf = load(text, &e);
        ck_assert_msg(cf != NULL, "%s: %s", w, e.text);
        t = cf->listen[0].tls;
        ck_assert_int_eq(cf->runtime.coroutines.enabled, on);
        ck_assert_int_eq(cf->listen[0].http2, on);
        ck_assert_int_eq(t->sessionTickets, on);
        ck_assert_int_eq(t->certCount > 0 && t->certs[0].ocsp.fetch, on);
        ck_assert_uint_eq(cf->routes[0].filtersOffCount, on ? 0 : 1);
        corConfigFree(cf);
    }
}
END_TEST

/* log.access takes off or a file: false and no are off as well (they
 * named a file called "false"), and on, naming no file, is refused. */
START_TEST(test_access_log_off_words)
{
    static const char* const off[] = { "off", "false", "no", "Off", "FALSE" };
    char text[256];

    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
        CorConfErrors e = { 0 };
        CorConfig* cf;

        snprintf(text, sizeof(text), LISTEN "log: { access: %s }\n", off[i]);
        cf = load(text, &e);
        ck_assert_msg(cf != NULL, "%s: %s", off[i], e.text);
        ck_assert_str_eq(cf->log.access, "off");
        corConfigFree(cf);
    }
    ck_assert_str_eq(refused(LISTEN "log: { access: yes }\n"),
                     "t.yaml:2:16: "
                     "access: expected off or a path, got 'yes' (name the "
                     "file)\n");
}
END_TEST

/* A listener's TLS keys past the certificate: the versions, the lists as
 * written (OpenSSL checks them at the load), the session lifetime, and
 * each certificate's OCSP staple. */
START_TEST(test_listen_tls_keys)
{
    CorConfErrors e = { 0 };
    CorConfig* cf = load("listen:\n"
                         "  - protocol: https\n"
                         "    address: \"*:443\"\n"
                         "    tls: { certificate: c.pem, key: k.pem }\n"
                         "  - protocol: https\n"
                         "    address: \"*:444\"\n"
                         "    tls:\n"
                         "      certificate: c.pem\n"
                         "      key: k.pem\n"
                         "      protocols: [TLSv1.3]\n"
                         "      ciphers: \"ECDHE+AESGCM\"\n"
                         "      ciphersuites: TLS_AES_128_GCM_SHA256\n"
                         "      groups: \"X25519:P-256\"\n"
                         "      session_lifetime: 1h\n"
                         "      ocsp: { fetch: on, issuer: ca.pem }\n"
                         "      sni:\n"
                         "        - { name: b.test, certificate: b.pem, "
                         "key: b.key, ocsp: { file: b.der } }\n",
                         &e);
    const CorConfigTls* t;

    ck_assert_msg(cf != NULL, "%s", e.text);
    t = cf->listen[0].tls;
    ck_assert_uint_eq(t->minVersion, 0x0303);
    ck_assert_uint_eq(t->maxVersion, 0x0304);
    ck_assert_ptr_null(t->ciphers);
    ck_assert_ptr_null(t->ciphersuites);
    ck_assert_ptr_null(t->groups);
    ck_assert_uint_eq(t->sessionLifetimeS, 300);
    ck_assert_ptr_null(t->certs[0].ocsp.node);
    t = cf->listen[1].tls;
    ck_assert_uint_eq(t->minVersion, 0x0304);
    ck_assert_uint_eq(t->maxVersion, 0x0304);
    ck_assert_str_eq(t->ciphers, "ECDHE+AESGCM");
    ck_assert_str_eq(t->ciphersuites, "TLS_AES_128_GCM_SHA256");
    ck_assert_str_eq(t->groups, "X25519:P-256");
    ck_assert_uint_eq(t->sessionLifetimeS, 3600);
    /* The files are beside the configuration (t.yaml, in "."). */
    ck_assert_str_eq(t->certs[0].certificate, "./c.pem");
    ck_assert_str_eq(t->certs[0].key, "./k.pem");
    ck_assert(t->certs[0].ocsp.fetch);
    ck_assert_ptr_null(t->certs[0].ocsp.file);
    ck_assert_str_eq(t->certs[0].ocsp.issuer, "./ca.pem");
    ck_assert(!t->certs[1].ocsp.fetch);
    ck_assert_str_eq(t->certs[1].ocsp.file, "./b.der");
    corConfigFree(cf);
}
END_TEST

START_TEST(test_route_matches)
{
    static const struct {
        const char* match;
        const char* method;
        const char* path;
        bool prefix;
    } good[] = {
        { "GET /hello", "GET", "/hello", false },
        { "/hello", NULL, "/hello", false },
        { "/forward/*", NULL, "/forward/", true },
        { "/*", NULL, "/", true },
        { "POST   /api/*", "POST", "/api/", true },
        { "PROPFIND /dav", "PROPFIND", "/dav", false },
        { "/a*", NULL, "/a", true },
    };
    static const struct {
        const char* match;
        const char* message;
    } bad[] = {
        { "get /hello", "with the method in capitals" },
        { "G3T /hello", "with the method in capitals" },
        { "GET hello", "the path must start with '/'" },
        { "GET", "the path must start with '/'" },
        { "hello", "with the method in capitals" },
        { "", "the path must start with '/'" },
        { "GET /a b", "with no space in the path" },
        { "/a/*/b", "'*' may only end a path" },
        { "/**", "'*' may only end a path" },
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char text[256];
        CorConfErrors e = { 0 };
        CorConfig* cf;

        snprintf(text, sizeof(text),
                 LISTEN "routes: [{ match: \"%s\", handler: h }]\n",
                 good[i].match);
        cf = load(text, &e);
        ck_assert_msg(cf != NULL, "%s: %s", good[i].match, e.text);
        if (good[i].method == NULL) {
            ck_assert_ptr_null(cf->routes[0].method);
        } else {
            ck_assert_str_eq(cf->routes[0].method, good[i].method);
        }
        ck_assert_str_eq(cf->routes[0].path, good[i].path);
        ck_assert_int_eq(cf->routes[0].prefix, good[i].prefix);
        ck_assert_str_eq(cf->routes[0].handler, "h");
        corConfigFree(cf);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        const char* errors;

        snprintf(text, sizeof(text),
                 LISTEN "routes: [{ match: \"%s\", handler: h }]\n",
                 bad[i].match);
        errors = refused(text);
        ck_assert_msg(strncmp(errors, "t.yaml:2:19: match: ", 20) == 0
                          && strstr(errors, bad[i].message) != NULL,
                      "%s: %s", bad[i].match, errors);
    }
    /* The same path under another method, or as a prefix, is another
     * route. */
    {
        CorConfErrors e = { 0 };
        CorConfig* cf = load(LISTEN "routes:\n"
                                    "  - { match: \"GET /a\", handler: h }\n"
                                    "  - { match: \"POST /a\", handler: h }\n"
                                    "  - { match: \"/a\", handler: h }\n"
                                    "  - { match: \"/a*\", handler: h }\n",
                             &e);

        ck_assert_msg(cf != NULL, "%s", e.text);
        corConfigFree(cf);
    }
    ck_assert_str_eq(refused(LISTEN "routes:\n"
                                    "  - { match: \"/a\", handler: h }\n"
                                    "  - { match: \"/a\", handler: h }\n"),
                     "t.yaml:4:14: match: '/a' is already routed (first at "
                     "3:14)\n");
}
END_TEST

START_TEST(test_resolver_servers)
{
    static const char* const good[] = {
        "system",
        "1.1.1.1",
        "1.1.1.1,8.8.8.8",
        " 1.1.1.1 , 8.8.4.4:53 ",
        "::1",
        "[::1]",
        "[2606:4700::1111]:53, 9.9.9.9",
    };
    static const char* const bad[] = {
        "",          "dns.google",      "1.1.1.1,", ",1.1.1.1",
        "1.1.1.1:0", "1.1.1.1:65536",   "[::1]:",   "[::1]x",
        "1:2",       "1.1.1.1 8.8.8.8", "System",
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char text[256];
        CorConfErrors e = { 0 };
        CorConfig* cf;

        snprintf(text, sizeof(text), LISTEN "resolver: { servers: \"%s\" }\n",
                 good[i]);
        cf = load(text, &e);
        ck_assert_msg(cf != NULL, "%s: %s", good[i], e.text);
        ck_assert_str_eq(cf->resolver.servers, good[i]);
        corConfigFree(cf);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        const char* errors;

        snprintf(text, sizeof(text), LISTEN "resolver: { servers: \"%s\" }\n",
                 bad[i]);
        errors = refused(text);
        ck_assert_msg(strstr(errors, "servers: expected system or IP "
                                     "addresses")
                          != NULL,
                      "%s: %s", bad[i], errors);
    }
}
END_TEST

/* client: the defaults, every key, and its errors at the key. */
START_TEST(test_client_section)
{
    CorConfErrors e = { 0 };
    CorConfig* cf = load(LISTEN, &e);
    const char* text;

    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->client.connectTimeoutMs, 5000);
    ck_assert_uint_eq(cf->client.keepalivePerPeer, COR_CONN_KEEPALIVE_AUTO);
    ck_assert_uint_eq(cf->client.idleTimeoutMs, 60000);
    ck_assert_ptr_null(cf->client.caFile);
    corConfigFree(cf);
    cf = load(LISTEN "client: { connect_timeout: 250ms, keepalive_per_peer: 0,"
                     " idle_timeout: 2m, ca_file: /dev/null }\n",
              &e);
    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->client.connectTimeoutMs, 250);
    ck_assert_uint_eq(cf->client.keepalivePerPeer, 0);
    ck_assert_uint_eq(cf->client.idleTimeoutMs, 120000);
    ck_assert_str_eq(cf->client.caFile, "/dev/null");
    corConfigFree(cf);
    cf = load(LISTEN "client: { ca_file: system }\n", &e);
    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_ptr_null(cf->client.caFile);
    corConfigFree(cf);
    text = refused(LISTEN "client:\n  ca_file: /no/such/ca.pem\n"
                          "  keepalive_per_peer: -1\n  idle_timeout: 0ms\n"
                          "  connect_timeout: 5\n  verify: false\n");
    ck_assert_msg(strstr(text, "t.yaml:3:12: ca_file: cannot read "
                               "'/no/such/ca.pem'")
                      != NULL,
                  "%s", text);
    ck_assert_msg(strstr(text, "t.yaml:4:23:") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "t.yaml:5:17:") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "t.yaml:6:20:") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "unknown key 'verify' in client") != NULL, "%s",
                  text);
    ck_assert_ptr_nonnull(strstr(refused(LISTEN "client: [1]\n"), "client"));
}
END_TEST

/* client.notify_timeout: its default, a value, and its errors at the
 * key (a number with no unit, out of range). */
START_TEST(test_client_notify_timeout)
{
    CorConfErrors e = { 0 };
    CorConfig* cf = load(LISTEN, &e);
    const char* text;

    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->client.notifyTimeoutMs, 10000);
    corConfigFree(cf);
    cf = load(LISTEN "client: { notify_timeout: 1500ms }\n", &e);
    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->client.notifyTimeoutMs, 1500);
    corConfigFree(cf);
    text = refused(LISTEN "client:\n  notify_timeout: 3\n");
    ck_assert_msg(strstr(text, "t.yaml:3:19:") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "notify_timeout") != NULL, "%s", text);
    text = refused(LISTEN "client:\n  notify_timeout: 2h\n");
    ck_assert_msg(strstr(text, "t.yaml:3:19:") != NULL, "%s", text);
    text = refused(LISTEN "client:\n  notify_timeout: 0ms\n");
    ck_assert_msg(strstr(text, "t.yaml:3:19:") != NULL, "%s", text);
}
END_TEST

START_TEST(test_loops)
{
    CorConfErrors e = { 0 };
    CorConfig* cf = load(LISTEN "runtime: { loops: 1024 }\n", &e);

    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->runtime.loops, 1024);
    corConfigFree(cf);
    cf = load(LISTEN "runtime: { loops: auto }\n", &e);
    ck_assert_uint_eq(cf->runtime.loops, expectedLoops());
    corConfigFree(cf);
    ck_assert_str_eq(refused(LISTEN "runtime: { loops: all }\n"),
                     "t.yaml:2:19: loops: expected auto or a number of "
                     "loops, got 'all'\n");
    ck_assert_str_eq(refused(LISTEN "runtime: { loops: 1025 }\n"),
                     "t.yaml:2:19: loops: 1025 is out of range (1..1024)\n");
    ck_assert_str_eq(refused(LISTEN "runtime: { loops: -1 }\n"),
                     "t.yaml:2:19: loops: -1 is out of range (1..1024)\n");
    ck_assert_str_eq(refused(LISTEN "runtime: { loops: [1] }\n"),
                     "t.yaml:2:19: loops: expected an integer, got a list\n");
}
END_TEST

START_TEST(test_real_ip_and_proxy_protocol)
{
    static const char listen[] =
        "listen: [ { protocol: http, address: 127.0.0.1:8080, "
        "proxy_protocol: true }, { protocol: http, address: "
        "127.0.0.1:8081 } ]\n";
    char text[512];
    CorConfErrors e = { 0 };
    CorConfig* cf;

    snprintf(text, sizeof(text),
             "%sreal_ip: { from: [ 10.0.0.0/8, "
             "\"::1\" ], header: forwarded }\n",
             listen);
    cf = load(text, &e);
    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert(cf->listen[0].proxyProtocol);
    ck_assert(!cf->listen[1].proxyProtocol);
    ck_assert_uint_eq(cf->realIp->fromCount, 2);
    ck_assert_int_eq(cf->realIp->header, COR_REAL_IP_FORWARDED);
    ck_assert_str_eq(cf->realIp->headerName, "Forwarded");
    corConfigFree(cf);
    snprintf(text, sizeof(text), "%sreal_ip: { from: 10.0.0.1 }\n", listen);
    cf = load(text, &e);
    ck_assert_uint_eq(cf->realIp->fromCount, 1);
    ck_assert_int_eq(cf->realIp->header, COR_REAL_IP_X_FORWARDED_FOR);
    corConfigFree(cf);
    snprintf(text, sizeof(text),
             "%sreal_ip: { from: [ 10.0.0.1/8 ], "
             "header: X-Client }\n",
             listen);
    ck_assert_str_eq(refused(text),
                     "t.yaml:2:20: real_ip.from: expected an address or a "
                     "network such as 10.0.0.0/8 or 2001:db8::/32, got "
                     "'10.0.0.1/8'\n"
                     "t.yaml:2:42: real_ip.header: expected X-Forwarded-For, "
                     "X-Real-IP or Forwarded, got 'X-Client'\n");
    ck_assert_str_eq(refused("listen: [ { protocol: http, address: "
                             "127.0.0.1:8080 } ]\nreal_ip: { header: "
                             "X-Real-IP }\n"),
                     "t.yaml:2:10: real_ip: missing 'from' (the proxies "
                     "trusted, such as [ 10.0.0.0/8 ])\n");
    corConfErrorsFree(&e);
}
END_TEST

START_TEST(test_modules)
{
    ck_assert_str_eq(refused(LISTEN "modules: [hello]\n"),
                     "t.yaml:2:11: modules[0]: expected a mapping such as "
                     "{ load: hello }, got 'hello'\n");
    ck_assert_str_eq(refused(LISTEN "modules: [{ load: .so }]\n"),
                     "t.yaml:2:19: load: expected a module name such as "
                     "hello or a path ending in .so, got '.so'\n");
    ck_assert_str_eq(refused(LISTEN "modules: [{ load: [a] }]\n"),
                     "t.yaml:2:19: load: expected a string, got a list\n");
    /* The core reads only load: the other keys are the module's. */
    {
        CorConfErrors e = { 0 };
        CorConfig* cf = load(LISTEN "modules:\n"
                                    "  - { load: my_mod-2, anything: [1] }\n"
                                    "  - { load: ./build/x.so }\n",
                             &e);

        ck_assert_msg(cf != NULL, "%s", e.text);
        ck_assert_str_eq(cf->modules[0].load, "my_mod-2");
        ck_assert_str_eq(cf->modules[1].load, "./build/x.so");
        ck_assert_uint_eq(corConfCount(cf->modules[0].node), 2);
        corConfigFree(cf);
    }
}
END_TEST

START_TEST(test_load_file)
{
    char path[] = "/tmp/corConfigTestXXXXXX";
    int fd = mkstemp(path);
    CorConfErrors e = { 0 };
    CorConfig* cf;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, complete, strlen(complete)),
                     (int)strlen(complete));
    close(fd);
    cf = corConfigLoad(path, &e);
    unlink(path);
    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_str_eq(cf->file, path);
    ck_assert_str_eq(corConfFile(cf->listen[0].node), path);
    corConfigFree(cf);

    ck_assert_ptr_null(corConfigLoad("/nonexistent/cor.yaml", &e));
    ck_assert_str_eq(e.text, "/nonexistent/cor.yaml: cannot open: No such "
                             "file or directory\n");
    corConfErrorsFree(&e);
}
END_TEST

/* Paths the file names are beside it, wherever cor runs from; one in the
 * current folder still has a slash (for dlopen). */
START_TEST(test_paths_beside_the_file)
{
    static const char* const cases[][3] = {
        { "conf/cor.yaml", "cor.pid", "conf/cor.pid" },
        { "conf/cor.yaml", "../build/cor.pid", "conf/../build/cor.pid" },
        { "/etc/cor/cor.yaml", "mods/wait.so", "/etc/cor/mods/wait.so" },
        { "cor.yaml", "wait.so", "./wait.so" },
        { "/cor.yaml", "cor.pid", "/cor.pid" },
        { "conf/cor.yaml", "/run/cor.pid", "/run/cor.pid" },
        { "cor.yaml", "./x.so", "./x.so" },
        { "cor.yaml", "././x.so", "./x.so" },
        { "conf/cor.yaml", "./hi.so", "conf/hi.so" },
        { "./cor.yaml", "./run/cor.pid", "./run/cor.pid" },
    };
    const char* text = LISTEN "log: { pid_file: run/cor.pid }\n";
    CorConfErrors e = { 0 };
    CorConfig* cf;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char* path = corConfigPathBeside(cases[i][0], cases[i][1]);

        ck_assert_str_eq(path, cases[i][2]);
        free(path);
    }
    cf = corConfigLoadString("/srv/site/cor.yaml", text, strlen(text), &e);
    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_str_eq(cf->log.pidFile, "/srv/site/run/cor.pid");
    corConfigFree(cf);
}
END_TEST

/* Each line of expected.txt: the file's first error has that mark and
 * contains that text. */
START_TEST(test_bad_corpus)
{
    FILE* f = fopen(CORPUS "expected.txt", "r");
    char line[512];
    unsigned files = 0;

    ck_assert_msg(f != NULL, "run from the repository root");
    while (fgets(line, sizeof(line), f) != NULL) {
        char* name = strtok(line, "\t");
        char* mark = strtok(NULL, "\t");
        char* text = strtok(NULL, "\n");
        char path[256];
        char prefix[512];
        CorConfErrors e = { 0 };
        CorConfig* cf;

        ck_assert_msg(name && mark && text, "bad line in expected.txt");
        snprintf(path, sizeof(path), CORPUS "%s", name);
        snprintf(prefix, sizeof(prefix), "%s:%s: ", path, mark);
        cf = corConfigLoad(path, &e);
        ck_assert_msg(cf == NULL, "%s loaded", name);
        ck_assert_msg(e.count > 0 && e.text != NULL, "%s: no error", name);
        *strchr(e.text, '\n') = '\0';
        ck_assert_msg(strncmp(e.text, prefix, strlen(prefix)) == 0
                          && strstr(e.text, text) != NULL,
                      "%s: wanted %s...%s, got %s", name, prefix, text, e.text);
        corConfErrorsFree(&e);
        files++;
    }
    fclose(f);
    ck_assert_uint_ge(files, 35);
}
END_TEST

/* Every file of the corpus is in expected.txt, and the other way round. */
START_TEST(test_bad_corpus_complete)
{
    DIR* dir = opendir(CORPUS);
    FILE* f = fopen(CORPUS "expected.txt", "r");
    char listed[16384] = "\n";
    size_t len = 1;
    unsigned yamls = 0;
    unsigned lines = 0;
    char line[512];
    struct dirent* ent;

    ck_assert_ptr_nonnull(dir);
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        len += (size_t)snprintf(listed + len, sizeof(listed) - len, "%.*s\n",
                                (int)strcspn(line, "\t"), line);
        ck_assert_uint_lt(len, sizeof(listed));
        lines++;
    }
    fclose(f);
    while ((ent = readdir(dir)) != NULL) {
        char needle[300];
        size_t n = strlen(ent->d_name);

        if (n < 5 || strcmp(ent->d_name + n - 5, ".yaml") != 0) {
            continue;
        }
        snprintf(needle, sizeof(needle), "\n%s\n", ent->d_name);
        ck_assert_msg(strstr(listed, needle) != NULL,
                      "%s is not in expected.txt", ent->d_name);
        yamls++;
    }
    closedir(dir);
    ck_assert_uint_eq(yamls, lines);
}
END_TEST

COR_TEST_SUITE(corConfig)
{
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_complete_config);
    tcase_add_test(tc, test_design_example);
    tcase_add_test(tc, test_all_errors_collected);
    tcase_add_test(tc, test_errors_beside_an_anchor_are_collected);
    tcase_add_test(tc, test_sections_of_the_wrong_kind);
    tcase_add_test(tc, test_listen_addresses);
    tcase_add_test(tc, test_listen_duplicates);
    tcase_add_test(tc, test_listen_http2);
    tcase_add_test(tc, test_on_off_keys_take_every_word);
    tcase_add_test(tc, test_access_log_off_words);
    tcase_add_test(tc, test_listen_tls_keys);
    tcase_add_test(tc, test_route_matches);
    tcase_add_test(tc, test_resolver_servers);
    tcase_add_test(tc, test_client_section);
    tcase_add_test(tc, test_client_notify_timeout);
    tcase_add_test(tc, test_loops);
    tcase_add_test(tc, test_real_ip_and_proxy_protocol);
    tcase_add_test(tc, test_modules);
    tcase_add_test(tc, test_load_file);
    tcase_add_test(tc, test_paths_beside_the_file);
    tcase_add_test(tc, test_bad_corpus);
    tcase_add_test(tc, test_bad_corpus_complete);
}
