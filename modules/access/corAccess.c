/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/access: guards by the client's address and by password.
 *
 *     modules:
 *       - load: access
 *         guards:
 *           - { name: lan, allow: [ 10.0.0.0/8, "::1" ], deny: [ all ] }
 *           - { name: staff, basic_auth: { realm: staff,
 *                                          users: /etc/cor/htpasswd } }
 *     routes:
 *       - { match: "/admin/...", handler: app, guard: [ lan, staff ] }
 *
 * An address list is nginx's allow / deny: the rules in the order the
 * file gives them (allow's and deny's keys as they come, each list in
 * order), the first that holds the client's address wins; none: it
 * passes. A denied client gets 403. A guard with both a list and
 * basic_auth wants both. The htpasswd file is read at init, so each
 * generation (a reload) reads it anew and `cor -t` says when it cannot.
 */
#include "corAccessInt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    CorNet net;
    bool allow;
} Rule;

typedef struct {
    Rule* rules;
    unsigned ruleCount;
    AccessBasic* basic; /* NULL: no password asked */
} Guard;

static int
guardCheck(CorRequest* r, void* arg, CorGuardWait* wait)
{
    const Guard* g = arg;
    CorNetAddr addr;

    if (g->ruleCount > 0) {
        /* No address (a transport that has none): no rule can hold it,
         * and only `all` says what to do. */
        bool known = corNetAddrParse(r->remote, &addr);

        for (unsigned i = 0; i < g->ruleCount; i++) {
            if (g->rules[i].net.all
                || (known && corNetHas(&g->rules[i].net, &addr))) {
                if (!g->rules[i].allow) {
                    return 403;
                }
                break;
            }
        }
    }
    return g->basic != NULL ? corAccessBasicCheck(g->basic, r, wait)
                            : COR_GUARD_PASS;
}

/* allow: [...] or deny: [...] (a single network alone too) onto g. */
static int
rulesRead(CorModule* m, const CorConf* list, bool allow, Guard* g)
{
    bool seq = corConfKind(list) == COR_CONF_SEQ;
    size_t count = seq ? corConfCount(list) : 1;
    Rule* grown = realloc(g->rules, (g->ruleCount + count) * sizeof(*grown));
    int rc = 0;

    if (grown == NULL) {
        corModuleError(m, list, "no memory");
        return -1;
    }
    g->rules = grown;
    for (size_t i = 0; i < count; i++) {
        const CorConf* item = seq ? corConfAt(list, i) : list;
        Rule* rule = &g->rules[g->ruleCount];

        if (corConfKind(item) != COR_CONF_SCALAR
            || corNetParse(corConfText(item), &rule->net) != 0) {
            corModuleError(m, item,
                           "%s: expected an address, a network "
                           "(10.0.0.0/8, 2001:db8::/32, its bits past the "
                           "prefix zero) or all, got '%s'",
                           allow ? "allow" : "deny",
                           corConfKind(item) == COR_CONF_SCALAR
                               ? corConfText(item)
                               : "a list or mapping");
            rc = -1;
            continue;
        }
        rule->allow = allow;
        g->ruleCount++;
    }
    return rc;
}

static int
guardRead(CorModule* m, const CorConf* entry, void* record, unsigned index)
{
    Guard* g = record;
    static const char* const keys[] = { "name", "allow", "deny", "basic_auth",
                                        NULL };
    CorConfErrors* e = corModuleErrors(m);
    const char* name = corConfString(entry, "name", NULL, e);
    char where[32];
    int rc = 0;

    snprintf(where, sizeof(where), "guards[%u]", index);
    if (name == NULL || name[0] == '\0') {
        corModuleError(m, entry,
                       "%s: a name (what a route's guard names) "
                       "is needed",
                       where);
        return -1;
    }
    /* The keys in the file's order: allow and deny as they come. */
    for (size_t i = 0; i < corConfCount(entry); i++) {
        const char* key = corConfKeyAt(entry, i);

        if (strcmp(key, "allow") == 0 || strcmp(key, "deny") == 0) {
            rc |= rulesRead(m, corConfAt(entry, i), key[0] == 'a', g);
        }
    }
    if (corConfGet(entry, "basic_auth") != NULL) {
        g->basic = corAccessBasicRead(m, corConfMap(entry, "basic_auth", e));
        rc |= g->basic == NULL ? -1 : 0;
    }
    if (rc == 0 && g->ruleCount == 0 && g->basic == NULL) {
        corModuleError(m, entry, "%s: allow / deny or basic_auth is needed",
                       where);
        rc = -1;
    }
    corConfUnknownKeys(entry, where, keys, e);
    return rc != 0 ? -1 : corGuardAdd(m, name, guardCheck, g);
}

static void
guardFree(void* record)
{
    Guard* g = record;

    free(g->rules);
    corAccessBasicFree(g->basic);
}

/* The guards are freed after it (the core's, corModuleRecordsRead). */
static void
accessExit(CorModule* m)
{
    (void)m;
    corAccessBasicThreadsStop();
}

static int
accessInit(CorModule* m, const CorConf* conf)
{
    unsigned count;

    return corModuleRecordsRead(m, conf, "guards",
                                "{ name, allow / deny, basic_auth }",
                                sizeof(Guard), guardRead, guardFree, &count)
                   != NULL
               ? 0
               : -1;
}

COR_MODULE(access, .init = accessInit, .exit = accessExit);
