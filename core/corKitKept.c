/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connections a thread keeps off the loops (corKit.h, CorKitKept):
 * what the cor:// and MQTT clients' thread paths each did by hand, a
 * thread-local list of connections found again by their peer's key, each
 * a CorKitConn driven by poll() over its CorConn. The key is the caller's
 * word for a peer (its scheme, host, port, and whatever else makes two
 * connections not interchangeable), so that the kit compares strings and
 * knows no protocol.
 */
#include "corKit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

CorKitKept*
corKitKeptFind(CorList* kept, const char* key)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, kept)
    {
        CorKitKept* kk = corContainerOf(node, CorKitKept, link);

        if (strcmp(kk->key, key) == 0) {
            return kk;
        }
    }
    return NULL;
}

int
corKitKeptAdd(CorList* kept, CorKitKept* kk, const char* key)
{
    kk->key = strdup(key);
    if (kk->key == NULL) {
        return -ENOMEM;
    }
    kk->conn = NULL;
    corKitConnInit(&kk->k, NULL, NULL);
    corListInsert(kept, &kk->link);
    return 0;
}

void
corKitKeptAttach(CorKitKept* kk, CorConn* conn)
{
    kk->conn = conn;
    corKitConnAttach(&kk->k, corConnTransport(conn));
}

void
corKitKeptClose(CorKitKept* kk)
{
    corConnClose(kk->conn); /* NULL-safe */
    kk->conn = NULL;
    kk->k.in.len = kk->k.in.off = 0;
    kk->k.out.len = kk->k.out.off = 0;
}

void
corKitKeptFree(CorKitKept* kk)
{
    corListRemove(&kk->link);
    corConnClose(kk->conn);
    kk->conn = NULL;
    corKitConnFree(&kk->k);
    free(kk->key);
    kk->key = NULL;
}
