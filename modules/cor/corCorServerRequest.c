/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A cor:// request on the server (corCorServer.c reads the frames): made
 * from its REQUEST, its target decoded as HTTP decodes a request line's,
 * served by the core like any request, answered with a RESPONSE queued
 * the moment its handler is done (a file read whole: a frame carries a
 * whole body), released after its post-response phase. A streamed answer
 * goes as it is written to a client that took streams at its HELLO: a
 * RESPONSE head flagged MORE at the stream's start, a DATA frame per
 * piece, and a last DATA frame (CUT when it failed midway); the
 * connection's unsent output is what the core bounds it by
 * (streamBacklog), so a large body passes in bounded memory and a client
 * that reads slowly slows its producer. To a client of before, it is
 * gathered whole into one RESPONSE, as it always was. A request owns what it
 * reads, so a connection that closes under it frees nothing it uses. What it
 * holds counts against its connection's max_in_flight_bytes until its release,
 * which lets a connection paused by it read on.
 */
#include "corCorServerInt.h"
#include "corCorInt.h"
#include "corHttpParse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void requestDone(CorRequest* r);
static void requestRelease(CorRequest* r);
static void streamData(CorRequest* r, const void* data, size_t len);
static void streamEnd(CorRequest* r);
static bool streamAlive(const CorRequest* r);
static void streamAbort(CorRequest* r);

static size_t streamBacklog(const CorRequest* r);

/* No upgrade. */
static const CorProtocolOps corOps = {
    .done = requestDone,
    .release = requestRelease,
    .streamData = streamData,
    .streamEnd = streamEnd,
    .streamAlive = streamAlive,
    .streamBacklog = streamBacklog,
    .streamAbort = streamAbort,
    .kind = COR_PROTOCOL_COR,
};

/* The most body bytes one DATA frame carries: a piece larger is split, so
 * that no frame nears a peer's frame limit and answers on the same
 * connection take turns. */
#define DATA_FRAME_BYTES ((size_t)256 * 1024)

/* Queue a RESPONSE, encoded now from m with no tree between (but a JSON
 * body's). Returns 0, or -errno with why (nothing was queued, the tables
 * did not move). */
static int
responseQueue(CorServerConn* c, uint32_t id, const CorCorMessage* m, char* why,
              size_t whyLen)
{
    int rc = corCorMessageEncode(c->sent, COR_COR_RESPONSE, id, m, &c->k.out,
                                 why, whyLen);

    return rc < 0 ? rc : 0;
}

/* A RESPONSE that no handler made (a bad target, past max_in_flight). */
int
corCorServerAnswerBare(CorServerConn* c, uint32_t id, int status,
                       const char* text)
{
    CorCorMessage m = { .status = status,
                        .contentType = "text/plain",
                        .body = text,
                        .bodyLen = strlen(text) };
    char why[COR_COR_WHY_MAX];
    int rc = responseQueue(c, id, &m, why, sizeof(why));

    if (rc < 0) {
        corLog(COR_LOG_ERROR, "cor: a frame to %s not encoded: %s", c->peerName,
               why);
    }
    return rc;
}

static void
requestLink(CorServerConn* c, CorServerRequest* req)
{
    req->conn = c;
    corListInsert(&c->requests, &req->link);
    c->inFlight++;
    c->heldBytes += req->held;
}

void
corCorServerRequestUnlink(CorServerRequest* req)
{
    CorServerConn* c = req->conn;

    if (c == NULL) {
        return;
    }
    corListRemove(&req->link);
    if (!req->answered) {
        c->inFlight--;
    }
    c->heldBytes -= req->held;
    req->conn = NULL;
}

/*
 * The request of a REQUEST message, which it takes over. Its target is
 * decoded as HTTP decodes a request line's (the same routes must match
 * the same paths); a target HTTP would refuse is answered 400 here. The
 * path as it came (the message's) is what a proxy passes on.
 * Returns the request, or NULL (answered, or no memory).
 */
static CorServerRequest*
requestCreate(CorServerConn* c, uint32_t id, CorCorMessage* m)
{
    size_t targetLen = strlen(m->path);
    unsigned count = m->headerCount + (m->contentType != NULL);
    size_t block = sizeof(CorServerRequest) + count * sizeof(CorHeader)
                   + targetLen + 1;
    CorServerRequest* req = corChunkTake(&block);
    char* target;
    CorHttpTarget t;

    if (req == NULL) {
        corCorServerAnswerBare(c, id, 503, "no memory\n");
        return NULL;
    }
    /* Zeroed but for r, which is written whole below. */
    memset((char*)req + sizeof(req->r), 0, sizeof(*req) - sizeof(req->r));
    req->block = block;
    target = memcpy((char*)(req->headers + count), m->path, targetLen + 1);
    if (corHttpTargetDecode(target, targetLen, &t) != 0) {
        corChunkGive(req, block);
        corCorServerAnswerBare(c, id, 400, "bad path\n");
        return NULL;
    }
    memcpy(req->headers, m->headers, m->headerCount * sizeof(CorHeader));
    if (m->contentType != NULL) {
        req->headers[m->headerCount] = (CorHeader){ .name = "Content-Type",
                                                    .nameLen = 12,
                                                    .value = m->contentType,
                                                    .valueLen = strlen(
                                                        m->contentType) };
    }
    req->id = id;
    req->held = sizeof(*req) + count * sizeof(CorHeader) + targetLen
                + m->headerCount * sizeof(CorHeader) + m->bodyLen;
    req->message = *m;
    *m = (CorCorMessage){ 0 };
    req->r = (CorRequest){
        .method = req->message.verb,
        .methodLen = strlen(req->message.verb),
        .path = t.path,
        .pathLen = t.pathLen,
        .query = t.query,
        .queryLen = t.queryLen,
        .headers = req->headers,
        .headerCount = count,
        .body = req->message.body,
        .bodyLen = req->message.bodyLen,
        .head = strcmp(req->message.verb, "HEAD") == 0,
        .remote = req->remote,
        .secure = c->tls,
        .version = "COR/1",
    };
    req->r.rawPath = req->message.path;
    req->r.rawPathLen = strcspn(req->message.path, "?");
    memcpy(req->remote, c->remote, sizeof(req->remote));
    return req;
}

static void
requestFree(CorServerRequest* req)
{
    corCorMessageClear(&req->message);
    corBufFree(&req->streamed);
    corChunkGive(req, req->block);
}

/* A file body (corRespondFile), read whole: a frame carries it. */
static int
fileRead(CorRequest* r, CorBuf* into)
{
    size_t len = r->responseLen;
    size_t got = 0;

    if (len > corCorServerConf.maxFrame) {
        return -EFBIG;
    }
    into->data = malloc(len > 0 ? len : 1);
    if (into->data == NULL) {
        return -ENOMEM;
    }
    while (got < len) {
        ssize_t n = pread(r->fileFd, into->data + got, len - got,
                          (off_t)r->fileOffset + (off_t)got);

        if (n <= 0) {
            return n == 0 ? -EIO : -errno;
        }
        got += (size_t)n;
    }
    into->len = into->cap = len;
    return 0;
}

/* The RESPONSE of req, queued now; a response that cannot be encoded
 * (a header HTTP could not carry either) goes out as a 500. */
static void
respond(CorServerConn* c, CorServerRequest* req)
{
    CorRequest* r = &req->r;
    CorBuf file = { 0 };
    CorCorMessage m = { .status = r->status,
                        .headers = r->responseHeaders,
                        .headerCount = r->responseHeaderCount,
                        .contentType = r->contentType,
                        .body = r->responseBody,
                        .bodyLen = r->responseLen };
    char why[COR_COR_WHY_MAX];

    if (req->streamFailed) {
        m = (CorCorMessage){ .status = 502,
                             .contentType = "text/plain",
                             .body = "the answer failed midway\n",
                             .bodyLen = 25 };
    } else if (r->stream != NULL) {
        m.body = req->streamed.data;
        m.bodyLen = req->streamed.len;
    } else if (r->fileFd >= 0 && fileRead(r, &file) == 0) {
        m.body = file.data;
        m.bodyLen = file.len;
    } else if (r->fileFd >= 0) {
        m = (CorCorMessage){ .status = 500,
                             .contentType = "text/plain",
                             .body = "the file could not be read\n",
                             .bodyLen = 27 };
    }
    if (r->head) {
        m.body = NULL;
        m.bodyLen = 0;
    }
    /* What the access log says is what went out. */
    r->status = m.status;
    r->bodySent = m.bodyLen;
    r->cut = r->cut || req->streamFailed; /* or its client left */
    if (responseQueue(c, req->id, &m, why, sizeof(why)) != 0) {
        corLog(COR_LOG_ERROR, "cor: the answer to %.*s %.*s: %s",
               (int)r->methodLen, r->method, (int)r->pathLen, r->path, why);
        r->status = 500;
        r->bodySent = 0;
        corCorServerAnswerBare(c, req->id, 500,
                               "the answer could not be encoded\n");
    }
    corBufFree(&file);
}

/* No memory for a DATA frame: the connection is shut, and ends on the
 * loop's next look at it (not here, under a request that uses it), so
 * that an answer with a hole in its body never reads as whole. */
static void
connBreak(CorServerConn* c)
{
    corLog(COR_LOG_ERROR, "cor: %s: no memory for a frame: closing",
           c->peerName);
    shutdown(c->t.fd, SHUT_RDWR);
}

/* The head of req's streamed answer, a RESPONSE flagged MORE, queued at
 * the stream's start; one that cannot be encoded (a header HTTP could not
 * carry either) leaves the answer gathered, and answered 502. */
static void
headSend(CorServerConn* c, CorServerRequest* req)
{
    CorRequest* r = &req->r;
    CorCorMessage m = { .status = r->status,
                        .headers = r->responseHeaders,
                        .headerCount = r->responseHeaderCount,
                        .contentType = r->contentType };
    size_t start = c->k.out.len;
    char why[COR_COR_WHY_MAX];

    if (responseQueue(c, req->id, &m, why, sizeof(why)) != 0) {
        corLog(COR_LOG_ERROR, "cor: the answer to %.*s %.*s: %s",
               (int)r->methodLen, r->method, (int)r->pathLen, r->path, why);
        req->streamFailed = true;
        return;
    }
    corCorHeadFlagsSet(c->k.out.data + start, COR_COR_FLAG_MORE);
    req->streaming = true;
    c->streaming++;
    corKitConnKick(&c->k);
}

/* The body's end, the last DATA frame: CUT when it failed midway. */
static void
lastSend(CorServerConn* c, CorServerRequest* req)
{
    unsigned flags = req->streamFailed ? COR_COR_FLAG_CUT : 0;

    if (corCorDataEncode(&c->k.out, req->id, flags, NULL, 0) < 0) {
        connBreak(c);
    }
    req->r.cut = req->r.cut || req->streamFailed;
    c->streaming--;
}

void
corCorServerStreamsDrained(CorServerConn* c)
{
    CorList* node;
    CorList* next;

    if (corKitConnOutPending(&c->k) >= COR_STREAM_QUEUE_MAX) {
        return;
    }
    corListForEach(node, next, &c->requests)
    {
        CorServerRequest* req = corContainerOf(node, CorServerRequest, link);

        if (req->streaming && !req->answered) {
            corResponseStreamDrained(&req->r);
        }
    }
}

int
corCorServerRequestStop(CorServerConn* c, CorServerRequest* req)
{
    if (req->streaming) {
        req->streamFailed = true;
        lastSend(c, req);
        req->answered = true;
        c->inFlight--;
        return 0;
    }
    return corCorServerAnswerBare(c, req->id, 503, "stopping\n");
}

/* req is answered (or its connection gone): the core runs its
 * post-response phase, then releases it. */
static void
answered(CorServerRequest* req)
{
    CorServerConn* c = req->conn;

    if (c != NULL) {
        if (req->streaming) {
            lastSend(c, req);
        } else {
            respond(c, req);
        }
        req->answered = true;
        c->inFlight--;
    } else {
        req->r.cut = true;
    }
    corRequestSent(&req->r);
    if (c != NULL) {
        corKitConnKick(&c->k);
    }
}

static void
requestDone(CorRequest* r)
{
    CorServerRequest* req = corContainerOf(r, CorServerRequest, r);

    if (r->stream == NULL) {
        answered(req);
    } else if (req->conn != NULL && req->conn->streams && !r->head) {
        headSend(req->conn, req);
    }
    /* Else the body is gathered; its end answers. */
}

/* A piece of a streamed answer as DATA frames. No memory for them ends
 * the connection: a body with a hole must not read as whole. */
static void
dataSend(CorServerConn* c, CorServerRequest* req, const char* data, size_t len)
{
    while (len > 0) {
        size_t n = len < DATA_FRAME_BYTES ? len : DATA_FRAME_BYTES;

        if (corCorDataEncode(&c->k.out, req->id, COR_COR_FLAG_MORE, data, n)
            < 0) {
            connBreak(c);
            return;
        }
        req->r.bodySent += n;
        data += n;
        len -= n;
    }
    corKitConnKick(&c->k);
}

static void
streamData(CorRequest* r, const void* data, size_t len)
{
    CorServerRequest* req = corContainerOf(r, CorServerRequest, r);

    if (req->conn == NULL || req->streamFailed) {
        return;
    }
    if (req->streaming) {
        dataSend(req->conn, req, data, len);
        return;
    }
    if (req->streamed.len + len > corCorServerConf.maxFrame
        || corBufReserve(&req->streamed, len) != 0) {
        /* No room for it in one frame: the answer fails whole. */
        corLog(COR_LOG_ERROR,
               "cor: a streamed answer to %.*s past "
               "max_frame (%u bytes): answered 502",
               (int)r->pathLen, r->path, corCorServerConf.maxFrame);
        req->streamFailed = true;
        corBufFree(&req->streamed);
        return;
    }
    memcpy(req->streamed.data + req->streamed.len, data, len);
    req->streamed.len += len;
}

static void
streamEnd(CorRequest* r)
{
    answered(corContainerOf(r, CorServerRequest, r));
}

/* The stream failed (its upstream died mid-body): a streaming answer
 * ends with a CUT; one gathered whole, which a frame cannot say
 * "incomplete" of, becomes a 502, never the part that came as if it were
 * whole. */
static void
streamAbort(CorRequest* r)
{
    CorServerRequest* req = corContainerOf(r, CorServerRequest, r);

    req->streamFailed = true;
    corBufFree(&req->streamed);
    answered(req);
}

static bool
streamAlive(const CorRequest* r)
{
    return corContainerOf(r, CorServerRequest, r)->conn != NULL;
}

/* What a streaming answer waits behind: its connection's unsent output,
 * every answer's on it (one gathered whole waits for nothing). */
static size_t
streamBacklog(const CorRequest* r)
{
    const CorServerRequest* req = corContainerOf(r, CorServerRequest, r);

    return req->streaming && req->conn != NULL
               ? corKitConnOutPending(&req->conn->k)
               : 0;
}

static void
requestRelease(CorRequest* r)
{
    CorServerRequest* req = corContainerOf(r, CorServerRequest, r);
    CorServerConn* c = req->conn;

    corCorServerRequestUnlink(req);
    if (c != NULL && c->k.readPaused) {
        /* What it held may let the read go on. */
        corKitConnKick(&c->k);
    }
    requestFree(req);
}

int
corCorServerRequestRefuse(CorServerConn* c, uint32_t id, CorCorMessage* m,
                          uint64_t bodyLen)
{
    CorServerRequest* req = requestCreate(c, id, m);
    int status;

    corCorMessageClear(m);
    if (req == NULL) {
        return 0; /* answered already */
    }
    req->r.bodyLen = bodyLen;
    /* Its frame is longer than any request within the limits can take: a
     * member that counts against none of them made it so, if none is
     * past. Answered on its own stream: the connection goes on. Judged,
     * and said, by its route's limits. */
    corRequestLimits(&req->r);
    status = corLimitsRequest(&req->r);
    status = corLimitsAnswer(&req->r, status != 0 ? status : 413);
    requestFree(req);
    return corCorServerAnswerBare(c, id, status, corLimitsText(status));
}

int
corCorServerRequestServe(CorServerConn* c, uint32_t id, CorCorMessage* m)
{
    CorServerRequest* req = requestCreate(c, id, m);

    corCorMessageClear(m);
    if (req == NULL) {
        return 0; /* answered already */
    }
    requestLink(c, req);
    corRequestServe(&req->r, &corOps, req);
    return 0;
}
