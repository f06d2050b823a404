/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A cor:// upstream's answer streams through forward (issue 39 item 1):
 * the first bytes reach the client while the upstream's handler still
 * holds the rest back (it waits for a file the test makes only once it
 * saw them: judged by events, not by sleeps), a large body passes
 * through in bounded memory on both servers, and an upstream killed
 * mid-body ends the client's answer broken (no last chunk), never as
 * complete. Before streaming, the front gathered the whole answer first:
 * the first test timed out waiting for bytes the front held.
 */
#include "corTest.h"
#include "corServer.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static CorServer up;
static CorServer front;

/* Up: the gated handler, served over cor:// on {PORT2}. */
static const char upConfig[] =
    "runtime: { loops: 1, coroutines: { enabled: {COROUTINES} } }\n"
    "listen:\n"
    "  - { protocol: http, address: 127.0.0.1:{PORT} }\n"
    "  - { protocol: cor, address: 127.0.0.1:{PORT2} }\n"
    "modules: [ { load: http }, { load: cor },\n"
    "           { load: {MODULES}/testkit.so } ]\n"
    "routes:\n"
    "  - { match: \"GET /gated\", handler: gated }\n"
    "log: { pid_file: {DIR}/cor.pid }\n";

static void
setUp(void)
{
    char yaml[2048];

    ck_assert_int_eq(corServerStart(&up, upConfig), 0);
    snprintf(yaml, sizeof(yaml),
             "runtime: { loops: 1, coroutines: { enabled: {COROUTINES} } }\n"
             "listen: [ { protocol: http, address: 127.0.0.1:{PORT} } ]\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: cor }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "  - load: forward\n"
             "    upstreams:\n"
             "      - { name: up, servers: [ \"cor://127.0.0.1:%d\" ],\n"
             "          read_timeout: 30s }\n"
             "routes:\n"
             "  - { match: \"GET /client\", handler: client }\n"
             "  - { match: \"/*\", handler: up }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             up.port2);
    ck_assert_int_eq(corServerStart(&front, yaml), 0);
}

static void
tearDown(void)
{
    corServerStop(&front);
    corServerStop(&up);
}

/* Read from fd into buf (at *lenP, cap bytes) until text is in it, the
 * peer closes, or timeoutMs passes. Returns whether text came. */
static bool
readUntil(int fd, char* buf, size_t* lenP, size_t cap, const char* text,
          int timeoutMs)
{
    long end = corNowMs() + timeoutMs;

    while (memmem(buf, *lenP, text, strlen(text)) == NULL) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        long left = end - corNowMs();
        ssize_t n;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0 || *lenP >= cap) {
            return false;
        }
        n = read(fd, buf + *lenP, cap - *lenP);
        if (n <= 0) {
            return false;
        }
        *lenP += (size_t)n;
    }
    return true;
}

/* Ask the front for a gated answer on a connection of its own. */
static int
gatedAsk(const char* query)
{
    char request[512];
    int fd = corConnect(front.port);

    ck_assert_int_ge(fd, 0);
    snprintf(request, sizeof(request),
             "GET /gated?%s HTTP/1.1\r\nHost: t\r\n\r\n", query);
    ck_assert_int_eq(corSendAll(fd, request, strlen(request)), 0);
    return fd;
}

START_TEST(test_first_bytes_before_the_upstream_finished)
{
    static char buf[1 << 16];
    char query[300];
    char gate[200];
    char a[101] = { 0 };
    char c[101] = { 0 };
    size_t len = 0;
    FILE* f;
    int fd;

    memset(a, 'a', 100);
    memset(c, 'c', 100);
    snprintf(gate, sizeof(gate), "%s/gate", front.dir);
    snprintf(query, sizeof(query), "pieces=3&bytes=1000&gate=%s", gate);
    fd = gatedAsk(query);
    /* The upstream ends only once the gate exists: these bytes came
     * before it finished. */
    ck_assert_msg(readUntil(fd, buf, &len, sizeof(buf), a, 20000),
                  "the first piece did not come before the upstream's end: "
                  "%.*s",
                  (int)len, buf);
    ck_assert_msg(access(gate, F_OK) != 0, "the gate was open");
    COR_CHECK_HAS(buf, "200 OK");
    f = fopen(gate, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_msg(readUntil(fd, buf, &len, sizeof(buf), "\r\n0\r\n\r\n", 20000),
                  "no end of the chunked body: %.*s", (int)len, buf);
    ck_assert_ptr_nonnull(memmem(buf, len, c, 100));
    close(fd);
}
END_TEST

/* A generation's peak memory (VmHWM, KiB) grew by less than kb, what the
 * test says beside it. A sanitizer's quarantine keeps what was freed: its
 * memory says nothing of the server's, and is not judged. */
static void
peakGrewLess(const char* what, long before, long after, long kb)
{
    const char* sanitized = getenv("COR_TEST_SANITIZED");

    fprintf(stderr, "%s: peak +%ld KiB\n", what, after - before);
    if (sanitized == NULL || strcmp(sanitized, "1") != 0) {
        ck_assert_msg(after - before < kb, "%s: the peak grew %ld KiB", what,
                      after - before);
    }
}

START_TEST(test_a_large_body_in_bounded_memory)
{
    char out[256];
    long frontBefore;
    long upBefore;
    long frontAfter;
    long upAfter;
    pid_t frontGen = corServerGeneration(&front);
    pid_t upGen = corServerGeneration(&up);

    ck_assert_int_gt(frontGen, 0);
    ck_assert_int_gt(upGen, 0);
    frontBefore = corProcStatusKb(frontGen, "VmHWM");
    upBefore = corProcStatusKb(upGen, "VmHWM");
    /* 48 MiB, in 64 KiB pieces: gathered whole, it would take 48 MiB on
     * each side (and a frame near max_frame). */
    ck_assert_int_eq(corCurl(front.port, "-o /dev/null -w '%{size_download}'",
                             "/gated?pieces=768&bytes=65536", out, sizeof(out)),
                     0);
    ck_assert_str_eq(out, "50331648");
    frontAfter = corProcStatusKb(frontGen, "VmHWM");
    upAfter = corProcStatusKb(upGen, "VmHWM");
    peakGrewLess("48 MiB through, the front", frontBefore, frontAfter,
                 16 * 1024);
    peakGrewLess("48 MiB through, the upstream", upBefore, upAfter, 16 * 1024);
}
END_TEST

/* A client that reads slowly holds the upstream back, through the
 * front: the front's cor:// call stops reading at what it may hold, and
 * the upstream's writer waits for its connection to drain. 16 MiB at 4
 * MiB/s: gathered or piled up anywhere, a peak would grow by most of it. */
START_TEST(test_a_slow_reader_holds_the_upstream_back)
{
    char out[256];
    pid_t frontGen = corServerGeneration(&front);
    long before = corProcStatusKb(frontGen, "VmHWM");
    long after;

    ck_assert_int_eq(corCurl(front.port,
                             "--limit-rate 4M -o /dev/null "
                             "-w '%{size_download}'",
                             "/gated?pieces=256&bytes=65536", out, sizeof(out)),
                     0);
    ck_assert_str_eq(out, "16777216");
    after = corProcStatusKb(frontGen, "VmHWM");
    peakGrewLess("16 MiB to a slow reader, the front", before, after, 8 * 1024);
}
END_TEST

/* The answer, chunked, must not end with its last chunk: the client
 * sees it broken. */
static void
brokenAnswer(int fd, char* buf, size_t len, size_t cap)
{
    ck_assert_msg(!readUntil(fd, buf, &len, cap, "\r\n0\r\n\r\n", 20000),
                  "a broken answer ended as complete: %.*s", (int)len, buf);
    ck_assert_msg(corPeerClosed(fd, 5000), "the connection stayed open");
}

START_TEST(test_an_upstream_dying_mid_body_breaks_the_answer)
{
    static char buf[1 << 16];
    char query[300];
    char a[101] = { 0 };
    size_t len = 0;
    pid_t generation = corServerGeneration(&up);
    int fd;

    memset(a, 'a', 100);
    snprintf(query, sizeof(query), "pieces=3&bytes=1000&gate=%s/never",
             front.dir);
    fd = gatedAsk(query);
    ck_assert_msg(readUntil(fd, buf, &len, sizeof(buf), a, 20000),
                  "no first piece: %.*s", (int)len, buf);
    kill(up.pid, SIGKILL);
    kill(generation, SIGKILL);
    waitpid(up.pid, NULL, 0);
    up.pid = 0;
    brokenAnswer(fd, buf, len, sizeof(buf));
    close(fd);
}
END_TEST

/* A fetch (corClientFetch: the whole answer) of a streamed answer, over
 * the same call: its pieces gathered, its limit held, its cut a failure.
 * The testkit's client handler says what it got. */
START_TEST(test_a_fetch_gathers_a_streamed_answer)
{
    char path[256];
    char out[512];

    snprintf(path, sizeof(path),
             "/client?url=cor://127.0.0.1:%d/gated%%3Fpieces%%3D3%%26"
             "bytes%%3D5",
             up.port2);
    ck_assert_int_eq(corCurl(front.port, "", path, out, sizeof(out)), 0);
    COR_CHECK_HAS(out, "status=200 ");
    COR_CHECK_HAS(out, "len=15 body=aaaaabbbbbccccc");
    strcat(path, "%26cut%3D1");
    ck_assert_int_eq(corCurl(front.port, "", path, out, sizeof(out)), 0);
    COR_CHECK_HAS(out, "cut midway");
    snprintf(path, sizeof(path),
             "/client?max=10&url=cor://127.0.0.1:%d/gated%%3Fpieces%%3D3%%26"
             "bytes%%3D5",
             up.port2);
    ck_assert_int_eq(corCurl(front.port, "", path, out, sizeof(out)), 0);
    COR_CHECK_HAS(out, "over the limit");
}
END_TEST

/* Cut upstream after its pieces: large ones, and small ones whose head,
 * pieces and cut may all come before the front's first read. */
START_TEST(test_an_answer_cut_upstream_breaks_the_answer)
{
    static char buf[1 << 16];

    for (int i = 0; i < 6; i++) {
        size_t bytes = i % 2 == 0 ? 1000 : 5;
        char query[64];
        char a[1001] = { 0 };
        size_t len = 0;
        int fd;

        snprintf(query, sizeof(query), "pieces=3&bytes=%zu&cut=1", bytes);
        fd = gatedAsk(query);
        memset(a, 'a', bytes);
        ck_assert_msg(readUntil(fd, buf, &len, sizeof(buf), a, 20000),
                      "no first piece: %.*s", (int)len, buf);
        brokenAnswer(fd, buf, len, sizeof(buf));
        close(fd);
    }
}
END_TEST

COR_TEST_SUITE(corCorStream)
{
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_first_bytes_before_the_upstream_finished);
    tcase_add_test(tc, test_a_large_body_in_bounded_memory);
    tcase_add_test(tc, test_a_slow_reader_holds_the_upstream_back);
    tcase_add_test(tc, test_an_upstream_dying_mid_body_breaks_the_answer);
    tcase_add_test(tc, test_an_answer_cut_upstream_breaks_the_answer);
    tcase_add_test(tc, test_a_fetch_gathers_a_streamed_answer);
}
