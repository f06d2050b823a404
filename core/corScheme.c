/* SPDX-License-Identifier: Apache-2.0 */
/*
 * URL schemes: one registry for every client of cor, and what makes a
 * module a bridge. A scheme may fetch (one exchange of the client:
 * corClientFetch and corClientStart take its URLs, and so the
 * forward module), send notifications (corNotify.c), or both. http and
 * https are registered by the HTTP floor (http/corHttpScheme.c), cor and
 * cors by modules/cor, mqtt and mqtts by modules/mqtt: the core names
 * none.
 *
 * One name rule (RFC 3986 3.1, lowercase: a scheme is registered as URLs
 * are compared, lowercased). The registry is filled before the loops run
 * (the HTTP floor's at the binary's start, the modules' from their init,
 * once per generation: a generation is a process of its own) and only
 * read after: no lock. Its notification counters are atomics, since a
 * scheme's notifications end on every loop and thread.
 */
#include "corCoreInt.h"

#include <stdio.h>
#include <string.h>

#define SCHEMES_MAX 16

static CorSchemeEntry schemes[SCHEMES_MAX];
static unsigned schemeCount;

static bool
schemeNameValid(const char* name)
{
    size_t len = name != NULL ? strlen(name) : 0;

    if (len == 0 || len > COR_SCHEME_NAME_MAX || name[0] < 'a'
        || name[0] > 'z') {
        return false;
    }
    for (size_t i = 1; i < len; i++) {
        char ch = name[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+'
              || ch == '-' || ch == '.')) {
            return false;
        }
    }
    return true;
}

static int
refuse(CorModule* m, const char* what, const char* scheme)
{
    corModuleError(m, NULL, "URL scheme '%s': %s", scheme, what);
    return -1;
}

int
corSchemeAdd(CorModule* m, const CorScheme* s)
{
    const char* name = s->scheme != NULL ? s->scheme : "";
    CorSchemeEntry* entry;

    if (corRuntime.loops != NULL) {
        return refuse(m,
                      "schemes are registered from init, before the "
                      "loops run",
                      name);
    }
    if (!schemeNameValid(s->scheme) || (s->fetch == NULL && s->send == NULL)) {
        return refuse(m,
                      "a scheme needs a name (a lowercase letter, then "
                      "letters, digits, + - ., at most 15) and a fetch or "
                      "a send function",
                      name);
    }
    if (corSchemeFind(name) != NULL) {
        return refuse(m, "already registered", name);
    }
    if (schemeCount == SCHEMES_MAX) {
        return refuse(m, "no room (16 schemes at most)", name);
    }
    entry = &schemes[schemeCount++];
    snprintf(entry->name, sizeof(entry->name), "%s", name);
    entry->s = *s;
    entry->s.scheme = entry->name;
    entry->module = m;
    return 0;
}

const CorScheme*
corSchemeFind(const char* name)
{
    for (unsigned i = 0; i < schemeCount; i++) {
        if (strcmp(schemes[i].name, name) == 0) {
            return &schemes[i].s;
        }
    }
    return NULL;
}

const CorScheme*
corSchemeOf(const char* url)
{
    char name[COR_SCHEME_NAME_MAX + 1];
    size_t n = url != NULL ? strcspn(url, ":") : 0;

    if (n == 0 || n >= sizeof(name) || strncmp(url + n, "://", 3) != 0) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        name[i] = url[i] >= 'A' && url[i] <= 'Z' ? (char)(url[i] | 0x20)
                                                 : url[i];
    }
    name[n] = '\0';
    return corSchemeFind(name);
}

void
corSchemesLoopExit(void)
{
    for (unsigned i = 0; i < schemeCount; i++) {
        if (schemes[i].s.loopExit != NULL) {
            schemes[i].s.loopExit();
        }
    }
}

unsigned
corNotifySchemeCount(void)
{
    return schemeCount;
}

const char*
corNotifySchemeStats(unsigned index, CorNotifyStats* stats)
{
    const CorSchemeEntry* s = &schemes[index < schemeCount ? index : 0];

    stats->sent = atomic_load(&s->sent);
    stats->failed = atomic_load(&s->failed);
    stats->inFlight = atomic_load(&s->inFlight);
    return s->name;
}

unsigned
corNotifyInFlight(void)
{
    unsigned sum = 0;

    for (unsigned i = 0; i < schemeCount; i++) {
        sum += atomic_load(&schemes[i].inFlight);
    }
    return sum;
}
