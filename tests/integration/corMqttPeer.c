/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The brokers the MQTT tests take as a parameter (corMqttBroker.h's
 * CorTestPeer): mosquitto, RabbitMQ's MQTT plugin and aedes, each in a
 * scratch folder of its own on a loopback port, started and stopped by
 * its PID. RabbitMQ gets a node name, ports, folders and an epmd of its
 * own (started here, stopped by its PID too), and takes about 10 s to
 * start; aedes runs under node from build/npm (./configure
 * --install-deps). One that is not installed is not started, with why.
 */
#include "corMqttBroker.h"

#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* RabbitMQ's start, at most (about 10 s on an idle machine). */
#define PEER_START_MS 90000

static const char* const names[] = { "mosquitto", "rabbitmq", "aedes" };

const char*
corTestPeerName(CorTestPeerKind kind)
{
    return names[kind];
}

/* Run command (sh -c) in a child of its own; its PID. */
static pid_t
spawn(const char* command)
{
    /* SIGTERM: RabbitMQ's script stops the beam it started on it. */
    pid_t pid = corTestFork(SIGTERM);

    if (pid == 0) {
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", command, (char*)NULL);
        _exit(127);
    }
    return pid;
}

static bool
installed(const char* path)
{
    return access(path, X_OK) == 0 || access(path, R_OK) == 0;
}

/* The command that runs p's broker (its files made), or NULL. */
static const char*
peerCommand(CorTestPeer* p, const char* extra, char* cmd, size_t cap)
{
    char path[160];
    char out[64];
    FILE* f;

    if (p->kind == COR_PEER_MOSQUITTO) {
        snprintf(path, sizeof(path), "%s/mosquitto.conf", p->dir);
        f = fopen(path, "w");
        fprintf(f,
                "user root\nlistener %d 127.0.0.1\nallow_anonymous true\n"
                "log_dest file %s/broker.log\nlog_type all\n%s\n",
                p->port, p->dir, extra != NULL ? extra : "");
        fclose(f);
        snprintf(cmd, cap, "exec mosquitto -c %s > /dev/null 2>&1", path);
    } else if (p->kind == COR_PEER_AEDES) {
        snprintf(cmd, cap,
                 "exec node tests/integration/corMqttAedes.mjs %d "
                 "%s/build/npm/node_modules/aedes/aedes.js > %s/broker.log "
                 "2>&1",
                 p->port, getcwd(path, sizeof(path)), p->dir);
    } else {
        snprintf(path, sizeof(path), "%s/rabbitmq.conf", p->dir);
        f = fopen(path, "w");
        fprintf(f,
                "listeners.tcp = none\nloopback_users = none\n"
                "mqtt.listeners.tcp.default = 127.0.0.1:%d\n"
                "log.console = false\n",
                p->port);
        fclose(f);
        snprintf(path, sizeof(path), "echo '[rabbitmq_mqtt].' > %s/plugins",
                 p->dir);
        corShell(path, out, sizeof(out));
        snprintf(path, sizeof(path), "exec epmd -port %d > /dev/null 2>&1",
                 p->ports[0]);
        p->epmd = spawn(path);
        snprintf(cmd, cap,
                 "cd %s && HOME=%s ERL_EPMD_PORT=%d "
                 "RABBITMQ_NODENAME=cor%d@localhost RABBITMQ_NODE_PORT=%d "
                 "RABBITMQ_DIST_PORT=%d RABBITMQ_MNESIA_BASE=%s/mnesia "
                 "RABBITMQ_LOG_BASE=%s/log RABBITMQ_ENABLED_PLUGINS_FILE="
                 "%s/plugins RABBITMQ_CONFIG_FILE=%s/rabbitmq.conf "
                 "RABBITMQ_PLUGINS_EXPAND_DIR=%s/expanded "
                 "exec /usr/lib/rabbitmq/bin/rabbitmq-server > broker.log "
                 "2>&1",
                 p->dir, p->dir, p->ports[0], p->port, p->ports[1], p->ports[2],
                 p->dir, p->dir, p->dir, p->dir, p->dir);
    }
    return cmd;
}

int
corTestPeerStart(CorTestPeer* p, CorTestPeerKind kind, const char* extra,
                 char* why, size_t whyLen)
{
    static const char* const needs[] = {
        "/usr/sbin/mosquitto", "/usr/lib/rabbitmq/bin/rabbitmq-server",
        "build/npm/node_modules/aedes/aedes.js"
    };
    char cmd[1024];
    int ports[4];
    long deadline = corNowMs() + PEER_START_MS;

    memset(p, 0, sizeof(*p));
    p->kind = kind;
    if (!installed(needs[kind])) {
        snprintf(why, whyLen,
                 "%s is not installed (%s; ./configure "
                 "--install-deps)",
                 names[kind], needs[kind]);
        return -1;
    }
    snprintf(p->dir, sizeof(p->dir), "/tmp/cor-peer-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(p->dir));
    corTestPortsTake(ports, 4);
    p->port = ports[0];
    memcpy(p->ports, ports + 1, sizeof(p->ports));
    p->pid = spawn(peerCommand(p, extra, cmd, sizeof(cmd)));
    while (corNowMs() < deadline) {
        int fd = corConnect(p->port);

        if (fd >= 0) {
            close(fd);
            return 0;
        }
        ck_assert_int_eq(waitpid(p->pid, NULL, WNOHANG), 0);
        usleep(50 * 1000);
    }
    ck_abort_msg("%s did not answer on %d", names[kind], p->port);
    return -1;
}

/* Stop pid's group (the broker and what it started: RabbitMQ's script
 * runs beam as its child) and wait for it. */
static void
reap(pid_t* pid)
{
    if (*pid > 0) {
        kill(-*pid, SIGTERM);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

void
corTestPeerStop(CorTestPeer* p)
{
    char command[128];
    char out[64];

    reap(&p->pid);
    reap(&p->epmd);
    if (p->dir[0] != '\0') {
        snprintf(command, sizeof(command), "rm -rf %s", p->dir);
        corShell(command, out, sizeof(out));
        p->dir[0] = '\0';
    }
}
