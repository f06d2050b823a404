#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A real WebSocket client (Debian's python3-websockets) against cor's
websocket module: echo of text and binary messages (a 100 KB one and a
fragmented one), ping/pong, the close handshake, an unmasked frame closed
with 1002, messages over max_message (300 KiB, 16 MiB) closed with 1009.

    wsClient.py URL [CA_FILE]

Prints one line per check and "ALL OK" at the end; exits 1 at the first
failure."""

import asyncio
import base64
import os
import socket
import ssl
import struct
import sys
import urllib.parse

import websockets


def context(ca):
    if ca is None:
        return None
    ctx = ssl.create_default_context(cafile=ca)
    return ctx


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what
          + (": " + detail if detail else ""), flush=True)
    if not ok:
        sys.exit(1)


async def echoes(url, ctx):
    async with websockets.connect(url, ssl=ctx, max_size=None,
                                  compression=None) as ws:
        await ws.send("hello")
        check("text echo", await ws.recv() == "hello")
        binary = bytes(range(256))
        await ws.send(binary)
        check("binary echo", await ws.recv() == binary)
        big = os.urandom(100 * 1024)
        await ws.send(big)
        check("100 KB binary echo", await ws.recv() == big)
        text = "é" * 50000
        await ws.send(text)
        check("100 KB text echo", await ws.recv() == text)
        await ws.send(["frag", "mented ", "text"])
        check("fragmented text echo", await ws.recv() == "fragmented text")
        await ws.send([b"\x00\x01", b"\x02" * 70000])
        check("fragmented binary echo",
              await ws.recv() == b"\x00\x01" + b"\x02" * 70000)
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 3)
        check("ping answered with pong", True)
        await ws.close(code=1000, reason="bye")
        check("close handshake", ws.close_code == 1000,
              "the server closed with %s" % ws.close_code)


async def too_big(url, ctx, size):
    """A message of size bytes, past max_message: the server's 1009 comes
    while the client still sends, and the server reads on until the
    client's close, so the client reads the 1009, not a reset."""
    async with websockets.connect(url, ssl=ctx, max_size=None,
                                  compression=None) as ws:
        try:
            await ws.send(os.urandom(size))
            await asyncio.wait_for(ws.recv(), 30)
            check("too big closed with 1009", False, "echoed")
        except websockets.ConnectionClosed:
            pass
        await ws.wait_closed()
        check("%d KiB closed with 1009" % (size // 1024),
              ws.close_code == 1009, "got %s" % ws.close_code)


def raw_unmasked(url, ca):
    """A handshake by hand, then a frame without a mask: the server must
    answer with a close frame of status 1002."""
    u = urllib.parse.urlparse(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=5)
    if u.scheme == "wss":
        sock = context(ca).wrap_socket(sock, server_hostname=u.hostname)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                  "Sec-WebSocket-Version: 13\r\n\r\n"
                  % (u.path, u.hostname, key)).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(4096)
        if not more:
            break
        data += more
    head, _, data = data.partition(b"\r\n\r\n")
    check("raw handshake answered 101", head.startswith(b"HTTP/1.1 101"),
          head.decode(errors="replace"))
    sock.sendall(b"\x81\x05hello")      # FIN, text, no mask
    while len(data) < 4:
        more = sock.recv(4096)
        if not more:
            break
        data += more
    ok = len(data) >= 4 and data[0] == 0x88 and data[1] & 0x7F >= 2
    code = struct.unpack("!H", data[2:4])[0] if ok else None
    check("unmasked frame closed with 1002", code == 1002,
          "got %r" % data[:8])
    sock.close()


def main():
    url = sys.argv[1]
    ca = sys.argv[2] if len(sys.argv) > 2 else None
    ctx = context(ca)
    asyncio.run(echoes(url, ctx))
    asyncio.run(too_big(url, ctx, 300 * 1024))
    asyncio.run(too_big(url, ctx, 16 * 1024 * 1024))
    raw_unmasked(url, ca)
    print("ALL OK", flush=True)


main()
