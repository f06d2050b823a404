/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One ACME order from start to certificate (RFC 8555 7.3 to 7.4.2): the
 * account (newAccount finds the one of this key when it exists), the
 * order for the configured names, each authorization proved over HTTP-01
 * or TLS-ALPN-01 (the key authorization published on the plain listeners
 * or the TLS one, the challenge answered, the authorization polled), the
 * finalize with a CSR of the certificate's key, the order polled until valid,
 * and the chain downloaded.
 */
#include "corAcme.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Polls of an authorization or an order before giving up, and the waits
 * between two when the server names none (Retry-After): a quarter of a
 * second first, doubling to a second. A validation or an issue mostly
 * takes well under a second: a first wait of a whole second made most of
 * an order's time. */
#define POLL_TRIES 60
#define POLL_FIRST_MS 250
#define POLL_MAX_MS 1000

/* Wait before poll number i + 1: the server's Retry-After, else the
 * doubling wait. */
static int
pollWait(CorAcmeClient* c, int i)
{
    long ms = c->retryAfterS > 0 ? c->retryAfterS * 1000
                                 : (long)POLL_FIRST_MS << (i < 3 ? i : 3);

    if (c->retryAfterS <= 0 && ms > POLL_MAX_MS) {
        ms = POLL_MAX_MS;
    }
    if (corTaskScheduleAfter(ms < 60000 ? (int)ms : 60000) != 0) {
        snprintf(c->why, sizeof(c->why), "stopped while waiting");
        return -1;
    }
    return 0;
}

static int
accountEnsure(CorAcmeClient* c)
{
    json_t* payload = json_pack("{s:b}", "termsOfServiceAgreed", 1);
    CorAcmeReply reply;
    char* text;
    char* contact = NULL;
    int rc;

    if (c->kid != NULL) {
        json_decref(payload);
        return 0;
    }
    if (c->config->email != NULL
        && asprintf(&contact, "mailto:%s", c->config->email) > 0) {
        json_object_set_new(payload, "contact", json_pack("[s]", contact));
    }
    free(contact);
    text = json_dumps(payload, JSON_COMPACT);
    json_decref(payload);
    rc = text != NULL ? corAcmePost(c, corAcmeDirectoryUrl(c, "newAccount"),
                                    text, &reply)
                      : -1;
    free(text);
    if (rc != 0) {
        return -1;
    }
    if (reply.location == NULL) {
        snprintf(c->why, sizeof(c->why), "newAccount gave no account URL");
        rc = -1;
    } else {
        c->kid = reply.location;
        reply.location = NULL;
    }
    corAcmeReplyFree(&reply);
    return rc;
}

/* POST-as-GET url until its status leaves pending/processing (or is
 * "valid" at once): the last answer in *reply. */
static int
pollUntilDone(CorAcmeClient* c, const char* url, CorAcmeReply* reply)
{
    for (int i = 0; i < POLL_TRIES; i++) {
        const char* status;

        if (corAcmePost(c, url, NULL, reply) != 0) {
            return -1;
        }
        status = json_string_value(json_object_get(reply->json, "status"));
        if (status == NULL
            || (strcmp(status, "pending") != 0
                && strcmp(status, "processing") != 0)) {
            return 0;
        }
        corAcmeReplyFree(reply);
        if (pollWait(c, i) != 0) {
            return -1;
        }
    }
    snprintf(c->why, sizeof(c->why), "%s still pending after %d polls", url,
             POLL_TRIES);
    return -1;
}

/* Why an authorization failed: its challenge's error document. */
static void
authzFailed(CorAcmeClient* c, const char* url, json_t* authz)
{
    json_t* challenges = json_object_get(authz, "challenges");
    const char* name = json_string_value(
        json_object_get(json_object_get(authz, "identifier"), "value"));
    size_t i;
    json_t* ch;

    snprintf(c->why, sizeof(c->why), "authorization %s of %s is %s", url,
             name != NULL ? name : "?",
             json_string_value(json_object_get(authz, "status")));
    json_array_foreach(challenges, i, ch)
    {
        json_t* error = json_object_get(ch, "error");

        if (error != NULL) {
            snprintf(c->why, sizeof(c->why),
                     "authorization of %s failed: %s: %s",
                     name != NULL ? name : "?",
                     json_string_value(json_object_get(error, "type")),
                     json_string_value(json_object_get(error, "detail")));
        }
    }
}

/* The challenge of an authorization of type, or NULL. */
static json_t*
challengeOf(json_t* authz, const char* type)
{
    size_t i;
    json_t* ch;

    json_array_foreach(json_object_get(authz, "challenges"), i, ch)
    {
        const char* t = json_string_value(json_object_get(ch, "type"));

        if (t != NULL && strcmp(t, type) == 0) {
            return ch;
        }
    }
    return NULL;
}

/* Publish keyAuth where the challenge's validation looks: the plain
 * listeners' /.well-known/acme-challenge/ (HTTP-01) or the TLS
 * listener's acme-tls/1 handshakes for name (TLS-ALPN-01). */
static int
publish(CorAcmeClient* c, const char* name, const char* token,
        const char* keyAuth)
{
    return c->tlsAlpn ? corAcmeTlsAlpnAdd(name, keyAuth)
                      : corAcmeHttp01Add(c->config->storage, token, keyAuth);
}

static void
unpublish(CorAcmeClient* c, const char* name, const char* token)
{
    if (c->tlsAlpn) {
        corAcmeTlsAlpnRemove(name);
    } else {
        corAcmeHttp01Remove(c->config->storage, token);
    }
}

/* Answer the challenge at chUrl with token's key authorization,
 * published meanwhile for name, and poll the authorization at url to its
 * end. */
static int
challengeAnswer(CorAcmeClient* c, const char* url, const char* chUrl,
                const char* name, const char* token)
{
    CorAcmeReply reply;
    const char* status;
    char* keyAuth = NULL;
    int rc = -1;

    if (asprintf(&keyAuth, "%s.%s", token, c->thumbprint) < 0
        || publish(c, name, token, keyAuth) != 0) {
        free(keyAuth);
        snprintf(c->why, sizeof(c->why), "out of memory");
        return -1;
    }
    free(keyAuth);
    if (corAcmePost(c, chUrl, "{}", &reply) == 0) {
        corAcmeReplyFree(&reply);
        if (pollUntilDone(c, url, &reply) == 0) {
            status = json_string_value(json_object_get(reply.json, "status"));
            if (status != NULL && strcmp(status, "valid") == 0) {
                rc = 0;
            } else {
                authzFailed(c, url, reply.json);
            }
            corAcmeReplyFree(&reply);
        }
    }
    unpublish(c, name, token);
    return rc;
}

static int
authorize(CorAcmeClient* c, const char* url)
{
    CorAcmeReply reply;
    json_t* ch;
    const char* token;
    const char* chUrl;
    const char* name;
    const char* status;
    int rc = -1;

    if (corAcmePost(c, url, NULL, &reply) != 0) {
        return -1;
    }
    status = json_string_value(json_object_get(reply.json, "status"));
    if (status != NULL && strcmp(status, "valid") == 0) {
        corAcmeReplyFree(&reply);
        return 0; /* proved lately: the server reuses it */
    }
    ch = challengeOf(reply.json, c->tlsAlpn ? "tls-alpn-01" : "http-01");
    token = json_string_value(json_object_get(ch, "token"));
    chUrl = json_string_value(json_object_get(ch, "url"));
    name = json_string_value(
        json_object_get(json_object_get(reply.json, "identifier"), "value"));
    if (token == NULL || chUrl == NULL || name == NULL
        || strchr(token, '/') != NULL) {
        snprintf(c->why, sizeof(c->why),
                 "authorization %s offers no %s challenge", url,
                 c->tlsAlpn ? "TLS-ALPN-01" : "HTTP-01");
    } else {
        rc = challengeAnswer(c, url, chUrl, name, token);
    }
    corAcmeReplyFree(&reply);
    return rc;
}

/* The DER CSR of key for the configured names, base64url; NULL. */
static char*
csrMake(const CorConfigAcme* a, EVP_PKEY* key)
{
    X509_REQ* req = X509_REQ_new();
    X509_NAME* name = X509_NAME_new();
    STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
    X509_EXTENSION* san = NULL;
    unsigned char* der = NULL;
    char* sans = NULL;
    size_t sansLen = 0;
    char* out = NULL;
    int len;

    for (unsigned i = 0; i < a->domainCount; i++) {
        sansLen += strlen(a->domains[i]) + 5;
    }
    sans = calloc(1, sansLen + 1);
    if (req == NULL || name == NULL || exts == NULL || sans == NULL) {
        goto failed;
    }
    for (unsigned i = 0; i < a->domainCount; i++) {
        strcat(sans, i > 0 ? ",DNS:" : "DNS:");
        strcat(sans, a->domains[i]);
    }
    san = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, sans);
    if (san == NULL || sk_X509_EXTENSION_push(exts, san) <= 0
        || X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                      (const unsigned char*)a->domains[0], -1,
                                      -1, 0)
               != 1
        || X509_REQ_set_subject_name(req, name) != 1
        || X509_REQ_set_pubkey(req, key) != 1
        || X509_REQ_add_extensions(req, exts) != 1
        || X509_REQ_sign(req, key, EVP_sha256()) <= 0
        || (len = i2d_X509_REQ(req, &der)) <= 0) {
        goto failed;
    }
    out = corAcmeB64(der, (size_t)len);

failed:
    ERR_clear_error();
    OPENSSL_free(der);
    free(sans);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    X509_NAME_free(name);
    X509_REQ_free(req);
    return out;
}

/* The order's new-order payload: one dns identifier a name, and the
 * certificate it replaces (NULL: none). */
static char*
orderPayload(const CorConfigAcme* a, const char* replaces)
{
    json_t* ids = json_array();
    json_t* payload;
    char* text;

    for (unsigned i = 0; i < a->domainCount; i++) {
        json_array_append_new(ids, json_pack("{s:s, s:s}", "type", "dns",
                                             "value", a->domains[i]));
    }
    payload = json_pack("{s:o}", "identifiers", ids);
    if (replaces != NULL) {
        json_object_set_new(payload, "replaces", json_string(replaces));
    }

    text = json_dumps(payload, JSON_COMPACT);
    json_decref(payload);
    return text;
}

/* Finalize with a CSR of key, poll, download the chain into *pemP. */
static int
finalize(CorAcmeClient* c, const char* orderUrl, const char* finalizeUrl,
         EVP_PKEY* key, char** pemP)
{
    CorAcmeReply reply;
    char* csr = csrMake(c->config, key);
    char* payload = NULL;
    const char* status;
    const char* certUrl;
    int rc = -1;

    if (csr == NULL || asprintf(&payload, "{\"csr\":\"%s\"}", csr) < 0) {
        free(csr);
        snprintf(c->why, sizeof(c->why), "cannot make the CSR");
        return -1;
    }
    free(csr);
    rc = corAcmePost(c, finalizeUrl, payload, &reply);
    free(payload);
    if (rc != 0) {
        return -1;
    }
    corAcmeReplyFree(&reply);
    if (pollUntilDone(c, orderUrl, &reply) != 0) {
        return -1;
    }
    status = json_string_value(json_object_get(reply.json, "status"));
    certUrl = json_string_value(json_object_get(reply.json, "certificate"));
    if (status == NULL || strcmp(status, "valid") != 0 || certUrl == NULL) {
        snprintf(c->why, sizeof(c->why), "order %s is %s after its finalize",
                 orderUrl, status != NULL ? status : "(no status)");
        corAcmeReplyFree(&reply);
        return -1;
    }
    {
        CorAcmeReply cert;

        rc = corAcmePost(c, certUrl, NULL, &cert);
        if (rc == 0) {
            *pemP = cert.body;
            cert.body = NULL;
            corAcmeReplyFree(&cert);
        }
    }
    corAcmeReplyFree(&reply);
    return rc;
}

int
corAcmeOrder(CorAcmeClient* c, EVP_PKEY* certKey, char** pemP)
{
    CorAcmeReply order;
    char* payload;
    const char* finalizeUrl;
    size_t i;
    json_t* authz;
    int rc;

    if (accountEnsure(c) != 0) {
        return -1;
    }
    payload = orderPayload(c->config, c->replaces);
    rc = payload != NULL ? corAcmePost(c, corAcmeDirectoryUrl(c, "newOrder"),
                                       payload, &order)
                         : -1;
    free(payload);
    if (rc != 0 && c->replaces != NULL) {
        /* The replaced one refused (another order replaced it, or the
         * server takes no "replaces"): a plain order still renews. */
        corLog(COR_LOG_WARN,
               "tls: acme: %s: an order replacing %s refused (%s); "
               "ordering without replaces",
               c->config->domains[0], c->replaces, c->why);
        free(c->replaces);
        c->replaces = NULL;
        return corAcmeOrder(c, certKey, pemP);
    }
    if (rc != 0) {
        return -1;
    }
    finalizeUrl = json_string_value(json_object_get(order.json, "finalize"));
    if (order.location == NULL || finalizeUrl == NULL) {
        snprintf(c->why, sizeof(c->why),
                 "newOrder gave no order URL or finalize URL");
        corAcmeReplyFree(&order);
        return -1;
    }
    json_array_foreach(json_object_get(order.json, "authorizations"), i, authz)
    {
        if (authorize(c, json_string_value(authz)) != 0) {
            corAcmeReplyFree(&order);
            return -1;
        }
    }
    rc = finalize(c, order.location, finalizeUrl, certKey, pemP);
    corAcmeReplyFree(&order);
    return rc;
}
