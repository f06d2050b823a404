/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small demo of the engine, what `make run` starts until the server
 * exists: one loop, coroutines that wait on timers and on a pipe, a call
 * moved to a pool thread, and the stop that cancels what still waits.
 */
#include "corEv.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int pipeFds[2];

static void
sleeper(void* arg)
{
    int ms = (int)(long)arg;
    short revents;
    uint64_t start = corEvNow(corEvLoopCurrent());
    int rc = corRestWaitFd(-1, 0, ms, &revents);

    printf("sleeper %4d ms: woke after %3llu ms (%s)\n", ms,
           (unsigned long long)(corEvNow(corEvLoopCurrent()) - start),
           rc == 0 ? "timeout" : strerror(errno));
}

static void
reader(void* arg)
{
    char buf[64];
    short revents;
    ssize_t n;

    (void)arg;
    if (corRestWaitFd(pipeFds[0], POLLIN, 1000, &revents) == 1) {
        n = read(pipeFds[0], buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        printf("reader: got \"%s\" through the loop\n", buf);
    }
}

static void
slowCall(void* arg)
{
    usleep(50 * 1000);
    *(int*)arg = 42;
}

static void
writer(void* arg)
{
    int answer = 0;

    (void)arg;
    corCoBlocking(slowCall, &answer);
    printf("writer: a 50 ms blocking call ran on a pool thread: %d\n", answer);
    if (write(pipeFds[1], "ping", 4) != 4) {
        perror("write");
    }
}

static void
stopper(CorEvTimer* timer)
{
    (void)timer;
    printf("stopping: the 60 s sleeper is cancelled, not waited out\n");
    corEvLoopStop(corEvLoopCurrent());
}

int
main(void)
{
    CorEvLoop* loop = corEvLoopCreate();
    CorEvTimer stop = { 0 };
    CorCoLoopStats stats;

    if (loop == NULL || pipe(pipeFds) != 0) {
        perror("cor-demo");
        return 1;
    }
    corEvLoopBind(loop);
    corCoLoopSpawn(loop, reader, NULL);
    corCoLoopSpawn(loop, writer, NULL);
    corCoLoopSpawn(loop, sleeper, (void*)100L);
    corCoLoopSpawn(loop, sleeper, (void*)10L);
    corCoLoopSpawn(loop, sleeper, (void*)60000L);
    corEvTimerStart(loop, &stop, 200, stopper);
    corEvLoopRun(loop);
    corCoLoopStatsGet(loop, &stats);
    printf("coroutines: %llu spawned, peak %u, %llu waits cancelled\n",
           (unsigned long long)stats.spawned, stats.peak,
           (unsigned long long)stats.cancelledWaits);
    corEvLoopDestroy(loop);
    corCoBlockingShutdown();
    return 0;
}
