/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tests' redis-server (corTestRedis.h): its command line, its start
 * waited for by its port, its kill.
 */
#include "corTestRedis.h"

#include "corTest.h"
#include "corServer.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

void
corTestRedisStart(CorTestRedis* r, const char* password, const char* certs)
{
    char port[16];
    char cert[160];
    char key[160];
    char ca[160];
    const char* argv[32] = {
        "redis-server", "--bind", "127.0.0.1",   "--save", "",
        "--appendonly", "no",     "--daemonize", "no"
    };
    int argc = 9;

    r->port = r->port != 0 ? r->port : corFreePort();
    snprintf(port, sizeof(port), "%d", r->port);
    argv[argc++] = "--port";
    argv[argc++] = certs != NULL ? "0" : port;
    if (password != NULL) {
        argv[argc++] = "--requirepass";
        argv[argc++] = password;
    }
    if (certs != NULL) {
        snprintf(cert, sizeof(cert), "%s/server.pem", certs);
        snprintf(key, sizeof(key), "%s/server.key", certs);
        snprintf(ca, sizeof(ca), "%s/ca.pem", certs);
        argv[argc++] = "--tls-port";
        argv[argc++] = port;
        argv[argc++] = "--tls-cert-file";
        argv[argc++] = cert;
        argv[argc++] = "--tls-key-file";
        argv[argc++] = key;
        argv[argc++] = "--tls-ca-cert-file";
        argv[argc++] = ca;
        argv[argc++] = "--tls-auth-clients";
        argv[argc++] = "no";
    }
    r->pid = corTestFork(SIGKILL);
    if (r->pid == 0) {
        if (freopen("/dev/null", "w", stdout) != NULL) {
            execvp("redis-server", (char* const*)argv);
        }
        _exit(127);
    }
    ck_assert_int_gt(r->pid, 0);
    ck_assert_msg(corWaitListening(r->port, r->pid, 10000),
                  "redis-server did not answer on %d (is it installed?)",
                  r->port);
}

void
corTestRedisStop(CorTestRedis* r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
}
