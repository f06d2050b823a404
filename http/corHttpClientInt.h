/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the HTTP client: what the exchange (corHttpClient.c) takes from
 * the request's wire form (corHttpClientWire.c), the URL taken apart and
 * the request's head built, so that each file holds one concept.
 */
#ifndef COR_HTTP_CLIENT_INT_H
#define COR_HTTP_CLIENT_INT_H

#include "corHttpClient.h"

#define COR_HTTP_CLIENT_URL_HOST_MAX 256

/* A body this small goes out in the head's buffer (one write); a larger
 * one is written from the caller's memory, never copied. */
#define COR_HTTP_CLIENT_BODY_INLINE_MAX 4096

/* An http:// or https:// URL taken apart. */
typedef struct {
    bool tls;
    unsigned port;
    char host[COR_HTTP_CLIENT_URL_HOST_MAX];    /* without brackets */
    const char* authority;      /* host[:port] as written: Host */
    size_t authorityLen;
    const char* target;         /* path and query as written, or "/" */
    size_t targetLen;
} CorHttpClientUrl;

/* Take s apart into u (which points into s). Returns 0, or -EINVAL with
 * the reason in why. */
int corHttpClientUrlParse(const char* s, CorHttpClientUrl* u, char* why,
                          size_t whyLen);

/* One exchange to an http:// or https:// URL (corHttpClientFetch, less
 * the other schemes): their fetch (corHttpScheme.c). */
int corHttpClientExchange(const CorHttpClientRequest* req,
                          CorHttpClientResponse* res);

/* Check q's method and headers. Returns 0, or -EINVAL with why. */
int corHttpClientRequestCheck(const CorHttpClientRequest* q, char* why,
                              size_t whyLen);

/* Whether q's body goes out in the head's buffer. */
bool corHttpClientBodyInline(const CorHttpClientRequest* q);

/* q's head (and its body when inline) in one buffer (malloc; NULL with no
 * memory), its length in *lenP; *wantCloseP set when q asks for
 * Connection: close. */
char* corHttpClientRequestHead(const CorHttpClientRequest* q,
                               const CorHttpClientUrl* url, size_t* lenP,
                               bool* wantCloseP);

/* Whether the field name s[0..n) is name, case-insensitive. */
bool corHttpClientNameIs(const char* s, size_t n, const char* name);

#endif /* COR_HTTP_CLIENT_INT_H */
