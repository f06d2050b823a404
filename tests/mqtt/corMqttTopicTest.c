/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MQTT strings and topics: the UTF-8 rule of every string field (RFC 3629
 * and no U+0000), topic names and filters as a PUBLISH, a SUBSCRIBE and
 * `cor -t` check them, and the matching of one against the other, with the
 * examples of the specifications (3.1.1 and 5.0 section 4.7).
 */
#include "corTest.h"

#include "corMqttCodec.h"

#include <string.h>

START_TEST(test_utf8)
{
    static const struct {
        const char* s;
        size_t len;
        bool valid;
    } cases[] = {
        { "", 0, true },
        { "plain/topic", 11, true },
        { "\xc3\xa9t\xc3\xa9", 5, true },
        { "\xe2\x82\xac", 3, true },
        { "\xef\xbf\xbf", 3, true }, /* U+FFFF: allowed */
        { "\xf0\x9f\x98\x80", 4, true },
        { "\xf4\x8f\xbf\xbf", 4, true }, /* U+10FFFF */
        { "\x7f", 1, true },
        { "a\0b", 3, false },     /* U+0000 */
        { "\xc0\x80", 2, false }, /* overlong U+0000 */
        { "\xc1\xbf", 2, false },
        { "\xe0\x9f\xbf", 3, false },     /* overlong */
        { "\xf0\x8f\xbf\xbf", 4, false }, /* overlong */
        { "\xed\xa0\x80", 3, false },     /* U+D800 */
        { "\xed\xbf\xbf", 3, false },     /* U+DFFF */
        { "\xf4\x90\x80\x80", 4, false }, /* U+110000 */
        { "\xf5\x80\x80\x80", 4, false },
        { "\x80", 1, false },
        { "\xc3", 1, false }, /* cut short */
        { "\xe2\x82", 2, false },
        { "\xe2\x28\xac", 3, false },
        { "\xf0\x9f\x98\x28", 4, false },
        { "\xfe", 1, false },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_msg(corMqttUtf8Valid(cases[i].s, cases[i].len)
                          == cases[i].valid,
                      "case %zu", i);
    }
}
END_TEST

START_TEST(test_topic_names_and_filters)
{
    static const struct {
        const char* s;
        bool name;
        bool filter;
    } cases[] = {
        { "sport/tennis/player1", true, true },
        { "/", true, true },
        { "a//b", true, true },
        { "$SYS/broker", true, true },
        { "sport tennis", true, true },
        { "", false, false },
        { "#", false, true },
        { "+", false, true },
        { "sport/#", false, true },
        { "sport/tennis/#", false, true },
        { "+/tennis/#", false, true },
        { "sport/+/player1", false, true },
        { "/+", false, true },
        { "+/+", false, true },
        { "sport/tennis#", false, false },
        { "sport/tennis/#/ranking", false, false },
        { "sport+", false, false },
        { "sport/+x", false, false },
        { "##", false, false },
        { "$share/group/a/+", false, true },
        { "$share/group/#", false, true },
        { "$share/group", true, false },
        { "$share/group/", true, false },
        { "$share//a", true, false },
        { "$share/g+/a", false, false },
        { "$share/g/a#", false, false },
        { "\xc0\x80", false, false },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char* s = cases[i].s;

        ck_assert_msg((corMqttTopicNameCheck(s, strlen(s)) == NULL)
                          == cases[i].name,
                      "name '%s'", s);
        ck_assert_msg((corMqttTopicFilterCheck(s, strlen(s)) == NULL)
                          == cases[i].filter,
                      "filter '%s'", s);
    }
}
END_TEST

START_TEST(test_topic_matching)
{
    /* 3.1.1 section 4.7 and 5.0 section 4.7's examples, and more. */
    static const struct {
        const char* filter;
        const char* topic;
        bool match;
    } cases[] = {
        { "sport/tennis/player1/#", "sport/tennis/player1", true },
        { "sport/tennis/player1/#", "sport/tennis/player1/ranking", true },
        { "sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon",
          true },
        { "sport/tennis/player1/#", "sport/tennis/player2", false },
        { "sport/tennis/player1/#", "sport/tennis", false },
        { "sport/#", "sport", true },
        { "#", "sport/tennis", true },
        { "#", "/", true },
        { "sport/tennis/+", "sport/tennis/player1", true },
        { "sport/tennis/+", "sport/tennis/player2", true },
        { "sport/tennis/+", "sport/tennis/player1/ranking", false },
        { "sport/+", "sport", false },
        { "sport/+", "sport/", true },
        { "+/+", "/finance", true },
        { "/+", "/finance", true },
        { "+", "/finance", false },
        { "+", "finance", true },
        { "+/tennis/#", "sport/tennis/player1", true },
        { "+/tennis/#", "sport/tennis", true },
        { "sport/+/player1", "sport/tennis/player1", true },
        { "sport/+/player1", "sport/tennis/player2", false },
        { "a/b", "a/b", true },
        { "a/b", "a/b/c", false },
        { "a/b/c", "a/b", false },
        { "a/b", "a/bc", false },
        { "a//b", "a//b", true },
        { "a/+/b", "a//b", true },
        { "#", "$SYS/broker", false },
        { "+/broker", "$SYS/broker", false },
        { "+/monitor/Clients", "$SYS/monitor/Clients", false },
        { "$SYS/#", "$SYS/broker", true },
        { "$SYS/monitor/+", "$SYS/monitor/Clients", true },
        { "$share/group/sport/+", "sport/tennis", true },
        { "$share/group/sport/+", "group/sport/x", false },
        { "$share/group/#", "$SYS/x", false },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char* f = cases[i].filter;
        const char* t = cases[i].topic;

        ck_assert_msg(corMqttTopicMatch(f, strlen(f), t, strlen(t))
                          == cases[i].match,
                      "'%s' on '%s'", f, t);
    }
}
END_TEST

COR_TEST_SUITE(corMqttTopic)
{
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_topic_names_and_filters);
    tcase_add_test(tc, test_topic_matching);
}
