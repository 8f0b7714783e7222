"""The benchmark of one round: start the candidate's server (server.py, with settings.json),
drive it from CLIENTS concurrent clients for --seconds, check every answer against the exact
model, and write results/metrics.json: throughput, p50/p99 latency, the largest error.

Exit 0 when every answer is within TOLERANCE of the exact model's; exit 3 (the metrics are
written all the same) when the settings made the answers wrong: a faster server that answers
wrongly is rejected, whatever its throughput. Standard library only.

    python3 -B bench.py [--seconds 2] [--clients 4]

(-B: no byte code written into the copy, whose files the metrics list.)
"""

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time

import model

#: The largest difference of any logit from the exact model's that an answer may have.
TOLERANCE = 0.05
#: Input vectors per request.
BATCH = 4
#: Distinct requests each client cycles through.
POOL = 16


def start_server():
    """server.py on a free port: the process and its port, once it answers /health."""
    server = subprocess.Popen(
        [sys.executable, "-B", "server.py", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    line = server.stdout.readline()
    if not line.startswith("listening "):
        server.kill()
        raise SystemExit(f"the server did not start (exit {server.wait()})")
    port = int(line.split()[1])
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return server, port
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise SystemExit("the server did not answer /health within 30 s") from None
            time.sleep(0.05)


def requests(seed, exact):
    """POOL request bodies and the exact model's outputs for each (computed before the clock
    starts, so that checking an answer costs the client next to nothing)."""
    rng = random.Random(seed)
    pool = []
    for _ in range(POOL):
        inputs = [[rng.uniform(-1.0, 1.0) for _ in range(model.INPUTS)] for _ in range(BATCH)]
        pool.append((json.dumps({"inputs": inputs}), [model.forward(exact, x) for x in inputs]))
    return pool


def client(port, pool, until, record):
    """Requests one after another until `until`: each one's latency and its largest error."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = 0
    while time.monotonic() < until:
        body, expected = pool[sent % POOL]
        sent += 1
        began = time.perf_counter()
        # A server without keep-alive closes after each answer; http.client reconnects.
        conn.request("POST", "/predict", body, {"Content-Type": "application/json"})
        answer = json.loads(conn.getresponse().read())["outputs"]
        latency = time.perf_counter() - began
        error = max(
            abs(got - want)
            for got_row, want_row in zip(answer, expected, strict=True)
            for got, want in zip(got_row, want_row, strict=True)
        )
        record(latency, error)
    conn.close()


def percentile(ordered, fraction):
    """Nearest rank of a sorted list."""
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def files_evaluated():
    """The working copy's files (what this round evaluated), the benchmark's own output aside."""
    found = []
    for top, dirs, names in os.walk("."):
        dirs[:] = sorted(d for d in dirs if d != "results")
        found += sorted(os.path.relpath(os.path.join(top, n)) for n in names)
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    with open("settings.json") as f:
        settings = json.load(f)
    print(f"settings: {json.dumps(settings, sort_keys=True)}", flush=True)
    files = files_evaluated()  # before the server runs (or writes anything)
    exact = model.generate()
    latencies, errors, lock = [], [], threading.Lock()

    def record(latency, error):
        with lock:
            latencies.append(latency)
            errors.append(error)

    pools = [requests(seed, exact) for seed in range(args.clients)]
    server, port = start_server()
    try:
        began = time.monotonic()
        until = began + args.seconds
        threads = [
            threading.Thread(target=client, args=(port, pool, until, record)) for pool in pools
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - began
    finally:
        server.terminate()
        server.wait()
    ordered = sorted(latencies)
    metrics = {
        "settings": settings,
        "clients": args.clients,
        "requests": len(ordered),
        "batch": BATCH,
        "seconds": round(elapsed, 3),
        "throughput_rps": round(len(ordered) / elapsed, 1),
        "p50_ms": round(percentile(ordered, 0.50) * 1000, 2),
        "p99_ms": round(percentile(ordered, 0.99) * 1000, 2),
        "max_error": max(errors),
        "tolerance": TOLERANCE,
        "files": files,
    }
    os.makedirs("results", exist_ok=True)
    with open("results/metrics.json", "w") as f:
        json.dump(metrics, f, indent=1, sort_keys=True)
    print(
        f"{metrics['requests']} requests in {metrics['seconds']} s: {metrics['throughput_rps']} "
        f"req/s, p50 {metrics['p50_ms']} ms, p99 {metrics['p99_ms']} ms, "
        f"max error {metrics['max_error']:.4f}"
    )
    if metrics["max_error"] > TOLERANCE:
        print(
            f"rejected: answers off by up to {metrics['max_error']:.4f} "
            f"(tolerance {TOLERANCE}) at precision {settings['precision']}",
            file=sys.stderr,
        )
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
