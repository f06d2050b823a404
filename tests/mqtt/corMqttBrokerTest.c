/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT codec against a real broker: mosquitto, started on a loopback
 * port and stopped by its PID, is sent the codec's CONNECT, SUBSCRIBE,
 * PUBLISH (QoS 0, 1 and 2 with their acknowledgements), PINGREQ,
 * UNSUBSCRIBE and DISCONNECT over a plain blocking socket, in 3.1.1 and
 * 5.0, and what it sends back is decoded: the proof that the codec's bytes
 * are what a broker accepts and that it reads what a broker writes.
 */
#include "corTest.h"

#include "corMqttEqual.h"
#include "../integration/corServer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define TIMEOUT_MS 5000

/* The broker, started once for the suite by the parent process, so that
 * a failing test (a forked child) cannot leave it running. */
static pid_t brokerPid;
static int brokerPort;

/* One connection: what was received and not yet decoded. */
typedef struct {
    int fd;
    unsigned version;
    uint8_t buf[65536];
    size_t have;
    size_t used; /* by the packet last returned */
} Client;

static const char*
brokerPath(void)
{
    return access("/usr/sbin/mosquitto", X_OK) == 0 ? "/usr/sbin/mosquitto"
                                                    : "mosquitto";
}

/* Whether nothing listens on port: else what answers there would be
 * taken for the broker. */
static bool
portFree(int port)
{
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool unused = fd >= 0
                  && bind(fd, (struct sockaddr*)&addr, sizeof(addr)) == 0;

    if (fd >= 0) {
        close(fd);
    }
    return unused;
}

/* Start mosquitto on port; true once it answers, false if it exited
 * (the port was taken) or never answered. */
static bool
brokerStartOn(int port)
{
    char portText[16];
    long deadline = corNowMs() + TIMEOUT_MS;

    if (!portFree(port)) {
        return false;
    }
    snprintf(portText, sizeof(portText), "%d", port);
    brokerPid = corTestFork(SIGKILL);
    if (brokerPid == 0) {
        /* Its log would bury the test's own report. */
        if (freopen("/dev/null", "w", stderr) == NULL
            || freopen("/dev/null", "w", stdout) == NULL) {
            _exit(127);
        }
        execlp(brokerPath(), "mosquitto", "-p", portText, (char*)NULL);
        _exit(127);
    }
    while (corNowMs() < deadline) {
        int fd;

        if (waitpid(brokerPid, NULL, WNOHANG) == brokerPid) {
            brokerPid = 0;
            return false;
        }
        fd = corConnect(port);
        if (fd >= 0) {
            close(fd);
            brokerPort = port;
            return true;
        }
        usleep(20000);
    }
    kill(brokerPid, SIGTERM);
    waitpid(brokerPid, NULL, 0);
    brokerPid = 0;
    return false;
}

static void
brokerStart(void)
{
    int base = 20000 + getpid() % 20000;

    for (int i = 0; i < 10 && !brokerStartOn(base + i * 7); i++) {
    }
    if (brokerPid == 0) {
        fprintf(stderr, "cannot start mosquitto (./configure "
                        "--install-deps installs it)\n");
    }
}

static void
brokerStop(void)
{
    if (brokerPid > 0) {
        kill(brokerPid, SIGTERM);
        waitpid(brokerPid, NULL, 0);
        brokerPid = 0;
    }
}

static void
clientSend(Client* c, const CorMqttPacket* pkt)
{
    uint8_t out[4096];
    int n = corMqttEncode(out, sizeof(out), c->version, pkt);

    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(corSendAll(c->fd, out, (size_t)n), 0);
}

/* The next packet from the broker; its strings point into c->buf until
 * the next call. */
static void
clientNext(Client* c, CorMqttPacket* pkt)
{
    CorMqttStatus st;

    memmove(c->buf, c->buf + c->used, c->have - c->used);
    c->have -= c->used;
    c->used = 0;
    for (;;) {
        int n = corMqttDecode(c->buf, c->have, c->version, sizeof(c->buf), pkt,
                              &st);
        ssize_t got;

        ck_assert_msg(n >= 0, "broker sent a refused packet: %s", st.reason);
        if (n > 0) {
            c->used = (size_t)n;
            return;
        }
        got = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, 0);
        ck_assert_msg(got > 0, "broker closed or timed out (%s)",
                      got < 0 ? strerror(errno) : "closed");
        c->have += (size_t)got;
    }
}

static void
clientExpect(Client* c, uint8_t type, uint16_t packetId, CorMqttPacket* pkt)
{
    clientNext(c, pkt);
    ck_assert_msg(pkt->type == type, "expected %s, got %s",
                  corMqttTypeName(type), corMqttTypeName(pkt->type));
    ck_assert_uint_eq(pkt->packetId, packetId);
}

static void
clientConnect(Client* c, unsigned version, const char* id)
{
    struct timeval tv = { .tv_sec = TIMEOUT_MS / 1000 };
    CorMqttPacket pkt = { .type = COR_MQTT_CONNECT,
                          .cleanStart = true,
                          .keepAlive = 30,
                          .clientId = { id, strlen(id) },
                          .props = { .receiveMaximum = 16,
                                     .maximumPacketSize = 65536 } };

    ck_assert_int_gt(brokerPid, 0);
    c->version = version;
    c->fd = corConnect(brokerPort);
    ck_assert_int_ge(c->fd, 0);
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    corMqttPropSet(&pkt.props, COR_MQTT_PROP_RECEIVE_MAXIMUM);
    corMqttPropSet(&pkt.props, COR_MQTT_PROP_MAXIMUM_PACKET_SIZE);
    corMqttPropSet(&pkt.props, COR_MQTT_PROP_TOPIC_ALIAS_MAXIMUM);
    clientSend(c, &pkt);
    clientExpect(c, COR_MQTT_CONNACK, 0, &pkt);
    ck_assert_uint_eq(pkt.reasonCode, COR_MQTT_RC_SUCCESS);
    ck_assert(!pkt.sessionPresent);
}

static void
subscribe(Client* c)
{
    const CorMqttSub subs[] = { { { "cor/q1/+", 8 }, 1 },
                                { { "cor/q2/#", 8 }, 2 } };
    CorMqttPacket pkt = {
        .type = COR_MQTT_SUBSCRIBE, .packetId = 1, .subs = subs, .subCount = 2
    };

    clientSend(c, &pkt);
    clientExpect(c, COR_MQTT_SUBACK, 1, &pkt);
    ck_assert_uint_eq(pkt.codeCount, 2);
    ck_assert_mem_eq(pkt.codes, "\x01\x02", 2);
}

/* A QoS 1 PUBLISH goes out and comes back (we are subscribed): the
 * broker's PUBACK, and its PUBLISH, which we acknowledge. */
static void
publishQos1(Client* c)
{
    const CorMqttUserProp user = { { "trace", 5 }, { "t-1", 3 } };
    CorMqttPacket pkt = { .type = COR_MQTT_PUBLISH,
                          .qos = 1,
                          .packetId = 2,
                          .topic = { "cor/q1/a", 8 },
                          .payload = { "hello", 5 },
                          .props = { .contentType = { "text/plain", 10 },
                                     .user = &user,
                                     .userCount = 1 } };
    bool acked = false;
    bool delivered = false;

    corMqttPropSet(&pkt.props, COR_MQTT_PROP_CONTENT_TYPE);
    clientSend(c, &pkt);
    while (!acked || !delivered) {
        clientNext(c, &pkt);
        if (pkt.type == COR_MQTT_PUBACK) {
            ck_assert_uint_eq(pkt.packetId, 2);
            acked = true;
            continue;
        }
        ck_assert_uint_eq(pkt.type, COR_MQTT_PUBLISH);
        ck_assert_uint_eq(pkt.qos, 1);
        ck_assert(mqttStrEq(pkt.topic, (CorMqttStr){ "cor/q1/a", 8 }));
        ck_assert(mqttStrEq(pkt.payload, (CorMqttStr){ "hello", 5 }));
        if (c->version == COR_MQTT_V5) {
            CorMqttStr name, value;
            size_t pos = 0;

            ck_assert(mqttStrEq(pkt.props.contentType,
                                (CorMqttStr){ "text/plain", 10 }));
            ck_assert(corMqttUserPropNext(&pkt.props, &pos, &name, &value));
            ck_assert(mqttStrEq(value, user.value));
        }
        clientSend(c, &(CorMqttPacket){ .type = COR_MQTT_PUBACK,
                                        .packetId = pkt.packetId });
        delivered = true;
    }
}

/* QoS 2 both ways: PUBLISH, PUBREC, PUBREL, PUBCOMP for ours, and the
 * broker's delivery answered PUBREC, then PUBCOMP after its PUBREL. */
static void
publishQos2(Client* c)
{
    CorMqttPacket pkt = { .type = COR_MQTT_PUBLISH,
                          .qos = 2,
                          .packetId = 3,
                          .topic = { "cor/q2/x/y", 10 },
                          .payload = { "", 0 } };
    bool completed = false;
    bool released = false;

    clientSend(c, &pkt);
    while (!completed || !released) {
        clientNext(c, &pkt);
        switch (pkt.type) {
        case COR_MQTT_PUBREC:
            ck_assert_uint_eq(pkt.packetId, 3);
            clientSend(c, &(CorMqttPacket){ .type = COR_MQTT_PUBREL,
                                            .packetId = 3 });
            break;
        case COR_MQTT_PUBCOMP:
            ck_assert_uint_eq(pkt.packetId, 3);
            completed = true;
            break;
        case COR_MQTT_PUBLISH:
            ck_assert_uint_eq(pkt.qos, 2);
            ck_assert_uint_eq(pkt.payload.len, 0);
            clientSend(c, &(CorMqttPacket){ .type = COR_MQTT_PUBREC,
                                            .packetId = pkt.packetId });
            break;
        case COR_MQTT_PUBREL:
            clientSend(c, &(CorMqttPacket){ .type = COR_MQTT_PUBCOMP,
                                            .packetId = pkt.packetId });
            released = true;
            break;
        default:
            ck_abort_msg("unexpected %s", corMqttTypeName(pkt.type));
        }
    }
}

static void
session(unsigned version)
{
    static Client c;
    const CorMqttSub unsub = { { "cor/q1/+", 8 }, 0 };
    CorMqttPacket pkt;

    clientConnect(&c, version, version == COR_MQTT_V5 ? "cor-v5" : "cor-v4");
    subscribe(&c);
    publishQos1(&c);
    publishQos2(&c);
    clientSend(&c, &(CorMqttPacket){ .type = COR_MQTT_PINGREQ });
    clientExpect(&c, COR_MQTT_PINGRESP, 0, &pkt);
    clientSend(&c, &(CorMqttPacket){ .type = COR_MQTT_UNSUBSCRIBE,
                                     .packetId = 4,
                                     .subs = &unsub,
                                     .subCount = 1 });
    clientExpect(&c, COR_MQTT_UNSUBACK, 4, &pkt);
    ck_assert_uint_eq(pkt.codeCount, version == COR_MQTT_V5 ? 1 : 0);
    /* A QoS 0 message to what is left unsubscribed comes back no more:
     * the next thing the broker sends is the answer to a ping. */
    clientSend(&c, &(CorMqttPacket){ .type = COR_MQTT_PUBLISH,
                                     .topic = { "cor/q1/b", 8 } });
    clientSend(&c, &(CorMqttPacket){ .type = COR_MQTT_PINGREQ });
    clientExpect(&c, COR_MQTT_PINGRESP, 0, &pkt);
    clientSend(&c, &(CorMqttPacket){ .type = COR_MQTT_DISCONNECT });
    ck_assert(corPeerClosed(c.fd, TIMEOUT_MS));
    close(c.fd);
}

START_TEST(test_session_311)
{
    session(COR_MQTT_V311);
}
END_TEST

START_TEST(test_session_5)
{
    session(COR_MQTT_V5);
}
END_TEST

/* The broker refuses a malformed packet from us: it closes (3.1.1), or
 * sends DISCONNECT with a reason code first (5.0). */
START_TEST(test_broker_closes_on_malformed)
{
    for (unsigned version = COR_MQTT_V311; version <= COR_MQTT_V5; version++) {
        Client* c = calloc(1, sizeof(*c));
        const uint8_t bad[] = { 0x36, 0x05, 0x00, 0x03, 'a', '/', 'b' };
        CorMqttPacket pkt;

        clientConnect(c, version, "cor-bad");
        ck_assert_int_eq(corSendAll(c->fd, bad, sizeof(bad)), 0);
        if (version == COR_MQTT_V5) {
            clientNext(c, &pkt);
            ck_assert_uint_eq(pkt.type, COR_MQTT_DISCONNECT);
            ck_assert_uint_ge(pkt.reasonCode, 0x80);
        }
        ck_assert(corPeerClosed(c->fd, TIMEOUT_MS));
        close(c->fd);
        free(c);
    }
}
END_TEST

COR_TEST_SUITE(corMqttBroker)
{
    tcase_add_unchecked_fixture(tc, brokerStart, brokerStop);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_session_311);
    tcase_add_test(tc, test_session_5);
    tcase_add_test(tc, test_broker_closes_on_malformed);
}
