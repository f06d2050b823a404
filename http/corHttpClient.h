/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP floor of the client: its wire, beside the client of every
 * scheme (corClientFetch, corClientOpen, corClientStart... in
 * corClient.h, which take http:// and https:// because this floor
 * registers them, as modules/cor registers cor://). What is HTTP's stays
 * here: the limits of an answer's head, and the registration of http and
 * https. Installed beside cor.h; a module includes it after (or instead
 * of) cor.h.
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
 * (corClientIdempotent); never otherwise: a POST the peer may have
 * acted on fails with -ECONNRESET.
 */

/* The most bytes of a response head, and fields in it. */
#define COR_HTTP_CLIENT_HEAD_MAX 16384
#define COR_HTTP_CLIENT_FIELDS_MAX 100

/* ---- URL schemes --------------------------------------------------------- */

/* Register http and https (their fetch, stream operations, notifications
 * and loopExit) in the core's registry: called once by the binary's main
 * before anything else runs (corHttpMain.c). */
void corHttpSchemesAdd(void);

#endif /* COR_HTTP_CLIENT_H */
