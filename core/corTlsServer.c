/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS on listeners. TLS belongs to the listener, not to the protocol: a
 * listener with tls in the configuration gives its connections a TLS
 * transport (corListenerTransport), and the protocol reads and writes
 * that without knowing. Its ALPN name is the protocol's (CorProtocol.alpn).
 *
 * Each generation loads the certificates and keys of its configuration
 * (corTlsServersLoad, from corGenerationPrepare): `cor -t` runs the same
 * load and so reports every file that is missing, unreadable, not PEM, or
 * whose key does not match, at its file:line; a reload with such a file
 * fails in the new generation and leaves the running one serving; and a
 * reload picks up renewed certificates for the connections that follow.
 *
 * One SSL_CTX per certificate: the default one, which the handshake starts
 * on, and one per sni entry, switched to by the servername callback. All
 * of a listener's contexts are made alike (versions, ALPN, modes); session
 * tickets are the default context's (OpenSSL takes them from the context
 * the handshake started on), so resumption works across SNI names. The
 * server keeps no session cache: tickets carry the sessions (and with
 * session_tickets: false, nothing resumes). With tickets: REDIS, every
 * context encrypts them with the keys shared through Redis
 * (corTlsTickets.c), so sessions resume across instances.
 *
 * HTTP/3's handshake is GnuTLS's (modules/http/corHttp3Tls.c): it serves
 * what these contexts serve, through corListenerCert* at the end of this
 * file: the same choice by name (certPick), each certificate's chain and
 * key as PEM, numbered so that an ACME swap reaches it, and its staple.
 */
#include "corAcme.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* TLS 1.3 tickets sent after a full handshake: one is enough to resume,
 * and each costs an encryption. */
#define TICKETS_PER_HANDSHAKE 1

struct CorTlsServer {
    SSL_CTX** ctx;          /* [0] the default, then the sni entries */
    CorTlsOcsp** ocsp;      /* each one's stapling; NULL: none */
    CorTlsTickets* tickets; /* tls.tickets' keys; NULL: OpenSSL's own */
    CorAcme* acme;          /* the default's issuer; NULL: its files */
    char** names;           /* their names; names[0] is NULL */
    unsigned count;
    unsigned ticketLifetimeS; /* session_lifetime; 0: no tickets */
    unsigned char alpn[256];  /* the protocol's, in wire format */
    unsigned alpnLen;
    uint64_t handshakeTimeoutMs;
};

static CorTlsServer** servers;
static unsigned serverCount;

/* Whether host matches an sni name: equal, or "*.b.test" for one label
 * under b.test. Case does not count. */
static bool
nameMatches(const char* name, const char* host)
{
    const char* dot;

    if (strcasecmp(name, host) == 0) {
        return true;
    }
    if (strncmp(name, "*.", 2) != 0) {
        return false;
    }
    dot = strchr(host, '.');
    return dot != NULL && dot != host && strcasecmp(dot + 1, name + 2) == 0;
}

/* The certificate a handshake naming host gets: the first sni entry
 * that matches, else the default (0). HTTP/3's GnuTLS asks it too
 * (corListenerCertPick), so that both stacks choose alike. */
static unsigned
certPick(const CorTlsServer* server, const char* host)
{
    for (unsigned i = 1; host != NULL && i < server->count; i++) {
        if (nameMatches(server->names[i], host)) {
            return i;
        }
    }
    return 0;
}

static int
onServerName(SSL* ssl, int* alert, void* arg)
{
    const CorTlsServer* server = arg;
    const char* host = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    unsigned i;

    (void)alert;
    if (host == NULL) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    i = certPick(server, host);
    if (i > 0) {
        SSL_set_SSL_CTX(ssl, server->ctx[i]);
    }
    return SSL_TLSEXT_ERR_OK;
}

/* The protocol's name when the client offers it; a client that offers
 * only others is refused, as nginx does. */
static int
onAlpn(SSL* ssl, const unsigned char** out, unsigned char* outLen,
       const unsigned char* in, unsigned inLen, void* arg)
{
    const CorTlsServer* server = arg;
    unsigned char* chosen;

    if (corAcmeTlsAlpnServing(ssl)) {
        /* acme-tls/1, the one protocol offered (corAcmeTlsAlpn.c). */
        *out = in + 1;
        *outLen = in[0];
        return SSL_TLSEXT_ERR_OK;
    }
    if (SSL_select_next_proto(&chosen, outLen, server->alpn, server->alpnLen,
                              in, inLen)
        != OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

/* A key with a passphrase must not prompt on the terminal. */
static int
noPassphrase(char* buf, int size, int rwflag, void* arg)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)arg;
    return 0;
}

/* Whether path can be opened; else an error at the key's mark. */
static bool
fileReadable(const char* path, const CorConf* at, const char* key,
             CorConfErrors* e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        corConfErrorf(e, at, "%s: cannot read '%s': %s", key, path,
                      strerror(errno));
        return false;
    }
    close(fd);
    return true;
}

/* A PEM private key (never a passphrase prompt), or NULL. */
static EVP_PKEY*
keyRead(const char* path)
{
    FILE* f = fopen(path, "re");
    EVP_PKEY* pkey;

    if (f == NULL) {
        return NULL;
    }
    pkey = PEM_read_PrivateKey(f, NULL, noPassphrase, NULL);
    fclose(f);
    return pkey;
}

/* Load a certificate chain and its key into ctx, saying at the entry's
 * file:line what is wrong. Returns 0 or -1. */
static int
certLoad(SSL_CTX* ctx, const CorConfigCert* c, CorConfErrors* e)
{
    const CorConf* certAt = corConfGet(c->node, "certificate");
    const CorConf* keyAt = corConfGet(c->node, "key");
    const char* cert = c->certificate;
    const char* key = c->key;
    EVP_PKEY* pkey = NULL;
    char why[160];
    int rc = -1;

    if (!fileReadable(cert, certAt, "certificate", e)
        || !fileReadable(key, keyAt, "key", e)) {
        goto failed;
    }
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        corTlsWhy(why, sizeof(why), "cannot load");
        corConfErrorf(e, certAt,
                      "certificate: '%s' is not a PEM "
                      "certificate chain (%s)",
                      cert, why);
        goto failed;
    }
    pkey = keyRead(key);
    if (pkey == NULL) {
        corTlsWhy(why, sizeof(why), "cannot load");
        corConfErrorf(e, keyAt,
                      "key: '%s' is not a PEM private key "
                      "without a passphrase (%s)",
                      key, why);
        goto failed;
    }
    if (SSL_CTX_use_PrivateKey(ctx, pkey) != 1
        || SSL_CTX_check_private_key(ctx) != 1) {
        /* OpenSSL's last word here is "no certificate assigned" (the
         * failed use dropped the pair), which points the wrong way. */
        ERR_clear_error();
        corConfErrorf(e, keyAt,
                      "key: '%s' does not match the certificate "
                      "'%s': it is the private key of another certificate",
                      key, cert);
        goto failed;
    }
    rc = 0;

failed:
    EVP_PKEY_free(pkey);
    return rc;
}

/* Whether OpenSSL takes each ':'-separated name of list alone (set by
 * set on ctx): a list of TLS 1.3 suites or of groups that names one it
 * does not know is refused whole for groups, and taken without it for
 * suites; either way the name is the user's mistake, said here. */
static bool
eachNameTaken(SSL_CTX* ctx, const char* list, const char* key,
              int (*set)(SSL_CTX*, const char*), const CorConf* at,
              CorConfErrors* e)
{
    char name[128];
    char why[160];
    bool ok = true;

    for (const char* p = list; *p != '\0';) {
        size_t len = strcspn(p, ":");

        snprintf(name, sizeof(name), "%.*s", (int)len, p);
        ERR_clear_error();
        if (set(ctx, name) != 1) {
            corTlsWhy(why, sizeof(why), "refused");
            corConfErrorf(e, at, "%s: OpenSSL does not take '%s' (%s)", key,
                          name, why);
            ok = false;
        }
        p += len + (p[len] == ':');
    }
    return ok;
}

static int
setCiphersuites(SSL_CTX* ctx, const char* list)
{
    return SSL_CTX_set_ciphersuites(ctx, list);
}

static int
setGroups(SSL_CTX* ctx, const char* list)
{
    return SSL_CTX_set1_groups_list(ctx, list) == 1 ? 1 : 0;
}

/* The versions, the cipher and group lists and the session lifetime of
 * the tls mapping, which every context of the listener shares; an error
 * at the key's line with OpenSSL's reason. */
static bool
ctxTune(SSL_CTX* ctx, const CorConfigTls* tls, CorConfErrors* e)
{
    char why[160];
    bool ok = true;

    SSL_CTX_set_min_proto_version(ctx, (int)tls->minVersion);
    SSL_CTX_set_max_proto_version(ctx, (int)tls->maxVersion);
    /* A session, and the ticket that carries it (its lifetime hint), is
     * good this long; OpenSSL's default is 7200 s. */
    SSL_CTX_set_timeout(ctx, (long)tls->sessionLifetimeS);
    ERR_clear_error();
    if (tls->ciphers != NULL
        && SSL_CTX_set_cipher_list(ctx, tls->ciphers) != 1) {
        corTlsWhy(why, sizeof(why), "refused");
        corConfErrorf(e, corConfGet(tls->node, "ciphers"),
                      "ciphers: "
                      "OpenSSL takes no TLS 1.2 cipher of '%s' (%s)",
                      tls->ciphers, why);
        ok = false;
    }
    if (tls->ciphersuites != NULL) {
        ok &= eachNameTaken(ctx, tls->ciphersuites, "ciphersuites",
                            setCiphersuites,
                            corConfGet(tls->node, "ciphersuites"), e)
              && setCiphersuites(ctx, tls->ciphersuites) == 1;
    }
    if (tls->groups != NULL) {
        ok &= eachNameTaken(ctx, tls->groups, "groups", setGroups,
                            corConfGet(tls->node, "groups"), e)
              && setGroups(ctx, tls->groups) == 1;
    }
    ERR_clear_error();
    return ok;
}

/* The context of tls->certs[i], its stapling in server->ocsp[i]. */
static SSL_CTX*
ctxNew(CorTlsServer* server, const CorConfig* config, const CorConfigTls* tls,
       unsigned i, CorConfErrors* e)
{
    const CorConfigCert* c = &tls->certs[i];
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    CorConfErrors quiet = { 0 };
    bool tuned;

    if (ctx == NULL) {
        corConfErrorf(e, c->node,
                      "tls: cannot make a context (out of "
                      "memory)");
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION
                                 | SSL_OP_IGNORE_UNEXPECTED_EOF
                                 | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
                              | SSL_MODE_ENABLE_PARTIAL_WRITE
                              | SSL_MODE_RELEASE_BUFFERS);
    /* Read what the socket has, not a record header and then its body:
     * half the reads. recv drains OpenSSL's buffer before it says EAGAIN
     * (corTls.c), so nothing waits there unannounced. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (tls->sessionTickets) {
        SSL_CTX_set_num_tickets(ctx, TICKETS_PER_HANDSHAKE);
    } else {
        /* No tickets, and no cache for TLS 1.3's stateful ones: every
         * handshake is a full one. */
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    SSL_CTX_set_tlsext_servername_callback(ctx, onServerName);
    SSL_CTX_set_tlsext_servername_arg(ctx, server);
    if (server->alpnLen > 0) {
        SSL_CTX_set_alpn_select_cb(ctx, onAlpn, server);
    }
    /* The lists are the listener's: said once, at the default's turn. */
    tuned = ctxTune(ctx, tls, i == 0 ? e : &quiet);
    corConfErrorsFree(&quiet);
    if (i == 0 && tls->acme != NULL) {
        server->acme = tuned ? corAcmeNew(ctx, config, tls->acme, e) : NULL;
        if (server->acme == NULL) {
            SSL_CTX_free(ctx);
            return NULL;
        }
        return ctx;
    }
    if (!tuned || certLoad(ctx, c, e) != 0
        || (c->ocsp.node != NULL
            && (server->ocsp[i] = corTlsOcspNew(ctx, c, e)) == NULL)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static void
serverFree(CorTlsServer* server)
{
    if (server == NULL) {
        return;
    }
    for (unsigned i = 0; i < server->count; i++) {
        SSL_CTX_free(server->ctx[i]);
        corTlsOcspFree(server->ocsp[i]);
    }
    corTlsTicketsFree(server->tickets);
    corAcmeFree(server->acme);
    free(server->ctx);
    free(server->ocsp);
    free(server->names);
    free(server);
}

/* A listener's contexts; NULL after an error (every certificate is tried,
 * so that one run reports them all). */
static CorTlsServer*
serverNew(const CorConfig* config, const CorConfigListen* l, CorConfErrors* e)
{
    const CorProtocolEntry* protocol = corProtocolFind(l->protocol);
    const char* alpn = protocol != NULL ? protocol->protocol.alpn : NULL;
    CorTlsServer* server = calloc(1, sizeof(*server));
    bool ok = true;
    int len;

    if (server == NULL
        || (server->ctx = calloc(l->tls->certCount, sizeof(SSL_CTX*))) == NULL
        || (server->ocsp = calloc(l->tls->certCount, sizeof(CorTlsOcsp*)))
               == NULL
        || (server->names = calloc(l->tls->certCount, sizeof(char*))) == NULL) {
        corConfErrorf(e, l->node, "out of memory");
        serverFree(server);
        return NULL;
    }
    server->handshakeTimeoutMs = l->tls->handshakeTimeoutMs;
    server->ticketLifetimeS = l->tls->sessionTickets
                                  ? (unsigned)l->tls->sessionLifetimeS
                                  : 0;
    /* A protocol that speaks HTTP/2 lists "h2" first; http2: off
     * offers only what follows it. */
    if (alpn != NULL && !l->http2 && strncmp(alpn, "h2,", 3) == 0) {
        alpn += 3;
    }
    if (alpn != NULL) {
        len = corTlsAlpnWire(alpn, server->alpn, sizeof(server->alpn));
        server->alpnLen = len > 0 ? (unsigned)len : 0;
    }
    for (unsigned i = 0; i < l->tls->certCount; i++) {
        server->ctx[i] = ctxNew(server, config, l->tls, i, e);
        server->names[i] = l->tls->certs[i].name;
        ok &= server->ctx[i] != NULL;
        server->count++;
    }
    if (ok && l->tls->tickets != NULL) {
        server->tickets = corTlsTicketsNew(l->tls, e);
        ok = server->tickets != NULL;
        for (unsigned i = 0; ok && i < server->count; i++) {
            corTlsTicketsUse(server->tickets, server->ctx[i]);
        }
    }
    if (!ok) {
        serverFree(server);
        return NULL;
    }
    return server;
}

int
corTlsServersLoad(const CorConfig* config, CorConfErrors* errors)
{
    int rc = 0;

    servers = calloc(config->listenCount, sizeof(*servers));
    if (servers == NULL) {
        corConfErrorf(errors, NULL, "out of memory");
        return -1;
    }
    serverCount = config->listenCount;
    for (unsigned i = 0; i < config->listenCount; i++) {
        const CorConfigListen* l = &config->listen[i];

        if (l->tls == NULL) {
            continue;
        }
        servers[i] = serverNew(config, l, errors);
        if (servers[i] == NULL) {
            rc = -1;
        }
    }
    return rc;
}

CorTlsServer*
corTlsServerAt(unsigned index)
{
    return index < serverCount ? servers[index] : NULL;
}

void
corTlsServersStart(void)
{
    for (unsigned i = 0; i < serverCount; i++) {
        if (servers[i] != NULL && servers[i]->tickets != NULL) {
            corTlsTicketsStart(servers[i]->tickets);
        }
        if (servers[i] != NULL && servers[i]->acme != NULL) {
            corAcmeStart(servers[i]->acme);
        }
        for (unsigned k = 0; servers[i] != NULL && k < servers[i]->count; k++) {
            if (servers[i]->ocsp[k] != NULL) {
                corTlsOcspStart(servers[i]->ocsp[k]);
            }
        }
    }
}

int
corListenerTransport(const CorListener* l, CorTransport* t, int fd)
{
    SSL* ssl;

    if (l->tls == NULL) {
        corTransportPlain(t, fd);
        return 0;
    }
    ssl = SSL_new(l->tls->ctx[0]);
    if (ssl == NULL) {
        ERR_clear_error();
        return -ENOMEM;
    }
    SSL_set_accept_state(ssl);
    return corTlsTransportInit(t, fd, ssl);
}

uint64_t
corListenerHandshakeTimeoutMs(const CorListener* l)
{
    return l->tls != NULL ? l->tls->handshakeTimeoutMs : 0;
}

/* ---- For a TLS stack beside OpenSSL (HTTP/3's GnuTLS) -------------------- */

unsigned
corListenerCertCount(const CorListener* l)
{
    return l->tls != NULL ? l->tls->count : 0;
}

unsigned
corListenerCertPick(const CorListener* l, const char* host)
{
    return certPick(l->tls, host);
}

uint64_t
corListenerCertSerial(const CorListener* l, unsigned index)
{
    return index == 0 && l->tls->acme != NULL ? corAcmeSerial(l->tls->acme) : 0;
}

/* What bio holds, as a string (malloc'd), or NULL. */
static char*
bioString(BIO* bio)
{
    char* data;
    long len = BIO_get_mem_data(bio, &data);

    return len > 0 ? strndup(data, (size_t)len) : NULL;
}

/* cert, then chain, in PEM into *chainP; key's PKCS#8 PEM into *keyP. */
static int
pemWrite(X509* cert, STACK_OF(X509) * chain, EVP_PKEY* key, char** chainP,
         char** keyP)
{
    BIO* certs = BIO_new(BIO_s_mem());
    BIO* keys = BIO_new(BIO_s_mem());
    bool ok = certs != NULL && keys != NULL && PEM_write_bio_X509(certs, cert)
              && PEM_write_bio_PrivateKey(keys, key, NULL, NULL, 0, NULL, NULL);

    for (int i = 0; ok && i < sk_X509_num(chain); i++) {
        ok = PEM_write_bio_X509(certs, sk_X509_value(chain, i));
    }
    *chainP = ok ? bioString(certs) : NULL;
    *keyP = ok ? bioString(keys) : NULL;
    BIO_free(certs);
    BIO_free_all(keys); /* a memory BIO's buffer is cleansed when freed */
    ERR_clear_error();
    if (*chainP == NULL || *keyP == NULL) {
        corListenerCertPemFree(*chainP, *keyP);
        return -1;
    }
    return 0;
}

int
corListenerCertPem(const CorListener* l, unsigned index, char** chainP,
                   char** keyP, uint64_t* serialP)
{
    const CorTlsServer* server = l->tls;
    X509* cert;
    STACK_OF(X509)* chain = NULL;
    EVP_PKEY* key;
    int rc;

    *serialP = 0;
    if (index == 0 && server->acme != NULL) {
        corAcmeServed(server->acme, &cert, &chain, &key, serialP);
    } else {
        cert = SSL_CTX_get0_certificate(server->ctx[index]);
        key = SSL_CTX_get0_privatekey(server->ctx[index]);
        SSL_CTX_get0_chain_certs(server->ctx[index], &chain);
        X509_up_ref(cert);
        EVP_PKEY_up_ref(key);
        chain = X509_chain_up_ref(chain);
    }
    rc = cert != NULL && key != NULL ? pemWrite(cert, chain, key, chainP, keyP)
                                     : -1;
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    return rc;
}

void
corListenerCertPemFree(char* chain, char* key)
{
    free(chain);
    if (key != NULL) {
        OPENSSL_cleanse(key, strlen(key));
        free(key);
    }
}

int
corListenerCertStaple(const CorListener* l, unsigned index, uint64_t serial,
                      void* (*alloc)(size_t), unsigned char** derP)
{
    const CorTlsServer* server = l->tls;

    *derP = NULL;
    if (index == 0 && server->acme != NULL) {
        return corAcmeStaple(server->acme, serial, alloc, derP);
    }
    return server->ocsp[index] != NULL
               ? corTlsOcspCopy(server->ocsp[index], alloc, derP)
               : -1;
}

unsigned
corListenerTicketLifetimeS(const CorListener* l)
{
    return l->tls->ticketLifetimeS;
}
