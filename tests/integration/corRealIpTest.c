/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's address against the real binary: a guard that denies
 * 127.0.0.1 and ::1 and allows everything else, and the access log, say
 * which address cor saw.
 *
 * PROXY protocol (listener key proxy_protocol): headers written by a raw
 * socket give exact addresses (v1 TCP4 and TCP6, v2 INET and INET6 with
 * TLVs, v2 LOCAL and v1 UNKNOWN keeping the peer's); HAProxy in front
 * with send-proxy and send-proxy-v2 says the real peer, curl bound to
 * 127.0.0.2, and with send-proxy-v2 to an https listener the header
 * comes before the TLS handshake. A connection without a header, with a
 * malformed one, or silent past limits.request_timeout is closed without
 * an answer and counted in /metrics. real_ip applies on top, to the
 * header's source.
 *
 * real_ip: curl with X-Forwarded-For from ::1 (trusted) is the address
 * it names, over HTTP/1.1 and h2c; from 127.0.0.1 (not trusted) it is
 * 127.0.0.1; the rightmost untrusted address of a chain wins; forward
 * sends upstream the list with this hop (::1) appended, and a route's
 * {client} the address real_ip found.
 */
#include "corTest.h"
#include "corServer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static char certs[64];
static char out[1 << 16];
static pid_t haproxy;
static int upstreamPid;
static int upstreamPort;
static const char haproxyBin[] = "/usr/sbin/haproxy";

/* A shell command, printf-style, its output in out; its status. */
static int
sh(const char* fmt, ...)
{
    char command[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(command, sizeof(command), fmt, ap);
    va_end(ap);
    return corShell(command, out, sizeof(out));
}

/* Whether the access log's last line begins with addr. */
static bool
loggedLast(const char* addr)
{
    char want[96];

    /* The access log is written as the answer goes: give it a moment. */
    for (int i = 0; i < 50; i++) {
        sh("tail -1 %s/access.log 2>/dev/null", server.dir);
        snprintf(want, sizeof(want), "%s - ", addr);
        if (strncmp(out, want, strlen(want)) == 0) {
            return true;
        }
        usleep(20000);
    }
    return false;
}

/* Send header then a GET of /who with fields (header lines, each ending
 * in CRLF) on the proxy listener; the status, or 0 when the connection
 * was closed without an answer. */
static int
viaHeaderWith(int port, const void* header, size_t len, const char* fields)
{
    char get[512];
    char buf[4096];
    int fd = corConnect(port);
    ssize_t n;

    snprintf(get, sizeof(get),
             "GET /who HTTP/1.1\r\nHost: t\r\n%s"
             "Connection: close\r\n\r\n",
             fields);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, header, len), 0);
    corSendAll(fd, get, strlen(get));
    n = corReadResponse(fd, buf, sizeof(buf), 5000);
    close(fd);
    return n > 0 ? corStatus(buf) : 0;
}

static int
viaHeader(int port, const void* header, size_t len)
{
    return viaHeaderWith(port, header, len, "");
}

static int
viaText(int port, const char* line)
{
    return viaHeader(port, line, strlen(line));
}

/* A v2 header: command (0 LOCAL, 1 PROXY), family byte, address block,
 * then a TLV (ALPN "h2"), into h; its length. */
static size_t
v2(uint8_t* h, int command, uint8_t family, const void* block, size_t n)
{
    static const uint8_t sig[12] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                     0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };
    static const uint8_t tlv[] = { 0x01, 0x00, 0x02, 'h', '2' };
    size_t len = n + sizeof(tlv);

    memcpy(h, sig, sizeof(sig));
    h[12] = (uint8_t)(0x20 | command);
    h[13] = family;
    h[14] = (uint8_t)(len >> 8);
    h[15] = (uint8_t)len;
    memcpy(h + 16, block, n);
    memcpy(h + 16 + n, tlv, sizeof(tlv));
    return 16 + len;
}

static void
proxyStart(int tlsPort, const char* extra)
{
    char yaml[4096];

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 2, workers: 2, coroutines: { enabled: "
             "{COROUTINES} } }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT2}, "
             "proxy_protocol: on }\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:%d\n"
             "    proxy_protocol: on\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
             "limits: { request_timeout: 1s }\n"
             "%s"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "  - load: access\n"
             "    guards: [ { name: notlocal, deny: [ 127.0.0.1, \"::1\" ],"
             " allow: [ all ] } ]\n"
             "routes:\n"
             "  - { match: \"GET /who\", handler: hello, guard: notlocal }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "log: { pid_file: {DIR}/cor.pid, access: {DIR}/access.log }\n",
             tlsPort, certs, certs, extra);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

static void
setUp(void)
{
    corTestCertsMake(certs, sizeof(certs));
}

static void
tearDown(void)
{
    if (haproxy > 0) {
        kill(haproxy, SIGTERM);
        waitpid(haproxy, NULL, 0);
        haproxy = 0;
    }
    corUpstreamStop(&upstreamPid);
    corServerStop(&server);
    corTestCertsRemove(certs);
}

/* ---- PROXY protocol ------------------------------------------------------ */

START_TEST(test_proxy_header_is_the_client)
{
    uint8_t h[128];
    uint8_t block[36];
    struct in6_addr a6;

    proxyStart(corFreePort(), "");
    ck_assert_int_eq(viaText(server.port2, "PROXY TCP4 192.0.2.7 127.0.0.1 "
                                           "4711 80\r\n"),
                     200);
    ck_assert(loggedLast("192.0.2.7"));
    ck_assert_int_eq(viaText(server.port2, "PROXY TCP6 2001:db8::7 ::1 "
                                           "4711 80\r\n"),
                     200);
    ck_assert(loggedLast("2001:db8::7"));
    memcpy(block,
           (uint8_t[]){ 198, 51, 100, 9, 127, 0, 0, 1, 0x12, 0x67, 0, 80 }, 12);
    ck_assert_int_eq(viaHeader(server.port2, h, v2(h, 1, 0x11, block, 12)),
                     200);
    ck_assert(loggedLast("198.51.100.9"));
    inet_pton(AF_INET6, "2001:db8::9", &a6);
    memcpy(block, &a6, 16);
    inet_pton(AF_INET6, "::1", block + 16);
    memcpy(block + 32, (uint8_t[]){ 0x12, 0x67, 0, 80 }, 4);
    ck_assert_int_eq(viaHeader(server.port2, h, v2(h, 1, 0x21, block, 36)),
                     200);
    ck_assert(loggedLast("2001:db8::9"));
    /* The balancer's own (a health check): the peer's address stands,
     * which the guard refuses. */
    ck_assert_int_eq(viaHeader(server.port2, h, v2(h, 0, 0x00, block, 0)), 403);
    ck_assert(loggedLast("127.0.0.1"));
    ck_assert_int_eq(viaText(server.port2, "PROXY UNKNOWN\r\n"), 403);
    /* The plain listener beside it takes no header. */
    ck_assert_int_eq(viaText(server.port, ""), 403);
}
END_TEST

/* real_ip applies on top: the PROXY header's source is the address that
 * real_ip.from is matched against. */
START_TEST(test_proxy_then_real_ip)
{
    static const char trusted[] = "PROXY TCP4 192.0.2.7 127.0.0.1 1 80\r\n";
    static const char stranger[] = "PROXY TCP4 203.0.113.1 127.0.0.1 1 "
                                   "80\r\n";

    proxyStart(corFreePort(), "real_ip: { from: [ 192.0.2.0/24 ] }\n");
    ck_assert_int_eq(viaHeaderWith(server.port2, trusted, strlen(trusted),
                                   "X-Forwarded-For: 198.51.100.20\r\n"),
                     200);
    ck_assert(loggedLast("198.51.100.20"));
    ck_assert_int_eq(viaHeaderWith(server.port2, stranger, strlen(stranger),
                                   "X-Forwarded-For: 198.51.100.20\r\n"),
                     200);
    ck_assert(loggedLast("203.0.113.1"));
}
END_TEST

START_TEST(test_proxy_without_header_closed)
{
    uint8_t h[128];
    uint8_t block[12] = { 0 };
    long startMs;
    int fd;

    proxyStart(corFreePort(), "");
    /* A request with no header: its first byte says so. */
    ck_assert_int_eq(viaText(server.port2, ""), 0);
    /* Malformed: a port out of range, a v1 line without its CRLF within
     * 107 bytes, a v2 family that does not exist, a v2 length shorter
     * than its address block. */
    ck_assert_int_eq(viaText(server.port2, "PROXY TCP4 192.0.2.7 127.0.0.1 "
                                           "99999 80\r\n"),
                     0);
    ck_assert_int_eq(viaText(server.port2,
                             "PROXY TCP4 192.0.2.7 "
                             "127.0.0.1 4711 80 and on and on and on and on "
                             "and on and on and on and on and on and on\r\n"),
                     0);
    ck_assert_int_eq(viaHeader(server.port2, h, v2(h, 1, 0x41, block, 12)), 0);
    v2(h, 1, 0x21, block, 12); /* INET6 in 12 + 5 bytes */
    ck_assert_int_eq(viaHeader(server.port2, h, 16 + 17), 0);
    ck_assert_int_eq(corMetric(server.port, "cor_proxy_protocol_refused_total"
                                            "{reason=\"invalid\"}"),
                     5);
    /* Silent: closed at limits.request_timeout (1s). */
    fd = corConnect(server.port2);
    startMs = corNowMs();
    ck_assert(corPeerClosed(fd, 10000));
    ck_assert_int_ge(corNowMs() - startMs, 900);
    close(fd);
    ck_assert_int_eq(corMetric(server.port, "cor_proxy_protocol_refused_total"
                                            "{reason=\"timeout\"}"),
                     1);
}
END_TEST

/* HAProxy with its config (the frontends to cor's ports), started in the
 * foreground; waits until port listens. */
static void
haproxyStart(const char* config, int port)
{
    char path[256];
    FILE* f;
    int fd = -1;

    snprintf(path, sizeof(path), "%s/haproxy.cfg", server.dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(config, f);
    fclose(f);
    haproxy = fork();
    ck_assert_int_ge(haproxy, 0);
    if (haproxy == 0) {
        execl(haproxyBin, haproxyBin, "-db", "-q", "-f", path, (char*)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && fd < 0; i++) {
        usleep(25000);
        fd = corConnect(port);
    }
    ck_assert_int_ge(fd, 0);
    close(fd);
}

START_TEST(test_haproxy_send_proxy)
{
    char config[2048];
    int v1Port = corFreePort();
    int v2Port = corFreePort();
    int tlsFront = corFreePort();
    int tlsPort = corFreePort();

    if (access(haproxyBin, X_OK) != 0) {
        printf("skipped: no %s\n", haproxyBin);
        return;
    }
    proxyStart(tlsPort, "");
    snprintf(config, sizeof(config),
             "defaults\n  mode tcp\n  timeout connect 5s\n"
             "  timeout client 30s\n  timeout server 30s\n"
             "listen v1\n  bind 127.0.0.1:%d\n"
             "  server cor 127.0.0.1:%d send-proxy\n"
             "listen v2\n  bind 127.0.0.1:%d\n"
             "  server cor 127.0.0.1:%d send-proxy-v2\n"
             "listen tls\n  bind 127.0.0.1:%d\n"
             "  server cor 127.0.0.1:%d send-proxy-v2\n",
             v1Port, server.port2, v2Port, server.port2, tlsFront, tlsPort);
    haproxyStart(config, tlsFront);
    /* curl from 127.0.0.2: the peer HAProxy sees and says. */
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' "
                        "--interface 127.0.0.2 http://127.0.0.1:%d/who",
                        v1Port),
                     0);
    ck_assert_str_eq(out, "200");
    ck_assert(loggedLast("127.0.0.2"));
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' "
                        "--interface 127.0.0.2 http://127.0.0.1:%d/who",
                        v2Port),
                     0);
    ck_assert_str_eq(out, "200");
    ck_assert(loggedLast("127.0.0.2"));
    /* TLS after the header: HAProxy passes the handshake through. */
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' "
                        "--cacert %s/ca.pem --resolve localhost:%d:127.0.0.1"
                        " --interface 127.0.0.2 https://localhost:%d/who",
                        certs, tlsFront, tlsFront),
                     0);
    ck_assert_str_eq(out, "200");
    ck_assert(loggedLast("127.0.0.2"));
    /* From 127.0.0.1 it is 127.0.0.1 that HAProxy says: refused. */
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' "
                        "http://127.0.0.1:%d/who",
                        v2Port),
                     0);
    ck_assert_str_eq(out, "403");
}
END_TEST

/* ---- real_ip ------------------------------------------------------------- */

static void
realIpStart(void)
{
    char yaml[4096];

    upstreamPid = corUpstreamStart(&upstreamPort);
    ck_assert_int_gt(upstreamPid, 0);
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 2, workers: 2, coroutines: { enabled: "
             "{COROUTINES} } }\n"
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
             "  - { protocol: http, address: \"[::1]:{PORT}\", http2: on }\n"
             "real_ip: { from: [ \"::1\", 203.0.113.0/24 ], "
             "header: X-Forwarded-For }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "  - load: forward\n"
             "    upstreams: [ { name: up, servers: [ "
             "\"http://127.0.0.1:%d\" ] } ]\n"
             "  - load: access\n"
             "    guards: [ { name: notlocal, deny: [ 127.0.0.1, \"::1\" ],"
             " allow: [ all ] } ]\n"
             "routes:\n"
             "  - { match: \"GET /who\", handler: hello, guard: notlocal }\n"
             "  - { match: \"GET /echo\", handler: up, request_headers: "
             "{ set: { X-Client: \"{client}\" } } }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "log: { pid_file: {DIR}/cor.pid, access: {DIR}/access.log }\n",
             upstreamPort);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
}

/* curl's status for /who with args, from host ("127.0.0.1", "[::1]"). */
static const char*
who(const char* host, const char* args)
{
    ck_assert_int_eq(sh("curl -s -o /dev/null -w '%%{http_code}' %s "
                        "'http://%s:%d/who'",
                        args, host, server.port),
                     0);
    return out;
}

START_TEST(test_real_ip_from_trusted_only)
{
    realIpStart();
    ck_assert_str_eq(who("[::1]", "-H 'X-Forwarded-For: 192.0.2.44'"), "200");
    ck_assert(loggedLast("192.0.2.44"));
    ck_assert_str_eq(who("[::1]", "--http2-prior-knowledge "
                                  "-H 'X-Forwarded-For: 2001:db8::44'"),
                     "200");
    ck_assert(loggedLast("2001:db8::44"));
    /* Not trusted: the header is the client's word, not taken. */
    ck_assert_str_eq(who("127.0.0.1", "-H 'X-Forwarded-For: 192.0.2.44'"),
                     "403");
    ck_assert(loggedLast("127.0.0.1"));
    /* A chain: past the trusted 203.0.113.5 to the first untrusted one;
     * what the client wrote at the left is not read. */
    ck_assert_str_eq(who("[::1]", "-H 'X-Forwarded-For: 10.9.9.9, "
                                  "192.0.2.45, 203.0.113.5'"),
                     "200");
    ck_assert(loggedLast("192.0.2.45"));
    /* The header says ::1 itself: the trusted peer stays the client. */
    ck_assert_str_eq(who("[::1]", "-H 'X-Forwarded-For: ::1'"), "403");
    ck_assert(loggedLast("::1"));
    /* Rubbish at the right: no address taken. */
    ck_assert_str_eq(who("[::1]", "-H 'X-Forwarded-For: 192.0.2.44, "
                                  "nonsense'"),
                     "403");
}
END_TEST

START_TEST(test_real_ip_forward_appends_the_hop)
{
    realIpStart();
    ck_assert_int_eq(sh("curl -s -i -H 'X-Forwarded-For: 192.0.2.44' "
                        "'http://[::1]:%d/echo'",
                        server.port),
                     0);
    ck_assert_msg(strstr(out, "\nX-Forwarded-For: 192.0.2.44, ::1") != NULL,
                  "%s", out);
    /* A route's {client} is the same address. */
    ck_assert_msg(strstr(out, "\nX-Client: 192.0.2.44") != NULL, "%s", out);
    ck_assert(loggedLast("192.0.2.44"));
}
END_TEST

COR_TEST_SUITE(corRealIp)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_proxy_header_is_the_client);
    tcase_add_test(tc, test_proxy_then_real_ip);
    tcase_add_test(tc, test_proxy_without_header_closed);
    tcase_add_test(tc, test_haproxy_send_proxy);
    tcase_add_test(tc, test_real_ip_from_trusted_only);
    tcase_add_test(tc, test_real_ip_forward_appends_the_hop);
}
