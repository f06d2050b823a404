/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stream's body on its way out over HTTP/3. nghttp3 sends from the
 * bytes it is given without copying them, and ngtcp2 sends them again
 * from there when a packet is lost, so they must stay put until the peer
 * acknowledged them: a queue of pieces, each freed once acknowledged.
 * A body in memory is borrowed (its request outlives the queue), a
 * streamed body's pieces and a file's reads are copies.
 */
#include "corHttp3Int.h"

#include <stdlib.h>
#include <string.h>

int
corHttp3OutAdd(Http3Out* o, const void* data, size_t len, bool copy)
{
    Http3Piece* p;

    if (len == 0) {
        return 0; /* nothing an acknowledgement would ever free */
    }
    p = malloc(sizeof(*p) + (copy ? len : 0));
    if (p == NULL) {
        return -ENOMEM;
    }
    p->next = NULL;
    p->len = len;
    p->data = copy ? memcpy(p->own, data, len) : data;
    if (o->tail != NULL) {
        o->tail->next = p;
    } else {
        o->head = p;
    }
    o->tail = p;
    if (o->unsent == NULL) {
        o->unsent = p;
    }
    o->unsentLen += len;
    return 0;
}

size_t
corHttp3OutTake(Http3Out* o, nghttp3_vec* vec, size_t count)
{
    size_t n = 0;

    while (o->unsent != NULL && n < count) {
        Http3Piece* p = o->unsent;

        vec[n++] = (nghttp3_vec){ .base = (uint8_t*)(uintptr_t)p->data,
                                  .len = p->len };
        o->unsentLen -= p->len;
        o->flying += p->len;
        o->unsent = p->next;
    }
    return n;
}

void
corHttp3OutAcked(Http3Out* o, uint64_t n)
{
    o->flying -= n < o->flying ? n : o->flying;
    while (n > 0 && o->head != NULL && o->head != o->unsent) {
        Http3Piece* p = o->head;
        size_t left = p->len - o->ackedOff;

        if (n < left) {
            o->ackedOff += n;
            return;
        }
        n -= left;
        o->ackedOff = 0;
        o->head = p->next;
        if (o->head == NULL) {
            o->tail = NULL;
        }
        free(p);
    }
}

void
corHttp3OutFree(Http3Out* o)
{
    while (o->head != NULL) {
        Http3Piece* p = o->head;

        o->head = p->next;
        free(p);
    }
    *o = (Http3Out){ 0 };
}
