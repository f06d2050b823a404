/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT data representations (3.1.1 section 1.5, 5.0 section 1.5): bytes,
 * big-endian integers, variable byte integers, and length-prefixed strings
 * and binary data, read within a packet's bounds and written by a writer
 * that can also only count.
 */
#include "corMqttInt.h"

bool
corMqttFail(CorMqttReader* r, uint8_t reasonCode, const char* reason)
{
    if (r->st->reason == NULL) {
        r->st->reasonCode = reasonCode;
        r->st->reason = reason;
    }
    return false;
}

/* Take n bytes, or refuse the field that would run past the packet. */
static const uint8_t*
take(CorMqttReader* r, size_t n)
{
    const uint8_t* p = r->p;

    if ((size_t)(r->end - r->p) < n) {
        corMqttFail(r, COR_MQTT_RC_MALFORMED, "field runs past the packet");
        return NULL;
    }
    r->p += n;
    return p;
}

bool
corMqttReadByte(CorMqttReader* r, uint8_t* v)
{
    const uint8_t* p = take(r, 1);

    if (p == NULL) {
        return false;
    }
    *v = p[0];
    return true;
}

bool
corMqttReadU16(CorMqttReader* r, uint16_t* v)
{
    const uint8_t* p = take(r, 2);

    if (p == NULL) {
        return false;
    }
    *v = (uint16_t)(p[0] << 8 | p[1]);
    return true;
}

bool
corMqttReadU32(CorMqttReader* r, uint32_t* v)
{
    const uint8_t* p = take(r, 4);

    if (p == NULL) {
        return false;
    }
    *v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8
         | p[3];
    return true;
}

bool
corMqttReadVarint(CorMqttReader* r, uint32_t* v)
{
    uint32_t value = 0;

    for (unsigned i = 0; i < 4; i++) {
        uint8_t b;

        if (!corMqttReadByte(r, &b)) {
            return false;
        }
        value |= (uint32_t)(b & 0x7F) << (7 * i);
        if ((b & 0x80) == 0) {
            *v = value;
            return true;
        }
    }
    return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                       "variable byte integer of more than 4 bytes");
}

bool
corMqttReadBin(CorMqttReader* r, CorMqttStr* v)
{
    uint16_t len;
    const uint8_t* p;

    if (!corMqttReadU16(r, &len) || (p = take(r, len)) == NULL) {
        return false;
    }
    v->data = (const char*)p;
    v->len = len;
    return true;
}

bool
corMqttReadStr(CorMqttReader* r, CorMqttStr* v)
{
    if (!corMqttReadBin(r, v)) {
        return false;
    }
    if (!corMqttUtf8Valid(v->data, v->len)) {
        return corMqttFail(r, COR_MQTT_RC_MALFORMED,
                           "string not UTF-8 or with U+0000");
    }
    return true;
}

void
corMqttPut(CorMqttWriter* w, const void* p, size_t len)
{
    if (w->out != NULL && len > 0 && w->n <= w->cap && len <= w->cap - w->n) {
        memcpy(w->out + w->n, p, len);
    }
    w->n += len;
}

void
corMqttPutByte(CorMqttWriter* w, uint8_t v)
{
    corMqttPut(w, &v, 1);
}

void
corMqttPutU16(CorMqttWriter* w, uint16_t v)
{
    uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

    corMqttPut(w, b, sizeof(b));
}

void
corMqttPutU32(CorMqttWriter* w, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8),
                     (uint8_t)v };

    corMqttPut(w, b, sizeof(b));
}

void
corMqttPutVarint(CorMqttWriter* w, uint32_t v)
{
    if (v > COR_MQTT_REMAINING_MAX) {
        w->bad = true;
        return;
    }
    do {
        uint8_t b = v & 0x7F;

        v >>= 7;
        corMqttPutByte(w, (uint8_t)(b | (v > 0 ? 0x80 : 0)));
    } while (v > 0);
}

size_t
corMqttVarintSize(uint32_t v)
{
    return v < 128 ? 1 : v < 16384 ? 2 : v < 2097152 ? 3 : 4;
}

void
corMqttPutBin(CorMqttWriter* w, CorMqttStr v)
{
    if (v.len > COR_MQTT_STR_MAX) {
        w->bad = true;
        return;
    }
    corMqttPutU16(w, (uint16_t)v.len);
    corMqttPut(w, v.data, v.len);
}
