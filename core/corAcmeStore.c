/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The files of automatic HTTPS under storage: the account key, the
 * certificate's key and its chain, each 0600 in a 0700 folder, written
 * through a temporary file and a rename so that a crash or a second
 * instance never reads half a file. What is there after a restart is
 * served again without a new order when it still covers the names.
 */
#include "corAcme.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int
corAcmeStoreDir(const char* dir)
{
    struct stat st;

    if (mkdir(dir, 0700) == 0) {
        return 0;
    }
    if (errno != EEXIST) {
        return -errno;
    }
    if (stat(dir, &st) != 0) {
        return -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return -ENOTDIR;
    }
    return access(dir, W_OK | X_OK) == 0 ? 0 : -errno;
}

int
corAcmeStoreWrite(const char* dir, const char* name, const char* data,
                  size_t len)
{
    char path[4096];
    char temp[4096];
    int fd;
    int rc = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(temp, sizeof(temp), "%s/.%s.%ld", dir, name, (long)getpid());
    fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -errno;
    }
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, data + done, len - done);

        if (n < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
        done += n > 0 ? (size_t)n : 0;
    }
    if (rc == 0 && fsync(fd) != 0) {
        rc = -errno;
    }
    close(fd);
    if (rc == 0 && rename(temp, path) != 0) {
        rc = -errno;
    }
    if (rc != 0) {
        unlink(temp);
    }
    return rc;
}

EVP_PKEY*
corAcmeStoreKey(const char* dir, const char* name, char* why, size_t whyLen)
{
    char path[4096];
    FILE* f;
    EVP_PKEY* key = NULL;
    BIO* out;
    char* pem;
    long len;
    int rc;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "re");
    if (f != NULL) {
        key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        fclose(f);
        if (key == NULL) {
            ERR_clear_error();
            snprintf(why, whyLen, "'%s' is not a PEM private key", path);
        }
        return key;
    }
    if (errno != ENOENT) {
        snprintf(why, whyLen, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    key = corAcmeKeyNew();
    out = BIO_new(BIO_s_mem());
    if (key == NULL || out == NULL
        || PEM_write_bio_PrivateKey(out, key, NULL, NULL, 0, NULL, NULL) != 1) {
        snprintf(why, whyLen, "cannot make a key (out of memory)");
        rc = -ENOMEM;
    } else {
        len = BIO_get_mem_data(out, &pem);
        rc = corAcmeStoreWrite(dir, name, pem, (size_t)len);
        if (rc != 0) {
            snprintf(why, whyLen, "cannot write '%s': %s", path, strerror(-rc));
        }
    }
    BIO_free(out);
    ERR_clear_error();
    if (rc != 0) {
        EVP_PKEY_free(key);
        return NULL;
    }
    return key;
}

/* Whether cert's subjectAltName names name. */
static bool
certNames(X509* cert, const char* name)
{
    return X509_check_host(cert, name, strlen(name),
                           X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL)
           == 1;
}

int
corAcmeChainRead(const char* dir, const char* name, const char* pem,
                 const CorConfigAcme* a, EVP_PKEY* key, X509** certP,
                 STACK_OF(X509) * *chainP, char* why, size_t whyLen)
{
    char path[4096];
    BIO* in;
    X509* cert;
    X509* x;
    STACK_OF(X509)* chain = sk_X509_new_null();

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    in = pem != NULL ? BIO_new_mem_buf(pem, -1) : BIO_new_file(path, "r");
    if (in == NULL || chain == NULL) {
        snprintf(why, whyLen, "no certificate at '%s' yet", path);
        BIO_free(in);
        sk_X509_free(chain);
        ERR_clear_error();
        return -1;
    }
    cert = PEM_read_bio_X509(in, NULL, NULL, NULL);
    while ((x = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL) {
        sk_X509_push(chain, x);
    }
    BIO_free(in);
    ERR_clear_error();
    if (cert == NULL) {
        snprintf(why, whyLen, "'%s' holds no PEM certificate", path);
    } else if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
        snprintf(why, whyLen, "the certificate in '%s' has expired", path);
    } else if (X509_check_private_key(cert, key) != 1) {
        snprintf(why, whyLen, "the certificate in '%s' is not of its key",
                 path);
    } else {
        for (unsigned i = 0; i < a->domainCount; i++) {
            if (!certNames(cert, a->domains[i])) {
                snprintf(why, whyLen,
                         "the certificate in '%s' does not cover %s", path,
                         a->domains[i]);
                goto failed;
            }
        }
        *certP = cert;
        *chainP = chain;
        return 0;
    }

failed:
    ERR_clear_error();
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    return -1;
}
