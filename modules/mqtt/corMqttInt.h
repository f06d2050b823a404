/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the MQTT codec's files share and nothing outside modules/mqtt/
 * includes: a bounded reader that records the first refusal, a writer that
 * counts what it would write past its end (so one function both measures
 * and writes a packet), and the 5.0 properties' reader and writer.
 */
#ifndef COR_MQTT_INT_H
#define COR_MQTT_INT_H

#include "corMqttCodec.h"

#include <string.h>

/*
 * Reads the bytes [p, end) of one packet. The first refusal is kept in st
 * (a later one would only describe its consequence).
 */
typedef struct CorMqttReader {
    const uint8_t* p;
    const uint8_t* end;
    CorMqttStatus* st;
} CorMqttReader;

/*
 * Writes at out while n stays within cap; with out NULL it only counts, so
 * that the same code measures a packet, then writes it. bad is set by a
 * field too long for MQTT.
 */
typedef struct CorMqttWriter {
    uint8_t* out;
    size_t cap;
    size_t n;
    bool bad;
} CorMqttWriter;

/* Record a refusal in r's status; returns false for the caller to return. */
bool corMqttFail(CorMqttReader* r, uint8_t reasonCode, const char* reason);

bool corMqttReadByte(CorMqttReader* r, uint8_t* v);
bool corMqttReadU16(CorMqttReader* r, uint16_t* v);
bool corMqttReadU32(CorMqttReader* r, uint32_t* v);
/* A variable byte integer: at most four bytes. */
bool corMqttReadVarint(CorMqttReader* r, uint32_t* v);
/* A two-byte length and that many bytes. */
bool corMqttReadBin(CorMqttReader* r, CorMqttStr* v);
/* As corMqttReadBin, and the bytes must be an MQTT UTF-8 string. */
bool corMqttReadStr(CorMqttReader* r, CorMqttStr* v);

void corMqttPut(CorMqttWriter* w, const void* p, size_t len);
void corMqttPutByte(CorMqttWriter* w, uint8_t v);
void corMqttPutU16(CorMqttWriter* w, uint16_t v);
void corMqttPutU32(CorMqttWriter* w, uint32_t v);
void corMqttPutVarint(CorMqttWriter* w, uint32_t v);
void corMqttPutBin(CorMqttWriter* w, CorMqttStr v);
/* How many bytes corMqttPutVarint writes for v. */
size_t corMqttVarintSize(uint32_t v);

/*
 * Properties: owner is the packet type that carries them, or
 * COR_MQTT_PROPS_WILL for a CONNECT's will. Read checks every rule of
 * the 5.0 specification on them and fills props; write writes their
 * length and themselves (see CorMqttProps for the lists).
 */
#define COR_MQTT_PROPS_WILL 0
bool corMqttPropsRead(CorMqttReader* r, unsigned owner, CorMqttProps* props);
void corMqttPropsWrite(CorMqttWriter* w, const CorMqttProps* props);
/* Whether props would write nothing but their length (0). */
bool corMqttPropsEmpty(const CorMqttProps* props);

#endif /* COR_MQTT_INT_H */
