/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The subscriptions' YAML: each { broker, filter, qos, client_id, method }
 * of the
 * mqtt module's `subscriptions`, checked at its file:line (a bad filter,
 * QoS, URL or key is refused before anything starts) and gathered into
 * groups, one per broker and client id: a group is one connection
 * (corMqttSubscribe.c serves it).
 */
#include "corMqttLink.h"
#include "corHttpParse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CorMqttSubGroup* corMqttGroups;
unsigned corMqttGroupCount;

/* The group of url (and client id), or a new one; NULL without memory. */
static CorMqttSubGroup*
groupFor(const char* url, const CorMqttBroker* b, const char* clientId)
{
    CorMqttSubGroup* groups;
    CorMqttSubGroup* g;

    for (unsigned i = 0; i < corMqttGroupCount; i++) {
        g = &corMqttGroups[i];
        if (strcmp(g->url, url) == 0 && corMqttBrokerSame(&g->broker, b)
            && (clientId == NULL || strcmp(g->clientId, clientId) == 0)) {
            return g;
        }
    }
    groups = realloc(corMqttGroups, (corMqttGroupCount + 1) * sizeof(*groups));
    if (groups == NULL) {
        return NULL;
    }
    corMqttGroups = groups;
    g = &groups[corMqttGroupCount];
    memset(g, 0, sizeof(*g));
    g->broker = *b;
    snprintf(g->url, sizeof(g->url), "%s", url);
    snprintf(g->clientId, sizeof(g->clientId), "%s-%s-sub-%u",
             corMqttConf.clientId, corInstance(), corMqttGroupCount + 1);
    if (clientId != NULL) {
        snprintf(g->clientId, sizeof(g->clientId), "%s", clientId);
        g->named = true;
    }
    corMqttGroupCount++;
    return g;
}

/* Whether a subscription's broker URL is good; else an error at it. */
static bool
brokerCheck(CorModule* m, const CorConf* item, const char* url,
            CorMqttBroker* b)
{
    const CorConf* at = corConfGet(item, "broker");
    char why[256];
    CorUrl u;

    if (url == NULL) {
        corModuleError(m, item,
                       "subscription: a broker is needed "
                       "(broker: \"mqtt://host:port\")");
        return false;
    }
    if (corMqttUrlBroker(url, b, &u, why, sizeof(why)) != 0) {
        corModuleError(m, at, "broker: %s", why);
        return false;
    }
    if (u.targetLen != 1) {
        corModuleError(m, at,
                       "broker: '%s' has a path: the topics are the "
                       "filter's",
                       url);
        return false;
    }
    return true;
}

/* One item of the list into its group. Returns 0, or -1 after an error. */
static int
subscriptionRead(CorModule* m, const CorConf* item, const char* where)
{
    CorConfErrors* errors = corModuleErrors(m);
    const char* url = corConfString(item, "broker", NULL, errors);
    const char* filter = corConfString(item, "filter", NULL, errors);
    const char* clientId = corConfString(item, "client_id", NULL, errors);
    const char* method = corConfString(item, "method", NULL, errors);
    unsigned qos = (unsigned)corConfInt(item, "qos", 1, 0, 2, errors);
    const char* bad = filter != NULL
                          ? corMqttTopicFilterCheck(filter, strlen(filter))
                          : NULL;
    CorMqttSubGroup* g;
    CorMqttBroker b;
    CorMqttSub* subs;
    char** methods = NULL;

    corConfUnusedKeys(item, where, errors);
    if (!brokerCheck(m, item, url, &b)) {
        return -1;
    }
    if (filter == NULL || bad != NULL) {
        corModuleError(m, filter != NULL ? corConfGet(item, "filter") : item,
                       "filter: %s",
                       bad != NULL ? bad
                                   : "a topic filter is "
                                     "needed (filter: \"sensors/+/temp\")");
        return -1;
    }
    if (clientId != NULL && (clientId[0] == '\0' || strlen(clientId) > 63)) {
        corModuleError(m, corConfGet(item, "client_id"),
                       "client_id: 1 to 63 "
                       "bytes");
        return -1;
    }
    if (method != NULL
        && (!corHttpIsToken(method, strlen(method))
            || strlen(method) > COR_MQTT_METHOD_MAX)) {
        corModuleError(m, corConfGet(item, "method"),
                       "method: an HTTP "
                       "method (a token of 1 to %d bytes: POST, PUT...)",
                       COR_MQTT_METHOD_MAX);
        return -1;
    }
    g = groupFor(url, &b, clientId);
    subs = g != NULL ? realloc(g->subs, (g->count + 1) * sizeof(*subs)) : NULL;
    if (subs != NULL) {
        g->subs = subs;
        methods = realloc(g->methods, (g->count + 1) * sizeof(*methods));
    }
    if (methods == NULL || (filter = strdup(filter)) == NULL
        || (method != NULL && (method = strdup(method)) == NULL)) {
        corModuleError(m, item, "out of memory");
        return -1;
    }
    g->methods = methods;
    methods[g->count] = (char*)method;
    /* 5.0: retained messages only to a new subscription, not again at
     * each connect (the session keeps the subscription). */
    subs[g->count++] = (CorMqttSub){
        { filter, strlen(filter) },
        (uint8_t)(qos
                  | (b.version == COR_MQTT_V5
                         ? 1 << COR_MQTT_SUB_RETAIN_HANDLING_SHIFT
                         : 0))
    };
    return 0;
}

int
corMqttSubscriptionsRead(CorModule* m, const CorConf* list)
{
    int rc = 0;

    for (size_t i = 0; i < corConfCount(list); i++) {
        char where[48];
        const CorConf* item = corConfAt(list, i);

        snprintf(where, sizeof(where), "subscriptions[%zu]", i);
        if (corConfKind(item) != COR_CONF_MAP) {
            corModuleError(m, item,
                           "%s: expected a mapping {broker, filter, "
                           "qos}",
                           where);
            rc = -1;
        } else if (subscriptionRead(m, item, where) != 0) {
            rc = -1;
        }
    }
    return rc;
}

void
corMqttSubscriptionsFree(void)
{
    for (unsigned i = 0; i < corMqttGroupCount; i++) {
        for (unsigned k = 0; k < corMqttGroups[i].count; k++) {
            free((char*)corMqttGroups[i].subs[k].filter.data);
            free(corMqttGroups[i].methods[k]);
        }
        free(corMqttGroups[i].subs);
        free(corMqttGroups[i].methods);
    }
    free(corMqttGroups);
    corMqttGroups = NULL;
    corMqttGroupCount = 0;
}
