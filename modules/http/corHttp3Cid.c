/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection IDs: ours name the loop that owns the connection in their
 * first byte, so that a datagram the kernel gave another loop's socket
 * (the client's port changed, and SO_REUSEPORT hashed it elsewhere) is
 * handed to its owner without a look-up in every loop. Each loop keeps
 * its connections' IDs in a table of its own (no lock): ours, and the
 * one a client chose for its first Initial packets.
 */
#include "corHttp3Int.h"

#include <gnutls/crypto.h>
#include <stdlib.h>
#include <string.h>

void
corHttp3CidMake(const HttpLoop* hl, ngtcp2_cid* cid)
{
    cid->datalen = H3_CID_BYTES;
    cid->data[0] = (uint8_t)hl->index;
    gnutls_rnd(GNUTLS_RND_NONCE, cid->data + 1, H3_CID_BYTES - 1);
}

int
corHttp3CidLoop(const uint8_t* id, size_t len)
{
    if (len != H3_CID_BYTES || id[0] >= corHttpLoopCount()) {
        return -1;
    }
    return id[0];
}

/* FNV-1a over the ID: its bytes are random but the first, ours or the
 * client's. */
static unsigned
bucketOf(const uint8_t* id, size_t len)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ id[i]) * 16777619u;
    }
    return h % H3_CID_BUCKETS;
}

Http3Conn*
corHttp3CidFind(Http3Loop* h, const uint8_t* id, size_t len)
{
    for (Http3Cid* e = h->cids[bucketOf(id, len)]; e != NULL; e = e->next) {
        if (e->cid.datalen == len && memcmp(e->cid.data, id, len) == 0) {
            return e->conn;
        }
    }
    return NULL;
}

int
corHttp3CidAdd(Http3Loop* h, Http3Conn* c, const ngtcp2_cid* cid)
{
    unsigned b = bucketOf(cid->data, cid->datalen);
    Http3Cid* e = malloc(sizeof(*e));

    if (e == NULL) {
        return -ENOMEM;
    }
    e->cid = *cid;
    e->conn = c;
    e->next = h->cids[b];
    h->cids[b] = e;
    corListAppend(&c->cids, &e->link);
    return 0;
}

static void
entryRemove(Http3Loop* h, Http3Cid* e)
{
    Http3Cid** at = &h->cids[bucketOf(e->cid.data, e->cid.datalen)];

    while (*at != e) {
        at = &(*at)->next;
    }
    *at = e->next;
    corListRemove(&e->link);
    free(e);
}

void
corHttp3CidRemove(Http3Loop* h, const ngtcp2_cid* cid)
{
    for (Http3Cid* e = h->cids[bucketOf(cid->data, cid->datalen)]; e != NULL;
         e = e->next) {
        if (ngtcp2_cid_eq(&e->cid, cid)) {
            entryRemove(h, e);
            return;
        }
    }
}

void
corHttp3CidRemoveAll(Http3Loop* h, Http3Conn* c)
{
    while (!corListEmpty(&c->cids)) {
        entryRemove(h, corContainerOf(corListFirst(&c->cids), Http3Cid, link));
    }
}
