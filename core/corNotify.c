/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Notifications (cor.h): corNotify copies a notification and sends it
 * beside the caller (corBeside.c) with the sender of its URL's scheme
 * (corScheme.c: http and https from the HTTP floor, the others from
 * modules).
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
 * The counters are the registry's, per scheme.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a stop gives the notifications on threads, cancelled, to leave
 * their senders before the modules' exit (which may free what a sender
 * uses): they return at once from a cancelled wait, so this is a bound,
 * not a wait for their receivers. */
#define STOP_GRACE_MS 100

/* One notification in flight: owned by itself, from corNotify to the end
 * of its send. One block: its copy of n and all n points to follow. */
typedef struct {
    CorBeside beside;
    CorNotification n;
    CorSchemeEntry* scheme;
    CorRequest* r; /* held until the end, or NULL */
    char copy[];
} Notice;

void
corNotifyStopping(void)
{
    unsigned inFlight = corNotifyInFlight();

    if (inFlight > 0) {
        corLog(COR_LOG_WARN,
               "stopping with %u notification%s in flight: "
               "cancelled, counted failed",
               inFlight, inFlight == 1 ? "" : "s");
    }
}

void
corNotifyStopped(void)
{
    struct timespec tick = { 0, 1000 * 1000 };

    for (int i = 0; i < STOP_GRACE_MS && corNotifyInFlight() > 0; i++) {
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
    CorSchemeEntry* s = notice->scheme;
    char why[256] = "";
    char url[512];
    int rc = s->s.send(s->module, &notice->n, why, sizeof(why));

    if (rc == 0) {
        atomic_fetch_add(&s->sent, 1);
        return;
    }
    atomic_fetch_add(&s->failed, 1);
    if (rc == -ECANCELED && atomic_load(&corRuntime.stopping)) {
        return; /* corNotifyStopping said it once */
    }
    urlForLog(notice->n.url, url, sizeof(url));
    corLog(COR_LOG_WARN, "notification %s %s failed: %s", notice->n.method, url,
           why[0] != '\0' ? why : strerror(-rc));
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
    notice->n.headers = corHeadersCopy(n->headers, n->headerCount, notice->copy,
                                       &p);
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
        notice->n.timeoutMs = (int)corRuntime.config->client.notifyTimeoutMs;
    }
    return notice;
}

/* The registered scheme of url (scheme://something) that sends, or
 * NULL. */
static CorSchemeEntry*
urlScheme(const char* url)
{
    const CorScheme* s = corSchemeOf(url);

    if (s == NULL || s->send == NULL || strstr(url, "://")[3] == '\0') {
        return NULL;
    }
    return corContainerOf(s, CorSchemeEntry, s);
}

void
corNotifyFailedCount(const char* url)
{
    CorSchemeEntry* s = urlScheme(url);

    if (s != NULL) {
        atomic_fetch_add(&s->failed, 1);
    }
}

/* Whether s's check refuses url: logged then, as a failed send is. */
static bool
urlRefused(const CorScheme* s, const char* url)
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
    CorSchemeEntry* s = urlScheme(n->url);
    Notice* notice;
    int rc;

    if (s == NULL || n->headerCount > COR_NOTIFY_HEADERS_MAX
        || (n->bodyLen > 0 && n->body == NULL)) {
        return -EINVAL;
    }
    if (s->s.check != NULL && urlRefused(&s->s, n->url)) {
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
