/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.1 client of cor: one exchange (a method, an http:// or
 * https:// URL, headers and a body; a status, headers and a body), on
 * the connection layer of cor.h (corConnOpen and its keep-alive pool), in
 * a coroutine and on a worker alike. Installed beside cor.h; a module
 * includes it after (or instead of) cor.h:
 *
 *     CorHttpClientRequest q = { .url = "http://10.0.0.7:8080/price",
 *                                .totalTimeoutMs = 2000 };
 *     CorHttpClientResponse res;
 *
 *     if (corHttpClientFetch(&q, &res) == 0 && res.status == 200) {
 *         corRespond(r, 200, "application/json", res.body, res.bodyLen);
 *     } else {
 *         corRespondf(r, 502, "text/plain", "%s\n", res.error);
 *     }
 *     corHttpClientResponseFree(&res);
 *
 * A body too large to hold is read in pieces: corHttpClientOpen, then
 * corHttpClientBodyRead, then corHttpClientClose.
 *
 * Several at once: corHttpClientStart each, then corHttpClientWait each;
 * they run meanwhile, so a fan-out takes as long as its slowest answer.
 */
#ifndef COR_HTTP_CLIENT_H
#define COR_HTTP_CLIENT_H

#include "cor.h"

/* The default limit of a response body. */
#define COR_HTTP_CLIENT_BODY_MAX ((size_t)8 << 20)
/* The most bytes of a response head, and fields in it. */
#define COR_HTTP_CLIENT_HEAD_MAX 16384
#define COR_HTTP_CLIENT_FIELDS_MAX 100

/* An exchange to make. The caller's; read during corHttpClientFetch, and
 * copied by corHttpClientStart. */
typedef struct CorHttpClientRequest {
    const char* method;         /* NULL: GET */
    /* http://host[:port][/path][?query], or https://; host may be a name,
     * an IPv4 address or [an IPv6 one]. */
    const char* url;
    /* Sent after Host, as they are; a Host here replaces the URL's.
     * Content-Length and Transfer-Encoding are the client's (refused). */
    const CorHeader* headers;
    unsigned headerCount;
    const void* body;           /* sent with a Content-Length */
    size_t bodyLen;
    /* Deadlines, 0 for the default: connect (the name, the connect and a
     * TLS handshake; default client.connect_timeout), first byte (from
     * the request sent to the first byte of the answer; default none),
     * total (the whole exchange, retry included; default none), read
     * (every wait for the next byte once the first came: in the head, a
     * 1xx's included, and in corHttpClientFetch's body;
     * corHttpClientBodyRead takes its own; default the first byte's). */
    int connectTimeoutMs;
    int firstByteTimeoutMs;
    int totalTimeoutMs;
    int readTimeoutMs;
    size_t maxBodyBytes;        /* 0: COR_HTTP_CLIENT_BODY_MAX */
    CorTlsClient* tlsClient;    /* NULL: the default (client.ca_file) */
} CorHttpClientRequest;

/* What came back. Owned by the caller, who frees it with
 * corHttpClientResponseFree whatever the result of the call that set it. */
typedef struct CorHttpClientResponse {
    int status;                 /* the final status, 0 on failure */
    CorHeader* headers;         /* of the final answer (not of a 1xx) */
    unsigned headerCount;
    char* body;                 /* NUL-terminated (not counted) */
    size_t bodyLen;
    bool reused;                /* answered on a pooled connection */
    bool retried;               /* sent again on a new connection */
    bool sent;                  /* the request went to a peer (whole or in
                                   part): a failure after it may have
                                   been acted on */
    char error[256];            /* on failure: what and where */
    char* head;                 /* the client's: what headers point to */
} CorHttpClientResponse;

/*
 * Make one exchange: take a connection to the URL's host and port (TLS
 * for https) from the pool or open one, send the request, read the answer
 * (1xx answers skipped; no body for HEAD, 204 and 304; the body framed by
 * Content-Length, chunked, or the connection's end), and give the
 * connection back to the pool when the answer was read whole and
 * keep-alive applies. A request that failed on a pooled connection that
 * the peer had closed before any byte of the answer came is sent once
 * more on a new connection when no byte of it had been written, or when
 * its method is idempotent (corHttpClientIdempotent); never otherwise: a
 * POST the peer may have acted on fails with -ECONNRESET.
 *
 * Returns 0 with res set (any status is an answer), or -errno with
 * res->error saying why: -EINVAL (a bad URL, method or header),
 * -ETIMEDOUT (a deadline; the error names which), -ECANCELED (the
 * request was cancelled, or a stop), -ECONNREFUSED and the other errors
 * of corConnOpen, -ECONNRESET (the peer closed or reset before the end of
 * the answer), -EPROTO (a malformed answer, or TLS), -EFBIG (a body over
 * maxBodyBytes), -ENOMEM. May yield.
 */
int corHttpClientFetch(const CorHttpClientRequest* req,
                       CorHttpClientResponse* res);

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
 *     corHttpClientResponseFree(&res);
 */
typedef struct CorHttpClientExchange CorHttpClientExchange;

/*
 * Send req and read the head of its answer, as corHttpClientFetch does
 * (the same retry rule: the retry happens before any byte came), but not
 * its body. Returns 0 with res's status and headers set (res->body stays
 * NULL, but for a module's scheme, cor://, whose answers come whole: the
 * reads then give res->body out) and *xP the open exchange; or -errno with res->error said and *xP
 * NULL (the errors of corHttpClientFetch). req is read during the call
 * only. What waits for the answer holds no buffer: the head's is taken
 * when its first byte is there. May yield.
 */
int corHttpClientOpen(const CorHttpClientRequest* req,
                      CorHttpClientResponse* res,
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

/* The first response header named name (case-insensitive), or NULL; it
 * lives as long as res. */
const CorHeader* corHttpClientHeader(const CorHttpClientResponse* res,
                                     const char* name);

void corHttpClientResponseFree(CorHttpClientResponse* res);

/*
 * An exchange started and collected later. Owned by the code that started
 * it until it is collected (corHttpClientWait) or cancelled
 * (corHttpClientCancel), exactly once; one that the serving request left
 * behind is cancelled when the request's handler returns, and a request
 * cancelled (its client left, its deadline passed) cancels every exchange
 * it started.
 *
 * Where it runs: started in a coroutine of a loop, as a coroutine of its
 * own on that loop; anywhere else (a worker, blocking mode, past the
 * coroutine cap), on a thread of its own, which waits in poll() through
 * the same connection layer. Either way it runs at once, beside the code
 * that started it.
 */
typedef struct CorHttpClientCall CorHttpClientCall;

/* Start an exchange (req and all it points to are copied). Returns the
 * call, or NULL with *errP (may be NULL) set to -errno: -EINVAL (a bad
 * URL, method or header), -ECANCELED (the calling request is cancelled),
 * -ENOMEM. */
CorHttpClientCall* corHttpClientStart(const CorHttpClientRequest* req,
                                      int* errP);

/* Wait for call's end and collect it: as corHttpClientFetch, whose result
 * and res it gives. A wait cancelled (the calling request's cancel, a
 * stop) cancels the exchange and returns -ECANCELED. call is gone after.
 * May yield. */
int corHttpClientWait(CorHttpClientCall* call, CorHttpClientResponse* res);

/* Give up call: its waits end with ECANCELED and it frees itself once it
 * has stopped. call is gone after. Does not wait. */
void corHttpClientCancel(CorHttpClientCall* call);

/* The seed's names for the same calls, as its cor:// code reads:
 * corRestCorStart(&(CorHttpClientRequest){ .url = "cor://b:7070/x" }, &err)
 * starts a call now, corRestCorWait collects it. One client takes every
 * scheme, so they are the calls above. */
static inline CorHttpClientCall*
corRestCorStart(const CorHttpClientRequest* req, int* errP)
{
    return corHttpClientStart(req, errP);
}

static inline int
corRestCorWait(CorHttpClientCall* call, CorHttpClientResponse* res)
{
    return corHttpClientWait(call, res);
}

/* ---- URL schemes -----------------------------------------------------------
 *
 * corHttpClientFetch, corHttpClientOpen and corHttpClientStart take the
 * URLs of every scheme with a fetch (corSchemeAdd, cor.h): http and https
 * are this floor's, modules/cor registers cor and cors. A scheme that
 * fetches may send its notifications as exchanges with corHttpClientNotify
 * as its send: a request with the notification's method, headers and
 * body, acknowledged by a 2xx.
 */
int corHttpClientNotify(CorModule* m, const CorNotification* n, char* why,
                        size_t whyLen);

#endif /* COR_HTTP_CLIENT_H */
