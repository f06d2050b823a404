/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor:// for cor-request, on the module's codec (modules/cor): a HELLO
 * first, then REQUEST frames without waiting for its answer (a server
 * takes requests behind a HELLO in flight), answers matched by their
 * correlation id. A CLOSE from the server (a drain) is answered with ours;
 * the requests already sent are still answered.
 */
#include "corRequest.h"
#include "corCorCodec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One connection's tables, and the answer last cut (its strings are
 * printed before the next one is decoded). */
typedef struct {
    CorCorTables* sent;
    CorCorTables* received;
    CorCorMessage answer;
    CorBuf head; /* the answer's head, as printed */
    CorBuf* out; /* where a CLOSE in answer goes */
} CorState;

static void*
corStateNew(void)
{
    CorState* s = calloc(1, sizeof(*s));

    if (s != NULL) {
        s->sent = corCorTablesNew();
        s->received = corCorTablesNew();
    }
    if (s == NULL || s->sent == NULL || s->received == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

static void
corStateFree(void* state)
{
    CorState* s = state;

    corCorTablesFree(s->sent);
    corCorTablesFree(s->received);
    corCorMessageClear(&s->answer);
    corBufFree(&s->head);
    free(s);
}

/* Encode one frame into out: tree, or the message m (a REQUEST, with no
 * tree between). */
static int
frameAppend(CorState* s, CorCorType type, uint32_t id, const json_t* tree,
            const CorCorMessage* m, CorBuf* out)
{
    CorBuf frame = { 0 };
    char why[COR_COR_WHY_MAX];
    int rc = m != NULL ? corCorMessageEncode(s->sent, type, id, m, &frame, why,
                                             sizeof(why))
                       : corCorFrameEncode(s->sent, type, id, tree, &frame, why,
                                           sizeof(why));

    if (rc < 0) {
        fprintf(stderr, "cor-request: %s\n", why);
    } else {
        rc = corBufAppend(out, frame.data, frame.len);
    }
    corBufFree(&frame);
    return rc < 0 ? rc : 0;
}

static int
corGreet(void* state, CorBuf* out)
{
    CorState* s = state;
    json_t* hello = corCorHelloTree(false);
    int rc = hello != NULL ? frameAppend(s, COR_COR_HELLO, 0, hello, NULL, out)
                           : -ENOMEM;

    json_decref(hello);
    s->out = out;
    return rc;
}

/* "Name: value" into a CorHeader (pointing into line). */
static CorHeader
headerSplit(const char* line)
{
    const char* colon = strchr(line, ':');
    const char* value = colon != NULL ? colon + 1 : line + strlen(line);

    while (*value == ' ') {
        value++;
    }
    return (CorHeader){ .name = line,
                        .nameLen = colon ? (size_t)(colon - line)
                                         : strlen(line),
                        .value = value,
                        .valueLen = strlen(value) };
}

static int
corEncode(void* state, const CorReqMessage* m, uint32_t id, CorBuf* out)
{
    CorHeader headers[65];
    CorCorMessage msg = { .verb = m->method,
                          .path = m->target,
                          .headers = headers,
                          .body = m->body,
                          .bodyLen = m->bodyLen };
    for (unsigned i = 0; i < m->headerCount && i < 65; i++) {
        CorHeader h = headerSplit(m->headers[i]);

        if (h.nameLen == 12 && strncasecmp(h.name, "Content-Type", 12) == 0) {
            msg.contentType = h.value;
        } else {
            headers[msg.headerCount++] = h;
        }
    }
    return frameAppend(state, COR_COR_REQUEST, id, NULL, &msg, out);
}

static int
headAppend(CorState* s, const char* fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || corBufReserve(&s->head, (size_t)n + 1) != 0) {
        return -ENOMEM;
    }
    va_start(ap, fmt);
    vsnprintf((char*)s->head.data + s->head.len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s->head.len += (size_t)n;
    return 0;
}

/* The head of an answer as cor-request prints it, HTTP's way. */
static int
headFormat(CorState* s, const CorCorMessage* m)
{
    int rc;

    s->head.len = 0;
    rc = headAppend(s, "COR/1 %d\r\n", m->status);
    for (unsigned i = 0; rc == 0 && i < m->headerCount; i++) {
        rc = headAppend(s, "%.*s: %.*s\r\n", (int)m->headers[i].nameLen,
                        m->headers[i].name, (int)m->headers[i].valueLen,
                        m->headers[i].value);
    }
    if (rc == 0 && m->contentType != NULL) {
        rc = headAppend(s, "Content-Type: %s\r\n", m->contentType);
    }
    return rc == 0 ? headAppend(s, "\r\n") : rc;
}

/* A frame that is not an answer: the handshake, a CLOSE, a PONG. */
static int
controlTake(CorState* s, const CorCorHead* h, json_t* tree, CorReqAnswer* a,
            char* why, size_t whyLen)
{
    switch (h->type) {
    case COR_COR_HELLO_ACK:
        return corCorHelloCheck(tree, why, whyLen);
    case COR_COR_CLOSE:
        a->goAway = true;
        return s->out != NULL
                   ? frameAppend(s, COR_COR_CLOSE, 0, NULL, NULL, s->out)
                   : 0;
    case COR_COR_PONG:
        return 0;
    case COR_COR_ERROR:
        snprintf(why, whyLen, "the server refused: %s",
                 json_string_value(json_object_get(tree, "message")));
        return -EPROTO;
    default:
        snprintf(why, whyLen, "a frame of type %d from the server",
                 (int)h->type);
        return -EPROTO;
    }
}

/* A RESPONSE, whole at buf, decoded straight into the answer. */
static ssize_t
answerTake(CorState* s, const uint8_t* buf, CorCorHead* h, CorReqAnswer* a,
           char* why, size_t whyLen)
{
    if (corCorMessageDecode(s->received, buf, COR_COR_HEAD_LEN + h->length,
                            COR_COR_FRAME_MAX, h, &s->answer, why, whyLen)
            != 0
        || headFormat(s, &s->answer) != 0) {
        return -1;
    }
    *a = (CorReqAnswer){ .status = s->answer.status,
                         .id = h->id,
                         .head = (const char*)s->head.data,
                         .headLen = s->head.len,
                         .body = s->answer.body,
                         .bodyLen = s->answer.bodyLen };
    return (ssize_t)(COR_COR_HEAD_LEN + h->length);
}

static ssize_t
corDecode(void* state, char* in, size_t len, const CorReqMessage* oldest,
          CorReqAnswer* a, char* why, size_t whyLen)
{
    CorState* s = state;
    const uint8_t* buf = (const uint8_t*)in;
    CorCorHead h;
    json_t* tree = NULL;
    int rc = corCorHeadRead(buf, len, COR_COR_FRAME_MAX, &h, why, whyLen);

    (void)oldest;
    if (rc == -EAGAIN || (rc > 0 && len < COR_COR_HEAD_LEN + h.length)) {
        return 0;
    }
    corCorMessageClear(&s->answer);
    if (rc > 0 && h.type == COR_COR_RESPONSE) {
        return answerTake(s, buf, &h, a, why, whyLen);
    }
    if (rc < 0
        || corCorFrameDecode(h.type == COR_COR_HELLO_ACK ? NULL : s->received,
                             buf, COR_COR_HEAD_LEN + h.length,
                             COR_COR_FRAME_MAX, &h, &tree, why, whyLen)
               != 0) {
        return -1;
    }
    rc = controlTake(s, &h, tree, a, why, whyLen);
    json_decref(tree);
    return rc < 0 ? -1 : (ssize_t)(COR_COR_HEAD_LEN + h.length);
}

const CorReqProtocol corReqCor = {
    .alpn = "cor/1",
    .multiplexed = true,
    .stateNew = corStateNew,
    .stateFree = corStateFree,
    .greet = corGreet,
    .encode = corEncode,
    .decode = corDecode,
};
