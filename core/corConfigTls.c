/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A listener's tls mapping: its certificates (the default and the sni
 * entries, each with its OCSP staple), the versions, cipher and group
 * lists, session tickets and their lifetime, the handshake's deadline.
 * Kinds, words and ranges are checked here; whether the files load and
 * whether OpenSSL takes the lists is the generation's to check
 * (corTlsServer.c), which `cor -t` runs too.
 */
#include "corConfigRead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* session_lifetime's bounds: TLS 1.3 tickets live a week at most (RFC
 * 8446 4.6.1); nginx's ssl_session_timeout is the default. */
#define SESSION_LIFETIME_DEFAULT_MS (300 * 1000)
#define SESSION_LIFETIME_MAX_MS (7ULL * 24 * 3600 * 1000)

#define TLS_1_2 0x0303
#define TLS_1_3 0x0304

/* ocsp: { file: PATH } or { fetch: on [, issuer: PATH] } of a certificate
 * mapping. */
static void
readOcsp(CorConfigOcsp* o, const CorConf* map, const char* where,
         CorConfErrors* e)
{
    static const char* const keys[] = { "file", "fetch", "issuer", NULL };
    const CorConf* ocsp = corConfMap(map, "ocsp", e);
    char ocspWhere[112];

    if (ocsp == NULL) {
        return;
    }
    snprintf(ocspWhere, sizeof(ocspWhere), "%s.ocsp", where);
    o->node = ocsp;
    corConfigSetPath(&o->file, ocsp, "file", e);
    o->fetch = corConfBool(ocsp, "fetch", false, e);
    corConfigSetPath(&o->issuer, ocsp, "issuer", e);
    if (o->file != NULL && o->fetch) {
        corConfErrorf(e, ocsp,
                      "%s: file and fetch: on exclude each other "
                      "(a staple comes from one place)",
                      ocspWhere);
    } else if (o->file == NULL && !o->fetch) {
        corConfErrorf(e, ocsp,
                      "%s: expected { file: PATH } (a DER OCSP "
                      "response) or { fetch: on }",
                      ocspWhere);
    } else if (o->issuer != NULL && !o->fetch) {
        corConfErrorf(e, corConfGet(ocsp, "issuer"),
                      "%s: issuer verifies "
                      "a fetched response: it needs fetch: on",
                      ocspWhere);
    }
    corConfUnknownKeys(ocsp, ocspWhere, keys, e);
}

/* One certificate: { certificate: FILE, key: FILE, ocsp } (and, in sni,
 * a name). Whether the files load is the generation's to check. */
static void
readCert(CorConfigCert* c, const CorConf* map, const char* where,
         CorConfErrors* e)
{
    c->node = map;
    if (corConfigRequired(map, "certificate", where, "a PEM file", e)) {
        corConfigSetPath(&c->certificate, map, "certificate", e);
    }
    if (corConfigRequired(map, "key", where, "a PEM file", e)) {
        corConfigSetPath(&c->key, map, "key", e);
    }
    readOcsp(&c->ocsp, map, where, e);
}

static void
readSni(CorConfigTls* t, const CorConf* tls, const char* where,
        CorConfErrors* e)
{
    static const char* const keys[] = {
        "name", "certificate", "key", "ocsp", NULL,
    };
    const CorConf* sni = corConfSeq(tls, "sni", e);
    size_t count = sni != NULL ? corConfCount(sni) : 0;

    t->certs = calloc(count + 1, sizeof(*t->certs));
    if (t->certs == NULL) {
        corConfErrorf(e, NULL, "out of memory reading the configuration");
        return;
    }
    t->certCount = 1;
    for (size_t i = 0; i < count; i++) {
        const CorConf* entry = corConfAt(sni, i);
        CorConfigCert* c = &t->certs[t->certCount];
        char sniWhere[96];

        snprintf(sniWhere, sizeof(sniWhere), "%s.sni[%zu]", where, i);
        if (corConfKind(entry) != COR_CONF_MAP) {
            corConfErrorf(e, entry,
                          "%s: expected a mapping such as { name: "
                          "example.com, certificate: FILE, key: FILE }",
                          sniWhere);
            continue;
        }
        t->certCount++;
        if (corConfigRequired(entry, "name", sniWhere, "a host name", e)) {
            corConfigSetString(&c->name,
                               corConfigNonEmpty(entry, "name", NULL,
                                                 "a host name", e),
                               e);
        }
        readCert(c, entry, sniWhere, e);
        corConfUnknownKeys(entry, sniWhere, keys, e);
    }
}

/* With acme the default certificate is the issuer's: files for it too
 * would leave one of the two unused. */
static void
acmeAlone(const CorConf* tls, const char* where, CorConfErrors* e)
{
    static const char* const files[] = { "certificate", "key", "ocsp", NULL };

    for (unsigned i = 0; files[i] != NULL; i++) {
        if (corConfGet(tls, files[i]) != NULL) {
            corConfErrorf(e, corConfGet(tls, files[i]),
                          "%s: %s and acme exclude each other (acme "
                          "obtains the certificate and its key)",
                          where, files[i]);
        }
    }
}

/* The versions taken: protocols: [TLSv1.2, TLSv1.3] (any of them), or
 * the older min_version: "1.2" | "1.3"; not both. */
static void
readVersions(CorConfigTls* t, const CorConf* tls, CorConfErrors* e)
{
    static const char* const versions[] = { "1.2", "1.3", NULL };
    const CorConf* list = corConfSeq(tls, "protocols", e);

    t->minVersion = strcmp(corConfigOneOf(tls, "min_version", "1.2", versions,
                                          e),
                           "1.3")
                            == 0
                        ? TLS_1_3
                        : TLS_1_2;
    t->maxVersion = TLS_1_3;
    if (list == NULL) {
        return;
    }
    if (corConfGet(tls, "min_version") != NULL) {
        corConfErrorf(e, list,
                      "protocols: min_version says the same "
                      "thing: keep one of them");
        return;
    }
    if (corConfCount(list) == 0) {
        corConfErrorf(e, list,
                      "protocols: expected a list such as "
                      "[TLSv1.2, TLSv1.3], got []");
        return;
    }
    t->minVersion = TLS_1_3;
    t->maxVersion = TLS_1_2;
    for (size_t i = 0; i < corConfCount(list); i++) {
        const CorConf* item = corConfAt(list, i);
        const char* text = corConfKind(item) == COR_CONF_SCALAR
                               ? corConfText(item)
                               : "";
        unsigned v = strcmp(text, "TLSv1.2") == 0   ? TLS_1_2
                     : strcmp(text, "TLSv1.3") == 0 ? TLS_1_3
                                                    : 0;

        if (v == 0) {
            corConfErrorf(e, item,
                          "protocols: expected TLSv1.2 or TLSv1.3 "
                          "(older versions are not taken), got '%s'",
                          text);
            continue;
        }
        t->minVersion = v < t->minVersion ? v : t->minVersion;
        t->maxVersion = v > t->maxVersion ? v : t->maxVersion;
    }
}

void
corConfigTlsRead(CorConfigListen* l, const CorConf* tls, const char* where,
                 CorConfErrors* e)
{
    static const char* const keys[] = {
        "certificate",
        "key",
        "sni",
        "min_version",
        "protocols",
        "ciphers",
        "ciphersuites",
        "groups",
        "handshake_timeout",
        "session_tickets",
        "session_lifetime",
        "ocsp",
        "tickets",
        "acme",
        NULL,
    };
    CorConfigTls* t;
    char tlsWhere[64];

    snprintf(tlsWhere, sizeof(tlsWhere), "%s.tls", where);
    t = l->tls = calloc(1, sizeof(*l->tls));
    if (t == NULL) {
        corConfErrorf(e, NULL, "out of memory reading the configuration");
        return;
    }
    t->node = tls;
    readSni(t, tls, tlsWhere, e);
    t->acme = corConfigAcmeRead(tls, tlsWhere, e);
    if (t->acme != NULL) {
        acmeAlone(tls, tlsWhere, e);
    } else if (t->certs != NULL) {
        readCert(&t->certs[0], tls, tlsWhere, e);
    }
    readVersions(t, tls, e);
    corConfigSetString(&t->ciphers,
                       corConfigNonEmpty(tls, "ciphers", NULL,
                                         "an OpenSSL cipher list", e),
                       e);
    corConfigSetString(&t->ciphersuites,
                       corConfigNonEmpty(tls, "ciphersuites", NULL,
                                         "TLS 1.3 cipher suites", e),
                       e);
    corConfigSetString(&t->groups,
                       corConfigNonEmpty(tls, "groups", NULL,
                                         "key exchange groups", e),
                       e);
    t->handshakeTimeoutMs = corConfDurationMs(tls, "handshake_timeout", 10000,
                                              1, 3600000, e);
    t->sessionTickets = corConfBool(tls, "session_tickets", true, e);
    t->sessionLifetimeS =
        (unsigned)(corConfDurationMs(tls, "session_lifetime",
                                     SESSION_LIFETIME_DEFAULT_MS, 1000,
                                     SESSION_LIFETIME_MAX_MS, e)
                   / 1000);
    corConfigSetString(&t->tickets,
                       corConfigNonEmpty(tls, "tickets", NULL,
                                         "a Redis URL or server name", e),
                       e);
    if (t->tickets != NULL && !t->sessionTickets) {
        corConfErrorf(e, corConfGet(tls, "tickets"),
                      "%s: tickets: session_tickets is false: there are no "
                      "tickets to share (drop one of the two)",
                      tlsWhere);
    }
    corConfUnknownKeys(tls, tlsWhere, keys, e);
}

void
corConfigTlsFree(CorConfigTls* tls)
{
    if (tls == NULL) {
        return;
    }
    for (unsigned k = 0; k < tls->certCount; k++) {
        free(tls->certs[k].name);
        free(tls->certs[k].certificate);
        free(tls->certs[k].key);
        free(tls->certs[k].ocsp.file);
        free(tls->certs[k].ocsp.issuer);
    }
    free(tls->certs);
    free(tls->ciphers);
    free(tls->ciphersuites);
    free(tls->groups);
    free(tls->tickets);
    corConfigAcmeFree(tls->acme);
    free(tls);
}
