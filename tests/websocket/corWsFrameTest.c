/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The WebSocket frame codec: heads of every length form read back as
 * written, masked and not; a head that is short asks for more; each
 * forbidden head is refused with 1002; masking round-trips at any offset;
 * close payloads and UTF-8 as RFC 6455 and RFC 3629 say.
 */
#include "corTest.h"

#include "../../modules/websocket/corWsFrame.c"

static const uint8_t mask[4] = { 0x37, 0xfa, 0x21, 0x3d };

START_TEST(test_heads_read_back_as_written)
{
    const uint64_t lengths[] = {
        0, 5, 125, 126, 65535, 65536, (uint64_t)1 << 40
    };

    for (unsigned i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        for (int masked = 0; masked < 2; masked++) {
            uint8_t out[COR_WS_HEAD_MAX];
            CorWsFrameHead h;
            size_t n = corWsFrameHeadWrite(out, i % 2, COR_WS_BINARY,
                                           lengths[i], masked ? mask : NULL);

            /* Every shorter prefix asks for more. */
            for (size_t k = 0; k < n; k++) {
                ck_assert_int_eq(corWsFrameHeadRead(out, k, &h), 0);
            }
            ck_assert_int_eq(corWsFrameHeadRead(out, n, &h), (int)n);
            ck_assert_uint_eq(h.payloadLen, lengths[i]);
            ck_assert_uint_eq(h.headLen, n);
            ck_assert_int_eq(h.fin, i % 2);
            ck_assert_uint_eq(h.opcode, COR_WS_BINARY);
            ck_assert_int_eq(h.masked, masked);
            if (masked) {
                ck_assert_mem_eq(h.mask, mask, 4);
            }
        }
    }
}
END_TEST

START_TEST(test_the_rfc_examples_read)
{
    /* RFC 6455 5.7: a single-frame masked text message "Hello". */
    uint8_t frame[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                        0x7f, 0x9f, 0x4d, 0x51, 0x58 };
    CorWsFrameHead h;

    ck_assert_int_eq(corWsFrameHeadRead(frame, sizeof(frame), &h), 6);
    ck_assert(h.fin && h.masked);
    ck_assert_uint_eq(h.opcode, COR_WS_TEXT);
    ck_assert_uint_eq(h.payloadLen, 5);
    corWsMask(frame + 6, 5, h.mask, 0);
    ck_assert_mem_eq(frame + 6, "Hello", 5);
    /* An unmasked ping "Hello". */
    ck_assert_int_eq(corWsFrameHeadRead((const uint8_t*)"\x89\x05Hello", 7, &h),
                     2);
    ck_assert_uint_eq(h.opcode, COR_WS_PING);
    ck_assert(!h.masked);
}
END_TEST

START_TEST(test_forbidden_heads_are_refused)
{
    const char* bad[] = {
        "\xc1\x80",         /* RSV1 without an extension */
        "\xa1\x80",         /* RSV2 */
        "\x91\x80",         /* RSV3 */
        "\x83\x80",         /* opcode 3: reserved */
        "\x8b\x80",         /* opcode 0xB: reserved */
        "\x09\x80",         /* a fragmented ping */
        "\x88\xfe\x00\x7e", /* a close of 126 bytes */
        "\x82\xfe\x00\x7d", /* 125 in the 16-bit form */
        "\x82\xff\x00\x00\x00\x00\x00\x00\xff\xff", /* 64-bit, fits 16 */
        "\x82\xff\x80\x00\x00\x00\x00\x00\x00\x00", /* top bit set */
    };
    const size_t lens[] = { 2, 2, 2, 2, 2, 2, 4, 4, 10, 10 };
    uint8_t buf[COR_WS_HEAD_MAX + 4] = { 0 };
    CorWsFrameHead h;

    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(buf, bad[i], lens[i]);
        ck_assert_msg(corWsFrameHeadRead(buf, sizeof(buf), &h)
                          == -COR_WS_CLOSE_PROTOCOL,
                      "case %u", i);
    }
}
END_TEST

START_TEST(test_masking_round_trips_in_pieces)
{
    uint8_t data[100];
    uint8_t copy[100];

    for (unsigned i = 0; i < sizeof(data); i++) {
        data[i] = (uint8_t)(i * 7);
    }
    memcpy(copy, data, sizeof(data));
    corWsMask(data, sizeof(data), mask, 0);
    ck_assert_int_ne(memcmp(data, copy, sizeof(data)), 0);
    /* Unmasked in three pieces at odd offsets. */
    corWsMask(data, 13, mask, 0);
    corWsMask(data + 13, 50, mask, 13);
    corWsMask(data + 63, 37, mask, 63);
    ck_assert_mem_eq(data, copy, sizeof(data));
}
END_TEST

START_TEST(test_close_payloads)
{
    unsigned code = 0;

    ck_assert_int_eq(corWsCloseRead(NULL, 0, &code), 0);
    ck_assert_uint_eq(code, COR_WS_CLOSE_NO_STATUS);
    ck_assert_int_eq(corWsCloseRead((const uint8_t*)"\x03\xe8", 2, &code), 0);
    ck_assert_uint_eq(code, 1000);
    ck_assert_int_eq(corWsCloseRead((const uint8_t*)"\x0f\xa0ok", 4, &code), 0);
    ck_assert_uint_eq(code, 4000);
    ck_assert_int_eq(corWsCloseRead((const uint8_t*)"\x03", 1, &code),
                     -COR_WS_CLOSE_PROTOCOL);
    /* 1005 and 1006 are never sent; 999 and 5000 are out of range. */
    ck_assert_int_eq(corWsCloseRead((const uint8_t*)"\x03\xed", 2, &code),
                     -COR_WS_CLOSE_PROTOCOL);
    ck_assert_int_eq(corWsCloseRead((const uint8_t*)"\x03\xee", 2, &code),
                     -COR_WS_CLOSE_PROTOCOL);
    ck_assert_int_eq(corWsCloseRead((const uint8_t*)"\x03\xe7", 2, &code),
                     -COR_WS_CLOSE_PROTOCOL);
    ck_assert_int_eq(corWsCloseRead((const uint8_t*)"\x13\x88", 2, &code),
                     -COR_WS_CLOSE_PROTOCOL);
    /* A reason that is not UTF-8. */
    ck_assert_int_eq(corWsCloseRead((const uint8_t*)"\x03\xe8\xff", 3, &code),
                     -COR_WS_CLOSE_PROTOCOL);
}
END_TEST

START_TEST(test_utf8)
{
    ck_assert(corWsUtf8Valid((const uint8_t*)"", 0));
    ck_assert(corWsUtf8Valid((const uint8_t*)"plain", 5));
    ck_assert(corWsUtf8Valid((const uint8_t*)"\xc3\xa9t\xc3\xa9", 6));
    ck_assert(corWsUtf8Valid((const uint8_t*)"\xe2\x82\xac", 3));
    ck_assert(corWsUtf8Valid((const uint8_t*)"\xf0\x9f\x98\x80", 4));
    ck_assert(corWsUtf8Valid((const uint8_t*)"\xf4\x8f\xbf\xbf", 4));
    ck_assert(!corWsUtf8Valid((const uint8_t*)"\xc0\xaf", 2)); /* overlong */
    ck_assert(!corWsUtf8Valid((const uint8_t*)"\xe0\x80\xaf", 3));
    ck_assert(!corWsUtf8Valid((const uint8_t*)"\xed\xa0\x80", 3)); /* D800 */
    ck_assert(!corWsUtf8Valid((const uint8_t*)"\xf4\x90\x80\x80", 4));
    ck_assert(!corWsUtf8Valid((const uint8_t*)"\xe2\x82", 2)); /* cut */
    ck_assert(!corWsUtf8Valid((const uint8_t*)"\x80", 1));
    ck_assert(!corWsUtf8Valid((const uint8_t*)"a\xffz", 3));
}
END_TEST

COR_TEST_SUITE(corWsFrame)
{
    tcase_add_test(tc, test_heads_read_back_as_written);
    tcase_add_test(tc, test_the_rfc_examples_read);
    tcase_add_test(tc, test_forbidden_heads_are_refused);
    tcase_add_test(tc, test_masking_round_trips_in_pieces);
    tcase_add_test(tc, test_close_payloads);
    tcase_add_test(tc, test_utf8);
}
