/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small HTTP/1.1 upstream for the client's tests, which answers each
 * path with one way of framing, failing or waiting (a thread a
 * connection, keep-alive unless the path closes):
 *
 *   /cl         200, Content-Length "hello"
 *   /chunked    200, chunked "hello world" in two chunks and a trailer
 *   /eof        200, no length: "to the end" and the connection's end
 *   /1xx        100 Continue, 103 Early Hints, then 200 "after 1xx"
 *   /204        204 with no body      /304   304 with a Content-Length 5
 *   /sleep?ms=N 200 "slept" after N ms
 *   /trickle?ms=N  the head at once, then one body byte every 100 ms for
 *                  N ms
 *   /die        a Content-Length of 100, 10 bytes, then the close
 *   /cut        a Content-Length of 5000, 3000 bytes, then the close
 *   /drop       200 "drop"; the next request on this connection is read
 *               and the connection closed without a byte
 *   /big?n=N    200, N bytes of 'x'
 *   /bad        a head with Content-Length and Transfer-Encoding
 *   /conns      200, the connections accepted so far
 *   /heads      200, the request heads read so far (this one's included,
 *               whether their bodies came or not)
 *   /posts      200, the POST requests read so far (answered or not)
 *   /cuts       200, the requests whose body ended short (the peer's end
 *               midway)
 *   /surplus    200 "ok" (HEAD: the head), then 20 ms later, on its own,
 *               a second answer nobody asked for (X-Test: evil, "EVIL")
 *   /stall?ms=N the status line, then the rest of the head N ms later
 *   /stall1xx?ms=N  100 Continue, then the answer N ms later
 *   /stallbody?ms=N the head and half the body, the rest N ms later
 *   /101        a 101 to websocket, asked for or not, then the close
 *   /who        200, this upstream's port ("port N"), after the delay
 *               /set gave (none at first)
 *   /health     the status /set gave (200 at first), "health"
 *   /set?health=S&delay=MS  sets them (each optional), 200 "set"
 *   /early?status=S  S (413 by default) with "early" and Connection:
 *               close, before a byte of the request's body is read, then
 *               the close (the unread body makes it a reset), as a server
 *               that refuses an upload does
 *   .../echo... 200, the request's head as it came, then the length and
 *               a checksum of its body (any size: it is read, not kept)
 *               and this upstream's port
 *
 * HEAD gets the head alone. Each answer has "X-Test: <path>". Usage:
 * corHttpUpstream PORTFILE [PORT] (PORT 0 or none: a free one); it writes
 * its port there once it serves and runs until it is killed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_uint conns;
static atomic_uint posts;
static atomic_uint cuts;
static atomic_uint heads;
static atomic_int healthStatus = 200;
static atomic_int whoDelayMs;
static int listenPort;

/* What a request's body was: it is summed as it is read, not kept. */
typedef struct {
    size_t len;
    uint32_t sum;
} BodySeen;

static void
bodySum(BodySeen* seen, const char* p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        seen->sum = seen->sum * 31 + (unsigned char)p[i];
    }
    seen->len += n;
}

static void
sendAll(int fd, const char* p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w <= 0) {
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void
sendText(int fd, const char* s)
{
    sendAll(fd, s, strlen(s));
}

/* A request's body after its head: the bytes the buffer holds past it,
 * then the socket's. */
typedef struct {
    int fd;
    const char* p;
    size_t left;
    char more[4096];
    size_t moreLen;
    size_t moreAt;
} BodyIn;

/* The next byte, or -1 at the peer's end. */
static int
bodyByte(BodyIn* in)
{
    if (in->left > 0) {
        in->left--;
        return (unsigned char)*in->p++;
    }
    if (in->moreAt == in->moreLen) {
        ssize_t n = recv(in->fd, in->more, sizeof(in->more), 0);

        if (n <= 0) {
            return -1;
        }
        in->moreLen = (size_t)n;
        in->moreAt = 0;
    }
    return (unsigned char)in->more[in->moreAt++];
}

/* A line, its CRLF dropped; false at the peer's end. */
static bool
bodyLine(BodyIn* in, char* line, size_t cap)
{
    size_t n = 0;
    int c;

    while ((c = bodyByte(in)) >= 0 && c != '\n') {
        if (c != '\r' && n + 1 < cap) {
            line[n++] = (char)c;
        }
    }
    line[n] = '\0';
    return c >= 0;
}

/* A chunked body, summed, its trailers skipped; false at the peer's end. */
static bool
chunkedRead(BodyIn* in, BodySeen* seen)
{
    char line[256];
    unsigned long size;

    while (bodyLine(in, line, sizeof(line))
           && (size = strtoul(line, NULL, 16)) > 0) {
        for (unsigned long i = 0; i < size; i++) {
            int c = bodyByte(in);
            char b = (char)c;

            if (c < 0) {
                return false;
            }
            bodySum(seen, &b, 1);
        }
        if (!bodyLine(in, line, sizeof(line))) {
            return false;
        }
    }
    do {
        if (!bodyLine(in, line, sizeof(line))) {
            return false;
        }
    } while (line[0] != '\0');
    return true;
}

/* One request head into buf (the body, if any, is read by its
 * Content-Length or its chunks, and summed). Returns false at the peer's
 * end. */
static bool
requestRead(int fd, char* buf, size_t cap, size_t* have, BodySeen* seen)
{
    char* end;
    const char* cl;
    const char* te;
    size_t bodyLen = 0;
    size_t headLen;
    size_t inBuf;
    char scratch[16384];

    for (;;) {
        buf[*have] = '\0';
        end = strstr(buf, "\r\n\r\n");
        if (end != NULL) {
            break;
        }
        ssize_t n = recv(fd, buf + *have, cap - 1 - *have, 0);

        if (n <= 0) {
            return false;
        }
        *have += (size_t)n;
    }
    headLen = (size_t)(end + 4 - buf);
    atomic_fetch_add(&heads, 1);
    *seen = (BodySeen){ 0 };
    if (strncmp(strchr(buf, ' ') + 1, "/early", 6) == 0) {
        buf[headLen - 2] = '\0';
        return true; /* answered unread, then closed */
    }
    te = strcasestr(buf, "\r\nTransfer-Encoding: chunked");
    if (te != NULL && te < end) {
        /* Bytes past the body that came with it are dropped: no client
         * pipelines behind a chunked body here. */
        BodyIn in = { .fd = fd, .p = buf + headLen, .left = *have - headLen };

        if (!chunkedRead(&in, seen)) {
            atomic_fetch_add(&cuts, 1);
            return false;
        }
        buf[headLen - 2] = '\0';
        memmove(buf + headLen - 1, in.p, in.left);
        *have = headLen - 1 + in.left;
        return true;
    }
    cl = strcasestr(buf, "\r\nContent-Length:");
    if (cl != NULL && cl < end) {
        bodyLen = strtoul(cl + 17, NULL, 10);
    }
    inBuf = *have - headLen < bodyLen ? *have - headLen : bodyLen;
    bodySum(seen, buf + headLen, inBuf);
    while (seen->len < bodyLen) {
        size_t want = bodyLen - seen->len;
        ssize_t n = recv(fd, scratch,
                         want < sizeof(scratch) ? want : sizeof(scratch), 0);

        if (n <= 0) {
            atomic_fetch_add(&cuts, 1);
            return false;
        }
        bodySum(seen, scratch, (size_t)n);
    }
    /* The head stays at the start, NUL-terminated; what follows is the
     * next request's, moved in place once this one is answered. */
    buf[headLen - 2] = '\0';
    memmove(buf + headLen - 1, buf + headLen + inBuf, *have - headLen - inBuf);
    *have = *have - inBuf - 1;
    return true;
}

static int
queryMs(const char* target, const char* key)
{
    const char* p = strstr(target, key);

    return p != NULL ? atoi(p + strlen(key)) : 0;
}

/* /stall, /stall1xx, /stallbody: an answer in two parts, ms= apart
 * (/stall last: the others start with it). */
static void
stallAnswer(int fd, const char* target)
{
    static const char* const parts[][3] = {
        { "/stall1xx", "HTTP/1.1 100 Continue\r\n\r\n",
          "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" },
        { "/stallbody", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nst",
          "ll" },
        { "/stall", "HTTP/1.1 ", "200 OK\r\nContent-Length: 0\r\n\r\n" },
    };

    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        if (strncmp(target, parts[i][0], strlen(parts[i][0])) == 0) {
            sendText(fd, parts[i][1]);
            usleep((useconds_t)queryMs(target, "ms=") * 1000);
            sendText(fd, parts[i][2]);
            return;
        }
    }
}

/* Answer one request; false when the connection is to close. */
static bool
answer(int fd, const char* head, const BodySeen* seen, bool* dropNext)
{
    char target[256] = "";
    char method[16] = "";
    char out[512];
    bool isHead;

    sscanf(head, "%15s %255s", method, target);
    isHead = strcmp(method, "HEAD") == 0;
    if (strncmp(target, "/cl", 3) == 0) {
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: cl\r\n"
                     "Content-Length: 5\r\n\r\n");
        if (!isHead) {
            sendText(fd, "hello");
        }
    } else if (strcmp(target, "/chunked") == 0) {
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: chunked\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n");
        if (!isHead) {
            sendText(fd, "5;ext=1\r\nhello\r\n");
            usleep(20000);
            sendText(fd, "6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
        }
    } else if (strcmp(target, "/eof") == 0) {
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: eof\r\n\r\nto the ");
        usleep(20000);
        sendText(fd, "end");
        return false;
    } else if (strcmp(target, "/1xx") == 0) {
        sendText(fd, "HTTP/1.1 100 Continue\r\n\r\n");
        usleep(20000);
        sendText(fd, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
                     "HTTP/1.1 200 OK\r\nX-Test: 1xx\r\n"
                     "Content-Length: 9\r\n\r\nafter 1xx");
    } else if (strcmp(target, "/204") == 0) {
        sendText(fd, "HTTP/1.1 204 No Content\r\nX-Test: 204\r\n\r\n");
    } else if (strcmp(target, "/304") == 0) {
        sendText(fd, "HTTP/1.1 304 Not Modified\r\nX-Test: 304\r\n"
                     "Content-Length: 5\r\n\r\n");
    } else if (strncmp(target, "/sleep", 6) == 0) {
        usleep((useconds_t)queryMs(target, "ms=") * 1000);
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: sleep\r\n"
                     "Content-Length: 5\r\n\r\nslept");
    } else if (strncmp(target, "/trickle", 8) == 0) {
        int n = queryMs(target, "ms=") / 100;

        snprintf(out, sizeof(out),
                 "HTTP/1.1 200 OK\r\nX-Test: trickle\r\n"
                 "Content-Length: %d\r\n\r\n",
                 n);
        sendText(fd, out);
        for (int i = 0; i < n; i++) {
            usleep(100000);
            sendText(fd, "t");
        }
    } else if (strcmp(target, "/die") == 0) {
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: die\r\n"
                     "Content-Length: 100\r\n\r\n0123456789");
        usleep(20000);
        return false;
    } else if (strcmp(target, "/cut") == 0) {
        char body[3000];

        memset(body, 'c', sizeof(body));
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: cut\r\n"
                     "Content-Length: 5000\r\n\r\n");
        sendAll(fd, body, sizeof(body));
        usleep(20000);
        return false;
    } else if (strcmp(target, "/drop") == 0) {
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: drop\r\n"
                     "Content-Length: 4\r\n\r\ndrop");
        *dropNext = true;
    } else if (strncmp(target, "/big", 4) == 0) {
        int n = queryMs(target, "n=");
        char* body = malloc((size_t)n + 1);

        snprintf(out, sizeof(out),
                 "HTTP/1.1 200 OK\r\nX-Test: big\r\n"
                 "Content-Length: %d\r\n\r\n",
                 n);
        sendText(fd, out);
        memset(body, 'x', (size_t)n);
        sendAll(fd, body, (size_t)n);
        free(body);
    } else if (strcmp(target, "/bad") == 0) {
        sendText(fd,
                 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
        return false;
    } else if (strcmp(target, "/surplus") == 0) {
        sendText(fd, isHead ? "HTTP/1.1 200 OK\r\nX-Test: surplus\r\n"
                              "Content-Length: 2\r\n\r\n"
                            : "HTTP/1.1 200 OK\r\nX-Test: surplus\r\n"
                              "Content-Length: 2\r\n\r\nok");
        usleep(20000);
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: evil\r\n"
                     "Content-Length: 4\r\n\r\nEVIL");
    } else if (strcmp(target, "/101") == 0) {
        sendText(fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: "
                     "websocket\r\nConnection: Upgrade\r\n\r\n");
        return false;
    } else if (strcmp(target, "/who") == 0) {
        char body[32];
        int n = snprintf(body, sizeof(body), "port %d", listenPort);

        usleep((useconds_t)atomic_load(&whoDelayMs) * 1000);
        snprintf(out, sizeof(out),
                 "HTTP/1.1 200 OK\r\nX-Test: who\r\n"
                 "Content-Length: %d\r\n\r\n%s",
                 n, body);
        sendText(fd, out);
    } else if (strcmp(target, "/health") == 0) {
        snprintf(out, sizeof(out),
                 "HTTP/1.1 %d Health\r\nX-Test: health"
                 "\r\nContent-Length: 6\r\n\r\nhealth",
                 atomic_load(&healthStatus));
        sendText(fd, out);
    } else if (strncmp(target, "/set", 4) == 0) {
        if (strstr(target, "health=") != NULL) {
            atomic_store(&healthStatus, queryMs(target, "health="));
        }
        if (strstr(target, "delay=") != NULL) {
            atomic_store(&whoDelayMs, queryMs(target, "delay="));
        }
        sendText(fd, "HTTP/1.1 200 OK\r\nX-Test: set\r\n"
                     "Content-Length: 3\r\n\r\nset");
    } else if (strncmp(target, "/early", 6) == 0) {
        int status = queryMs(target, "status=");

        snprintf(out, sizeof(out),
                 "HTTP/1.1 %d Early\r\nX-Test: early\r\n"
                 "Connection: close\r\nContent-Length: 6\r\n\r\nearly\n",
                 status > 0 ? status : 413);
        sendText(fd, out);
        return false;
    } else if (strncmp(target, "/stall", 6) == 0) {
        stallAnswer(fd, target);
    } else if (strcmp(target, "/posts") == 0 || strcmp(target, "/conns") == 0
               || strcmp(target, "/cuts") == 0
               || strcmp(target, "/heads") == 0) {
        atomic_uint* count = strcmp(target, "/posts") == 0   ? &posts
                             : strcmp(target, "/cuts") == 0  ? &cuts
                             : strcmp(target, "/heads") == 0 ? &heads
                                                             : &conns;
        char body[32];
        int n = snprintf(body, sizeof(body), "%u", atomic_load(count));

        snprintf(out, sizeof(out),
                 "HTTP/1.1 200 OK\r\nX-Test: %s\r\n"
                 "Content-Length: %d\r\n\r\n%s",
                 target + 1, n, body);
        sendText(fd, out);
    } else if (strstr(target, "/echo") != NULL) {
        char tail[160];
        int n = snprintf(tail, sizeof(tail),
                         "\r\nbody-length: %zu\r\n"
                         "body-sum: %u\r\nport: %d\r\n",
                         seen->len, (unsigned)seen->sum, listenPort);

        snprintf(out, sizeof(out),
                 "HTTP/1.1 200 OK\r\nX-Test: echo\r\n"
                 "Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
                 "Keep-Alive: timeout=5\r\nContent-Type: text/plain\r\n"
                 "Content-Length: %zu\r\n\r\n",
                 strlen(head) + (size_t)n);
        sendText(fd, out);
        sendText(fd, head);
        sendText(fd, tail);
    } else {
        sendText(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
    return true;
}

static void*
connServe(void* arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[65536];
    size_t have = 0;
    bool dropNext = false;
    BodySeen seen;

    while (requestRead(fd, buf, sizeof(buf), &have, &seen)) {
        size_t headLen = strlen(buf) + 1;

        if (strncmp(buf, "POST ", 5) == 0) {
            atomic_fetch_add(&posts, 1);
        }
        if (dropNext) {
            break;
        }
        if (!answer(fd, buf, &seen, &dropNext)) {
            break;
        }
        memmove(buf, buf + headLen, have - headLen);
        have -= headLen;
    }
    close(fd);
    return NULL;
}

int
main(int argc, char** argv)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    FILE* f;
    int fd;
    int one = 1;

    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: corHttpUpstream PORTFILE [PORT]\n");
        return 2;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)(argc == 3 ? atoi(argv[2]) : 0));
    if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0
        || listen(fd, 128) != 0) {
        perror("corHttpUpstream");
        return 1;
    }
    getsockname(fd, (struct sockaddr*)&addr, &len);
    f = fopen(argv[1], "w");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    listenPort = ntohs(addr.sin_port);
    fprintf(f, "%d\n", listenPort);
    fclose(f);
    for (;;) {
        pthread_t thread;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);

        if (c < 0) {
            continue;
        }
        atomic_fetch_add(&conns, 1);
        if (pthread_create(&thread, NULL, connServe, (void*)(intptr_t)c) != 0) {
            close(c);
            continue;
        }
        pthread_detach(thread);
    }
}
