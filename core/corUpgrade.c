/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Upgrades: a handler answers 101 and takes its connection for another
 * protocol (WebSocket). This file checks that a request may be upgraded,
 * and reads and writes the connection once the protocol handed it over;
 * where the session runs is corRequest.c's business, like every phase of
 * a request.
 *
 * The reads and writes are those of CorConn (corConn.c): the transport,
 * so TLS too, never blocking, and every wait a corRestWaitFd, which yields
 * in a coroutine, polls on a worker, and ends with ECANCELED at a stop.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- The request --------------------------------------------------------- */

/* Whether the comma list value (one header's) holds token, compared
 * without case; with slash, "token/anything" matches too. */
static bool
listHasLen(const char* value, size_t len, const char* token, size_t tokenLen,
           bool slash)
{
    size_t i = 0;

    while (i < len) {
        size_t start;
        size_t end;

        while (i < len
               && (value[i] == ' ' || value[i] == '\t' || value[i] == ',')) {
            i++;
        }
        start = i;
        while (i < len && value[i] != ',') {
            i++;
        }
        end = i;
        while (end > start
               && (value[end - 1] == ' ' || value[end - 1] == '\t')) {
            end--;
        }
        if (end - start >= tokenLen
            && strncasecmp(value + start, token, tokenLen) == 0
            && (end - start == tokenLen
                || (slash && value[start + tokenLen] == '/'))) {
            return true;
        }
    }
    return false;
}

bool
corHeaderListHas(const CorHeader* h, const char* token, size_t tokenLen)
{
    return listHasLen(h->value, h->valueLen, token, tokenLen, false);
}

static bool
listHas(const char* value, size_t len, const char* token, bool slash)
{
    return listHasLen(value, len, token, strlen(token), slash);
}

/* Whether any header called name lists token. */
static bool
headerHas(const CorRequest* r, const char* name, const char* token, bool slash)
{
    size_t nameLen = strlen(name);

    for (unsigned i = 0; i < r->headerCount; i++) {
        const CorHeader* h = &r->headers[i];

        if (corHeaderIsLen(h, name, nameLen)
            && listHas(h->value, h->valueLen, token, slash)) {
            return true;
        }
    }
    return false;
}

int
corRequestUpgrade(CorRequest* r, const char* protocol, CorUpgradeFn fn,
                  void* arg)
{
    CorUpgraded* u;

    if (protocol == NULL || *protocol == '\0' || fn == NULL) {
        return -EINVAL;
    }
    if (r->responded || r->stream != NULL || r->upgrade != NULL) {
        return -EALREADY;
    }
    if (r->ops == NULL || r->ops->upgradable == NULL
        || !r->ops->upgradable(r)) {
        return -ENOTSUP;
    }
    if (r->methodLen != 3 || memcmp(r->method, "GET", 3) != 0
        || !headerHas(r, "Connection", "upgrade", false)
        || !headerHas(r, "Upgrade", protocol, true)) {
        return -EINVAL;
    }
    u = calloc(1, sizeof(*u));
    if (u == NULL) {
        return -ENOMEM;
    }
    u->r = r;
    u->fn = fn;
    u->arg = arg;
    if (corResponseHeader(r, "Upgrade", protocol) != 0
        || corResponseHeader(r, "Connection", "Upgrade") != 0) {
        free(u);
        return -ENOMEM;
    }
    corRespondStatic(r, 101, NULL, NULL, 0);
    if (!r->responded || r->status != 101) {
        free(u);
        return -EALREADY; /* its deadline answered first */
    }
    r->upgrade = u;
    return 0;
}

CorRequest*
corUpgradedRequest(CorUpgraded* u)
{
    return u->r;
}

/* ---- The connection ------------------------------------------------------ */

int
corUpgradedAdopt(CorUpgraded* u, const CorTransport* t, const void* rest,
                 size_t restLen, const void* unsent, size_t unsentLen)
{
    u->t = *t;
    u->open = true;
    if (restLen > 0) {
        u->in = malloc(restLen);
        if (u->in == NULL) {
            goto failed;
        }
        memcpy(u->in, rest, restLen);
        u->inLen = restLen;
    }
    if (unsentLen > 0) {
        u->out = malloc(unsentLen);
        if (u->out == NULL) {
            goto failed;
        }
        memcpy(u->out, unsent, unsentLen);
        u->outLen = unsentLen;
    }
    return 0;

failed:
    corLog(COR_LOG_ERROR, "upgrade: no memory for the connection's bytes");
    u->t.ops->close(&u->t);
    u->open = false;
    return -ENOMEM;
}

void
corUpgradedFree(CorUpgraded* u)
{
    if (u == NULL) {
        return;
    }
    if (u->open) {
        u->t.ops->close(&u->t);
    }
    free(u->in);
    free(u->out);
    free(u);
}

void
corUpgradedClose(CorUpgraded* u)
{
    if (u->open) {
        u->t.ops->close(&u->t);
        u->open = false;
    }
    u->closed = true;
}

/* Why u cannot be used: closed by its session, or never handed over (the
 * client left before the 101 went out); 0 when it can. */
static int
unusable(const CorUpgraded* u)
{
    if (u->closed) {
        return -EBADF;
    }
    return u->open ? 0 : -ECONNRESET;
}

/* Send what the protocol left unsent (the 101), before anything else. */
static int
flushUnsent(CorUpgraded* u, uint64_t deadline)
{
    int rc;

    if (u->out == NULL) {
        return 0;
    }
    rc = corDeadlineSendAll(&u->t, u->out + u->outSent, u->outLen - u->outSent,
                            deadline, NULL);
    if (rc == 0) {
        free(u->out);
        u->out = NULL;
        u->outLen = u->outSent = 0;
    }
    return rc;
}

ssize_t
corUpgradedRead(CorUpgraded* u, void* buf, size_t len, int timeoutMs)
{
    uint64_t deadline = corDeadlineAfter(timeoutMs);
    ssize_t n;
    int rc = unusable(u);

    if (rc != 0 || len == 0) {
        return rc != 0 ? rc : -EINVAL;
    }
    /* The client may wait for the 101 before it sends anything. */
    rc = flushUnsent(u, deadline);
    if (rc < 0) {
        return rc;
    }
    if (u->in != NULL && u->inPos < u->inLen) {
        n = (ssize_t)(u->inLen - u->inPos < len ? u->inLen - u->inPos : len);
        memcpy(buf, u->in + u->inPos, (size_t)n);
        u->inPos += (size_t)n;
        if (u->inPos == u->inLen) {
            free(u->in);
            u->in = NULL;
        }
        return n;
    }
    for (;;) {
        n = u->t.ops->recv(&u->t, buf, len);
        if (n >= 0) {
            return n;
        }
        rc = -errno;
        if (rc == -EINTR) {
            continue;
        }
        if (rc != -EAGAIN && rc != -EWOULDBLOCK) {
            return rc;
        }
        if (timeoutMs == 0) {
            return -EAGAIN;
        }
        rc = corDeadlineWaitFd(u->t.fd,
                               corTransportWantsWrite(&u->t) ? POLLOUT : POLLIN,
                               deadline);
        if (rc < 0) {
            return rc;
        }
    }
}

int
corUpgradedWriteAll(CorUpgraded* u, const void* buf, size_t len, int timeoutMs)
{
    uint64_t deadline = corDeadlineAfter(timeoutMs);
    int rc = unusable(u);

    if (rc != 0) {
        return rc;
    }
    rc = flushUnsent(u, deadline);
    if (rc < 0) {
        return rc;
    }
    return corDeadlineSendAll(&u->t, buf, len, deadline, NULL);
}

CorTransport*
corUpgradedTransport(CorUpgraded* u, int timeoutMs, const void** restP,
                     size_t* restLenP, int* errP)
{
    int rc = corUpgradedWriteAll(u, "", 0, timeoutMs);

    *restP = NULL;
    *restLenP = 0;
    if (rc < 0) {
        *errP = rc;
        return NULL;
    }
    if (u->in != NULL) {
        /* Given whole; the reads would take it again otherwise. */
        *restP = u->in + u->inPos;
        *restLenP = u->inLen - u->inPos;
        u->inPos = u->inLen;
    }
    return &u->t;
}
