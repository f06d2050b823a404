# SPDX-License-Identifier: Apache-2.0
#
# HTTP/2 load across a reload, counted from the wire (corHttp2Test.c starts
# cor and sends the SIGHUP): CONNS connections keep STREAMS GETs of PATH in
# flight for SECONDS, each reading its frames itself. A GOAWAY stops a
# connection opening streams, as RFC 9113 6.8 requires; once what it has
# in flight is over it is closed and a new one takes its place. A stream
# above a GOAWAY's last stream id, or reset with REFUSED_STREAM, was not
# processed (RFC 9113 8.7): it is asked again on the next connection. Any
# other end of a stream without a whole 200 answer is a loss.
#
#     h2reload.py PORT PATH SECONDS CONNS STREAMS
#
# The load goes on past SECONDS (up to a minute) for a client not yet
# answered on a connection opened after a GOAWAY.
#
# Prints "answered N lost N retried N goaways N after-goaway N" and a line
# per loss; exits 1 on a loss. h2load counts a request its own nghttp2
# queued after the GOAWAY came and then refused to send (never on the
# wire) as failed, which is why this does the counting.

import socket
import struct
import sys
import threading
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
WINDOW_UPDATE = 8
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
REFUSED_STREAM = 7
NO_LAST = 2 ** 31 - 1


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.answered = 0
        self.retried = 0
        self.goaways = 0
        self.afterGoaway = 0     # answered on a connection opened after one
        self.losses = []

    def add(self, **counts):
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def lose(self, why):
        with self.lock:
            self.losses.append(why)


tally = Tally()


class Conn:
    """One connection: streams kept in flight until a GOAWAY or the end."""

    def __init__(self, port, path, streams, afterGoaway, servedAfter):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.path = path
        self.want = streams
        self.afterGoaway = afterGoaway
        self.servedAfter = servedAfter  # [bool], the client's
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.buf = b""
        self.next = 1
        self.flying = {}            # stream id -> status seen (or None)
        self.last = None            # the GOAWAY's last stream id
        self.s.sendall(PREFACE + frame(SETTINGS, 0, 0)
                       + frame(WINDOW_UPDATE, 0, 0,
                               struct.pack(">I", 2 ** 30)))

    def open(self, count):
        out = b""
        for _ in range(count):
            block = self.enc.encode([(":method", "GET"), (":path", self.path),
                                     (":scheme", "http"),
                                     (":authority", "localhost")])
            out += frame(HEADERS, END_HEADERS | END_STREAM, self.next, block)
            self.flying[self.next] = None
            self.next += 2
        if out:
            self.s.sendall(out)

    def frames(self):
        """The next frames read (type, flags, stream, payload); [] at the
        close."""
        try:
            data = self.s.recv(65536)
        except OSError:
            data = b""
        if not data:
            return []
        self.buf += data
        got = []
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                break
            sid = int.from_bytes(self.buf[5:9], "big") & NO_LAST
            got.append((self.buf[3], self.buf[4], sid, self.buf[9:9 + n]))
            self.buf = self.buf[9 + n:]
        return got or [(None, 0, 0, b"")]

    def done(self, sid, ok, why):
        status = self.flying.pop(sid, None)
        if ok and status == "200":
            self.servedAfter[0] = self.servedAfter[0] or self.afterGoaway
            tally.add(answered=1, afterGoaway=1 if self.afterGoaway else 0)
        else:
            tally.lose("stream %d: %s (status %s)" % (sid, why, status))

    def refused(self, sid):
        """Not processed: the caller asks it again elsewhere."""
        self.flying.pop(sid, None)
        return 1

    def run(self, going, owed):
        """Ask the owed requests again and keep streams in flight while
        going() says so, or until a GOAWAY's streams are over; returns the
        requests owed after it."""
        retry = 0
        self.open(max(owed, self.want if going() else 0))
        while self.flying or (self.last is None and going()):
            got = self.frames()
            if not got:
                for sid in list(self.flying):
                    self.done(sid, False, "the connection closed")
                break
            for kind, flags, sid, payload in got:
                if kind == HEADERS:
                    for name, value in self.dec.decode(payload):
                        if name == ":status":
                            self.flying[sid] = value
                    if flags & END_STREAM:
                        self.done(sid, True, "")
                elif kind == DATA and flags & END_STREAM:
                    self.done(sid, True, "")
                elif kind == RST_STREAM:
                    code = int.from_bytes(payload[:4], "big")
                    if code == REFUSED_STREAM:
                        retry += self.refused(sid)
                    else:
                        self.done(sid, False, "reset, code %d" % code)
                elif kind == PING and not flags & ACK:
                    self.s.sendall(frame(PING, ACK, 0, payload))
                elif kind == SETTINGS and not flags & ACK:
                    self.s.sendall(frame(SETTINGS, ACK, 0))
                elif kind == GOAWAY:
                    self.last = int.from_bytes(payload[:4], "big") & NO_LAST
                    tally.add(goaways=1)
                    for id in [i for i in self.flying if i > self.last]:
                        retry += self.refused(id)
            if self.last is None and going():
                self.open(self.want - len(self.flying))
        self.s.close()
        return retry


def client(port, path, seconds, streams):
    """The load lasts SECONDS, and past them (up to a minute) until this
    client saw a GOAWAY and was answered on its next connection: on a
    loaded machine the reload's new generation came after 3 s of load."""
    until = time.time() + seconds
    hard = time.time() + 60
    owed = 0
    afterGoaway = False
    servedAfter = [False]

    def going():
        now = time.time()
        return now < until or (not servedAfter[0] and now < hard)

    while going() or owed > 0:
        try:
            conn = Conn(port, path, streams, afterGoaway, servedAfter)
        except OSError as e:
            tally.lose("a new connection: %s (%d owed)" % (e, owed))
            return
        owed = conn.run(going, owed)
        tally.add(retried=owed)
        afterGoaway = afterGoaway or conn.last is not None


def main():
    port, path = int(sys.argv[1]), sys.argv[2]
    seconds, conns, streams = float(sys.argv[3]), int(sys.argv[4]), \
        int(sys.argv[5])
    threads = [threading.Thread(target=client,
                                args=(port, path, seconds, streams))
               for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("answered %d lost %d retried %d goaways %d after-goaway %d"
          % (tally.answered, len(tally.losses), tally.retried,
             tally.goaways, tally.afterGoaway))
    for why in tally.losses:
        print("lost", why)
    sys.exit(1 if tally.losses else 0)


if __name__ == "__main__":
    main()
