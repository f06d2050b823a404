# SPDX-License-Identifier: Apache-2.0
"""The origin the cache tests put cor, nginx and Varnish in front of.

Why it exists: each case of RFC 9111 needs an answer that says one thing
(max-age, Expires, no-store, Vary, an ETag ...) and a way to see whether
the cache asked the origin again. The query says what the answer carries:
cc= Cache-Control, expires= Expires in seconds from now, age= Age,
etag= ETag, lm= Last-Modified seconds ago, vary= Vary, cookie=1 a
Set-Cookie, status= the status, delay= ms before answering, bytes= a body
of that many bytes, cut= the connection closed after that many of them. Every answer's body starts with "n=COUNT" (how often
this target was asked, HEAD and GET alike) and says X-Origin-Count; a
request whose If-None-Match holds the etag, or whose If-Modified-Since is
not before lm, gets a 304 with the same fields. GET /count?t=TARGET says
how often TARGET was asked; GET /fail?t=TARGET makes TARGET's answers
500s (no fields) from then on; POST, PUT and DELETE answer 204 (status=
as said). Argument: the port.
"""
import email.utils
import http.server
import socketserver
import sys
import threading
import time
import urllib.parse

counts = {}
failing = set()
lock = threading.Lock()


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, head_only):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        if url.path == "/count":
            with lock:
                body = str(counts.get(q.get("t", ""), 0)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if url.path == "/fail":
            with lock:
                failing.add(q.get("t", ""))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with lock:
            n = counts.get(self.path, 0) + 1
            counts[self.path] = n
            failed = self.path in failing
        if failed:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if "delay" in q:
            time.sleep(int(q["delay"]) / 1000)
        status = int(q.get("status", "200"))
        fields = [("Content-Type", "text/plain")]
        if "cc" in q:
            fields.append(("Cache-Control", q["cc"]))
        if "expires" in q:
            fields.append(("Expires", email.utils.formatdate(
                time.time() + int(q["expires"]), usegmt=True)))
        if "age" in q:
            fields.append(("Age", q["age"]))
        if "etag" in q:
            fields.append(("ETag", '"%s"' % q["etag"]))
        lm = None
        if "lm" in q:
            lm = int(time.time()) - int(q["lm"])
            fields.append(("Last-Modified", email.utils.formatdate(lm, usegmt=True)))
        if "vary" in q:
            fields.append(("Vary", q["vary"]))
        if q.get("cookie") == "1":
            fields.append(("Set-Cookie", "session=%d" % n))
        fields.append(("X-Origin-Count", str(n)))
        inm = self.headers.get("If-None-Match")
        ims = self.headers.get("If-Modified-Since")
        fresh = False
        if inm is not None and "etag" in q:
            fresh = ('"%s"' % q["etag"]) in [t.strip().removeprefix("W/") for t in inm.split(",")]
        elif ims is not None and lm is not None:
            since = email.utils.parsedate_to_datetime(ims).timestamp()
            fresh = lm <= since
        if fresh and status == 200:
            self.send_response(304)
            for k, v in fields:
                if k != "Content-Type":
                    self.send_header(k, v)
            self.end_headers()
            return
        body = ("n=%d %s\n" % (n, self.headers.get("Accept-Language", ""))).encode()
        if "bytes" in q:
            body = (body * (int(q["bytes"]) // len(body) + 1))[: int(q["bytes"])]
        self.send_response(status)
        for k, v in fields:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head_only and "cut" in q:
            self.wfile.write(body[: int(q["cut"])])
            self.wfile.flush()
            self.close_connection = True
        elif not head_only:
            self.wfile.write(body)

    def do_GET(self):
        self.answer(False)

    def do_HEAD(self):
        self.answer(True)

    def change(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        self.send_response(int(q.get("status", "204")))
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = change
    do_PUT = change
    do_DELETE = change


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        # A cache that hangs up on an answer it no longer wants (a Range
        # case, a peer's test ending) is no error of the origin's.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


if __name__ == "__main__":
    Server(("127.0.0.1", int(sys.argv[1])), Origin).serve_forever()
