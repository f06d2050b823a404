/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS-ALPN-01 (RFC 8737): the ACME server opens TLS to NAME:443 offering
 * only the ALPN protocol acme-tls/1 and wants a self-signed certificate
 * for NAME carrying the key authorization's SHA-256 in a critical
 * acmeIdentifier extension. The TLS listener answers it itself: its
 * ClientHello callback sees acme-tls/1 alone and a name with a pending
 * challenge, and serves that certificate instead of the listener's (the
 * certificate callback and the ALPN choice leave such a handshake be).
 * No request follows: the validator closes after the handshake.
 */
#include "corAcme.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define ACME_IDENTIFIER_OID "1.3.6.1.5.5.7.1.31"

typedef struct Pending {
    struct Pending* next;
    char* name;
    X509* cert;
    EVP_PKEY* key;
} Pending;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Pending* pending;
static pthread_once_t indexOnce = PTHREAD_ONCE_INIT;
static int servingIndex = -1;

static void
indexMake(void)
{
    servingIndex = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* The critical acmeIdentifier extension of keyAuth's SHA-256. */
static X509_EXTENSION*
identifierOf(const char* keyAuth)
{
    unsigned char digest[32];
    ASN1_OCTET_STRING* inner = ASN1_OCTET_STRING_new();
    ASN1_OCTET_STRING* outer = ASN1_OCTET_STRING_new();
    ASN1_OBJECT* oid = OBJ_txt2obj(ACME_IDENTIFIER_OID, 1);
    X509_EXTENSION* ext = NULL;
    unsigned char* der = NULL;
    int len;

    if (inner != NULL && outer != NULL && oid != NULL
        && EVP_Digest(keyAuth, strlen(keyAuth), digest, NULL, EVP_sha256(),
                      NULL)
               == 1
        && ASN1_OCTET_STRING_set(inner, digest, sizeof(digest)) == 1
        && (len = i2d_ASN1_OCTET_STRING(inner, &der)) > 0
        && ASN1_OCTET_STRING_set(outer, der, len) == 1) {
        ext = X509_EXTENSION_create_by_OBJ(NULL, oid, 1, outer);
    }
    OPENSSL_free(der);
    ASN1_OBJECT_free(oid);
    ASN1_OCTET_STRING_free(inner);
    ASN1_OCTET_STRING_free(outer);
    return ext;
}

/* The challenge certificate of name, self-signed by key. */
static X509*
challengeCert(const char* name, const char* keyAuth, EVP_PKEY* key)
{
    X509* x = X509_new();
    X509_EXTENSION* id = identifierOf(keyAuth);
    X509_EXTENSION* san = NULL;
    X509V3_CTX v3;
    char sans[300];

    snprintf(sans, sizeof(sans), "DNS:%s", name);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    if (x == NULL || id == NULL || X509_set_version(x, 2) != 1
        || ASN1_INTEGER_set(X509_get_serialNumber(x), (long)time(NULL)) != 1
        || X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL
        || X509_gmtime_adj(X509_getm_notAfter(x), 86400) == NULL
        || X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN",
                                      MBSTRING_ASC, (const unsigned char*)name,
                                      -1, -1, 0)
               != 1
        || X509_set_issuer_name(x, X509_get_subject_name(x)) != 1
        || X509_set_pubkey(x, key) != 1
        || (san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, sans))
               == NULL
        || X509_add_ext(x, san, -1) != 1 || X509_add_ext(x, id, -1) != 1
        || X509_sign(x, key, EVP_sha256()) <= 0) {
        X509_free(x);
        x = NULL;
    }
    X509_EXTENSION_free(san);
    X509_EXTENSION_free(id);
    ERR_clear_error();
    return x;
}

int
corAcmeTlsAlpnAdd(const char* name, const char* keyAuth)
{
    Pending* p = calloc(1, sizeof(*p));

    if (p == NULL || (p->name = strdup(name)) == NULL
        || (p->key = corAcmeKeyNew()) == NULL
        || (p->cert = challengeCert(name, keyAuth, p->key)) == NULL) {
        if (p != NULL) {
            free(p->name);
            EVP_PKEY_free(p->key);
        }
        free(p);
        return -ENOMEM;
    }
    pthread_mutex_lock(&lock);
    p->next = pending;
    pending = p;
    pthread_mutex_unlock(&lock);
    return 0;
}

void
corAcmeTlsAlpnRemove(const char* name)
{
    Pending* gone = NULL;

    pthread_mutex_lock(&lock);
    for (Pending** p = &pending; *p != NULL; p = &(*p)->next) {
        if (strcasecmp((*p)->name, name) == 0) {
            gone = *p;
            *p = gone->next;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (gone != NULL) {
        free(gone->name);
        X509_free(gone->cert);
        EVP_PKEY_free(gone->key);
        free(gone);
    }
}

/* The host name of the ClientHello's server_name, into name. */
static bool
helloName(SSL* ssl, char* name, size_t cap)
{
    const unsigned char* p;
    size_t len;
    size_t nameLen;

    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) != 1
        || len < 5 || p[2] != TLSEXT_NAMETYPE_host_name) {
        return false;
    }
    nameLen = (size_t)p[3] << 8 | p[4];
    if (nameLen == 0 || nameLen + 5 > len || nameLen >= cap) {
        return false;
    }
    memcpy(name, p + 5, nameLen);
    name[nameLen] = '\0';
    return true;
}

int
corAcmeTlsAlpnHello(SSL* ssl, int* alert, void* arg)
{
    static const unsigned char only[] = "\x00\x0b\x0a"
                                        "acme-tls/1";
    const unsigned char* p;
    size_t len;
    char name[256];
    int ok = 0;

    (void)alert;
    (void)arg;
    if (SSL_client_hello_get0_ext(
            ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p, &len)
            != 1
        || len != sizeof(only) - 1 || memcmp(p, only, len) != 0
        || !helloName(ssl, name, sizeof(name))) {
        return SSL_CLIENT_HELLO_SUCCESS;
    }
    pthread_once(&indexOnce, indexMake);
    pthread_mutex_lock(&lock);
    for (Pending* q = pending; q != NULL; q = q->next) {
        if (strcasecmp(q->name, name) == 0) {
            ok = SSL_use_certificate(ssl, q->cert) == 1
                 && SSL_use_PrivateKey(ssl, q->key) == 1;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (ok) {
        SSL_set_ex_data(ssl, servingIndex, ssl);
    }
    ERR_clear_error();
    return SSL_CLIENT_HELLO_SUCCESS;
}

bool
corAcmeTlsAlpnServing(SSL* ssl)
{
    return servingIndex >= 0 && SSL_get_ex_data(ssl, servingIndex) != NULL;
}
