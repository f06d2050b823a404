# SPDX-License-Identifier: Apache-2.0
"""RFC 9111's cases, side by side, for each cache in front of one origin.

Why it exists: corCacheTest puts cor's cache, nginx's proxy_cache and
Varnish in front of the same origin (corCacheOrigin.py) and runs every
case against each, so that where cor differs from them is seen and said
(docs/cache.md's table is this script's output). Each case asks one
cache a few times and says what happened: how often the origin was
asked, and what the client saw. The expected column is what RFC 9111
asks of a shared cache; cor must give it (the exit status says whether it
did), the peers are only reported.

Usage: corCacheCompare.py ORIGIN_PORT NAME=PORT [NAME=PORT ...]
(a NAME of cor is held to the expected column).
"""
import concurrent.futures
import http.client
import sys
import time
import urllib.parse

ORIGIN = int(sys.argv[1])
CACHES = [(a.split("=")[0], int(a.split("=")[1])) for a in sys.argv[2:]]


def ask(port, method, target, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request(method, target, headers=headers or {})
    r = c.getresponse()
    body = r.read().decode(errors="replace")
    fields = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, fields, body


def word(body):
    """The body's first word (the origin's n=COUNT), on one line."""
    return (body.split() or ["(empty)"])[0]


def count(target):
    _, _, body = ask(ORIGIN, "GET", "/count?t=" + urllib.parse.quote(target, safe=""))
    return int(body)


class Case:
    def __init__(self, name, query, expected, run=None, path="c"):
        self.name, self.query, self.expected = name, query, expected
        self.run_fn = run or Case.twice
        self.path = path

    def target(self, cache):
        return "/c/%s/%s?%s" % (cache, self.path, self.query)

    @staticmethod
    def twice(port, t):
        ask(port, "GET", t)
        ask(port, "GET", t)
        return "origin %d" % count(t)


def run_seq(*steps):
    """A case that runs steps (method, headers, sleep) and reports the
    origin's count and the last answer's status and body's first word."""
    def run(port, t):
        last = None
        for method, headers, pause in steps:
            if pause:
                time.sleep(pause)
            last = ask(port, method, t, headers)
        return "origin %d, %d %s" % (count(t), last[0], word(last[2]))
    return run


def cookie_case(port, t):
    ask(port, "GET", t)
    _, fields, _ = ask(port, "GET", t)
    return "origin %d, cookie %s" % (count(t), "seen" if "set-cookie" in fields and fields["set-cookie"] == "session=1" else "own")


def vary_case(port, t):
    seen = []
    for lang in ("en", "fr", "en", "fr"):
        _, _, body = ask(port, "GET", t, {"Accept-Language": lang})
        seen.append(" ".join(body.split()[:2]))
    return "origin %d, %s" % (count(t), " ".join(seen))


def age_case(port, t):
    ask(port, "GET", t)
    time.sleep(1.1)
    _, fields, _ = ask(port, "GET", t)
    age = fields.get("age", "none")
    # 1.1 s apart: a cache that counts whole seconds of the clock may say
    # 2 (stored at x.95, asked at x+2.05); that is right too.
    return "origin %d, Age %s" % (count(t), "1" if age in ("1", "2") else age)


def status_case(port, t):
    _, a, _ = ask(port, "GET", t)
    _, b, _ = ask(port, "GET", t)
    return "miss %s, hit %s" % (a.get("cache-status", "none"), b.get("cache-status", "none"))


def invalidate_case(method):
    def run(port, t):
        ask(port, "GET", t)
        ask(port, method, t)
        ask(port, "GET", t)
        return "origin %d" % count(t)
    return run


def head_case(port, t):
    ask(port, "GET", t)
    status, fields, _ = ask(port, "HEAD", t)
    return "origin %d, HEAD %d length %s" % (count(t), status, fields.get("content-length", "none"))


def refresh_case(port, t):
    ask(port, "GET", t)
    time.sleep(2.1)
    status, _, body = ask(port, "GET", t)
    third = ask(port, "GET", t)
    return "origin %d, then %d %s, then %s" % (count(t), status, word(body), word(third[2]))


def collapse_case(port, t):
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        bodies = list(pool.map(lambda _: word(ask(port, "GET", t)[2]), range(20)))
    return "origin %d for 20, %d answers n=1" % (count(t), bodies.count("n=1"))


def only_if_cached(port, t):
    status, _, _ = ask(port, "GET", t, {"Cache-Control": "only-if-cached"})
    return "%d, origin %d" % (status, count(t))


def swr_case(port, t):
    ask(port, "GET", t)
    time.sleep(2.1)
    _, _, stale = ask(port, "GET", t)
    # The refresh runs beside the answer: given a moment to land.
    for _ in range(50):
        if count(t) >= 2:
            break
        time.sleep(0.05)
    time.sleep(0.2)
    _, _, fresh = ask(port, "GET", t)
    return "then %s, origin %d, then %s" % (word(stale), count(t), word(fresh))


def sie_case(port, t):
    ask(port, "GET", t)
    ask(ORIGIN, "GET", "/fail?t=" + urllib.parse.quote(t, safe=""))
    time.sleep(2.1)
    status, _, body = ask(port, "GET", t)
    return "origin %d, %d %s" % (count(t), status, word(body))


def range_case(port, t):
    ask(port, "GET", t)
    status, fields, body = ask(port, "GET", t, {"Range": "bytes=0-1"})
    return "origin %d, %d %s %s" % (count(t), status, body.strip(), fields.get("content-range", "none"))


AUTH = {"Authorization": "Basic dTpw"}

CASES = [
    Case("max-age=60", "cc=max-age=60", "origin 1"),
    Case("s-maxage=60, max-age=0 (s-maxage wins)", "cc=s-maxage=60,max-age=0", "origin 1"),
    Case("Expires in 60 s", "expires=60", "origin 1"),
    Case("max-age=60 with Age: 100 (already stale)", "cc=max-age=60&age=100", "origin 2"),
    Case("no-store", "cc=no-store,max-age=60", "origin 2"),
    Case("private", "cc=private,max-age=60", "origin 2"),
    Case("no-cache with an ETag (revalidated each time)", "cc=no-cache&etag=x",
         "origin 2, 200 n=1", run_seq(("GET", None, 0), ("GET", None, 0))),
    Case("Authorization, max-age=60", "cc=max-age=60", "origin 2, 200 n=2",
         run_seq(("GET", AUTH, 0), ("GET", AUTH, 0)), path="auth"),
    Case("Authorization, public, max-age=60", "cc=public,max-age=60", "origin 1, 200 n=1",
         run_seq(("GET", AUTH, 0), ("GET", AUTH, 0)), path="authpub"),
    Case("Set-Cookie with max-age=60", "cc=max-age=60&cookie=1", "origin 2, cookie own", cookie_case),
    Case("Vary: Accept-Language (en fr en fr)", "cc=max-age=60&vary=Accept-Language",
         "origin 2, n=1 en n=2 fr n=1 en n=2 fr", vary_case),
    Case("Vary: * (never reused)", "cc=max-age=60&vary=*", "origin 2"),
    Case("Age on a hit 1 s later", "cc=max-age=60", "origin 1, Age 1", age_case, path="age"),
    Case("Cache-Status (RFC 9211)", "cc=max-age=60",
         "miss edge; fwd=uri-miss; stored, hit edge; hit; ttl=60", status_case, path="status"),
    Case("POST invalidates", "cc=max-age=60", "origin 2", invalidate_case("POST"), path="post"),
    Case("DELETE invalidates", "cc=max-age=60", "origin 2", invalidate_case("DELETE"),
         path="delete"),
    Case("HEAD from a stored GET", "cc=max-age=60", "origin 1, HEAD 200 length 5", head_case, path="head"),
    Case("Range bytes=0-1 of a stored answer", "cc=max-age=60", "origin 1, 206 n= bytes 0-1/5",
         range_case, path="range"),
    Case("304 refreshes (max-age=1, ETag; 2 s later)", "cc=max-age=1&etag=r",
         "origin 2, then 200 n=1, then n=1", refresh_case, path="refresh"),
    Case("500 without freshness", "status=500", "origin 2"),
    Case("500 with max-age=60", "status=500&cc=max-age=60", "origin 1"),
    Case("404 with max-age=60", "status=404&cc=max-age=60", "origin 1"),
    Case("no validators, no freshness", "x=1", "origin 2"),
    Case("Last-Modified 1000 s ago (heuristic)", "lm=1000", "origin 1"),
    Case("request no-cache (revalidate)", "cc=max-age=60", "origin 2, 200 n=2",
         run_seq(("GET", None, 0), ("GET", {"Cache-Control": "no-cache"}, 0)), path="reqnocache"),
    Case("request max-age=0 (revalidate)", "cc=max-age=60", "origin 2, 200 n=2",
         run_seq(("GET", None, 0), ("GET", {"Cache-Control": "max-age=0"}, 0)), path="reqmaxage"),
    Case("only-if-cached, not stored", "cc=max-age=60", "504, origin 0", only_if_cached, path="oic"),
    Case("stale-while-revalidate=30 (max-age=1; 2 s later)", "cc=max-age=1,stale-while-revalidate=30",
         "then n=1, origin 2, then n=2", swr_case, path="swr"),
    Case("stale-if-error=60 (max-age=1; 2 s later the origin fails)", "cc=max-age=1,stale-if-error=60",
         "origin 2, 200 n=1", sie_case, path="sie"),
    Case("20 concurrent misses (delay 300 ms)", "cc=max-age=60&delay=300",
         "origin 1 for 20, 20 answers n=1", collapse_case, path="collapse"),
]


def run_all(name, port):
    """Every case on one cache, in turn: what each says, by case."""
    said = {}
    for case in CASES:
        try:
            said[case.name] = case.run_fn(port, case.target(name))
        except Exception as e:  # a peer that fails a case is reported
            said[case.name] = "error: %s" % e
    return said


def main():
    # The caches at once, each in a thread of its own: their targets are
    # apart (the cache's name is in each), and the cases' waits (7.5 s a
    # cache) were paid once per cache, 30 of corCacheTest's 42 s.
    with concurrent.futures.ThreadPoolExecutor(len(CACHES)) as pool:
        runs = {name: pool.submit(run_all, name, port) for name, port in CACHES}
    results = {(name, case): said for name, run in runs.items()
               for case, said in run.result().items()}
    names = [n for n, _ in CACHES]
    print("| case | RFC 9111 | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    failed = 0
    for case in CASES:
        row = [results[(n, case.name)] for n in names]
        print("| %s | %s | %s |" % (case.name, case.expected, " | ".join(row)))
        if "cor" in names and results[("cor", case.name)] != case.expected:
            failed += 1
            print("MISMATCH cor: %s: got %r, expected %r" % (case.name, results[("cor", case.name)],
                                                           case.expected), file=sys.stderr)
    print("cor: %d of %d cases as expected" % (len(CASES) - failed, len(CASES)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
