/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The password hashes an htpasswd file may hold, and the check of a
 * password against one. bcrypt ($2y$, $2b$, $2a$: htpasswd -B) and
 * SHA-512 crypt ($6$) are libxcrypt's (crypt_rn). htpasswd's own default,
 * Apache's MD5 ($apr1$, 1000 rounds of MD5), and {SHA} (one SHA-1, no
 * salt) are weak, but an existing file holds them: libxcrypt has no
 * $apr1$, so both are made here with OpenSSL's digests, and the guard
 * says at each read that they are weak. Every result is compared whole,
 * in constant time.
 */
#include "corAccessInt.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define APR1_MAGIC "$apr1$"
#define APR1_SALT_MAX 8
#define APR1_ROUNDS 1000
/* "$apr1$" 8 of salt, '$', 22 of hash, NUL. */
#define APR1_OUT_MAX (sizeof(APR1_MAGIC) + APR1_SALT_MAX + 24)

static const char itoa64[] =
    "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

AccessHashKind
corAccessHashKind(const char* hash)
{
    if (strncmp(hash, "$2y$", 4) == 0 || strncmp(hash, "$2b$", 4) == 0
        || strncmp(hash, "$2a$", 4) == 0 || strncmp(hash, "$6$", 3) == 0) {
        return ACCESS_HASH_CRYPT;
    }
    if (strncmp(hash, APR1_MAGIC, sizeof(APR1_MAGIC) - 1) == 0) {
        return ACCESS_HASH_APR1;
    }
    if (strncmp(hash, "{SHA}", 5) == 0 && strlen(hash) == 5 + 28) {
        return ACCESS_HASH_SHA;
    }
    return ACCESS_HASH_UNKNOWN;
}

size_t
corAccessHashSetting(const char* hash)
{
    switch (corAccessHashKind(hash)) {
    case ACCESS_HASH_CRYPT:
        if (hash[1] == '2') {
            return strlen(hash) >= 7 ? 7 : strlen(hash); /* "$2y$NN$" */
        }
        /* "$6$" and, when there is one, "rounds=N$". */
        return strncmp(hash + 3, "rounds=", 7) == 0 ? 3 + strcspn(hash + 3, "$")
                                                    : 3;
    case ACCESS_HASH_APR1:
        return sizeof(APR1_MAGIC) - 1;
    case ACCESS_HASH_SHA:
        return 5;
    default:
        return strlen(hash);
    }
}

static void
to64(char** at, unsigned long v, int n)
{
    while (n-- > 0) {
        *(*at)++ = itoa64[v & 0x3f];
        v >>= 6;
    }
}

/* One MD5 of count parts (pointer, length), into out. */
static bool
md5Parts(EVP_MD_CTX* ctx, const void* const* parts, const size_t* lens,
         unsigned count, unsigned char out[16])
{
    bool ok = EVP_DigestInit_ex(ctx, EVP_md5(), NULL) == 1;

    for (unsigned i = 0; ok && i < count; i++) {
        ok = EVP_DigestUpdate(ctx, parts[i], lens[i]) == 1;
    }
    return ok && EVP_DigestFinal_ex(ctx, out, NULL) == 1;
}

/*
 * Poul-Henning Kamp's MD5 crypt with APR's magic, as apr_md5_encode
 * computes it: the digest of the password, the magic and the salt, with
 * the digest of password, salt, password mixed in, then 1000 rounds.
 * out gets "$apr1$salt$hash"; false without memory or digest.
 */
static bool
apr1(EVP_MD_CTX* ctx, const char* pw, const char* setting,
     char out[APR1_OUT_MAX])
{
    const char* salt = setting + sizeof(APR1_MAGIC) - 1;
    size_t saltLen = strcspn(salt, "$");
    size_t pwLen = strlen(pw);
    unsigned char alt[16];
    unsigned char final[16];
    char* at;

    if (saltLen > APR1_SALT_MAX) {
        saltLen = APR1_SALT_MAX;
    }
    if (!md5Parts(ctx, (const void* const[]){ pw, salt, pw },
                  (const size_t[]){ pwLen, saltLen, pwLen }, 3, alt)
        || EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1
        || EVP_DigestUpdate(ctx, pw, pwLen) != 1
        || EVP_DigestUpdate(ctx, APR1_MAGIC, sizeof(APR1_MAGIC) - 1) != 1
        || EVP_DigestUpdate(ctx, salt, saltLen) != 1) {
        return false;
    }
    for (size_t left = pwLen; left > 0; left -= left > 16 ? 16 : left) {
        if (EVP_DigestUpdate(ctx, alt, left > 16 ? 16 : left) != 1) {
            return false;
        }
    }
    /* For each bit of the length, low first: a zero byte for a one, the
     * password's first byte for a zero (the original's quirk, kept). */
    for (size_t i = pwLen; i > 0; i >>= 1) {
        if (EVP_DigestUpdate(ctx, (i & 1) ? "" : pw, 1) != 1) {
            return false;
        }
    }
    if (EVP_DigestFinal_ex(ctx, final, NULL) != 1) {
        return false;
    }
    for (unsigned i = 0; i < APR1_ROUNDS; i++) {
        bool odd = (i & 1) != 0;

        if (!md5Parts(ctx,
                      (const void* const[]){ odd ? (const void*)pw : final,
                                             salt, pw,
                                             odd ? (const void*) final : pw },
                      (const size_t[]){ odd ? pwLen : 16, i % 3 ? saltLen : 0,
                                        i % 7 ? pwLen : 0, odd ? 16 : pwLen },
                      4, final)) {
            return false;
        }
    }
    at = out + sizeof(APR1_MAGIC) - 1 + saltLen;
    memcpy(out, setting, (size_t)(at - out));
    *at++ = '$';
    for (unsigned i = 0; i < 5; i++) {
        unsigned j = i == 4 ? 5 : i + 12;

        to64(&at,
             (unsigned long) final[i] << 16 | (unsigned long) final[i + 6] << 8
                 | final[j],
             4);
    }
    to64(&at, final[11], 2);
    *at = '\0';
    return true;
}

/* "{SHA}" and the base64 of the password's SHA-1, into out (34 bytes). */
static bool
sha(const char* pw, char out[34])
{
    unsigned char digest[20];
    unsigned n = 0;

    memcpy(out, "{SHA}", 5);
    return EVP_Digest(pw, strlen(pw), digest, &n, EVP_sha1(), NULL) == 1
           && EVP_EncodeBlock((unsigned char*)out + 5, digest, 20) == 28;
}

bool
corAccessHashMatches(const char* password, const char* hash)
{
    size_t hashLen = strlen(hash);
    struct crypt_data* data = calloc(1, sizeof(*data));
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    const char* out = NULL;
    bool matches;

    if (data != NULL && ctx != NULL) {
        switch (corAccessHashKind(hash)) {
        case ACCESS_HASH_CRYPT:
            out = crypt_rn(password, hash, data, sizeof(*data));
            break;
        case ACCESS_HASH_APR1:
            out = apr1(ctx, password, hash, data->output) ? data->output : NULL;
            break;
        case ACCESS_HASH_SHA:
            out = sha(password, data->output) ? data->output : NULL;
            break;
        default:
            break;
        }
    }
    matches = out != NULL && strlen(out) == hashLen
              && CRYPTO_memcmp(out, hash, hashLen) == 0;
    if (data != NULL) {
        OPENSSL_cleanse(data, sizeof(*data));
    }
    free(data);
    EVP_MD_CTX_free(ctx);
    return matches;
}
