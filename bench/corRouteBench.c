/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route.lookup: what finding a request's route costs with 10 routes and
 * with 1000 (500 hosts, 250 exact paths, 200 prefixes and 50 regexes, 10
 * of them unanchored), over one mix of requests: host hits and misses,
 * exact, prefix and regex hits, and paths no route takes. The goal is
 * at most 1 us a lookup more with 1000 than with 10. Each table lives in
 * a process of its own (the route table is a generation's, one a
 * process); their rounds alternate, so that a shared machine's noise
 * falls on both alike. The real corRoute.c, index and PCRE2; what it
 * asks of the rest of the core (handlers, guards, filters, a log) is
 * stood in below.
 */
#include "corBench.h"
#include "corCoreInt.h"

#include <stdarg.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LOOKUPS
#define LOOKUPS 200000
#endif
#define REQUESTS 1024

/* ---- The core, stood in -------------------------------------------------- */

static CorHandlerEntry handlerEntry;

const CorHandlerEntry*
corHandlerFind(const char* name)
{
    (void)name;
    return &handlerEntry;
}

const char**
corHandlerNames(void)
{
    return NULL;
}

const CorGuardEntry*
corGuardFind(const char* name)
{
    (void)name;
    return NULL;
}

const char**
corGuardNames(void)
{
    return NULL;
}

int
corFilterIndex(const char* name)
{
    (void)name;
    return -1;
}

const char**
corFilterNames(void)
{
    return NULL;
}

int
corRouteNotifyCheck(const CorConfigRoute* in, const CorHandlerEntry* handler,
                    CorConfErrors* errors)
{
    (void)in, (void)handler, (void)errors;
    return 0;
}

bool
corHeaderNameValid(const char* name)
{
    return name != NULL;
}

bool
corHeaderValueValid(const char* value)
{
    return value != NULL;
}

void
corLog(CorLogLevel level, const char* fmt, ...)
{
    (void)level, (void)fmt;
}

void*
corRequestAlloc(CorRequest* r, size_t size)
{
    (void)r;
    return malloc(size);
}

const CorHeader*
corRequestHeader(const CorRequest* r, const char* name)
{
    return corHeadersFind(r->headers, r->headerCount, name);
}

/* ---- The tables ---------------------------------------------------------- */

/* The YAML of a table of `hosts` host routes, then exact, prefix and
 * regex ones. */
static char*
tableYaml(unsigned hosts, unsigned exact, unsigned prefixes, unsigned regexes)
{
    size_t cap = 200 * (hosts + exact + prefixes + regexes) + 256;
    char* yaml = malloc(cap);
    size_t n = 0;

    n += (size_t)snprintf(yaml + n, cap - n,
                          "listen: [ { protocol: http, "
                          "address: \"127.0.0.1:1\" } ]\nroutes:\n");
    for (unsigned i = 0; i < hosts; i++) {
        n += (size_t)snprintf(yaml + n, cap - n,
                              "  - { host: h%u.example."
                              "com, match: \"GET /*\", handler: h }\n",
                              i);
    }
    for (unsigned i = 0; i < exact; i++) {
        n += (size_t)snprintf(yaml + n, cap - n,
                              "  - { match: \"GET "
                              "=/e%u\", handler: h }\n",
                              i);
    }
    for (unsigned i = 0; i < prefixes; i++) {
        n += (size_t)snprintf(yaml + n, cap - n,
                              "  - { match: \"/p%u/*\", "
                              "handler: h }\n",
                              i);
    }
    for (unsigned i = 0; i < regexes; i++) {
        n += (size_t)
            snprintf(yaml + n, cap - n,
                     i % 5 == 0 ? "  - { match: \"~\\\\.x%u$\", handler: h }\n"
                                : "  - { match: \"~^/r%u/([0-9]+)$\", handler: "
                                  "h }\n",
                     i);
    }
    return yaml;
}

static CorRequest requests[REQUESTS];
static CorHeader hostHeaders[REQUESTS];
static char texts[REQUESTS][2][64];

/* One mix of requests for both tables, from a fixed seed. */
static void
requestsMake(void)
{
    srandom(3);
    for (unsigned i = 0; i < REQUESTS; i++) {
        char* host = texts[i][0];
        char* path = texts[i][1];
        unsigned k = (unsigned)random();

        snprintf(host, 64, k % 3 == 0 ? "other.test" : "h%u.example.com",
                 k % 600);
        switch (k % 5) {
        case 0:
            snprintf(path, 64, "/e%u", k % 300);
            break;
        case 1:
            snprintf(path, 64, "/p%u/a/b", k % 250);
            break;
        case 2:
            snprintf(path, 64, "/r%u/123", k % 60);
            break;
        case 3:
            snprintf(path, 64, "/file.x%u", k % 60);
            break;
        default:
            snprintf(path, 64, "/nothing/here");
            break;
        }
        hostHeaders[i] = (CorHeader){ "Host", 4, host, strlen(host) };
        requests[i] = (CorRequest){ .method = "GET",
                                    .methodLen = 3,
                                    .path = path,
                                    .pathLen = strlen(path),
                                    .headers = &hostHeaders[i],
                                    .headerCount = 1 };
    }
}

/* A process with its table: for each byte on in, a round of lookups,
 * whose ns a lookup go back on out. */
static pid_t
tableStart(const char* yaml, int* toP, int* fromP)
{
    int in[2];
    int out[2];
    pid_t pid;

    if (pipe(in) != 0 || pipe(out) != 0 || (pid = fork()) < 0) {
        return -1;
    }
    if (pid == 0) {
        CorConfErrors errors = { 0 };
        CorConfig* config = corConfigLoadString("bench.yaml", yaml,
                                                strlen(yaml), &errors);
        CorRouteMatch match;
        char go;

        if (config == NULL || corRoutesBuild(config, &errors) != 0) {
            fprintf(stderr, "corRouteBench: %s\n", errors.text);
            _exit(1);
        }
        while (read(in[0], &go, 1) == 1) {
            double start = corBenchNowNs();
            double ns;

            for (unsigned i = 0; i < LOOKUPS; i++) {
                corRouteFind(&requests[i % REQUESTS], &match);
            }
            ns = (corBenchNowNs() - start) / LOOKUPS;
            if (write(out[1], &ns, sizeof(ns)) != sizeof(ns)) {
                _exit(1);
            }
        }
        _exit(0);
    }
    close(in[0]);
    close(out[1]);
    *toP = in[1];
    *fromP = out[0];
    return pid;
}

static double
roundRun(int to, int from)
{
    double ns = -1;

    if (write(to, "g", 1) != 1 || read(from, &ns, sizeof(ns)) != sizeof(ns)) {
        return -1;
    }
    return ns;
}

int
main(void)
{
    char* small = tableYaml(2, 3, 3, 2);
    char* large = tableYaml(500, 250, 200, 50);
    double ns[2][COR_BENCH_ROUNDS];
    double extra[COR_BENCH_ROUNDS];
    int to[2];
    int from[2];
    pid_t pid[2];

    requestsMake();
    pid[0] = tableStart(small, &to[0], &from[0]);
    pid[1] = tableStart(large, &to[1], &from[1]);
    for (int round = 0; round < COR_BENCH_ROUNDS; round++) {
        ns[0][round] = roundRun(to[0], from[0]);
        ns[1][round] = roundRun(to[1], from[1]);
        if (ns[0][round] < 0 || ns[1][round] < 0) {
            fprintf(stderr, "corRouteBench: a table's process failed\n");
            return 1;
        }
        extra[round] = ns[1][round] - ns[0][round];
    }
    /* Each child holds the other's pipes too: no EOF ends them. */
    for (int i = 0; i < 2; i++) {
        kill(pid[i], SIGTERM);
        waitpid(pid[i], NULL, 0);
    }
    corBenchPrint("route.lookup.10", corBenchMedian(ns[0], COR_BENCH_ROUNDS),
                  "ns");
    corBenchPrint("route.lookup.1000", corBenchMedian(ns[1], COR_BENCH_ROUNDS),
                  "ns");
    corBenchPrint("route.lookup.extra", corBenchMedian(extra, COR_BENCH_ROUNDS),
                  "ns");
    free(small);
    free(large);
    return 0;
}
