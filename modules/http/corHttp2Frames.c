/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The frames an HTTP/2 peer sends, seen as they come, before nghttp2 takes
 * them (docs/http2.md, Defences): the one place that sees every frame,
 * whatever nghttp2 does with it next; it drops many without a callback
 * (DATA on a stream it closed, frames of an unknown type, a HEADERS it
 * ignores). Only frame heads are read, and a padded frame's pad length:
 * a few instructions a frame, nothing copied. Two rules need that view.
 *
 * Frames that make no progress (CVE-2019-9518): an empty DATA (no bytes,
 * no END_STREAM), a HEADERS or CONTINUATION with an empty fragment, and
 * every PRIORITY, RST_STREAM, SETTINGS, PING, WINDOW_UPDATE, GOAWAY and
 * frame of an unknown type. Each costs the connection one of its budget:
 * http2.idle_frame_limit a second, and two more for each DATA frame sent
 * to the peer in that second (a client that reads a large answer sends a
 * WINDOW_UPDATE or two for what it read). Past it the connection ends,
 * GOAWAY(ENHANCE_YOUR_CALM); before, 72 million empty DATA frames in 5 s
 * went through nghttp2 and kept their loop's other clients waiting 1.3 s.
 *
 * HEADERS on a stream id below one the peer opened, where no stream was
 * (RFC 9113 5.1.1: a connection error, PROTOCOL_ERROR). nghttp2 drops such
 * a HEADERS silently, since it does not remember which ids were used, and
 * a trailer HEADERS on a stream it reset must not end the connection. The
 * ids a peer skips are remembered here: clients count up by two, so there
 * are none but for a peer that skips; the last GAPS_KEPT runs of them are
 * kept, an older one forgotten (its HEADERS left to nghttp2 as before).
 */
#include "corHttp2Int.h"

#include <string.h>

#define FRAME_HEAD 9
#define PREFACE_LEN 24
#define FLAG_END_STREAM 0x1
#define FLAG_PADDED 0x8
#define FLAG_PRIORITY 0x20
/* A HEADERS frame's priority fields, before its fragment. */
#define PRIORITY_LEN 5

/* The frame whose head was just read: what its pad length (pad, or -1
 * for none) leaves of it decides whether it moves anything. */
static bool
frameIdle(const Http2Frames* f, int pad)
{
    uint32_t body = f->length - (pad >= 0 ? 1 + (uint32_t)pad : 0);

    if (pad >= 0 && (uint32_t)pad + 1 > f->length) {
        return false; /* bad padding: nghttp2's to refuse */
    }
    switch (f->type) {
    case NGHTTP2_DATA:
        return body == 0 && !(f->flags & FLAG_END_STREAM);
    case NGHTTP2_HEADERS:
        if (f->flags & FLAG_PRIORITY) {
            body = body >= PRIORITY_LEN ? body - PRIORITY_LEN : 0;
        }
        return body == 0 && !(f->flags & FLAG_END_STREAM);
    case NGHTTP2_CONTINUATION:
        return body == 0;
    case NGHTTP2_PUSH_PROMISE:
        return false; /* from a client: nghttp2 ends it */
    default:
        return true;
    }
}

/* One more frame that made no progress: whether it is past the budget. */
static bool
idlePast(Http2Conn* c)
{
    Http2Frames* f = &c->frames;
    uint64_t now = corEvNow(c->k.loop);

    if (now >= f->windowMs + 1000) {
        f->windowMs = now;
        f->idle = f->dataSent = 0;
    }
    return ++f->idle > corHttp2Conf.idlePerSecond + 2 * f->dataSent;
}

static bool
inGap(const Http2Frames* f, uint32_t id)
{
    for (unsigned i = 0; i < f->gapCount && i < GAPS_KEPT; i++) {
        if (id >= f->gaps[i].first && id <= f->gaps[i].last) {
            return true;
        }
    }
    return false;
}

/* A HEADERS on a client's stream id: a new stream (the ids it skipped
 * remembered), one opened before, or one that never was: false then. */
static bool
streamIdFits(Http2Frames* f, uint32_t id)
{
    if (id % 2 == 0) {
        return true; /* 0, or a server's id: nghttp2's error */
    }
    if (id < f->nextId) {
        return !inGap(f, id);
    }
    if (id > f->nextId) {
        f->gaps[f->gapCount++ % GAPS_KEPT] = (Http2Gap){ f->nextId, id - 2 };
    }
    f->nextId = id + 2;
    return true;
}

/* The head in f->head is whole: what it says. */
static Http2FramesVerdict
headRead(Http2Conn* c)
{
    Http2Frames* f = &c->frames;
    uint32_t id = ((uint32_t)f->head[5] << 24 | (uint32_t)f->head[6] << 16
                   | (uint32_t)f->head[7] << 8 | f->head[8])
                  & 0x7fffffffu;

    f->length = (uint32_t)f->head[0] << 16 | (uint32_t)f->head[1] << 8
                | f->head[2];
    f->type = f->head[3];
    f->flags = f->head[4];
    f->left = f->length;
    f->headLen = 0;
    if (f->type == NGHTTP2_HEADERS && !streamIdFits(f, id)) {
        return H2_FRAMES_BAD_STREAM;
    }
    if ((f->type == NGHTTP2_DATA || f->type == NGHTTP2_HEADERS)
        && (f->flags & FLAG_PADDED) && f->length > 0) {
        f->padNext = true; /* judged at its pad length */
        return H2_FRAMES_OK;
    }
    return frameIdle(f, -1) && idlePast(c) ? H2_FRAMES_FLOOD : H2_FRAMES_OK;
}

Http2FramesVerdict
corHttp2FramesScan(Http2Conn* c, const uint8_t* p, size_t len, size_t* ok)
{
    Http2Frames* f = &c->frames;
    Http2FramesVerdict v = H2_FRAMES_OK;
    size_t at = 0;
    size_t start = 0; /* where the frame looked at began here */

    if (f->prefaceLeft > 0) {
        at = len < f->prefaceLeft ? len : f->prefaceLeft;
        f->prefaceLeft -= (uint8_t)at;
    }
    while (at < len && v == H2_FRAMES_OK) {
        if (f->padNext) {
            f->padNext = false;
            v = frameIdle(f, p[at]) && idlePast(c) ? H2_FRAMES_FLOOD
                                                   : H2_FRAMES_OK;
        } else if (f->left > 0) {
            size_t n = len - at < f->left ? len - at : f->left;

            at += n;
            f->left -= (uint32_t)n;
        } else {
            if (f->headLen == 0) {
                start = at;
            }
            f->head[f->headLen++] = p[at++];
            if (f->headLen == FRAME_HEAD) {
                v = headRead(c);
            }
        }
    }
    *ok = v == H2_FRAMES_OK ? len : start;
    return v;
}

void
corHttp2FramesInit(Http2Frames* f, uint64_t now)
{
    memset(f, 0, sizeof(*f));
    f->prefaceLeft = PREFACE_LEN;
    f->nextId = 1;
    f->windowMs = now;
}

void
corHttp2FramesDataSent(Http2Conn* c)
{
    c->frames.dataSent++;
}
