/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A Redis server's URL, as redis-cli and the other clients write it
 * (redis://[user[:password]@]host[:port][/db], rediss:// for TLS): the
 * core's URL parser takes it apart, and this reads what is Redis's in
 * it: the user and password to AUTH with (percent-decoded, so that a
 * password may hold '@' or ':'), the database to SELECT. Then the bytes
 * every connection sends first, and a command's, both RESP as hiredis
 * writes it (the writer is ours, held to hiredis's by the fuzzer: see
 * corRedisFormat).
 */
#include "corRedisInt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB_MOST 1000000

static int
hexValue(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* len bytes of in, %XX decoded, into out (cap bytes, NUL-terminated).
 * Returns 0, or -1: too long, a bad escape, a NUL. */
static int
decode(const char* in, size_t len, char* out, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)in[i];

        if (c == '%') {
            int hi = i + 2 < len ? hexValue(in[i + 1]) : -1;
            int lo = i + 2 < len ? hexValue(in[i + 2]) : -1;

            if (hi < 0 || lo < 0) {
                return -1;
            }
            c = hi * 16 + lo;
            i += 2;
        }
        if (c == 0 || n + 1 >= cap) {
            return -1;
        }
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 0;
}

/* The database of target ("/", "/3"), or -1. */
static long
dbOf(const char* target, size_t len)
{
    long db = 0;

    if (len == 0 || target[0] != '/') {
        return -1;
    }
    for (size_t i = 1; i < len; i++) {
        if (target[i] < '0' || target[i] > '9' || db > DB_MOST / 10) {
            return -1;
        }
        db = db * 10 + (target[i] - '0');
    }
    return db <= DB_MOST ? db : -1;
}

int
corRedisUrlParse(const char* text, RedisUrl* u, char* why, size_t whyLen)
{
    CorUrl url;
    long db;
    bool bracket;

    memset(u, 0, sizeof(*u));
    if (corUrlParse(text, &url, why, whyLen) != 0) {
        return -EINVAL;
    }
    if (strcmp(url.scheme, "redis") != 0 && strcmp(url.scheme, "rediss") != 0) {
        snprintf(why, whyLen, "expected redis:// or rediss://, got %s://",
                 url.scheme);
        return -EINVAL;
    }
    db = dbOf(url.target, url.targetLen);
    if (db < 0) {
        snprintf(why, whyLen,
                 "after the host, expected /DB (a database number up to "
                 "%d) or nothing, got '%.*s'",
                 DB_MOST, (int)(url.targetLen > 64 ? 64 : url.targetLen),
                 url.target);
        return -EINVAL;
    }
    if ((url.user != NULL
         && decode(url.user, url.userLen, u->user, sizeof(u->user)) != 0)
        || (url.password != NULL
            && decode(url.password, url.passwordLen, u->password,
                      sizeof(u->password))
                   != 0)) {
        snprintf(why, whyLen,
                 "the user or password is too long, or holds a bad %%XX "
                 "escape or a NUL");
        return -EINVAL;
    }
    u->hasPassword = url.password != NULL;
    /* redis://:password@host: a password alone, no user (AUTH password). */
    snprintf(u->host, sizeof(u->host), "%s", url.host);
    u->port = url.port != 0 ? url.port : COR_REDIS_PORT;
    u->tls = strcmp(url.scheme, "rediss") == 0;
    u->db = (unsigned)db;
    bracket = strchr(u->host, ':') != NULL; /* an IPv6 address */
    snprintf(u->name, sizeof(u->name), "%s://%s%s%s%s%s:%u/%u", url.scheme,
             u->user, u->user[0] != '\0' ? "@" : "", bracket ? "[" : "",
             u->host, bracket ? "]" : "", u->port, u->db);
    return 0;
}

/* The decimal digits of n at the end of buf (20 bytes hold any); returns
 * where they begin. */
static char*
digitsOf(size_t n, char* end)
{
    do {
        *--end = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    return end;
}

/* "<mark><n>\r\n" onto out, room made before. */
static void
countPut(CorBuf* out, char mark, size_t n)
{
    char buf[24];
    char* end = buf + sizeof(buf);
    char* at = digitsOf(n, end);
    uint8_t* w = out->data + out->len;

    *w++ = (uint8_t)mark;
    memcpy(w, at, (size_t)(end - at));
    w += end - at;
    *w++ = '\r';
    *w++ = '\n';
    out->len = (size_t)(w - out->data);
}

/*
 * A command as RESP writes it, an array of bulk strings: what hiredis's
 * redisFormatCommandArgv writes, byte for byte (fuzz/corRedisFuzz.c holds
 * them to it), written here straight into the output. hiredis's costs
 * about 1 600 instructions an INCR (sds strings grown by sdscatfmt, two
 * allocations; its sprintf form about as much), 43% of what a whole GET
 * /hello costs (callgrind); this one a tenth of that. hiredis still reads
 * every reply, the part that parses.
 */
int
corRedisFormat(const CorRedisCommand* cmd, CorBuf* out)
{
    size_t total = 16;

    if (cmd->argc < 1) {
        return -EINVAL;
    }
    for (int i = 0; i < cmd->argc; i++) {
        size_t len = cmd->argvLen != NULL ? cmd->argvLen[i]
                                          : strlen(cmd->argv[i]);

        total += len + 26; /* "$", 20 digits at most, 2 CRLFs */
    }
    if (corBufReserve(out, total) != 0) {
        return -ENOMEM;
    }
    countPut(out, '*', (size_t)cmd->argc);
    for (int i = 0; i < cmd->argc; i++) {
        size_t len = cmd->argvLen != NULL ? cmd->argvLen[i]
                                          : strlen(cmd->argv[i]);

        countPut(out, '$', len);
        memcpy(out->data + out->len, cmd->argv[i], len);
        memcpy(out->data + out->len + len, "\r\n", 2);
        out->len += len + 2;
    }
    return 0;
}

int
corRedisPrelude(const RedisUrl* u, CorBuf* out, unsigned* repliesP)
{
    char db[16];
    const char* auth[] = { "AUTH", u->user, u->password };
    const char* select[] = { "SELECT", db };
    int rc = 0;

    *repliesP = 0;
    if (u->hasPassword) {
        /* AUTH user password (Redis 6's ACL), or AUTH password. */
        rc = u->user[0] != '\0'
                 ? corRedisFormat(&(CorRedisCommand){ 3, auth, NULL }, out)
                 : corRedisFormat(&(CorRedisCommand){ 2,
                                                      (const char* const[]){
                                                          "AUTH", u->password },
                                                      NULL },
                                  out);
        *repliesP += 1;
    }
    if (rc == 0 && u->db != 0) {
        snprintf(db, sizeof(db), "%u", u->db);
        rc = corRedisFormat(&(CorRedisCommand){ 2, select, NULL }, out);
        *repliesP += 1;
    }
    return rc;
}
