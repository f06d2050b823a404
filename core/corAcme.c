/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A TLS listener's certificate from ACME: what its handshakes serve, and
 * the task that gets it and keeps it fresh.
 *
 * The handshakes take the certificate from here (a certificate callback
 * on the listener's default context) under a lock, so that the task
 * swaps a new one in for the next handshake without a reload, as the
 * OCSP staple is swapped (corTlsOcsp.c). Until one is issued the listener
 * serves a temporary self-signed certificate (said in the log): its
 * clients fail to verify, the other listeners serve on as ever.
 *
 * The task is a thread of the generation (corTaskSpawn, as the OCSP
 * fetch): it orders when nothing valid is stored, then waits until two
 * thirds of the certificate's lifetime (less a jitter, so that instances
 * started together do not renew together), or until the time the
 * directory's renewal information (RFC 9773, corAcmeAri.c) picks where
 * it offers it, and orders again. A failure is
 * logged with the directory's error document and tried again after a
 * back-off (2 s, doubling to an hour, or the server's Retry-After when
 * longer): a directory down never takes more than a request an hour.
 * A certificate passes a handshake before it is served (corAcmeCheck.c);
 * one that fails is a failed order, and the one served stays.
 *
 * The certificate is stapled as a listener's ocsp: { fetch: on } is
 * (corTlsOcsp.c), from the responder it names, when it names one: the
 * task fetches the staple at once after each swap, then halfway to the
 * answer's nextUpdate, between its renewals.
 *
 * Under storage: account.key, then NAME.key and NAME.pem for the first
 * of the names, each 0600 (corAcmeStore.c), and NAME.lock, which an order
 * holds (flock) so that instances sharing storage order once. The certificate's
 * key is made once and kept across renewals, so that a crash between two writes
 * never leaves a chain without its key.
 */
#include "corAcme.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define RETRY_FIRST_MS 2000
#define RETRY_MAX_MS (60 * 60 * 1000)
/* The longest single wait: the task looks at the clock again after it. */
#define WAIT_MAX_MS (60 * 60 * 1000)
#define TEMPORARY_DAYS 7
/* Renewal information is asked again when its answer's Retry-After says,
 * within these bounds (RFC 9773 4.3), or after an hour when asking
 * failed. */
#define ARI_DEFAULT_S (6 * 60 * 60)
#define ARI_MIN_S 60
#define ARI_MAX_S (24 * 60 * 60)
#define ARI_RETRY_S (60 * 60)

struct CorAcme {
    pthread_mutex_t lock;
    /* What the handshakes serve (under lock). */
    X509* cert;
    STACK_OF(X509) * chain;
    EVP_PKEY* key;
    CorTlsOcsp* ocsp; /* cert's stapling; NULL: none (no responder) */
    atomic_uint_fast64_t serial; /* one more at each swap (HTTP/3 looks) */
    bool temporary;
    bool tlsAlpn;        /* TLS-ALPN-01 proves the names, not HTTP-01 */
    char startNote[700]; /* what corAcmeStart logs first */
    const CorConfigAcme* config;
    SSL_CTX* ctx;   /* the listener's, which a new certificate must pass */
    time_t renewAt; /* when to order again; 0: now */
    /* The staple's fetch, by the task (ocsp is the task's to swap). */
    time_t ocspDue;
    int ocspRetryMs;
    /* Renewal information (RFC 9773), by the task: when to ask next, and
     * whether the directory offers none. */
    time_t ariDue;
    bool ariAbsent;
    /* For /metrics. */
    atomic_ulong issued;
    atomic_ulong failed;
    struct CorAcme* next; /* in the process's list */
    char keyName[300];
    char certName[300];
};

/* The listeners' acme of this process, for /metrics (a generation
 * loads once; `cor -t` serves none). */
static pthread_mutex_t listLock = PTHREAD_MUTEX_INITIALIZER;
static CorAcme* list;

/* The handshake's certificate: the one served now. */
static int
onCert(SSL* ssl, void* arg)
{
    CorAcme* acme = arg;
    int ok;

    if (corAcmeTlsAlpnServing(ssl)) {
        return 1; /* the challenge's certificate, set at the hello */
    }
    pthread_mutex_lock(&acme->lock);
    ok = SSL_use_certificate(ssl, acme->cert) == 1
         && SSL_use_PrivateKey(ssl, acme->key) == 1
         && SSL_set1_chain(ssl, acme->chain) == 1;
    pthread_mutex_unlock(&acme->lock);
    if (!ok) {
        ERR_clear_error();
    }
    return ok ? 1 : 0;
}

/* The staple of the certificate served, when ssl's handshake serves it
 * (not a TLS-ALPN-01 challenge's, nor one swapped out since). */
static int
onStatus(SSL* ssl, void* arg)
{
    CorAcme* acme = arg;
    int rc = SSL_TLSEXT_ERR_NOACK;

    pthread_mutex_lock(&acme->lock);
    if (acme->ocsp != NULL && SSL_get_certificate(ssl) == acme->cert) {
        rc = corTlsOcspStaple(acme->ocsp, ssl);
    }
    pthread_mutex_unlock(&acme->lock);
    return rc;
}

/* Serve cert (owned from now on, ocsp too) from the next handshake on. */
static void
serve(CorAcme* acme, X509* cert, STACK_OF(X509) * chain, EVP_PKEY* key,
      CorTlsOcsp* ocsp, bool temporary)
{
    X509* oldCert;
    STACK_OF(X509) * oldChain;
    EVP_PKEY* oldKey;
    CorTlsOcsp* oldOcsp;

    pthread_mutex_lock(&acme->lock);
    oldCert = acme->cert;
    oldChain = acme->chain;
    oldKey = acme->key;
    oldOcsp = acme->ocsp;
    acme->cert = cert;
    acme->chain = chain;
    acme->key = key;
    acme->ocsp = ocsp;
    acme->temporary = temporary;
    atomic_fetch_add(&acme->serial, 1);
    pthread_mutex_unlock(&acme->lock);
    X509_free(oldCert);
    sk_X509_pop_free(oldChain, X509_free);
    EVP_PKEY_free(oldKey);
    corTlsOcspFree(oldOcsp);
    acme->ocspDue = 0;
    acme->ocspRetryMs = 0;
    acme->ariDue = 0;
}

uint64_t
corAcmeSerial(CorAcme* acme)
{
    return atomic_load(&acme->serial);
}

void
corAcmeServed(CorAcme* acme, X509** certP, STACK_OF(X509) * *chainP,
              EVP_PKEY** keyP, uint64_t* serialP)
{
    pthread_mutex_lock(&acme->lock);
    *certP = acme->cert;
    *chainP = X509_chain_up_ref(acme->chain);
    *keyP = acme->key;
    *serialP = atomic_load(&acme->serial);
    if (acme->cert != NULL) { /* none only once freed */
        X509_up_ref(acme->cert);
        EVP_PKEY_up_ref(acme->key);
    }
    pthread_mutex_unlock(&acme->lock);
}

int
corAcmeStaple(CorAcme* acme, uint64_t serial, void* (*alloc)(size_t),
              unsigned char** derP)
{
    int len = -1;

    pthread_mutex_lock(&acme->lock);
    if (acme->ocsp != NULL && atomic_load(&acme->serial) == serial) {
        len = corTlsOcspCopy(acme->ocsp, alloc, derP);
    }
    pthread_mutex_unlock(&acme->lock);
    return len;
}

/* The ARI id of the certificate served; NULL while temporary. */
static char*
servedAriId(CorAcme* acme)
{
    char* id = NULL;

    pthread_mutex_lock(&acme->lock);
    if (!acme->temporary && acme->cert != NULL) {
        id = corAcmeAriId(acme->cert);
    }
    pthread_mutex_unlock(&acme->lock);
    return id;
}

/* cert's stapling, from the responder it names, verified against its
 * issuer (the chain's first); NULL when it names none (Let's Encrypt's
 * name none since 2025), said in the log. */
static CorTlsOcsp*
staplingOf(CorAcme* acme, X509* cert, STACK_OF(X509) * chain)
{
    CorTlsOcsp* o = NULL;
    char why[512] = "its chain holds no issuer";

    if (sk_X509_num(chain) > 0) {
        o = corTlsOcspFor(cert, sk_X509_value(chain, 0),
                          acme->config->domains[0], why, sizeof(why));
    }
    if (o == NULL) {
        corLog(COR_LOG_INFO, "tls: acme: %s: served without an OCSP staple: %s",
               acme->config->domains[0], why);
    }
    return o;
}

/* Seconds from now to t (negative: past). */
static long
secondsTo(const ASN1_TIME* t)
{
    int days = 0;
    int secs = 0;

    return ASN1_TIME_diff(&days, &secs, NULL, t) == 1
               ? (long)days * 86400 + secs
               : 0;
}

/* When to renew cert: two thirds into its lifetime, less up to a
 * thirtieth of it at random. */
static time_t
renewTime(X509* cert)
{
    long fromStart = -secondsTo(X509_get0_notBefore(cert));
    long toEnd = secondsTo(X509_get0_notAfter(cert));
    long life = fromStart + toEnd;
    unsigned jitter = 0;

    RAND_bytes((unsigned char*)&jitter, sizeof(jitter));
    return time(NULL) - fromStart + life * 2 / 3
           - (life >= 30 ? (time_t)(jitter % (unsigned long)(life / 30)) : 0);
}

/* A self-signed certificate of key for a's names, good for a few days. */
static X509*
temporaryMake(const CorConfigAcme* a, EVP_PKEY* key)
{
    X509* x = X509_new();
    X509_NAME* name = X509_get_subject_name(x);
    X509_EXTENSION* san = NULL;
    X509V3_CTX v3;
    char sans[1024] = "";
    size_t used = 0;

    for (unsigned i = 0; i < a->domainCount && used < sizeof(sans); i++) {
        used += (size_t)snprintf(sans + used, sizeof(sans) - used, "%sDNS:%s",
                                 i > 0 ? "," : "", a->domains[i]);
    }
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    if (x == NULL || X509_set_version(x, 2) != 1
        || ASN1_INTEGER_set(X509_get_serialNumber(x), (long)time(NULL)) != 1
        || X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL
        || X509_gmtime_adj(X509_getm_notAfter(x), 86400L * TEMPORARY_DAYS)
               == NULL
        || X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                      (const unsigned char*)a->domains[0], -1,
                                      -1, 0)
               != 1
        || X509_set_issuer_name(x, name) != 1 || X509_set_pubkey(x, key) != 1
        || (san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, sans))
               == NULL
        || X509_add_ext(x, san, -1) != 1
        || X509_sign(x, key, EVP_sha256()) <= 0) {
        X509_free(x);
        x = NULL;
    }
    X509_EXTENSION_free(san);
    ERR_clear_error();
    return x;
}

/* Serve a temporary certificate, said in the log. */
static int
serveTemporary(CorAcme* acme, const char* why)
{
    EVP_PKEY* key = corAcmeKeyNew();
    X509* cert = key != NULL ? temporaryMake(acme->config, key) : NULL;
    STACK_OF(X509)* chain = sk_X509_new_null();

    if (cert == NULL || chain == NULL) {
        EVP_PKEY_free(key);
        X509_free(cert);
        sk_X509_free(chain);
        return -1;
    }
    serve(acme, cert, chain, key, NULL, true);
    snprintf(acme->startNote, sizeof(acme->startNote),
             "tls: acme: %s: serving a temporary self-signed certificate "
             "until %s issues one (%s)",
             acme->config->domains[0], acme->config->directory, why);
    return 0;
}

/* The stored certificate served, when storage holds a valid one for the
 * names; else why. */
static int
serveStored(CorAcme* acme, EVP_PKEY* key, const char* pem, char* why,
            size_t whyLen)
{
    X509* cert = NULL;
    STACK_OF(X509)* chain = NULL;
    char failed[400];

    if (corAcmeChainRead(acme->config->storage, acme->certName, pem,
                         acme->config, key, &cert, &chain, why, whyLen)
        != 0) {
        return -1;
    }
    if (corAcmeHandshakeCheck(acme->ctx, acme->config, cert, chain, key, failed,
                              sizeof(failed))
        != 0) {
        snprintf(why, whyLen,
                 "the certificate does not work, the one served "
                 "stays: %s",
                 failed);
        X509_free(cert);
        sk_X509_pop_free(chain, X509_free);
        return -1;
    }
    acme->renewAt = renewTime(cert);
    EVP_PKEY_up_ref(key);
    serve(acme, cert, chain, key, staplingOf(acme, cert, chain), false);
    return 0;
}

/* Whether the configuration has a plain http listener, which HTTP-01
 * comes to. */
static bool
plainHttpListener(const CorConfig* config)
{
    for (unsigned i = 0; i < config->listenCount; i++) {
        if (config->listen[i].tls == NULL
            && strcmp(config->listen[i].protocol, "http") == 0) {
            return true;
        }
    }
    return false;
}

/* Whether a proves its names over TLS-ALPN-01: said, or not said and
 * no plain listener to answer HTTP-01. */
static bool
tlsAlpnChosen(const CorConfig* config, const CorConfigAcme* a)
{
    return corConfGet(a->node, "challenge") != NULL
               ? strcmp(a->challenge, "tls-alpn-01") == 0
               : !plainHttpListener(config);
}

/* What `cor -t` says of a: a plain listener for http-01, a CA file that
 * loads, a storage folder that is there or can be made. */
static bool
acmeCheck(const CorConfig* config, const CorConfigAcme* a, CorConfErrors* e)
{
    char why[256];
    char parent[4096];
    char* slash;
    bool ok = true;

    if (!tlsAlpnChosen(config, a) && !plainHttpListener(config)) {
        corConfErrorf(e, a->node,
                      "acme: challenge http-01 needs a plain http "
                      "listener (port 80 in production) to answer "
                      "/.well-known/acme-challenge/");
        ok = false;
    }
    if (a->ca != NULL) {
        CorTlsClient* tls = corTlsClientNew(
            &(CorTlsClientOptions){ .caFile = a->ca }, why, sizeof(why));

        if (tls == NULL) {
            corConfErrorf(e, corConfGet(a->node, "ca"),
                          "acme: ca: '%s' does not load: %s", a->ca, why);
            ok = false;
        } else {
            corTlsClientFree(tls);
        }
    }
    snprintf(parent, sizeof(parent), "%s", a->storage);
    slash = strrchr(parent, '/');
    if (slash != NULL && slash != parent) {
        *slash = '\0';
    }
    if (access(a->storage, W_OK | X_OK) != 0
        && (errno != ENOENT || access(parent, W_OK | X_OK) != 0)) {
        corConfErrorf(e, corConfGet(a->node, "storage"),
                      "acme: storage: '%s' cannot be written or made: %s",
                      a->storage, strerror(errno));
        ok = false;
    }
    return ok;
}

CorAcme*
corAcmeNew(SSL_CTX* ctx, const CorConfig* config, const CorConfigAcme* a,
           CorConfErrors* e)
{
    CorAcme* acme;
    EVP_PKEY* key = NULL;
    char path[4096];
    char why[512];
    FILE* f;

    if (!acmeCheck(config, a, e)) {
        return NULL;
    }
    acme = calloc(1, sizeof(*acme));
    if (acme == NULL) {
        corConfErrorf(e, a->node, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&acme->lock, NULL);
    acme->config = a;
    acme->ctx = ctx;
    acme->tlsAlpn = tlsAlpnChosen(config, a);
    snprintf(acme->keyName, sizeof(acme->keyName), "%s.key", a->domains[0]);
    snprintf(acme->certName, sizeof(acme->certName), "%s.pem", a->domains[0]);
    snprintf(path, sizeof(path), "%s/%s", a->storage, acme->keyName);
    f = fopen(path, "re");
    if (f != NULL) {
        key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        fclose(f);
        ERR_clear_error();
    }
    if (key != NULL && serveStored(acme, key, NULL, why, sizeof(why)) == 0) {
        snprintf(acme->startNote, sizeof(acme->startNote),
                 "tls: acme: %s: serving the stored certificate, renewed "
                 "in %ld s",
                 a->domains[0], (long)(acme->renewAt - time(NULL)));
    } else if (serveTemporary(acme, key != NULL ? why : "none stored yet")
               != 0) {
        corConfErrorf(e, a->node,
                      "acme: cannot make a temporary "
                      "certificate (out of memory)");
        EVP_PKEY_free(key);
        corAcmeFree(acme);
        return NULL;
    }
    EVP_PKEY_free(key);
    corAcmeHttp01Storage(a->storage);
    SSL_CTX_set_cert_cb(ctx, onCert, acme);
    SSL_CTX_set_client_hello_cb(ctx, corAcmeTlsAlpnHello, NULL);
    SSL_CTX_set_tlsext_status_cb(ctx, onStatus);
    SSL_CTX_set_tlsext_status_arg(ctx, acme);
    pthread_mutex_lock(&listLock);
    acme->next = list;
    list = acme;
    pthread_mutex_unlock(&listLock);
    return acme;
}

void
corAcmeFree(CorAcme* acme)
{
    if (acme == NULL) {
        return;
    }
    pthread_mutex_lock(&listLock);
    for (CorAcme** p = &list; *p != NULL; p = &(*p)->next) {
        if (*p == acme) {
            *p = acme->next;
            break;
        }
    }
    pthread_mutex_unlock(&listLock);
    serve(acme, NULL, NULL, NULL, NULL, true);
    pthread_mutex_destroy(&acme->lock);
    free(acme);
}

/* Whether storage holds the certificate served now: nothing new there
 * (renewal information may have made it due before its two thirds). */
static bool
storedIsServed(CorAcme* acme)
{
    char path[4096];
    FILE* f;
    X509* stored = NULL;
    bool same;

    snprintf(path, sizeof(path), "%s/%s", acme->config->storage,
             acme->certName);
    f = fopen(path, "re");
    if (f != NULL) {
        stored = PEM_read_X509(f, NULL, NULL, NULL);
        fclose(f);
    }
    ERR_clear_error();
    pthread_mutex_lock(&acme->lock);
    same = stored != NULL && acme->cert != NULL
           && X509_cmp(stored, acme->cert) == 0;
    pthread_mutex_unlock(&acme->lock);
    X509_free(stored);
    return same;
}

/* Whether storage holds a certificate (another instance's, lately) that
 * is not yet due for renewal: then it is served, and nothing ordered. */
static bool
pickedUp(CorAcme* acme, EVP_PKEY* key)
{
    time_t before = acme->renewAt;
    char why[256];

    if (storedIsServed(acme)
        || serveStored(acme, key, NULL, why, sizeof(why)) != 0) {
        return false;
    }
    if (acme->renewAt > time(NULL)) {
        return true;
    }
    acme->renewAt = before;
    return false;
}

/* The lock of the names under storage (flock: one holder among the
 * processes and listeners that share it), or -1 when another holds it
 * (*busyP) or it cannot be had (why said). */
static int
lockTake(CorAcme* acme, bool* busyP, char* why, size_t whyLen)
{
    char path[4096];
    int fd;

    snprintf(path, sizeof(path), "%s/%s.lock", acme->config->storage,
             acme->config->domains[0]);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, whyLen, "cannot open the lock '%.400s': %s", path,
                 strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        *busyP = errno == EWOULDBLOCK;
        snprintf(why, whyLen, "cannot lock '%.400s': %s", path,
                 strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* One order, the certificate stored and served; under the lock of the
 * names, so that instances sharing storage order once: the one that gets
 * it orders, the others find its certificate when they get it in turn.
 * Returns 0 (served), 1 (another instance holds the lock), or -1 with why
 * said; *retryAfterS the server's wish. */
static int
obtain(CorAcme* acme, char* why, size_t whyLen, long* retryAfterS)
{
    const CorConfigAcme* a = acme->config;
    CorAcmeClient c = { 0 };
    EVP_PKEY* account = NULL;
    EVP_PKEY* key = NULL;
    char* pem = NULL;
    bool busy = false;
    bool opened;
    int lock = -1;
    int rc = -1;
    int err;

    if ((err = corAcmeStoreDir(a->storage)) != 0) {
        snprintf(why, whyLen, "cannot make the storage '%s': %s", a->storage,
                 strerror(-err));
        return -1;
    }
    if ((lock = lockTake(acme, &busy, why, whyLen)) < 0) {
        return busy ? 1 : -1;
    }
    if ((account = corAcmeStoreKey(a->storage, "account.key", why, whyLen))
            == NULL
        || (key = corAcmeStoreKey(a->storage, acme->keyName, why, whyLen))
               == NULL) {
        goto failed;
    }
    if (pickedUp(acme, key)) {
        corLog(COR_LOG_INFO,
               "tls: acme: %s: serving the certificate another instance "
               "stored under '%s'; renewed in %ld s",
               a->domains[0], a->storage, (long)(acme->renewAt - time(NULL)));
        rc = 0;
        goto failed;
    }
    c.tlsAlpn = acme->tlsAlpn;
    opened = corAcmeClientOpen(&c, a, account) == 0;
    if (opened) {
        acme->ariAbsent = corAcmeDirectoryUrl(&c, "renewalInfo") == NULL;
        c.replaces = acme->ariAbsent ? NULL : servedAriId(acme);
    }
    if (!opened || corAcmeOrder(&c, key, &pem) != 0) {
        snprintf(why, whyLen, "%s", c.why);
        *retryAfterS = c.retryAfterS;
        goto failed;
    }
    if (serveStored(acme, key, pem, why, whyLen) != 0) {
        goto failed;
    }
    if ((err = corAcmeStoreWrite(a->storage, acme->certName, pem, strlen(pem)))
        != 0) {
        /* Served all the same: the next start orders again. */
        corLog(COR_LOG_WARN,
               "tls: acme: %s: cannot store the certificate "
               "under '%s': %s",
               a->domains[0], a->storage, strerror(-err));
    }
    corLog(COR_LOG_INFO,
           "tls: acme: %s: certificate issued by %s and served; renewed in "
           "%ld s",
           a->domains[0], a->directory, (long)(acme->renewAt - time(NULL)));
    rc = 0;

failed:
    corAcmeClientClose(&c);
    EVP_PKEY_free(account);
    EVP_PKEY_free(key);
    free(pem);
    close(lock);
    return rc;
}

/* Ask the directory's renewalInfo when to renew the certificate served
 * (RFC 9773): its answer sets renewAt, and when to ask again. A directory
 * that offers none is not asked again until the next order's. */
static void
ariAsk(CorAcme* acme)
{
    const CorConfigAcme* a = acme->config;
    CorAcmeClient c = { 0 };
    CorAcmeReply reply = { 0 };
    EVP_PKEY* account;
    const char* base;
    char* id = NULL;
    char* url = NULL;
    char why[600];
    time_t at;
    long againS;

    acme->ariDue = time(NULL) + ARI_RETRY_S;
    account = corAcmeStoreKey(a->storage, "account.key", why, sizeof(why));
    if (account == NULL || corAcmeClientOpen(&c, a, account) != 0) {
        corLog(COR_LOG_WARN,
               "tls: acme: %s: cannot ask for renewal information: %s; "
               "asked again in %d s",
               a->domains[0], account == NULL ? why : c.why, ARI_RETRY_S);
        goto done;
    }
    base = corAcmeDirectoryUrl(&c, "renewalInfo");
    id = base != NULL ? servedAriId(acme) : NULL;
    if (id == NULL) {
        acme->ariAbsent = true;
        goto done;
    }
    if (asprintf(&url, "%s%s%s", base,
                 base[0] != '\0' && base[strlen(base) - 1] == '/' ? "" : "/",
                 id)
        < 0) {
        url = NULL;
        goto done;
    }
    if (corAcmeGet(&c, url, &reply) != 0
        || corAcmeAriWindow(reply.json, &at, c.why, sizeof(c.why)) != 0) {
        corLog(COR_LOG_WARN,
               "tls: acme: %s: renewal information from %s: %s; asked "
               "again in %d s",
               a->domains[0], url, c.why, ARI_RETRY_S);
        goto done;
    }
    againS = c.retryAfterS > 0 ? c.retryAfterS : ARI_DEFAULT_S;
    againS = againS < ARI_MIN_S   ? ARI_MIN_S
             : againS > ARI_MAX_S ? ARI_MAX_S
                                  : againS;
    acme->renewAt = at;
    acme->ariDue = time(NULL) + againS;
    corLog(COR_LOG_INFO,
           "tls: acme: %s: renewal information from %s: renewed in %ld s; "
           "asked again in %ld s",
           a->domains[0], url, (long)(at - time(NULL)), againS);

done:
    corAcmeReplyFree(&reply);
    corAcmeClientClose(&c);
    EVP_PKEY_free(account);
    free(id);
    free(url);
}

/* The task: order when due, else wait until it is; a failure tried
 * again after the back-off. */
static void
acmeTask(void* arg)
{
    CorAcme* acme = arg;
    const char* name = acme->config->domains[0];
    int retryMs = RETRY_FIRST_MS;
    char why[600];
    long retryAfterS;
    long waitMs;
    int rc;

    for (;;) {
        time_t now = time(NULL);
        long dueS = (long)(acme->renewAt - now);

        if (acme->ocsp != NULL && acme->ocspDue <= now) {
            int ocspMs = corTlsOcspRound(acme->ocsp, &acme->ocspRetryMs);

            if (ocspMs < 0) {
                return;
            }
            acme->ocspDue = now + (ocspMs + 999) / 1000;
            continue;
        }
        if (!acme->temporary && !acme->ariAbsent && acme->ariDue <= now) {
            ariAsk(acme);
            continue;
        }
        if (acme->renewAt != 0 && dueS > 0) {
            waitMs = dueS * 1000 < WAIT_MAX_MS ? dueS * 1000 : WAIT_MAX_MS;
            if (acme->ocsp != NULL && (acme->ocspDue - now) * 1000 < waitMs) {
                waitMs = (long)(acme->ocspDue - now) * 1000;
            }
            if (!acme->ariAbsent && (acme->ariDue - now) * 1000 < waitMs) {
                waitMs = (long)(acme->ariDue - now) * 1000;
            }
        } else {
            retryAfterS = 0;
            rc = obtain(acme, why, sizeof(why), &retryAfterS);
            if (rc == 0) {
                atomic_fetch_add(&acme->issued, 1);
            } else if (rc < 0) {
                atomic_fetch_add(&acme->failed, 1);
            }
            if (rc == 0) {
                retryMs = RETRY_FIRST_MS;
                continue;
            }
            if (rc == 1) {
                /* Another instance orders: its certificate is looked
                 * for soon, with no back-off (nothing was asked). */
                corLog(COR_LOG_INFO,
                       "tls: acme: %s: another instance is ordering (%s); "
                       "looked at again in %d s",
                       name, why, RETRY_FIRST_MS / 1000);
                waitMs = RETRY_FIRST_MS;
                goto wait;
            }
            if (atomic_load(&corRuntime.stopping)) {
                return;
            }
            waitMs = retryAfterS * 1000 > retryMs ? retryAfterS * 1000
                                                  : retryMs;
            waitMs = waitMs < RETRY_MAX_MS ? waitMs : RETRY_MAX_MS;
            corLog(COR_LOG_WARN,
                   "tls: acme: %s: order failed: %s; tried again in %ld s",
                   name, why, waitMs / 1000);
            retryMs = retryMs * 2 < RETRY_MAX_MS ? retryMs * 2 : RETRY_MAX_MS;
        }
    wait:
        if (corTaskScheduleAfter((int)waitMs) != 0) {
            return;
        }
    }
}

int
corAcmeStart(CorAcme* acme)
{
    corLog(acme->temporary ? COR_LOG_WARN : COR_LOG_INFO, "%s",
           acme->startNote);
    return corTaskSpawn(acmeTask, acme, "acme");
}

/* The served certificate's notAfter as Unix time; 0 while temporary. */
static long long
expiryOf(CorAcme* acme)
{
    long long at = 0;

    pthread_mutex_lock(&acme->lock);
    if (!acme->temporary && acme->cert != NULL) {
        at = (long long)time(NULL) + secondsTo(X509_get0_notAfter(acme->cert));
    }
    pthread_mutex_unlock(&acme->lock);
    return at;
}

void
corAcmeEmit(CorMetricsOut* out)
{
    pthread_mutex_lock(&listLock);
    if (list == NULL) {
        pthread_mutex_unlock(&listLock);
        return;
    }
    corMetricsPrintf(out, "# HELP cor_acme_certificate_expiry_seconds When the "
                          "certificate served for a name ends (Unix time; 0: a "
                          "temporary one serves).\n"
                          "# TYPE cor_acme_certificate_expiry_seconds gauge\n");
    for (CorAcme* a = list; a != NULL; a = a->next) {
        long long at = expiryOf(a);

        for (unsigned i = 0; i < a->config->domainCount; i++) {
            corMetricsPrintf(out,
                             "cor_acme_certificate_expiry_seconds{name="
                             "\"%s\"} %lld\n",
                             a->config->domains[i], at);
        }
    }
    corMetricsPrintf(out, "# HELP cor_acme_orders_total Certificates "
                          "obtained (ordered, or stored by another "
                          "instance), by first name.\n"
                          "# TYPE cor_acme_orders_total counter\n");
    for (CorAcme* a = list; a != NULL; a = a->next) {
        corMetricsPrintf(out, "cor_acme_orders_total{name=\"%s\"} %lu\n",
                         a->config->domains[0], atomic_load(&a->issued));
    }
    corMetricsPrintf(out, "# HELP cor_acme_failures_total Orders that "
                          "failed (tried again after a back-off), by "
                          "first name.\n"
                          "# TYPE cor_acme_failures_total counter\n");
    for (CorAcme* a = list; a != NULL; a = a->next) {
        corMetricsPrintf(out, "cor_acme_failures_total{name=\"%s\"} %lu\n",
                         a->config->domains[0], atomic_load(&a->failed));
    }
    pthread_mutex_unlock(&listLock);
}
