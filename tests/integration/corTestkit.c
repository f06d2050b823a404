/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A module for the integration tests: handlers that echo, send many bytes,
 * block the loop, never answer, outlive their deadline, resolve a name,
 * read their body as it comes, or report what the core told them; and a
 * protocol of one line per connection that cancels the request of a
 * client that leaves.
 */
#include "cor.h"

/* The HTTP client's handlers (corTestkitClient.c), the notifications'
 * (corTestkitNotify.c), and a body read as it comes (corTestkitBody.c). */
void corTestkitClientAdd(CorModule* m, int* rc);
void corTestkitCondWaitAdd(CorModule* m, int* rc);
void corTestkitNotifyAdd(CorModule* m, int* rc);
void corTestkitStatusAdd(CorModule* m, int* rc);
void corTestkitBodyAdd(CorModule* m, int* rc);
void corTestkitSeenAdd(CorModule* m, int* rc);
void corTestkitCrashAdd(CorModule* m, int* rc);
void corTestkitGatedAdd(CorModule* m, int* rc);
void corTestkitPgAdd(CorModule* m, int* rc);
void corTestkitRedisAdd(CorModule* m, int* rc);

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

static void
echoServe(CorRequest* r)
{
    corRespond(r, 200, "application/octet-stream", r->body, r->bodyLen);
}

/* ?n= bytes of 'x' (1024); ?trailer=V adds the trailer x-trailer: V,
 * sent after the body (a protocol's trailers, seen by its client). */
static void
bytesServe(CorRequest* r)
{
    const char* n = corRequestQuery(r, "n");
    const char* trailer = corRequestQuery(r, "trailer");
    size_t len = n ? strtoul(n, NULL, 10) : 1024;
    char* body = corRequestAlloc(r, len ? len : 1);

    if (body == NULL) {
        corRespond(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    if (trailer != NULL) {
        corResponseTrailer(r, "x-trailer", trailer);
    }
    memset(body, 'x', len);
    corRespondStatic(r, 200, "application/octet-stream", body, len);
}

/* Blocks its thread: the stall warning's case when it runs inline. */
static void
blockServe(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");

    usleep((useconds_t)(ms ? atoi(ms) : 200) * 1000);
    corRespond(r, 200, "text/plain", "blocked\n", 8);
}

/* Returns without answering: the core must answer for it. */
static void
neverServe(CorRequest* r)
{
    (void)r;
}

/* Sends the file ?path= names (a test's own file), with sendfile. */
static void
fileServe(CorRequest* r)
{
    const char* path = corRequestQuery(r, "path");
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;

    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        corRespond(r, 404, "text/plain", "no file\n", 8);
        return;
    }
    corRespondFile(r, 200, "application/octet-stream", fd, 0,
                   (size_t)st.st_size);
}

/* Streams ?n= pieces "piece K\n", 5 ms apart, from the thread it runs on
 * (a worker) or, with ?later=1, from a thread of its own after it
 * returned. */
typedef struct {
    CorRequest* r;
    int pieces;
    bool cut; /* aborted after its pieces */
} StreamJob;

static void*
streamPieces(void* arg)
{
    StreamJob* job = arg;
    char piece[32];

    for (int i = 0; i < job->pieces; i++) {
        int n = snprintf(piece, sizeof(piece), "piece %d\n", i);

        if (corResponseStreamWrite(job->r, piece, (size_t)n) != 0) {
            break;
        }
        usleep(5000);
    }
    if (job->cut) {
        corResponseStreamAbort(job->r);
    } else {
        corResponseStreamEnd(job->r);
    }
    free(job);
    return NULL;
}

static void
streamServe(CorRequest* r)
{
    const char* n = corRequestQuery(r, "n");
    const char* later = corRequestQuery(r, "later");
    StreamJob* job = malloc(sizeof(*job));
    pthread_t thread;

    if (job == NULL || corResponseStreamStart(r, 200, "text/plain") != 0) {
        free(job);
        return;
    }
    job->r = r;
    job->pieces = n ? atoi(n) : 5;
    job->cut = corRequestQuery(r, "cut") != NULL;
    if (later != NULL
        && pthread_create(&thread, NULL, streamPieces, job) == 0) {
        pthread_detach(thread);
        return;
    }
    streamPieces(job);
}

/* The post-response phase: after the answer is out, waits ?ms= (as a
 * notification to a slow endpoint would) and appends "PATH done" to the
 * file ?log= names, or "PATH cancelled" when its wait was cancelled. */
static void
notifyServe(CorRequest* r)
{
    corRespond(r, 200, "text/plain", "accepted\n", 9);
}

static void
notifyFinish(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");
    const char* log = corRequestQuery(r, "log");
    short revents;
    FILE* f;

    int rc = corRestWaitFd(-1, 0, ms ? atoi(ms) : 50, &revents);

    f = log ? fopen(log, "a") : NULL;
    if (f != NULL) {
        fprintf(f, "%.*s %s\n", (int)r->pathLen, r->path,
                rc == 0 ? "done" : "cancelled");
        fclose(f);
    }
}

/* Waits ?ms= (a coroutine; a worker with ?worker=1), then answers with
 * every byte of its input: a request must own what it reads, whatever
 * became of its connection meanwhile. */
static bool
waitOnLoop(const CorRequest* r)
{
    return corRequestQuery((CorRequest*)r, "worker") == NULL;
}

static void
waitEchoServe(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");
    size_t len = r->methodLen + r->pathLen + r->bodyLen + 8;
    short revents;
    char* out;
    size_t n;

    corRestWaitFd(-1, 0, ms ? atoi(ms) : 100, &revents);
    for (unsigned i = 0; i < r->headerCount; i++) {
        len += r->headers[i].nameLen + r->headers[i].valueLen + 4;
    }
    out = corRequestAlloc(r, len);
    if (out == NULL) {
        corRespond(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    n = (size_t)sprintf(out, "%.*s %.*s\n", (int)r->methodLen, r->method,
                        (int)r->pathLen, r->path);
    for (unsigned i = 0; i < r->headerCount; i++) {
        n += (size_t)sprintf(out + n, "%.*s: %.*s\n",
                             (int)r->headers[i].nameLen, r->headers[i].name,
                             (int)r->headers[i].valueLen, r->headers[i].value);
    }
    memcpy(out + n, r->body, r->bodyLen);
    corRespondStatic(r, 200, "text/plain", out, n + r->bodyLen);
}

/* Waits ?ms= (10 s by default) past its own deadline of 300 ms. */
static void
deadlineServe(CorRequest* r)
{
    const char* ms = corRequestQuery(r, "ms");
    short revents;

    if (corRestWaitFd(-1, 0, ms ? atoi(ms) : 10000, &revents) < 0) {
        corRespondf(r, 503, "text/plain", "wait failed: %s\n", strerror(errno));
        return;
    }
    corRespond(r, 200, "text/plain", "waited\n", 7);
}

/* Inline: whether corRequestCurrent() is this request, and with ?wait=1
 * what a short wait returns (an inline handler that waits polls: 0). */
static void
currentServe(CorRequest* r)
{
    const char* wait = corRequestQuery(r, "wait");
    short revents;
    int rc = 0;

    if (wait != NULL) {
        rc = corRestWaitFd(-1, 0, 10, &revents);
    }
    corRespondf(r, 200, "text/plain", "current %s wait %d\n",
                corRequestCurrent() == r ? "yes" : "no", rc);
}

/* What corResponseHeader makes of a good header, a value that would
 * inject one, and a name that is not a token. */
static void
headerServe(CorRequest* r)
{
    int ok = corResponseHeader(r, "X-Ok", "fine");
    int injected = corResponseHeader(r, "X-Bad", "a\r\nSet-Cookie: evil=1");
    int badName = corResponseHeader(r, "Bad Name", "v");

    corRespondf(r, 200, "text/plain", "%d %d %d\n", ok, injected, badName);
}

/* Resolves ?name= (within ?ms=, else the configured timeout) and answers
 * with the addresses, one a line, or 502 and why. A coroutine where it
 * can, else a worker. */
static void
resolveServe(CorRequest* r)
{
    const char* name = corRequestQuery(r, "name");
    const char* ms = corRequestQuery(r, "ms");
    char why[256];
    CorAddrs out;
    char* text;
    size_t n = 0;

    if (name == NULL) {
        corRespond(r, 400, "text/plain", "?name= is missing\n", 18);
        return;
    }
    if (corResolve(name, ms ? atoi(ms) : 0, &out, why, sizeof(why)) != 0) {
        corRespondf(r, 502, "text/plain", "%s\n", why);
        return;
    }
    text = corRequestAlloc(r, out.count * (INET6_ADDRSTRLEN + 1) + 1);
    if (text == NULL) {
        corRespond(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    for (unsigned i = 0; i < out.count; i++) {
        const struct sockaddr_storage* ss = &out.addrs[i];
        const void* addr =
            ss->ss_family == AF_INET
                ? (const void*)&((const struct sockaddr_in*)ss)->sin_addr
                : (const void*)&((const struct sockaddr_in6*)ss)->sin6_addr;

        inet_ntop(ss->ss_family, addr, text + n, INET6_ADDRSTRLEN);
        n += strlen(text + n);
        text[n++] = '\n';
    }
    corRespondStatic(r, 200, "text/plain", text, n);
}

/* ---- A client: connections out ------------------------------------------ */

typedef struct {
    char head[4096];
    size_t headLen;
    char statusLine[256];
    char body[256]; /* its first line */
    bool closes;    /* the answer said Connection: close */
} FetchAnswer;

static int
queryInt(CorRequest* r, const char* key, int def)
{
    const char* v = corRequestQuery(r, key);

    return v != NULL ? atoi(v) : def;
}

/* Read one answer: the head, then the body by Content-Length. Returns 0
 * or -errno (-EPROTO: not HTTP, or no end to it). */
static int
fetchRead(CorConn* c, FetchAnswer* a, int timeoutMs)
{
    char* end = NULL;
    const char* cl;
    size_t bodyLen = 0;
    size_t have;
    size_t want;
    ssize_t n;

    while (end == NULL) {
        if (a->headLen == sizeof(a->head) - 1) {
            return -EPROTO;
        }
        n = corConnRead(c, a->head + a->headLen,
                        sizeof(a->head) - 1 - a->headLen, timeoutMs);
        if (n <= 0) {
            return n == 0 ? -ECONNRESET : (int)n;
        }
        a->headLen += (size_t)n;
        a->head[a->headLen] = '\0';
        end = strstr(a->head, "\r\n\r\n");
    }
    *end = '\0';
    snprintf(a->statusLine, sizeof(a->statusLine), "%.*s",
             (int)strcspn(a->head, "\r\n"), a->head);
    cl = strcasestr(a->head, "\r\nContent-Length:");
    if (cl != NULL) {
        bodyLen = strtoul(cl + 17, NULL, 10);
    }
    a->closes = strcasestr(a->head, "\r\nConnection: close") != NULL;
    have = a->headLen - (size_t)(end + 4 - a->head);
    memmove(a->body, end + 4,
            have < sizeof(a->body) ? have : sizeof(a->body) - 1);
    want = bodyLen;
    while (have < want) {
        char chunk[1024];

        n = corConnRead(c, chunk, sizeof(chunk), timeoutMs);
        if (n <= 0) {
            return n == 0 ? -ECONNRESET : (int)n;
        }
        if (have < sizeof(a->body) - 1) {
            size_t room = sizeof(a->body) - 1 - have;

            memcpy(a->body + have, chunk, (size_t)n < room ? (size_t)n : room);
        }
        have += (size_t)n;
    }
    a->body[bodyLen < sizeof(a->body) - 1 ? bodyLen : sizeof(a->body) - 1] =
        '\0';
    a->body[strcspn(a->body, "\r\n")] = '\0';
    return 0;
}

static int
fetchStatus(int err)
{
    return err == -ECANCELED ? 503 : err == -ETIMEDOUT ? 504 : 502;
}

/*
 * GET ?path= (/hello) from ?host=&port= (?tls=1, ?sni=) over a connection
 * out, keep-alive, within ?connect_ms= and ?read_ms= (5000), then releases
 * it to the pool (closes it with ?close=1): answers "STATUS-LINE
 * reused=0|1 body=FIRST-LINE" (and " tls=full|resumed" over TLS), or the
 * failure (503 cancelled, 504 timed out, 502 anything else) and why. A
 * coroutine; a worker with ?worker=1.
 */
static void
fetchServe(CorRequest* r)
{
    const char* host = corRequestQuery(r, "host");
    const char* path = corRequestQuery(r, "path");
    int readMs = queryInt(r, "read_ms", 5000);
    CorConnTarget target = {
        .host = host ? host : "127.0.0.1",
        .port = (unsigned)queryInt(r, "port", 0),
        .tls = queryInt(r, "tls", 0) != 0,
        .serverName = corRequestQuery(r, "sni"),
        .connectTimeoutMs = queryInt(r, "connect_ms", 0),
    };
    FetchAnswer* a = corRequestAlloc(r, sizeof(*a));
    char req[512];
    char why[256];
    CorConn* c;
    bool reused;
    bool resumed;
    int err = 0;
    int len;

    if (a == NULL) {
        corRespond(r, 500, "text/plain", "no memory\n", 10);
        return;
    }
    memset(a, 0, sizeof(*a));
    c = corConnOpen(&target, &err, why, sizeof(why));
    if (c == NULL) {
        corRespondf(r, fetchStatus(err), "text/plain", "%s\n", why);
        return;
    }
    reused = corConnReused(c);
    len = snprintf(req, sizeof(req),
                   "GET %s HTTP/1.1\r\nHost: %s\r\n"
                   "Connection: keep-alive\r\n\r\n",
                   path ? path : "/hello", corConnPeer(c));
    err = corConnWriteAll(c, req, (size_t)len, readMs);
    if (err == 0) {
        err = fetchRead(c, a, readMs);
    }
    if (err != 0) {
        corRespondf(r, fetchStatus(err), "text/plain", "%s %s: %s\n",
                    err == -ETIMEDOUT ? "read from" : "exchange with",
                    corConnPeer(c), strerror(-err));
        corConnClose(c);
        return;
    }
    resumed = corTransportTlsResumed(corConnTransport(c));
    if (a->closes || queryInt(r, "close", 0) != 0) {
        corConnClose(c);
    } else {
        corConnRelease(c);
    }
    corRespondf(r, 200, "text/plain", "%s reused=%d body=%s%s\n", a->statusLine,
                reused, a->body,
                !target.tls ? ""
                : resumed   ? " tls=resumed"
                            : " tls=full");
}

/* ---- A line protocol ------------------------------------------------------
 */

/*
 * One request per connection: the client sends a target and a newline
 * ("/sleep?ms=5000\n") and gets "STATUS BODY" and the close. A client that
 * leaves while its request is served has it cancelled (corRequestCancel),
 * as every protocol must. Loop 0 alone serves it: configure one loop.
 */
typedef struct LineConn {
    CorRequest r;
    CorEvIo io;
    struct LineConn* prev;
    struct LineConn* next;
    char in[512];
    size_t len;
    bool serving;
    bool watched; /* io is started */
    bool gone;    /* the client left */
} LineConn;

static CorEvLoop* lineLoop;
static CorEvIo lineAccept;
static LineConn* lineConns;
static atomic_uint lineConnCount;

static void
lineUnwatch(LineConn* lc)
{
    if (lc->watched) {
        corEvIoStop(lineLoop, &lc->io);
        lc->watched = false;
    }
}

static void
lineClose(LineConn* lc)
{
    lineUnwatch(lc);
    close(lc->io.fd);
    if (lc->prev != NULL) {
        lc->prev->next = lc->next;
    } else {
        lineConns = lc->next;
    }
    if (lc->next != NULL) {
        lc->next->prev = lc->prev;
    }
    atomic_fetch_sub(&lineConnCount, 1);
    free(lc);
}

static void
lineDone(CorRequest* r)
{
    LineConn* lc = corContainerOf(r, LineConn, r);
    char head[32];
    int n = snprintf(head, sizeof(head), "%d ", r->status);

    if (!lc->gone && write(lc->io.fd, head, (size_t)n) == n
        && r->responseLen > 0
        && write(lc->io.fd, r->responseBody, r->responseLen) < 0) {
        /* The client left: nobody to tell. */
    }
    corRequestSent(r);
}

static void
lineRelease(CorRequest* r)
{
    lineClose(corContainerOf(r, LineConn, r));
}

static const CorProtocolOps lineOps = { .done = lineDone,
                                        .release = lineRelease };

static void
lineServe(LineConn* lc, char* target)
{
    char* query = strchr(target, '?');

    lc->r.method = "GET";
    lc->r.methodLen = 3;
    lc->r.path = target;
    lc->r.pathLen = query ? (size_t)(query - target) : strlen(target);
    if (query != NULL) {
        lc->r.query = query + 1;
        lc->r.queryLen = strlen(query + 1);
    }
    lc->serving = true;
    corRequestServe(&lc->r, &lineOps, lc); /* lc may be gone after */
}

static void
onLineIo(CorEvIo* io, unsigned events)
{
    LineConn* lc = corContainerOf(io, LineConn, io);
    char* end;
    ssize_t n;

    (void)events;
    if (lc->serving) {
        char byte;

        /* Bytes or an end while the request is served: an end is the
         * client gone. Either way nothing more is watched. */
        n = recv(io->fd, &byte, 1, MSG_PEEK);
        lineUnwatch(lc);
        if (n <= 0) {
            lc->gone = true;
            corRequestCancel(&lc->r);
        }
        return;
    }
    n = read(io->fd, lc->in + lc->len, sizeof(lc->in) - 1 - lc->len);
    if (n <= 0) {
        if (n == 0 || errno != EAGAIN) {
            lineClose(lc);
        }
        return;
    }
    lc->len += (size_t)n;
    lc->in[lc->len] = '\0';
    end = strchr(lc->in, '\n');
    if (end != NULL) {
        *end = '\0';
        lineServe(lc, lc->in);
    } else if (lc->len == sizeof(lc->in) - 1) {
        lineClose(lc);
    }
}

static void
onLineAccept(CorEvIo* io, unsigned events)
{
    int fd;

    (void)events;
    while ((fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC))
           >= 0) {
        LineConn* lc = calloc(1, sizeof(*lc));

        if (lc == NULL
            || corEvIoStart(lineLoop, &lc->io, fd, EPOLLIN | EPOLLRDHUP,
                            onLineIo)
                   != 0) {
            free(lc);
            close(fd);
            continue;
        }
        lc->watched = true;
        lc->next = lineConns;
        if (lineConns != NULL) {
            lineConns->prev = lc;
        }
        lineConns = lc;
        atomic_fetch_add(&lineConnCount, 1);
    }
}

static int
lineStart(CorModule* m, CorEvLoop* loop, unsigned index,
          CorListener* const* listeners, unsigned count)
{
    (void)m;
    if (index != 0 || count == 0) {
        return 0;
    }
    lineLoop = loop;
    return corEvIoStart(loop, &lineAccept, corListenerFd(listeners[0], 0),
                        EPOLLIN, onLineAccept);
}

static void
lineDrain(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    if (index == 0 && lineLoop != NULL) {
        corEvIoStop(loop, &lineAccept);
    }
}

/* What is left after the loop stopped is idle: every request ended. */
static void
lineStop(CorModule* m, CorEvLoop* loop, unsigned index)
{
    lineDrain(m, loop, index);
    while (index == 0 && lineConns != NULL) {
        lineClose(lineConns);
    }
}

static unsigned
lineConnections(CorModule* m, unsigned index)
{
    (void)m;
    return index == 0 ? atomic_load(&lineConnCount) : 0;
}

/* ---- Upgrades: a raw echo on the connection a handler took ------------ */

/* Echo every byte until the client's end (or a stop's ECANCELED). */
static void
upgradeEchoSession(CorUpgraded* u, void* arg)
{
    char buf[4096];
    ssize_t n;

    (void)arg;
    while ((n = corUpgradedRead(u, buf, sizeof(buf), 30000)) > 0
           && corUpgradedWriteAll(u, buf, (size_t)n, 10000) == 0) {
    }
    corUpgradedClose(u);
}

static void
upgradeServe(CorRequest* r)
{
    int rc = corRequestUpgrade(r, "echo", upgradeEchoSession, NULL);

    if (rc != 0) {
        corRespondf(r, 400, "text/plain", "no upgrade: %d\n", rc);
    }
}

/* ---- Background tasks and shared downloads ------------------------------
 *
 * With `ticker: true` in the module's entry, loop 0's loopInit spawns a
 * task that ticks every 100 ms (/taskticks counts them) and one that
 * sleeps for an hour; each logs "task NAME cancelled" when a stop ends it.
 * /taskspawn spawns such a sleeper from a handler; /compute?ms= computes
 * that long on its loop, yielding (corTaskSchedule) every millisecond
 * unless ?yield=0. */
static bool tickerOn;
static atomic_uint taskTicks;
static int initSpawnRc;

static void
tickerTask(void* arg)
{
    (void)arg;
    while (corTaskScheduleAfter(100) == 0) {
        atomic_fetch_add(&taskTicks, 1);
    }
    corLog(COR_LOG_INFO, "task ticker cancelled after %u ticks",
           atomic_load(&taskTicks));
}

static void
sleeperTask(void* arg)
{
    int rc;

    while ((rc = corTaskScheduleAfter(3600 * 1000)) == 0) {
    }
    corLog(COR_LOG_INFO, "task %s cancelled (%d)", (const char*)arg, rc);
}

static int
tasksLoopInit(CorModule* m, CorEvLoop* loop, unsigned index)
{
    (void)m;
    (void)loop;
    if (!tickerOn || index != 0) {
        return 0;
    }
    if (corTaskSpawn(tickerTask, NULL, "ticker") != 0
        || corTaskSpawn(sleeperTask, "sleeper", "sleeper") != 0) {
        return -1;
    }
    return 0;
}

static void
taskTicksServe(CorRequest* r)
{
    corRespondf(r, 200, "text/plain", "%u ticks, init spawn %d\n",
                atomic_load(&taskTicks), initSpawnRc);
}

static void
taskSpawnServe(CorRequest* r)
{
    int rc = corTaskSpawn(sleeperTask, "spawned", "spawned");

    corRespondf(r, rc == 0 ? 200 : 503, "text/plain", "spawn %d\n", rc);
}

static void
computeServe(CorRequest* r)
{
    int ms = queryInt(r, "ms", 1000);
    int yield = queryInt(r, "yield", 1);
    uint64_t end = corEvClockMs() + (uint64_t)ms;
    unsigned yields = 0;

    while (corEvClockMs() < end) {
        uint64_t step = corEvClockMs() + 1;

        while (corEvClockMs() < step) {
        }
        if (yield && corTaskSchedule() != 0) {
            break;
        }
        yields += yield != 0;
    }
    corRespondf(r, 200, "text/plain", "computed, %u yields\n", yields);
}

/* /shared?key=&ms=&ttl=&fail=1&self=1 (a coroutine; /sharedw the same
 * on a worker): corShared of key, whose fetch waits ms, counts itself
 * (/sharedcount) and answers "KEY #N" (N: which fetch it was), or fails
 * with EIO; with self=1 the fetch asks for its own key first, and the
 * answer says what that got ("inner -35": EDEADLK). */
static atomic_uint sharedFetches;

typedef struct {
    int ms;
    bool fail;
    bool self;
    int innerRc;
} SharedJob;

static int
sharedFetch(const char* key, void* arg, void** dataP, size_t* lenP)
{
    SharedJob* job = arg;
    unsigned n = atomic_fetch_add(&sharedFetches, 1) + 1;
    short revents;
    char* data;

    if (job->self) {
        CorShared* inner = NULL;

        job->innerRc = corShared(key, sharedFetch, arg, 0, &inner);
        corSharedRelease(inner);
    }
    if (job->ms > 0 && corRestWaitFd(-1, 0, job->ms, &revents) < 0) {
        return -errno;
    }
    if (job->fail) {
        return -EIO;
    }
    data = malloc(strlen(key) + 16);
    if (data == NULL) {
        return -ENOMEM;
    }
    *lenP = (size_t)sprintf(data, "%s #%u", key, n);
    *dataP = data;
    return 0;
}

static void
sharedServe(CorRequest* r)
{
    const char* key = corRequestQuery(r, "key");
    SharedJob job = { .ms = queryInt(r, "ms", 0),
                      .fail = queryInt(r, "fail", 0) != 0,
                      .self = queryInt(r, "self", 0) != 0,
                      .innerRc = 1 };
    CorShared* s;
    int rc = corShared(key != NULL ? key : "key", sharedFetch, &job,
                       queryInt(r, "ttl", 0), &s);

    if (rc != 0) {
        corRespondf(r, 502, "text/plain", "error %d\n", rc);
        return;
    }
    corRespondf(r, 200, "text/plain", "%.*s inner %d\n", (int)corSharedLen(s),
                (const char*)corSharedData(s), job.innerRc);
    corSharedRelease(s);
}

static void
sharedCountServe(CorRequest* r)
{
    corRespondf(r, 200, "text/plain", "%u\n", atomic_load(&sharedFetches));
}

static int
sharedInit(CorModule* m)
{
    if (corHandlerAdd(m, &(CorHandler){ .name = "shared",
                                        .serve = sharedServe,
                                        .run = COR_RUN_COROUTINE })
            != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "sharedw",
                                           .serve = sharedServe,
                                           .run = COR_RUN_WORKER })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "sharedcount",
                                           .serve = sharedCountServe,
                                           .run = COR_RUN_INLINE })
               != 0) {
        return -1;
    }
    return 0;
}

static int
tasksInit(CorModule* m, const CorConf* conf)
{
    tickerOn = corConfBool(conf, "ticker", false, corModuleErrors(m));
    /* Refused (and logged): no loop exists yet. */
    if (tickerOn) {
        initSpawnRc = corTaskSpawn(tickerTask, NULL, "early");
    }
    if (corHandlerAdd(m, &(CorHandler){ .name = "taskticks",
                                        .serve = taskTicksServe,
                                        .run = COR_RUN_INLINE })
            != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "taskspawn",
                                           .serve = taskSpawnServe,
                                           .run = COR_RUN_INLINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "compute",
                                           .serve = computeServe,
                                           .run = COR_RUN_COROUTINE })
               != 0) {
        return -1;
    }
    return sharedInit(m);
}

static int
testkitInit(CorModule* m, const CorConf* conf)
{
    /* A slow start, for what the master does while a generation starts. */
    uint64_t delayMs = corConfDurationMs(conf, "init_delay", 0, 0, 60000,
                                         corModuleErrors(m));

    usleep((useconds_t)delayMs * 1000);
    if (corHandlerAdd(m, &(CorHandler){ .name = "echo",
                                        .serve = echoServe,
                                        .run = COR_RUN_INLINE })
            != 0
        || corHandlerAdd(m,
                         &(CorHandler){ .name = "bytes", .serve = bytesServe })
               != 0
        || corHandlerAdd(m,
                         &(CorHandler){ .name = "block", .serve = blockServe })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "notify",
                                           .serve = notifyServe,
                                           .finish = notifyFinish,
                                           .finishRun = COR_RUN_COROUTINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "waitecho",
                                           .serve = waitEchoServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = waitOnLoop })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "file", .serve = fileServe })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "stream",
                                           .serve = streamServe,
                                           .run = COR_RUN_WORKER })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "deadline",
                                           .serve = deadlineServe,
                                           .run = COR_RUN_COROUTINE,
                                           .timeoutMs = 300 })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "current",
                                           .serve = currentServe,
                                           .run = COR_RUN_INLINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "header",
                                           .serve = headerServe,
                                           .run = COR_RUN_INLINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "fetch",
                                           .serve = fetchServe,
                                           .run = COR_RUN_COROUTINE,
                                           .coroutineHook = waitOnLoop })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "resolve",
                                           .serve = resolveServe,
                                           .run = COR_RUN_COROUTINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "never",
                                           .serve = neverServe,
                                           .run = COR_RUN_COROUTINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "upgrade",
                                           .serve = upgradeServe,
                                           .run = COR_RUN_COROUTINE })
               != 0
        || corHandlerAdd(m, &(CorHandler){ .name = "upgradeinline",
                                           .serve = upgradeServe,
                                           .run = COR_RUN_INLINE })
               != 0
        || corProtocolAdd(m, &(CorProtocol){ .name = "line",
                                             .start = lineStart,
                                             .drain = lineDrain,
                                             .stop = lineStop,
                                             .connections = lineConnections })
               != 0) {
        return -1;
    }
    return tasksInit(m, conf);
}

static int
testkitInitAll(CorModule* m, const CorConf* conf)
{
    int rc = testkitInit(m, conf);

    corTestkitClientAdd(m, &rc);
    corTestkitCondWaitAdd(m, &rc);
    corTestkitNotifyAdd(m, &rc);
    corTestkitGatedAdd(m, &rc);
    corTestkitStatusAdd(m, &rc);
    corTestkitBodyAdd(m, &rc);
    corTestkitSeenAdd(m, &rc);
    corTestkitCrashAdd(m, &rc);
    corTestkitPgAdd(m, &rc);
    corTestkitRedisAdd(m, &rc);
    return rc;
}

COR_MODULE(testkit, .init = testkitInitAll, .loopInit = tasksLoopInit);
