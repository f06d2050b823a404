/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor-request: the command line (see usage below and docs/cor-request.md).
 */
#include "corRequest.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADERS_MAX 64
#define MESSAGES_MAX 256
#define HOST_MAX 256
/* host:port */
#define AUTHORITY_MAX (HOST_MAX + 8)

static const struct {
    const char* scheme;
    const CorReqProtocol* protocol;
    bool tls;
    unsigned defaultPort;
} schemes[] = {
    { "http", &corReqHttp, false, 80 },
    { "https", &corReqHttp, true, 443 },
    { "cor", &corReqCor, false, 7070 },
    { "cors", &corReqCor, true, 7443 },
};

static void
usage(FILE* to)
{
    fprintf(
        to,
        "usage: cor-request [options] URL [PATH...]\n"
        "  URL is http[s]://host[:port]/path or cor[s]://host[:port]/path;\n"
        "  each PATH is one more request to the same server, all sent at\n"
        "  once on one connection and printed as they are answered.\n"
        "  -X, --method M      the method (GET; POST with a body)\n"
        "  -H, --header 'N: V' a header (repeatable)\n"
        "  -d, --data TEXT     a body; @FILE: the file's bytes\n"
        "      --json TEXT     a JSON body (Content-Type: application/json)\n"
        "  -c, --connections N load: connections (default 1)\n"
        "      --depth K       load: requests in flight per connection\n"
        "                      (pipelined over HTTP, multiplexed over cor://;\n"
        "                      default 1)\n"
        "      --duration D    load: how long (10s, 500ms; default 10s)\n"
        "      --rate R        load: R requests a second in all, open loop\n"
        "                      (latency from when each was due)\n"
        "      --timeout D     an answer's timeout (default 10s)\n"
        "      --cacert FILE   TLS: trust the CAs in FILE (PEM) instead of\n"
        "                      the system's\n"
        "  -k, --insecure      TLS: do not verify the server's certificate\n"
        "  With -c, --duration or --rate it runs a load and prints req/s\n"
        "  and latency percentiles; otherwise it prints each answer as\n"
        "  curl -i does. Exit status 0 when every request was answered.\n");
}

/* "10s", "500ms", "2m", "1.5" (seconds); -1 when malformed. */
static double
parseSeconds(const char* text)
{
    char* end;
    double v = strtod(text, &end);

    if (end == text || v < 0) {
        return -1;
    }
    if (strcmp(end, "ms") == 0) {
        return v / 1000;
    }
    if (strcmp(end, "m") == 0) {
        return v * 60;
    }
    return *end == '\0' || strcmp(end, "s") == 0 ? v : -1;
}

/* The body -d names: TEXT, or @FILE's bytes (malloc'ed, never freed: it
 * lives as long as the run). Returns 0 or -1. */
static int
bodyRead(const char* arg, const char** body, size_t* len)
{
    FILE* f;
    char* data;
    long size;

    if (arg[0] != '@') {
        *body = arg;
        *len = strlen(arg);
        return 0;
    }
    f = fopen(arg + 1, "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0
        || fseek(f, 0, SEEK_SET) != 0
        || (data = malloc((size_t)size + 1)) == NULL
        || fread(data, 1, (size_t)size, f) != (size_t)size) {
        perror(arg + 1);
        if (f != NULL) {
            fclose(f);
        }
        return -1;
    }
    fclose(f);
    *body = data;
    *len = (size_t)size;
    return 0;
}

/* What HTTP's Host says (RFC 9110, 7.2): the host, and the port unless it
 * is the scheme's default. */
static void
authorityOf(const CorReqPlan* plan, unsigned defaultPort, char* out, size_t cap)
{
    if (plan->port == defaultPort) {
        snprintf(out, cap, "%s", plan->host);
    } else {
        snprintf(out, cap, "%s:%u", plan->host, plan->port);
    }
}

/* Split scheme://host[:port][/target] into plan, the first target and
 * the Host to send (host and hostHeader hold HOST_MAX and AUTHORITY_MAX
 * bytes); *tls: whether the scheme is TLS's. Returns 0, or -1 said on
 * stderr. */
static int
parseUrl(const char* url, CorReqPlan* plan, char* host, char* hostHeader,
         const char** target, bool* tls)
{
    unsigned defaultPort = 0;
    const char* sep = strstr(url, "://");
    const char* authority;
    const char* slash;
    const char* colon;
    size_t len;

    if (sep == NULL) {
        fprintf(stderr,
                "cor-request: %s: expected a URL such as "
                "http://host:port/path\n",
                url);
        return -1;
    }
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        if (strlen(schemes[i].scheme) == (size_t)(sep - url)
            && strncmp(url, schemes[i].scheme, (size_t)(sep - url)) == 0) {
            plan->protocol = schemes[i].protocol;
            plan->scheme = schemes[i].scheme;
            plan->port = schemes[i].defaultPort;
            defaultPort = plan->port;
            *tls = schemes[i].tls;
        }
    }
    if (plan->protocol == NULL) {
        fprintf(stderr,
                "cor-request: unknown scheme '%.*s' (expected "
                "http, https, cor or cors)\n",
                (int)(sep - url), url);
        return -1;
    }
    authority = sep + 3;
    slash = strchr(authority, '/');
    len = slash ? (size_t)(slash - authority) : strlen(authority);
    colon = memchr(authority, ':', len);
    if (colon != NULL) {
        plan->port = (unsigned)strtoul(colon + 1, NULL, 10);
        len = (size_t)(colon - authority);
    }
    if (len == 0 || len >= HOST_MAX || plan->port == 0 || plan->port > 65535) {
        fprintf(stderr, "cor-request: %s: a bad host or port\n", url);
        return -1;
    }
    memcpy(host, authority, len);
    host[len] = '\0';
    plan->host = host;
    authorityOf(plan, defaultPort, hostHeader, AUTHORITY_MAX);
    *target = slash ? slash : "/";
    return 0;
}

typedef struct {
    const char* method;
    const char* headers[HEADERS_MAX + 1];
    unsigned headerCount;
    const char* body;
    size_t bodyLen;
    bool load;
    const char* caFile;
    bool insecure;
} Options;

static int
parseOptions(int argc, char** argv, Options* o, CorReqPlan* plan)
{
    static const struct option longs[] = {
        { "method", required_argument, NULL, 'X' },
        { "header", required_argument, NULL, 'H' },
        { "data", required_argument, NULL, 'd' },
        { "json", required_argument, NULL, 'j' },
        { "connections", required_argument, NULL, 'c' },
        { "depth", required_argument, NULL, 'K' },
        { "duration", required_argument, NULL, 't' },
        { "rate", required_argument, NULL, 'r' },
        { "timeout", required_argument, NULL, 'T' },
        { "cacert", required_argument, NULL, 'C' },
        { "insecure", no_argument, NULL, 'k' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    double timeout = 10;
    int opt;

    while ((opt = getopt_long(argc, argv, "X:H:d:c:kh", longs, NULL)) != -1) {
        switch (opt) {
        case 'X':
            o->method = optarg;
            break;
        case 'H':
            if (o->headerCount == HEADERS_MAX) {
                return -1;
            }
            o->headers[o->headerCount++] = optarg;
            break;
        case 'j':
            if (o->headerCount > HEADERS_MAX) {
                return -1;
            }
            o->headers[o->headerCount++] = "Content-Type: application/json";
            o->body = optarg;
            o->bodyLen = strlen(optarg);
            break;
        case 'd':
            if (bodyRead(optarg, &o->body, &o->bodyLen) != 0) {
                return -1;
            }
            break;
        case 'c':
            plan->connections = (unsigned)atoi(optarg);
            o->load = true;
            break;
        case 'K':
            plan->depth = (unsigned)atoi(optarg);
            break;
        case 't':
            plan->seconds = parseSeconds(optarg);
            o->load = true;
            break;
        case 'r':
            plan->rate = atof(optarg);
            o->load = true;
            break;
        case 'T':
            timeout = parseSeconds(optarg);
            break;
        case 'C':
            o->caFile = optarg;
            break;
        case 'k':
            o->insecure = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return -1;
        }
    }
    if (o->load && plan->seconds == 0) {
        plan->seconds = 10;
    }
    plan->timeoutMs = (int)(timeout * 1000);
    if (plan->connections == 0 || plan->depth == 0 || plan->seconds < 0
        || plan->rate < 0 || timeout <= 0 || optind >= argc) {
        return -1;
    }
    return 0;
}

int
main(int argc, char** argv)
{
    static CorReqMessage messages[MESSAGES_MAX];
    CorReqPlan plan = { .connections = 1, .depth = 1 };
    Options o = { 0 };
    char host[HOST_MAX];
    char authority[AUTHORITY_MAX];
    char why[512];
    const char* target;
    bool tls = false;

    signal(SIGPIPE, SIG_IGN);
    if (parseOptions(argc, argv, &o, &plan) != 0
        || argc - optind > MESSAGES_MAX) {
        usage(stderr);
        return 2;
    }
    if (parseUrl(argv[optind], &plan, host, authority, &target, &tls) != 0) {
        return 2;
    }
    if (tls) {
        plan.tls = corReqTlsContext(o.caFile, o.insecure, plan.protocol->alpn,
                                    why, sizeof(why));
        if (plan.tls == NULL) {
            fprintf(stderr, "cor-request: %s\n", why);
            return 2;
        }
    }
    if (o.method == NULL) {
        o.method = o.body != NULL ? "POST" : "GET";
    }
    for (int i = optind; i < argc; i++) {
        messages[plan.messageCount++] = (CorReqMessage){
            .method = o.method,
            .target = i == optind ? target : argv[i],
            .host = authority,
            .headers = o.headers,
            .headerCount = o.headerCount,
            .body = o.body,
            .bodyLen = o.bodyLen,
            .head = strcmp(o.method, "HEAD") == 0,
        };
    }
    plan.messages = messages;
    return corReqRun(&plan);
}
