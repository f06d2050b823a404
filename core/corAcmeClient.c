/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exchanges with an ACME directory (RFC 8555 6 and 7.1), through the
 * core's HTTPS client: the directory read once, every later request a
 * signed POST carrying the nonce the last answer brought (a fresh one
 * from newNonce when there is none), a badNonce answered by sending
 * again with the nonce that came with it (RFC 8555 6.5), each error
 * document (RFC 7807) said whole for the log, and a Retry-After kept for
 * the caller's wait.
 */
#include "corAcme.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define EXCHANGE_TIMEOUT_MS 30000
/* A badNonce is tried again this many times: a directory may reject any
 * nonce now and then (pebble rejects 5% on purpose). */
#define BAD_NONCE_TRIES 5

/* The value of res's header name as a malloc'd string, or NULL. */
static char*
headerCopy(const CorClientResponse* res, const char* name)
{
    const CorHeader* h = corClientHeader(res, name);

    return h != NULL ? strndup(h->value, h->valueLen) : NULL;
}

/* Retry-After: seconds, or an HTTP date; 0 when absent or past. */
static long
retryAfterOf(const CorClientResponse* res)
{
    const CorHeader* h = corClientHeader(res, "Retry-After");
    char text[64];
    struct tm tm = { 0 };
    char* end;
    long s;

    if (h == NULL || h->valueLen >= sizeof(text)) {
        return 0;
    }
    snprintf(text, sizeof(text), "%.*s", (int)h->valueLen, h->value);
    s = strtol(text, &end, 10);
    if (end != text && *end == '\0') {
        return s > 0 ? s : 0;
    }
    if (strptime(text, "%a, %d %b %Y %H:%M:%S GMT", &tm) == NULL) {
        return 0;
    }
    s = (long)(timegm(&tm) - time(NULL));
    return s > 0 ? s : 0;
}

/* One exchange; the nonce and Retry-After it brings kept. Returns 0 with
 * an answer in *res (the caller frees it), or -1 with c->why said. */
static int
exchange(CorAcmeClient* c, const char* method, const char* url,
         const char* body, CorClientResponse* res)
{
    static const CorHeader jose = { "Content-Type", 12, "application/jose+json",
                                    21 };
    char* nonce;

    if (corClientFetch(
            &(CorClientRequest){
                .method = method,
                .url = url,
                .headers = body != NULL ? &jose : NULL,
                .headerCount = body != NULL ? 1 : 0,
                .body = body,
                .bodyLen = body != NULL ? strlen(body) : 0,
                .connectTimeoutMs = EXCHANGE_TIMEOUT_MS,
                .totalTimeoutMs = EXCHANGE_TIMEOUT_MS,
                .tlsClient = c->tls,
            },
            res)
        != 0) {
        snprintf(c->why, sizeof(c->why), "%s %s: %s", method, url, res->error);
        return -1;
    }
    nonce = headerCopy(res, "Replay-Nonce");
    if (nonce != NULL) {
        free(c->nonce);
        c->nonce = nonce;
    }
    c->retryAfterS = retryAfterOf(res);
    return 0;
}

/* An error document in c->why: its type, detail and subproblems. Returns
 * whether it is a badNonce. */
static bool
problemSay(CorAcmeClient* c, const char* url, const CorClientResponse* res)
{
    json_t* doc = json_loadb(res->body != NULL ? res->body : "", res->bodyLen,
                             0, NULL);
    const char* type = json_string_value(json_object_get(doc, "type"));
    const char* detail = json_string_value(json_object_get(doc, "detail"));
    json_t* subs = json_object_get(doc, "subproblems");
    size_t used;
    size_t i;
    json_t* sub;
    bool badNonce = type != NULL
                    && strcmp(type, "urn:ietf:params:acme:error:badNonce") == 0;

    used = (size_t)snprintf(c->why, sizeof(c->why), "%s answered %d: %s: %s",
                            url, res->status,
                            type != NULL ? type : "(no error document)",
                            detail != NULL ? detail : "");
    json_array_foreach(subs, i, sub)
    {
        const char* subType = json_string_value(json_object_get(sub, "type"));
        const char* subDetail = json_string_value(
            json_object_get(sub, "detail"));
        json_t* id = json_object_get(sub, "identifier");

        if (used >= sizeof(c->why)) {
            break;
        }
        used += (size_t)snprintf(c->why + used, sizeof(c->why) - used,
                                 "; %s: %s: %s",
                                 json_string_value(
                                     json_object_get(id, "value")),
                                 subType != NULL ? subType : "",
                                 subDetail != NULL ? subDetail : "");
    }
    json_decref(doc);
    return badNonce;
}

int
corAcmeClientOpen(CorAcmeClient* c, const CorConfigAcme* config,
                  EVP_PKEY* accountKey)
{
    CorClientResponse res = { 0 };
    int rc = -1;

    c->config = config;
    c->accountKey = accountKey;
    if (config->ca != NULL) {
        c->tls = corTlsClientNew(&(CorTlsClientOptions){ .caFile = config->ca },
                                 c->why, sizeof(c->why));
        if (c->tls == NULL) {
            return -1;
        }
    }
    if (corAcmeJwk(accountKey, &c->jwk, c->thumbprint) != 0) {
        snprintf(c->why, sizeof(c->why), "cannot make the account's JWK");
        return -1;
    }
    if (exchange(c, "GET", config->directory, NULL, &res) != 0) {
        goto failed;
    }
    if (res.status != 200) {
        problemSay(c, config->directory, &res);
        goto failed;
    }
    c->directory = res.status == 200
                       ? json_loadb(res.body, res.bodyLen, 0, NULL)
                       : NULL;
    if (!json_is_object(c->directory)
        || corAcmeDirectoryUrl(c, "newNonce") == NULL
        || corAcmeDirectoryUrl(c, "newAccount") == NULL
        || corAcmeDirectoryUrl(c, "newOrder") == NULL) {
        snprintf(c->why, sizeof(c->why),
                 "%s answered %d, not an ACME directory (no newNonce, "
                 "newAccount and newOrder)",
                 config->directory, res.status);
        goto failed;
    }
    rc = 0;

failed:
    corClientResponseFree(&res);
    return rc;
}

void
corAcmeClientClose(CorAcmeClient* c)
{
    if (c->tls != NULL) {
        corTlsClientFree(c->tls);
    }
    json_decref(c->directory);
    free(c->jwk);
    free(c->kid);
    free(c->nonce);
    free(c->replaces);
    memset(c, 0, sizeof(*c));
}

const char*
corAcmeDirectoryUrl(const CorAcmeClient* c, const char* name)
{
    return json_string_value(json_object_get(c->directory, name));
}

/* A nonce for the next request: the last answer's, else newNonce's. */
static int
nonceEnsure(CorAcmeClient* c)
{
    CorClientResponse res = { 0 };
    int rc;

    if (c->nonce != NULL) {
        return 0;
    }
    rc = exchange(c, "GET", corAcmeDirectoryUrl(c, "newNonce"), NULL, &res);
    if (rc == 0 && c->nonce == NULL) {
        snprintf(c->why, sizeof(c->why), "%s gave no Replay-Nonce",
                 corAcmeDirectoryUrl(c, "newNonce"));
        rc = -1;
    }
    corClientResponseFree(&res);
    return rc;
}

int
corAcmePost(CorAcmeClient* c, const char* url, const char* payload,
            CorAcmeReply* reply)
{
    memset(reply, 0, sizeof(*reply));
    for (int tries = 0; tries < BAD_NONCE_TRIES; tries++) {
        CorClientResponse res = { 0 };
        char* jws;
        char* nonce;
        bool badNonce;
        const CorHeader* type;

        if (nonceEnsure(c) != 0) {
            return -1;
        }
        nonce = c->nonce;
        c->nonce = NULL; /* spent, whatever comes */
        jws = corAcmeJwsSign(c->accountKey, c->jwk, c->kid, nonce, url,
                             payload);
        free(nonce);
        if (jws == NULL) {
            snprintf(c->why, sizeof(c->why), "cannot sign a request to %s",
                     url);
            return -1;
        }
        if (exchange(c, "POST", url, jws, &res) != 0) {
            free(jws);
            corClientResponseFree(&res);
            return -1;
        }
        free(jws);
        if (res.status >= 200 && res.status < 300) {
            type = corClientHeader(&res, "Content-Type");
            reply->status = res.status;
            reply->body = strndup(res.body != NULL ? res.body : "",
                                  res.bodyLen);
            reply->location = headerCopy(&res, "Location");
            if (type != NULL && type->valueLen >= 16
                && strncasecmp(type->value, "application/json", 16) == 0) {
                reply->json = json_loadb(res.body, res.bodyLen, 0, NULL);
            }
            corClientResponseFree(&res);
            return reply->body != NULL ? 0 : -1;
        }
        badNonce = problemSay(c, url, &res);
        corClientResponseFree(&res);
        if (!badNonce) {
            return -1;
        }
    }
    return -1;
}

int
corAcmeGet(CorAcmeClient* c, const char* url, CorAcmeReply* reply)
{
    CorClientResponse res = { 0 };
    int rc = -1;

    memset(reply, 0, sizeof(*reply));
    if (exchange(c, "GET", url, NULL, &res) != 0) {
        corClientResponseFree(&res);
        return -1;
    }
    if (res.status != 200) {
        problemSay(c, url, &res);
    } else {
        reply->status = res.status;
        reply->json = json_loadb(res.body != NULL ? res.body : "", res.bodyLen,
                                 0, NULL);
        rc = 0;
    }
    corClientResponseFree(&res);
    return rc;
}

void
corAcmeReplyFree(CorAcmeReply* reply)
{
    json_decref(reply->json);
    free(reply->body);
    free(reply->location);
    memset(reply, 0, sizeof(*reply));
}
