/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/3 serves the certificates HTTP/1.1 and h2 serve on the same
 * listener (corHttp3Tls.c through the core's corListenerCert*): the sni
 * entries by name and wildcard, the default for any other name, the
 * default's OCSP staple, and session tickets (a second handshake sends
 * no certificate; none resumes with session_tickets: false). The client
 * is Debian's gtlsclient, which prints no certificate: tests/tls/
 * h3Handshake gives the server's Handshake-level CRYPTO data in hex, in
 * which a test finds (or not) a certificate's or a staple's DER, as
 * openssl s_client gets them over TCP. gtlsclient sends its HOST as SNI
 * and resolves it: the named cases run it in a mount namespace whose
 * /etc/hosts points the test's names at 127.0.0.1 (skipped where
 * unshare -rm is refused). ACME's certificates over HTTP/3 are
 * corAcmeTest's. One server for every check, started once.
 */
#include "corTest.h"
#include "corServer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CorServer server;
static char certs[64];
static char out[1 << 16];
static bool started;
static int noTicketsPort; /* a second listener, session_tickets: false */
static bool namesResolve; /* unshare -rm works here */

static void
serverStart(void)
{
    char yaml[4096];

    if (started) {
        return;
    }
    corTestCertsMake(certs, sizeof(certs));
    noTicketsPort = corFreePort();
    /* The default certificate with a staple (makeOcsp's, good for a day;
     * no responder runs: the staple is a file). */
    snprintf(yaml, sizeof(yaml), "tests/tls/makeOcsp %s %d", certs,
             corFreePort());
    ck_assert_int_eq(corShell(yaml, out, sizeof(out)), 0);
    snprintf(
        yaml, sizeof(yaml),
        "runtime:\n"
        "  loops: 2\n"
        "  workers: 1\n"
        "  coroutines: { enabled: {COROUTINES} }\n"
        "listen:\n"
        "  - protocol: https\n"
        "    address: 127.0.0.1:{PORT}\n"
        "    http3: on\n"
        "    tls:\n"
        "      certificate: %s/ocsp.pem\n"
        "      key: %s/ocsp.key\n"
        "      ocsp: { file: %s/ocsp.der }\n"
        "      sni:\n"
        "        - { name: b.test, certificate: %s/b.pem, key: %s/b.key }\n"
        "        - { name: \"*.w.test\", certificate: %s/wronghost.pem,\n"
        "            key: %s/wronghost.key }\n"
        "  - protocol: https\n"
        "    address: 127.0.0.1:%d\n"
        "    http3: on\n"
        "    tls: { certificate: %s/server.pem, key: %s/server.key,\n"
        "           session_tickets: false }\n"
        "modules:\n"
        "  - { load: http }\n"
        "  - { load: hello }\n"
        "routes:\n"
        "  - { match: \"GET /hello\", handler: hello }\n"
        "log: { pid_file: {DIR}/cor.pid }\n",
        certs, certs, certs, certs, certs, certs, certs, noTicketsPort, certs,
        certs);
    ck_assert_int_eq(corServerStart(&server, yaml), 0);
    started = true;
    snprintf(yaml, sizeof(yaml),
             "printf '127.0.0.1 localhost b.test B.TEST x.w.test w.test "
             "nope.test\\n' > %s/hosts && tests/tls/h3Handshake --hosts "
             "%s/hosts b.test %d",
             server.dir, server.dir, server.port);
    namesResolve = corShell(yaml, out, sizeof(out)) == 0;
    if (!namesResolve) {
        fprintf(stderr, "corHttp3TlsTest: SKIP the named cases: %s\n", out);
    }
}

/* Whether an h3 handshake naming host (an address: "localhost") serves
 * the certificate OpenSSL serves over TCP to a handshake naming it, and
 * that is file's. */
static bool
sameAsTcp(const char* host, const char* file)
{
    bool address = strcmp(host, "127.0.0.1") == 0;
    int rc = corShellAt(
        server.port, server.dir, out, sizeof(out),
        "tcp=$(echo | openssl s_client -connect 127.0.0.1:$P -servername %s "
        "2>/dev/null | tests/tls/derHex) && "
        "want=$(tests/tls/derHex < %s/%s) && "
        "[ -n \"$want\" ] && [ \"$tcp\" = \"$want\" ] || "
        "{ echo TCP serves another; exit 1; }; "
        "tests/tls/h3Handshake %s %s $P > $D/h3 && grep -q \"$want\" $D/h3",
        address ? "localhost" : host, certs, file,
        address ? "" : "--hosts $D/hosts", host);

    if (rc != 0) {
        fprintf(stderr, "corHttp3TlsTest: %s: not %s over h3: %s\n", host, file,
                out);
    }
    return rc == 0;
}

START_TEST(test_sni_over_h3_picks_as_openssl_does)
{
    /* No name of the sni entries: the default (gtlsclient names an
     * address "localhost"). */
    ck_assert(sameAsTcp("127.0.0.1", "ocsp.pem"));
    if (!namesResolve) {
        return;
    }
    ck_assert(sameAsTcp("b.test", "b.pem"));
    ck_assert(sameAsTcp("B.TEST", "b.pem"));
    ck_assert(sameAsTcp("x.w.test", "wronghost.pem"));
    /* A wildcard is one label under its name, not the name itself. */
    ck_assert(sameAsTcp("w.test", "ocsp.pem"));
    ck_assert(sameAsTcp("nope.test", "ocsp.pem"));
}
END_TEST

START_TEST(test_the_default_certificate_is_stapled_over_h3)
{
    /* The staple OpenSSL hands out over TCP (s_client -status) is the
     * file's; the h3 handshake carries those bytes too. */
    ck_assert_int_eq(corShellAt(server.port, server.dir, out, sizeof(out),
                                "echo | openssl s_client -connect "
                                "127.0.0.1:$P -status 2>&1 | grep -c "
                                "'Cert Status: good'"),
                     0);
    ck_assert_int_eq(
        corShellAt(server.port, server.dir, out, sizeof(out),
                   "want=$(od -An -tx1 -v %s/ocsp.der | tr -d ' \\n') && "
                   "tests/tls/h3Handshake 127.0.0.1 $P > $D/h3 && "
                   "grep -q \"$want\" $D/h3",
                   certs),
        0);
    /* An sni entry without ocsp gets none. */
    if (namesResolve) {
        ck_assert_int_eq(
            corShellAt(server.port, server.dir, out, sizeof(out),
                       "want=$(od -An -tx1 -v %s/ocsp.der | tr -d ' \\n') && "
                       "tests/tls/h3Handshake --hosts $D/hosts b.test $P "
                       "> $D/h3 && ! grep -q \"$want\" $D/h3",
                       certs),
            0);
    }
}
END_TEST

/* Two h3 handshakes on port sharing one session file: 0 when the first
 * sent the certificate, the second none (it resumed) and served the
 * page; 1 when both sent it. */
static int
secondResumes(int port, const char* file)
{
    return corShellAt(
        port, server.dir, out, sizeof(out),
        "want=$(tests/tls/derHex < %s/%s) && rm -rf $D/s$P $D/dl$P && "
        "mkdir $D/dl$P && tests/tls/h3Handshake 127.0.0.1 $P "
        "--session-file=$D/s$P > $D/h3 && grep -q \"$want\" $D/h3 && "
        "tests/tls/h3Handshake 127.0.0.1 $P --session-file=$D/s$P "
        "--download=$D/dl$P > $D/h3 && grep -qx 'hello, world' $D/dl$P/hello "
        "|| exit 2; ! grep -q \"$want\" $D/h3 || exit 1",
        certs, file);
}

START_TEST(test_a_session_resumes_over_h3_with_a_ticket)
{
    long t = corNowMs();

    ck_assert_msg(secondResumes(server.port, "ocsp.pem") == 0, "%s", out);
    ck_assert_msg(secondResumes(noTicketsPort, "server.pem") == 1, "%s", out);
    fprintf(stderr, "corHttp3TlsTest: four handshakes in %ld ms\n",
            corNowMs() - t);
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

COR_TEST_SUITE(corHttp3Tls)
{
    tcase_add_unchecked_fixture(tc, serverStart, suiteEnd);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sni_over_h3_picks_as_openssl_does);
    tcase_add_test(tc, test_the_default_certificate_is_stapled_over_h3);
    tcase_add_test(tc, test_a_session_resumes_over_h3_with_a_ticket);
}
