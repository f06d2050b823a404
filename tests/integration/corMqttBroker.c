/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MQTT tests' broker (corMqttBroker.h): mosquitto with four listeners
 * in a scratch folder of its own, started and stopped by its PID, and
 * mosquitto_sub as a receiver.
 */
#include "corMqttBroker.h"

#include "corTest.h"
#include "corServer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

CorTestBroker corTestBroker;

/* Each bound until all are known. */
void
corTestPortsTake(int* ports, int count)
{
    int fds[8];

    for (int i = 0; i < count; i++) {
        struct sockaddr_in addr = { .sin_family = AF_INET };
        socklen_t len = sizeof(addr);

        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_eq(bind(fds[i], (struct sockaddr*)&addr, len), 0);
        getsockname(fds[i], (struct sockaddr*)&addr, &len);
        ports[i] = ntohs(addr.sin_port);
    }
    for (int i = 0; i < count; i++) {
        close(fds[i]);
    }
}

void
corTestBrokerStart(void)
{
    char path[128];
    FILE* f;
    long deadline = corNowMs() + 60000; /* a loaded machine */

    snprintf(path, sizeof(path), "%s/mosquitto.conf", corTestBroker.dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "user root\nper_listener_settings true\n"
            "persistence true\npersistence_location %s/\n"
            "max_queued_messages 0\nsys_interval 1\n"
            "log_dest file %s/mosquitto.log\nlog_type all\n"
            "listener %d 127.0.0.1\nallow_anonymous true\n"
            "listener %d 127.0.0.1\nallow_anonymous false\n"
            "password_file %s/passwd\n"
            "listener %d 127.0.0.1\nallow_anonymous true\n"
            "certfile %s/server.pem\nkeyfile %s/server.key\n"
            "listener %d 127.0.0.1\nallow_anonymous true\n"
            "certfile %s/self.pem\nkeyfile %s/self.key\n",
            corTestBroker.dir, corTestBroker.dir, corTestBroker.port,
            corTestBroker.portAuth, corTestBroker.dir, corTestBroker.portTls,
            corTestBroker.certs, corTestBroker.certs, corTestBroker.portSelf,
            corTestBroker.certs, corTestBroker.certs);
    fclose(f);
    corTestBroker.pid = corTestFork(SIGKILL);
    if (corTestBroker.pid == 0) {
        /* Not its warning that it runs as root (to read the files). */
        if (freopen("/dev/null", "w", stderr) != NULL) {
            execlp("mosquitto", "mosquitto", "-c", path, (char*)NULL);
        }
        _exit(127);
    }
    while (corNowMs() < deadline) {
        int fd = corConnect(corTestBroker.port);

        if (fd >= 0) {
            close(fd);
            return;
        }
        ck_assert_int_eq(waitpid(corTestBroker.pid, NULL, WNOHANG), 0);
        usleep(20 * 1000);
    }
    ck_abort_msg("mosquitto did not answer on %d", corTestBroker.port);
}

void
corTestBrokerStop(int sig)
{
    if (corTestBroker.pid > 0) {
        kill(corTestBroker.pid, sig);
        waitpid(corTestBroker.pid, NULL, 0);
        corTestBroker.pid = 0;
    }
}

void
corTestSubStart(CorTestSub* s, const char* topic, int count, const char* extra)
{
    char command[512];
    char log[128];
    char out[64];
    long deadline = corNowMs() + 60000; /* a loaded machine */
    static int subs;
    char id[32];
    char until[32] = "";

    snprintf(id, sizeof(id), "sub%d", ++subs);
    if (count > 0) {
        snprintf(until, sizeof(until), "-C %d", count);
    }
    snprintf(s->out, sizeof(s->out), "%s/%s.out", corTestBroker.dir, id);
    snprintf(command, sizeof(command),
             "exec mosquitto_sub -h 127.0.0.1 -p "
             "%d -V mqttv5 -q 1 -i %s -t '%s' %s -W 60 -F '%%t %%p %%P' "
             "%s > %s",
             corTestBroker.port, id, topic, until, extra, s->out);
    s->pid = corTestFork(SIGKILL);
    if (s->pid == 0) {
        execl("/bin/sh", "sh", "-c", command, (char*)NULL);
        _exit(127);
    }
    snprintf(log, sizeof(log), "Received SUBSCRIBE from %s", id);
    while (corNowMs() < deadline) {
        snprintf(command, sizeof(command), "grep -c '%s' %s/mosquitto.log", log,
                 corTestBroker.dir);
        if (corShell(command, out, sizeof(out)) == 0) {
            return;
        }
        usleep(20 * 1000);
    }
    ck_abort_msg("mosquitto_sub did not subscribe");
}

int
corTestSubCollect(CorTestSub* s, int ms, char* out, size_t cap)
{
    long deadline = corNowMs() + ms;
    char command[192];
    int lines = 0;

    while (corNowMs() < deadline && waitpid(s->pid, NULL, WNOHANG) == 0) {
        usleep(20 * 1000);
    }
    if (corNowMs() >= deadline) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
    }
    s->pid = 0;
    snprintf(command, sizeof(command), "head -c %zu %s", cap - 1, s->out);
    corShell(command, out, cap);
    for (const char* p = out; (p = strchr(p, '\n')) != NULL; p++) {
        lines++;
    }
    return lines;
}

long
corTestNotifyCount(int corPort, const char* name, const char* scheme)
{
    char full[96];

    snprintf(full, sizeof(full), "%s{scheme=\"%s\"}", name, scheme);
    return corMetric(corPort, full);
}

void
corTestNotifiedWait(int corPort, const char* scheme, long want, int ms)
{
    long deadline = corNowMs() + ms;
    long total = 0;

    while ((total = corTestNotifyCount(corPort, "cor_notify_sent_total", scheme)
                    + corTestNotifyCount(corPort, "cor_notify_failed_total",
                                         scheme))
               < want
           && corNowMs() < deadline) {
        usleep(20 * 1000);
    }
    ck_assert_int_eq(total, want);
}

int
corTestCountOf(const char* s, const char* needle)
{
    int n = 0;

    while ((s = strstr(s, needle)) != NULL) {
        n++;
        s += strlen(needle);
    }
    return n;
}

void
corTestBrokerMake(void)
{
    char command[256];
    char out[256];
    int ports[4];

    corTestCertsMake(corTestBroker.certs, sizeof(corTestBroker.certs));
    snprintf(corTestBroker.dir, sizeof(corTestBroker.dir),
             "/tmp/cor-mqtt-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(corTestBroker.dir));
    snprintf(command, sizeof(command), "mosquitto_passwd -b -c %s/passwd u p",
             corTestBroker.dir);
    ck_assert_int_eq(corShell(command, out, sizeof(out)), 0);
    corTestPortsTake(ports, 4);
    corTestBroker.port = ports[0];
    corTestBroker.portAuth = ports[1];
    corTestBroker.portTls = ports[2];
    corTestBroker.portSelf = ports[3];
    corTestBrokerStart();
}

void
corTestBrokerRemove(void)
{
    char command[256];
    char out[256];

    corTestBrokerStop(SIGTERM);
    snprintf(command, sizeof(command), "rm -rf %s", corTestBroker.dir);
    corShell(command, out, sizeof(out));
    corTestCertsRemove(corTestBroker.certs);
}

long
corTestBrokerSessionsKept(void)
{
    char command[320];
    char out[1024];
    long total = -1;
    long connected = -1;

    /* mosquitto says them every second, and only when they changed: what
     * it said 1.5 s after the caller's last change is the truth, and this
     * reader's own connect changes both alike. */
    usleep(1500 * 1000);
    snprintf(command, sizeof(command),
             "mosquitto_sub -h 127.0.0.1 -p %d -v "
             "-t '$SYS/broker/clients/total' -t "
             "'$SYS/broker/clients/connected' -C 6 -W 2; true",
             corTestBroker.port);
    corShell(command, out, sizeof(out));
    for (char* line = strtok(out, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        if (strncmp(line, "$SYS/broker/clients/total ", 26) == 0) {
            total = atol(line + 26);
        } else if (strncmp(line, "$SYS/broker/clients/connected ", 30) == 0) {
            connected = atol(line + 30);
        }
    }
    return total < 0 || connected < 0 ? -1 : total - connected;
}

long
corTestBrokerCounter(int corPort, const char* name)
{
    return corTestBrokerCounterAt(corPort, corTestBroker.port, name);
}

long
corTestBrokerCounterAt(int corPort, int brokerPort, const char* name)
{
    static char out[1 << 16];
    char key[128];
    const char* at;

    snprintf(key, sizeof(key), "\n%s{broker=\"mqtt://127.0.0.1:%d\"} ", name,
             brokerPort);
    if (corRequest(corPort, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n", out,
                   sizeof(out))
            != 200
        || (at = strstr(out, key)) == NULL) {
        return -1;
    }
    return atol(at + strlen(key));
}
