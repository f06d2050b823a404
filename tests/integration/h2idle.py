# SPDX-License-Identifier: Apache-2.0
"""Idle HTTP/2 connections, what they cost and that they still serve:
COUNT connections to 127.0.0.1:PORT (MODE tls: h2 by ALPN; h2c: prior
knowledge), each the preface and the SETTINGS both ways, then nothing for
QUIET seconds; the resident memory of PID (the server's process that holds
them) before and after, per connection, printed as "rss_per_conn BYTES";
then a GET /hello on every one of them, printed as "served N" (those that
answered 200 with the hello body); then QUIET seconds more and the same
per connection again, now that each served a stream, printed as
"rss_after_request BYTES". corHttp2Test judges the three lines.
Usage: python3 h2idle.py MODE PORT COUNT PID QUIET"""
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def pump(sock, conn, until):
    """Read and feed conn until until(events) says so."""
    while True:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        events = conn.receive_data(data)
        pending = conn.data_to_send()
        if pending:
            sock.sendall(pending)
        if until(events):
            return events


def open_one(mode, port, context):
    sock = socket.create_connection(("127.0.0.1", port))
    if mode == "tls":
        sock = context.wrap_socket(sock, server_hostname="localhost")
        if sock.selected_alpn_protocol() != "h2":
            raise ConnectionError("no h2")
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    pump(sock, conn, lambda events: any(
        isinstance(e, h2.events.RemoteSettingsChanged) for e in events))
    return sock, conn


def served(sock, conn):
    stream = conn.get_next_available_stream_id()
    conn.send_headers(stream, [(":method", "GET"), (":path", "/hello"),
                               (":scheme", "https"),
                               (":authority", "localhost")],
                      end_stream=True)
    sock.sendall(conn.data_to_send())
    status, body = None, b""
    while True:
        for e in pump(sock, conn, lambda events: True):
            if isinstance(e, h2.events.ResponseReceived):
                status = dict(e.headers).get(b":status")
            elif isinstance(e, h2.events.DataReceived):
                body += e.data
                conn.acknowledge_received_data(len(e.data), stream)
            elif isinstance(e, h2.events.StreamEnded):
                return status == b"200" and body == b"hello, world\n"


def main():
    mode, port, count, pid = (sys.argv[1], int(sys.argv[2]),
                              int(sys.argv[3]), int(sys.argv[4]))
    quiet = float(sys.argv[5])
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    before = rss_bytes(pid)
    held = [open_one(mode, port, context) for _ in range(count)]
    time.sleep(quiet)
    print("rss_per_conn", (rss_bytes(pid) - before) // count, flush=True)
    print("served", sum(served(sock, conn) for sock, conn in held),
          flush=True)
    time.sleep(quiet)
    print("rss_after_request", (rss_bytes(pid) - before) // count,
          flush=True)


main()
