/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS transport: a connection's bytes through OpenSSL, for the server
 * side (corTlsServer.c makes it for an accepted socket) and the client side
 * (corTlsClient.c) alike, plus the client's handshake.
 *
 * Nothing here blocks. OpenSSL's WANT_READ and WANT_WRITE become EAGAIN,
 * and a server's handshake simply runs inside the first recv (or send) on
 * the loop that owns the connection. When a recv stops because the
 * handshake must write first and the socket is full, the transport says
 * so (corTransportWantsWrite): a protocol that waits edge-triggered for
 * input would otherwise never call recv again.
 *
 * recv goes on until the socket is drained or the caller's buffer is
 * full, never stopping at a record's end: a record read into OpenSSL's
 * buffer raises no further edge, so bytes left there would wait forever.
 * Drained is EAGAIN, or (saving that read, a third of a keep-alive
 * request's system calls) a read of the socket that came back shorter
 * than asked, with nothing left in OpenSSL: the queue was empty then, so
 * whatever comes next raises a new edge. The socket BIO's callback sees
 * the reads; a listener reads ahead, so its reads ask for more than a
 * record.
 *
 * send relies on SSL_MODE_ENABLE_PARTIAL_WRITE (a short count, as
 * write(2) gives) and SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER (a retry after
 * EAGAIN may come from a buffer that grew and moved). A file goes out as
 * pread() and SSL_write, a record at a time: a retry after EAGAIN reads
 * the same bytes again from the same offset, which is what OpenSSL asks of
 * a retried write.
 *
 * A server's connection whose first byte can start no TLS record is a
 * client speaking plain text: it is told apart before OpenSSL reads, so
 * that the protocol can answer it in plain text. Every close of an
 * established connection, and a protocol's shut of its sending side, says
 * close_notify first.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A file is sent in pieces of one TLS record's worth. */
#define FILE_PIECE 16384

static _Thread_local char filePiece[FILE_PIECE];
/* corTransportTlsAlpn's answer: the thread's, not each connection's (256
 * bytes a TLS connection, read once). */
static _Thread_local char alpnText[256];

static const CorTransportOps tlsOps;

/* OpenSSL reads the thread's error queue to explain a failed call, so it
 * must be empty before each; a peek is cheaper than a clear, and it is
 * nearly always empty. */
static inline void
errorsClear(void)
{
    if (ERR_peek_error() != 0) {
        ERR_clear_error();
    }
}

static CorTlsConn*
tlsConn(const CorTransport* t)
{
    return t->ops == &tlsOps ? t->data : NULL;
}

/*
 * What an SSL call that did not succeed means for a caller of recv or
 * send that already moved done bytes in this call: those bytes first
 * (the condition will come back at the next call), else -1 with errno
 * (EAGAIN for a wait), or 0 at a clean end of a read.
 */
static ssize_t
tlsResult(CorTlsConn* tc, int rc, size_t done, bool reading)
{
    int err = SSL_get_error(tc->ssl, rc);
    int sysErrno = errno;

    if (err == SSL_ERROR_WANT_WRITE) {
        /* Kept even when bytes were moved: the caller reads on after a
         * short count only at the socket's next edge, which must then be
         * a write edge. */
        tc->wantsWrite = reading;
    }
    if (done > 0 && err != SSL_ERROR_SSL) {
        return (ssize_t)done;
    }
    switch (err) {
    case SSL_ERROR_WANT_READ:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        tc->wantsWrite = reading;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        if (reading) {
            return 0;
        }
        errno = EPIPE;
        return -1;
    case SSL_ERROR_SYSCALL:
        tc->failed = true;
        errno = sysErrno != 0 ? sysErrno : ECONNRESET;
        return -1;
    default:
        /* A protocol error (a bad record, a failed handshake): the
         * connection is done, and OpenSSL's alert said so; no
         * close_notify follows. */
        if (!tc->failed) {
            char why[128];

            corTlsWhy(why, sizeof(why), "protocol error");
            corLog(COR_LOG_DEBUG, "tls: fd %d: %s", SSL_get_fd(tc->ssl), why);
        }
        tc->failed = true;
        if (done > 0) {
            return (ssize_t)done;
        }
        errno = EPROTO;
        return -1;
    }
}

/*
 * A server's first byte, peeked before OpenSSL reads anything: a client's
 * first TLS record is a handshake (0x16) or an SSLv2-style hello (the high
 * bit set), as nginx tells them apart. Anything else is a client speaking
 * plain text to a TLS port (http:// on an https listener): recv then
 * fails with EPROTO, having read nothing, so that the protocol can answer
 * in plain text (corTransportTlsPlainPeer). One peek per connection.
 * Returns 0 to read through OpenSSL, or -1 with errno.
 */
static int
firstByteCheck(CorTlsConn* tc, int fd)
{
    unsigned char byte;
    ssize_t n;

    if (!tc->plain) {
        n = recv(fd, &byte, 1, MSG_PEEK);
        if (n < 0 && errno == EAGAIN) {
            return -1;
        }
        /* The end or an error: OpenSSL's read says which. */
        tc->opened = n == 1 && (byte == 0x16 || (byte & 0x80) != 0);
        tc->plain = n == 1 && !tc->opened;
        if (tc->plain) {
            corLog(COR_LOG_DEBUG, "tls: fd %d: plain text on a TLS port", fd);
        }
    }
    if (tc->plain) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}

static ssize_t
tlsRecv(CorTransport* t, void* buf, size_t len)
{
    CorTlsConn* tc = t->data;
    size_t got = 0;

    if (!tc->opened && tc->client == NULL && firstByteCheck(tc, t->fd) != 0) {
        return -1;
    }
    tc->wantsWrite = false;
    while (got < len) {
        size_t n;
        int rc;

        errorsClear();
        errno = 0;
        tc->drained = false;
        rc = SSL_read_ex(tc->ssl, (char*)buf + got, len - got, &n);
        if (rc != 1) {
            return tlsResult(tc, rc, got, true);
        }
        got += n;
        if (tc->drained && !SSL_has_pending(tc->ssl)) {
            break;
        }
    }
    return (ssize_t)got;
}

/* Note whether a read of the socket came back short (see the top). */
static long
onBio(BIO* bio, int oper, const char* argp, size_t len, int argi, long argl,
      int ret, size_t* processed)
{
    (void)argp;
    (void)argi;
    (void)argl;
    if (oper == (BIO_CB_READ | BIO_CB_RETURN)) {
        CorTlsConn* tc = (CorTlsConn*)BIO_get_callback_arg(bio);

        tc->drained = ret > 0 && processed != NULL && *processed < len;
    }
    return ret;
}

static ssize_t
tlsSend(CorTransport* t, const void* buf, size_t len)
{
    CorTlsConn* tc = t->data;
    size_t n;
    int rc;

    errorsClear();
    errno = 0;
    rc = SSL_write_ex(tc->ssl, buf, len, &n);
    if (rc != 1) {
        return tlsResult(tc, rc, 0, false);
    }
    return (ssize_t)n;
}

static ssize_t
tlsSendFile(CorTransport* t, int fileFd, off_t* offset, size_t len)
{
    size_t want = len < FILE_PIECE ? len : FILE_PIECE;
    ssize_t got = pread(fileFd, filePiece, want, *offset);
    ssize_t n;

    if (got <= 0) {
        return got;
    }
    n = tlsSend(t, filePiece, (size_t)got);
    if (n > 0) {
        *offset += n;
    }
    return n;
}

/*
 * Say close_notify, once, on an established connection that met no fatal
 * error (after one, OpenSSL's alert said it already), so that the peer
 * reads an end and not a truncation: an OpenSSL 3 client reports
 * "unexpected eof" without it, whatever the answer before. It goes out
 * when the socket takes it at once; the peer's is never waited for.
 * Returns 0, or -EAGAIN when the socket had no room, -EPIPE when it is
 * gone.
 */
static int
closeNotify(CorTlsConn* tc)
{
    int rc;

    if (tc->failed || !SSL_is_init_finished(tc->ssl)
        || (SSL_get_shutdown(tc->ssl) & SSL_SENT_SHUTDOWN) != 0) {
        return 0;
    }
    errorsClear();
    rc = SSL_shutdown(tc->ssl);
    if (rc < 0) {
        rc = SSL_get_error(tc->ssl, rc) == SSL_ERROR_WANT_WRITE ? -EAGAIN
                                                                : -EPIPE;
    }
    ERR_clear_error();
    return rc < 0 ? rc : 0;
}

/* What a TLS connection holds besides its socket. */
static void
tlsConnFree(CorTlsConn* tc)
{
    SSL_free(tc->ssl);
    ERR_clear_error();
    free(tc->peer);
    free(tc);
}

/* Every close of an established connection says close_notify first, an
 * error's as much as an end's. The close never waits. */
static void
tlsClose(CorTransport* t)
{
    closeNotify(t->data);
    tlsConnFree(t->data);
    /* A coroutine of this loop may wait on it (a session's reader while
     * another closes): its wait ends now, and on io_uring its poll stops
     * holding the socket open. Elsewhere it is close(). */
    corCoLoopClose(t->fd);
    t->fd = -1;
    t->data = NULL;
}

static const CorTransportOps tlsOps = {
    .recv = tlsRecv,
    .send = tlsSend,
    .sendFile = tlsSendFile,
    .close = tlsClose,
};

int
corTlsTransportInit(CorTransport* t, int fd, SSL* ssl)
{
    CorTlsConn* tc = calloc(1, sizeof(*tc));

    if (tc == NULL || SSL_set_fd(ssl, fd) != 1) {
        free(tc);
        SSL_free(ssl);
        ERR_clear_error();
        return -ENOMEM;
    }
    tc->ssl = ssl;
    SSL_set_app_data(ssl, tc);
    BIO_set_callback_ex(SSL_get_rbio(ssl), onBio);
    BIO_set_callback_arg(SSL_get_rbio(ssl), (char*)tc);
    t->ops = &tlsOps;
    t->fd = fd;
    t->data = tc;
    return 0;
}

int
corTlsAlpnWire(const char* list, unsigned char* out, size_t cap)
{
    size_t len = 0;

    while (*list != '\0') {
        size_t n = strcspn(list, ",");

        while (n > 0 && list[0] == ' ') {
            list++;
            n--;
        }
        if (n == 0 || n > 255 || len + 1 + n > cap) {
            return -EINVAL;
        }
        out[len++] = (unsigned char)n;
        memcpy(out + len, list, n);
        len += n;
        list += n;
        if (*list == ',') {
            list++;
        }
    }
    return len > 0 ? (int)len : -EINVAL;
}

void
corTlsWhy(char* why, size_t whyLen, const char* fallback)
{
    unsigned long err = ERR_peek_last_error();
    const char* reason = err != 0 ? ERR_reason_error_string(err) : NULL;

    snprintf(why, whyLen, "%s", reason != NULL ? reason : fallback);
    ERR_clear_error();
}

/* ---- Public -------------------------------------------------------------- */

bool
corTransportWantsWrite(const CorTransport* t)
{
    const CorTlsConn* tc = tlsConn(t);

    return tc != NULL && tc->wantsWrite;
}

bool
corTransportPending(const CorTransport* t)
{
    const CorTlsConn* tc = tlsConn(t);

    /* Decrypted bytes only: SSL_has_pending also counts the raw bytes of
     * a record that has only partly come, which no read can return
     * before the rest arrives. */
    return tc != NULL && SSL_pending(tc->ssl) > 0;
}

int
corTransportShutWrite(CorTransport* t)
{
    CorTlsConn* tc = tlsConn(t);
    int rc = tc != NULL ? closeNotify(tc) : 0;

    if (rc == 0 && shutdown(t->fd, SHUT_WR) != 0) {
        rc = -errno;
    }
    return rc;
}

bool
corTransportTlsPlainPeer(CorTransport* t)
{
    CorTlsConn* tc = tlsConn(t);
    int fd = t->fd;

    if (tc == NULL || !tc->plain) {
        return false;
    }
    tlsConnFree(tc);
    corTransportPlain(t, fd);
    return true;
}

void
corTransportTlsKeepBuffers(CorTransport* t, bool keep)
{
    CorTlsConn* tc = tlsConn(t);

    if (tc == NULL) {
        return;
    }
    if (keep) {
        SSL_clear_mode(tc->ssl, SSL_MODE_RELEASE_BUFFERS);
        return;
    }
    SSL_set_mode(tc->ssl, SSL_MODE_RELEASE_BUFFERS);
    SSL_free_buffers(tc->ssl); /* refuses (0) while either holds bytes */
}

bool
corTransportTlsResumed(const CorTransport* t)
{
    const CorTlsConn* tc = tlsConn(t);

    return tc != NULL && SSL_session_reused(tc->ssl);
}

const char*
corTransportTlsAlpn(const CorTransport* t)
{
    CorTlsConn* tc = tlsConn(t);
    const unsigned char* name;
    unsigned len;

    if (tc == NULL) {
        return NULL;
    }
    SSL_get0_alpn_selected(tc->ssl, &name, &len);
    if (len == 0) {
        return NULL;
    }
    memcpy(alpnText, name, len);
    alpnText[len] = '\0';
    return alpnText;
}

/* Why a client's handshake failed: the verification's reason when that
 * failed ("certificate has expired", "hostname mismatch"), else OpenSSL's. */
static int
handshakeFailed(CorTlsConn* tc, int rc, char* why, size_t whyLen)
{
    int err = SSL_get_error(tc->ssl, rc);
    long verify = SSL_get_verify_result(tc->ssl);
    int sysErrno = errno;

    tc->failed = true;
    if (verify != X509_V_OK) {
        snprintf(why, whyLen, "%s", X509_verify_cert_error_string(verify));
        ERR_clear_error();
        return -EPROTO;
    }
    if (err == SSL_ERROR_SSL) {
        corTlsWhy(why, whyLen, "handshake failed");
        return -EPROTO;
    }
    ERR_clear_error();
    if (err == SSL_ERROR_SYSCALL && sysErrno != 0) {
        snprintf(why, whyLen, "%s", strerror(sysErrno));
        return -sysErrno;
    }
    snprintf(why, whyLen, "the peer closed the connection in the handshake");
    return -ECONNRESET;
}

int
corTransportTlsHandshake(CorTransport* t, int timeoutMs, char* why,
                         size_t whyLen)
{
    CorTlsConn* tc = tlsConn(t);
    uint64_t deadline = corEvClockMs()
                        + (uint64_t)(timeoutMs > 0 ? timeoutMs : 0);

    if (tc == NULL) {
        snprintf(why, whyLen, "not a TLS transport");
        return -EINVAL;
    }
    for (;;) {
        short events;
        short revents;
        int left = -1;
        int rc;

        ERR_clear_error();
        errno = 0;
        rc = SSL_do_handshake(tc->ssl);
        if (rc == 1) {
            return 0;
        }
        switch (SSL_get_error(tc->ssl, rc)) {
        case SSL_ERROR_WANT_READ:
            events = POLLIN;
            break;
        case SSL_ERROR_WANT_WRITE:
            events = POLLOUT;
            break;
        default:
            return handshakeFailed(tc, rc, why, whyLen);
        }
        if (timeoutMs >= 0) {
            uint64_t now = corEvClockMs();

            left = now < deadline ? (int)(deadline - now) : 0;
        }
        rc = left == 0 ? 0 : corRestWaitFd(t->fd, events, left, &revents);
        if (rc == 0) {
            snprintf(why, whyLen, "no handshake within %d ms", timeoutMs);
            return -ETIMEDOUT;
        }
        if (rc < 0) {
            int err = errno;

            snprintf(why, whyLen, "%s", strerror(err));
            return -err;
        }
    }
}
