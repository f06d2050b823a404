/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guards: the access phase. Modules register them by name (corGuardAdd,
 * from init); a route's `guard:` list runs them in order on the loop,
 * before its handler. A guard passes, refuses (a status), or answers
 * later (COR_GUARD_LATER) when its work must not hold the loop: the
 * chain then waits in the request's arena and goes on at
 * corGuardResume, on the request's loop.
 */
#include "corCoreInt.h"

#include <stdlib.h>
#include <string.h>

static CorGuardEntry* guards;
static unsigned guardCount;

/* Where a chain stands, kept in the request's arena across a late
 * guard. */
struct CorGuardWait {
    CorRequest* r;
    CorRouteMatch match;
    const CorGuardNext* then; /* where the chain goes on */
    unsigned next;            /* the guard that answers next */
};

int
corGuardAdd(CorModule* m, const char* name, CorGuardFn fn, void* arg)
{
    CorGuardEntry* grown;

    if (name == NULL || name[0] == '\0' || fn == NULL) {
        corModuleError(m, NULL, "a guard needs a name and a function");
        return -1;
    }
    if (corGuardFind(name) != NULL) {
        corModuleError(m, NULL, "guard '%s' is already registered", name);
        return -1;
    }
    grown = realloc(guards, (guardCount + 1) * sizeof(*guards));
    if (grown == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    guards = grown;
    guards[guardCount] = (CorGuardEntry){
        .name = strdup(name), .fn = fn, .arg = arg, .module = m
    };
    if (guards[guardCount].name == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    guardCount++;
    return 0;
}

const CorGuardEntry*
corGuardFind(const char* name)
{
    for (unsigned i = 0; i < guardCount; i++) {
        if (strcmp(guards[i].name, name) == 0) {
            return &guards[i];
        }
    }
    return NULL;
}

const char**
corGuardNames(void)
{
    const char** names = malloc((guardCount + 1) * sizeof(*names));

    for (unsigned i = 0; names != NULL && i < guardCount; i++) {
        names[i] = guards[i].name;
    }
    if (names != NULL) {
        names[guardCount] = NULL;
    }
    return names;
}

/* Run w's guards from w->next on: true when every one passed. A late one
 * keeps w (in r's arena) and resumes it. */
static bool
chainRun(CorGuardWait* w)
{
    while (w->next < w->match.rules.guardCount) {
        const CorGuardEntry* g = w->match.rules.guards[w->next++];
        int verdict = g->fn(w->r, g->arg, w);

        if (verdict == COR_GUARD_LATER) {
            return false;
        }
        if (verdict != COR_GUARD_PASS) {
            w->then->refused(w->r, verdict);
            return false;
        }
    }
    return true;
}

void
corGuardsRun(CorRequest* r, const CorRouteMatch* match,
             const CorGuardNext* next)
{
    CorGuardWait* w;

    if (match->rules.guardCount == 0) {
        next->routed(r, match);
        return;
    }
    w = corRequestAlloc(r, sizeof(*w));
    if (w == NULL) {
        next->refused(r, 500);
        return;
    }
    w->r = r;
    w->match = *match;
    w->then = next;
    w->next = 0;
    if (chainRun(w)) {
        next->routed(r, &w->match);
    }
}

void
corGuardResume(CorGuardWait* w, int verdict)
{
    if (verdict != COR_GUARD_PASS) {
        w->then->refused(w->r, verdict == COR_GUARD_LATER ? 500 : verdict);
        return;
    }
    if (chainRun(w)) {
        w->then->routed(w->r, &w->match);
    }
}
