/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/forward: a reverse proxy. Each upstream group of the YAML is a
 * handler that routes name; a request routed to it goes to one of the
 * group's servers (round robin, least_conn or a consistent hash:
 * corForwardBalance.c; a server that failed to connect is skipped for
 * fail_timeout) with the HTTP floor's client, and the
 * answer comes back as it arrives: a streamed response whose writes wait
 * for the client, so a body of any size passes in bounded memory.
 *
 *     modules:
 *       - load: forward
 *         upstreams:
 *           - name: backend
 *             servers: [ "http://127.0.0.1:9001", "https://b.test:9443" ]
 *             connect_timeout: 1s
 *             read_timeout: 30s      (first byte, and between bytes)
 *             fail_timeout: 10s
 *             host: upstream         (keep | upstream | a name)
 *             underscores_in_headers: false  (X_Name fields dropped)
 *             http2: off             (on: over HTTP/2, one connection a
 *                                     server per loop, streams on it)
 *             request_buffering: on  (off: the body passed on as it
 *                                     comes, chunked over HTTP/1.1)
 *             balance: round_robin   (least_conn | hash)
 *             hash: ip               (path | "header:NAME")
 *     routes:
 *       - { match: "/api/...", handler: backend }
 *
 * 502 when no server answers, 504 when one timed out; each logged with the
 * server's address. The handler is a coroutine (a worker past the cap and
 * in blocking mode: the same source, its waits poll); a client that leaves
 * cancels its waits, so the upstream exchange ends with it.
 * An upgrade (WebSocket) that the upstream takes is spliced through
 * (corForwardUpgrade.c); probers check the servers' health
 * (corForwardHealth.c). docs/forward.md says why it is built so.
 */
#include "corForwardInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What one read of the answer's body asks for: the first read, on the
 * stack (most answers fit), then each read of a longer one. */
#define FORWARD_FIRST_BYTES 2048
#define FORWARD_READ_BYTES 16384

/* The groups; the module's, from init to exit. */
static ForwardGroup* groups;
static unsigned groupCount;

/* ---- Servers ------------------------------------------------------------- */

/*
 * Open the exchange on a server of g, trying the next one when a server
 * could not be reached (the request was not sent: it cannot have been
 * acted on), or when an idempotent request was sent and the server
 * closed on it without answering. Never after a timeout that followed
 * the send (the server may be working on it; nginx's non_idempotent rule
 * plus no retry on a read timeout). Each server is tried once at most, in
 * the order of g's balance. Returns 0 with *xP open and *sP its server
 * (counted in flight: corForwardServerDone), or -errno (res->error said,
 * and logged here).
 */
static int
upstreamOpen(CorRequest* r, ForwardGroup* g, CorClientRequest* q,
             CorClientResponse* res, CorClientStream** xP, ForwardServer** sP)
{
    bool* tried = corRequestAlloc(r, g->serverCount);
    ForwardServer* s;
    int rc = -EHOSTUNREACH;

    if (tried == NULL) {
        snprintf(res->error, sizeof(res->error), "no memory");
        return -ENOMEM;
    }
    memset(tried, 0, g->serverCount);
    for (unsigned i = 0; (s = corForwardPick(g, r, tried)) != NULL; i++) {
        if (i > 0) {
            corClientResponseFree(res);
        }
        q->url = corForwardUrl(r, s);
        q->target = s->target;
        rc = q->url != NULL ? corClientOpen(q, res, xP) : -ENOMEM;
        if (rc == 0) {
            *sP = s;
            return 0;
        }
        corForwardServerDone(s);
        if (rc == -ECANCELED) {
            return rc;
        }
        if (rc == -ENOMEM) {
            snprintf(res->error, sizeof(res->error), "no memory");
        }
        corLog(COR_LOG_ERROR, "forward %s: upstream %s: %s", g->name, s->url,
               res->error);
        if (rc == -EINVAL || rc == -ENOMEM) {
            return rc; /* not the server's failure */
        }
        if (!res->sent) {
            atomic_store(&s->downUntil, corEvClockMs() + g->failTimeoutMs);
        } else if (!corClientIdempotent(q->method)
                   || (rc != -ECONNRESET && rc != -EPIPE) || r->bodyTaken > 0) {
            return rc; /* a body passed on as it came is gone */
        }
    }
    return rc;
}

/* ---- Serving ------------------------------------------------------------- */

/* The answer for an exchange that failed before anything was sent. */
static void
failRespond(CorRequest* r, int rc)
{
    if (rc == -ETIMEDOUT) {
        corRespondStatic(r, 504, "text/plain", "upstream timed out\n", 19);
    } else {
        corRespondStatic(r, 502, "text/plain", "no upstream answered\n", 21);
    }
}

/* The end of a streamed answer, with the upstream's trailers (gRPC's
 * status). */
static void
streamEnd(CorRequest* r, const CorClientResponse* res)
{
    if (corForwardResponseTrailers(r, res) < 0) {
        corResponseStreamAbort(r); /* never a status-less end */
        return;
    }
    corResponseStreamEnd(r);
}

/* Pass the rest of the body on, piece by piece; each write waits for the
 * client. A failure on either side cuts the answer: the client must not
 * take a truncated body for a whole one. */
static void
bodyStream(CorRequest* r, const ForwardGroup* g, CorClientStream* x,
           CorClientResponse* res, char* buf)
{
    ssize_t n;

    while ((n = corClientRead(x, buf, FORWARD_READ_BYTES, g->readTimeoutMs))
           > 0) {
        if (corResponseStreamWrite(r, buf, (size_t)n) < 0) {
            corResponseStreamAbort(r); /* the client left */
            return;
        }
    }
    if (n < 0) {
        if (n != -ECANCELED) {
            corLog(COR_LOG_ERROR, "forward %s: %s", g->name, res->error);
        }
        corResponseStreamAbort(r);
        return;
    }
    streamEnd(r, res);
}

/* An answer that came whole with its head (a cor:// one in one frame):
 * its length is known, and said as an HTTP upstream's Content-Length is
 * (but for a HEAD, whose answer is empty whatever a GET would get); a
 * streamed one has none, and goes chunked. */
static int
lengthKeep(CorRequest* r, const CorClientResponse* res)
{
    char len[24];

    if (res->body == NULL || r->head
        || corClientHeader(res, "content-length") != NULL) {
        return 0;
    }
    snprintf(len, sizeof(len), "%zu", res->bodyLen);
    return corResponseHeader(r, "Content-Length", len);
}

/* A HEAD whose upstream said no length: its answer must say none either
 * (an empty response would say "Content-Length: 0"), so it goes as a
 * stream of no piece. */
static bool
lengthUnknownHead(const CorRequest* r, const CorClientResponse* res)
{
    return r->head && corClientHeader(res, "content-length") == NULL;
}

/* The head is in: pass the answer on. A body that comes whole with its
 * first read (a small one) goes as one response; a longer one is
 * streamed. Never inlined: its buffer must not be on the stack while the
 * request waits for the upstream (what a wait touches stays resident). */
static __attribute__((noinline)) void
answerPass(CorRequest* r, const ForwardGroup* g, CorClientStream* x,
           CorClientResponse* res)
{
    char first[FORWARD_FIRST_BYTES];
    const char* type;
    char* buf;
    ssize_t n = 0;

    if (corForwardResponseHeaders(r, res, &type) < 0
        || lengthKeep(r, res) < 0) {
        corRespondStatic(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    if (!corClientDone(x)) {
        n = corClientRead(x, first, sizeof(first), g->readTimeoutMs);
    }
    if (n < 0) {
        if (n != -ECANCELED) {
            corLog(COR_LOG_ERROR, "forward %s: %s", g->name, res->error);
        }
        failRespond(r, (int)n);
        return;
    }
    /* An answer with trailers goes as a stream, which has a place for
     * them over HTTP/1.1 too (the last chunk). */
    if (corClientDone(x) && !lengthUnknownHead(r, res)
        && res->trailerCount == 0) {
        corRespond(r, res->status, type, first, (size_t)n);
        return;
    }
    if (corResponseStreamStart(r, res->status, type) != 0) {
        return;
    }
    if (corClientDone(x)) {
        if (n > 0 && corResponseStreamWrite(r, first, (size_t)n) < 0) {
            corResponseStreamAbort(r);
        } else {
            streamEnd(r, res);
        }
        return;
    }
    buf = malloc(FORWARD_READ_BYTES);
    if (buf == NULL || corResponseStreamWrite(r, first, (size_t)n) < 0) {
        corResponseStreamAbort(r);
    } else {
        bodyStream(r, g, x, res, buf);
    }
    free(buf);
}

static void
forwardServe(CorRequest* r)
{
    ForwardGroup* g = corRequestHandlerArg(r);
    CorClientRequest q = {
        .body = r->body,
        .bodyLen = r->bodyLen,
        .connectTimeoutMs = g->connectTimeoutMs,
        .firstByteTimeoutMs = g->readTimeoutMs,
        .http2 = g->http2,
        /* Over HTTP/2 the body goes up as it comes (a gRPC stream),
         * while the answer comes down; with request_buffering off a body
         * that comes while the handler runs (an HTTP/2 or an HTTP/1.1
         * client's) goes as it comes over HTTP/1.1 too, before the
         * answer, with the length its client said (chunked when none).
         * One the core gathered whole (past limits.body_memory, in a
         * file) is read out of it a piece at a time, never all in
         * memory. One that came whole in memory (or none, or cor://) goes
         * with its length. */
        .bodyFrom = g->http2 || r->bodyIn != NULL ? r : NULL,
    };
    CorClientResponse res;
    CorClientStream* x = NULL;
    ForwardServer* s = NULL;
    CorHeader* headers;
    const char* method = corForwardMethod(r);
    int rc;

    if (method == NULL
        || corForwardRequestHeaders(r, g, &headers, &q.headerCount) < 0) {
        corRespondStatic(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    q.method = method;
    q.headers = headers;
    memset(&res, 0, sizeof(res));
    rc = upstreamOpen(r, g, &q, &res, &x, &s);
    if (rc < 0) {
        failRespond(r, rc);
    } else if (res.status == 101) {
        if (corForwardUpgradePass(r, g, x, &res, s)) {
            s = NULL; /* the splice's, to its end */
        }
    } else {
        answerPass(r, g, x, &res);
    }
    corClientClose(x);
    corForwardServerDone(s);
    corClientResponseFree(&res);
}

/* ---- Configuration ------------------------------------------------------- */

/* Whether s is scheme://host[:port][/], the form a server takes here (a
 * path would be a rewrite, which this module does not do), of a scheme
 * the client takes: http, https, or one a module loaded before this one
 * registered (cor://). */
static bool
serverUrlValid(const char* s)
{
    CorUrl u;
    char why[256];
    const CorScheme* scheme;

    if (corUrlParse(s, &u, why, sizeof(why)) != 0 || u.user != NULL
        || u.targetLen != 1 || strchr(s, '#') != NULL) {
        return false;
    }
    scheme = corSchemeFind(u.scheme);
    return scheme != NULL && scheme->fetch != NULL;
}

/* The servers of one group. Returns 0 or -1 after a module error. */
static int
serversRead(CorModule* m, const CorConf* entry, ForwardGroup* g)
{
    const CorConf* list = corConfSeq(entry, "servers", corModuleErrors(m));
    int rc = 0;

    if (corConfCount(list) == 0) {
        corModuleError(m, list != NULL ? list : entry,
                       "servers: at least one http://, https:// (or "
                       "cor://) URL");
        return -1;
    }
    g->servers = calloc(corConfCount(list), sizeof(ForwardServer));
    if (g->servers == NULL) {
        return -1;
    }
    /* Each bad one is reported, not only the first. */
    for (size_t i = 0; i < corConfCount(list); i++) {
        const CorConf* node = corConfAt(list, i);
        const char* url = corConfText(node);
        ForwardServer* server = &g->servers[g->serverCount];
        char why[256];
        size_t len;

        server->group = g;
        if (url == NULL || !serverUrlValid(url)) {
            corModuleError(m, node,
                           "servers[%zu]: expected "
                           "http[s]://host[:port], or a scheme of a module "
                           "loaded before forward (cor://), got '%s'",
                           i, url != NULL ? url : "(not a string)");
            rc = -1;
            continue;
        }
        len = strlen(url);
        server->url = strndup(url, url[len - 1] == '/' ? len - 1 : len);
        if (server->url == NULL) {
            return -1;
        }
        server->target = corClientTargetMake(server->url, why, sizeof(why));
        if (server->target == NULL) {
            corModuleError(m, node, "servers[%zu]: %s", i, why);
            free(server->url);
            server->url = NULL;
            return -1;
        }
        g->serverCount++;
    }
    return rc;
}

/* The Host setting of a group. */
static int
hostRead(CorModule* m, const CorConf* entry, ForwardGroup* g)
{
    const char* host = corConfString(entry, "host", "upstream",
                                     corModuleErrors(m));

    if (strcmp(host, "upstream") == 0) {
        g->hostMode = FORWARD_HOST_UPSTREAM;
    } else if (strcmp(host, "keep") == 0) {
        g->hostMode = FORWARD_HOST_KEEP;
    } else if (host[0] == '\0' || strpbrk(host, " \t\r\n/@") != NULL) {
        corModuleError(m, corConfGet(entry, "host"),
                       "host: expected keep, "
                       "upstream or a host name, got '%s'",
                       host);
        return -1;
    } else {
        g->hostMode = FORWARD_HOST_NAME;
        g->host = strdup(host);
        return g->host != NULL ? 0 : -1;
    }
    return 0;
}

/* The name of a group: present, and not another group's. Returns 0 or
 * -1 after a module error. */
static int
nameRead(CorModule* m, const CorConf* entry, unsigned index)
{
    const char* name = corConfString(entry, "name", NULL, corModuleErrors(m));

    if (name == NULL || name[0] == '\0') {
        corModuleError(m, entry, "upstreams[%u]: a name is needed", index);
        return -1;
    }
    for (unsigned i = 0; i < index; i++) {
        if (groups[i].name != NULL && strcmp(groups[i].name, name) == 0) {
            corModuleError(m, corConfGet(entry, "name"),
                           "upstreams[%u]: "
                           "the name '%s' is taken already",
                           index, name);
            return -1;
        }
    }
    groups[index].name = strdup(name);
    return groups[index].name != NULL ? 0 : -1;
}

/*
 * One group of the upstreams list, registered as a handler. Every part is
 * read whatever an earlier one said, so that cor -t reports each mistake
 * of the group at once. Returns 0 or -1 after a module error.
 */
static int
groupRead(CorModule* m, const CorConf* entry, unsigned index)
{
    static const char* const keys[] = { "name",
                                        "servers",
                                        "connect_timeout",
                                        "read_timeout",
                                        "fail_timeout",
                                        "host",
                                        "underscores_in_headers",
                                        "http2",
                                        "balance",
                                        "hash",
                                        "health",
                                        "request_buffering",
                                        NULL };
    CorConfErrors* e = corModuleErrors(m);
    ForwardGroup* g = &groups[index];
    unsigned before = e->count;
    char where[48];
    bool failed;

    failed = nameRead(m, entry, index) < 0;
    g->connectTimeoutMs = (int)corConfDurationMs(entry, "connect_timeout", 5000,
                                                 1, 3600000, e);
    g->readTimeoutMs = (int)corConfDurationMs(entry, "read_timeout", 60000, 1,
                                              24 * 3600000, e);
    g->failTimeoutMs = corConfDurationMs(entry, "fail_timeout", 10000, 0,
                                         24 * 3600000, e);
    g->underscores = corConfBool(entry, "underscores_in_headers", false, e);
    g->http2 = corConfBool(entry, "http2", false, e);
    g->buffering = corConfBool(entry, "request_buffering", true, e);
    failed |= serversRead(m, entry, g) < 0;
    failed |= corForwardBalanceRead(m, entry, g) < 0;
    failed |= corForwardHealthRead(m, entry, g) < 0;
    failed |= hostRead(m, entry, g) < 0;
    snprintf(where, sizeof(where), "upstreams[%u]", index);
    corConfUnknownKeys(entry, where, keys, e);
    if (failed || e->count != before) {
        return -1;
    }
    return corHandlerAdd(m,
                         &(CorHandler){ .name = g->name,
                                        .serve = forwardServe,
                                        .run = COR_RUN_COROUTINE,
                                        .streamBody = g->http2 || !g->buffering,
                                        .arg = g });
}

/* One gauge of every server of every group: whether the balancer takes
 * it now (its health checks pass and it does not rest after a failed
 * connect), or the requests on it. */
static void
gaugeEmit(CorMetricsOut* out, const char* name, const char* help, bool inFlight)
{
    uint64_t now = corEvClockMs();

    corMetricsPrintf(out, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    for (unsigned i = 0; i < groupCount; i++) {
        for (unsigned j = 0; j < groups[i].serverCount; j++) {
            ForwardServer* s = &groups[i].servers[j];

            corMetricsPrintf(out, "%s{group=\"%s\",server=\"%s\"} %u\n", name,
                             groups[i].name, s->url,
                             inFlight ? atomic_load(&s->inFlight)
                                      : corForwardServerUsable(s, now));
        }
    }
}

static void
metricsEmit(CorMetricsOut* out, void* arg)
{
    (void)arg;
    gaugeEmit(out, "cor_forward_server_up",
              "Whether forward takes the "
              "server (1) or skips it as down (0).",
              false);
    gaugeEmit(out, "cor_forward_server_in_flight",
              "Requests forward has on "
              "the server now.",
              true);
}

/* The probers run on loop 0, one a checked server, for the generation. */
static int
forwardLoopInit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    (void)loop;
    for (unsigned i = 0; index == 0 && i < groupCount; i++) {
        if (corForwardHealthStart(&groups[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

static void
forwardExit(CorModule* m)
{
    (void)m;
    for (unsigned i = 0; i < groupCount; i++) {
        for (unsigned j = 0; j < groups[i].serverCount; j++) {
            free(groups[i].servers[j].url);
            corClientTargetFree(groups[i].servers[j].target);
        }
        free(groups[i].servers);
        free(groups[i].name);
        free(groups[i].host);
        free(groups[i].hashHeader);
        free(groups[i].ring);
        free(groups[i].health.path);
    }
    free(groups);
    groups = NULL;
    groupCount = 0;
}

static int
forwardInit(CorModule* m, const CorConf* conf)
{
    const CorConf* list = corConfSeq(conf, "upstreams", corModuleErrors(m));
    size_t count = corConfCount(list);
    int rc = 0;

    if (count == 0) {
        corModuleError(m, list != NULL ? list : conf,
                       "upstreams: at least one group (name, servers)");
        return -1;
    }
    groups = calloc(count, sizeof(ForwardGroup));
    if (groups == NULL) {
        corModuleError(m, conf, "no memory");
        return -1;
    }
    /* Every group is checked, one with errors or not. */
    for (size_t i = 0; i < count; i++) {
        groupCount++;
        if (corConfKind(corConfAt(list, i)) != COR_CONF_MAP) {
            corModuleError(m, corConfAt(list, i),
                           "upstreams[%zu]: expected "
                           "a mapping (name, servers...)",
                           i);
            rc = -1;
        } else if (groupRead(m, corConfAt(list, i), (unsigned)i) < 0) {
            rc = -1;
        }
    }
    if (rc == 0 && corMetricsSourceAdd(m, metricsEmit, NULL) < 0) {
        return -1;
    }
    return rc;
}

COR_MODULE(forward, .init = forwardInit, .loopInit = forwardLoopInit,
           .exit = forwardExit);
