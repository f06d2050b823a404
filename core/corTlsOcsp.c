/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OCSP stapling on a listener's certificate: the server hands the client
 * its certificate's OCSP response in the handshake (status_request), so
 * the client need not ask the CA's responder itself.
 *
 * The response comes from a file (ocsp: { file }), read by each
 * generation, so a reload serves a renewed one; or it is fetched
 * (ocsp: { fetch: on }) from the responder the certificate names in its
 * Authority Information Access, an http:// POST of the DER request
 * through the core's client, by a background task of the generation (a
 * thread of its own, off the loops), which verifies it against the
 * certificate's issuer and fetches it again halfway to its nextUpdate.
 * A fetch that fails is logged and tried again later (1 s, doubling to
 * 5 min); meanwhile the last good response serves until its nextUpdate,
 * then none: a staple is an extra, never a reason not to serve.
 *
 * The staple is read by the loops' handshakes (the status callback) and
 * replaced by the task: a lock around a copy, taken only by handshakes
 * whose client asks for a status.
 *
 * An ACME certificate (corAcme.c) staples the same way, but changes at
 * run time: its listener makes a stapling for each certificate it serves
 * (corTlsOcspFor), staples from its own status callback, and fetches from
 * its own task, which already wakes for the renewals (corTlsOcspRound).
 */
#include "corCoreInt.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A fetch's deadlines, and the waits between fetches. */
#define FETCH_TIMEOUT_MS 10000
#define RETRY_FIRST_MS 1000
#define RETRY_MAX_MS (5 * 60 * 1000)
/* Without a nextUpdate, a response is fetched again this often. */
#define REFRESH_MAX_MS (60 * 60 * 1000)
/* A response's thisUpdate may be this far ahead of our clock. */
#define CLOCK_SKEW_S 300

/* One certificate's stapling: owned by its listener's CorTlsServer, for
 * the generation's life (the fetch task ends before the stop frees
 * nothing: the generation exits with it). */
struct CorTlsOcsp {
    pthread_mutex_t lock;
    unsigned char* der; /* the staple (under lock); NULL: none */
    int derLen;
    time_t expires; /* its nextUpdate; 0: none said */
    /* fetch: on */
    char* url;      /* the responder's http:// URL */
    char* certPath; /* for the log */
    X509* issuer;
    OCSP_CERTID* id;   /* the certificate's, in requests */
    X509_STORE* store; /* the issuer, which signs or delegates */
};

int
corTlsOcspCopy(CorTlsOcsp* o, void* (*alloc)(size_t), unsigned char** derP)
{
    int len = -1;

    *derP = NULL;
    pthread_mutex_lock(&o->lock);
    if (o->der != NULL && (o->expires == 0 || time(NULL) < o->expires)
        && (*derP = alloc((size_t)o->derLen)) != NULL) {
        memcpy(*derP, o->der, (size_t)o->derLen);
        len = o->derLen;
    }
    pthread_mutex_unlock(&o->lock);
    return len;
}

/* OpenSSL's allocator, which frees a staple set on a handshake. */
static void*
opensslAlloc(size_t len)
{
    return OPENSSL_malloc(len);
}

int
corTlsOcspStaple(CorTlsOcsp* o, SSL* ssl)
{
    unsigned char* copy;
    int len = corTlsOcspCopy(o, opensslAlloc, &copy);

    if (len < 0) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    SSL_set_tlsext_status_ocsp_resp(ssl, copy, len);
    return SSL_TLSEXT_ERR_OK;
}

/* The staple for ssl's handshake, when there is one still valid. */
static int
onStatus(SSL* ssl, void* arg)
{
    return corTlsOcspStaple(arg, ssl);
}

/* An ASN1 time as seconds from now (negative: past). */
static long
secondsFromNow(const ASN1_GENERALIZEDTIME* t)
{
    int days = 0;
    int secs = 0;

    if (ASN1_TIME_diff(&days, &secs, NULL, t) != 1) {
        return 0;
    }
    return (long)days * 86400 + secs;
}

/* Serve der (copied) from now on, until next (NULL: no end said). */
static int
stapleSet(CorTlsOcsp* o, const unsigned char* der, int len,
          const ASN1_GENERALIZEDTIME* next)
{
    unsigned char* copy = malloc((size_t)len);
    unsigned char* old;

    if (copy == NULL) {
        return -ENOMEM;
    }
    memcpy(copy, der, (size_t)len);
    pthread_mutex_lock(&o->lock);
    old = o->der;
    o->der = copy;
    o->derLen = len;
    o->expires = next != NULL ? time(NULL) + secondsFromNow(next) : 0;
    pthread_mutex_unlock(&o->lock);
    free(old);
    return 0;
}

/* A successful basic response in der, or NULL with why said. */
static OCSP_BASICRESP*
basicOf(const unsigned char* der, long len, char* why, size_t whyLen)
{
    const unsigned char* p = der;
    OCSP_RESPONSE* resp = d2i_OCSP_RESPONSE(NULL, &p, len);
    OCSP_BASICRESP* basic = NULL;
    int status;

    if (resp == NULL) {
        corTlsWhy(why, whyLen, "not a DER OCSP response");
        return NULL;
    }
    status = OCSP_response_status(resp);
    if (status != OCSP_RESPONSE_STATUS_SUCCESSFUL) {
        snprintf(why, whyLen, "the responder said %s",
                 OCSP_response_status_str(status));
    } else if ((basic = OCSP_response_get1_basic(resp)) == NULL) {
        corTlsWhy(why, whyLen, "not a basic OCSP response");
    }
    OCSP_RESPONSE_free(resp);
    return basic;
}

/* A whole file into a malloc'd buffer; NULL with errno set. */
static unsigned char*
fileRead(const char* path, long* lenP)
{
    FILE* f = fopen(path, "rbe");
    unsigned char* buf = NULL;
    long len;

    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0
        || fseek(f, 0, SEEK_SET) != 0) {
        goto failed;
    }
    buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf != NULL && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
        errno = EIO;
        goto failed;
    }
    *lenP = len;

failed:
    fclose(f);
    return buf;
}

/* ocsp: { file }: the response loaded and checked (it parses, the
 * responder said successful), served until its nextUpdate. */
static int
fileLoad(CorTlsOcsp* o, const CorConfigOcsp* c, CorConfErrors* e)
{
    const CorConf* at = corConfGet(c->node, "file");
    const char* path = c->file;
    unsigned char* der = NULL;
    OCSP_BASICRESP* basic = NULL;
    OCSP_SINGLERESP* single;
    ASN1_GENERALIZEDTIME* next = NULL;
    char why[160];
    long len = 0;
    int rc = -1;

    if ((der = fileRead(path, &len)) == NULL) {
        corConfErrorf(e, at, "ocsp: file: cannot read '%s': %s", path,
                      strerror(errno));
        goto failed;
    }
    basic = basicOf(der, len, why, sizeof(why));
    if (basic == NULL) {
        corConfErrorf(e, at,
                      "ocsp: file: '%s' is not a successful OCSP "
                      "response (%s)",
                      path, why);
        goto failed;
    }
    single = OCSP_resp_get0(basic, 0);
    if (single != NULL) {
        OCSP_single_get0_status(single, NULL, NULL, NULL, &next);
    }
    if (next != NULL && secondsFromNow(next) <= 0) {
        /* Refused, a renewal gone wrong would stop the reload that
         * brings the certificate too; served, it would fail clients that
         * check. */
        corLog(COR_LOG_WARN,
               "tls: ocsp file '%s' is past its nextUpdate: "
               "no staple is served until a reload brings a new one",
               path);
    }
    rc = stapleSet(o, der, (int)len, next);

failed:
    OCSP_BASICRESP_free(basic);
    free(der);
    return rc;
}

/* The issuer's certificate: the issuer file, else the chain's second. */
static X509*
issuerOf(SSL_CTX* ctx, const CorConfigOcsp* c, CorConfErrors* e)
{
    STACK_OF(X509)* chain = NULL;
    FILE* f;
    X509* x = NULL;

    if (c->issuer == NULL) {
        SSL_CTX_get0_chain_certs(ctx, &chain);
        if (chain == NULL || sk_X509_num(chain) == 0) {
            corConfErrorf(e, c->node,
                          "ocsp: fetch: no issuer to verify "
                          "the responses with: the certificate file holds "
                          "no second certificate (add the issuer's, or "
                          "give ocsp: { issuer: FILE })");
            return NULL;
        }
        x = sk_X509_value(chain, 0);
        X509_up_ref(x);
        return x;
    }
    f = fopen(c->issuer, "re");
    if (f != NULL) {
        x = PEM_read_X509(f, NULL, NULL, NULL);
        fclose(f);
    }
    if (x == NULL) {
        corConfErrorf(e, corConfGet(c->node, "issuer"),
                      "ocsp: issuer: "
                      "cannot read a PEM certificate from '%s': %s",
                      c->issuer, f == NULL ? strerror(errno) : "not PEM");
        ERR_clear_error();
    }
    return x;
}

/* The responder's URL that cert (label, in the log) names; NULL with why
 * said. */
static char*
urlFind(X509* cert, const char* label, char* why, size_t whyLen)
{
    STACK_OF(OPENSSL_STRING)* urls = X509_get1_ocsp(cert);
    const char* first = urls != NULL && sk_OPENSSL_STRING_num(urls) > 0
                            ? sk_OPENSSL_STRING_value(urls, 0)
                            : NULL;
    char* url = NULL;

    if (first == NULL) {
        snprintf(why, whyLen,
                 "ocsp: fetch: the certificate '%s' names no "
                 "OCSP responder (no OCSP URL in its Authority "
                 "Information Access)",
                 label);
    } else if (strncmp(first, "http://", 7) != 0) {
        snprintf(why, whyLen,
                 "ocsp: fetch: the responder '%s' of '%s' is "
                 "not http:// (responders speak plain HTTP)",
                 first, label);
    } else if ((url = strdup(first)) == NULL) {
        snprintf(why, whyLen, "out of memory");
    }
    X509_email_free(urls);
    return url;
}

/* What a fetch asks about and checks the answers with (its responder
 * found): the request's certificate id, and the store of issuer, which
 * signs or delegates. Returns 0, or -1 with why said. */
static int
targetSet(CorTlsOcsp* o, X509* cert, X509* issuer, const char* label, char* why,
          size_t whyLen)
{
    o->certPath = strdup(label);
    if (o->certPath == NULL) {
        snprintf(why, whyLen, "out of memory");
        return -1;
    }
    X509_up_ref(issuer);
    o->issuer = issuer;
    if (X509_check_issued(issuer, cert) != X509_V_OK) {
        snprintf(why, whyLen,
                 "ocsp: fetch: the issuer given did not issue '%s'", label);
        return -1;
    }
    o->id = OCSP_cert_to_id(NULL, cert, issuer);
    o->store = X509_STORE_new();
    /* The issuer may be an intermediate: it is the anchor here. */
    if (o->id == NULL || o->store == NULL
        || X509_STORE_add_cert(o->store, issuer) != 1
        || X509_STORE_set_flags(o->store, X509_V_FLAG_PARTIAL_CHAIN) != 1) {
        ERR_clear_error();
        snprintf(why, whyLen, "out of memory");
        return -1;
    }
    return 0;
}

/* ocsp: { fetch: on }: the issuer found, the fetch's target set. */
static int
fetchSetup(CorTlsOcsp* o, SSL_CTX* ctx, const CorConfigCert* c,
           CorConfErrors* e)
{
    X509* cert = SSL_CTX_get0_certificate(ctx);
    X509* issuer;
    char why[512];
    int rc = -1;

    o->url = urlFind(cert, c->certificate, why, sizeof(why));
    if (o->url == NULL) {
        corConfErrorf(e, c->ocsp.node, "%s", why);
        return -1;
    }
    issuer = issuerOf(ctx, &c->ocsp, e);
    if (issuer == NULL) {
        return -1;
    }
    if (targetSet(o, cert, issuer, c->certificate, why, sizeof(why)) != 0) {
        corConfErrorf(e, c->ocsp.node, "%s", why);
    } else {
        rc = 0;
    }
    X509_free(issuer);
    return rc;
}

CorTlsOcsp*
corTlsOcspNew(SSL_CTX* ctx, const CorConfigCert* c, CorConfErrors* e)
{
    CorTlsOcsp* o = calloc(1, sizeof(*o));
    int rc;

    if (o == NULL) {
        corConfErrorf(e, c->ocsp.node, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&o->lock, NULL);
    rc = c->ocsp.fetch ? fetchSetup(o, ctx, c, e) : fileLoad(o, &c->ocsp, e);
    if (rc != 0) {
        corTlsOcspFree(o);
        return NULL;
    }
    SSL_CTX_set_tlsext_status_cb(ctx, onStatus);
    SSL_CTX_set_tlsext_status_arg(ctx, o);
    return o;
}

CorTlsOcsp*
corTlsOcspFor(X509* cert, X509* issuer, const char* label, char* why,
              size_t whyLen)
{
    CorTlsOcsp* o = calloc(1, sizeof(*o));

    if (o == NULL) {
        snprintf(why, whyLen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&o->lock, NULL);
    o->url = urlFind(cert, label, why, whyLen);
    if (o->url == NULL || targetSet(o, cert, issuer, label, why, whyLen) != 0) {
        corTlsOcspFree(o);
        return NULL;
    }
    return o;
}

void
corTlsOcspFree(CorTlsOcsp* o)
{
    if (o == NULL) {
        return;
    }
    free(o->der);
    free(o->url);
    free(o->certPath);
    X509_free(o->issuer);
    OCSP_CERTID_free(o->id);
    X509_STORE_free(o->store);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

/* ---- The fetch ----------------------------------------------------------- */

/* The DER request for o's certificate, or -1. */
static int
requestMake(const CorTlsOcsp* o, unsigned char** derP)
{
    OCSP_REQUEST* req = OCSP_REQUEST_new();
    OCSP_CERTID* id = OCSP_CERTID_dup(o->id);
    int len = -1;

    *derP = NULL;
    if (req != NULL && id != NULL && OCSP_request_add0_id(req, id) != NULL) {
        id = NULL;
        len = i2d_OCSP_REQUEST(req, derP);
    }
    OCSP_CERTID_free(id);
    OCSP_REQUEST_free(req);
    ERR_clear_error();
    return len;
}

/* Check an answer: signed by the issuer or a responder it delegated to,
 * about o's certificate, good, and current. Its nextUpdate to *nextP
 * (the caller frees it; NULL: none). Returns 0, or -1 with why said. */
static int
answerCheck(const CorTlsOcsp* o, const char* der, size_t len,
            ASN1_GENERALIZEDTIME** nextP, char* why, size_t whyLen)
{
    OCSP_BASICRESP* basic = basicOf((const unsigned char*)der, (long)len, why,
                                    whyLen);
    STACK_OF(X509)* certs = sk_X509_new_null();
    ASN1_GENERALIZEDTIME* thisUpdate = NULL;
    ASN1_GENERALIZEDTIME* next = NULL;
    int status = -1;
    int reason;
    int rc = -1;

    *nextP = NULL;
    if (basic == NULL || certs == NULL || sk_X509_push(certs, o->issuer) <= 0) {
        goto failed;
    }
    if (OCSP_basic_verify(basic, certs, o->store, 0) != 1) {
        corTlsWhy(why, whyLen, "its signature does not verify");
        snprintf(why + strlen(why), whyLen - strlen(why),
                 " (against the "
                 "issuer)");
    } else if (OCSP_resp_find_status(basic, o->id, &status, &reason, NULL,
                                     &thisUpdate, &next)
               != 1) {
        snprintf(why, whyLen, "it says nothing of this certificate");
    } else if (status != V_OCSP_CERTSTATUS_GOOD) {
        snprintf(why, whyLen, "the certificate's status is %s",
                 OCSP_cert_status_str(status));
    } else if (OCSP_check_validity(thisUpdate, next, CLOCK_SKEW_S, -1) != 1) {
        corTlsWhy(why, whyLen, "it is out of date");
    } else {
        *nextP = next != NULL ? ASN1_STRING_dup(next) : NULL;
        rc = 0;
    }

failed:
    sk_X509_free(certs);
    OCSP_BASICRESP_free(basic);
    ERR_clear_error();
    return rc;
}

/* When to fetch again after a good answer valid until next. */
static int
refreshMs(const ASN1_GENERALIZEDTIME* next)
{
    long half;

    if (next == NULL) {
        return REFRESH_MAX_MS;
    }
    half = secondsFromNow(next) * 1000 / 2;
    return half < RETRY_FIRST_MS   ? RETRY_FIRST_MS
           : half > REFRESH_MAX_MS ? REFRESH_MAX_MS
                                   : (int)half;
}

/* One exchange with the responder, the answer stapled when good. Returns
 * the wait before the next (> 0), or -1 when it failed (said in why).
 * May yield (on a thread: polls). */
static int
fetchOnce(CorTlsOcsp* o, char* why, size_t whyLen)
{
    static const CorHeader type = {
        "Content-Type",
        12,
        "application/ocsp-request",
        24,
    };
    CorClientResponse res = { 0 };
    ASN1_GENERALIZEDTIME* next = NULL;
    unsigned char* der = NULL;
    int len = requestMake(o, &der);
    int rc = -1;

    if (len <= 0) {
        snprintf(why, whyLen, "cannot make the request (out of memory)");
        goto failed;
    }
    rc = corClientFetch(
        &(CorClientRequest){
            .method = "POST",
            .url = o->url,
            .headers = &type,
            .headerCount = 1,
            .body = der,
            .bodyLen = (size_t)len,
            .connectTimeoutMs = FETCH_TIMEOUT_MS,
            .totalTimeoutMs = FETCH_TIMEOUT_MS,
        },
        &res);
    if (rc != 0) {
        snprintf(why, whyLen, "%s", res.error);
        rc = -1;
    } else if (res.status != 200) {
        snprintf(why, whyLen, "the responder answered %d", res.status);
        rc = -1;
    } else if (answerCheck(o, res.body, res.bodyLen, &next, why, whyLen) != 0
               || stapleSet(o, (const unsigned char*)res.body, (int)res.bodyLen,
                            next)
                      != 0) {
        rc = -1;
    } else {
        rc = refreshMs(next);
    }

failed:
    ASN1_STRING_free(next);
    OPENSSL_free(der);
    corClientResponseFree(&res);
    return rc;
}

int
corTlsOcspRound(CorTlsOcsp* o, int* retryMs)
{
    char why[256];
    int waitMs = fetchOnce(o, why, sizeof(why));

    if (waitMs > 0) {
        corLog(COR_LOG_INFO,
               "tls: OCSP staple of '%s' from %s: good, "
               "fetched again in %d s",
               o->certPath, o->url, waitMs / 1000);
        *retryMs = 0;
        return waitMs;
    }
    if (atomic_load(&corRuntime.stopping)) {
        return -1;
    }
    if (*retryMs <= 0) {
        *retryMs = RETRY_FIRST_MS;
    }
    corLog(COR_LOG_WARN,
           "tls: OCSP staple of '%s' from %s failed: %s; "
           "%s, tried again in %d s",
           o->certPath, o->url, why,
           o->der != NULL ? "the last one serves until its end"
                          : "served without a staple",
           *retryMs / 1000);
    waitMs = *retryMs;
    *retryMs = *retryMs * 2 < RETRY_MAX_MS ? *retryMs * 2 : RETRY_MAX_MS;
    return waitMs;
}

/* The fetch task: a good answer is fetched again halfway to its end, a
 * failure retried sooner, until the generation stops. */
static void
fetchTask(void* arg)
{
    CorTlsOcsp* o = arg;
    int retryMs = 0;
    int waitMs;

    do {
        waitMs = corTlsOcspRound(o, &retryMs);
    } while (waitMs > 0 && corTaskScheduleAfter(waitMs) == 0);
}

int
corTlsOcspStart(CorTlsOcsp* o)
{
    if (o->url == NULL) {
        return 0;
    }
    return corTaskSpawn(fetchTask, o, "ocsp");
}
