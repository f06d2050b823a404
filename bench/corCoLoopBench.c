/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.wait_roundtrip: two coroutines of one loop play ping-pong over two
 * pipes, each waiting in corRestWaitFd for the other's byte; the figure is
 * the time of one wait, wake and reply. Its peer is the same code on two
 * threads, where corRestWaitFd is poll() (blocking mode): what a request
 * that waits costs as a coroutine and as a worker thread.
 */
#include "corBench.h"
#include "corEv.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

typedef struct {
    int in;
    int out;
    long rounds;
    bool serves; /* waits first, then answers */
} Player;

static void
play(void* arg)
{
    Player* p = arg;
    char byte = 'x';
    short revents;

    for (long i = 0; i < p->rounds; i++) {
        if (!p->serves && write(p->out, &byte, 1) != 1) {
            perror("write");
            exit(1);
        }
        if (corRestWaitFd(p->in, POLLIN, 10000, &revents) != 1
            || read(p->in, &byte, 1) != 1) {
            perror("wait");
            exit(1);
        }
        if (p->serves && write(p->out, &byte, 1) != 1) {
            perror("write");
            exit(1);
        }
    }
}

static void
makePlayers(Player* a, Player* b, long rounds)
{
    int ab[2];
    int ba[2];

    if (pipe2(ab, O_NONBLOCK) != 0 || pipe2(ba, O_NONBLOCK) != 0) {
        perror("pipe");
        exit(1);
    }
    *a = (Player){ .in = ba[0], .out = ab[1], .rounds = rounds };
    *b = (Player){
        .in = ab[0], .out = ba[1], .rounds = rounds, .serves = true
    };
}

static void
closePlayers(Player* a, Player* b)
{
    close(a->in);
    close(a->out);
    close(b->in);
    close(b->out);
}

/* ns per one-way wait-wake-reply: a round is two of them. */
static double
coroutineRound(long rounds)
{
    CorEvLoop* loop = corEvLoopCreate();
    Player a;
    Player b;
    CorCoLoopStats stats;
    double start;
    double ns;

    makePlayers(&a, &b, rounds);
    corEvLoopBind(loop);
    start = corBenchNowNs();
    corCoLoopSpawn(loop, play, &b);
    corCoLoopSpawn(loop, play, &a);
    do {
        corEvLoopRunOnce(loop, 1000);
        corCoLoopStatsGet(loop, &stats);
    } while (stats.live > 0);
    ns = (corBenchNowNs() - start) / (double)rounds / 2;
    closePlayers(&a, &b);
    corEvLoopDestroy(loop);
    return ns;
}

static void*
playOnThread(void* arg)
{
    play(arg);
    return NULL;
}

static double
threadRound(long rounds)
{
    Player a;
    Player b;
    pthread_t server;
    double start;
    double ns;

    makePlayers(&a, &b, rounds);
    start = corBenchNowNs();
    pthread_create(&server, NULL, playOnThread, &b);
    play(&a);
    pthread_join(server, NULL);
    ns = (corBenchNowNs() - start) / (double)rounds / 2;
    closePlayers(&a, &b);
    return ns;
}

int
main(int argc, char** argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 20000;
    double co[COR_BENCH_ROUNDS];
    double threads[COR_BENCH_ROUNDS];
    double a;
    double b;

    coroutineRound(rounds / 10);
    threadRound(rounds / 10);
    for (int i = 0; i < COR_BENCH_ROUNDS; i++) {
        co[i] = coroutineRound(rounds);
        threads[i] = threadRound(rounds);
    }
    a = corBenchMedian(co, COR_BENCH_ROUNDS);
    b = corBenchMedian(threads, COR_BENCH_ROUNDS);
    corBenchPrint("loop.wait_roundtrip", a, "ns");
    corBenchPrint("peer.threads_poll.wait_roundtrip", b, "ns");
    corBenchPrint("loop.wait_roundtrip.ratio_to_threads", a / b, "x");
    return 0;
}
