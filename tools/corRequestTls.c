/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS for cor-request (https://, cors://): OpenSSL on the engine's own
 * non-blocking sockets. The peer is verified as curl verifies it: against
 * the system's store or --cacert, its name checked against the URL's
 * host, which also goes out as SNI; -k turns the check off. ALPN offers
 * the protocol's name, so a cors:// listener that serves only cor/1 picks
 * it.
 */
#include "corRequest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

/* OpenSSL's last error as text, else fallback. */
static void
tlsWhy(char* why, size_t whyLen, const char* what, const char* fallback)
{
    unsigned long e = ERR_peek_last_error();
    char text[256];

    if (e != 0) {
        ERR_error_string_n(e, text, sizeof(text));
    }
    snprintf(why, whyLen, "%s: %s", what, e != 0 ? text : fallback);
    ERR_clear_error();
}

SSL_CTX*
corReqTlsContext(const char* caFile, bool insecure, const char* alpn, char* why,
                 size_t whyLen)
{
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    unsigned char wire[64];
    size_t len = strlen(alpn);

    if (ctx == NULL || len >= sizeof(wire)) {
        tlsWhy(why, whyLen, "TLS", "no context");
        goto failed;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (caFile != NULL ? SSL_CTX_load_verify_locations(ctx, caFile, NULL) != 1
                       : SSL_CTX_set_default_verify_paths(ctx) != 1) {
        tlsWhy(why, whyLen, caFile != NULL ? caFile : "the system's CAs",
               "cannot be read");
        goto failed;
    }
    SSL_CTX_set_verify(ctx, insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    wire[0] = (unsigned char)len;
    memcpy(wire + 1, alpn, len);
    SSL_CTX_set_alpn_protos(ctx, wire, (unsigned)len + 1);
    return ctx;

failed:
    SSL_CTX_free(ctx);
    return NULL;
}

SSL*
corReqTlsNew(SSL_CTX* ctx, int fd, const char* host)
{
    SSL* ssl = SSL_new(ctx);
    unsigned char addr[sizeof(struct in6_addr)];
    /* SNI carries names only (RFC 6066); an address is checked as one. */
    bool literal = inet_pton(AF_INET, host, addr) == 1
                   || inet_pton(AF_INET6, host, addr) == 1;

    if (ssl == NULL || SSL_set_fd(ssl, fd) != 1
        || (!literal && SSL_set_tlsext_host_name(ssl, host) != 1)
        || SSL_set1_host(ssl, host) != 1) {
        SSL_free(ssl);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

/* What an SSL call's failure means here: -EAGAIN with *wantWrite set as
 * the handshake or the record layer needs, 0 for the peer's close_notify,
 * -EPROTO otherwise (why says what). */
static int
tlsOutcome(SSL* ssl, int rc, bool* wantWrite, char* why, size_t whyLen)
{
    int err = SSL_get_error(ssl, rc);
    long verify;

    switch (err) {
    case SSL_ERROR_WANT_READ:
        *wantWrite = false;
        return -EAGAIN;
    case SSL_ERROR_WANT_WRITE:
        *wantWrite = true;
        return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        snprintf(why, whyLen, "TLS: %s",
                 errno != 0 ? strerror(errno)
                            : "the server closed the connection");
        ERR_clear_error();
        return -EPROTO;
    default:
        verify = SSL_get_verify_result(ssl);
        if (ERR_GET_REASON(ERR_peek_last_error())
            == SSL_R_WRONG_VERSION_NUMBER) {
            snprintf(why, whyLen,
                     "TLS: the server does not speak TLS (a "
                     "plain http:// or cor:// port?)");
            ERR_clear_error();
        } else if (verify != X509_V_OK) {
            snprintf(why, whyLen,
                     "TLS: the server's certificate: %s (-k "
                     "skips the check, --cacert FILE trusts a CA)",
                     X509_verify_cert_error_string(verify));
            ERR_clear_error();
        } else {
            tlsWhy(why, whyLen, "TLS", "the handshake failed");
        }
        return -EPROTO;
    }
}

int
corReqTlsHandshake(SSL* ssl, bool* wantWrite, char* why, size_t whyLen)
{
    int rc;

    errno = 0;
    rc = SSL_do_handshake(ssl);
    if (rc == 1) {
        *wantWrite = false;
        return 1;
    }
    rc = tlsOutcome(ssl, rc, wantWrite, why, whyLen);
    if (rc == 0) {
        snprintf(why, whyLen, "TLS: the server closed during the handshake");
        return -EPROTO;
    }
    return rc;
}

ssize_t
corReqTlsRead(SSL* ssl, void* buf, size_t cap, bool* wantWrite, char* why,
              size_t whyLen)
{
    size_t n = 0;
    int rc;

    errno = 0;
    rc = SSL_read_ex(ssl, buf, cap, &n);
    return rc == 1 ? (ssize_t)n : tlsOutcome(ssl, 0, wantWrite, why, whyLen);
}

ssize_t
corReqTlsWrite(SSL* ssl, const void* buf, size_t len, bool* wantWrite,
               char* why, size_t whyLen)
{
    size_t n = 0;
    int rc;

    errno = 0;
    rc = SSL_write_ex(ssl, buf, len, &n);
    if (rc == 1) {
        return (ssize_t)n;
    }
    rc = tlsOutcome(ssl, 0, wantWrite, why, whyLen);
    return rc == 0 ? -EPIPE : rc;
}
