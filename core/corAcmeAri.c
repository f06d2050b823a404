/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ACME Renewal Information (ARI, RFC 9773): a directory that lists
 * renewalInfo says when each certificate should be renewed, a window
 * that it may move earlier (a revocation coming, a CA incident), and so
 * overrides the client's own two thirds of the lifetime. This file holds
 * what needs no network: a certificate's identifier in the renewalInfo
 * URL and in a new order's "replaces" (4.1), and the time picked in a
 * suggested window (4.2); the task asks (corAcme.c).
 */
#include "corAcme.h"

#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char*
corAcmeAriId(X509* cert)
{
    AUTHORITY_KEYID* akid = X509_get_ext_d2i(cert, NID_authority_key_identifier,
                                             NULL, NULL);
    const ASN1_INTEGER* serial = X509_get0_serialNumber(cert);
    unsigned char* der = NULL;
    const unsigned char* p;
    char* keyId = NULL;
    char* number = NULL;
    char* id = NULL;
    int derLen;
    long len;
    int tag;
    int cls;

    /* The serial's bytes as DER encodes them (a leading zero kept),
     * without the INTEGER's tag and length. */
    derLen = i2d_ASN1_INTEGER((ASN1_INTEGER*)serial, &der);
    p = der;
    if (akid != NULL && akid->keyid != NULL && derLen > 0
        && !(ASN1_get_object(&p, &len, &tag, &cls, derLen) & 0x80)) {
        keyId = corAcmeB64(ASN1_STRING_get0_data(akid->keyid),
                           (size_t)ASN1_STRING_length(akid->keyid));
        number = corAcmeB64(p, (size_t)len);
    }
    if (keyId != NULL && number != NULL
        && asprintf(&id, "%s.%s", keyId, number) < 0) {
        id = NULL;
    }
    free(keyId);
    free(number);
    OPENSSL_free(der);
    AUTHORITY_KEYID_free(akid);
    return id;
}

/* An RFC 3339 time ("2025-01-02T04:00:00Z", a fraction and an offset
 * allowed) as Unix time; -1 when it is not one. */
static time_t
rfc3339(const char* text)
{
    struct tm tm = { 0 };
    const char* rest = text != NULL ? strptime(text, "%Y-%m-%dT%H:%M:%S", &tm)
                                    : NULL;
    int hours;
    int minutes;
    time_t t;

    if (rest == NULL) {
        return -1;
    }
    if (*rest == '.') {
        rest += 1 + strspn(rest + 1, "0123456789");
    }
    t = timegm(&tm);
    if ((*rest == 'Z' || *rest == 'z') && rest[1] == '\0') {
        return t;
    }
    if ((*rest == '+' || *rest == '-')
        && sscanf(rest + 1, "%2d:%2d", &hours, &minutes) == 2
        && strlen(rest) == 6) {
        return t - (*rest == '+' ? 1 : -1) * (hours * 3600 + minutes * 60);
    }
    return -1;
}

int
corAcmeAriWindow(const json_t* info, time_t* atP, char* why, size_t whyLen)
{
    json_t* window = json_object_get(info, "suggestedWindow");
    const char* startText = json_string_value(json_object_get(window, "start"));
    const char* endText = json_string_value(json_object_get(window, "end"));
    time_t start = rfc3339(startText);
    time_t end = rfc3339(endText);
    unsigned spread = 0;

    if (start < 0 || end < 0 || end < start) {
        snprintf(why, whyLen,
                 "no suggestedWindow with a start and an end in "
                 "RFC 3339 (start '%s', end '%s')",
                 startText != NULL ? startText : "",
                 endText != NULL ? endText : "");
        return -1;
    }
    /* A time at random in the window, so that the clients of one CA do
     * not all come at its start (4.2). */
    RAND_bytes((unsigned char*)&spread, sizeof(spread));
    *atP = start
           + (end > start ? (time_t)(spread % (unsigned long)(end - start))
                          : 0);
    return 0;
}
