/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A subscriber's session with a default client id ends with the instance.
 * The id is the instance's (corInstance), so no later cor can take the
 * session up: kept, it would hold its subscriptions and queue their
 * messages on the broker for session_expiry (5.0) or for ever (3.1.1,
 * whose sessions never expire by themselves). So when the instance stops
 * (not when a generation of it is replaced: the next one goes on with
 * the session), the subscriber ends it:
 *
 * - 5.0: its DISCONNECT says Session Expiry 0, at a graceful stop once its
 *   handlers were answered (corMqttSubscribe.c), at a fast one as the loop
 *   ends, on the connection it has;
 * - 3.1.1 has no such word: once the loop ended, a connection of its own
 *   with Clean Session 1 and the same id (the broker discards the session)
 *   and a DISCONNECT. It runs past the stop's cancel of every wait, so it
 *   is plain blocking code with a bound of its own (a second), over TCP to
 *   the address the subscriber last connected to (no name to resolve);
 *   an mqtts broker keeps the session (see docs/mqtt.md).
 *
 * A client_id given in the configuration is meant to be taken up by the
 * next cor that has it: its session is kept, as session_expiry says.
 */
#include "corMqttLink.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long the 3.1.1 end may take, at most. */
#define END_MS 1000

bool
corMqttSessionEnds(const CorMqttSubGroup* g)
{
    return g != NULL && !g->named && !corGenerationReplaced();
}

void
corMqttByeEnds(const Link* l, CorMqttPacket* bye)
{
    if (l->broker.version == COR_MQTT_V5 && corMqttSessionEnds(l->group)) {
        bye->props.sessionExpiry = 0;
        corMqttPropSet(&bye->props, COR_MQTT_PROP_SESSION_EXPIRY);
    }
}

void
corMqttSessionPeerKeep(const Link* l)
{
    CorMqttSubGroup* g = &corMqttGroups[l->group - corMqttGroups];

    g->peerLen = sizeof(g->peer);
    if (getpeername(corConnTransport(l->conn)->fd, (struct sockaddr*)&g->peer,
                    &g->peerLen)
        != 0) {
        g->peerLen = 0;
    }
}

/* A fast stop: l's DISCONNECT with Session Expiry 0 (5.0), after what
 * its output still held, straight to its socket. */
static void
byeAtExit(Link* l)
{
    CorMqttPacket bye = { .type = COR_MQTT_DISCONNECT };

    if (l->state != LINK_READY || l->bye || l->group == NULL
        || !corMqttSessionEnds(l->group) || l->broker.version != COR_MQTT_V5) {
        return;
    }
    corMqttByeEnds(l, &bye);
    /* The socket takes a few bytes at once; a wait would fail (the stop
     * cancelled them all), and then the session is kept. */
    if (corMqttBufPut(&l->k.out, l->broker.version, &bye) == 0
        && corConnWriteAll(l->conn, corBufHead(&l->k.out),
                           corBufPending(&l->k.out), 0)
               == 0) {
        corLog(COR_LOG_INFO, "mqtt: %s: stopping: %s ends its session", l->name,
               l->clientId);
    }
}

void
corMqttSessionsByeAtExit(void)
{
    CorList* node;
    CorList* next;

    corListForEach(node, next, corMqttLoopLinks())
    {
        byeAtExit(corContainerOf(node, Link, link));
    }
}

/* A TCP connection to g's broker, made within END_MS; -1 when not. */
static int
endConnect(const CorMqttSubGroup* g)
{
    int fd = socket(g->peer.ss_family,
                    SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int err = 0;
    socklen_t len = sizeof(err);

    if (fd < 0) {
        return -1;
    }
    if ((connect(fd, (const struct sockaddr*)&g->peer, g->peerLen) != 0
         && (errno != EINPROGRESS || poll(&p, 1, END_MS) != 1
             || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0
             || err != 0))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* End g's 3.1.1 session: CONNECT with Clean Session 1 and its id, then
 * DISCONNECT; the broker's CONNACK (or its close) is waited for, so that
 * the broker read both before the socket closes. Whether it went. */
static bool
v311End(const CorMqttSubGroup* g)
{
    CorMqttPacket connect = {
        .type = COR_MQTT_CONNECT,
        .version = COR_MQTT_V311,
        .cleanStart = true,
        .clientId = { g->clientId, strlen(g->clientId) },
        .hasUsername = g->broker.hasUser,
        .hasPassword = g->broker.hasPassword,
        .username = { g->broker.user, strlen(g->broker.user) },
        .password = { g->broker.password, strlen(g->broker.password) }
    };
    CorMqttPacket bye = { .type = COR_MQTT_DISCONNECT };
    CorBuf out = { 0 };
    char answer[8];
    int fd = endConnect(g);
    bool sent = false;

    if (fd >= 0 && corMqttBufPut(&out, COR_MQTT_V311, &connect) == 0
        && corMqttBufPut(&out, COR_MQTT_V311, &bye) == 0
        && send(fd, out.data, out.len, MSG_NOSIGNAL) == (ssize_t)out.len) {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        sent = poll(&p, 1, END_MS) == 1
               && recv(fd, answer, sizeof(answer), 0) > 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    corBufFree(&out);
    return sent;
}

void
corMqttSessionsEnd(void)
{
    for (unsigned i = 0; i < corMqttGroupCount; i++) {
        const CorMqttSubGroup* g = &corMqttGroups[i];

        if (!corMqttSessionEnds(g) || g->broker.version != COR_MQTT_V311
            || g->peerLen == 0) {
            continue;
        }
        if (g->broker.tls) {
            corLog(COR_LOG_WARN,
                   "mqtt: %s: stopping: the 3.1.1 session of "
                   "%s stays on the broker (ended only over plain TCP)",
                   g->url, g->clientId);
        } else if (v311End(g)) {
            corLog(COR_LOG_INFO, "mqtt: %s: stopping: %s ended its session",
                   g->url, g->clientId);
        } else {
            corLog(COR_LOG_WARN,
                   "mqtt: %s: stopping: could not end the "
                   "session of %s: it stays on the broker",
                   g->url, g->clientId);
        }
    }
}
