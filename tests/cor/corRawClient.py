#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A raw cor:// client (docs/cor-protocol.md) for the server's tests:
requests that cor-request cannot send on one connection, each its own
(headers many or large, bodies large), all in flight at once, with the
stream's names table kept as the spec says.

    corRawClient.py PORT REQUEST...

A REQUEST is "VERB PATH[ headers=N][ hsize=N[ hname=NAME]][ body=N]": N
headers "X-Hn: v" (hsize: one more, X-Big or NAME, of that many bytes), a
text body of N bytes.
The requests go out right after the HELLO, ids 1, 2, ..., sent from a
thread while the answers are read (a server that stops reading must not
stop us reading). Prints "ID STATUS" for each answer in id order, then
"closed" if the server closed before answering them all."""

import socket
import sys
import threading

MAGIC = bytes.fromhex("c04f5201")
HELLO = bytes.fromhex(
    "c04f5201010000000000000024000000"
    "0622320007766572" "73696f6e00120005" "7465726d73001200"
    "0a6e616d65737061" "63657300")
CHUNK = 1 << 20


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


class Encoder:
    """The names table of what we send: a name goes inline once (mode 2),
    then by its index (mode 3). Nothing here contains "://", so no string
    is split and no namespace is appended."""

    def __init__(self):
        self.names = {}

    def local(self, s):
        return varint(0) + varint(len(s)) + s + b"\0"

    def named(self, node_type, name):
        if name in self.names:
            return bytes([node_type | 3 << 3]) + varint(self.names[name])
        if len(name) <= 256 and len(self.names) < 8192:
            self.names[name] = len(self.names)
        return bytes([node_type | 2 << 3]) + self.local(name)

    def member(self, name, value):
        return self.named(1, name) + self.local(value)

    def request(self, rid, verb, path, headers, body_len):
        """The frame as pieces: head, then the body's bytes (body_len
        times 'a', sent in chunks, never built whole), then its end."""
        kids = self.member(b"verb", verb) + self.member(b"path", path)
        if headers:
            kids += self.named(6, b"headers")   # appended before its own
            inner = b"".join(self.member(n, v) for n, v in headers)
            kids += varint(len(inner)) + inner
        tail = b""
        if body_len:
            kids += self.named(1, b"text") + varint(0) + varint(body_len)
            tail = b"\0"
        size = len(kids) + body_len + len(tail)
        tree_head = bytes([6]) + varint(size) + kids
        length = len(tree_head) + body_len + len(tail)
        head = (MAGIC + bytes([3, 0, 0, 0]) + rid.to_bytes(4, "little")
                + length.to_bytes(4, "little"))
        return head + tree_head, body_len, tail


def parse(arg):
    words = arg.split()
    opts = dict(w.split("=") for w in words[2:])
    headers = [(b"X-H%d" % i, b"v") for i in range(int(opts.get("headers",
                                                              0)))]
    if "hsize" in opts:
        headers.append((opts.get("hname", "X-Big").encode(),
                        b"b" * int(opts["hsize"])))
    return words[0].encode(), words[1].encode(), headers, \
        int(opts.get("body", 0))


def send(sock, frames):
    try:
        sock.sendall(HELLO)
        for head, body_len, tail in frames:
            sock.sendall(head)
            chunk = b"a" * min(CHUNK, body_len)
            left = body_len
            while left > 0:
                sock.sendall(chunk[:left])
                left -= min(left, CHUNK)
            sock.sendall(tail)
    except OSError:
        pass


def recv_exact(sock, n):
    got = bytearray()
    while len(got) < n:
        b = sock.recv(n - len(got))
        if not b:
            return None
        got += b
    return bytes(got)


def read_varint(buf, pos):
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, pos


def status_of(tree):
    """The first member of a RESPONSE is its status (an int)."""
    _, pos = read_varint(tree, 1)           # the root's tag, its length
    tag = tree[pos]
    pos += 1
    if (tag >> 3) & 3 == 2:                 # a new name: ns, local part
        _, pos = read_varint(tree, pos)
        n, pos = read_varint(tree, pos)
        pos += n + 1
    else:
        _, pos = read_varint(tree, pos)
    if tag >> 5 != 7:
        return tag >> 5
    u, _ = read_varint(tree, pos)
    return (u >> 1) ^ -(u & 1)


def main():
    port = int(sys.argv[1])
    enc = Encoder()
    frames = [enc.request(i + 1, *parse(a))
              for i, a in enumerate(sys.argv[2:])]
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(60)
    threading.Thread(target=send, args=(sock, frames), daemon=True).start()
    answers = {}
    closed = False
    while len(answers) < len(frames):
        head = recv_exact(sock, 16)
        if head is None:
            closed = True
            break
        length = int.from_bytes(head[12:16], "little")
        tree = recv_exact(sock, length) if length else b""
        if tree is None:
            closed = True
            break
        if head[4] == 4:
            answers[int.from_bytes(head[8:12], "little")] = status_of(tree)
    for rid in sorted(answers):
        print(rid, answers[rid])
    if closed:
        print("closed")


main()
