/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corAcceptEncoding.h: what a client's Accept-Encoding says of the
 * content codings a server may answer with. The core's, for every module
 * that chooses a coding (compress, which encodes on the fly, and static,
 * which picks a file compressed ahead), so that none depends on another
 * for it; corModule.h includes it.
 */
#ifndef COR_ACCEPT_ENCODING_H
#define COR_ACCEPT_ENCODING_H

#include <stddef.h>

/* The codings beside identity, in the order a server that has them all
 * at no cost prefers them: the smallest first. */
typedef enum {
    COR_CODING_ZSTD,
    COR_CODING_BR,
    COR_CODING_GZIP,
    COR_CODINGS
} CorCoding;

/* Their names, as Accept-Encoding and Content-Encoding say them. */
extern const char* const corCodingNames[COR_CODINGS];

/*
 * The weight the Accept-Encoding value value[0..len) (RFC 9110 12.5.3)
 * gives each coding, in thousandths (q=0.5 is 500; no q is 1000): by its
 * name (x-gzip is gzip), else by "*", else 0. 0 refuses; a q that is no
 * qvalue does not refuse (1000). value NULL (no header: identity only)
 * gives 0 to all.
 */
void corAcceptEncodingWeights(const char* value, size_t len,
                              unsigned weights[COR_CODINGS]);

/* The first of prefer[0..count) that the value accepts (a weight above
 * 0), whatever the client's own order; -1 for none. */
int corAcceptEncodingFirst(const char* value, size_t len,
                           const CorCoding* prefer, unsigned count);

#endif /* COR_ACCEPT_ENCODING_H */
