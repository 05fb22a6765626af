#!/usr/bin/python3
"""Load and hostile-client runs against a running `qkv serve` (scripts/serve_load.sh starts it).

  serve_load.py load PORT SOURCE CLIENTS REQUESTS OUT.json
      CLIENTS threads, each sending REQUESTS translate requests of 1-8 sentences drawn (seeded)
      from SOURCE; prints and writes sentences/s, p50/p99 latency and the errors.
  serve_load.py hostile PORT
      each hostile client of the issue, then a normal request; prints what each got and when.
  serve_load.py flood PORT SECONDS [SRC_WORD TGT_WORD FOIL SMALL]
      one client keeps 3 of the heaviest explanations the server admits queued (SRC_WORD and
      TGT_WORD repeated, 64 steps, FOIL for the contrast: the longest that is not a 413) while
      another sends the small translate SMALL, one after another, for SECONDS; prints the
      small ones' p50/p99 latency and statuses. Defaults fit the toy pair (tests/serve.sh).
"""
import http.client
import json
import random
import socket
import sys
import threading
import time


def post(port, path, body, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def load(port, source, clients, requests, out):
    lines = [l.rstrip("\n") for l in open(source, encoding="utf-8")]
    latencies, errors, sentences = [], [], [0]
    lock = threading.Lock()

    def client(k):
        rng = random.Random(k)
        for _ in range(requests):
            n = rng.randint(1, 8)
            src = [lines[rng.randrange(len(lines))] for _ in range(n)]
            t0 = time.perf_counter()
            try:
                status, data = post(port, "/v1/translate", json.dumps({"src": src}))
                ok = status == 200 and len(json.loads(data)["translations"]) == n
            except Exception as e:  # noqa: BLE001 - every failure is counted
                status, ok = str(e), False
            dt = time.perf_counter() - t0
            with lock:
                latencies.append(dt)
                if ok:
                    sentences[0] += n
                else:
                    errors.append(str(status))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    latencies.sort()
    pct = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))]  # noqa: E731
    res = {"clients": clients, "requests": clients * requests, "sentences": sentences[0], "errors": len(errors),
           "error_kinds": sorted(set(errors))[:5], "seconds": round(wall, 2),
           "sentences_per_s": round(sentences[0] / wall, 1), "p50_ms": round(1000 * pct(0.50), 1),
           "p99_ms": round(1000 * pct(0.99), 1)}
    json.dump(res, open(out, "w"))
    print(json.dumps(res))


def raw(port, payload, pace=None, timeout=30):
    """Sends payload (bytes), at one byte per `pace` seconds if given; returns (what came back, seconds)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    t0 = time.perf_counter()
    try:
        if pace:
            for b in payload:
                s.sendall(bytes([b]))
                time.sleep(pace)
        else:
            s.sendall(payload)
        s.shutdown(socket.SHUT_WR) if not pace else None
        got = s.recv(4096)
    except (BrokenPipeError, ConnectionResetError) as e:
        try:  # the server may have answered before it stopped reading
            got = s.recv(4096) or f"closed ({type(e).__name__})".encode()
        except OSError:
            got = f"closed ({type(e).__name__})".encode()
    except socket.timeout:
        got = b"no answer within the client's timeout"
    s.close()
    first = got.split(b"\r\n", 1)[0] if got else b"closed (EOF)"
    return first.decode(errors="replace"), time.perf_counter() - t0


def hostile(port):
    req = lambda body, extra=b"": (b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n" % (len(body), extra)) + body  # noqa: E731
    cases = [
        ("truncated body (says 100 bytes, sends 10, closes its side)",
         lambda: raw(port, b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"src\": [\"")),
        ("one byte a second", lambda: raw(port, req(b'{"src": ["ein Hund"]}'), pace=1.0, timeout=60)),
        ("a 10 MB body", lambda: raw(port, req(b"a" * 10_000_000))),
        ("invalid UTF-8", lambda: raw(port, req(b'{"src": ["caf\xe9"]}'))),
        ("JSON nested 100,000 deep", lambda: raw(port, req(b'{"src": ' + b"[" * 100000 + b"]" * 100000 + b"}"))),
        ("10,000 sentences", lambda: raw(port, req(json.dumps({"src": ["ein Hund"] * 10000}).encode()))),
    ]
    for name, run in cases:
        first, dt = run()
        print(f"{name:58s} -> {first} after {dt:.1f} s")
    idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(200)]
    t0 = time.perf_counter()
    status, data = post(port, "/v1/translate", json.dumps({"src": ["Ein Mann fährt Fahrrad."]}))
    print(f"{'a normal request beside 200 idle connections':58s} -> {status} {data[:80].decode()} after {time.perf_counter() - t0:.2f} s")
    closed = 0
    for s in idle:
        try:
            closed += s.recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            closed += 1
    print(f"{'200 idle connections closed by the server':58s} -> {closed} of 200 after {time.perf_counter() - t0:.1f} s")
    for s in idle:
        s.close()
    status, data = post(port, "/v1/translate", json.dumps({"src": ["Zwei Hunde spielen im Schnee."]}))
    print(f"{'a normal request afterwards':58s} -> {status} {data[:100].decode()}")


def flood(port, seconds, word="the", tgt_word="un", foil="una", small="a red bird", depth=3):
    heavy = lambda n: json.dumps({"src": " ".join([word] * n), "tgt": " ".join([tgt_word] * n),  # noqa: E731
                                  "ig_steps": 64, "contrast": foil})
    n = 200  # the heaviest admitted: the longest the server does not refuse (a 413 comes at once)
    while n > 1:
        t0 = time.perf_counter()
        status, data = post(port, "/v1/explain", heavy(n), timeout=600)
        if status != 413:
            break
        n -= 2
    print(f"heaviest admitted explanation: {n} + {n} tokens, 64 steps, a contrast: {status} in {time.perf_counter() - t0:.2f} s alone")
    body, end, lock = heavy(n), time.perf_counter() + seconds, threading.Lock()
    heavies, smalls = [], []

    def flooder():
        while time.perf_counter() < end:
            t = time.perf_counter()
            try:
                status, _ = post(port, "/v1/explain", body, timeout=600)
            except OSError as e:
                status = type(e).__name__
            with lock:
                heavies.append((status, time.perf_counter() - t))

    for _ in range(depth):
        threading.Thread(target=flooder, daemon=True).start()
    time.sleep(0.5)  # the flood queued first
    while time.perf_counter() < end:
        t = time.perf_counter()
        try:
            status, _ = post(port, "/v1/translate", json.dumps({"src": [small]}), timeout=120)
        except OSError as e:
            status = type(e).__name__
        smalls.append((status, time.perf_counter() - t))
        time.sleep(0.2)
    lat = sorted(dt for _, dt in smalls)
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
    codes = {}
    for status, _ in smalls:
        codes[str(status)] = codes.get(str(status), 0) + 1
    with lock:
        done = [str(st) for st, _ in heavies]
    print(json.dumps({"seconds": seconds, "small_requests": len(smalls), "small_statuses": codes,
                      "small_p50_ms": round(1000 * pct(0.50), 1), "small_p99_ms": round(1000 * pct(0.99), 1),
                      "small_max_ms": round(1000 * lat[-1], 1), "heavy_answered": len(done),
                      "heavy_statuses": {c: done.count(c) for c in sorted(set(done))}}))


if __name__ == "__main__":
    if sys.argv[1] == "flood":
        flood(int(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:8])
    elif sys.argv[1] == "load":
        load(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        hostile(int(sys.argv[2]))
