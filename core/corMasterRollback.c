/* SPDX-License-Identifier: Apache-2.0 */
/*
 * When the master takes a reload back. A configuration that checks and
 * starts may still crash its generations (a module that dies on its first
 * requests, a route to a handler that faults): the master would replace
 * each for good, and every replacement takes the requests in flight down
 * with it. So the configuration a reload replaced is kept while the new
 * one is young; when the new one's generations die ROLLBACK_CRASHES times
 * within ROLLBACK_WINDOW_MS of the reload, the master starts the kept one
 * again (corMaster.c) and says why. Past the window the kept one is let
 * go: a crash an hour later is the code's, not the reload's, and the old
 * configuration may no longer match the world.
 */
#include "corCoreInt.h"

#include <stdio.h>

#define ROLLBACK_CRASHES 3
#define ROLLBACK_WINDOW_MS 60000

/* The configuration the last reload replaced (NULL: none kept), when that
 * reload was done, and how often its successor's generations died since. */
static CorConfig* kept;
static uint64_t reloadedMs;
static unsigned crashes;

void
corMasterRollbackKeep(CorConfig* replaced)
{
    corConfigFree(kept);
    kept = replaced;
    reloadedMs = corEvClockMs();
    crashes = 0;
}

CorConfig*
corMasterRollbackDue(char* why, size_t cap)
{
    uint64_t since = corEvClockMs() - reloadedMs;
    CorConfig* back = kept;

    if (kept == NULL) {
        return NULL;
    }
    if (since > ROLLBACK_WINDOW_MS) {
        corConfigFree(kept);
        kept = NULL;
        return NULL;
    }
    if (++crashes < ROLLBACK_CRASHES) {
        return NULL;
    }
    snprintf(why, cap,
             "the configuration the reload %llu ms ago started "
             "lost %u generations (died or could not start) within %u s "
             "of that reload",
             (unsigned long long)since, crashes, ROLLBACK_WINDOW_MS / 1000);
    kept = NULL;
    return back;
}
