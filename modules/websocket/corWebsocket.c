/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An example module: a WebSocket (RFC 6455) echo on the HTTP Upgrade
 * hand-off. Its handler checks the opening handshake, answers it with
 * Sec-WebSocket-Accept and takes the connection (corRequestUpgrade); the
 * session then echoes every message, text or binary, whole or in
 * fragments, answers pings, and closes with the handshake and a status:
 * 1000 back to a client that closes, 1002 for a frame no client may send
 * (unmasked, reserved bits, a bad fragment order, a close frame with a
 * status no client may send), 1007 for text that is not UTF-8, 1009 for
 * a message over max_message, 1001 at a stop or past idle_timeout. After
 * its own close frame it drains what the client still sends until the
 * client's (bounded), then closes at once.
 *
 *     modules:
 *       - { load: websocket, max_message: 1MiB, idle_timeout: 60s }
 *     routes:
 *       - { match: "GET /ws", handler: websocket }
 *
 * The session is a coroutine of the connection's loop (a worker in
 * blocking mode): every read and write waits through corRestWaitFd. The
 * frames are read and written by corWsFrame.c, which does no I/O.
 */
#include "cor.h"
#include "corWsFrame.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
/* What a read asks the connection for. */
#define WS_READ_BYTES 16384
/* After its close frame, the server drains what the client still sends
 * until the client's close frame: a close with bytes unread would reset
 * the connection, and a client still sending (the rest of a message over
 * max_message) would lose the close frame to the reset (seen as 1006).
 * The drain ends when the client is quiet for WS_CLOSE_WAIT_MS, or after
 * WS_DRAIN_MS or WS_DRAIN_BYTES in all, as nginx's lingering close. */
#define WS_CLOSE_WAIT_MS 2000
#define WS_DRAIN_MS 30000
#define WS_DRAIN_BYTES ((uint64_t)64 * 1024 * 1024)
/* How long a write waits for room. */
#define WS_WRITE_MS 10000

/* The module's settings, set at init. */
typedef struct {
    uint64_t maxMessage;
    uint64_t idleTimeoutMs;
} WsConf;

static WsConf wsConf;

/* A session's state; on its coroutine's (or worker's) stack. */
typedef struct {
    CorUpgraded* u;
    uint8_t in[WS_READ_BYTES]; /* read, not yet taken */
    size_t inPos;
    size_t inLen;
    uint8_t* message; /* the message being gathered */
    size_t messageLen;
    size_t messageCap;
    unsigned messageOpcode; /* 0: none in progress */
    uint64_t skip;          /* payload of a refused frame still due */
    uint64_t drained;       /* bytes dropped since the close frame */
    uint64_t drainEndMs;    /* when the drain gives up */
} WsSession;

/* ---- Reading ------------------------------------------------------------- */

/* Have at least want (<= WS_READ_BYTES) bytes in s->in. Returns 0, 1 for
 * the client's end or a failure (logged at debug), or -ETIMEDOUT. */
static int
inputNeed(WsSession* s, size_t want, int timeoutMs)
{
    if (s->inLen - s->inPos >= want) {
        return 0;
    }
    memmove(s->in, s->in + s->inPos, s->inLen - s->inPos);
    s->inLen -= s->inPos;
    s->inPos = 0;
    while (s->inLen < want) {
        ssize_t n = corUpgradedRead(s->u, s->in + s->inLen,
                                    sizeof(s->in) - s->inLen, timeoutMs);

        if (n == -ETIMEDOUT) {
            return -ETIMEDOUT;
        }
        if (n <= 0) {
            corLog(COR_LOG_DEBUG, "websocket: read: %s",
                   n == 0 ? "the client's end" : strerror((int)-n));
            return n == -ECANCELED ? -ECANCELED : 1;
        }
        s->inLen += (size_t)n;
    }
    return 0;
}

/* Take len bytes of payload into dst, unmasked, as they come. */
static int
payloadRead(WsSession* s, uint8_t* dst, uint64_t len, const uint8_t* mask,
            int timeoutMs)
{
    uint64_t done = 0;

    while (done < len) {
        size_t take;
        int rc = inputNeed(s, 1, timeoutMs);

        if (rc != 0) {
            return rc;
        }
        take = s->inLen - s->inPos;
        if (take > len - done) {
            take = (size_t)(len - done);
        }
        memcpy(dst + done, s->in + s->inPos, take);
        corWsMask(dst + done, take, mask, done);
        s->inPos += take;
        done += take;
    }
    return 0;
}

/* ---- Writing ------------------------------------------------------------- */

static int
frameWrite(WsSession* s, unsigned opcode, const void* payload, size_t len)
{
    uint8_t head[COR_WS_HEAD_MAX];
    size_t n = corWsFrameHeadWrite(head, true, opcode, len, NULL);
    int rc = corUpgradedWriteAll(s->u, head, n, WS_WRITE_MS);

    if (rc == 0 && len > 0) {
        rc = corUpgradedWriteAll(s->u, payload, len, WS_WRITE_MS);
    }
    return rc;
}

/* Have at least want bytes of input while draining, within the drain's
 * bounds. Returns 0, or non-zero to close now. */
static int
drainNeed(WsSession* s, size_t want)
{
    uint64_t now = corEvClockMs();
    uint64_t wait = s->drainEndMs > now ? s->drainEndMs - now : 0;

    if (wait == 0 || s->drained > WS_DRAIN_BYTES) {
        return 1;
    }
    return inputNeed(s, want,
                     wait < WS_CLOSE_WAIT_MS ? (int)wait : WS_CLOSE_WAIT_MS);
}

/* Drop len bytes of input as they come. Returns 0, or non-zero to close
 * now. */
static int
drainSkip(WsSession* s, uint64_t len)
{
    while (len > 0) {
        size_t skip;

        if (drainNeed(s, 1) != 0) {
            return 1;
        }
        skip = s->inLen - s->inPos;
        if (skip > len) {
            skip = (size_t)len;
        }
        s->inPos += skip;
        s->drained += skip;
        len -= skip;
    }
    return 0;
}

/*
 * Close with code: send the close frame, then drain what the client still
 * sends (the rest of a refused frame, frames sent before it read ours)
 * until its close frame, and close the connection at once, the exchange
 * being over. Input whose framing is lost (a bad head) is dropped until
 * the client ends or goes quiet. A stop's cancel ends the wait at once.
 */
static void
sessionClose(WsSession* s, unsigned code)
{
    uint8_t payload[2] = { (uint8_t)(code >> 8), (uint8_t)code };
    CorWsFrameHead h;
    int rc;

    if (frameWrite(s, COR_WS_CLOSE, payload, 2) != 0) {
        goto done;
    }
    s->drainEndMs = corEvClockMs() + WS_DRAIN_MS;
    if (drainSkip(s, s->skip) != 0) {
        goto done;
    }
    for (;;) {
        rc = corWsFrameHeadRead(s->in + s->inPos, s->inLen - s->inPos, &h);
        if (rc == 0) {
            if (drainNeed(s, s->inLen - s->inPos + 1) != 0) {
                break;
            }
            continue;
        }
        if (rc < 0) {
            drainSkip(s, UINT64_MAX);
            break;
        }
        if (h.opcode == COR_WS_CLOSE) {
            break;
        }
        s->inPos += h.headLen;
        if (drainSkip(s, h.payloadLen) != 0) {
            break;
        }
    }

done:
    corUpgradedClose(s->u);
}

/* ---- The session --------------------------------------------------------- */

/* A control frame (whole, payload read): 0 to go on, else the close
 * status to end with (0 after a close handshake done here). */
static unsigned
controlFrame(WsSession* s, const CorWsFrameHead* h, const uint8_t* payload)
{
    unsigned code;

    switch (h->opcode) {
    case COR_WS_PING:
        return frameWrite(s, COR_WS_PONG, payload, (size_t)h->payloadLen) == 0
                   ? 0
                   : COR_WS_CLOSE_GOING_AWAY;
    case COR_WS_PONG:
        return 0;
    default:
        /* The client closed: its close frame is the last it sends, so
         * there is nothing to drain. Echo its status (none: none), or say
         * 1002 for one it may not send, and end at once. */
        if (corWsCloseRead(payload, (size_t)h->payloadLen, &code) != 0) {
            static const uint8_t refused[2] = { COR_WS_CLOSE_PROTOCOL >> 8,
                                                COR_WS_CLOSE_PROTOCOL & 0xFF };

            frameWrite(s, COR_WS_CLOSE, refused, sizeof(refused));
        } else {
            frameWrite(s, COR_WS_CLOSE, payload,
                       code == COR_WS_CLOSE_NO_STATUS ? 0 : 2);
        }
        corUpgradedClose(s->u);
        return COR_WS_CLOSE_NO_STATUS;
    }
}

/* Gather a data frame's payload into the message; echo it once whole.
 * Returns 0 to go on, or the close status to end with. */
static unsigned
dataFrame(WsSession* s, const CorWsFrameHead* h)
{
    uint64_t total;
    int rc;

    /* A refusal before the payload is read leaves it to the close's
     * drain. */
    s->skip = h->payloadLen;
    if ((h->opcode == COR_WS_CONTINUATION) != (s->messageOpcode != 0)) {
        return COR_WS_CLOSE_PROTOCOL; /* a fragment out of order */
    }
    if (h->opcode != COR_WS_CONTINUATION) {
        s->messageOpcode = h->opcode;
        s->messageLen = 0;
    }
    total = s->messageLen + h->payloadLen;
    if (total > wsConf.maxMessage) {
        return COR_WS_CLOSE_TOO_BIG;
    }
    if (total > s->messageCap) {
        size_t cap = s->messageCap ? s->messageCap : 4096;
        uint8_t* grown;

        while (cap < total) {
            cap *= 2;
        }
        grown = realloc(s->message, cap);
        if (grown == NULL) {
            return COR_WS_CLOSE_TOO_BIG;
        }
        s->message = grown;
        s->messageCap = cap;
    }
    s->skip = 0;
    rc = payloadRead(s, s->message + s->messageLen, h->payloadLen, h->mask,
                     WS_WRITE_MS);
    if (rc != 0) {
        return rc == -ECANCELED ? COR_WS_CLOSE_GOING_AWAY
                                : COR_WS_CLOSE_NO_STATUS;
    }
    s->messageLen = (size_t)total;
    if (!h->fin) {
        return 0;
    }
    if (s->messageOpcode == COR_WS_TEXT
        && !corWsUtf8Valid(s->message, s->messageLen)) {
        return COR_WS_CLOSE_BAD_DATA;
    }
    rc = frameWrite(s, s->messageOpcode, s->message, s->messageLen);
    s->messageOpcode = 0;
    return rc == 0 ? 0 : COR_WS_CLOSE_NO_STATUS;
}

/* One frame: 0 to go on, else the status to close with
 * (COR_WS_CLOSE_NO_STATUS: close without a frame). */
static unsigned
frameNext(WsSession* s)
{
    CorWsFrameHead h;
    uint8_t control[COR_WS_CONTROL_MAX];
    int rc;

    for (;;) {
        rc = corWsFrameHeadRead(s->in + s->inPos, s->inLen - s->inPos, &h);
        if (rc != 0) {
            break;
        }
        rc = inputNeed(s, s->inLen - s->inPos + 1, (int)wsConf.idleTimeoutMs);
        if (rc != 0) {
            return rc == -ETIMEDOUT || rc == -ECANCELED
                       ? COR_WS_CLOSE_GOING_AWAY
                       : COR_WS_CLOSE_NO_STATUS;
        }
    }
    if (rc < 0) {
        return COR_WS_CLOSE_PROTOCOL;
    }
    s->inPos += h.headLen;
    if (!h.masked) {
        s->skip = h.payloadLen;
        return COR_WS_CLOSE_PROTOCOL; /* a client masks every frame */
    }
    if (h.opcode < COR_WS_CLOSE) {
        return dataFrame(s, &h);
    }
    rc = payloadRead(s, control, h.payloadLen, h.mask, WS_WRITE_MS);
    if (rc != 0) {
        return rc == -ECANCELED ? COR_WS_CLOSE_GOING_AWAY
                                : COR_WS_CLOSE_NO_STATUS;
    }
    return controlFrame(s, &h, control);
}

static void
wsSession(CorUpgraded* u, void* arg)
{
    WsSession* s = malloc(sizeof(*s));
    unsigned code = 0;

    (void)arg;
    if (s == NULL) {
        corUpgradedClose(u);
        return;
    }
    memset(s, 0, sizeof(*s));
    s->u = u;
    while (code == 0) {
        code = frameNext(s);
    }
    if (code != COR_WS_CLOSE_NO_STATUS) {
        sessionClose(s, code);
    }
    corUpgradedClose(u);
    free(s->message);
    free(s);
}

/* ---- The handshake ------------------------------------------------------- */

/* Whether key is the base64 of 16 bytes (RFC 6455 4.2.1). */
static bool
keyValid(const char* key)
{
    unsigned char raw[24];

    return strlen(key) == 24 && key[22] == '=' && key[23] == '='
           && EVP_DecodeBlock(raw, (const unsigned char*)key, 24) == 18;
}

static void
wsServe(CorRequest* r)
{
    const char* version = corRequestHeaderText(r, "Sec-WebSocket-Version");
    const char* key = corRequestHeaderText(r, "Sec-WebSocket-Key");
    unsigned char digest[SHA_DIGEST_LENGTH];
    char accept[64];
    char keyed[128];
    int rc;

    if (version == NULL || strcmp(version, "13") != 0) {
        corResponseHeader(r, "Sec-WebSocket-Version", "13");
        corRespond(r, 426, "text/plain", "WebSocket version 13 only\n", 26);
        return;
    }
    if (key == NULL || !keyValid(key)) {
        corRespond(r, 400, "text/plain", "bad Sec-WebSocket-Key\n", 22);
        return;
    }
    rc = corRequestUpgrade(r, "websocket", wsSession, NULL);
    if (rc != 0) {
        corRespondf(r, 400, "text/plain", "not a WebSocket handshake: %s\n",
                    strerror(-rc));
        return;
    }
    snprintf(keyed, sizeof(keyed), "%s%s", key, WS_GUID);
    SHA1((const unsigned char*)keyed, strlen(keyed), digest);
    EVP_EncodeBlock((unsigned char*)accept, digest, sizeof(digest));
    corResponseHeader(r, "Sec-WebSocket-Accept", accept);
}

static int
wsInit(CorModule* m, const CorConf* conf)
{
    CorConfErrors* errors = corModuleErrors(m);

    wsConf.maxMessage = corConfSize(conf, "max_message", 1024 * 1024, 1,
                                    (uint64_t)1 << 30, errors);
    wsConf.idleTimeoutMs = corConfDurationMs(conf, "idle_timeout", 60000, 1,
                                             24 * 3600 * 1000, errors);
    return corHandlerAdd(m, &(CorHandler){ .name = "websocket",
                                           .serve = wsServe,
                                           .run = COR_RUN_COROUTINE });
}

COR_MODULE(websocket, .init = wsInit);
