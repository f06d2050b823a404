/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corResolve: numeric addresses and localhost answered without a server;
 * names asked of the tests' DNS server (corDnsServer, beside this
 * program), off the loop and in coroutines on a loop: answers, the cache,
 * errors that say why, one query for concurrent lookups, cancels.
 */
#include "corTest.h"
#include "corAutoConfig.h"
#include "corDns.h"
#include "corEv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The text of out's address i. */
static const char*
addrText(const CorAddrs* out, unsigned i, char* buf, size_t cap)
{
    const struct sockaddr_storage* ss = &out->addrs[i];

    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in* sin = (const struct sockaddr_in*)ss;

        ck_assert_int_eq(sin->sin_port, 0);
        return inet_ntop(AF_INET, &sin->sin_addr, buf, (socklen_t)cap);
    }
    ck_assert_int_eq(ss->ss_family, AF_INET6);
    ck_assert_int_eq(((const struct sockaddr_in6*)ss)->sin6_port, 0);
    return inet_ntop(AF_INET6, &((const struct sockaddr_in6*)ss)->sin6_addr,
                     buf, (socklen_t)cap);
}

START_TEST(test_numeric_addresses_are_answered_here)
{
    static const char* const hosts[][2] = {
        { "192.0.2.7", "192.0.2.7" },
        { "2001:db8::1", "2001:db8::1" },
        { "[2001:db8::2]", "2001:db8::2" },
        { "::ffff:10.0.0.1", "::ffff:10.0.0.1" },
    };
    char buf[INET6_ADDRSTRLEN];
    CorAddrs out;

    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        ck_assert_int_eq(corResolve(hosts[i][0], 1000, &out, NULL, 0), 0);
        ck_assert_uint_eq(out.count, 1);
        ck_assert_str_eq(addrText(&out, 0, buf, sizeof(buf)), hosts[i][1]);
    }
}
END_TEST

START_TEST(test_localhost_is_both_loopbacks_ipv6_first)
{
    char buf[INET6_ADDRSTRLEN];
    CorAddrs out;

    ck_assert_int_eq(corResolve("LocalHost", 1000, &out, NULL, 0), 0);
    ck_assert_uint_eq(out.count, 2);
    ck_assert_str_eq(addrText(&out, 0, buf, sizeof(buf)), "::1");
    ck_assert_str_eq(addrText(&out, 1, buf, sizeof(buf)), "127.0.0.1");
}
END_TEST

START_TEST(test_bad_configurations_are_refused)
{
    static const char* const bad[] = {
        "nowhere", "1.2.3.4:0", "1.2.3.4:70000", "[::1", "1.2.3.4,", "",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(corResolverConfigure(&(CorResolverConfig){
                             .servers = bad[i], .maxTtlS = 10 }),
                         -EINVAL);
    }
    ck_assert_int_eq(corResolverConfigure(&(CorResolverConfig){
                         .servers = "system", .minTtlS = 5, .maxTtlS = 1 }),
                     -EINVAL);
    ck_assert_int_eq(corResolverConfigure(&(CorResolverConfig){
                         .servers = "127.0.0.1:5353, [::1]:53, ::1, 10.0.0.1",
                         .maxTtlS = 10 }),
                     0);
}
END_TEST

/* ---- Against the tests' DNS server --------------------------------------- */

static CorDns dns;

/* Start the DNS server and point the resolver at it, with timeoutMs per
 * lookup and the given negative TTL. */
static void
dnsStart(int timeoutMs, unsigned negativeTtlS)
{
    char servers[64];

    ck_assert_int_eq(corDnsStart(&dns, NULL), 0);
    snprintf(servers, sizeof(servers), "127.0.0.1:%d", dns.port);
    ck_assert_int_eq(corResolverConfigure(
                         &(CorResolverConfig){ .servers = servers,
                                               .timeoutMs = timeoutMs,
                                               .maxTtlS = 3600,
                                               .negativeTtlS = negativeTtlS }),
                     0);
}

static void
dnsStop(void)
{
    corDnsStop(&dns);
}

static int
dnsQueries(const char* text)
{
    return corDnsQueries(&dns, text);
}

/* Whether out holds 192.0.2.1 and 2001:db8::1. */
static void
checkAnswer(const CorAddrs* out)
{
    char buf[INET6_ADDRSTRLEN];
    bool v4 = false;
    bool v6 = false;

    ck_assert_uint_eq(out->count, 2);
    for (unsigned i = 0; i < out->count; i++) {
        addrText(out, i, buf, sizeof(buf));
        v4 |= strcmp(buf, "192.0.2.1") == 0;
        v6 |= strcmp(buf, "2001:db8::1") == 0;
    }
    ck_assert(v4 && v6);
}

START_TEST(test_a_name_is_asked_once_then_cached)
{
    char why[128] = "";
    CorAddrs out;

    dnsStart(2000, 5);
    ck_assert_int_eq(corResolve("www.example.test", 0, &out, why, sizeof(why)),
                     0);
    checkAnswer(&out);
    ck_assert_int_eq(corResolve("WWW.Example.test.", 0, &out, NULL, 0), 0);
    checkAnswer(&out);
    ck_assert_int_eq(dnsQueries(" A www.example.test"), 1);
    ck_assert_int_eq(dnsQueries(" AAAA www.example.test"), 1);
    ck_assert_int_eq(corResolve("127.0.0.1", 0, &out, NULL, 0), 0);
    ck_assert_int_eq(corResolve("localhost", 0, &out, NULL, 0), 0);
    ck_assert_int_eq(dnsQueries("udp"), 2);
    dnsStop();
}
END_TEST

START_TEST(test_an_expired_answer_is_asked_again)
{
    CorAddrs out;

    dnsStart(2000, 5);
    ck_assert_int_eq(corResolve("short.ttl0.test", 0, &out, NULL, 0), 0);
    ck_assert_int_eq(corResolve("short.ttl0.test", 0, &out, NULL, 0), 0);
    ck_assert_int_eq(dnsQueries(" A short.ttl0.test"), 2);
    dnsStop();
}
END_TEST

START_TEST(test_errors_name_the_name_and_why)
{
    static const struct {
        const char* name;
        int rc;
        const char* why;
    } cases[] = {
        { "gone.nx.test", -ENOENT, "name 'gone.nx.test': NXDOMAIN" },
        { "bad.servfail.test", -EIO, "name 'bad.servfail.test': SERVFAIL" },
        { "no.refused.test", -ECONNREFUSED, "name 'no.refused.test': REFUSED" },
        { "lost.drop.test", -ETIMEDOUT, "name 'lost.drop.test': timed out" },
        { "bad name", -ENOENT, "name 'bad name': not a valid host name" },
    };
    char why[128];
    CorAddrs out;

    dnsStart(300, 5);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_int_eq(corResolve(cases[i].name, 0, &out, why, sizeof(why)),
                         cases[i].rc);
        ck_assert_msg(strncmp(why, cases[i].why, strlen(cases[i].why)) == 0,
                      "%s: %s", cases[i].name, why);
    }
    /* An NXDOMAIN is kept (negative_ttl), a SERVFAIL is not. */
    ck_assert_int_eq(corResolve("gone.nx.test", 0, &out, NULL, 0), -ENOENT);
    ck_assert_int_eq(dnsQueries(" A gone.nx.test"), 1);
    ck_assert_int_eq(corResolve("bad.servfail.test", 0, &out, NULL, 0), -EIO);
    ck_assert_int_eq(dnsQueries(" A bad.servfail.test"), 2);
    dnsStop();
}
END_TEST

/* A port nobody listens on: the ICMP error ends the lookup at once. */
START_TEST(test_a_server_that_is_not_there_refuses)
{
    char why[128];
    CorAddrs out;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sin = { .sin_family = AF_INET };
    socklen_t len = sizeof(sin);
    char servers[64];

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr*)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr*)&sin, &len), 0);
    close(fd);
    snprintf(servers, sizeof(servers), "127.0.0.1:%d", ntohs(sin.sin_port));
    ck_assert_int_eq(corResolverConfigure(
                         &(CorResolverConfig){ .servers = servers,
                                               .timeoutMs = 10000,
                                               .maxTtlS = 10 }),
                     0);
    ck_assert_int_eq(corResolve("www.example.test", 0, &out, why, sizeof(why)),
                     -ECONNREFUSED);
    ck_assert_str_eq(why, "name 'www.example.test': the DNS server refused "
                          "the connection");
}
END_TEST

START_TEST(test_a_truncated_answer_is_asked_again_over_tcp)
{
    CorAddrs out;

    dnsStart(2000, 5);
    ck_assert_int_eq(corResolve("big.tc.test", 0, &out, NULL, 0), 0);
    checkAnswer(&out);
    ck_assert_int_eq(dnsQueries("tcp A big.tc.test"), 1);
    dnsStop();
}
END_TEST

/* ---- On a loop ----------------------------------------------------------- */

#if COR_HAVE_COROUTINES

typedef struct {
    CorEvLoop* loop;
    const char* name;
    int timeoutMs;
    int rc;
    char why[128];
    CorRestCancel* cancel; /* bound before the lookup, or NULL */
    unsigned* left;        /* lookups still running */
} Lookup;

static void
lookupMain(void* arg)
{
    Lookup* l = arg;
    CorAddrs out;

    if (l->cancel != NULL) {
        corRestCancelBind(l->cancel);
    }
    l->rc = corResolve(l->name, l->timeoutMs, &out, l->why, sizeof(l->why));
    if (l->rc == 0) {
        checkAnswer(&out);
    }
    if (--*l->left == 0) {
        corEvLoopStop(l->loop);
    }
}

START_TEST(test_concurrent_lookups_on_a_loop_share_one_query)
{
    static Lookup lookups[200];
    static char names[10][32];
    CorEvLoop* loop = corEvLoopCreate();
    unsigned left = 200;

    dnsStart(2000, 5);
    corEvLoopBind(loop);
    for (int i = 0; i < 10; i++) {
        snprintf(names[i], sizeof(names[i]), "n%d.delay100.test", i);
    }
    for (int i = 0; i < 200; i++) {
        lookups[i] = (Lookup){ .loop = loop,
                               .name = names[i % 10],
                               .left = &left };
        ck_assert_int_eq(corCoLoopSpawn(loop, lookupMain, &lookups[i]), 0);
    }
    ck_assert_int_eq(corEvLoopRun(loop), 0);
    ck_assert_uint_eq(left, 0);
    for (int i = 0; i < 200; i++) {
        ck_assert_msg(lookups[i].rc == 0, "%s", lookups[i].why);
    }
    ck_assert_int_eq(dnsQueries(" A n"), 10);
    ck_assert_int_eq(dnsQueries(" AAAA n"), 10);
    corEvLoopDestroy(loop);
    dnsStop();
}
END_TEST

static void
stopSoon(CorEvTimer* timer)
{
    (void)timer;
    corEvLoopStop(corEvLoopCurrent());
}

START_TEST(test_a_stop_ends_lookups_on_the_loop_at_once)
{
    static Lookup lookups[20];
    CorEvLoop* loop = corEvLoopCreate();
    CorEvTimer timer = { 0 };
    unsigned left = 20;

    dnsStart(10000, 5);
    corEvLoopBind(loop);
    for (int i = 0; i < 20; i++) {
        lookups[i] = (Lookup){ .loop = loop,
                               .name = "lost.drop.test",
                               .left = &left };
        ck_assert_int_eq(corCoLoopSpawn(loop, lookupMain, &lookups[i]), 0);
    }
    corEvTimerStart(loop, &timer, 50, stopSoon);
    ck_assert_int_eq(corEvLoopRun(loop), 0);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(lookups[i].rc, -ECANCELED);
        ck_assert_str_eq(lookups[i].why, "name 'lost.drop.test': cancelled");
    }
    corEvLoopDestroy(loop);
    dnsStop();
}
END_TEST

static CorRestCancel coroutineCancel;

static void
cancelSoon(CorEvTimer* timer)
{
    (void)timer;
    corRestCancel(&coroutineCancel);
}

START_TEST(test_the_request_cancel_ends_a_lookup_in_a_coroutine)
{
    static Lookup lookups[2];
    CorEvLoop* loop = corEvLoopCreate();
    CorEvTimer timer = { 0 };
    unsigned left = 2;

    dnsStart(10000, 5);
    corEvLoopBind(loop);
    /* Two lookups of one name: the cancelled one leaves, the other gets
     * the answer the query brings. */
    lookups[0] = (Lookup){ .loop = loop,
                           .name = "slow.delay300.test",
                           .cancel = &coroutineCancel,
                           .left = &left };
    lookups[1] = (Lookup){ .loop = loop,
                           .name = "slow.delay300.test",
                           .left = &left };
    ck_assert_int_eq(corCoLoopSpawn(loop, lookupMain, &lookups[0]), 0);
    ck_assert_int_eq(corCoLoopSpawn(loop, lookupMain, &lookups[1]), 0);
    corEvTimerStart(loop, &timer, 50, cancelSoon);
    ck_assert_int_eq(corEvLoopRun(loop), 0);
    ck_assert_int_eq(lookups[0].rc, -ECANCELED);
    ck_assert_int_eq(lookups[1].rc, 0);
    corEvLoopDestroy(loop);
    dnsStop();
}
END_TEST

#endif

/* ---- Off the loops ------------------------------------------------------- */

static void*
cancelLater(void* arg)
{
    usleep(50000);
    corRestCancel(arg);
    return NULL;
}

START_TEST(test_the_request_cancel_ends_a_polled_lookup)
{
    CorRestCancel cancel = { 0 };
    char why[128];
    pthread_t thread;
    CorAddrs out;

    dnsStart(10000, 5);
    ck_assert_int_eq(corRestCancelBind(&cancel), 0);
    ck_assert_int_eq(pthread_create(&thread, NULL, cancelLater, &cancel), 0);
    ck_assert_int_eq(corResolve("lost.drop.test", 0, &out, why, sizeof(why)),
                     -ECANCELED);
    ck_assert_str_eq(why, "name 'lost.drop.test': cancelled");
    pthread_join(thread, NULL);
    corRestCancelBind(NULL);
    dnsStop();
}
END_TEST

COR_TEST_SUITE(corResolve)
{
    tcase_add_test(tc, test_bad_configurations_are_refused);
    tcase_add_test(tc, test_a_name_is_asked_once_then_cached);
    tcase_add_test(tc, test_an_expired_answer_is_asked_again);
    tcase_add_test(tc, test_errors_name_the_name_and_why);
    tcase_add_test(tc, test_a_truncated_answer_is_asked_again_over_tcp);
    tcase_add_test(tc, test_a_server_that_is_not_there_refuses);
    tcase_add_test(tc, test_the_request_cancel_ends_a_polled_lookup);
#if COR_HAVE_COROUTINES
    tcase_add_test(tc, test_concurrent_lookups_on_a_loop_share_one_query);
    tcase_add_test(tc, test_a_stop_ends_lookups_on_the_loop_at_once);
    tcase_add_test(tc, test_the_request_cancel_ends_a_lookup_in_a_coroutine);
#endif
    tcase_add_test(tc, test_numeric_addresses_are_answered_here);
    tcase_add_test(tc, test_localhost_is_both_loopbacks_ipv6_first);
}
