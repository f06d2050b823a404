/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Automatic HTTPS inside the core: a TLS listener whose tls mapping has
 * acme gets its certificate from an ACME directory (RFC 8555) and keeps
 * it fresh. The pieces, each a file: the JWS that signs every request
 * (corAcmeJws.c), the exchanges with the directory, nonces and error
 * documents (corAcmeClient.c), an order from account to certificate
 * (corAcmeOrder.c), the proof of a new certificate before it is served
 * (corAcmeCheck.c), renewal information (corAcmeAri.c), the files under storage
 * (corAcmeStore.c), the HTTP-01 answers of the plain listeners
 * (corAcmeHttp01.c), and the listener's side: the certificate it serves,
 * swapped at run time, and the task that orders (corAcme.c). Internal to the
 * core.
 */
#ifndef COR_ACME_H
#define COR_ACME_H

#include "corCoreInt.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <time.h>

/* ---- JWS (corAcmeJws.c) -------------------------------------------------- */

/* base64url without padding of len bytes; malloc'd, NULL without memory. */
char* corAcmeB64(const void* data, size_t len);

/* A P-256 key made now; NULL without memory. */
EVP_PKEY* corAcmeKeyNew(void);

/* The account key's public JWK, as JSON text in the member order its
 * thumbprint hashes (RFC 7638), and that thumbprint (base64url, 43
 * characters and a NUL). Returns 0 or -1. */
int corAcmeJwk(EVP_PKEY* key, char** jwkP, char thumbprint[48]);

/* A flattened JWS (RFC 7515) of payload (NULL: the empty POST-as-GET
 * payload), ES256 over key, its protected header naming url and nonce,
 * and jwk (the account not yet made) or kid. malloc'd JSON, or NULL. */
char* corAcmeJwsSign(EVP_PKEY* key, const char* jwk, const char* kid,
                     const char* nonce, const char* url, const char* payload);

/* ---- Exchanges (corAcmeClient.c) ----------------------------------------- */

typedef struct {
    const CorConfigAcme* config;
    CorTlsClient* tls; /* trusting config->ca; NULL: the default */
    EVP_PKEY* accountKey;
    char* jwk;
    char thumbprint[48];
    char* kid; /* the account's URL, once made */
    json_t* directory;
    char* nonce;      /* the next request's, from the last answer */
    long retryAfterS; /* the last answer's Retry-After; 0: none */
    bool tlsAlpn;     /* prove names over TLS-ALPN-01, not HTTP-01 */
    char* replaces;   /* the ARI id of the certificate a new order
                         replaces (RFC 9773 5); NULL: none */
    char why[512];    /* the last failure, for the log */
} CorAcmeClient;

typedef struct {
    int status;
    json_t* json;   /* the body when it is JSON; NULL otherwise */
    char* body;     /* the body as it came (a certificate chain) */
    char* location; /* its Location; NULL: none */
} CorAcmeReply;

/* Set c up (config, the trust; the account key is the caller's) and read
 * the directory. Returns 0, or -1 with c->why said. May yield. */
int corAcmeClientOpen(CorAcmeClient* c, const CorConfigAcme* config,
                      EVP_PKEY* accountKey);
void corAcmeClientClose(CorAcmeClient* c);

/* The directory's URL for name ("newOrder"), or NULL. */
const char* corAcmeDirectoryUrl(const CorAcmeClient* c, const char* name);

/* A signed POST of payload (NULL: POST-as-GET) to url: a badNonce is
 * tried again with the nonce it brought; an error document is said in
 * c->why. Returns 0 with a 2xx in *reply (the caller frees it with
 * corAcmeReplyFree), or -1. May yield. */
int corAcmePost(CorAcmeClient* c, const char* url, const char* payload,
                CorAcmeReply* reply);
void corAcmeReplyFree(CorAcmeReply* reply);

/* An unsigned GET of url (renewalInfo): 0 with a 200 in *reply, or -1
 * with c->why said (the error document of any other status). May yield. */
int corAcmeGet(CorAcmeClient* c, const char* url, CorAcmeReply* reply);

/* ---- Renewal information, RFC 9773 (corAcmeAri.c) ------------------------ */

/* cert's ARI identifier: base64url of its authority key identifier, a
 * dot, base64url of its serial's DER bytes. malloc'd; NULL without an
 * authority key identifier or memory. */
char* corAcmeAriId(X509* cert);

/* The time to renew at, picked at random in info's suggestedWindow.
 * Returns 0, or -1 with why said. */
int corAcmeAriWindow(const json_t* info, time_t* atP, char* why, size_t whyLen);

/* ---- An order (corAcmeOrder.c) ------------------------------------------- */

/* The account (made or found), an order for the configured names, its
 * authorizations proved over HTTP-01, the finalize with a CSR of certKey,
 * and the chain downloaded: PEM into *pemP (malloc'd). Returns 0, or -1
 * with c->why said. May yield. */
int corAcmeOrder(CorAcmeClient* c, EVP_PKEY* certKey, char** pemP);

/* ---- Storage (corAcmeStore.c) -------------------------------------------- */

/* The PEM private key at dir/name, made and written (0600) when there is
 * none. NULL with why said. */
EVP_PKEY* corAcmeStoreKey(const char* dir, const char* name, char* why,
                          size_t whyLen);

/* Write data to dir/name (0600) whole, through a temporary file. Returns
 * 0 or -errno. */
int corAcmeStoreWrite(const char* dir, const char* name, const char* data,
                      size_t len);

/* The certificate chain in pem (or, pem NULL, the file dir/name) when it
 * covers every name of a and key is its key: its leaf into *certP and
 * the rest into *chainP. Returns 0, or -1 with why said. */
int corAcmeChainRead(const char* dir, const char* name, const char* pem,
                     const CorConfigAcme* a, EVP_PKEY* key, X509** certP,
                     STACK_OF(X509) * *chainP, char* why, size_t whyLen);

/* Make the storage folder (0700) when it is not there. Returns 0 or
 * -errno. */
int corAcmeStoreDir(const char* dir);

/* ---- The proof before serving (corAcmeCheck.c) --------------------------- */

/* Whether cert (key, chain) works: a handshake in memory with listener's
 * context for each of a's names, the client verifying the chain up to its
 * top and the name. Returns 0, or -1 with why said. */
int corAcmeHandshakeCheck(struct ssl_ctx_st* listener, const CorConfigAcme* a,
                          X509* cert, STACK_OF(X509) * chain, EVP_PKEY* key,
                          char* why, size_t whyLen);

/* ---- HTTP-01 (corAcmeHttp01.c) ------------------------------------------- */

/* Answer token with keyAuth on the plain listeners from now on (copied,
 * and written under storage for the instances that share it); 0 or
 * -ENOMEM. Remove: no more. Any thread. */
int corAcmeHttp01Add(const char* storage, const char* token,
                     const char* keyAuth);
void corAcmeHttp01Remove(const char* storage, const char* token);

/* Look for tokens in storage's files too (an acme listener's). */
void corAcmeHttp01Storage(const char* storage);

/* Answer r (a plain listener's) when it asks for a published token under
 * /.well-known/acme-challenge/ (its key authorization, 200); any other
 * path, or a token not published, goes on to the routes. Whether it
 * answered. */
bool corAcmeHttp01Answer(CorRequest* r);

/* ---- TLS-ALPN-01 (corAcmeTlsAlpn.c) ------------------------------------- */

/* Answer acme-tls/1 handshakes for name with keyAuth's challenge
 * certificate from now on; 0 or -ENOMEM. Remove: no more. Any thread. */
int corAcmeTlsAlpnAdd(const char* name, const char* keyAuth);
void corAcmeTlsAlpnRemove(const char* name);

/* The ClientHello callback of an acme listener's context; and whether a
 * handshake is one it took (the certificate and ALPN callbacks leave it
 * be). */
int corAcmeTlsAlpnHello(struct ssl_st* ssl, int* alert, void* arg);
bool corAcmeTlsAlpnServing(struct ssl_st* ssl);

/* ---- The listener (corAcme.c) -------------------------------------------- */

typedef struct CorAcme CorAcme;

/* A listener's acme: ctx serves the stored certificate, else a temporary
 * self-signed one, from the next handshake on; the checks of the
 * configuration (the CA file, the storage, a plain listener for
 * HTTP-01) said at its marks. NULL after an error. */
CorAcme* corAcmeNew(struct ssl_ctx_st* ctx, const CorConfig* config,
                    const CorConfigAcme* a, CorConfErrors* e);
void corAcmeFree(CorAcme* acme);

/* For a TLS stack beside OpenSSL (HTTP/3's GnuTLS, through
 * corListenerCertPem): the number of the certificate served, one more at
 * each swap; that certificate, its chain and key (each the caller's to
 * free) and its number; and its OCSP staple, in alloc's memory, while
 * serial is still the one served (its length, or -1). Any thread. */
uint64_t corAcmeSerial(CorAcme* acme);
void corAcmeServed(CorAcme* acme, X509** certP, STACK_OF(X509) * *chainP,
                   EVP_PKEY** keyP, uint64_t* serialP);
int corAcmeStaple(CorAcme* acme, uint64_t serial, void* (*alloc)(size_t),
                  unsigned char** derP);

/* Start the task that orders and renews (a thread of the generation). */
int corAcmeStart(CorAcme* acme);

/* The listeners' certificates' expiry per name, their orders and
 * failures, for /metrics. */
void corAcmeEmit(CorMetricsOut* out);

#endif /* COR_ACME_H */
