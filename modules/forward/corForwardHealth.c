/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Active health checks of a group's servers:
 *
 *     health: { path: /health, interval: 2s, timeout: 1s, fails: 2,
 *               passes: 1, status: 2xx }
 *
 * Each server has a prober of its own, a background task of the
 * generation (corTaskSpawn from loop 0's loopInit: a coroutine of that
 * loop, or a thread in blocking mode), so the checks never ride on a
 * request and a slow server does not delay the checks of the others. It
 * GETs the path every interval through the same client as the requests
 * (a pooled connection when one is idle); `fails` failures in a row (a
 * status out of `status`, no answer within `timeout`) take the server
 * out, `passes` passes in a row bring it back, each change logged. The
 * balancer reads only the server's one flag, atomically. A reload ends
 * the probers with their generation (their waits are cancelled) and the
 * next one starts its own, every server up until its checks say not.
 */
#include "corForwardInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a check reads of an answer's body at most. */
#define FORWARD_HEALTH_BODY_MAX (64 * 1024)

/* One check of s: true when it passed; why says what failed. May yield. */
static bool
probe(ForwardServer* s, char* why, size_t whyLen, bool* cancelledP)
{
    const ForwardHealth* h = &s->group->health;
    char url[1024];
    CorClientRequest q = {
        .url = url,
        .connectTimeoutMs = h->timeoutMs,
        .firstByteTimeoutMs = h->timeoutMs,
        .totalTimeoutMs = h->timeoutMs,
        .maxBodyBytes = FORWARD_HEALTH_BODY_MAX,
        .http2 = s->group->http2,
    };
    CorClientResponse res;
    bool passed = false;
    int rc;

    snprintf(url, sizeof(url), "%s%s", s->url, h->path);
    memset(&res, 0, sizeof(res));
    rc = corClientFetch(&q, &res);
    *cancelledP = rc == -ECANCELED;
    if (rc < 0) {
        snprintf(why, whyLen, "%s", res.error);
    } else if (res.status < h->statusMin || res.status > h->statusMax) {
        snprintf(why, whyLen, "status %d", res.status);
    } else {
        passed = true;
    }
    corClientResponseFree(&res);
    return passed;
}

/* Count a check's outcome, and take s out or bring it back when the run
 * is long enough. */
static void
outcome(ForwardServer* s, bool passed, const char* why)
{
    const ForwardHealth* h = &s->group->health;
    bool down = atomic_load(&s->unhealthy);

    if (passed) {
        s->failRun = 0;
        s->passRun++;
        if (down && s->passRun >= h->passes) {
            atomic_store(&s->unhealthy, false);
            corLog(COR_LOG_WARN,
                   "forward %s: server %s is up (%u checks "
                   "of %s passed)",
                   s->group->name, s->url, s->passRun, h->path);
        }
        return;
    }
    s->passRun = 0;
    s->failRun++;
    if (!down && s->failRun >= h->fails) {
        atomic_store(&s->unhealthy, true);
        corLog(COR_LOG_WARN,
               "forward %s: server %s is down (%u checks of "
               "%s failed, the last: %s)",
               s->group->name, s->url, s->failRun, h->path, why);
    }
}

/* A server's prober: a check, then the interval, until the generation
 * ends (a wait cancelled). */
static void
proberRun(void* arg)
{
    ForwardServer* s = arg;
    char why[256];
    bool cancelled;

    do {
        bool passed = probe(s, why, sizeof(why), &cancelled);

        if (cancelled) {
            return;
        }
        outcome(s, passed, why);
    } while (corTaskScheduleAfter(s->group->health.intervalMs) == 0);
}

int
corForwardHealthStart(ForwardGroup* g)
{
    if (g->health.path == NULL) {
        return 0;
    }
    for (unsigned i = 0; i < g->serverCount; i++) {
        int rc = corTaskSpawn(proberRun, &g->servers[i], "forward health");

        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- Configuration ------------------------------------------------------- */

/* status: "2xx" (a class; the default), or one status. */
static int
statusRead(CorModule* m, const CorConf* health, ForwardHealth* h)
{
    const char* status = corConfString(health, "status", "2xx",
                                       corModuleErrors(m));
    char* end = NULL;
    long n = strtol(status, &end, 10);

    if (strlen(status) == 3 && status[0] >= '1' && status[0] <= '5'
        && strcmp(status + 1, "xx") == 0) {
        h->statusMin = (status[0] - '0') * 100;
        h->statusMax = h->statusMin + 99;
        return 0;
    }
    if (end != status && *end == '\0' && n >= 100 && n <= 599) {
        h->statusMin = h->statusMax = (int)n;
        return 0;
    }
    corModuleError(m, corConfGet(health, "status"),
                   "health: status: "
                   "expected a class (2xx) or a status (200), got '%s'",
                   status);
    return -1;
}

int
corForwardHealthRead(CorModule* m, const CorConf* entry, ForwardGroup* g)
{
    static const char* const keys[] = { "path",  "interval", "timeout",
                                        "fails", "passes",   "status",
                                        NULL };
    CorConfErrors* e = corModuleErrors(m);
    const CorConf* health = corConfMap(entry, "health", e);
    ForwardHealth* h = &g->health;
    unsigned before = e->count;
    const char* path;
    int rc;

    if (health == NULL) {
        return corConfGet(entry, "health") != NULL ? -1 : 0;
    }
    path = corConfString(health, "path", NULL, e);
    h->intervalMs = (int)corConfDurationMs(health, "interval", 2000, 10,
                                           3600000, e);
    h->timeoutMs = (int)corConfDurationMs(health, "timeout", 1000, 1, 3600000,
                                          e);
    h->fails = (unsigned)corConfInt(health, "fails", 2, 1, 1000, e);
    h->passes = (unsigned)corConfInt(health, "passes", 1, 1, 1000, e);
    rc = statusRead(m, health, h);
    corConfUnknownKeys(health, "health", keys, e);
    if (path == NULL || path[0] != '/' || strpbrk(path, " \t\r\n#") != NULL) {
        corModuleError(m,
                       corConfGet(health, "path") != NULL
                           ? corConfGet(health, "path")
                           : health,
                       "health: path: expected a path from /, got '%s'",
                       path != NULL ? path : "(none)");
        return -1;
    }
    h->path = strdup(path);
    if (h->path == NULL) {
        return -1;
    }
    return rc < 0 || e->count != before ? -1 : 0;
}
