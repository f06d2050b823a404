/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Automatic HTTPS against Let's Encrypt's test server, in both modes:
 * pebble (the ACME directory, its validations done for real:
 * PEBBLE_VA_ALWAYS_VALID=0) and pebble-challtestsrv (the DNS that points
 * every test name at 127.0.0.1), both started by PID on loopback ports
 * of the test's own. pebble's httpPort is cor's plain listener, its
 * tlsPort cor's TLS listener. A certificate for two names is issued over
 * HTTP-01 and verified by curl and openssl s_client against pebble's own
 * root (/roots/0 of its management port); a restart serves it again with
 * no new order; a certificate of 9 s is renewed at two thirds of its
 * life and swapped in without a reload; a certificate that fails a
 * handshake with the listener's settings is not served; the issued
 * certificate is stapled from the OCSP responder it names (openssl ocsp
 * signing with pebble's intermediate's key); with the directory down
 * at start the listener serves a temporary self-signed certificate, tries
 * again, and serves the issued one once the directory is up; TLS-ALPN-01
 * alone, from a directory (corAcmeFront.py in front of pebble, whose
 * Debian version has no renewalInfo) whose first answer is a 503 with a
 * Retry-After, and whose renewal information (RFC 9773) says to renew at
 * once; `cor -t` refuses what is wrong. The listener serves HTTP/3 too:
 * an h3 handshake (gtlsclient) gets the temporary certificate, then the
 * issued one, then the renewed one, each as OpenSSL serves it over TCP.
 */
#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static CorServer server;
static char out[1 << 16];
static char certs[256];
static char storage[128];
static int httpPort;
static int tlsPort;
static int acmePort;
static int managePort;
static int dnsPort;
static pid_t pebble;
static pid_t challtestsrv;
static bool skipped;
/* The CA file cor trusts the directory with; "": the test CA's, which
 * signed pebble's server certificate. */
static char caFile[300];
/* pebble's certificates' lifetime (certificateValidityPeriod); 0: its
 * default (five years). */
static int validityS;
/* The OCSP responder that pebble's certificates name (ocspResponderURL:
 * pebble answers no OCSP itself): openssl ocsp on ocspPort, signing with
 * pebble's intermediate's key; 0: none named. */
static int ocspPort;
static pid_t responder;
/* corAcmeFront.py, the directory in front of pebble that adds renewal
 * information; 0: cor asks pebble's own directory. */
static int frontPort;
static pid_t front;

/* Start a program of the test (its output to log) by PID. */
static pid_t
spawn(const char* log, char* const argv[])
{
    pid_t pid = corTestFork(SIGKILL);

    if (pid == 0) {
        FILE* f = freopen(log, "w", stderr);

        (void)f;
        dup2(STDERR_FILENO, STDOUT_FILENO);
        setpgid(0, 0);
        setenv("PEBBLE_VA_NOSLEEP", "1", 1);
        setenv("PEBBLE_VA_ALWAYS_VALID", "0", 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void
stop(pid_t* pid)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

static void
pebbleStart(void)
{
    char config[256];
    char log[256];
    char dns[32];
    char ocspUrl[64] = "";
    FILE* f;

    snprintf(config, sizeof(config), "%s/pebble.json", storage);
    snprintf(log, sizeof(log), "%s/pebble.log", storage);
    snprintf(dns, sizeof(dns), "127.0.0.1:%d", dnsPort);
    if (ocspPort > 0) {
        snprintf(ocspUrl, sizeof(ocspUrl), "http://127.0.0.1:%d/", ocspPort);
    }
    f = fopen(config, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"pebble\": {\"listenAddress\": \"127.0.0.1:%d\","
            " \"managementListenAddress\": \"127.0.0.1:%d\","
            " \"certificate\": \"%s/server.pem\","
            " \"privateKey\": \"%s/server.key\","
            " \"httpPort\": %d, \"tlsPort\": %d,"
            " \"ocspResponderURL\": \"%s\","
            " \"certificateValidityPeriod\": %d,"
            " \"externalAccountBindingRequired\": false}}\n",
            acmePort, managePort, certs, certs, httpPort, tlsPort, ocspUrl,
            validityS > 0 ? validityS : 157766400);
    fclose(f);
    pebble = spawn(log, (char* const[]){ "pebble", "-config", config,
                                         "-dnsserver", dns, NULL });
    ck_assert_msg(corWaitListening(acmePort, pebble, 60000),
                  "pebble did not start");
}

static void
setUp(void)
{
    char dns[32];
    char manage[32];
    char log[256];
    int chall = corFreePort();

    if (corShell("command -v pebble && command -v pebble-challtestsrv", out,
                 sizeof(out))
        != 0) {
        fprintf(stderr, "SKIP corAcme: no pebble (Debian's pebble)\n");
        skipped = true;
        return;
    }
    corTestCertsMake(certs, sizeof(certs));
    snprintf(caFile, sizeof(caFile), "%s/ca.pem", certs);
    snprintf(storage, sizeof(storage), "/tmp/cor-acme-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(storage));
    httpPort = corFreePort();
    tlsPort = corFreePort();
    acmePort = corFreePort();
    managePort = corFreePort();
    dnsPort = corFreePort();
    snprintf(dns, sizeof(dns), "127.0.0.1:%d", dnsPort);
    snprintf(manage, sizeof(manage), "127.0.0.1:%d", chall);
    snprintf(log, sizeof(log), "%s/challtestsrv.log", storage);
    challtestsrv = spawn(log,
                         (char* const[]){ "pebble-challtestsrv", "-defaultIPv4",
                                          "127.0.0.1", "-defaultIPv6", "",
                                          "-dns01", dns, "-http01", "",
                                          "-https01", "", "-tlsalpn01", "",
                                          "-management", manage, NULL });
    ck_assert_msg(corWaitListening(chall, challtestsrv, 60000),
                  "pebble-challtestsrv did not start");
}

static void
tearDown(void)
{
    char command[256];

    corServerStop(&server);
    stop(&pebble);
    stop(&challtestsrv);
    stop(&responder);
    stop(&front);
    if (storage[0] != '\0') {
        snprintf(command, sizeof(command), "rm -rf %s", storage);
        corShell(command, out, sizeof(out));
    }
}

/* cor s with a plain listener on plain (0: none) and the acme listener
 * on tls, storing under the test's storage; challenge (NULL: not said)
 * its challenge key. */
static void
corStartTuned(CorServer* s, int plain, int tls, const char* challenge,
              const char* tlsLines)
{
    char yaml[4096];
    char plainLine[96] = "";
    char challengeLine[96] = "";

    if (plain > 0) {
        snprintf(plainLine, sizeof(plainLine),
                 "  - { protocol: http, address: 127.0.0.1:%d }\n", plain);
    }
    if (challenge != NULL) {
        snprintf(challengeLine, sizeof(challengeLine),
                 "        challenge: %s\n", challenge);
    }
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, workers: 2, "
             "coroutines: { enabled: {COROUTINES} } }\n"
             "listen:\n"
             "%s"
             "  - protocol: https\n"
             "    address: 127.0.0.1:%d\n"
             "    http3: on\n"
             "    tls:\n"
             "      acme:\n"
             "        directory: https://127.0.0.1:%d/dir\n"
             "        email: ops@a.test\n"
             "        domains: [ a.test, www.a.test ]\n"
             "        storage: %s/store\n"
             "        ca: %s\n"
             "%s"
             "%s"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /metrics\", handler: metrics }\n"
             "  - { match: \"/\", handler: hello }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             plainLine, tls, frontPort > 0 ? frontPort : acmePort, storage,
             caFile, challengeLine, tlsLines != NULL ? tlsLines : "");
    ck_assert_int_eq(corServerStart(s, yaml), 0);
}

static void
corStartWith(CorServer* s, int plain, int tls, const char* challenge)
{
    corStartTuned(s, plain, tls, challenge, NULL);
}

static void
corStartOn(CorServer* s, int plain, int tls)
{
    corStartWith(s, plain, tls, NULL);
}

/* The one on pebble's ports. */
static void
corStart(void)
{
    corStartOn(&server, httpPort, tlsPort);
}

/* Wait until the log says text (a minute and a half at most). */
static bool
logSays(const char* text)
{
    for (long deadline = corNowMs() + 90000; corNowMs() < deadline;) {
        if (corServerLogCount(&server, text) > 0) {
            return true;
        }
        usleep(100 * 1000);
    }
    return false;
}

/* pebble's issuing root (a new one each run), into storage/root.pem. */
static void
rootFetch(void)
{
    ck_assert_msg(corShellAt(managePort, storage, out, sizeof(out),
                             "curl -sf --cacert %s/ca.pem -o $D/root.pem "
                             "https://127.0.0.1:$P/roots/0",
                             certs)
                      == 0,
                  "%s", out);
}

/* curl GET /hello on name over the TLS listener, trusting pebble's root;
 * its exit status, the answer in out. */
static int
curlName(const char* name)
{
    return corShellAt(tlsPort, storage, out, sizeof(out),
                      "curl -sS --max-time 20 --cacert $D/root.pem "
                      "--resolve %s:$P:127.0.0.1 https://%s:$P/hello",
                      name, name);
}

/* Both names verify against pebble's root, by curl and s_client. */
static void
servedChainVerifies(void)
{
    rootFetch();
    ck_assert_msg(curlName("a.test") == 0 && strstr(out, "hello") != NULL, "%s",
                  out);
    ck_assert_msg(curlName("www.a.test") == 0 && strstr(out, "hello") != NULL,
                  "%s", out);
    corShellAt(tlsPort, storage, out, sizeof(out),
               "echo | openssl s_client -connect 127.0.0.1:$P "
               "-servername www.a.test -verify_hostname www.a.test "
               "-CAfile $D/root.pem -verify_return_error");
    ck_assert_msg(strstr(out, "Verify return code: 0 (ok)") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "Pebble Intermediate") != NULL, "%s", out);
}

/* Whether an HTTP/3 handshake on the TLS listener (gtlsclient, its
 * Handshake-level bytes) carries the certificate OpenSSL serves over TCP
 * now (s_client's): ACME's, swapped in on the loop too. Asked again when
 * a renewal came between the two handshakes (a 9 s certificate renews
 * every 5 s). */
static bool
h3ServesAsTcp(void)
{
    for (int tries = 0; tries < 3; tries++) {
        int issued = corServerLogCount(&server, "certificate issued by");

        if (corShellAt(tlsPort, storage, out, sizeof(out),
                       "want=$(echo | openssl s_client -connect 127.0.0.1:$P "
                       "-servername a.test 2>/dev/null | tests/tls/derHex) "
                       "&& [ -n \"$want\" ] && tests/tls/h3Handshake "
                       "127.0.0.1 $P > $D/h3 && grep -q \"$want\" $D/h3")
            == 0) {
            return true;
        }
        if (corServerLogCount(&server, "certificate issued by") == issued) {
            break;
        }
    }
    fprintf(stderr, "corAcmeTest: h3 serves another certificate: %s\n", out);
    return false;
}

/* The mode of storage/store/name. */
static unsigned
modeOf(const char* name)
{
    char path[256];
    struct stat st;

    snprintf(path, sizeof(path), "%s/store/%s", storage, name);
    return stat(path, &st) == 0 ? st.st_mode & 0777 : 0;
}

/* How many certificates pebble issued so far (not its order-plz
 * requests: it rejects 5% of nonces, and a badNonce is sent again). */
static int
pebbleIssued(void)
{
    corShellAt(0, storage, out, sizeof(out),
               "grep -c 'Issued certificate serial' $D/pebble.log");
    return atoi(out);
}

/* openssl ocsp on ocspPort as pebble's intermediate's responder,
 * vouching for the stored certificate (the index: its serial, good);
 * returns once it listens (its log says so: a connection made to find
 * out would hold it, as it serves one at a time). */
static void
responderStart(void)
{
    char port[16];
    char index[256];
    char key[256];
    char cert[256];
    char log[256];

    ck_assert_msg(corShellAt(managePort, storage, out, sizeof(out),
                             "curl -sf --cacert %s/ca.pem -o $D/inter.pem "
                             "https://127.0.0.1:$P/intermediates/0 && "
                             "curl -sf --cacert %s/ca.pem -o $D/inter.key "
                             "https://127.0.0.1:$P/intermediate-keys/0 && "
                             "printf 'V\\t301231000000Z\\t\\t%%s\\tunknown\\t"
                             "/CN=a.test\\n' \"$(openssl x509 -noout -serial "
                             "-in $D/store/a.test.pem | cut -d= -f2)\" "
                             ">$D/index.txt",
                             certs, certs)
                      == 0,
                  "%s", out);
    snprintf(port, sizeof(port), "%d", ocspPort);
    snprintf(index, sizeof(index), "%s/index.txt", storage);
    snprintf(cert, sizeof(cert), "%s/inter.pem", storage);
    snprintf(key, sizeof(key), "%s/inter.key", storage);
    snprintf(log, sizeof(log), "%s/responder.log", storage);
    /* A minute's nextUpdate: cor fetches again halfway, in 30 s. */
    responder = spawn(log, (char* const[]){ "openssl", "ocsp", "-port", port,
                                            "-index", index, "-rsigner", cert,
                                            "-rkey", key, "-CA", cert, "-nmin",
                                            "1", "-ignore_err", NULL });
    for (long end = corNowMs() + 10000;
         corShellAt(0, storage, out, sizeof(out),
                    "grep -q 'waiting for OCSP client' $D/responder.log")
         != 0;) {
        ck_assert_msg(corNowMs() < end, "openssl ocsp did not start");
        usleep(50 * 1000);
    }
}

START_TEST(
    test_two_names_issued_over_http01_stapled_then_reused_after_a_restart)
{
    long t;
    int issued;

    if (skipped) {
        return;
    }
    ocspPort = corFreePort();
    pebbleStart();
    t = corNowMs();
    corStart();
    ck_assert_msg(logSays("certificate issued by"), "not issued in %ld ms",
                  corNowMs() - t);
    fprintf(stderr, "issued for a.test, www.a.test in %ld ms\n",
            corNowMs() - t);
    servedChainVerifies();

    /* Stapled from the responder the certificate names: the first fetch
     * finds none there yet, the next (a second later) gets the staple. */
    t = corNowMs();
    responderStart();
    ck_assert_msg(logSays("good, fetched again in"), "no staple fetched");
    fprintf(stderr, "stapled %ld ms after the issue was seen\n",
            corNowMs() - t);
    corShellAt(0, server.log, out, sizeof(out), "grep 'OCSP staple' $D");
    ck_assert_msg(corServerLogMatches(&server,
                                      "OCSP staple of .a.test. from "
                                      "http://127.0.0.1:[0-9]+/: good, "
                                      "fetched again in (29|30) s")
                      == 1,
                  "%s", out);
    corShellAt(tlsPort, storage, out, sizeof(out),
               "echo | openssl s_client -connect 127.0.0.1:$P -status "
               "-servername www.a.test -CAfile $D/root.pem");
    ck_assert_msg(strstr(out, "OCSP Response Status: successful") != NULL
                      && strstr(out, "Cert Status: good") != NULL
                      && strstr(out, "Verify return code: 0 (ok)") != NULL,
                  "%s", out);
    /* Over h3 too: the leaf's entry in the Certificate message carries a
     * status_request extension (type 5) with an OCSP response (status
     * type 1, then a DER SEQUENCE). */
    ck_assert_msg(corShellAt(tlsPort, storage, out, sizeof(out),
                             "tests/tls/h3Handshake 127.0.0.1 $P > $D/h3 && "
                             "grep -Eq '0005[0-9a-f]{4}01[0-9a-f]{6}3082' "
                             "$D/h3")
                      == 0,
                  "no staple over h3: %s", out);

    ck_assert_uint_eq(modeOf("account.key"), 0600);
    ck_assert_uint_eq(modeOf("a.test.key"), 0600);
    ck_assert_uint_eq(modeOf("a.test.pem"), 0600);
    issued = pebbleIssued();
    ck_assert_int_eq(issued, 1);
    ck_assert_int_eq(corMetric(httpPort,
                               "cor_acme_orders_total{name=\"a.test\"}"),
                     1);
    ck_assert_int_eq(corMetric(httpPort,
                               "cor_acme_failures_total{name=\"a.test\"}"),
                     0);
    /* pebble's five years, give or take the clock. */
    ck_assert_int_gt(corMetric(httpPort, "cor_acme_certificate_expiry_seconds"
                                         "{name=\"www.a.test\"}"),
                     (long)time(NULL) + 4L * 365 * 86400);

    /* A restart serves the stored chain at once, with no new order. */
    corServerStop(&server);
    corStart();
    ck_assert_int_eq(corServerLogCount(&server,
                                       "serving the stored certificate"),
                     1);
    servedChainVerifies();
    usleep(500 * 1000);
    ck_assert_int_eq(pebbleIssued(), issued);
    ck_assert_int_eq(corServerLogCount(&server, "temporary"), 0);
}
END_TEST

START_TEST(test_directory_down_at_start_serves_a_temporary_one_and_retries)
{
    if (skipped) {
        return;
    }
    corStart();
    ck_assert_int_eq(corServerLogCount(&server,
                                       "temporary self-signed certificate"),
                     1);
    /* The plain listener serves meanwhile; the TLS one serves the
     * temporary certificate, self-signed for the names. */
    ck_assert_int_eq(corCurl(httpPort, "", "/hello", out, sizeof(out)), 0);
    corShellAt(tlsPort, storage, out, sizeof(out),
               "echo | openssl s_client -connect 127.0.0.1:$P "
               "-servername a.test");
    ck_assert_msg(strstr(out, "issuer=CN = a.test") != NULL, "%s", out);
    ck_assert(h3ServesAsTcp());
    ck_assert_msg(logSays("order failed"), "no failure logged");
    ck_assert_int_eq(corServerLogCount(&server, "tried again in 2 s"), 1);
    ck_assert_int_ge(corMetric(httpPort,
                               "cor_acme_failures_total{name=\"a.test\"}"),
                     1);
    ck_assert_int_eq(corMetric(httpPort, "cor_acme_certificate_expiry_seconds"
                                         "{name=\"a.test\"}"),
                     0);

    /* The directory comes up: the next try (4 s, then 8 s) gets it. */
    pebbleStart();
    ck_assert_msg(logSays("certificate issued by"), "not issued");
    ck_assert_int_eq(corServerLogCount(&server, "tried again in 2 s"), 1);
    servedChainVerifies();
    /* Swapped in for h3 as for TCP, without a restart. */
    ck_assert(h3ServesAsTcp());
}
END_TEST

/* The serial of the certificate served for a.test on port now. */
static void
servedSerialAt(int port, char* serial, size_t cap)
{
    corShellAt(port, storage, out, sizeof(out),
               "echo | openssl s_client -connect 127.0.0.1:$P "
               "-servername a.test 2>/dev/null | openssl x509 -noout -serial");
    snprintf(serial, cap, "%.100s", out);
}

static void
servedSerial(char* serial, size_t cap)
{
    servedSerialAt(tlsPort, serial, cap);
}

START_TEST(test_two_instances_sharing_storage_order_once)
{
    CorServer other = { 0 };
    int otherPlain = corFreePort();
    int otherTls = corFreePort();
    char mine[128];
    char theirs[128];
    char sni[700];
    int issuedHere;
    int issuedThere;

    if (skipped) {
        return;
    }
    /* Both up before the directory, which then sees them retry: the
     * lock decides which orders (mostly the other, whose retry comes
     * first). Its plain listener is not the one pebble asks, so when it
     * orders this one answers its tokens from storage. It serves
     * www.a.test from files (an sni entry): the proof of the ACME
     * certificate leaves that name to them. */
    snprintf(sni, sizeof(sni),
             "      sni:\n"
             "        - { name: www.a.test, certificate: %s/server.pem, "
             "key: %s/server.key }\n",
             certs, certs);
    corStartTuned(&other, otherPlain, otherTls, NULL, sni);
    corStart();
    pebbleStart();
    for (long deadline = corNowMs() + 90000;
         corServerLogMatches(&server, "certificate (issued|another)") == 0
         && corNowMs() < deadline;) {
        usleep(100 * 1000);
    }
    for (long deadline = corNowMs() + 90000;
         corServerLogMatches(&other, "certificate (issued|another)") == 0
         && corNowMs() < deadline;) {
        usleep(100 * 1000);
    }
    issuedHere = corServerLogCount(&server, "certificate issued by");
    issuedThere = corServerLogCount(&other, "certificate issued by");
    fprintf(stderr,
            "ordered by the instance on pebble's port: %d, by the other: "
            "%d\n",
            issuedHere, issuedThere);
    ck_assert_int_eq(issuedHere + issuedThere, 1);
    /* Whichever ordered got its tokens answered (the other's from
     * storage): no validation failed. */
    ck_assert_int_eq(corServerLogCount(&server, "authorization of"), 0);
    ck_assert_int_eq(corServerLogCount(&other, "authorization of"), 0);
    ck_assert_int_eq(pebbleIssued(), 1);
    servedSerialAt(tlsPort, mine, sizeof(mine));
    servedSerialAt(otherTls, theirs, sizeof(theirs));
    ck_assert_msg(strstr(mine, "serial=") != NULL && strcmp(mine, theirs) == 0,
                  "%s and %s", mine, theirs);
    corShellAt(otherTls, storage, out, sizeof(out),
               "echo | openssl s_client -connect 127.0.0.1:$P -servername "
               "www.a.test 2>/dev/null | openssl x509 -noout -issuer");
    ck_assert_msg(strstr(out, "cor test CA") != NULL, "%s", out);
    corServerStop(&other);
}
END_TEST

START_TEST(test_a_short_lived_certificate_is_renewed_without_a_reload)
{
    char first[128];
    char second[128];
    long t;

    if (skipped) {
        return;
    }
    validityS = 9;
    pebbleStart();
    corStart();
    ck_assert_msg(logSays("certificate issued by"), "not issued");
    servedSerial(first, sizeof(first));
    ck_assert_msg(strstr(first, "serial=") != NULL, "%s", first);
    /* Due at two thirds of 9 s (pebble's 8 s to notAfter: 5.3 s), less
     * the time the issue took; no jitter under 30 s of life. */
    corShellAt(0, server.log, out, sizeof(out), "grep 'renewed in' $D");
    ck_assert_msg(corServerLogMatches(&server, "renewed in [0-5] s") == 1, "%s",
                  out);
    t = corNowMs();
    for (long deadline = t + 90000;
         corServerLogCount(&server, "certificate issued by") < 2
         && corNowMs() < deadline;) {
        usleep(100 * 1000);
    }
    ck_assert_int_eq(corServerLogCount(&server, "certificate issued by"), 2);
    fprintf(stderr, "renewed %ld ms after the first issue was seen\n",
            corNowMs() - t);
    servedSerial(second, sizeof(second));
    ck_assert_msg(strstr(second, "serial=") != NULL
                      && strcmp(first, second) != 0,
                  "%s then %s", first, second);
    servedChainVerifies();
    ck_assert(h3ServesAsTcp());
    ck_assert_int_eq(corServerLogCount(&server, "generation 2"), 0);
}
END_TEST

/* corAcmeFront.py on frontPort in front of pebble's directory; returns
 * once it listens. */
static void
frontStart(void)
{
    char port[16];
    char cert[300];
    char key[300];
    char upstream[64];
    char ca[300];
    char log[256];

    frontPort = corFreePort();
    snprintf(port, sizeof(port), "%d", frontPort);
    snprintf(cert, sizeof(cert), "%s/server.pem", certs);
    snprintf(key, sizeof(key), "%s/server.key", certs);
    snprintf(ca, sizeof(ca), "%s/ca.pem", certs);
    snprintf(upstream, sizeof(upstream), "https://127.0.0.1:%d/dir", acmePort);
    snprintf(log, sizeof(log), "%s/front.log", storage);
    front = spawn(log, (char* const[]){ "/usr/bin/python3",
                                        "tests/integration/corAcmeFront.py",
                                        port, cert, key, upstream, ca, NULL });
    /* python3's start takes seconds on a loaded machine. */
    for (long end = corNowMs() + 30000;
         corShellAt(0, storage, out, sizeof(out),
                    "grep -q '^listening' $D/front.log")
         != 0;) {
        ck_assert_msg(corNowMs() < end, "corAcmeFront.py did not start");
        usleep(50 * 1000);
    }
}

/* The ARI id (RFC 9773 4.1) of the stored certificate as openssl and
 * python3 make it, into id: base64url of its authority key identifier
 * and of its serial's DER bytes. */
static void
storedAriId(char* id, size_t cap)
{
    ck_assert_msg(
        corShellAt(0, storage, out, sizeof(out),
                   "f=$D/store/a.test.pem; "
                   "python3 -c 'import base64, sys\n"
                   "b = lambda h: base64.urlsafe_b64encode(bytes.fromhex(h))"
                   ".rstrip(b\"=\").decode()\n"
                   "s = sys.argv[2].rjust(len(sys.argv[2]) + 1 & ~1, \"0\")\n"
                   "s = (\"00\" if int(s[0], 16) >= 8 else \"\") + s\n"
                   "print(b(sys.argv[1]) + \".\" + b(s), end=\"\")' "
                   "$(openssl x509 -in $f -noout -ext authorityKeyIdentifier "
                   "| grep -o '[0-9A-F:]\\{20,\\}' | tr -d :) "
                   "$(openssl x509 -in $f -noout -serial | cut -d= -f2)")
            == 0,
        "%s", out);
    snprintf(id, cap, "%.100s", out);
}

START_TEST(test_tls_alpn_01_alone_renewed_as_renewal_information_says)
{
    char first[128];
    char line[200];

    if (skipped) {
        return;
    }
    pebbleStart();
    frontStart();
    /* No plain listener: pebble's httpPort has nobody, and the
     * challenge is said (the default without one would be the same). */
    corStartWith(&server, 0, tlsPort, "tls-alpn-01");
    /* The directory's first answer is a 503 with an error document and
     * a Retry-After longer than the first back-off. */
    ck_assert_msg(logSays("certificate issued by"), "not issued");
    ck_assert_int_eq(
        corServerLogCount(&server,
                          "/dir answered 503: urn:ietf:params:acme:error:"
                          "rateLimited: busy, come back later; tried again "
                          "in 3 s"),
        1);
    ck_assert_int_eq(corServerLogCount(&server, "order failed"), 1);
    /* pebble logs no challenge's type: nothing answers on its httpPort,
     * so HTTP-01 could not have proved the names. */
    ck_assert_int_lt(corConnect(httpPort), 0);

    /* The front's window for the first certificate is past: renewed at
     * once, in a five-year certificate's first minute; the second's is a
     * day ahead. */
    storedAriId(first, sizeof(first));
    ck_assert_msg(logSays("renewal information from"), "no ARI asked");
    for (long deadline = corNowMs() + 90000;
         corServerLogCount(&server, "certificate issued by") < 2
         && corNowMs() < deadline;) {
        usleep(100 * 1000);
    }
    corShellAt(0, storage, out, sizeof(out), "cat $D/front.log");
    snprintf(line, sizeof(line), "renewal-info %s\n", first);
    ck_assert_msg(strstr(out, line) != NULL, "want '%s' in: %s", line, out);
    corShellAt(0, server.log, out, sizeof(out),
               "grep acme $D | cut -c1-300 | tail -8");
    ck_assert_msg(corServerLogCount(&server, "certificate issued by") == 2,
                  "%s", out);
    ck_assert_int_eq(pebbleIssued(), 2);
    ck_assert_msg(logSays("asked again in 21600 s"), "no second ARI");
    ck_assert_int_eq(corServerLogMatches(&server, "renewed in [0-9]{5,6} s; "
                                                  "asked again in 21600 s"),
                     1);
    servedChainVerifies();
}
END_TEST

START_TEST(test_a_certificate_that_fails_a_handshake_is_not_served)
{
    if (skipped) {
        return;
    }
    pebbleStart();
    /* ACME's key is a P-256 one: a listener that takes only RSA key
     * exchanges cannot serve it. The order goes through; the proof
     * before serving fails it, and the certificate served (the
     * temporary one here) stays, the failure counted and backed off. */
    corStartTuned(&server, httpPort, tlsPort, NULL,
                  "      protocols: [TLSv1.2]\n"
                  "      ciphers: ECDHE-RSA-AES128-GCM-SHA256\n");
    ck_assert_msg(logSays("order failed"), "no failure logged");
    ck_assert_int_eq(corServerLogCount(&server, "certificate issued by"), 0);
    ck_assert_int_eq(corServerLogMatches(
                         &server, "the certificate does not work, the one "
                                  "served stays: a handshake for a.test with "
                                  "the listener fails: no shared cipher"),
                     1);
    ck_assert_int_eq(corServerLogCount(&server, "tried again in 2 s"), 1);
    ck_assert_int_eq(pebbleIssued(), 1);
    ck_assert_int_eq(corMetric(httpPort,
                               "cor_acme_failures_total{name=\"a.test\"}"),
                     1);
    ck_assert_int_eq(corMetric(httpPort, "cor_acme_certificate_expiry_seconds"
                                         "{name=\"a.test\"}"),
                     0);
}
END_TEST

/* The log says regex on one line (the failures' lines shown if not). */
static void
failureSaid(const char* regex)
{
    corShellAt(0, server.log, out, sizeof(out),
               "grep 'order failed' $D | cut -c1-400 | tail -3");
    ck_assert_msg(corServerLogMatches(&server, regex) == 1, "no '%s' in: %s",
                  regex, out);
}

START_TEST(test_orders_that_cannot_succeed_are_said_and_backed_off)
{
    int elsewhere = corFreePort();

    if (skipped) {
        return;
    }
    pebbleStart();
    /* A CA file that loads but did not sign the directory's certificate:
     * no request gets through. */
    ck_assert_msg(corShellAt(0, storage, out, sizeof(out),
                             "openssl req -x509 -newkey ec -pkeyopt "
                             "ec_paramgen_curve:P-256 -nodes -keyout "
                             "$D/other.key -out $D/other.pem -subj /CN=other "
                             "-days 1 2>&1")
                      == 0,
                  "%s", out);
    snprintf(caFile, sizeof(caFile), "%s/other.pem", storage);
    corStart();
    ck_assert_msg(logSays("order failed"), "no failure logged");
    failureSaid("order failed: GET https://127.0.0.1:[0-9]+/dir: TLS to "
                "127.0.0.1:[0-9]+: unable to get local issuer certificate");
    ck_assert_int_eq(corServerLogCount(&server, "tried again in 2 s"), 1);
    ck_assert_int_eq(corServerLogCount(&server, "temporary self-signed"), 1);
    corServerStop(&server);

    /* Pebble's validation finds nobody on its httpPort: the challenge's
     * error document is said. */
    snprintf(caFile, sizeof(caFile), "%s/ca.pem", certs);
    corStartWith(&server, elsewhere, tlsPort, "http-01");
    ck_assert_msg(logSays("order failed"), "no failure logged");
    failureSaid("order failed: authorization of "
                "(www\\.)?a\\.test failed: urn:ietf:"
                "params:acme:error:connection: ");
    ck_assert_int_eq(pebbleIssued(), 0);
    corServerStop(&server);

    /* A directory that rejects every nonce: each request is sent five
     * times with the nonce its badNonce brought, then given up, said. */
    stop(&pebble);
    setenv("PEBBLE_WFE_NONCEREJECT", "100", 1);
    pebbleStart();
    unsetenv("PEBBLE_WFE_NONCEREJECT");
    corStart();
    ck_assert_msg(logSays("order failed"), "no failure logged");
    failureSaid("order failed: https://127.0.0.1:"
                "[0-9]+/sign-me-up answered 400: urn:"
                "ietf:params:acme:error:badNonce: ");
    corShellAt(0, storage, out, sizeof(out),
               "grep -c 'POST /sign-me-up' $D/pebble.log");
    ck_assert_int_eq(atoi(out), 5);
}
END_TEST

/* cor -t on an acme listener whose mapping has line, refused saying
 * want. */
static void
refuses(const char* line, const char* want)
{
    char yaml[2048];
    CorServer s = { 0 };

    snprintf(s.dir, sizeof(s.dir), "%s", storage);
    snprintf(yaml, sizeof(yaml),
             "listen:\n"
             "  - { protocol: http, address: 127.0.0.1:1 }\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:2\n"
             "    tls:\n"
             "      acme:\n"
             "%s"
             "modules:\n"
             "  - { load: http }\n",
             line);
    ck_assert_int_eq(corConfigCheck(&s, "check.yaml", yaml, out, sizeof(out)),
                     1);
    ck_assert_msg(strstr(out, want) != NULL, "want '%s' in: %s", want, out);
}

START_TEST(test_cor_t_refuses_a_wrong_acme_mapping)
{
    char good[1024];
    char line[1400];

    if (skipped) {
        return;
    }
    snprintf(good, sizeof(good),
             "        storage: %s/store\n"
             "        domains: [ a.test ]\n",
             storage);
    snprintf(line, sizeof(line), "%s        directory: http://x.test/dir\n",
             good);
    refuses(line, "is not an https:// URL");
    snprintf(line, sizeof(line),
             "        directory: https://x.test/dir\n"
             "        storage: %s/store\n"
             "        domains: [ \"*.a.test\" ]\n",
             storage);
    refuses(line, "'*.a.test' is not a DNS name");
    refuses("        directory: https://x.test/dir\n"
            "        domains: [ a.test ]\n",
            "storage");
    snprintf(line, sizeof(line),
             "%s        directory: https://x.test/dir\n"
             "        ca: %s/nothing.pem\n",
             good, storage);
    refuses(line, "acme: ca: ");
    snprintf(line, sizeof(line),
             "%s        directory: https://x.test/dir\n"
             "        challenge: dns-01\n",
             good);
    refuses(line, "challenge");
    snprintf(line, sizeof(line),
             "%s        directory: https://x.test/dir\n"
             "        email: nobody\n",
             good);
    refuses(line, "is not an e-mail address");
    snprintf(line, sizeof(line),
             "%s        directory: https://x.test/dir\n"
             "      certificate: x.pem\n",
             good);
    refuses(line, "certificate and acme exclude each other");
    snprintf(line, sizeof(line),
             "        directory: https://x.test/dir\n"
             "        storage: /proc/nope/store\n"
             "        domains: [ a.test ]\n");
    refuses(line, "cannot be written or made");
}
END_TEST

COR_TEST_SUITE(corAcme)
{
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(
        tc,
        test_two_names_issued_over_http01_stapled_then_reused_after_a_restart);
    tcase_add_test(
        tc, test_directory_down_at_start_serves_a_temporary_one_and_retries);
    tcase_add_test(tc, test_cor_t_refuses_a_wrong_acme_mapping);
    tcase_add_test(tc, test_two_instances_sharing_storage_order_once);
    tcase_add_test(tc,
                   test_tls_alpn_01_alone_renewed_as_renewal_information_says);
    tcase_add_test(tc, test_a_certificate_that_fails_a_handshake_is_not_served);
    tcase_add_test(tc, test_orders_that_cannot_succeed_are_said_and_backed_off);
    tcase_add_test(tc,
                   test_a_short_lived_certificate_is_renewed_without_a_reload);
}
