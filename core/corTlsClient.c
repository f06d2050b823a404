/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS clients: a context (trust, verification, ALPN, a session cache per
 * peer) and the client transport made from it for a connected socket.
 *
 * Verification is on unless the caller opts out: the chain against the
 * system's CA store or a CA file, and the certificate against the name
 * the caller connected to (SSL_set1_host, or the IP address). The
 * handshake itself is corTransportTlsHandshake's (corTls.c).
 *
 * Sessions: OpenSSL hands each new session (in TLS 1.3 a ticket, which
 * comes after the handshake, during a read) to newSession, which keeps the
 * latest one per "serverName:port"; the next connection to that peer
 * offers it. The cache is shared by every thread under a mutex that is
 * never held across a wait, and bounded: past SESSION_CACHE_MAX peers the
 * oldest entry is replaced.
 */
#include "corCoreInt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_CACHE_MAX 256

typedef struct {
    char* peer;
    SSL_SESSION* session;
} CachedSession;

static atomic_uint_fast64_t nextClientId = 1;

/*
 * A context lives as long as its SSL_CTX, which OpenSSL counts: the
 * owner's reference (dropped by corTlsClientFree) and one per SSL made
 * from it, so that a pooled connection outlives a context freed under it.
 * The last SSL_CTX_free frees the context too (clientFree, as the
 * SSL_CTX's ex_data): the transport that drops the last SSL knows nothing
 * of clients.
 */
struct CorTlsClient {
    uint64_t id;
    SSL_CTX* ctx;
    pthread_mutex_t lock;
    CachedSession cache[SESSION_CACHE_MAX];
    unsigned cacheCount;
    unsigned cacheNext; /* the entry replaced next when full */
};

static pthread_once_t exIndexOnce = PTHREAD_ONCE_INIT;
static int exIndex = -1;

static void
clientFree(void* parent, void* ptr, CRYPTO_EX_DATA* ad, int idx, long argl,
           void* argp)
{
    CorTlsClient* ctx = ptr;

    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    if (ctx == NULL) {
        return;
    }
    for (unsigned i = 0; i < ctx->cacheCount; i++) {
        free(ctx->cache[i].peer);
        SSL_SESSION_free(ctx->cache[i].session);
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

static void
exIndexNew(void)
{
    exIndex = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, clientFree);
}

/* Keep the new session of a connection for its peer. Returns 1: the
 * cache holds the reference OpenSSL handed over. */
static int
newSession(SSL* ssl, SSL_SESSION* session)
{
    CorTlsConn* tc = SSL_get_app_data(ssl);
    CorTlsClient* ctx = tc->client;
    CachedSession* slot = NULL;
    char* peer;

    pthread_mutex_lock(&ctx->lock);
    for (unsigned i = 0; i < ctx->cacheCount; i++) {
        if (strcmp(ctx->cache[i].peer, tc->peer) == 0) {
            slot = &ctx->cache[i];
            break;
        }
    }
    if (slot == NULL) {
        peer = strdup(tc->peer);
        if (peer == NULL) {
            pthread_mutex_unlock(&ctx->lock);
            return 0;
        }
        if (ctx->cacheCount < SESSION_CACHE_MAX) {
            slot = &ctx->cache[ctx->cacheCount++];
        } else {
            slot = &ctx->cache[ctx->cacheNext++ % SESSION_CACHE_MAX];
            free(slot->peer);
            SSL_SESSION_free(slot->session);
        }
        slot->peer = peer;
    } else {
        SSL_SESSION_free(slot->session);
    }
    slot->session = session;
    pthread_mutex_unlock(&ctx->lock);
    return 1;
}

/* Offer the cached session of peer, if any. */
static void
sessionOffer(CorTlsClient* ctx, SSL* ssl, const char* peer)
{
    pthread_mutex_lock(&ctx->lock);
    for (unsigned i = 0; i < ctx->cacheCount; i++) {
        if (strcmp(ctx->cache[i].peer, peer) == 0) {
            SSL_set_session(ssl, ctx->cache[i].session);
            break;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
}

static int
clientTrust(SSL_CTX* ssl, const CorTlsClientOptions* o, char* why,
            size_t whyLen)
{
    if (o->insecure) {
        SSL_CTX_set_verify(ssl, SSL_VERIFY_NONE, NULL);
        return 0;
    }
    SSL_CTX_set_verify(ssl, SSL_VERIFY_PEER, NULL);
    if (o->caFile != NULL
            ? SSL_CTX_load_verify_locations(ssl, o->caFile, NULL) != 1
            : SSL_CTX_set_default_verify_paths(ssl) != 1) {
        char reason[128];

        corTlsWhy(reason, sizeof(reason), "cannot load");
        snprintf(why, whyLen, "CA file '%s': %s",
                 o->caFile != NULL ? o->caFile : "(system)", reason);
        return -1;
    }
    return 0;
}

CorTlsClient*
corTlsClientNew(const CorTlsClientOptions* o, char* why, size_t whyLen)
{
    CorTlsClient* ctx = calloc(1, sizeof(*ctx));
    unsigned char alpn[256];
    int alpnLen = 0;

    if (ctx == NULL) {
        snprintf(why, whyLen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->id = atomic_fetch_add(&nextClientId, 1);
    if (o->alpn != NULL) {
        alpnLen = corTlsAlpnWire(o->alpn, alpn, sizeof(alpn));
        if (alpnLen < 0) {
            snprintf(why, whyLen,
                     "alpn: '%s' is not a comma list of "
                     "protocol names",
                     o->alpn);
            goto failed;
        }
    }
    pthread_once(&exIndexOnce, exIndexNew);
    ctx->ctx = exIndex < 0 ? NULL : SSL_CTX_new(TLS_client_method());
    if (ctx->ctx == NULL || SSL_CTX_set_ex_data(ctx->ctx, exIndex, ctx) != 1) {
        corTlsWhy(why, whyLen, "out of memory");
        goto failed;
    }
    SSL_CTX_set_min_proto_version(ctx->ctx, TLS1_2_VERSION);
    /* A close without close_notify stays an error for a client: a body
     * that ends at the close must not be taken whole when an attacker
     * cut it. */
    SSL_CTX_set_options(ctx->ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
                                   | SSL_MODE_ENABLE_PARTIAL_WRITE);
    SSL_CTX_set_session_cache_mode(ctx->ctx,
                                   SSL_SESS_CACHE_CLIENT
                                       | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx->ctx, newSession);
    if (clientTrust(ctx->ctx, o, why, whyLen) != 0
        || (alpnLen > 0
            && SSL_CTX_set_alpn_protos(ctx->ctx, alpn, (unsigned)alpnLen)
                   != 0)) {
        goto failed;
    }
    return ctx;

failed:
    corTlsClientFree(ctx);
    return NULL;
}

void
corTlsClientFree(CorTlsClient* ctx)
{
    if (ctx == NULL) {
        return;
    }
    if (ctx->ctx == NULL || SSL_CTX_get_ex_data(ctx->ctx, exIndex) != ctx) {
        /* Failed before the SSL_CTX held it. */
        SSL_CTX_free(ctx->ctx);
        clientFree(NULL, ctx, NULL, 0, 0, NULL);
        return;
    }
    SSL_CTX_free(ctx->ctx);
}

uint64_t
corTlsClientId(const CorTlsClient* ctx)
{
    return ctx->id;
}

/* The name to check the peer's certificate against: a host name, or an
 * IP address (then no SNI is sent, as RFC 6066 says). */
static int
peerCheck(SSL* ssl, const char* serverName)
{
    unsigned char addr[sizeof(struct in6_addr)];
    bool ip = inet_pton(AF_INET, serverName, addr) == 1
              || inet_pton(AF_INET6, serverName, addr) == 1;

    if (ip) {
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName)
                       == 1
                   ? 0
                   : -EINVAL;
    }
    if (SSL_set_tlsext_host_name(ssl, serverName) != 1
        || SSL_set1_host(ssl, serverName) != 1) {
        return -EINVAL;
    }
    return 0;
}

int
corTransportTlsClient(CorTransport* t, int fd, CorTlsClient* ctx,
                      const char* serverName, unsigned port)
{
    SSL* ssl = SSL_new(ctx->ctx);
    char peer[300];
    CorTlsConn* tc;
    int rc;

    if (ssl == NULL) {
        ERR_clear_error();
        return -ENOMEM;
    }
    rc = peerCheck(ssl, serverName);
    if (rc != 0) {
        SSL_free(ssl);
        ERR_clear_error();
        return rc;
    }
    SSL_set_connect_state(ssl);
    snprintf(peer, sizeof(peer), "%s:%u", serverName, port);
    sessionOffer(ctx, ssl, peer);
    rc = corTlsTransportInit(t, fd, ssl);
    if (rc != 0) {
        return rc;
    }
    tc = t->data;
    tc->peer = strdup(peer);
    if (tc->peer == NULL) {
        /* The caller's transport is the plain one over fd again. */
        SSL_free(tc->ssl);
        free(tc);
        corTransportPlain(t, fd);
        return -ENOMEM;
    }
    tc->client = ctx;
    return 0;
}
