/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection kit (core/corKit.h): the buffer's growth and consume
 * offset, the list's insert, remove and walk, and a connection over a
 * socket pair on a real loop: frames taken as they come, output larger
 * than the socket takes written on EPOLLOUT in order (EAGAIN and partial
 * writes), a read paused past the high-water mark and resumed when the
 * peer reads, a file part sent after the bytes and closed, the peer's
 * end, a deadline firing, and a set's count; and
 * the same connection off the loops, driven by poll(). No
 * timing is asserted: the loop turns until a condition holds, with a
 * generous bound.
 */
#include "corTest.h"

#include "corKit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- Buffers and lists --------------------------------------------------- */

START_TEST(test_a_buffer_grows_consumes_and_compacts)
{
    CorBuf b = { 0 };

    ck_assert_int_eq(corBufAppend(&b, "hello, ", 7), 0);
    ck_assert_uint_eq(b.cap, 256);
    ck_assert_int_eq(corBufReserve(&b, 1000), 0);
    ck_assert_uint_eq(b.cap, 1024); /* doubled until 7 + 1000 fit */
    ck_assert_int_eq(corBufAppend(&b, "world", 5), 0);
    corBufConsume(&b, 7);
    ck_assert_uint_eq(corBufPending(&b), 5);
    ck_assert_int_eq(memcmp(corBufHead(&b), "world", 5), 0);
    corBufCompact(&b);
    ck_assert_uint_eq(b.off, 0);
    ck_assert_int_eq(memcmp(b.data, "world", 5), 0);
    corBufConsume(&b, 5);
    ck_assert_uint_eq(b.len, 0); /* all taken: empty again */
    ck_assert_int_eq(corBufGrowTo(&b, 5000), 0);
    ck_assert_uint_eq(b.cap, 5000); /* exactly, no doubling */
    ck_assert_int_eq(corBufReserve(&b, SIZE_MAX), -ENOMEM);
    corBufFree(&b);
    ck_assert_ptr_null(b.data);
}
END_TEST

typedef struct {
    int value;
    CorList link;
} Item;

START_TEST(test_a_list_inserts_removes_and_walks)
{
    CorList head = { 0 }; /* zeroed: empty, no init */
    Item items[3] = { { .value = 1 }, { .value = 2 }, { .value = 3 } };
    CorList* node;
    CorList* next;
    int sum = 0;

    ck_assert(corListEmpty(&head));
    corListForEach(node, next, &head)
    {
        ck_abort_msg("an empty list has no node");
    }
    for (int i = 0; i < 3; i++) {
        corListInsert(&head, &items[i].link);
    }
    ck_assert_int_eq(corContainerOf(corListFirst(&head), Item, link)->value, 3);
    corListForEach(node, next, &head)
    {
        Item* it = corContainerOf(node, Item, link);

        sum += it->value;
        if (it->value == 2) {
            corListRemove(node); /* the walk goes on */
        }
    }
    ck_assert_int_eq(sum, 6);
    corListRemove(&items[1].link); /* again: nothing */
    sum = 0;
    corListForEach(node, next, &head)
    {
        sum += corContainerOf(node, Item, link)->value;
    }
    ck_assert_int_eq(sum, 4);
    corListRemove(&items[0].link);
    corListRemove(&items[2].link);
    ck_assert(corListEmpty(&head));
}
END_TEST

/* ---- A connection over a socket pair ------------------------------------- */

/* The owner: every 4-byte frame that came whole is counted and its
 * bytes summed. */
typedef struct {
    CorKitConn k;
    CorTransport t;
    unsigned frames;
    unsigned readies;
    bool ended;
    bool expired;
    int failed;
} Owner;

static int
ownerTake(CorKitConn* k)
{
    Owner* o = corContainerOf(k, Owner, k);

    while (corBufPending(&k->in) >= 4) {
        o->frames++;
        corBufConsume(&k->in, 4);
    }
    return 0;
}

static void
ownerReady(CorKitConn* k)
{
    Owner* o = corContainerOf(k, Owner, k);

    o->readies++;
    if (corKitConnRead(k) == 0) {
        corKitConnFlush(k);
    }
}

static int
ownerEnd(CorKitConn* k)
{
    corContainerOf(k, Owner, k)->ended = true;
    return 0;
}

static void
ownerFail(CorKitConn* k, int rc, const char* why)
{
    (void)why;
    corContainerOf(k, Owner, k)->failed = rc;
}

static void
ownerExpired(CorKitConn* k)
{
    corContainerOf(k, Owner, k)->expired = true;
}

static const CorKitOps ownerOps = {
    .ready = ownerReady,
    .take = ownerTake,
    .end = ownerEnd,
    .fail = ownerFail,
    .expired = ownerExpired,
};

static CorEvLoop* loop;
static int peerFd;
static Owner owner;
static CorKitSet set;

static void
setUp(void)
{
    int sv[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv),
                     0);
    loop = corTestLoopCreate();
    ck_assert_ptr_nonnull(loop);
    corEvLoopBind(loop);
    peerFd = sv[1];
    memset(&set, 0, sizeof(set));
    corKitConnInit(&owner.k, loop, &ownerOps);
    owner.k.readRoom = 64;
    corTransportPlain(&owner.t, sv[0]);
    ck_assert_int_eq(corKitConnStart(&owner.k, &owner.t, &set), 0);
}

static void
tearDown(void)
{
    corKitConnStop(&owner.k);
    corKitConnFree(&owner.k);
    close(owner.t.fd);
    close(peerFd);
    corEvLoopDestroy(loop);
    memset(&owner, 0, sizeof(owner));
}

/* Turn the loop until *flag is set; a generous bound, not a timing. */
#define RUN_UNTIL(cond)                                                        \
    for (int turns = 0; !(cond); turns++) {                                    \
        ck_assert_int_lt(turns, 2000);                                         \
        corEvLoopRunOnce(loop, 10);                                            \
    }

START_TEST(test_frames_are_taken_as_they_come_whole)
{
    ck_assert_int_eq(write(peerFd, "abcdef", 6), 6);
    RUN_UNTIL(owner.frames == 1);
    ck_assert_uint_eq(corBufPending(&owner.k.in), 2);
    ck_assert_int_eq(write(peerFd, "gh", 2), 2);
    RUN_UNTIL(owner.frames == 2);
    ck_assert_uint_eq(corBufPending(&owner.k.in), 0);
    ck_assert_uint_eq(atomic_load(&set.count), 1);
}
END_TEST

/* Bytes the peer reads until it has n; each i-th byte must be i % 251. */
static size_t
peerDrain(size_t have)
{
    uint8_t buf[65536];
    ssize_t n;

    while ((n = read(peerFd, buf, sizeof(buf))) > 0) {
        ssize_t i = 0;

        while (i < n && buf[i] == (have + (size_t)i) % 251) {
            i++;
        }
        ck_assert_int_eq(i, n); /* every byte in its place */
        have += (size_t)n;
    }
    return have;
}

START_TEST(test_output_past_the_socket_goes_on_epollout_in_order)
{
    size_t total = 8u << 20;
    size_t have = 0;

    ck_assert_int_eq(corBufReserve(&owner.k.out, total), 0);
    for (size_t i = 0; i < total; i++) {
        owner.k.out.data[i] = (uint8_t)(i % 251);
    }
    owner.k.out.len = total;
    ck_assert_int_eq(corKitConnFlush(&owner.k), 0);
    ck_assert_uint_gt(corBufPending(&owner.k.out), 0); /* EAGAIN */
    ck_assert_uint_ne(owner.k.outStalledMs, 0);
    for (int turns = 0; have < total; turns++) {
        ck_assert_int_lt(turns, 20000); /* a bound, not a timing */
        have = peerDrain(have);
        corEvLoopRunOnce(loop, 10);
    }
    ck_assert_uint_eq(have, total);
    ck_assert_uint_eq(corBufPending(&owner.k.out), 0);
    ck_assert_uint_eq(owner.k.outStalledMs, 0);
    ck_assert_int_eq(owner.failed, 0);
}
END_TEST

START_TEST(test_a_read_pauses_past_the_mark_until_drained)
{
    size_t total = 8u << 20;
    size_t have = 0;

    owner.k.highWater = 4096;
    ck_assert_int_eq(corBufReserve(&owner.k.out, total), 0);
    for (size_t i = 0; i < total; i++) {
        owner.k.out.data[i] = (uint8_t)(i % 251);
    }
    owner.k.out.len = total;
    ck_assert_int_eq(write(peerFd, "abcd", 4), 4);
    RUN_UNTIL(owner.k.readPaused);
    ck_assert_uint_eq(owner.frames, 0); /* not read past the mark */
    for (int turns = 0; have < total; turns++) {
        ck_assert_int_lt(turns, 20000); /* a bound, not a timing */
        have = peerDrain(have);
        corEvLoopRunOnce(loop, 10);
    }
    RUN_UNTIL(owner.frames == 1); /* read on, no new edge */
    ck_assert(!owner.k.readPaused);
}
END_TEST

/* A file of n bytes following the pattern from byte `from`, open for
 * reading (its name unlinked). */
static int
patternFile(size_t from, size_t n)
{
    char name[] = "/tmp/corKitTestXXXXXX";
    int fd = mkstemp(name);
    uint8_t* bytes = malloc(n);

    ck_assert_int_ge(fd, 0);
    ck_assert_ptr_nonnull(bytes);
    unlink(name);
    for (size_t i = 0; i < n; i++) {
        bytes[i] = (uint8_t)((from + i) % 251);
    }
    ck_assert_int_eq(write(fd, bytes, n), (ssize_t)n);
    free(bytes);
    return fd;
}

START_TEST(test_a_file_part_follows_the_bytes_and_is_closed)
{
    size_t head = 1000;
    size_t total = head + (4u << 20);
    size_t have = 0;
    int fd = patternFile(head, total - head);

    owner.k.highWater = 4096;
    ck_assert_int_eq(corBufReserve(&owner.k.out, head), 0);
    for (size_t i = 0; i < head; i++) {
        owner.k.out.data[i] = (uint8_t)(i % 251);
    }
    owner.k.out.len = head;
    corKitConnSendFile(&owner.k, fd, 0, total - head);
    ck_assert_uint_eq(corKitConnOutPending(&owner.k), total);
    ck_assert(corKitConnOutFull(&owner.k)); /* a file holds the rest */
    ck_assert_int_eq(corKitConnFlush(&owner.k), 0);
    for (int turns = 0; have < total; turns++) {
        ck_assert_int_lt(turns, 20000); /* a bound, not a timing */
        have = peerDrain(have);
        corEvLoopRunOnce(loop, 10);
    }
    ck_assert_uint_eq(have, total);
    ck_assert_uint_eq(corKitConnOutPending(&owner.k), 0);
    ck_assert(!corKitConnOutFull(&owner.k));
    ck_assert_uint_eq(owner.k.sentBytes, total);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1); /* the kit closed it */
    ck_assert_int_eq(owner.failed, 0);
}
END_TEST

START_TEST(test_the_peers_end_and_a_deadline_reach_the_owner)
{
    corKitConnDeadline(&owner.k, corEvNow(loop), 1);
    RUN_UNTIL(owner.expired);
    shutdown(peerFd, SHUT_WR);
    RUN_UNTIL(owner.ended);
    ck_assert_int_eq(owner.failed, 0);
}
END_TEST

START_TEST(test_a_stopped_connection_leaves_its_set)
{
    Owner other = { 0 };
    int sv[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv),
                     0);
    corKitConnInit(&other.k, loop, &ownerOps);
    corTransportPlain(&other.t, sv[0]);
    ck_assert_int_eq(corKitConnStart(&other.k, &other.t, &set), 0);
    ck_assert_uint_eq(atomic_load(&set.count), 2);
    corKitConnStop(&other.k);
    corKitConnStop(&other.k); /* twice: nothing more */
    ck_assert_uint_eq(atomic_load(&set.count), 1);
    ck_assert_ptr_eq(corListFirst(&set.conns), &owner.k.link);
    corKitConnFree(&other.k);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* Off the loops: no loop, no ops, waits bounded by their timeouts. */
START_TEST(test_off_the_loops_it_reads_and_writes_with_waits)
{
    CorKitConn k;
    CorTransport t;
    char buf[8];
    int sv[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv),
                     0);
    corKitConnInit(&k, NULL, NULL);
    corTransportPlain(&t, sv[0]);
    corKitConnAttach(&k, &t);
    ck_assert_int_eq(corBufReserve(&k.in, 64), 0);
    ck_assert_int_eq(corKitConnReadWait(&k, 0), -EAGAIN);
    ck_assert_int_eq(corKitConnReadWait(&k, 20), -ETIMEDOUT);
    ck_assert_int_eq(write(sv[1], "abcd", 4), 4);
    ck_assert_int_eq(corKitConnReadWait(&k, -1), 4);
    ck_assert_int_eq(memcmp(corBufHead(&k.in), "abcd", 4), 0);
    ck_assert_int_eq(corBufAppend(&k.out, "hello", 5), 0);
    ck_assert_int_eq(corKitConnFlushWait(&k, -1), 0);
    ck_assert_uint_eq(corBufPending(&k.out), 0);
    ck_assert_uint_eq(k.sentBytes, 5);
    ck_assert_int_eq(read(sv[1], buf, sizeof(buf)), 5);
    shutdown(sv[1], SHUT_WR);
    ck_assert_int_eq(corKitConnReadWait(&k, -1), 0); /* its end */
    corKitConnFree(&k);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* A kept connection's CorConn: the test makes none (corConn.c is not
 * linked), so a close is of NULL. */
void
corConnClose(CorConn* c)
{
    ck_assert_ptr_null(c);
}

CorTransport*
corConnTransport(CorConn* c)
{
    (void)c;
    return NULL;
}

/* A thread's kept connections are found by their key, and one freed
 * leaves the list (no connection made: conn stays NULL). */
START_TEST(test_kept_connections_are_found_by_their_key)
{
    CorList kept;
    CorKitKept a;
    CorKitKept b;

    corListInit(&kept);
    ck_assert_int_eq(corKitKeptAdd(&kept, &a, "cor://h:1"), 0);
    ck_assert_int_eq(corKitKeptAdd(&kept, &b, "cors://h:1"), 0);
    ck_assert_ptr_eq(corKitKeptFind(&kept, "cor://h:1"), &a);
    ck_assert_ptr_eq(corKitKeptFind(&kept, "cors://h:1"), &b);
    ck_assert_ptr_null(corKitKeptFind(&kept, "cor://h:2"));
    ck_assert_ptr_null(a.conn);
    corKitKeptClose(&a); /* not connected: nothing to close */
    corKitKeptFree(&a);
    ck_assert_ptr_null(corKitKeptFind(&kept, "cor://h:1"));
    ck_assert_ptr_eq(corKitKeptFind(&kept, "cors://h:1"), &b);
    corKitKeptFree(&b);
    ck_assert(corListEmpty(&kept));
}
END_TEST

COR_TEST_SUITE(corKit)
{
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_a_buffer_grows_consumes_and_compacts);
    tcase_add_test(tc, test_a_list_inserts_removes_and_walks);
    tcase_add_test(tc, test_frames_are_taken_as_they_come_whole);
    tcase_add_test(tc, test_output_past_the_socket_goes_on_epollout_in_order);
    tcase_add_test(tc, test_a_read_pauses_past_the_mark_until_drained);
    tcase_add_test(tc, test_a_file_part_follows_the_bytes_and_is_closed);
    tcase_add_test(tc, test_the_peers_end_and_a_deadline_reach_the_owner);
    tcase_add_test(tc, test_a_stopped_connection_leaves_its_set);
    tcase_add_test(tc, test_off_the_loops_it_reads_and_writes_with_waits);
    tcase_add_test(tc, test_kept_connections_are_found_by_their_key);
}
