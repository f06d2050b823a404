# SPDX-License-Identifier: Apache-2.0
"""grpcio peers for corGrpcTest (Debian's python3-grpcio, /usr/bin/python3).

server PORT          a gRPC server on 127.0.0.1:PORT with generic handlers
                     (no generated code; bytes in, bytes out) for the four
                     kinds of call, and one that fails with NOT_FOUND.
client TARGET [CA]   the calls through TARGET (h2c, or TLS with CA), one
                     line each: "<call> ok ..." or "<call> FAILED ...".
limit TARGET         calls whose request passes the proxy's body limit
                     (1 MiB): a client stream refused with
                     RESOURCE_EXHAUSTED that its server ran once, a
                     bidirectional one cut (CANCELLED) once its answer
                     began; lines as client's.
h1 PORT              one unary call as an HTTP/1.1 client: its raw answer
                     must be chunked with grpc-status in the trailers.
echo PORT            an HTTP/1.1 server that answers a POST with its body
                     (by length or chunked) and a GET /count with how many
                     POSTs came.
"""
import socket
import struct
import sys
import threading
import time
from concurrent import futures

import grpc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVICE = "cor.Test"
LONG_COUNT = 1000
LONG_SIZE = 4096
BIDI_COUNT = 20
WAIT_S = 10
# Past the proxy's limits.body_bytes (1 MiB) in 64 KiB messages.
BIG_COUNT = 40
BIG_SIZE = 65536

big_calls = 0
big_lock = threading.Lock()


def ident(b):
    return b


def unary(request, context):
    return b"echo:" + request


def server_stream(request, context):
    count, size = (int(x) for x in request.decode().split(":"))
    for i in range(count):
        head = b"%06d:" % i
        yield head + b"x" * (size - len(head))


def client_stream(requests, context):
    count = 0
    total = 0
    for message in requests:
        count += 1
        total += len(message)
    return b"%d:%d" % (count, total)


def bidi(requests, context):
    for message in requests:
        yield b"echo:" + message


def big(requests, context):
    global big_calls
    with big_lock:
        big_calls += 1
    return b"%d" % sum(1 for _ in requests)


def calls(request, context):
    return b"%d" % big_calls


def fail(request, context):
    context.abort(grpc.StatusCode.NOT_FOUND, "no such thing: " +
                  request.decode())


def serve(port):
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=ident, response_serializer=ident),
        "ServerStream": grpc.unary_stream_rpc_method_handler(
            server_stream, request_deserializer=ident,
            response_serializer=ident),
        "ClientStream": grpc.stream_unary_rpc_method_handler(
            client_stream, request_deserializer=ident,
            response_serializer=ident),
        "Bidi": grpc.stream_stream_rpc_method_handler(
            bidi, request_deserializer=ident, response_serializer=ident),
        "Fail": grpc.unary_unary_rpc_method_handler(
            fail, request_deserializer=ident, response_serializer=ident),
        "Big": grpc.stream_unary_rpc_method_handler(
            big, request_deserializer=ident, response_serializer=ident),
        "Calls": grpc.unary_unary_rpc_method_handler(
            calls, request_deserializer=ident, response_serializer=ident),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def method(channel, kind, name):
    make = getattr(channel, kind)
    return make("/%s/%s" % (SERVICE, name), request_serializer=ident,
                response_deserializer=ident)


def check_unary(channel):
    got = method(channel, "unary_unary", "Unary")(b"hello", timeout=WAIT_S)
    return got == b"echo:hello", repr(got)


def check_server_stream(channel):
    call = method(channel, "unary_stream", "ServerStream")
    count = 0
    total = 0
    for message in call(b"%d:%d" % (LONG_COUNT, LONG_SIZE), timeout=60):
        if not message.startswith(b"%06d:" % count):
            return False, "message %d out of order" % count
        count += 1
        total += len(message)
    return (count == LONG_COUNT and total == LONG_COUNT * LONG_SIZE,
            "%d messages %d bytes" % (count, total))


def check_client_stream(channel):
    call = method(channel, "stream_unary", "ClientStream")
    got = call(iter([b"m" * 1000] * 100), timeout=WAIT_S)
    return got == b"100:100000", repr(got)


def check_bidi(channel):
    """Each message waits for the echo of the one before: a hop that held
    the request body until its end would never echo, and the call ends by
    its deadline."""
    echoed = threading.Semaphore(0)
    stuck = []

    def requests():
        for i in range(BIDI_COUNT):
            yield b"m%d" % i
            if not echoed.acquire(timeout=WAIT_S):
                stuck.append(i)
                return

    got = []
    call = method(channel, "stream_stream", "Bidi")
    try:
        for message in call(requests(), timeout=WAIT_S + 5):
            got.append(message)
            echoed.release()
    except grpc.RpcError as e:
        return False, "%s after %d echoes (stuck at %s)" % (e.code(),
                                                            len(got), stuck)
    want = [b"echo:m%d" % i for i in range(BIDI_COUNT)]
    return got == want and not stuck, "%d echoes" % len(got)


def check_fail(channel):
    try:
        method(channel, "unary_unary", "Fail")(b"x", timeout=WAIT_S)
    except grpc.RpcError as e:
        return (e.code() == grpc.StatusCode.NOT_FOUND
                and e.details() == "no such thing: x",
                "%s %r" % (e.code(), e.details()))
    return False, "no error"


def check_big(channel):
    """A client stream past the limit: RESOURCE_EXHAUSTED with the
    proxy's message, never UNAVAILABLE (which grpcio retries), and its
    server ran it once."""
    try:
        method(channel, "stream_unary", "Big")(
            iter([b"b" * BIG_SIZE] * BIG_COUNT), timeout=WAIT_S)
        return False, "no error"
    except grpc.RpcError as e:
        code, details = e.code(), e.details()
    ran = method(channel, "unary_unary", "Calls")(b"", timeout=WAIT_S)
    return (code == grpc.StatusCode.RESOURCE_EXHAUSTED
            and "413" in details and ran == b"1",
            "%s %r, the server ran it %s times" % (code, details,
                                                   ran.decode()))


def check_big_bidi(channel):
    """A bidirectional call past the limit once its answer began: cut
    (CANCELLED), not refused as unprocessed."""
    echoes = []
    answered = threading.Event()

    def messages():
        # The rest only once the first echo came: the answer has begun
        # for sure before the body passes the limit (sent at once, the
        # 16th message could pass it before the upstream's head came
        # back, and a refusal before any answer is the other case).
        yield b"b" * BIG_SIZE
        answered.wait(WAIT_S)
        for _ in range(BIG_COUNT - 1):
            yield b"b" * BIG_SIZE

    try:
        for message in method(channel, "stream_stream", "Bidi")(
                messages(), timeout=WAIT_S):
            echoes.append(message)
            answered.set()
        return False, "no error after %d echoes" % len(echoes)
    except grpc.RpcError as e:
        return (e.code() == grpc.StatusCode.CANCELLED,
                "%s %r after %d echoes" % (e.code(), e.details(),
                                           len(echoes)))


def check_route_more(channel):
    """A client stream past the top level's limit (1 MiB) on a route whose
    own limits take 4 MiB: it comes whole."""
    got = method(channel, "stream_unary", "ClientStream")(
        iter([b"c" * BIG_SIZE] * BIG_COUNT), timeout=WAIT_S)
    return got == b"%d:%d" % (BIG_COUNT, BIG_COUNT * BIG_SIZE), repr(got)


def check_route_less(channel):
    """A unary call past its route's own 100 bytes: RESOURCE_EXHAUSTED with
    the proxy's 413, where the top level would take it."""
    try:
        method(channel, "unary_unary", "Unary")(b"u" * 200, timeout=WAIT_S)
        return False, "no error"
    except grpc.RpcError as e:
        return (e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                and "413" in e.details(), "%s %r" % (e.code(), e.details()))


def checks_run(channel, checks):
    for name, check in checks:
        start = time.monotonic()
        try:
            ok, what = check(channel)
        except Exception as e:          # a failure is a line, not a trace
            ok, what = False, repr(e)
        print("%s %s %s (%.0f ms)" % (name, "ok" if ok else "FAILED", what,
                                      1000 * (time.monotonic() - start)),
              flush=True)


def limit(target):
    channel = grpc.insecure_channel(target)
    checks_run(channel, [("limit", check_big), ("limit-bidi", check_big_bidi)])
    channel.close()


def route_limits(target):
    channel = grpc.insecure_channel(target)
    checks_run(channel, [("route-more", check_route_more),
                         ("route-less", check_route_less)])
    channel.close()


def client(target, ca):
    if ca:
        with open(ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        channel = grpc.secure_channel(target, creds)
    else:
        channel = grpc.insecure_channel(target)
    checks = [("unary", check_unary), ("server-stream", check_server_stream),
              ("client-stream", check_client_stream), ("bidi", check_bidi),
              ("status", check_fail)]
    checks_run(channel, checks)
    channel.close()


def h1(port):
    message = b"hello"
    body = b"\0" + struct.pack(">I", len(message)) + message
    head = ("POST /%s/Unary HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/grpc\r\nTE: trailers\r\n"
            "Content-Length: %d\r\nConnection: close\r\n\r\n"
            % (SERVICE, len(body))).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    s.sendall(head + body)
    answer = b""
    while True:
        part = s.recv(65536)
        if not part:
            break
        answer += part
    s.close()
    head, _, rest = answer.partition(b"\r\n\r\n")
    chunked = b"transfer-encoding: chunked" in head.lower()
    trailers = rest[rest.rfind(b"\r\n0\r\n") + 5:] if chunked else b""
    ok = (chunked and b"echo:hello" in rest
          and b"grpc-status: 0" in trailers.lower())
    print("h1 %s %r" % ("ok" if ok else "FAILED", answer), flush=True)


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    posts = 0

    def body(self):
        """The request's body, None when it was cut."""
        if "Content-Length" in self.headers:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            return body if len(body) == int(self.headers["Content-Length"]) \
                else None
        body = b""
        while True:
            line = self.rfile.readline()
            if not line:
                return None
            size = int(line.split(b";")[0], 16)
            piece = self.rfile.read(size + 2)
            if len(piece) != size + 2:
                return None
            if size == 0:
                return body
            body += piece[:-2]

    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        Echo.posts += 1
        body = self.body()
        if body is not None:
            self.answer(body)

    def do_GET(self):
        self.answer(b"%d" % Echo.posts)

    def log_message(self, *args):
        pass


def echo(port):
    server = ThreadingHTTPServer(("127.0.0.1", port), Echo)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]))
    elif sys.argv[1] == "echo":
        echo(int(sys.argv[2]))
    elif sys.argv[1] == "client":
        client(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "limit":
        limit(sys.argv[2])
    elif sys.argv[1] == "route-limits":
        route_limits(sys.argv[2])
    else:
        h1(int(sys.argv[2]))
