/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Notifications (cor.h): a registry of URL schemes, each with a sender,
 * and corNotify, which copies a notification and sends it beside the
 * caller (corBeside.c) with the sender its URL's scheme names. http and
 * https are here, on the HTTP client; modules add the others.
 *
 * A coroutine per notification, not one per write that sends them all:
 * each sender stays a straight-line function that waits through
 * corRestWaitFd, whatever its protocol, and a write's notifications are
 * still all in flight at once (its finish phase starts them one after
 * the other without waiting, then ends). A coroutine costs the stack
 * pages it touches, and the stacks are cached by the loop.
 *
 * The request that started a notification holds its release until the
 * notification ends (corRequestHold), so a drain waits for it as for any
 * request in flight. At a stop the loops cancel their coroutines' waits
 * and corRestCancelAll the threads' polls: a notification in flight ends
 * at once with ECANCELED and is counted failed; corNotifyStopping logs
 * their number once, instead of a line each, and corNotifyStopped gives
 * those on threads a moment to leave their senders before the modules'
 * exit.
 *
 * The registry is written by the modules' init, before any loop runs, and
 * only read after: no lock. Its counters are atomics, since a scheme's
 * notifications end on every loop and thread.
 */
#include "corCoreInt.h"
#include "corHttpClient.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCHEMES_MAX 16
#define SCHEME_NAME_MAX 15
/* How long a stop gives the notifications on threads, cancelled, to leave
 * their senders before the modules' exit (which may free what a sender
 * uses): they return at once from a cancelled wait, so this is a bound,
 * not a wait for their receivers. */
#define STOP_GRACE_MS 100

typedef struct {
    char name[SCHEME_NAME_MAX + 1];
    int (*send)(CorModule* m, const CorNotification* n, char* why,
                size_t whyLen);
    int (*check)(const char* url, char* why, size_t whyLen);
    CorModule* module;          /* NULL: the core's */
    atomic_ulong sent;
    atomic_ulong failed;
    atomic_uint inFlight;
} Scheme;

/* One notification in flight: owned by itself, from corNotify to the end
 * of its send. One block: its copy of n and all n points to follow. */
typedef struct {
    CorBeside beside;
    CorNotification n;
    Scheme* scheme;
    CorRequest* r;              /* held until the end, or NULL */
    char copy[];
} Notice;

static int httpSend(CorModule* m, const CorNotification* n, char* why,
                    size_t whyLen);

static Scheme schemes[SCHEMES_MAX] = {
    { .name = "http", .send = httpSend },
    { .name = "https", .send = httpSend },
};
static unsigned schemeCount = 2;

/* ---- The registry -------------------------------------------------------- */

static Scheme*
schemeFind(const char* name, size_t len)
{
    for (unsigned i = 0; i < schemeCount; i++) {
        if (strlen(schemes[i].name) == len
            && memcmp(schemes[i].name, name, len) == 0) {
            return &schemes[i];
        }
    }
    return NULL;
}

/* RFC 3986 3.1, lowercase only: a scheme is compared as it is written. */
static bool
schemeNameValid(const char* name)
{
    size_t len = strlen(name);

    if (len == 0 || len > SCHEME_NAME_MAX || name[0] < 'a' || name[0] > 'z') {
        return false;
    }
    for (size_t i = 1; i < len; i++) {
        char ch = name[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')
              || ch == '+' || ch == '-' || ch == '.')) {
            return false;
        }
    }
    return true;
}

int
corNotifySchemeAdd(CorModule* m, const CorNotifyScheme* s)
{
    if (corRuntime.loops != NULL) {
        corModuleError(m, NULL, "notification schemes are registered from "
                       "init, before the loops run");
        return -1;
    }
    if (s->scheme == NULL || !schemeNameValid(s->scheme) || s->send == NULL) {
        corModuleError(m, NULL, "a notification scheme needs a name (a "
                       "lowercase letter, then letters, digits, + - ., at "
                       "most %d) and a send function", SCHEME_NAME_MAX);
        return -1;
    }
    if (schemeFind(s->scheme, strlen(s->scheme)) != NULL) {
        corModuleError(m, NULL, "notification scheme '%s' is already "
                       "registered", s->scheme);
        return -1;
    }
    if (schemeCount == SCHEMES_MAX) {
        corModuleError(m, NULL, "no room for notification scheme '%s' (%d "
                       "at most)", s->scheme, SCHEMES_MAX);
        return -1;
    }
    Scheme* entry = &schemes[schemeCount++];

    snprintf(entry->name, sizeof(entry->name), "%s", s->scheme);
    entry->send = s->send;
    entry->check = s->check;
    entry->module = m;
    return 0;
}

int
corNotifySchemeAddClient(CorModule* m, const char* scheme)
{
    return corNotifySchemeAdd(m, &(CorNotifyScheme){ .scheme = scheme,
                                                     .send = httpSend });
}

unsigned
corNotifySchemeCount(void)
{
    return schemeCount;
}

const char*
corNotifySchemeStats(unsigned index, CorNotifyStats* stats)
{
    const Scheme* s = &schemes[index < schemeCount ? index : 0];

    stats->sent = atomic_load(&s->sent);
    stats->failed = atomic_load(&s->failed);
    stats->inFlight = atomic_load(&s->inFlight);
    return s->name;
}

static unsigned
inFlightSum(void)
{
    unsigned sum = 0;

    for (unsigned i = 0; i < schemeCount; i++) {
        sum += atomic_load(&schemes[i].inFlight);
    }
    return sum;
}

void
corNotifyStopping(void)
{
    unsigned inFlight = inFlightSum();

    if (inFlight > 0) {
        corLog(COR_LOG_WARN, "stopping with %u notification%s in flight: "
               "cancelled, counted failed", inFlight, inFlight == 1 ? "" : "s");
    }
}

void
corNotifyStopped(void)
{
    struct timespec tick = { 0, 1000 * 1000 };

    for (int i = 0; i < STOP_GRACE_MS && inFlightSum() > 0; i++) {
        nanosleep(&tick, NULL);
    }
}

/* ---- Sending ------------------------------------------------------------- */

/* The URL for a log: a password in it (scheme://user:password@host) is
 * left out. */
static void
urlForLog(const char* url, char* out, size_t cap)
{
    const char* auth = strstr(url, "://");
    const char* at;
    const char* colon;
    size_t end;

    auth = auth != NULL ? auth + 3 : url;
    end = strcspn(auth, "/?#");
    at = memchr(auth, '@', end);
    colon = at != NULL ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon == NULL) {
        snprintf(out, cap, "%s", url);
        return;
    }
    snprintf(out, cap, "%.*s:***%s", (int)(colon - url), url, at);
}

/* The send, wherever it runs. */
static void
noticeRun(CorBeside* b)
{
    Notice* notice = corContainerOf(b, Notice, beside);
    Scheme* s = notice->scheme;
    char why[256] = "";
    char url[512];
    int rc = s->send(s->module, &notice->n, why, sizeof(why));

    if (rc == 0) {
        atomic_fetch_add(&s->sent, 1);
        return;
    }
    atomic_fetch_add(&s->failed, 1);
    if (rc == -ECANCELED && atomic_load(&corRuntime.stopping)) {
        return;             /* corNotifyStopping said it once */
    }
    urlForLog(notice->n.url, url, sizeof(url));
    corLog(COR_LOG_WARN, "notification %s %s failed: %s", notice->n.method,
           url, why[0] != '\0' ? why : strerror(-rc));
}

static void
noticeDone(CorBeside* b)
{
    Notice* notice = corContainerOf(b, Notice, beside);

    atomic_fetch_sub(&notice->scheme->inFlight, 1);
    if (notice->r != NULL) {
        corRequestLetGo(notice->r);
    }
    free(notice);
}

/* Copy n and all it points to into one block. */
static Notice*
noticeNew(const CorNotification* n)
{
    const char* method = n->method != NULL ? n->method : "POST";
    const char* type = n->contentType;
    size_t size = sizeof(Notice) + strlen(n->url) + 1 + strlen(method) + 1
                  + (type != NULL ? strlen(type) + 1 : 0) + n->bodyLen
                  + corHeadersCopySize(n->headers, n->headerCount);
    Notice* notice = calloc(1, size);
    char* p;

    if (notice == NULL) {
        return NULL;
    }
    notice->n = *n;
    notice->n.headers = corHeadersCopy(n->headers, n->headerCount,
                                       notice->copy, &p);
    notice->n.url = strcpy(p, n->url);
    p += strlen(n->url) + 1;
    notice->n.method = strcpy(p, method);
    p += strlen(method) + 1;
    if (type != NULL) {
        notice->n.contentType = strcpy(p, type);
        p += strlen(type) + 1;
    }
    if (n->bodyLen > 0) {
        notice->n.body = memcpy(p, n->body, n->bodyLen);
    }
    if (notice->n.timeoutMs <= 0) {
        notice->n.timeoutMs =
            (int)corRuntime.config->client.notifyTimeoutMs;
    }
    return notice;
}

/* The registered scheme of url (scheme://something), or NULL. */
static Scheme*
urlScheme(const char* url)
{
    const char* sep = url != NULL ? strstr(url, "://") : NULL;

    if (sep == NULL || sep == url || sep[3] == '\0') {
        return NULL;
    }
    return schemeFind(url, (size_t)(sep - url));
}

/* Whether s's check refuses url: logged then, as a failed send is. */
static bool
urlRefused(const Scheme* s, const char* url)
{
    char why[256];
    char shown[512];

    if (s->check(url, why, sizeof(why)) == 0) {
        return false;
    }
    urlForLog(url, shown, sizeof(shown));
    corLog(COR_LOG_ERROR, "notification to %s refused: %s", shown, why);
    return true;
}

int
corNotify(CorRequest* r, const CorNotification* n)
{
    Scheme* s = urlScheme(n->url);
    Notice* notice;
    int rc;

    if (s == NULL || n->headerCount > COR_NOTIFY_HEADERS_MAX
        || (n->bodyLen > 0 && n->body == NULL)) {
        return -EINVAL;
    }
    if (s->check != NULL && urlRefused(s, n->url)) {
        return -EINVAL;
    }
    if (atomic_load(&corRuntime.stopping)) {
        return -ECANCELED;
    }
    notice = noticeNew(n);
    if (notice == NULL) {
        return -ENOMEM;
    }
    notice->scheme = s;
    notice->r = r;
    atomic_fetch_add(&s->inFlight, 1);
    if (r != NULL) {
        corRequestHold(r);
    }
    rc = corBesideStart(&notice->beside, noticeRun, noticeDone,
                        COR_BESIDE_LOOP_NEXT);
    if (rc < 0) {
        atomic_fetch_sub(&s->inFlight, 1);
        if (r != NULL) {
            corRequestLetGo(r);
        }
        free(notice);
        corLog(COR_LOG_ERROR, "notification: no thread to send it: %s",
               strerror(-rc));
    }
    return rc;
}

/* ---- http, https, and the client schemes of modules ----------------------- */

/* A request with n's method, headers and body through the client (which
 * takes the client schemes modules register: cor://); acknowledged by a
 * 2xx. */
static int
httpSend(CorModule* m, const CorNotification* n, char* why, size_t whyLen)
{
    CorHeader headers[COR_NOTIFY_HEADERS_MAX + 1];
    unsigned count = n->headerCount;
    CorHttpClientResponse res;
    int rc;

    (void)m;
    if (count > 0) {
        memcpy(headers, n->headers, count * sizeof(*headers));
    }
    if (n->contentType != NULL) {
        headers[count++] = (CorHeader){ "Content-Type", 12, n->contentType,
                                        strlen(n->contentType) };
    }
    rc = corHttpClientFetch(&(CorHttpClientRequest){
        .method = n->method, .url = n->url, .headers = headers,
        .headerCount = count, .body = n->body, .bodyLen = n->bodyLen,
        .totalTimeoutMs = n->timeoutMs }, &res);
    if (rc < 0) {
        snprintf(why, whyLen, "%s", res.error);
    } else if (res.status < 200 || res.status > 299) {
        snprintf(why, whyLen, "answered %d", res.status);
        rc = -EPROTO;
    }
    corHttpClientResponseFree(&res);
    return rc;
}
