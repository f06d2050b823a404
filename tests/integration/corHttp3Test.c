/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/3 against the real binary and another implementation: Debian's
 * ngtcp2-client (gtlsclient, ngtcp2's own example client over GnuTLS)
 * fetches from an https listener with http3: on over loopback UDP. One
 * server serves every check (started once: the suite stays quick): a
 * page, 100 streams on one connection, 10 MB down from memory and from a
 * file, 10 MB up (gathered, and streamed to its handler in bounded
 * memory), a streamed answer, the Alt-Svc of the HTTP/1.1 and h2
 * answers (curl), `cor -t` refusing http3 on a plain listener, a client
 * that moves, a stateless reset, the idle timeout, a body past its limit,
 * a Retry, and a transfer through a relay of the test's own that loses
 * one datagram in 20 each way.
 */
#include "corTest.h"
#include "corServer.h"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TEN_MB (10 * 1024 * 1024)

static CorServer server;
static char certs[64];
static char out[1 << 16];
static bool started;

/* Two loops: a client's packets may reach either socket. Started once,
 * in check's runner, for every test. */
static void
serverStart(void)
{
    char yaml[4096];

    if (started) {
        return;
    }
    corTestCertsMake(certs, sizeof(certs));
    snprintf(yaml, sizeof(yaml),
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 2\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:{PORT}\n"
             "    http3: on\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"/echo\", handler: echo }\n"
             "  - { match: \"POST /bodyread\", handler: bodyread }\n"
             "  - { match: \"GET /bytes\", handler: bytes }\n"
             "  - { match: \"GET /file\", handler: file }\n"
             "  - { match: \"GET /stream\", handler: stream }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "limits:\n"
             "  body_bytes: 16MiB\n"
             "  keepalive_timeout: 1s\n"
             "  body_timeout: 300ms\n"
             "log: { pid_file: {DIR}/cor.pid, access: {DIR}/access.log }\n",
             certs, certs);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
    started = true;
    snprintf(yaml, sizeof(yaml), "mkdir -p %s/dl", server.dir);
    ck_assert_int_eq(corShell(yaml, out, sizeof(out)), 0);
}

/* gtlsclient with options opts on path of the server, quiet. Its
 * output in out; its exit status. */
static int
client(const char* opts, const char* path)
{
    char command[2048];
    int rc;

    snprintf(command, sizeof(command),
             "cd %s && timeout 20 gtlsclient -q --exit-on-all-streams-close "
             "%s 127.0.0.1 %d 'https://127.0.0.1:%d%s' 2>&1",
             server.dir, opts, server.port, server.port, path);
    rc = corShell(command, out, sizeof(out));
    if (rc != 0) {
        fprintf(stderr, "corHttp3Test: %s: %d: %s\n", command, rc, out);
    }
    return rc;
}

/* Lines of the access log with text, after the log caught up. */
static int
accessCount(const char* text)
{
    char command[512];
    long deadline = corNowMs() + 2000;
    int n;

    snprintf(command, sizeof(command), "grep -c '%s' %s/access.log", text,
             server.dir);
    do {
        corShell(command, out, sizeof(out));
        n = atoi(out);
    } while (n == 0 && corNowMs() < deadline);
    return n;
}

/* cor_http3_total{kind} of s's /metrics (over HTTP/1.1), or -1. */
static long
metric(const CorServer* s, const char* kind)
{
    char command[256];
    char key[64];
    const char* at;

    snprintf(command, sizeof(command), "curl -sk https://127.0.0.1:%d/metrics",
             s->port);
    snprintf(key, sizeof(key), "cor_http3_total{kind=\"%s\"} ", kind);
    if (corShell(command, out, sizeof(out)) != 0
        || (at = strstr(out, key)) == NULL) {
        return -1;
    }
    return atol(at + strlen(key));
}

/* A UDP socket connected to the server from a port of its own. */
static int
udpOpen(void)
{
    struct sockaddr_in to = { .sin_family = AF_INET,
                              .sin_port = htons((uint16_t)server.port) };
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr*)&to, sizeof(to)), 0);
    return fd;
}

static void
downloadCheck(const char* uri, const char* file, long size)
{
    char args[512];
    char command[512];

    snprintf(args, sizeof(args), "--download=%s/dl", server.dir);
    ck_assert_int_eq(client(args, uri), 0);
    snprintf(command, sizeof(command), "stat -c %%s '%s/dl/%s'", server.dir,
             file);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_int_eq(atol(out), size);
}

START_TEST(test_a_page_over_h3)
{
    char args[256];

    snprintf(args, sizeof(args), "--download=%s/dl", server.dir);
    ck_assert_int_eq(client(args, "/hello"), 0);
    snprintf(args, sizeof(args), "cat %s/dl/hello", server.dir);
    ck_assert_int_eq(corShell(args, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "hello, world\n");
    /* The handler saw HTTP/3: the access log says so. */
    ck_assert_int_ge(accessCount("GET /hello HTTP/3\" 200"), 1);
}
END_TEST

/* The sum testkit's bodyread says of the bytes of file. */
static uint32_t
fileSum(const char* file)
{
    FILE* f = fopen(file, "rb");
    uint32_t sum = 0;
    int ch;

    ck_assert_ptr_nonnull(f);
    while ((ch = getc(f)) != EOF) {
        sum = sum * 31 + (unsigned char)ch;
    }
    fclose(f);
    return sum;
}

/* 10 MB to a handler that streams its body (testkit's bodyread) comes
 * whole, while the generation's peak memory (VmHWM, set back to its RSS
 * first) grows by far less than the body: the QUIC stream's window opens
 * only as the handler takes the bytes. Gathered whole (as before) it
 * grew by the body and more. A sanitizer's quarantine keeps what was
 * freed: its peak is not judged. Early, before the transfers that grow
 * the heap. */
START_TEST(test_10_mb_up_streamed_to_its_handler_in_bounded_memory)
{
    const char* sanitized = getenv("COR_TEST_SANITIZED");
    pid_t gen = corServerGeneration(&server);
    char command[512];
    char expect[64];
    char file[256];
    long before;
    long grew;

    ck_assert_int_gt(gen, 0);
    snprintf(file, sizeof(file), "%s/upstreamed", server.dir);
    snprintf(command, sizeof(command),
             "head -c %d /dev/urandom > %s && echo 5 > /proc/%d/clear_refs",
             TEN_MB, file, (int)gen);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    before = corProcStatusKb(gen, "VmHWM");
    snprintf(command, sizeof(command), "-m POST -d %s --download=%s/dl", file,
             server.dir);
    ck_assert_int_eq(client(command, "/bodyread"), 0);
    grew = corProcStatusKb(gen, "VmHWM") - before;
    fprintf(stderr, "corHttp3Test: 10 MB streamed up: peak +%ld KiB\n", grew);
    snprintf(command, sizeof(command), "cat %s/dl/bodyread", server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    snprintf(expect, sizeof(expect), "length %d sum %u\n", TEN_MB,
             (unsigned)fileSum(file));
    ck_assert_str_eq(out, expect);
    if (sanitized == NULL || strcmp(sanitized, "1") != 0) {
        ck_assert_int_lt(grew, 4 * 1024);
    }
}
END_TEST

START_TEST(test_100_streams_on_one_connection)
{
    long before = accessCount("GET /bytes?n=100 HTTP/3\" 200");

    ck_assert_int_eq(client("-n 100", "/bytes?n=100"), 0);
    ck_assert_int_eq(accessCount("GET /bytes?n=100 HTTP/3\" 200") - before,
                     100);
}
END_TEST

START_TEST(test_10_mb_down_from_memory_and_from_a_file)
{
    char command[512];

    downloadCheck("/bytes?n=10485760", "bytes?n=10485760", TEN_MB);
    snprintf(command, sizeof(command),
             "head -c %d /dev/urandom > %s/big && mkdir -p %s/dl", TEN_MB,
             server.dir, server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    snprintf(command, sizeof(command), "/file?path=%s/big", server.dir);
    /* Saved under the last part of its URI. */
    downloadCheck(command, "big", TEN_MB);
    snprintf(command, sizeof(command), "cmp %s/big %s/dl/big", server.dir,
             server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
}
END_TEST

START_TEST(test_10_mb_up_echoed)
{
    char command[512];
    char args[512];

    snprintf(command, sizeof(command),
             "head -c %d /dev/urandom > %s/up && mkdir -p %s/dl", TEN_MB,
             server.dir, server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    snprintf(args, sizeof(args), "-m POST -d %s/up --download=%s/dl",
             server.dir, server.dir);
    ck_assert_int_eq(client(args, "/echo"), 0);
    snprintf(command, sizeof(command), "cmp %s/up %s/dl/echo", server.dir,
             server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
}
END_TEST

START_TEST(test_a_streamed_answer)
{
    char args[256];

    snprintf(args, sizeof(args), "--download=%s/dl", server.dir);
    ck_assert_int_eq(client(args, "/stream?n=3"), 0);
    snprintf(args, sizeof(args), "cat '%s/dl/stream?n=3'", server.dir);
    ck_assert_int_eq(corShell(args, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "piece 0\npiece 1\npiece 2\n");
}
END_TEST

START_TEST(test_alt_svc_on_http1_and_h2)
{
    char command[256];
    char want[64];

    snprintf(want, sizeof(want), "alt-svc: h3=\":%d\"; ma=86400", server.port);
    snprintf(command, sizeof(command),
             "curl -sk --http1.1 -D- -o /dev/null https://127.0.0.1:%d/hello",
             server.port);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    COR_CHECK_HAS(out, want);
    snprintf(command, sizeof(command),
             "curl -sk --http2 -D- -o /dev/null https://127.0.0.1:%d/hello",
             server.port);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    COR_CHECK_HAS(out, "HTTP/2 200");
    COR_CHECK_HAS(out, want);
}
END_TEST

START_TEST(test_check_refuses_http3_without_tls)
{
    ck_assert_int_eq(corConfigCheck(&server, "plain.yaml",
                                    "listen:\n"
                                    "  - { protocol: http, address: "
                                    "127.0.0.1:1, http3: on }\n"
                                    "modules: [{ load: http }]\n",
                                    out, sizeof(out)),
                     1);
    COR_CHECK_HAS(out, "plain.yaml:2");
    COR_CHECK_HAS(out, "http3: on needs tls");
}
END_TEST

START_TEST(test_a_client_that_moves_keeps_its_connection)
{
    char args[256];

    /* Its port changes after the handshake, before its request: the
     * kernel may give its packets to the other loop's socket, which
     * hands them to the owner its connection ID names. */
    snprintf(args, sizeof(args),
             "--change-local-addr=50ms --delay-stream=200ms --download=%s/dl",
             server.dir);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(client(args, "/hello"), 0);
    }
}
END_TEST

/* A short-header packet for a connection of ours that is gone, from 16
 * ports: each gets a stateless reset, shorter than it, whichever loop's
 * socket the kernel gave it to (the loop its ID names answers, the other
 * hands it over: with 16 ports both do, but once in 65536 runs). */
START_TEST(test_a_stateless_reset_answers_an_unknown_connection)
{
    long handoffs = metric(&server, "handoff");
    uint8_t pkt[64];

    memset(pkt, 0x5a, sizeof(pkt));
    pkt[0] = 0x40; /* short header, the fixed bit */
    pkt[1] = 1;    /* loop 1's ID */
    for (int i = 0; i < 16; i++) {
        struct pollfd p = { .fd = udpOpen(), .events = POLLIN };
        uint8_t reply[128];
        ssize_t n;

        ck_assert_int_eq(send(p.fd, pkt, sizeof(pkt), 0), (ssize_t)sizeof(pkt));
        ck_assert_int_eq(poll(&p, 1, 2000), 1);
        n = recv(p.fd, reply, sizeof(reply), 0);
        ck_assert_int_ge(n, 21);
        ck_assert_int_lt(n, (ssize_t)sizeof(pkt));
        ck_assert_int_eq(reply[0] & 0xc0, 0x40);
        close(p.fd);
    }
    ck_assert_int_gt(metric(&server, "handoff"), handoffs);
    ck_assert_int_ge(metric(&server, "stateless_reset"), 16);
}
END_TEST

/* Ten packets for a connection of ours that is gone, sent at once with
 * GSO (UDP_SEGMENT), reach the server as one read where it asked for GRO:
 * it splits them, and each gets its stateless reset. */
START_TEST(test_a_coalesced_read_is_split_into_its_datagrams)
{
    uint8_t pkts[10][64];
    char control[CMSG_SPACE(sizeof(uint16_t))] = { 0 };
    struct iovec iov = { .iov_base = pkts, .iov_len = sizeof(pkts) };
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = control,
                          .msg_controllen = sizeof(control) };
    struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    uint16_t segment = sizeof(pkts[0]);
    struct pollfd p = { .fd = udpOpen(), .events = POLLIN };
    int replies = 0;

    for (int i = 0; i < 10; i++) {
        memset(pkts[i], 0x5a + i, sizeof(pkts[i]));
        pkts[i][0] = 0x40; /* short header, the fixed bit */
        pkts[i][1] = 0;    /* loop 0's ID */
    }
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(segment));
    memcpy(CMSG_DATA(cm), &segment, sizeof(segment));
    ck_assert_int_eq(sendmsg(p.fd, &msg, 0), (ssize_t)sizeof(pkts));
    while (replies < 10 && poll(&p, 1, 2000) == 1) {
        uint8_t reply[128];

        ck_assert_int_lt(recv(p.fd, reply, sizeof(reply), 0),
                         (ssize_t)sizeof(pkts[0]));
        replies++;
    }
    close(p.fd);
    ck_assert_int_eq(replies, 10);
}
END_TEST

/* keepalive_timeout: 1s is the idle timeout both sides keep. */
START_TEST(test_an_idle_connection_closes_at_the_idle_timeout)
{
    char command[512];
    long idle = metric(&server, "idle_close");
    long start = corNowMs();
    long deadline;

    snprintf(command, sizeof(command),
             "cd %s && timeout 20 gtlsclient -q --timeout=30s 127.0.0.1 %d "
             "https://127.0.0.1:%d/hello",
             server.dir, server.port, server.port);
    corShell(command, out, sizeof(out));
    ck_assert_int_lt(corNowMs() - start, 10000);
    deadline = corNowMs() + 3000;
    while (metric(&server, "idle_close") == idle && corNowMs() < deadline) {
        usleep(50 * 1000);
    }
    ck_assert_int_gt(metric(&server, "idle_close"), idle);
}
END_TEST

/* 17 MB past body_bytes 16MiB: a body past limits.body_memory is
 * gathered by the core as it comes (as HTTP/2's), which refuses it 413
 * once it passed the limit, the rest unread. */
START_TEST(test_a_body_past_the_limit_is_refused_413)
{
    char command[512];
    char args[512];

    snprintf(command, sizeof(command),
             "head -c %d /dev/zero > %s/over && rm -f %s/dl/echo",
             17 * 1024 * 1024, server.dir, server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    snprintf(args, sizeof(args), "-m POST -d %s/over --download=%s/dl",
             server.dir, server.dir);
    client(args, "/echo");
    snprintf(command, sizeof(command), "cat %s/dl/echo", server.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "refused\n");
    ck_assert_int_ge(accessCount("POST /echo HTTP/3\" 413"), 1);
}
END_TEST

/* A server of a test's own: one loop, hello and /metrics; http the http
 * module's options, more the rest of its configuration. */
static void
ownServerStart(CorServer* s, const char* http, const char* more)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 1 }\n"
             "listen:\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:{PORT}\n"
             "    http3: on\n"
             "    tls: { certificate: %s/server.pem, key: %s/server.key }\n"
             "modules:\n"
             "  - { load: http%s }\n"
             "  - { load: hello }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "%s",
             certs, certs, http, more);
    ck_assert_int_eq(corServerStart(s, yaml), 0);
}

/* http3.retry_above: 0: every new client proves its address first; the
 * client follows the Retry and is served. A server of its own. */
START_TEST(test_retry_always_is_followed)
{
    CorServer retry = { 0 };
    char command[512];

    ownServerStart(&retry, ", http3: { retry_above: 0 }", "");
    snprintf(command, sizeof(command),
             "cd %s && timeout 20 gtlsclient -q --exit-on-all-streams-close "
             "--download=%s 127.0.0.1 %d https://127.0.0.1:%d/hello && cat "
             "%s/hello",
             retry.dir, retry.dir, retry.port, retry.port, retry.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "hello, world\n");
    ck_assert_int_eq(metric(&retry, "retry"), 1);
    ck_assert_int_eq(metric(&retry, "connection"), 1);
    corServerStop(&retry);
}
END_TEST

/* limits.connections counts HTTP/3's connections with TCP's: two h3
 * clients that stay (until the idle timeout) fill a limit of 2, so a
 * third is refused at its Initial (CONNECTION_CLOSE, CONNECTION_REFUSED:
 * it fails at once, not at its handshake timeout), said in the log;
 * once they left, /metrics (over TCP, refused meanwhile too) counts the
 * refusal and a new client is served. A server of its own. */
START_TEST(test_connections_past_the_limit_are_refused)
{
    const char* said = "refused past limits.connections";
    CorServer small = { 0 };
    char command[1024];
    long start;
    long took;

    ownServerStart(&small, "",
                   "limits: { connections: 2, keepalive_timeout: 2s }\n"
                   "log: { access: {DIR}/access.log }\n");
    /* Two that stay, in the background; served once both are logged. */
    snprintf(command, sizeof(command),
             "cd %s && for i in 1 2; do timeout 20 gtlsclient -q "
             "--timeout=30s 127.0.0.1 %d https://127.0.0.1:%d/hello "
             ">/dev/null 2>&1 & echo $! >> stay.pid; done; n=0; "
             "while [ \"$(grep -c /hello access.log 2>/dev/null)\" != 2 ] "
             "&& [ $n -lt 100 ]; do sleep 0.05; n=$((n+1)); done",
             small.dir, small.port, small.port);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    start = corNowMs();
    snprintf(command, sizeof(command),
             "cd %s && mkdir third && timeout 20 gtlsclient -q "
             "--exit-on-all-streams-close --download=third 127.0.0.1 %d "
             "https://127.0.0.1:%d/hello >/dev/null 2>&1; ls third",
             small.dir, small.port, small.port);
    /* gtlsclient exits 0 at the peer's CONNECTION_CLOSE: no page came. */
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "");
    took = corNowMs() - start;
    fprintf(stderr, "corHttp3Test: the third refused in %ld ms\n", took);
    ck_assert_int_ge(corServerLogCount(&small, said), 1);
    /* Refused at once, not at a timeout of its own: before the two
     * that stay leave. */
    ck_assert_int_lt(took, 2000);
    /* The two leave at the idle timeout; then there is room. */
    snprintf(command, sizeof(command),
             "cd %s && for p in $(cat stay.pid); do while kill -0 $p "
             "2>/dev/null; do sleep 0.05; done; done; sleep 0.2; "
             "timeout 20 gtlsclient -q "
             "--exit-on-all-streams-close --download=. 127.0.0.1 %d "
             "https://127.0.0.1:%d/hello && cat hello",
             small.dir, small.port, small.port);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "hello, world\n");
    snprintf(command, sizeof(command),
             "curl -sk https://127.0.0.1:%d/metrics | grep "
             "'^cor_connections_refused_total'",
             small.port);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    ck_assert_int_ge(atol(strchr(out, ' ') + 1), 1);
    corServerStop(&small);
}
END_TEST

/* A UDP relay between one client and the server that drops every
 * dropEvery-th datagram each way: the loss QUIC must recover from,
 * the same in every run. */
typedef struct {
    int outside; /* the client's side: bound to port */
    int inside;  /* connected to the server */
    int port;
    unsigned dropEvery;
    unsigned passFirst; /* then the client's datagrams go nowhere; 0:
                         * no such end */
    unsigned dropped;
    volatile bool stop;
} Relay;

static void*
relayRun(void* arg)
{
    Relay* relay = arg;
    struct sockaddr_storage client;
    socklen_t clientLen = 0;
    unsigned seen[2] = { 0, 0 };
    uint8_t buf[65536];

    while (!relay->stop) {
        struct pollfd p[2] = { { .fd = relay->outside, .events = POLLIN },
                               { .fd = relay->inside, .events = POLLIN } };

        if (poll(p, 2, 100) <= 0) {
            continue;
        }
        for (int side = 0; side < 2; side++) {
            struct sockaddr_storage from;
            socklen_t fromLen = sizeof(from);
            ssize_t n;

            if (!(p[side].revents & POLLIN)) {
                continue;
            }
            n = recvfrom(p[side].fd, buf, sizeof(buf), 0,
                         (struct sockaddr*)&from, &fromLen);
            if (n <= 0) {
                continue;
            }
            if (side == 0) {
                client = from;
                clientLen = fromLen;
            }
            if (++seen[side] % relay->dropEvery == 0
                || (side == 0 && relay->passFirst != 0
                    && seen[0] > relay->passFirst)) {
                relay->dropped++;
                continue;
            }
            if (side == 0) {
                send(relay->inside, buf, (size_t)n, 0);
            } else if (clientLen > 0) {
                sendto(relay->outside, buf, (size_t)n, 0,
                       (struct sockaddr*)&client, clientLen);
            }
        }
    }
    return NULL;
}

/* Start relay (its dropEvery and passFirst set) on a port of its own. */
static void
relayStart(Relay* relay, pthread_t* thread)
{
    struct sockaddr_in at = { .sin_family = AF_INET };
    socklen_t atLen = sizeof(at);

    relay->inside = udpOpen();
    relay->outside = socket(AF_INET, SOCK_DGRAM, 0);
    inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
    ck_assert_int_eq(bind(relay->outside, (struct sockaddr*)&at, sizeof(at)),
                     0);
    ck_assert_int_eq(getsockname(relay->outside, (struct sockaddr*)&at, &atLen),
                     0);
    relay->port = ntohs(at.sin_port);
    ck_assert_int_eq(pthread_create(thread, NULL, relayRun, relay), 0);
}

static void
relayStop(Relay* relay, pthread_t thread)
{
    relay->stop = true;
    pthread_join(thread, NULL);
    close(relay->outside);
    close(relay->inside);
}

START_TEST(test_a_transfer_through_a_lossy_relay_is_whole)
{
    Relay relay = { .dropEvery = 20 };
    char command[1024];
    pthread_t thread;

    relayStart(&relay, &thread);
    snprintf(command, sizeof(command),
             "head -c 1000000 /dev/urandom > %s/lossy && cd %s && rm -f "
             "dl/lossy && timeout 30 gtlsclient -q "
             "--exit-on-all-streams-close --download=dl 127.0.0.1 %d "
             "'https://127.0.0.1:%d/file?path=%s/lossy' && cmp lossy dl/lossy",
             server.dir, server.dir, relay.port, relay.port, server.dir);
    ck_assert_msg(corShell(command, out, sizeof(out)) == 0, "%s", out);
    relayStop(&relay, thread);
    /* One MB is some 700 datagrams: about 40 of them were lost. */
    ck_assert_int_gt(relay.dropped, 10);
    printf("corHttp3Test: lossy relay: %u datagrams dropped\n", relay.dropped);
}
END_TEST

/* A body that stops coming (the relay passes the client's first 12
 * datagrams: the handshake, the head and a little body, then none) is
 * cut at body_timeout (300ms), counted as a 408 and said in the log. */
START_TEST(test_a_stalled_body_is_reset_at_body_timeout)
{
    Relay relay = { .dropEvery = 1000000, .passFirst = 12 };
    const char* said = "a request body that stalled";
    int before = corServerLogCount(&server, said);
    char command[1024];
    pthread_t thread;
    long start;

    relayStart(&relay, &thread);
    snprintf(command, sizeof(command),
             "head -c 1000000 /dev/zero > %s/stall && cd %s && timeout 2 "
             "gtlsclient -q -m POST -d stall 127.0.0.1 %d "
             "https://127.0.0.1:%d/echo",
             server.dir, server.dir, relay.port, relay.port);
    corShell(command, out, sizeof(out)); /* it never hears back: cut */
    start = corNowMs();
    while (corServerLogCount(&server, said) == before
           && corNowMs() - start < 3000) {
        usleep(50 * 1000);
    }
    relayStop(&relay, thread);
    ck_assert_int_gt(corServerLogCount(&server, said), before);
}
END_TEST

/* A reload: the old generation closes its HTTP/3 connections with
 * CONNECTION_CLOSE and its sockets at once (docs/http3.md: the next
 * generation's join the same SO_REUSEPORT group), so that a request in
 * flight is cut but ends, a new client is served by the new generation
 * at once, and the old generation is gone soon: nothing hangs. Last: the
 * counters of /metrics start again. */
START_TEST(test_a_reload_closes_h3_at_once_and_serves_the_new_ones)
{
    long streams = metric(&server, "stream");
    pid_t old = corServerGeneration(&server);
    char command[512];
    FILE* inflight;
    long start;

    snprintf(command, sizeof(command),
             "cd %s && timeout 20 gtlsclient -q --exit-on-all-streams-close "
             "127.0.0.1 %d 'https://127.0.0.1:%d/stream?n=1000' >/dev/null "
             "2>&1; echo done",
             server.dir, server.port, server.port);
    inflight = popen(command, "r");
    ck_assert_ptr_nonnull(inflight);
    start = corNowMs();
    while (metric(&server, "stream") == streams && corNowMs() - start < 5000) {
        usleep(20 * 1000);
    }
    ck_assert_int_gt(metric(&server, "stream"), streams); /* it runs */
    ck_assert_int_eq(kill(server.pid, SIGHUP), 0);
    start = corNowMs();
    while (corServerGeneration(&server) == old && corNowMs() - start < 5000) {
        usleep(20 * 1000);
    }
    ck_assert_int_ne(corServerGeneration(&server), old);
    /* The 1000 pieces take 5 s: the client ends well before, cut. */
    ck_assert_ptr_nonnull(fgets(command, sizeof(command), inflight));
    pclose(inflight);
    ck_assert_int_lt(corNowMs() - start, 4000);
    ck_assert_int_eq(client("", "/hello"), 0);
    ck_assert_int_lt(corNowMs() - start, 5000);
    printf("corHttp3Test: reload: in flight cut and a new one served in %ld "
           "ms\n",
           corNowMs() - start);
}
END_TEST

/* Once for the suite, in check's runner (the forked tests share it). */
static void
suiteEnd(void)
{
    if (started) {
        corServerStop(&server);
        corTestCertsRemove(certs);
    }
}

COR_TEST_SUITE(corHttp3)
{
    tcase_add_unchecked_fixture(tc, serverStart, suiteEnd);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_a_page_over_h3);
    tcase_add_test(tc, test_10_mb_up_streamed_to_its_handler_in_bounded_memory);
    tcase_add_test(tc, test_100_streams_on_one_connection);
    tcase_add_test(tc, test_10_mb_down_from_memory_and_from_a_file);
    tcase_add_test(tc, test_10_mb_up_echoed);
    tcase_add_test(tc, test_a_streamed_answer);
    tcase_add_test(tc, test_alt_svc_on_http1_and_h2);
    tcase_add_test(tc, test_check_refuses_http3_without_tls);
    tcase_add_test(tc, test_a_client_that_moves_keeps_its_connection);
    tcase_add_test(tc, test_a_stateless_reset_answers_an_unknown_connection);
    tcase_add_test(tc, test_a_coalesced_read_is_split_into_its_datagrams);
    tcase_add_test(tc, test_an_idle_connection_closes_at_the_idle_timeout);
    tcase_add_test(tc, test_a_body_past_the_limit_is_refused_413);
    tcase_add_test(tc, test_retry_always_is_followed);
    tcase_add_test(tc, test_connections_past_the_limit_are_refused);
    tcase_add_test(tc, test_a_transfer_through_a_lossy_relay_is_whole);
    tcase_add_test(tc, test_a_stalled_body_is_reset_at_body_timeout);
    tcase_add_test(tc, test_a_reload_closes_h3_at_once_and_serves_the_new_ones);
}
