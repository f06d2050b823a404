/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PROXY protocol's header (HAProxy's proxy-protocol.txt): what a load
 * balancer in front writes first on each connection to say whose it is,
 * a line of text (v1) or a binary block (v2). Its parsers, pure, apart
 * from the reading on the loop (corProxyAccept.c) so that the fuzzer
 * (fuzz/corProxyFuzz.c) and the unit test take them alone.
 */
#ifndef COR_PROXY_HEADER_H
#define COR_PROXY_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The shortest header of either version ("PROXY UNKNOWN\r\n"): a reader
 * may take that many bytes before it knows which, and no more. */
#define COR_PROXY_MIN 15
/* v1's longest line, its CRLF included. */
#define COR_PROXY_V1_MAX 107
/* v2's fixed part: the signature, version and command, family, length. */
#define COR_PROXY_V2_FIXED 16
/* What of a v2 header a reader keeps: the fixed part and the longest
 * address block (two AF_UNIX paths). The TLVs after it are read and
 * dropped: nothing here needs them. */
#define COR_PROXY_V2_KEEP (COR_PROXY_V2_FIXED + 216)

/* Whether buf[0..len) (len >= 1) may begin a header: a prefix of v1's
 * "PROXY " or of v2's signature. */
bool corProxyPrefix(const uint8_t* buf, size_t len);

/* Whether a header that begins so (COR_PROXY_MIN bytes or more) is v1. */
bool corProxyIsV1(const uint8_t* buf);

/*
 * The v1 line line[0..len), which ends in its first "\r\n": its source
 * address and port into *src, or src->ss_family AF_UNSPEC for "PROXY
 * UNKNOWN" (the connection's own address stands). Returns 0, or -1 when
 * the line is malformed.
 */
int corProxyV1Parse(const uint8_t* line, size_t len,
                    struct sockaddr_storage* src);

/* A v2 header's whole length (its fixed part and what its length field
 * says) from its COR_PROXY_V2_FIXED first bytes; -1 when they are no v2
 * header (signature, version, command, family or transport unknown). */
long corProxyV2Length(const uint8_t* fixed);

/*
 * The v2 header of which buf[0..len) was kept (at least its address
 * block: len >= the whole length or COR_PROXY_V2_KEEP): its source
 * into *src, or AF_UNSPEC where the connection's own address stands (the
 * LOCAL command, a health check of the balancer's own; an UNSPEC or
 * AF_UNIX family). Returns 0, or -1 when it is malformed (an address
 * block longer than the header says).
 */
int corProxyV2Parse(const uint8_t* buf, size_t len,
                    struct sockaddr_storage* src);

#endif /* COR_PROXY_HEADER_H */
