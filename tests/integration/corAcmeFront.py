# SPDX-License-Identifier: Apache-2.0
#
# A directory in front of pebble, for corAcmeTest: Debian's pebble (2.4)
# offers no ACME Renewal Information (RFC 9773), so this one serves
# pebble's directory with a renewalInfo of its own added, and answers it.
# It answers the first directory request with a 503, a Retry-After and an
# error document, as a directory under load does. Every other request of
# the order goes to pebble's own URLs, which its directory names.
#
#   corAcmeFront.py PORT CERT KEY PEBBLE_DIRECTORY PEBBLE_CA
#
# The first certificate asked about gets a window in the past (renew
# now), the others one a day ahead; each id asked is printed, as
# "renewal-info ID", and so is the listening.
import datetime
import http.server
import json
import ssl
import sys
import urllib.request

port, cert, key, upstream, upstreamCa = sys.argv[1:6]
asked = []
directoryAsked = [0]


def stamp(delta):
    t = datetime.datetime.now(datetime.timezone.utc) + delta
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Front(http.server.BaseHTTPRequestHandler):
    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/dir":
            directoryAsked[0] += 1
            if directoryAsked[0] == 1:
                self.answer(503, {
                    "type": "urn:ietf:params:acme:error:rateLimited",
                    "detail": "busy, come back later",
                }, [("Content-Type", "application/problem+json"),
                    ("Retry-After", "3")])
                return
            context = ssl.create_default_context(cafile=upstreamCa)
            with urllib.request.urlopen(upstream, context=context) as r:
                directory = json.load(r)
            directory["renewalInfo"] = (
                "https://127.0.0.1:%s/renewal-info" % port)
            self.answer(200, directory,
                        [("Content-Type", "application/json")])
            return
        if self.path.startswith("/renewal-info/"):
            certId = self.path[len("/renewal-info/"):]
            print("renewal-info", certId, flush=True)
            if not asked or asked[0] == certId:
                window = (datetime.timedelta(hours=-2),
                          datetime.timedelta(hours=-1))
            else:
                window = (datetime.timedelta(days=1),
                          datetime.timedelta(days=2))
            asked.append(certId)
            self.answer(200, {"suggestedWindow": {
                "start": stamp(window[0]), "end": stamp(window[1])}},
                [("Content-Type", "application/json"),
                 ("Retry-After", "21600")])
            return
        self.answer(404, {"type": "about:blank"})

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Front)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print("listening", flush=True)
server.serve_forever()
