/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The access log line of a request: the combined format of Apache and
 * nginx, or one JSON object a line (with where the request ran and how long
 * it took, which combined has no field for).
 */
#include "corHttpInt.h"

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

static const char*
headerOr(const HttpRequest* req, const char* name, size_t* len)
{
    const CorHeader* h = corRequestHeader(&req->r, name);

    *len = h ? h->valueLen : 1;
    return h ? h->value : "-";
}

void
httpAccessLog(const HttpConn* c, const HttpRequest* req, size_t bytes)
{
    static const char* const ranNames[] = { "inline", "coroutine", "worker" };
    const CorRequest* r = &req->r;
    char peer[64];
    char target[1024];
    char agent[512];
    char referer[512];
    char when[64];
    char line[4096];
    size_t len;
    const char* value;
    time_t now = time(NULL);
    bool json = strcmp(corAccessLogFormat(), "json") == 0;
    struct tm tm;
    int n;

    corPeerAddress(&c->peer, peer, sizeof(peer));
    quoted(target, sizeof(target), req->target, req->targetLen, json);
    value = headerOr(req, "User-Agent", &len);
    quoted(agent, sizeof(agent), value, len, json);
    value = headerOr(req, "Referer", &len);
    quoted(referer, sizeof(referer), value, len, json);
    gmtime_r(&now, &tm);
    if (json) {
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        n = snprintf(line, sizeof(line),
                     "{\"time\":\"%s\",\"remote\":\"%s\",\"method\":\"%.*s\","
                     "\"target\":\"%s\",\"status\":%d,\"bytes\":%zu,"
                     "\"ran\":\"%s\",\"handler\":\"%s\",\"ms\":%llu,"
                     "\"user_agent\":\"%s\"}\n",
                     when, peer, (int)r->methodLen, r->method, target,
                     r->status, bytes, ranNames[r->ran],
                     corRequestHandlerName(r),
                     (unsigned long long)(corEvNow(c->hl->loop) - r->startMs),
                     agent);
    } else {
        strftime(when, sizeof(when), "%d/%b/%Y:%H:%M:%S +0000", &tm);
        n = snprintf(line, sizeof(line),
                     "%s - - [%s] \"%.*s %s HTTP/1.%d\" %d %zu \"%s\" "
                     "\"%s\"\n", peer, when, (int)r->methodLen, r->method,
                     target, req->versionMinor, r->status, bytes,
                     referer, agent);
    }
    if (n > 0) {
        corAccessLogWrite(line, (size_t)n < sizeof(line) ? (size_t)n
                                                         : sizeof(line) - 1);
    }
}
