# SPDX-License-Identifier: Apache-2.0
"""The origin of corCacheStreamTest: an answer that comes in two halves,
held between them by the test, so that what the cache's waiters get of a
body still coming can be seen.

Why it exists: corCacheOrigin.py answers whole (or after a delay); here
the test must say when each half goes. GET /NAME?bytes=N: the origin
writes the file GATES/NAME.asked, waits until GATES/NAME.head exists,
sends the head (max-age=60, Content-Length N) and the first half of the
body (bytes "0123456789" over and over), waits until GATES/NAME.rest
exists, then sends the rest; or, with cut=1, closes the connection there
instead (an answer cut mid-body). GET /count?t=NAME says how often NAME
was asked. Arguments: the port, the gates' folder.
"""
import http.server
import os
import socketserver
import sys
import threading
import time
import urllib.parse

gates = sys.argv[2]
counts = {}
lock = threading.Lock()


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.005)


def body(n):
    return (b"0123456789" * (n // 10 + 1))[:n]


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        name = url.path.strip("/")
        if name == "count":
            with lock:
                text = str(counts.get(q.get("t", ""), 0)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        with lock:
            counts[name] = counts.get(name, 0) + 1
        open(os.path.join(gates, name + ".asked"), "w").close()
        wait_for(os.path.join(gates, name + ".head"))
        data = body(int(q.get("bytes", "1000")))
        half = len(data) // 2
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Cache-Control", "max-age=60")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[:half])
        self.wfile.flush()
        wait_for(os.path.join(gates, name + ".rest"))
        if q.get("cut") == "1":
            self.close_connection = True
            return
        self.wfile.write(data[half:])


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # cor closing a connection it no longer needs is no error


Server(("127.0.0.1", int(sys.argv[1])), Origin).serve_forever()
