# SPDX-License-Identifier: Apache-2.0
# A notification receiver for corNotifyRouteTest: python3's http.server on
# a free loopback port (written to PORTFILE once it listens), answering
# 204 to every request; each one's body goes to DIR/body.N and a line
# "N METHOD PATH CONTENT-TYPE LENGTH" to DIR/requests, N from 1 in the
# order they came.
import http.server
import os
import sys
import threading

folder, portFile = sys.argv[1], sys.argv[2]
lock = threading.Lock()
count = 0


class Receiver(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def record(self):
        global count
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            count += 1
            with open(os.path.join(folder, "body.%d" % count), "wb") as f:
                f.write(body)
            with open(os.path.join(folder, "requests"), "a") as f:
                f.write("%d %s %s %s %d\n" % (
                    count, self.command, self.path,
                    self.headers.get("Content-Type", "-"), len(body)))
        self.send_response(204)
        self.end_headers()

    do_POST = do_PUT = do_PATCH = do_DELETE = record

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
with open(portFile + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.rename(portFile + ".tmp", portFile)
server.serve_forever()
