#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The client of bench/forwardBench's waiting runs.

Opens COUNT connections to 127.0.0.1:PORT and writes one `GET PATH` on
each, then prints "held COUNT". With `hold` it then waits to be killed (the
server's memory is read meanwhile); the sockets linger with a zero timeout,
so that the exit resets them and leaves no TIME_WAIT. With `answer` it
reads every answer's status line, and prints "answered OK COUNT SECONDS":
how many were 200, and how long the last took from the first request.

Usage: forwardHold.py PORT COUNT PATH hold|answer
"""
import resource
import selectors
import signal
import socket
import struct
import sys
import time


def main():
    port, count, path, mode = (int(sys.argv[1]), int(sys.argv[2]),
                               sys.argv[3], sys.argv[4])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    request = ("GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % path).encode()
    linger = struct.pack("ii", 1, 0)
    socks = []
    start = time.monotonic()
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        s.connect(("127.0.0.1", port))
        s.sendall(request)
        s.setblocking(False)
        socks.append(s)
    print("held", count, flush=True)
    if mode == "hold":
        signal.pause()
        return
    sel = selectors.DefaultSelector()
    got = {}
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
        got[s] = b""
    ok = done = 0
    deadline = time.monotonic() + 60
    while done < count and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            data = s.recv(4096)
            got[s] += data
            if b"\r\n" in got[s] or not data:
                ok += got[s].startswith(b"HTTP/1.1 200")
                done += 1
                sel.unregister(s)
    print("answered %d %d %.2f" % (ok, count, time.monotonic() - start),
          flush=True)


if __name__ == "__main__":
    main()
