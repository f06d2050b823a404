/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the HTTP client: what the exchange (corHttpClient.c) takes from
 * the request's wire form (corHttpClientWire.c), the URL taken apart and
 * the request's head built, so that each file holds one concept.
 */
#ifndef COR_HTTP_CLIENT_INT_H
#define COR_HTTP_CLIENT_INT_H

#include "corHttpClient.h"

#include <string.h>
#include <strings.h>

/* A body this small goes out in the head's buffer (one write); a larger
 * one is written from the caller's memory, never copied. */
#define COR_HTTP_CLIENT_BODY_INLINE_MAX 4096

/* Take the http:// or https:// URL s apart into u (corUrlParse: u points
 * into s), with the HTTP client's rules: no user or password (it would
 * not send them), the port 80 or 443 when absent. Returns 0, or -EINVAL
 * with the reason in why. */
int corHttpClientUrlCheck(const char* s, CorUrl* u, char* why,
                          size_t whyLen);

/* One exchange to an http:// or https:// URL (corClientFetch, less
 * the other schemes): their fetch (corHttpScheme.c). */
int corHttpClientExchange(const CorClientRequest* req,
                          CorClientResponse* res);

/* Check q's method and headers. Returns 0, or -EINVAL with why. */
int corHttpClientRequestCheck(const CorClientRequest* q, char* why,
                              size_t whyLen);

/* Whether q's body goes out in the head's buffer. */
bool corHttpClientBodyInline(const CorClientRequest* q);
/* The length of a body passed on from a request (q->bodyFrom) when it is
 * known (its client said it, or it came whole): sent with that
 * Content-Length, as it came; -1: sent chunked. */
int64_t corHttpClientBodyFromLength(const CorClientRequest* q);

/* q's head (and its body when inline) in one block (corChunkTake, of
 * *sizeP bytes; NULL with no memory), its length in *lenP; *wantCloseP
 * set when q asks for Connection: close. */
char* corHttpClientRequestHead(const CorClientRequest* q,
                               const CorUrl* url, size_t* lenP,
                               size_t* sizeP, bool* wantCloseP);

/* Whether the field name s[0..n) is name, case-insensitive. Inline: the
 * length of a literal name is known where it is called. */
static inline bool corHttpClientNameIs(const char* s, size_t n,
                                       const char* name);

/* ---- inline definitions -------------------------------------------------- */

static inline bool
corHttpClientNameIs(const char* s, size_t n, const char* name)
{
    return strlen(name) == n && strncasecmp(s, name, n) == 0;
}

#endif /* COR_HTTP_CLIENT_INT_H */
