/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The access log line of a request, whatever protocol brought it: written
 * by the core when its protocol says it was sent (corRequestSent), so that
 * HTTP, cor:// and MQTT requests are all logged, the same way. The combined
 * format of Apache and nginx, or one JSON object a line (with how it came,
 * where it ran, how long it took and whether its answer went out whole,
 * which combined has no field for). The bytes are those of the body, as
 * nginx's $body_bytes_sent and Apache's %b count them.
 */
#include "corCoreInt.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Copy s for a quoted field: quotes, backslashes and controls escaped,
 * a control as \xHH in the combined format (as nginx writes it) and as
 * \u00HH in JSON, which has no \x. */
static size_t
quoted(char* out, size_t size, const char* s, size_t len, bool json)
{
    size_t n = 0;

    for (size_t i = 0; i < len && n + 7 < size; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch == '"' || ch == '\\') {
            out[n++] = '\\';
            out[n++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            n += (size_t)snprintf(out + n, size - n,
                                  json ? "\\u%04x" : "\\x%02x", ch);
        } else {
            out[n++] = (char)ch;
        }
    }
    out[n] = '\0';
    return n;
}

static void
headerQuoted(const CorRequest* r, const char* name, char* out, size_t size,
             bool json)
{
    const CorHeader* h = corRequestHeader(r, name);

    quoted(out, size, h ? h->value : "-", h ? h->valueLen : 1, json);
}

/* The target as the client wrote it, or, from a protocol that keeps no
 * such text, the path and query. */
static void
targetQuoted(const CorRequest* r, char* out, size_t size, bool json)
{
    size_t n;

    if (r->target != NULL) {
        quoted(out, size, r->target, r->targetLen, json);
        return;
    }
    n = quoted(out, size, r->path, r->pathLen, json);
    if (r->query != NULL && n + 1 < size) {
        out[n++] = '?';
        quoted(out + n, size - n, r->query, r->queryLen, json);
    }
}

void
corAccessLogRequest(const CorRequest* r)
{
    static const char* const ranNames[] = { "inline", "coroutine", "worker" };
    const char* version = r->version != NULL ? r->version : "-";
    const char* remote = r->remote != NULL ? r->remote : "-";
    bool json = strcmp(corAccessLogFormat(), "json") == 0;
    char target[1024];
    char agent[512];
    char referer[512];
    char when[64];
    char line[4096];
    time_t now = time(NULL);
    struct tm tm;
    int n;

    targetQuoted(r, target, sizeof(target), json);
    headerQuoted(r, "User-Agent", agent, sizeof(agent), json);
    headerQuoted(r, "Referer", referer, sizeof(referer), json);
    gmtime_r(&now, &tm);
    if (json) {
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        n = snprintf(
            line, sizeof(line),
            "{\"time\":\"%s\",\"remote\":\"%s\",\"method\":\"%.*s\","
            "\"target\":\"%s\",\"protocol\":\"%s\",\"status\":%d,"
            "\"bytes\":%llu,\"complete\":%s,\"ran\":\"%s\","
            "\"handler\":\"%s\",\"ms\":%llu,\"user_agent\":\"%s\"%s%s%s}"
            "\n",
            when, remote, (int)r->methodLen, r->method, target, version,
            r->status, (unsigned long long)r->bodySent,
            r->cut ? "false" : "true", ranNames[r->ran],
            corRequestHandlerName(r),
            (unsigned long long)(corEvClockMs() - r->startMs), agent,
            r->cacheStatus != NULL ? ",\"cache\":\"" : "",
            r->cacheStatus != NULL ? r->cacheStatus : "",
            r->cacheStatus != NULL ? "\"" : "");
    } else {
        strftime(when, sizeof(when), "%d/%b/%Y:%H:%M:%S +0000", &tm);
        n = snprintf(line, sizeof(line),
                     "%s - - [%s] \"%.*s %s %s\" %d %llu \"%s\" \"%s\"\n",
                     remote, when, (int)r->methodLen, r->method, target,
                     version, r->status, (unsigned long long)r->bodySent,
                     referer, agent);
    }
    if (n > 0) {
        corAccessLogWrite(line, (size_t)n < sizeof(line) ? (size_t)n
                                                         : sizeof(line) - 1);
    }
}
