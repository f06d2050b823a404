/* SPDX-License-Identifier: Apache-2.0 */
/*
 * QUIC's handshake through GnuTLS: the one place cor uses GnuTLS.
 * Debian 12's OpenSSL 3.0 has no QUIC API, and ngtcp2 0.12's crypto
 * helpers there are for GnuTLS, wolfSSL, BoringSSL and quictls; GnuTLS is
 * Debian's (docs/http3.md says what changes with OpenSSL 3.5).
 *
 * GnuTLS serves what OpenSSL serves on the same listener: each of its
 * certificates (the default, the sni entries) is a credential of the
 * loop's own, made from the PEM the core writes of OpenSSL's
 * (corListenerCertPem); a handshake gets the one the core picks for its
 * SNI (corListenerCertPick, OpenSSL's own choice), its OCSP staple is
 * the one OpenSSL staples (corListenerCertStaple), and a certificate
 * that ACME swaps in is made again on each loop at the next handshake
 * that needs it (its serial changed). A credential is counted: the
 * endpoint holds one, each session one, so a swap frees none that a
 * session still serves.
 */
#include "corHttp3Int.h"

#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <pthread.h>

/* TLS 1.3 only (QUIC's), without the middlebox compatibility mode
 * (RFC 9001 8.4 forbids it), the AEADs ngtcp2 speaks. */
#define H3_PRIORITY                                                            \
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:"    \
    "+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-CCM"

/* One of the listener's certificates as GnuTLS serves it; on one loop. */
struct Http3Cert {
    gnutls_certificate_credentials_t cred;
    const CorListener* l;
    unsigned index;  /* corListenerCertPick's */
    uint64_t serial; /* corListenerCertSerial's when it was made */
    unsigned refs;   /* the endpoint's, and each session's serving it */
};

static const gnutls_datum_t alpnH3 = { .data = (unsigned char*)"h3",
                                       .size = 2 };

/* The session ticket key of every listener and loop of the generation:
 * a client resumes on whichever loop its packets reach. GnuTLS derives
 * the keys it encrypts with from it, turning them as tickets expire. */
static gnutls_datum_t ticketKey;
static pthread_once_t ticketKeyOnce = PTHREAD_ONCE_INIT;

static void
ticketKeyMake(void)
{
    if (gnutls_session_ticket_key_generate(&ticketKey) < 0) {
        ticketKey = (gnutls_datum_t){ 0 };
    }
}

static void
certDrop(Http3Cert* cert)
{
    if (cert != NULL && --cert->refs == 0) {
        gnutls_certificate_free_credentials(cert->cred);
        free(cert);
    }
}

/* The staple OpenSSL serves with the certificate (none when ACME swapped
 * another in since this one was made). */
static int
onStatus(gnutls_session_t session, void* arg, gnutls_datum_t* response)
{
    Http3Cert* cert = arg;
    unsigned char* der;
    int len = corListenerCertStaple(cert->l, cert->index, cert->serial,
                                    gnutls_malloc, &der);

    (void)session;
    if (len < 0) {
        return GNUTLS_E_NO_CERTIFICATE_STATUS;
    }
    *response = (gnutls_datum_t){ .data = der, .size = (unsigned)len };
    return 0;
}

/* The listener's certificate index as it is served now, a credential of
 * its own; NULL (logged) when GnuTLS does not take it. */
static Http3Cert*
certMake(const CorListener* l, unsigned index)
{
    Http3Cert* cert = calloc(1, sizeof(*cert));
    char* chain = NULL;
    char* key = NULL;
    int rc = GNUTLS_E_MEMORY_ERROR;

    if (cert != NULL
        && corListenerCertPem(l, index, &chain, &key, &cert->serial) == 0) {
        gnutls_datum_t c = { .data = (unsigned char*)chain,
                             .size = (unsigned)strlen(chain) };
        gnutls_datum_t k = { .data = (unsigned char*)key,
                             .size = (unsigned)strlen(key) };

        rc = gnutls_certificate_allocate_credentials(&cert->cred);
        if (rc == 0) {
            rc = gnutls_certificate_set_x509_key_mem2(cert->cred, &c, &k,
                                                      GNUTLS_X509_FMT_PEM, NULL,
                                                      0);
        }
        corListenerCertPemFree(chain, key);
    }
    if (rc < 0) {
        corLog(COR_LOG_ERROR,
               "http3: %s: GnuTLS does not take certificate %u: %s",
               corListenerAddress(l), index, gnutls_strerror(rc));
        if (cert != NULL && cert->cred != NULL) {
            gnutls_certificate_free_credentials(cert->cred);
        }
        free(cert);
        return NULL;
    }
    gnutls_certificate_set_ocsp_status_request_function2(cert->cred, 0,
                                                         onStatus, cert);
    cert->l = l;
    cert->index = index;
    cert->refs = 1;
    return cert;
}

/* ep's certificate index, made again first when another was swapped in
 * since (ACME); the one it has when that fails. */
static Http3Cert*
certServed(Http3Endpoint* ep, unsigned index)
{
    Http3Cert* fresh;

    if (corListenerCertSerial(ep->l, index) != ep->certs[index]->serial
        && (fresh = certMake(ep->l, index)) != NULL) {
        certDrop(ep->certs[index]);
        ep->certs[index] = fresh;
    }
    return ep->certs[index];
}

/* Serve cert on c's handshake (a reference of c's). */
static int
certUse(Http3Conn* c, Http3Cert* cert)
{
    if (cert == c->cert) {
        return 0;
    }
    if (gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, cert->cred)
        != 0) {
        return -1;
    }
    cert->refs++;
    certDrop(c->cert);
    c->cert = cert;
    return 0;
}

int
corHttp3TlsLoad(Http3Endpoint* ep)
{
    unsigned count = corListenerCertCount(ep->l);

    ep->certs = calloc(count, sizeof(*ep->certs));
    if (ep->certs == NULL) {
        return -1;
    }
    for (; ep->certCount < count; ep->certCount++) {
        ep->certs[ep->certCount] = certMake(ep->l, ep->certCount);
        if (ep->certs[ep->certCount] == NULL) {
            corHttp3TlsFree(ep);
            return -1;
        }
    }
    if (corListenerTicketLifetimeS(ep->l) > 0) {
        pthread_once(&ticketKeyOnce, ticketKeyMake);
    }
    return 0;
}

void
corHttp3TlsFree(Http3Endpoint* ep)
{
    for (unsigned i = 0; i < ep->certCount; i++) {
        certDrop(ep->certs[i]);
    }
    free(ep->certs);
    ep->certs = NULL;
    ep->certCount = 0;
}

static ngtcp2_conn*
quicOf(ngtcp2_crypto_conn_ref* ref)
{
    return ((Http3Conn*)ref->user_data)->quic;
}

/* The ClientHello came: the certificate its SNI names, as OpenSSL's
 * servername callback picks it. */
static int
onHello(gnutls_session_t session)
{
    ngtcp2_crypto_conn_ref* ref = gnutls_session_get_ptr(session);
    Http3Conn* c = ref->user_data;
    char host[256];
    size_t len = sizeof(host);
    unsigned type;
    bool named = gnutls_server_name_get(session, host, &len, &type, 0) == 0
                 && type == GNUTLS_NAME_DNS;
    unsigned index = corListenerCertPick(c->ep->l, named ? host : NULL);

    return certUse(c, certServed(c->ep, index)) == 0 ? 0
                                                     : GNUTLS_E_INTERNAL_ERROR;
}

/* Tickets as the listener's session_tickets and session_lifetime say,
 * sent by GnuTLS after the handshake. No early data (0-RTT):
 * docs/http3.md says why. */
int
corHttp3TlsSession(Http3Conn* c)
{
    /* The key is read only where this loop made sure of it
     * (corHttp3TlsLoad's pthread_once for this listener). */
    unsigned ticketS = corListenerTicketLifetimeS(c->ep->l);

    if (ticketS > 0 && ticketKey.data == NULL) {
        ticketS = 0; /* GnuTLS could not make it */
    }

    if (gnutls_init(&c->tls,
                    GNUTLS_SERVER | GNUTLS_NO_END_OF_EARLY_DATA
                        | (ticketS == 0 ? GNUTLS_NO_AUTO_SEND_TICKET : 0))
        != 0) {
        c->tls = NULL;
        return -1;
    }
    c->ref = (ngtcp2_crypto_conn_ref){ .get_conn = quicOf, .user_data = c };
    if (gnutls_priority_set_direct(c->tls, H3_PRIORITY, NULL) != 0
        || ngtcp2_crypto_gnutls_configure_server_session(c->tls) != 0
        /* The default until the ClientHello names another. */
        || certUse(c, certServed(c->ep, 0)) != 0
        || (ticketS > 0
            && gnutls_session_ticket_enable_server(c->tls, &ticketKey) != 0)
        /* A client that offers no h3 fails the handshake. */
        || gnutls_alpn_set_protocols(c->tls, &alpnH3, 1,
                                     GNUTLS_ALPN_MANDATORY
                                         | GNUTLS_ALPN_SERVER_PRECEDENCE)
               != 0) {
        return -1;
    }
    if (ticketS > 0) {
        gnutls_db_set_cache_expiration(c->tls, (int)ticketS);
    }
    gnutls_handshake_set_post_client_hello_function(c->tls, onHello);
    gnutls_session_set_ptr(c->tls, &c->ref);
    ngtcp2_conn_set_tls_native_handle(c->quic, c->tls);
    return 0;
}

void
corHttp3TlsSessionFree(Http3Conn* c)
{
    if (c->tls != NULL) {
        gnutls_deinit(c->tls);
        c->tls = NULL;
    }
    certDrop(c->cert);
    c->cert = NULL;
}
