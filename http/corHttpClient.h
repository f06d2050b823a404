/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 floor of the client: its wire, beside the client of every
 * scheme (corClientFetch, corClientStart... in corClient.h, which take
 * http:// and https:// because this floor registers them, as modules/cor
 * registers cor://). What is HTTP's stays here: an exchange whose body is
 * read in pieces, for an answer too large to hold (corHttpClientOpen,
 * then corHttpClientBodyRead, then corHttpClientClose; a proxy passes it
 * on as it comes), the idempotent-method rule of its retry, and
 * notifications sent as exchanges. Installed beside cor.h; a module
 * includes it after (or instead of) cor.h.
 */
#ifndef COR_HTTP_CLIENT_H
#define COR_HTTP_CLIENT_H

#include "cor.h"

/*
 * corClientFetch of an http:// or https:// URL: take a connection to the
 * URL's host and port (TLS for https) from the pool or open one, send the
 * request, read the answer (1xx answers skipped; no body for HEAD, 204
 * and 304; the body framed by Content-Length, chunked, or the
 * connection's end), and give the connection back to the pool when the
 * answer was read whole and keep-alive applies. A request that failed on
 * a pooled connection that the peer had closed before any byte of the
 * answer came is sent once more on a new connection when no byte of it
 * had been written, or when its method is idempotent
 * (corHttpClientIdempotent); never otherwise: a POST the peer may have
 * acted on fails with -ECONNRESET.
 */

/* The most bytes of a response head, and fields in it. */
#define COR_HTTP_CLIENT_HEAD_MAX 16384
#define COR_HTTP_CLIENT_FIELDS_MAX 100

/*
 * An exchange whose body is read in pieces, for an answer too large to
 * hold (a proxy passes it on as it comes). Owned by the caller from
 * corHttpClientOpen to corHttpClientClose, used by one piece of work at a
 * time on the thread that opened it. While it is open it writes its
 * errors into the res it was opened with, which must outlive it.
 *
 *     CorHttpClientExchange* x;
 *     char buf[16384];
 *     ssize_t n;
 *
 *     if (corHttpClientOpen(&q, &res, &x) == 0) {
 *         while ((n = corHttpClientBodyRead(x, buf, sizeof(buf), 30000))
 *                > 0) {
 *             pass(buf, n);
 *         }
 *         corHttpClientClose(x);      (pooled only when n was 0)
 *     }
 *     corClientResponseFree(&res);
 */
typedef struct CorHttpClientExchange CorHttpClientExchange;

/*
 * Send req and read the head of its answer, as corClientFetch does
 * (the same retry rule: the retry happens before any byte came), but not
 * its body. Returns 0 with res's status and headers set (res->body stays
 * NULL, but for a module's scheme, cor://, whose answers come whole: the
 * reads then give res->body out) and *xP the open exchange; or -errno
 * with res->error said and *xP NULL (the errors of corClientFetch). req
 * is read during the call only. What waits for the answer holds no
 * buffer: the head's is taken when its first byte is there. May yield.
 */
int corHttpClientOpen(const CorClientRequest* req, CorClientResponse* res,
                      CorHttpClientExchange** xP);

/*
 * Read the next bytes of x's body (decoded: chunked framing removed) into
 * buf, waiting at most timeoutMs (< 0: no deadline) for a byte, within
 * the request's total deadline. Returns the bytes read (> 0), 0 at the
 * body's end (a HEAD, 204 and 304 have none), or -errno with res->error
 * said: -ETIMEDOUT, -ECANCELED, -ECONNRESET (the peer closed or reset
 * before the body's end), -EPROTO (bad chunked framing, TLS), -EINVAL
 * (len 0). A failure stays: every later read returns it. May yield.
 */
ssize_t corHttpClientBodyRead(CorHttpClientExchange* x, void* buf,
                              size_t len, int timeoutMs);

/*
 * A request whose headers ask to switch protocols (Connection: upgrade,
 * with an Upgrade field; HTTP/1.1 only) takes a 101 as its answer, with
 * no body, and its connection is then the new protocol's: take it with
 * corHttpClientUpgraded (any other answer is read as usual). Returns the
 * connection (the caller's from here: corConnClose it), with the bytes
 * that came past the 101's head in *restP and *restLenP (res's, which must
 * outlive their use); NULL when x's answer is not a 101 of HTTP/1.1. x
 * must still be closed (corHttpClientClose).
 */
CorConn* corHttpClientUpgraded(CorHttpClientExchange* x, const void** restP,
                               size_t* restLenP);

/* Whether x's body was read to its end. */
bool corHttpClientBodyDone(const CorHttpClientExchange* x);

/* Done with x (NULL: nothing): its connection goes back to the pool when
 * the body was read to its end and keep-alive applies, and is closed
 * otherwise (an answer left half read cannot carry another exchange). x
 * is gone after; res stays the caller's. */
void corHttpClientClose(CorHttpClientExchange* x);

/* Whether method (NULL: GET) is idempotent (RFC 9110 section 9.2.2: GET,
 * HEAD, OPTIONS, TRACE, PUT, DELETE): sent twice, it does what it does
 * once, so a request the peer may have seen can be sent again. */
bool corHttpClientIdempotent(const char* method);

/* ---- URL schemes -----------------------------------------------------------
 *
 * corHttpClientOpen, like corClientFetch and corClientStart, takes the
 * URLs of every scheme with a fetch (corSchemeAdd, cor.h): http and https
 * are this floor's, modules/cor registers cor and cors. A scheme that
 * fetches may send its notifications as exchanges with corHttpClientNotify
 * as its send: a request with the notification's method, headers and
 * body, acknowledged by a 2xx.
 */
int corHttpClientNotify(CorModule* m, const CorNotification* n, char* why,
                        size_t whyLen);

#endif /* COR_HTTP_CLIENT_H */
