/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request's lifecycle in the core, with a protocol of the test's own and
 * no server: a cancel ends a coroutine's or a worker's wait, a deadline
 * answers 504, a post-response phase the pool refuses does not answer a
 * second time, a stream holds no more than its bound for a client that
 * does not read, the arena refuses sizes that would wrap, a response
 * header that would inject is refused, and /metrics survives a failed
 * realloc. The core's files are included, so what the server's other
 * files provide is stubbed here.
 */
#include "corTest.h"

#include <stdbool.h>
#include <stdlib.h>

/* The metrics writer's reallocs fail on demand. */
static bool reallocFails;

static void*
metricsRealloc(void* p, size_t size)
{
    return reallocFails ? NULL : realloc(p, size);
}

#define realloc metricsRealloc
#include "../../core/corMetricsOut.c"
#undef realloc
#include "../../core/corMetrics.c"
#include "../../core/corMetricsCount.c"
#include "../../core/corRequest.c"
#include "../../core/corRequestHold.c"
#include "../../core/corRequestRead.c"
#include "../../core/corRequestBody.c"
#include "../../core/corRequestBodyTake.c"
#include "../../core/corRequestBodySpool.c"
#include "../../core/corHeaders.c"
#include "../../core/corLimits.c"
#include "../../core/corRequestCleanup.c"
#include "../../core/corRespond.c"
#include "../../core/corRoute.c"
#include "../../core/corRouteNotify.c"
#include "../../core/corConfigRead.h"
#include "../../core/corGuard.c"
#include "../../core/corRouteCache.c"
#include "../../core/corStream.c"
#include "../../core/corFilter.c"
#include "../../core/corUpgrade.c"

/* corUpgrade.c reads transports; TLS (corTls.c) is not linked here. */
bool
corTransportPending(const CorTransport* t)
{
    (void)t;
    return false;
}

bool
corTransportWantsWrite(const CorTransport* t)
{
    (void)t;
    return false;
}

CorRuntime corRuntime;

const CorLimits*
corLimits(void)
{
    return &corRuntime.limits;
}

/* corMetrics.c reports a module's bad metrics source through it. */
void
corModuleError(CorModule* m, const CorConf* at, const char* fmt, ...)
{
    (void)m;
    (void)at;
    (void)fmt;
}

static CorModule module;
static CorHandlerEntry entries[8];
static unsigned entryCount;

const CorHandlerEntry*
corHandlerFind(const char* name)
{
    for (unsigned i = 0; i < entryCount; i++) {
        if (strcmp(entries[i].handler.name, name) == 0) {
            return &entries[i];
        }
    }
    return NULL;
}

int
corHandlerAdd(CorModule* m, const CorHandler* handler)
{
    entries[entryCount++] = (CorHandlerEntry){ *handler, m };
    return 0;
}

/* As the core's: a malloc'ed list, NULL-terminated. */
const char**
corHandlerNames(void)
{
    const char** names = calloc(entryCount + 1, sizeof(*names));

    for (unsigned i = 0; names != NULL && i < entryCount; i++) {
        names[i] = entries[i].handler.name;
    }
    return names;
}

void
corLog(CorLogLevel level, const char* fmt, ...)
{
    (void)level;
    (void)fmt;
}

/* No access log here: its lines are the integration tests'. */
bool
corAccessLogEnabled(void)
{
    return false;
}

void
corAccessLogRequest(const CorRequest* r)
{
    (void)r;
}

/* No listener shares its ticket keys here: their counters stay out. */
void
corTlsTicketsEmit(CorMetricsOut* out)
{
    (void)out;
}

/* No acme listener here: no HTTP-01 token to answer, no metrics. */
bool
corAcmeHttp01Answer(CorRequest* r)
{
    (void)r;
    return false;
}

void
corAcmeEmit(CorMetricsOut* out)
{
    (void)out;
}

/* The notifications' counters in /metrics: one scheme, none sent. */
unsigned
corNotifySchemeCount(void)
{
    return 1;
}

const char*
corNotifySchemeStats(unsigned index, CorNotifyStats* stats)
{
    (void)index;
    *stats = (CorNotifyStats){ 0 };
    return "http";
}

/* The registry of notifications: one scheme, http, whose sends are
 * written down here (the senders are the integration tests'). */
static int
httpSend(CorModule* m, const CorNotification* n, char* why, size_t whyLen)
{
    (void)m;
    (void)n;
    (void)why;
    (void)whyLen;
    return 0;
}

static const CorScheme httpScheme = { .scheme = "http", .send = httpSend };
static char notified[4][64];
static unsigned notifiedCount;

const CorScheme*
corSchemeOf(const char* url)
{
    return strncmp(url, "http://", 7) == 0 ? &httpScheme : NULL;
}

const CorScheme*
corSchemeFind(const char* name)
{
    return strcmp(name, "http") == 0 ? &httpScheme : NULL;
}

int
corUrlParse(const char* s, CorUrl* u, char* why, size_t whyLen)
{
    (void)s;
    (void)u;
    (void)why;
    (void)whyLen;
    return 0;
}

int
corNotify(CorRequest* r, const CorNotification* n)
{
    if (notifiedCount < 4) {
        snprintf(notified[notifiedCount++], sizeof(notified[0]), "%s %s %.*s",
                 n->url, n->contentType ? n->contentType : "-", (int)n->bodyLen,
                 (const char*)n->body);
    }
    return r != NULL ? 0 : -EINVAL;
}

void
corNotifyFailedCount(const char* url)
{
    (void)url;
}

/* ---- The test's protocol ------------------------------------------------- */

typedef struct {
    CorRequest r;
    int done;
    int released;
    uint64_t startMs;
    uint64_t doneMs;
    atomic_size_t streamed; /* what the protocol took of a stream */
    size_t held;            /* of that, unsent: the client reads not */
    char body[16];          /* a body in memory, as done saw it */
    size_t bodyLen;
} TestRequest;

static void
testDone(CorRequest* r)
{
    TestRequest* t = corContainerOf(r, TestRequest, r);

    t->done++;
    t->doneMs = corEvClockMs();
    if (r->responseBody != NULL && r->responseLen <= sizeof(t->body)) {
        memcpy(t->body, r->responseBody, r->responseLen);
        t->bodyLen = r->responseLen;
    }
    if (r->stream == NULL) {
        corRequestSent(r); /* sent at once */
    }
}

static void
testRelease(CorRequest* r)
{
    corContainerOf(r, TestRequest, r)->released++;
}

static void
testStreamData(CorRequest* r, const void* data, size_t len)
{
    TestRequest* t = corContainerOf(r, TestRequest, r);

    (void)data;
    atomic_fetch_add(&t->streamed, len);
    t->held += len;
}

static void
testStreamEnd(CorRequest* r)
{
    corRequestSent(r);
}

static bool
testStreamAlive(const CorRequest* r)
{
    (void)r;
    return true;
}

static size_t
testStreamBacklog(const CorRequest* r)
{
    return corContainerOf(r, const TestRequest, r)->held;
}

static const CorProtocolOps ops = { .done = testDone,
                                    .release = testRelease,
                                    .streamData = testStreamData,
                                    .streamEnd = testStreamEnd,
                                    .streamAlive = testStreamAlive,
                                    .streamBacklog = testStreamBacklog };

static CorConfig config;
static CorConfigRoute configRoutes[8];
static CorEvLoop* loop;

/* Fails with 503 and the errno of its wait: the failure path. */
static void
waitLong(CorRequest* r)
{
    short revents;

    if (corRestWaitFd(-1, 0, 10000, &revents) < 0) {
        corRespondf(r, 503, "text/plain", "%s", strerror(errno));
        return;
    }
    corRespond(r, 200, "text/plain", "waited", 6);
}

static void
answerAtOnce(CorRequest* r)
{
    corRespond(r, 200, "text/plain", "ok", 2);
}

static void
streamStart(CorRequest* r)
{
    corResponseStreamStart(r, 200, "text/plain");
}

static int finishRuns;

static void
countFinish(CorRequest* r)
{
    (void)r;
    finishRuns++;
}

static void
route(const char* path, const CorHandler* handler, uint64_t timeoutMs)
{
    unsigned i = config.routeCount++;

    corHandlerAdd(&module, handler);
    configRoutes[i] = (CorConfigRoute){ .method = "GET",
                                        .path = (char*)path,
                                        .handler = (char*)handler->name,
                                        .timeoutMs = timeoutMs };
}

static void
refuse(CorRequest* r)
{
    corRespond(r, 422, "text/plain", "no", 2);
}

/* The file the notify routes were read from: their URLs are its nodes. */
static CorConf* notifyConf;

/* Two routes of any method whose notify is the same, read as the file
 * would be. */
static void
notifyRoutes(CorConfErrors* errors)
{
    static const char yaml[] = "notify: \"http://a/in\"\n";
    CorConf* root = corConfLoadString("t.yaml", yaml, sizeof(yaml) - 1, errors);
    CorConfigRoute* in = &configRoutes[config.routeCount];

    ck_assert_ptr_nonnull(root);
    notifyConf = root;
    route("/notify",
          &(CorHandler){
              .name = "notify", .serve = answerAtOnce, .run = COR_RUN_INLINE },
          0);
    route("/notify-refused",
          &(CorHandler){
              .name = "refuse", .serve = refuse, .run = COR_RUN_INLINE },
          0);
    corConfigNotifyRead(&in[0], root, "routes[6]", errors);
    ck_assert_ptr_nonnull(in[0].notify);
    in[1].notify = in[0].notify;
    in[0].method = in[1].method = NULL;
}

static void
setUp(void)
{
    CorConfErrors errors = { 0 };

    config.routes = configRoutes;
    route("/coroutine",
          &(CorHandler){ .name = "coroutine",
                         .serve = waitLong,
                         .run = COR_RUN_COROUTINE },
          0);
    route("/worker",
          &(CorHandler){
              .name = "worker", .serve = waitLong, .run = COR_RUN_WORKER },
          0);
    route("/deadline",
          &(CorHandler){
              .name = "deadline", .serve = waitLong, .run = COR_RUN_COROUTINE },
          50);
    route("/deadline-worker",
          &(CorHandler){ .name = "deadlineWorker",
                         .serve = waitLong,
                         .run = COR_RUN_WORKER,
                         .timeoutMs = 50 },
          0);
    route("/stream",
          &(CorHandler){
              .name = "stream", .serve = streamStart, .run = COR_RUN_INLINE },
          0);
    route("/finish",
          &(CorHandler){ .name = "finish",
                         .serve = answerAtOnce,
                         .run = COR_RUN_INLINE,
                         .finish = countFinish,
                         .finishRun = COR_RUN_WORKER },
          0);
    notifyRoutes(&errors);
    corRuntime.config = &config;
    corRuntime.limits = (CorLimits){ .headerBytes = 1024,
                                     .headerCount = 4,
                                     .bodyBytes = 100 };
    corRuntime.coroutines = COR_HAVE_COROUTINES;
    loop = corEvLoopCreate();
    ck_assert_ptr_nonnull(loop);
    corEvLoopBind(loop);
    corRuntime.loops = &loop;
    corRuntime.loopCount = 1;
    corRuntime.workers = corEvPoolCreate(2);
    ck_assert_ptr_nonnull(corRuntime.workers);
    ck_assert_int_eq(corMetricsInit(1), 0);
    corLoopIndexSet(0);
    ck_assert_int_eq(corRoutesBuild(&config, &errors), 0);
}

static void
tearDown(void)
{
    corConfFree(notifyConf);
    notifyConf = NULL;
}

static void
serve(TestRequest* t, const char* path)
{
    memset(t, 0, sizeof(*t));
    t->r.method = "GET";
    t->r.methodLen = 3;
    t->r.path = path;
    t->r.pathLen = strlen(path);
    t->startMs = corEvClockMs();
    corRequestServe(&t->r, &ops, NULL);
}

/* Turn the loop until the request is released (a test timeout ends a
 * request that never is). */
static void
runUntilReleased(TestRequest* t)
{
    while (t->released == 0) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 100), 0);
    }
}

/* ---- Cancel -------------------------------------------------------------- */

static void
checkCancelEnds(const char* path)
{
    TestRequest t;

    serve(&t, path);
    ck_assert_int_eq(t.done, 0);
    ck_assert(!corRequestCancelled(&t.r));
    corRequestCancel(&t.r);
    ck_assert(corRequestCancelled(&t.r));
    corRequestCancel(&t.r); /* twice is once */
    runUntilReleased(&t);
    ck_assert_int_eq(t.done, 1);
    ck_assert_int_eq(t.released, 1);
    ck_assert_int_eq(t.r.status, 503);
    ck_assert_uint_lt(t.doneMs - t.startMs, 5000);
    ck_assert_uint_eq(corMetricsLoop(0)->cancelled, 1);
    ck_assert_uint_eq(atomic_load(&corMetricsLoop(0)->inFlight), 0);
}

START_TEST(test_cancel_ends_a_coroutines_wait)
{
    checkCancelEnds(COR_HAVE_COROUTINES ? "/coroutine" : "/worker");
}
END_TEST

START_TEST(test_cancel_ends_a_workers_poll)
{
    checkCancelEnds("/worker");
}
END_TEST

/* A cancel once the handler returned, or of an inline handler, does
 * nothing. */
START_TEST(test_cancel_after_the_handler_is_nothing)
{
    TestRequest t;

    serve(&t, "/finish");
    ck_assert_int_eq(t.done, 1);
    corRequestCancel(&t.r);
    runUntilReleased(&t);
    ck_assert_uint_eq(corMetricsLoop(0)->cancelled, 0);
    ck_assert_int_eq(finishRuns, 1);
}
END_TEST

/* ---- Deadlines ----------------------------------------------------------- */

static void
checkDeadline(const char* path)
{
    TestRequest t;

    serve(&t, path);
    runUntilReleased(&t);
    ck_assert_int_eq(t.done, 1);
    ck_assert_int_eq(t.r.status, 504);
    ck_assert_uint_lt(t.doneMs - t.startMs, 5000);
    ck_assert_uint_eq(corMetricsLoop(0)->timedOut, 1);
}

START_TEST(test_route_deadline_answers_504)
{
    checkDeadline("/deadline");
}
END_TEST

START_TEST(test_handler_deadline_on_a_worker_answers_504)
{
    checkDeadline("/deadline-worker");
}
END_TEST

/* ---- The post-response phase --------------------------------------------- */

/* The pool refuses the post-response phase (it is shutting down): the
 * request ends, without a second answer. */
START_TEST(test_refused_finish_phase_answers_once)
{
    TestRequest t;

    corEvPoolShutdown(corRuntime.workers);
    serve(&t, "/finish");
    ck_assert_int_eq(t.done, 1);
    ck_assert_int_eq(t.released, 1);
    ck_assert_int_eq(finishRuns, 0);
    ck_assert_uint_eq(atomic_load(&corMetricsLoop(0)->finishing), 0);
}
END_TEST

/* ---- Streams ------------------------------------------------------------- */

enum { PIECE = 16 * 1024, PIECES = 64 };

typedef struct {
    CorRequest* r;
    atomic_size_t written;
    atomic_bool finished;
} Writer;

static void*
writeMuch(void* arg)
{
    Writer* w = arg;
    static char piece[PIECE];

    for (int i = 0; i < PIECES; i++) {
        ck_assert_int_eq(corResponseStreamWrite(w->r, piece, PIECE), 0);
        atomic_fetch_add(&w->written, PIECE);
    }
    corResponseStreamEnd(w->r);
    atomic_store(&w->finished, true);
    return NULL;
}

/* A client that reads nothing: the writer (a thread off the loop) waits
 * once the core and the protocol hold the bound each; a writer on the
 * loop is told -EAGAIN; once the client reads, everything goes out. */
START_TEST(test_stream_bounds_what_a_slow_client_holds)
{
    static char piece[PIECE];
    TestRequest t;
    Writer w = { .written = 0 };
    pthread_t thread;

    serve(&t, "/stream");
    ck_assert_int_eq(t.done, 1);
    w.r = &t.r;
    pthread_create(&thread, NULL, writeMuch, &w);
    for (int i = 0; i < 30; i++) {
        ck_assert_int_eq(corEvLoopRunOnce(loop, 10), 0);
    }
    ck_assert(!atomic_load(&w.finished));
    ck_assert_uint_le(atomic_load(&w.written),
                      2 * COR_STREAM_QUEUE_MAX + PIECE);
    ck_assert_uint_le(t.held, COR_STREAM_QUEUE_MAX + PIECE);
    if (t.r.stream->queued + PIECE > COR_STREAM_QUEUE_MAX) {
        ck_assert_int_eq(corResponseStreamWrite(&t.r, piece, PIECE), -EAGAIN);
    }
    while (t.released == 0) {
        t.held = 0; /* the client reads it all */
        ck_assert_int_eq(corEvLoopRunOnce(loop, 10), 0);
    }
    pthread_join(thread, NULL);
    ck_assert_uint_eq(atomic_load(&t.streamed), (size_t)PIECE * PIECES);
}
END_TEST

/* ---- Memory and headers -------------------------------------------------- */

START_TEST(test_alloc_refuses_sizes_that_wrap)
{
    CorRequest r = { 0 };

    ck_assert_ptr_null(corRequestAlloc(&r, SIZE_MAX));
    ck_assert_ptr_null(corRequestAlloc(&r, SIZE_MAX - 8));
    ck_assert_ptr_nonnull(corRequestAlloc(&r, 100));
    arenaFree(&r);
}
END_TEST

START_TEST(test_response_header_refuses_injection)
{
    CorRequest r = { .fileFd = -1 };

    ck_assert_int_eq(corResponseHeader(&r, "X-Ok", "a\tvalue"), 0);
    ck_assert_int_eq(corResponseHeader(&r, "X-Bad", "a\r\nSet-Cookie: x"),
                     -EINVAL);
    ck_assert_int_eq(corResponseHeader(&r, "X-Bad", "a\nb"), -EINVAL);
    ck_assert_int_eq(corResponseHeader(&r, "X-Bad", "a\x7f"), -EINVAL);
    ck_assert_int_eq(corResponseHeader(&r, "Bad Name", "v"), -EINVAL);
    ck_assert_int_eq(corResponseHeader(&r, "Bad:Name", "v"), -EINVAL);
    ck_assert_int_eq(corResponseHeader(&r, "", "v"), -EINVAL);
    ck_assert_uint_eq(r.responseHeaderCount, 1);
    arenaFree(&r);
}
END_TEST

/* A realloc that fails while /metrics grows its text: no text, no crash
 * (the text used to keep its grown capacity with a NULL buffer). */
START_TEST(test_metrics_text_survives_a_failed_realloc)
{
    enum { LOOPS = 128 };
    static CorEvLoop* loops[LOOPS];
    size_t len = 0;
    char* text;

    for (unsigned i = 0; i < LOOPS; i++) {
        loops[i] = loop;
    }
    corRuntime.loops = loops;
    corRuntime.loopCount = LOOPS;
    corMetricsFree();
    ck_assert_int_eq(corMetricsInit(LOOPS), 0);
    text = corMetricsText(&len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_gt(len, 4096); /* it had to grow */
    free(text);
    reallocFails = true;
    ck_assert_ptr_null(corMetricsText(&len));
    reallocFails = false;
}
END_TEST

/* A request past the limits, whatever its protocol, never reaches its
 * handler: the core answers it with the limit's status and counts it
 * under its protocol, which its version names. */
START_TEST(test_past_the_limits_no_handler_runs)
{
    static const CorHeader many[5] = { { "A", 1, "1", 1 },
                                       { "B", 1, "2", 1 },
                                       { "C", 1, "3", 1 },
                                       { "D", 1, "4", 1 },
                                       { "E", 1, "5", 1 } };
    TestRequest t;
    size_t len = 0;
    char* text;

    memset(&t, 0, sizeof(t));
    t.r = (CorRequest){ .method = "GET",
                        .methodLen = 3,
                        .path = "/finish",
                        .pathLen = 7,
                        .bodyLen = 101,
                        .version = "COR/1" };
    corRequestServe(&t.r, &ops, NULL);
    runUntilReleased(&t);
    ck_assert_int_eq(t.r.status, 413);
    ck_assert_int_eq(finishRuns, 0); /* no handler, no finish */
    memset(&t, 0, sizeof(t));
    t.r = (CorRequest){ .method = "GET",
                        .methodLen = 3,
                        .path = "/finish",
                        .pathLen = 7,
                        .headers = many,
                        .headerCount = 5,
                        .version = "HTTP/1.1" };
    corRequestServe(&t.r, &ops, NULL);
    runUntilReleased(&t);
    ck_assert_int_eq(t.r.status, 431);
    serve(&t, "/finish"); /* within them: served */
    runUntilReleased(&t);
    ck_assert_int_eq(t.r.status, 200);
    text = corMetricsText(&len);
    ck_assert_ptr_nonnull(strstr(text, "cor_requests_refused_total{protocol="
                                       "\"cor\",status=\"413\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "cor_requests_refused_total{protocol="
                                       "\"http\",status=\"431\"} 1\n"));
    free(text);
}
END_TEST

/* corRequestUpgrade's reading of Connection and Upgrade: comma lists,
 * any case, spaces around, "protocol/version". */
static size_t consumedBytes;

static void
bodyConsumedCount(CorRequest* r, size_t n)
{
    (void)r;
    consumedBytes += n;
}

/* A body that came whole is read out of r->body; a streamed one gives
 * what was put, tells the protocol what was taken, -EAGAIN while nothing
 * came (no wait), then its end or its failure. Trailers are kept. */
START_TEST(test_request_body_read_whole_and_streamed)
{
    static const CorProtocolOps bodyOps = { .bodyConsumed = bodyConsumedCount };
    CorRequest r = { .body = "hello",
                     .bodyLen = 5,
                     .ops = &bodyOps,
                     .loop = corEvLoopCurrent() };
    char buf[8];

    ck_assert_int_eq(corRequestBodyRead(&r, buf, 3, -1), 3);
    ck_assert_int_eq(corRequestBodyRead(&r, buf + 3, 8, -1), 2);
    ck_assert_int_eq(memcmp(buf, "hello", 5), 0);
    ck_assert_int_eq(corRequestBodyRead(&r, buf, 8, -1), 0);

    ck_assert_int_eq(corRequestBodyBegin(&r), 0);
    r.bodyTaken = 0;
    consumedBytes = 0;
    ck_assert_int_eq(corRequestBodyRead(&r, buf, 8, 0), -EAGAIN);
    ck_assert_int_eq(corRequestBodyRead(&r, buf, 8, 20), -ETIMEDOUT);
    ck_assert_int_eq(corRequestBodyPut(&r, "abcdef", 6), 0);
    ck_assert_int_eq(corRequestBodyRead(&r, buf, 4, -1), 4);
    ck_assert_int_eq(consumedBytes, 4);
    corRequestBodyEnd(&r, 0);
    ck_assert_int_eq(corRequestBodyRead(&r, buf + 4, 8, -1), 2);
    ck_assert_int_eq(memcmp(buf, "abcdef", 6), 0);
    ck_assert_int_eq(corRequestBodyRead(&r, buf, 8, -1), 0);
    ck_assert_int_eq(consumedBytes, 6);
    ck_assert_int_eq(r.bodyTaken, 6);
    corRequestBodyFree(&r);

    ck_assert_int_eq(corRequestBodyBegin(&r), 0);
    corRequestBodyEnd(&r, -ECONNRESET);
    ck_assert_int_eq(corRequestBodyRead(&r, buf, 8, -1), -ECONNRESET);
    corRequestBodyFree(&r);
    corRequestArenaFree(&r);
}
END_TEST

START_TEST(test_upgrade_header_lists)
{
    ck_assert(listHas("keep-alive, Upgrade", 19, "upgrade", false));
    ck_assert(listHas("UPGRADE", 7, "upgrade", false));
    ck_assert(listHas(" ,upgrade , x", 13, "upgrade", false));
    ck_assert(!listHas("upgrades", 8, "upgrade", false));
    ck_assert(!listHas("upgrade/1", 9, "upgrade", false));
    ck_assert(listHas("h2c, WebSocket/13", 17, "websocket", true));
    ck_assert(!listHas("websockets", 10, "websocket", true));
    ck_assert(!listHas("", 0, "websocket", true));
    /* The length is the value's, not the string's. */
    ck_assert(!listHas("webs"
                       "ocket",
                       4, "websocket", true));
}
END_TEST

/* ---- Response filters ---------------------------------------------------- */

static int filterEnds;

/* Takes every answer, says so in a header, and passes each byte twice,
 * in pieces of its own. */
static void*
doubleHead(CorRequest* r, void* arg)
{
    corResponseHeader(r, "X-Doubled", "yes");
    return arg;
}

static int
doubleBody(CorRequest* r, void* ctx, const void* data, size_t len,
           unsigned flags, CorFilterOut* out)
{
    (void)r;
    (void)ctx;
    (void)flags;
    for (size_t i = 0; i < len; i++) {
        char two[2] = { ((const char*)data)[i], ((const char*)data)[i] };
        int rc = corFilterPass(out, two, 2);

        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static void
doubleEnd(CorRequest* r, void* ctx)
{
    (void)r;
    (void)ctx;
    filterEnds++;
}

/* Each test runs in a process of its own: the filter added here is this
 * test's alone. */
START_TEST(test_filters_change_a_body_from_memory)
{
    static int arg;
    TestRequest t;

    ck_assert_int_eq(corFilterAdd(&module, &(CorFilter){ .name = "double",
                                                         .head = doubleHead,
                                                         .body = doubleBody,
                                                         .end = doubleEnd,
                                                         .arg = &arg }),
                     0);
    ck_assert_int_eq(corFilterAdd(&module, &(CorFilter){ .name = "double",
                                                         .head = doubleHead,
                                                         .body = doubleBody }),
                     -1);
    ck_assert_int_eq(corFilterIndex("double"), 0);
    serve(&t, "/finish");
    runUntilReleased(&t);
    ck_assert_int_eq(t.done, 1);
    ck_assert_uint_eq(t.bodyLen, 4);
    ck_assert(memcmp(t.body, "ookk", 4) == 0);
    ck_assert_int_eq(filterEnds, 1);
    /* The head went through it too, once: its header (the count only:
     * the arena that held it is gone). */
    ck_assert_uint_eq(t.r.responseHeaderCount, 1);
}
END_TEST

/* A route's notify sends a write answered 2xx, with its body and
 * Content-Type, once it was sent; a GET, or a 4xx, sends nothing. */
START_TEST(test_route_notify_sends_listed_writes_only)
{
    static const CorHeader type = { "Content-Type", 12, "text/csv", 8 };
    static const char* const asks[][2] = { { "POST", "/notify" },
                                           { "GET", "/notify" },
                                           { "POST", "/notify-refused" } };
    TestRequest t;

    for (unsigned i = 0; i < 3; i++) {
        memset(&t, 0, sizeof(t));
        t.r = (CorRequest){ .method = asks[i][0],
                            .methodLen = strlen(asks[i][0]),
                            .path = asks[i][1],
                            .pathLen = strlen(asks[i][1]),
                            .headers = &type,
                            .headerCount = 1,
                            .body = "a,b",
                            .bodyLen = 3 };
        corRequestServe(&t.r, &ops, NULL);
        runUntilReleased(&t);
    }
    ck_assert_uint_eq(notifiedCount, 1);
    ck_assert_str_eq(notified[0], "http://a/in text/csv a,b");
}
END_TEST

START_TEST(test_response_headers_found_and_removed)
{
    TestRequest t;

    memset(&t, 0, sizeof(t));
    ck_assert_int_eq(corResponseHeader(&t.r, "ETag", "\"a\""), 0);
    ck_assert_int_eq(corResponseHeader(&t.r, "Vary", "Origin"), 0);
    ck_assert_int_eq(corResponseHeader(&t.r, "etag", "\"b\""), 0);
    ck_assert_str_eq(corResponseHeaderGet(&t.r, "ETAG")->value, "\"a\"");
    ck_assert_ptr_null(corResponseHeaderGet(&t.r, "Content-Length"));
    ck_assert_uint_eq(corResponseHeaderRemove(&t.r, "Etag"), 2);
    ck_assert_uint_eq(t.r.responseHeaderCount, 1);
    ck_assert_str_eq(t.r.responseHeaders[0].name, "Vary");
    ck_assert_ptr_null(corResponseHeaderGet(&t.r, "etag"));
    corRequestArenaFree(&t.r);
}
END_TEST

COR_TEST_SUITE(corRequest)
{
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setUp, tearDown);
    tcase_add_test(tc, test_cancel_ends_a_coroutines_wait);
    tcase_add_test(tc, test_upgrade_header_lists);
    tcase_add_test(tc, test_cancel_ends_a_workers_poll);
    tcase_add_test(tc, test_cancel_after_the_handler_is_nothing);
    tcase_add_test(tc, test_route_deadline_answers_504);
    tcase_add_test(tc, test_handler_deadline_on_a_worker_answers_504);
    tcase_add_test(tc, test_refused_finish_phase_answers_once);
    tcase_add_test(tc, test_stream_bounds_what_a_slow_client_holds);
    tcase_add_test(tc, test_alloc_refuses_sizes_that_wrap);
    tcase_add_test(tc, test_response_header_refuses_injection);
    tcase_add_test(tc, test_metrics_text_survives_a_failed_realloc);
    tcase_add_test(tc, test_past_the_limits_no_handler_runs);
    tcase_add_test(tc, test_request_body_read_whole_and_streamed);
    tcase_add_test(tc, test_filters_change_a_body_from_memory);
    tcase_add_test(tc, test_response_headers_found_and_removed);
    tcase_add_test(tc, test_route_notify_sends_listed_writes_only);
}
