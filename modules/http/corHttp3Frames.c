/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an HTTP/3 client sends, seen as it comes, before nghttp3 takes it
 * (docs/http3.md, Defences): HTTP/2's flood defences, for HTTP/3. Every
 * stream the client opened gets a reader of its frame heads (the ngtcp2
 * stream's user data): the varints of each frame's type and length, a
 * payload skipped, nothing copied.
 *
 * Frames that make no progress (HTTP/2's CVE-2019-9518): an empty DATA or
 * HEADERS, a PRIORITY_UPDATE, a CANCEL_PUSH, GOAWAY or MAX_PUSH_ID, a
 * frame of a reserved or unknown type (nghttp3 skips those without a
 * word), and a unidirectional stream of a reserved or unknown type. Each
 * costs the connection one of http2.idle_frame_limit a second, beside one
 * for each request stream it opened in that second (a browser may send a
 * PRIORITY_UPDATE for each); past it the connection ends.
 *
 * Streams the client cancels (CVE-2023-44487's rapid reset, as HTTP/2
 * counts RST_STREAM): a request stream it resets (RESET_STREAM) or whose
 * answer it refuses (STOP_SENDING), once a stream, past
 * http2.rapid_reset_limit a second. Both end the connection with
 * H3_EXCESSIVE_LOAD (corHttp3Conn.c).
 *
 * And one fault of nghttp3 0.8 (Debian 12's) kept from it: a
 * PRIORITY_UPDATE whose element ID ends where a read ends, with more of
 * the frame to come, trips an assertion in nghttp3_conn_read_control and
 * aborts the process (fixed in later nghttp3, which returns there). Any
 * client could end a generation with one frame split so; the reader
 * says how many bytes to hold back, to hand on with the next read.
 */
#include "corHttp3Int.h"
#include "corHttp2Int.h" /* the limits, shared with h2 */

#include <stdlib.h>

#define FRAME_DATA 0x0
#define FRAME_HEADERS 0x1
#define FRAME_SETTINGS 0x4
#define FRAME_PRIORITY_UPDATE 0xf0700
#define STREAM_CONTROL 0x0
#define STREAM_PUSH 0x1
#define STREAM_QPACK_ENCODER 0x2
#define STREAM_QPACK_DECODER 0x3

/* Where a reader is in its stream. */
enum {
    READ_STREAM_TYPE,  /* a unidirectional stream's first varint */
    READ_FRAME_TYPE,   /* a frame's type */
    READ_FRAME_LENGTH, /* its length */
    READ_ELEMENT_ID,   /* a PRIORITY_UPDATE's element ID */
    READ_PAYLOAD,      /* the rest of a frame, skipped */
    READ_NOTHING,      /* QPACK's instructions, or a stream nghttp3 stops */
};

Http3Frames*
corHttp3FramesOf(Http3Conn* c, int64_t id, void* streamArg)
{
    Http3Frames* f = streamArg;

    if (f != NULL) {
        return f;
    }
    f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return NULL;
    }
    f->id = id;
    f->phase = (id & 0x2) != 0 ? READ_STREAM_TYPE : READ_FRAME_TYPE;
    corListAppend(&c->frames, &f->link);
    ngtcp2_conn_set_stream_user_data(c->quic, id, f);
    if ((id & 0x2) == 0) {
        corHttp3BudgetTick(c);
        c->budget.begun++;
    }
    return f;
}

void
corHttp3FramesFree(Http3Frames* f)
{
    if (f != NULL) {
        corListRemove(&f->link);
        free(f);
    }
}

void
corHttp3FramesFreeAll(Http3Conn* c)
{
    while (!corListEmpty(&c->frames)) {
        corHttp3FramesFree(
            corContainerOf(corListFirst(&c->frames), Http3Frames, link));
    }
}

void
corHttp3BudgetTick(Http3Conn* c)
{
    uint64_t now = corEvNow(c->hl->loop);
    Http3Budget* b = &c->budget;

    if (now >= b->windowMs + 1000) {
        b->windowMs = now;
        b->resets = b->idle = b->begun = 0;
    }
}

/* One more frame that made no progress: whether it is past the budget
 * (then the connection's abuse is said). */
static bool
idlePast(Http3Conn* c)
{
    corHttp3BudgetTick(c);
    if (++c->budget.idle > corHttp2Conf.idlePerSecond + c->budget.begun) {
        c->budget.abuse = H3_ABUSE_NO_PROGRESS + 1;
        return true;
    }
    return false;
}

bool
corHttp3FramesCancelled(Http3Conn* c, Http3Frames* f)
{
    if (f->cancelled) {
        return false; /* its RESET_STREAM and STOP_SENDING: one cancel */
    }
    f->cancelled = true;
    corHttp3BudgetTick(c);
    if (++c->budget.resets > corHttp2Conf.resetsPerSecond) {
        c->budget.abuse = H3_ABUSE_RAPID_RESET + 1;
        return true;
    }
    return false;
}

/* One more byte of the varint f reads: whether it is whole (in acc). */
static bool
varintByte(Http3Frames* f, uint8_t b)
{
    if (f->need == 0) {
        f->need = (uint8_t)(1u << (b >> 6));
        f->acc = b & 0x3f;
    } else {
        f->acc = f->acc << 8 | b;
    }
    return --f->need == 0;
}

/* The frame whose head was just read moves nothing. */
static bool
frameIdle(const Http3Frames* f)
{
    switch (f->type) {
    case FRAME_DATA:
    case FRAME_HEADERS:
        return f->left == 0;
    case FRAME_SETTINGS:
        return false; /* once, the first of the control stream */
    default:
        return true;
    }
}

/* A unidirectional stream's type was read. */
static void
streamTyped(Http3Conn* c, Http3Frames* f)
{
    switch (f->acc) {
    case STREAM_CONTROL:
        f->control = true;
        f->phase = READ_FRAME_TYPE;
        return;
    case STREAM_PUSH: /* from a client: nghttp3 ends it */
    case STREAM_QPACK_ENCODER:
    case STREAM_QPACK_DECODER:
        break;
    default:
        idlePast(c); /* reserved or unknown: nghttp3 stops it */
        break;
    }
    f->phase = READ_NOTHING;
}

/* A frame's length was read: what follows it. */
static void
frameHeaded(Http3Conn* c, Http3Frames* f)
{
    f->left = f->acc;
    if (frameIdle(f) && idlePast(c)) {
        return;
    }
    if (f->left == 0) {
        f->phase = READ_FRAME_TYPE;
    } else if (f->control && f->type == FRAME_PRIORITY_UPDATE) {
        f->phase = READ_ELEMENT_ID;
    } else {
        f->phase = READ_PAYLOAD;
    }
}

size_t
corHttp3FramesScan(Http3Conn* c, Http3Frames* f, const uint8_t* p, size_t len)
{
    size_t elementAt = 0; /* where an element ID began in p */
    size_t i = 0;

    while (i < len && c->budget.abuse == 0) {
        if (f->phase == READ_NOTHING) {
            return 0;
        }
        if (f->phase == READ_PAYLOAD) {
            uint64_t n = f->left < len - i ? f->left : len - i;

            i += n;
            f->left -= n;
            f->phase = f->left == 0 ? READ_FRAME_TYPE : READ_PAYLOAD;
            continue;
        }
        if (f->phase == READ_ELEMENT_ID) {
            if (f->left == 0) {
                f->phase = READ_NOTHING; /* malformed: nghttp3's error */
                return 0;
            }
            elementAt = f->need == 0 ? i : elementAt;
            f->left--;
        }
        if (!varintByte(f, p[i++])) {
            continue;
        }
        switch (f->phase) {
        case READ_STREAM_TYPE:
            streamTyped(c, f);
            break;
        case READ_FRAME_TYPE:
            f->type = f->acc;
            f->phase = READ_FRAME_LENGTH;
            break;
        case READ_FRAME_LENGTH:
            frameHeaded(c, f);
            break;
        default: /* READ_ELEMENT_ID */
            f->phase = f->left > 0 ? READ_PAYLOAD : READ_FRAME_TYPE;
            if (f->left > 0 && i == len) {
                return len - elementAt; /* nghttp3 0.8 would abort */
            }
            break;
        }
    }
    return 0;
}
