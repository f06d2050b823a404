/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A listener's tls: { acme } mapping: where its certificate comes from
 * when cor obtains it itself (corAcme.c). Kinds and words are checked
 * here, so that `cor -t` refuses a name no ACME server would issue for
 * or a directory that is not https://; whether the CA file loads, the
 * storage folder can be made and a plain listener answers HTTP-01 is the
 * generation's to check (corAcmeNew), which `cor -t` runs too.
 */
#include "corConfigRead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A certificate covers at most this many names (Let's Encrypt's limit). */
#define ACME_DOMAINS_MAX 100

/* Whether name is a DNS name an HTTP-01 challenge can prove: labels of
 * letters, digits and inner hyphens, at least two of them, no wildcard
 * and no address. */
static bool
domainValid(const char* name)
{
    size_t label = 0;
    unsigned labels = 1;
    bool allDigits = true;

    if (*name == '\0' || strlen(name) > 253) {
        return false;
    }
    for (const char* p = name; *p != '\0'; p++) {
        if (*p == '.') {
            if (label == 0 || p[-1] == '-') {
                return false;
            }
            label = 0;
            labels++;
            continue;
        }
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '-')
            || (*p == '-' && label == 0) || ++label > 63) {
            return false;
        }
        allDigits &= *p >= '0' && *p <= '9';
    }
    return label > 0 && labels >= 2 && !allDigits;
}

static void
readDomains(CorConfigAcme* a, const CorConf* acme, const char* where,
            CorConfErrors* e)
{
    const CorConf* list = corConfSeq(acme, "domains", e);
    size_t count = list != NULL ? corConfCount(list) : 0;

    if (list == NULL) {
        if (corConfGet(acme, "domains") == NULL) {
            corConfErrorf(e, acme,
                          "%s: domains: expected the names the "
                          "certificate covers, e.g. [ example.com, "
                          "www.example.com ]",
                          where);
        }
        return;
    }
    if (count == 0 || count > ACME_DOMAINS_MAX) {
        corConfErrorf(e, list, "%s.domains: expected 1 to %d names, got %zu",
                      where, ACME_DOMAINS_MAX, count);
        return;
    }
    a->domains = calloc(count, sizeof(char*));
    if (a->domains == NULL) {
        corConfErrorf(e, list, "out of memory reading the configuration");
        return;
    }
    for (size_t i = 0; i < count; i++) {
        const CorConf* item = corConfAt(list, i);
        const char* name = corConfKind(item) == COR_CONF_SCALAR
                               ? corConfText(item)
                               : "";

        if (!domainValid(name)) {
            corConfErrorf(e, item,
                          "%s.domains[%zu]: '%s' is not a DNS name an "
                          "ACME server issues for over HTTP-01 (no "
                          "wildcard, no address, at least two labels)",
                          where, i, name);
            continue;
        }
        corConfigSetString(&a->domains[a->domainCount++], name, e);
    }
}

static void
readDirectory(CorConfigAcme* a, const CorConf* acme, const char* where,
              CorConfErrors* e)
{
    const char* url;

    if (!corConfigRequired(acme, "directory", where,
                           "the ACME directory's URL, e.g. https://"
                           "acme-staging-v02.api.letsencrypt.org/directory",
                           e)) {
        return;
    }
    url = corConfigNonEmpty(acme, "directory", NULL, "a URL", e);
    if (url != NULL && strncmp(url, "https://", 8) != 0) {
        corConfErrorf(e, corConfGet(acme, "directory"),
                      "%s.directory: '%s' is not an https:// URL (RFC "
                      "8555 speaks HTTPS only)",
                      where, url);
        return;
    }
    corConfigSetString(&a->directory, url, e);
}

CorConfigAcme*
corConfigAcmeRead(const CorConf* tls, const char* tlsWhere, CorConfErrors* e)
{
    static const char* const keys[] = {
        "directory", "email", "domains", "storage", "ca", "challenge", NULL,
    };
    static const char* const challenges[] = { "http-01", "tls-alpn-01", NULL };
    const CorConf* acme = corConfMap(tls, "acme", e);
    CorConfigAcme* a;
    const char* email;
    const char* challenge;
    char where[96];

    if (acme == NULL) {
        return NULL;
    }
    snprintf(where, sizeof(where), "%s.acme", tlsWhere);
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        corConfErrorf(e, acme, "out of memory reading the configuration");
        return NULL;
    }
    a->node = acme;
    readDirectory(a, acme, where, e);
    readDomains(a, acme, where, e);
    email = corConfigNonEmpty(acme, "email", NULL, "an e-mail address", e);
    if (email != NULL
        && (strchr(email, '@') == NULL || strpbrk(email, " ,<>"))) {
        corConfErrorf(e, corConfGet(acme, "email"),
                      "%s.email: '%s' is not an e-mail address", where, email);
    }
    corConfigSetString(&a->email, email, e);
    if (corConfigRequired(acme, "storage", where,
                          "a folder for the keys and certificates, e.g. "
                          "/var/lib/cor/acme",
                          e)) {
        corConfigSetPath(&a->storage, acme, "storage", e);
    }
    corConfigSetPath(&a->ca, acme, "ca", e);
    challenge = corConfigOneOf(acme, "challenge", "http-01", challenges, e);
    corConfigSetString(&a->challenge, challenge, e);
    corConfUnknownKeys(acme, where, keys, e);
    return a;
}

void
corConfigAcmeFree(CorConfigAcme* a)
{
    if (a == NULL) {
        return;
    }
    free(a->directory);
    free(a->email);
    for (unsigned i = 0; i < a->domainCount; i++) {
        free(a->domains[i]);
    }
    free(a->domains);
    free(a->storage);
    free(a->ca);
    free(a->challenge);
    free(a);
}
