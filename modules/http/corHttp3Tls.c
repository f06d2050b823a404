/* SPDX-License-Identifier: Apache-2.0 */
/*
 * QUIC's handshake through GnuTLS: the one place cor uses GnuTLS.
 * Debian 12's OpenSSL 3.0 has no QUIC API, and ngtcp2 0.12's crypto
 * helpers there are for GnuTLS, wolfSSL, BoringSSL and quictls; GnuTLS is
 * Debian's (docs/http3.md says what changes with OpenSSL 3.5). Each
 * endpoint loads its listener's default certificate and key files
 * itself; SNI's other certificates, OCSP stapling and session tickets
 * are the TCP side's only.
 */
#include "corHttp3Int.h"

#include <ngtcp2/ngtcp2_crypto_gnutls.h>

/* TLS 1.3 only (QUIC's), without the middlebox compatibility mode
 * (RFC 9001 8.4 forbids it), the AEADs ngtcp2 speaks. */
#define H3_PRIORITY                                                            \
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:"    \
    "+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-CCM"

static const gnutls_datum_t alpnH3 = { .data = (unsigned char*)"h3",
                                       .size = 2 };

int
corHttp3TlsLoad(Http3Endpoint* ep)
{
    const char* cert = corListenerCertificate(ep->l);
    const char* key = corListenerKey(ep->l);
    int rc;

    if (cert == NULL || key == NULL) {
        corLog(COR_LOG_ERROR,
               "http3: %s: no certificate and key files (an ACME listener "
               "has no HTTP/3 yet)",
               corListenerAddress(ep->l));
        return -1;
    }
    rc = gnutls_certificate_allocate_credentials(&ep->cred);
    if (rc == 0) {
        rc = gnutls_certificate_set_x509_key_file(ep->cred, cert, key,
                                                  GNUTLS_X509_FMT_PEM);
    }
    if (rc < 0) {
        corLog(COR_LOG_ERROR, "http3: %s: GnuTLS cannot load %s and %s: %s",
               corListenerAddress(ep->l), cert, key, gnutls_strerror(rc));
        corHttp3TlsFree(ep);
        return -1;
    }
    return 0;
}

void
corHttp3TlsFree(Http3Endpoint* ep)
{
    if (ep->cred != NULL) {
        gnutls_certificate_free_credentials(ep->cred);
        ep->cred = NULL;
    }
}

static ngtcp2_conn*
quicOf(ngtcp2_crypto_conn_ref* ref)
{
    return ((Http3Conn*)ref->user_data)->quic;
}

int
corHttp3TlsSession(Http3Conn* c)
{
    if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET
                                 | GNUTLS_NO_END_OF_EARLY_DATA)
        != 0) {
        c->tls = NULL;
        return -1;
    }
    c->ref = (ngtcp2_crypto_conn_ref){ .get_conn = quicOf, .user_data = c };
    if (gnutls_priority_set_direct(c->tls, H3_PRIORITY, NULL) != 0
        || ngtcp2_crypto_gnutls_configure_server_session(c->tls) != 0
        || gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->ep->cred)
               != 0
        /* A client that offers no h3 fails the handshake. */
        || gnutls_alpn_set_protocols(c->tls, &alpnH3, 1,
                                     GNUTLS_ALPN_MANDATORY
                                         | GNUTLS_ALPN_SERVER_PRECEDENCE)
               != 0) {
        return -1;
    }
    gnutls_session_set_ptr(c->tls, &c->ref);
    ngtcp2_conn_set_tls_native_handle(c->quic, c->tls);
    return 0;
}
