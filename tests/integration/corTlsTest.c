/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS on a listener, against the real binary and real clients (curl,
 * openssl s_client), with the certificates of tests/tls/makeCerts: HTTPS
 * answers, TLS 1.3 and 1.2 work and 1.1 is refused, SNI picks the
 * certificate, ALPN says http/1.1, a session is resumed, large answers and
 * files go out whole, a silent client is cut at the handshake timeout, a
 * plain HTTP request gets a 400 (as nginx), a close after an error says
 * close_notify, a reload renews the certificate;
 * and cor -t refuses each bad certificate setup at its file:line.
 */
#include "corTest.h"
#include "corServer.h"
#include "corTlsConf.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static CorServer server;
static char certs[64];
static char out[1 << 16];

static void
setUp(void)
{
    corTestCertsMake(certs, sizeof(certs));
}

static void
tearDown(void)
{
    corServerStop(&server);
    corTestCertsRemove(certs);
}

#define DEFAULT_TLS                                                            \
    "{ certificate: CERTS/server.pem, key: CERTS/server.key, "                 \
    "handshake_timeout: 500ms, sni: [ { name: b.test, certificate: "           \
    "CERTS/b.pem, key: CERTS/b.key } ] }"

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

START_TEST(test_curl_gets_hello_over_tls_1_3_and_1_2)
{
    startTls(DEFAULT_TLS);
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem --tlsv1.3 "
                           "https://localhost:$P/hello"),
                     0);
    ck_assert_str_eq(out, "hello, world\n");
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem --tlsv1.2 "
                           "--tls-max 1.2 https://127.0.0.1:$P/hello"),
                     0);
    ck_assert_str_eq(out, "hello, world\n");
    /* Keep-alive: several requests on one connection. */
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem "
                           "https://localhost:$P/hello "
                           "https://localhost:$P/hello -w '%{num_connects}"
                           "\\n'"),
                     0);
    ck_assert_str_eq(out, "hello, world\n1\nhello, world\n0\n");
}
END_TEST

START_TEST(test_tls_1_1_is_refused)
{
    startTls(DEFAULT_TLS);
    /* The client is let down to 1.1 (seclevel 0), the server refuses. */
    ck_assert_int_ne(shell("openssl s_client -connect 127.0.0.1:$P -tls1_1 "
                           "-cipher DEFAULT@SECLEVEL=0 </dev/null"),
                     0);
    ck_assert_msg(strstr(out, "alert protocol version") != NULL, "%s", out);
}
END_TEST

START_TEST(test_min_version_1_3_refuses_1_2)
{
    startTls("{ certificate: CERTS/server.pem, key: CERTS/server.key, "
             "min_version: \"1.3\" }");
    ck_assert_int_ne(shell("curl -sS --cacert $C/ca.pem --tlsv1.2 "
                           "--tls-max 1.2 https://localhost:$P/hello"),
                     0);
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem "
                           "https://localhost:$P/hello"),
                     0);
}
END_TEST

START_TEST(test_sni_picks_the_certificate_and_alpn_says_http_1_1)
{
    startTls(DEFAULT_TLS);
    ck_assert_int_eq(shell("openssl s_client -connect 127.0.0.1:$P "
                           "-servername b.test -alpn http/1.1 -CAfile "
                           "$C/ca.pem -verify_return_error </dev/null"),
                     0);
    ck_assert_msg(strstr(out, "subject=CN = b\n") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "ALPN protocol: http/1.1") != NULL, "%s", out);
    ck_assert_int_eq(shell("openssl s_client -connect 127.0.0.1:$P "
                           "-servername a.test </dev/null"),
                     0);
    ck_assert_msg(strstr(out, "subject=CN = server\n") != NULL, "%s", out);
    /* A client that offers only another protocol is refused (h2 is
     * offered too: corHttp2Test). */
    ck_assert_int_ne(shell("openssl s_client -connect 127.0.0.1:$P "
                           "-alpn spdy/3.1 </dev/null"),
                     0);
    ck_assert_msg(strstr(out, "no application protocol") != NULL, "%s", out);
}
END_TEST

START_TEST(test_a_session_is_resumed)
{
    static const char request[] =
        "printf 'GET /hello HTTP/1.1\\r\\nHost: x\\r\\nConnection: "
        "close\\r\\n\\r\\n' | openssl s_client -connect 127.0.0.1:$P "
        "-ign_eof ";

    startTls(DEFAULT_TLS);
    for (int version = 2; version <= 3; version++) {
        char command[1024];

        snprintf(command, sizeof(command),
                 "%s -tls1_%d -sess_out "
                 "$C/session",
                 request, version);
        ck_assert_int_eq(shell(command), 0);
        ck_assert_msg(strstr(out, "New, TLSv1.") != NULL, "%s", out);
        ck_assert_ptr_nonnull(strstr(out, "hello, world"));
        snprintf(command, sizeof(command),
                 "%s -tls1_%d -sess_in "
                 "$C/session",
                 request, version);
        ck_assert_int_eq(shell(command), 0);
        ck_assert_msg(strstr(out, "Reused, TLSv1.") != NULL, "%s", out);
        ck_assert_ptr_nonnull(strstr(out, "hello, world"));
    }
}
END_TEST

START_TEST(test_without_tickets_nothing_resumes)
{
    startTls("{ certificate: CERTS/server.pem, key: CERTS/server.key, "
             "session_tickets: false }");
    /* No ticket comes, so no session is kept to offer (s_client may then
     * refuse -sess_in: only what it says matters). */
    ck_assert_int_eq(shell("printf 'GET /hello HTTP/1.0\\r\\n\\r\\n' | "
                           "openssl s_client -connect 127.0.0.1:$P -ign_eof "
                           "-sess_out $C/session"),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "hello, world"));
    shell("printf 'GET /hello HTTP/1.0\\r\\n\\r\\n' | openssl s_client "
          "-connect 127.0.0.1:$P -ign_eof -sess_in $C/session");
    ck_assert_msg(strstr(out, "Reused,") == NULL, "%s", out);
}
END_TEST

/* Writes far past a socket buffer (partial TLS writes, the output buffer
 * moving) and a file (read and written, no sendfile over TLS). */
START_TEST(test_large_answers_and_files_go_out_whole)
{
    startTls(DEFAULT_TLS);
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem --limit-rate 4M "
                           "\"https://localhost:$P/bytes?n=8000000\" | wc -c"),
                     0);
    ck_assert_int_eq(atol(out), 8000000);
    ck_assert_int_eq(shell("head -c 3000000 /dev/urandom > $C/blob && "
                           "curl -sS --cacert $C/ca.pem "
                           "\"https://localhost:$P/file?path=$C/blob\" "
                           "| cmp - $C/blob && echo same"),
                     0);
    ck_assert_str_eq(out, "same\n");
    /* A body in, echoed back (after the head) by a handler that waits. */
    ck_assert_int_eq(shell("head -c 200000 /dev/urandom > $C/up && "
                           "curl -sS --cacert $C/ca.pem --data-binary "
                           "@$C/up https://localhost:$P/waitecho | "
                           "tail -c 200000 | cmp - "
                           "$C/up && echo same"),
                     0);
    ck_assert_str_eq(out, "same\n");
}
END_TEST

START_TEST(test_a_silent_client_is_cut_at_the_handshake_timeout)
{
    int fd;
    long start;

    startTls(DEFAULT_TLS);
    fd = corConnect(server.port);
    ck_assert_int_ge(fd, 0);
    start = corNowMs();
    ck_assert(corPeerClosed(fd, 3000));
    ck_assert_int_ge(corNowMs() - start, 400);
    close(fd);
}
END_TEST

/* As nginx: a 400 that says why, in plain text, then the close; the
 * listener goes on serving TLS. */
START_TEST(test_plain_http_to_the_tls_port_gets_400)
{
    static const char request[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[4096];
    int fd;

    startTls(DEFAULT_TLS);
    fd = corConnect(server.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(corSendAll(fd, request, sizeof(request) - 1), 0);
    ck_assert_int_gt(corReadResponse(fd, buf, sizeof(buf), 5000), 0);
    ck_assert_int_eq(corStatus(buf), 400);
    ck_assert_msg(strstr(buf, "\r\nConnection: close\r\n") != NULL
                      && strstr(buf, "The plain HTTP request was sent to HTTPS "
                                     "port")
                             != NULL,
                  "%s", buf);
    ck_assert(corPeerClosed(fd, 5000));
    close(fd);
    ck_assert_int_eq(shell("curl -sS -w ' %{http_code}' "
                           "http://127.0.0.1:$P/hello"),
                     0);
    ck_assert_msg(strstr(out, "HTTPS port\n 400") != NULL, "%s", out);
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem "
                           "https://localhost:$P/hello"),
                     0);
    ck_assert_str_eq(out, "hello, world\n");
    ck_assert_int_eq(kill(server.pid, 0), 0);
}
END_TEST

/* A request refused (400, lingering close) ends with close_notify, as one
 * answered does: OpenSSL 3's s_client says "unexpected eof" otherwise. */
START_TEST(test_a_close_after_an_error_says_close_notify)
{
    startTls(DEFAULT_TLS);
    ck_assert_int_eq(shell("printf 'GARBAGE\\r\\n\\r\\n' | openssl s_client "
                           "-connect 127.0.0.1:$P -quiet -ign_eof"),
                     0);
    ck_assert_msg(strstr(out, "400 Bad Request") != NULL
                      && strstr(out, "unexpected eof") == NULL,
                  "%s", out);
    ck_assert_int_eq(shell("printf 'GET /hello HTTP/1.1\\r\\nHost: x\\r\\n"
                           "Connection: close\\r\\n\\r\\n' | openssl "
                           "s_client -connect 127.0.0.1:$P -quiet -ign_eof"),
                     0);
    ck_assert_msg(strstr(out, "hello, world") != NULL
                      && strstr(out, "unexpected eof") == NULL,
                  "%s", out);
}
END_TEST

/* The subject s_client sees, polled until it says want or 5 s pass. */
static bool
subjectBecomes(const char* want)
{
    for (long end = corNowMs() + 5000; corNowMs() < end;) {
        if (shell("openssl s_client -connect 127.0.0.1:$P </dev/null") == 0
            && strstr(out, want) != NULL) {
            return true;
        }
        usleep(100 * 1000);
    }
    return false;
}

START_TEST(test_a_reload_renews_the_certificate)
{
    char command[512];

    snprintf(command, sizeof(command),
             "cp %s/server.pem %s/live.pem && "
             "cp %s/server.key %s/live.key",
             certs, certs, certs, certs);
    ck_assert_int_eq(system(command), 0);
    startTls("{ certificate: CERTS/live.pem, key: CERTS/live.key }");
    ck_assert(subjectBecomes("subject=CN = server\n"));
    /* Renewed (here: replaced by another) in place, then a reload. */
    snprintf(command, sizeof(command),
             "cp %s/b.pem %s/live.pem && "
             "cp %s/b.key %s/live.key",
             certs, certs, certs, certs);
    ck_assert_int_eq(system(command), 0);
    ck_assert_int_eq(kill(server.pid, SIGHUP), 0);
    ck_assert(subjectBecomes("subject=CN = b\n"));
    /* A renewal gone wrong (a key that does not match) is refused, and the
     * running generation keeps serving the last good one. */
    snprintf(command, sizeof(command), "cp %s/other.key %s/live.key", certs,
             certs);
    ck_assert_int_eq(system(command), 0);
    ck_assert_int_eq(kill(server.pid, SIGHUP), 0);
    usleep(500 * 1000);
    ck_assert(subjectBecomes("subject=CN = b\n"));
    ck_assert_int_eq(shell("curl -sS --cacert $C/ca.pem --resolve "
                           "b.test:$P:127.0.0.1 https://b.test:$P/hello"),
                     0);
    ck_assert_str_eq(out, "hello, world\n");
}
END_TEST

/* cor -t refuses tls, saying want at the line of mark (corTlsConf.h). */
static void
checkRefuses(const char* tls, const char* mark, const char* want)
{
    corTlsCheckRefuses(certs, tls, mark, want, out, sizeof(out));
}

START_TEST(test_cor_t_refuses_bad_certificates_at_their_line)
{
    char command[256];

    snprintf(command, sizeof(command),
             "echo 'not a certificate' > "
             "%s/garbage.pem && chmod 000 %s/server.key",
             certs, certs);
    ck_assert_int_eq(system(command), 0);
    checkRefuses("{ certificate: CERTS/missing.pem, key: CERTS/b.key }",
                 "    tls:", "certificate: cannot read '");
    checkRefuses("{ certificate: CERTS/garbage.pem, key: CERTS/b.key }",
                 "    tls:", "is not a PEM certificate chain");
    checkRefuses("{ certificate: CERTS/b.pem, key: CERTS/garbage.pem }",
                 "    tls:", "is not a PEM private key");
    checkRefuses("{ certificate: CERTS/b.pem, key: CERTS/other.key }",
                 "    tls:", "does not match the certificate");
    ck_assert_msg(strstr(out, "no certificate assigned") == NULL, "%s", out);
    checkRefuses("{ certificate: CERTS/b.pem }", "    tls:", "missing 'key'");
    checkRefuses("{ certificate: CERTS/b.pem, key: CERTS/b.key, "
                 "min_version: \"1.1\" }",
                 "    tls:", "min_version: expected one of 1.2, 1.3");
    checkRefuses("{ certificate: CERTS/b.pem, key: CERTS/b.pem/x }",
                 "    tls:", "Not a directory");
    checkRefuses("\n      certificate: CERTS/b.pem\n      key: CERTS/b.key"
                 "\n      sni:\n        - name: c.test\n"
                 "          certificate: CERTS/b.pem\n"
                 "          key: CERTS/server.pem\n",
                 "/server.pem\n", "is not a PEM private");
    if (geteuid() != 0) {
        /* Root reads whatever the mode says. */
        checkRefuses("{ certificate: CERTS/server.pem, key: "
                     "CERTS/server.key }",
                     "    tls:", "Permission denied");
    }
    /* Every error is reported, not just the first. */
    checkRefuses("\n      certificate: CERTS/missing.pem\n"
                 "      key: CERTS/b.key\n      sni:\n"
                 "        - { name: c.test, certificate: CERTS/b.pem, "
                 "key: CERTS/other.key }\n",
                 "/missing.pem\n", "missing.pem");
    ck_assert_msg(strstr(out, "does not match") != NULL, "%s", out);
}
END_TEST

COR_TEST_SUITE(corTls)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_curl_gets_hello_over_tls_1_3_and_1_2);
    tcase_add_test(tc, test_tls_1_1_is_refused);
    tcase_add_test(tc, test_min_version_1_3_refuses_1_2);
    tcase_add_test(tc, test_sni_picks_the_certificate_and_alpn_says_http_1_1);
    tcase_add_test(tc, test_a_session_is_resumed);
    tcase_add_test(tc, test_without_tickets_nothing_resumes);
    tcase_add_test(tc, test_large_answers_and_files_go_out_whole);
    tcase_add_test(tc, test_a_silent_client_is_cut_at_the_handshake_timeout);
    tcase_add_test(tc, test_plain_http_to_the_tls_port_gets_400);
    tcase_add_test(tc, test_a_close_after_an_error_says_close_notify);
    tcase_add_test(tc, test_a_reload_renews_the_certificate);
    tcase_add_test(tc, test_cor_t_refuses_bad_certificates_at_their_line);
}
