/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tests' DNS server (tests/integration/corDnsServer.c), started and
 * stopped by its PID from a test that runs beside it in the build's
 * tests/ folder, and the queries it logged.
 */
#ifndef COR_DNS_H
#define COR_DNS_H

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int port;
    char log[PATH_MAX]; /* one line a query: "udp|tcp A|AAAA name" */
} CorDns;

/* Start the server program (NULL: corDnsServer beside the running
 * program). Returns 0 or -1. */
static inline int
corDnsStart(CorDns* dns, const char* program)
{
    char self[PATH_MAX];
    char server[PATH_MAX + 16];
    char portFile[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (program != NULL) {
        snprintf(server, sizeof(server), "%s", program);
    } else if (n > 0) {
        self[n] = '\0';
        *strrchr(self, '/') = '\0';
        snprintf(server, sizeof(server), "%s/corDnsServer", self);
    } else {
        return -1;
    }
    snprintf(portFile, sizeof(portFile), "/tmp/corDns.%d.port", (int)getpid());
    snprintf(dns->log, sizeof(dns->log), "/tmp/corDns.%d.log", (int)getpid());
    unlink(portFile);
    unlink(dns->log);
    dns->port = 0;
    dns->pid = fork();
    if (dns->pid == 0) {
        execl(server, server, portFile, dns->log, (char*)NULL);
        _exit(127);
    }
    for (int i = 0; dns->pid > 0 && i < 500 && dns->port == 0; i++) {
        FILE* f = fopen(portFile, "r");

        if (f == NULL || fscanf(f, "%d", &dns->port) != 1) {
            usleep(10000);
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    unlink(portFile);
    return dns->port > 0 ? 0 : -1;
}

static inline void
corDnsStop(CorDns* dns)
{
    if (dns->pid > 0) {
        kill(dns->pid, SIGTERM);
        waitpid(dns->pid, NULL, 0);
        dns->pid = 0;
    }
    unlink(dns->log);
}

/* How many of the logged queries hold text. */
static inline int
corDnsQueries(const CorDns* dns, const char* text)
{
    char line[512];
    int count = 0;
    FILE* f = fopen(dns->log, "r");

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        count += strstr(line, text) != NULL;
    }
    fclose(f);
    return count;
}

#endif /* COR_DNS_H */
