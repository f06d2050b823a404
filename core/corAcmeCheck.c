/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A certificate from ACME proves itself before it is served: the one
 * served meanwhile stays until a new one passes (RFC 8555 says nothing
 * of it; a CA's bad day must not take the site down). The proof is a
 * handshake in memory (a BIO pair, no socket) for each name, the
 * listener's own context on the server's side with the new certificate,
 * key and chain, and on the other a client that verifies the chain up to
 * its top (the directory's root is not in the chain, and need not be
 * known here) and the name. What the store's checks (corAcmeStore.c)
 * cannot see shows here: a chain out of order or not signed by its
 * intermediate, dates not yet or no longer current, a key that the
 * listener's protocols, ciphers or groups cannot use. A name that an sni
 * entry of the listener serves from its own files is left to them.
 */
#include "corAcme.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>

/* Flights back and forth before a handshake counts as stuck (TLS 1.2
 * needs four, 1.3 three). */
#define HANDSHAKE_ROUNDS 16

/* Whether rc of ssl's handshake step means it waits on the other side. */
static bool
waits(SSL* ssl, int rc)
{
    int err = SSL_get_error(ssl, rc);

    return rc == 1 || err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
}

/* The client's context: it trusts the chain's top (or the leaf, with no
 * chain) as an anchor, and verifies. */
static SSL_CTX*
clientCtx(X509* cert, STACK_OF(X509) * chain)
{
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    X509* top = sk_X509_num(chain) > 0
                    ? sk_X509_value(chain, sk_X509_num(chain) - 1)
                    : cert;

    if (ctx == NULL
        || X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), top) != 1
        || X509_STORE_set_flags(SSL_CTX_get_cert_store(ctx),
                                X509_V_FLAG_PARTIAL_CHAIN)
               != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return ctx;
}

/* One handshake for name. Returns 0, or -1 with why said. */
static int
handshake(SSL_CTX* listener, SSL_CTX* client, const char* name, X509* cert,
          STACK_OF(X509) * chain, EVP_PKEY* key, char* why, size_t whyLen)
{
    SSL* s = SSL_new(listener);
    SSL* c = SSL_new(client);
    BIO* sb = NULL;
    BIO* cb = NULL;
    int rc = -1;
    int cr = 0;
    int sr = 0;

    if (s == NULL || c == NULL || BIO_new_bio_pair(&sb, 0, &cb, 0) != 1) {
        snprintf(why, whyLen, "out of memory");
        goto done;
    }
    SSL_set_bio(s, sb, sb);
    SSL_set_bio(c, cb, cb);
    /* This certificate, not the one the listener's callback serves. */
    SSL_set_cert_cb(s, NULL, NULL);
    SSL_set_num_tickets(s, 0);
    SSL_set_accept_state(s);
    SSL_set_connect_state(c);
    if (SSL_use_certificate(s, cert) != 1 || SSL_use_PrivateKey(s, key) != 1
        || SSL_set1_chain(s, chain) != 1
        || SSL_set_tlsext_host_name(c, name) != 1
        || SSL_set1_host(c, name) != 1) {
        corTlsWhy(why, whyLen, "cannot set the certificate up");
        goto done;
    }
    for (int i = 0; i < HANDSHAKE_ROUNDS && (cr != 1 || sr != 1); i++) {
        cr = SSL_do_handshake(c);
        sr = SSL_do_handshake(s);
        if (!waits(c, cr) || !waits(s, sr)) {
            break;
        }
    }
    if ((cr == 1 && sr == 1) || SSL_get_SSL_CTX(s) != listener) {
        /* Passed; or an sni entry of the listener serves name from its
         * own files, and this certificate never does. */
        rc = 0;
    } else if (SSL_get_verify_result(c) != X509_V_OK) {
        snprintf(why, whyLen, "a client asking for %s does not verify it: %s",
                 name, X509_verify_cert_error_string(SSL_get_verify_result(c)));
    } else {
        char reason[160];

        corTlsWhy(reason, sizeof(reason), "the handshake went nowhere");
        snprintf(why, whyLen, "a handshake for %s with the listener fails: %s",
                 name, reason);
    }

done:
    ERR_clear_error();
    SSL_free(s);
    SSL_free(c);
    return rc;
}

int
corAcmeHandshakeCheck(SSL_CTX* listener, const CorConfigAcme* a, X509* cert,
                      STACK_OF(X509) * chain, EVP_PKEY* key, char* why,
                      size_t whyLen)
{
    SSL_CTX* client = clientCtx(cert, chain);
    int rc = 0;

    if (client == NULL) {
        ERR_clear_error();
        snprintf(why, whyLen, "out of memory");
        return -1;
    }
    for (unsigned i = 0; rc == 0 && i < a->domainCount; i++) {
        rc = handshake(listener, client, a->domains[i], cert, chain, key, why,
                       whyLen);
    }
    SSL_CTX_free(client);
    return rc;
}
