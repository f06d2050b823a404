/* SPDX-License-Identifier: Apache-2.0 */
/*
 * co.parked_rss: the resident memory each parked coroutine costs, with
 * 10 000 of them parked on a loop, each having used a little stack (a
 * 1 KiB buffer and a few frames), as a request waiting on a socket does.
 * Stacks are 256 KiB of address space each; only touched pages count.
 */
#include "corBench.h"
#include "corEv.h"

#include <string.h>
#include <unistd.h>

enum { PARKED = 10000 };

static CorCoPark handles[PARKED];

static long
residentBytes(void)
{
    long pages = 0;
    long resident = 0;
    FILE* f = fopen("/proc/self/statm", "r");

    if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) {
        perror("statm");
        exit(1);
    }
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static void
parkAfterSomeWork(void* arg)
{
    volatile char buffer[1024];
    long index = (long)arg;

    memset((char*)buffer, (int)index, sizeof(buffer));
    corCoLoopPark(&handles[index], -1);
}

int
main(void)
{
    CorEvLoop* loop = corEvLoopCreate();
    long before;
    long after;

    corEvLoopBind(loop);
    corCoLoopCapSet(loop, PARKED);
    before = residentBytes();
    for (long i = 0; i < PARKED; i++) {
        if (corCoLoopSpawn(loop, parkAfterSomeWork, (void*)i) != 0) {
            perror("spawn");
            return 1;
        }
    }
    after = residentBytes();
    corBenchPrint("co.parked_rss", (double)(after - before) / PARKED, "bytes");
    corBenchPrint("co.parked_rss.stack_size", (double)corCoStackSize(),
                  "bytes");
    for (long i = 0; i < PARKED; i++) {
        corCoLoopWake(handles[i]);
    }
    while (corEvLoopRunOnce(loop, 0) == 0) {
        CorCoLoopStats stats;

        corCoLoopStatsGet(loop, &stats);
        if (stats.live == 0) {
            break;
        }
    }
    corEvLoopDestroy(loop);
    return 0;
}
