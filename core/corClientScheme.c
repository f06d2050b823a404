/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client URL schemes: what makes a module a bridge. A module that speaks
 * a protocol to servers (cor:// from modules/cor) registers its scheme
 * with one exchange function, and from then on every client of cor takes
 * such URLs: corHttpClientFetch and corHttpClientStart (a handler's own
 * calls, fan-outs), the forward module, and notifications (a scheme that
 * is registered here sends them as exchanges, a 2xx acknowledging). http and https are
 * the core's own and are never registered.
 *
 * The registry is filled by the modules' init, once per generation (a
 * generation is a process of its own), and only read after.
 */
#include "corHttpClient.h"
#include "corCoreInt.h"

#include <stdio.h>
#include <string.h>

#define SCHEMES_MAX 16

typedef struct {
    char scheme[16];
    CorClientFetchFn fetch;
} Scheme;

static Scheme schemes[SCHEMES_MAX];
static unsigned schemeCount;

int
corClientSchemeAdd(CorModule* m, const char* scheme, CorClientFetchFn fetch)
{
    CorUrl probe;
    char url[64];
    char why[128];

    snprintf(url, sizeof(url), "%s://x", scheme);
    if (corUrlParse(url, &probe, why, sizeof(why)) != 0
        || strcmp(probe.scheme, scheme) != 0 || strcmp(scheme, "http") == 0
        || strcmp(scheme, "https") == 0 || corClientSchemeFind(scheme)
        || schemeCount == SCHEMES_MAX) {
        corModuleError(m, NULL, "client scheme '%s': not a lowercase scheme "
                       "name, the core's own, taken already, or one too "
                       "many", scheme);
        return -1;
    }
    snprintf(schemes[schemeCount].scheme, sizeof(schemes[0].scheme), "%s",
             scheme);
    schemes[schemeCount++].fetch = fetch;
    /* Notifications to such URLs go as its exchanges. */
    return corNotifySchemeAddClient(m, scheme);
}

CorClientFetchFn
corClientSchemeFind(const char* scheme)
{
    for (unsigned i = 0; i < schemeCount; i++) {
        if (strcmp(schemes[i].scheme, scheme) == 0) {
            return schemes[i].fetch;
        }
    }
    return NULL;
}

CorClientFetchFn
corClientSchemeOf(const char* url)
{
    char scheme[16];
    size_t n = url != NULL ? strcspn(url, ":") : 0;

    if (n == 0 || n >= sizeof(scheme) || strncmp(url + n, "://", 3) != 0) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        scheme[i] = (char)(url[i] | 0x20);
    }
    scheme[n] = '\0';
    return corClientSchemeFind(scheme);
}
