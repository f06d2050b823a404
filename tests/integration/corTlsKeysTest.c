/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A listener's TLS keys past its certificates, against the real binary and
 * openssl s_client: protocols, ciphers (TLS 1.2), ciphersuites (TLS 1.3)
 * and groups take what they name and refuse the rest; session_lifetime is
 * the tickets' lifetime hint and ends resumption; OCSP stapling from a file
 * and fetched from a real responder (openssl ocsp, started and stopped by
 * PID on loopback), and a responder that is down leaves the server serving
 * without a staple; cor -t refuses each bad value at its line.
 */
#include "corTest.h"
#include "corServer.h"
#include "corTlsConf.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer server;
static char certs[64];
static char out[1 << 16];
static int ocspPort;
static pid_t responder;

/* A loopback port free now: the responder's, named in the certificate
 * before either server starts. */
static int
freePort(void)
{
    struct sockaddr_in sin = {
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
    };
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr*)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr*)&sin, &len), 0);
    close(fd);
    return ntohs(sin.sin_port);
}

static void
setUp(void)
{
    char command[256];

    corTestCertsMake(certs, sizeof(certs));
    ocspPort = freePort();
    snprintf(command, sizeof(command), "tests/tls/makeOcsp %s %d", certs,
             ocspPort);
    ck_assert_int_eq(system(command), 0);
}

static void
responderStop(void)
{
    if (responder > 0) {
        kill(responder, SIGTERM);
        waitpid(responder, NULL, 0);
        responder = 0;
    }
}

static void
tearDown(void)
{
    corServerStop(&server);
    responderStop();
    corTestCertsRemove(certs);
}

/* openssl ocsp as the CA's responder on ocspPort, answering from
 * index.txt; returns once it listens. Its log says so: a connection made
 * to find out would hold it (it serves one at a time, and OpenSSL 3.0's
 * waits on a client that closed without a request). */
static void
responderStart(void)
{
    char port[16];
    char command[256];
    bool up = false;

    snprintf(port, sizeof(port), "%d", ocspPort);
    responder = corTestFork(SIGKILL);
    ck_assert_int_ge(responder, 0);
    if (responder == 0) {
        if (chdir(certs) != 0 || freopen("responder.log", "w", stdout) == NULL
            || dup2(STDOUT_FILENO, STDERR_FILENO) < 0) {
            _exit(127);
        }
        execlp("openssl", "openssl", "ocsp", "-port", port, "-index",
               "index.txt", "-rsigner", "responder.pem", "-rkey",
               "responder.key", "-CA", "ca.pem", "-ndays", "1", (char*)NULL);
        _exit(127);
    }
    snprintf(command, sizeof(command),
             "grep -q 'waiting for OCSP client' "
             "%s/responder.log",
             certs);
    for (long end = corNowMs() + 5000; !up && corNowMs() < end;) {
        up = system(command) == 0;
        if (!up) {
            usleep(50 * 1000);
        }
    }
    ck_assert(up);
}

static void
startTls(const char* tls)
{
    corTlsServerStart(&server, certs, tls);
}

static int
shell(const char* command)
{
    return corTlsShell(&server, certs, command, out, sizeof(out));
}

/* s_client's handshake with options: its exit status. */
static int
handshake(const char* options)
{
    char command[512];

    snprintf(command, sizeof(command),
             "openssl s_client -connect "
             "127.0.0.1:$P %s </dev/null",
             options);
    return shell(command);
}

static void
checkRefuses(const char* tls, const char* mark, const char* want)
{
    corTlsCheckRefuses(certs, tls, mark, want, out, sizeof(out));
}

#define CERT "certificate: CERTS/server.pem, key: CERTS/server.key"

START_TEST(test_ciphers_and_groups_take_what_they_name)
{
    startTls("{ " CERT ", ciphers: ECDHE-ECDSA-AES128-GCM-SHA256, "
             "ciphersuites: TLS_AES_256_GCM_SHA384, groups: P-256 }");
    ck_assert_int_eq(handshake("-tls1_2 -cipher "
                               "ECDHE-ECDSA-AES128-GCM-SHA256"),
                     0);
    ck_assert_msg(strstr(out, "Cipher is ECDHE-ECDSA-AES128-GCM-SHA256")
                      != NULL,
                  "%s", out);
    ck_assert_int_ne(handshake("-tls1_2 -cipher "
                               "ECDHE-ECDSA-AES256-GCM-SHA384"),
                     0);
    ck_assert_msg(strstr(out, "handshake failure") != NULL, "%s", out);
    ck_assert_int_eq(handshake("-tls1_3 -ciphersuites "
                               "TLS_AES_256_GCM_SHA384"),
                     0);
    ck_assert_msg(strstr(out, "Cipher is TLS_AES_256_GCM_SHA384") != NULL, "%s",
                  out);
    ck_assert_int_ne(handshake("-tls1_3 -ciphersuites "
                               "TLS_AES_128_GCM_SHA256"),
                     0);
    ck_assert_int_eq(handshake("-tls1_3 -groups P-256"), 0);
    ck_assert_msg(strstr(out, "Server Temp Key: ECDH, prime256v1") != NULL,
                  "%s", out);
    ck_assert_int_ne(handshake("-tls1_3 -groups X25519"), 0);
    ck_assert_int_ne(handshake("-tls1_2 -groups X25519"), 0);
    /* What the lists allow serves. */
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem "
                           "https://localhost:$P/hello"),
                     0);
    ck_assert_str_eq(out, "hello, world\n");
}
END_TEST

START_TEST(test_protocols_take_the_versions_named)
{
    startTls("{ " CERT ", protocols: [TLSv1.3] }");
    ck_assert_int_ne(handshake("-tls1_2"), 0);
    ck_assert_msg(strstr(out, "alert protocol version") != NULL, "%s", out);
    ck_assert_int_eq(handshake("-tls1_3"), 0);
    corServerStop(&server);
    startTls("{ " CERT ", protocols: [TLSv1.2] }");
    ck_assert_int_ne(handshake("-tls1_3"), 0);
    ck_assert_msg(strstr(out, "alert protocol version") != NULL, "%s", out);
    ck_assert_int_eq(handshake("-tls1_2"), 0);
    ck_assert_msg(strstr(out, "Protocol  : TLSv1.2") != NULL, "%s", out);
}
END_TEST

/* An exchange that takes a ticket (TLS 1.3 sends it after the handshake:
 * a request waits for it) and keeps the session in $C/session, or offers
 * it back with resume. */
static void
exchange(int version, bool resume)
{
    char command[1024];

    snprintf(command, sizeof(command),
             "printf 'GET /hello HTTP/1.1\\r\\n"
             "Host: x\\r\\nConnection: close\\r\\n\\r\\n' | openssl s_client "
             "-connect 127.0.0.1:$P -ign_eof -tls1_%d %s $C/session",
             version, resume ? "-sess_in" : "-sess_out");
    ck_assert_int_eq(shell(command), 0);
    ck_assert_msg(strstr(out, "hello, world") != NULL, "%s", out);
}

START_TEST(test_session_lifetime_is_the_ticket_hint_and_its_end)
{
    startTls("{ " CERT " }");
    exchange(3, false);
    ck_assert_msg(strstr(out, "TLS session ticket lifetime hint: 300 "
                              "(seconds)")
                      != NULL,
                  "%s", out);
    corServerStop(&server);
    startTls("{ " CERT ", session_lifetime: 2s }");
    for (int version = 2; version <= 3; version++) {
        exchange(version, false);
        ck_assert_msg(strstr(out, "TLS session ticket lifetime hint: 2 "
                                  "(seconds)")
                          != NULL,
                      "%s", out);
        exchange(version, true);
        ck_assert_msg(strstr(out, "Reused, TLSv1.") != NULL, "%s", out);
        /* Past its lifetime the server takes the ticket no more. */
        sleep(3);
        exchange(version, true);
        ck_assert_msg(strstr(out, "New, TLSv1.") != NULL, "%s", out);
    }
}
END_TEST

/* s_client -status until it sees want, or 10 s pass (a fetch retried
 * after 1, 2 and 4 s). */
static bool
stapleBecomes(const char* want)
{
    for (long end = corNowMs() + 10000; corNowMs() < end;) {
        if (handshake("-status") == 0 && strstr(out, want) != NULL) {
            return true;
        }
        usleep(200 * 1000);
    }
    return false;
}

START_TEST(test_ocsp_staple_from_a_file)
{
    startTls("{ certificate: CERTS/ocsp.pem, key: CERTS/ocsp.key, "
             "ocsp: { file: CERTS/ocsp.der } }");
    ck_assert_int_eq(handshake("-status"), 0);
    ck_assert_msg(strstr(out, "OCSP Response Status: successful") != NULL
                      && strstr(out, "Cert Status: good") != NULL
                      && strstr(out, "Responder Id: CN = responder") != NULL,
                  "%s", out);
    /* It is what the responder said, and it verifies against the CA. */
    ck_assert_int_eq(
        shell("openssl s_client -connect 127.0.0.1:$P -status "
              "-CAfile $C/ca.pem -verify_return_error "
              "</dev/null 2>/dev/null | grep -c 'Cert Status: good'"),
        0);
    ck_assert_str_eq(out, "1\n");
    /* A client that does not ask gets none. */
    ck_assert_int_eq(handshake(""), 0);
    ck_assert_msg(strstr(out, "OCSP") == NULL, "%s", out);
}
END_TEST

/* A reload reads the file again: a response renewed in place (here one
 * good for two days, not one) is the staple of the next generation. */
START_TEST(test_ocsp_file_is_read_again_at_reload)
{
    char before[128];
    const char* next;

    ck_assert_int_eq(shell("cp $C/ocsp.der $C/live.der"), 0);
    startTls("{ certificate: CERTS/ocsp.pem, key: CERTS/ocsp.key, "
             "ocsp: { file: CERTS/live.der } }");
    ck_assert_int_eq(handshake("-status"), 0);
    next = strstr(out, "Next Update: ");
    ck_assert_ptr_nonnull(next);
    snprintf(before, sizeof(before), "%.*s", (int)strcspn(next, "\n"), next);
    ck_assert_int_eq(shell("cd $C && openssl ocsp -index index.txt "
                           "-rsigner responder.pem -rkey responder.key -CA "
                           "ca.pem -reqin ocsp.req -respout live.der "
                           "-ndays 2 >/dev/null"),
                     0);
    ck_assert_int_eq(kill(server.pid, SIGHUP), 0);
    for (long end = corNowMs() + 5000;
         corNowMs() < end
         && (handshake("-status") != 0 || strstr(out, before) != NULL);) {
        usleep(100 * 1000);
    }
    ck_assert_msg(strstr(out, "Cert Status: good") != NULL
                      && strstr(out, "Next Update: ") != NULL
                      && strstr(out, before) == NULL,
                  "%s", out);
}
END_TEST

START_TEST(test_ocsp_staple_fetched_from_the_responder)
{
    responderStart();
    startTls("{ certificate: CERTS/ocsp-chain.pem, key: CERTS/ocsp.key, "
             "ocsp: { fetch: on } }");
    ck_assert(stapleBecomes("Cert Status: good"));
    ck_assert_msg(strstr(out, "OCSP Response Status: successful") != NULL, "%s",
                  out);
    ck_assert_int_eq(corServerLogCount(&server, ": good, fetched again in"), 1);
    /* The issuer may be given apart from the chain. */
    corServerStop(&server);
    startTls("{ certificate: CERTS/ocsp.pem, key: CERTS/ocsp.key, "
             "ocsp: { fetch: on, issuer: CERTS/ca.pem } }");
    ck_assert(stapleBecomes("Cert Status: good"));
}
END_TEST

START_TEST(test_ocsp_responder_down_serves_without_a_staple)
{
    startTls("{ certificate: CERTS/ocsp-chain.pem, key: CERTS/ocsp.key, "
             "ocsp: { fetch: on } }");
    ck_assert_int_eq(handshake("-status"), 0);
    ck_assert_msg(strstr(out, "OCSP response: no response sent") != NULL, "%s",
                  out);
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem "
                           "https://localhost:$P/hello"),
                     0);
    ck_assert_str_eq(out, "hello, world\n");
    ck_assert_int_ge(corServerLogCount(&server, "served without a staple"), 1);
    /* The responder comes up: a retry staples. */
    responderStart();
    ck_assert(stapleBecomes("Cert Status: good"));
    /* It goes down again: the staple fetched serves on. */
    responderStop();
    ck_assert_int_eq(handshake("-status"), 0);
    ck_assert_msg(strstr(out, "Cert Status: good") != NULL, "%s", out);
}
END_TEST

/* cor -t refuses tls (a flow mapping after CERT), saying want at its
 * line. */
static void
refuses(const char* tls, const char* want)
{
    char text[512];

    snprintf(text, sizeof(text), "{ %s }", tls);
    checkRefuses(text, "    tls:", want);
}

START_TEST(test_cor_t_refuses_bad_values_at_their_line)
{
    char command[256];

    refuses(CERT ", ciphers: NOPE-CIPHER",
            "ciphers: OpenSSL takes no TLS "
            "1.2 cipher of 'NOPE-CIPHER' (no cipher match)");
    refuses(CERT ", ciphersuites: \"TLS_AES_128_GCM_SHA256:TLS_NOPE\"",
            "ciphersuites: OpenSSL does not take 'TLS_NOPE' (no cipher "
            "match)");
    refuses(CERT ", groups: \"X25519:nope\"", "groups: OpenSSL does not "
                                              "take 'nope'");
    refuses(CERT ", protocols: [TLSv1.3, TLSv1]", "protocols: expected "
                                                  "TLSv1.2 or TLSv1.3");
    refuses(CERT ", session_lifetime: 500ms", "out of range");
    refuses(CERT ", ocsp: { file: CERTS/none.der }", "ocsp: file: cannot "
                                                     "read '");
    refuses(CERT ", ocsp: { file: CERTS/ca.pem }", "is not a successful "
                                                   "OCSP response");
    /* An OCSPResponse whose status is unauthorized (6), no body. */
    snprintf(command, sizeof(command),
             "printf '0\\003\\n\\001\\006' > "
             "%s/unauthorized.der",
             certs);
    ck_assert_int_eq(system(command), 0);
    refuses(CERT ", ocsp: { file: CERTS/unauthorized.der }",
            "the responder said unauthorized");
    refuses(CERT ", ocsp: { fetch: on }", "names no OCSP responder");
    refuses("certificate: CERTS/ocsp.pem, key: CERTS/ocsp.key, ocsp: "
            "{ fetch: on }",
            "the certificate file holds no second "
            "certificate");
    refuses("certificate: CERTS/ocsp.pem, key: CERTS/ocsp.key, ocsp: "
            "{ fetch: on, issuer: CERTS/b.pem }",
            "did not issue");
    refuses("certificate: CERTS/ocsp.pem, key: CERTS/ocsp.key, ocsp: "
            "{ fetch: on, issuer: CERTS/none.pem }",
            "ocsp: issuer: cannot "
            "read a PEM certificate");
}
END_TEST

COR_TEST_SUITE(corTlsKeys)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ciphers_and_groups_take_what_they_name);
    tcase_add_test(tc, test_protocols_take_the_versions_named);
    tcase_add_test(tc, test_session_lifetime_is_the_ticket_hint_and_its_end);
    tcase_add_test(tc, test_ocsp_staple_from_a_file);
    tcase_add_test(tc, test_ocsp_file_is_read_again_at_reload);
    tcase_add_test(tc, test_ocsp_staple_fetched_from_the_responder);
    tcase_add_test(tc, test_ocsp_responder_down_serves_without_a_staple);
    tcase_add_test(tc, test_cor_t_refuses_bad_values_at_their_line);
}
