/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/2 client's connection: one nghttp2 session over a connection of
 * the connection layer (corConnOpen: TLS with ALPN h2 for https, prior
 * knowledge for http), its bytes through the connection kit.
 *
 * On a loop, every exchange of the loop to one peer (host, port, TLS and
 * its client context) is a stream of one connection, as the cor:// client
 * shares one: an exchange submits its request into the session (the
 * session's output goes to the kit's output buffer) and parks; the kit
 * writes as the socket takes it and reads every frame that comes, which
 * nghttp2 hands to the stream it belongs to (corHttp2ClientStream.c),
 * waking its exchange. The connect and the TLS handshake run in a
 * coroutine of their own, so that no exchange's cancel can take the
 * connection with it; requests queue in the output meanwhile. A GOAWAY
 * makes the connection take no new stream (the next exchange opens
 * another), the streams the server did not take (past its last stream id)
 * are closed as refused and may go again, and the connection closes once
 * its last stream did. A connection that fails fails each stream on it.
 *
 * Off the loops (a worker, blocking mode, a thread of the client's), an
 * exchange has a connection of its own, opened with its stream and closed
 * with it: its waits drive the session themselves, writing and reading
 * with poll() (the kit's corKitConnFlushWait and corKitConnReadWait), so
 * that nothing is shared between threads and nothing needs a lock.
 *
 * No HTTP/2 connection ever goes to the keep-alive pool: it is not
 * HTTP/1's to take.
 */
#include "corHttp2ClientInt.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define READ_ROOM 16384

/* One connection to a server: a loop's (shared, on its list; a GOAWAY
 * is its drain) or one exchange's (off the loops). Freed with its last
 * reference: the loop's list, its connector, each stream. */
struct CorHttp2Peer {
    CorKitPeer base; /* its server, state, references, bytes */
    bool onLoop;
    nghttp2_session* session;
    CorList streams;    /* open on the wire */
    CorEvSoon sendSoon; /* on a loop: streams or a body's piece to
                         * send before the loop sleeps */
    /* Off the loops, a stream whose body comes as it is read: its
     * request's eventfd, and an epoll set of it and the socket, which
     * the waits watch so that a piece goes up while the answer is
     * awaited. -1 when none. */
    CorHttp2Stream* bodyStream;
    int bodyFd;
    int epfd;
};

typedef CorHttp2Peer Peer;

/* ---- References and the end ---------------------------------------------- */

static void
peerFree(CorKitPeer* base)
{
    Peer* p = corContainerOf(base, Peer, base);

    if (p->onLoop) {
        corEvSoonStop(&p->sendSoon);
    }
    if (p->epfd >= 0) {
        close(p->epfd);
    }
    nghttp2_session_del(p->session);
    free(p);
}

static bool
peerDead(const Peer* p)
{
    return p->base.state == COR_KIT_PEER_DEAD;
}

static void
streamLetGo(Peer* p, CorHttp2Stream* s)
{
    corListRemove(&s->link);
    if (s->id > 0 && !peerDead(p)) {
        nghttp2_session_set_stream_user_data(p->session, s->id, NULL);
    }
}

/* The connection is gone: every stream on it fails with its failure. */
static void
peerFailed(CorKitPeer* base)
{
    Peer* p = corContainerOf(base, Peer, base);

    while (!corListEmpty(&p->streams)) {
        CorHttp2Stream* s = corContainerOf(corListFirst(&p->streams),
                                           CorHttp2Stream, link);

        corListRemove(&s->link);
        s->closed = true;
        if (!s->ended && s->failed == 0) {
            s->failed = base->failure;
            snprintf(s->why, sizeof(s->why), "%.255s", base->why);
        }
        corHttp2StreamWake(s);
    }
}

/* After a GOAWAY: closed once its last stream is. */
static bool
peerIdle(const CorKitPeer* base)
{
    return corListEmpty(&corContainerOf(base, const Peer, base)->streams);
}

/* ---- The session --------------------------------------------------------- */

/* What nghttp2 writes goes to the kit's output (flushed by the caller). */
static ssize_t
sessionWrite(nghttp2_session* session, const uint8_t* data, size_t len,
             int flags, void* user)
{
    Peer* p = user;

    (void)session;
    (void)flags;
    return corBufAppend(&p->base.k.out, data, len) == 0
               ? (ssize_t)len
               : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int
sessionFrame(nghttp2_session* session, const nghttp2_frame* f, void* user)
{
    Peer* p = user;

    if (f->hd.type == NGHTTP2_GOAWAY) {
        /* nghttp2 closes the streams past last_stream_id itself, each as
         * REFUSED_STREAM (the stream's close says it may go again). */
        if (p->base.state == COR_KIT_PEER_READY
            || p->base.state == COR_KIT_PEER_CONNECTING) {
            p->base.state = COR_KIT_PEER_CLOSING;
        }
        corKitPeerForget(&p->base);
        return 0;
    }
    if (f->hd.stream_id != 0) {
        CorHttp2Stream* s =
            nghttp2_session_get_stream_user_data(session, f->hd.stream_id);

        if (s != NULL) {
            corHttp2StreamFrame(s, f);
        }
    }
    return 0;
}

static int
sessionStreamClose(nghttp2_session* session, int32_t id, uint32_t code,
                   void* user)
{
    Peer* p = user;
    CorHttp2Stream* s = nghttp2_session_get_stream_user_data(session, id);

    if (s != NULL) {
        streamLetGo(p, s);
        corHttp2StreamEnd(s, code);
    }
    return 0;
}

/* The session, its SETTINGS queued: no push, the stream window; and the
 * connection's window opened wide. Returns 0 or -ENOMEM. */
static int
sessionNew(Peer* p)
{
    nghttp2_settings_entry settings[] = {
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
          COR_HTTP2_CLIENT_STREAM_WINDOW },
    };
    nghttp2_session_callbacks* cb = NULL;
    nghttp2_option* option = NULL;
    int rc = -ENOMEM;

    if (nghttp2_session_callbacks_new(&cb) != 0
        || nghttp2_option_new(&option) != 0) {
        goto failed;
    }
    nghttp2_session_callbacks_set_send_callback(cb, sessionWrite);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, sessionFrame);
    nghttp2_session_callbacks_set_on_header_callback(cb, corHttp2StreamField);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cb, corHttp2StreamData);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb,
                                                           sessionStreamClose);
    /* The window opens as the exchange reads (corHttp2PeerConsumed), not
     * as bytes come: a slow reader holds a bounded answer. */
    nghttp2_option_set_no_auto_window_update(option, 1);
    if (nghttp2_session_client_new2(&p->session, cb, p, option) == 0
        && nghttp2_submit_settings(p->session, NGHTTP2_FLAG_NONE, settings, 2)
               == 0
        && nghttp2_session_set_local_window_size(p->session, NGHTTP2_FLAG_NONE,
                                                 0,
                                                 COR_HTTP2_CLIENT_CONN_WINDOW)
               == 0) {
        rc = 0;
    }

failed:
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(cb);
    return rc;
}

/* What the session has to say, into the output. Returns 0, or -1 after
 * failing p. */
static int
sessionSend(Peer* p)
{
    int rc = nghttp2_session_send(p->session);

    if (rc != 0) {
        corKitPeerFail(&p->base, -EPROTO, nghttp2_strerror(rc));
        return -1;
    }
    return 0;
}

/* Every byte read, to the session. Returns 0, or -1 after failing p. */
static int
sessionTake(Peer* p)
{
    CorBuf* in = &p->base.k.in;
    ssize_t n = nghttp2_session_mem_recv(p->session, corBufHead(in),
                                         corBufPending(in));

    if (n < 0) {
        corKitPeerFail(&p->base, -EPROTO, nghttp2_strerror((int)n));
        return -1;
    }
    corBufConsume(in, corBufPending(in));
    return 0;
}

/* ---- On a loop: the kit drives it ---------------------------------------- */

static int
kitTake(CorKitConn* k)
{
    return sessionTake(corContainerOf(k, Peer, base.k));
}

/* Before each write on a loop: what the session has to say (SETTINGS
 * acks, PINGs, window updates, new streams). */
static int
peerSend(CorKitPeer* base)
{
    return sessionSend(corContainerOf(base, Peer, base));
}

static const CorKitOps kitOps = {
    .ready = corKitPeerReady,
    .take = kitTake,
    .end = corKitPeerEnd,
    .fail = corKitPeerBroken,
};

static const CorKitPeerOps peerOps = {
    .send = peerSend,
    .failed = peerFailed,
    .idle = peerIdle,
    .free = peerFree,
};

/* ---- Connecting ---------------------------------------------------------- */

/* A new peer for url, its session made. NULL without memory. */
static Peer*
peerNew(const CorClientRequest* req, const CorUrl* url, int connectTimeoutMs,
        bool onLoop, char* why, size_t whyLen)
{
    Peer* p = calloc(1, sizeof(*p));
    CorKitPeer* base;

    if (p == NULL) {
        snprintf(why, whyLen, "no memory for a connection");
        return NULL;
    }
    base = &p->base;
    corKitPeerInit(base, &peerOps, onLoop ? corEvLoopCurrent() : NULL,
                   onLoop ? &kitOps : NULL, url->host, url->port);
    base->k.readRoom = READ_ROOM;
    base->tls = strcmp(url->scheme, "https") == 0;
    base->tlsClient = req->tlsClient;
    base->named = req->tlsClient;
    base->alpn = "h2";
    base->connectTimeoutMs = connectTimeoutMs;
    p->onLoop = onLoop;
    p->bodyFd = p->epfd = -1;
    if (base->tls && base->tlsClient == NULL) {
        base->tlsClient = corConnTlsDefault("h2", why, whyLen);
    }
    if ((base->tls && base->tlsClient == NULL) || sessionNew(p) != 0) {
        if (base->tlsClient != NULL) {
            snprintf(why, whyLen, "no memory for an HTTP/2 session");
        }
        corKitPeerRelease(&p->base);
        return NULL;
    }
    return p;
}

/* The loop's peer for url, or a new one (connecting in a coroutine of its
 * own). A peer is shared only by requests naming the same TLS client (or
 * none): one opened with a custom client's certificate or trust must not
 * carry a request that asked for the default's checks. Returns it with a
 * reference for the caller, or NULL with *rc and why. */
static Peer*
loopPeerFor(const CorClientRequest* req, const CorUrl* url,
            int connectTimeoutMs, bool fresh, bool* reusedP, int* rc, char* why,
            size_t whyLen)
{
    bool tls = strcmp(url->scheme, "https") == 0;
    CorKitPeer* found = fresh ? NULL
                              : corKitPeerFind(&peerOps, url->host, url->port,
                                               tls, req->tlsClient);
    Peer* p;

    *reusedP = found != NULL;
    if (found != NULL) {
        return corContainerOf(found, Peer, base);
    }
    p = peerNew(req, url, connectTimeoutMs, true, why, whyLen);
    if (p == NULL) {
        *rc = -ENOMEM;
        return NULL;
    }
    *rc = corKitPeerStart(&p->base, why, whyLen);
    return *rc == 0 ? p : NULL;
}

/* A connection of the calling thread's exchange alone, connected. */
static Peer*
threadPeerFor(const CorClientRequest* req, const CorUrl* url,
              int connectTimeoutMs, int* rc, char* why, size_t whyLen)
{
    Peer* p = peerNew(req, url, connectTimeoutMs, false, why, whyLen);

    if (p == NULL) {
        *rc = -ENOMEM;
        return NULL;
    }
    p->base.conn = corKitPeerOpen(&p->base, rc, why, whyLen);
    if (p->base.conn == NULL) {
        corKitPeerRelease(&p->base);
        return NULL;
    }
    corKitConnAttach(&p->base.k, corConnTransport(p->base.conn));
    p->base.state = COR_KIT_PEER_READY;
    return p;
}

/* ---- Off the loops: the waits drive it ----------------------------------- */

/* A stream's body came on (its request's eventfd): its provider, if it
 * waited for bytes, goes on. */
static void
bodyResume(Peer* p, CorHttp2Stream* s)
{
    if (s->deferred && !s->closed && !peerDead(p)) {
        s->deferred = false;
        nghttp2_session_resume_data(p->session, s->id);
    }
}

/* Read what the socket has, or wait until it has some or the stream's
 * body has news. Returns the count, 0 at the peer's end, -EAGAIN for the
 * body's news, or -errno. May yield. */
static ssize_t
threadRead(Peer* p, uint64_t deadlineMs)
{
    ssize_t n = corKitConnReadWait(&p->base.k, 0);
    uint64_t wakes;
    int rc;

    if (n != -EAGAIN) {
        return n;
    }
    rc = corDeadlineWaitFd(p->epfd, POLLIN, deadlineMs);
    if (rc < 0) {
        return rc;
    }
    if (read(p->bodyFd, &wakes, sizeof(wakes)) > 0) {
        bodyResume(p, p->bodyStream);
    }
    return corKitConnReadWait(&p->base.k, 0);
}

/* One turn: what the session has goes out, then what comes is read, until
 * deadlineMs. Returns 0, -ETIMEDOUT or -ECANCELED (p failed for any other
 * end, which its streams say). May yield. */
static int
threadTurn(Peer* p, uint64_t deadlineMs)
{
    uint64_t now = corEvClockMs();
    int ms = deadlineMs == 0    ? -1
             : deadlineMs > now ? (int)(deadlineMs - now)
                                : 0;
    ssize_t n;
    int rc;

    if (sessionSend(p) != 0) {
        return 0;
    }
    rc = corKitConnFlushWait(&p->base.k, ms);
    if (rc == 0) {
        if (corBufReserve(&p->base.k.in, READ_ROOM) != 0) {
            corKitPeerFail(&p->base, -ENOMEM, "no memory to read");
            return 0;
        }
        n = p->epfd >= 0 ? threadRead(p, deadlineMs)
                         : corKitConnReadWait(&p->base.k, ms);
        if (n == -EAGAIN) {
            return 0; /* the body's news: the next turn sends */
        }
        rc = n > 0 ? 0 : n == 0 ? -ECONNRESET : (int)n;
    }
    if (rc == -ETIMEDOUT || rc == -ECANCELED) {
        return rc;
    }
    if (rc == -ECONNRESET) {
        corKitPeerFail(&p->base, rc, "the server closed the connection");
    } else if (rc < 0) {
        corKitPeerFail(&p->base, rc, strerror(-rc));
    } else if (sessionTake(p) == 0) {
        sessionSend(p);
    }
    return 0;
}

/* ---- Streams ------------------------------------------------------------- */

/* A loop's peer has new streams or a body's piece to send: they go
 * before the loop sleeps (not from inside the callback that brought a
 * piece), all of a turn's in one write. */
static void
sendDue(CorEvSoon* soon)
{
    Peer* p = corContainerOf(soon, Peer, sendSoon);

    corKitPeerHold(&p->base);
    corKitPeerFlush(&p->base);
    corKitPeerRelease(&p->base);
}

/* On the loop, after each piece of s's body came (or its end). */
static void
bodyNews(void* arg)
{
    CorHttp2Stream* s = arg;

    if (s->deferred) {
        bodyResume(s->p, s);
        corEvSoonStart(s->p->base.k.loop, &s->p->sendSoon, sendDue);
    }
}

/* Hear of the news of s's body: on a loop its request's watcher (the
 * request is of this loop: its handler runs here); off the loops, the
 * request's eventfd beside the socket in the waits' epoll set. A body
 * that came whole has none: its provider never waits. Returns 0 or
 * -errno with why. */
static int
bodyWatch(Peer* p, CorHttp2Stream* s, char* why, size_t whyLen)
{
    struct epoll_event ev = { .events = EPOLLIN };
    int fd;

    if (p->onLoop) {
        corRequestBodyWatch(s->bodyFrom, bodyNews, s);
        return 0;
    }
    fd = corRequestBodyWakeFd(s->bodyFrom);
    if (fd == -EINVAL) {
        return 0;
    }
    p->epfd = fd < 0 ? -1 : epoll_create1(EPOLL_CLOEXEC);
    if (p->epfd < 0 || epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) != 0
        || epoll_ctl(p->epfd, EPOLL_CTL_ADD, corConnTransport(p->base.conn)->fd,
                     &ev)
               != 0) {
        snprintf(why, whyLen, "no epoll set for a streamed body: %s",
                 strerror(errno));
        return -EMFILE;
    }
    p->bodyFd = fd;
    p->bodyStream = s;
    return 0;
}

/* Submit s's request on p. Returns 0, or -errno with why. */
static int
streamSubmit(Peer* p, CorHttp2Stream* s, const CorClientRequest* req,
             const CorUrl* url, char* why, size_t whyLen)
{
    nghttp2_data_provider body = { .read_callback = corHttp2StreamBodyRead };
    nghttp2_nv* nv;
    size_t count;
    int32_t id;

    if (corHttp2RequestFields(req, url, &nv, &count) != 0) {
        snprintf(why, whyLen, "no memory for a request");
        return -ENOMEM;
    }
    body.source.ptr = s;
    s->p = p;
    if (s->bodyFrom != NULL && bodyWatch(p, s, why, whyLen) != 0) {
        free(nv);
        return -EMFILE;
    }
    id = nghttp2_submit_request(p->session, NULL, nv, count,
                                req->bodyFrom != NULL || req->body != NULL
                                        || req->bodyLen > 0
                                    ? &body
                                    : NULL,
                                s);
    free(nv);
    if (id < 0) {
        snprintf(why, whyLen, "%s: %s", p->base.name, nghttp2_strerror(id));
        return id == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
    }
    s->id = id;
    corListInsert(&p->streams, &s->link);
    return 0;
}

int
corHttp2StreamOpen(const CorClientRequest* req, const CorUrl* url,
                   int connectTimeoutMs, bool fresh, CorHttp2Stream** sP,
                   bool* reusedP, char* why, size_t whyLen)
{
    bool loop = corRestMayPark();
    CorHttp2Stream* s = calloc(1, sizeof(*s));
    Peer* p;
    int rc = -ENOMEM;

    *sP = NULL;
    *reusedP = false;
    if (s == NULL
        || (req->bodyFrom == NULL && req->bodyLen > 0
            && (s->body = malloc(req->bodyLen)) == NULL)) {
        snprintf(why, whyLen, "no memory for a request");
        goto failed;
    }
    s->bodyFrom = req->bodyFrom;
    if (s->bodyFrom == NULL && req->bodyLen > 0) {
        memcpy(s->body, req->body, req->bodyLen);
        s->bodyLen = req->bodyLen;
    }
    p = loop ? loopPeerFor(req, url, connectTimeoutMs, fresh, reusedP, &rc, why,
                           whyLen)
             : threadPeerFor(req, url, connectTimeoutMs, &rc, why, whyLen);
    if (p == NULL) {
        goto failed;
    }
    rc = streamSubmit(p, s, req, url, why, whyLen);
    if (rc != 0) {
        corKitPeerRelease(&p->base);
        goto failed;
    }
    if (loop) {
        /* Every stream the loop opens in this turn goes in one write,
         * before it sleeps. */
        corEvSoonStart(p->base.k.loop, &p->sendSoon, sendDue);
    }
    *sP = s;
    return 0;

failed:
    if (s != NULL) {
        free(s->body);
        free(s);
    }
    return rc;
}

/* Whether s has something for its exchange: its head not taken yet,
 * body bytes, its end, a failure. */
static bool
streamNews(const CorHttp2Stream* s)
{
    return s->closed || s->ended || (s->head && !s->headTaken)
           || corBufPending(&s->data) > 0;
}

int
corHttp2StreamWait(CorHttp2Stream* s, uint64_t deadlineMs)
{
    Peer* p = s->p;
    int rc;

    if (!p->onLoop) {
        return streamNews(s) ? 0 : threadTurn(p, deadlineMs);
    }
    while (!streamNews(s)) {
        rc = corCoLoopParkUntil(&s->park, deadlineMs);
        if (rc < 0 && !streamNews(s)) {
            return rc;
        }
    }
    return 0;
}

void
corHttp2StreamWake(CorHttp2Stream* s)
{
    if (s->park != 0) {
        corCoLoopWake(s->park);
    }
}

void
corHttp2PeerConsumed(CorHttp2Peer* p, int32_t id, size_t n)
{
    if (peerDead(p) || n == 0) {
        return;
    }
    nghttp2_session_consume(p->session, id, n);
    if (p->onLoop) {
        if (sessionSend(p) == 0) {
            corKitConnFlushSoon(&p->base.k);
        }
    }
}

const char*
corHttp2StreamPeer(const CorHttp2Stream* s)
{
    return s->p->base.name;
}

void
corHttp2StreamClose(CorHttp2Stream* s)
{
    Peer* p;

    if (s == NULL) {
        return;
    }
    p = s->p;
    if (s->bodyFrom != NULL && p->onLoop) {
        corRequestBodyWatch(s->bodyFrom, NULL, NULL);
    }
    if (!s->closed) {
        streamLetGo(p, s);
        if (!peerDead(p)) {
            nghttp2_submit_rst_stream(p->session, NGHTTP2_FLAG_NONE, s->id,
                                      NGHTTP2_CANCEL);
        }
    }
    corHttp2PeerConsumed(p, s->id, corBufPending(&s->data));
    if (!p->onLoop) {
        corKitPeerFail(&p->base, -ECONNRESET, "closed with its exchange");
    } else {
        corKitPeerFlush(&p->base);
        corKitPeerRetire(&p->base);
    }
    corKitPeerRelease(&p->base);
    corBufFree(&s->fields);
    corBufFree(&s->trailers);
    corBufFree(&s->data);
    free(s->body);
    free(s);
}

void
corHttp2ClientLoopExit(void)
{
    corKitPeersStop(&peerOps);
}
