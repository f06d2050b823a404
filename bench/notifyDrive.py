#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The driver of bench/mqttBench's cor rounds.

Posts the testkit's `/write?url=URL&n=BATCH` to 127.0.0.1:PORT, the next
once fewer than BATCH of the scheme's notifications are in flight, until
COUNT, then waits until /metrics counts SENT + COUNT sent; prints the
messages per second from its first request. One process on one keep-alive
connection: a `curl` (and an `awk`) for every write and every look at
/metrics cost about 10 ms of CPU each, taken from the two cores the server
and the broker share, while `mosquitto_pub -l`, the peer, is one process.

Usage: notifyDrive.py PORT URL COUNT BATCH SCHEME SENT
"""
import http.client
import sys
import time
import urllib.parse


def metric(conn, name):
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    for line in body.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == name:
            return int(float(fields[1]))
    return 0


def main():
    port, url, count, batch, scheme, sent = (
        int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
        sys.argv[5], int(sys.argv[6]))
    inFlight = 'cor_notify_in_flight{scheme="%s"}' % scheme
    sentTotal = 'cor_notify_sent_total{scheme="%s"}' % scheme
    write = "/write?url=%s&n=%d" % (urllib.parse.quote(url, safe=":/"),
                                    batch)
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port)
    n = 0
    while n < count:
        conn.request("POST", write, body=b"x")
        conn.getresponse().read()
        n += batch
        while metric(conn, inFlight) >= batch:
            time.sleep(0.005)       # a look costs the server's loop too
    deadline = time.monotonic() + 60
    while metric(conn, sentTotal) < sent + n:
        if time.monotonic() > deadline:
            sys.exit("notifyDrive: %s did not reach %d" % (sentTotal,
                                                           sent + n))
        time.sleep(0.001)
    print("%.0f" % (n / (time.monotonic() - start)))


main()
