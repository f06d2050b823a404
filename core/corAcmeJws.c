/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON Web Signatures every ACME request is (RFC 8555 6.2): the
 * account key is a P-256 key, so ES256 (RFC 7518 3.4: the signature is
 * r and s, 32 bytes each, not OpenSSL's DER), and its JWK's thumbprint
 * (RFC 7638) is what the HTTP-01 key authorization ends with.
 */
#include "corAcme.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P256_BYTES 32

char*
corAcmeB64(const void* data, size_t len)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "abcdefghijklmnopqrstuvwxyz0123456789-_";
    const unsigned char* in = data;
    char* out = malloc(len / 3 * 4 + 5);
    size_t o = 0;

    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        size_t left = len - i;

        v |= left > 1 ? (unsigned)in[i + 1] << 8 : 0;
        v |= left > 2 ? in[i + 2] : 0;
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        if (left > 1) {
            out[o++] = alphabet[(v >> 6) & 63];
        }
        if (left > 2) {
            out[o++] = alphabet[v & 63];
        }
    }
    out[o] = '\0';
    return out;
}

EVP_PKEY*
corAcmeKeyNew(void)
{
    return EVP_EC_gen("P-256");
}

/* A coordinate of key's public point, base64url of its 32 bytes. */
static char*
coordinate(EVP_PKEY* key, const char* param)
{
    unsigned char bytes[P256_BYTES];
    BIGNUM* bn = NULL;
    char* out = NULL;

    if (EVP_PKEY_get_bn_param(key, param, &bn) == 1
        && BN_bn2binpad(bn, bytes, sizeof(bytes)) == sizeof(bytes)) {
        out = corAcmeB64(bytes, sizeof(bytes));
    }
    BN_free(bn);
    return out;
}

int
corAcmeJwk(EVP_PKEY* key, char** jwkP, char thumbprint[48])
{
    char* x = coordinate(key, OSSL_PKEY_PARAM_EC_PUB_X);
    char* y = coordinate(key, OSSL_PKEY_PARAM_EC_PUB_Y);
    unsigned char digest[32];
    char* jwk = NULL;
    char* b64 = NULL;
    int rc = -1;

    if (x == NULL || y == NULL
        || asprintf(&jwk,
                    "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\","
                    "\"y\":\"%s\"}",
                    x, y)
               < 0) {
        jwk = NULL;
        goto failed;
    }
    if (EVP_Digest(jwk, strlen(jwk), digest, NULL, EVP_sha256(), NULL) != 1
        || (b64 = corAcmeB64(digest, sizeof(digest))) == NULL) {
        goto failed;
    }
    snprintf(thumbprint, 48, "%s", b64);
    *jwkP = jwk;
    jwk = NULL;
    rc = 0;

failed:
    ERR_clear_error();
    free(jwk);
    free(b64);
    free(x);
    free(y);
    return rc;
}

/* ES256 of input: r and s, 32 bytes each, base64url. */
static char*
es256(EVP_PKEY* key, const char* input)
{
    EVP_MD_CTX* md = EVP_MD_CTX_new();
    unsigned char der[80];
    unsigned char raw[2 * P256_BYTES];
    const unsigned char* p = der;
    size_t derLen = sizeof(der);
    ECDSA_SIG* sig = NULL;
    char* out = NULL;

    if (md != NULL && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1
        && EVP_DigestSign(md, der, &derLen, (const unsigned char*)input,
                          strlen(input))
               == 1
        && (sig = d2i_ECDSA_SIG(NULL, &p, (long)derLen)) != NULL
        && BN_bn2binpad(ECDSA_SIG_get0_r(sig), raw, P256_BYTES) == P256_BYTES
        && BN_bn2binpad(ECDSA_SIG_get0_s(sig), raw + P256_BYTES, P256_BYTES)
               == P256_BYTES) {
        out = corAcmeB64(raw, sizeof(raw));
    }
    ECDSA_SIG_free(sig);
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return out;
}

char*
corAcmeJwsSign(EVP_PKEY* key, const char* jwk, const char* kid,
               const char* nonce, const char* url, const char* payload)
{
    json_t* header = json_pack("{s:s, s:s, s:s}", "alg", "ES256", "nonce",
                               nonce, "url", url);
    char* headerText = NULL;
    char* protected64 = NULL;
    char* payload64 = NULL;
    char* input = NULL;
    char* sig = NULL;
    char* jws = NULL;

    if (header == NULL) {
        return NULL;
    }
    if (kid != NULL) {
        json_object_set_new(header, "kid", json_string(kid));
    } else {
        json_object_set_new(header, "jwk", json_loads(jwk, 0, NULL));
    }
    headerText = json_dumps(header, JSON_COMPACT);
    protected64 = headerText != NULL
                      ? corAcmeB64(headerText, strlen(headerText))
                      : NULL;
    payload64 = corAcmeB64(payload != NULL ? payload : "",
                           payload != NULL ? strlen(payload) : 0);
    if (protected64 == NULL || payload64 == NULL
        || asprintf(&input, "%s.%s", protected64, payload64) < 0) {
        input = NULL;
        goto failed;
    }
    sig = es256(key, input);
    if (sig != NULL
        && asprintf(&jws,
                    "{\"protected\":\"%s\",\"payload\":\"%s\","
                    "\"signature\":\"%s\"}",
                    protected64, payload64, sig)
               < 0) {
        jws = NULL;
    }

failed:
    json_decref(header);
    free(headerText);
    free(protected64);
    free(payload64);
    free(input);
    free(sig);
    return jws;
}
