/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the MQTT codec. Each input is read as a stream of
 * packets, in 3.1.1 and again in 5.0, until one is refused or more bytes
 * are needed. Beyond the sanitizers, it aborts when a property breaks:
 *
 *   - a packet that decodes encodes (the decoder accepts nothing the
 *     encoder cannot write or refuses), to the length corMqttEncodedSize
 *     says;
 *   - what it encodes to decodes to the same packet, field by field, and
 *     encodes again to the very same bytes;
 *   - a prefix of an encoded packet asks for more, never for less than it
 *     has;
 *   - a refusal always comes with a reason and a reason code of 0x80 or
 *     more;
 *   - a valid topic name (outside "$share/") is a valid filter matching
 *     itself.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Imodules/mqtt
 *        -Itests/mqtt modules/mqtt/corMqtt*.c fuzz/corMqttCodecFuzz.c
 */
#include "corMqttCodec.h"
#include "corMqttEqual.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void
check(bool ok)
{
    if (!ok) {
        abort();
    }
}

/* Encode pkt, decode it again, and hold the properties above. */
static void
reencode(const CorMqttPacket* pkt, unsigned version)
{
    int size = corMqttEncodedSize(version, pkt);
    uint8_t* out;
    uint8_t* again;
    CorMqttPacket back;
    CorMqttStatus st;

    check(size > 0);
    out = malloc((size_t)size);
    again = malloc((size_t)size);
    check(out != NULL && again != NULL);
    check(corMqttEncode(out, (size_t)size, version, pkt) == size);
    for (int k = 0; k < size && k < 16; k++) {
        check(corMqttDecode(out, (size_t)k, version, 0, &back, &st) == 0);
        check(st.need == 0 || st.need == (size_t)size);
    }
    check(corMqttDecode(out, (size_t)size, version, 0, &back, &st) == size);
    check(mqttPacketDiffers(pkt, &back) == NULL);
    check(corMqttEncode(again, (size_t)size, version, &back) == size);
    check(memcmp(out, again, (size_t)size) == 0);
    free(again);
    free(out);
}

static void
stream(const uint8_t* data, size_t size, unsigned version)
{
    while (size > 0) {
        CorMqttPacket pkt;
        CorMqttStatus st;
        int n = corMqttDecode(data, size, version, 0, &pkt, &st);

        if (n < 0) {
            check(st.reason != NULL && st.reasonCode >= 0x80
                  && n == -(int)st.reasonCode);
            return;
        }
        if (n == 0) {
            check(st.need == 0 || st.need > size);
            return;
        }
        reencode(&pkt, version);
        data += n;
        size -= (size_t)n;
    }
}

static void
topics(const char* s, size_t len)
{
    if (corMqttTopicNameCheck(s, len) != NULL
        || (len >= 7 && memcmp(s, "$share/", 7) == 0)) {
        return;
    }
    check(corMqttTopicFilterCheck(s, len) == NULL);
    check(corMqttTopicMatch(s, len, s, len));
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const uint8_t* cut;

    stream(data, size, COR_MQTT_V311);
    stream(data, size, COR_MQTT_V5);
    topics((const char*)data, size);
    /* A filter and a topic, split at the first NUL. */
    cut = memchr(data, 0, size);
    if (cut != NULL) {
        size_t flen = (size_t)(cut - data);
        const char* t = (const char*)cut + 1;
        size_t tlen = size - flen - 1;

        if (corMqttTopicFilterCheck((const char*)data, flen) == NULL
            && corMqttTopicNameCheck(t, tlen) == NULL) {
            (void)corMqttTopicMatch((const char*)data, flen, t, tlen);
        }
    }
    return 0;
}
