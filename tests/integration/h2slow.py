# SPDX-License-Identifier: Apache-2.0
#
# An HTTP/2 GET whose reader holds the server to one flow-control window
# until told to go on (corCacheMemTest.c): the server still has most of
# the answer to send, from wherever it keeps it, when the test changes
# what is around it (a reload, and evictions in the next generation).
#
#     h2slow.py PORT PATH OUT GO
#
# Prints "held" once the first window's bytes came, waits for the file GO
# to exist, then reads the rest into OUT and prints "done STATUS LENGTH".

import os
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

port, path, out, go = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
# Bounded waits: a test that failed before it said go must not leave
# this client behind it.
sock = socket.create_connection(("127.0.0.1", port), timeout=60)
conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
conn.initiate_connection()
conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16384})
# The authority curl sends: the same key as the test's requests.
conn.send_headers(1, [(":method", "GET"), (":path", path), (":scheme", "http"),
                      (":authority", "127.0.0.1:%d" % port)], end_stream=True)
sock.sendall(conn.data_to_send())
body = bytearray()
wire = bytearray()
status = "none"
held = False
ended = False
while not ended:
    data = sock.recv(65536)
    if not data:
        break
    # The draining generation's GOAWAY is left out: the h2 library closes
    # its connection at one, and the stream under way is still to come.
    wire += data
    frames = bytearray()
    while len(wire) >= 9 and len(wire) >= 9 + int.from_bytes(wire[:3], "big"):
        size = 9 + int.from_bytes(wire[:3], "big")
        if wire[3] != 7:
            frames += wire[:size]
        del wire[:size]
    for event in conn.receive_data(bytes(frames)):
        if isinstance(event, h2.events.ResponseReceived):
            status = dict(event.headers).get(b":status", b"").decode()
        elif isinstance(event, h2.events.DataReceived):
            body += event.data
            if held:
                conn.acknowledge_received_data(event.flow_controlled_length,
                                               event.stream_id)
            elif len(body) >= 16384:
                held = True
                print("held", flush=True)
                deadline = time.monotonic() + 120
                while not os.path.exists(go):
                    if time.monotonic() > deadline:
                        sys.exit("h2slow: no go within 120 s")
                    time.sleep(0.02)
                conn.acknowledge_received_data(len(body), event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            ended = True
    sock.sendall(conn.data_to_send())
with open(out, "wb") as f:
    f.write(body)
print("done %s %d" % (status, len(body)), flush=True)
