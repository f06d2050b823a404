# SPDX-License-Identifier: Apache-2.0
"""Hold COUNT idle HTTP/2 connections to a TLS server on 127.0.0.1:PORT:
each a TLS handshake offering only h2, the client preface, an empty
SETTINGS, and the server's SETTINGS acknowledged; then nothing until stdin
closes. Prints "ready N" once all are open (N the ones that chose h2).
Usage: python3 h2Idle.py PORT COUNT"""
import socket
import ssl
import sys

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"


def frame_header(sock):
    """The next frame's (type, flags), its payload read and dropped."""
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    length = int.from_bytes(head[:3], "big")
    while length > 0:
        length -= len(sock.recv(length))
    return head[3], head[4]


def open_one(context, port):
    raw = socket.create_connection(("127.0.0.1", port))
    sock = context.wrap_socket(raw, server_hostname="localhost")
    if sock.selected_alpn_protocol() != "h2":
        raise ConnectionError("no h2")
    sock.sendall(PREFACE + SETTINGS)
    while True:
        kind, flags = frame_header(sock)
        if kind == 4 and not flags & 1:    # the server's SETTINGS
            sock.sendall(SETTINGS_ACK)
            return sock


def main():
    port, count = int(sys.argv[1]), int(sys.argv[2])
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    held = [open_one(context, port) for _ in range(count)]
    print("ready", len(held), flush=True)
    sys.stdin.read()


main()
